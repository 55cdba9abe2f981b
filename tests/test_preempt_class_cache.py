"""Issue 39: what the preemption model keeps between passes (`PassCache`: the GPU classes, the
running jobs' usage) gives the model, the usage and the optimum that a pass computed from
scratch gives, pass after pass."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from milp_rounds import _SIZES, _fit, contested_rounds, job, make_round

from gfs_opt.model import MILLI, Job, JobClass, Params, Round, RunningJob
from gfs_opt.preempt.block import evictable_lp, pool_classes
from gfs_opt.preempt.class_cache import ClassCache
from gfs_opt.preempt.milp import PassCache, build_model, greedy_decision, solve_preemption
from gfs_opt.preempt.objective import running_usage
from gfs_opt.solve import SolverOptions, export

SOLVER = SolverOptions(time_limit=20.0)
OPS = ("release", "start", "restart", "checkpoint", "time", "guarantee")


def _keep(rnd: Round) -> set[int]:
    return {n for pl in greedy_decision(rnd).placements.values() for n, _ in pl}


def _model_text(rnd: Round, cache: ClassCache | None) -> str:
    return export(build_model(rnd, keep_nodes=_keep(rnd), cache=cache).model, "lp")


def _step(draw: st.DrawFn, rnd: Round, next_id: int) -> tuple[Round, int]:
    """The next pass: a few of the changes a replay makes between two passes of a pool (jobs
    ending, starting, restarting elsewhere, checkpointing into a new window; time passing; the
    hard guarantee switched), on a copy of the state, as the simulator hands out."""
    state = rnd.state.copy()
    running, jobs = dict(rnd.running), dict(rnd.jobs)
    t, params = rnd.time, rnd.params
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(OPS))
        lp = sorted(j for j, r in running.items() if r.job.cls is JobClass.LP)
        if op in ("release", "restart", "checkpoint") and lp:
            jid = draw(st.sampled_from(lp))
            run = running[jid]
            if op == "checkpoint":
                running[jid] = run.checkpointed(t)
                continue
            state.release(run.job)
            del running[jid]
            if op == "release":
                continue
            lo, hi = state.pool_slice(run.job.pool)
            pl = _fit(state, run.job.g, run.job.workers, draw(st.permutations(range(lo, hi))))
            if pl is not None:
                state.allocate(run.job, pl)
                running[jid] = RunningJob(run.job, t, t, t, pl)
        elif op == "start":
            pool = draw(st.sampled_from(state.pools))
            lo, hi = state.pool_slice(pool)
            g = draw(st.sampled_from([s for s in _SIZES
                                      if s <= MILLI * int(state.node_gpus[lo:hi].max())]))
            new = Job(next_id, "o", pool, JobClass.LP, g, draw(st.sampled_from([1, 2])), t, 1e5,
                      guarantee_h=draw(st.sampled_from([1.0, 2.0])))
            pl = _fit(state, g, new.workers, draw(st.permutations(range(lo, hi))))
            if pl is not None:
                state.allocate(new, pl)
                jobs[next_id] = new
                running[next_id] = RunningJob(new, t, t, t, pl)
                next_id += 1
        elif op == "time":
            t += draw(st.sampled_from([1.0, 600.0, 3600.0, 7200.0]))
        elif op == "guarantee":
            params = Params(hard_guarantee=not params.hard_guarantee)
    pending = [j for j in rnd.pending_hp if j not in state.alloc]
    return replace(rnd, time=t, state=state, jobs=jobs, running=running, pending_hp=pending,
                   params=params), next_id


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), contested_rounds(max_nodes=6, max_pending=4))
def test_cached_classes_build_the_model_built_from_scratch(data: st.DataObject, rnd: Round
                                                           ) -> None:
    cache = PassCache()
    next_id = max(rnd.jobs) + 1
    for _ in range(data.draw(st.integers(1, 6))):
        assert _model_text(rnd, cache.classes) == _model_text(rnd, None)
        assert np.array_equal(cache.usage.of(rnd), running_usage(rnd))
        rnd, next_id = _step(data.draw, rnd, next_id)
    assert _model_text(rnd, cache.classes) == _model_text(rnd, None)
    # and the answer of the last pass
    a = solve_preemption(rnd, solver=SOLVER)
    b = solve_preemption(rnd, solver=SOLVER, cache=cache)
    assert b.score.key() == a.score.key()
    assert (b.decision.placements, b.decision.victims) == (a.decision.placements, a.decision.victims)


def test_a_node_is_recomputed_only_when_its_jobs_change() -> None:
    # two 2-GPU nodes, each GPU holding one one-GPU LP job; an HP gang of two GPUs waiting
    lp = [job(i, "LP", 1, submit=0.0) for i in range(1, 5)]
    rnd = make_round([("A", 2), ("A", 2)],
                     [(lp[0], ((0, (0,)),), 0.0), (lp[1], ((0, (1,)),), 0.0),
                      (lp[2], ((1, (0,)),), 0.0), (lp[3], ((1, (1,)),), 0.0)],
                     [job(9, "HP", 1, w=2, submit=100.0)])
    cache = ClassCache()
    first = cache.classes(rnd, "A", ["A"], protect=False)
    assert (cache.computed, cache.reused) == (2, 0)
    # a checkpoint (a new window) changes no class without the hard guarantee
    running = dict(rnd.running)
    running[1] = running[1].checkpointed(rnd.time)
    rnd = replace(rnd, running=running, time=rnd.time + 60.0)
    again = cache.classes(rnd, "A", ["A"], protect=False)
    assert (cache.computed, cache.reused) == (2, 2)
    assert again[0] is first[0] and again[1] is first[1]
    # job 3 ends: node 1 alone is recomputed, and its freed GPU is a class of its own
    state = rnd.state.copy()
    state.release(lp[2])
    running.pop(3)
    rnd = replace(rnd, state=state, running=running)
    after = cache.classes(rnd, "A", ["A"], protect=False)
    assert (cache.computed, cache.reused) == (3, 3)
    fresh = pool_classes(rnd, 0, 2, evictable_lp(rnd, False, ["A"]))
    assert [(c.gpus, c.room, c.lp) for c in after[1]] == [(c.gpus, c.room, c.lp) for c in fresh[1]]
    assert [(c.gpus, c.room) for c in after[1]] == [([0], MILLI), ([1], 0)]


def test_a_window_that_ends_frees_a_protected_job() -> None:
    # under the hard guarantee a job inside its window is not evictable; once the window is
    # over the same job (the same value) is, and the cache must notice without any change
    lp = job(1, "LP", 1, d=1.0)
    rnd = make_round([("A", 1)], [(lp, ((0, (0,)),), 7000.0)], [job(9, "HP", 1, submit=100.0)],
                     t=7200.0, params=Params(hard_guarantee=True))
    cache = ClassCache()
    assert cache.classes(rnd, "A", ["A"], protect=True)[0] == []   # protected: nothing to free
    later = replace(rnd, time=7000.0 + 3600.0)
    got = cache.classes(later, "A", ["A"], protect=True)[0]
    assert [(c.lp, c.fixed) for c in got] == [(((1, MILLI),), 0)]
