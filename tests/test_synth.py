"""Synthetic Alibaba-like trace: determinism, schema, scaling, windows, setups, calibration."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gfs_opt import cli
from gfs_opt.errors import GfsError
from gfs_opt.paths import alibaba_dir
from gfs_opt.traces.alibaba import RAW_JOB_COLUMNS, trace_from_frames
from gfs_opt.traces.stats import calibration_report, trace_stats
from gfs_opt.traces.synth import (
    JOB_COLUMNS_RAW,
    NODE_COLUMNS_RAW,
    SETUPS,
    builtin_trace,
    synth_to_dir,
    synthesize,
    to_seconds,
)
from gfs_opt.traces.synth_cluster import scale_nodes
from gfs_opt.traces.synth_durations import CENSOR_END, loglinear_cdf, loglinear_quantile
from gfs_opt.traces.synth_requests import exact_counts
from gfs_opt.traces.synth_timing import deal_to_hours

AGG = alibaba_dir() / "derived_sultanul_ovi"
DAY = 86400


@pytest.fixture(scope="module")
def small_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    return synthesize(seed=11, scale=0.05)


@pytest.fixture(scope="module")
def full_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    return synthesize(seed=0)


# ---------------------------------------------------------------- determinism and schema

def test_same_seed_same_frames_and_other_seed_differs(small_frames):
    nodes, jobs = small_frames
    again_nodes, again_jobs = synthesize(seed=11, scale=0.05)
    pd.testing.assert_frame_equal(nodes, again_nodes)
    pd.testing.assert_frame_equal(jobs, again_jobs)
    other_nodes, other_jobs = synthesize(seed=12, scale=0.05)
    assert not nodes.equals(other_nodes)  # a different stratified sample of real nodes
    assert len(other_jobs) != len(jobs) or not jobs.equals(other_jobs)
    assert not np.array_equal(jobs["duration"].to_numpy()[:500], other_jobs["duration"].to_numpy()[:500])


def test_raw_schema_matches_the_real_files(full_frames):
    nodes, jobs = full_frames
    assert list(nodes.columns) == NODE_COLUMNS_RAW == ["gpu_model", "gpu_capacity_num", "cpu_num", "node_name"]
    assert list(jobs.columns) == JOB_COLUMNS_RAW == RAW_JOB_COLUMNS
    assert set(jobs["job_type"]) == {"HP", "Spot"}
    for col in ("job_name", "organization", "cpu_request", "worker_num", "submit_time", "duration"):
        assert pd.api.types.is_integer_dtype(jobs[col]), col
    assert jobs["job_name"].is_unique
    assert (jobs["submit_time"] >= 0).all() and (jobs["duration"] >= 1).all()
    assert jobs["submit_time"].is_monotonic_increasing
    # the full-scale cluster is the real node file, untouched
    real = pd.read_csv(alibaba_dir() / "node_info_df.csv")
    pd.testing.assert_frame_equal(nodes, real[NODE_COLUMNS_RAW], check_dtype=False)


def test_requests_fit_the_nodes_of_their_pool(full_frames):
    nodes, jobs = full_frames
    biggest = nodes.groupby("gpu_model")["gpu_capacity_num"].max()
    capacity = nodes.groupby("gpu_model")["gpu_capacity_num"].sum()
    g = jobs["gpu_request"].to_numpy()
    gpus_per_worker = np.where(g < 1, 1, g)
    assert (gpus_per_worker <= jobs["gpu_model"].map(biggest).to_numpy()).all()
    assert (g[jobs["gpu_model"].to_numpy() == "A10"] <= 1).all()  # 1-GPU A10 nodes
    assert ((g < 1) | (g == np.round(g))).all()  # whole GPUs above one
    assert (gpus_per_worker * jobs["worker_num"] <= jobs["gpu_model"].map(capacity)).all()
    assert (jobs["cpu_request"] <= jobs["gpu_model"].map(nodes.groupby("gpu_model")["cpu_num"].max())).all()


def test_residents_and_censoring(full_frames):
    _, jobs = full_frames
    res = jobs[jobs["submit_time"] == 0]
    assert len(res) == 3588 and (res["job_type"] == "HP").all() and (res["worker_num"] == 1).all()
    # residents hold about the real hour-0 load (6,855 GPUs incl. ≈ 150 regular hour-0 jobs)
    assert 5000 < (res["gpu_request"] * res["worker_num"]).sum() < 7000
    end = jobs["submit_time"] + jobs["duration"]
    late = jobs["submit_time"] < CENSOR_END
    assert (end[late] <= CENSOR_END).all()
    assert (end == CENSOR_END).sum() > 200  # like the real trace, many jobs run to the very end


def test_spot_follows_the_real_daily_profile(full_frames):
    _, jobs = full_frames
    day = jobs["submit_time"] // DAY
    spot = jobs[jobs["job_type"] == "Spot"]
    assert (spot["submit_time"] < 31 * DAY).sum() == 60  # Spot is almost absent in March
    real = pd.read_csv(AGG / "tables" / "daily_summary.csv")
    per_day = jobs.groupby(day)["job_type"].value_counts().unstack(fill_value=0)
    assert per_day["Spot"].to_numpy().tolist() == real["spot_jobs"].tolist()
    assert per_day["HP"].to_numpy().tolist() == real["hp_jobs"].tolist()
    # and every hour has exactly the real number of submissions (hour 0 includes the residents)
    hourly = pd.read_csv(AGG / "tables" / "hourly_summary.csv")
    per_hour = jobs.groupby(jobs["submit_time"] // 3600).size()
    assert per_hour.to_numpy().tolist() == hourly["jobs"].tolist()


# ---------------------------------------------------------------- calibration

def test_full_scale_trace_passes_every_calibration_check(full_frames):
    trace = trace_from_frames(*full_frames, name="synthetic")
    report = calibration_report(trace_stats(trace))
    assert len(report) >= 80
    failed = [(r["name"], r["target"], r["actual"]) for r in report if r["ok"] is not True]
    assert not failed, failed


def test_tenth_scale_trace_passes_the_scale_aware_checks():
    trace = trace_from_frames(*synthesize(seed=4, scale=0.1))
    stats = trace_stats(trace)
    report = calibration_report(stats, scale=0.1)
    failed = [(r["name"], r["target"], r["actual"]) for r in report if r["ok"] is False]
    assert not failed, failed
    assert {r["name"] for r in report if r["ok"] is None} >= {"organizations", "worker_num_max"}
    # each pool keeps its real requested-GPU pressure when jobs and nodes shrink together
    by_pool = stats["requested_gpus_over_capacity_hourly"]["by_pool"]
    assert 1.1 < by_pool["A10"]["mean"] < 1.6
    assert 0.6 < by_pool["A100-SXM4-80GB"]["mean"] < 1.0


def test_pool_pressure_matches_the_real_pools(full_frames):
    stats = trace_stats(trace_from_frames(*full_frames))
    real = pd.read_csv(AGG / "tables_extra" / "hourly_concurrency_top_models.csv")
    caps = full_frames[0].groupby("gpu_model")["gpu_capacity_num"].sum()
    for pool, s in stats["requested_gpus_over_capacity_hourly"]["by_pool"].items():
        want = float((real[pool] / caps[pool]).mean())
        assert abs(s["mean"] - want) < 0.1 * want, (pool, s["mean"], want)


# ---------------------------------------------------------------- scaling, pools, windows

def test_reduced_scale_trace_is_well_formed(small_frames):
    nodes, jobs = small_frames
    real = pd.read_csv(alibaba_dir() / "node_info_df.csv")
    for model, n_real in real["gpu_model"].value_counts().items():
        n = int((nodes["gpu_model"] == model).sum())
        assert n == max(1, round(0.05 * n_real)), model
    assert nodes["node_name"].is_unique
    assert abs(len(jobs) - 0.05 * 466_867) < 5 * math.sqrt(0.05 * 466_867)
    trace = trace_from_frames(nodes, jobs)  # validates ids, pools and node sizes
    assert len(trace.jobs) == len(jobs) and trace.jobs["resident"].sum() == (jobs["submit_time"] == 0).sum()
    assert set(trace.jobs["pool"]) <= set(trace.nodes["pool"])


def test_scaled_gangs_are_narrowed_to_a_share_of_their_pool():
    nodes, jobs = synthesize(seed=7, scale=0.05)
    pool_gpus = nodes.groupby("gpu_model")["gpu_capacity_num"].sum()
    g = jobs["gpu_request"].to_numpy()
    gang = np.where(g < 1, 1, g) * jobs["worker_num"].to_numpy()
    share = gang / jobs["gpu_model"].map(pool_gpus).to_numpy()
    multi = jobs["worker_num"].to_numpy() > 1
    assert share[multi].max() <= 0.25 + 0.75 * 0.05 + 1e-9
    assert multi.sum() > 0.05 * len(jobs)  # gangs are narrowed, not removed


def test_small_setup_carries_in_only_what_fits():
    nodes, jobs = synthesize(seed=0, setup="small")
    start = to_seconds(SETUPS["small"].start, "start")
    carried = jobs[jobs["submit_time"] == start]
    assert len(carried) > 0 and (carried["job_type"] == "HP").all()
    gpus = (carried["gpu_request"] * carried["worker_num"]).groupby(carried["gpu_model"]).sum()
    cap = nodes.groupby("gpu_model")["gpu_capacity_num"].sum()
    assert (gpus <= cap[gpus.index]).all()
    assert (jobs["submit_time"] >= start).all() and not (jobs["submit_time"] == 0).any()


def test_pools_and_window_cut():
    nodes, jobs = synthesize(seed=2, scale=0.05, pools=["H800", "A10"], start="2024-08-01",
                             end=13_219_200 + 7 * DAY)
    assert set(nodes["gpu_model"]) == set(jobs["gpu_model"]) == {"H800", "A10"}
    lo, hi = to_seconds("2024-08-01", "start"), 13_219_200 + 7 * DAY
    assert lo == 13_219_200
    s = jobs["submit_time"]
    assert (((s >= lo) & (s < hi)) | (s == 0)).all()
    assert (s == 0).sum() > 0 and ((s >= lo) & (s < hi)).sum() > 0


@given(st.floats(min_value=0.002, max_value=1.0), st.integers(0, 2**31))
@settings(max_examples=15, deadline=None)
def test_scaled_cluster_keeps_every_model(scale, seed):
    real = pd.read_csv(alibaba_dir() / "node_info_df.csv")
    nodes = scale_nodes(real, scale, np.random.default_rng(seed))
    counts = nodes["gpu_model"].value_counts()
    for model, n_real in real["gpu_model"].value_counts().items():
        assert counts[model] == max(1, round(scale * n_real))
    assert nodes["node_name"].is_unique and set(nodes["node_name"]) <= set(real["node_name"])


# ---------------------------------------------------------------- setups and files

def test_builtin_setups():
    small = builtin_trace("small")
    assert builtin_trace("small") is small  # cached per process
    assert set(small.pools) == {"A100-SXM4-80GB", "GPU-series-1"} and 40 <= len(small.nodes) <= 80
    jobs = small.jobs
    lp = jobs[jobs["cls"] == "LP"]
    assert len(lp) > 20 and lp["submit"].min() >= to_seconds(SETUPS["small"].lp_from, "lp_from")
    span = jobs["submit"].max() - jobs["submit"].min()
    assert 14 * DAY <= span <= 21 * DAY
    assert len(jobs) < 3000
    with pytest.raises(KeyError, match="built-in"):
        builtin_trace("no-such-trace")


def test_paper_a100_setup_has_the_papers_cluster():
    nodes, jobs = synthesize(seed=0, setup="paper-a100")
    assert len(nodes) == 287 and nodes["gpu_capacity_num"].sum() == 2296
    assert set(jobs["gpu_model"]) == {"A100-SXM4-80GB"}
    # HP volume scaled by 2296/3456 of the real 169,020 A100 jobs (≈ 90 % HP)
    assert 0.55 * 169_020 < len(jobs) < 0.75 * 169_020


def test_synth_to_dir_is_byte_identical_and_atomic(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    counts = synth_to_dir(a, seed=3, scale=0.02)
    assert synth_to_dir(b, seed=3, scale=0.02) == counts
    for name in ("node_info_df.csv", "job_info_df.csv"):
        assert hashlib.sha256((a / name).read_bytes()).digest() == hashlib.sha256((b / name).read_bytes()).digest()
    assert sorted(p.name for p in a.iterdir()) == ["job_info_df.csv", "node_info_df.csv"]  # no temp files
    jobs = pd.read_csv(a / "job_info_df.csv")
    assert len(jobs) == counts[1] and list(jobs.columns) == RAW_JOB_COLUMNS


def test_cli_synth_and_errors(tmp_path: Path, capsys):
    out = tmp_path / "t"
    assert cli.main(["trace", "synth", "--out", str(out), "--scale", "0.01", "--seed", "1"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert cli.main(["trace", "stats", str(out)]) in (0, 1)
    assert "checks within tolerance" in capsys.readouterr().out
    for bad in (["--scale", "1.5"], ["--pools", "A10,B200"], ["--start", "2024-02-30"],
                ["--setup", "nope"], ["--start", "2024-05-01", "--end", "2024-04-01"]):
        assert cli.main(["trace", "synth", "--out", str(out), *bad]) == 2
        assert capsys.readouterr().err.startswith("gfs-opt: error:")


def test_bad_arguments_raise_gfs_errors():
    with pytest.raises(GfsError, match="scale"):
        synthesize(scale=0)
    with pytest.raises(GfsError, match="pool"):
        synthesize(scale=0.01, pools=["V100"])
    with pytest.raises(GfsError, match="setup"):
        synthesize(setup="medium")


# ---------------------------------------------------------------- building blocks

@given(st.lists(st.floats(min_value=0.0, max_value=1e6), min_size=1, max_size=30)
       .filter(lambda w: sum(w) > 0), st.integers(0, 10_000))
def test_exact_counts_sum_and_stay_within_one_of_the_quota(weights, n):
    counts = exact_counts(np.array(weights), n)
    quota = n * np.array(weights) / sum(weights)
    assert counts.sum() == n and (counts >= 0).all()
    assert np.all(np.abs(counts - quota) < 1 + 1e-9)


@given(st.lists(st.tuples(st.integers(0, 30), st.floats(min_value=0.1, max_value=500)),
                min_size=1, max_size=200), st.integers(0, 2**31))
@settings(max_examples=60, deadline=None)
def test_deal_to_hours_is_a_permutation_keeping_slots(slots, seed):
    slot_hour = np.array([h for h, _ in slots])
    gw = np.array([x for _, x in slots])
    demand = np.zeros(31)
    demand[7] = 1.0  # all the real demand sits in hour 7
    order = deal_to_hours(slot_hour, gw, demand, np.random.default_rng(seed))
    assert sorted(order.tolist()) == list(range(len(slots)))
    if (gw > 8).any() and (slot_hour == 7).any():
        # a request of the largest size is dealt to the hour holding the demand
        assert gw[order[slot_hour == 7]].max() == gw.max()


@given(st.floats(min_value=0.001, max_value=0.999))
def test_loglinear_quantile_inverts_the_cdf(u):
    xs = np.array([1.0, 60.0, 600.0, 3600.0, 1e6])
    cdf = np.array([0.0, 0.1, 0.4, 0.8, 1.0])
    x = loglinear_quantile(np.array([u]), xs, cdf)[0]
    assert math.isclose(float(loglinear_cdf(x, xs, cdf)), u, abs_tol=1e-9)


@given(st.integers(0, 10**8))
def test_to_seconds_reads_numbers_and_dates(sec):
    assert to_seconds(str(sec), "start") == sec
    day = pd.Timestamp("2024-03-01") + pd.Timedelta(days=sec % 200)
    assert to_seconds(day.strftime("%Y-%m-%d"), "start") == (sec % 200) * DAY
