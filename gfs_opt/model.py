"""Shared vocabulary: jobs, nodes, cluster state, the `Round` snapshot and the `Decision`.

GPU amounts are integer milli-GPUs (1 GPU = 1000) so that fractional sums never drift.
A worker asking for ``g < 1000`` shares one GPU; a worker asking for ``g = k * 1000`` takes
``k`` distinct GPUs of one node. Every policy, exact or greedy, reads a `Round` and returns a
`Decision`; the simulator and the instance files speak exactly these types.

The contract between engine and policy: a `Round` is read-only for the policy (a frozen
dataclass of read-only mappings and frozen records, valid for the pass it is handed in). The
one exception is ``Round.state``, on which a pass plans tentatively: the engine records the
changes and rolls them back before it applies the returned `Decision`. Everything a policy wants
changed — placements, victims, quotas, η, forecasts, solver reports — travels in the `Decision`;
what it needs to remember lives in the policy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import pairwise
from types import MappingProxyType
from typing import TypeVar

import numpy as np

K = TypeVar("K")
V = TypeVar("V")

MILLI = 1000
HOUR = 3600.0


class JobClass(StrEnum):
    HP = "HP"
    LP = "LP"


def gpus_to_milli(gpus: float) -> int:
    """Per-worker request in GPUs → milli-GPU. Non-integer requests above one GPU round up."""
    if gpus <= 0 or not math.isfinite(gpus):
        raise ValueError(f"GPU request must be positive and finite, got {gpus}")
    if gpus < 1:
        return max(1, round(gpus * MILLI))
    return math.ceil(gpus - 1e-9) * MILLI


def gpus_per_worker(g: int) -> int:
    """Number of distinct GPUs one worker occupies (1 for fractional requests)."""
    return 1 if g < MILLI else g // MILLI


def milli_per_gpu(g: int) -> int:
    """Milli-GPU a worker holds on each of its GPUs."""
    return g if g < MILLI else MILLI


@dataclass(slots=True)
class Job:
    """A submitted job. ``g`` is the per-worker request in milli-GPU."""

    id: int
    org: str
    pool: str
    cls: JobClass
    g: int
    workers: int
    submit: float
    duration: float
    guarantee_h: float = 1.0  # LP guarantee class in hours; ignored for HP
    cpu: float = 0.0

    @property
    def demand(self) -> int:
        """Total milli-GPU of the whole gang (g·w)."""
        return self.g * self.workers

    @property
    def is_hp(self) -> bool:
        return self.cls is JobClass.HP

    @property
    def guarantee_s(self) -> float:
        return self.guarantee_h * HOUR


# One worker's placement: the node and the node-local GPU indices it occupies.
WorkerPlacement = tuple[int, tuple[int, ...]]
Placement = tuple[WorkerPlacement, ...]


def plain_dict(m: Mapping[K, V]) -> dict[K, V]:
    """A dict with ``m``'s items in its order. A read-only view of a dict (the engine hands
    those) is copied at C speed; ``dict(view)`` would walk it key by key, ~30× slower."""
    return m.copy() if isinstance(m, dict | MappingProxyType) else dict(m)


def normalized(placement: Iterable[tuple[int, Iterable[int]]]) -> Placement:
    """A placement as plain ints (policies may hand numpy ints or lists), as state records it."""
    return tuple((int(n), tuple(map(int, g))) for n, g in placement)


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding GPUs. ``window_start`` is when its current guarantee window began."""

    job: Job
    start: float
    last_ckpt: float
    window_start: float
    placement: Placement
    evictions: int = 0

    def checkpointed(self, t: float) -> RunningJob:
        """This job after a checkpoint at ``t`` that starts a new guarantee window (the same
        as ``dataclasses.replace(self, last_ckpt=t, window_start=t)``, at half the cost: the
        engine does it at every window end)."""
        return RunningJob(self.job, self.start, t, t, self.placement, self.evictions)

    def wasted_work(self, t: float) -> float:
        """GPU-seconds lost if evicted now: c_j = g·w·(t − last_ckpt) (in GPUs, not milli)."""
        return self.job.demand / MILLI * max(0.0, t - self.last_ckpt)

    def in_window(self, t: float) -> bool:
        return self.job.cls is JobClass.LP and t - self.window_start < self.job.guarantee_s

    def at_boundary(self, t: float) -> bool:
        """Its guarantee window restarts at ``t`` (a checkpoint, not its first start): taken
        back now, it breaks no window and loses no work."""
        return self.window_start == t and self.start < t


class AllocationError(ValueError):
    """A placement that would over-allocate a GPU or break a gang."""


_Shared = TypeVar("_Shared", dict[int, int], set[int])


def _owned(maps: list[_Shared], own: set[int] | None, i: int) -> _Shared:
    """``maps[i]``, replaced by a copy first unless ``own`` (None: all) says it is unshared
    (`ClusterState.copy` shares the job maps copy-on-write)."""
    m = maps[i]
    if own is not None and i not in own:
        m = maps[i] = m.copy()
        own.add(i)
    return m


def _count_level(levels: dict[int, int], before: int, after: int) -> None:
    """Move one GPU between the partial levels of a per-pool count (0 and 1000 are not kept)."""
    if 0 < before < MILLI:
        left = levels[before] - 1
        if left:
            levels[before] = left
        else:
            del levels[before]
    if 0 < after < MILLI:
        levels[after] = levels.get(after, 0) + 1


class ClusterState:
    """Per-GPU allocations with per-node counters kept incrementally for fast scoring.

    Nodes are stored grouped by pool so that ``pool_slice(p)`` is a contiguous range and
    vectorised scoring over a pool touches numpy views only. ``gpu_used``/``gpu_hp`` hold the
    milli-GPU allocated in total and to HP jobs on each GPU.
    """

    def __init__(self, pools: Sequence[str], node_pool: Sequence[str], node_gpus: Sequence[int],
                 node_names: Sequence[str] | None = None) -> None:
        self.pools: list[str] = list(pools)
        self.pool_index = {p: i for i, p in enumerate(self.pools)}
        if len(node_pool) != len(node_gpus):
            raise ValueError("node_pool and node_gpus must have the same length")
        pidx = [self.pool_index[p] for p in node_pool]
        if any(b < a for a, b in pairwise(pidx)):
            raise ValueError("nodes must be grouped by pool in pool order")
        self.n_nodes = len(node_pool)
        self.node_pool = np.asarray(pidx, dtype=np.int32)
        self.node_gpus = np.asarray(node_gpus, dtype=np.int32)
        if self.n_nodes and (self.node_gpus < 1).any():
            raise ValueError("every node needs at least one GPU")
        self.node_names = list(node_names) if node_names is not None else [str(i) for i in range(self.n_nodes)]
        self.node_first_gpu = np.zeros(self.n_nodes + 1, dtype=np.int64)
        np.cumsum(self.node_gpus, out=self.node_first_gpu[1:])
        self.n_gpus = int(self.node_first_gpu[-1])
        self.gpu_node = np.repeat(np.arange(self.n_nodes, dtype=np.int32), self.node_gpus)
        self._gpu_node: list[int] = self.gpu_node.tolist()  # scalar access is hot
        self.gpu_used = np.zeros(self.n_gpus, dtype=np.int32)
        self.gpu_hp = np.zeros(self.n_gpus, dtype=np.int32)
        # per-node counters: fully free GPUs, GPUs with any HP, GPUs with LP but no HP
        self.node_free = self.node_gpus.copy()
        # per pool, how many nodes have f fully free GPUs (index f): "does any node have k free
        # GPUs" and whole-GPU worker slots without a pass over the pool's nodes
        self._node_pool: list[int] = pidx
        self._node_first: list[int] = self.node_first_gpu.tolist()  # static: scalar access is hot
        self._node_gpus: list[int] = self.node_gpus.tolist()
        self.free_hist: list[list[int]] = [[0] * (int(self.node_gpus.max(initial=0)) + 1)
                                           for _ in self.pools]
        for pi, n_gpus in zip(pidx, node_gpus, strict=True):
            self.free_hist[pi][int(n_gpus)] += 1
        # per pool, partly used GPUs by their usage: "does any shared GPU fit g" without a pass
        self.partial_used: list[dict[int, int]] = [{} for _ in self.pools]
        self.node_hp_gpus = np.zeros(self.n_nodes, dtype=np.int32)
        self.node_lp_gpus = np.zeros(self.n_nodes, dtype=np.int32)
        # per pool, how many nodes have f GPUs without HP (index f): the GPUs preemption can
        # free, so whole-GPU worker slots under preemption without a pass over the pool's nodes
        self.nonhp_hist: list[list[int]] = [list(h) for h in self.free_hist]
        # per pool, GPUs with some HP but room left by their HP usage: with `nonhp_hist`, the
        # fractional worker slots under preemption (`hp_shared_slots`)
        self.partial_hp: list[dict[int, int]] = [{} for _ in self.pools]
        self.gpu_jobs: list[dict[int, int]] = [dict() for _ in range(self.n_gpus)]
        self.node_jobs: list[set[int]] = [set() for _ in range(self.n_nodes)]
        # copy-on-write of those maps between a state and its copies (see `copy`): the indices
        # whose map this state may change in place; None: all of them (never copied)
        self._own_gpu: set[int] | None = None
        self._own_node: set[int] | None = None
        self.alloc: dict[int, tuple[JobClass, int, Placement]] = {}
        bounds = np.searchsorted(self.node_pool, np.arange(len(self.pools) + 1))
        self._pool_bounds = [(int(bounds[i]), int(bounds[i + 1])) for i in range(len(self.pools))]
        #: per pool, its largest node's GPUs (G_p): a worker of G_p whole GPUs takes a whole node
        self.pool_node_gpus: list[int] = [int(self.node_gpus[a:b].max(initial=0))
                                          for a, b in self._pool_bounds]
        self.pool_capacity = np.array([int(self.node_gpus[a:b].sum()) * MILLI for a, b in self._pool_bounds],
                                      dtype=np.int64)
        self.pool_used = np.zeros(len(self.pools), dtype=np.int64)
        self.pool_hp = np.zeros(len(self.pools), dtype=np.int64)
        self.pool_lp = np.zeros(len(self.pools), dtype=np.int64)
        self._journal: list[tuple[str, int, tuple]] | None = None

    # ---- construction helpers -------------------------------------------------------------
    @classmethod
    def from_nodes(cls, nodes: Iterable[tuple[str, int, str]]) -> ClusterState:
        """Build from (pool, gpus, name) triples in any order (stable-sorted by pool)."""
        rows = list(nodes)
        pools = sorted({r[0] for r in rows})
        order = sorted(range(len(rows)), key=lambda i: (pools.index(rows[i][0]), i))
        return cls(pools, [rows[i][0] for i in order], [rows[i][1] for i in order],
                   [rows[i][2] for i in order])

    def pool_slice(self, pool: str | int) -> tuple[int, int]:
        p = self.pool_index[pool] if isinstance(pool, str) else pool
        return self._pool_bounds[p]

    def gpu_index(self, node: int, local: int) -> int:
        return int(self.node_first_gpu[node]) + local

    def capacity_gpus(self, pool: str) -> int:
        return int(self.pool_capacity[self.pool_index[pool]] // MILLI)

    # ---- mutation ---------------------------------------------------------------------------
    def allocate(self, job: Job, placement: Placement) -> None:
        """Place a whole gang; raises `AllocationError` without changing anything on failure."""
        if job.id in self.alloc:
            raise AllocationError(f"job {job.id} is already allocated")
        if len(placement) != job.workers:
            raise AllocationError(f"job {job.id}: {len(placement)} workers placed, gang needs {job.workers}")
        jid = job.id
        pidx = self.pool_index.get(job.pool)
        # a placement of plain ints in tuples (what the built-in placers hand) is kept as it
        # is; anything else (numpy ints, lists) is stored `normalized`
        hp = job.cls is JobClass.HP
        if job.g >= MILLI:
            plain = self._take_whole(job, placement, pidx, hp)
        else:
            plain = self._take_shared(job, placement, pidx, hp)
        own, node_jobs = self._own_node, self.node_jobs
        for node, _gpus in placement:
            (node_jobs[node] if own is None else self._node_set(node)).add(jid)
        self.alloc[jid] = (job.cls, job.g, placement if plain else normalized(placement))
        p = self.pool_index[job.pool] if pidx is None else pidx
        demand = job.demand
        self.pool_used[p] = self.pool_used.item(p) + demand
        if hp:
            self.pool_hp[p] = self.pool_hp.item(p) + demand
        else:
            self.pool_lp[p] = self.pool_lp.item(p) + demand
        if self._journal is not None:
            self._journal.append(("alloc", jid, (job,)))

    def _worker_gpus(self, job: Job, pidx: int | None, k: int, wp: WorkerPlacement
                     ) -> tuple[int, list[int], bool]:
        """A worker's node and global GPU indices, checked against the cluster (not against
        what runs on it); and whether it is given as plain ints in tuples."""
        jid = job.id
        node, gpus = wp
        if not 0 <= node < self.n_nodes:
            raise AllocationError(f"job {jid}: unknown node {node}")
        if pidx is None or self._node_pool[node] != pidx:
            raise AllocationError(f"job {jid}: node {node} is not in pool {job.pool}")
        if len(gpus) != k or (k > 1 and len(set(gpus)) != k):
            raise AllocationError(f"job {jid}: worker needs {k} distinct GPUs, got {gpus}")
        plain = type(node) is int and type(gpus) is tuple and type(wp) is tuple
        first, n_gpus = self._node_first[node], self._node_gpus[node]
        out: list[int] = []
        for lg in gpus:
            if not 0 <= lg < n_gpus:
                raise AllocationError(f"job {jid}: node {node} has no GPU {lg}")
            if type(lg) is not int:
                plain = False
                lg = int(lg)
            out.append(first + lg)
        return int(node), out, plain

    def _take_whole(self, job: Job, placement: Placement, pidx: int | None, hp: bool) -> bool:
        """`allocate`'s GPU part for whole-GPU workers: each GPU goes from free to full, so a
        worker's node counters move once by the GPUs it takes, not once per GPU (a whole-GPU gang
        holds 7 GPUs on average in the full trace). Returns whether the placement is plain."""
        jid, k = job.id, gpus_per_worker(job.g)
        used = self.gpu_used
        workers: list[tuple[int, list[int]]] = []
        plain = type(placement) is tuple
        n_taken = 0
        for wp in placement:
            node, gis, plain_wp = self._worker_gpus(job, pidx, k, wp)
            plain = plain and plain_wp
            for gi in gis:
                if used.item(gi):
                    raise AllocationError(f"job {jid}: GPU {gi} over-allocated "
                                          f"({used.item(gi)} + {MILLI} > {MILLI})")
            workers.append((node, gis))
            n_taken += k
        if len(workers) > 1 and len({gi for _n, gis in workers for gi in gis}) != n_taken:
            gi, n = Counter(gi for _n, gis in workers for gi in gis).most_common(1)[0]
            raise AllocationError(f"job {jid}: GPU {gi} over-allocated "
                                  f"(0 + {n * MILLI} > {MILLI}: given to {n} workers)")
        hp_used, own = self.gpu_hp, self._own_gpu
        for node, gis in workers:
            for gi in gis:
                (self.gpu_jobs[gi] if own is None else self._gpu_map(gi))[jid] = MILLI
                used[gi] = MILLI
                if hp:
                    hp_used[gi] = MILLI
            self._move_free(node, -k)
            if hp:
                self._move_hp(node, k)
            else:
                self.node_lp_gpus[node] = self.node_lp_gpus.item(node) + k
        return plain

    def _take_shared(self, job: Job, placement: Placement, pidx: int | None, hp: bool) -> bool:
        """`allocate`'s GPU part for fractional workers (several may share a GPU)."""
        jid, m = job.id, job.g
        want: dict[int, int] = {}
        plain = type(placement) is tuple
        for wp in placement:
            _node, gis, plain_wp = self._worker_gpus(job, pidx, 1, wp)
            plain = plain and plain_wp
            gi = gis[0]
            want[gi] = want.get(gi, 0) + m
        used = self.gpu_used
        for gi, mm in want.items():
            if used.item(gi) + mm > MILLI:
                raise AllocationError(
                    f"job {jid}: GPU {gi} over-allocated ({int(used[gi])} + {mm} > {MILLI})")
        for gi, mm in want.items():
            self._add(gi, jid, mm, hp)
        return plain

    def _node_set(self, node: int) -> set[int]:
        """Node ``node``'s job set, made this state's own before a change."""
        return _owned(self.node_jobs, self._own_node, node)

    def _gpu_map(self, gi: int) -> dict[int, int]:
        """GPU ``gi``'s job map, made this state's own before a change."""
        return _owned(self.gpu_jobs, self._own_gpu, gi)

    def release(self, job: Job) -> Placement:
        """Free every GPU of a job; returns its placement."""
        entry = self.alloc.pop(job.id, None)
        if entry is None:
            raise AllocationError(f"job {job.id} holds no GPUs")
        cls_, g, placement = entry
        per_gpu = milli_per_gpu(g)
        hp = cls_ is JobClass.HP
        whole = per_gpu == MILLI
        for node, gpus in placement:
            base = self._node_first[node]
            if whole:
                self._free_whole(node, base, gpus, job.id, hp)
            else:
                for lg in gpus:
                    self._remove(base + lg, job.id, per_gpu, hp)
            (self.node_jobs[node] if self._own_node is None else self._node_set(node)).discard(job.id)
        p = self.pool_index[job.pool]
        self.pool_used[p] = self.pool_used.item(p) - job.demand
        if hp:
            self.pool_hp[p] = self.pool_hp.item(p) - job.demand
        else:
            self.pool_lp[p] = self.pool_lp.item(p) - job.demand
        if self._journal is not None:
            self._journal.append(("release", job.id, (job, placement)))
        return placement

    def _free_whole(self, node: int, base: int, gpus: tuple[int, ...], job_id: int,
                    hp: bool) -> None:
        """`_remove` of job ``job_id``'s whole GPUs of ``node`` (local indices ``gpus``, the
        node's first GPU ``base``): it held each alone."""
        used, hp_used = self.gpu_used, self.gpu_hp
        own = self._own_gpu
        for lg in gpus:
            gi = base + lg
            del (self.gpu_jobs[gi] if own is None else self._gpu_map(gi))[job_id]
            used[gi] = 0
            if hp:
                hp_used[gi] = 0
        c = len(gpus)
        self._move_free(node, c)
        if hp:
            self._move_hp(node, -c)
        else:
            self.node_lp_gpus[node] = self.node_lp_gpus.item(node) - c

    def _move_free(self, node: int, d_free: int) -> None:
        """Change a node's count of fully free GPUs and its pool's histogram of those counts."""
        f0 = self.node_free.item(node)
        self.node_free[node] = f0 + d_free
        hist = self.free_hist[self._node_pool[node]]
        hist[f0] -= 1
        hist[f0 + d_free] += 1

    def _move_hp(self, node: int, d_hp: int) -> None:
        """Change a node's count of GPUs with HP and its pool's histogram of GPUs without."""
        h0 = self.node_hp_gpus.item(node)
        self.node_hp_gpus[node] = h0 + d_hp
        a0 = self._node_gpus[node] - h0
        hist = self.nonhp_hist[self._node_pool[node]]
        hist[a0] -= 1
        hist[a0 - d_hp] += 1

    def _add(self, gi: int, job_id: int, m: int, hp: bool) -> None:
        jobs = self.gpu_jobs[gi]
        if self._own_gpu is not None:   # inline test: the call costs more in the hot path
            jobs = self._gpu_map(gi)
        jobs[job_id] = jobs.get(job_id, 0) + m
        self._change(gi, m, m if hp else 0)

    def _remove(self, gi: int, job_id: int, m: int, hp: bool) -> None:
        jobs = self.gpu_jobs[gi]
        if self._own_gpu is not None:
            jobs = self._gpu_map(gi)
        left = jobs[job_id] - m
        if left:
            jobs[job_id] = left
        else:
            del jobs[job_id]
        self._change(gi, -m, -m if hp else 0)

    def _change(self, gi: int, du: int, dh: int) -> None:
        """Apply a usage change to one GPU and keep its node's counters in step."""
        # .item() and plain ints: numpy scalar arithmetic here costs more than the update itself
        u0 = self.gpu_used.item(gi)
        h0 = self.gpu_hp.item(gi)
        u1, h1 = u0 + du, h0 + dh
        self.gpu_used[gi] = u1
        node = self._gpu_node[gi]
        if dh:
            self.gpu_hp[gi] = h1
            if 0 < h0 < MILLI or 0 < h1 < MILLI:
                _count_level(self.partial_hp[self._node_pool[node]], h0, h1)
        if 0 < u0 < MILLI or 0 < u1 < MILLI:
            _count_level(self.partial_used[self._node_pool[node]], u0, u1)
        d_free = (u1 == 0) - (u0 == 0)
        if d_free:
            self._move_free(node, d_free)
        d_hp = (h1 > 0) - (h0 > 0)
        if d_hp:
            self._move_hp(node, d_hp)
        d_lp = (u1 > 0 and h1 == 0) - (u0 > 0 and h0 == 0)
        if d_lp:
            self.node_lp_gpus[node] = self.node_lp_gpus.item(node) + d_lp

    # ---- tentative changes (policies plan on the live state, the engine rolls back) ---------
    def begin(self) -> None:
        """Start recording changes so that `rollback` can undo them."""
        self._journal = []

    def mark(self) -> int:
        """A point to roll back to (starts recording if it was not)."""
        if self._journal is None:
            self._journal = []
        return len(self._journal)

    def rollback(self, to: int = 0) -> None:
        """Undo every recorded change after mark ``to``; recording goes on."""
        journal = self._journal or []
        tail = journal[to:]
        self._journal = None
        try:
            for op, _jid, args in reversed(tail):
                if op == "alloc":
                    self.release(args[0])
                else:
                    job, placement = args
                    self.allocate(job, placement)
        finally:
            self._journal = journal[:to]

    def commit(self) -> None:
        """Stop recording; keep the changes."""
        self._journal = None

    def recorded(self) -> tuple[list[int], list[int]]:
        """Ids of the jobs allocated and released since recording began, in order."""
        journal = self._journal
        if not journal:
            return [], []
        return ([jid for op, jid, _a in journal if op == "alloc"],
                [jid for op, jid, _a in journal if op == "release"])

    # ---- queries ------------------------------------------------------------------------------
    def gpus_of(self, job_id: int) -> list[int]:
        _c, _g, placement = self.alloc[job_id]
        return [int(self.node_first_gpu[n]) + lg for n, gpus in placement for lg in gpus]

    def lp_jobs_on(self, node: int) -> list[int]:
        return sorted(j for j in self.node_jobs[node] if self.alloc[j][0] is JobClass.LP)

    def nonhp_gpus(self, node: int) -> int:
        """GPUs of a node that hold no HP allocation (free or LP-only)."""
        return int(self.node_gpus[node] - self.node_hp_gpus[node])

    def copy(self) -> ClusterState:
        """Independent copy (used by exact solvers and instance tools, not in hot loops).

        The per-GPU and per-node job maps are shared copy-on-write: both states give up owning
        them and copy one map before their first change to it (`_gpu_map`, `_node_set`). Copying
        the ~13,000 maps of the full trace's cluster took 15 ms, twice per contested pass of
        gfs-milp; a pass changes a few."""
        new = ClusterState.__new__(ClusterState)
        for name, value in self.__dict__.items():
            if isinstance(value, np.ndarray):
                setattr(new, name, value.copy())
            else:
                setattr(new, name, value)
        new.gpu_jobs = list(self.gpu_jobs)
        new.node_jobs = list(self.node_jobs)
        self._own_gpu, self._own_node = set(), set()
        new._own_gpu, new._own_node = set(), set()
        new.alloc = dict(self.alloc)
        new.free_hist = [list(h) for h in self.free_hist]
        new.nonhp_hist = [list(h) for h in self.nonhp_hist]
        new.partial_used = [dict(d) for d in self.partial_used]
        new.partial_hp = [dict(d) for d in self.partial_hp]
        new._journal = None
        return new

    def check(self) -> list[str]:
        """Recompute every counter from scratch; returns the list of inconsistencies found."""
        problems: list[str] = []
        used = np.zeros(self.n_gpus, dtype=np.int64)
        hp = np.zeros(self.n_gpus, dtype=np.int64)
        gpu_jobs: list[dict[int, int]] = [{} for _ in range(self.n_gpus)]
        node_jobs: list[set[int]] = [set() for _ in range(self.n_nodes)]
        for jid, (cls_, g, placement) in self.alloc.items():
            m = milli_per_gpu(g)
            for node, gpus in placement:
                node_jobs[node].add(jid)
                for lg in gpus:
                    gi = int(self.node_first_gpu[node]) + lg
                    used[gi] += m
                    gpu_jobs[gi][jid] = gpu_jobs[gi].get(jid, 0) + m
                    if cls_ is JobClass.HP:
                        hp[gi] += m
            if len(placement) == 0:
                problems.append(f"job {jid} has an empty placement")
        if gpu_jobs != self.gpu_jobs or node_jobs != self.node_jobs:
            problems.append("per-GPU or per-node job maps disagree with allocations")
        if (used > MILLI).any():
            problems.append(f"{int((used > MILLI).sum())} GPUs over-allocated")
        if not np.array_equal(used, self.gpu_used) or not np.array_equal(hp, self.gpu_hp):
            problems.append("per-GPU usage counters disagree with allocations")
        free: np.ndarray | list[int] = (np.add.reduceat((used == 0).astype(np.int32),
                                                        self.node_first_gpu[:-1])
                                          if self.n_gpus else [])
        if self.n_gpus and not np.array_equal(free, self.node_free):
            problems.append("per-node free counters disagree with allocations")
        hist = [[0] * len(h) for h in self.free_hist]
        for node, f in enumerate(np.asarray(free, dtype=np.int64).tolist()):
            hist[self._node_pool[node]][f] += 1
        if hist != self.free_hist:
            problems.append("per-pool free-GPU histograms disagree with allocations")
        if self.n_gpus:
            starts = self.node_first_gpu[:-1]
            with_hp = np.add.reduceat((hp > 0).astype(np.int32), starts)
            lp_only = np.add.reduceat(((used > 0) & (hp == 0)).astype(np.int32), starts)
            if (not np.array_equal(with_hp, self.node_hp_gpus)
                    or not np.array_equal(lp_only, self.node_lp_gpus)):
                problems.append("per-node HP / LP GPU counters disagree with allocations")
            nonhp = [[0] * len(h) for h in self.nonhp_hist]
            for node, a in enumerate((self.node_gpus - with_hp).tolist()):
                nonhp[self._node_pool[node]][a] += 1
            if nonhp != self.nonhp_hist:
                problems.append("per-pool histograms of GPUs without HP disagree with allocations")
        if self._partial_levels(used) != self.partial_used:
            problems.append("per-pool partly-used GPU counts disagree with allocations")
        if self._partial_levels(hp) != self.partial_hp:
            problems.append("per-pool counts of GPUs partly used by HP disagree with allocations")
        return problems

    def _partial_levels(self, per_gpu: np.ndarray) -> list[dict[int, int]]:
        """Per pool, how many GPUs hold each level strictly between 0 and 1000 (a recount)."""
        levels: list[dict[int, int]] = [{} for _ in self.pools]
        for gi, u in enumerate(per_gpu.tolist()):
            if 0 < u < MILLI:
                d = levels[self._node_pool[self._gpu_node[gi]]]
                d[u] = d.get(u, 0) + 1
        return levels

    def fits_shared(self, pool: int, g: int) -> bool:
        """Whether some partly used GPU of a pool has ``g`` milli left."""
        part = self.partial_used[pool]
        return bool(part) and min(part) <= MILLI - g

    def max_free(self, pool: int) -> int:
        """The most fully free GPUs on any node of a pool."""
        hist = self.free_hist[pool]
        for f in range(len(hist) - 1, 0, -1):
            if hist[f]:
                return f
        return 0

    def whole_free_nodes(self, pool: int) -> int:
        """Nodes of the pool's largest size G_p with every GPU free: what a worker of G_p whole
        GPUs can start on without evicting anyone."""
        return self.free_hist[pool][self.pool_node_gpus[pool]]

    def takes_whole_node(self, job: Job) -> bool:
        """Whether each worker of ``job`` takes a whole node of its pool's largest size."""
        p = self.pool_index.get(job.pool)
        return (p is not None and job.g >= MILLI
                and gpus_per_worker(job.g) >= self.pool_node_gpus[p] > 0)

    def whole_slots(self, pool: int, k: int) -> int:
        """Σ_n ⌊free_n / k⌋ over a pool's nodes: workers of k whole GPUs that fit side by side."""
        return _whole_slots(self.free_hist[pool], k)

    def nonhp_slots(self, pool: int, k: int) -> int:
        """Σ_n ⌊a_n / k⌋ with a_n the GPUs of node n without HP: workers of k whole GPUs that
        fit side by side once every LP job is evicted."""
        return _whole_slots(self.nonhp_hist[pool], k)

    def hp_shared_slots(self, pool: int, g: int) -> int:
        """Σ over a pool's GPUs of ⌊(1000 − HP usage) / g⌋: workers of g < 1000 milli that fit
        side by side once every LP job is evicted."""
        return _shared_slots(self.nonhp_hist[pool], self.partial_hp[pool], g)

    def shared_slots(self, pool: int, g: int) -> int:
        """Σ over a pool's GPUs of ⌊(1000 − used) / g⌋: workers of g < 1000 milli that fit side
        by side, from the free-GPU histogram and the partly used GPUs' usages (a full GPU adds 0)."""
        return _shared_slots(self.free_hist[pool], self.partial_used[pool], g)


def _whole_slots(hist: list[int], k: int) -> int:
    """Σ_f hist[f]·⌊f / k⌋: workers of k whole GPUs on nodes counted by their open GPUs f."""
    n = 0
    for f in range(k, len(hist)):   # a plain loop: asked before most tries, and sum() of a
        c = hist[f]                 # generator costs twice as much
        if c:
            n += c * (f // k)
    return n


def _shared_slots(hist: list[int], levels: dict[int, int], g: int) -> int:
    """Workers of g < 1000 milli on the open GPUs of nodes counted by ``hist`` (each holds
    ⌊1000 / g⌋) and on GPUs counted by their partial level (each holds ⌊(1000 − level) / g⌋)."""
    open_gpus = 0
    for f in range(1, len(hist)):   # plain loops, as in `_whole_slots`
        c = hist[f]
        if c:
            open_gpus += f * c
    n = open_gpus * (MILLI // g)
    for u, c in levels.items():
        n += c * ((MILLI - u) // g)
    return n


@dataclass(slots=True)
class PoolForecast:
    """HP GPU demand forecast for one pool: per future hour h (0 = current hour)."""

    mean: np.ndarray
    std: np.ndarray
    samples: np.ndarray | None = None  # shape (S, H), GPUs

    def __post_init__(self) -> None:
        self.mean = np.asarray(self.mean, dtype=float)
        self.std = np.asarray(self.std, dtype=float)
        if self.mean.shape != self.std.shape or self.mean.ndim != 1:
            raise ValueError("forecast mean and std must be 1-d arrays of equal length")
        if self.samples is not None:
            self.samples = np.asarray(self.samples, dtype=float)
            if self.samples.ndim != 2 or self.samples.shape[1] != self.mean.shape[0]:
                raise ValueError("forecast samples must have shape (S, H)")


@dataclass(frozen=True, slots=True)
class PoolStatus:
    """State of one pool a round shows: η in force, window outcomes since the replay started,
    the oldest LP wait, HP history and whole-node HP. What η's feedback moves on is the spot
    quota's own (`EtaEvidence`, `gfs_opt.quota.ledger`), not the pool's status."""

    eta: float = 1.0            # divides the forecast's safety margin: U = μ + z_ρ·σ/η
    failed: int = 0             # failed guarantee windows since the replay started (node cost F)
    succeeded: int = 0          # (node cost S)
    oldest_lp_wait: float = 0.0  # seconds the oldest pending LP job waited since (re)queue
    has_hp_history: bool = True
    #: GPUs held now by HP workers that take a whole node of the pool's largest size (the
    #: shape reserve's starting point; restated at each quota refresh)
    hp_whole_gpus: float = 0.0

    def counted(self, ok: bool) -> PoolStatus:
        """This status with one more window outcome since the start (``succeeded`` or
        ``failed`` + 1; `dataclasses.replace` costs twice as much, once per window outcome)."""
        return PoolStatus(self.eta, self.failed + (not ok), self.succeeded + ok,
                          self.oldest_lp_wait, self.has_hp_history, self.hp_whole_gpus)

    def with_wait(self, oldest_lp_wait: float, hp_whole_gpus: float) -> PoolStatus:
        """This status with the oldest LP wait and the whole-node HP restated (each refresh,
        for every pool whose numbers moved)."""
        return PoolStatus(self.eta, self.failed, self.succeeded, oldest_lp_wait,
                          self.has_hp_history, hp_whole_gpus)


@dataclass(frozen=True, slots=True)
class WindowOutcome:
    """One guarantee window of an LP job ended: what the simulator and a live scheduler report
    to the policy (`Policy.observe_window`) for η's evidence (`gfs_opt.quota.ledger`).

    ``lp_milli``: the pool's running LP GPUs (milli-GPU) as it ended, the job's own included.
    ``hp_milli``: for a window broken by a decision that evicted LP in the pool, the pool's HP
    GPUs (milli-GPU) once that decision's placements apply — the eviction's HP context; None
    for every other outcome (a success, a lease's re-queue)."""

    t: float
    pool: str
    ok: bool
    lp_milli: int = 0
    hp_milli: int | None = None


@dataclass(frozen=True, slots=True)
class EtaEvidence:
    """What η's feedback reads of one pool at a quota refresh (`gfs_opt.quota.ledger`).

    recent_*: the windows ended over the last H hours (the paper's ER), and of the failures those
    broken while HP demand exceeded the quota's plan U_0 (quota-attributable evictions).
    eta_windows, eta_failed_quota: the windows ended under the current η (since it last moved)
    within the attributable rule's evidence span, and of them the quota-attributable failures.
    band_windows, band_failed: the growth band — LP that only η > 1 let in, above the quota at
    η = 1 — over the band's span: its windows and failures, each weighted by its share of the
    band (`gfs_opt.quota.ledger`)."""

    recent_succeeded: int = 0
    recent_failed: int = 0
    recent_failed_quota: int = 0
    eta_windows: int = 0
    eta_failed_quota: int = 0
    band_windows: float = 0.0
    band_failed: float = 0.0


NO_EVIDENCE = EtaEvidence()


@dataclass(frozen=True, slots=True)
class QuotaFeedback:
    """What a quota refresh moved η on in one pool, for the feedback log: η after the refresh,
    the evidence it read and the plan U_0 = μ_0 + z_ρ·σ_0/η it set (GPUs; NaN: no forecast)."""

    eta: float
    evidence: EtaEvidence
    plan_gpus: float


@dataclass(frozen=True, slots=True)
class Params:
    """Knobs shared by the policies (defaults follow GFS-SPEC)."""

    rho: float = 0.9
    horizon_h: int = 4
    guarantee_classes: tuple[float, ...] = (1.0,)
    quota_refresh_s: float = 300.0
    eta_min: float = 0.1
    eta_max: float = 10.0
    eval_start: float = 0.0
    eval_end: float = math.inf
    restart_small_s: float = 40.0
    restart_large_s: float = 60.0
    hard_guarantee: bool = False
    # True: the spot quota stays on until the replay ends, so every window of a scored LP job is
    # one the quota governs and its eviction rate measures the policy. False: the authors' lifted
    # drain (LP jobs admitted freely after the scored window; the windows that start then are
    # reported apart, `gfs_opt.sim.metrics`). BENCHMARKS.md has both measured.
    quota_after_window: bool = True

    @property
    def eval_length(self) -> float:
        return max(1.0, self.eval_end - self.eval_start) if math.isfinite(self.eval_end) else 1.0

    def restart_overhead(self, job: Job) -> float:
        return self.restart_small_s if job.demand <= 8 * MILLI else self.restart_large_s


DEFAULT_POOL_STATUS = PoolStatus()


@dataclass(frozen=True)
class Round:
    """One scheduling round: everything a policy may look at, and nothing else (read-only; see
    the module doc). Build a changed copy with `dataclasses.replace`."""

    time: float
    state: ClusterState
    jobs: Mapping[int, Job]              # every job the round mentions, by id
    running: Mapping[int, RunningJob]
    # job ids; the engine hands its `gfs_opt.pending.PendingQueue`s (iterated in PTS order),
    # instance files plain lists
    pending_hp: Collection[int]
    pending_lp: Collection[int]
    queued_since: Mapping[int, float] = field(default_factory=dict)  # last (re)queue time
    forecasts: Mapping[str, PoolForecast] = field(default_factory=dict)
    pools: Mapping[str, PoolStatus] = field(default_factory=dict)
    quotas: Mapping[tuple[str, float], int] = field(default_factory=dict)  # (pool, class h) → milli
    # whole free nodes of the pool's largest size an LP job of the class may not break
    # (the spot quota's shape dimension, `gfs_opt.quota.shape`); no entry: none
    reserves: Mapping[tuple[str, float], int] = field(default_factory=dict)
    node_evictions_1h: np.ndarray | None = None
    node_evictions_1d: np.ndarray | None = None
    params: Params = field(default_factory=Params)
    quota_due: bool = False
    # releases per pool so far, counted by the simulator (all jobs / HP jobs only), so that a
    # policy can tell that nothing was freed since it last looked (`preempt.fit_memo.FitMemo`)
    released: Mapping[str, int] | None = None
    hp_released: Mapping[str, int] | None = None
    # pools where something changed since the last pass (arrivals, releases): a greedy pass
    # visits only these (None: every pool — a quota refresh, a standalone round)
    dirty_pools: frozenset[str] | None = None
    # LP jobs whose guarantee window restarted at this round's time, as the simulator saw the
    # window ends (None: not known — a standalone round; `preempt.boundary.at_boundary` then
    # reads every running job)
    window_restarts: Collection[int] | None = None

    def pool_status(self, pool: str) -> PoolStatus:
        """The pool's feedback state (the defaults for a pool the round does not list)."""
        return self.pools.get(pool, DEFAULT_POOL_STATUS)

    def evictions_1h(self) -> np.ndarray:
        if self.node_evictions_1h is None:
            return np.zeros(self.state.n_nodes, dtype=np.int32)
        return self.node_evictions_1h

    def evictions_1d(self) -> np.ndarray:
        if self.node_evictions_1d is None:
            return np.zeros(self.state.n_nodes, dtype=np.int32)
        return self.node_evictions_1d

    def copy(self) -> Round:
        """A standalone copy that shares nothing mutable with this round (e.g. to save as an
        instance file): the state copied, only the jobs the round mentions, plain containers."""
        pending_hp, pending_lp = list(self.pending_hp), list(self.pending_lp)
        ids = [*self.running, *pending_hp, *pending_lp]
        since = self.queued_since
        return Round(
            time=self.time, state=self.state.copy(), jobs={j: self.jobs[j] for j in ids},
            running=plain_dict(self.running), pending_hp=pending_hp, pending_lp=pending_lp,
            queued_since={j: since[j] for j in [*pending_hp, *pending_lp] if j in since},
            forecasts=dict(self.forecasts), pools=dict(self.pools), quotas=dict(self.quotas),
            reserves=dict(self.reserves),
            node_evictions_1h=None if self.node_evictions_1h is None
            else self.node_evictions_1h.copy(),
            node_evictions_1d=None if self.node_evictions_1d is None
            else self.node_evictions_1d.copy(),
            params=self.params, quota_due=self.quota_due)


@dataclass(slots=True)
class SolveReport:
    """What every solve reports, exact or greedy."""

    step: str                 # "quota", "preemption", "placement", …
    method: str               # "greedy", "milp", "rule"
    status: str               # "optimal", "feasible", "infeasible", "timeout", "error", "heuristic"
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    time_s: float = 0.0
    solver: str = ""
    fallback: bool = False
    message: str = ""

    def as_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass
class Decision:
    """What a policy wants changed: new placements, LP victims, refreshed quotas, η and demand
    forecasts (the engine hands them back in later rounds), and its solver reports."""

    placements: dict[int, Placement] = field(default_factory=dict)
    victims: list[int] = field(default_factory=list)
    quotas: dict[tuple[str, float], int] | None = None
    reserves: dict[tuple[str, float], int] | None = None   # whole-node reserves (shape quota)
    eta: dict[str, float] | None = None
    forecasts: dict[str, PoolForecast] | None = None   # replace the round's forecasts
    hp_history: dict[str, bool] | None = None          # PoolStatus.has_hp_history per pool
    feedback: dict[str, QuotaFeedback] | None = None   # what η moved on, per pool (the log)
    reports: list[SolveReport] = field(default_factory=list)
    requeue: list[int] = field(default_factory=list)  # voluntary re-queues (e.g. Chronus leases)
    #: (time, pool): call the policy on that pool at that time (a boundary an HP gang waits for,
    #: the end of its patience), whether or not anything else happens there then
    wakes: list[tuple[float, str]] = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[int, Placement]]:
        return iter(self.placements.items())
