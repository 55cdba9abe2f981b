"""What a simulation records: 60 s samples, window outcomes, quota log, the quota's feedback at
each refresh, solver reports, evictions with their causes, jobs."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from gfs_opt.model import MILLI, ClusterState, Job, Params, QuotaFeedback, SolveReport
from gfs_opt.sim.causes import CAUSE_FIELDS, EvictionCause
from gfs_opt.sim.jobrun import JobRun

#: the eviction table's columns: when and whom, then its cause (`EvictionCause`'s fields, so a
#: field added there lands here), then whether the job is scored (submitted in the window) and
#: whether the window it broke started in the drain (after the scored window, the quota lifted)
EVICTION_COLUMNS: tuple[str, ...] = (
    "t", "job_id", "pool", "nodes", "gpus", *(f for f in CAUSE_FIELDS if f != "pool"), "in_eval",
    "drain")
#: the jobs table's columns (``windows_ok`` / ``windows_failed`` count every window of the job;
#: ``windows_ok_drain`` / ``windows_failed_drain`` those of them that started in the drain)
JOB_COLUMNS: tuple[str, ...] = (
    "job_id", "cls", "pool", "org", "gpus_per_worker", "workers", "submit", "duration",
    "guarantee_h", "first_start", "end", "jqt", "jct", "evictions", "requeues", "windows_ok",
    "windows_failed", "lost_gpu_s", "held_gpu_s", "status", "evictions_fragmentation",
    "windows_ok_drain", "windows_failed_drain", "delay_choice_s")
#: the quota feedback table's columns, one row per quota refresh and pool: η; the windows ended
#: over the last H hours, failed, and failed while HP was above the plan; the evidence η moves on
#: (`EtaEvidence.eta_windows`, `eta_failed_quota`); the quota it gave (its largest and smallest
#: over the guarantee classes: the shortest class's and the longest's); the shape reserve; HP
#: demand; the plan U_0 = μ_0 + z_ρ·σ_0/η (NaN without a forecast); LP running
FEEDBACK_COLUMNS: tuple[str, ...] = (
    "t", "pool", "eta", "windows", "failed", "failed_quota", "eta_windows", "eta_failed_quota",
    "quota_gpus", "quota_longest_gpus",
    "reserve_nodes", "hp_gpus", "plan_gpus", "lp_gpus", "band_windows", "band_failed")


class Recorder:
    def __init__(self, state: ClusterState, params: Params, eval_start: float, eval_end: float,
                 sample_s: float) -> None:
        self.state = state
        self.params = params
        self.eval_start, self.eval_end, self.sample_s = eval_start, eval_end, sample_s
        self.sample_t: list[float] = []
        self.sample_used: list[np.ndarray] = []
        self.sample_hp: list[np.ndarray] = []
        self.sample_lp: list[np.ndarray] = []
        #: LP window outcomes of scored jobs by (pool, succeeded): ``windows`` those that started
        #: under the quota, ``drain_windows`` those that started in the drain (after the scored
        #: window with the quota lifted, `Params.quota_after_window` off)
        self.windows: Counter[tuple[str, bool]] = Counter()
        self.drain_windows: Counter[tuple[str, bool]] = Counter()
        self.quota_log: list[tuple[float, str, float, float]] = []
        self.feedback_log: list[tuple[float, str, float, int, int, int, int, int, float, float,
                                      int, float, float, float, float, float]] = []
        self.reports: Counter[tuple[str, str, str, bool]] = Counter()
        self.report_time: dict[tuple[str, str], float] = {}
        #: (t, job, nodes, cause, in_eval) of every eviction, in order
        self.evictions: list[tuple[float, Job, tuple[int, ...], EvictionCause, bool]] = []
        #: beside each eviction: whether the window it broke started in the drain
        self.eviction_drain: list[bool] = []
        self.jobs: pd.DataFrame | None = None
        #: per HP gang that waited, (choice s, capacity s) of its wait (`gfs_opt.sim.hp_delay`)
        self.hp_delays: dict[int, tuple[float, float]] = {}
        self.end_time = math.nan
        self._timeseries: tuple[int, pd.DataFrame] | None = None   # (samples it holds, table)

    def in_window(self, t: float) -> bool:
        return self.eval_start <= t < self.eval_end

    def logs_quota(self, t: float) -> bool:
        """Whether the quota log and the feedback log keep a refresh at ``t``: the scored window
        and the day before it (the quota the window starts with)."""
        return self.eval_start - 86_400.0 <= t < self.eval_end

    def sample(self, t: float) -> None:
        self.sample_t.append(t)
        self.sample_used.append(self.state.pool_used.copy())
        self.sample_hp.append(self.state.pool_hp.copy())
        self.sample_lp.append(self.state.pool_lp.copy())

    def window(self, t: float, pool: str, ok: bool, drain: bool = False) -> None:
        """A scored job's LP window ended; ``drain``: it started in the drain."""
        (self.drain_windows if drain else self.windows)[(pool, ok)] += 1

    def quota(self, t: float, quotas: dict[tuple[str, float], int]) -> None:
        if self.logs_quota(t):
            for (pool, d), q in quotas.items():
                self.quota_log.append((t, pool, d, q / MILLI))

    def feedback(self, t: float, pool: str, fb: QuotaFeedback, quotas: tuple[int, int],
                 reserve: int) -> None:
        """One refresh of ``pool``'s quota (`FEEDBACK_COLUMNS`): η after the refresh and what it
        moved on, the largest and smallest class quota (milli-GPU), the reserve, the plan (GPUs).
        The engine asks only where `logs_quota` holds."""
        i = self.state.pool_index[pool]
        ev = fb.evidence
        self.feedback_log.append((
            t, pool, fb.eta, ev.recent_failed + ev.recent_succeeded,
            ev.recent_failed, ev.recent_failed_quota, ev.eta_windows,
            ev.eta_failed_quota, quotas[0] / MILLI, quotas[1] / MILLI, reserve,
            float(self.state.pool_hp[i]) / MILLI, fb.plan_gpus, float(self.state.pool_lp[i]) / MILLI,
            ev.band_windows, ev.band_failed))

    def report(self, t: float, rep: SolveReport) -> None:
        self.reports[(rep.step, rep.method, rep.status, rep.fallback)] += 1
        key = (rep.step, rep.method)
        self.report_time[key] = self.report_time.get(key, 0) + rep.time_s

    def eviction(self, t: float, job: Job, nodes: tuple[int, ...], cause: EvictionCause,
                 in_eval: bool, drain: bool = False) -> None:
        self.evictions.append((t, job, nodes, cause, in_eval))
        self.eviction_drain.append(drain)

    def finish(self, t: float, runs: Iterable[JobRun],
               hp_delays: dict[int, tuple[float, float]] | None = None) -> None:
        self.end_time = t
        if hp_delays is not None:
            self.hp_delays = hp_delays
        delays = self.hp_delays
        frag = Counter(job.id for _t, job, _n, cause, _e in self.evictions
                       if cause.kind == "fragmentation")
        rows = []
        for r in runs:
            if not r.in_eval:
                continue
            j = r.job
            pending = r.status in ("pending", "future")
            qt = r.queue_time + (t - r.queued_since if pending and r.status == "pending" else 0.0)
            rows.append((j.id, j.cls.value, j.pool, j.org, j.g / MILLI, j.workers, j.submit,
                         j.duration, j.guarantee_h, r.first_start, r.end, qt,
                         r.end - j.submit if r.status == "done" else math.nan,
                         r.evictions, r.requeues, r.windows_ok, r.windows_failed, r.lost_gpu_s,
                         r.held_gpu_s, r.status, frag[j.id], r.windows_ok_drain,
                         r.windows_failed_drain,
                         # an HP job's wait while its pool had room by eviction (NaN for LP)
                         delays.get(j.id, (0.0, 0.0))[0] if j.is_hp else math.nan))
        self.jobs = pd.DataFrame(rows, columns=list(JOB_COLUMNS))

    # ---- tables ------------------------------------------------------------------------------
    def timeseries(self) -> pd.DataFrame:
        """One row per 60 s sample and pool: allocated/HP/LP GPUs, capacity (a fresh copy: a
        run's summary, per-pool table and output each ask, and stacking tens of thousands of
        samples is the cost)."""
        n = len(self.sample_t)
        if self._timeseries is None or self._timeseries[0] != n:
            self._timeseries = (n, self._build_timeseries())
        return self._timeseries[1].copy()

    def _build_timeseries(self) -> pd.DataFrame:
        if not self.sample_t:
            return pd.DataFrame(columns=["t", "pool", "allocated", "hp", "lp", "capacity"])
        pools = self.state.pools
        n = len(self.sample_t)
        used = np.vstack(self.sample_used) / MILLI
        hp = np.vstack(self.sample_hp) / MILLI
        lp = np.vstack(self.sample_lp) / MILLI
        cap = self.state.pool_capacity / MILLI
        return pd.DataFrame({
            "t": np.repeat(self.sample_t, len(pools)),
            "pool": np.tile(pools, n),
            "allocated": used.ravel(), "hp": hp.ravel(), "lp": lp.ravel(),
            "capacity": np.tile(cap, n),
        })

    def eviction_table(self) -> pd.DataFrame:
        """One row per eviction (`EVICTION_COLUMNS`): time, job, its pool, nodes (indices,
        space-separated) and GPUs, the cause (`gfs_opt.sim.causes`), whether the job is scored and
        whether the window it broke started in the drain."""
        rows = []
        for (t, job, nodes, cause, in_eval), drain in zip(self.evictions, self.eviction_drain,
                                                          strict=True):
            c = {f: getattr(cause, f) for f in CAUSE_FIELDS}
            rows.append({"t": t, "job_id": job.id, "nodes": " ".join(map(str, nodes)),
                         "gpus": job.demand / MILLI, **c, "in_eval": in_eval, "drain": drain})
        df = pd.DataFrame(rows, columns=list(EVICTION_COLUMNS))
        return df.astype({"hp_job": "Int64", "whole_node": bool, "in_eval": bool, "drain": bool})

    def quota_table(self) -> pd.DataFrame:
        return pd.DataFrame(self.quota_log, columns=["t", "pool", "class_h", "quota_gpus"])

    def feedback_table(self) -> pd.DataFrame:
        """The quota's feedback at each refresh (`FEEDBACK_COLUMNS`), with the last H hours'
        eviction rate ``er`` and its quota-attributable part ``er_attributable`` (NaN where no
        window ended): what η moved on, beside what it did to the quota."""
        df = pd.DataFrame(self.feedback_log, columns=list(FEEDBACK_COLUMNS))
        windows = df["windows"].where(df["windows"] > 0)
        df["er"] = df["failed"] / windows
        df["er_attributable"] = df["failed_quota"] / windows
        df["er_band"] = df["band_failed"] / df["band_windows"].where(df["band_windows"] > 0)
        return df

    def report_table(self) -> pd.DataFrame:
        rows = [(s, m, st, fb, c, self.report_time[(s, m)]) for (s, m, st, fb), c in self.reports.items()]
        return pd.DataFrame(rows, columns=["step", "method", "status", "fallback", "count",
                                           "total_time_s"])
