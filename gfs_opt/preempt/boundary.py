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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gfs_opt.model import Decision, JobClass, Round, RunningJob
from gfs_opt.pending import QueueOrder, as_queue
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.hp_pass import hp_pass, pools_to_run
from gfs_opt.preempt.scoring import Placer


def patient_gangs(rnd: Round, patience_s: float) -> list[int]:
    """The round's pending HP gangs that take whole nodes and have waited less than
    ``patience_s`` since their last (re)queue, in the pools a pass would visit."""
    if patience_s <= 0:
        return []
    st = rnd.state
    queue = as_queue(rnd.pending_hp, rnd.jobs, JobClass.HP, rnd.queued_since)
    since = rnd.queued_since
    out: list[int] = []
    for pool in pools_to_run(rnd, queue):
        for entries in queue.shapes(pool).values():
            # a shape's jobs share pool and request: its first answers for all
            if not st.takes_whole_node(rnd.jobs[entries[0][1]]):
                continue
            out.extend(jid for submit, jid in entries
                       if jid not in st.alloc
                       and rnd.time - since.get(jid, submit) < patience_s)
    return out


def at_boundary(rnd: Round) -> dict[int, RunningJob]:
    """Running LP jobs whose guarantee window restarts at this instant (not jobs that just
    started): re-queued now, they break no window and lose no work."""
    t = rnd.time
    return {j: r for j, r in rnd.running.items()
            if not r.job.is_hp and r.window_start == t and r.start < t}


def boundary_pass(rnd: Round, decision: Decision, patient: list[int], *, order: QueueOrder,
                  placer: Placer, rule: PreemptRule | None) -> dict[str, int]:
    """Steps 1–3 of the module doc for the ``patient`` gangs (placements into ``decision``,
    LP jobs taken at their boundary into ``decision.requeue``); returns the workers still
    waiting per pool (step 4's reserve)."""
    hp_pass(replace(rnd, pending_hp=patient), decision, order=order, placer=placer,
            victims=None)
    left = [j for j in patient if j not in decision.placements]
    due = at_boundary(rnd) if left and rule is not None else {}
    if due:
        got = Decision()
        hp_pass(replace(rnd, pending_hp=left), got, order=order, placer=placer, victims=rule,
                evictable=due)
        decision.placements.update(got.placements)
        decision.requeue.extend(got.victims)
        left = [j for j in left if j not in got.placements]
    if left and rule is not None:
        gather(rnd, decision, left, due)
    waiting: dict[str, int] = {}
    for j in left:
        job = rnd.jobs[j]
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
    """Step 3 of the module doc: for each gang still waiting (in order), re-queue the LP jobs of
    whole LP-only nodes that are all at a boundary now, up to the whole nodes it still lacks
    beyond the free ones earlier gangs do not count on — when the pool's LP-only whole nodes
    could cover that shortfall at all (else the gang will evict when its wait is over, and
    nodes emptied for it would idle in vain). ``due``: the round's jobs at a boundary
    (`at_boundary`)."""
    st = rnd.state
    on_node: dict[int, list[RunningJob]] = {}
    for r in rnd.running.values():
        if r.job.id in st.alloc:
            for n, _g in r.placement:
                on_node.setdefault(int(n), []).append(r)
    promised: dict[str, int] = {}
    for jid in left:
        job = rnd.jobs[jid]
        p = st.pool_index[job.pool]
        size = int(st.pool_node_gpus[p])
        lo, hi = st.pool_slice(p)
        free = st.whole_free_nodes(p) - promised.get(job.pool, 0)
        need = job.workers - max(free, 0)
        promised[job.pool] = promised.get(job.pool, 0) + job.workers
        if need <= 0:
            continue
        lp_only = [n for n in range(lo, hi) if int(st.node_gpus[n]) == size
                   and int(st.node_hp_gpus[n]) == 0 and on_node.get(n)
                   and all(r.job.id in st.alloc for r in on_node[n])]
        if len(lp_only) < need:
            continue
        ready = [n for n in lp_only if all(r.job.id in due for r in on_node[n])]
        ready.sort(key=lambda n: len(on_node[n]))
        for n in ready[:need]:
            for r in on_node[n]:
                if r.job.id in st.alloc:
                    st.release(r.job)
                    decision.requeue.append(r.job.id)
