"""Rolling backtest protocol and the `gfs-opt forecast` command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gfs_opt import cli
from gfs_opt.errors import GfsError
from gfs_opt.forecast.backtest import (
    LEAD_COLUMNS,
    METRIC_COLUMNS,
    calibration_report,
    eligible_series,
    rolling_backtest,
    run_backtest,
)
from gfs_opt.forecast.sources import load_alibaba_hourly

T0 = pd.Timestamp("2024-03-01")
HOUR = pd.Timedelta(hours=1)


def weekly_history(weeks: int = 4, noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(weeks * 168)
    # whole GPUs, so that the series repeats exactly every week (no float residue)
    base = np.round(100 + 30 * np.sin(2 * np.pi * t / 168) + 10 * np.sin(2 * np.pi * t / 24))
    return pd.concat([pd.DataFrame({"ds": T0 + pd.to_timedelta(t, unit="h"), "series": s,
                                    "y": base * k + rng.normal(0, noise, len(t))})
                      for s, k in (("a", 1.0), ("b", 0.5))], ignore_index=True)


def test_week_peak_is_exact_on_a_weekly_series_and_protocol_counts() -> None:
    hist = weekly_history()
    res = run_backtest(hist, ["week-peak", "seasonal-naive"], horizon=4, quantile=0.9, weeks=1)
    m = res.metrics.set_index(["model", "series"])
    assert list(res.metrics.columns) == METRIC_COLUMNS
    assert m.loc[("week-peak", "a"), "mae"] == pytest.approx(0.0, abs=1e-9)
    assert m.loc[("week-peak", "a"), "coverage"] == 1.0
    assert m.loc[("seasonal-naive", "a"), "mae"] > 1.0
    f = res.forecasts
    # 7 daily refits × 24 hourly origins × 4 steps, minus targets past the data's end (1+2+3)
    assert len(f[(f["model"] == "week-peak") & (f["series"] == "a")]) == 7 * 24 * 4 - 6
    # hourly updates: every forecast starts right after the latest observed hour
    assert (f["lead"] == f["h"]).all() and (f["ds"] == f["origin"] + (f["h"] - 1) * HOUR).all()
    assert (f["since_fit"] == (f["origin"] - f["origin"].dt.normalize()) // HOUR + f["h"]).all()
    assert set(res.summary()["model"]) == {"week-peak", "seasonal-naive"}
    assert res.timings["week-peak"]["update_s"] > 0
    lm = res.lead_metrics
    assert list(lm.columns) == LEAD_COLUMNS and set(lm["h"]) == {1, 2, 3, 4}
    assert (lm["coverage_lt"] <= lm["coverage"]).all()
    # week-peak is exact here: every quantile ties its target (y = q), P(y < q) = 0
    wp = lm[lm["model"] == "week-peak"]
    assert (wp["coverage"] == 1.0).all() and (wp["coverage_lt"] == 0.0).all()


def test_daily_path_protocol_without_updates() -> None:
    hist = weekly_history()
    res = run_backtest(hist, ["week-peak"], horizon=4, weeks=1, update="none")
    f = res.forecasts
    assert len(f[f["series"] == "a"]) == 7 * 24 * 4 - 6
    # the path computed at 00:00 is sliced: leads run up to 24 + 4 − 1 hours after the refit
    assert f["lead"].max() == 24 + 4 - 1 and f["lead"].min() == 1
    assert (f["lead"] == (f["origin"] - f["origin"].dt.normalize()) // HOUR + f["h"]).all()
    assert res.timings["week-peak"]["update_s"] == 0


def ar_history(weeks: int = 3, phi: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Daily wave plus strongly autocorrelated noise: the latest hour matters."""
    rng = np.random.default_rng(seed)
    t = np.arange(weeks * 168)
    noise = np.zeros(len(t))
    for i in range(1, len(t)):
        noise[i] = phi * noise[i - 1] + rng.normal(0, 3.0)
    y = np.maximum(100 + 10 * np.sin(2 * np.pi * t / 24) + noise, 0)
    return pd.DataFrame({"ds": T0 + pd.to_timedelta(t, unit="h"), "series": "a", "y": y})


def test_hourly_update_uses_the_latest_hour() -> None:
    hist = ar_history()
    path = run_backtest(hist, ["ets"], horizon=4, weeks=1, update="none")
    upd = run_backtest(hist, ["ets"], horizon=4, weeks=1, update="hourly")
    refit = run_backtest(hist, ["ets"], horizon=4, weeks=1, refit="hourly")
    # conditioning on the newest hour: shorter leads, smaller errors; as good as refitting hourly
    assert upd.metrics["mae"].iloc[0] < 0.7 * path.metrics["mae"].iloc[0]
    assert upd.metrics["mae"].iloc[0] == pytest.approx(refit.metrics["mae"].iloc[0], rel=0.2)
    # the spread grows with the lead, and the 0.9-quantile covers at about its level per lead
    lm = upd.lead_metrics.set_index("h")
    assert lm["coverage"].min() >= 0.8 and lm["coverage"].max() <= 0.98
    std = upd.forecasts.groupby("h")["std"].mean()
    assert std.is_monotonic_increasing and std[4] > 1.5 * std[1]


def test_eval_window_and_calibration_report() -> None:
    hist = weekly_history(weeks=3)
    res = run_backtest(hist, ["ets"], horizon=2, start="2024-03-15", end="2024-03-16")
    assert res.forecasts["origin"].min() == pd.Timestamp("2024-03-15")
    assert res.forecasts["ds"].max() == pd.Timestamp("2024-03-15 23:00")
    lm = pd.DataFrame({"model": "m", "series": ["a", "a", "b", "b", "c", "c"],
                       "h": [1, 2, 1, 2, 1, 2], "n": 100,
                       "coverage": [0.9, 0.96, 0.99, 0.99, 0.80, 0.84],
                       "coverage_lt": [0.9, 0.96, 0.10, 0.10, 0.80, 0.84]})
    rep = calibration_report(lm).set_index("h")
    # b ties its quantile (e.g. y = q = 0): [0.10, 0.99] meets the band, plain coverage does not
    assert rep.loc["1", "in_band"] == 2 and rep.loc["1", "in_band_plain"] == 1
    assert rep.loc["2", "in_band"] == 1 and rep.loc["all", "in_band"] == 1
    only_a = calibration_report(lm, pd.Series({"a": True, "b": False, "c": False}))
    assert (only_a["series"] == 1).all()


def test_eligible_series_rule() -> None:
    ds = T0 + pd.to_timedelta(np.arange(48), unit="h")
    hist = pd.concat([
        pd.DataFrame({"ds": ds, "series": "busy", "y": 5.0}),
        pd.DataFrame({"ds": ds, "series": "idle", "y": np.r_[np.ones(24), np.zeros(24)]}),
        pd.DataFrame({"ds": ds[30:], "series": "late", "y": 3.0}),
        pd.DataFrame({"ds": ds, "series": "half", "y": np.r_[np.ones(24), np.tile([0.0, 2.0], 12)]}),
    ])
    el = eligible_series(hist, T0 + pd.Timedelta(hours=24))
    assert el.to_dict() == {"busy": True, "half": True, "idle": False, "late": False}


def test_backtest_rejects_bad_arguments() -> None:
    hist = weekly_history(weeks=2)
    with pytest.raises(GfsError, match="no training history"):
        rolling_backtest(hist, ["ets"], weeks=3)
    with pytest.raises(GfsError, match="refit"):
        rolling_backtest(hist, ["ets"], weeks=1, refit="weekly")
    with pytest.raises(GfsError, match="quantile"):
        rolling_backtest(hist, ["ets"], weeks=1, quantile=1.5)
    with pytest.raises(GfsError, match="unknown forecaster"):
        rolling_backtest(hist, ["magic"], weeks=1)
    with pytest.raises(GfsError, match="horizon"):
        rolling_backtest(hist, ["ets"], weeks=1, horizon=0)
    with pytest.raises(GfsError, match="update must be one of"):
        rolling_backtest(hist, ["ets"], weeks=1, update="daily")
    with pytest.raises(GfsError, match="evaluation window is empty"):
        run_backtest(hist, ["ets"], start="2024-03-10", end="2024-03-09")
    with pytest.raises(GfsError, match="cannot read"):
        run_backtest(hist, ["ets"], start="someday")


def test_cli_backtest_writes_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "hist.csv"
    weekly_history(weeks=3, noise=1.0).to_csv(csv, index=False)
    out = tmp_path / "bt"
    rc = cli.main(["forecast", "backtest", "--data", str(csv), "--models", "week-peak,ets",
                   "--weeks", "1", "--out", str(out), "--no-progress", "--save-forecasts"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "week-peak" in text and "coverage per series" in text
    assert "update hourly" in text and "calibration per step h" in text
    for name in ("metrics.csv", "lead_metrics.csv", "calibration.csv", "summary.csv", "bands.png",
                 "forecasts.csv.gz"):
        assert (out / name).stat().st_size > 0
    metrics = pd.read_csv(out / "metrics.csv")
    assert len(metrics) == 4 and list(metrics.columns) == METRIC_COLUMNS
    series_csv = tmp_path / "series.csv"
    assert cli.main(["forecast", "series", "--data", str(csv), "--out", str(series_csv)]) == 0
    assert len(pd.read_csv(series_csv)) == 3 * 168 * 2


@pytest.mark.parametrize("argv, message", [
    (["--data", "/nonexistent/x.csv"], "no such file"),
    (["--data", "{csv}", "--models", "magic"], "unknown forecaster"),
    (["--data", "{csv}", "--weeks", "9"], "no training history"),
    (["--data", "{csv}", "--series", "zz"], "unknown series"),
    (["--data", "{bad}"], "lacks column"),
    (["--data", "{csv}", "--update", "daily"], "--update: invalid choice"),
    (["--data", "{csv}", "--eval-start", "never"], "cannot read"),
    (["--data", "{csv}", "--min-active", "2"], "--min-active"),
])
def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 argv: list[str], message: str) -> None:
    csv = tmp_path / "hist.csv"
    weekly_history(weeks=2).to_csv(csv, index=False)
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"ds": ["2024-03-01"], "series": ["a"], "value": [1]}).to_csv(bad, index=False)
    argv = [a.format(csv=csv, bad=bad) for a in argv]
    rc = cli.main(["forecast", "backtest", *argv, "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_real_data_targets_prophet_vs_week_peak() -> None:
    """GDE targets on the real per-GPU-model hourly demand, August 2024, daily fit + hourly
    update (≈ 1 min on a quiet machine: 6 pools × 31 Prophet fits, 744 hourly updates)."""
    res = run_backtest(load_alibaba_hourly(), ["prophet", "week-peak"], horizon=4, quantile=0.9,
                       start="2024-08-01", end="2024-09-01")
    m = res.metrics.pivot(index="series", columns="model", values=["pinball", "coverage"])
    assert 0.85 <= m["coverage"]["prophet"].mean() <= 0.95
    assert (m["pinball"]["prophet"] < m["pinball"]["week-peak"]).sum() >= 4


@pytest.mark.slow
def test_real_data_per_lead_calibration_ets() -> None:
    """Issue 10's calibration target with the fast model on the 6 real pools (≈ 1 min)."""
    res = run_backtest(load_alibaba_hourly(), ["ets"], horizon=4, quantile=0.9,
                       start="2024-08-01", end="2024-09-01")
    rep = calibration_report(res.lead_metrics).set_index("h")
    assert (rep.loc[["1", "2", "3", "4"], "share"] >= 0.75).all()
