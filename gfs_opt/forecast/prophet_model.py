"""Prophet per tenant series: daily + weekly seasonality, Chinese public holidays, calibrated spread.

Choices (measured on the real per-GPU-model hourly demand, see BENCHMARKS.md):
- **Short window.** Each fit sees the last ``window_h`` hours (default 4 weeks): demand levels
  drift, and a shorter window both follows them better and fits faster than 8 weeks.
- **Warm start.** The previous day's MAP parameters initialise the next fit (Prophet's
  ``fit(df, init=...)``); Prophet itself falls back to its default init when shapes differ.
- **Uncertainty.** Prophet's predictive samples (trend-change simulation + observation noise) give
  the shape of the forecast distribution. Prophet's noise level is an in-sample estimate and
  hourly demand residuals are strongly autocorrelated, so those intervals are too narrow out of
  sample (0.9-quantile coverage ≈ 0.83 on the real pools). The spread is therefore rescaled by a
  factor ``k`` learnt from the model's *own past out-of-sample errors*: each refit scores the
  previous forecast against the hours that have since been observed, keeps the standardised errors
  ``z = (y − ŷ)/σ`` of the last ``calibration_window_h`` hours and sets
  ``k = q_ρ(z) / Φ⁻¹(ρ)`` (``calibration="quantile"``, ρ = ``calibration_level``) or
  ``k = rms(z)`` (``"rms"``), shrunk towards 1 with the weight of ``calibration_prior_h`` errors
  (a quantile of a few dozen autocorrelated errors is noisy) and clipped to [0.5, 5]. Before any such error exists, the first fit
  of a series runs ``calibration_days`` hold-out day-ahead fits (one per day back) to seed them,
  so the first refit costs ``1 + calibration_days`` fits per series and later ones one.
- **Short series.** Fewer than ``min_fit_hours`` hours (or a constant series) → `SeasonalETS`,
  so a brand-new tenant never breaks a refit; so does a series whose Stan fit fails
  (recorded in ``failures_``).

Determinism: Stan's optimiser is seeded and Prophet's sampling uses numpy's global generator, which
is seeded per series and restored afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from gfs_opt.errors import GfsError
from gfs_opt.forecast.base import BaseForecaster, SeriesData, SeriesForecast
from gfs_opt.forecast.ets import SeasonalETS

SCALE_BOUNDS = (0.5, 5.0)
MIN_CALIBRATION_ERRORS = 24


def import_prophet() -> Any:
    """Import Prophet with cmdstanpy's per-fit INFO chatter and the plotly warning silenced."""
    logging.getLogger("prophet.plot").setLevel(logging.CRITICAL)
    stan_log = logging.getLogger("cmdstanpy")
    if not stan_log.handlers:
        # cmdstanpy installs a DEBUG-level stream handler unless one exists already
        stan_log.addHandler(logging.NullHandler())
    stan_log.setLevel(logging.WARNING)
    logging.getLogger("prophet").setLevel(logging.WARNING)
    from prophet import Prophet

    return Prophet


@contextlib.contextmanager
def _seeded_global_numpy(seed: int) -> Iterator[None]:
    state = np.random.get_state()
    np.random.seed(seed % (2 ** 32))
    try:
        yield
    finally:
        np.random.set_state(state)


@dataclass(slots=True)
class _ProphetState:
    model: Any | None          # fitted Prophet, or None when the fallback handles the series
    scale: float               # calibration factor k applied to the spread
    fallback: Any | None = None  # fallback state (SeasonalETS) for short/constant series


class ProphetForecaster(BaseForecaster):
    """Prophet per series with calibrated predictive spread and warm-started daily refits."""

    def __init__(self, window_h: int = 28 * 24, daily: bool = True, weekly: bool = True,
                 holidays: str | None = "CN", changepoint_prior_scale: float = 0.05,
                 seasonality_prior_scale: float = 10.0, uncertainty_samples: int = 200,
                 calibration: str = "quantile", calibration_level: float | None = None,
                 calibration_days: int = 2, calibration_window_h: int = 14 * 24,
                 calibration_prior_h: int = 48, warm_start: bool = True, min_fit_hours: int = 48,
                 quantiles: Sequence[float] = (0.9,), seed: int = 0) -> None:
        super().__init__(quantiles, seed)
        if calibration not in ("quantile", "rms", "none"):
            raise GfsError(f"calibration must be 'quantile', 'rms' or 'none', got {calibration!r}")
        if window_h < 2 or uncertainty_samples < 2:
            raise GfsError("Prophet needs window_h ≥ 2 hours and ≥ 2 uncertainty samples")
        self.window_h = window_h
        self.daily = daily
        self.weekly = weekly
        self.holidays = holidays
        self.changepoint_prior_scale = changepoint_prior_scale
        self.seasonality_prior_scale = seasonality_prior_scale
        self.uncertainty_samples = uncertainty_samples
        self.calibration = calibration
        self.calibration_level = calibration_level
        self.calibration_days = calibration_days
        self.calibration_window_h = calibration_window_h
        self.calibration_prior_h = calibration_prior_h
        self.warm_start = warm_start
        self.min_fit_hours = min_fit_hours
        # memory kept across refits (warm start, calibration errors, the forecast to score next)
        self.warm_params_: dict[str, dict[str, Any]] = {}
        self.calib_errors_: dict[str, deque[float]] = {}
        self.last_forecast_: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.failures_: dict[str, str] = {}  # series whose last Prophet fit failed → fallback
        self._fallback = SeasonalETS(quantiles=self.quantiles, seed=seed)

    @property
    def history_hours(self) -> int | None:
        return self.window_h + 24 * self.calibration_days

    @property
    def level(self) -> float:
        if self.calibration_level is not None:
            return float(self.calibration_level)
        upper = [q for q in self.quantiles if q > 0.5]
        return max(upper) if upper else 0.9

    # ---- calibration memory ------------------------------------------------------------------
    def _before_fit(self, series: dict[str, SeriesData]) -> None:
        """Score the previous forecasts against the hours observed since, then forget them."""
        for key, (ds, mean, sd) in self.last_forecast_.items():
            data = series.get(key)
            if data is None:
                continue
            pos = ((ds - data.start.to_datetime64()) // np.timedelta64(1, "h")).astype(np.int64)
            ok = (pos >= 0) & (pos < len(data.y)) & (sd > 0)
            if ok.any():
                self._remember(key, (data.y[pos[ok]] - mean[ok]) / sd[ok])
        self.last_forecast_ = {}

    def _remember(self, key: str, z: np.ndarray) -> None:
        buf = self.calib_errors_.get(key)
        if buf is None:
            buf = self.calib_errors_[key] = deque(maxlen=self.calibration_window_h)
        buf.extend(float(v) for v in z)

    def scale_of(self, key: str) -> float:
        """Current spread factor k of a series (1 without enough past errors)."""
        if self.calibration == "none":
            return 1.0
        buf = self.calib_errors_.get(key)
        if buf is None or len(buf) < MIN_CALIBRATION_ERRORS:
            return 1.0
        z = np.fromiter(buf, dtype=float)
        if self.calibration == "rms":
            k = float(np.sqrt(np.mean(z ** 2)))
        else:
            k = float(np.quantile(z, self.level)) / float(norm.ppf(self.level))
        k = (len(z) * k + self.calibration_prior_h) / (len(z) + self.calibration_prior_h)
        return float(np.clip(k, *SCALE_BOUNDS))

    # ---- fitting -------------------------------------------------------------------------------
    def _new_model(self) -> Any:
        prophet_cls = import_prophet()
        m = prophet_cls(daily_seasonality=self.daily, weekly_seasonality=self.weekly,
                        yearly_seasonality=False, uncertainty_samples=self.uncertainty_samples,
                        changepoint_prior_scale=self.changepoint_prior_scale,
                        seasonality_prior_scale=self.seasonality_prior_scale)
        if self.holidays:
            m.add_country_holidays(self.holidays)
        return m

    def _fit_prophet(self, key: str, start: pd.Timestamp, y: np.ndarray) -> Any:
        m = self._new_model()
        frame = pd.DataFrame({"ds": pd.date_range(start, periods=len(y), freq="h"), "y": y})
        kwargs: dict[str, Any] = {"seed": self.seed}
        init = self.warm_params_.get(key) if self.warm_start else None
        if init is not None:
            kwargs["init"] = init
        try:
            m.fit(frame, **kwargs)
        except RuntimeError:
            if init is None:
                raise
            m = self._new_model()
            m.fit(frame, seed=self.seed)  # a stale warm start can derail the optimiser
        p = m.params
        self.warm_params_[key] = {"k": float(p["k"][0][0]), "m": float(p["m"][0][0]),
                                  "sigma_obs": float(p["sigma_obs"][0][0]),
                                  "delta": np.asarray(p["delta"][0]),
                                  "beta": np.asarray(p["beta"][0])}
        return m

    def _usable(self, y: np.ndarray) -> bool:
        return len(y) >= self.min_fit_hours and float(np.ptp(y)) > 0

    def _fit_series(self, data: SeriesData) -> _ProphetState:
        y = data.y[-self.window_h:]
        if not self._usable(y):
            return _ProphetState(None, 1.0, self._fallback._fit_series(data))
        start = data.end - (len(y) - 1) * pd.Timedelta(hours=1)
        try:
            if (self.calibration != "none" and self.calibration_days > 0
                    and not self.calib_errors_.get(data.key)):
                self._seed_calibration(data)
            model = self._fit_prophet(data.key, start, y)
        except (RuntimeError, ValueError) as exc:  # Stan gave up: the refit must go on
            self.failures_[data.key] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return _ProphetState(None, 1.0, self._fallback._fit_series(data))
        self.failures_.pop(data.key, None)
        return _ProphetState(model, self.scale_of(data.key))

    def _seed_calibration(self, data: SeriesData) -> None:
        """Hold-out day-ahead fits on each of the last ``calibration_days`` days: their errors stand
        in for the past forecast errors a series does not have yet (same leads, 1..24 h)."""
        hour = pd.Timedelta(hours=1)
        for back in range(self.calibration_days, 0, -1):
            cut = len(data.y) - 24 * back
            y_train = data.y[:cut][-self.window_h:]
            if not self._usable(y_train):
                continue
            start = data.start + (cut - len(y_train)) * hour
            m = self._fit_prophet(data.key, start, y_train)
            ds = pd.date_range(data.start + cut * hour, periods=24, freq="h")
            mean, draws = self._draw(data.key, m, ds, self.uncertainty_samples)
            sd = draws.std(axis=0)
            ok = sd > 0
            actual = data.y[cut:cut + 24]
            self._remember(data.key, (actual[ok] - mean[ok]) / sd[ok])

    # ---- prediction ----------------------------------------------------------------------------
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

    def _forecast(self, key: str, state: _ProphetState, data: SeriesData, horizon: int,
                  n_samples: int = 0) -> SeriesForecast:
        if state.model is None:
            return self._fallback._forecast(key, state.fallback, data, horizon, n_samples)
        ds = data.future_ds(horizon)
        mean, draws = self._draw(key, state.model, ds, max(n_samples, self.uncertainty_samples))
        centred = draws - draws.mean(axis=0)
        sd_raw = centred.std(axis=0)
        old = self.last_forecast_.get(key)
        if old is None or len(old[0]) <= horizon:
            self.last_forecast_[key] = (ds.to_numpy(), mean, sd_raw)
        k = state.scale
        quantiles = {lv: mean + k * np.quantile(centred, lv, axis=0) for lv in self.quantiles}
        samples = mean + k * centred if n_samples else None
        return SeriesForecast(mean, k * sd_raw, quantiles, samples)


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
