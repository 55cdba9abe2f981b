"""Rolling backtest protocol and the `gfs-opt forecast` command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gfs_opt import cli
from gfs_opt.errors import GfsError
from gfs_opt.forecast.backtest import METRIC_COLUMNS, rolling_backtest, run_backtest
from gfs_opt.forecast.sources import load_alibaba_hourly

T0 = pd.Timestamp("2024-03-01")


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
    assert f["lead"].max() == 24 + 4 - 1 and f["lead"].min() == 1
    assert (f["lead"] == (f["origin"] - f["origin"].dt.normalize()) // pd.Timedelta(hours=1)
            + f["h"]).all()
    assert set(res.summary()["model"]) == {"week-peak", "seasonal-naive"}


def test_hourly_refit_uses_the_latest_data() -> None:
    hist = weekly_history(weeks=3, noise=2.0)
    daily = rolling_backtest(hist, ["ets"], horizon=2, weeks=0.5, refit="daily")
    hourly = rolling_backtest(hist, ["ets"], horizon=2, weeks=0.5, refit="hourly")
    # refitting every hour sees the newest hour: shorter leads, smaller errors
    assert hourly["mae"].mean() < daily["mae"].mean()


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


def test_cli_backtest_writes_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "hist.csv"
    weekly_history(weeks=3, noise=1.0).to_csv(csv, index=False)
    out = tmp_path / "bt"
    rc = cli.main(["forecast", "backtest", "--data", str(csv), "--models", "week-peak,ets",
                   "--weeks", "1", "--out", str(out), "--no-progress", "--save-forecasts"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "week-peak" in text and "coverage per series" in text
    for name in ("metrics.csv", "summary.csv", "bands.png", "forecasts.csv.gz"):
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
    """GDE targets on the real per-GPU-model hourly demand (≈ 2 min: 6 pools × 56 daily fits)."""
    res = run_backtest(load_alibaba_hourly(), ["prophet", "week-peak"], horizon=4, quantile=0.9,
                       weeks=8)
    m = res.metrics.pivot(index="series", columns="model", values=["pinball", "coverage"])
    assert 0.85 <= m["coverage"]["prophet"].mean() <= 0.95
    assert (m["pinball"]["prophet"] < m["pinball"]["week-peak"]).sum() >= 4
