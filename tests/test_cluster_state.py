"""ClusterState's incremental counters against a recount: the per-pool free-GPU histogram behind
`max_free` and `whole_slots`, the histogram of GPUs without HP behind `nonhp_slots`, and the
partly-used GPU counts behind `fits_shared` and `shared_slots`, and the HP usage levels behind
`hp_shared_slots` (which let best fit and worker counts skip a pass over the pool)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gfs_opt.model import MILLI, ClusterState, Job, JobClass
from gfs_opt.preempt.scoring import (
    best_gpu_fraction,
    best_node_whole,
    free_gpus_on,
    place_gang,
    worker_slots,
)

POOLS = ("A", "B")


def recount(state: ClusterState, pool: int, k: int) -> tuple[int, int]:
    lo, hi = state.pool_slice(pool)
    free = state.node_free[lo:hi]
    return int(free.max(initial=0)), int((free // k).sum())


def place_one(state: ClusterState, jobs: dict[int, Job], jid: int, pick: int, g: int,
              cls: JobClass) -> None:
    """A one-worker job of ``g`` milli on node ``pick`` (mod the nodes), on its first GPUs with
    room, recorded in ``jobs``; nothing if the node lacks room."""
    node = pick % state.n_nodes
    k = max(1, g // MILLI)
    a = int(state.node_first_gpu[node])
    local = [i for i in range(int(state.node_gpus[node]))
             if state.gpu_used[a + i] + min(g, MILLI) <= MILLI][:k]
    if len(local) < k:
        return
    job = Job(jid, "o", state.pools[int(state.node_pool[node])], cls, g, 1, 0.0, 1.0)
    state.allocate(job, ((node, tuple(local)),))
    jobs[job.id] = job


@settings(max_examples=80, deadline=None)
@given(sizes=st.lists(st.tuples(st.sampled_from(POOLS), st.sampled_from([1, 2, 4, 8])),
                      min_size=1, max_size=6),
       ops=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([250, 500, 1000, 2000]),
                              st.booleans(), st.booleans()), max_size=40))
def test_free_histogram_follows_every_change(sizes: list[tuple[str, int]],
                                             ops: list[tuple[int, int, bool, bool]]) -> None:
    state = ClusterState.from_nodes((p, g, f"n{i}") for i, (p, g) in enumerate(sizes))
    jobs: dict[int, Job] = {}
    for step, (pick, g, hp, release) in enumerate(ops):
        if release and jobs:
            state.release(jobs.pop(sorted(jobs)[pick % len(jobs)]))
        else:
            place_one(state, jobs, step, pick, g, JobClass.HP if hp else JobClass.LP)
        assert state.check() == []
        for p in range(len(state.pools)):
            for k in (1, 2, 4, 8):
                top, slots = recount(state, p, k)
                assert state.max_free(p) == top and state.whole_slots(p, k) == slots
                if top < k:
                    assert best_node_whole(state, p, k, JobClass.HP, None) == -1
            lo, hi = state.pool_slice(p)
            used = state.gpu_used[int(state.node_first_gpu[lo]):int(state.node_first_gpu[hi])]
            for g in (1, 250, 500, 750, 999):
                assert state.fits_shared(p, g) == bool(((used > 0) & (used <= MILLI - g)).any())
                assert state.shared_slots(p, g) == int(((MILLI - used) // g).sum())
                # best fit among partly used GPUs: the first with the smallest residual
                ok = (used > 0) & (used <= MILLI - g)
                first = int(state.node_first_gpu[lo])
                want = first + int(np.where(ok, MILLI - used, MILLI + 1).argmin()) if ok.any() else -1
                assert best_gpu_fraction(state, p, g) == want
            hp = state.gpu_hp[int(state.node_first_gpu[lo]):int(state.node_first_gpu[hi])]
            starts = state.node_first_gpu[lo:hi] - state.node_first_gpu[lo]
            without_hp = np.add.reduceat((hp == 0).astype(np.int64), starts) if len(hp) else hp
            for k in (1, 2, 4, 8):
                assert state.nonhp_slots(p, k) == int((without_hp // k).sum())
            for g in (1, 250, 500, 750, 999):
                assert state.hp_shared_slots(p, g) == int(((MILLI - hp) // g).sum())
    copy = state.copy()
    if jobs:  # a copy's histogram is its own
        state.release(jobs.pop(min(jobs)))
        assert copy.check() == [] and state.check() == []


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.tuples(st.sampled_from(POOLS), st.sampled_from([2, 4, 8])),
                      min_size=1, max_size=5),
       ops=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([1000, 2000, 4000]),
                              st.integers(1, 4), st.booleans(), st.booleans()), max_size=30))
def test_whole_gpu_gangs_keep_every_counter(sizes: list[tuple[str, int]],
                                            ops: list[tuple[int, int, int, bool, bool]]) -> None:
    """Gangs of whole GPUs (several workers per node: the node-at-once path of `allocate` and
    `release`) leave every counter equal to a recount."""
    state = ClusterState.from_nodes((p, g, f"n{i}") for i, (p, g) in enumerate(sizes))
    jobs: dict[int, Job] = {}
    for step, (pick, g, w, hp, release) in enumerate(ops):
        if release and jobs:
            state.release(jobs.pop(sorted(jobs)[pick % len(jobs)]))
        else:
            job = Job(step, "o", state.pools[pick % len(state.pools)],
                      JobClass.HP if hp else JobClass.LP, g, w, 0.0, 1.0)
            placement = place_gang(state, job, None)
            if placement is not None:
                state.allocate(job, placement)
                jobs[job.id] = job
        assert state.check() == []
        for node in range(state.n_nodes):
            a, b = int(state.node_first_gpu[node]), int(state.node_first_gpu[node + 1])
            free = np.flatnonzero(state.gpu_used[a:b] == 0).tolist()
            for k in (1, 2, 3, 8):
                assert free_gpus_on(state, node, k) == tuple(free[:k])


def test_a_kept_plan_compares_placements_by_value() -> None:
    from gfs_opt.sim.engine import _same_placement

    held = ((1, (2, 3)), (4, (0, 1)))
    assert _same_placement(held, ((1, (2, 3)), (4, (0, 1))))
    assert _same_placement(held, [(np.int64(1), np.array([2, 3])), (4, [0, 1])])
    assert not _same_placement(held, ((1, (3, 2)), (4, (0, 1))))
    assert not _same_placement(held, [(1, np.array([2, 4])), (4, (0, 1))])


@pytest.mark.parametrize("placement", [
    [(1, (0, 1))],                                  # a list of workers
    ((np.int64(1), (0, 1)),),                       # a numpy node
    ((1, [0, 1]),),                                 # a list of GPUs
    ((1, (np.int32(0), 1)),),                       # a numpy GPU
    ([1, (0, 1)],),                                 # a worker as a list
])
def test_allocate_records_any_placement_as_plain_ints(placement: object) -> None:
    state = ClusterState.from_nodes([("A", 4, "a"), ("A", 4, "b")])
    job = Job(7, "o", "A", JobClass.LP, 2000, 1, 0.0, 1.0)
    state.allocate(job, placement)  # type: ignore[arg-type]
    held = state.alloc[7][2]
    assert held == ((1, (0, 1)),)
    assert type(held) is tuple and all(type(wp) is tuple and type(wp[0]) is int
                                       and type(wp[1]) is tuple
                                       and all(type(lg) is int for lg in wp[1]) for wp in held)
    assert state.check() == []


def test_check_reports_a_histogram_out_of_step() -> None:
    state = ClusterState.from_nodes([("A", 8, "a"), ("A", 4, "b")])
    job = Job(1, "o", "A", JobClass.LP, 2000, 2, 0.0, 1.0)
    assert worker_slots(state, job) == 6
    state.allocate(job, ((0, (0, 1)), (1, (0, 1))))
    assert state.check() == [] and worker_slots(state, job) == 4 and state.max_free(0) == 6
    state.free_hist[0][6] -= 1
    assert any("histogram" in p for p in state.check())
    state.free_hist[0][6] += 1
    state.allocate(Job(2, "o", "A", JobClass.HP, 300, 1, 0.0, 1.0), ((0, (2,)),))
    assert state.partial_used[0] == {300: 1} and state.fits_shared(0, 700)
    assert not state.fits_shared(0, 701) and state.check() == []
    state.partial_used[0][300] = 2
    assert any("partly-used" in p for p in state.check())
    assert np.array_equal(state.node_free, [5, 2])


def test_plain_dict_copies_a_view_in_order() -> None:
    from collections import OrderedDict
    from types import MappingProxyType

    from gfs_opt.model import plain_dict

    src = {3: "c", 1: "a", 2: "b"}
    for m in (src, MappingProxyType(src), OrderedDict(src)):
        out = plain_dict(m)
        assert list(out.items()) == list(src.items()) and out is not src
        out.pop(3)
        assert 3 in src


@settings(max_examples=80, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6),
                              st.sampled_from([500, 1000, 2000]), st.sampled_from(["alloc", "release", "copy"])),
                    max_size=40))
def test_copies_share_job_maps_copy_on_write(ops: list[tuple[int, int, int, str]]) -> None:
    """A state and its copies (and copies of copies) change independently: after any mix of
    allocations, releases and copies, every state's job maps match its own allocations."""
    root = ClusterState.from_nodes([("A", 4, "a"), ("A", 2, "b"), ("B", 8, "c")])
    states: list[tuple[ClusterState, dict[int, Job]]] = [(root, {})]
    for step, (which, pick, g, op) in enumerate(ops):
        state, jobs = states[which % len(states)]
        if op == "copy":
            states.append((state.copy(), dict(jobs)))
        elif op == "release" and jobs:
            state.release(jobs.pop(sorted(jobs)[pick % len(jobs)]))
        else:
            place_one(state, jobs, step, pick, g, JobClass.LP)
        for s, js in states:
            assert s.check() == [] and set(s.alloc) == set(js)


@settings(max_examples=40, deadline=None)
@given(counts=st.tuples(*[st.integers(0, 10**6)] * 4), wait=st.floats(0, 1e7),
       flags=st.tuples(st.booleans(), st.booleans()), t=st.floats(0, 1e7))
def test_record_shortcuts_equal_dataclass_replace(counts: tuple[int, int, int, int], wait: float,
                                                  flags: tuple[bool, bool], t: float) -> None:
    """The engine's hot-path copies of `PoolStatus` and `RunningJob` (`counted`,
    `with_wait`, `checkpointed`) are exactly `dataclasses.replace` of the fields they change."""
    from dataclasses import replace

    from gfs_opt.model import PoolStatus, RunningJob

    status = PoolStatus(0.5, counts[0], counts[1], wait, flags[0])
    assert status.counted(flags[1]) == (replace(status, succeeded=status.succeeded + 1)
                                        if flags[1] else replace(status, failed=status.failed + 1))
    assert status.with_wait(t, float(counts[2])) == replace(
        status, oldest_lp_wait=t, hp_whole_gpus=float(counts[2]))
    rj = RunningJob(Job(7, "o", "A", JobClass.LP, 2000, 2, 1.0, 9.0), 3.0, 4.0, 5.0,
                    ((0, (0, 1)), (1, (2, 3))), counts[0])
    assert rj.checkpointed(t) == replace(rj, last_ckpt=t, window_start=t)
