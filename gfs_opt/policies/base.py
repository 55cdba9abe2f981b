"""One interface for every scheduling policy (in the spirit of Gavel's policies).

A policy turns a `Round` into a `Decision`. It may plan on ``round.state`` (the engine records the
changes and rolls them back before applying the returned decision through its own checks), but it
never reaches into the simulator. Hooks let it see HP usage history and the daily clock.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
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
from gfs_opt.quota.admission import quota_allows, quota_for
from gfs_opt.quota.spot_quota import SpotQuota
from gfs_opt.sim.queues import PendingQueue, as_queue

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
        if self.spot is not None:
            self.spot.reset(state, params, origin)

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


def _pool_groups(rnd: Round, queue: PendingQueue, pool: str, fifo: bool,
                 fails: FailSizes) -> list[Iterator[int]]:
    """Candidates in policy order: one group in FIFO order (sizes that can no longer start are
    dropped as the pass goes), else one group per request size g (largest first; HP by submit
    time, LP by (w, submit))."""
    if fifo:
        return [queue.fifo_ids(pool, fails.blocks)]
    return [ids for _g, ids in queue.buckets(pool)]


class FailSizes:
    """PTS's ``fail_size`` rule, generalised to gangs.

    A gang of w workers × g that failed proves that every gang with g' ≥ g and w' ≥ w fails too
    (placement only gets harder), and nothing more. The paper's rule keys on g alone, which —
    with gangs placed whole — lets one huge gang that can never fit starve every smaller job of
    its size (the authors' simulator placed gangs partially and never saw this).
    """

    __slots__ = ("front",)

    def __init__(self) -> None:
        self.front: list[tuple[int, int]] = []

    def dominated(self, g: int, w: int) -> bool:
        return any(g >= gf and w >= wf for gf, wf in self.front)

    def add(self, g: int, w: int) -> None:
        self.front = [(gf, wf) for gf, wf in self.front if not (gf >= g and wf >= w)]
        self.front.append((g, w))

    def blocks(self, g: int) -> bool:
        """Every job with per-worker request ≥ g is dominated (a single worker of ≤ g failed)."""
        return any(gf <= g and wf <= 1 for gf, wf in self.front)


def _holds_line(rnd: Round, jid: int, job: Job, hol_timeout_s: float) -> bool:
    """A failed head of a FIFO queue blocks the jobs behind it until it has waited too long."""
    return rnd.time - rnd.queued_since.get(jid, job.submit) <= hol_timeout_s


def hp_pass(rnd: Round, decision: Decision, *, rule: PreemptRule | None,
            e_score: np.ndarray | None = None, use_history: bool = True,
            worker_fn: WorkerFn | None = None, fifo: bool = False,
            head_of_line: bool = False, evictable: Mapping[int, RunningJob] | None = None,
            hol_timeout_s: float = float("inf")) -> None:
    """HP pass on the live state. ``rule=None`` disables preemption.

    Order is PTS's (−g, submit) unless ``fifo``; jobs dominated by a gang that already failed in
    this pool are skipped (`FailSizes`); ``head_of_line`` stops a pool at its first failure,
    unless that job has waited longer than ``hol_timeout_s`` (then later jobs may pass it).
    """
    st = rnd.state
    queue = as_queue(rnd.pending_hp, rnd.jobs, JobClass.HP)
    running = rnd.running if evictable is None else evictable
    copied = False  # copy-on-write: most passes evict nobody, and running can be large
    for pool in pools_to_run(rnd, queue.pools()):
        fails = FailSizes()
        gmin = queue.min_g(pool)
        stop = False
        for group in _pool_groups(rnd, queue, pool, fifo, fails):
            for jid in group:
                job = rnd.jobs[jid]
                if jid in st.alloc:  # placed earlier in this round (e.g. by another pass)
                    continue
                if fails.dominated(job.g, job.workers):
                    if fails.blocks(gmin if fifo else job.g):
                        break  # nothing left in this group (or pool) can start
                    continue
                placement = None
                victims: list[int] = []
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
                    fails.add(job.g, job.workers)
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


def lp_pass(rnd: Round, decision: Decision, *, quotas: Mapping[tuple[str, float], int] | None,
            e_score: np.ndarray | None = None, use_history: bool = True,
            worker_fn: WorkerFn | None = None, fifo: bool = False,
            head_of_line: bool = False, hol_timeout_s: float = float("inf")) -> dict[str, int]:
    """LP pass: quota check, then non-preemptive placement of the whole gang or nothing.

    A job the quota refuses holds a FIFO line like one that does not fit, and for as long
    (``hol_timeout_s``). Returns how many starts the quota refused, per pool.
    """
    denied: dict[str, int] = {}
    st = rnd.state
    queue = as_queue(rnd.pending_lp, rnd.jobs, JobClass.LP)
    for pool in pools_to_run(rnd, queue.pools()):
        p = st.pool_index.get(pool)
        if p is None:
            continue
        fails = FailSizes()
        gmin = queue.min_g(pool)
        stop = False
        for group in _pool_groups(rnd, queue, pool, fifo, fails):
            for jid in group:
                job = rnd.jobs[jid]
                if jid in st.alloc:
                    continue
                if fails.dominated(job.g, job.workers):
                    # PTS's LP order has w ascending inside a size: the rest is dominated too
                    if fifo and not fails.blocks(gmin):
                        continue
                    break
                quota = quota_for(quotas, pool, job.guarantee_h) if quotas is not None else None
                if not quota_allows(int(st.pool_lp[p]), job, quota):
                    denied[pool] = denied.get(pool, 0) + 1
                    if head_of_line and _holds_line(rnd, jid, job, hol_timeout_s):
                        stop = True
                        break
                    continue
                placement = place_gang(st, job, e_score, use_history, worker_fn)
                if placement is None:
                    if head_of_line and _holds_line(rnd, jid, job, hol_timeout_s):
                        stop = True
                        break
                    fails.add(job.g, job.workers)
                    continue
                st.allocate(job, placement)
                decision.placements[jid] = placement
            if stop:
                break
    return denied


def placement_is_whole(placement: Placement) -> bool:
    return all(len(g) >= 1 for _n, g in placement)
