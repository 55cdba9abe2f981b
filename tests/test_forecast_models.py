"""Forecasters: interface contract, known-seasonality recovery, nominal quantile coverage.

Prophet fits cost ~0.1 s each, so Prophet tests use few, short series.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from gfs_opt.errors import GfsError
from gfs_opt.forecast import ets as ets_module
from gfs_opt.forecast import make_forecaster
from gfs_opt.forecast.auto import AutoForecaster
from gfs_opt.forecast.base import MAX_LEAD, Forecaster, qcol
from gfs_opt.forecast.baselines import PreviousWeekPeak, SeasonalNaive
from gfs_opt.forecast.calibration import lead_spreads
from gfs_opt.forecast.ets import SeasonalETS
from gfs_opt.forecast.prophet_fit import _YEAR_GRIDS as year_grids
from gfs_opt.forecast.prophet_model import ProphetForecaster

T0 = pd.Timestamp("2024-03-01")
SIGMA = 2.0


def pattern(hours: np.ndarray, level: float = 50.0, daily: float = 10.0,
            weekly: float = 0.0) -> np.ndarray:
    """Known truth: level + daily sine + optional weekly sine (hour 0 = midnight)."""
    return (level + daily * np.sin(2 * np.pi * hours / 24)
            + weekly * np.sin(2 * np.pi * hours / 168))


def frame(n_hours: int, n_series: int = 1, seed: int = 0, sigma: float = SIGMA,
          **kw: float) -> tuple[pd.DataFrame, np.ndarray]:
    """Noisy series with the known pattern; returns (history, truth for the next 48 hours)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_hours)
    ds = T0 + pd.to_timedelta(t, unit="h")
    parts = [pd.DataFrame({"ds": ds, "series": f"P|s{i}",
                           "y": pattern(t, **kw) + rng.normal(0, sigma, n_hours)})
             for i in range(n_series)]
    future_truth = pattern(np.arange(n_hours, n_hours + 48), **kw)
    return pd.concat(parts, ignore_index=True), future_truth


def coverage_run(model_name: str, n_series: int, n_hours: int, horizon: int = 24,
                 **params: object) -> tuple[float, float]:
    """Fit once on many replicate series; (coverage of q0.9, RMSE of the mean vs the truth)."""
    hist, truth = frame(n_hours, n_series, seed=7)
    rng = np.random.default_rng(99)
    model = make_forecaster(model_name, quantiles=(0.9,), **params).fit(hist)
    pred = model.predict(horizon)
    truth_h = np.tile(truth[:horizon], n_series)
    actual = truth_h + rng.normal(0, SIGMA, len(truth_h))
    cover = float(np.mean(actual <= pred["q0.9"].to_numpy()))
    rmse = float(np.sqrt(np.mean((pred["mean"].to_numpy() - truth_h) ** 2)))
    return cover, rmse


# ---- contract, all models ------------------------------------------------------------------------
FAST = ["week-peak", "seasonal-naive", "ets"]


@pytest.mark.parametrize("name", FAST)
def test_prediction_frame_contract(name: str) -> None:
    hist, _ = frame(24 * 10, n_series=2)
    model = make_forecaster(name, quantiles=(0.1, 0.9), seed=3)
    assert isinstance(model, Forecaster)
    assert model.fit(hist) is model
    pred = model.predict(5)
    assert list(pred.columns) == ["series", "ds", "h", "mean", "std", "q0.1", "q0.9"]
    assert len(pred) == 10
    assert set(pred["h"]) == {1, 2, 3, 4, 5}
    first = pred[pred["h"] == 1]["ds"].unique()
    assert list(first) == [hist["ds"].max() + pd.Timedelta(hours=1)]
    assert (pred["q0.1"] <= pred["q0.9"]).all()
    assert (pred[["mean", "std", "q0.1", "q0.9"]] >= 0).all().all()
    samples = model.predict_samples(5, 64)
    assert set(samples) == {"P|s0", "P|s1"}
    assert samples["P|s0"].shape == (64, 5)
    again = make_forecaster(name, quantiles=(0.1, 0.9), seed=3).fit(hist).predict_samples(5, 64)
    np.testing.assert_array_equal(samples["P|s0"], again["P|s0"])


def test_factory_and_bad_input() -> None:
    with pytest.raises(GfsError, match="unknown forecaster"):
        make_forecaster("dlinear")
    with pytest.raises(GfsError, match="forecaster 'ets'"):
        make_forecaster("ets", nonsense=1)
    with pytest.raises(GfsError, match="strictly between 0 and 1"):
        make_forecaster("ets", quantiles=(1.2,))
    model = make_forecaster("ets")
    with pytest.raises(GfsError, match="not fitted"):
        model.predict(3)
    with pytest.raises(GfsError, match="lacks column"):
        model.fit(pd.DataFrame({"ds": [T0], "y": [1.0]}))
    with pytest.raises(GfsError, match="numeric"):
        model.fit(pd.DataFrame({"ds": [T0], "series": ["a"], "y": ["lots"]}))
    with pytest.raises(GfsError, match="whole hours"):
        model.fit(pd.DataFrame({"ds": [T0 + pd.Timedelta(minutes=5)], "series": ["a"], "y": [1.0]}))
    hist, _ = frame(48)
    with pytest.raises(GfsError, match="positive number of hours"):
        model.fit(hist).predict(0)


def test_clone_and_params() -> None:
    model = make_forecaster("seasonal-naive", season="weekly", quantiles=(0.8,))
    twin = model.clone()
    assert twin is not model and twin.get_params() == model.get_params()
    assert "season='weekly'" in repr(model)


def test_gaps_are_interpolated_and_duplicates_keep_the_max() -> None:
    ds = T0 + pd.to_timedelta([0, 1, 3, 3], unit="h")
    hist = pd.DataFrame({"ds": ds, "series": "a", "y": [1.0, 2.0, 4.0, 9.0]})
    model = SeasonalNaive(season=1, std="zero").fit(hist)
    np.testing.assert_allclose(model.series_["a"].y, [1.0, 2.0, 5.5, 9.0])


# ---- naive baselines ---------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 1000), min_size=170, max_size=400), st.integers(1, 30))
def test_week_peak_repeats_last_week(values: list[float], horizon: int) -> None:
    y = np.array(values)
    hist = pd.DataFrame({"ds": T0 + pd.to_timedelta(np.arange(len(y)), unit="h"),
                         "series": "x", "y": y})
    pred = PreviousWeekPeak().fit(hist).predict(horizon)
    expected = y[len(y) - 168 + np.arange(horizon)]
    np.testing.assert_allclose(pred["mean"], expected)


def test_seasonal_naive_std_is_the_rule_error_and_zero_option() -> None:
    hist, _ = frame(24 * 14, sigma=SIGMA)
    y = hist["y"].to_numpy()
    pred = SeasonalNaive(season="daily").fit(hist).predict(30)
    err = (y[24:] - y[:-24])[-28 * 24:]
    assert pred["std"].iloc[0] == pytest.approx(np.sqrt(np.mean(err ** 2)))
    # y_t − y_{t−24} of iid noise has sd σ√2
    assert pred["std"].iloc[0] == pytest.approx(SIGMA * np.sqrt(2), rel=0.15)
    # lead 25..30 reach back two days: their own (k = 2) error
    assert pred["std"].iloc[-1] != pred["std"].iloc[0]
    zero = SeasonalNaive(season="daily", std="zero").fit(hist).predict(5)
    assert (zero["std"] == 0).all()
    assert (zero["q0.9"] == zero["mean"]).all()


def test_short_history_falls_back_to_last_value() -> None:
    hist = pd.DataFrame({"ds": [T0, T0 + pd.Timedelta(hours=1)], "series": "new",
                         "y": [3.0, 5.0]})
    pred = PreviousWeekPeak().fit(hist).predict(3)
    assert (pred["mean"] == 5.0).all()
    assert (pred["std"] > 0).all()  # a new tenant must not get a zero-width forecast


# ---- fast statistical model ---------------------------------------------------------------------------
def test_ets_recovers_daily_pattern_and_covers() -> None:
    cover, rmse = coverage_run("ets", n_series=100, n_hours=24 * 21)
    # the 14-day hour-of-day profile alone carries ≈ σ/√14 of estimation noise
    assert rmse < 0.5 * SIGMA
    assert 0.85 <= cover <= 0.95


def test_ets_zero_and_tiny_series() -> None:
    hist = pd.concat([
        pd.DataFrame({"ds": T0 + pd.to_timedelta(np.arange(48), unit="h"), "series": "zero",
                      "y": 0.0}),
        pd.DataFrame({"ds": [T0 + pd.Timedelta(hours=47)], "series": "one", "y": [8.0]}),
    ])
    pred = SeasonalETS().fit(hist).predict(4).set_index(["series", "h"])
    assert (pred.loc["zero", ["mean", "std", "q0.9"]] == 0).all().all()
    assert (pred.loc["one", "mean"] == 8.0).all()
    assert (pred.loc["one", "std"] == 2.0).all()  # cold start: a quarter of its peak


# ---- Prophet --------------------------------------------------------------------------------------------
def test_prophet_recovers_daily_and_weekly_pattern() -> None:
    hist, truth = frame(24 * 21, daily=10.0, weekly=6.0)
    model = ProphetForecaster(calibration="none", uncertainty_samples=100).fit(hist)
    pred = model.predict(24)
    rmse = np.sqrt(np.mean((pred["mean"].to_numpy() - truth[:24]) ** 2))
    assert rmse < 0.5 * SIGMA
    assert pred["std"].mean() == pytest.approx(SIGMA, rel=0.25)


def test_prophet_quantile_covers_at_nominal_rate() -> None:
    cover, rmse = coverage_run("prophet", n_series=12, n_hours=24 * 14, calibration="none",
                               uncertainty_samples=200)
    assert rmse < 0.5 * SIGMA
    # 288 points, correlated within a series: a wide tolerance around 0.9
    assert 0.82 <= cover <= 0.97


def test_prophet_hold_out_seeding_and_out_of_sample_errors_kept_across_refits() -> None:
    hist, _ = frame(24 * 16)
    model = ProphetForecaster(calibration_days=1, uncertainty_samples=50)
    day1 = hist[hist["ds"] < T0 + pd.Timedelta(days=15)]
    model.fit(day1)
    origins, rows = model.oos_errors_["P|s0"]
    assert len(origins) == 24 and rows.shape == (24, MAX_LEAD)   # one hold-out day
    assert "P|s0" in model.warm_params_
    model.fit(hist)             # the next day: the forecasts issued after the first fit are kept
    origins, rows = model.oos_errors_["P|s0"]
    assert len(origins) == 48 and np.all(np.diff(origins) == 1)
    assert np.isfinite(rows[:, 0]).all()


def test_prophet_is_deterministic() -> None:
    hist, _ = frame(24 * 9, n_series=2)
    runs = [ProphetForecaster(calibration_days=1, uncertainty_samples=50, seed=5).fit(hist)
            for _ in range(2)]
    a, b = (r.predict(6) for r in runs)
    pd.testing.assert_frame_equal(a, b)
    np.testing.assert_array_equal(runs[0].predict_samples(6, 20)["P|s1"],
                                  runs[1].predict_samples(6, 20)["P|s1"])


def test_prophet_shared_fit_is_bit_identical_to_plain_prophet() -> None:
    """The shared plumbing (prophet_fit.py) changes what Python does around Stan, not the fit:
    same parameters, same forecasts, over two refits (warm start) and a hold-out day."""
    hist, _ = frame(24 * 10, n_series=3, weekly=4.0)
    day1 = hist[hist["ds"] < T0 + pd.Timedelta(days=9)]
    models = [ProphetForecaster(shared_fit=shared, solver="stan", calibration_days=1)
              for shared in (False, True)]
    year_grids.clear()
    preds = []
    for m in models:
        m.fit(day1)
        first = m.predict(6)
        preds.append((first, m.fit(hist).predict(6)))
    plain, shared = models
    assert year_grids and not plain._shared.year_grids   # the shared path ran
    for key in plain.states_:
        for name, value in plain.states_[key].model.params.items():
            np.testing.assert_array_equal(shared.states_[key].model.params[name], value)
    for a, b in zip(*preds, strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_shared_preprocessing_gives_prophets_inputs_bit_for_bit() -> None:
    """Series 2.. of a window are derived from the model fitted on series 1 (`refit_like`): the
    Stan inputs, the initial values and the model attributes equal plain Prophet's, bit for bit."""
    import dataclasses

    from gfs_opt.forecast.prophet_fit import (
        SharedFit,
        fast_prophet,
        import_prophet,
        initial_values,
        refit_like,
    )

    hist, _ = frame(24 * 21, n_series=3, weekly=4.0)
    shared = SharedFit("stan")
    template = None
    for i, (_, part) in enumerate(hist.groupby("series", sort=True)):
        df = pd.DataFrame({"ds": part["ds"].to_numpy(), "y": part["y"].to_numpy() * (i + 1)})
        plain = import_prophet()(yearly_seasonality=False)
        plain.add_country_holidays("CN")
        inputs = plain.preprocess(df.copy())
        a = dataclasses.asdict(inputs)
        init_a = dataclasses.asdict(plain.calculate_initial_params(inputs.K))
        if template is None:                  # series 1: a full fit, Prophet's own preprocessing
            ours = fast_prophet(shared, yearly_seasonality=False)
            ours.add_country_holidays("CN")
            ours.fit(df.copy(), seed=0)
            template = ours
            b, init_b = dataclasses.asdict(ours.window_inputs), init_a
        else:                                 # series 2, 3: derived from it
            ours = refit_like(template, df["ds"].to_numpy(), df["y"].to_numpy(), seed=0)
            assert ours is not None
            b, init_b = dataclasses.asdict(ours.window_inputs), initial_values(ours)
        for field_name, value in a.items():
            np.testing.assert_array_equal(np.asarray(b[field_name]), np.asarray(value))
        for field_name, value in init_a.items():
            np.testing.assert_array_equal(np.asarray(init_b[field_name]), np.asarray(value))
        pd.testing.assert_frame_equal(ours.history, plain.history)
        assert (ours.y_scale, ours.start, ours.t_scale) == (plain.y_scale, plain.start,
                                                            plain.t_scale)
        assert ours.seasonalities == plain.seasonalities
        assert ours.component_modes == plain.component_modes
        np.testing.assert_array_equal(ours.changepoints_t, plain.changepoints_t)


@pytest.mark.parametrize("solver", ["map", "stan"])
def test_fits_derived_from_a_window_template_equal_full_fits(
        solver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Series 2.. of a refit are fitted from the first model on the same hours, and a later
    refit's first series from the last refit's model (`refit_like`): parameters, Prophet's mean
    and forecasts equal those of full ``Prophet.fit`` calls, bit for bit, over a cold and a
    warm-started refit."""
    import gfs_opt.forecast.prophet_model as pm

    hist, _ = frame(24 * 10, n_series=4, weekly=4.0)
    hist["y"] *= np.repeat([1.0, 2.0, 0.5, 3.0], 24 * 10)
    day1 = hist[hist["ds"] < T0 + pd.Timedelta(days=9)]
    runs, derived_fits = [], []
    real = pm.refit_like

    def counted(*args: object, **kw: object) -> object:
        out = real(*args, **kw)  # type: ignore[arg-type]
        derived_fits.append(out is not None)
        return out

    for derive in (True, False):
        monkeypatch.setattr(pm, "refit_like", counted if derive else lambda *_a, **_k: None)
        model = ProphetForecaster(solver=solver, calibration_days=0)
        preds = [model.fit(day1).predict(6), model.fit(hist).predict(6)]
        runs.append((model, preds))
    (derived, a), (full, b) = runs
    # 3 of 4 series in the first refit; all 4 in the second, whose first series is derived
    # from the template the first refit left (`SharedFit.clear` keeps the newest)
    assert derived_fits == [True] * 7
    for key, state in full.states_.items():
        other = derived.states_[key]
        for name, value in state.model.params.items():
            np.testing.assert_array_equal(other.model.params[name], value)
        np.testing.assert_array_equal(other.yhat, state.yhat)
        assert other.model is not state.model and other.model.y_scale == state.model.y_scale
    for x, y in zip(a, b, strict=True):
        pd.testing.assert_frame_equal(x, y)


@pytest.mark.parametrize("solver", ["map", "stan"])
def test_fits_derived_across_windows_equal_full_fits(solver: str) -> None:
    """A model derived from a fit on other hours (`refit_like` → `_window_inputs`) equals a full
    ``Prophet.fit`` bit for bit: other starts and lengths (short windows have fewer
    changepoints), a holiday (Oct 1) and a new year inside the window, with and without a warm
    start."""
    from gfs_opt.forecast.prophet_fit import SharedFit, fast_prophet, refit_like

    shared = SharedFit(solver)

    def model() -> object:
        m = fast_prophet(shared, daily_seasonality=True, weekly_seasonality=True,
                         yearly_seasonality=False, uncertainty_samples=0)
        m.add_country_holidays("CN")
        return m

    rng = np.random.default_rng(3)

    def frame_at(start: str, n: int) -> pd.DataFrame:
        h = np.arange(n)
        y = 40 + 15 * np.sin(2 * np.pi * h / 24) + rng.normal(0, 3, n) + 0.02 * h
        return pd.DataFrame({"ds": pd.date_range(start, periods=n, freq="h").to_numpy(),
                             "y": y})

    template = model()
    template.fit(frame_at("2024-09-01", 24 * 28), seed=0)
    init = {"k": 0.1, "m": 0.3, "sigma_obs": 0.05, "delta": np.zeros(25),
            "beta": np.zeros(template.window_inputs.K)}
    for start, n in (("2024-09-05 07:00", 24 * 28), ("2024-09-20", 24 * 14 + 5),
                     ("2024-09-28", 60), ("2024-12-20", 24 * 21), ("2024-09-01", 24 * 28)):
        df = frame_at(start, n)
        for kw in ({"seed": 0}, {"seed": 0, "init": init}):
            full = model()
            try:
                full.fit(df.copy(), **kw)
            except (ValueError, RuntimeError):   # a warm start of the wrong shape
                continue
            derived = refit_like(template, df["ds"].to_numpy(), df["y"].to_numpy(), **kw)
            assert derived is not None
            for name, value in full.params.items():
                np.testing.assert_array_equal(derived.params[name], value)
            pd.testing.assert_frame_equal(derived.history, full.history)
            np.testing.assert_array_equal(derived.changepoints_t, full.changepoints_t)
            assert derived.n_changepoints == full.n_changepoints
            # made on first read (`_LazySeries`), as Prophet made them
            pd.testing.assert_series_equal(derived.changepoints, full.changepoints)
            pd.testing.assert_series_equal(derived.history_dates, full.history_dates)
            assert (derived.start, derived.t_scale) == (full.start, full.t_scale)
            pd.testing.assert_series_equal(derived.train_holiday_names,
                                           full.train_holiday_names)
            later = pd.DataFrame({"ds": pd.date_range(df["ds"].iloc[-1], periods=30, freq="h")})
            np.testing.assert_array_equal(derived.predict(later)["yhat"].to_numpy(),
                                          full.predict(later)["yhat"].to_numpy())


def test_year_grid_features_equal_prophets_per_window() -> None:
    """Windows of contiguous hours take their rows from a whole-year grid: the same features,
    priors, columns and holiday names as Prophet computes for the window, bit for bit — for
    training windows at several starts, across a holiday (Oct 1) and over a new year."""
    from gfs_opt.forecast.prophet_fit import SharedFit, fast_prophet, import_prophet

    shared = SharedFit("stan")
    year_grids.clear()
    for start, n in (("2024-09-20 05:00", 24 * 21), ("2024-09-23 17:00", 24 * 21 + 5),
                     ("2024-12-20 00:00", 24 * 20)):
        ds = pd.DataFrame({"ds": pd.date_range(start, periods=n, freq="h")})
        models = []
        for m in (import_prophet()(), fast_prophet(shared), fast_prophet(shared)):
            m.add_country_holidays("CN")
            m.seasonalities = {}
            m.add_seasonality("daily", 1, 4)
            m.add_seasonality("weekly", 7, 3)
            models.append((m, m.make_all_seasonality_features(ds)))
        (plain, a), (ours, b), (arrays, _) = models
        # the same training window as arrays (`_window_inputs`' route)
        arrays.train_holiday_names = None
        x, priors, cols, modes = arrays.window_features(ds["ds"].to_numpy())
        assert x.tobytes() == a[0].to_numpy(dtype=float).tobytes() and x.dtype == np.float64
        assert priors == a[1] and modes == a[3]
        pd.testing.assert_frame_equal(cols, a[2], check_exact=True)
        pd.testing.assert_series_equal(arrays.train_holiday_names, plain.train_holiday_names)
        pd.testing.assert_frame_equal(b[0], a[0], check_exact=True)
        assert b[1] == a[1] and b[3] == a[3]
        pd.testing.assert_frame_equal(b[2], a[2], check_exact=True)
        pd.testing.assert_series_equal(ours.train_holiday_names, plain.train_holiday_names)
        assert float(a[0].filter(like="National Day").to_numpy().sum()) > 0 or start[5:7] != "09"
        # a prediction window after training (holiday names fixed) and 48 h past it
        later = pd.DataFrame({"ds": pd.date_range(pd.Timestamp(start) + pd.Timedelta(hours=n),
                                                  periods=48, freq="h")})
        want = plain.make_all_seasonality_features(later)
        pd.testing.assert_frame_equal(ours.make_all_seasonality_features(later)[0], want[0],
                                      check_exact=True)
        # … and as arrays (`_yhat`'s route)
        x, s_a, s_m = ours.feature_rows(later["ds"].to_numpy()[0], len(later))
        assert x.tobytes() == want[0].to_numpy().tobytes()
        assert s_a.tobytes() == want[2]["additive_terms"].to_numpy().tobytes()
        assert s_m.tobytes() == want[2]["multiplicative_terms"].to_numpy().tobytes()
    assert year_grids


def test_year_grids_are_shared_only_where_they_are_the_same() -> None:
    """The process keeps one year grid per configuration for every forecaster: a second model
    of another ``SharedFit`` takes the first one's grid, and a model whose holiday prior differs
    (its features' priors do) gets its own, Prophet's priors."""
    from gfs_opt.forecast.prophet_fit import SharedFit, fast_prophet, import_prophet

    ds = pd.DataFrame({"ds": pd.date_range("2024-09-20", periods=24 * 7, freq="h")})
    year_grids.clear()
    made = []
    for scale in (10.0, 10.0, 2.5):
        m = fast_prophet(SharedFit("map"), holidays_prior_scale=scale)
        m.add_country_holidays("CN")
        made.append(m.make_all_seasonality_features(ds))
        plain = import_prophet()(holidays_prior_scale=scale)
        plain.add_country_holidays("CN")
        assert made[-1][1] == plain.make_all_seasonality_features(ds)[1]
    assert len(year_grids) == 2
    assert made[0][1] == made[1][1] != made[2][1]


def test_holiday_names_are_validated_where_their_years_are_used() -> None:
    """Prophet validates every holiday name of 1995–2044 in ``add_country_holidays``; the shared
    model validates the names of the years it builds features for. An unknown country still
    fails at once, and a clash still fails (when the features are built, not at the add)."""
    from gfs_opt.forecast.prophet_fit import SharedFit, fast_prophet

    with pytest.raises(AttributeError, match="not currently supported"):
        fast_prophet(SharedFit("map")).add_country_holidays("XX")
    m = fast_prophet(SharedFit("map"))
    m.add_seasonality("National Day", period=7, fourier_order=1)   # a CN holiday's name
    m.add_country_holidays("CN")
    ds = pd.DataFrame({"ds": pd.date_range("2024-09-20", periods=24 * 21, freq="h")})
    with pytest.raises(ValueError, match="National Day"):
        m.make_all_seasonality_features(ds)
    shared = SharedFit("map")
    ok = fast_prophet(shared)
    ok.add_country_holidays("CN")
    assert "National Day_delim_+0" in ok.make_all_seasonality_features(ds)[0].columns
    # a clashing model that finds the holiday frame already built by another one still fails
    clash = fast_prophet(shared)
    clash.add_seasonality("National Day", period=7, fourier_order=1)
    clash.add_country_holidays("CN")
    with pytest.raises(ValueError, match="National Day"):
        clash.make_all_seasonality_features(ds)


def test_prediction_frame_equals_prophets_setup_dataframe() -> None:
    """The shortcut `_yhat` takes around ``setup_dataframe`` gives the same ``t`` and ``floor``,
    bit for bit, on and off the training window."""
    from gfs_opt.forecast.prophet_model import _prediction_frame, _trend

    hist, _ = frame(24 * 10, n_series=1, weekly=4.0)
    model = ProphetForecaster(calibration_days=0)
    model.fit(hist)
    m = next(iter(model.states_.values())).model
    for start, n in ((T0, 24 * 10), (T0 - pd.Timedelta(hours=5), 7),
                     (T0 + pd.Timedelta(days=9, hours=13), 24 * 40 + 3)):
        ds = pd.date_range(start, periods=n, freq="h")
        ours = _prediction_frame(m, ds)
        theirs = m.setup_dataframe(pd.DataFrame({"ds": ds}))
        for col in ("t", "floor"):
            np.testing.assert_array_equal(ours[col].to_numpy(), theirs[col].to_numpy())
        np.testing.assert_array_equal(m.predict_trend(ours), m.predict_trend(theirs))
        np.testing.assert_array_equal(_trend(m, ds.to_numpy()), m.predict_trend(theirs))


def test_lead_spreads_measure_rms_and_empirical_quantiles() -> None:
    rng = np.random.default_rng(0)
    big = np.column_stack([rng.normal(0, 1, 4000), rng.exponential(2.0, 4000)])
    short = np.array([[1.0, np.nan]] * 30 + [[np.nan, np.nan]] * 5)
    std, off = lead_spreads([big, short, np.empty((0, 2))], 2, (0.1, 0.9),
                            np.array([9.0, 9.0, 4.0]), min_errors=24)
    assert std[0, 0] == pytest.approx(1.0, rel=0.05)
    assert std[0, 1] == pytest.approx(np.sqrt(8.0), rel=0.05)         # RMS, bias included
    assert off[0.9][0, 0] == pytest.approx(norm.ppf(0.9), abs=0.06)
    assert off[0.9][0, 1] == pytest.approx(2.0 * np.log(10.0), rel=0.06)  # exponential's q0.9
    assert off[0.1][0, 1] == pytest.approx(-2.0 * np.log(0.9), rel=0.15)
    assert std[1, 0] == 1.0 and std[1, 1] == 1.0                       # lead 2 reuses lead 1
    assert std[2, 0] == 4.0 and off[0.9][2, 0] == pytest.approx(4.0 * norm.ppf(0.9))  # cold


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 90), st.integers(1, 7), st.floats(0.0, 0.6),
       st.integers(0, 2 ** 31))
def test_stacked_spreads_count_and_rms_as_numpy_would(n_series: int, rows: int, horizon: int,
                                                      holes: float, seed: int) -> None:
    """The hourly spread's counts and root mean squares are numpy's own (``sum`` of ``~isnan``
    and ``nansum`` of squares down the rows), bit for bit, whatever the layout shortcuts."""
    from gfs_opt.forecast.calibration import stacked_spreads

    rng = np.random.default_rng(seed)
    a = rng.normal(0, 10, (n_series, rows, horizon)) * rng.exponential(1.0, (n_series, 1, 1))
    a[rng.random(a.shape) < holes] = np.nan
    std, _ = stacked_spreads(a, (), np.zeros(n_series), min_errors=1)
    count = (~np.isnan(a)).sum(axis=1)
    want = np.sqrt(np.nansum(a * a, axis=1) / np.maximum(count, 1))
    have = count >= 1
    assert std[have].tobytes() == want[have].tobytes()


def test_prophet_short_series_use_fallback_and_samples_are_prophets() -> None:
    long_hist, _ = frame(24 * 7)
    new = pd.DataFrame({"ds": [long_hist["ds"].max()], "series": "P|new", "y": [4.0]})
    model = ProphetForecaster(calibration_days=0, uncertainty_samples=50)
    pred = model.fit(pd.concat([long_hist, new])).predict(6)
    assert set(pred["series"]) == {"P|s0", "P|new"}
    assert model.states_["P|new"].model is None
    samples = model.predict_samples(6, 40)
    assert samples["P|s0"].shape == (40, 6)
    # Prophet's own draws: their spread matches the forecast's std
    assert samples["P|s0"].std(axis=0).mean() == pytest.approx(
        pred[pred["series"] == "P|s0"]["std"].mean(), rel=0.35)


def test_prophet_failure_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object) -> None:
        raise RuntimeError("Error evaluating model log probability\nmore")

    model = ProphetForecaster()
    monkeypatch.setattr(model, "_fit_prophet", broken)
    hist, _ = frame(24 * 5)
    pred = model.fit(hist).predict(3)
    assert len(pred) == 3 and np.isfinite(pred["mean"]).all()
    assert model.failures_ == {"P|s0": "Error evaluating model log probability"}


# ---- auto -------------------------------------------------------------------------------------------------
def test_auto_routes_by_history_and_survives_new_and_zero_series() -> None:
    long_hist, _ = frame(24 * 15)
    end = long_hist["ds"].max()
    extra = pd.concat([
        pd.DataFrame({"ds": [end], "series": "P|new", "y": [4.0]}),
        pd.DataFrame({"ds": end - pd.to_timedelta(np.arange(100), unit="h"), "series": "P|zero",
                      "y": 0.0}),
        pd.DataFrame({"ds": end - pd.to_timedelta(np.arange(24 * 15), unit="h"), "series": "P|rare",
                      "y": np.r_[5.0, np.zeros(24 * 15 - 1)]}),
    ])
    model = AutoForecaster(prophet_params={"calibration_days": 0, "uncertainty_samples": 50},
                           quantiles=(0.9,))
    pred = model.fit(pd.concat([long_hist, extra])).predict(4)
    assert model.routes_ == {"P|s0": "prophet", "P|new": "ets", "P|zero": "ets", "P|rare": "ets"}
    assert len(pred) == 16 and np.isfinite(pred[["mean", "std", qcol(0.9)]]).all().all()


def test_ndtri_is_the_normal_quantile_the_forecasters_used() -> None:
    """The forecasters take z from `scipy.special.ndtri` (fast to import) instead of
    `scipy.stats.norm.ppf`: the same values, bit for bit, edges included."""
    from scipy.special import ndtri
    from scipy.stats import norm

    levels = [0.0, 1e-12, 0.05, 0.1, 0.5, 0.8, 0.9, 0.95, 0.975, 0.99, 1 - 1e-12, 1.0]
    for q in levels:
        a, b = norm.ppf(q), ndtri(q)
        assert (a == b) or (np.isnan(a) and np.isnan(b)), q


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=300),
       st.sampled_from(ets_module.ALPHAS), st.one_of(st.none(), st.floats(-1e3, 1e4)))
def test_ets_smoothing_loop_equals_scipy_filter_bit_for_bit(xs: list[float], alpha: float,
                                                           level0: float | None) -> None:
    """`_smooth` runs a plain loop until its budget is spent, then scipy's lfilter: a run's
    forecasts must not depend on which one it reached."""
    from scipy.signal import lfilter

    x = np.array(xs)
    prev = x[0] if level0 is None else level0
    want, _ = lfilter([alpha], [1.0, alpha - 1.0], x, zi=np.array([(1.0 - alpha) * prev]))
    got = ets_module._smooth_loop(x, alpha, float(prev))
    assert got.tobytes() == want.tobytes()


def test_ets_smoothing_switches_to_scipy_after_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.linspace(0.0, 50.0, 100)
    monkeypatch.setattr(ets_module, "_py_smoothed", 0)
    monkeypatch.setattr(ets_module, "PY_SMOOTH_BUDGET", 150)
    first, second, third = (ets_module._smooth(x, 0.2) for _ in range(3))
    assert ets_module._py_smoothed == 200      # two loops, then the filter
    assert first.tobytes() == second.tobytes() == third.tobytes()


def _phi_scores_one_by_one(r: np.ndarray, leads: int) -> tuple[list[float], int]:
    """`phi_scores` as first written: one φ at a time, one lead at a time."""
    from gfs_opt.forecast.prophet_model import PHIS

    scores, count = [], 0
    for phi in PHIS:
        score, count = 0.0, 0
        for lead in range(1, leads + 1):
            if len(r) <= lead:
                break
            e = r[lead:] - phi ** lead * r[:-lead]
            score += float(np.sum(e * e))
            count += len(e)
        scores.append(score)
    return scores, count


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 800), leads=st.integers(1, 6), scale=st.sampled_from([1e-3, 1.0, 1e3]),
       walk=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_phi_scores_all_at_once_equal_one_by_one(n: int, leads: int, scale: float, walk: bool,
                                                 seed: int) -> None:
    from gfs_opt.forecast.prophet_model import phi_scores

    r = np.random.default_rng(seed).normal(0, scale, n)
    r = np.cumsum(r) if walk else r
    assert phi_scores(r, leads) == _phi_scores_one_by_one(r, leads)
