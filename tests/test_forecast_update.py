"""`update(history)`: conditioning a fitted forecaster on hours observed after its fit.

Prophet fits cost ~0.2–0.5 s each: the Prophet tests here fit one or two short series.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gfs_opt.errors import GfsError
from gfs_opt.forecast import make_forecaster
from gfs_opt.forecast.auto import AutoForecaster
from gfs_opt.forecast.ets import SeasonalETS
from gfs_opt.forecast.prophet_model import ProphetForecaster

T0 = pd.Timestamp("2024-03-01")
HOUR = pd.Timedelta(hours=1)
FAST = ["week-peak", "seasonal-naive", "ets"]


def history(n_hours: int, start: int = 0, series: tuple[str, ...] = ("P|a", "P|b"),
            seed: int = 0, phi: float = 0.9) -> pd.DataFrame:
    """Daily wave plus AR(1) noise per series, hours start..start+n−1 of one shared path."""
    rng = np.random.default_rng(seed)
    total = start + n_hours
    parts = []
    for k, s in enumerate(series):
        noise = np.zeros(total)
        eps = rng.normal(0, 2.0, total)
        for i in range(1, total):
            noise[i] = phi * noise[i - 1] + eps[i]
        t = np.arange(total)
        y = np.maximum(40 + 10 * k + 8 * np.sin(2 * np.pi * t / 24) + noise, 0)
        parts.append(pd.DataFrame({"ds": T0 + pd.to_timedelta(t[start:], unit="h"), "series": s,
                                   "y": y[start:]}))
    return pd.concat(parts, ignore_index=True)


def rows(hist: pd.DataFrame, lo: int, hi: int) -> pd.DataFrame:
    """Hours [lo, hi) of a history frame."""
    h = (hist["ds"] - T0) // HOUR
    return hist[(h >= lo) & (h < hi)]


@pytest.mark.parametrize("name", FAST)
def test_update_moves_the_origin_and_ignores_seen_hours(name: str) -> None:
    full = history(24 * 12)
    model = make_forecaster(name, quantiles=(0.1, 0.9), seed=2).fit(rows(full, 0, 24 * 10))
    before = model.predict(4)
    # no new hours (empty frame, or only hours already seen, even with other values) → unchanged
    model.update(full.iloc[:0])
    pd.testing.assert_frame_equal(model.predict(4), before)
    seen = rows(full, 24 * 10 - 5, 24 * 10).assign(y=1e6)
    model.update(seen)
    pd.testing.assert_frame_equal(model.predict(4), before)
    # three new hours (mixed with seen ones): forecasts start after the latest of them
    model.update(rows(full, 24 * 10 - 2, 24 * 10 + 3))
    after = model.predict(4)
    last = T0 + (24 * 10 + 2) * HOUR
    assert (after[after["h"] == 1]["ds"] == last + HOUR).all()
    assert (after["ds"] == last + after["h"] * HOUR).all()
    assert not np.allclose(after["mean"], before["mean"])
    assert (after["q0.1"] <= after["q0.9"]).all() and (after[["mean", "std"]] >= 0).all().all()


@pytest.mark.parametrize("name", FAST)
def test_update_is_deterministic_and_samples_follow(name: str) -> None:
    full = history(24 * 11)
    runs = []
    for _ in range(2):
        model = make_forecaster(name, quantiles=(0.9,), seed=4).fit(rows(full, 0, 24 * 10))
        model.update(rows(full, 24 * 10, 24 * 10 + 6))
        runs.append((model.predict(3), model.predict_samples(3, 50)))
    pd.testing.assert_frame_equal(runs[0][0], runs[1][0])
    for key in runs[0][1]:
        np.testing.assert_array_equal(runs[0][1][key], runs[1][1][key])
        assert runs[0][1][key].shape == (50, 3) and (runs[0][1][key] >= 0).all()


def test_naive_update_equals_a_fit_on_all_hours() -> None:
    full = history(24 * 16)
    upd = make_forecaster("week-peak").fit(rows(full, 0, 24 * 15)).update(rows(full, 24 * 15, 24 * 16))
    ref = make_forecaster("week-peak").fit(full)
    np.testing.assert_allclose(upd.predict(4)["mean"], ref.predict(4)["mean"])


def test_ets_update_advances_the_level_with_its_alpha() -> None:
    full = history(24 * 11)
    model = SeasonalETS().fit(rows(full, 0, 24 * 10))
    state = model.states_["P|a"]
    alpha, level, profile = state.alpha, state.levels[-1], state.profile.copy()
    new = rows(full, 24 * 10, 24 * 10 + 1)
    y = float(new[new["series"] == "P|a"]["y"].iloc[0])
    model.update(new)
    hod = (24 * 10) % 24
    expected = alpha * (y - profile[hod]) + (1 - alpha) * level
    assert model.states_["P|a"].levels[-1] == pytest.approx(expected)
    pred = model.predict(2)
    first = pred[(pred["series"] == "P|a") & (pred["h"] == 1)]["mean"].iloc[0]
    assert first == pytest.approx(max(expected + profile[(hod + 1) % 24], 0.0))


@pytest.mark.parametrize("name", FAST)
def test_new_series_after_the_fit_gets_a_cold_start(name: str) -> None:
    model = make_forecaster(name, quantiles=(0.9,)).fit(history(24 * 9))
    fresh = pd.DataFrame({"ds": [T0 + (24 * 9) * HOUR], "series": "Q|new", "y": [6.0]})
    pred = model.update(pd.concat([rows(history(24 * 10), 24 * 9, 24 * 9 + 1), fresh])).predict(3)
    new = pred[pred["series"] == "Q|new"]
    assert len(new) == 3 and (new["mean"] == 6.0).all() and (new["std"] > 0).all()
    assert (new["ds"] == T0 + (24 * 9) * HOUR + new["h"] * HOUR).all()


def test_gap_is_interpolated_and_update_needs_a_fit() -> None:
    with pytest.raises(GfsError, match="not fitted"):
        SeasonalETS().update(history(5))
    model = make_forecaster("seasonal-naive", season=1, std="zero")
    model.fit(pd.DataFrame({"ds": [T0, T0 + HOUR], "series": "s", "y": [1.0, 2.0]}))
    model.update(pd.DataFrame({"ds": [T0 + 4 * HOUR], "series": "s", "y": [8.0]}))
    np.testing.assert_allclose(model.series_["s"].y, [1, 2, 4, 6, 8])
    assert model.predict(1)["ds"].iloc[0] == T0 + 5 * HOUR


def test_ets_spread_per_lead_grows_on_persistent_noise() -> None:
    model = SeasonalETS().fit(history(24 * 20, phi=0.97))
    pred = model.predict(6)
    std = pred[pred["series"] == "P|a"]["std"].to_numpy()
    assert (std > 0).all()
    assert (np.diff(std) > -0.02 * std[:-1]).all()   # monotone up to estimation noise
    assert std[-1] > 1.5 * std[0]


def test_naive_spread_is_flat_within_a_season_and_measured() -> None:
    model = make_forecaster("week-peak").fit(history(24 * 30))
    pred = model.predict(4)
    std = pred[pred["series"] == "P|a"]["std"].to_numpy()
    # every lead ≤ 168 h reads the same week-old hour: same error distribution
    np.testing.assert_allclose(std, std[0], rtol=0.05)
    assert std[0] > 1.0


# ---- Prophet: daily fit + AR(1) on its residuals ------------------------------------------------
def test_prophet_residual_update_follows_the_latest_hour() -> None:
    full = history(24 * 10, series=("P|a",), phi=0.95, seed=3)
    model = ProphetForecaster(uncertainty_samples=20, calibration_days=0)
    model.fit(rows(full, 0, 24 * 9))
    state = model.states_["P|a"]
    assert state.model is not None and 0.5 <= state.phi <= 1.0   # persistent residuals
    fitted_model = state.model
    # an hour 30 GPUs above Prophet's mean: the next hours' forecast shifts by φ^L · residual
    t = 24 * 9
    yhat_t = model._yhat_at(state, np.array([state.fit_end + 1]))[0]
    model.update(pd.DataFrame({"ds": [T0 + t * HOUR], "series": "P|a", "y": [yhat_t + 30.0]}))
    pred = model.predict(3)
    base = model._yhat_at(state, state.fit_end + 1 + np.arange(1, 4))
    np.testing.assert_allclose(pred["mean"], np.maximum(base + 30.0 * state.phi ** np.arange(1, 4), 0))
    assert model.states_["P|a"].model is fitted_model              # no refit on update
    assert pred["ds"].iloc[0] == T0 + (t + 1) * HOUR
    std = pred["std"].to_numpy()
    assert (std > 0).all() and std[2] >= std[0]
    # a tenant first seen after the fit gets the fast model until the next fit
    model.update(pd.DataFrame({"ds": [T0 + (t + 1) * HOUR], "series": "P|new", "y": [3.0]}))
    assert model.states_["P|new"].model is None
    assert set(model.predict(2)["series"]) == {"P|a", "P|new"}


def test_prophet_refit_days_keeps_the_model_between_refits(monkeypatch: pytest.MonkeyPatch) -> None:
    full = history(24 * 8, series=("P|a",))
    model = ProphetForecaster(uncertainty_samples=20, refit_days=2)
    fits = []
    real = model._fit_prophet
    monkeypatch.setattr(model, "_fit_prophet", lambda *a: fits.append(1) or real(*a))
    model.fit(rows(full, 0, 24 * 6))
    first = model.states_["P|a"].model
    model.fit(rows(full, 0, 24 * 7))          # one day later: kept, conditioned on the new day
    assert model.states_["P|a"].model is first and len(fits) == 1
    assert model.predict(1)["ds"].iloc[0] == T0 + 24 * 7 * HOUR
    model.fit(full)                           # two days later: refitted
    assert model.states_["P|a"].model is not first and len(fits) == 2


def test_auto_routes_updates_and_cold_starts() -> None:
    full = history(24 * 16, series=("P|a",))
    sparse = pd.DataFrame({"ds": T0 + pd.to_timedelta(np.arange(24 * 15), unit="h"),
                           "series": "P|rare", "y": np.r_[5.0, np.zeros(24 * 15 - 1)]})
    model = AutoForecaster(prophet_params={"uncertainty_samples": 20})
    model.fit(pd.concat([rows(full, 0, 24 * 15), sparse]))
    assert model.routes_ == {"P|a": "prophet", "P|rare": "ets"}
    new = pd.DataFrame({"ds": [T0 + 24 * 15 * HOUR], "series": "P|new", "y": [2.0]})
    model.update(pd.concat([rows(full, 24 * 15, 24 * 15 + 1), new]))
    assert model.routes_["P|new"] == "ets"
    pred = model.predict(2)
    assert set(pred["series"]) == {"P|a", "P|rare", "P|new"}
    first = pred[pred["h"] == 1].set_index("series")["ds"]
    # each series is forecast from its own latest hour (P|rare had no new hour)
    assert first.to_dict() == {"P|a": T0 + 361 * HOUR, "P|new": T0 + 361 * HOUR,
                               "P|rare": T0 + 360 * HOUR}
    assert np.isfinite(pred[["mean", "std", "q0.9"]]).all().all()
