"""Naive baselines: seasonal naive and the paper's previous-week-peak ablation.

Both repeat the value one season ago: the forecast for lead L after hour o is ``y[o + L − k·m]``
for the season ``m`` and ``k = ⌈L/m⌉`` (the last season that is already observed). ``update``
appends the new hours, so the forecast always starts after the latest one. Their spread is
measured, not assumed: the base class takes it per lead from the rule's own errors at hourly
origins over the last ``std_window_h`` hours (for L ≤ m these are ``y_t − y_{t−m}``). Before one
full season of history exists the last value is repeated (naive) with `cold_start_std`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gfs_opt.errors import GfsError
from gfs_opt.forecast.base import BaseForecaster, SeriesData, SeriesForecast, lead_grid

SEASONS = {"daily": 24, "weekly": 168}


def season_hours(season: str | int) -> int:
    if isinstance(season, str):
        if season not in SEASONS:
            raise GfsError(f"unknown season {season!r}; expected one of {sorted(SEASONS)} or hours")
        return SEASONS[season]
    if int(season) != season or season < 1:
        raise GfsError(f"season must be a positive number of hours, got {season}")
    return int(season)


class SeasonalNaive(BaseForecaster):
    """Forecast for lead L = the value ``m·⌈L/m⌉`` hours before the target (m = season).

    Parameters: ``season`` ("daily", "weekly" or hours), ``std_window_h`` (hourly origins whose
    errors give the spread), ``min_residuals`` (fewer errors at a lead → the previous lead's or
    the cold-start spread), ``std`` ("residual" = measured as above, "zero" = a point forecast
    with no spread).
    """

    def __init__(self, season: str | int = "daily", std_window_h: int = 28 * 24,
                 min_residuals: int = 24, std: str = "residual",
                 quantiles: Sequence[float] = (0.9,), seed: int = 0) -> None:
        super().__init__(quantiles, seed)
        self.season = season
        self.std_window_h = std_window_h
        self.min_residuals = min_residuals
        self.std = std
        self._m = season_hours(season)
        if std not in ("residual", "zero"):
            raise GfsError(f"std must be 'residual' or 'zero', got {std!r}")

    @property
    def history_hours(self) -> int | None:
        # errors of the rule over std_window_h need that many hours plus the seasons looked back
        return self.std_window_h + 2 * self._m

    def _calibration_hours(self) -> int:
        return self.std_window_h

    def _fit_series(self, data: SeriesData, prev: object = None) -> None:
        return None  # the rule has no parameters; the data is the state

    def _means(self, data: SeriesData, origins: np.ndarray, horizon: int) -> np.ndarray:
        """Rule forecasts (len(origins), horizon) after each absolute origin hour."""
        lead = np.arange(1, horizon + 1)
        back = np.ceil(lead / self._m).astype(np.int64) * self._m
        src = lead_grid(origins, horizon) - back[None, :]
        last = data.values_at(np.asarray(origins))[:, None]
        seen = data.values_at(src)
        # before one season is observed: the origin's own value (naive)
        return np.where(src >= data.start_hour, seen, last)

    def _forecast(self, key: str, state: None, data: SeriesData,
                  horizon: int, n_samples: int = 0) -> SeriesForecast:
        mean = self._means(data, np.array([data.end_hour]), horizon)[0]
        if self.std == "zero":
            return SeriesForecast(mean, np.zeros(horizon))
        return SeriesForecast(mean)

    def _errors(self, key: str, state: None, data: SeriesData, origins: np.ndarray,
                horizon: int) -> np.ndarray:
        # only forecasts of the seasonal rule itself: the naive fallback of the first season
        # says nothing about the rule's errors (where it would apply the error is NaN, so the
        # rule's value one season back is all an error needs)
        lead = np.arange(1, horizon + 1)
        target = lead_grid(origins, horizon)
        src = target - np.ceil(lead / self._m).astype(np.int64) * self._m
        err = data.values_at(target) - data.values_at(src)
        return np.where(src >= data.start_hour, err, np.nan)


class PreviousWeekPeak(SeasonalNaive):
    """The paper's ablation forecaster: demand in hour h = the hourly peak at the same hour last week.

    ``std="residual"`` (default) gives it the measured spread of its own week-over-week errors, so
    that its quantiles are a fair baseline; ``std="zero"`` is the paper's pure point forecast (the
    quota then uses last week's value itself as the ρ-quantile).
    """

    def __init__(self, std_window_h: int = 28 * 24, min_residuals: int = 24,
                 std: str = "residual", quantiles: Sequence[float] = (0.9,),
                 seed: int = 0) -> None:
        super().__init__("weekly", std_window_h, min_residuals, std, quantiles, seed)
