"""Best fit's shortcuts give the answers of the plain computation: the node key over the whole
pool (`best_node_whole`) and worker-by-worker placement with held workers (`place_gang`)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import rounds

from gfs_opt.model import MILLI, ClusterState, Job, JobClass, Round
from gfs_opt.preempt.scoring import (
    E_MAX,
    KEY_SCALE,
    best_node_whole,
    eviction_scores,
    place_gang,
    place_worker,
    whole_gang,
)


def plain_best_node(state: ClusterState, pool: int, k: int, cls: JobClass,
                    e_score: np.ndarray | None) -> int:
    """The key of every node of the pool, as written before the shortcut."""
    lo, hi = state.pool_slice(pool)
    free = state.node_free[lo:hi]
    ok = free >= k
    if not ok.any():
        return -1
    same = state.node_hp_gpus[lo:hi] if cls is JobClass.HP else state.node_lp_gpus[lo:hi]
    key = (100.0 * (free + 1) - same) * KEY_SCALE
    if e_score is not None:
        e = e_score[lo:hi]
        key = key + (e if cls is JobClass.HP else E_MAX - e)
    return lo + int(np.argmin(np.where(ok, key, np.inf)))


def scores(rnd: Round, draw_e: bool) -> np.ndarray | None:
    if not draw_e or rnd.node_evictions_1h is None or rnd.node_evictions_1d is None:
        return None
    return eviction_scores(rnd.node_evictions_1h, rnd.node_evictions_1d)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=rounds(max_nodes=8, max_jobs=14), draw_e=st.booleans(), k=st.sampled_from([1, 2, 4, 8]),
       hp=st.booleans())
def test_best_node_is_the_plain_argmin(rnd: Round, draw_e: bool, k: int, hp: bool) -> None:
    e = scores(rnd, draw_e)
    cls = JobClass.HP if hp else JobClass.LP
    for pool in range(len(rnd.state.pools)):
        assert (best_node_whole(rnd.state, pool, k, cls, e)
                == plain_best_node(rnd.state, pool, k, cls, e))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=rounds(max_nodes=8, max_jobs=14), draw_e=st.booleans(),
       g=st.sampled_from([1000, 2000, 4000, 8000]), workers=st.integers(2, 12), hp=st.booleans())
def test_whole_gang_equals_placing_worker_by_worker(rnd: Round, draw_e: bool, g: int,
                                                    workers: int, hp: bool) -> None:
    st_ = rnd.state
    e = scores(rnd, draw_e)
    before = (st_.gpu_used.copy(), st_.node_free.copy(), dict(st_.alloc))
    jid = max(rnd.jobs, default=0) + 1   # the round's ids may be any, 10**6 included
    for pool in st_.pools:
        job = Job(jid, "o", pool, JobClass.HP if hp else JobClass.LP, g, workers, 0.0, 1.0)
        # a worker_fn forces the held, worker-by-worker route with the same best fit
        held = place_gang(st_, job, e, True,
                          worker_fn=lambda s, j: place_worker(s, j, e, True))
        direct = place_gang(st_, job, e, True)
        assert direct == held
        if direct is not None:
            assert whole_gang(st_, job, e) == direct
            st_.copy().allocate(job, direct)       # a valid gang placement
    assert np.array_equal(st_.gpu_used, before[0]) and np.array_equal(st_.node_free, before[1])
    assert st_.alloc == before[2] and st_.check() == []


def test_whole_gang_fills_the_tightest_node_first() -> None:
    state = ClusterState.from_nodes([("A", 8, "a"), ("A", 8, "b"), ("A", 4, "c")])
    state.allocate(Job(1, "o", "A", JobClass.LP, MILLI, 1, 0.0, 1.0), ((0, (0,)),))
    job = Job(2, "o", "A", JobClass.HP, 2 * MILLI, 5, 0.0, 1.0)
    # c has 4 free (2 workers), a has 7 (3 workers, GPUs 1-6), b stays empty
    assert whole_gang(state, job, None) == (
        (2, (0, 1)), (2, (2, 3)), (0, (1, 2)), (0, (3, 4)), (0, (5, 6)))
