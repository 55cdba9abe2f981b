"""The forecaster interface shared by every demand model, and a base class that does the plumbing.

A forecaster follows the scikit-learn estimator conventions: parameters only in ``__init__``, learned
state set by ``fit`` (attributes ending in ``_``), and ``predict`` returning a plain frame.

Units: ``y`` is HP GPUs in use (GPUs, not milli-GPU), the hourly maximum of minute samples.

History frame (input of ``fit`` and ``update``): columns ``ds`` (hourly timestamps), ``series``
(str) and ``y`` (float). Rows need not be sorted. Hours missing inside a series are filled by
linear interpolation (the simulator's series builder never leaves gaps; CSV inputs may).

Fit and update. ``fit(history)`` is the expensive, daily step. ``update(history)`` is the cheap,
hourly one: it conditions the fitted model on hours observed since (each model advances its own
state — a level, a residual, the last values) without refitting. Rows for hours a series has
already seen are ignored (the model is conditioned on them already; a revised value is used at
the next fit); a gap between a series' last hour and its new hours is interpolated; a series the
fit never saw gets a cold-start model (never an error). ``fit`` itself first conditions the old
model on the new hours, so that the errors of the forecasts it issued are kept (see below).

Prediction frame (output of ``predict(horizon)``): one row per series × step ``h = 1..horizon``
after the last observed hour of that series (fit or update), columns ``series, ds, h, mean, std``
and one ``q<level>`` column per quantile level given in ``__init__`` (``q0.9``, ``q0.1``).
Demand is non-negative, so means and quantiles are clipped at 0 (the std is left as measured).

Spread (`gfs_opt.forecast.calibration`): per series and per lead ``L = 1..H``, from the errors of
the forecasts the model issues at hourly origins with its update rule — ``std`` is their
root-mean-square, ``q<level>`` = raw mean + their empirical quantile. The errors are those of the
last ``calibration window`` of origins: the model's own out-of-sample errors, kept across refits
(``oos_errors_``), and, where fewer exist (the first days), the rule's errors re-computed over
the fitted history by the current model (in-sample). Models with their own spread (a point
forecast, or Prophet's own intervals) may state it instead.

Samples: ``predict_samples(horizon, n)`` → ``{series: array (n, horizon)}``: the mean plus whole
error rows drawn from the same errors (keeps the correlation across leads), Gaussian draws from
mean/std when too few rows exist, clipped at 0; seeded by ``seed`` and the series key.
"""

from __future__ import annotations

import inspect
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np
import pandas as pd
from scipy.special import ndtri  # = scipy.stats.norm.ppf, without importing scipy.stats

from gfs_opt.errors import GfsError
from gfs_opt.forecast.blas import one_blas_thread
from gfs_opt.forecast.calibration import draw, stack_parts, stacked_spreads

HOUR = pd.Timedelta(hours=1)
HISTORY_COLUMNS = ("ds", "series", "y")
PREDICTION_COLUMNS = ("series", "ds", "h", "mean", "std")
MAX_LEAD = 48        # leads kept per stored out-of-sample error row
MIN_ERRORS = 24      # fewer errors at a lead than this → the previous lead's or a cold spread


@runtime_checkable
class Forecaster(Protocol):
    """What quota code and the backtest rely on; nothing Prophet-specific."""

    quantiles: tuple[float, ...]

    def fit(self, history: pd.DataFrame) -> Self: ...

    def update(self, history: pd.DataFrame) -> Self: ...

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


def hour_of(ts: pd.Timestamp) -> int:
    """Absolute hour index (hours since 1970-01-01 00:00); ``hour % 24`` is the hour of day."""
    return int(np.datetime64(ts, "h").astype(np.int64))


@dataclass(slots=True)
class SeriesForecast:
    """One series' forecast for steps 1..H; std/quantiles/samples only where the model states them
    (None → the base class measures the spread from the series' errors)."""

    mean: np.ndarray
    std: np.ndarray | None = None
    quantiles: dict[float, np.ndarray] | None = None
    samples: np.ndarray | None = None  # (n, H)


@dataclass(slots=True)
class SeriesData:
    """One series as the models see it: a regular hourly array from absolute hour ``start_hour``
    (hours since 1970-01-01 00:00, so ``hour % 24`` is the hour of day)."""

    key: str
    start_hour: int
    y: np.ndarray

    @property
    def start(self) -> pd.Timestamp:
        """Timestamp of the first hour."""
        return pd.Timestamp(np.datetime64(self.start_hour, "h"))

    @property
    def end_hour(self) -> int:
        """Absolute hour index of the last observed hour."""
        return self.start_hour + len(self.y) - 1

    @property
    def end(self) -> pd.Timestamp:
        """Timestamp of the last observed hour."""
        return pd.Timestamp(np.datetime64(self.end_hour, "h"))

    def future_ds(self, horizon: int) -> pd.DatetimeIndex:
        return pd.date_range(self.end + HOUR, periods=horizon, freq="h")

    def values_from(self, first: int, n: int, out: np.ndarray | None = None) -> np.ndarray:
        """``values_at(first + arange(n))`` by slicing: observed values of ``n`` consecutive
        hours from absolute hour ``first``, NaN outside the observed range. ``out``: an array
        of ``n`` to write them into (a row of the caller's matrix), returned."""
        if out is None:
            out = np.full(n, np.nan)
        else:
            out.fill(np.nan)
        off = first - self.start_hour
        lo, hi = max(off, 0), min(off + n, len(self.y))
        if hi > lo:
            out[lo - off: hi - off] = self.y[lo:hi]
        return out

    def values_at(self, hours: np.ndarray) -> np.ndarray:
        """Observed values at absolute hours (any shape); NaN outside the observed range."""
        pos = np.asarray(hours, dtype=np.int64) - self.start_hour
        ok = (pos >= 0) & (pos < len(self.y))
        out = np.full(pos.shape, np.nan)
        out[ok] = self.y[pos[ok]]
        return out


@dataclass(slots=True)
class _RowCache:
    """A series' current-model error rows by origin: ``buf[i]`` is origin ``lo + i``; the first
    ``n`` rows have all their targets observed (final until the next fit)."""

    horizon: int
    lo: int
    buf: np.ndarray
    n: int


def rows_view(cache: _RowCache, lo: int, end: int, horizon: int) -> np.ndarray:
    """Rows of origins lo..end−1 once those from ``cache.lo + cache.n`` on are written."""
    # origins up to end − horizon have every target observed
    cache.n = min(max(end - horizon + 1 - cache.lo, 0), end - cache.lo)
    return cache.buf[lo - cache.lo: end - cache.lo]


def lead_grid(origins: np.ndarray, horizon: int) -> np.ndarray:
    """Target hours (len(origins), horizon): origin + 1 .. origin + horizon."""
    return np.asarray(origins, dtype=np.int64)[:, None] + np.arange(1, horizon + 1)[None, :]


def _history_arrays(history: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checked (absolute hour, series key, y) arrays of a history frame (clear errors)."""
    if not isinstance(history, pd.DataFrame):
        raise GfsError(f"history must be a pandas DataFrame, got {type(history).__name__}")
    missing = [c for c in HISTORY_COLUMNS if c not in history.columns]
    if missing:
        raise GfsError(f"history lacks column(s) {missing}; expected {list(HISTORY_COLUMNS)}")
    ds = history["ds"]
    if not pd.api.types.is_datetime64_dtype(ds.dtype):
        try:
            ds = pd.to_datetime(ds)
        except (ValueError, TypeError) as exc:
            raise GfsError(f"history column 'ds' is not a timestamp: {exc}") from None
    stamps = ds.to_numpy(dtype="datetime64[ns]")
    if np.isnat(stamps).any():
        raise GfsError("history column 'ds' holds a missing timestamp")
    hours = stamps.astype("datetime64[h]")
    if (hours != stamps).any():
        raise GfsError("history timestamps must fall on whole hours (hourly series)")
    y = history["y"]
    if not pd.api.types.is_float_dtype(y.dtype) and not pd.api.types.is_integer_dtype(y.dtype):
        y = pd.to_numeric(y, errors="coerce")
    values = y.to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(values).any():
        row = int(np.flatnonzero(np.isnan(values))[0])
        raise GfsError(f"history column 'y' must be numeric and non-missing (row {row})")
    if not np.isfinite(values).all():
        raise GfsError("history column 'y' holds an infinite value")
    keys = history["series"].astype(str).to_numpy(dtype=object)
    return hours.astype(np.int64), keys, values


def validate_history(history: pd.DataFrame) -> pd.DataFrame:
    """Check the history frame; returns it with ``ds`` as datetimes, ``y`` as float, ``series`` as str."""
    hours, keys, values = _history_arrays(history)
    return pd.DataFrame({"ds": hours.astype("datetime64[h]").astype("datetime64[ns]"),
                         "series": keys, "y": values})


def split_series(history: pd.DataFrame) -> Iterator[SeriesData]:
    """Yield each series as a regular hourly array (duplicate hours keep their maximum)."""
    hours, keys, values = _history_arrays(history)
    if len(hours) == 0:
        return
    order = np.lexsort((hours, keys))
    hours, keys, values = hours[order], keys[order], values[order]
    bounds = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(keys)], strict=True):
        h = hours[lo:hi] - hours[lo]
        y = np.full(int(h[-1]) + 1, np.nan)
        np.fmax.at(y, h, values[lo:hi])
        gaps = np.isnan(y)
        if gaps.any():
            y[gaps] = np.interp(np.flatnonzero(gaps), np.flatnonzero(~gaps), y[~gaps])
        yield SeriesData(str(keys[lo]), int(hours[lo]), y)


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
    """Plumbing shared by the models: validation, fit/update bookkeeping, spread, frames, samples.

    Subclasses implement
    - ``_fit_series(data, prev) -> state`` (the expensive fit; ``prev`` = the series' previous
      state, already conditioned on ``data``, or None),
    - ``_update_series(key, state, data, n_old) -> state`` (advance the state over
      ``data.y[n_old:]``, hours just appended),
    - ``_forecast(key, state, data, horizon, n_samples) -> SeriesForecast`` (raw mean for steps
      1..horizon after ``data``'s last hour; std None = measure the spread),
    - ``_errors(key, state, data, origins, horizon) -> (len(origins), horizon)`` (errors of the
      forecasts the state's rule issues after each absolute origin hour; NaN where unknown),
    and may override ``_cold_start(data)`` (a series first seen in ``update``; default: fit it)
    and ``_calibration_hours()``. The base class keeps the series in ``series_``, per-series
    state in ``states_``, the last fitted hour per series in ``fit_end_`` and past out-of-sample
    error rows in ``oos_errors_``. ``history_hours`` tells callers how much history ``fit`` uses,
    so they may pass a shorter frame (None = all of it).
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

    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "states_")

    # ---- fit / update --------------------------------------------------------------------------
    def fit(self, history: pd.DataFrame) -> Self:
        t0 = time.perf_counter()
        return self._fit({s.key: s for s in split_series(self._trim(history))}, t0)

    def fit_series(self, series: Iterable[SeriesData]) -> Self:
        """``fit`` from series already split into regular hourly arrays (as `split_series`
        yields them from a frame `_trim` has cut: finite values, no gaps), skipping the frame;
        the daily path of `ForecastProvider`. Series are taken in key order, as ``fit`` takes
        them."""
        t0 = time.perf_counter()
        return self._fit({s.key: s for s in sorted(series, key=lambda s: s.key)}, t0)

    def _fit(self, series: dict[str, SeriesData], t0: float) -> Self:
        prev: dict[str, Any] = {}
        if self.is_fitted:
            # the forecasts issued since the last fit are scored before their model is replaced
            self._absorb(series, cold_start=False)
            self._harvest()
            prev = self.states_
        else:
            self.oos_errors_: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._before_fit(series)
        self.series_ = series
        with one_blas_thread():
            self.states_: dict[str, Any] = {key: self._fit_series(data, prev.get(key))
                                            for key, data in series.items()}
        self.fit_end_ = {key: data.end_hour for key, data in series.items()}
        self._cache: tuple[int, int, bool, dict[str, SeriesForecast]] | None = None
        self._rows: dict[str, _RowCache] = {}
        self._stored: dict[str, tuple[Any, int, np.ndarray | None, np.ndarray, int | None]] = {}
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def update(self, history: pd.DataFrame) -> Self:
        """Condition the fitted model on hours observed since (see module doc); cheap."""
        if not self.is_fitted:
            raise GfsError(f"{type(self).__name__} is not fitted; call fit(history) before update")
        t0 = time.perf_counter()
        self._absorb({s.key: s for s in split_series(history)})
        self.update_seconds_ = time.perf_counter() - t0
        return self

    def update_series(self, series: Iterable[SeriesData]) -> Self:
        """``update`` from series already split into regular hourly arrays (as `split_series`
        yields them: finite values, no gaps), skipping the frame; the hourly path of
        `ForecastProvider`. Series are taken in key order, as ``update`` takes them."""
        if not self.is_fitted:
            raise GfsError(f"{type(self).__name__} is not fitted; call fit(history) before update")
        t0 = time.perf_counter()
        self._absorb({s.key: s for s in sorted(series, key=lambda s: s.key)})
        self.update_seconds_ = time.perf_counter() - t0
        return self

    def _absorb(self, new: dict[str, SeriesData], cold_start: bool = True) -> None:
        changed = False
        for key, nd in new.items():
            old = self.series_.get(key)
            if old is None:
                if not cold_start:   # fit() is about to model it properly
                    continue
                self.series_[key] = nd
                self.states_[key] = self._cold_start(nd)
                self._rows.pop(key, None)
                self.fit_end_[key] = nd.end_hour
                changed = True
                continue
            off = old.end_hour + 1 - nd.start_hour   # position of the first unseen hour in nd
            if off >= len(nd.y):
                continue                              # nothing after the series' last hour
            add = nd.y[max(off, 0):]
            if off < 0:                               # hours missing in between: interpolate
                gap = -off
                fill = np.interp(np.arange(1, gap + 1), [0, gap + 1], [old.y[-1], add[0]])
                add = np.r_[fill, add]
            n_old = len(old.y)
            old.y = np.concatenate([old.y, add])
            self.states_[key] = self._update_series(key, self.states_[key], old, n_old)
            changed = True
        if changed:
            self._cache = None

    def _harvest(self) -> None:
        """Keep the errors of the forecasts issued after the last fit (origins ≥ fit end)."""
        for key, data in self.series_.items():
            lo = self.fit_end_[key]
            if data.end_hour <= lo:
                continue
            origins = np.arange(lo, data.end_hour)
            rows = self._errors(key, self.states_[key], data, origins, MAX_LEAD)
            self._store_errors(key, origins, rows)

    def _store_errors(self, key: str, origins: np.ndarray, rows: np.ndarray) -> None:
        """Append out-of-sample error rows of a series, keeping one calibration window."""
        if len(origins) == 0:
            return
        width = rows.shape[1]
        if width < MAX_LEAD:
            rows = np.hstack([rows, np.full((len(rows), MAX_LEAD - width), np.nan)])
        old = self.oos_errors_.get(key)
        if old is not None:
            keep = old[0] < origins[0]
            origins = np.r_[old[0][keep], origins]
            rows = np.vstack([old[1][keep], rows[:, :MAX_LEAD]])
        recent = origins > origins[-1] - self._calibration_hours() - MAX_LEAD
        self.oos_errors_[key] = (origins[recent], rows[recent, :MAX_LEAD])

    def _trim(self, history: pd.DataFrame) -> pd.DataFrame:
        """Drop rows older than the model's window (cheap pre-filter before validation)."""
        hours = self.history_hours
        if hours is None or history.empty or "ds" not in history.columns:
            return history
        ds = pd.to_datetime(history["ds"], errors="coerce")
        return history[~(ds < ds.max() - pd.Timedelta(hours=hours - 1))]

    # ---- hooks ---------------------------------------------------------------------------------
    def _before_fit(self, series: dict[str, SeriesData]) -> None:
        """Hook: look at the new history before states are replaced."""

    def _fit_series(self, data: SeriesData, prev: Any = None) -> Any:
        raise NotImplementedError

    def _cold_start(self, data: SeriesData) -> Any:
        """State for a series first seen in ``update`` (cheap models simply fit it)."""
        return self._fit_series(data)

    def _update_series(self, key: str, state: Any, data: SeriesData, n_old: int) -> Any:
        return state

    def _forecast(self, key: str, state: Any, data: SeriesData, horizon: int,
                  n_samples: int = 0) -> SeriesForecast:
        raise NotImplementedError

    def _errors(self, key: str, state: Any, data: SeriesData, origins: np.ndarray,
                horizon: int) -> np.ndarray:
        raise NotImplementedError

    def _calibration_hours(self) -> int:
        """How many hourly origins the spread looks back over."""
        return 14 * 24

    # ---- spread --------------------------------------------------------------------------------
    def calibration_errors(self, key: str, horizon: int) -> np.ndarray:
        """Error rows (origins × horizon) the spread of a series is measured on, in no particular
        order: stored out-of-sample rows where they exist, else the current model's rows (its
        out-of-sample rows since its fit, in-sample rows before), over the last window of origins.
        (Row order: the current model's rows not covered by stored ones, then the stored rows,
        each by origin — the spread's sums follow this order.)"""
        parts = self._calibration_parts(key, horizon)
        return parts[0].copy() if len(parts) == 1 else np.concatenate(parts)

    def _calibration_parts(self, key: str, horizon: int) -> tuple[np.ndarray, ...]:
        """`calibration_errors` as the blocks it concatenates, in order (views valid until the
        next call): the hourly spread copies them once, into its stacked array."""
        data = self.series_[key]
        end = data.end_hour
        lo = max(end - self._calibration_hours(), data.start_hour)
        return self._parts_around(key, self._current_rows(key, lo, end, horizon), lo, end,
                                  horizon)

    def _parts_around(self, key: str, current: np.ndarray, lo: int, end: int,
                      horizon: int) -> tuple[np.ndarray, ...]:
        """`_calibration_parts` from the current model's rows of origins lo..end−1."""
        stored = self.oos_errors_.get(key)
        if stored is None:
            return (current,)
        origins, i0, i1, rows = self._stored_rows(key, stored, lo, end, horizon)
        if i1 <= i0:
            return (current,)
        a, b = int(origins[i0]) - lo, int(origins[i1 - 1]) - lo + 1
        if self._stored[key][2] is not None and b - a == i1 - i0:
            # ascending and consecutive (each fit stores the hours since the last one): the
            # covered origins are one run, the rest the two slices around it
            return (*(part for part in (current[:a], current[b:]) if len(part)), rows)
        covered = np.zeros(len(current), dtype=bool)
        covered[origins[i0:i1] - lo] = True
        return (current[~covered], rows)

    def _stored_rows(self, key: str, stored: tuple[np.ndarray, np.ndarray], lo: int, end: int,
                     horizon: int) -> tuple[np.ndarray, int, int, np.ndarray]:
        """The stored rows of origins in [lo, end), cut or NaN-padded to ``horizon``: (stored
        origins, first, last + 1 of them, rows). Stored origins ascend (`_store_errors` appends
        later origins), so the selection is a slice; the cut rows are kept until the store
        changes (at a fit), since the provider asks every hour."""
        origins, all_rows = stored
        prep = self._stored.get(key)
        if prep is None or prep[0] is not stored or prep[1] != horizon:
            ascending = bool(np.all(origins[1:] > origins[:-1]))
            cut = all_rows[:, :horizon] if ascending else None
            if cut is not None and cut.shape[1] < horizon:
                cut = np.hstack([cut, np.full((len(cut), horizon - cut.shape[1]), np.nan)])
            # consecutive hours (every fit stores the hours since the last one): a slice by
            # arithmetic, what searchsorted finds (≈ 5 µs a series every hour)
            first = (int(origins[0]) if ascending and len(origins)
                     and np.issubdtype(origins.dtype, np.integer)
                     and int(origins[-1]) - int(origins[0]) == len(origins) - 1 else None)
            prep = (stored, horizon, cut, origins, first)
            self._stored[key] = prep
        cut = prep[2]
        if cut is None:   # not ascending (set by hand): select by mask, in stored order
            keep = (origins >= lo) & (origins < end)
            rows = all_rows[keep][:, :horizon]
            if rows.shape[1] < horizon:
                rows = np.hstack([rows, np.full((len(rows), horizon - rows.shape[1]), np.nan)])
            sel = origins[keep]
            return sel, 0, len(sel), rows
        first = prep[4]
        if first is not None:
            n = len(origins)
            i0, i1 = min(max(lo - first, 0), n), min(max(end - first, 0), n)
        else:
            i0, i1 = np.searchsorted(origins, (lo, end)).tolist()
        return origins, i0, i1, cut[i0:i1]

    def _current_rows(self, key: str, lo: int, end: int, horizon: int) -> np.ndarray:
        """The current state's error rows for origins lo..end−1, as a view valid until the next
        call. Rows whose targets are all observed never change until the next fit, so they are
        kept in a per-series buffer and only origins from the first incomplete one on are
        (re)computed per call (the provider asks every hour)."""
        cache = self._row_cache(key, lo, end, horizon)
        start = cache.lo + cache.n                   # first origin not final yet (≥ lo)
        if start < end:
            data, state = self.series_[key], self.states_[key]
            cache.buf[start - cache.lo: end - cache.lo] = self._errors(
                key, state, data, np.arange(start, end), horizon)
        return rows_view(cache, lo, end, horizon)

    def _row_cache(self, key: str, lo: int, end: int, horizon: int) -> _RowCache:
        """The series' row buffer, made or moved so that it holds origins lo..end−1; its rows
        from ``cache.lo + cache.n`` on are the ones to (re)compute. Asking twice is asking once."""
        cache = self._rows.get(key)
        if (cache is None or cache.horizon != horizon or cache.lo > lo
                or cache.lo + cache.n < lo):
            cache = _RowCache(horizon, lo, np.empty((max(2 * (end - lo), 64), horizon)), 0)
            self._rows[key] = cache
        if end - cache.lo > len(cache.buf):          # make room: drop the origins before lo
            keep = cache.lo + cache.n - lo
            buf = np.empty((max(2 * (end - lo), 64), horizon))
            buf[:keep] = cache.buf[lo - cache.lo: lo - cache.lo + keep]
            cache.buf, cache.lo, cache.n = buf, lo, keep
        return cache

    # ---- predict -------------------------------------------------------------------------------
    def _check_fitted(self, horizon: int) -> None:
        if not self.is_fitted:
            raise GfsError(f"{type(self).__name__} is not fitted; call fit(history) first")
        if int(horizon) != horizon or horizon < 1:
            raise GfsError(f"forecast horizon must be a positive number of hours, got {horizon}")

    def forecasts(self, horizon: int, n_samples: int = 0,
                  quantiles: bool = True) -> dict[str, SeriesForecast]:
        """Per-series forecasts (means and quantiles clipped at 0), cached until the next
        fit or update that adds hours. ``quantiles=False``: callers that read only means and
        spreads (the provider's independent pool sum) skip the measured series' quantiles,
        which are then None (the means and spreads are the same numbers)."""
        self._check_fitted(horizon)
        horizon = int(horizon)
        if self._cache is not None:
            c_h, c_n, c_q, c_fcs = self._cache
            if c_h == horizon and c_n >= n_samples and (c_q or not quantiles):
                return c_fcs
        out, measured, parts = self._series_forecasts(horizon, n_samples)
        if measured:
            window = self._calibration_hours()
            min_errors = int(getattr(self, "min_residuals", MIN_ERRORS))
            stacked = stack_parts(parts, horizon)
            # the cold spread only matters where lead 1 lacks errors
            lead1 = np.count_nonzero(~np.isnan(stacked[:, :, 0]), axis=1).tolist()
            cold = np.array([cold_start_std(self.series_[k].y[-window:])
                             if n < min_errors else 0.0
                             for k, n in zip(measured, lead1, strict=True)])
            levels = self.quantiles if quantiles else ()
            raw_std, offsets = stacked_spreads(stacked, levels, cold, min_errors)
            std = np.maximum(raw_std, 0.0)
            means = np.array([out[k].mean for k in measured]).reshape(len(measured), -1)
            clipped = {lv: np.maximum(means + offsets[lv], 0.0) for lv in levels}
            for i, key in enumerate(measured):
                fc = out[key]
                fc.std = std[i]
                fc.quantiles = {lv: clipped[lv][i] for lv in levels} if quantiles else None
                if n_samples:
                    errors = np.concatenate(parts[i])
                    fc.samples = draw(fc.mean, raw_std[i], errors, n_samples, min_errors,
                                      self._rng(key))
        spread = set(measured)
        for key, fc in out.items():
            raw = fc.mean
            fc.mean = np.maximum(raw, 0.0)
            if key in spread:       # std and quantiles clipped above, all levels present
                continue
            fc.std = np.maximum(np.asarray(fc.std, dtype=float), 0.0)
            q = dict(fc.quantiles or {})
            for level in self.quantiles:
                if level not in q:
                    q[level] = raw + ndtri(level) * fc.std
            fc.quantiles = {lv: np.maximum(np.asarray(v, dtype=float), 0.0) for lv, v in q.items()}
        self._cache = (horizon, n_samples, quantiles, out)
        return out

    def _series_forecasts(self, horizon: int, n_samples: int) -> tuple[
            dict[str, SeriesForecast], list[str], list[tuple[np.ndarray, ...]]]:
        """Each series' raw forecast (in series order), the series whose spread is measured
        and their `_calibration_parts`; series `_hourly_batch` covers take its answer."""
        batch = self._hourly_batch(horizon)
        out: dict[str, SeriesForecast] = {}
        measured: list[str] = []
        parts: list[tuple[np.ndarray, ...]] = []
        for key, data in self.series_.items():
            got = batch.get(key)
            if got is not None:
                fc = SeriesForecast(got[0])
            else:
                fc = self._forecast(key, self.states_[key], data, horizon, n_samples)
                fc.mean = np.asarray(fc.mean, dtype=float)   # raw until clipped in `forecasts`
            if fc.std is None:
                measured.append(key)
                parts.append(got[1] if got is not None else self._calibration_parts(key, horizon))
            out[key] = fc
        return out, measured, parts

    def _hourly_batch(self, horizon: int) -> dict[str, tuple[np.ndarray, tuple[np.ndarray, ...]]]:
        """Hook: (raw mean, `_calibration_parts`) of the series a model forecasts all at once
        (none here); the rest go series by series."""
        return {}

    def _rng(self, key: str) -> np.random.Generator:
        """Per-series generator: one shared stream would couple the tenants' draws."""
        return np.random.default_rng([self.seed % (2 ** 32), zlib.crc32(key.encode())])

    def predict(self, horizon: int) -> pd.DataFrame:
        t0 = time.perf_counter()
        fcs = self.forecasts(horizon)
        frame = assemble(fcs, self.series_, int(horizon), self.quantiles)
        self.predict_seconds_ = time.perf_counter() - t0
        return frame

    def predict_samples(self, horizon: int, n: int) -> dict[str, np.ndarray]:
        """Draws per series (n, horizon), clipped at 0 (see module doc)."""
        if n < 1:
            raise GfsError(f"number of samples must be ≥ 1, got {n}")
        fcs = self.forecasts(horizon, n)
        out: dict[str, np.ndarray] = {}
        for key in sorted(fcs):
            fc = fcs[key]
            if fc.samples is not None and fc.samples.shape[0] >= n:
                out[key] = np.maximum(fc.samples[:n], 0.0)
            else:
                rng = self._rng(key)
                std = fc.std
                assert std is not None, f"{key}: a forecast without std cannot be sampled"
                draws = fc.mean + std * rng.standard_normal((n, len(fc.mean)))
                out[key] = np.maximum(draws, 0.0)
        return out


def assemble(fcs: dict[str, SeriesForecast], series: dict[str, SeriesData], horizon: int,
             quantiles: Sequence[float]) -> pd.DataFrame:
    """Per-series forecasts → the long prediction frame (series, ds, h, mean, std, q…)."""
    keys = sorted(fcs)
    if not keys:
        cols: dict[str, list[Any]] = ({c: [] for c in PREDICTION_COLUMNS}
                                      | {qcol(q): [] for q in quantiles})
        frame = pd.DataFrame(cols)
        frame["ds"] = pd.to_datetime(frame["ds"])
        return frame
    ends = np.array([series[k].end_hour for k in keys], dtype=np.int64)
    ds = ((ends[:, None] + np.arange(1, horizon + 1)[None, :]).ravel()
          .astype("datetime64[h]").astype("datetime64[ns]"))
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
