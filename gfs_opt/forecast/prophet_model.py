"""Prophet per tenant series, refitted daily, conditioned hourly through a state model on its residuals.

Design (measured in BENCHMARKS.md, "Demand forecasting"):
- **Daily Prophet fit** (daily + weekly seasonality, Chinese public holidays) on the last
  ``window_h`` hours (default 4 weeks: demand levels drift; a shorter window follows them better
  and fits faster than 8 weeks), warm-started from the previous day's MAP parameters (Prophet's
  ``fit(df, init=...)``). The fit also evaluates Prophet's mean ``ŷ`` over its window and the next
  ``EXTEND_H`` hours (extended lazily if updates run past it).
- **Hourly state update on the residuals** ``r_t = y_t − ŷ_t`` (``residual="ar1"``): the forecast
  for lead L after the latest completed hour t is ``ŷ_{t+L} + φ^L·r_t``. Hourly demand residuals
  are strongly autocorrelated (a burst lasts hours), so the latest residual carries most of the
  short-term signal Prophet's smooth seasonality misses, and decays back to Prophet with the lead.
  φ ∈ [0, 1] is picked per series at each fit from a grid by the squared error of this rule at
  leads 1..``score_leads`` over the in-sample residuals. ``update`` only appends observations:
  ``r_t`` is read off the latest hour, nothing is refitted. ``residual="none"`` is the plain
  Prophet path (ablation).
- **Spread** per lead from the errors of this rule at hourly origins (base class): out-of-sample
  errors of past forecasts once they exist, in-sample residual errors before. With
  ``calibration_days`` > 0, a series' first fit adds that many hold-out day fits (one per day
  back) whose out-of-sample errors seed the spread, at the cost of ``calibration_days`` extra
  fits. ``calibration="none"`` uses Prophet's own predictive draws instead (ablation).
- **Refit interval.** ``refit_days = k`` refits Prophet only when its last fit of the series is
  at least k days old; in between, ``fit`` keeps the model and only conditions it on the new
  hours (a cost option; default 1 = daily).
- **Solver.** ``solver="map"`` (default with ``shared_fit``) computes Prophet's MAP in process
  (`prophet_map`: the exact optimum of the same posterior, ≈ 2 ms, lower than or equal to Stan's
  objective); ``solver="stan"`` runs CmdStan's L-BFGS as Prophet does (≈ 40 ms per fit).
- **Shared plumbing.** ``shared_fit`` (default) fits through `prophet_fit.fast_prophet`: one Stan
  backend, one holiday validation and one feature matrix per refit window for all series, the
  data file written by the C JSON encoder; with ``solver="stan"`` the fitted parameters are
  bit-identical to plain ``Prophet.fit`` (``shared_fit=False``), at about a third of its CPU time.
- **Short series.** Fewer than ``min_fit_hours`` hours (or a constant series) → `SeasonalETS`,
  so a brand-new tenant never breaks a refit; so does a series whose Stan fit fails (recorded in
  ``failures_``) and a series first seen in ``update`` (until the next fit).

Determinism: Stan's optimiser is seeded and Prophet's sampling uses numpy's global generator, which
is seeded per series and restored afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.forecast.base import (
    MAX_LEAD,
    BaseForecaster,
    SeriesData,
    SeriesForecast,
    lead_grid,
    rows_view,
)
from gfs_opt.forecast.ets import SeasonalETS
from gfs_opt.forecast.prophet_fit import (
    SharedFit,
    fast_prophet,
    import_prophet,
    refit_like,
)

EXTEND_H = 48        # hours of Prophet's mean evaluated past the fitted window at each fit
PHIS = (0.0, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 1.0)
_FEATURE_CACHE_SIZE = 64


@contextlib.contextmanager
def _seeded_global_numpy(seed: int) -> Iterator[None]:
    state = np.random.get_state()
    np.random.seed(seed % (2 ** 32))
    try:
        yield
    finally:
        np.random.set_state(state)


def _ts(hour: int) -> pd.Timestamp:
    return pd.Timestamp(np.datetime64(int(hour), "h"))


@functools.lru_cache(maxsize=256)
def _lead_index(n: int, horizon: int) -> np.ndarray:
    """Row i, column L−1 → i + L: the residual at lead L after the i-th of n consecutive origins
    (read-only; the hourly path asks for the same few shapes every hour)."""
    index = np.arange(1, n + 1)[:, None] + np.arange(horizon)
    index.flags.writeable = False
    return index


def phi_scores(r: np.ndarray, leads: int) -> tuple[list[float], int]:
    """Per φ in `PHIS`: the sum of squared errors of ``φ^L·r_t`` over leads 1..leads, and how
    many errors each sum has."""
    # all φ at once, one row each: a row's sum is the same pairwise sum as the 1-D one's
    scores = [0.0] * len(PHIS)
    count = 0
    for lead in range(1, leads + 1):
        if len(r) <= lead:
            break
        powers = np.array([phi ** lead for phi in PHIS])
        e = r[lead:][None, :] - powers[:, None] * r[:-lead][None, :]
        scores = [s + x for s, x in zip(scores, np.sum(e * e, axis=1).tolist(), strict=True)]
        count += len(r) - lead
    return scores, count


def choose_phi(r: np.ndarray, leads: int) -> float:
    """AR(1) factor of the residuals minimising the squared error of ``φ^L·r_t`` at leads 1..L."""
    scores, count = phi_scores(r, leads)
    best, best_score = 0.0, np.inf
    for phi, score in zip(PHIS, scores, strict=True):
        if count and score / count < best_score - 1e-12:
            best, best_score = phi, score / count
    return best


def _prediction_frame(m: Any, ds: pd.DatetimeIndex) -> pd.DataFrame:
    """What ``m.setup_dataframe`` returns for a frame of dates only (ds, floor, t), without its
    validation and copies (6–7 ms a call, a tenth of a GFS run): for a linear-growth model with
    no extra regressors or conditional seasonalities ``t`` is the same numpy division of the same
    timedeltas (tests/test_forecast_models.py checks it bit for bit); anything else takes
    Prophet's own path."""
    if (m.growth != "linear" or m.logistic_floor or m.extra_regressors
            or any(p["condition_name"] is not None for p in m.seasonalities.values())):
        return m.setup_dataframe(pd.DataFrame({"ds": ds}))
    stamps = ds.to_numpy()
    t = (stamps - np.datetime64(m.start)) / np.timedelta64(m.t_scale)
    floor = 0.0 if m.scaling == "absmax" else m.y_min
    return pd.DataFrame({"ds": stamps, "floor": np.full(len(stamps), floor), "t": t})


def _draw_mean(draws: np.ndarray) -> np.ndarray:
    """``np.nanmean(draws, axis=0)``: Prophet's mean over parameter draws. A MAP fit has one
    draw, whose mean is itself (x / 1 is exact; + 0.0 turns −0.0 into 0.0 as nanmean's sum
    does), without nanmean's ≈ 20 µs."""
    draws = np.asarray(draws)
    if draws.ndim == 2 and draws.shape[0] == 1:
        return draws[0] + 0.0
    return np.nanmean(draws, axis=0)


def _trend(m: Any, stamps: np.ndarray) -> np.ndarray:
    """``m.predict_trend`` at ``stamps`` (datetime64[ns]): for linear growth the same numpy
    operations on the same numbers (bit for bit, tests/test_forecast_models.py) without the
    frames around them — a quarter of a GFS run's forecasting time was that pandas overhead."""
    if (m.growth != "linear" or m.logistic_floor or m.extra_regressors
            or any(p["condition_name"] is not None for p in m.seasonalities.values())):
        return np.asarray(m.predict_trend(_prediction_frame(m, pd.DatetimeIndex(stamps))),
                          dtype=float)
    t = (stamps - np.datetime64(m.start)) / np.timedelta64(m.t_scale)
    k, offset = _draw_mean(m.params["k"]).item(), _draw_mean(m.params["m"]).item()
    deltas = _draw_mean(m.params["delta"])
    floor = np.full(len(stamps), 0.0 if m.scaling == "absmax" else m.y_min)
    return m.piecewise_linear(t, deltas, k, offset, m.changepoints_t) * m.y_scale + floor


@dataclass(slots=True)
class _ProphetState:
    model: Any | None              # fitted Prophet, or None when the fallback handles the series
    fit_end: int = 0               # absolute hour of the last hour Prophet was fitted on
    yhat_start: int = 0            # absolute hour of yhat[0]
    yhat: np.ndarray = field(default_factory=lambda: np.empty(0))  # Prophet's mean per hour
    phi: float = 0.0               # residual AR(1) factor
    fallback: Any | None = None    # SeasonalETS state for short/constant/new/failed series


class ProphetForecaster(BaseForecaster):
    """Daily Prophet per series + an hourly AR(1) update on its residuals (see module doc)."""

    def __init__(self, window_h: int = 28 * 24, daily: bool = True, weekly: bool = True,
                 holidays: str | None = "CN", changepoint_prior_scale: float = 0.05,
                 seasonality_prior_scale: float = 10.0, residual: str = "ar1",
                 score_leads: int = 4, calibration: str = "empirical", calibration_days: int = 0,
                 calibration_window_h: int = 14 * 24, uncertainty_samples: int = 200,
                 refit_days: int = 1, warm_start: bool = True, min_fit_hours: int = 48,
                 shared_fit: bool = True, solver: str | None = None,
                 quantiles: Sequence[float] = (0.9,), seed: int = 0) -> None:
        super().__init__(quantiles, seed)
        if calibration not in ("empirical", "none"):
            raise GfsError(f"calibration must be 'empirical' or 'none', got {calibration!r}")
        if residual not in ("ar1", "none"):
            raise GfsError(f"residual must be 'ar1' or 'none', got {residual!r}")
        if window_h < 2 or uncertainty_samples < 2:
            raise GfsError("Prophet needs window_h ≥ 2 hours and ≥ 2 uncertainty samples")
        if solver not in (None, "map", "stan"):
            raise GfsError(f"solver must be 'map' or 'stan', got {solver!r}")
        if solver == "map" and not shared_fit:
            raise GfsError("solver='map' runs in the shared fit path: use shared_fit=True "
                           "(shared_fit=False is plain Prophet.fit, i.e. Stan)")
        if int(refit_days) != refit_days or refit_days < 1:
            raise GfsError(f"refit_days must be a positive whole number, got {refit_days}")
        self.window_h = window_h
        self.daily = daily
        self.weekly = weekly
        self.holidays = holidays
        self.changepoint_prior_scale = changepoint_prior_scale
        self.seasonality_prior_scale = seasonality_prior_scale
        self.residual = residual
        self.score_leads = score_leads
        self.calibration = calibration
        self.calibration_days = calibration_days
        self.calibration_window_h = calibration_window_h
        self.uncertainty_samples = uncertainty_samples
        self.refit_days = refit_days
        self.warm_start = warm_start
        self.min_fit_hours = min_fit_hours
        self.shared_fit = shared_fit
        # memory kept across refits (warm start; series whose last fit failed → fallback)
        self.warm_params_: dict[str, dict[str, Any]] = {}
        self.failures_: dict[str, str] = {}
        self._fallback = SeasonalETS(quantiles=self.quantiles, seed=seed)
        self._features: dict[tuple[int, int, tuple[str, ...]], tuple[np.ndarray, ...]] = {}
        self._pow_cache: dict[tuple[float, int], np.ndarray] = {}
        self.solver = solver
        self._shared = SharedFit(solver or ("map" if shared_fit else "stan"))

    @property
    def history_hours(self) -> int | None:
        return self.window_h + 24 * self.calibration_days

    def _calibration_hours(self) -> int:
        return self.calibration_window_h

    # ---- fitting -------------------------------------------------------------------------------
    def _new_model(self) -> Any:
        kwargs = {"daily_seasonality": self.daily, "weekly_seasonality": self.weekly,
                  "yearly_seasonality": False, "uncertainty_samples": self.uncertainty_samples,
                  "changepoint_prior_scale": self.changepoint_prior_scale,
                  "seasonality_prior_scale": self.seasonality_prior_scale}
        m = fast_prophet(self._shared, **kwargs) if self.shared_fit else import_prophet()(**kwargs)
        if self.holidays:
            m.add_country_holidays(self.holidays)
        return m

    def _fit_prophet(self, key: str, start: pd.Timestamp, y: np.ndarray) -> Any:
        stamps = (np.datetime64(start.to_datetime64(), "h") + np.arange(len(y))).astype(
            "datetime64[ns]")
        kwargs: dict[str, Any] = {"seed": self.seed}
        init = self.warm_params_.get(key) if self.warm_start else None
        if init is not None:
            kwargs["init"] = init
        window = (stamps[0], len(stamps)) if self.shared_fit else None
        templates = self._shared.templates
        # a model of this window, else of any window: the rest is derived from it
        template = (templates.get(window, next(iter(templates.values()), None))
                    if window is not None else None)
        try:
            m = (refit_like(template, stamps, y, **kwargs) if template is not None
                 else None)
            if m is None:
                m = self._new_model()
                m.fit(pd.DataFrame({"ds": stamps, "y": y}), **kwargs)
            if (window is not None and window not in templates
                    and getattr(m, "window_inputs", None) is not None):
                templates[window] = m
        except RuntimeError:
            if init is None:
                raise
            m = self._new_model()
            # a stale warm start can derail the optimiser
            m.fit(pd.DataFrame({"ds": stamps, "y": y}), seed=self.seed)
        p = m.params
        self.warm_params_[key] = {"k": float(p["k"][0][0]), "m": float(p["m"][0][0]),
                                  "sigma_obs": float(p["sigma_obs"][0][0]),
                                  "delta": np.asarray(p["delta"][0]),
                                  "beta": np.asarray(p["beta"][0])}
        return m

    def _usable(self, y: np.ndarray) -> bool:
        return len(y) >= self.min_fit_hours and float(np.ptp(y)) > 0

    def _before_fit(self, series: dict[str, SeriesData]) -> None:
        self._features = {}
        self._shared.clear()

    def _cold_start(self, data: SeriesData) -> _ProphetState:
        return _ProphetState(None, data.end_hour, fallback=self._fallback._fit_series(data))

    def _fit_series(self, data: SeriesData, prev: Any = None) -> _ProphetState:
        y = data.y[-self.window_h:]
        if not self._usable(y):
            return self._cold_start(data)
        if (isinstance(prev, _ProphetState) and prev.model is not None
                and data.end_hour - prev.fit_end < 24 * self.refit_days):
            return prev  # refit interval not reached: keep the model, already conditioned
        start_h = data.end_hour - len(y) + 1
        try:
            if (self.calibration == "empirical" and self.calibration_days > 0
                    and data.key not in self.oos_errors_):
                self._seed_calibration(data)
            model = self._fit_prophet(data.key, _ts(start_h), y)
        except (RuntimeError, ValueError) as exc:  # Stan gave up: the refit must go on
            self.failures_[data.key] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return self._cold_start(data)
        self.failures_.pop(data.key, None)
        yhat = self._yhat(model, start_h, len(y) + EXTEND_H)
        phi = choose_phi(y - yhat[: len(y)], self.score_leads) if self.residual == "ar1" else 0.0
        return _ProphetState(model, data.end_hour, start_h, yhat, phi)

    def _seed_calibration(self, data: SeriesData) -> None:
        """Hold-out day fits on each of the last ``calibration_days`` days: the errors of the
        update rule after each hour of the held-out day stand in for the past out-of-sample
        errors a series does not have yet."""
        for back in range(self.calibration_days, 0, -1):
            cut = len(data.y) - 24 * back
            y_train = data.y[:cut][-self.window_h:]
            if not self._usable(y_train):
                continue
            start_h = data.start_hour + cut - len(y_train)
            m = self._fit_prophet(data.key, _ts(start_h), y_train)
            yhat = self._yhat(m, start_h, len(y_train) + 24 + MAX_LEAD)
            phi = (choose_phi(y_train - yhat[: len(y_train)], self.score_leads)
                   if self.residual == "ar1" else 0.0)
            state = _ProphetState(m, start_h + len(y_train) - 1, start_h, yhat, phi)
            origins = state.fit_end + np.arange(24)
            self._store_errors(data.key, origins, self._errors(data.key, state, data, origins,
                                                               MAX_LEAD))

    # ---- Prophet's mean ------------------------------------------------------------------------
    def _yhat(self, m: Any, start_h: int, n: int) -> np.ndarray:
        """Prophet's point forecast for ``n`` hours from absolute hour ``start_h``.

        ``predict`` would also simulate uncertainty and rebuild the seasonal/holiday feature
        matrix per call (most of its time); the matrix depends only on the dates and the holidays
        seen in training, so it is shared by all series fitted on the same window.
        """
        stamps = (np.datetime64(int(start_h), "h") + np.arange(n)).astype("datetime64[ns]")
        try:
            # the year grid's rows as arrays (a `fast_prophet` model), else the features of
            # this window computed once per refit
            cached = m.feature_rows(stamps[0], n) if hasattr(m, "feature_rows") else None
            if cached is None:
                names = m.train_holiday_names
                key = (start_h, n, tuple(names) if names is not None else ())
                cached = self._features.get(key)
                if cached is None:
                    features, _, cols, _ = m.make_all_seasonality_features(
                        pd.DataFrame({"ds": stamps}))
                    cached = (features.to_numpy(), cols["additive_terms"].to_numpy(),
                              cols["multiplicative_terms"].to_numpy())
                    if len(self._features) >= _FEATURE_CACHE_SIZE:
                        self._features.clear()
                    self._features[key] = cached
            x, s_a, s_m = cached
            beta = np.asarray(m.params["beta"][0])
            additive = x @ (beta * s_a) * m.y_scale
            multiplicative = x @ (beta * s_m)
            return _trend(m, stamps) * (1 + multiplicative) + additive
        except (AttributeError, KeyError, TypeError, ValueError):  # internals moved: public API
            keep = m.uncertainty_samples
            m.uncertainty_samples = 0
            try:
                return m.predict(pd.DataFrame({"ds": stamps}))["yhat"].to_numpy(dtype=float)
            finally:
                m.uncertainty_samples = keep

    def _extend(self, state: _ProphetState, top: int) -> None:
        """Evaluate Prophet's mean up to absolute hour ``top`` (and ``EXTEND_H`` hours more)
        when the evaluated range ends before it. The chunks follow the hours asked for, in
        order, exactly as before the hourly fast path (the mean's bits may depend on them)."""
        end = state.yhat_start + len(state.yhat)
        if top >= end:
            more = top - end + 1 + EXTEND_H
            state.yhat = np.r_[state.yhat, self._yhat(state.model, end, more)]

    def _yhat_at(self, state: _ProphetState, hours: np.ndarray) -> np.ndarray:
        """Prophet's mean at absolute hours (any shape), extending the evaluated range if needed."""
        hours = np.asarray(hours, dtype=np.int64)
        if hours.size:
            self._extend(state, int(hours.max()))
        pos = hours - state.yhat_start
        out = np.full(hours.shape, np.nan)
        ok = pos >= 0
        out[ok] = state.yhat[pos[ok]]
        return out

    def _powers(self, phi: float, horizon: int) -> np.ndarray:
        """``φ^L`` for L = 1..horizon (the same numpy power every call; kept, not recomputed)."""
        key = (phi, horizon)
        out = self._pow_cache.get(key)
        if out is None:
            out = phi ** np.arange(1, horizon + 1)
            self._pow_cache[key] = out
        return out

    # ---- update / prediction -------------------------------------------------------------------
    def _update_series(self, key: str, state: _ProphetState, data: SeriesData,
                       n_old: int) -> _ProphetState:
        if state.model is None:
            assert state.fallback is not None
            state.fallback = self._fallback._update_series(key, state.fallback, data, n_old)
        return state  # r_t is read off the latest observed hour at prediction time

    def _residual_path(self, state: _ProphetState, data: SeriesData, origin: int,
                       horizon: int) -> np.ndarray:
        """Mean for leads 1..horizon after ``origin``: ŷ + φ^L·r_origin."""
        self._extend(state, origin + horizon)
        p = origin - state.yhat_start
        if p < 0:   # before Prophet's window (never in the hourly path): element by element
            target = origin + np.arange(1, horizon + 1)
            yh = self._yhat_at(state, target)
            r = float(data.values_at(np.array([origin]))[0]
                      - self._yhat_at(state, np.array([origin]))[0])
        else:
            yh = state.yhat[p + 1: p + 1 + horizon]
            i = origin - data.start_hour
            r = float(data.y[i]) - float(state.yhat[p]) if 0 <= i < len(data.y) else np.nan
        if not math.isfinite(r) or self.residual == "none":
            r = 0.0
        return yh + self._powers(state.phi, horizon) * r

    def _forecast(self, key: str, state: _ProphetState, data: SeriesData, horizon: int,
                  n_samples: int = 0) -> SeriesForecast:
        if state.model is None:
            assert state.fallback is not None
            return self._fallback._forecast(key, state.fallback, data, horizon, n_samples)
        mean = self._residual_path(state, data, data.end_hour, horizon)
        if self.calibration == "empirical":
            return SeriesForecast(mean)
        ds = data.future_ds(horizon)
        _, draws = self._draw(key, state.model, ds, max(n_samples, self.uncertainty_samples))
        centred = draws - draws.mean(axis=0)
        quantiles = {lv: mean + np.quantile(centred, lv, axis=0) for lv in self.quantiles}
        samples = mean + centred if n_samples else None
        return SeriesForecast(mean, centred.std(axis=0), quantiles, samples)

    def _errors(self, key: str, state: _ProphetState, data: SeriesData, origins: np.ndarray,
                horizon: int) -> np.ndarray:
        if state.model is None:
            assert state.fallback is not None
            return self._fallback._errors(key, state.fallback, data, origins, horizon)
        origins = np.asarray(origins, dtype=np.int64)
        n = len(origins)
        if n and int(origins[-1]) - int(origins[0]) == n - 1 and int(origins[0]) >= state.yhat_start:
            # consecutive origins (every hourly caller): residuals once over the hours spanned,
            # r_target read off them by a sliding window — the same numbers as per element
            o0 = int(origins[0])
            self._extend(state, o0 + n - 1 + horizon)
            span = n + horizon
            y = data.values_from(o0, span)
            r = y - state.yhat[o0 - state.yhat_start: o0 - state.yhat_start + span]
            r_target = r[_lead_index(n, horizon)]
            r_origin = r[:n]
        else:
            target = lead_grid(origins, horizon)
            r_target = data.values_at(target) - self._yhat_at(state, target)
            r_origin = data.values_at(origins) - self._yhat_at(state, origins)
        if self.residual == "none":
            return np.array(r_target)
        return r_target - self._powers(state.phi, horizon)[None, :] * r_origin[:, None]

    def _hourly_batch(self, horizon: int) -> dict[str, tuple[np.ndarray, tuple[np.ndarray, ...]]]:
        """(mean, `_calibration_parts`) of the series in the hourly steady state — a Prophet
        model whose row buffer lacks exactly the last ``horizon`` origins, all inside its mean's
        range — computed for all of them at once: `_forecast` and `_errors` per series were
        most of the hourly forecast's time (≈ 25 numpy calls each on arrays of 4 to 8 hours).
        Every number is the same element-wise operation on the same operands as theirs (a row
        of the stacked arrays is one series' array), so the results are bit for bit theirs."""
        if self.calibration != "empirical" or self.residual != "ar1":
            return {}
        hours = self._calibration_hours()
        picked: list[tuple[str, SeriesData, _ProphetState, Any, int, int, int]] = []
        for key, data in self.series_.items():
            state = self.states_[key]
            end = data.end_hour
            if state.model is None or end < state.yhat_start:
                continue
            lo = max(end - hours, data.start_hour)
            cache = self._row_cache(key, lo, end, horizon)
            start = cache.lo + cache.n
            if end - start != horizon or start < state.yhat_start:
                continue
            self._extend(state, end + horizon)     # the hours `_forecast` evaluates first
            picked.append((key, data, state, cache, lo, end, start))
        if not picked:
            return {}
        n, span = horizon, 2 * horizon             # origins start..end−1, targets to end+H−1
        y = np.empty((len(picked), span))          # observed hours, NaN after `end`
        yhat = np.empty((len(picked), span + 1))   # Prophet's mean, hours start..end+H
        powers = np.empty((len(picked), horizon))
        for g, (_, data, state, _, _, _, start) in enumerate(picked):
            data.values_from(start, span, out=y[g])
            p0 = start - state.yhat_start
            yhat[g] = state.yhat[p0: p0 + span + 1]
            powers[g] = self._powers(state.phi, horizon)
        r = y - yhat[:, :span]
        rows = r[:, _lead_index(n, horizon)] - powers[:, None, :] * r[:, :n, None]
        r_end = r[:, n].copy()                     # the residual at the origin `end`
        r_end[~np.isfinite(r_end)] = 0.0
        means = yhat[:, n + 1: n + 1 + horizon] + powers * r_end[:, None]
        out: dict[str, tuple[np.ndarray, tuple[np.ndarray, ...]]] = {}
        for g, (key, _, _, cache, lo, end, start) in enumerate(picked):
            cache.buf[start - cache.lo: end - cache.lo] = rows[g]
            current = rows_view(cache, lo, end, horizon)
            out[key] = (means[g], self._parts_around(key, current, lo, end, horizon))
        return out

    def _draw(self, key: str, m: Any, ds: pd.DatetimeIndex,
              n: int) -> tuple[np.ndarray, np.ndarray]:
        """Prophet's point forecast and n predictive draws, shape (n, len(ds)).

        The generator is seeded per series (seed + CRC of the key): one shared seed would make the
        tenants' draws identical, i.e. perfectly correlated when summed into a pool.
        """
        with _seeded_global_numpy(self.seed + zlib.crc32(key.encode())):
            try:
                return _draw_fast(m, ds, n)
            except (AttributeError, KeyError, TypeError):  # Prophet internals moved: public API
                return _draw_public(m, ds, n, self.uncertainty_samples)


def _draw_fast(m: Any, ds: pd.DatetimeIndex, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Point forecast and draws sharing one seasonal-feature matrix.

    ``predict`` + ``predictive_samples`` would build Prophet's feature matrix (holidays included)
    twice, which is most of the prediction time; this computes exactly what they compute
    (``yhat = trend·(1 + X·β_m) + X·β_a·y_scale``, draws from ``sample_model_vectorized``) once.
    """
    df = m.setup_dataframe(pd.DataFrame({"ds": ds}))
    features, _, cols, _ = m.make_all_seasonality_features(df)
    s_a, s_m = cols["additive_terms"], cols["multiplicative_terms"]
    beta = np.asarray(m.params["beta"][0])
    x = features.to_numpy()
    additive = x @ (beta * s_a.to_numpy()) * m.y_scale
    multiplicative = x @ (beta * s_m.to_numpy())
    mean = np.asarray(m.predict_trend(df), dtype=float) * (1 + multiplicative) + additive
    sims = m.sample_model_vectorized(df=df, seasonal_features=features, iteration=0, s_a=s_a,
                                     s_m=s_m, n_samples=n)
    return mean, np.array([sim["yhat"] for sim in sims], dtype=float)


def _draw_public(m: Any, ds: pd.DatetimeIndex, n: int, default_n: int) -> tuple[np.ndarray, np.ndarray]:
    future = pd.DataFrame({"ds": ds})
    m.uncertainty_samples = 0  # the point forecast only; samples are drawn below
    mean = m.predict(future)["yhat"].to_numpy()
    m.uncertainty_samples = n
    draws = m.predictive_samples(future)["yhat"]
    m.uncertainty_samples = default_n
    return mean, np.asarray(draws, dtype=float).T
