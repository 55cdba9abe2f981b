"""Issue 39: phase 2 of the preemption MILP answered as a knapsack cover (`gfs_opt.preempt.cover`),
and the cheaper model building around it, give the answers the solver gives."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from milp_rounds import contested_rounds, job, make_round

from gfs_opt.model import MILLI, ClusterState, Job, JobClass, Params, Round, RunningJob
from gfs_opt.preempt import cover
from gfs_opt.preempt import milp as pmilp
from gfs_opt.preempt.block import candidate_nodes, evictable_lp, pool_classes
from gfs_opt.preempt.milp import build_model, solve_preemption
from gfs_opt.preempt.objective import DEFAULT_OBJECTIVE, eviction_cost, lp_eviction_costs
from gfs_opt.solve import SolverOptions, satisfies

#: SCIP's stopping gap as gfs-milp runs it (the cover must reproduce what SCIP stops with)
RUN = SolverOptions(time_limit=20.0)
EXACT = SolverOptions(rel_gap=0.0, time_limit=20.0)


@st.composite
def full_pools(draw: st.DrawFn) -> Round:
    """One pool whose every GPU holds LP work of whole GPUs (1, 2, 4 or 8 per job, some across
    two nodes), and one-GPU HP gangs waiting: the contested pass of a pool full of LP work."""
    n_nodes = draw(st.integers(1, 4))
    sizes = [draw(st.sampled_from([2, 4, 8])) for _ in range(n_nodes)]
    state = ClusterState.from_nodes([("A", n, f"n{i}") for i, n in enumerate(sizes)])
    t = 50_000.0
    jobs: dict[int, Job] = {}
    running: dict[int, RunningJob] = {}
    free = [list(range(n)) for n in sizes]
    jid = 1
    while any(free):
        n = draw(st.sampled_from([i for i, f in enumerate(free) if f]))
        k = draw(st.sampled_from([k for k in (1, 2, 4, 8) if k <= len(free[n])]))
        gpus, free[n] = tuple(free[n][:k]), free[n][k:]
        placement: tuple[tuple[int, tuple[int, ...]], ...] = ((n, gpus),)
        others = [m for m, f in enumerate(free) if m != n and len(f) >= k]
        workers = 1
        if others and draw(st.integers(0, 4)) == 0:   # a second worker on another node
            m = draw(st.sampled_from(others))
            more, free[m] = tuple(free[m][:k]), free[m][k:]
            placement, workers = (*placement, (m, more)), 2
        lp = Job(jid, "o", "A", JobClass.LP, k * MILLI, workers, 0.0, 1e6,
                 guarantee_h=draw(st.sampled_from([1.0, 2.0])))
        state.allocate(lp, placement)
        ckpt = t - draw(st.integers(0, 20_000))
        window = ckpt if draw(st.booleans()) else ckpt - 10_000.0
        jobs[jid] = lp
        running[jid] = RunningJob(lp, start=window, last_ckpt=ckpt, window_start=window,
                                  placement=placement)
        jid += 1
    pending = []
    for _ in range(draw(st.integers(1, min(5, sum(sizes))))):
        jobs[jid] = Job(jid, "o", "A", JobClass.HP, MILLI, 1, t - draw(st.integers(0, 600)), 1e4)
        pending.append(jid)
        jid += 1
    return Round(time=t, state=state, jobs=jobs, running=running, pending_hp=pending,
                 pending_lp=[], params=Params())


def _without_cover(rnd: Round, solver: SolverOptions) -> pmilp.PreemptResult:
    with mock.patch.object(pmilp, "_covered", lambda *a: None):
        return solve_preemption(rnd, solver=solver)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(full_pools())
def test_a_cover_is_what_scip_returns(rnd: Round) -> None:
    """Where phase 2 is answered as a cover, the route it replaces (SCIP run as gfs-milp runs
    it, or on a small model CP-SAT's proof) gives the very decision — victims and GPUs — and SCIP
    run to a zero gap the same P and C."""
    res = solve_preemption(rnd, solver=RUN)
    if res.routes[1] != "cover":
        return
    solved = _without_cover(rnd, RUN)   # SCIP, or CP-SAT's proof that the warm start is optimal
    assert solved.routes[1] in ("solved", "certified")
    assert res.decision.placements == solved.decision.placements
    assert res.decision.victims == solved.decision.victims
    assert res.score == solved.score
    exact = _without_cover(rnd, EXACT)
    assert res.score.placed == exact.score.placed
    assert res.score.eviction_cost == pytest.approx(exact.score.eviction_cost, rel=1e-9)


def test_cover_answers_a_full_pool_and_picks_the_cheapest_victim() -> None:
    """Two one-GPU LP jobs and an eight-GPU one fill the pool; one HP gang of one GPU waits:
    the cheapest LP job per GPU freed is evicted without a solve."""
    lp = [job(1, "LP", 1), job(2, "LP", 1), job(3, "LP", 8)]
    rnd = make_round([("A", 2), ("A", 8)],
                     [(lp[0], ((0, (0,)),), 7000.0), (lp[1], ((0, (1,)),), 5000.0),
                      (lp[2], ((1, tuple(range(8))),), 7100.0)],
                     [job(9, "HP", 1, submit=7000.0)], t=7200.0, window_start=0.0)
    res = solve_preemption(rnd, solver=RUN)
    assert res.routes == ("bound", "cover")
    assert res.decision.victims == [1]
    assert res.decision.placements == {9: ((0, (0,)),)}
    assert res.decision.reports[0].status == "optimal" and not res.fallback
    assert _without_cover(rnd, RUN).decision.victims == [1]


def test_no_cover_when_two_victims_tie() -> None:
    """Equal costs: which one SCIP takes is its choice, so the model is solved."""
    lp = [job(1, "LP", 1), job(2, "LP", 1)]
    rnd = make_round([("A", 2)], [(lp[0], ((0, (0,)),), 7000.0), (lp[1], ((0, (1,)),), 7000.0)],
                     [job(9, "HP", 1, submit=7000.0)], t=7200.0, window_start=0.0)
    assert solve_preemption(rnd, solver=RUN).routes[1] != "cover"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 60), st.sampled_from([1, 2, 3, 4, 8])), min_size=1,
                max_size=7), st.integers(1, 9))
def test_two_best_covers_match_brute_force(items: list[tuple[int, int]], need: int) -> None:
    """`_ip_unique`: the cheapest set freeing ``need`` GPUs and the cheapest other one, against
    every subset (including the sizes capped at ``need`` and the cheapest-per-size cut)."""
    freed = {j: g for j, (_c, g) in enumerate(items)}
    cost = {j: float(c) for j, (c, _g) in enumerate(items)}
    feasible = sorted(
        (sum(cost[j] for j in s), frozenset(s))
        for r in range(len(items) + 1) for s in itertools.combinations(freed, r)
        if sum(freed[j] for j in s) >= need)
    best, chosen, runner_up = cover._ip_unique(freed, cost, need)
    if not feasible:
        assert best == float("inf")
        return
    assert best == feasible[0][0]
    assert sum(cost[j] for j in chosen) == best and sum(freed[j] for j in chosen) >= need
    assert runner_up == (feasible[1][0] if len(feasible) > 1 else float("inf"))


def test_lp_relaxation_integral_only_when_it_fills_exactly_and_uniquely() -> None:
    assert cover._lp_integral({1: 1, 2: 1, 3: 4}, {1: 10.0, 2: 30.0, 3: 200.0}, 2) == ([1, 2], 40.0)
    # the best cost per GPU (25) is the four-GPU job: the LP takes half of it
    assert cover._lp_integral({1: 1, 3: 4}, {1: 30.0, 3: 100.0}, 2) is None
    # two jobs at one price for one GPU: two LP optima
    assert cover._lp_integral({1: 1, 2: 1}, {1: 10.0, 2: 10.0}, 1) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested_rounds(max_nodes=5, max_pending=4), st.integers(0, 2**31 - 1))
def test_writer_check_is_the_model_check(rnd: Round, seed: int) -> None:
    """`PreemptModel.satisfied` (the writer's rows) says what `satisfies` (the exported model)
    says, on the greedy's image and on random values."""
    pm = build_model(rnd)
    if pm.block.writer is None:
        return
    variables = list(pm.model.variables())
    rng = np.random.default_rng(seed)
    trials = [{v: float(rng.integers(0, 3)) for v in variables} for _ in range(4)]
    trials.append({v: 0.0 for v in variables})
    hint = pmilp.warm_start(rnd, pm, pmilp.greedy_decision(rnd))
    if hint is not None:
        trials.append(hint)
    for values in trials:
        assert pm.satisfied(values) == satisfies(pm.model, values)


@settings(max_examples=40, deadline=None)
@given(contested_rounds(max_nodes=5, max_pending=4))
def test_eviction_costs_in_one_loop_are_eviction_cost(rnd: Round) -> None:
    pools = {rnd.jobs[j].pool for j in rnd.pending_hp}
    costs = lp_eviction_costs(rnd, pools, DEFAULT_OBJECTIVE)
    expected = {j: eviction_cost(rnd, j, DEFAULT_OBJECTIVE) for j, r in rnd.running.items()
                if r.job.cls is JobClass.LP and r.job.pool in pools}
    assert costs == expected   # the same floats, not only close ones


@settings(max_examples=40, deadline=None)
@given(contested_rounds(max_nodes=5, max_pending=4))
def test_uncut_candidates_are_the_scored_ones(rnd: Round) -> None:
    """Without a cut, `candidate_nodes` lists the nodes it would have scored (in node order)."""
    st_ = rnd.state
    per_gpu = evictable_lp(rnd, False)
    for pool in st_.pools:
        lo, hi = st_.pool_slice(pool)
        classes = pool_classes(rnd, lo, hi, per_gpu)
        cost = {j: 1.0 for j in rnd.running}
        for g in (250, 1000, 2000, 8000):
            t = (pool, g, 1)
            scored = candidate_nodes(range(lo, hi), classes, t, cost, 10_000, set())
            assert candidate_nodes(range(lo, hi), classes, t, cost, 0, set()) == sorted(scored)
