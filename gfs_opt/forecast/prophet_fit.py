"""Prophet fits without Prophet's per-fit plumbing: the same Stan inputs, the same MAP, less Python.

A profile of one fit (672 hourly points, 30 features; BENCHMARKS.md, "Simulator") put about 80 %
of its CPU time in Python around Stan, not in Stan: the Chinese holiday calendar rebuilt for each
new model (``add_country_holidays``), a fresh cmdstanpy model object per Prophet, the seasonal and
holiday feature matrix rebuilt per series, and the data file written by stanio's pure-Python JSON
encoder (without ujson it encodes chunk by chunk). A daily refit fits every tenant series on the
same hours, so all of that is shared here:

- `SharedFit` holds one Stan backend, the holiday frames of the calendar years seen, and
  the feature matrices (with the JSON text of ``X``) of the current refit, keyed by the dates;
- `fast_prophet` returns a Prophet subclass that uses them. Stan reads the same numbers (JSON of
  the same Python floats), so the fitted parameters are bit-identical to ``Prophet.fit``'s
  (tests/test_forecast_models.py compares them).

A fit is a pure function of the Stan inputs (data, initial values, optimiser settings), so its
result is also kept by content (`FitCache`): GFS and the `+sqa` baselines of one comparison fit
the same HP histories — identical before the first LP job and wherever LP never delayed HP — and
a re-run fits nothing again. The key hashes the exact JSON handed to Stan plus the Prophet,
cmdstanpy and model versions, so a hit returns what Stan would have returned.
Processes sharing the folder (the workers of `compare` or a sweep) also share work in flight: a
fit is computed under an exclusive lock on its key, so a second process asking for the same fit
waits for the first one's result instead of computing it again (`FitCache.computing`).
``GFS_FIT_CACHE`` names the folder (default ``$XDG_CACHE_HOME/gfs-opt/prophet-fits``, i.e.
``~/.cache/...``); ``GFS_FIT_CACHE=off`` turns it off (the speed benchmarks do, to measure fits).

With ``solver="map"`` (the forecaster's default) the backend solves Prophet's posterior in process
(`prophet_map`: exact MAP, ≈ 2 ms instead of a ≈ 40 ms Stan run) and the cache is not consulted —
hashing the inputs would cost more than the solve; configurations it does not cover go to Stan.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import importlib
import json
import logging
import os
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from gfs_opt.forecast.blas import one_blas_thread
from gfs_opt.forecast.holiday_calendar import load_calendar
from gfs_opt.forecast.prophet_map import Design, map_estimate, prepare

try:
    import fcntl
except ImportError:       # not POSIX: no cross-process locks (see FitCache.computing)
    fcntl = None  # type: ignore[assignment]

_MAX_GRIDS = 8       # whole-year feature grids kept (per configuration, holiday names, years)
#: the year grids of models without a holidays frame, shared by every forecaster of the process
_YEAR_GRIDS: dict[tuple, list] = {}
_MAX_FEATURES = 16    # feature matrices kept per refit (one per distinct window; usually one)
_MAX_MEMO = 4096      # fits kept in memory per process (a few KB each)
#: what a MAP fit's `Design` is made of: objects (shared by a window's series) and numbers
_DESIGN_OBJECTS = ("t", "t_change", "X", "sigmas", "s_m")
_DESIGN_VALUES = ("S", "tau", "trend_indicator")


class FitCache:
    """Fitted Prophet parameters by the hash of their Stan inputs: in memory, and on disk unless
    ``GFS_FIT_CACHE=off`` (see module doc). A file that cannot be read is a miss."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.memo: dict[str, dict[str, np.ndarray]] = {}
        self.hits = 0
        self.misses = 0

    @classmethod
    def from_env(cls) -> FitCache:
        value = os.environ.get("GFS_FIT_CACHE", "").strip()
        if value.lower() in ("off", "0", "no", "false", "none"):
            return cls(None)
        if value:
            return cls(Path(value).expanduser())
        root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return cls(Path(root) / "gfs-opt" / "prophet-fits")

    def get(self, key: str) -> dict[str, np.ndarray] | None:
        params = self.memo.get(key)
        if params is None and self.folder is not None:
            params = self._read(key)
            if params is not None:
                self._remember(key, params)
        if params is None:
            self.misses += 1
            return None
        self.hits += 1
        return {name: value.copy() for name, value in params.items()}

    @contextlib.contextmanager
    def computing(self, key: str) -> Iterator[dict[str, np.ndarray] | None]:
        """Hold ``key``'s lock while computing it; yields the parameters if another process
        stored them meanwhile (then there is nothing to compute). Without a folder, or where file
        locks are unavailable, yields None at once: the worst case is the same fit twice."""
        if self.folder is None or fcntl is None:
            yield None
            return
        lock = self.folder / key[:2] / f"{key}.lock"
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fh = open(lock, "a")  # noqa: SIM115 - closed below, after the unlock
        except OSError:
            yield None
            return
        try:
            fcntl.flock(fh, fcntl.LOCK_EX)
            done = self._read(key)
            if done is not None:
                self._remember(key, done)
                self.misses -= 1           # counted by get(); it turned out to be a hit
                self.hits += 1
            yield done
        finally:
            with contextlib.suppress(OSError):
                lock.unlink()               # a racing process at worst computes the fit again
            fh.close()                      # releases the lock

    def _read(self, key: str) -> dict[str, np.ndarray] | None:
        assert self.folder is not None
        try:
            with np.load(self.folder / key[:2] / f"{key}.npz", allow_pickle=False) as npz:
                return {name: npz[name] for name in npz.files}
        except (OSError, ValueError, EOFError):
            return None

    def put(self, key: str, params: dict[str, np.ndarray]) -> None:
        self._remember(key, {name: np.array(v) for name, v in params.items()})
        if self.folder is None:
            return
        folder = self.folder / key[:2]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".npz", dir=folder)
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, **cast(dict[str, Any], params))
            os.replace(tmp, folder / f"{key}.npz")    # atomic: readers never see half a file
        except OSError:
            # a read-only or full disk only costs the saving
            with contextlib.suppress(OSError, UnboundLocalError):
                os.unlink(tmp)

    def _remember(self, key: str, params: dict[str, np.ndarray]) -> None:
        if len(self.memo) >= _MAX_MEMO:
            self.memo.clear()
        self.memo[key] = params


@cache
def fit_cache() -> FitCache:
    """The process's fit cache (configured from ``GFS_FIT_CACHE`` at first use)."""
    return FitCache.from_env()


@cache
def _versions() -> str:
    import cmdstanpy
    import prophet

    return f"prophet {prophet.__version__} cmdstanpy {cmdstanpy.__version__}"


class SharedFit:
    """What the Prophet models of one forecaster share (see module doc)."""

    def __init__(self, solver: str = "stan") -> None:
        if solver not in ("map", "stan"):
            raise ValueError(f"solver must be 'map' or 'stan', got {solver!r}")
        self.solver = solver
        self._backend: Any = None
        self.features: dict[tuple, tuple] = {}
        self.x_json: dict[bytes, str] = {}
        # MAP designs of the current refit's windows, by the identity of their inputs
        self.designs: dict[tuple, tuple[tuple, Design | None]] = {}
        # Both depend on column names and calendar years only, never on the series' values, and
        # every tenant model of a pool asks for the same ones (40 % of a
        # `small` GFS run was these two pandas-heavy calls):
        self.holiday_frames: dict[tuple, pd.DataFrame] = {}
        self.component_cols: dict[tuple, tuple[pd.DataFrame, dict]] = {}
        # the first model fitted on each window of the current refit (see `refit_like`)
        self.templates: dict[tuple, Any] = {}
        # seasonal and holiday features of whole calendar years (they do not depend on y)
        self.year_grids: dict[tuple, list] = {}

    def backend(self) -> Any:
        if self._backend is None:
            self._backend = _backend_class()(self)
        return self._backend

    def clear(self) -> None:
        """Forget the feature matrices (a new refit uses new hours). The newest template stays:
        a model of other hours derives the next refit's first fit as exactly as a full
        ``Prophet.fit`` would make it (`refit_like` → `_window_inputs`), without Prophet's
        preprocessing (≈ 30 ms a refit)."""
        self.features.clear()
        self.x_json.clear()
        self.designs.clear()
        newest = next(reversed(self.templates.items()), None)
        self.templates.clear()
        if newest is not None:
            self.templates[newest[0]] = newest[1]


@contextlib.contextmanager
def _json_file(text: str) -> Iterator[str]:
    fd, path = tempfile.mkstemp(suffix=".json", prefix="gfs-prophet-")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def import_prophet() -> Any:
    """Import Prophet with cmdstanpy's per-fit INFO chatter and the plotly warning silenced."""
    logging.getLogger("prophet.plot").setLevel(logging.CRITICAL)
    stan_log = logging.getLogger("cmdstanpy")
    if not stan_log.handlers:
        # cmdstanpy installs a DEBUG-level stream handler unless one exists already
        stan_log.addHandler(logging.NullHandler())
    stan_log.setLevel(logging.WARNING)
    logging.getLogger("prophet").setLevel(logging.WARNING)
    if "prophet.forecaster" not in sys.modules and "prophet.plot" not in sys.modules:
        sys.modules["prophet.plot"] = _LazyPlot("prophet.plot")
    from prophet import Prophet

    return Prophet


def _real_plot_module() -> types.ModuleType:
    if isinstance(sys.modules.get("prophet.plot"), _LazyPlot):
        del sys.modules["prophet.plot"]
    return importlib.import_module("prophet.plot")


def _forward(name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(_real_plot_module(), name)(*args, **kwargs)

    call.__name__ = name
    return call


class _LazyPlot(types.ModuleType):
    """``prophet.plot`` until something uses it. Prophet's forecaster imports it at import time
    and it imports matplotlib.pyplot: ≈ 0.7 s of CPU per process (a sixth of a toy GFS replay)
    for plots a replay never draws. ``Prophet.plot``, ``plot_components`` and any other name
    load the real module on first use."""

    plot = staticmethod(_forward("plot"))
    plot_components = staticmethod(_forward("plot_components"))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system probes e.g. __path__ on every `from` import
            raise AttributeError(name)
        return getattr(_real_plot_module(), name)


@cache
def _backend_class() -> type:
    import_prophet()
    from prophet.models import CmdStanPyBackend

    class SharedBackend(CmdStanPyBackend):
        """`CmdStanPyBackend.fit` writing its files with the C JSON encoder and a cached ``X``."""

        def __init__(self, shared: SharedFit) -> None:
            # Prophet's __init__ loads the CmdStan model here (cmdstanpy and its imports: ≈ 20 ms
            # of a `small` GFS run's CPU); the MAP path never runs Stan, so it loads on first use
            self._model: Any = None
            self.stan_fit = None
            self.newton_fallback = True
            self._shared = shared

        @property
        def model(self) -> Any:
            if self._model is None:
                kept = self.stan_fit, self.newton_fallback
                CmdStanPyBackend.__init__(self)   # Prophet's steps: CmdStan path, then load_model
                self.stan_fit, self.newton_fallback = kept
            return self._model

        @model.setter
        def model(self, value: Any) -> None:
            self._model = value

        def _data_json(self, data: dict[str, Any]) -> str:
            x = np.ascontiguousarray(np.asarray(data["X"], dtype=float))
            key = hashlib.blake2b(x.tobytes(), digest_size=16).digest() + bytes(str(x.shape), "ascii")
            x_text = self._shared.x_json.get(key)
            if x_text is None:
                x_text = self._shared.x_json[key] = json.dumps(x.tolist())
            rest = {k: v for k, v in data.items() if k != "X"}
            # the same members and values as prepare_data + stanio; order does not matter to Stan
            rest_json = json.dumps({k: (v.tolist() if isinstance(v, np.ndarray | pd.Series)
                                        else v) for k, v in rest.items()})
            return '{"X": ' + x_text + ", " + rest_json[1:]

        def _design(self, stan_data: dict[str, Any]) -> Design | None:
            """`prepare` of the inputs, once per window: the series of a window hand over the
            same date-derived objects (`refit_like` shares them), never changed after a fit."""
            objs = tuple(stan_data[k] for k in _DESIGN_OBJECTS)
            key = (*map(id, objs), *(float(stan_data[k]) for k in _DESIGN_VALUES))
            kept = self._shared.designs.get(key)
            if kept is None or any(a is not b for a, b in zip(kept[0], objs, strict=True)):
                kept = self._shared.designs[key] = (objs, prepare(stan_data))
            return kept[1]

        def fit(self, stan_init: dict[str, Any], stan_data: dict[str, Any],
                **kwargs: Any) -> Any:
            if "inits" not in kwargs and "init" in kwargs:
                stan_init = self.sanitize_custom_inits(stan_init, kwargs.pop("init"))
            inits = {"k": stan_init["k"], "m": stan_init["m"],
                     "delta": np.asarray(stan_init["delta"]).tolist(),
                     "beta": np.asarray(stan_init["beta"]).tolist(),
                     "sigma_obs": stan_init["sigma_obs"]}
            if self._shared.solver == "map":
                # p × p solves: BLAS threads cost 4× the CPU of the solve itself (spinning)
                with one_blas_thread():
                    params = map_estimate(inits, stan_data, self._design(stan_data))
                if params is not None:
                    self.stan_fit = None
                    return params
            data = {"T": stan_data["T"], "S": stan_data["S"], "K": stan_data["K"],
                    "tau": stan_data["tau"], "trend_indicator": stan_data["trend_indicator"],
                    "y": stan_data["y"], "t": stan_data["t"], "cap": stan_data["cap"],
                    "t_change": stan_data["t_change"], "s_a": stan_data["s_a"],
                    "s_m": stan_data["s_m"], "X": stan_data["X"], "sigmas": stan_data["sigmas"]}
            algorithm = "Newton" if float(stan_data["T"]) < 100 else "LBFGS"
            data_json, inits_json = self._data_json(data), json.dumps(inits)
            settings = json.dumps({"algorithm": algorithm, "iter": int(1e4), **kwargs},
                                  sort_keys=True, default=str)
            digest = hashlib.blake2b(digest_size=20)
            for part in (_versions(), str(self.model.exe_file), settings, inits_json, data_json):
                digest.update(part.encode())
                digest.update(b"\0")
            key = digest.hexdigest()
            cache = fit_cache()
            self.stan_fit = None             # on a hit only the parameters are kept
            params = cache.get(key)
            if params is None:
                with cache.computing(key) as done:
                    if done is None:
                        params = self._optimize(data_json, inits_json, algorithm, kwargs)
                        cache.put(key, params)
                    else:
                        params = {name: value.copy() for name, value in done.items()}
            return params

        def _optimize(self, data_json: str, inits_json: str, algorithm: str,
                      kwargs: dict[str, Any]) -> dict[str, np.ndarray]:
            with _json_file(data_json) as dpath, _json_file(inits_json) as ipath:
                args: dict[str, Any] = {"data": dpath, "inits": ipath, "algorithm": algorithm,
                                        "iter": int(1e4)}
                args.update(kwargs)
                try:
                    self.stan_fit = self.model.optimize(**args)
                except RuntimeError:   # Prophet's own fallback, kept
                    if not self.newton_fallback or args["algorithm"] == "Newton":
                        raise
                    args["algorithm"] = "Newton"
                    self.stan_fit = self.model.optimize(**args)
            params = self.stan_to_dict_numpy(self.stan_fit.column_names,
                                             self.stan_fit.optimized_params_np)
            for par in params:
                params[par] = params[par].reshape((1, -1))
            return params

    return SharedBackend


class _LazySeries:
    """A pandas Series attribute of the shared Prophet that `_window_inputs` sets as the
    arguments of the Series, made on first read: most models never read their changepoints or
    history dates, and the two Series cost ≈ 1 ms a derived fit (a twentieth of a refit)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.value, self.args = f"_{name}", f"_{name}_args"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        args = d.get(self.args)
        if args is not None:
            d[self.value], d[self.args] = pd.Series(*args[0], **args[1]), None
        return d.get(self.value)

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.value], obj.__dict__[self.args] = value, None

    def defer(self, obj: Any, *args: Any, **kwargs: Any) -> None:
        obj.__dict__[self.value], obj.__dict__[self.args] = None, (args, kwargs)

    def length(self, obj: Any) -> int:
        """``len`` of the attribute, without making a deferred Series."""
        args = obj.__dict__.get(self.args)
        return len(args[0][0]) if args is not None else len(self.__get__(obj))


def _lazy(m: Any, attr: str) -> _LazySeries | None:
    found = getattr(type(m), attr, None)
    return found if isinstance(found, _LazySeries) else None


def _series_len(m: Any, attr: str) -> int:
    """``len(m.<attr>)``, without making a deferred Series."""
    lazy = _lazy(m, attr)
    return lazy.length(m) if lazy is not None else len(getattr(m, attr))


def _defer(m: Any, attr: str, *args: Any, **kwargs: Any) -> None:
    """``m.<attr> = pd.Series(*args, **kwargs)``, made when first read where ``m`` allows."""
    lazy = _lazy(m, attr)
    if lazy is None:
        setattr(m, attr, pd.Series(*args, **kwargs))
    else:
        lazy.defer(m, *args, **kwargs)


@cache
def _prophet_class() -> type:
    prophet_cls: Any = import_prophet()

    class SharedProphet(prophet_cls):
        """Prophet whose backend, holiday validation and feature matrices are shared."""

        country_holidays: Any
        train_holiday_names: Any
        history_dates: Any = _LazySeries()
        start: Any
        t_scale: Any
        seasonalities: Any
        n_changepoints: Any
        changepoints: Any = _LazySeries()
        changepoints_t: Any
        train_component_cols: Any
        component_modes: Any
        y_min: Any
        y_scale: Any
        fit_kwargs: Any
        window_inputs: Any = None      # Stan inputs of a window whose preprocessing is shared
        window_arrays: Any = None      # (ds, floor, t) of the history, once per template
        configured_n_changepoints: Any

        def __init__(self, shared: SharedFit, **kwargs: Any) -> None:
            self._shared = shared
            super().__init__(**kwargs)
            # set_changepoints lowers n_changepoints for a short window: keep the setting
            self.configured_n_changepoints = self.n_changepoints

        def _load_stan_backend(self, stan_backend: str | None) -> None:
            self.stan_backend = self._shared.backend()

        @property
        def history(self) -> Any:
            """Prophet's history frame; a model from `refit_like` keeps its columns as arrays
            and builds the frame on first use (most never need it: ≈ 1 ms a fit)."""
            frame = self.__dict__.get("_history")
            columns = self.__dict__.get("_history_columns")
            if frame is None and columns is not None:
                frame = self._history = pd.DataFrame(columns)
            return frame

        @history.setter
        def history(self, value: Any) -> None:
            self._history = value
            self._history_columns = None

        def add_country_holidays(self, country_name: str) -> Any:
            # Prophet validates here the name of every holiday of 1995–2044 (≈ 0.16 s of CPU,
            # a sixteenth of a `small` GFS run) though only the holidays of the years a model
            # sees ever become columns: those names are validated where their frame is built
            # (`construct_holiday_dataframe`), which is where a clash could matter
            load_calendar(country_name)
            if self.history is not None:
                return super().add_country_holidays(country_name)   # Prophet's error
            from prophet.make_holidays import get_country_holidays_class

            get_country_holidays_class(country_name)   # an unknown country fails here, as in Prophet
            if self.country_holidays is not None:
                logging.getLogger("prophet").warning(
                    "Changing country holidays from %r to %r.", self.country_holidays,
                    country_name)
            self.country_holidays = country_name
            return self

        def construct_holiday_dataframe(self, dates: pd.Series) -> pd.DataFrame:
            if self.holidays is not None:
                return super().construct_holiday_dataframe(dates)
            names = self.train_holiday_names
            years = tuple(sorted(set(pd.DatetimeIndex(dates).year.tolist())))
            key = (self.country_holidays, years, None if names is None else tuple(names))
            frame = self._shared.holiday_frames.get(key)
            if frame is None:
                # Prophet reads only the dates' years (a Timestamp per date, ≈ 30 ms for a
                # year grid): one date per year gives it the same years in the same order
                frame = self._shared.holiday_frames[key] = super().construct_holiday_dataframe(
                    pd.Series(pd.to_datetime([f"{year}-01-01" for year in years])))
            if self.country_holidays is not None:
                # every model's own names checked, also on a frame another model built
                for name in frame["holiday"].dropna().unique().tolist():
                    self.validate_column_name(name, check_holidays=False)
            return frame.copy()

        def regressor_column_matrix(self, seasonal_features: pd.DataFrame,
                                    modes: dict) -> tuple[pd.DataFrame, dict]:
            names = self.train_holiday_names
            train = self.train_component_cols
            key = (tuple(seasonal_features.columns), None if names is None else tuple(names),
                   repr(modes), repr(sorted((r, p["mode"]) for r, p in
                                            self.extra_regressors.items())),
                   self.holidays_mode,
                   None if train is None else (tuple(train.columns), train.to_numpy().tobytes()))
            cached = self._shared.component_cols.get(key)
            if cached is None:
                cols, out = super().regressor_column_matrix(seasonal_features, modes)
                cached = self._shared.component_cols[key] = (cols, copy.deepcopy(out))
            cols, out = cached
            modes.clear()              # Prophet's version extends ``modes`` in place
            modes.update(copy.deepcopy(out))
            return cols.copy(), modes

        def _shareable(self, df: pd.DataFrame) -> bool:
            """Whether what preprocessing derives from ``df`` depends on its dates alone (plain
            sorted, finite, timezone-free hours; linear growth, absmax scaling, no regressors,
            conditions or given changepoints): then `refit_like` can derive other series."""
            if (list(df.columns) != ["ds", "y"] or self.growth != "linear"
                    or self.scaling != "absmax" or self.extra_regressors or self.changepoints
                    is not None or any(p["condition_name"] is not None
                                       for p in self.seasonalities.values())):
                return False
            ds, y = df["ds"], df["y"]
            if not (isinstance(ds.dtype, np.dtype) and np.issubdtype(ds.dtype, np.datetime64)
                    and y.dtype == np.float64):
                return False
            stamps = ds.to_numpy()
            return bool(np.all(np.isfinite(y.to_numpy())) and np.all(stamps[1:] > stamps[:-1]))

        def preprocess(self, df: pd.DataFrame, **kwargs: Any) -> Any:
            shareable = self._shareable(df)      # before Prophet sets the changepoints
            out = super().preprocess(df, **kwargs)
            if shareable:
                # arrays, not frames: Prophet.fit deep-copies the inputs (dataclasses.asdict),
                # ≈ 2 ms per fit for a DataFrame; Stan and the MAP read the same numbers
                out = dataclasses.replace(out, X=out.X.to_numpy(dtype=float),
                                          y=out.y.to_numpy(), t=out.t.to_numpy())
                self.window_inputs = out
            return out

        def _feature_config(self) -> tuple:
            """What a feature matrix depends on besides the dates."""
            names = self.train_holiday_names
            parts = (self.seasonalities, names, self.country_holidays, self.holidays_mode,
                     self.holidays)
            memo = self.__dict__.get("_config_memo")
            if memo is not None and all(a is b for a, b in zip(memo[0], parts, strict=True)):
                return memo[1]
            config = (repr(sorted((k, sorted(v.items())) for k, v in self.seasonalities.items())),
                      self.country_holidays, self.holidays_mode,
                      None if self.holidays is None else id(self.holidays),
                      None if names is None else tuple(names))
            if self.params:
                # fitted: Prophet refuses new seasonalities from now on, so the same objects
                # mean the same configuration (the repr was ≈ 3 % of a `small` GFS run)
                self._config_memo = (parts, config)
            return config

        def make_all_seasonality_features(self, df: pd.DataFrame) -> Any:
            if not self._plain_features():
                return super().make_all_seasonality_features(df)
            ds = np.ascontiguousarray(df["ds"].to_numpy(dtype="datetime64[ns]"))
            config = self._feature_config()
            key = (hashlib.blake2b(ds.tobytes(), digest_size=16).digest(), len(ds), *config)
            cached = self._shared.features.get(key)
            if cached is None:
                out = self._from_year_grid(ds, config) or super().make_all_seasonality_features(df)
                if len(self._shared.features) >= _MAX_FEATURES:
                    self._shared.features.clear()
                self._shared.features[key] = cached = (out, self.train_holiday_names)
            (features, priors, cols, modes), train_names = cached
            if self.train_holiday_names is None and train_names is not None:
                self.train_holiday_names = train_names.copy()
            return features, list(priors), cols, {k: list(v) for k, v in modes.items()}

        def _year_grid(self, config: tuple, years: tuple[int, int]) -> list:
            """(first hour, features, priors, component columns, modes, holiday names, arrays)
            of whole calendar years ``years[0]..years[1]``; arrays = (X, additive, multiplicative
            column weights) as numpy, made on first use."""
            # without a holidays frame of the user's (known by its id only) a grid is the same
            # for every model of this configuration: the forecasters of one process share it (a
            # GFS run's HP and whole-node forecasters, the runs of a sweep's worker)
            grids = _YEAR_GRIDS if self.holidays is None else self._shared.year_grids
            grid_key = (config, self.holidays_prior_scale, years)
            grid = grids.get(grid_key)
            if grid is None and config[-1] is not None:
                # a fitted model names the holidays its training years had; for those same years
                # Prophet then keeps every holiday and adds none: the training grid's rows
                # (≈ 40 ms a grid; tests/test_forecast_models.py compares them)
                trained = grids.get(((*config[:-1], None), self.holidays_prior_scale, years))
                if trained is not None and trained[5] is not None and tuple(trained[5]) == config[-1]:
                    grid = grids[grid_key] = trained
            if grid is None:
                hours = pd.date_range(f"{years[0]}-01-01", f"{years[1] + 1}-01-01", freq="h",
                                      inclusive="left")
                features, priors, cols, modes = super().make_all_seasonality_features(
                    pd.DataFrame({"ds": hours}))
                if len(grids) >= _MAX_GRIDS:
                    grids.clear()
                grids[grid_key] = grid = [
                    np.datetime64(hours[0].to_datetime64(), "ns"), features, priors, cols, modes,
                    self.train_holiday_names, None]
            return grid

        def _grid_at(self, ds: np.ndarray, config: tuple) -> tuple[list, int] | None:
            """The year grid holding contiguous hours ``ds`` (datetime64[ns]) and the row of
            ``ds[0]`` in it; None when the hours are not contiguous."""
            if len(ds) == 0 or np.any(np.diff(ds) != np.timedelta64(1, "h")):
                return None
            return self._grid_from(ds[0], len(ds), config)

        def _grid_from(self, first: np.datetime64, n: int, config: tuple) -> tuple[list, int]:
            """`_grid_at` of the ``n`` hours from ``first`` (datetime64[ns])."""
            hour = np.timedelta64(1, "h")
            years = np.array([first, first + (n - 1) * hour]).astype("datetime64[Y]")
            first_year, last_year = (years.astype(np.int64) + 1970).tolist()
            grid = self._year_grid(config, (first_year, last_year))
            return grid, int((first - grid[0]) // hour)

        def _name_holidays(self, grid: list) -> None:
            if self.train_holiday_names is None and grid[5] is not None:
                # a training call: Prophet names the holidays of the years covered, as the grid
                self.train_holiday_names = grid[5].copy()

        def _from_year_grid(self, ds: np.ndarray, config: tuple) -> Any:
            """Features of contiguous hours as rows of a whole-year grid, or None.

            Every feature is a function of the hour alone (Fourier terms of the absolute time,
            holiday indicators by date), and the holiday columns are those of the calendar
            years covered, so the rows of the year grid are what Prophet computes for any
            window inside it — bit for bit (tests/test_forecast_models.py). Series that start
            at different hours then cost one slice each, not one Prophet call (≈ 30 ms) each.
            """
            at = self._grid_at(ds, config)
            if at is None:
                return None
            grid, i0 = at
            self._name_holidays(grid)
            _, features, priors, cols, modes, _, _ = grid
            rows = features.iloc[i0:i0 + len(ds)].reset_index(drop=True)
            return rows, list(priors), cols.copy(), {k: list(v) for k, v in modes.items()}

        def feature_rows(self, first: Any,
                         n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
            """For a fitted model: the feature matrix of ``n`` hours from ``first`` and the
            additive and multiplicative column weights, as numpy arrays — the numbers
            ``make_all_seasonality_features`` returns for those hours (its year-grid rows),
            without a frame per call. None where that route does not apply."""
            if (n < 1 or not self._plain_features()
                    or (self.train_holiday_names is None
                        and (self.country_holidays is not None or self.holidays is not None))):
                return None
            first = np.asarray(first).astype("datetime64[ns]")[()]
            grid, i0 = self._grid_from(first, n, self._feature_config())
            x, s_a, s_m = _grid_arrays(grid)
            return x[i0:i0 + n], s_a, s_m

        def window_features(self, ds: np.ndarray) -> tuple[np.ndarray, list, Any, dict] | None:
            """``make_all_seasonality_features`` of training hours ``ds`` (contiguous) as
            (X as a float array, priors, component columns, modes): the year grid's rows
            without a frame around them. None where that route does not apply."""
            at = (self._grid_at(ds.astype("datetime64[ns]"), self._feature_config())
                  if self._plain_features() else None)
            if at is None or _grid_arrays(at[0])[0].dtype != np.float64:
                return None
            grid, i0 = at
            self._name_holidays(grid)
            _, _, priors, cols, modes, _, _ = grid
            return (_grid_arrays(grid)[0][i0:i0 + len(ds)], list(priors), cols.copy(),
                    {k: list(v) for k, v in modes.items()})

        def _plain_features(self) -> bool:
            """No extra regressors or conditional seasonalities: features are the hour's alone."""
            return not self.extra_regressors and all(
                p["condition_name"] is None for p in self.seasonalities.values())

    return SharedProphet


def refit_like(template: Any, ds: np.ndarray, y: np.ndarray, **kwargs: Any) -> Any | None:
    """``Prophet.fit(pd.DataFrame({"ds": ds, "y": y}), **kwargs)`` from a fitted ``template`` of
    the same forecaster (a `fast_prophet` model), without a new model, a frame or Prophet's
    preprocessing: the fitted model is a shallow copy of the template with its own history, scale
    and parameters and, when ``ds`` covers other hours than the template, its own time scale,
    changepoints and features (`_window_inputs`). Nothing a fit sets is changed afterwards, so
    the copies may share the rest. The Stan inputs and initial values are the ones ``fit`` would build, bit for bit
    (tests/test_forecast_models.py). None where this does not apply (then call ``fit``)."""
    inputs = getattr(template, "window_inputs", None)
    y = np.asarray(y, dtype=float)
    if (inputs is None or len(y) < 2 or len(ds) != len(y)
            or not np.all(np.isfinite(y)) or y.min() == y.max()):
        return None
    m = copy.copy(template)
    arrays = _window_arrays(template)
    if len(ds) != inputs.T or not np.array_equal(ds, arrays[0]):
        derived = _window_inputs(m, ds)
        if derived is None:
            return None
        inputs, arrays = derived
    m.window_arrays = arrays
    ds, floor, t = arrays
    y_scale = float(np.abs(y).max())
    m.y_min, m.y_scale = 0.0, (y_scale if y_scale != 0 else 1.0)
    y_scaled = (y - floor) / m.y_scale
    m.history = None
    m._history_columns = {"ds": ds, "y": y, "floor": floor, "t": t, "y_scaled": y_scaled}
    m.fit_kwargs = copy.deepcopy(kwargs)
    m.window_inputs = dataclasses.replace(inputs, y=y_scaled)
    stan_init = initial_values(m)
    # the backends only read their inputs: no deep copy (Prophet.fit's asdict makes one)
    data = {f.name: getattr(m.window_inputs, f.name)
            for f in dataclasses.fields(m.window_inputs)}
    m.params = m.stan_backend.fit(stan_init, data, **kwargs)
    m.stan_fit = m.stan_backend.stan_fit
    if _series_len(m, "changepoints") == 0:     # as Prophet.fit: fold δ into the base rate
        m.params["k"] = m.params["k"] + m.params["delta"].reshape(-1)
        m.params["delta"] = np.zeros(m.params["delta"].shape).reshape((-1, 1))
    return m


def initial_values(m: Any) -> dict[str, Any]:
    """``asdict(m.calculate_initial_params(K))`` for a model from `refit_like`: Prophet's
    linear_growth_init on the same numbers (first and last hour), without pandas."""
    ds, _, t = m.window_arrays
    y_scaled = m.window_inputs.y
    i0, i1 = int(np.argmin(ds)), int(np.argmax(ds))
    k = (y_scaled[i1] - y_scaled[i0]) / (t[i1] - t[i0])
    return {"k": k, "m": y_scaled[i0] - k * t[i0], "delta": np.zeros_like(m.changepoints_t),
            "beta": np.zeros(m.window_inputs.K), "sigma_obs": 1.0}


def _window_inputs(m: Any, ds: np.ndarray) -> tuple[Any, tuple] | None:
    """What ``Prophet.preprocess`` derives from the dates, for the copy ``m`` of a model fitted
    on other hours: time scale, changepoints (Prophet's grid over the first
    ``changepoint_range`` of the history), features and component columns. Only where the
    seasonalities do not depend on the window (all set explicitly, none 'auto') and the dates
    are plain sorted timestamps; (inputs with y unset, (ds, floor, t)) or None."""
    if (m.growth != "linear" or m.scaling != "absmax" or m.extra_regressors
            or m.changepoints_t is None or "configured_n_changepoints" not in vars(m)
            or any(isinstance(a, str) for a in (m.yearly_seasonality, m.weekly_seasonality,
                                                m.daily_seasonality))
            or any(p["condition_name"] is not None for p in m.seasonalities.values())
            or not (isinstance(ds.dtype, np.dtype) and np.issubdtype(ds.dtype, np.datetime64))
            or not np.all(ds[1:] > ds[:-1])):
        return None
    from prophet.models import ModelInputData

    start = pd.Timestamp(ds[0])
    m.start, m.t_scale = start, pd.Timestamp(ds[-1]) - start
    t = (ds - np.datetime64(m.start)) / np.timedelta64(m.t_scale)
    floor = np.zeros(len(ds))
    _defer(m, "history_dates", ds, name="ds")
    hist_size = int(np.floor(len(ds) * m.changepoint_range))
    m.n_changepoints = min(m.configured_n_changepoints, hist_size - 1)
    if m.n_changepoints > 0:
        idx = np.linspace(0, hist_size - 1, m.n_changepoints + 1).round().astype(int)[1:]
        _defer(m, "changepoints", ds[idx], index=idx, name="ds")
        m.changepoints_t = np.sort((ds[idx] - np.datetime64(m.start)) / np.timedelta64(m.t_scale))
    else:
        m.changepoints = pd.Series(pd.to_datetime([]), name="ds")
        m.changepoints_t = np.array([0])
    if m.country_holidays is not None or m.holidays is not None:
        m.train_holiday_names = None          # the holidays of this window's years
    rows = m.window_features(ds) if hasattr(m, "window_features") else None
    if rows is None:
        frame = pd.DataFrame({"ds": ds, "floor": floor, "t": t})
        features, priors, cols, modes = m.make_all_seasonality_features(frame)
        rows = features.to_numpy(dtype=float), priors, cols, modes
    x, priors, cols, modes = rows
    m.train_component_cols, m.component_modes = cols, modes
    inputs = ModelInputData(
        T=len(ds), S=len(m.changepoints_t), K=x.shape[1], tau=m.changepoint_prior_scale,
        trend_indicator=0, y=np.zeros(len(ds)), t=t, t_change=m.changepoints_t,
        X=x, sigmas=list(priors), s_a=cols["additive_terms"],
        s_m=cols["multiplicative_terms"], cap=np.zeros(len(ds)))
    return inputs, (ds, floor, t)


def _grid_arrays(grid: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, additive, multiplicative column weights) of a year grid as numpy, made once."""
    if grid[6] is None:
        cols = grid[3]
        grid[6] = (grid[1].to_numpy(), cols["additive_terms"].to_numpy(),
                   cols["multiplicative_terms"].to_numpy())
    return grid[6]


def _window_arrays(template: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ds, floor, t) of the template's history as arrays, computed once per template."""
    cached = getattr(template, "window_arrays", None)
    if cached is None:
        h = template.history
        cached = (h["ds"].to_numpy(), h["floor"].to_numpy(), h["t"].to_numpy())
        template.window_arrays = cached
    return cached


def fast_prophet(shared: SharedFit, **kwargs: Any) -> Any:
    """A new (unfitted) Prophet using ``shared`` (see module doc); kwargs go to Prophet."""
    return _prophet_class()(shared, **kwargs)
