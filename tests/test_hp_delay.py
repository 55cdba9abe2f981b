"""HP delay by cause (`gfs_opt.sim.hp_delay`): a gang's wait split into the time its pool had room
for it by evicting LP work (the policy's choice) and the time it had none (capacity)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gfs_opt.model import MILLI, ClusterState, Job, JobClass, Params
from gfs_opt.policies import make_policy
from gfs_opt.sim.engine import SimConfig, Simulator
from gfs_opt.sim.hp_delay import HPDelay, delay_summary
from gfs_opt.traces.base import JOB_COLUMNS, NODE_COLUMNS, Trace

HP, LP = JobClass.HP, JobClass.LP


def test_wait_splits_into_choice_and_capacity() -> None:
    """One 8-GPU node: HP holds 4 GPUs until t = 100, LP the other 4. A 8-GPU HP gang queued
    at 0 has no room even by eviction until the HP job ends (capacity), then room by evicting
    the LP job (choice) until it starts at 250."""
    st = ClusterState.from_nodes([("A100", 8, "n0")])
    hp_old = Job(1, "o", "A100", HP, 4 * MILLI, 1, 0.0, 100.0)
    lp = Job(2, "o", "A100", LP, 4 * MILLI, 1, 0.0, 1e6)
    st.allocate(hp_old, ((0, (0, 1, 2, 3)),))
    st.allocate(lp, ((0, (4, 5, 6, 7)),))
    gang = Job(3, "o", "A100", HP, 8 * MILLI, 1, 0.0, 10.0)
    d = HPDelay(st)
    d.enqueue(gang, 0.0)
    d.refresh(0.0, [0])
    st.release(hp_old)
    d.refresh(100.0, [0])
    st.release(lp)
    st.allocate(gang, ((0, tuple(range(8))),))
    d.start(gang, 250.0)
    assert d.delays[3] == (150.0, 100.0)


def test_a_gang_that_never_starts_counts_up_to_the_end() -> None:
    st = ClusterState.from_nodes([("A100", 8, "n0")])
    lp = Job(2, "o", "A100", LP, 8 * MILLI, 1, 0.0, 1e6)
    st.allocate(lp, ((0, tuple(range(8))),))
    gang = Job(3, "o", "A100", HP, 8 * MILLI, 2, 10.0, 10.0)   # two nodes: never room
    d = HPDelay(st)
    d.enqueue(gang, 10.0)
    d.refresh(10.0, [0])
    d.finish(110.0)
    assert d.delays[3] == (0.0, 100.0)


def test_summary_keys() -> None:
    s = delay_summary([0.0, 0.0, 30.0], [5.0, 0.0, 0.0])
    assert s["hp_delay_choice_mean"] == 10.0 and s["hp_delay_capacity_mean"] == 5.0 / 3
    assert s["hp_share_delayed_by_choice"] == pytest.approx(1 / 3)
    assert math.isnan(delay_summary([], [])["hp_delay_choice_p99"])


def test_preemptive_baseline_has_no_choice_delay_and_summary_carries_it() -> None:
    """A whole-node HP job arrives to a node held by LP: YARN-CS evicts at once (no delay);
    GFS without patience too; the summary and the jobs table carry the split."""
    nodes = pd.DataFrame([("n0", "A100", 8, 64.0)], columns=NODE_COLUMNS)
    rows = [(1, "lp", "org", "A100", "LP", 8 * MILLI, 1, 0.0, 20_000.0, 0.0, 1.0, False),
            (2, "hp", "org", "A100", "HP", 8 * MILLI, 1, 2_000.0, 1_000.0, 0.0, 1.0, False)]
    trace = Trace(nodes, pd.DataFrame(rows, columns=JOB_COLUMNS))
    cfg = SimConfig(eval_start=0.0, eval_end=2_001.0, sample_s=300.0, drain_s=86_400.0)
    for name in ("yarn-cs", "gfs-paper"):
        sim = Simulator(trace, make_policy(name, quota="none") if name != "yarn-cs"
                        else make_policy(name), Params(), cfg)
        res = sim.run()
        s = res.summary()
        assert s["hp_delay_choice_mean"] == 0.0 and s["hp_share_delayed_by_choice"] == 0.0
        assert res.recorder.jobs is not None
        assert res.recorder.jobs.set_index("job_id").loc[2, "delay_choice_s"] == 0.0
