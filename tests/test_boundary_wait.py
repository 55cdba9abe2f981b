"""Whole-node HP gangs that wait for an LP window boundary instead of breaking a window
(`gfs_opt.preempt.boundary`, GFS's default since issue 40; `gfs-no-wait` is the paper's PTS).

Hand-built rounds where the answer is known (take the LP job at its boundary as a re-queue; wait
while it is mid-window and hold the whole node it needs from the LP pass; evict once the wait is
over), the same rounds through `gfs-opt solve` (greedy and exact answer the same question), and
whole simulations where the HP gang starts at the LP job's checkpoint with no window broken,
under the greedy and the exact policy alike.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gfs_opt.instance.solve_round import solve_round
from gfs_opt.model import MILLI, ClusterState, Decision, Job, JobClass, Params, Round, RunningJob
from gfs_opt.policies import POLICIES, make_policy
from gfs_opt.policies.base import ComposedPolicy
from gfs_opt.policies.departures import NOTICE_H
from gfs_opt.policies.gfs import GFSPolicy
from gfs_opt.policies.gfs_milp import GFSMilpPolicy
from gfs_opt.preempt.boundary import at_boundary, held_reserves, patient_gangs
from gfs_opt.preempt.objective import check_decision
from gfs_opt.sim.engine import SimConfig, Simulator
from gfs_opt.traces.base import JOB_COLUMNS, NODE_COLUMNS, Trace

HP, LP = JobClass.HP, JobClass.LP
T = 10_000.0
FIVE_MIN_H = 5 / 60   # a notice long enough to reach a boundary a few minutes away


def cluster(lp_window_start: float, hp_submit: float = T - 100.0, workers: int = 1,
            lp_waiting: bool = False) -> Round:
    """Three 8-GPU nodes: n0 half used by HP (its free GPUs are the pool's room), n1 held by one
    8-GPU LP job whose window began at ``lp_window_start``, n2 free; a waiting HP gang of
    ``workers`` whole-node workers (and, with ``lp_waiting``, an 8-GPU LP job waiting)."""
    st = ClusterState.from_nodes(("A100", 8, f"n{i}") for i in range(3))
    jobs: dict[int, Job] = {}
    running: dict[int, RunningJob] = {}
    for jid, cls, g, node in ((1, HP, 4, 0), (2, LP, 8, 1)):
        j = Job(jid, "org", "A100", cls, g * MILLI, 1, 0.0, 50_000.0)
        pl = ((node, tuple(range(g))),)
        st.allocate(j, pl)
        jobs[jid] = j
        running[jid] = RunningJob(j, 0.0, lp_window_start, lp_window_start, pl)
    # the free whole node is taken by an HP job of 8 GPUs that fits there
    hp_fill = Job(3, "org", "A100", HP, 8 * MILLI, 1, 0.0, 50_000.0)
    st.allocate(hp_fill, ((2, tuple(range(8))),))
    jobs[3] = hp_fill
    running[3] = RunningJob(hp_fill, 0.0, 0.0, 0.0, ((2, tuple(range(8))),))
    jobs[10] = Job(10, "org", "A100", HP, 8 * MILLI, workers, hp_submit, 1_000.0)
    pending_lp = []
    if lp_waiting:
        jobs[20] = Job(20, "org", "A100", LP, 8 * MILLI, 1, 0.0, 1_000.0)
        pending_lp = [20]
    return Round(time=T, state=st, jobs=jobs, running=running, pending_hp=[10],
                 pending_lp=pending_lp, queued_since={10: hp_submit}, params=Params())


def decide(rnd: Round, wait_h: float, exact: bool = False,
           notice_h: float = NOTICE_H) -> tuple[Decision, GFSPolicy]:
    pol = (GFSMilpPolicy if exact else GFSPolicy)(quota="none", hp_wait_h=wait_h,
                                                  hp_notice_h=notice_h)
    pol.reset(rnd.state, rnd.params)
    rnd.state.begin()
    try:
        d = pol.decide(rnd)
    finally:
        rnd.state.rollback()
        rnd.state.commit()
    return d, pol


def test_gang_takes_the_lp_job_at_its_boundary_as_a_requeue() -> None:
    rnd = cluster(lp_window_start=T)          # the LP job's window restarts now
    assert set(at_boundary(rnd)) == {2}
    assert patient_gangs(rnd, 3600.0) == [10]
    d, pol = decide(rnd, 1.0)
    assert d.requeue == [2] and d.victims == []
    assert d.placements[10] == ((1, tuple(range(8))),)
    assert pol._held == {}


@pytest.mark.parametrize("exact", [False, True])
def test_a_requeued_job_is_no_victim_of_a_later_gang(exact: bool) -> None:
    """The patient gang takes the LP job at its boundary; an HP job of 4 GPUs that waits behind
    it (not whole-node: it evicts at once) finds no LP job left to evict, rather than the one
    just re-queued (its GPUs now hold the gang)."""
    rnd = cluster(lp_window_start=T)
    jobs = {**rnd.jobs, 11: Job(11, "org", "A100", HP, 6 * MILLI, 1, T - 50.0, 1_000.0)}
    rnd = Round(time=T, state=rnd.state, jobs=jobs, running=rnd.running, pending_hp=[10, 11],
                pending_lp=[], queued_since={10: T - 100.0, 11: T - 50.0}, params=Params())
    d, _pol = decide(rnd, 1.0, exact)
    assert d.requeue == [2] and d.victims == [] and set(d.placements) == {10}


def test_gang_waits_while_the_lp_job_is_mid_window() -> None:
    d, pol = decide(cluster(lp_window_start=T - 600.0), 1.0)
    assert d.placements == {} and d.victims == [] and d.requeue == []
    assert pol._held == {"A100": 1}


def test_gang_evicts_once_it_has_waited_its_patience() -> None:
    d, _pol = decide(cluster(lp_window_start=T - 600.0, hp_submit=T - 3_600.0), 1.0)
    assert d.victims == [2] and 10 in d.placements


def test_without_patience_the_gang_evicts_at_once() -> None:
    rnd = cluster(lp_window_start=T - 600.0)
    assert patient_gangs(rnd, 0.0) == []
    d, _pol = decide(rnd, 0.0)
    assert d.victims == [2] and d.requeue == []


def part_gang(lp_window_start: float, hp_submit: float = T - 10.0) -> Round:
    """Three 8-GPU nodes: n0 holds HP on GPUs 0–3 and a 4-GPU LP job (5) on GPUs 4–7, n1 one
    8-GPU LP job (2), n2 HP; both LP windows began at ``lp_window_start``. A 4-GPU HP worker
    waits: it does not take a whole node, so it waits the notice, not the hour."""
    st = ClusterState.from_nodes(("A100", 8, f"n{i}") for i in range(3))
    jobs: dict[int, Job] = {}
    running: dict[int, RunningJob] = {}
    for jid, cls, g, node, gpus in ((1, HP, 4, 0, range(4)), (5, LP, 4, 0, range(4, 8)),
                                    (2, LP, 8, 1, range(8)), (3, HP, 8, 2, range(8))):
        j = Job(jid, "org", "A100", cls, g * MILLI, 1, 0.0, 50_000.0)
        pl = ((node, tuple(gpus)),)
        st.allocate(j, pl)
        jobs[jid] = j
        start = lp_window_start if cls is LP else 0.0
        running[jid] = RunningJob(j, 0.0, start, start, pl)
    jobs[10] = Job(10, "org", "A100", HP, 4 * MILLI, 1, hp_submit, 1_000.0)
    return Round(time=T, state=st, jobs=jobs, running=running, pending_hp=[10],
                 pending_lp=[], queued_since={10: hp_submit}, params=Params())


def test_a_gang_on_notice_takes_the_lp_job_beside_hp_at_its_boundary() -> None:
    """Both LP jobs are at a boundary; the gang takes the one beside HP (n0) and leaves the
    whole LP-only node n1 for whole-node gangs to gather."""
    rnd = part_gang(lp_window_start=T)
    assert patient_gangs(rnd, 3600.0, 60.0) == [10]
    assert patient_gangs(rnd, 3600.0, 0.0) == []     # only whole-node gangs wait
    d, pol = decide(rnd, 1.0)
    assert d.requeue == [5] and d.victims == [] and d.placements[10] == ((0, (4, 5, 6, 7)),)
    assert pol._held == {}


def test_a_gang_on_notice_waits_for_a_boundary_in_reach_and_holds_no_node() -> None:
    """The LP job beside HP reaches its boundary 150 s from now, within the notice: the gang
    waits, asks to be called then and at its notice's end, and holds nothing."""
    d, pol = decide(part_gang(lp_window_start=T + 150.0 - 3_600.0), 1.0, notice_h=FIVE_MIN_H)
    assert d.placements == {} and d.victims == [] and d.requeue == []
    assert pol._held == {}    # nothing to gather or hold: it fits wherever LP leaves room
    assert sorted(d.wakes) == [(T + 150.0, "A100"), (T - 10.0 + 300.0, "A100")]


def test_a_gang_on_notice_with_no_boundary_in_reach_evicts_in_the_same_round() -> None:
    """Mid-window, the next boundary 3,000 s away, past the notice: waiting buys nothing, so
    the gang evicts at once (as PTS does) and asks for no wake."""
    d, pol = decide(part_gang(lp_window_start=T - 600.0), 1.0)
    assert len(d.victims) == 1 and 10 in d.placements and d.requeue == []
    assert d.wakes == [] and 10 in pol._hopeless


def test_a_gang_on_notice_takes_an_lp_only_node_when_no_whole_node_gang_waits() -> None:
    """Only the whole LP-only node's job (n1) is at a boundary now; no whole-node gang waits in
    the pool, so the gang on notice takes it there rather than evicting the job beside HP."""
    rnd = part_gang(lp_window_start=T - 600.0)
    r = rnd.running[2]
    running = {**rnd.running, 2: RunningJob(r.job, r.start, T, T, r.placement)}
    d, _pol = decide(Round(time=T, state=rnd.state, jobs=rnd.jobs, running=running,
                           pending_hp=[10], pending_lp=[], queued_since=dict(rnd.queued_since),
                           window_restarts=(2,), params=Params()), 1.0)
    assert d.requeue == [2] and d.victims == [] and 10 in d.placements


def test_a_gang_on_notice_evicts_once_the_notice_is_over() -> None:
    rnd = part_gang(lp_window_start=T - 600.0, hp_submit=T - NOTICE_H * 3600.0)
    assert patient_gangs(rnd, 3600.0, NOTICE_H * 3600.0) == []
    d, _pol = decide(rnd, 1.0)
    assert len(d.victims) == 1 and 10 in d.placements and d.requeue == []


def test_without_notice_a_part_gang_evicts_at_once() -> None:
    d, _pol = decide(part_gang(lp_window_start=T - 600.0), 1.0, notice_h=0.0)
    assert len(d.victims) == 1 and 10 in d.placements


def free_node_and_lp_waiting() -> Round:
    """`cluster` mid-window with n2 free, a gang of two whole-node workers and an 8-GPU LP job
    waiting."""
    rnd = cluster(lp_window_start=T - 600.0, workers=2, lp_waiting=True)
    st = rnd.state
    st.release(rnd.jobs[3])      # n2 free again
    running = {j: r for j, r in rnd.running.items() if j != 3}
    return Round(time=T, state=st, jobs=rnd.jobs, running=running, pending_hp=[10],
                 pending_lp=[20], queued_since=dict(rnd.queued_since), params=Params())


def test_lp_pass_does_not_break_the_node_a_waiting_gang_needs() -> None:
    """The gang needs two whole nodes, one is free: it waits, and the 8-GPU LP job that would
    take the free node waits too (without the wait the gang evicts and the LP job stays out)."""
    d, pol = decide(free_node_and_lp_waiting(), 1.0)
    assert pol._held == {"A100": 2}
    assert 20 not in d.placements and d.placements == {} and d.victims == []


def two_lp_nodes(first_window: float, second_window: float, workers: int = 2) -> Round:
    """n0 half HP, n1 and n2 each held by one 8-GPU LP job (windows from the given times), no
    free whole node; a gang of ``workers`` whole-node workers waits."""
    rnd = cluster(lp_window_start=first_window, workers=workers)
    st = rnd.state
    st.release(rnd.jobs[3])
    lp = Job(3, "org", "A100", LP, 8 * MILLI, 1, 0.0, 50_000.0)
    pl = ((2, tuple(range(8))),)
    st.allocate(lp, pl)
    jobs = {**rnd.jobs, 3: lp}
    running = {**rnd.running, 3: RunningJob(lp, 0.0, second_window, second_window, pl)}
    return Round(time=T, state=st, jobs=jobs, running=running, pending_hp=[10], pending_lp=[],
                 queued_since=dict(rnd.queued_since), params=Params())


def test_a_gang_of_two_gathers_a_node_at_its_boundary() -> None:
    """One of the two LP nodes is at a boundary: it is emptied for the gang (re-queue), which
    keeps waiting for the second; nothing is evicted."""
    d, pol = decide(two_lp_nodes(T, T - 600.0), 1.0)
    assert d.requeue == [2] and d.victims == [] and d.placements == {}
    assert pol._held == {"A100": 2}


def test_the_second_boundary_completes_the_gang() -> None:
    """Both LP nodes at a boundary at once: the gang starts on both, by re-queues."""
    d, _pol = decide(two_lp_nodes(T, T), 1.0)
    assert sorted(d.requeue) == [2, 3] and d.victims == []
    assert sorted(n for n, _g in d.placements[10]) == [1, 2]


def test_no_gathering_for_a_gang_the_lp_nodes_cannot_cover() -> None:
    """Three whole nodes needed, two held by LP: boundaries alone can never host the gang, so
    no node is emptied for it and it stops waiting for boundaries (it cannot start even by
    eviction: it waits for capacity, holding no node)."""
    d, pol = decide(two_lp_nodes(T, T, workers=3), 1.0)
    assert d.requeue == [] and d.placements == {} and pol._held == {}
    assert 10 in pol._hopeless


def test_a_whole_node_gang_waits_for_the_nodes_in_reach_else_evicts_now() -> None:
    """Two LP nodes, boundaries 600 s and 3,000 s away: within the hour both are in reach (it
    waits, woken at each and at its wait's end); with a 30-minute wait the second is not, and
    it evicts now."""
    rnd = two_lp_nodes(T + 600.0 - 3_600.0, T + 3_000.0 - 3_600.0)
    d, pol = decide(rnd, 1.0)
    assert d.victims == [] and d.placements == {} and pol._held == {"A100": 2}
    assert sorted(d.wakes) == [(T + 600.0, "A100"), (T + 3_000.0, "A100"),
                               (T - 100.0 + 3_600.0, "A100")]
    d, pol = decide(two_lp_nodes(T + 600.0 - 3_600.0, T + 3_000.0 - 3_600.0), 0.5)
    assert len(d.victims) == 2 and 10 in d.placements and pol._held == {}


def test_held_reserves_add_the_waiting_workers_to_every_class() -> None:
    assert held_reserves(None, {}, (1.0,)) is None
    assert held_reserves({("A", 1.0): 1}, {"A": 2, "B": 1}, (1.0, 4.0)) == {
        ("A", 1.0): 3, ("A", 4.0): 2, ("B", 1.0): 1, ("B", 4.0): 1}


def test_policy_options_and_description() -> None:
    pol = make_policy("gfs")
    assert isinstance(pol, ComposedPolicy) and pol.hp_wait_s == 3600.0
    assert pol.wakes_at_window_ends and pol.options()["hp_wait_h"] == 1.0
    assert "window boundaries" in pol.parts()["victims"]
    plain = make_policy("gfs-no-wait")
    assert not plain.wakes_at_window_ends and "hp_wait_h" not in plain.options()
    assert plain.patience is None and plain.hp_wait_s == 0.0
    assert "window boundaries" not in plain.parts()["victims"]
    with pytest.raises(ValueError, match="hp_wait_h"):
        GFSPolicy(hp_wait_h=-1.0)
    assert "wait" not in POLICIES["gfs-no-wait"][1]["departures"].split("+")
    assert make_policy("gfs-milp").hp_wait_s == 3600.0
    assert pol.options()["hp_notice_h"] == NOTICE_H and pol.hp_notice_s == NOTICE_H * 3600.0
    assert "notice" in pol.parts()["victims"] and "notice" not in plain.parts()["victims"]
    assert make_policy("gfs-no-notice").hp_notice_s == 0.0
    with pytest.raises(ValueError, match="hp_notice_h"):
        GFSPolicy(hp_notice_h=math.inf)


# ---- a standalone round (`gfs-opt solve`) --------------------------------------------------------
def test_solve_reports_the_requeue_and_the_exact_step_agrees() -> None:
    """At the boundary both answers take the LP job as a re-queue (no victim, no eviction
    cost); the exact step solves the rest, and the file round-trips the window positions."""
    rnd = cluster(lp_window_start=T)
    res = solve_round(rnd, "both", "preemption", policy="gfs")
    assert res.preempt_greedy is not None and res.preempt_milp is not None
    for d in (res.preempt_greedy.decision, res.preempt_milp.decision):
        assert d.requeue == [2] and d.victims == [] and set(d.placements) == {10}
    assert not res.preempt_greedy.problems
    assert res.preempt_milp.score.eviction_cost == 0.0
    out = res.as_dict()["preemption"]
    assert out["greedy"]["requeued"] == [2] and out["milp"]["requeued"] == [2]
    assert "requeued" not in solve_round(rnd, "greedy", "preemption", policy="gfs-no-wait"
                                         ).as_dict()["preemption"]["greedy"]
    assert any("hp_wait_h" in n for n in res.notes)
    plain = solve_round(rnd, "both", "preemption", policy="gfs-no-wait")
    assert plain.preempt_greedy is not None and plain.preempt_greedy.decision.victims == [2]
    assert not plain.notes


def test_solve_holds_the_node_a_waiting_gang_needs_from_both_lp_answers() -> None:
    """Mid-window the gang waits; the round after the HP step holds its node back from the LP
    pass and from the admission MILP alike (without the wait both start the LP job)."""
    rnd = free_node_and_lp_waiting()
    res = solve_round(rnd, "both", "quota", policy="gfs")
    assert res.quota_greedy is not None and res.quota_milp is not None
    assert res.quota_greedy.admitted == [] and res.quota_milp.admitted == []
    plain = solve_round(rnd, "both", "quota", policy="gfs-no-wait")
    assert plain.quota_greedy is not None and plain.quota_greedy.admitted == [20]


def test_check_decision_refuses_a_requeue_mid_window() -> None:
    rnd = cluster(lp_window_start=T - 600.0)
    problems = check_decision(rnd, Decision(requeue=[2]))
    assert any("not at a window boundary" in p for p in problems)
    assert check_decision(cluster(lp_window_start=T), Decision(requeue=[2])) == []
    assert any("not a running LP job" in p
               for p in check_decision(rnd, Decision(requeue=[3])))


# ---- whole simulations -------------------------------------------------------------------------
def boundary_trace() -> Trace:
    """n0 half held by HP, n1 by one 8-GPU LP job from t = 0 (windows of 1 h); an 8-GPU HP job
    arrives at t = 2,000, mid-window, when no whole node is free."""
    nodes = pd.DataFrame([(f"n{i}", "A100", 8, 64.0) for i in range(2)], columns=NODE_COLUMNS)
    rows = [(1, "hp-half", "org", "A100", "HP", 4 * MILLI, 1, 0.0, 20_000.0, 0.0, 1.0, False),
            (2, "lp-node", "org", "A100", "LP", 8 * MILLI, 1, 1.0, 20_000.0, 0.0, 1.0, False),
            (3, "hp-node", "org", "A100", "HP", 8 * MILLI, 1, 2_000.0, 1_000.0, 0.0, 1.0, False)]
    return Trace(nodes, pd.DataFrame(rows, columns=JOB_COLUMNS))


@pytest.mark.parametrize("policy", ["gfs", "gfs-no-wait", "gfs-milp"])
def test_simulation_starts_the_gang_at_the_checkpoint(policy: str) -> None:
    trace = boundary_trace()
    cfg = SimConfig(eval_start=0.0, eval_end=2_001.0, sample_s=300.0, check_invariants=True,
                    drain_s=86_400.0)
    wait = policy != "gfs-no-wait"
    pol = make_policy(policy, quota="none")
    sim = Simulator(trace, pol, Params(), cfg)
    sim.run()
    jobs = sim.recorder.jobs
    assert jobs is not None
    by_id = jobs.set_index("job_id")
    if wait:   # the HP job starts at the LP job's first boundary (t = 3,601), no window broken
        assert by_id.loc[3, "jqt"] == pytest.approx(1_601.0)
        assert by_id.loc[2, "windows_failed"] == 0 and by_id.loc[2, "requeues"] == 1
        assert by_id.loc[2, "evictions"] == 0
    else:      # PTS evicts at once
        assert by_id.loc[3, "jqt"] == 0.0
        assert by_id.loc[2, "windows_failed"] == 1 and by_id.loc[2, "evictions"] == 1


@pytest.mark.parametrize("policy", ["gfs", "gfs-no-notice"])
def test_simulation_a_gang_on_notice_starts_at_a_boundary_within_the_notice(policy: str) -> None:
    """A 4-GPU HP job arrives at t = 3,400 to a full cluster, 201 s before the first boundary of
    the LP job beside HP: on notice it starts there with no window broken; without the notice
    it evicts at once."""
    nodes = pd.DataFrame([(f"n{i}", "A100", 8, 64.0) for i in range(2)], columns=NODE_COLUMNS)
    rows = [(1, "hp-half", "org", "A100", "HP", 4 * MILLI, 1, 0.0, 20_000.0, 0.0, 1.0, False),
            (4, "hp-node", "org", "A100", "HP", 8 * MILLI, 1, 0.0, 20_000.0, 0.0, 1.0, False),
            (2, "lp-beside", "org", "A100", "LP", 4 * MILLI, 1, 1.0, 20_000.0, 0.0, 1.0, False),
            (3, "hp-late", "org", "A100", "HP", 4 * MILLI, 1, 3_400.0, 1_000.0, 0.0, 1.0,
             False)]
    trace = Trace(nodes, pd.DataFrame(rows, columns=JOB_COLUMNS))
    cfg = SimConfig(eval_start=0.0, eval_end=3_401.0, sample_s=300.0, check_invariants=True,
                    drain_s=86_400.0)
    opts = {"hp_notice_h": FIVE_MIN_H} if policy == "gfs" else {}
    sim = Simulator(trace, make_policy(policy, quota="none", **opts), Params(), cfg)
    sim.run()
    assert sim.recorder.jobs is not None
    by_id = sim.recorder.jobs.set_index("job_id")
    if policy == "gfs":
        assert by_id.loc[3, "jqt"] == pytest.approx(201.0)
        assert by_id.loc[2, "windows_failed"] == 0 and by_id.loc[2, "requeues"] == 1
    else:
        assert by_id.loc[3, "jqt"] == 0.0 and by_id.loc[2, "windows_failed"] == 1


def test_the_patience_memo_reads_every_round_as_a_fresh_reading() -> None:
    """`patience` with the memo a policy keeps (read once per queue change, aged as time moves
    on) gives every round of a replay the gangs, whole-node gangs and held workers that reading
    the round afresh gives."""
    from standins import TOY_SETUP

    from gfs_opt.experiments.runner import RunSpec, prepare_trace
    from gfs_opt.policies import options_for
    from gfs_opt.preempt.boundary import patience

    trace, lo, hi = prepare_trace(RunSpec.from_setup(TOY_SETUP, policy="gfs"))
    sim = Simulator(trace, make_policy("gfs", **options_for("gfs", {"forecaster": "ets"})),
                    Params(), SimConfig(eval_start=lo, eval_end=hi))
    memo: dict = {}
    wait, notice = 3600.0, NOTICE_H * 3600.0
    seen = [0, 0]

    def check(rnd: Round) -> bool:
        kept, fresh = patience(rnd, wait, notice, memo), patience(rnd, wait, notice)
        assert kept.gangs == fresh.gangs == patient_gangs(rnd, wait, notice)
        assert set(kept.whole) == set(fresh.whole) and set(kept.members) == set(fresh.gangs)
        assert kept.held == fresh.held
        seen[0] += bool(fresh.gangs)
        seen[1] += bool(fresh.held)
        return False

    sim.on_round = check
    sim.run()
    assert seen[0] > 0 and seen[1] > 0, "no round had patient gangs to compare"


def notice_trace(hp_submit: float) -> Trace:
    """n0: HP on 4 GPUs and an LP job of 4 GPUs beside it (windows of 1 h from t = 1), n1 a
    whole HP node; a 4-GPU HP job arrives at ``hp_submit`` to a full cluster."""
    nodes = pd.DataFrame([(f"n{i}", "A100", 8, 64.0) for i in range(2)], columns=NODE_COLUMNS)
    rows = [(1, "hp-half", "org", "A100", "HP", 4 * MILLI, 1, 0.0, 20_000.0, 0.0, 1.0, False),
            (4, "hp-node", "org", "A100", "HP", 8 * MILLI, 1, 0.0, 20_000.0, 0.0, 1.0, False),
            (2, "lp-beside", "org", "A100", "LP", 4 * MILLI, 1, 1.0, 20_000.0, 0.0, 1.0, False),
            (3, "hp-late", "org", "A100", "HP", 4 * MILLI, 1, hp_submit, 1_000.0, 0.0, 1.0,
             False)]
    return Trace(nodes, pd.DataFrame(rows, columns=JOB_COLUMNS))


def run_notice(hp_submit: float, policy: str = "gfs") -> pd.DataFrame:
    """`notice_trace` under a five-minute notice; quota refreshes every 10 h: no pass but those
    the jobs and the policy's wakes call for."""
    cfg = SimConfig(eval_start=0.0, eval_end=hp_submit + 1.0, sample_s=300.0,
                    check_invariants=True, drain_s=86_400.0)
    sim = Simulator(notice_trace(hp_submit), make_policy(policy, quota="none",
                                                         hp_notice_h=FIVE_MIN_H),
                    Params(quota_refresh_s=36_000.0), cfg)
    sim.run()
    assert sim.recorder.jobs is not None
    return sim.recorder.jobs.set_index("job_id")


def test_simulation_a_boundary_200_s_away_starts_the_gang_there_with_no_window_broken() -> None:
    by_id = run_notice(3_401.0)     # the LP job's boundary at 3,601 s
    assert by_id.loc[3, "jqt"] == pytest.approx(200.0)
    assert by_id.loc[3, "delay_choice_s"] == pytest.approx(200.0)
    assert by_id.loc[2, "windows_failed"] == 0 and by_id.loc[2, "requeues"] == 1


def test_simulation_no_boundary_in_reach_evicts_in_the_same_round() -> None:
    by_id = run_notice(2_000.0)     # the boundary 1,601 s away, past the notice
    assert by_id.loc[3, "jqt"] == 0.0 and by_id.loc[3, "delay_choice_s"] == 0.0
    assert by_id.loc[2, "windows_failed"] == 1 and by_id.loc[2, "evictions"] == 1


def test_simulation_a_gang_is_retried_at_its_notice_end_exactly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Had waiting looked worthwhile (here: every gang is judged worth its wait), the gang is
    retried when its notice ends — a wake at that instant — not at its pool's next event."""
    import gfs_opt.policies.base as base

    def always(rnd: Round, gangs: list[int], deadlines: dict[int, float], whole: object
               ) -> tuple[list[int], list[int], list[tuple[float, str]]]:
        return gangs, [], [(deadlines[j], rnd.jobs[j].pool) for j in gangs]

    monkeypatch.setattr(base, "reach", always)
    by_id = run_notice(2_000.0)
    assert by_id.loc[3, "jqt"] == FIVE_MIN_H * 3_600.0
    assert by_id.loc[2, "windows_failed"] == 1
