"""An independent audit of a simulation: every start and release the engine performs is logged,
then replayed against the trace to recheck what the engine promises, without its own counters.

`AuditedSimulator` only *observes* the engine (it wraps the private transition methods
``_start``, ``_release``, ``_complete`` and ``_evict`` to log them); all checks in `audit` are
recomputed from that log and the trace: per-GPU occupancy replayed in the exact order of
operations, gang completeness, pool membership, HP never evicted, the LP work model (checkpoints
at window ends, restart overheads, lost work), queueing times, window outcomes, and the jobs table.

The GPU-seconds identity the engine must satisfy, per job with a = g·w GPUs and duration D:
``held = a · Σ_runs (end − start)``, ``lost = a · Σ_evictions (evicted at − last checkpoint)``,
and for a finished job ``held − lost = a · (D + paid)``, where ``paid`` sums the restart overhead
of every run that was not thrown away: runs that completed, reached a checkpoint before being
evicted, or were re-queued voluntarily (the overhead of a run evicted before its first checkpoint
is part of ``lost``). HP jobs have one run, so ``held = a · D`` and ``lost = 0``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import pandas as pd

from gfs_opt.model import MILLI, Job, Params, Placement
from gfs_opt.sim.engine import SimConfig, Simulator
from gfs_opt.sim.jobrun import JobRun
from gfs_opt.traces.base import Trace

TOL = 1e-6


@dataclass
class RunLog:
    """One run of a job: from a start to a release (or still open at the end)."""

    job: Job
    start: float
    placement: Placement
    seq_start: int
    end: float = math.inf
    how: str = "open"               # complete | evict | requeue | open
    seq_end: int = -1


@dataclass
class QuotaBreach:
    t: float
    job: int
    pool: str
    lp_before: int
    demand: int
    quota: int


class AuditedSimulator(Simulator):
    """A `Simulator` that logs every transition (and LP quota headroom at each LP start)."""

    def __init__(self, trace: Trace, policy, params: Params | None = None,
                 config: SimConfig | None = None) -> None:
        super().__init__(trace, policy, params, config)
        self.log: list[RunLog] = []
        self.open: dict[int, RunLog] = {}
        self._how: str | None = None
        self._seq = 0
        self.quota_breaches: list[QuotaBreach] = []
        self.quota_checks = 0
        self.lp_held: dict[str, int] = {}   # LP milli-GPUs running per pool, by the log
        # quotas as the policy set them; None = no quota machinery (checked by the wrapper)
        self.external_quota = None

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _start(self, r: JobRun, t: float, placement: Placement, planned: bool = False) -> None:
        job = r.job
        if not job.is_hp:
            quotas = self.quotas if self.quotas else (
                self.external_quota(self) if self.external_quota else None)
            if quotas:
                # a class without its own entry is held to the nearest longer class (documented
                # in policies.base.quota_for); recomputed here rather than calling it
                same_pool = sorted((d, qq) for (pp, d), qq in quotas.items() if pp == job.pool)
                longer = [qq for d, qq in same_pool if d >= job.guarantee_h]
                q = quotas.get((job.pool, job.guarantee_h))
                if q is None and same_pool:
                    q = longer[0] if longer else min(qq for _d, qq in same_pool)
                # the audit's own count: the engine may hold the pass's planned starts already
                lp_before = self.lp_held.get(job.pool, 0)
                self.quota_checks += 1
                if q is None or lp_before + job.demand > q:
                    self.quota_breaches.append(QuotaBreach(t, job.id, job.pool, lp_before,
                                                           job.demand, -1 if q is None else q))
        super()._start(r, t, placement, planned)
        if not job.is_hp:
            self.lp_held[job.pool] = self.lp_held.get(job.pool, 0) + job.demand
        run = RunLog(job, t, placement, self._next())
        self.log.append(run)
        self.open[job.id] = run

    def _complete(self, r: JobRun, t: float) -> None:
        self._how = "complete"
        super()._complete(r, t)

    def _evict(self, r: JobRun, t: float, voluntary: bool, planned: bool = False) -> None:
        self._how = "requeue" if voluntary else "evict"
        super()._evict(r, t, voluntary, planned)

    def _release(self, r: JobRun, t: float, planned: bool = False) -> Placement:
        placement = super()._release(r, t, planned)
        if not r.job.is_hp:
            self.lp_held[r.job.pool] -= r.job.demand
        run = self.open.pop(r.job.id)
        run.end, run.how, run.seq_end = t, self._how or "?", self._next()
        self._how = None
        return placement


# ---- the audit ------------------------------------------------------------------------------
@dataclass
class Expected:
    """Per-job quantities recomputed from the log."""

    held: float = 0.0
    lost: float = 0.0
    evictions: int = 0
    requeues: int = 0
    windows_ok: int = 0
    windows_failed: int = 0
    jqt: float = 0.0
    paid_overhead: float = 0.0      # restart overheads not thrown away with lost work
    completions: int = 0
    status: str = "pending"
    end: float = math.nan
    first_start: float = math.nan


@dataclass
class AuditReport:
    expected: dict[int, Expected] = field(default_factory=dict)
    max_gpu_use: int = 0
    evicted_lp_runs: int = 0
    requeued_runs: int = 0


def node_table(sim: Simulator, trace: Trace) -> list[tuple[str, int]]:
    """(pool, GPUs) of every engine node index, looked up in the trace by node name."""
    by_name = {str(n): (str(p), int(g)) for n, p, g in
               zip(trace.nodes["node_name"], trace.nodes["pool"], trace.nodes["gpus"], strict=True)}
    return [by_name[name] for name in sim.state.node_names]


def check_placement(run: RunLog, nodes: list[tuple[str, int]]) -> list[tuple[int, int]]:
    """Whole gang, in the job's pool, k distinct existing GPUs per worker → (node, gpu) list."""
    job = run.job
    assert len(run.placement) == job.workers, (
        f"job {job.id} started with {len(run.placement)} of {job.workers} workers")
    k = 1 if job.g < MILLI else job.g // MILLI
    cells = []
    for node, gpus in run.placement:
        pool, size = nodes[node]
        assert pool == job.pool, f"job {job.id} (pool {job.pool}) placed on a {pool} node"
        assert len(gpus) == k and len(set(gpus)) == k, f"job {job.id}: worker GPUs {gpus}, need {k}"
        for g in gpus:
            assert 0 <= g < size, f"job {job.id}: node {node} has no GPU {g}"
            cells.append((node, g))
    return cells


def replay_occupancy(log: list[RunLog], nodes: list[tuple[str, int]]) -> int:
    """Replay starts and releases in the engine's order of operations; assert no GPU ever holds
    more than one GPU's worth. Returns the highest per-GPU use seen (milli)."""
    ops = []
    for run in log:
        ops.append((run.seq_start, +1, run))
        if run.seq_end >= 0:
            ops.append((run.seq_end, -1, run))
    ops.sort(key=lambda o: o[0])
    use: Counter[tuple[int, int]] = Counter()
    peak = 0
    for _seq, sign, run in ops:
        per_gpu = run.job.g if run.job.g < MILLI else MILLI
        for cell in check_placement(run, nodes):
            use[cell] += sign * per_gpu
            assert 0 <= use[cell] <= MILLI, (
                f"GPU {cell} at {use[cell]} milli after job {run.job.id} "
                f"{'start' if sign > 0 else 'release'} at t={run.start if sign > 0 else run.end}")
            peak = max(peak, use[cell])
    return peak


def usage_at(log: list[RunLog], t: np.ndarray, pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HP and LP milli-GPU held in ``pool[i]`` at time ``t[i]``, after everything done at that
    instant (a run holds its GPUs on [start, end))."""
    if not log:
        return np.zeros(len(t), dtype=np.int64), np.zeros(len(t), dtype=np.int64)
    start = np.array([r.start for r in log])
    end = np.array([r.end for r in log])
    demand = np.array([r.job.demand for r in log], dtype=np.int64)
    is_hp = np.array([r.job.is_hp for r in log])
    run_pool = np.array([r.job.pool for r in log], dtype=object)
    t = np.asarray(t, dtype=float)[:, None]
    held = (start <= t) & (t < end) & (run_pool == np.asarray(pool, dtype=object)[:, None])
    return (held * (demand * is_hp)).sum(axis=1), (held * (demand * ~is_hp)).sum(axis=1)


def replay_job(job: Job, runs: list[RunLog], params: Params, requeue_cost: float,
               end_time: float) -> Expected:
    """The LP/HP work model of GFS-SPEC §1 applied to one job's runs, independently of the engine.

    Progress accrues after the run's restart overhead; a checkpoint is taken at every end of a
    guarantee window (start + n·G) that comes before completion; an involuntary eviction loses
    the work since the last checkpoint (restart overhead 40/60 s next time), a voluntary re-queue
    checkpoints first (120 s next time).
    """
    e = Expected()
    a = job.demand / MILLI
    G = job.guarantee_s
    progress, overhead, ready = 0.0, 0.0, job.submit
    for i, run in enumerate(runs):
        assert run.start >= ready - TOL, f"job {job.id} run {i} starts before it was queued"
        e.jqt += run.start - ready
        if i == 0:
            e.first_start = run.start
        if job.is_hp:
            assert run.how in ("complete", "open"), f"HP job {job.id} was {run.how}ed"
            if run.how == "complete":
                assert abs(run.end - run.start - job.duration) <= TOL * max(1, job.duration), (
                    f"HP job {job.id} held {run.end - run.start} s for duration {job.duration}")
        else:
            done_at = run.start + overhead + (job.duration - progress)
            # guarantee windows chain from the start; a window end is handled if it comes before
            # completion and no later than an eviction at the same instant (events before the
            # policy pass), or before the last event time for a run still open at the end
            n_windows, last_ckpt = 0, run.start
            w = run.start + G
            while w < done_at and (w <= run.end if run.how != "open" else w < end_time):
                n_windows += 1
                last_ckpt = w
                w = last_ckpt + G
            e.windows_ok += n_windows
            if run.how == "complete":
                assert abs(run.end - done_at) <= 1e-6 * max(1.0, done_at), (
                    f"LP job {job.id} run {i} ended at {run.end}, its work model says {done_at}")
                e.windows_ok += 1
                e.paid_overhead += overhead
                progress = job.duration
            elif run.how == "evict":
                e.evictions += 1
                e.windows_failed += 1
                e.lost += a * (run.end - last_ckpt)
                if n_windows:
                    e.paid_overhead += overhead
                    progress += max(0.0, last_ckpt - run.start - overhead)
                # GFS-SPEC §1: 40 s if g·w ≤ 8 GPUs, else 60 s
                overhead = (params.restart_small_s if job.demand <= 8 * MILLI
                            else params.restart_large_s)
            elif run.how == "requeue":
                e.requeues += 1
                # a lease that ends exactly where a window ended interrupts no window
                if run.end > last_ckpt:
                    e.windows_failed += 1
                e.paid_overhead += min(overhead, run.end - run.start)
                progress += max(0.0, run.end - run.start - overhead)
                overhead = requeue_cost
        if run.how != "open":
            e.held += a * (run.end - run.start)
            ready = run.end
        if run.how == "complete":
            e.completions += 1
            e.status, e.end = "done", run.end
        elif run.how == "open":
            e.status = "running"
    if runs and runs[-1].how in ("evict", "requeue"):
        e.status = "pending"
    if e.status == "pending":
        e.jqt += end_time - ready
    return e


def audit(sim: AuditedSimulator, trace: Trace) -> AuditReport:
    """Recheck a finished simulation; raises AssertionError with a precise message on a breach."""
    rep = AuditReport()
    nodes = node_table(sim, trace)
    rep.max_gpu_use = replay_occupancy(sim.log, nodes)
    by_job: dict[int, list[RunLog]] = defaultdict(list)
    for run in sim.log:
        by_job[run.job.id].append(run)
    end_time = sim.recorder.end_time
    for jid, job in sim.jobs.items():
        runs = by_job.get(jid, [])
        for a, b in pairwise(runs):
            assert a.how in ("evict", "requeue"), f"job {jid} restarted after '{a.how}'"
            assert b.start >= a.end, f"job {jid} runs twice at once"
        rep.expected[jid] = replay_job(job, runs, sim.params, sim.cfg.requeue_cost_s, end_time)
        rep.evicted_lp_runs += sum(r.how == "evict" for r in runs)
        rep.requeued_runs += sum(r.how == "requeue" for r in runs)
    return rep


def compare_jobs_table(jobs: pd.DataFrame, rep: AuditReport, trace: Trace) -> None:
    """The recorder's jobs table must agree with the audit, job by job."""
    ids = list(jobs["job_id"])
    assert len(ids) == len(set(ids)), "a job appears twice in the jobs table"
    assert set(ids) == set(int(j) for j in trace.jobs["job_id"]), "jobs table ≠ submitted jobs"
    for row in jobs.itertuples(index=False):
        e = rep.expected[row.job_id]
        where = f"job {row.job_id} ({row.cls})"
        assert row.status == e.status, f"{where}: status {row.status}, audit says {e.status}"
        assert e.completions <= 1, f"{where} completed {e.completions} times"
        assert row.evictions == e.evictions, f"{where}: evictions {row.evictions} vs {e.evictions}"
        assert row.requeues == e.requeues, f"{where}: requeues {row.requeues} vs {e.requeues}"
        assert row.windows_ok == e.windows_ok, f"{where}: windows_ok {row.windows_ok} vs {e.windows_ok}"
        assert row.windows_failed == e.windows_failed, (
            f"{where}: windows_failed {row.windows_failed} vs {e.windows_failed}")
        assert math.isclose(row.held_gpu_s, e.held, rel_tol=1e-9, abs_tol=1e-5), (
            f"{where}: held {row.held_gpu_s} vs {e.held}")
        assert math.isclose(row.lost_gpu_s, e.lost, rel_tol=1e-9, abs_tol=1e-5), (
            f"{where}: lost {row.lost_gpu_s} vs {e.lost}")
        assert math.isclose(row.jqt, e.jqt, rel_tol=1e-9, abs_tol=1e-5), (
            f"{where}: jqt {row.jqt} vs {e.jqt}")
        if e.status == "done":
            assert math.isclose(row.end, e.end, rel_tol=1e-12, abs_tol=1e-6)
            assert math.isclose(row.jct, e.end - row.submit, rel_tol=1e-9, abs_tol=1e-5)
        else:
            assert math.isnan(row.jct), f"{where}: unfinished job has a JCT"
        if not math.isnan(e.first_start):
            assert row.first_start == e.first_start
        else:
            assert math.isnan(row.first_start)
