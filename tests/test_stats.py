"""Trace statistics and the calibration report, on hand-built traces with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standins import needs_ref_toy

from gfs_opt.traces.base import JOB_COLUMNS, Trace
from gfs_opt.traces.stats import calibration_report, format_report, trace_stats

H = 3600


def make_trace(rows: list[tuple], nodes: list[tuple[str, int]] | None = None) -> Trace:
    """rows: (org, pool, cls, g_milli, workers, submit, duration)."""
    nodes = nodes or [("A", 8), ("A", 8), ("B", 1)]
    nd = pd.DataFrame({"node_name": [f"n{i}" for i in range(len(nodes))],
                       "pool": [p for p, _ in nodes], "gpus": [g for _, g in nodes],
                       "cpus": 64})
    jobs = pd.DataFrame(rows, columns=["org", "pool", "cls", "g", "workers", "submit", "duration"])
    jobs["job_id"] = np.arange(len(jobs))
    jobs["name"] = jobs["job_id"].astype(str)
    jobs["cpu"] = 4.0
    jobs["guarantee_h"] = 1.0
    jobs["resident"] = (jobs["cls"] == "HP") & (jobs["submit"] == 0)
    return Trace(nd, jobs[JOB_COLUMNS])


TOY = [
    ("o1", "A", "HP", 1000, 1, 0, 10 * H),          # resident, 1 GPU
    ("o1", "A", "HP", 8000, 2, 10, 30),             # 16 GPUs, 30 s, hour 0 only
    ("o2", "B", "LP", 500, 1, H + 5, 2 * H),        # half a GPU, hours 1..3
    ("o1", "A", "HP", 2000, 1, 2 * H, 100_000),     # 2 GPUs, > 1 day
    ("o3", "A", "LP", 4000, 40, 40 * 86400, 59),    # gang of 160 GPUs, day 40 (April)
]


def test_counts_shares_and_requests():
    s = trace_stats(make_trace(TOY))
    assert s["jobs_total"] == 5 and s["organizations"] == 3
    assert s["job_type_share"] == {"HP": 0.6, "Spot": 0.4}
    assert s["resident_hp_jobs_at_t0"] == 1
    assert s["gpu_model_job_share"] == {"A": 0.8, "B": 0.2}
    assert s["gpu_request_per_worker_counts"] == {"0.1": 0, "0.2": 0, "0.3": 0, "0.5": 1, "1": 1,
                                                  "2": 1, "4": 1, "6": 0, "8": 1, "other": 0}
    assert s["share_jobs_below_one_gpu"] == 0.2
    assert s["worker_num_share"] == {"1": 0.6, "2-8": 0.2, "9-32": 0.0, "33-128": 0.2, ">128": 0.0}
    assert s["worker_num_max"] == 40
    gs = {"HP": 1 * 10 * H + 16 * 30 + 2 * 100_000, "Spot": 0.5 * 2 * H + 160 * 59}
    total = sum(gs.values())
    assert s["gpu_seconds_share"]["HP"] == pytest.approx(gs["HP"] / total)
    assert s["org_top_shares_of_jobs"]["top1"] == 0.6 and s["org_top_shares_of_jobs"]["top10"] == 1.0
    assert s["orgs_with_at_least_1000_jobs"] == 0
    assert s["nodes"] == {"count": 3, "gpus": 17, "by_model_gpus": {"A": 16, "B": 1}}


def test_durations_arrivals_and_months():
    s = trace_stats(make_trace(TOY))
    assert s["duration_bucket_job_share"]["<1min"] == 0.4  # 30 s and 59 s
    assert s["duration_bucket_job_share"]["1-3d"] == 0.2
    assert s["duration_quantiles_all"]["p50"] == 2 * H
    assert s["duration_quantiles_by_type"]["Spot"]["p50"] == pytest.approx((59 + 2 * H) / 2)
    assert s["inter_arrival_quantiles"]["p50"] == pytest.approx(np.median([10, H - 5, H - 5, 40 * 86400 - 2 * H]))
    hours = 40 * 24 + 1
    assert s["hourly_arrivals"]["mean"] == pytest.approx(5 / hours)
    assert s["monthly"]["Spot_jobs_total"] == {"2024-03": 1, "2024-04": 1}
    assert s["monthly"]["HP_jobs_per_day"]["2024-03"] == pytest.approx(3 / 31)
    assert s["monthly"]["HP_jobs_per_day"]["2024-04"] == 0.0


def test_hourly_pressure_counts_every_hour_a_job_touches():
    rows = [("o", "A", "HP", 1000, 4, 0, 2 * H),      # hours 0, 1, 2 (ends exactly at 2 h)
            ("o", "A", "HP", 8000, 1, H + 100, 60),   # hour 1 only
            ("o", "B", "LP", 500, 1, 3 * H - 10, 20)]  # hours 2 and 3
    s = trace_stats(make_trace(rows))["requested_gpus_over_capacity_hourly"]
    per_hour = np.array([4, 12, 4.5, 0.5]) / 17
    assert s["mean"] == pytest.approx(per_hour.mean())
    assert s["median"] == pytest.approx(np.median(per_hour))
    assert s["max"] == pytest.approx(12 / 17)
    assert s["by_pool"]["B"]["max"] == pytest.approx(0.5)
    assert s["by_pool"]["A"]["mean"] == pytest.approx(np.array([4, 12, 4, 0]).mean() / 16)


@given(st.lists(st.tuples(st.integers(1, 8), st.integers(1, 5), st.integers(0, 50 * H),
                          st.integers(1, 10 * H)), min_size=1, max_size=40))
@settings(max_examples=60, deadline=None)
def test_pressure_mean_is_gpu_hours_touched_over_capacity(jobs):
    rows = [("o", "A", "HP", g * 1000, w, s, d) for g, w, s, d in jobs]
    stats = trace_stats(make_trace(rows, nodes=[("A", 8)] * 4))
    first = min(s // H for _, _, s, _ in jobs)
    last = max((s + d) // H for _, _, s, d in jobs)
    touched = sum(g * w * ((s + d) // H - s // H + 1) for g, w, s, d in jobs)
    want = touched / (last - first + 1) / 32
    assert stats["requested_gpus_over_capacity_hourly"]["mean"] == pytest.approx(want)
    assert sum(stats["worker_num_share"].values()) == pytest.approx(1.0)
    assert sum(stats["duration_bucket_job_share"].values()) == pytest.approx(1.0)


def _targets(tmp_path: Path, **extra) -> Path:
    t = {"jobs_total": 5, "job_type_share": {"HP": 0.6, "Spot": 0.4},
         "duration_quantiles_all": {"p50": 7000},
         "hourly_arrivals": {"mean": 0.005, "fano_factor": 90},
         "hour_of_day_peak_to_trough": 2.0,
         "tolerances": {"jobs_total_rel": 0.05, "share_abs": 0.03, "duration_quantile_log10": 0.15,
                        "fano_factor_min": 20, "hour_of_day_peak_to_trough_range": [1.5, 3.0]}}
    t.update(extra)
    path = tmp_path / "targets.json"
    path.write_text(json.dumps(t))
    return path


def test_calibration_report_rows_and_verdicts(tmp_path: Path):
    stats = trace_stats(make_trace(TOY))
    rows = {r["name"]: r for r in calibration_report(stats, _targets(tmp_path))}
    assert rows["jobs_total"]["ok"] is True and rows["jobs_total"]["actual"] == 5
    assert rows["job_type_share/Spot"]["ok"] is True
    assert rows["duration_quantiles_all/p50"]["ok"] is True   # 7,200 vs 7,000
    assert rows["hourly_arrivals/fano_factor"]["ok"] is False  # a handful of jobs is not bursty
    assert rows["hour_of_day_peak_to_trough"]["ok"] is False   # some hours have no arrivals
    assert set(rows["jobs_total"]) == {"name", "target", "actual", "tolerance", "ok"}
    off = calibration_report(stats, _targets(tmp_path, jobs_total=100))
    assert next(r for r in off if r["name"] == "jobs_total")["ok"] is False


def test_scaled_report_scales_counts_and_skips_unscalable(tmp_path: Path):
    stats = trace_stats(make_trace(TOY))
    path = _targets(tmp_path, jobs_total=50, organizations=30)
    rows = {r["name"]: r for r in calibration_report(stats, path, scale=0.1)}
    assert rows["jobs_total"]["target"] == pytest.approx(5) and rows["jobs_total"]["ok"] is True
    assert rows["organizations"]["ok"] is None


def test_missing_targets_give_an_empty_report_and_a_note(tmp_path: Path):
    stats = trace_stats(make_trace(TOY))
    assert calibration_report(stats, tmp_path / "absent.json") == []
    text = format_report(stats, [])
    assert "no calibration targets" in text and "jobs 5" in text


def test_format_report_is_an_aligned_table(tmp_path: Path):
    stats = trace_stats(make_trace(TOY))
    report = calibration_report(stats, _targets(tmp_path))
    text = format_report(stats, report)
    lines = text.splitlines()
    table = [ln for ln in lines if ln.startswith(("jobs_total", "job_type_share"))]
    assert len(table) == 3 and len({ln.index("±") for ln in table}) == 1
    assert "FAIL" in text and f"/{len(report)} checks within tolerance" in text


@needs_ref_toy
def test_stats_of_a_real_file_trace():
    from gfs_opt.traces.load import load_trace

    s = trace_stats(load_trace("ref-toy"))
    assert s["jobs_total"] > 3000 and s["nodes"]["gpus"] == 80
    assert s["requested_gpus_over_capacity_hourly"]["mean"] > 0
    json.dumps(s)  # plain types only, so `--json` works
