"""One interface for every scheduling policy (in the spirit of Gavel's policies).

A policy turns a `Round` into a `Decision`. It may plan on ``round.state`` (the engine records the
changes and rolls them back before applying the returned decision through its own checks), but it
never reaches into the simulator. Hooks let it see HP usage history and the daily clock.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gfs_opt.model import (
    ClusterState,
    Decision,
    Job,
    JobClass,
    Params,
    Placement,
    Round,
    RunningJob,
    WorkerPlacement,
)
from gfs_opt.preempt.greedy import (
    PreemptContext,
    PreemptRule,
    place_gang_preemptive,
)
from gfs_opt.preempt.scoring import place_gang, pool_can_fit
from gfs_opt.quota.admission import quota_for
from gfs_opt.quota.spot_quota import SpotQuota
from gfs_opt.sim.queues import as_queue

WorkerFn = Callable[[ClusterState, Job], WorkerPlacement | None]


class Policy(ABC):
    """Base class: subclasses set ``name`` and implement `decide`.

    A policy that admits LP work under the spot quota holds a `SpotQuota` in ``spot``; the clock
    hooks below feed it, and `diagnostics` reports what it did.
    """

    name: ClassVar[str] = "policy"
    #: called at every event time (False: only on quota-refresh rounds, e.g. Chronus' 300 s rounds)
    every_event: ClassVar[bool] = True
    spot: SpotQuota | None = None

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        """Called once before a simulation (or a standalone solve) starts."""
        self.params = params
        self._fit_memos: dict[str, FitMemo] = {}
        if self.spot is not None:
            self.spot.reset(state, params, origin)

    def fit_memo(self, name: str, preemptive: bool) -> FitMemo:
        """The `FitMemo` of one of the policy's passes (fresh after `reset`)."""
        memos = self.__dict__.setdefault("_fit_memos", {})
        memo = memos.get(name)
        if memo is None:
            memo = memos[name] = FitMemo(preemptive)
        return memo

    @abstractmethod
    def decide(self, rnd: Round) -> Decision: ...

    def observe_hour(self, t: float, hp_usage: Mapping[tuple[str, str], float]) -> None:
        """Hourly maximum of HP GPUs in use per (pool, org) for the hour that ends at ``t``."""
        if self.spot is not None:
            self.spot.observe_hour(t, hp_usage)

    def on_day(self, t: float) -> None:
        """Midnight of simulated time (forecaster refits)."""
        if self.spot is not None:
            self.spot.on_day(t)

    def options(self) -> dict[str, object]:
        return {}

    def diagnostics(self) -> dict[str, object]:
        """What the policy wants said about the run (e.g. the quota's activity), JSON-friendly."""
        return {"quota": self.spot.diagnostics()} if self.spot is not None else {}

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Mapping[tuple[str, float], int] | None:
        """Refresh the spot quota when due; the quotas this pass applies (None: no quota)."""
        if self.spot is None:
            return None
        if self.spot.due(rnd):
            self.spot.refresh(rnd, decision)
        return self.spot.in_force()

    def lp_pass_under_quota(self, rnd: Round, decision: Decision,
                            quotas: Mapping[tuple[str, float], int] | None, **kw: Any) -> None:
        """`lp_pass`, with the quota's refusals counted for the diagnostics."""
        denied = lp_pass(rnd, decision, quotas=quotas, **kw)
        if self.spot is not None:
            self.spot.count_denials(rnd.time, denied)


QUOTA_MODES = ("none", "sqa")


def shared_quota(mode: str, forecaster: str, policy: str) -> SpotQuota | None:
    """A baseline's LP admission: no quota, or GFS's SQA quota with η fixed at 1 (``"sqa"``),
    the setting in which the authors ran YARN-CS, Lyra and FGD."""
    if mode not in QUOTA_MODES:
        raise ValueError(f"{policy} quota must be one of {', '.join(QUOTA_MODES)}, got {mode!r}")
    return SpotQuota(forecaster, adaptive=False) if mode == "sqa" else None


@dataclass(slots=True)
class PassStats:
    hp_placed: int = 0
    lp_placed: int = 0
    victims: int = 0


def pools_to_run(rnd: Round, queue_pools: list[str]) -> list[str]:
    dirty = getattr(rnd, "dirty_pools", None)
    pools = sorted(queue_pools)
    return pools if dirty is None else [p for p in pools if p in dirty]


def live_running(rnd: Round, protected: set[int] | None = None) -> dict[int, RunningJob]:
    """Running LP jobs that may be evicted (everything not protected)."""
    if not protected:
        return rnd.running  # type: ignore[return-value]
    return {j: r for j, r in rnd.running.items() if j not in protected}


class FailSizes:
    """PTS's ``fail_size`` rule, generalised to gangs.

    A gang of w workers × g that failed proves that every gang with g' ≥ g and w' ≥ w fails too
    (placement only gets harder), and nothing more. The paper's rule keys on g alone, which —
    with gangs placed whole — lets one huge gang that can never fit starve every smaller job of
    its size (the authors' simulator placed gangs partially and never saw this).
    """

    __slots__ = ("front",)

    def __init__(self, front: list[tuple[int, int]] | None = None) -> None:
        self.front: list[tuple[int, int]] = list(front) if front else []

    def dominated(self, g: int, w: int) -> bool:
        for gf, wf in self.front:  # noqa: SIM110 (a plain loop: hot, and any() is slower)
            if g >= gf and w >= wf:
                return True
        return False

    def add(self, g: int, w: int) -> None:
        self.front = [(gf, wf) for gf, wf in self.front if not (gf >= g and wf >= w)]
        self.front.append((g, w))

    def blocks(self, g: int) -> bool:
        """Every job with per-worker request ≥ g is dominated (a single worker of ≤ g failed)."""
        return any(gf <= g and wf <= 1 for gf, wf in self.front)


class FitMemo:
    """Gang shapes known not to fit in a pool, carried from one pass to the next.

    Whether a gang fits is a count of worker slots (`worker_slots`; the greedy placements fill
    one slot per worker, so they succeed exactly when enough exist): without preemption the count
    grows only when GPUs of the pool are released, and when any running LP job may be evicted,
    only when HP GPUs are released. A shape that failed therefore keeps failing until the engine
    reports such a release in the pool (``Round.released`` / ``Round.hp_released``) or a pass of
    the same round released victims there. A pass uses the memo only to skip the costly tries of
    shapes it knows will fail; it still refuses them in the same order, so decisions do not
    change. Built-in placement functions only: a ``worker_fn`` that can fail with free slots
    left would break the premise.
    """

    def __init__(self, preemptive: bool) -> None:
        self.preemptive = preemptive
        self._known: dict[str, tuple[int, list[tuple[int, int]]]] = {}

    def _count(self, rnd: Round, pool: str) -> int | None:
        counts = rnd.hp_released if self.preemptive else rnd.released
        return None if counts is None else counts.get(pool, 0)

    def known(self, rnd: Round, pool: str, decision: Decision) -> FailSizes | None:
        """Shapes known to fail in ``pool`` now (None: nothing known)."""
        entry = self._known.get(pool)
        if entry is None or entry[0] != self._count(rnd, pool):
            return None
        if not self.preemptive and _released_in(rnd, pool, decision):
            return None
        return FailSizes(entry[1])

    def keep(self, rnd: Round, pool: str, known: FailSizes | None, fails: FailSizes) -> None:
        """Remember what this pass saw fail (with what was known before it)."""
        count = self._count(rnd, pool)
        if count is None:
            return
        merged = FailSizes(known.front if known is not None else None)
        for g, w in fails.front:
            if not merged.dominated(g, w):
                merged.add(g, w)
        self._known[pool] = (count, merged.front)


def _released_in(rnd: Round, pool: str, decision: Decision) -> bool:
    """Whether this round already freed GPUs of ``pool`` (victims or re-queues)."""
    jobs = rnd.jobs
    return any(jobs[j].pool == pool for j in decision.victims) or any(
        jobs[j].pool == pool for j in decision.requeue)


def _holds_line(rnd: Round, jid: int, job: Job, hol_timeout_s: float) -> bool:
    """A failed head of a FIFO queue blocks the jobs behind it until it has waited too long."""
    return rnd.time - rnd.queued_since.get(jid, job.submit) <= hol_timeout_s


def hp_pass(rnd: Round, decision: Decision, *, rule: PreemptRule | None,
            e_score: np.ndarray | None = None, use_history: bool = True,
            worker_fn: WorkerFn | None = None, fifo: bool = False,
            head_of_line: bool = False, evictable: Mapping[int, RunningJob] | None = None,
            hol_timeout_s: float = float("inf"), memo: FitMemo | None = None) -> None:
    """HP pass on the live state. ``rule=None`` disables preemption.

    Order is PTS's (−g, submit) unless ``fifo``; jobs dominated by a gang that already failed in
    this pool are skipped (`FailSizes`); ``head_of_line`` stops a pool at its first failure,
    unless that job has waited longer than ``hol_timeout_s`` (then later jobs may pass it).
    ``memo`` (see `FitMemo`; ignored with ``evictable``) skips tries known to fail.
    """
    st = rnd.state
    queue = as_queue(rnd.pending_hp, rnd.jobs, JobClass.HP)
    running = rnd.running if evictable is None else evictable
    if evictable is not None:
        memo = None
    copied = False  # copy-on-write: most passes evict nobody, and running can be large
    for pool in pools_to_run(rnd, queue.pools()):
        fails = FailSizes()
        known = memo.known(rnd, pool, decision) if memo is not None else None
        stop = False
        for cursor in queue.cursors(pool, fifo):
            for jid, (g, w, _d) in cursor:
                if jid in st.alloc:  # placed earlier in this round (e.g. by another pass)
                    continue
                if fails.dominated(g, w):
                    cursor.drop()  # nothing later of this shape can start either
                    continue
                job = rnd.jobs[jid]
                placement = None
                victims: list[int] = []
                if known is None or not known.dominated(g, w):
                    if pool_can_fit(st, job):
                        placement = place_gang(st, job, e_score, use_history, worker_fn)
                    if placement is None and rule is not None:
                        ctx = PreemptContext(st, running, rnd.time, rnd.pool_status(pool),
                                             st.capacity_gpus(pool), rnd.params.eval_length,
                                             rnd.params.restart_overhead)
                        res = place_gang_preemptive(ctx, job, rule, e_score, use_history)
                        if res is not None:
                            placement, victims = res
                if placement is None:
                    if head_of_line and _holds_line(rnd, jid, job, hol_timeout_s):
                        stop = True
                        break
                    fails.add(g, w)
                    cursor.drop()
                    continue
                if victims and not copied:
                    running, copied = dict(running), True
                for v in victims:
                    st.release(running.pop(v).job)  # type: ignore[union-attr]
                decision.victims.extend(victims)
                st.allocate(job, placement)
                decision.placements[jid] = placement
            if stop:
                break
        if memo is not None:
            memo.keep(rnd, pool, known, fails)


def lp_pass(rnd: Round, decision: Decision, *, quotas: Mapping[tuple[str, float], int] | None,
            e_score: np.ndarray | None = None, use_history: bool = True,
            worker_fn: WorkerFn | None = None, fifo: bool = False,
            head_of_line: bool = False, hol_timeout_s: float = float("inf"),
            memo: FitMemo | None = None) -> dict[str, int]:
    """LP pass: quota check, then non-preemptive placement of the whole gang or nothing.

    A job the quota refuses holds a FIFO line like one that does not fit, and for as long
    (``hol_timeout_s``). Returns how many starts the quota refused, per pool (every job reached
    in policy order that the quota refused counts once per pass).

    The quota and the running LP GPUs it is checked against only tighten during a pass, so a
    refused shape stays refused: without ``head_of_line`` the pass stops walking it and counts
    its later jobs from their positions (`ShapeCursor.defer`), which is what walking them would
    have counted — they stop counting where the shape becomes dominated by a failure.
    """
    denied: dict[str, int] = {}
    st = rnd.state
    queue = as_queue(rnd.pending_lp, rnd.jobs, JobClass.LP)
    for pool in pools_to_run(rnd, queue.pools()):
        p = st.pool_index.get(pool)
        if p is None:
            continue
        fails = FailSizes()
        known = memo.known(rnd, pool, decision) if memo is not None else None
        pool_quota: dict[float, int | None] = {}
        n_denied = 0
        stop = False
        for cursor in queue.cursors(pool, fifo):
            for jid, (g, w, d) in cursor:
                if jid in st.alloc:
                    continue
                if fails.dominated(g, w):
                    cursor.drop()   # the rest of the shape is dominated too
                    continue
                if quotas is not None:
                    quota = pool_quota.get(d, -1)
                    if quota == -1:
                        quota = pool_quota[d] = quota_for(quotas, pool, d)
                    if quota is not None and int(st.pool_lp[p]) + g * w > quota:
                        n_denied += 1
                        job = rnd.jobs[jid]
                        if head_of_line:
                            if _holds_line(rnd, jid, job, hol_timeout_s):
                                stop = True
                                break
                        else:
                            cursor.defer()
                        continue
                job = rnd.jobs[jid]
                placement = None
                if known is None or not known.dominated(g, w):
                    placement = place_gang(st, job, e_score, use_history, worker_fn)
                if placement is None:
                    if head_of_line and _holds_line(rnd, jid, job, hol_timeout_s):
                        stop = True
                        break
                    fails.add(g, w)
                    cursor.drop()
                    gone = [s for s in cursor.deferred() if fails.dominated(s[0], s[1])]
                    if gone:
                        n_denied += cursor.settle(gone)
                    continue
                st.allocate(job, placement)
                decision.placements[jid] = placement
            n_denied += cursor.settle(at_end=not stop)
            if stop:
                break
        if n_denied:
            denied[pool] = n_denied
        if memo is not None:
            memo.keep(rnd, pool, known, fails)
    return denied


def placement_is_whole(placement: Placement) -> bool:
    return all(len(g) >= 1 for _n, g in placement)
