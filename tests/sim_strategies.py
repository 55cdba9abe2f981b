"""Hypothesis strategies for whole simulations: small random clusters and traces.

`traces()` draws a `gfs_opt.traces.base.Trace` in gfs_opt units:

* 1–3 pools, each with 1–3 nodes of 1/2/4/8 GPUs;
* HP and LP jobs asking for whole GPUs (1/2/4/8, never more than the pool's largest node) or a
  fractional share of 0.1–0.5 GPU; gangs of 1–6 workers that the pool could hold when empty;
* durations from 1 s to 10 h (whole seconds, and sometimes fractional ones);
* arrivals clustered in bursts (several jobs at the very same second) within ``span_s``, single
  arrivals at whole or fractional seconds, and HP residents submitted at 0 (already running when
  the recording began); in half the traces long LP jobs take the early bursts and HP the later
  ones, so that HP must preempt;
* LP guarantee classes drawn from ``guarantee_classes`` (pass the same set to `Params`).

Jobs are deliberately dense so that HP arrivals meet busy pools and preempt LP work.
"""

from __future__ import annotations

import pandas as pd
from hypothesis import strategies as st

from gfs_opt.model import MILLI
from gfs_opt.traces.base import JOB_COLUMNS, NODE_COLUMNS, Trace

POOLS = ("A10", "A100", "H800")
NODE_SIZES = (1, 2, 4, 8)
WHOLE_SIZES = (1, 2, 4, 8)
MAX_DURATION_S = 10 * 3600
ORGS = ("org-a", "org-b", "org-c")


def gang_capacity(node_sizes: list[int], g: int) -> int:
    """How many workers of ``g`` milli-GPU an empty pool of these nodes holds."""
    if g < MILLI:
        return sum(n * (MILLI // g) for n in node_sizes)
    k = g // MILLI
    return sum(n // k for n in node_sizes)


@st.composite
def _durations(draw: st.DrawFn, long_only: bool = False) -> float:
    kinds = ["medium", "long"] if long_only else ["short", "medium", "long", "fractional"]
    kind = draw(st.sampled_from(kinds))
    if kind == "short":
        return float(draw(st.integers(1, 600)))
    if kind == "medium":
        return float(draw(st.integers(600, 3 * 3600)))
    if kind == "long":
        return float(draw(st.integers(3 * 3600, MAX_DURATION_S)))
    return draw(st.floats(1.0, MAX_DURATION_S, allow_nan=False, allow_infinity=False))


@st.composite
def traces(draw: st.DrawFn, max_jobs: int = 24, span_s: int = 12 * 3600,
           guarantee_classes: tuple[float, ...] = (1.0,)) -> Trace:
    """A random small `Trace` (see the module docstring)."""
    n_pools = draw(st.integers(1, len(POOLS)))
    pools = list(POOLS[:n_pools])
    node_rows = []
    sizes: dict[str, list[int]] = {}
    for p in pools:
        sizes[p] = draw(st.lists(st.sampled_from(NODE_SIZES), min_size=1, max_size=3))
        for i, g in enumerate(sizes[p]):
            node_rows.append((f"{p}-n{i}", p, g, 64.0))
    nodes = pd.DataFrame(node_rows, columns=NODE_COLUMNS)

    bursts = sorted(draw(st.lists(st.integers(1, span_s), min_size=1, max_size=4)))
    # "LP first": spot work fills the pools in the early bursts, HP arrives later and must
    # preempt it; otherwise both classes share every burst
    lp_first = draw(st.booleans())
    half = max(1, len(bursts) // 2)
    lp_bursts = bursts[:half] if lp_first else bursts
    hp_bursts = bursts[half - 1:] if lp_first else bursts
    n_jobs = draw(st.integers(1, max_jobs))
    rows = []
    for jid in range(n_jobs):
        pool = draw(st.sampled_from(pools))
        cls = draw(st.sampled_from(["HP", "LP"]))
        largest = max(sizes[pool])
        if draw(st.booleans()):
            g = draw(st.sampled_from([k for k in WHOLE_SIZES if k <= largest])) * MILLI
        else:
            g = draw(st.integers(100, 500))
        workers = draw(st.integers(1, min(6, gang_capacity(sizes[pool], g))))
        when = draw(st.sampled_from(["burst", "burst", "random", "resident"]))
        if when == "resident" and cls == "HP":
            submit, resident = 0.0, True
        elif when == "random":
            submit = draw(st.one_of(st.integers(1, span_s).map(float),
                                    st.floats(1.0, span_s, allow_nan=False)))
            resident = False
        else:
            submit = float(draw(st.sampled_from(hp_bursts if cls == "HP" else lp_bursts)))
            resident = False
        guarantee = draw(st.sampled_from(guarantee_classes)) if cls == "LP" else 1.0
        rows.append((jid, f"job-{jid}", draw(st.sampled_from(ORGS)), pool, cls, g, workers,
                     submit, draw(_durations(long_only=lp_first and cls == "LP")), 0.0,
                     guarantee, resident))
    jobs = pd.DataFrame(rows, columns=JOB_COLUMNS)
    return Trace(nodes, jobs, name="hypothesis")


def trace_summary(trace: Trace) -> str:
    """A readable dump for failure messages (hypothesis prints the repr, which is long)."""
    return (f"nodes:\n{trace.nodes.to_string()}\njobs:\n"
            f"{trace.jobs.drop(columns=['name', 'cpu']).to_string()}")
