"""Event-driven simulator (GFS-SPEC §4).

Events: arrivals, completions, guarantee-window ends, quota refresh (300 s), hourly usage
history, daily refit, 60 s sampling inside the evaluation window. At one instant the order is:
window successes and completions → arrivals → quota refresh → policy (HP pass, LP pass) →
sampling. A policy pass runs only when something that could change its answer happened
(an arrival or release in a pool, a quota refresh), and only for the pools concerned.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Protocol

import numpy as np
from threadpoolctl import threadpool_limits

from gfs_opt.errors import GfsError
from gfs_opt.model import (
    MILLI,
    AllocationError,
    Decision,
    Job,
    JobClass,
    Params,
    Placement,
    PoolForecast,
    PoolStatus,
    QuotaFeedback,
    Round,
    RunningJob,
    WindowOutcome,
    normalized,
)
from gfs_opt.pending import PendingQueue
from gfs_opt.policies.base import Policy
from gfs_opt.sim.causes import EvictionCause, eviction_causes
from gfs_opt.sim.hp_delay import HPDelay
from gfs_opt.sim.jobrun import JobRun
from gfs_opt.sim.metrics import summarize
from gfs_opt.sim.recorder import Recorder
from gfs_opt.sim.slurm_model import SlurmModel, lp_gpus_held
from gfs_opt.sim.slurm_model import schedule as slurm_schedule
from gfs_opt.traces.base import Trace

DAY = 86_400.0
HOUR = 3_600.0

# event kinds, in the order they are handled at one instant (_ELIGIBLE, _LIMIT: Slurm model only;
# _WAKE: a time the policy asked to be called at, `Decision.wakes`)
_WINDOW, _COMPLETE, _ELIGIBLE, _LIMIT, _WAKE = 0, 1, 2, 3, 4


def _same_placement(held: Placement, pl: Placement) -> bool:
    """Whether the state's (normalized) ``held`` is placement ``pl``: a plain compare first
    (C-level; a policy usually hands the tuples it allocated), `normalized` only if that fails
    or cannot answer (numpy arrays inside)."""
    try:
        if held == pl:
            return True
    except ValueError:
        pass
    return held == normalized(pl)


class InvalidDecision(GfsError):
    """A policy asked for something the engine must refuse (HP eviction, over-allocation…)."""


class RoundHook(Protocol):
    """Sees each round before the policy does (read-only, like the policy); returning True
    stops the run after this round. E.g. `gfs_opt.instance.dump.ContestedRoundDump`."""

    def __call__(self, rnd: Round) -> bool | None: ...


class DecisionHook(Protocol):
    """Sees each round with the decision the policy returned, before the engine applies it."""

    def __call__(self, rnd: Round, decision: Decision) -> None: ...


@dataclass
class SimConfig:
    eval_start: float = 0.0
    eval_end: float = math.inf
    drain_s: float = 3 * DAY            # keep running after the window so its jobs can finish
    sample_s: float = 60.0
    check_invariants: bool = False
    progress: bool = False
    requeue_cost_s: float = 120.0       # restart cost of a voluntary re-queue (Chronus leases)
    max_events: int | None = None
    #: opt-in: Slurm decides which pending jobs start and where (`gfs_opt.sim.slurm_model`);
    #: None (the default) leaves the policy's placements and every result as they were
    slurm: SlurmModel | None = None


@dataclass
class SimResult:
    recorder: Recorder
    wall_s: float
    events: int
    passes: int
    policy: str
    options: dict = field(default_factory=dict)
    #: this process's CPU time over the replay (`time.process_time`): on a shared machine a
    #: steadier measure of the loop's cost than ``wall_s``
    cpu_s: float = math.nan

    def summary(self, price_per_gpu_hour: float = 2.0) -> dict:
        """The run's headline metrics (the dict `experiments.runner.run` returns as ``summary``)."""
        return summarize(self.recorder, price_per_gpu_hour)


class Simulator:
    """Replays a trace through one policy."""

    def __init__(self, trace: Trace, policy: Policy, params: Params | None = None,
                 config: SimConfig | None = None) -> None:
        self.trace = trace
        self.policy = policy
        self.cfg = config or SimConfig()
        self.params = replace(params or Params(), eval_start=self.cfg.eval_start,
                              eval_end=self.cfg.eval_end)
        self.state = trace.cluster_state()
        jobs = trace.iter_jobs()
        unknown = sorted({j.pool for j in jobs} - set(self.state.pools))
        if unknown:
            raise GfsError(f"jobs ask for pools with no nodes: {unknown}")
        self.jobs: dict[int, Job] = {j.id: j for j in jobs}
        self.runs: dict[int, JobRun] = {j.id: JobRun(j) for j in jobs}
        for r in self.runs.values():
            r.in_eval = self.cfg.eval_start <= r.job.submit < self.cfg.eval_end
        self.arrivals = [j.id for j in jobs]     # already in submit order
        self.next_arrival = 0
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.running: dict[int, RunningJob] = {}
        self.hp_q = PendingQueue(JobClass.HP)
        self.lp_q = PendingQueue(JobClass.LP)
        self.pool_status = {p: PoolStatus() for p in self.state.pools}
        #: per pool with victims in the decision being applied: HP GPUs (milli) once it applies —
        #: the HP context of the windows it breaks (`WindowOutcome.hp_milli`)
        self._hp_context: dict[str, int] = {}
        #: the quota's latest account of what η moved on, per pool (the feedback log)
        self._feedback: dict[str, QuotaFeedback] = {}
        #: where window outcomes go: the policy's η evidence (`Policy.observe_window`), None when
        #: the policy keeps none
        self._observe_window = policy.window_observer()
        self.lp_enqueued: dict[str, deque[tuple[float, int]]] = {p: deque() for p in self.state.pools}
        self.node_evictions: deque[tuple[float, tuple[int, ...]]] = deque()   # the last day's
        self._evictions_1h: deque[tuple[float, tuple[int, ...]]] = deque()    # the last hour's
        # their per-node counts, kept in step with the two windows (copied out at a refresh)
        self._c1h = np.zeros(self.state.n_nodes, dtype=np.int32)
        self._c1d = np.zeros(self.state.n_nodes, dtype=np.int32)
        self._counts_moved = True            # since the last copy handed out (none yet)
        self.quotas: dict[tuple[str, float], int] = {}
        self.reserves: dict[tuple[str, float], int] = {}
        self.hp_usage: dict[tuple[str, str], int] = {}
        self.hour_max: dict[tuple[str, str], int] = {}
        # the same for HP workers that take a whole node, per pool (the quota's shape dimension)
        self.hp_whole: dict[str, int] = dict.fromkeys(self.state.pools, 0)
        self.whole_hour_max: dict[str, int] = dict.fromkeys(self.state.pools, 0)
        self.dirty: set[str] = set(self.state.pools)
        # window ends are scheduling events only for a policy that acts on them
        self._wake_at_windows = bool(getattr(policy, "wakes_at_window_ends", False))
        self.recorder = Recorder(self.state, self.params, self.cfg.eval_start, self.cfg.eval_end,
                                 self.cfg.sample_s)
        #: HP waits by cause (recorded, never acted on) and the pools whose HP room may have
        #: moved at this instant
        self.hp_delay = HPDelay(self.state)
        self._room_moved: set[int] = set()
        self.released = dict.fromkeys(self.state.pools, 0)
        self.hp_released = dict.fromkeys(self.state.pools, 0)
        self.queued_since: dict[int, float] = {}
        self.forecasts: dict[str, PoolForecast] = {}      # the latest a policy handed back
        self.node_evictions_1h: np.ndarray | None = None  # per node, refreshed with the quota
        self.node_evictions_1d: np.ndarray | None = None
        # what a round hands out: read-only views of the engine's own containers
        self._views = {name: MappingProxyType(getattr(self, attr)) for name, attr in (
            ("jobs", "jobs"), ("running", "running"), ("queued_since", "queued_since"),
            ("forecasts", "forecasts"), ("pools", "pool_status"), ("quotas", "quotas"), ("reserves", "reserves"),
            ("released", "released"), ("hp_released", "hp_released"))}
        v = self._views
        self._round_fields = {
            "state": self.state, "jobs": v["jobs"], "running": v["running"],
            "pending_hp": self.hp_q, "pending_lp": self.lp_q, "queued_since": v["queued_since"],
            "forecasts": v["forecasts"], "pools": v["pools"], "quotas": v["quotas"],
            "reserves": v["reserves"],
            "params": self.params, "released": v["released"], "hp_released": v["hp_released"]}
        self._wakes: set[tuple[float, int]] = set()   # (time, pool index) of wakes pushed
        self._restarts_t = -math.inf            # the instant of `_restarts`
        self._restarts: list[int] = []          # LP jobs whose window ended then
        self.events = 0
        self.passes = 0
        self.kept_plans = 0   # passes whose planned changes were kept (`_is_plan`)
        self.finished = 0               # jobs completed (for the job-conservation invariant)
        self.idle_refreshes = 0
        #: declared observers (e.g. to dump contested rounds, to trace the quota)
        self.on_round: RoundHook | None = None
        self.on_decision: DecisionHook | None = None
        self.stop_requested = False
        self.slurm = self.cfg.slurm
        #: GrpTRES in force per (pool, class h), GPUs (None: no limit was ever set) and the
        #: limits on their way to slurmctld (they land in order, one `_LIMIT` event each)
        self.slurm_limits: dict[tuple[str, float], int] | None = None
        self._limits_in_flight: deque[dict[tuple[str, float], int]] = deque()
        self.policy.reset(self.state, self.params, trace.origin)

    # ---- event plumbing -------------------------------------------------------------------
    def _push(self, t: float, kind: int, jid: int, run_id: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, jid, run_id))

    # ---- job transitions ------------------------------------------------------------------
    def _enqueue(self, r: JobRun, t: float) -> None:
        r.status = "pending"
        r.queued_since = t
        self.queued_since[r.job.id] = t
        if r.job.is_hp:
            self.hp_q.add(r.job, t)
            self.hp_delay.enqueue(r.job, t)
            self._room_moved.add(self.state.pool_index.get(r.job.pool, -1))
        else:
            self.lp_q.add(r.job, t)
            self.lp_enqueued[r.job.pool].append((t, r.job.id))
        self.dirty.add(r.job.pool)

    def _start(self, r: JobRun, t: float, placement: Placement, planned: bool = False) -> None:
        job = r.job
        (self.hp_q if job.is_hp else self.lp_q).remove(job.id)
        if not planned:
            self.state.allocate(job, placement)
        self.queued_since.pop(job.id, None)
        r.status = "running"
        r.queue_time += t - r.queued_since
        if math.isnan(r.first_start):
            r.first_start = t
        r.run_start = t
        r.ckpt_time = t
        r.window_start = t
        r.saved_base = r.saved
        r.run_id += 1
        self.running[job.id] = RunningJob(job, t, t, t, placement, r.evictions)
        self._room_moved.add(self.state.pool_index[job.pool])
        if job.is_hp:
            self.hp_delay.start(job, t)
            self._hp_change(job, +job.demand)
            self._push(t + job.duration, _COMPLETE, job.id, r.run_id)
        else:
            self._push(t + r.overhead + (job.duration - r.saved_base), _COMPLETE, job.id, r.run_id)
            self._push_window(r)

    def _push_window(self, r: JobRun) -> None:
        end = r.window_start + r.job.guarantee_s
        done = r.run_start + r.overhead + (r.job.duration - r.saved_base)
        if end < done:
            self._push(end, _WINDOW, r.job.id, r.run_id)

    def _release(self, r: JobRun, t: float, planned: bool = False) -> Placement:
        job = r.job
        placement = self.running[job.id].placement if planned else self.state.release(job)
        del self.running[job.id]
        r.held_gpu_s += job.demand / MILLI * (t - r.run_start)
        self._room_moved.add(self.state.pool_index[job.pool])
        self.released[job.pool] += 1
        if job.is_hp:
            self._hp_change(job, -job.demand)
            self.hp_released[job.pool] += 1
        self.dirty.add(job.pool)
        return placement

    def _hp_change(self, job: Job, delta: int) -> None:
        key = (job.pool, job.org)
        v = self.hp_usage.get(key, 0) + delta
        self.hp_usage[key] = v
        if v > self.hour_max.get(key, 0):
            self.hour_max[key] = v
        if self.state.takes_whole_node(job):
            w = self.hp_whole[job.pool] + delta
            self.hp_whole[job.pool] = w
            if w > self.whole_hour_max[job.pool]:
                self.whole_hour_max[job.pool] = w

    def _window_outcome(self, r: JobRun, t: float, ok: bool) -> None:
        pool = r.job.pool
        if ok:
            r.windows_ok += 1
        else:
            r.windows_failed += 1
        if self._observe_window is not None:
            st = self.state
            self._observe_window(WindowOutcome(
                t, pool, ok, int(st.pool_lp[st.pool_index[pool]]),
                None if ok else self._hp_context.get(pool)))
        self.pool_status[pool] = self.pool_status[pool].counted(ok)
        if r.in_eval:
            drain = self._in_drain(r)
            if drain:
                if ok:
                    r.windows_ok_drain += 1
                else:
                    r.windows_failed_drain += 1
            self.recorder.window(t, pool, ok, drain)

    def _in_drain(self, r: JobRun) -> bool:
        """Whether ``r``'s current window started in the drain: after the scored window, with
        the quota lifted there (`Params.quota_after_window` off). Read off the run's parameters
        alone, so every policy's windows are split at the same instant."""
        return not self.params.quota_after_window and r.window_start >= self.cfg.eval_end

    def _complete(self, r: JobRun, t: float) -> None:
        if not r.job.is_hp:
            self._window_outcome(r, t, True)
        self._release(r, t)
        r.status = "done"
        r.end = t
        self.finished += 1

    def _window_end(self, r: JobRun, t: float) -> None:
        self._window_outcome(r, t, True)
        if self._restarts_t != t:
            self._restarts_t, self._restarts = t, []
        self._restarts.append(r.job.id)
        if self._wake_at_windows and self.hp_q.shapes(r.job.pool):
            self.dirty.add(r.job.pool)
        r.saved = r.progress(t)
        r.ckpt_time = t
        r.window_start = t
        rj = self.running[r.job.id]
        self.running[r.job.id] = rj.checkpointed(t)
        self._push_window(r)

    def _evict(self, r: JobRun, t: float, voluntary: bool, planned: bool = False) -> None:
        job = r.job
        if job.is_hp:
            raise InvalidDecision(f"policy tried to evict HP job {job.id}")
        elapsed = t - r.window_start
        # a lease that ends exactly where a window ended interrupts no window
        in_window = elapsed < job.guarantee_s and (elapsed > 0 or not voluntary)
        if voluntary:
            r.saved = r.progress(t)     # a lease ends with a checkpoint
            r.overhead = self.cfg.requeue_cost_s
            r.requeues += 1
        else:
            lost = t - r.ckpt_time
            r.lost_gpu_s += job.demand / MILLI * lost
            r.overhead = self.params.restart_overhead(job)
            r.evictions += 1
        if in_window or not voluntary:
            self._window_outcome(r, t, False)
        placement = self._release(r, t, planned)
        nodes = tuple({n for n, _g in placement})
        self.node_evictions.append((t, nodes))
        self._evictions_1h.append((t, nodes))
        for n in nodes:
            self._c1h[n] += 1
            self._c1d[n] += 1
        self._counts_moved = True
        r.run_id += 1
        if self.slurm is not None:
            self._delay(r, t, "requeued", self.slurm.requeue_delay_s)
        else:
            self._enqueue(r, t)

    def _delay(self, r: JobRun, t: float, status: str, delay_s: float) -> None:
        """Slurm model: the job waits ``delay_s`` before the scheduler may start it; its queue
        time runs from ``t``."""
        r.status = status
        r.queued_since = t
        self._push(t + delay_s, _ELIGIBLE, r.job.id, r.run_id)

    # ---- policy round -----------------------------------------------------------------------
    def _refresh_inputs(self, t: float) -> None:
        """Inputs the quota step reads of the cluster: oldest LP waits, whole-node HP, node
        eviction counts."""
        for pool, st in self.pool_status.items():
            wait = self._oldest_lp_wait(pool, t)
            whole = self.hp_whole[pool] / MILLI
            # most refreshes of a calm pool restate what its status says: no new record then
            if (st.oldest_lp_wait, st.hp_whole_gpus) != (wait, whole):
                self.pool_status[pool] = st.with_wait(wait, whole)
        for window, counts, span in ((self.node_evictions, self._c1d, DAY),
                                     (self._evictions_1h, self._c1h, HOUR)):
            while window and window[0][0] < t - span:
                for n in window.popleft()[1]:
                    counts[n] -= 1
                self._counts_moved = True
        # policies recompute E(n) when the arrays they are handed change: fresh arrays when a
        # count moved, the same ones otherwise (most refreshes of a calm cluster)
        if self._counts_moved:
            self.node_evictions_1h, self.node_evictions_1d = self._c1h.copy(), self._c1d.copy()
            self._counts_moved = False

    def _oldest_lp_wait(self, pool: str, t: float) -> float:
        """Wait of the pool's longest-waiting LP job since its last (re)queue.

        Enqueue times only grow, so a FIFO of (queued_since, id) with lazy removal of entries
        whose job has started or was re-queued later gives the oldest in amortised O(1).
        """
        fifo = self.lp_enqueued[pool]
        while fifo:
            since, jid = fifo[0]
            r = self.runs[jid]
            if r.status == "pending" and r.queued_since == since:
                return t - since
            fifo.popleft()
        return 0.0

    def round_at(self, t: float, quota_due: bool) -> Round:
        """The round a pass at ``t`` hands out (read-only views of the engine's containers)."""
        # Round's fields written straight into a new instance: the frozen dataclass's __init__
        # sets its 18 fields one object.__setattr__ at a time (≈ 2.5 µs, once per pass); most
        # fields are the same views every pass (tests/test_round_contract.py checks the result
        # against the constructor's)
        rnd = object.__new__(Round)
        fields = rnd.__dict__
        fields.update(self._round_fields)
        fields["time"] = t
        fields["node_evictions_1h"] = self.node_evictions_1h
        fields["node_evictions_1d"] = self.node_evictions_1d
        fields["quota_due"] = quota_due
        fields["dirty_pools"] = None if quota_due else frozenset(self.dirty)
        fields["window_restarts"] = tuple(self._restarts) if self._restarts_t == t else ()
        return rnd

    def _policy_pass(self, t: float, quota_due: bool) -> None:
        rnd = self.round_at(t, quota_due)
        if self.on_round is not None and self.on_round(rnd):
            self.stop_requested = True
        if self.on_decision is None and self.policy.settled(rnd):
            # the policy knows its answer is an empty decision: a pass that changed nothing
            self.passes += 1
            self.kept_plans += 1
            if self.slurm is not None:
                self._slurm_pass(t)
            if self.cfg.check_invariants:
                self.check_invariants(t)
            self.dirty.clear()
            return
        self.state.begin()
        planned = False
        try:
            decision = self.policy.decide(rnd)
            # with Slurm starting the jobs, the policy's placements are only its wishes
            planned = self.slurm is None and self._is_plan(decision)
        finally:
            if not planned:
                self.state.rollback()
            self.state.commit()
        self.passes += 1
        self.kept_plans += planned
        if self.on_decision is not None:
            self.on_decision(rnd, decision)
        self._apply(decision, t, planned)
        if self.slurm is not None:
            self._slurm_pass(t)
        self.dirty.clear()

    def _is_plan(self, d: Decision) -> bool:
        """Whether the state already holds exactly ``d``'s changes (the policy planned them on
        the live state through `ClusterState.allocate`/`release`, which validated each one).
        Then the engine keeps them instead of undoing and redoing them; any other decision is
        rolled back and applied from scratch."""
        allocated, released = self.state.recorded()
        if not allocated and not released:   # most passes change nothing
            return not (d.placements or d.victims or d.requeue)
        if len(allocated) != len(d.placements) or set(allocated) != d.placements.keys():
            return False
        if sorted(released) != sorted([*d.victims, *d.requeue]):
            return False
        alloc = self.state.alloc
        for jid, pl in d.placements.items():
            entry = alloc.get(jid)
            if entry is None or not _same_placement(entry[2], pl):
                return False
        return True

    def _apply(self, d: Decision, t: float, planned: bool = False) -> None:
        if d.forecasts is not None:
            self.forecasts.clear()
            self.forecasts.update(d.forecasts)
        # every refresh restates both per pool; most restate what the status already says
        for pool, has in (d.hp_history or {}).items():
            if self.pool_status[pool].has_hp_history != has:
                self.pool_status[pool] = replace(self.pool_status[pool], has_hp_history=has)
        for pool, eta in (d.eta or {}).items():
            if self.pool_status[pool].eta != eta:
                self.pool_status[pool] = replace(self.pool_status[pool], eta=eta)
        if d.feedback is not None:
            self._feedback.update(d.feedback)
        if d.quotas is not None:
            self.quotas.clear()
            self.quotas.update(d.quotas)
            self.recorder.quota(t, self.quotas)
            if self.slurm is not None:
                self._set_limits(t)
        if d.reserves is not None:
            self.reserves.clear()
            self.reserves.update(d.reserves)
        if d.quotas and self.recorder.logs_quota(t):
            self._record_feedback(t)
        for tw, pool in d.wakes:
            key = (tw, self.state.pool_index[pool])
            if tw > t and key not in self._wakes:
                self._wakes.add(key)
                self._push(tw, _WAKE, key[1], 0)
        for reports in d.reports:
            self.recorder.report(t, reports)
        # causes are read off the decision before any of it is applied (`eviction_causes`),
        # with what the quota planned for (`Policy.attribution`)
        causes: list[EvictionCause] = []
        self._hp_context = {}
        if d.victims:
            causes = eviction_causes(self.state, self.jobs, self.running, d, planned)
            self._hp_context = self._hp_after(d, planned)
            plans = {pool: (*self.policy.attribution(pool, hp), hp)
                     for pool, hp in self._hp_context.items()}
            causes = [replace(c, hp_after_gpus=plans[c.pool][2] / MILLI,
                              plan_gpus=plans[c.pool][1], quota_attributable=plans[c.pool][0])
                      if c.pool in plans else c for c in causes]
        for jid, cause in zip(d.victims, causes, strict=True):
            r = self.runs.get(jid)
            if r is None or r.status != "running":
                raise InvalidDecision(f"victim {jid} is not running")
            nodes = tuple(sorted({n for n, _g in self.running[jid].placement}))
            drain = self._in_drain(r)       # the window it breaks (read before the eviction)
            self._evict(r, t, voluntary=False, planned=planned)
            self.recorder.eviction(t, r.job, nodes, cause, r.in_eval, drain)
        for jid in d.requeue:
            r = self.runs.get(jid)
            if r is None or r.status != "running":
                raise InvalidDecision(f"re-queued job {jid} is not running")
            self._evict(r, t, voluntary=True, planned=planned)
        for jid, placement in d.placements.items() if self.slurm is None else ():
            r = self.runs.get(jid)
            if r is None or r.status != "pending":
                raise InvalidDecision(f"placed job {jid} is not pending")
            try:
                self._start(r, t, placement, planned)
            except AllocationError as exc:
                raise InvalidDecision(f"invalid placement: {exc}") from None
        if self.cfg.check_invariants:
            self.check_invariants(t)

    def _record_feedback(self, t: float) -> None:
        """What each pool's η moved on and what the quota became (`Recorder.feedback`)."""
        classes = self.params.guarantee_classes
        for pool in self.state.pools:
            fb = self._feedback.get(pool)
            qs = [q for d in classes if (q := self.quotas.get((pool, d))) is not None]
            if not qs or fb is None:
                continue
            self.recorder.feedback(
                t, pool, fb, (max(qs), min(qs)),
                max((self.reserves.get((pool, d), 0) for d in classes), default=0))

    def _hp_after(self, d: Decision, planned: bool) -> dict[str, int]:
        """Per pool with victims in ``d``: its HP GPUs (milli) once ``d`` is applied, the HP
        context of the windows ``d`` breaks."""
        st = self.state
        hp_after: dict[str, int] = {}
        for jid in d.victims:
            victim = self.jobs.get(jid)
            if victim is not None:   # an unknown victim is refused where it is evicted
                hp_after.setdefault(victim.pool, int(st.pool_hp[st.pool_index[victim.pool]]))
        if not planned:
            for jid in d.placements:
                job = self.jobs.get(jid)
                if job is not None and job.is_hp and job.pool in hp_after:
                    hp_after[job.pool] += job.demand
        return hp_after

    def check_invariants(self, t: float) -> None:
        problems = self.state.check()
        if set(self.state.alloc) != set(self.running):
            problems.append("running set and allocations disagree")
        for jid, (_cls, _g, placement) in self.state.alloc.items():
            if len(placement) != self.jobs[jid].workers:
                problems.append(f"job {jid} runs with a partial gang")
        # job conservation: every arrived job is queued, running or done, exactly once
        queued = len(self.hp_q) + len(self.lp_q)
        if self.slurm is not None:     # submitted or requeued, not yet seen by the scheduler
            queued += sum(r.status in ("submitted", "requeued") for r in self.runs.values())
        if self.next_arrival != queued + len(self.running) + self.finished:
            problems.append(f"{self.next_arrival} jobs arrived but {queued} are queued, "
                            f"{len(self.running)} running and {self.finished} done")
        if problems:
            raise InvalidDecision(f"invariant broken at t={t:.0f}: {'; '.join(problems)}")

    # ---- main loop ------------------------------------------------------------------------
    def run(self, progress: Callable[[float, int], None] | None = None) -> SimResult:
        # A replay is sequential and its matrices are small (forecast fits, 57 × 57 solves):
        # OpenBLAS's worker threads only spin, doubling GFS's CPU time on 2 cores (issue 13).
        with threadpool_limits(limits=1, user_api="blas"):
            return self._run(progress)

    def _run(self, progress: Callable[[float, int], None] | None) -> SimResult:
        cfg = self.cfg
        t0, c0 = time.perf_counter(), time.process_time()
        last_submit = self.jobs[self.arrivals[-1]].submit if self.arrivals else 0.0
        end = (cfg.eval_end if math.isfinite(cfg.eval_end) else last_submit) + cfg.drain_s
        quota_s = self.params.quota_refresh_s
        t_first = self.jobs[self.arrivals[0]].submit if self.arrivals else 0.0
        next_refresh = math.floor(t_first / quota_s) * quota_s
        next_hour = (math.floor(t_first / HOUR) + 1) * HOUR
        next_day = math.floor(t_first / DAY) * DAY
        next_sample = cfg.eval_start if math.isfinite(cfg.eval_start) else math.inf
        every_event = self.policy.every_event
        heap = self.heap
        # submit times in arrival order, then a sentinel: the next arrival is one list lookup
        submits = [self.jobs[jid].submit for jid in self.arrivals]
        submits.append(math.inf)
        t = t_first
        while True:
            t = min(next_refresh, next_hour, next_day, submits[self.next_arrival],
                    heap[0][0] if heap else math.inf,
                    next_sample if next_sample < cfg.eval_end else math.inf)
            if t >= end or (not heap and self._stuck()):
                break
            self.events += 1
            if self.stop_requested or (cfg.max_events is not None and self.events > cfg.max_events):
                break
            # hour boundary: usage history for the forecaster; midnight: refit
            if t == next_hour:
                self.policy.observe_hour(t, {k: v / MILLI for k, v in self.hour_max.items()},
                                         {p: v / MILLI for p, v in self.whole_hour_max.items()})
                self.hour_max = {k: v for k, v in self.hp_usage.items() if v > 0}
                self.whole_hour_max = dict(self.hp_whole)
                next_hour += HOUR
            if t == next_day:
                self.policy.on_day(t)
                next_day += DAY
            # completions and window ends at t
            while heap and heap[0][0] <= t:
                _te, kind, _s, jid, run_id = heapq.heappop(heap)
                if kind == _WAKE:
                    self._wakes.discard((_te, jid))
                    self.dirty.add(self.state.pools[jid])
                    continue
                if kind >= _ELIGIBLE:
                    self._slurm_event(kind, jid, run_id)
                    continue
                r = self.runs[jid]
                if r.run_id != run_id or r.status != "running":
                    continue
                if kind == _COMPLETE:
                    self._complete(r, t)
                else:
                    self._window_end(r, t)
            # arrivals at t
            while submits[self.next_arrival] <= t:
                r = self.runs[self.arrivals[self.next_arrival]]
                self.next_arrival += 1
                if self.slurm is not None:
                    self._delay(r, t, "submitted", self.slurm.start_latency_s)
                else:
                    self._enqueue(r, t)
            quota_due = t == next_refresh
            if quota_due:
                self._refresh_inputs(t)
                next_refresh += quota_s
            if quota_due or (every_event and self.dirty):
                n_running = len(self.running)
                self._policy_pass(t, quota_due)
                self.idle_refreshes = self.idle_refreshes + 1 if len(self.running) == n_running else 0
            if self._room_moved:
                self.hp_delay.refresh(t, self._room_moved)
                self._room_moved.clear()
            if t == next_sample:
                self.recorder.sample(t)
                next_sample += cfg.sample_s
            if progress is not None and self.events % 2048 == 0:
                progress(t, self.events)
        self.hp_delay.finish(t)
        self.recorder.finish(t, self.runs.values(), self.hp_delay.delays)
        return SimResult(self.recorder, time.perf_counter() - t0, self.events, self.passes,
                         self.policy.name, self.policy.options(), time.process_time() - c0)

    # ---- Slurm model (opt-in, `SimConfig.slurm`) --------------------------------------------
    def _slurm_event(self, kind: int, jid: int, run_id: int) -> None:
        if kind == _LIMIT:
            self.slurm_limits = self._limits_in_flight.popleft()
            self.dirty.update(self.state.pools)
            return
        r = self.runs[jid]
        if r.run_id == run_id and r.status in ("submitted", "requeued"):
            self._enqueue(r, r.queued_since)

    def _set_limits(self, t: float) -> None:
        """The quota as the controller sets it: GrpTRES of class c = Q_c minus the GPUs LP jobs
        of the other classes hold; it reaches slurmctld ``quota_delay`` later (the first one is
        set before any job arrives, as the controller's warm-up does)."""
        assert self.slurm is not None
        held = lp_gpus_held(self.running)
        limits = {}
        for (pool, d), q in self.quotas.items():
            others = sum(g for (p, c), g in held.items() if p == pool and c != d)
            limits[(pool, d)] = max(0, q // MILLI - others)
        if self.slurm_limits is None:
            self.slurm_limits = limits
            return
        self._limits_in_flight.append(limits)
        self._push(t + self.slurm.quota_delay_s, _LIMIT, -1, 0)

    def _slurm_pass(self, t: float) -> None:
        """Slurm's main loop then backfill (`gfs_opt.sim.slurm_model.schedule`) over the pending
        jobs; Slurm, not the policy, starts them."""
        assert self.slurm is not None
        if not self.queued_since:
            return
        for jid, placement in slurm_schedule(self.slurm, self.params, self.state, self.jobs,
                                             self.running, self.queued_since,
                                             self.slurm_limits or {}, t):
            self._start(self.runs[jid], t, placement)

    def _stuck(self) -> bool:
        """Nothing runs and nothing will arrive: no state change can start a pending job
        (what is still queued is reported as pending at the end)."""
        # LP jobs waiting under a quota may start later (the forecast moves with time)
        quota_bound = len(self.lp_q) > 0 and bool(self.quotas)
        return (not self.heap and self.next_arrival >= len(self.arrivals) and not self.running
                and not self.dirty and not quota_bound and self.idle_refreshes >= 12)
