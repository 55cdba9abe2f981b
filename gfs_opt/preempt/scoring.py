"""Node scores of PTS (GFS-SPEC §2.3): eviction-history score and non-preemptive placement.

All scoring is vectorised over one pool's contiguous node/GPU slice of `ClusterState`; the
state's per-pool counts (free GPUs per node as a histogram, partly used GPUs by usage) answer
"does any node fit" and "how many workers fit" first, so a try that must fail costs no pass
over the pool, and best fit scores only the nodes that can win.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from gfs_opt.model import (
    MILLI,
    ClusterState,
    Job,
    JobClass,
    Placement,
    Round,
    WorkerPlacement,
    gpus_per_worker,
)

#: a policy's own choice of free GPUs for one worker (e.g. FGD's fragmentation score)
WorkerFn = Callable[[ClusterState, Job], WorkerPlacement | None]

# Composite key = base score · KEY_SCALE + tie-break; E(n) ≤ 9,900 so ties never leak upward.
KEY_SCALE = 20_000.0
E_MAX = 10_000.0


def eviction_scores(c_1h: np.ndarray, c_1d: np.ndarray) -> np.ndarray:
    """E(n) = 10000·max(0, 1 − 0.01·2^(0.8·c_1h + 0.2·c_1d)); higher = calmer node."""
    expo = np.minimum(0.8 * c_1h.astype(float) + 0.2 * c_1d.astype(float), 60.0)
    return E_MAX * np.maximum(0.0, 1.0 - 0.01 * np.exp2(expo))


def default_eviction_scores(n_nodes: int) -> np.ndarray:
    return eviction_scores(np.zeros(n_nodes), np.zeros(n_nodes))


class EvictionHistory:
    """E(n) of a round's node eviction counts (``Round.node_evictions_1h/1d``).

    The engine hands new counts at every quota refresh (300 s) and the same arrays in between,
    so the scores are recomputed only when the arrays change. A round without counts (before the
    first refresh) gets the scores of no evictions, which rank every node alike.
    """

    def __init__(self) -> None:
        self._seen: tuple[object, object, int] | None = None
        self._scores: np.ndarray | None = None

    def scores(self, rnd: Round) -> np.ndarray:
        c1h, c1d = rnd.node_evictions_1h, rnd.node_evictions_1d
        n = rnd.state.n_nodes
        seen = self._seen
        if (self._scores is None or seen is None or seen[0] is not c1h or seen[1] is not c1d
                or seen[2] != n):
            self._scores = (default_eviction_scores(n) if c1h is None or c1d is None
                            else eviction_scores(c1h, c1d))
            self._seen = (c1h, c1d, n)
        return self._scores


def best_node_whole(state: ClusterState, pool: int, k: int, cls: JobClass,
                    e_score: np.ndarray | None, use_history: bool = True, hide: int = 0,
                    beside_hp: bool = False) -> int:
    """Node (global index) for one worker needing ``k`` whole GPUs, or −1.

    Lowest ``100·(free+1) − same_class`` wins (best fit, then co-location with the own class;
    with ``beside_hp`` an LP worker counts the node's HP GPUs instead); ties: LP prefers calm
    nodes (high E), HP prefers troubled ones (low E), then lowest index. ``hide``: that many of
    the pool's whole free nodes are held back (the shape reserve, `Placer.reserves`).
    """
    lo, hi = state.pool_slice(pool)
    same = (state.node_hp_gpus if cls is JobClass.HP or beside_hp else state.node_lp_gpus)[lo:hi]
    e = e_score[lo:hi] if use_history and e_score is not None else None
    i = _best_fit(state.node_free[lo:hi], same, e, cls, k, _hidden(state, pool, hide))
    return -1 if i < 0 else lo + i


def _hidden(state: ClusterState, pool: int, hide: int) -> list[int]:
    """The pool's free-GPU histogram with ``hide`` whole free nodes of its largest size taken
    out: best fit then breaks a whole node only while more than ``hide`` of them are free. All
    whole free nodes of that size are alike to a worker, so hiding a count is hiding nodes."""
    hist = state.free_hist[pool]
    if hide <= 0:
        return hist
    out = list(hist)
    size = state.pool_node_gpus[pool]
    out[size] = max(0, out[size] - hide)
    return out


def _best_fit(free: np.ndarray, same: np.ndarray, e: np.ndarray | None, cls: JobClass, k: int,
              hist: list[int]) -> int:
    """Position in a pool's arrays of the node `best_node_whole` picks, or −1; ``hist[f]``
    counts the nodes with ``f`` free GPUs.

    Only nodes with the fewest free GPUs that still fit (f_min) can win: one more free GPU adds
    100·KEY_SCALE to the key, more than co-location (≤ a node's GPUs, < 100) and E(n) (< KEY_SCALE)
    can take off. So the key is computed on those nodes alone, with the same formula (the same
    floats, the same lowest-index tie-break).
    """
    f_min = -1
    for f in range(k, len(hist)):
        if hist[f]:
            f_min = f
            break
    if f_min < 0:
        return -1
    if hist[f_min] == 1:   # one node has f_min free GPUs: it wins
        return int((free == f_min).argmax())
    cand = (free == f_min).nonzero()[0]   # two nodes or more
    sc = same[cand]
    if e is None:   # the key is (C − same)·KEY_SCALE: the first node with the most of its class
        return int(cand[sc.argmax()])
    ec = e[cand]
    key = (100.0 * (f_min + 1) - sc) * KEY_SCALE + (ec if cls is JobClass.HP else E_MAX - ec)
    return int(cand[key.argmin()])


def whole_gang(state: ClusterState, job: Job, e_score: np.ndarray | None,
               use_history: bool = True, hide: int = 0,
               beside_hp: bool = False) -> Placement | None:
    """`place_gang` of a whole-GPU gang under best fit, without holding workers on the state.

    Placing a worker on the chosen node lowers that node's key (k fewer free GPUs, k more of
    the own class), so it stays the strict minimum while it fits another worker: the sequential
    pass fills it with ⌊free/k⌋ workers (or the rest of the gang), taking its free GPUs in
    index order k at a time, then moves to the next node, whose key did not change. This does
    the same on local copies of the free counts, one node choice per node used (a filled node's
    co-location count no longer matters: it cannot take another worker).
    """
    pool = state.pool_index[job.pool]
    k = gpus_per_worker(job.g)
    lo, hi = state.pool_slice(pool)
    free = state.node_free[lo:hi].copy()
    same = (state.node_hp_gpus if job.cls is JobClass.HP or beside_hp
            else state.node_lp_gpus)[lo:hi]
    e = e_score[lo:hi] if use_history and e_score is not None else None
    hist = list(_hidden(state, pool, hide))
    placed: list[WorkerPlacement] = []
    left = job.workers
    while left:
        i = _best_fit(free, same, e, job.cls, k, hist)
        if i < 0:
            return None
        f = int(free[i])
        c = min(f // k, left)
        node = lo + i
        gpus = free_gpus_on(state, node, c * k)
        placed.extend((node, gpus[w * k:(w + 1) * k]) for w in range(c))
        free[i] = f - c * k      # < k unless the gang is done: the node is not chosen again
        hist[f] -= 1
        hist[f - c * k] += 1
        left -= c
    return tuple(placed)


def best_gpu_fraction(state: ClusterState, pool: int, g: int) -> int:
    """Partly used GPU (global index) with the smallest residual that still fits ``g``, or −1."""
    # the smallest residual belongs to the largest usage that still fits, which the pool's
    # partly-used counts name; then only the first GPU with that usage is searched for
    room = MILLI - g
    best = max((u for u in state.partial_used[pool] if u <= room), default=0)
    if best == 0:
        return -1
    lo, hi = state.pool_slice(pool)
    a, b = int(state.node_first_gpu[lo]), int(state.node_first_gpu[hi])
    return a + int((state.gpu_used[a:b] == best).argmax())


def free_gpus_on(state: ClusterState, node: int, k: int) -> tuple[int, ...]:
    """The first ``k`` fully free local GPU indices of a node."""
    # a loop over the node's few GPUs: numpy's per-call overhead is most of the cost here
    used = state.gpu_used
    first = state._node_first[node]
    out: list[int] = []
    for lg in range(state._node_gpus[node]):
        if used.item(first + lg) == 0:
            out.append(lg)
            if len(out) == k:
                break
    return tuple(out)


def place_worker(state: ClusterState, job: Job, e_score: np.ndarray | None,
                 use_history: bool = True, hide: int = 0,
                 beside_hp: bool = False) -> tuple[int, tuple[int, ...]] | None:
    """Non-preemptive placement of one worker (not yet allocated); ``hide`` and ``beside_hp``
    as in `best_node_whole`."""
    pool = state.pool_index[job.pool]
    if job.g < MILLI:
        gi = best_gpu_fraction(state, pool, job.g)
        if gi >= 0:
            node = int(state.gpu_node[gi])
            return node, (gi - int(state.node_first_gpu[node]),)
        node = best_node_whole(state, pool, 1, job.cls, e_score, use_history, hide, beside_hp)
        if node < 0:
            return None
        return node, free_gpus_on(state, node, 1)
    k = gpus_per_worker(job.g)
    node = best_node_whole(state, pool, k, job.cls, e_score, use_history, hide, beside_hp)
    if node < 0:
        return None
    return node, free_gpus_on(state, node, k)


def pool_can_fit(state: ClusterState, job: Job) -> bool:
    """Cheap necessary condition before trying a gang: enough free milli in the pool."""
    p = state.pool_index.get(job.pool)
    if p is None:
        return False
    return state.pool_capacity.item(p) - state.pool_used.item(p) >= job.demand


def worker_slots(state: ClusterState, job: Job, gpus_per_node: np.ndarray | None = None) -> int:
    """How many workers of ``job`` fit side by side without preemption.

    Whole-GPU workers are independent per node, so Σ_n ⌊free_n / k⌋ is exact; for fractional
    workers Σ_gpu ⌊(1000 − used)/g⌋ is exact too (a worker never spans GPUs). ``gpus_per_node``
    replaces the free-GPU counts (e.g. by GPUs without HP, for a preemptive bound).
    """
    if gpus_per_node is not None:
        return int((gpus_per_node // gpus_per_worker(job.g)).sum())
    pool = state.pool_index[job.pool]
    if job.g >= MILLI:
        return state.whole_slots(pool, gpus_per_worker(job.g))
    return state.shared_slots(pool, job.g)


def place_gang(state: ClusterState, job: Job, e_score: np.ndarray | None,
               use_history: bool = True, worker_fn: WorkerFn | None = None,
               hide: int = 0, beside_hp: bool = False) -> Placement | None:
    """Place all workers or none, without preemption.

    Workers are held one by one under probe ids on the live state (so each worker sees the
    previous ones) and freed again before returning; the caller allocates the placement.
    """
    if not pool_can_fit(state, job):
        return None
    fn = worker_fn or (lambda s, j: place_worker(s, j, e_score, use_history, hide, beside_hp))
    if job.workers > 1 and worker_slots(state, job) < job.workers:
        return None
    if job.workers == 1:  # nothing to hold for later workers
        wp = fn(state, job)
        return None if wp is None else (wp,)
    if worker_fn is None and job.g >= MILLI:
        return whole_gang(state, job, e_score, use_history, hide, beside_hp)
    with probing(state) as probe:
        placed: list[WorkerPlacement] = []
        for _ in range(job.workers):
            wp = fn(state, job)
            if wp is None:
                return None
            probe.hold(job, wp)
            placed.append(wp)
    return tuple(placed)


@dataclass(frozen=True, slots=True)
class Placer:
    """How a pass picks free GPUs for the workers of a gang (the placement part of a policy).

    PTS's best fit (`place_worker`), with E(n) as the tie-break when ``use_history`` and
    ``e_score`` is given, or a policy's own ``worker_fn``. Preemptive placement takes the free
    spots of best fit whatever ``worker_fn`` says (`gfs_opt.preempt.greedy.place_gang_preemptive`).
    """

    e_score: np.ndarray | None = None
    use_history: bool = True
    worker_fn: WorkerFn | None = None
    #: LP workers go beside HP work: among equally tight nodes, the one with the most HP GPUs
    #: (a node that holds HP cannot be taken whole, so its LP is safe from whole-node HP workers)
    lp_beside_hp: bool = False
    #: the shape reserve: whole free nodes of each (pool, guarantee class) that LP may not break
    #: (`gfs_opt.quota.shape`); None: none
    reserves: Mapping[tuple[str, float], int] | None = None

    def gang(self, state: ClusterState, job: Job) -> Placement | None:
        if job.cls is JobClass.HP:
            return place_gang(state, job, self.e_score, self.use_history, self.worker_fn)
        hide = 0 if self.reserves is None else reserve_for(self.reserves, job.pool,
                                                             job.guarantee_h)
        return place_gang(state, job, self.e_score, self.use_history, self.worker_fn, hide,
                          self.lp_beside_hp)


def reserve_for(reserves: Mapping[tuple[str, float], int], pool: str, d: float) -> int:
    """Whole nodes held back from an LP job of class ``d`` in ``pool``: its class's reserve,
    else the pool's largest (a class without its own entry gets the strictest)."""
    r = reserves.get((pool, d))
    if r is not None:
        return r
    return max((v for (p, _d), v in reserves.items() if p == pool), default=0)


#: best fit without eviction history (the exact solvers' warm starts, the baselines)
BEST_FIT = Placer()


class Probe:
    """Tentative changes on the live state, undone when the `probing` block ends."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.n_held = 0

    def hold(self, job: Job, wp: WorkerPlacement) -> None:
        """Occupy one worker's GPUs under a synthetic (negative) id."""
        self.n_held += 1
        tmp = Job(-(abs(job.id) * 4096 + self.n_held), job.org, job.pool, job.cls, job.g, 1,
                  job.submit, job.duration)
        self.state.allocate(tmp, (wp,))

    def evict(self, job: Job) -> None:
        self.state.release(job)


@contextmanager
def probing(state: ClusterState) -> Iterator[Probe]:
    recording = state._journal is not None
    mark = state.mark()
    try:
        yield Probe(state)
    finally:
        state.rollback(mark)
        if not recording:
            state.commit()
