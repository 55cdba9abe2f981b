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
    "small": SimSetup("small", about="tests and quick runs: A100 + GPU-series-1 at 5 % scale, "
                               "LP in the last 10 days (64 LP jobs)"),
    "paper-a100": SimSetup(
        "paper-a100", window=("2024-08-01", "2024-09-01"), replay_from="2024-07-04",
        about="the paper's 2,296-GPU A100 cluster; four weeks of warm-up, August scored"),
    # the README's main job: the paper's cluster and trace cut short, so that three seeds of
    # all eight policies fit in a minute on 2 cores. The last ten days of August are the
    # contended ones for every seed (YARN-CS breaks 4–6 % of LP windows there, 150–190
    # evictions; Aug 1–10 of seed 1 has 2): ≈ 700 LP jobs and ≈ 3,000 guarantee windows per
    # seed, where `small` scores 64 LP jobs and one eviction moves its rate by 0.2 points
    "demo": SimSetup(
        "paper-a100", window=("2024-08-21", "2024-08-31"), replay_from="2024-08-07",
        about="the paper-a100 cluster (2,296 GPUs) cut short: two weeks of warm-up, "
              "2024-08-21..30 scored (≈ 700 LP jobs per seed)"),
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
