"""Greedy preemptive placement of PTS (GFS-SPEC §2.3) and the baselines' variants.

A victim rule decides, for one node (or one GPU for fractional requests), which LP jobs to evict
so that an HP worker fits; a node-cost rule picks among candidate nodes. GFS uses the two-pointer
victim pass and the eviction-history node cost; the baselines plug in their own rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from gfs_opt.model import (
    MILLI,
    ClusterState,
    Job,
    JobClass,
    Placement,
    PoolStatus,
    RunningJob,
    WorkerPlacement,
    gpus_per_worker,
)
from gfs_opt.preempt.scoring import place_worker, probing


@dataclass(frozen=True, slots=True)
class VictimChoice:
    node: int
    gpus: tuple[int, ...]        # local GPU indices the worker will take
    victims: tuple[int, ...]     # LP job ids to evict
    cost: float                  # node cost (lower is better)


@dataclass(slots=True)
class PreemptContext:
    """What victim and node-cost rules may look at."""

    state: ClusterState
    running: Mapping[int, RunningJob]
    t: float
    pool_status: PoolStatus
    capacity_gpus: float
    horizon_s: float             # T of the node cost: evaluation window length
    restart_overhead: Callable[[Job], float]
    #: where ``running`` is a few LP jobs (those at a window boundary): the nodes they run on.
    #: A worker is only tried preemptively where no free spot holds it, so a node without one
    #: of them offers nothing, and only these nodes are looked at (None: every node)
    nodes: AbstractSet[int] | None = None
    #: with ``nodes``: the tightest fit is sought among those nodes (a gang taking LP jobs at
    #: their boundary, `gfs_opt.preempt.boundary`), not the pool's tightest filtered by them
    #: (a lease-end reclaim's reading, which may find none)
    tightest_of_nodes: bool = False
    # c_j is fixed within one pass (t and checkpoints do not move); victim rules ask for it
    # on every candidate node, so it is computed once per job
    _costs: dict[int, float] = field(default_factory=dict, repr=False)

    def cost(self, jid: int) -> float:
        """c_j = g·w·(t − last checkpoint), GPU-seconds of work an eviction throws away."""
        c = self._costs.get(jid)
        if c is None:
            c = self._costs[jid] = self.running[jid].wasted_work(self.t)
        return c


VictimOrder = Callable[[PreemptContext, list[int]], list[int]]
NodeCost = Callable[[PreemptContext, list[int]], float]


# ---- victim orders: the order in which LP jobs are considered for sparing ------------------
def two_pointer(ctx: PreemptContext, jobs: list[int]) -> list[int]:
    """Alternate most- and least-costly: costly jobs get the first chance to be spared."""
    order = sorted(jobs, key=lambda j: (ctx.cost(j), j))
    out: list[int] = []
    lo, hi, top = 0, len(order) - 1, True
    while lo <= hi:
        if top:
            out.append(order[hi])
            hi -= 1
        else:
            out.append(order[lo])
            lo += 1
        top = not top
    return out


def naive_order(ctx: PreemptContext, jobs: list[int]) -> list[int]:
    """Ablation: no cost awareness, by job id."""
    return sorted(jobs, reverse=True)


def newest_first_order(ctx: PreemptContext, jobs: list[int]) -> list[int]:
    """YARN-style: oldest containers are spared first, the newest are preempted."""
    return sorted(jobs, key=lambda j: (ctx.running[j].start, j))


def lyra_order(ctx: PreemptContext, jobs: list[int]) -> list[int]:
    """Lyra: prefer breaking few, small jobs → spare the jobs with the lowest 1/(w·max(g,1))."""
    def key(j: int) -> tuple[float, int]:
        job = ctx.running[j].job
        return (1.0 / (job.workers * max(job.g / MILLI, 1.0)), j)
    return sorted(jobs, key=key)


# ---- node costs -------------------------------------------------------------------------
def gfs_node_cost(ctx: PreemptContext, victims: list[int]) -> float:
    """(F + r)/(F + S + r) + 5·Σ c_j/(C_p·T); 0/0 = 0."""
    f, s, r = ctx.pool_status.failed, ctx.pool_status.succeeded, len(victims)
    ratio = (f + r) / (f + s + r) if f + s + r else 0.0
    waste = sum(ctx.cost(j) for j in victims)
    return ratio + 5.0 * waste / max(ctx.capacity_gpus * ctx.horizon_s, 1e-9)


def count_node_cost(ctx: PreemptContext, victims: list[int]) -> float:
    return float(len(victims))


def lyra_node_cost(ctx: PreemptContext, victims: list[int]) -> float:
    total = 0.0
    for j in victims:
        job = ctx.running[j].job
        total += 1.0 / (job.workers * max(job.g / MILLI, 1.0))
    return total


VICTIM_ORDERS: dict[str, VictimOrder] = {
    "two-pointer": two_pointer, "naive": naive_order, "newest": newest_first_order,
    "lyra": lyra_order,
}
NODE_COSTS: dict[str, NodeCost] = {
    "gfs": gfs_node_cost, "count": count_node_cost, "lyra": lyra_node_cost,
}


@dataclass(frozen=True, slots=True)
class PreemptRule:
    """The victim part of a policy: which LP jobs to spare first on a node, how to rank nodes."""

    victim_order: str = "two-pointer"
    node_cost: str = "gfs"
    first_candidate_only: bool = False  # naive ablation: take the first candidate node
    #: for an HP gang of several whole-GPU workers, a node's cost is shared by the workers its
    #: victims make room for (an LP gang evicted once frees every node it ran on)
    gang_aware: bool = False


#: the paper's rule: two-pointer victims, eviction-history node cost
PTS_RULE = PreemptRule()


# ---- per-node victim selection -----------------------------------------------------------
def _node_jobs_by_gpu(state: ClusterState, node: int) -> tuple[int, list[dict[int, int]]]:
    a, b = int(state.node_first_gpu[node]), int(state.node_first_gpu[node + 1])
    return a, state.gpu_jobs[a:b]


def choose_on_node(ctx: PreemptContext, node: int, k: int, order: VictimOrder,
                   node_cost: NodeCost) -> VictimChoice | None:
    """Victims on one node so that ``k`` whole GPUs become free, or None."""
    st = ctx.state
    a, per_gpu = _node_jobs_by_gpu(st, node)
    hp = st.gpu_hp[a:a + len(per_gpu)].tolist()   # plain ints: numpy scalar access is slow here
    running = ctx.running
    # LP jobs outside ctx.running are protected (e.g. inside a lease or a hard guarantee window)
    avail = {i for i in range(len(per_gpu))
             if hp[i] == 0 and all(j in running for j in per_gpu[i])}
    if len(avail) < k:
        return None
    lp_gpus: dict[int, set[int]] = {}
    for i in avail:
        for jid in per_gpu[i]:
            lp_gpus.setdefault(jid, set()).add(i)
    victims: list[int] = []
    for jid in order(ctx, list(lp_gpus)):
        if len(avail - lp_gpus[jid]) >= k:
            avail -= lp_gpus[jid]       # spared: its GPUs are off limits
        else:
            victims.append(jid)
    # Take free GPUs first, then the GPUs of the cheapest victims, until k are covered.
    free = sorted(i for i in avail if not per_gpu[i])
    chosen: list[int] = free[:k]
    used_victims: list[int] = []
    if len(chosen) < k:
        for jid in sorted(victims, key=lambda j: (ctx.cost(j), j)):
            used_victims.append(jid)
            freed = sorted(i for i in lp_gpus[jid] if i in avail and i not in chosen
                           and set(per_gpu[i]) <= set(used_victims))
            chosen.extend(freed)
            if len(chosen) >= k:
                break
    if len(chosen) < k:
        return None
    gpus = tuple(sorted(chosen[:k]))
    needed = sorted({j for i in gpus for j in per_gpu[i]})
    return VictimChoice(node, gpus, tuple(needed), node_cost(ctx, needed))


def choose_on_gpu(ctx: PreemptContext, gi: int, g: int, order: VictimOrder,
                  node_cost: NodeCost) -> VictimChoice | None:
    """Victims on one GPU so that a fractional HP worker of ``g`` milli fits, or None."""
    st = ctx.state
    jobs = {j: m for j, m in st.gpu_jobs[gi].items()
            if st.alloc[j][0] is JobClass.LP and j in ctx.running}
    room = MILLI - int(st.gpu_used[gi])
    victims: list[int] = []
    freeable = sum(jobs.values())
    for jid in order(ctx, list(jobs)):
        if room + freeable - jobs[jid] >= g:
            freeable -= jobs[jid]       # spared
        else:
            victims.append(jid)
    if room + sum(jobs[j] for j in victims) < g:
        return None
    needed: list[int] = []
    for jid in sorted(victims, key=lambda j: (ctx.cost(j), j)):
        if room >= g:
            break
        needed.append(jid)
        room += jobs[jid]
    node = int(st.gpu_node[gi])
    return VictimChoice(node, (gi - int(st.node_first_gpu[node]),), tuple(sorted(needed)),
                        node_cost(ctx, needed))


#: per node, the victim choices evaluated there, by (worker size, node or GPU index)
ChoiceCache = dict[int, dict[tuple[int, int], "VictimChoice | None"]]


def preemptive_worker(ctx: PreemptContext, job: Job, rule: PreemptRule,
                      cache: ChoiceCache | None = None) -> VictimChoice | None:
    """Best node (and victims) for one HP worker, by the rule's node cost.

    ``cache`` lets later workers (of the gang, or of the pass) reuse the choices on nodes that
    nothing has touched since: a choice depends only on its node's GPUs, the worker size and
    the pass's fixed costs, so the answer is the same, in far fewer evaluations. Whoever
    changes a node (places a worker, evicts a job, rolls back) drops its entry.
    """
    st = ctx.state
    order, cost = VICTIM_ORDERS[rule.victim_order], NODE_COSTS[rule.node_cost]
    pool = st.pool_index[job.pool]
    lo, hi = st.pool_slice(pool)
    best: VictimChoice | None = None
    if job.g < MILLI:
        a, b = int(st.node_first_gpu[lo]), int(st.node_first_gpu[hi])
        hp_room = MILLI - st.gpu_hp[a:b]
        ok = hp_room >= job.g
        if ctx.nodes is not None and ctx.tightest_of_nodes:
            ok &= np.isin(st.gpu_node[a:b], np.fromiter(ctx.nodes, dtype=np.int64))
        if not ok.any():
            return None
        least = hp_room[ok].min()
        cands = (a + np.flatnonzero(ok & (hp_room == least))).tolist()
        if ctx.nodes is not None:
            gpu_node = st.gpu_node
            cands = [gi for gi in cands if gpu_node.item(gi) in ctx.nodes]
        for gi in cands:
            ch = _cached(cache, int(st.gpu_node[gi]), (job.g, gi),
                         partial(choose_on_gpu, ctx, gi, job.g, order, cost))
            if ch is not None and (best is None or ch.cost < best.cost):
                best = ch
                if rule.first_candidate_only:
                    break
        return best
    k = gpus_per_worker(job.g)
    # the fewest GPUs without HP that still hold a worker, from the pool's histogram: a backlog
    # of HP work usually has no such node, and then no pass over the nodes is needed
    if ctx.nodes is not None and ctx.tightest_of_nodes:
        node_gpus, node_hp = st.node_gpus, st.node_hp_gpus
        least = min((f for n in ctx.nodes if lo <= n < hi
                     and (f := node_gpus.item(n) - node_hp.item(n)) >= k), default=0)
    else:
        hist = st.nonhp_hist[pool]
        least = next((f for f in range(k, len(hist)) if hist[f]), 0)
    if not least:
        return None
    for n in _nodes_with(ctx, lo, hi, least, exact=True):
        ch = _cached(cache, n, (-k, n), partial(choose_on_node, ctx, n, k, order, cost))
        if ch is not None and (best is None or ch.cost < best.cost):
            best = ch
            if rule.first_candidate_only:
                break
    return best


def _nodes_with(ctx: PreemptContext, lo: int, hi: int, k: int, exact: bool) -> list[int]:
    """Nodes of ``lo:hi`` (ascending) with exactly (else at least) ``k`` GPUs without HP,
    among ``ctx.nodes`` where it names some."""
    st = ctx.state
    if ctx.nodes is not None:
        node_gpus, node_hp = st.node_gpus, st.node_hp_gpus
        out = []
        for n in ctx.nodes:
            if lo <= n < hi:
                free = node_gpus.item(n) - node_hp.item(n)
                if free == k if exact else free >= k:
                    out.append(n)
        out.sort()
        return out
    nonhp = st.node_gpus[lo:hi] - st.node_hp_gpus[lo:hi]
    return (lo + np.flatnonzero(nonhp == k if exact else nonhp >= k)).tolist()


def _cached(cache: ChoiceCache | None, node: int, key: tuple[int, int],
            choose: Callable[[], VictimChoice | None]) -> VictimChoice | None:
    if cache is None:
        return choose()
    on_node = cache.setdefault(node, {})
    if key not in on_node:
        on_node[key] = choose()
    return on_node[key]


def place_gang_preemptive(ctx: PreemptContext, job: Job, rule: PreemptRule,
                          e_score: np.ndarray | None, use_history: bool = True,
                          cache: ChoiceCache | None = None, free_tried: bool = False,
                          ) -> tuple[Placement, list[int]] | None:
    """All workers of an HP gang, evicting LP where needed; all or nothing.

    Each worker first tries a free spot, then the rule's preemptive choice. Victims are released
    tentatively so later workers see the freed GPUs; everything is undone before returning.
    ``cache`` (see `preemptive_worker`) may outlive the call: nodes this gang touched are
    dropped from it on return; the caller drops the nodes it then changes. ``free_tried``: the
    caller has just found no free spot for this job with the same best fit (a single worker
    then goes straight to the preemptive choice).
    """
    st = ctx.state
    p = st.pool_index[job.pool]
    if st.pool_capacity.item(p) - st.pool_hp.item(p) < job.demand:
        return None
    # whole GPUs: only GPUs without HP can be freed
    if (job.workers > 1 and job.g >= MILLI
            and st.nonhp_slots(p, gpus_per_worker(job.g)) < job.workers):
        return None
    if cache is None:
        cache = {}
    if job.workers == 1:  # nothing to hold for later workers
        wp = None if free_tried else place_worker(st, job, e_score, use_history)
        if wp is not None:
            return (wp,), []
        ch = preemptive_worker(ctx, job, rule, cache)
        return None if ch is None else (((ch.node, ch.gpus),), list(ch.victims))
    placed: list[WorkerPlacement] = []
    victims: list[int] = []
    touched: set[int] = set()
    gang = rule.gang_aware and job.g >= MILLI
    try:
        with probing(st) as probe:
            for w in range(job.workers):
                wp = place_worker(st, job, e_score, use_history)
                if wp is None:
                    ch = (_gang_worker(ctx, job, rule, cache, job.workers - w) if gang
                          else preemptive_worker(ctx, job, rule, cache))
                    if ch is None:
                        return None
                    for jid in ch.victims:
                        victim = ctx.running[jid]
                        probe.evict(victim.job)
                        for n, _gpus in victim.placement:   # an LP gang frees GPUs elsewhere too
                            _drop(cache, n, touched)
                    victims.extend(ch.victims)
                    wp = (ch.node, ch.gpus)
                probe.hold(job, wp)
                _drop(cache, wp[0], touched)
                placed.append(wp)
    finally:   # the probe is rolled back: choices seen on tentative states are stale
        for n in touched:
            cache.pop(n, None)
    return tuple(placed), victims


def _gang_worker(ctx: PreemptContext, job: Job, rule: PreemptRule, cache: ChoiceCache,
                 left: int) -> VictimChoice | None:
    """`preemptive_worker` for a worker of a gang with ``left`` workers still to place: each
    candidate node's cost is divided by the workers its victims make room for (on that node and
    on every node the victims also run on), at most ``left``. Evicting one LP gang that spans
    four nodes then costs a 4-worker HP gang one eviction, not four (the plain rule picks node
    by node and evicts a different LP job on each)."""
    st = ctx.state
    order, cost = VICTIM_ORDERS[rule.victim_order], NODE_COSTS[rule.node_cost]
    k = gpus_per_worker(job.g)
    pool = st.pool_index[job.pool]
    lo, hi = st.pool_slice(pool)
    best: VictimChoice | None = None
    best_key = (float("inf"), 0)
    for n in _nodes_with(ctx, lo, hi, k, exact=False):
        ch = _cached(cache, n, (-k, n), partial(choose_on_node, ctx, n, k, order, cost))
        if ch is None:
            continue
        key = (ch.cost / min(left, _room_made(ctx, ch, k)), n)
        if key < best_key:
            best, best_key = ch, key
    return best


def _room_made(ctx: PreemptContext, ch: VictimChoice, k: int) -> int:
    """Workers of ``k`` whole GPUs that fit on the nodes ``ch``'s victims run on once they are
    gone (its own node included, at least 1)."""
    st = ctx.state
    gone = set(ch.victims)
    nodes = {ch.node}
    for jid in ch.victims:
        nodes.update(n for n, _g in ctx.running[jid].placement)
    room = 0
    for n in nodes:
        a, b = int(st.node_first_gpu[n]), int(st.node_first_gpu[n + 1])
        free = sum(1 for gi in range(a, b) if st.gpu_hp.item(gi) == 0
                   and all(j in gone for j in st.gpu_jobs[gi]))
        room += free // k
    return max(1, room)


def _drop(cache: ChoiceCache, node: int, touched: set[int]) -> None:
    cache.pop(node, None)
    touched.add(node)
