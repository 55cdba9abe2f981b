"""≥ 10⁵ scheduling rounds (policy passes) with the engine's invariant checks on, across every
registered policy (GFS-SPEC §4: capacity, HP never evicted, whole gangs, job conservation).

The engine checks after every pass (`SimConfig(check_invariants=True)`); each run is then
re-checked at the end from the job records: every job is future, pending, running or done
exactly once, no HP job was ever evicted, and finished jobs did all their work. Traces: the
built-in "small" setup (≈8,000 passes per policy, a month of quota refreshes) and dense random
clusters where every arrival and release contests GPUs (fractional shares, gangs, two LP
guarantee classes, HP residents).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gfs_opt.experiments.runner import RunSpec, prepare_trace
from gfs_opt.model import MILLI, Params
from gfs_opt.policies import POLICIES, make_policy, options_for
from gfs_opt.sim.engine import SimConfig, Simulator
from gfs_opt.traces.base import JOB_COLUMNS, NODE_COLUMNS, Trace

# the last test counts the rounds of all the others: one xdist worker runs the whole module
# ≈ 6 CPU-minutes in all: behind -m slow, and .ci/run runs this module in a step of its own
pytestmark = [pytest.mark.xdist_group("invariants_long"), pytest.mark.slow]

TARGET_PASSES = 100_000
CLASSES = (1.0, 2.0)
PASSES: dict[str, int] = {}


def options(policy: str) -> dict[str, object]:
    """Fast forecasters wherever a policy forecasts (Prophet would dominate the run time); short
    MILP time limits for the exact policy (its fallbacks are exercised too)."""
    opts: dict[str, object] = options_for(policy, {"forecaster": "seasonal-naive"})
    if policy == "gfs-milp":
        opts["time_limit"] = 0.2
    return opts


def dense_trace(seed: int, n_jobs: int = 300, span_s: float = 24 * 3600) -> Trace:
    """A small, crowded 3-pool cluster: bursts of HP and LP arrivals that must preempt."""
    rng = np.random.default_rng(seed)
    sizes = {"A10": [1, 2, 4], "A100": [8, 8], "H800": [4, 8]}
    nodes = pd.DataFrame([(f"{p}-{i}", p, g, 64.0) for p, gs in sizes.items()
                          for i, g in enumerate(gs)], columns=NODE_COLUMNS)
    bursts = np.sort(rng.uniform(0, span_s, size=12))
    rows = []
    for jid in range(n_jobs):
        pool = str(rng.choice(list(sizes)))
        largest, total = max(sizes[pool]), sum(sizes[pool])
        cls = "HP" if rng.random() < 0.45 else "LP"
        if rng.random() < 0.3:
            g, cap = int(rng.choice([250, 500])), total * 2
        else:
            k = int(rng.choice([k for k in (1, 2, 4, 8) if k <= largest]))
            g, cap = k * MILLI, sum(n // k for n in sizes[pool])
        workers = int(rng.integers(1, min(4, cap) + 1))
        resident = cls == "HP" and rng.random() < 0.05
        submit = 0.0 if resident else float(
            rng.choice(bursts) + (rng.exponential(300) if rng.random() < 0.5 else 0.0))
        duration = float(np.clip(rng.lognormal(7.5, 1.2), 30, 10 * 3600))
        guarantee = float(rng.choice(CLASSES)) if cls == "LP" else 1.0
        rows.append((jid, f"j{jid}", f"org{jid % 3}", pool, cls, g, workers, submit, duration,
                     0.0, guarantee, resident))
    return Trace(nodes, pd.DataFrame(rows, columns=JOB_COLUMNS), name=f"dense-{seed}")


def run_checked(trace: Trace, policy: str, lo: float, hi: float,
                params: Params | None = None) -> int:
    sim = Simulator(trace, make_policy(policy, **options(policy)), params or Params(),
                    SimConfig(eval_start=lo, eval_end=hi, drain_s=86_400.0, check_invariants=True))
    res = sim.run()
    runs = list(sim.runs.values())
    status = pd.Series([r.status for r in runs]).value_counts()
    assert set(status.index) <= {"future", "pending", "running", "done"}
    assert status.sum() == len(sim.jobs)
    assert status.get("done", 0) == sim.finished
    assert status.get("running", 0) == len(sim.running) == len(sim.state.alloc)
    assert status.get("pending", 0) == len(sim.hp_q) + len(sim.lp_q)
    assert status.get("future", 0) == len(sim.arrivals) - sim.next_arrival
    for r in runs:
        if r.job.is_hp:
            assert r.evictions == 0 and r.windows_failed == 0, f"HP job {r.job.id} evicted"
        if r.status == "done":
            # finished jobs did all their work (LP: checkpointed progress + the last run)
            assert r.end - r.job.submit >= r.job.duration - 1e-6
    sim.check_invariants(res.recorder.end_time)
    return res.passes


@pytest.fixture(scope="module")
def small() -> tuple[Trace, float, float]:
    return prepare_trace(RunSpec(trace="small"))


FAST = [p for p in POLICIES if p != "gfs-milp"]


@pytest.mark.parametrize("policy", FAST)
def test_small_setup_keeps_invariants(small: tuple[Trace, float, float], policy: str) -> None:
    trace, lo, hi = small
    PASSES[f"small/{policy}"] = run_checked(trace, policy, lo, hi)


# the exact policy solves a MILP in most contested rounds: fewer traces keep the file quick
DENSE = [(p, seed) for p in POLICIES for seed in range(2 if p == "gfs-milp" else 4)]


@pytest.mark.parametrize(("policy", "seed"), DENSE)
def test_dense_random_clusters_keep_invariants(policy: str, seed: int) -> None:
    trace = dense_trace(seed, n_jobs=500, span_s=36 * 3600)
    PASSES[f"dense{seed}/{policy}"] = run_checked(
        trace, policy, 0.0, 36 * 3600.0, Params(guarantee_classes=CLASSES))


def test_enough_rounds_ran_across_all_policies() -> None:
    if len(PASSES) < len(FAST) + len(DENSE):
        pytest.skip("run the whole module to count rounds")
    total = sum(PASSES.values())
    print(f"{total:,} scheduling rounds with invariant checks over {len(PASSES)} runs")
    assert total >= TARGET_PASSES, PASSES
    ran = {key.split("/", 1)[1] for key in PASSES}
    assert ran == set(POLICIES)


def test_job_conservation_check_catches_a_lost_job() -> None:
    from gfs_opt.sim.engine import InvalidDecision

    trace = dense_trace(5, n_jobs=60)
    sim = Simulator(trace, make_policy("yarn-cs"), Params(guarantee_classes=CLASSES),
                    SimConfig(eval_start=0.0, eval_end=86_400.0, check_invariants=True,
                              max_events=400))
    sim.run()
    sim.check_invariants(0.0)
    assert sim.next_arrival > 0
    sim.finished += 1                      # a job counted as done twice
    with pytest.raises(InvalidDecision, match="jobs arrived but"):
        sim.check_invariants(0.0)
    sim.finished -= 1
    sim.running.pop(next(iter(sim.running)))   # a running job lost
    with pytest.raises(InvalidDecision, match="jobs arrived but"):
        sim.check_invariants(0.0)
