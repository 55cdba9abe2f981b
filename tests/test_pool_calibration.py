"""The pool forecast's spread calibrated on its own errors (aggregation ``calibrated``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gfs_opt.errors import GfsError
from gfs_opt.forecast import ForecastProvider
from gfs_opt.forecast.pool_calibration import PoolCalibration, pool_demand
from gfs_opt.model import PoolForecast


def one(mean: float, std: float, leads: int = 1) -> dict[str, PoolForecast]:
    return {"P": PoolForecast(np.full(leads, mean), np.full(leads, std))}


def test_kappa_is_one_until_enough_scores_then_the_rms_of_the_standardised_errors() -> None:
    cal = PoolCalibration(window_h=1000, min_scores=3)
    errors = [2.0, -2.0, 4.0]          # standardised: σ = 1 below
    for hour, e in enumerate(errors):
        out = cal.issue(hour, one(10.0, 1.0))
        np.testing.assert_allclose(out["P"].std, [1.0])    # too few scores so far
        cal.score(hour + 1, {"P": np.array([10.0 + e])}, hour)
    np.testing.assert_allclose(cal.kappa("P", 1), [np.sqrt((4 + 4 + 16) / 3)])
    scaled = cal.issue(3, one(10.0, 2.0))["P"]
    np.testing.assert_allclose(scaled.std, [2.0 * np.sqrt(8.0)])
    np.testing.assert_allclose(scaled.mean, [10.0])           # the mean is left alone


def test_scores_leave_the_window_and_leads_are_kept_apart() -> None:
    cal = PoolCalibration(window_h=2, min_scores=1)
    cal.issue(0, one(0.0, 1.0, leads=2))              # hour 0 at lead 1, hour 1 at lead 2
    cal.score(2, {"P": np.array([3.0, 1.0])}, 0)
    np.testing.assert_allclose(cal.kappa("P", 2), [3.0, 1.0])
    cal.score(5, {}, 5)                               # both scores are now older than 2 h
    np.testing.assert_allclose(cal.kappa("P", 2), [1.0, 1.0])


def test_a_pool_without_demand_or_a_zero_spread_is_not_scored() -> None:
    cal = PoolCalibration(min_scores=1)
    cal.issue(0, {"P": PoolForecast(np.array([5.0]), np.array([0.0])),
                  "Q": PoolForecast(np.array([5.0]), np.array([1.0]))})
    cal.score(1, {"P": np.array([9.0])}, 0)           # Q has no demand row
    np.testing.assert_allclose(cal.kappa("P", 1), [1.0])
    np.testing.assert_allclose(cal.kappa("Q", 1), [1.0])
    assert cal.pending_since() is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=30, max_size=60), st.floats(0.5, 20))
def test_kappa_matches_a_direct_rms(errors: list[float], sd: float) -> None:
    cal = PoolCalibration(window_h=10_000, min_scores=24)
    for hour, e in enumerate(errors):
        cal.issue(hour, one(100.0, sd))
        cal.score(hour + 1, {"P": np.array([100.0 + e])}, hour)
    s = ((100.0 + np.array(errors)) - 100.0) / sd      # the errors as the demand carries them
    np.testing.assert_allclose(cal.kappa("P", 1), [np.sqrt(np.mean(s * s))], rtol=1e-9,
                               atol=1e-12)


def test_pool_demand_sums_the_series_of_each_pool() -> None:
    rows = [("A|x", 10, np.array([1.0, 2.0])), ("A|y", 11, np.array([5.0])),
            ("B|z", 10, np.array([7.0, 7.0]))]
    out = pool_demand(rows, {"A|x": "A", "A|y": "A", "B|z": "B"}, 10, 2)
    np.testing.assert_allclose(out["A"], [1.0, 7.0])
    np.testing.assert_allclose(out["B"], [7.0, 7.0])


def test_bad_calibration_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        PoolCalibration(window_h=0)
    with pytest.raises(GfsError, match="calibrated"):
        ForecastProvider("ets", aggregation="calibrate")


def feed_together(p: ForecastProvider, days: int, seed: int) -> None:
    """Two tenants of one pool whose surges come together (one shared shock, no own noise):
    each tenant's own errors say nothing of the other's, so the independent sum's spread is
    √2 too narrow for the pool's."""
    rng = np.random.default_rng(seed)
    level = 50.0
    for h in range(days * 24):
        if h % 24 == 0 and h:
            p.refit(h * 3600.0)
        level = max(5.0, level + rng.normal(0.0, 6.0))
        p.observe(h * 3600.0, {("A", "x"): level, ("A", "y"): level})
        p.pool_forecasts(h * 3600.0 + 60)


def test_provider_widens_the_spread_of_tenants_that_surge_together() -> None:
    plain = ForecastProvider("ets", horizon_h=2, aggregation="independent")
    cal = ForecastProvider("ets", horizon_h=2, aggregation="calibrated")
    for p in (plain, cal):
        feed_together(p, 12, seed=3)
    t = 12 * 24 * 3600.0 + 60
    a, b = plain.pool_forecasts(t)["A"], cal.pool_forecasts(t)["A"]
    np.testing.assert_allclose(a.mean, b.mean)                 # the means are the same
    kappa = b.std / a.std
    assert (kappa > 1.2).all(), kappa                          # √2 in theory, from the data
    assert cal.calibration is not None
    np.testing.assert_allclose(kappa, cal.calibration.kappa("A", 2))
