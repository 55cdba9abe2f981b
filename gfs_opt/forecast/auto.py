"""Prophet where a series has enough history, the fast model everywhere else.

A series goes to Prophet when, within the model's window, at least ``min_history_h`` hours have
passed since its first non-zero hour, at least ``min_active_frac`` of those hours are non-zero,
and it is not constant. Everything else — new tenants, sparse or all-zero series — goes to
`SeasonalETS`, which fits in well under a millisecond and never fails. The decision is re-taken at
every fit, so a tenant moves to Prophet once it has two weeks of history; a series first seen in
``update`` goes to `SeasonalETS` until then. ``update`` advances each series with its route's
rule (ETS level, Prophet residual), and the spread is measured per lead on that rule's errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gfs_opt.forecast.base import BaseForecaster, SeriesData, SeriesForecast
from gfs_opt.forecast.ets import SeasonalETS
from gfs_opt.forecast.prophet_model import ProphetForecaster


class AutoForecaster(BaseForecaster):
    """Routes each series to `ProphetForecaster` or `SeasonalETS` (see module doc)."""

    def __init__(self, min_history_h: int = 14 * 24, min_active_frac: float = 0.25,
                 prophet_params: Mapping[str, Any] | None = None,
                 fast_params: Mapping[str, Any] | None = None,
                 quantiles: Sequence[float] = (0.9,), seed: int = 0) -> None:
        super().__init__(quantiles, seed)
        self.min_history_h = min_history_h
        self.min_active_frac = min_active_frac
        self.prophet_params = dict(prophet_params or {})
        self.fast_params = dict(fast_params or {})
        self.prophet = ProphetForecaster(**{"quantiles": self.quantiles, "seed": seed,
                                            **self.prophet_params})
        self.fast = SeasonalETS(**{"quantiles": self.quantiles, "seed": seed, **self.fast_params})
        self.routes_: dict[str, str] = {}

    @property
    def history_hours(self) -> int | None:
        return max(self.prophet.history_hours or 0, self.fast.history_hours or 0,
                   self.min_history_h)

    def wants_prophet(self, y: np.ndarray) -> bool:
        active = np.flatnonzero(y > 0)
        if len(active) == 0 or float(np.ptp(y)) == 0.0:
            return False
        span = len(y) - int(active[0])
        return span >= self.min_history_h and len(active) / span >= self.min_active_frac

    def _calibration_hours(self) -> int:
        return self.prophet.calibration_window_h

    def _before_fit(self, series: dict[str, SeriesData]) -> None:
        # the Prophet route's hold-out seeding writes into this model's error store
        self.prophet.oos_errors_ = self.oos_errors_
        self.prophet._before_fit(series)

    def _fit_series(self, data: SeriesData, prev: Any = None) -> tuple[str, Any]:
        y = data.y[-(self.prophet.history_hours or len(data.y)):]
        if self.wants_prophet(y):
            self.routes_[data.key] = "prophet"
            inner = prev[1] if prev is not None and prev[0] == "prophet" else None
            return "prophet", self.prophet._fit_series(data, inner)
        self.routes_[data.key] = "ets"
        return "ets", self.fast._fit_series(data)

    def _cold_start(self, data: SeriesData) -> tuple[str, Any]:
        self.routes_[data.key] = "ets"
        return "ets", self.fast._fit_series(data)

    def _model(self, route: str) -> BaseForecaster:
        return self.prophet if route == "prophet" else self.fast

    def _update_series(self, key: str, state: tuple[str, Any], data: SeriesData,
                       n_old: int) -> tuple[str, Any]:
        route, inner = state
        return route, self._model(route)._update_series(key, inner, data, n_old)

    def _forecast(self, key: str, state: tuple[str, Any], data: SeriesData, horizon: int,
                  n_samples: int = 0) -> SeriesForecast:
        route, inner = state
        return self._model(route)._forecast(key, inner, data, horizon, n_samples)

    def _errors(self, key: str, state: tuple[str, Any], data: SeriesData, origins: np.ndarray,
                horizon: int) -> np.ndarray:
        route, inner = state
        return self._model(route)._errors(key, inner, data, origins, horizon)
