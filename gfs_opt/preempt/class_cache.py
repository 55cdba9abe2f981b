"""The GPU classes of a pool kept between passes: a node's classes are recomputed only when what
they are made of changed (issue 39).

A contested pass of gfs-milp prices every GPU of its pool (`gfs_opt.preempt.block.pool_classes`,
from every running job's placement, `evictable_lp`), yet between two passes of a backlogged
pool a handful of its nodes change (the Chronus backlog at capacity 1: 606 passes over a
235-node pool reuse 89 % of the nodes' classes).
A node's classes are a function of the running jobs on it (their placements, classes, pools and,
under a hard guarantee, whether each one's window is still open) and of the pools the model
evicts from, so each node keeps the jobs its classes were computed from and they are reused
while

* the node holds the same running jobs with the same placements (under a hard guarantee the
  same `RunningJob` values: a job checkpointed into a new window is another value, and may
  be protected again),
* no GPU of the node changed its usage since (a second, independent check of the same thing),
* every job that the hard guarantee protected then is still inside its window (one that was
  not protected never becomes so while time runs forward: a new window is a new value).

What is handed out is the `GpuClass` objects of the node's last computation: the same fields,
in the same order, as `pool_classes` makes from scratch, so the model built from them is the
same model (``tests/test_preempt_class_cache.py`` compares the exported models over random
sequences of passes). `build_block` sets the per-model fields of every class it uses, so a
block built from them is good until the next pass built with the same cache.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from gfs_opt.model import JobClass, Round, RunningJob
from gfs_opt.preempt.block import GpuClass, evictable_lp, pool_classes


@dataclass(slots=True)
class _Node:
    runs: tuple[RunningJob | None, ...]    # the node's running jobs when its classes were made
    guarded: tuple[RunningJob, ...]        # those the hard guarantee protected then
    classes: list[GpuClass]


@dataclass(slots=True)
class _Pool:
    time: float
    first: np.ndarray                      # the pool's nodes' first GPUs (the same cluster?)
    used: np.ndarray                       # the pool's GPU usage then
    nodes: list[_Node]


class ClassCache:
    """GPU classes by pool, kept from one pass to the next (`classes`). One per policy: a pass
    only reads it through `classes`, which checks every node it reuses."""

    def __init__(self) -> None:
        self._pools: dict[tuple[str, tuple[str, ...], bool], _Pool] = {}
        self.reused = 0       # nodes whose classes were reused / recomputed (for benchmarks)
        self.computed = 0

    def classes(self, rnd: Round, pool: str, pools: Collection[str], protect: bool
                ) -> dict[int, list[GpuClass]]:
        """`pool_classes` of ``pool``'s nodes for a model evicting LP jobs of ``pools`` (with
        ``protect`` = the hard guarantee), from the nodes' last classes where nothing changed."""
        st = rnd.state
        lo, hi = st.pool_slice(pool)
        if hi <= lo:
            return {}
        key = (pool, tuple(sorted(pools)), protect)
        g0 = int(st.node_first_gpu[lo])
        g1 = int(st.node_first_gpu[hi])   # (`node_first_gpu` has n_nodes + 1 entries)
        used = st.gpu_used[g0:g1]
        t, running, node_jobs = rnd.time, rnd.running, st.node_jobs
        runs = [tuple(map(running.get, node_jobs[n])) for n in range(lo, hi)]
        old = self._pools.get(key)
        first = st.node_first_gpu[lo:hi + 1]
        if old is None or t < old.time or not np.array_equal(old.first, first):
            changed = list(range(lo, hi))
        else:
            moved = set((st.gpu_node[g0 + np.flatnonzero(old.used != used)]).tolist())
            changed = [n for n, now, node in zip(range(lo, hi), runs, old.nodes, strict=True)
                       if n in moved or not _same(node, now, protect, t)]
        nodes = list(old.nodes) if old is not None and len(changed) < hi - lo else [
            _Node((), (), []) for _ in range(lo, hi)]
        if changed:
            jobs = {j for n in changed for j in node_jobs[n]}
            per_gpu = evictable_lp(rnd, protect, pools, jobs)
            fresh = pool_classes(rnd, lo, hi, per_gpu, changed if len(changed) < hi - lo else None)
            for n in changed:
                now = runs[n - lo]
                guarded = tuple(r for r in now if r is not None and r.job.cls is JobClass.LP
                                and r.job.pool in pools and r.in_window(t)) if protect else ()
                nodes[n - lo] = _Node(now, guarded, fresh[n])
        self.computed += len(changed)
        self.reused += hi - lo - len(changed)
        self._pools[key] = _Pool(t, first.copy(), used.copy(), nodes)
        return {n: node.classes for n, node in zip(range(lo, hi), nodes, strict=True)}


def _same(node: _Node, runs: tuple[RunningJob | None, ...], protect: bool, t: float) -> bool:
    """Whether ``node``'s classes still hold for its running jobs ``runs`` at time ``t``."""
    if node.runs != runs:
        # without a hard guarantee a new window (a checkpoint) changes nothing: the same jobs
        # in the same placements make the same classes
        if protect or len(node.runs) != len(runs) or not all(
                a is not None and b is not None and a.job.id == b.job.id
                and a.placement == b.placement for a, b in zip(node.runs, runs, strict=True)):
            return False
        node.runs = runs
    return all(r.in_window(t) for r in node.guarded)
