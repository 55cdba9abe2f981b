"""Named simulation setups: which trace, where the replay starts, which window is scored."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gfs_opt.errors import GfsError
from gfs_opt.traces.base import Trace

#: LP load levels (multipliers of the trace's LP arrivals; see `Trace.select` for the method)
LOADS: dict[str, float] = {"low": 0.5, "medium": 1.0, "high": 2.0}


@dataclass(frozen=True)
class SimSetup:
    trace: str
    window: tuple[str, str] | None = None      # scored window [start, end), dates or seconds
    replay_from: str | None = None             # start of the replay (warm-up) if not t = 0
    pools: tuple[str, ...] | None = None
    loads: dict[str, float] = field(default_factory=lambda: dict(LOADS))
    about: str = ""


SETUPS: dict[str, SimSetup] = {
    "small": SimSetup("small", about="demo: A100 + GPU-series-1 at 5 % scale, LP in the last 10 days"),
    "paper-a100": SimSetup(
        "paper-a100", window=("2024-08-01", "2024-09-01"), replay_from="2024-07-04",
        about="the paper's 2,296-GPU A100 cluster; four weeks of warm-up, August scored"),
    "full": SimSetup(
        "synthetic", window=("2024-08-01", "2024-09-01"),
        about="full-scale synthetic trace, March–August replayed, August scored"),
    "ref-toy": SimSetup("ref-toy", window=("2024-03-11", "2024-03-13"),
                        about="24-node toy trace in the Alibaba schema, scored 2024-03-11..12"),
}


def lp_window(trace: Trace) -> tuple[float, float]:
    """Default scored window: whole days spanning the trace's LP submissions (or all jobs)."""
    jobs = trace.jobs
    lp = jobs[jobs["cls"] == "LP"]
    src = lp if len(lp) else jobs
    if src.empty:
        raise GfsError("the trace has no jobs")
    lo = math.floor(src["submit"].min() / 86_400) * 86_400
    hi = (math.floor(src["submit"].max() / 86_400) + 1) * 86_400
    return float(lo), float(hi)
