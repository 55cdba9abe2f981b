"""Pool aggregation and the simulator-facing ForecastProvider."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from gfs_opt.errors import GfsError
from gfs_opt.forecast import ForecastProvider, make_forecaster, pool_forecasts
from gfs_opt.model import PoolForecast

DAY = 86_400


def pred_frame(means: dict[str, list[float]], stds: dict[str, list[float]]) -> pd.DataFrame:
    rows = [{"series": s, "h": h + 1, "mean": m, "std": stds[s][h]}
            for s, ms in means.items() for h, m in enumerate(ms)]
    return pd.DataFrame(rows)


# ---- aggregation ---------------------------------------------------------------------------------
def test_independent_sums_means_and_variances() -> None:
    pred = pred_frame({"A|x": [1, 2], "A|y": [3, 4], "B|z": [5, 6]},
                      {"A|x": [3, 1], "A|y": [4, 1], "B|z": [2, 2]})
    out = pool_forecasts(pred)
    assert set(out) == {"A", "B"}
    np.testing.assert_allclose(out["A"].mean, [4, 6])
    np.testing.assert_allclose(out["A"].std, [5, np.sqrt(2)])
    np.testing.assert_allclose(out["B"].std, [2, 2])
    assert isinstance(out["A"], PoolForecast) and out["A"].samples is None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 500), st.floats(0, 100)), min_size=1, max_size=8),
       st.floats(0.55, 0.99))
def test_sum_quantiles_reproduces_the_sum_of_tenant_quantiles(
        tenants: list[tuple[float, float]], rho: float) -> None:
    pred = pd.DataFrame({"series": [f"P|o{i}" for i in range(len(tenants))], "h": 1,
                         "mean": [m for m, _ in tenants], "std": [s for _, s in tenants]})
    z = norm.ppf(rho)
    q = np.maximum(pred["mean"] + z * pred["std"], 0)
    fc = pool_forecasts(pred, method="sum-quantiles", rho=rho)["P"]
    assert fc.mean[0] + z * fc.std[0] == pytest.approx(q.sum(), rel=1e-9, abs=1e-9)
    indep = pool_forecasts(pred, method="independent", rho=rho)["P"]
    assert fc.std[0] >= indep.std[0] - 1e-9  # summing quantiles is the conservative choice


def test_sum_quantiles_prefers_the_models_quantile_column_and_handles_median() -> None:
    pred = pred_frame({"A|x": [10], "A|y": [20]}, {"A|x": [1], "A|y": [2]})
    pred["q0.9"] = [15.0, 30.0]
    fc = pool_forecasts(pred, {"A|x": "A", "A|y": "A"}, method="sum-quantiles", rho=0.9)["A"]
    assert fc.mean[0] + norm.ppf(0.9) * fc.std[0] == pytest.approx(45.0)
    med = pool_forecasts(pred, method="sum-quantiles", rho=0.5)["A"]
    assert med.std[0] == pytest.approx(3.0)


def test_samples_sum_per_pool_and_comonotone_sorting() -> None:
    pred = pred_frame({"A|x": [0, 0], "A|y": [0, 0]}, {"A|x": [1, 1], "A|y": [1, 1]})
    a = np.array([[1.0, 5.0], [3.0, 2.0]])
    b = np.array([[4.0, 1.0], [2.0, 6.0]])
    ind = pool_forecasts(pred, samples={"A|x": a, "A|y": b})["A"].samples
    np.testing.assert_allclose(ind, a + b)
    com = pool_forecasts(pred, method="sum-quantiles", samples={"A|x": a, "A|y": b})["A"].samples
    np.testing.assert_allclose(com, np.sort(a, axis=0) + np.sort(b, axis=0))
    with pytest.raises(GfsError, match="shape"):
        pool_forecasts(pred, samples={"A|x": a[:, :1]})


def test_aggregation_rejects_bad_input() -> None:
    pred = pred_frame({"nopool": [1]}, {"nopool": [1]})
    with pytest.raises(GfsError, match="has no pool"):
        pool_forecasts(pred)
    assert pool_forecasts(pred, {"nopool": "P"})["P"].mean[0] == 1
    with pytest.raises(GfsError, match="unknown pool aggregation"):
        pool_forecasts(pred, {"nopool": "P"}, method="max")
    with pytest.raises(GfsError, match="lacks column"):
        pool_forecasts(pred.drop(columns="std"), {"nopool": "P"})
    assert pool_forecasts(pred.iloc[:0]) == {}


# ---- provider ---------------------------------------------------------------------------------------
def demand(hour: int, org: str) -> float:
    """Hourly pattern per tenant: A|x daily wave, A|y constant, B|z weekday/weekend."""
    if org == "x":
        return 20 + 10 * np.sin(2 * np.pi * hour / 24)
    if org == "y":
        return 5.0
    return 30.0 if (hour // 24) % 7 < 5 else 10.0


def feed(provider: ForecastProvider, start_h: int, end_h: int, refit: bool = True) -> None:
    """Feed per-minute samples (constant within each hour) and refit at every midnight."""
    for hour in range(start_h, end_h):
        t_hour = hour * 3600
        if refit and hour % 24 == 0:
            provider.refit(t_hour)
        usage = {("A", "x"): demand(hour, "x"), ("A", "y"): demand(hour, "y"),
                 ("B", "z"): demand(hour, "z")}
        for minute in range(0, 60, 10):
            provider.observe(t_hour + minute * 60, usage)


def test_provider_forecasts_from_the_latest_completed_hour() -> None:
    t = 15 * DAY
    p = ForecastProvider("week-peak", horizon_h=4, rho=0.9)
    feed(p, 0, 15 * 24, refit=False)
    assert p.refit(t)
    feed(p, 15 * 24, 15 * 24 + 5, refit=False)
    now = p.pool_forecasts(t + 5 * 3600 + 120)      # 05:02 → hours 5..8
    assert set(now) == {"A", "B"}
    expected = [demand(15 * 24 + 5 + k - 168, "x") + demand(15 * 24 + 5 + k - 168, "y")
                for k in range(4)]
    np.testing.assert_allclose(now["A"].mean, expected)
    assert now["A"].std.shape == (4,) and (now["A"].std >= 0).all()
    assert p.pool_forecasts(t + 5 * 3600 + 1000) is now   # cached within the hour
    assert len(p.update_log) == 1 and p.update_log[0]["hours"] == 5
    # no refit for two days: still forecast from the latest hour, by the model's rule
    feed(p, 15 * 24 + 5, 17 * 24 + 3, refit=False)
    late = p.pool_forecasts(17 * DAY + 3 * 3600)
    hours = 17 * 24 + 3 + np.arange(4) - 168
    np.testing.assert_allclose(late["A"].mean, [demand(h, "x") + demand(h, "y") for h in hours])
    np.testing.assert_allclose(late["B"].mean, [demand(h, "z") for h in hours])
    assert len(p.refit_log) == 1


def step_demand(hours: np.ndarray, seed: int, level: float) -> np.ndarray:
    """Job-like demand: a level that holds for a few hours, then jumps (persistent, like HP use)."""
    rng = np.random.default_rng(seed)
    y = np.empty(len(hours))
    cur = level
    for i in range(len(hours)):
        if rng.random() < 0.15:
            cur = max(0.0, level + rng.normal(0, 0.3 * level))
        y[i] = cur
    return y


def drain_provider(model: str | object, drop_hour: int, days: int = 10) -> ForecastProvider:
    p = ForecastProvider(model, horizon_h=4)   # type: ignore[arg-type]
    hours = np.arange(days * 24 + 12)
    ya, yb = step_demand(hours, 1, 100.0), step_demand(hours, 2, 60.0)
    ya[hours >= drop_hour] = 0.0
    yb[hours >= drop_hour] = 0.0
    for h in hours:
        if h == (days - 1) * 24:
            p.refit(h * 3600.0)
        p.observe(h * 3600.0, {("A", "x"): ya[h], ("A", "y"): yb[h]})
    return p


@pytest.mark.parametrize("model", ["ets", "prophet"])
def test_provider_follows_a_demand_drop(model: str) -> None:
    """The "drain" bug: use falls to 0 after the fit; the forecast must follow within hours."""
    if model == "prophet":
        from gfs_opt.forecast.prophet_model import ProphetForecaster

        forecaster: object = ProphetForecaster(quantiles=(0.9,), uncertainty_samples=20,
                                               window_h=7 * 24)
    else:
        forecaster = model
    drop = 9 * 24 + 4                                   # 04:00, four hours after the refit
    p = drain_provider(forecaster, drop)
    before = p.pool_forecasts((drop - 1) * 3600.0)["A"].mean[0]
    assert before > 100
    after = p.pool_forecasts((drop + 3) * 3600.0)["A"]  # three zero hours observed
    # lead 1 keeps (1 − φ) of Prophet's mean; φ ≈ 0.8 here (Stan: 19.8 %, exact MAP: 20.6 %)
    assert after.mean[0] < 0.25 * before
    assert len(p.refit_log) == 1                        # followed without a refit


def test_provider_no_longer_slices_the_midnight_path() -> None:
    """Regression: the forecast at 05:00 must use hours 00–04, not the path computed at 00:00."""
    p = ForecastProvider("ets", horizon_h=4)
    feed(p, 0, 15 * 24)
    p.refit(15 * DAY)
    fits = len(p.refit_log)
    midnight = p.pool_forecasts(15 * DAY)["A"].mean.copy()
    for hour in range(15 * 24, 15 * 24 + 5):     # tenant A|y jumps from 5 to 80 GPUs
        p.observe(hour * 3600, {("A", "x"): demand(hour, "x"), ("A", "y"): 80.0,
                                ("B", "z"): demand(hour, "z")})
    five = p.pool_forecasts(15 * DAY + 5 * 3600)["A"].mean
    # a path computed at 00:00 would still say ≈ 20 + 10·sin + 5 for 05:00–08:00
    assert (five > midnight[0] + 40).all()
    assert p.model.states_["A|y"].levels[-1] > 50      # type: ignore[attr-defined]
    assert len(p.refit_log) == fits and p.update_log[-1]["hours"] == 5


def test_provider_tenant_appearing_between_refits() -> None:
    p = ForecastProvider("prophet", horizon_h=3)
    feed(p, 0, 3 * 24)
    p.model = make_forecaster("ets", quantiles=(0.9,))   # fast stand-in, same code path
    p.refit(3 * DAY)
    feed(p, 3 * 24, 3 * 24 + 2, refit=False)
    p.observe(3 * DAY + 2 * 3600, {("C", "new"): 12.0})  # a new pool and tenant at 02:00
    fcs = p.pool_forecasts(3 * DAY + 3 * 3600)
    assert fcs["C"].mean[0] == pytest.approx(12.0) and fcs["C"].std[0] > 0
    assert set(fcs) == {"A", "B", "C"}
    assert p.has_history("C")


def test_provider_before_history_and_refit_from() -> None:
    p = ForecastProvider("ets", refit_from=3 * DAY)
    assert not p.refit(0.0)
    assert p.pool_forecasts(100.0) == {}
    assert not p.has_history("A")
    feed(p, 0, 2 * 24)
    assert p.has_history("A") and not p.has_history("C")
    assert not p.refit(2 * DAY)           # before refit_from: skipped
    assert p.pool_forecasts(2 * DAY) == {}
    feed(p, 2 * 24, 3 * 24, refit=False)
    assert p.refit(3 * DAY)
    assert set(p.pool_forecasts(3 * DAY)) == {"A", "B"}


def test_provider_new_tenant_and_samples() -> None:
    p = ForecastProvider("ets", n_samples=16, aggregation="sum-quantiles")
    feed(p, 0, 3 * 24)
    p.observe(3 * DAY - 60, {("C", "new"): 8.0})   # a tenant seen for one minute
    assert p.refit(3 * DAY)
    fcs = p.pool_forecasts(3 * DAY)
    assert fcs["C"].mean[0] == pytest.approx(8.0)
    assert fcs["A"].samples is not None and fcs["A"].samples.shape == (16, 4)
    assert p.refit_log[-1]["series"] == 4
    # samples stay aligned with the current hour when hours were skipped (no observations)
    later = p.pool_forecasts(3 * DAY + 5 * 3600)
    assert later["A"].samples is not None and later["A"].samples.shape == (16, 4)
    assert len(later["A"].mean) == 4


def test_provider_refresh_is_cheap() -> None:
    p = ForecastProvider("seasonal-naive", horizon_h=4)
    feed(p, 0, 3 * 24)
    p.refit(3 * DAY)
    t0 = time.perf_counter()
    for k in range(288):                                  # every 300 s for a day
        if k % 12 == 0 and k:
            hour = 3 * 24 + k // 12 - 1
            p.observe(hour * 3600, {("A", "x"): demand(hour, "x")})
        p.pool_forecasts(3 * DAY + k * 300)
    assert (time.perf_counter() - t0) / 288 < 0.05
    assert len(p.update_log) == 24                        # one update + predict per hour


def test_provider_accepts_an_instance_and_checks_arguments() -> None:
    model = make_forecaster("week-peak", quantiles=(0.9,))
    assert ForecastProvider(model).model is model
    with pytest.raises(GfsError, match="aggregation"):
        ForecastProvider("ets", aggregation="max")
    with pytest.raises(GfsError, match="horizon"):
        ForecastProvider("ets", horizon_h=0)
