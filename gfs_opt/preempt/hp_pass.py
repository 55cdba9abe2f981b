"""The greedy HP pass: PTS (GFS-SPEC §2.3) and every baseline's variant, in the simulator and on a
standalone round alike.

A pass walks each pool's pending HP jobs in the policy's order (`QueueOrder`), tries a free spot
for the whole gang (`Placer`), else — with a victim rule (`PreemptRule`) — evicts LP work so it
fits. A gang that failed rules out every gang at least as large in the same pool (`FailSizes`).
`hp_pass` plans on the round's live state (the engine rolls it back); `greedy_preemption` runs it
on a copy of a standalone round, which is what `gfs-opt solve --method greedy` and the exact
solver's warm start use.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace
from functools import partial

from gfs_opt.model import Decision, JobClass, Round, RunningJob, SolveReport, plain_dict
from gfs_opt.pending import PTS_ORDER, PendingQueue, QueueOrder, as_queue
from gfs_opt.preempt.fit_memo import FailSizes, FitMemo, slots
from gfs_opt.preempt.greedy import (
    PTS_RULE,
    ChoiceCache,
    PreemptContext,
    PreemptRule,
    place_gang_preemptive,
)
from gfs_opt.preempt.scoring import BEST_FIT, Placer, pool_can_fit


def pools_to_run(rnd: Round, queue: PendingQueue) -> list[str]:
    """The pools with jobs in ``queue`` a pass visits, in name order: those that changed since
    the last pass (usually one, so the queue's other pools are not looked at)."""
    dirty = rnd.dirty_pools
    if dirty is None:
        return sorted(queue.pools())
    if len(dirty) == 1:   # a job event's round
        for p in dirty:
            return [p] if queue.shapes(p) else []
    return sorted(p for p in dirty if queue.shapes(p))


def hp_pass(rnd: Round, decision: Decision, *, order: QueueOrder, placer: Placer,
            victims: PreemptRule | None, evictable: Mapping[int, RunningJob] | None = None,
            memo: FitMemo | None = None, waiting: AbstractSet[int] = frozenset(),
            tightest_of_evictable: bool = False, pending: Collection[int] | None = None) -> None:
    """HP pass on the round's state (placements and victims go into ``decision``).

    ``victims=None`` disables preemption; ``evictable`` narrows the LP jobs that may be evicted
    (default: every running job of the round; HP jobs are never chosen). Jobs dominated by a gang
    that already failed in this pool are skipped (`FailSizes`); under a head-of-line order a
    blocked job stops its pool's pass (`QueueOrder.holds_line`). ``memo`` (see `FitMemo`;
    ignored with ``evictable``) skips tries known to fail. ``waiting``: gangs the pass leaves
    alone (they wait for a window boundary, `gfs_opt.preempt.boundary`); they are not tried, so
    they teach the memo nothing. ``tightest_of_evictable``: a worker's tightest fit by eviction
    is sought among the nodes of ``evictable`` (`PreemptContext.tightest_of_nodes`).
    ``pending``: the HP jobs the pass walks, in place of the round's (a step's own gangs:
    cheaper than a changed copy of the round, which the boundary step would make every pass).
    """
    st = rnd.state
    queue = as_queue(rnd.pending_hp if pending is None else pending, rnd.jobs, JobClass.HP)
    running: Mapping[int, RunningJob] = rnd.running if evictable is None else evictable
    if evictable is not None:
        memo = None
    own: dict[int, RunningJob] | None = None  # copy-on-write: most passes evict nobody
    e_score, use_history = placer.e_score, placer.use_history
    preemptive = victims is not None
    hol = order.head_of_line
    for pool in pools_to_run(rnd, queue):
        fails = FailSizes()
        known = memo.known(rnd, pool, decision) if memo is not None else None
        # a shape the cursor reaches dominated by a failure is dropped unwalked (its jobs would
        # each be dropped in turn)
        skip = fails.skips
        if known is not None:
            # A known-failing job changes nothing but `fails`, and what it adds there is
            # dominated by `known` already. Without head-of-line blocking such shapes can be left
            # out of the walk; with it one of them may still stop the pass, so only a pool where
            # every waiting shape is known to fail (a backlog's usual pass) is skipped whole.
            if known.covers_queue(queue, pool):
                continue
            if not hol:
                skip = partial(_either_skips, fails, known)
        cache: ChoiceCache = {}
        ctx: PreemptContext | None = None   # one per pool and pass: its c_j hold for the pass
        # slots by eviction per request g (`slots`), until the pass changes the pool's state:
        # a backlog's shapes share a few sizes
        room: dict[int, int] = {}
        p = st.pool_index.get(pool)
        stop = False
        for cursor in queue.cursors(pool, order.hp_in_submit_order, skip):
            for jid, (g, w, _d) in cursor:
                if jid in st.alloc or jid in waiting:  # placed earlier in this round (e.g.
                    continue                             # by another pass), or left to wait
                if fails.dominated(g, w):
                    cursor.drop()  # nothing later of this shape can start either
                    continue
                job = rnd.jobs[jid]
                placement = None
                chosen: list[int] = []
                tries = known is None or not known.dominated(g, w)
                if tries and preemptive and p is not None:
                    # a shape without room even by eviction fails every try (`lacks_room`):
                    # most preemptive tries in a backlog, which the slot count answers for a
                    # fraction of a try's cost (a try without preemption starts with one)
                    n_slots = room.get(g)
                    if n_slots is None:
                        n_slots = room[g] = slots(st, p, g, True)
                    tries = n_slots >= w
                if tries:
                    if pool_can_fit(st, job):
                        placement = placer.gang(st, job)
                    if placement is None and victims is not None:
                        if ctx is None or ctx.running is not running:
                            ctx = PreemptContext(st, running, rnd.time, rnd.pool_status(pool),
                                                 st.capacity_gpus(pool), rnd.params.eval_length,
                                                 rnd.params.restart_overhead,
                                                 None if evictable is None
                                                 else evictable_nodes(evictable),
                                                 tightest_of_nodes=tightest_of_evictable)
                        # best fit's free spot was tried above (or the pool lacks the milli)
                        res = place_gang_preemptive(ctx, job, victims, e_score, use_history, cache,
                                                    free_tried=placer.worker_fn is None)
                        if res is not None:
                            placement, chosen = res
                if placement is None:
                    if hol and order.holds_line(rnd.time, rnd.queued_since.get(jid, job.submit)):
                        stop = True
                        break
                    fails.add(g, w)
                    cursor.drop()
                    continue
                if chosen:
                    if own is None:
                        own = plain_dict(running)
                        running = own
                    for v in chosen:
                        gone = own.pop(v)
                        st.release(gone.job)
                        for n, _gpus in gone.placement:
                            cache.pop(n, None)
                decision.victims.extend(chosen)
                st.allocate(job, placement)
                room.clear()
                for n, _gpus in placement:
                    cache.pop(n, None)
                decision.placements[jid] = placement
            if stop:
                break
        if memo is not None:
            memo.keep(rnd, pool, known, fails)


def evictable_nodes(evictable: Mapping[int, RunningJob]) -> set[int]:
    """The nodes the jobs of ``evictable`` run on (`PreemptContext.nodes`)."""
    return {n for r in evictable.values() for n, _g in r.placement}


def _either_skips(a: FailSizes, b: FailSizes, shape: tuple[int, int, float]) -> bool:
    return a.skips(shape) or b.skips(shape)


def greedy_preemption(rnd: Round, victims: PreemptRule | None = PTS_RULE, *,
                      order: QueueOrder = PTS_ORDER, placer: Placer = BEST_FIT,
                      evictable: Mapping[int, RunningJob] | None = None) -> Decision:
    """`hp_pass` on a standalone round, planned on a copy of its state (the round is left as it
    is). Defaults: GFS's pass without eviction history (the exact solvers' warm start);
    ``victims=None``: no preemption."""
    t0 = time.perf_counter()
    decision = Decision()
    hp_pass(replace(rnd, state=rnd.state.copy()), decision, order=order, placer=placer,
            victims=victims, evictable=evictable)
    decision.reports.append(SolveReport(step="preemption", method="greedy", status="heuristic",
                                        time_s=time.perf_counter() - t0, solver="pts-greedy"))
    return decision
