"""Trace statistics: the quantities of ``calibration_targets.json``, computed for ANY `Trace`.

Keys mirror the targets file so the two can be compared key by key (`gfs_opt.traces.calibration`).
Class names follow the Alibaba file: LP jobs are reported as "Spot". Conventions, chosen to
reproduce the published real aggregates from the real trace:

* an hour ``h`` counts a job as active when ``⌊submit/3600⌋ ≤ h ≤ ⌊(submit+duration)/3600⌋``;
  hourly requested GPUs are the active jobs' ``g·w`` summed, over the total (or pool) GPUs, for
  every hour from the first submission to the last end;
* hourly arrivals count submissions per hour from the first to the last submission hour;
* inter-arrival times are the gaps between consecutive sorted submit times (residents included);
* months are calendar months of ``trace.origin + submit``; HP jobs per day divides by the days of
  the month the trace spans;
* quantiles use linear interpolation (numpy's default).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gfs_opt.model import MILLI
from gfs_opt.traces.base import Trace
from gfs_opt.traces.calibration import calibration_report, format_report

HOUR = 3600
DAY = 86400
QUANTILES = {"p50": 0.5, "p75": 0.75, "p90": 0.9, "p95": 0.95, "p99": 0.99}
CLASS_NAMES = {"HP": "HP", "LP": "Spot"}
REQUEST_LABELS = {100: "0.1", 200: "0.2", 300: "0.3", 500: "0.5", 1000: "1", 2000: "2",
                  4000: "4", 6000: "6", 8000: "8"}
WORKER_BUCKETS = (("1", 1, 1), ("2-8", 2, 8), ("9-32", 9, 32), ("33-128", 33, 128),
                  (">128", 129, np.inf))
DURATION_BUCKETS = (("<1min", 0, 60), ("1-10min", 60, 600), ("10-60min", 600, 3600),
                    ("1-6h", 3600, 21_600), ("6-24h", 21_600, 86_400), ("1-3d", 86_400, 259_200),
                    (">3d", 259_200, np.inf))
BIG_ORG_JOBS = 1000

__all__ = ["calibration_report", "format_report", "trace_stats"]


def _quantiles(x: np.ndarray, keys: dict[str, float] = QUANTILES) -> dict[str, float | None]:
    if x.size == 0:
        return dict.fromkeys(keys)
    return {k: float(v) for k, v in zip(keys, np.quantile(x, list(keys.values())), strict=True)}


def _shares(labels: pd.Series, order: list[str] | None = None) -> dict[str, float]:
    s = labels.value_counts(normalize=True)
    if order is not None:
        s = s.reindex(order, fill_value=0.0)
    return {str(k): float(v) for k, v in s.items()}


def trace_stats(trace: Trace) -> dict:
    """Every statistic of the calibration targets (plus per-pool pressure) for ``trace``."""
    jobs, nodes = trace.jobs, trace.nodes
    submit = jobs["submit"].to_numpy(dtype=float)
    duration = jobs["duration"].to_numpy(dtype=float)
    g = jobs["g"].to_numpy(dtype=np.int64)
    w = jobs["workers"].to_numpy(dtype=np.int64)
    cls = jobs["cls"].map(CLASS_NAMES).fillna(jobs["cls"]).astype(str)
    gpus = g * w / MILLI
    gpu_seconds = gpus * duration
    n = len(jobs)
    out: dict = {
        "span_seconds": float(submit.max() - submit.min()) if n else 0.0,
        "jobs_total": n,
        "organizations": int(jobs["org"].nunique()),
        "job_type_share": _shares(cls, ["HP", "Spot"]),
        "gpu_seconds_share": _class_sums(gpu_seconds, cls),
        "resident_hp_jobs_at_t0": int(jobs["resident"].sum()),
        "gpu_model_job_share": _shares(jobs["pool"].astype(str)),
    }
    out |= _request_stats(g, w)
    out |= _duration_stats(duration, cls)
    out |= _arrival_stats(submit)
    out |= _org_stats(jobs["org"].astype(str))
    out["monthly"] = _monthly(submit, cls, trace.origin)
    out["requested_gpus_over_capacity_hourly"] = _pressure(
        submit, duration, gpus, jobs["pool"].astype(str).to_numpy(), nodes)
    by_model = nodes.groupby("pool")["gpus"].sum().sort_values(ascending=False)
    out["nodes"] = {"count": len(nodes), "gpus": int(nodes["gpus"].sum()),
                    "by_model_gpus": {str(k): int(v) for k, v in by_model.items()}}
    return out


def _class_sums(values: np.ndarray, cls: pd.Series) -> dict[str, float]:
    total = values.sum()
    sums = pd.Series(values).groupby(cls.to_numpy()).sum()
    return {c: float(sums.get(c, 0.0) / total) if total > 0 else 0.0 for c in ("HP", "Spot")}


def _request_stats(g: np.ndarray, w: np.ndarray) -> dict:
    labels = pd.Series(g).map(REQUEST_LABELS).fillna("other")
    counts = labels.value_counts().reindex([*REQUEST_LABELS.values(), "other"], fill_value=0)
    n = max(len(g), 1)
    worker = {name: float(((w >= lo) & (w <= hi)).sum() / n) for name, lo, hi in WORKER_BUCKETS}
    return {
        "gpu_request_per_worker_counts": {k: int(v) for k, v in counts.items()},
        "gpu_request_per_worker_share": {k: float(v / n) for k, v in counts.items()},
        "share_jobs_below_one_gpu": float((g < MILLI).sum() / n),
        "worker_num_share": worker,
        "worker_num_max": int(w.max()) if len(w) else 0,
    }


def _duration_stats(d: np.ndarray, cls: pd.Series) -> dict:
    n = max(d.size, 1)
    buckets = {name: float(((d >= lo) & (d < hi)).sum() / n) for name, lo, hi in DURATION_BUCKETS}
    return {
        "duration_quantiles_all": _quantiles(d),
        "duration_quantiles_by_type": {c: _quantiles(d[(cls == c).to_numpy()]) for c in ("HP", "Spot")},
        "duration_bucket_job_share": buckets,
    }


def _arrival_stats(submit: np.ndarray) -> dict:
    if submit.size == 0:
        return {"inter_arrival_quantiles": _quantiles(submit), "hourly_arrivals": {},
                "hour_of_day_peak_to_trough": None}
    gaps = np.diff(np.sort(submit))
    hour = np.floor(submit / HOUR).astype(np.int64)
    per_hour = np.bincount(hour - hour.min())
    mean, var = float(per_hour.mean()), float(per_hour.var())
    by_hod = np.bincount(hour % 24, minlength=24)
    return {
        "inter_arrival_quantiles": {k: v for k, v in _quantiles(gaps).items() if k != "p75"},
        "hourly_arrivals": {"mean": mean, "variance": var, "fano_factor": var / mean if mean else None},
        "hour_of_day_peak_to_trough": float(by_hod.max() / by_hod.min()) if by_hod.min() else None,
    }


def _org_stats(org: pd.Series) -> dict:
    counts = org.value_counts().to_numpy()
    n = max(counts.sum(), 1)
    return {
        "org_top_shares_of_jobs": {f"top{k}": float(counts[:k].sum() / n) for k in (1, 5, 10)},
        "orgs_with_at_least_1000_jobs": int((counts >= BIG_ORG_JOBS).sum()),
    }


def _monthly(submit: np.ndarray, cls: pd.Series, origin: pd.Timestamp) -> dict:
    if submit.size == 0:
        return {"HP_jobs_per_day": {}, "Spot_jobs_total": {}}
    day = np.floor(submit / DAY).astype(np.int64)
    days = np.arange(day.min(), day.max() + 1)
    day_month = (origin.normalize() + pd.to_timedelta(days, unit="D")).strftime("%Y-%m")
    days_in = pd.Series(1, index=day_month).groupby(level=0).sum()
    month = pd.Series(np.asarray(day_month)[day - day.min()])
    hp = month[(cls == "HP").to_numpy()].value_counts().reindex(days_in.index, fill_value=0)
    spot = month[(cls == "Spot").to_numpy()].value_counts().reindex(days_in.index, fill_value=0)
    return {"HP_jobs_per_day": {m: float(hp[m] / days_in[m]) for m in days_in.index},
            "Spot_jobs_total": {m: int(spot[m]) for m in days_in.index}}


def _pressure(submit: np.ndarray, duration: np.ndarray, gpus: np.ndarray, pool: np.ndarray,
              nodes: pd.DataFrame) -> dict:
    if submit.size == 0 or nodes["gpus"].sum() == 0:
        return {"mean": None, "median": None, "max": None, "by_pool": {}}
    first = np.floor(submit / HOUR).astype(np.int64)
    last = np.floor((submit + duration) / HOUR).astype(np.int64)
    h0, n_hours = first.min(), last.max() - first.min() + 1

    def series(mask: np.ndarray) -> np.ndarray:
        delta = np.bincount(first[mask] - h0, gpus[mask], minlength=n_hours + 1)
        delta -= np.bincount(last[mask] + 1 - h0, gpus[mask], minlength=n_hours + 1)
        return np.cumsum(delta)[:n_hours]

    def summary(ratio: np.ndarray) -> dict:
        return {"mean": float(ratio.mean()), "median": float(np.median(ratio)), "max": float(ratio.max())}

    caps = nodes.groupby("pool")["gpus"].sum()
    in_cluster = np.isin(pool, caps.index.to_numpy())
    out = summary(series(in_cluster) / caps.sum())
    out["by_pool"] = {str(p): summary(series(pool == p) / c) for p, c in caps.items() if c > 0}
    return out

