"""What the simulator talks to: feed hourly usage, refit daily, read pool forecasts per refresh.

Units: GPUs (not milli-GPU) — usage passed to `observe` and every mean/std/sample returned.

Timeline (GFS-SPEC §2.1):
- ``observe(t, usage)``: HP GPUs in use per (pool, org); the simulator calls it once per hour with
  the maximum of the hour that just ended (t inside that hour); per-minute samples work too (the
  series keeps the hourly maximum).
- ``refit(t)``: the daily, expensive step (00:00): fit the model on the complete hours before t.
- ``pool_forecasts(t)``: at each quota refresh. The first call in an hour conditions the model on
  every complete hour before t that it has not seen yet (``model.update`` with just those hours:
  cheap, no refit) and predicts from the latest completed hour, so the current hour is lead 1;
  it returns hours ``h = 0..H−1`` from the current hour. Later calls in the same hour return the
  cached result (the 300 s refreshes inside one hour cost nothing). If hours are missing between
  the latest observed hour and t, the forecast reaches over them (leads ``gap+1..gap+H``).
  Before the first fit (or with no history) there is no forecast: ``{}``.

Logs: ``refit_log`` (t, seconds, series, pools per fit) and ``update_log`` (t, seconds, hours,
series per hourly update + predict).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.forecast.aggregate import (
    METHODS,
    PoolLayout,
    pool_forecasts,
    pool_forecasts_arrays,
    pool_layout,
    pool_of,
)
from gfs_opt.forecast.base import BaseForecaster, Forecaster, SeriesData, qcol
from gfs_opt.forecast.pool_calibration import PoolCalibration, pool_demand
from gfs_opt.forecast.registry import make_forecaster
from gfs_opt.forecast.series import HOUR_S, HourlyMaxSeries
from gfs_opt.model import PoolForecast
from gfs_opt.traces.base import ALIBABA_ORIGIN

#: the provider's pool aggregations: `gfs_opt.forecast.aggregate`'s, and the independent sum with
#: its spread calibrated on the pool's own errors (`gfs_opt.forecast.pool_calibration`)
AGGREGATIONS = (*METHODS, "calibrated")

_HOUR = pd.Timedelta(hours=1)


class _Rows(NamedTuple):
    """A prediction's rows (series × steps, those kept: leads 1..H from the current hour) and
    where each is summed; the same while the series, steps and series' last hours relative to
    the current hour (``key``) stay."""

    key: tuple[list[str], int, tuple[int, ...]]
    keep: np.ndarray
    series: np.ndarray
    h: np.ndarray
    layout: PoolLayout


class ForecastProvider:
    """Series builder + forecaster + pool aggregation behind four calls (see module doc)."""

    def __init__(self, model: str | Forecaster = "prophet", horizon_h: int = 4, rho: float = 0.9,
                 aggregation: str = "independent", n_samples: int = 0,
                 series_pool: Mapping[str, str] | None = None, refit_from: float = 0.0,
                 origin: pd.Timestamp | str = ALIBABA_ORIGIN, seed: int = 0) -> None:
        if horizon_h < 1:
            raise GfsError(f"forecast horizon must be ≥ 1 hour, got {horizon_h}")
        if aggregation not in AGGREGATIONS:
            raise GfsError(f"unknown pool aggregation {aggregation!r}; expected one of "
                           f"{list(AGGREGATIONS)}")
        self.model: Forecaster = (make_forecaster(model, quantiles=(rho,), seed=seed)
                                  if isinstance(model, str) else model)
        self.horizon_h = int(horizon_h)
        self.rho = float(rho)
        # the pools' sum: "calibrated" is the independent sum, its spread then scaled
        self.aggregation = aggregation
        self._sum = "independent" if aggregation == "calibrated" else aggregation
        self.calibration = PoolCalibration() if aggregation == "calibrated" else None
        self.n_samples = int(n_samples)
        self.series_pool = dict(series_pool) if series_pool is not None else None
        self.refit_from = float(refit_from)
        self.series = HourlyMaxSeries(origin)
        self._seen: int | None = None       # latest hour index the model is conditioned on
        self._cache: tuple[int, dict[str, PoolForecast]] | None = None
        self._with_history: set[str] | None = None   # pools_with_history until the next observe
        self.refit_log: list[dict[str, float]] = []    # t, seconds, series, pools per refit
        self.update_log: list[dict[str, float]] = []   # t, seconds, hours, series per update
        # hourly path on arrays for BaseForecaster models (False: through the history and
        # prediction frames, as for any Forecaster; the tests compare the two)
        self.fast = True
        self._origin_h: int | bool | None = None
        self._pred_rows: _Rows | None = None   # the last prediction's rows and their layout

    def observe(self, t: float, usage: Mapping[tuple[str, str], float]) -> None:
        """HP GPUs in use per (pool, org) during the hour containing t (seconds since origin)."""
        self.series.observe(t, usage)
        self._with_history = None

    def _since(self, t: float) -> float | None:
        hours = getattr(self.model, "history_hours", None)
        return None if hours is None else t - (hours + 1) * HOUR_S

    def _hour_index(self, ds: pd.Timestamp) -> int:
        return int((pd.Timestamp(ds) - self.series.origin) // _HOUR)

    def refit(self, t: float) -> bool:
        """Fit on the complete hours before t. Returns False (keeping the fitted model) when
        t < refit_from or no history exists."""
        if t < self.refit_from:
            return False
        t0 = time.perf_counter()
        fitted = (self._fit_arrays(self.model, t)
                  if self.fast and isinstance(self.model, BaseForecaster) else None)
        if fitted is None:
            hist = self.series.history(since=self._since(t), until=t)
            if hist.empty:
                return False
            self.model.fit(hist)
            self._seen = self._hour_index(hist["ds"].max())
            names = set(hist["series"].unique())
        elif not fitted:
            return False
        else:
            names = fitted
        self._cache = None
        self.refit_log.append({"t": float(t), "seconds": time.perf_counter() - t0,
                               "series": float(len(names)),
                               "pools": float(len({pool_of(s, self.series_pool)
                                                   for s in names}))})
        return True

    def _fit_arrays(self, model: BaseForecaster, t: float) -> set[str] | None:
        """`refit` without the history frame: the series `split_series` would cut from it, after
        the model's `_trim`, handed over as arrays (`BaseForecaster.fit_series`). The names
        fitted (empty: no history), or None where the frame path must decide (origin off the
        hour, non-finite usage)."""
        base = self._origin_hour()
        if base is None:
            return None
        until = int(t // HOUR_S)
        since = self._since(t)
        lo = None if since is None else int(since // HOUR_S)
        last = self.series.last_complete(until)       # the frame's latest hour, if any
        if last is None or (lo is not None and last < lo):
            return set()
        hours = model.history_hours
        if hours is not None:          # `_trim`: hours within history_hours of the latest one
            lo = max(lo if lo is not None else last - hours + 1, last - hours + 1)
        new = self.series.recent(lo if lo is not None else -(2 ** 62), last + 1)
        if not new or not all(np.isfinite(y).all() for _, _, y in new):
            return None if new else set()
        model.fit_series(SeriesData(name, base + first, y) for name, first, y in new)
        self._seen = last
        return {name for name, _, _ in new}

    def _condition(self, hour: int) -> int:
        """Update the model with complete hours in (seen, hour); returns how many were added."""
        assert self._seen is not None
        if self._seen >= hour - 1:
            return 0
        if self.fast and isinstance(self.model, BaseForecaster):
            added = self._condition_arrays(self.model, hour)
            if added is not None:
                return added
        hist = self.series.history(since=(self._seen + 1) * HOUR_S, until=hour * HOUR_S)
        if hist.empty:
            return 0
        self.model.update(hist)
        added = self._hour_index(hist["ds"].max()) - self._seen
        self._seen += added
        return added

    def _origin_hour(self) -> int | None:
        """Absolute hour (since 1970) of hour index 0, as the history frame's ``ds`` gives it;
        None when the origin is not on a whole hour (the frame path reports that)."""
        if self._origin_h is None:
            ds = pd.Series(self.series.origin + pd.to_timedelta(np.zeros(1, np.int64), unit="h"))
            stamp = ds.to_numpy(dtype="datetime64[ns]")[0]
            whole = stamp.astype("datetime64[h]")
            self._origin_h = (int(whole.astype(np.int64))
                              if not np.isnat(stamp) and whole == stamp else False)
        return None if self._origin_h is False else self._origin_h

    def _condition_arrays(self, model: BaseForecaster, hour: int) -> int | None:
        """`_condition` without the history frame: the new hours go to the model as arrays
        (`BaseForecaster.update_series`), as `split_series` would have cut them from the frame.
        None: not applicable (origin off the hour, non-finite usage) — the frame path decides."""
        assert self._seen is not None
        base = self._origin_hour()
        if base is None:
            return None
        new = self.series.recent(self._seen + 1, hour)
        if not new:
            return 0
        if not all(np.isfinite(y).all() for _, _, y in new):
            return None
        model.update_series(SeriesData(name, base + first, y) for name, first, y in new)
        added = max(first + len(y) - 1 for _, first, y in new) - self._seen
        self._seen += added
        return added

    def pool_forecasts(self, t: float) -> dict[str, PoolForecast]:
        """Forecast per pool for hours h = 0..H−1 from the current hour (GPUs)."""
        hour = int(t // HOUR_S)
        if self._cache is not None and self._cache[0] == hour:
            return self._cache[1]
        if self._seen is None:
            self._cache = (hour, {})
            return {}
        t0 = time.perf_counter()
        added = self._condition(hour)
        out = self._predict(hour)
        if self.calibration is not None:
            out = self._calibrated(hour, out)
        self.update_log.append({"t": float(t), "seconds": time.perf_counter() - t0,
                                "hours": float(added), "series": float(len(self.series.names))})
        self._cache = (hour, out)
        return out

    def _calibrated(self, hour: int, out: dict[str, PoolForecast]) -> dict[str, PoolForecast]:
        """Aggregation ``calibrated``: score the forecasts whose hours are complete, then scale
        this hour's spreads (`gfs_opt.forecast.pool_calibration`)."""
        cal = self.calibration
        assert cal is not None
        since = cal.pending_since()
        if since is not None and since < hour:
            rows = self.series.recent(since, hour)
            pools = {name: pool_of(name, self.series_pool) for name, _f, _y in rows}
            cal.score(hour, pool_demand(rows, pools, since, hour - since), since)
        return cal.issue(hour, out)

    def _predict(self, hour: int) -> dict[str, PoolForecast]:
        """Per-series forecasts re-indexed so that h = 1 is ``hour``, aggregated per pool."""
        assert self._seen is not None
        gap = max(0, hour - (self._seen + 1))
        steps = gap + self.horizon_h
        if (self.fast and not self.n_samples and isinstance(self.model, BaseForecaster)
                and self._origin_hour() is not None):
            return self._predict_arrays(self.model, hour, steps)
        pred = self.model.predict(steps)
        if pred.empty:
            return {}
        first = int(np.datetime64(self.series.origin + hour * _HOUR, "h").astype(np.int64))
        target = pred["ds"].to_numpy(dtype="datetime64[ns]").astype("datetime64[h]").astype(
            np.int64)
        h = target - first + 1
        keep = (h >= 1) & (h <= self.horizon_h)
        series = pred["series"].to_numpy(dtype=object)
        cols = {"series": series[keep], "h": h[keep]}
        for col in ("mean", "std", qcol(self.rho)):
            if col in pred.columns:
                cols[col] = pred[col].to_numpy(dtype=float)[keep]
        samples = None
        if self.n_samples:
            raw = self.model.predict_samples(steps, self.n_samples)
            lead1 = dict(zip(series[pred["h"].to_numpy() == 1],
                             target[pred["h"].to_numpy() == 1], strict=True))
            samples = {}
            for key, draws in raw.items():
                off = first - int(lead1[key])
                if off >= 0 and off + self.horizon_h <= draws.shape[1]:
                    samples[key] = draws[:, off:off + self.horizon_h]
        return pool_forecasts(pd.DataFrame(cols), self.series_pool, self._sum, self.rho,
                              samples)

    def _predict_arrays(self, model: BaseForecaster, hour: int,
                        steps: int) -> dict[str, PoolForecast]:
        """`_predict` without the prediction frame: the same rows (series in key order, h
        ascending), filtered and summed per pool in the same order."""
        # the independent sum reads means and spreads only
        with_q = self._sum != "independent"
        fcs = model.forecasts(steps, quantiles=with_q)
        if not fcs:
            return {}
        base = self._origin_hour()
        assert base is not None
        keys = sorted(fcs)
        first = base + hour
        # the rows' series and leads: the same from hour to hour while no series is added or
        # falls behind, and so is where each row is summed
        offsets = tuple(model.series_[k].end_hour - first for k in keys)
        rows = self._pred_rows
        if rows is None or rows.key != (keys, steps, offsets):
            h = (np.array(offsets, dtype=np.int64)[:, None]
                 + np.arange(1, steps + 1)[None, :] + 1).ravel()
            keep = (h >= 1) & (h <= self.horizon_h)
            series = np.repeat(np.array(keys, dtype=object), steps)[keep]
            rows = self._pred_rows = _Rows((keys, steps, offsets), keep, series, h[keep],
                                      pool_layout(series, h[keep], self.series_pool))
        keep = rows.keep
        mean = np.concatenate([fcs[k].mean for k in keys])[keep]
        std = np.concatenate([fcs[k].std for k in keys])[keep]
        # the frame's q<ρ> column: the last level of that name (assemble writes them in order)
        level = [lv for lv in model.quantiles if with_q and qcol(lv) == qcol(self.rho)]
        q = (np.concatenate([fcs[k].quantiles[level[-1]] for k in keys])[keep]  # type: ignore[index]
             if level else None)
        return pool_forecasts_arrays(rows.series, rows.h, mean, std, q, self.series_pool,
                                     self._sum, self.rho, layout=rows.layout)

    def has_history(self, pool: str) -> bool:
        """Whether any tenant of the pool has used HP GPUs so far."""
        return pool in self.pools_with_history()

    def pools_with_history(self) -> set[str]:
        """Pools where any tenant has used HP GPUs so far (asked at every refresh; the answer
        changes only with `observe`, hourly)."""
        if self._with_history is None:
            self._with_history = {pool_of(name, self.series_pool)
                                  for name, v in self.series.peaks().items() if v > 0}
        return self._with_history
