"""Evictions by cause (issue 37): count (the pool was short of free GPUs), fragmentation (the pool
had room, no set of nodes could host the HP gang on it), other (no HP placement needed the victim).

Rounds built by hand where the answer is known, the cause read back from the state the policy
planned on and from the state before it (the two must agree), whole simulations whose summary
adds up, and random runs where each logged cause is consistent with what it recorded.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst
from sim_strategies import traces
from strategies import rounds

from gfs_opt.experiments.compare import format_table, table
from gfs_opt.experiments.reproduce.headline import run_table
from gfs_opt.experiments.reproduce.plan import load_run
from gfs_opt.experiments.reproduce.report import _causes
from gfs_opt.experiments.runner import RunSpec, run
from gfs_opt.model import MILLI, ClusterState, Decision, Job, JobClass, Params, Round, RunningJob
from gfs_opt.policies import make_policy
from gfs_opt.preempt.fit_memo import slots
from gfs_opt.sim.causes import KINDS, EvictionCause, classify, eviction_causes, slots_on
from gfs_opt.sim.engine import SimConfig, Simulator
from gfs_opt.sim.metrics import summarize
from gfs_opt.sim.recorder import EVICTION_COLUMNS, JOB_COLUMNS
from gfs_opt.traces.base import JOB_COLUMNS as TRACE_JOB_COLUMNS
from gfs_opt.traces.base import NODE_COLUMNS, Trace

HP, LP = JobClass.HP, JobClass.LP


# ---- hand-built rounds ------------------------------------------------------------------------
class Cluster:
    """One pool "A100" of nodes of the given sizes, with running jobs and waiting HP jobs."""

    def __init__(self, *sizes: int) -> None:
        self.state = ClusterState.from_nodes(("A100", g, f"n{i}") for i, g in enumerate(sizes))
        self.jobs: dict[int, Job] = {}
        self.running: dict[int, RunningJob] = {}
        self.pending: list[int] = []

    def run(self, jid: int, cls: JobClass, g: int, placement: tuple) -> Cluster:
        j = Job(jid, "org", "A100", cls, g, len(placement), 0.0, 50_000.0)
        self.jobs[jid] = j
        self.state.allocate(j, placement)
        self.running[jid] = RunningJob(j, 0.0, 0.0, 0.0, placement)
        return self

    def wait(self, jid: int, g: int, workers: int = 1, submit: float = 100.0) -> Cluster:
        self.jobs[jid] = Job(jid, "org", "A100", HP, g, workers, submit, 1000.0)
        self.pending.append(jid)
        return self

    def round(self) -> Round:
        return Round(time=5000.0, state=self.state, jobs=self.jobs, running=self.running,
                     pending_hp=list(self.pending), pending_lp=[], params=Params())


def causes_of(c: Cluster, policy: str = "yarn-cs") -> tuple[Decision, list[EvictionCause]]:
    """The policy's decision and its causes, read as the engine reads them: from the state the
    policy planned on (``planned``), and from the state before it; both must agree."""
    rnd = c.round()
    pol = make_policy(policy)
    pol.reset(rnd.state, rnd.params)
    rnd.state.begin()
    try:
        d = pol.decide(rnd)
        planned = eviction_causes(rnd.state, c.jobs, c.running, d, planned=True)
    finally:
        rnd.state.rollback()
        rnd.state.commit()
    before = eviction_causes(rnd.state, c.jobs, c.running, d, planned=False)
    assert planned == before
    return d, before


def test_classify() -> None:
    assert classify(7_000, 8_000, fits=False) == "count"
    assert classify(7_000, 8_000, fits=True) == "count"     # cannot happen, but count wins
    assert classify(8_000, 8_000, fits=False) == "fragmentation"
    assert classify(8_000, 8_000, fits=True) == "other"


@pytest.mark.parametrize("policy", ["yarn-cs", "lyra", "fgd", "gfs-milp"])
def test_pool_with_room_but_no_node_is_fragmentation(policy: str) -> None:
    # 2 nodes × 8 GPUs, a 4-GPU LP job on each: 8 GPUs free, no node has 8
    c = (Cluster(8, 8).run(1, LP, 4 * MILLI, ((0, (0, 1, 2, 3)),))
         .run(2, LP, 4 * MILLI, ((1, (0, 1, 2, 3)),)).wait(10, 8 * MILLI))
    d, causes = causes_of(c, policy)
    assert list(d.placements) == [10] and len(d.victims) == 1
    (cause,) = causes
    assert cause == EvictionCause("fragmentation", 10, "A100", 8.0, 8.0, whole_node=True)


def test_full_pool_is_count() -> None:
    c = (Cluster(8, 8).run(1, LP, 8 * MILLI, ((0, tuple(range(8))),))
         .run(2, LP, 4 * MILLI, ((1, (0, 1, 2, 3)),)).wait(10, 8 * MILLI))
    d, causes = causes_of(c)
    assert d.placements and len(causes) == 1
    assert causes[0] == EvictionCause("count", 10, "A100", 4.0, 8.0, whole_node=True)


@pytest.mark.parametrize("policy", ["yarn-cs", "gfs-milp"])
def test_a_gang_is_judged_after_the_placements_before_it_in_the_decision(policy: str) -> None:
    # node 1 is free: the first HP job takes it without eviction, the second must evict on
    # node 0, and by then the pool has no free GPU (count) although it had 8 at the round start
    c = (Cluster(8, 8).run(1, LP, 8 * MILLI, ((0, tuple(range(8))),))
         .wait(10, 8 * MILLI, submit=100.0).wait(11, 8 * MILLI, submit=200.0))
    d, causes = causes_of(c, policy)
    assert len(d.placements) == 2 and d.victims == [1]
    (cause,) = causes
    second = list(d.placements)[1]
    assert cause == EvictionCause("count", second, "A100", 0.0, 8.0, whole_node=True)


def test_multi_worker_gang_and_smaller_workers() -> None:
    # 3 nodes × 8, LP on 6 GPUs of node 0 and 6 of node 1, node 2 holds a 4-GPU LP job:
    # 2 + 2 + 4 = 8 GPUs free, a gang of two 4-GPU workers fits no node set (needs 4 + 4)
    c = (Cluster(8, 8, 8).run(1, LP, 6 * MILLI, ((0, tuple(range(6))),))
         .run(2, LP, 6 * MILLI, ((1, tuple(range(6))),))
         .run(3, LP, 4 * MILLI, ((2, (0, 1, 2, 3)),)).wait(10, 4 * MILLI, workers=2))
    d, causes = causes_of(c)
    assert 10 in d.placements and d.victims
    for cause in causes:
        assert cause.kind == "fragmentation" and cause.hp_job == 10
        assert cause.pool_free_gpus == 8.0 and cause.hp_demand_gpus == 8.0
        assert not cause.whole_node           # 4-GPU workers in a pool of 8-GPU nodes


def test_fractional_room_spread_over_gpus_is_fragmentation() -> None:
    # 1 node × 2 GPUs, 0.6 GPU of LP on each: 0.8 GPU free in all, 0.4 on each GPU
    c = (Cluster(2).run(1, LP, 600, ((0, (0,)),)).run(2, LP, 600, ((0, (1,)),))
         .wait(10, 500))
    d, causes = causes_of(c)
    assert 10 in d.placements and len(causes) == 1
    assert causes[0].kind == "fragmentation"
    assert math.isclose(causes[0].pool_free_gpus, 0.8) and causes[0].hp_demand_gpus == 0.5


def test_victim_no_hp_placement_needed_is_other() -> None:
    c = Cluster(8, 8).run(1, LP, 4 * MILLI, ((0, (0, 1, 2, 3)),)).run(
        2, LP, 4 * MILLI, ((1, (0, 1, 2, 3)),))
    hp = Job(10, "org", "A100", HP, 4 * MILLI, 1, 0.0, 100.0)
    c.jobs[10] = hp
    # job 1 evicted, but the HP job goes to the free half of node 1
    d = Decision(placements={10: ((1, (4, 5, 6, 7)),)}, victims=[1])
    (cause,) = eviction_causes(c.state, c.jobs, c.running, d, planned=False)
    assert cause.kind == "other" and cause.hp_job is None and cause.pool == "A100"
    assert cause.pool_free_gpus == 8.0 and math.isnan(cause.hp_demand_gpus)


def test_requeues_are_not_causes() -> None:
    c = Cluster(4).run(1, LP, 4 * MILLI, ((0, (0, 1, 2, 3)),))
    c.jobs[10] = Job(10, "org", "A100", HP, 4 * MILLI, 1, 0.0, 100.0)
    d = Decision(placements={10: ((0, (0, 1, 2, 3)),)}, requeue=[1])
    assert eviction_causes(c.state, c.jobs, c.running, d, planned=False) == []


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rounds())
def test_slots_on_agrees_with_the_state(rnd: Round) -> None:
    """`slots_on` counts on an array what the state's own counts say (the same rule)."""
    st = rnd.state
    for p, pool in enumerate(st.pools):
        lo, hi = st.pool_slice(pool)
        a, b = int(st.node_first_gpu[lo]), int(st.node_first_gpu[hi])
        starts = st.node_first_gpu[lo:hi] - a
        used = st.gpu_used[a:b].astype(np.int64)
        for g in (100, 300, 500, 1000, 2000, 4000, 8000):
            assert slots_on(used, starts, g) == slots(st, p, g, preemptive=False)


# ---- whole simulations -------------------------------------------------------------------------
def trace_of(nodes: list[tuple[str, int]], jobs: list[tuple]) -> Trace:
    """Jobs as (id, cls, gpus per worker, workers, submit, duration), all in pool "A100"."""
    node_df = pd.DataFrame([(f"n{i}", "A100", g, 64.0) for i, (_p, g) in enumerate(nodes)],
                           columns=NODE_COLUMNS)
    rows = [(jid, f"j{jid}", "org", "A100", cls, int(g * MILLI), w, float(s), float(dur), 0.0,
             1.0, False) for jid, cls, g, w, s, dur in jobs]
    return Trace(node_df, pd.DataFrame(rows, columns=TRACE_JOB_COLUMNS))


def fragmentation_trace() -> Trace:
    """LP fills both nodes, two jobs end (one on each node), an HP job needing a whole node
    arrives (fragmentation); the evicted job restarts beside the other LP job, and a second HP
    job finds the pool full (count, twice)."""
    return trace_of([("A100", 8), ("A100", 8)], [
        (1, "LP", 4, 1, 0, 36_000), (2, "LP", 4, 1, 0, 1_000), (3, "LP", 4, 1, 0, 1_000),
        (4, "LP", 4, 1, 0, 36_000), (10, "HP", 8, 1, 2_000, 30_000),
        (11, "HP", 8, 1, 3_000, 30_000)])


def simulate(trace: Trace, policy: str, planned: bool = True) -> Simulator:
    last = float(trace.jobs["submit"].max())
    cfg = SimConfig(eval_start=0.0, eval_end=last + 1.0, sample_s=300.0, check_invariants=True,
                    drain_s=2 * 86_400.0)
    sim = Simulator(trace, make_policy(policy), Params(), cfg)
    if not planned:    # every decision rolled back and applied from scratch
        sim._is_plan = lambda d: False  # type: ignore[method-assign]
    sim.run()
    return sim


def test_simulation_records_fragmentation_then_count() -> None:
    sim = simulate(fragmentation_trace(), "yarn-cs")
    ev = sim.recorder.eviction_table()
    assert list(ev.columns) == list(EVICTION_COLUMNS)
    assert list(ev["kind"]) == ["fragmentation", "count", "count"]
    assert list(ev["hp_job"]) == [10, 11, 11]
    assert list(ev["pool_free_gpus"]) == [8.0, 0.0, 0.0]
    assert ev["whole_node"].all() and ev["in_eval"].all()
    s = sim.recorder.jobs
    assert s is not None and list(s.columns) == list(JOB_COLUMNS)
    frag = s.set_index("job_id")["evictions_fragmentation"]
    assert frag.sum() == 1 and frag[int(ev["job_id"].iloc[0])] == 1
    summary = summarize(sim.recorder)
    assert (summary["lp_evictions"], summary["lp_evictions_count"],
            summary["lp_evictions_fragmentation"], summary["lp_evictions_other"]) == (3, 2, 1, 0)
    assert summary["lp_fragmentation_share"] == pytest.approx(1 / 3)


def test_run_without_evictions_has_a_zero_share() -> None:
    trace = trace_of([("A100", 8)], [(1, "LP", 4, 1, 0, 100), (2, "HP", 4, 1, 10, 100)])
    sim = simulate(trace, "yarn-cs")
    summary = summarize(sim.recorder)
    assert summary["lp_evictions"] == 0 and summary["lp_fragmentation_share"] == 0.0
    ev = sim.recorder.eviction_table()
    assert ev.empty and list(ev.columns) == list(EVICTION_COLUMNS)


POLICIES = ("yarn-cs", "lyra", "fgd", "gfs", "fgd+sqa")


@settings(max_examples=20, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(traces(max_jobs=16), hst.sampled_from(POLICIES))
def test_causes_are_consistent_on_random_runs(trace: Trace, policy: str) -> None:
    """Each logged cause agrees with what it recorded (count ⇔ free < demand; fragmentation ⇒
    the pool had room), the summary adds up to the jobs table, and the causes do not depend on
    whether the engine kept the policy's plan or applied the decision from scratch."""
    sim = simulate(trace, policy)
    ev = sim.recorder.eviction_table()
    linked = ev[ev["hp_job"].notna()]
    assert ((linked["kind"] == "count")
            == (linked["pool_free_gpus"] < linked["hp_demand_gpus"])).all()
    assert (linked["kind"].isin(KINDS)).all()
    unlinked = ev[ev["hp_job"].isna()]
    assert (unlinked["kind"] == "other").all() and unlinked["hp_demand_gpus"].isna().all()
    assert not unlinked["whole_node"].any()
    # a greedy pass evicts only the jobs on the GPUs an HP worker then takes, and only when the
    # gang fits no free GPUs: every eviction is tied to its HP job, and none is "other"
    assert (ev["kind"] != "other").all()
    jobs = sim.recorder.jobs
    assert jobs is not None
    lp = jobs[jobs["cls"] == "LP"]
    s = summarize(sim.recorder)
    assert s["lp_evictions"] == int(lp["evictions"].sum()) == (
        s["lp_evictions_count"] + s["lp_evictions_fragmentation"] + s["lp_evictions_other"])
    assert int(lp["evictions_fragmentation"].sum()) == s["lp_evictions_fragmentation"]
    assert 0.0 <= s["lp_fragmentation_share"] <= 1.0
    per_job = ev["job_id"].value_counts()
    for row in jobs.itertuples(index=False):
        assert per_job.get(row.job_id, 0) == row.evictions
    again = simulate(trace, policy, planned=False).recorder.eviction_table()
    pd.testing.assert_frame_equal(ev, again)


# ---- where the split is shown ------------------------------------------------------------------
def test_run_output_writes_and_reloads_the_eviction_table(tmp_path: Path) -> None:
    trace = fragmentation_trace()
    out = run(RunSpec(policy="yarn-cs", drain_days=1.0), trace=(trace, 0.0, 3_001.0))
    assert out.evictions is not None and list(out.evictions["kind"]) == [
        "fragmentation", "count", "count"]
    assert out.summary["lp_evictions_fragmentation"] == 1
    out.write(tmp_path)
    assert (tmp_path / "evictions.csv").exists()
    back = load_run(tmp_path)
    assert back is not None and back.evictions is not None
    assert list(back.evictions.columns) == list(EVICTION_COLUMNS)
    assert list(back.evictions["kind"]) == list(out.evictions["kind"])
    assert list(back.evictions["nodes"].astype(str)) == list(out.evictions["nodes"])


def test_compare_table_and_csv_carry_the_split() -> None:
    trace = fragmentation_trace()
    outs = {p: run(RunSpec(policy=p, drain_days=1.0), trace=(trace, 0.0, 3_001.0))
            for p in ("yarn-cs", "chronus")}
    df = table({"medium": outs}, reference="yarn-cs")
    assert {"lp_evictions", "lp_evictions_fragmentation", "lp_fragmentation_share"} <= set(df)
    row = df.set_index("policy").loc["yarn-cs"]
    assert (row["lp_evictions"], row["lp_evictions_fragmentation"]) == (3, 1)
    text = format_table(df, reference="yarn-cs")
    assert "yarn-cs            3 evictions,      1 fragmentation (33 %)" in text
    assert "chronus            0 evictions,      0 fragmentation (0 %)" in text


def test_reproduction_grid_shows_the_split() -> None:
    s = {"lp_evictions": 3, "lp_evictions_count": 2, "lp_evictions_fragmentation": 1,
         "lp_evictions_other": 0, "lp_fragmentation_share": 1 / 3}
    grid = run_table({"medium": {"gfs": s, "old": {}}}).set_index("policy")
    assert grid.loc["gfs", "lp_evictions_fragmentation"] == 1
    assert _causes(grid.loc["gfs"]) == "2 / 1 (33 %)"
    assert _causes(grid.loc["old"]) == "–"      # a summary from before causes were recorded
