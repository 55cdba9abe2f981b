"""Naive baselines: seasonal naive and the paper's previous-week-peak ablation.

Both repeat the value one season ago. Their spread is measured, not assumed: the standard deviation
of the rule's own errors over the fitted history, ``y_t − y_{t−k·m}`` for the season ``m`` and the
number ``k = ⌈lead/m⌉`` of seasons the forecast reaches back (``k = 1`` for every lead ≤ m). With
fewer than ``min_residuals`` such errors the series gets `cold_start_std`. Before one full season
of history exists the last value is repeated (naive).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gfs_opt.errors import GfsError
from gfs_opt.forecast.base import BaseForecaster, SeriesData, SeriesForecast, cold_start_std

SEASONS = {"daily": 24, "weekly": 168}


def season_hours(season: str | int) -> int:
    if isinstance(season, str):
        if season not in SEASONS:
            raise GfsError(f"unknown season {season!r}; expected one of {sorted(SEASONS)} or hours")
        return SEASONS[season]
    if int(season) != season or season < 1:
        raise GfsError(f"season must be a positive number of hours, got {season}")
    return int(season)


@dataclass(slots=True)
class _NaiveState:
    std_by_k: dict[int, float]
    cold_std: float


class SeasonalNaive(BaseForecaster):
    """Forecast for lead L = the value ``m·⌈L/m⌉`` hours before the target (m = season).

    Parameters: ``season`` ("daily", "weekly" or hours), ``std_window_h`` (hours of history used to
    measure the rule's errors), ``min_residuals`` (fewer errors → cold-start spread),
    ``std`` ("residual" = as above, "zero" = a point forecast with no spread).
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

    def _fit_series(self, data: SeriesData) -> _NaiveState:
        y = data.y[-self.history_hours:]
        m = self._m
        stds: dict[int, float] = {}
        for k in (1, 2):
            lag = k * m
            if len(y) > lag:
                err = y[lag:] - y[:-lag]
                err = err[-self.std_window_h:]
                if len(err) >= self.min_residuals:
                    stds[k] = float(np.sqrt(np.mean(err ** 2)))
        return _NaiveState(stds, cold_start_std(y))

    def _forecast(self, key: str, state: _NaiveState, data: SeriesData,
                  horizon: int, n_samples: int = 0) -> SeriesForecast:
        y, m, n = data.y, self._m, len(data.y)
        lead = np.arange(1, horizon + 1)
        k = np.ceil(lead / m).astype(int)
        src = n - 1 + lead - k * m
        mean = np.where(src >= 0, y[np.clip(src, 0, n - 1)], y[-1])
        if self.std == "zero":
            return SeriesForecast(mean, np.zeros(horizon))
        std = np.empty(horizon)
        for i, kk in enumerate(k):
            std[i] = state.std_by_k.get(int(kk), state.std_by_k.get(1, state.cold_std))
            if src[i] < 0:
                std[i] = state.cold_std
        return SeriesForecast(mean, std)


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
