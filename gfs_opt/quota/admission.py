"""LP admission: the quota check of SQA step 5 and the greedy LP pass, in the simulator and on a
standalone round alike.

The LP pass walks each pool's pending LP jobs in the policy's order (`QueueOrder`), refuses a job
whose start would take the pool's running LP GPUs over its class's quota (`quota_for`), and
places the whole gang without preemption (`Placer`) or not at all. `lp_pass` plans on the round's
live state (the engine rolls it back); `greedy_admission` runs it on a copy of a standalone round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gfs_opt.model import ClusterState, Decision, Job, JobClass, Placement, Round
from gfs_opt.pending import PTS_ORDER, PendingQueue, QueueOrder, as_queue
from gfs_opt.preempt.fit_memo import FailSizes, FitMemo, IdlePass
from gfs_opt.preempt.hp_pass import pools_to_run
from gfs_opt.preempt.scoring import BEST_FIT, Placer, pool_can_fit, worker_slots

Quotas = Mapping[tuple[str, float], int]


def quota_allows(lp_running_milli: int, job: Job, quota_milli: int | None) -> bool:
    """Running LP GPUs of the pool plus this job's g·w stay within the quota (None = no quota)."""
    return quota_milli is None or lp_running_milli + job.demand <= quota_milli


def quota_for(quotas: Mapping[tuple[str, float], int], pool: str, d: float) -> int | None:
    """Quota of class ``d`` in ``pool``; a class without its own entry is held to the nearest
    longer class (a longer window needs more hours free, so its quota is the stricter), else to
    the pool's smallest quota. None only when the pool has no quota at all."""
    q = quotas.get((pool, d))
    if q is not None:
        return q
    entries = sorted((dd, qq) for (pp, dd), qq in quotas.items() if pp == pool)
    if not entries:
        return None
    longer = [qq for dd, qq in entries if dd >= d]
    return longer[0] if longer else min(qq for _dd, qq in entries)


def fits_now(rnd: Round, job: Job) -> bool:
    """The whole gang could start right now without preemption (exact worker-slot count)."""
    st = rnd.state
    return pool_can_fit(st, job) and worker_slots(st, job) >= job.workers


def quota_wait(rnd: Round, pool: str, quotas: Mapping[tuple[str, float], int]) -> float | None:
    """Wait since its last (re)queue of the oldest pending LP job of ``pool`` that the quota alone
    keeps from starting (it would fit now), or None when there is none.

    A gang that fits nowhere is not waiting on the quota: counting it would let a job no quota
    can help push η up without bound.
    """
    if pool not in rnd.state.pool_index:
        return None
    lp_running = int(rnd.state.pool_lp[rnd.state.pool_index[pool]])
    queue = as_queue(rnd.pending_lp, rnd.jobs, JobClass.LP)
    oldest: float | None = None
    # the quota and fitting are properties of a gang's shape, so each shape is asked once; its
    # jobs come in submit order and a job waits at most since its submission, so the walk of a
    # shape stops at the first submission no older than the oldest wait found so far
    for (_g, _w, d), entries in queue.shapes(pool).items():
        first = rnd.jobs[entries[0][1]]
        if quota_allows(lp_running, first, quota_for(quotas, pool, d)) or not fits_now(rnd, first):
            continue
        for submit, jid in entries:
            if oldest is not None and submit >= oldest:
                break
            since = rnd.queued_since.get(jid, submit)
            if oldest is None or since < oldest:
                oldest = since
    return None if oldest is None else max(0.0, rnd.time - oldest)


def lp_order_key(job: Job) -> tuple[int, int, float, int]:
    """PTS LP order: (−g, w, submit, id)."""
    return (-job.g, job.workers, job.submit, job.id)


def lp_pass(rnd: Round, decision: Decision, *, order: QueueOrder, placer: Placer,
            quotas: Quotas | None, memo: FitMemo | None = None) -> dict[str, int]:
    """LP pass: quota check, then non-preemptive placement of the whole gang or nothing.

    A job the quota refuses holds a head-of-line order like one that does not fit, and for as
    long (`QueueOrder.holds_line`). Returns how many starts the quota refused, per pool (every
    job reached in policy order that the quota refused counts once per pass).

    The quota and the running LP GPUs it is checked against only tighten during a pass, so a
    refused shape stays refused: without head-of-line blocking the pass stops walking it and
    counts its later jobs from their positions (`ShapeCursor.defer`), which is what walking them
    would have counted — they stop counting where the shape becomes dominated by a failure.
    """
    denied: dict[str, int] = {}
    st = rnd.state
    queue = as_queue(rnd.pending_lp, rnd.jobs, JobClass.LP, rnd.queued_since)
    head_of_line = order.head_of_line

    def holds_since(since: float) -> bool:
        return order.holds_line(rnd.time, since)

    def holds_line(jid: int) -> bool:
        return holds_since(rnd.queued_since.get(jid, rnd.jobs[jid].submit))

    for pool in pools_to_run(rnd, queue):
        p = st.pool_index.get(pool)
        if p is None:
            continue
        lp_now = st.pool_lp.item(p)
        pool_quota: dict[float, int | None] = {}
        remember = memo is not None and not head_of_line
        if remember and memo is not None and pool in memo.idle_passes:
            n = lp_pool_repeat(memo, rnd, queue, pool, decision, order, quotas, pool_quota)
            if n is not None:
                if n:
                    denied[pool] = n
                continue
        failed: list[tuple[int, int, tuple]] = []
        fails = FailSizes()
        known = memo.known(rnd, pool, decision) if memo is not None else None
        skip = None
        if known is not None:
            # as in `hp_pass`, with one more condition: a job the quota refuses counts as a
            # denial before its fit is asked. If every shape is known to fail nothing starts,
            # so each shape's quota verdict is what it is now; partial skips only without quota.
            if lp_pool_settled(known, queue, pool, quotas, pool_quota, lp_now):
                continue
            if not head_of_line and (quotas is None or not any(pp == pool for pp, _d in quotas)):
                skip = known.skips
        n_denied = 0
        stop = False
        started = False
        if order.ages:
            started = _aged_first(rnd, decision, queue, pool, rnd.time - order.lp_age_s,
                                  placer, known, quotas, pool_quota)
        for cursor in queue.cursors(pool, order.fifo, skip):
            for jid, (g, w, d) in cursor:
                if jid in st.alloc:
                    started = True   # placed earlier in the round: not a pass to build on
                    continue
                if fails.dominated(g, w):
                    cursor.drop()   # the rest of the shape is dominated too
                    continue
                if quotas is not None and _refused(quotas, pool_quota, pool,
                                                   int(st.pool_lp[p]), (g, w, d)):
                    n_denied += 1
                    if head_of_line:
                        if holds_line(jid):
                            stop = True
                            break
                        # the shape's later jobs are refused too; walk on to the first that
                        # still holds the line (a long backlog has hundreds that do not)
                        cursor.defer_until(holds_line, holds_since)
                    else:
                        cursor.defer()
                    continue
                job = rnd.jobs[jid]
                placement = _try_place(st, job, placer, known)
                if placement is None:
                    if holds_line(jid):
                        stop = True
                        break
                    fails.add(g, w)
                    if remember:
                        failed.append((g, w, cursor.key))
                    cursor.drop()
                    gone = [s for s in cursor.deferred() if fails.dominated(s[0], s[1])]
                    if gone:
                        n_denied += cursor.settle(gone)
                    continue
                st.allocate(job, placement)
                decision.placements[jid] = placement
                started = True
            n_denied += cursor.settle(at_end=not stop)
            if stop:
                break
        if n_denied:
            denied[pool] = n_denied
        if memo is not None:
            memo.keep(rnd, pool, known, fails)
            if remember and not started:
                memo.keep_idle(rnd, pool, lp_now, quotas, queue.edits(pool), n_denied, failed)
            elif remember and pool in memo.idle_passes:
                memo.forget_idle(pool)
    return denied


def _try_place(st: ClusterState, job: Job, placer: Placer,
               known: FailSizes | None) -> Placement | None:
    """Where the whole gang starts without preemption, or None; a gang the pool is known not to
    fit (``known``) is not tried."""
    if known is not None and known.dominated(job.g, job.workers):
        return None
    return placer.gang(st, job)


def _aged_first(rnd: Round, decision: Decision, queue: PendingQueue, pool: str, cut: float,
                placer: Placer, known: FailSizes | None, quotas: Quotas | None,
                pool_quota: dict[float, int | None]) -> bool:
    """The aged part of an LP pass (`QueueOrder.lp_age_s`): the jobs submitted at or before
    ``cut``, in submit order, each started if the quota allows it and its gang fits. Returns
    whether a job started.

    Nothing here is counted and its failures are its own: the walk in PTS's order that follows
    reaches every job left and counts as if this part had not been, on the state it left. So a
    pass whose aged part starts nothing is the PTS pass exactly, and an idle pass is told from
    the last one as without aging (`lp_pool_repeat`): with no GPU freed, no job that waited
    then can start now, in any order."""
    st = rnd.state
    p = st.pool_index[pool]
    fails = FailSizes()
    started = False
    for cursor in queue.cursors(pool, True):
        for jid, (g, w, d) in cursor:
            if cursor.key[0] > cut:
                return started
            if jid in st.alloc:
                continue
            if fails.dominated(g, w) or (quotas is not None and _refused(
                    quotas, pool_quota, pool, int(st.pool_lp[p]), (g, w, d))):
                cursor.drop()   # the quota and the room only tighten during a pass
                continue
            job = rnd.jobs[jid]
            placement = _try_place(st, job, placer, known)
            if placement is None:
                fails.add(g, w)
                cursor.drop()
                continue
            st.allocate(job, placement)
            decision.placements[jid] = placement
            started = True
    return started


def lp_pool_repeat(memo: FitMemo, rnd: Round, queue: PendingQueue, pool: str,
                   decision: Decision, order: QueueOrder, quotas: Quotas | None,
                   pool_quota: dict[float, int | None]) -> int | None:
    """What the LP pass of ``pool`` counts, told without walking from the pool's last pass that
    started nothing (`FitMemo.idle`): with no GPUs freed since and the same running LP and
    quotas, it differs only by the jobs queued since (`_repeat_idle`). None: walk the pool —
    always under head-of-line blocking, where wait times decide it (an LP job placed earlier
    in the round changes the running LP, so that pass is walked too)."""
    if order.head_of_line:
        return None
    idle = memo.idle(rnd, pool, decision)
    if idle is None:
        return None
    st = rnd.state
    lp_now = st.pool_lp.item(st.pool_index[pool])
    if idle.lp_running != lp_now or idle.quotas != quotas:
        return None
    n = _repeat_idle(queue, pool, idle, rnd.jobs, order.fifo, quotas, pool_quota, lp_now)
    if n is not None:   # the pass told is the new starting point
        idle.edits, idle.counted = queue.edits(pool), n
    return n


def _repeat_idle(queue: PendingQueue, pool: str, idle: IdlePass, jobs: Mapping[int, Job],
                 fifo: bool, quotas: Quotas | None, pool_quota: dict[float, int | None],
                 lp_running: int) -> int | None:
    """What a pass of ``pool`` counts when its last pass (``idle``) started nothing and only
    jobs were queued since, under the same running LP and quotas with no GPUs freed; None when
    that cannot be told without walking.

    The walk would be the old one with the new jobs in their places: a new job the quota refuses
    counts unless a failure of the old walk in its cursor (one per size g; one in all in submit
    order) that dominates its gang comes before it (then its shape is dropped there); a new job
    behind such a failure is passed over. Any other new job would be tried, and then the
    pass is walked."""
    added = queue.added_since(pool, idle.edits)
    if added is None:
        return None
    n = idle.counted
    for jid in added:
        job = jobs[jid]
        g, w = job.g, job.workers
        key = queue.order_key(job, fifo)
        behind = any(key > k for gf, wf, k in idle.failed
                     if (gf <= g if fifo else gf == g) and wf <= w)
        if _refused(quotas, pool_quota, pool, lp_running, (g, w, job.guarantee_h)):
            n += not behind
        elif not behind:
            return None
    return n


def lp_pool_settled(known: FailSizes, queue: PendingQueue, pool: str, quotas: Quotas | None,
                    pool_quota: dict[float, int | None], lp_running: int) -> bool:
    """Whether an LP pass of ``pool`` changes and counts nothing: every waiting shape is known
    not to fit and none is refused by the quota (a refusal counts as a denial)."""
    return known.covers_queue(queue, pool) and (quotas is None or not any(
        _refused(quotas, pool_quota, pool, lp_running, s) for s in queue.shapes(pool)))


def _refused(quotas: Quotas | None, pool_quota: dict[float, int | None], pool: str,
             lp_running: int, shape: tuple[int, int, float]) -> bool:
    """Whether the quota refuses a job of ``shape`` (memoising the class quotas of the pool)."""
    if quotas is None:
        return False
    g, w, d = shape
    quota = pool_quota.get(d, -1)
    if quota == -1:
        quota = pool_quota[d] = quota_for(quotas, pool, d)
    return quota is not None and lp_running + g * w > quota


def greedy_admission(rnd: Round, quotas: Quotas | None = None, *, order: QueueOrder = PTS_ORDER,
                     placer: Placer = BEST_FIT) -> list[int]:
    """LP job ids the LP pass starts in a standalone round, in PTS LP order (`lp_order_key`).

    ``quotas``: the quotas to apply (default: the round's quotas in force; ``{}``: none). Works
    on a copy of the state; the round is left as it is. Defaults: GFS's pass without eviction
    history (the exact solvers' warm start).
    """
    decision = Decision()
    lp_pass(replace(rnd, state=rnd.state.copy()), decision, order=order, placer=placer,
            quotas=rnd.quotas if quotas is None else quotas)
    return sorted(decision.placements, key=lambda j: lp_order_key(rnd.jobs[j]))
