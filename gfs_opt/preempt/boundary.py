"""HP gangs that wait for a guarantee-window boundary instead of breaking a window (issue 40).

An HP gang whose workers each take a whole node often finds none free while the pool has room:
the free GPUs sit in the holes beside other HP work, and the only whole nodes are held by LP.
PTS then evicts an LP job mid-window, which breaks its guarantee. Yet every running LP job
reaches the end of its window within d hours, checkpoints there and starts a new window; taken
back at that instant it loses no work and breaks no window (a re-queue at the checkpoint, as a
Chronus lease end). With a patience P, such a gang (one that has waited less than P since its
last (re)queue) therefore:

1. starts on free GPUs if it can (best fit, no victims);
2. else starts on the GPUs of LP jobs that are at a window boundary *now*, chosen by the
   policy's own victim rule among those jobs only, and they are re-queued, not evicted;
3. else waits, and gathers nodes: whole nodes held only by LP jobs that are all at a boundary
   now are emptied (the jobs re-queued) up to the whole nodes it still lacks (`gather`), so a
   gang of several nodes collects them boundary by boundary;
4. and while it waits, the LP pass may not break the whole free nodes it needs (its workers are
   added to the pool's whole-node reserve for that pass, `held_reserves`).

Once it has waited P it is an ordinary HP gang again and evicts as PTS does. P = 0 is the paper's
PTS. The cost is HP queueing: a gang waits at most P, usually until the first boundaries on
whole LP nodes (several an hour on a pool with many of them). The engine calls the policy at
the window ends of a pool with HP waiting when the policy asks (`Policy.wakes_at_window_ends`),
so a boundary is never missed.

A gang waits only when waiting pays (`reach`): when the boundaries known to come before its
patience ends (a running LP job's window ends ``guarantee_s`` after it began) give it room on
nodes it may take them on — whole LP-only nodes whose jobs reach a boundary at one instant, for
a whole-node gang; the free GPUs plus the jobs beside HP due at one instant, for the others.
Where none does, it evicts in the same round, as PTS does: a wait that ends in an eviction
anyway only delays HP. The verdict stands until a window ends in its pool (then it is asked
again), and a kept gang asks the engine to call the policy at the boundaries it counts on and
at the end of its patience (`Decision.wakes`), so it is retried at that instant exactly, not
at its pool's next event.

Every other HP gang that would evict gets a shorter patience, the *notice* N: for up to N it takes
only LP jobs at a boundary now (steps 1–2), as a cloud's spot instance gets a notice before it is
reclaimed; then it evicts. Its workers do not take whole nodes, so there is nothing to gather or
hold (steps 3–4), and at step 2 it takes only jobs on nodes that hold HP work (`beside_hp`): the
whole LP-only nodes are left for the whole-node gangs to gather. The notice pays where the pool
is full (HP above the quota's plan, a `count` eviction): many LP jobs reach a boundary within a
few minutes, and the first that do make room. Its cost is HP queueing of N at most.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

import numpy as np

from gfs_opt.model import (
    MILLI,
    ClusterState,
    Decision,
    Job,
    JobClass,
    Round,
    RunningJob,
    gpus_per_worker,
)
from gfs_opt.pending import PendingQueue, QueueOrder, as_queue
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.hp_pass import hp_pass, pools_to_run
from gfs_opt.preempt.scoring import Placer


@dataclass(frozen=True, slots=True)
class HPPatience:
    """The HP patience part (a departure of gfs_opt's GFS, `gfs_opt.policies.departures`): how
    long a contested HP gang waits for window boundaries before it evicts — ``wait_h`` for a
    gang of whole-node workers, ``notice_h`` for every other gang. Zero for both is the paper's
    PTS."""

    wait_h: float = 1.0
    notice_h: float = 1 / 60

    def __post_init__(self) -> None:
        for name, v in (("hp_wait_h", self.wait_h), ("hp_notice_h", self.notice_h)):
            if not 0 <= v < math.inf:
                raise ValueError(f"{name} must be a finite number of hours ≥ 0, got {v}")

    @property
    def wait_s(self) -> float:
        return self.wait_h * 3600.0

    @property
    def notice_s(self) -> float:
        return self.notice_h * 3600.0


@dataclass(slots=True)
class PoolPatience:
    """What `patience` read of one pool: the queue and its `PendingQueue.edits` count then, the
    gangs then patient as (id, queue time, patience, workers if they take whole nodes else 0),
    the first time one of them stops being patient (``until``), and until then `Patience`'s
    fields for the pool."""

    queue: PendingQueue
    edits: int
    cands: list[tuple[int, float, float, int]]
    until: float = -math.inf
    ids: list[int] = field(default_factory=list)
    whole: frozenset[int] = frozenset()
    members: frozenset[int] = frozenset()
    held: int = 0

    def age(self, t: float) -> None:
        """Drop the gangs that have waited their patience by ``t`` (time only moves on)."""
        self.cands = [c for c in self.cands if t - c[1] < c[2]]
        self.until = min((c[1] + c[2] for c in self.cands), default=math.inf)
        self.ids = [c[0] for c in self.cands]
        self.whole = frozenset(c[0] for c in self.cands if c[3])
        self.members = frozenset(self.ids)
        self.held = sum(c[3] for c in self.cands)


#: `patience`'s memo, per pool
PatientMemo = dict[str, PoolPatience]


@dataclass(frozen=True, slots=True)
class Patience:
    """A round's patient gangs (`patience`): in order, those that take whole nodes, all as a
    set, and the workers of the whole-node ones per pool (step 4's reserve,
    `waiting_workers`)."""

    gangs: list[int]
    whole: AbstractSet[int]
    members: AbstractSet[int]
    held: dict[str, int]


def patient_gangs(rnd: Round, patience_s: float, notice_s: float = 0.0) -> list[int]:
    """The round's pending HP gangs that have waited less than their patience since their last
    (re)queue — ``patience_s`` for gangs that take whole nodes, ``notice_s`` for the others — in
    the pools a pass would visit (in each shape's submit order); `patience` says more."""
    # a list of the caller's own: `patience` may hand out a memo's list, or a shared empty one
    return list(patience(rnd, patience_s, notice_s).gangs)


def patience(rnd: Round, patience_s: float, notice_s: float = 0.0,
             memo: PatientMemo | None = None) -> Patience:
    """`patient_gangs`, with what a policy asks of them.

    A shape's jobs are listed in submit order, and an HP job is queued once, when it arrives
    (it is never evicted), so their queue times rise along the list too: the patient ones are
    its tail, read newest first up to the first that has waited its patience (a backlog of
    thousands is not walked at every event), and a shape whose newest job has waited the longer
    patience has none. ``memo`` (kept by the caller from round to round of one replay, whose
    time only moves on): while no gang came or went in a pool, its patient gangs are those of
    the last reading that are still patient, so a backlogged pool's shapes are read once per
    queue change, and its gangs once per change or expiry."""
    if patience_s <= 0 and notice_s <= 0:
        return _NO_PATIENCE
    alloc = rnd.state.alloc
    queue = as_queue(rnd.pending_hp, rnd.jobs, JobClass.HP, rnd.queued_since)
    t = rnd.time
    kept_pools: list[tuple[str, PoolPatience]] = []
    for pool in pools_to_run(rnd, queue):
        edits = queue.edits(pool)
        kept = memo.get(pool) if memo is not None else None
        if kept is None or kept.queue is not queue or kept.edits != edits:
            kept = PoolPatience(queue, edits, _patient_in(rnd, queue, pool, patience_s, notice_s))
            if memo is not None:
                memo[pool] = kept
        if t >= kept.until:
            kept.age(t)
        if kept.ids:
            kept_pools.append((pool, kept))
    if not kept_pools:
        return _NO_PATIENCE
    if len(kept_pools) == 1:   # a job event's round: one pool, whose gangs wait unplaced
        pool, kept = kept_pools[0]
        if alloc.keys().isdisjoint(kept.members):
            return Patience(kept.ids, kept.whole, kept.members,
                            {pool: kept.held} if kept.held else {})
    gangs = [j for _pool, kept in kept_pools for j in kept.ids if j not in alloc]
    whole = frozenset(j for _pool, kept in kept_pools for j in kept.whole if j not in alloc)
    return Patience(gangs, whole, frozenset(gangs), waiting_workers(rnd, gangs, whole))


_NO_PATIENCE = Patience([], frozenset(), frozenset(), {})


def _patient_in(rnd: Round, queue: PendingQueue, pool: str, patience_s: float,
                notice_s: float) -> list[tuple[int, float, float, int]]:
    """`patient_gangs` of one pool, each as `PoolPatience.cands` lists them."""
    st = rnd.state
    since = rnd.queued_since
    t = rnd.time
    longest = max(patience_s, notice_s)
    out: list[tuple[int, float, float, int]] = []
    for entries in queue.shapes(pool).values():
        submit, jid = entries[-1]
        if t - since.get(jid, submit) >= longest:
            continue
        # a shape's jobs share pool and request: its newest answers for all
        job = rnd.jobs[jid]
        takes_whole = st.takes_whole_node(job)
        wait = patience_s if takes_whole else notice_s
        if wait <= 0:
            continue
        workers = job.workers if takes_whole else 0
        tail: list[tuple[int, float, float, int]] = []
        for submit, jid in reversed(entries):
            q = since.get(jid, submit)
            if t - q >= wait:
                break
            tail.append((jid, q, wait, workers))
        tail.reverse()
        out.extend(tail)
    return out


def at_boundary(rnd: Round) -> dict[int, RunningJob]:
    """Running LP jobs whose guarantee window restarts at this instant (not jobs that just
    started): re-queued now, they break no window and lose no work. The simulator's rounds
    name the window ends of the instant (`Round.window_restarts`); a standalone round is read
    job by job."""
    t = rnd.time
    running = rnd.running
    ids = rnd.window_restarts
    if ids is None:
        cands: Iterable[tuple[int, RunningJob | None]] = running.items()
    else:
        cands = ((j, running.get(j)) for j in ids)
    return {j: r for j, r in cands
            if r is not None and r.at_boundary(t) and not r.job.is_hp}


def boundary_pass(rnd: Round, decision: Decision, patient: list[int], *, order: QueueOrder,
                  placer: Placer, rule: PreemptRule | None,
                  queue: PendingQueue | None = None, tried: bool = False,
                  judge: Callable[[Round, list[int]], list[int]] | None = None) -> None:
    """Steps 1–3 of the module doc for the ``patient`` gangs (placements into ``decision``,
    LP jobs taken at their boundary into ``decision.requeue``). ``queue``: the same gangs as a
    `PendingQueue`, when the caller keeps one (else it is built here). ``tried``: the caller's
    pass of this round has tried them on free GPUs already and released none since, so step 1
    would start none (a gang fits exactly when its slots are free, and they only grew fewer).
    ``judge(round, gangs)``: of the gangs still waiting after step 2, those for which waiting
    pays (`reach`); the others gather nothing (the caller lets them evict now)."""
    if not tried:
        hp_pass(rnd, decision, order=order, placer=placer, victims=None,
                pending=patient if queue is None else queue)
    left = [j for j in patient if j not in decision.placements]
    due = at_boundary(rnd) if left and rule is not None else {}
    if not due:   # steps 2 and 3 take only jobs at a boundary
        if judge is not None and left and rule is not None:
            judge(rnd, left)
        return
    st = rnd.state
    whole: list[int] = []
    on_notice: list[int] = []
    for j in left:
        (whole if st.takes_whole_node(rnd.jobs[j]) else on_notice).append(j)
    taken: set[int] = set()
    # whole-node gangs first (PTS's largest first), then the gangs on notice, beside HP only
    # a gang on notice leaves whole LP-only nodes to the whole-node gangs waiting in its pool;
    # where none waits, it may take any job at its boundary
    held = {rnd.jobs[j].pool for j in whole}
    notice_cands = {j: r for j, r in due.items() if r.job.pool not in held}
    notice_cands.update(beside_hp(st, {j: r for j, r in due.items() if r.job.pool in held}))
    for gangs, cands in ((whole, due), (on_notice, notice_cands)):
        cands = {j: r for j, r in cands.items() if j not in taken}
        if not gangs or not cands:
            continue
        got = Decision()
        hp_pass(rnd, got, order=order, placer=placer, victims=rule, evictable=cands,
                tightest_of_evictable=True, pending=gangs)
        decision.placements.update(got.placements)
        decision.requeue.extend(got.victims)
        taken.update(got.victims)
    whole = [j for j in whole if j not in decision.placements]
    if judge is not None:
        rest = [j for j in left if j not in decision.placements]
        kept = set(judge(still_running(rnd, decision), rest)) if rest else set()
        whole = [j for j in whole if j in kept]
    due = {j: r for j, r in due.items() if j not in taken}
    if whole and due:   # only whole-node gangs gather nodes (a gang on notice has step 2)
        gather(rnd, decision, whole, due)


def beside_hp(st: ClusterState, due: Mapping[int, RunningJob]) -> dict[int, RunningJob]:
    """The jobs of ``due`` on nodes that all hold HP work: the ones a gang on notice may take.
    A whole LP-only node is what a whole-node gang gathers, and a gang on notice placed there
    would break it up (a 62-node gang waited 20 h on paper-a100 when gangs on notice could)."""
    hp = st.node_hp_gpus
    return {j: r for j, r in due.items() if all(hp[n] > 0 for n, _g in r.placement)}


def waiting_workers(rnd: Round, gangs: Iterable[int],
                    whole: AbstractSet[int] | None = None) -> dict[str, int]:
    """Step 4's reserve: the workers of ``gangs`` that take whole nodes, per pool — the patient
    gangs still unplaced on the round's state, read from the round alone (after its HP step,
    the gangs the boundary pass left), so a standalone round's LP pass holds the same nodes as
    the simulator's. ``whole``: the gangs known to take whole nodes (`patient_gangs`' list),
    where the caller has it."""
    waiting: dict[str, int] = {}
    st = rnd.state
    jobs = rnd.jobs
    for j in gangs:
        if j in whole if whole is not None else st.takes_whole_node(jobs[j]):
            job = jobs[j]
            waiting[job.pool] = waiting.get(job.pool, 0) + job.workers
    return waiting


def still_running(rnd: Round, decision: Decision) -> Round:
    """``rnd`` without the running jobs ``decision`` re-queued (their GPUs are free on the
    state already: a later step must not count them, or choose them, again)."""
    if not decision.requeue:
        return rnd
    gone = set(decision.requeue)
    return replace(rnd, running={j: r for j, r in rnd.running.items() if j not in gone})


def held_reserves(reserves: Mapping[tuple[str, float], int] | None,
                  waiting: Mapping[str, int], classes: tuple[float, ...]
                  ) -> Mapping[tuple[str, float], int] | None:
    """The whole-node reserves with the nodes the waiting gangs need added, every class."""
    if not waiting:
        return reserves
    out = dict(reserves or {})
    for pool, n in waiting.items():
        for d in classes:
            out[(pool, d)] = out.get((pool, d), 0) + n
    return out


def gather(rnd: Round, decision: Decision, left: list[int],
           due: Mapping[int, RunningJob]) -> None:
    """Step 3 of the module doc: for each whole-node gang still waiting (in order), re-queue the
    LP jobs of whole LP-only nodes that are all at a boundary now, up to the whole nodes it lacks
    beyond the free ones earlier gangs do not count on — when the pool's LP-only whole nodes
    could cover that shortfall at all (else the gang will evict when its wait is over, and
    nodes emptied for it would idle in vain). ``due``: the round's jobs at a boundary
    (`at_boundary`). A node that lost a job to an earlier gang's gathering is no longer
    counted (an LP gang may span several nodes)."""
    st = rnd.state
    touched: set[int] = set()    # nodes that lost a job here
    promised: dict[str, int] = {}
    for jid in left:
        job = rnd.jobs[jid]
        p = st.pool_index[job.pool]
        free = st.whole_free_nodes(p) - promised.get(job.pool, 0)
        need = job.workers - max(free, 0)
        promised[job.pool] = promised.get(job.pool, 0) + job.workers
        if need <= 0:
            continue
        lp_only = [n for n in lp_only_nodes(st, p) if n not in touched]
        if len(lp_only) < need:
            continue
        ready = [n for n in lp_only if st.node_jobs[n] <= due.keys()]
        ready.sort(key=lambda n: workers_on(st, n))
        for n in ready[:need]:
            on_n = st.node_jobs[n]
            for j in [j for j in rnd.running if j in on_n]:   # the running jobs' order
                r = rnd.running[j]
                touched.update(int(m) for m, _g in r.placement)
                st.release(r.job)
                decision.requeue.append(j)


def lp_only_nodes(st: ClusterState, p: int) -> list[int]:
    """Nodes of pool ``p`` of its largest size that hold LP work and no HP."""
    lo, hi = st.pool_slice(p)
    mask = ((st.node_gpus[lo:hi] == st.pool_node_gpus[p]) & (st.node_hp_gpus[lo:hi] == 0)
            & (st.node_lp_gpus[lo:hi] > 0))
    return (np.flatnonzero(mask) + lo).tolist()


def workers_on(st: ClusterState, n: int) -> int:
    """Workers of running jobs on node ``n`` (a gang may put several there)."""
    return sum(sum(1 for m, _g in st.alloc[j][2] if m == n) for j in st.node_jobs[n])


def with_held_nodes(rnd: Round, patience_s: float) -> Round:
    """The round with the whole nodes its waiting HP gangs need added to its reserves, for the
    admission MILP: the greedy LP pass holds the same nodes back (`held_reserves`)."""
    waiting = waiting_workers(rnd, patient_gangs(rnd, patience_s))
    if not waiting:
        return rnd
    reserves = held_reserves(rnd.reserves, waiting, rnd.params.guarantee_classes)
    return replace(rnd, reserves=dict(reserves or {}))


def patience_end(queued: float, patience_s: float) -> float:
    """The first instant at which a gang queued at ``queued`` has waited ``patience_s``
    (`_patient_in`'s test ``t − queued ≥ patience``, exact in floating point): when it is
    retried as an ordinary gang."""
    t = queued + patience_s
    while t - queued < patience_s:
        t = math.nextafter(t, math.inf)
    return t


@dataclass(slots=True)
class _PoolBoundaries:
    """The next window boundaries of a pool's running LP jobs, as `reach` reads them: per
    boundary instant the jobs due then, and the whole LP-only nodes whose jobs all reach their
    boundary at one instant (a whole-node gang can gather such a node there)."""

    due: dict[float, list[RunningJob]]
    whole: list[tuple[float, int]]


def _boundaries(rnd: Round, p: int) -> _PoolBoundaries:
    st = rnd.state
    running = rnd.running
    t = rnd.time
    lo, hi = st.pool_slice(p)
    due: dict[float, list[RunningJob]] = {}
    seen: set[int] = set()
    whole: list[tuple[float, int]] = []
    full = st.pool_node_gpus[p]
    for n in range(lo, hi):
        jobs = st.node_jobs[n]
        if not jobs:
            continue
        ends: set[float] = set()
        lp_only = st.node_hp_gpus[n] == 0 and st.node_gpus[n] == full
        for j in jobs:
            r = running.get(j)
            if r is None or r.job.is_hp:
                lp_only = False
                continue
            # a job at its boundary now can be gathered now (its next one is a window away)
            b = t if r.at_boundary(t) else r.window_start + r.job.guarantee_s
            ends.add(b)
            if j not in seen and b > t:
                seen.add(j)
                due.setdefault(b, []).append(r)
        if lp_only and len(ends) == 1 and min(ends) >= t:
            whole.append((next(iter(ends)), n))
    whole.sort()
    return _PoolBoundaries(due, whole)


def reach(rnd: Round, gangs: list[int], deadlines: Mapping[int, float],
          whole: AbstractSet[int]) -> tuple[list[int], list[int], list[tuple[float, str]]]:
    """Which waiting ``gangs`` (in order; not placeable now) a window boundary known to come
    before their ``deadlines`` (the end of their patience) gives room, on nodes where they
    could take it: ``(keep waiting, evict now, wakes)``.

    A boundary is known: a running LP job's window ends ``guarantee_s`` after it began (it may
    end sooner by completing, which frees its GPUs anyway). A gang of ``whole``-node workers
    counts the whole nodes free now (less those earlier gangs count on) and the whole LP-only
    nodes whose jobs all reach a boundary at one instant before its deadline — those it can
    gather (`gather`); it waits when they make up its workers. Any other gang waits when, at
    one boundary instant before its deadline, the free GPUs plus those of the jobs beside HP
    due then (`beside_hp`, what it may take) host its workers. A gang that no boundary in reach
    helps evicts now: waiting would only delay it. ``wakes``: (time, pool) at which the kept
    gangs want the policy called — the boundaries they count on and their deadlines."""
    st = rnd.state
    t = rnd.time
    jobs = rnd.jobs
    by_pool: dict[int, _PoolBoundaries] = {}
    promised_free: dict[int, int] = {}
    promised_nodes: dict[int, set[int]] = {}
    keep: list[int] = []
    hopeless: list[int] = []
    wakes: list[tuple[float, str]] = []
    # pools where whole-node gangs wait: a gang on notice takes only jobs beside HP there
    whole_pools = {jobs[j].pool for j in whole}
    for jid in gangs:
        job = jobs[jid]
        p = st.pool_index.get(job.pool)
        deadline = deadlines[jid]
        if p is None or deadline <= t:
            hopeless.append(jid)
            continue
        pb = by_pool.get(p)
        if pb is None:
            pb = by_pool[p] = _boundaries(rnd, p)
        at: list[float] = []
        if jid in whole:
            free = max(st.whole_free_nodes(p) - promised_free.get(p, 0), 0)
            need = max(job.workers - free, 0)
            taken = promised_nodes.setdefault(p, set())
            got = [(b, n) for b, n in pb.whole if b <= deadline and n not in taken][:need]
            ok = len(got) >= need
            if ok:
                promised_free[p] = promised_free.get(p, 0) + min(job.workers, free)
                taken.update(n for _b, n in got)
                at = [b for b, _n in got]
        else:
            b_fit = _notice_fit(st, p, job, pb, t, deadline, job.pool in whole_pools)
            ok = b_fit is not None
            if b_fit is not None:
                at = [b_fit]
        if ok:
            keep.append(jid)
            wakes.extend((b, job.pool) for b in sorted(set(at)))
            wakes.append((deadline, job.pool))
        else:
            hopeless.append(jid)
    return keep, hopeless, wakes


def _notice_fit(st: ClusterState, p: int, job: Job, pb: _PoolBoundaries, t: float,
                deadline: float, only_beside_hp: bool) -> float | None:
    """The first boundary instant in (t, deadline] at which the free GPUs and those of the jobs
    beside HP due then host ``job``'s workers (`reach`), or None."""
    g, w = job.g, job.workers
    if g >= MILLI:
        k = gpus_per_worker(g)
        base = st.whole_slots(p, k)
    else:   # workers that share a GPU: each freed GPU holds ⌊1000 / g⌋ of them
        k = 1
        base = st.shared_slots(p, g)
    per_gpu = 1 if g >= MILLI else MILLI // g
    free = st.node_free
    hp = st.node_hp_gpus
    for b in sorted(b for b in pb.due if b <= deadline):
        add: dict[int, int] = {}
        for r in pb.due[b]:
            if r.job.g < MILLI or (only_beside_hp
                                   and not all(hp[n] > 0 for n, _g in r.placement)):
                continue
            for n, gpus in r.placement:
                add[n] = add.get(n, 0) + len(gpus)
        if not add:
            continue
        n_slots = base
        for n, a in add.items():
            f = int(free[n])
            n_slots += ((f + a) // k - f // k) * (per_gpu if g < MILLI else 1)
        if n_slots >= w:
            return b
    return None
