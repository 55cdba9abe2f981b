"""Hourly-max demand series: incremental builder vs brute force, trace extraction, data source."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gfs_opt.errors import GfsError
from gfs_opt.forecast.series import HourlyMaxSeries, series_from_trace
from gfs_opt.forecast.sources import (
    drop_trailing_collapse,
    load_alibaba_hourly,
    load_history,
)
from gfs_opt.traces.base import ALIBABA_ORIGIN, Trace


def make_trace(rows: list[tuple[str, str, str, int, int, float, float]]) -> Trace:
    """rows: (org, pool, cls, g milli, workers, submit s, duration s)."""
    jobs = pd.DataFrame(rows, columns=["org", "pool", "cls", "g", "workers", "submit", "duration"])
    jobs.insert(0, "job_id", np.arange(len(jobs)))
    jobs.insert(1, "name", [f"j{i}" for i in range(len(jobs))])
    jobs["cpu"] = 0.0
    jobs["guarantee_h"] = 1.0
    jobs["resident"] = False
    nodes = pd.DataFrame({"node_name": ["n0"], "pool": ["A"], "gpus": [8], "cpus": [64]})
    return Trace(nodes, jobs)


# ---- incremental builder ---------------------------------------------------------------------------
def test_hourly_max_and_absent_series_are_zero_after_appearing() -> None:
    s = HourlyMaxSeries()
    s.observe(0, {("A", "x"): 2.0})
    s.observe(60, {("A", "x"): 5.0})
    s.observe(3599, {("A", "x"): 1.0})
    s.observe(3600, {})                       # hour 1: nobody
    s.observe(2 * 3600 + 60, {("A", "y"): 3.5, ("A", "x"): 0.5})
    h = s.history()
    got = {(r.series, int((r.ds - ALIBABA_ORIGIN) / pd.Timedelta(hours=1))): r.y
           for r in h.itertuples()}
    assert got == {("A|x", 0): 5.0, ("A|x", 1): 0.0, ("A|x", 2): 0.5, ("A|y", 2): 3.5}
    assert list(h.columns) == ["ds", "series", "y"]
    # complete hours only, and a lower bound
    assert set(s.history(until=2 * 3600 + 120)["ds"]) == {ALIBABA_ORIGIN,
                                                           ALIBABA_ORIGIN + pd.Timedelta(hours=1)}
    assert len(s.history(since=3600)) == 3
    assert s.peaks() == {"A|x": 5.0, "A|y": 3.5}
    with pytest.raises(GfsError, match="backwards"):
        s.observe(0, {("A", "x"): 1.0})


def test_string_and_tuple_keys_share_a_series() -> None:
    s = HourlyMaxSeries(origin="2024-01-01")
    s.observe(10, {"A|x": 1.0})
    s.observe(20, {("A", "x"): 4.0})
    h = s.history()
    assert len(h) == 1 and h["y"].iloc[0] == 4.0
    assert h["ds"].iloc[0] == pd.Timestamp("2024-01-01")


def test_empty_builder_gives_empty_history() -> None:
    h = HourlyMaxSeries().history()
    assert h.empty and list(h.columns) == ["ds", "series", "y"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5 * 3600), st.sampled_from(["a", "b", "c"]),
                          st.floats(0, 100)), min_size=1, max_size=80))
def test_builder_matches_brute_force(samples: list[tuple[int, str, float]]) -> None:
    samples = sorted(samples, key=lambda x: x[0])
    s = HourlyMaxSeries()
    for t in sorted({t for t, _, _ in samples}):
        usage: dict[str, float] = {}
        for tt, k, v in samples:
            if tt == t:  # one mapping per call: a key appears once
                usage[k] = max(usage.get(k, 0.0), v)
        s.observe(t, usage)
    df = pd.DataFrame(samples, columns=["t", "series", "y"])
    df["hour"] = df["t"] // 3600
    last = int(df["hour"].max())
    expected = {}
    for key, g in df.groupby("series"):
        for hour in range(int(g["hour"].min()), last + 1):
            expected[(key, hour)] = float(g.loc[g["hour"] == hour, "y"].max()) if (
                g["hour"] == hour).any() else 0.0
    h = s.history()
    got = {(r.series, int((r.ds - ALIBABA_ORIGIN) / pd.Timedelta(hours=1))): r.y
           for r in h.itertuples()}
    assert got == expected


# ---- from a trace ---------------------------------------------------------------------------------
def test_series_from_trace_matches_minute_sampling() -> None:
    rows = [("x", "A", "HP", 1000, 2, 0.0, 5400.0),     # 2 GPUs over hours 0-1
            ("x", "A", "HP", 500, 1, 1800.0, 30.0),     # 0.5 GPU, seen by the 1800 s sample
            ("x", "A", "HP", 4000, 1, 1810.0, 20.0),    # between samples: never seen
            ("y", "A", "HP", 8000, 1, 7300.0, 600.0),   # appears in hour 2
            ("y", "A", "LP", 8000, 4, 0.0, 9000.0),     # LP: ignored
            ("z", "B", "HP", 1000, 1, 10_680.0, 10.0)]  # last submit → hour 2 is the end
    df = series_from_trace(make_trace(rows))
    got = {(r.series, int((r.ds - ALIBABA_ORIGIN) / pd.Timedelta(hours=1))): r.y
           for r in df.itertuples()}
    assert got == {("A|x", 0): 2.5, ("A|x", 1): 2.0, ("A|x", 2): 0.0,
                   ("A|y", 2): 8.0, ("B|z", 2): 1.0}
    # the incremental builder fed per minute by the same jobs agrees
    trace = make_trace(rows)
    hp = trace.jobs[trace.jobs["cls"] == "HP"]
    s = HourlyMaxSeries()
    for t in range(0, 3 * 3600, 60):
        run = hp[(hp["submit"] <= t) & (t < hp["submit"] + hp["duration"])]
        usage = (run["g"] * run["workers"] / 1000).groupby([run["pool"], run["org"]]).sum()
        s.observe(t, {k: float(v) for k, v in usage.items()})
    inc = s.history()
    merged = df.merge(inc, on=["ds", "series"], suffixes=("", "_inc"))
    assert len(merged) == len(df) == len(inc)
    np.testing.assert_allclose(merged["y"], merged["y_inc"])


def test_series_from_trace_rejects_bad_input() -> None:
    trace = make_trace([("x", "A", "LP", 1000, 1, 0.0, 10.0)])
    with pytest.raises(GfsError, match="no HP jobs"):
        series_from_trace(trace)
    with pytest.raises(GfsError, match="divide one hour"):
        series_from_trace(trace, freq_s=7)


def test_series_from_trace_is_vectorised() -> None:
    rng = np.random.default_rng(0)
    n = 60_000
    rows = list(zip(rng.integers(0, 40, n).astype(str), rng.choice(["A", "B", "C"], n),
                    ["HP"] * n, rng.choice([500, 1000, 8000], n), rng.integers(1, 4, n),
                    rng.uniform(0, 30 * 86400, n), rng.exponential(3600, n), strict=True))
    trace = make_trace(rows)
    t0 = time.perf_counter()
    df = series_from_trace(trace)
    assert time.perf_counter() - t0 < 10.0  # 120 series × 43k samples; ~1 s on one core
    assert df["series"].nunique() == 120


# ---- sources ---------------------------------------------------------------------------------------
def test_drop_trailing_collapse() -> None:
    wide = pd.DataFrame({"a": [10.0] * 30 + [0.5, 0.0], "b": [5.0] * 30 + [0.0, 0.0]})
    assert len(drop_trailing_collapse(wide)) == 30
    assert len(drop_trailing_collapse(wide.iloc[:30])) == 30


def test_load_history_csv_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    pd.DataFrame({"ds": ["2024-03-01 00:00", "2024-03-01 01:00"], "series": ["a", "a"],
                  "y": [1, 2]}).to_csv(path, index=False)
    df, text = load_history(str(path))
    assert len(df) == 2 and "1 series" in text
    with pytest.raises(GfsError):
        load_history(str(tmp_path / "missing.csv"))


def test_alibaba_hourly_source() -> None:
    df = load_alibaba_hourly()
    assert df["series"].nunique() == 6
    assert df["ds"].nunique() == 4416          # 4,419 rows minus the 3-hour recording collapse
    assert df["ds"].min() == ALIBABA_ORIGIN
    assert (df["y"] >= 0).all()
    a100 = df[df["series"] == "A100-SXM4-80GB"].sort_values("ds")
    assert a100["y"].iloc[0] == pytest.approx(2116.5)
