"""Metrics of GFS-SPEC §5 over the jobs submitted in the evaluation window and its samples.

Queueing time comes three ways, kept apart everywhere it is shown: ``lp_jqt_mean`` over every
scored LP job (a job that never started counts its wait until the replay ends, a lower bound),
``lp_jqt_started_mean`` over the jobs that started at least once, and ``lp_never_started``.

LP guarantee windows of scored jobs come in two kinds, told apart when each window starts: *under
the quota* (it started while the run's quota regime applied: before the scored window ended, or at
any time when `Params.quota_after_window` keeps the quota) and *drain* (it started after the
scored window with the quota lifted, the authors' behaviour, when the LP backlog floods in). The
split is made on time and the run's parameters alone, so every policy — with a quota or without —
is split at the same instant. ``lp_eviction_rate`` (the headline), ``lp_windows_failed`` and
``lp_windows_ok`` count the windows under the quota; ``lp_eviction_rate_drain``,
``lp_windows_failed_drain`` and ``lp_windows_ok_drain`` the drain's; ``lp_eviction_rate_all``
every window of a scored LP job (the authors' scoring). With the quota kept there is no drain.

Evictions of scored LP jobs come split by cause (`gfs_opt.sim.causes`): ``lp_evictions`` =
``lp_evictions_count`` + ``lp_evictions_fragmentation`` + ``lp_evictions_other`` (the sum of the
jobs table's ``evictions`` over LP jobs), and ``lp_fragmentation_share`` = fragmentation ÷ all
(0.0 for a run without evictions, so that the column stays numeric and averages over runs);
``lp_evictions_drain`` counts those of them that broke a window started in the drain.

HP queueing comes split by cause (`gfs_opt.sim.hp_delay`): ``hp_delay_choice_mean``/``_p99``,
the time HP gangs waited while their pool had room for them by evicting LP work (the policy's
choice), ``hp_delay_capacity_mean``/``_p99``, the time they waited for room no policy had, and
``hp_share_delayed_by_choice``, the share of HP gangs that waited by choice at all.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from gfs_opt.sim.causes import KINDS
from gfs_opt.sim.hp_delay import delay_summary
from gfs_opt.sim.recorder import Recorder

HOURS_PER_MONTH = 720.0


def _stats(x: pd.Series) -> dict[str, float]:
    x = x.dropna()
    if x.empty:
        return {"mean": math.nan, "p50": math.nan, "p90": math.nan, "p99": math.nan, "n": 0}
    q = np.quantile(x.to_numpy(dtype=float), [0.5, 0.9, 0.99])
    return {"mean": float(x.mean()), "p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]),
            "n": len(x)}


def eviction_rate(failed: float, ok: float) -> float:
    return failed / (failed + ok) if failed + ok else 0.0


def window_columns(failed: float, ok: float, failed_drain: float, ok_drain: float,
                   prefix: str = "lp_") -> dict[str, Any]:
    """Window counts and eviction rates under the quota and in the drain (module doc)."""
    return {f"{prefix}eviction_rate": eviction_rate(failed, ok),
            f"{prefix}windows_failed": failed, f"{prefix}windows_ok": ok,
            f"{prefix}eviction_rate_drain": eviction_rate(failed_drain, ok_drain),
            f"{prefix}windows_failed_drain": failed_drain, f"{prefix}windows_ok_drain": ok_drain,
            f"{prefix}eviction_rate_all": eviction_rate(failed + failed_drain, ok + ok_drain)}


def job_windows(jobs: pd.DataFrame) -> tuple[int, int, int, int]:
    """(failed, ok under the quota, failed, ok in the drain) of a jobs table's rows; a table
    without the drain columns (a live Slurm replay) has no drain."""
    if not len(jobs):
        return 0, 0, 0, 0
    fd = int(jobs["windows_failed_drain"].sum()) if "windows_failed_drain" in jobs else 0
    od = int(jobs["windows_ok_drain"].sum()) if "windows_ok_drain" in jobs else 0
    return int(jobs["windows_failed"].sum()) - fd, int(jobs["windows_ok"].sum()) - od, fd, od


def per_guarantee_class(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per guarantee class of the scored LP jobs (index ``guarantee_h``): jobs, windows and the
    realised window success (1 − eviction rate) under the quota and in the drain — what ρ
    promises per class."""
    lp = jobs[jobs["cls"] == "LP"] if len(jobs) else jobs
    rows = []
    for d, sub in (lp.groupby("guarantee_h") if len(lp) else ()):
        f, ok, fd, od = job_windows(sub)
        row: dict[str, Any] = {"guarantee_h": float(d), "jobs": len(sub)}
        row |= window_columns(f, ok, fd, od, prefix="")
        row["success"] = 1.0 - row["eviction_rate"] if f + ok else math.nan
        rows.append(row)
    cols = ["guarantee_h", "jobs", *window_columns(0, 0, 0, 0, prefix=""), "success"]
    return pd.DataFrame(rows, columns=cols).set_index("guarantee_h")


def per_class(rec: Recorder) -> pd.DataFrame:
    """JQT/JCT statistics per class (rows HP, LP), and the LP row's guarantee windows under the
    quota and in the drain (module doc)."""
    jobs = rec.jobs if rec.jobs is not None else pd.DataFrame()
    rows = []
    for cls in ("HP", "LP"):
        sub = jobs[jobs["cls"] == cls] if len(jobs) else jobs
        row: dict[str, Any] = {"cls": cls, "jobs": len(sub)}
        if len(sub):
            row["finished"] = int((sub["status"] == "done").sum())
            row["never_started"] = int(sub["first_start"].isna().sum())
            for name, col in (("jqt", "jqt"), ("jct", "jct")):
                for k, v in _stats(sub[col]).items():
                    if k != "n":
                        row[f"{name}_{k}"] = v
            if cls == "LP":
                row |= window_columns(*job_windows(sub), prefix="")
        rows.append(row)
    return pd.DataFrame(rows).set_index("cls")


def per_pool(rec: Recorder) -> pd.DataFrame:
    """Allocation, LP eviction rate (under the quota, and the drain's beside it) and LP JQT per
    pool."""
    ts = rec.timeseries()
    jobs = rec.jobs if rec.jobs is not None else pd.DataFrame(columns=["pool", "cls", "jqt"])
    rows = []
    for pool in rec.state.pools:
        s = ts[ts["pool"] == pool]
        cap = float(rec.state.capacity_gpus(pool))
        f, ok = rec.windows[(pool, False)], rec.windows[(pool, True)]
        fd, od = rec.drain_windows[(pool, False)], rec.drain_windows[(pool, True)]
        lp = jobs[(jobs["pool"] == pool) & (jobs["cls"] == "LP")]
        rows.append({
            "pool": pool, "gpus": cap,
            "allocation": float(s["allocated"].mean() / cap) if len(s) else math.nan,
            "hp_share": float(s["hp"].mean() / cap) if len(s) else math.nan,
            "lp_share": float(s["lp"].mean() / cap) if len(s) else math.nan,
            **window_columns(f, ok, fd, od),
            "lp_jobs": len(lp), "lp_jqt_mean": float(lp["jqt"].mean()) if len(lp) else math.nan,
        })
    return pd.DataFrame(rows).set_index("pool")


def summarize(rec: Recorder, price_per_gpu_hour: float = 2.0) -> dict[str, Any]:
    """The run's headline numbers (JSON-friendly)."""
    jobs = rec.jobs if rec.jobs is not None else pd.DataFrame()
    lp = jobs[jobs["cls"] == "LP"] if len(jobs) else jobs
    hp = jobs[jobs["cls"] == "HP"] if len(jobs) else jobs
    failed = sum(c for (_p, ok), c in rec.windows.items() if not ok)
    ok = sum(c for (_p, ok_), c in rec.windows.items() if ok_)
    failed_drain = sum(c for (_p, ok_), c in rec.drain_windows.items() if not ok_)
    ok_drain = sum(c for (_p, ok_), c in rec.drain_windows.items() if ok_)
    ts = rec.timeseries()
    cap_total = float(rec.state.pool_capacity.sum() / 1000.0)
    if len(ts):
        alloc_by_t = ts.groupby("t")["allocated"].sum()
        allocation = float(alloc_by_t.mean() / cap_total)
        span_s = len(alloc_by_t) * rec.sample_s
    else:
        allocation, span_s = math.nan, 0.0
    lost = float(lp["lost_gpu_s"].sum()) if len(lp) else 0.0
    useful = (allocation - lost / (cap_total * span_s)) if span_s else math.nan
    out: dict[str, Any] = {
        "window": [rec.eval_start, rec.eval_end],
        "gpus": cap_total,
        "jobs_hp": len(hp), "jobs_lp": len(lp),
        **window_columns(failed, ok, failed_drain, ok_drain),
        "lp_evictions_per_job": float(lp["evictions"].mean()) if len(lp) else 0.0,
        "lp_share_evicted": float((lp["evictions"] > 0).mean()) if len(lp) else 0.0,
        "lp_requeues": int(lp["requeues"].sum()) if len(lp) else 0,
        "allocation_rate": allocation,
        "useful_gpu_time_rate": useful,
        "lp_lost_gpu_hours": lost / 3600.0,
        "hp_evictions": int(hp["evictions"].sum()) if len(hp) else 0,
        "allocated_gpu_hours_per_month": allocation * cap_total * HOURS_PER_MONTH
        if not math.isnan(allocation) else math.nan,
        "price_per_gpu_hour": price_per_gpu_hour,
    }
    for name, sub in (("hp", hp), ("lp", lp)):
        for metric in ("jqt", "jct"):
            for k, v in _stats(sub[metric] if len(sub) else pd.Series(dtype=float)).items():
                if k != "n":
                    out[f"{name}_{metric}_{k}"] = v
        out[f"{name}_unfinished"] = int((sub["status"] != "done").sum()) if len(sub) else 0
        # JQT over jobs that started at least once, and how many never did: `*_jqt_mean` counts
        # a never-started job's wait up to the end of the replay (a lower bound on its JQT)
        started = sub[sub["first_start"].notna()] if len(sub) else sub
        out[f"{name}_never_started"] = len(sub) - len(started)
        st = _stats(started["jqt"] if len(started) else pd.Series(dtype=float))
        out[f"{name}_jqt_started_mean"] = st["mean"]
        out[f"{name}_jqt_started_p99"] = st["p99"]
    out.update(eviction_causes(rec))
    out.update(hp_delays(rec, hp))
    reports = rec.report_table()
    out["solver_reports"] = reports.to_dict(orient="records")
    # exact steps over the whole replay: how often the greedy answer had to stand in
    milp = reports[reports["method"] == "milp"]
    out["milp_solves"] = int(milp["count"].sum())
    out["milp_fallbacks"] = int(milp.loc[milp["fallback"].astype(bool), "count"].sum())
    out["milp_timeouts"] = int(milp.loc[milp["status"] == "timeout", "count"].sum())
    return out


def eviction_causes(rec: Recorder) -> dict[str, Any]:
    """Evictions of scored LP jobs by cause (module doc)."""
    scored = [(cause, drain) for (_t, job, _n, cause, in_eval), drain
              in zip(rec.evictions, rec.eviction_drain, strict=True) if in_eval and not job.is_hp]
    causes = [cause for cause, _d in scored]
    kinds = [c.kind for c in causes]
    n = len(kinds)
    out: dict[str, Any] = {"lp_evictions": n}
    for kind in KINDS:
        out[f"lp_evictions_{kind}"] = kinds.count(kind)
    out["lp_fragmentation_share"] = out["lp_evictions_fragmentation"] / n if n else 0.0
    out["lp_evictions_drain"] = sum(d for _c, d in scored)
    # the evictions the spot quota answers for: HP above its plan U_0
    out["lp_evictions_quota_attributable"] = sum(c.quota_attributable for c in causes)
    return out


def hp_delays(rec: Recorder, hp: pd.DataFrame) -> dict[str, float]:
    """Scored HP gangs' waits by cause (`gfs_opt.sim.hp_delay`): the policy's choice (the pool
    had room by eviction) and the capacity no policy had; a gang that never waited counts 0."""
    ids = hp["job_id"].tolist() if len(hp) else []
    got = [rec.hp_delays.get(j, (0.0, 0.0)) for j in ids]
    return delay_summary((c for c, _k in got), (k for _c, k in got))


def monthly_value(summary: dict[str, Any], baseline: dict[str, Any]) -> float:
    """Extra allocated GPU-hours per month vs a baseline × price (GFS-SPEC §5)."""
    extra = summary["allocated_gpu_hours_per_month"] - baseline["allocated_gpu_hours_per_month"]
    return float(extra * summary["price_per_gpu_hour"])
