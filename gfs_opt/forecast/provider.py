"""What the simulator talks to: feed usage samples, refit daily, read pool forecasts per refresh.

Units: GPUs (not milli-GPU) — usage passed to `observe` and every mean/std/sample returned.

Timeline: ``observe`` once per simulated minute; ``refit(t)`` daily at 00:00 fits the model on the
complete hours before ``t`` and precomputes the next ``24 + horizon_h`` hours of pool forecasts;
``pool_forecasts(t)`` then only slices hours ``h = 0..H−1`` from the current hour (cached per
hour). If a refit is skipped and the slice runs past the precomputed hours, the last precomputed
hour is repeated. Before the first refit (or with no history) there is no forecast: ``{}``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np
import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.forecast.aggregate import METHODS, pool_forecasts, pool_of
from gfs_opt.forecast.base import Forecaster
from gfs_opt.forecast.registry import make_forecaster
from gfs_opt.forecast.series import HOUR_S, HourlyMaxSeries
from gfs_opt.model import PoolForecast
from gfs_opt.traces.base import ALIBABA_ORIGIN


class ForecastProvider:
    """Series builder + forecaster + pool aggregation behind three calls (see module doc)."""

    def __init__(self, model: str | Forecaster = "prophet", horizon_h: int = 4, rho: float = 0.9,
                 aggregation: str = "independent", n_samples: int = 0,
                 series_pool: Mapping[str, str] | None = None, refit_from: float = 0.0,
                 origin: pd.Timestamp | str = ALIBABA_ORIGIN, seed: int = 0) -> None:
        if horizon_h < 1:
            raise GfsError(f"forecast horizon must be ≥ 1 hour, got {horizon_h}")
        if aggregation not in METHODS:
            raise GfsError(f"unknown pool aggregation {aggregation!r}; expected one of {list(METHODS)}")
        self.model: Forecaster = (make_forecaster(model, quantiles=(rho,), seed=seed)
                                  if isinstance(model, str) else model)
        self.horizon_h = int(horizon_h)
        self.rho = float(rho)
        self.aggregation = aggregation
        self.n_samples = int(n_samples)
        self.series_pool = dict(series_pool) if series_pool is not None else None
        self.refit_from = float(refit_from)
        self.series = HourlyMaxSeries(origin)
        self.steps = 24 + self.horizon_h
        self._first_hour: int | None = None            # hour index of precomputed column 0
        self._full: dict[str, PoolForecast] = {}
        self._cache: tuple[int, dict[str, PoolForecast]] | None = None
        self.refit_log: list[dict[str, float]] = []    # t, seconds, series, pools per refit

    def observe(self, t: float, usage: Mapping[tuple[str, str], float]) -> None:
        """HP GPUs in use per (pool, org) at time t (seconds since origin)."""
        self.series.observe(t, usage)

    def _since(self, t: float) -> float | None:
        hours = getattr(self.model, "history_hours", None)
        return None if hours is None else t - (hours + 1) * HOUR_S

    def refit(self, t: float) -> bool:
        """Fit on the complete hours before t and precompute the day's pool forecasts.

        Returns False (and keeps the previous forecasts) when t < refit_from or no history exists.
        """
        if t < self.refit_from:
            return False
        t0 = time.perf_counter()
        hist = self.series.history(since=self._since(t), until=t)
        if hist.empty:
            return False
        self.model.fit(hist)
        pred = self.model.predict(self.steps)
        samples = self.model.predict_samples(self.steps, self.n_samples) if self.n_samples else None
        self._full = pool_forecasts(pred, self.series_pool, self.aggregation, self.rho, samples)
        last = pd.Timestamp(hist["ds"].max())
        self._first_hour = int((last - self.series.origin) // pd.Timedelta(hours=1)) + 1
        self._cache = None
        self.refit_log.append({"t": float(t), "seconds": time.perf_counter() - t0,
                               "series": float(hist["series"].nunique()),
                               "pools": float(len(self._full))})
        return True

    def pool_forecasts(self, t: float) -> dict[str, PoolForecast]:
        """Forecast per pool for hours h = 0..H−1 from the current hour (GPUs)."""
        hour = int(t // HOUR_S)
        if self._cache is not None and self._cache[0] == hour:
            return self._cache[1]
        out: dict[str, PoolForecast] = {}
        if self._first_hour is not None and hour >= self._first_hour:
            off = hour - self._first_hour
            idx = np.minimum(np.arange(off, off + self.horizon_h), self.steps - 1)
            for pool, fc in self._full.items():
                out[pool] = PoolForecast(fc.mean[idx], fc.std[idx],
                                         None if fc.samples is None else fc.samples[:, idx])
        self._cache = (hour, out)
        return out

    def has_history(self, pool: str) -> bool:
        """Whether any tenant of the pool has used HP GPUs so far."""
        return any(v > 0 and pool_of(name, self.series_pool) == pool
                   for name, v in self.series.peaks().items())
