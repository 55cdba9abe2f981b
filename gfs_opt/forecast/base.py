"""The forecaster interface shared by every demand model, and a base class that does the plumbing.

A forecaster follows the scikit-learn estimator conventions: parameters only in ``__init__``, learned
state set by ``fit`` (attributes ending in ``_``), and ``predict`` returning a plain frame.

Units: ``y`` is HP GPUs in use (GPUs, not milli-GPU), the hourly maximum of minute samples.

History frame (input of ``fit``): columns ``ds`` (hourly timestamps), ``series`` (str) and ``y``
(float). Rows need not be sorted. Hours missing inside a series are filled by linear interpolation
(the simulator's series builder never leaves gaps; CSV inputs may).

Prediction frame (output of ``predict(horizon)``): one row per series × step ``h = 1..horizon``
after the last fitted hour of that series, columns ``series, ds, h, mean, std`` and one ``q<level>``
column per quantile level given in ``__init__`` (``q0.9``, ``q0.1``). Demand is non-negative, so
means and quantiles are clipped at 0 (the std is left as the model states it).

Samples: ``predict_samples(horizon, n)`` → ``{series: array (n, horizon)}``. Models with their own
predictive distribution (Prophet) return its draws; the others draw Gaussians from mean/std,
clipped at 0, with the generator seeded by ``seed`` so the result is deterministic.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np
import pandas as pd
from scipy.stats import norm

from gfs_opt.errors import GfsError

HOUR = pd.Timedelta(hours=1)
HISTORY_COLUMNS = ("ds", "series", "y")
PREDICTION_COLUMNS = ("series", "ds", "h", "mean", "std")


@runtime_checkable
class Forecaster(Protocol):
    """What quota code and the backtest rely on; nothing Prophet-specific."""

    quantiles: tuple[float, ...]

    def fit(self, history: pd.DataFrame) -> Self: ...

    def predict(self, horizon: int) -> pd.DataFrame: ...

    def predict_samples(self, horizon: int, n: int) -> dict[str, np.ndarray]: ...


def qcol(level: float) -> str:
    """Column name of a quantile level: 0.9 → ``q0.9``."""
    return f"q{level:g}"


def normalise_quantiles(levels: Iterable[float]) -> tuple[float, ...]:
    out = tuple(sorted({float(q) for q in levels}))
    bad = [q for q in out if not 0.0 < q < 1.0]
    if bad:
        raise GfsError(f"quantile levels must lie strictly between 0 and 1, got {bad}")
    return out


@dataclass(slots=True)
class SeriesForecast:
    """One series' forecast for steps 1..H; quantiles/samples only where the model has them."""

    mean: np.ndarray
    std: np.ndarray
    quantiles: dict[float, np.ndarray] | None = None
    samples: np.ndarray | None = None  # (n, H)


@dataclass(slots=True)
class SeriesData:
    """One series as the models see it: a regular hourly array starting at ``start``."""

    key: str
    start: pd.Timestamp
    y: np.ndarray

    @property
    def end(self) -> pd.Timestamp:
        """Timestamp of the last fitted hour."""
        return self.start + (len(self.y) - 1) * HOUR

    def future_ds(self, horizon: int) -> pd.DatetimeIndex:
        return pd.date_range(self.end + HOUR, periods=horizon, freq="h")


def validate_history(history: pd.DataFrame) -> pd.DataFrame:
    """Check the history frame; returns it with ``ds`` as datetimes, ``y`` as float, ``series`` as str."""
    if not isinstance(history, pd.DataFrame):
        raise GfsError(f"history must be a pandas DataFrame, got {type(history).__name__}")
    missing = [c for c in HISTORY_COLUMNS if c not in history.columns]
    if missing:
        raise GfsError(f"history lacks column(s) {missing}; expected {list(HISTORY_COLUMNS)}")
    try:
        ds = pd.to_datetime(history["ds"])
    except (ValueError, TypeError) as exc:
        raise GfsError(f"history column 'ds' is not a timestamp: {exc}") from None
    y = pd.to_numeric(history["y"], errors="coerce")
    if y.isna().any():
        row = int(np.flatnonzero(y.isna().to_numpy())[0])
        raise GfsError(f"history column 'y' must be numeric and non-missing (row {row})")
    if not np.isfinite(y.to_numpy(dtype=float)).all():
        raise GfsError("history column 'y' holds an infinite value")
    if ds.isna().any():
        raise GfsError("history column 'ds' holds a missing timestamp")
    if len(ds) and ((ds.dt.minute != 0) | (ds.dt.second != 0)).any():
        raise GfsError("history timestamps must fall on whole hours (hourly series)")
    return pd.DataFrame({"ds": ds.to_numpy(), "series": history["series"].astype(str).to_numpy(),
                         "y": y.to_numpy(dtype=float)})


def split_series(history: pd.DataFrame) -> Iterator[SeriesData]:
    """Yield each series as a regular hourly array (duplicate hours keep their maximum)."""
    df = validate_history(history)
    if df.empty:
        return
    df = df.sort_values(["series", "ds"], kind="stable")
    keys = df["series"].to_numpy()
    hours = (df["ds"].to_numpy().astype("datetime64[h]").astype(np.int64))
    values = df["y"].to_numpy()
    bounds = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(keys)], strict=True):
        h = hours[lo:hi] - hours[lo]
        y = np.full(int(h[-1]) + 1, np.nan)
        np.fmax.at(y, h, values[lo:hi])
        gaps = np.isnan(y)
        if gaps.any():
            y[gaps] = np.interp(np.flatnonzero(gaps), np.flatnonzero(~gaps), y[~gaps])
        start = pd.Timestamp(np.datetime64(int(hours[lo]), "h"))
        yield SeriesData(str(keys[lo]), start, y)


def cold_start_std(y: np.ndarray) -> float:
    """Spread for a series too short to have residuals: its own spread, at least a quarter of its peak.

    A tenant seen for a few hours must not get a zero-width forecast, or the quota would treat its
    next burst as impossible.
    """
    if len(y) == 0:
        return 0.0
    spread = float(np.std(y)) if len(y) > 1 else 0.0
    return max(spread, 0.25 * float(np.max(np.abs(y))))


class BaseForecaster:
    """Plumbing shared by the models: validation, per-series loop, frame assembly, samples.

    Subclasses implement ``_fit_series(data) -> state`` and ``_forecast(key, state, data, horizon)
    -> SeriesForecast``; the base class stores per-series state in ``states_`` and the series in
    ``series_``. ``history_hours`` tells callers how much history the model actually uses, so they
    may pass a shorter frame (None = all of it).
    """

    quantiles: tuple[float, ...]
    seed: int

    def __init__(self, quantiles: Sequence[float] = (0.9,), seed: int = 0) -> None:
        self.quantiles = normalise_quantiles(quantiles)
        self.seed = seed

    # ---- scikit-learn style parameters ------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def clone(self) -> Self:
        """A fresh, unfitted copy with the same parameters."""
        return type(self)(**self.get_params())

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    @property
    def history_hours(self) -> int | None:
        return None

    # ---- fit / predict -------------------------------------------------------------------------
    def fit(self, history: pd.DataFrame) -> Self:
        t0 = time.perf_counter()
        series = {s.key: s for s in split_series(self._trim(history))}
        self._before_fit(series)
        self.series_ = series
        self.states_ = {key: self._fit_series(data) for key, data in series.items()}
        self._cache: tuple[int, int, dict[str, SeriesForecast]] | None = None
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def _trim(self, history: pd.DataFrame) -> pd.DataFrame:
        """Drop rows older than the model's window (cheap pre-filter before validation)."""
        hours = self.history_hours
        if hours is None or history.empty or "ds" not in history.columns:
            return history
        ds = pd.to_datetime(history["ds"], errors="coerce")
        return history[~(ds < ds.max() - pd.Timedelta(hours=hours - 1))]

    def _before_fit(self, series: dict[str, SeriesData]) -> None:
        """Hook: look at the new history before states are replaced (e.g. score old forecasts)."""

    def _fit_series(self, data: SeriesData) -> Any:
        raise NotImplementedError

    def _forecast(self, key: str, state: Any, data: SeriesData, horizon: int,
                  n_samples: int = 0) -> SeriesForecast:
        """Forecast one series for steps 1..horizon; ``n_samples`` > 0 asks for draws if the
        model has its own predictive distribution (others ignore it)."""
        raise NotImplementedError

    def _check_fitted(self, horizon: int) -> None:
        if not hasattr(self, "states_"):
            raise GfsError(f"{type(self).__name__} is not fitted; call fit(history) first")
        if int(horizon) != horizon or horizon < 1:
            raise GfsError(f"forecast horizon must be a positive number of hours, got {horizon}")

    def forecasts(self, horizon: int, n_samples: int = 0) -> dict[str, SeriesForecast]:
        """Per-series forecasts (means and quantiles clipped at 0), cached until the next fit."""
        self._check_fitted(horizon)
        horizon = int(horizon)
        if self._cache is not None:
            c_h, c_n, c_fcs = self._cache
            if c_h == horizon and c_n >= n_samples:
                return c_fcs
        out: dict[str, SeriesForecast] = {}
        for key, data in self.series_.items():
            fc = self._forecast(key, self.states_[key], data, horizon, n_samples)
            fc.mean = np.maximum(np.asarray(fc.mean, dtype=float), 0.0)
            fc.std = np.maximum(np.asarray(fc.std, dtype=float), 0.0)
            q = dict(fc.quantiles or {})
            for level in self.quantiles:
                if level not in q:
                    q[level] = fc.mean + norm.ppf(level) * fc.std
            fc.quantiles = {lv: np.maximum(np.asarray(v, dtype=float), 0.0) for lv, v in q.items()}
            out[key] = fc
        self._cache = (horizon, n_samples, out)
        return out

    def predict(self, horizon: int) -> pd.DataFrame:
        t0 = time.perf_counter()
        fcs = self.forecasts(horizon)
        frame = assemble(fcs, self.series_, int(horizon), self.quantiles)
        self.predict_seconds_ = time.perf_counter() - t0
        return frame

    def predict_samples(self, horizon: int, n: int) -> dict[str, np.ndarray]:
        """Gaussian draws from mean/std clipped at 0 unless the model supplies its own samples."""
        if n < 1:
            raise GfsError(f"number of samples must be ≥ 1, got {n}")
        fcs = self.forecasts(horizon, n)
        rng = np.random.default_rng(self.seed)
        out: dict[str, np.ndarray] = {}
        for key in sorted(fcs):
            fc = fcs[key]
            if fc.samples is not None and fc.samples.shape[0] >= n:
                out[key] = np.maximum(fc.samples[:n], 0.0)
            else:
                draws = fc.mean + fc.std * rng.standard_normal((n, len(fc.mean)))
                out[key] = np.maximum(draws, 0.0)
        return out


def assemble(fcs: dict[str, SeriesForecast], series: dict[str, SeriesData], horizon: int,
             quantiles: Sequence[float]) -> pd.DataFrame:
    """Per-series forecasts → the long prediction frame (series, ds, h, mean, std, q…)."""
    keys = sorted(fcs)
    if not keys:
        cols = {c: [] for c in PREDICTION_COLUMNS} | {qcol(q): [] for q in quantiles}
        frame = pd.DataFrame(cols)
        frame["ds"] = pd.to_datetime(frame["ds"])
        return frame
    ds = np.concatenate([series[k].future_ds(horizon).to_numpy() for k in keys])
    data: dict[str, Any] = {
        "series": np.repeat(np.array(keys, dtype=object), horizon),
        "ds": ds,
        "h": np.tile(np.arange(1, horizon + 1), len(keys)),
        "mean": np.concatenate([fcs[k].mean for k in keys]),
        "std": np.concatenate([fcs[k].std for k in keys]),
    }
    for level in quantiles:
        data[qcol(level)] = np.concatenate([fcs[k].quantiles[level] for k in keys])  # type: ignore[index]
    return pd.DataFrame(data)
