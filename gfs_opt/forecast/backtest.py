"""Rolling-origin backtest that mirrors how the simulator uses a forecaster.

Protocol. The evaluation window is the last ``weeks`` weeks of the data, starting at midnight.
Every ``refit`` hours (``"daily"`` = 24, ``"hourly"`` = 1, or an int) each model is fitted on all
hours before the refit time ``o`` and predicts ``refit + horizon − 1`` hours ahead — exactly what
`ForecastProvider` precomputes. Between refits, at every hour ``k`` (the first hour not yet
observed, as at a quota refresh), the forecasts in force for hours ``k .. k+horizon−1`` (``h =
1..horizon``) are scored against the actual hourly values. Each row of the scored frame therefore
has a step ``h`` (position in the quota's horizon) and a ``lead`` (hours since the refit, up to
``refit + horizon − 1``): with daily refits most forecasts are day-ahead.

Metrics per model × series: MAE and WAPE of the mean, pinball loss of the ``quantile`` forecast,
its empirical coverage P(y ≤ q), mean width of the central interval [q_{1−τ}, q_τ], and the wall
time per refit / per predict of the model (all series together).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from gfs_opt.errors import GfsError
from gfs_opt.forecast.base import Forecaster, qcol, validate_history
from gfs_opt.forecast.registry import make_forecaster

HOUR = pd.Timedelta(hours=1)
METRIC_COLUMNS = ["model", "series", "n", "mae", "wape", "pinball", "coverage", "width",
                  "fit_s", "predict_s"]


def refit_hours(refit: str | int) -> int:
    if refit == "daily":
        return 24
    if refit == "hourly":
        return 1
    try:
        hours = int(refit)
    except (TypeError, ValueError):
        raise GfsError(f"refit must be 'daily', 'hourly' or a number of hours, got {refit!r}") from None
    if hours < 1:
        raise GfsError(f"refit interval must be ≥ 1 hour, got {hours}")
    return hours


def interval_levels(quantile: float) -> tuple[float, float]:
    """(lower, upper) quantile levels of the central interval around ``quantile``."""
    if not 0.0 < quantile < 1.0 or quantile == 0.5:
        raise GfsError(f"quantile must lie in (0, 1) and differ from 0.5, got {quantile}")
    lo, hi = sorted((round(1.0 - quantile, 10), quantile))
    return lo, hi


def pinball(y: np.ndarray, q: np.ndarray, tau: float) -> np.ndarray:
    d = y - q
    return np.maximum(tau * d, (tau - 1.0) * d)


@dataclass
class BacktestResult:
    """Scored forecasts (one row per model × series × hourly origin × h) and their summary."""

    forecasts: pd.DataFrame
    metrics: pd.DataFrame
    quantile: float
    timings: dict[str, dict[str, float]] = field(default_factory=dict)

    def summary(self) -> pd.DataFrame:
        """Per model: means over series (WAPE pooled over series), timings."""
        f = self.forecasts
        rows = []
        for name, g in f.groupby("model", sort=False):
            m = self.metrics[self.metrics["model"] == name]
            abs_err = (g["y"] - g["mean"]).abs()
            rows.append({"model": name, "series": int(m["series"].nunique()), "mae": m["mae"].mean(),
                         "wape": abs_err.sum() / max(g["y"].abs().sum(), 1e-12),
                         "pinball": m["pinball"].mean(), "coverage": m["coverage"].mean(),
                         "width": m["width"].mean(), **self.timings.get(str(name), {})})
        return pd.DataFrame(rows)


def _models(models: Sequence[str] | Mapping[str, Forecaster], levels: tuple[float, float],
            seed: int) -> dict[str, Forecaster]:
    if isinstance(models, Mapping):
        out = dict(models)
    else:
        names = [m for m in models if m]
        if not names:
            raise GfsError("no forecaster given")
        out = {name: make_forecaster(name, quantiles=levels, seed=seed) for name in names}
    for name, model in out.items():
        missing = [lv for lv in levels if lv not in tuple(model.quantiles)]
        if missing:
            raise GfsError(f"model {name!r} does not produce quantile(s) {missing}")
    return out


def run_backtest(history: pd.DataFrame, models: Sequence[str] | Mapping[str, Forecaster],
                 horizon: int = 4, quantile: float = 0.9, weeks: float = 8,
                 refit: str | int = "daily", seed: int = 0,
                 progress: bool = False) -> BacktestResult:
    """Run the protocol of the module doc; see `BacktestResult`."""
    if int(horizon) != horizon or horizon < 1:
        raise GfsError(f"horizon must be a positive number of hours, got {horizon}")
    levels = interval_levels(quantile)
    every = refit_hours(refit)
    fitted = _models(models, levels, seed)
    df = validate_history(history).sort_values("ds", kind="stable").reset_index(drop=True)
    if df.empty:
        raise GfsError("history is empty")
    hours = (df["ds"].to_numpy().astype("datetime64[h]").astype(np.int64))
    first, last = int(hours[0]), int(hours[-1])
    start = ((last + 1 - round(weeks * 168)) + 23) // 24 * 24  # midnight
    if start <= first:
        raise GfsError(f"{weeks} evaluation weeks leave no training history "
                       f"(data spans {last - first + 1} hours)")
    actual = df.pivot_table(index="ds", columns="series", values="y", aggfunc="max")
    origins = list(range(start, last + 1, every))
    steps = every + int(horizon) - 1
    # (k_off, h) pairs scored after each refit: hourly origin k = o + k_off, target step k_off + h
    k_off, h_idx = np.meshgrid(np.arange(every), np.arange(1, horizon + 1), indexing="ij")
    k_off, h_idx = k_off.ravel(), h_idx.ravel()
    lead = k_off + h_idx
    parts: list[pd.DataFrame] = []
    timings = {name: {"fit_s": 0.0, "predict_s": 0.0, "refits": 0.0} for name in fitted}
    bar = tqdm(origins, desc="backtest refits", disable=not progress, unit="refit")
    for o in bar:
        hi = np.searchsorted(hours, o, side="left")
        for name, model in fitted.items():
            # only the hours the model uses: validating months of history per refit is wasted time
            window = getattr(model, "history_hours", None) or (o - first)
            lo = np.searchsorted(hours, o - window - 1, side="left")
            train = df.iloc[lo:hi]
            if train.empty:
                continue
            t0 = time.perf_counter()
            model.fit(train)
            t1 = time.perf_counter()
            pred = model.predict(steps)
            t2 = time.perf_counter()
            timings[name]["fit_s"] += t1 - t0
            timings[name]["predict_s"] += t2 - t1
            timings[name]["refits"] += 1
            parts.append(_score(name, pred, o, k_off, h_idx, lead, actual, levels, last))
    bar.close()
    for t in timings.values():
        n = max(t.pop("refits"), 1.0)
        t["fit_s"] /= n
        t["predict_s"] /= n
    forecasts = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if forecasts.empty:
        raise GfsError("the backtest produced no scored forecast (no series overlaps the window)")
    metrics = _metrics(forecasts, quantile, timings)
    return BacktestResult(forecasts, metrics, quantile, timings)


def _score(name: str, pred: pd.DataFrame, o: int, k_off: np.ndarray, h_idx: np.ndarray,
           lead: np.ndarray, actual: pd.DataFrame, levels: tuple[float, float],
           last: int) -> pd.DataFrame:
    """Expand one refit's prediction into the (hourly origin, h) pairs it serves, with actuals."""
    lo_col, hi_col = qcol(levels[0]), qcol(levels[1])
    pred = pred[pred["series"].isin(actual.columns)]
    origin_ts = pd.Timestamp(np.datetime64(o, "h"))
    rows = []
    for series, g in pred.groupby("series", sort=True):
        g = g.sort_values("h")
        if len(g) < lead.max() or g["ds"].iloc[0] != origin_ts:
            continue  # series ended before the refit: its forecast does not start at o
        target = g["ds"].to_numpy()[lead - 1]
        ok = target <= np.datetime64(last, "h")
        y = actual[series].reindex(target[ok]).to_numpy()
        have = ~np.isnan(y)
        sel = lead[ok][have] - 1
        rows.append(pd.DataFrame({
            "model": name, "series": series,
            "origin": origin_ts + pd.to_timedelta(k_off[ok][have], unit="h"),
            "h": h_idx[ok][have], "lead": lead[ok][have], "ds": target[ok][have], "y": y[have],
            "mean": g["mean"].to_numpy()[sel], "std": g["std"].to_numpy()[sel],
            "lo": g[lo_col].to_numpy()[sel], "hi": g[hi_col].to_numpy()[sel]}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def _metrics(f: pd.DataFrame, quantile: float, timings: dict[str, dict[str, float]]) -> pd.DataFrame:
    q = f["hi"] if quantile > 0.5 else f["lo"]
    work = pd.DataFrame({"model": f["model"], "series": f["series"],
                         "abs": (f["y"] - f["mean"]).abs(), "absy": f["y"].abs(),
                         "pin": pinball(f["y"].to_numpy(), q.to_numpy(), quantile),
                         "cov": (f["y"] <= q).astype(float), "width": f["hi"] - f["lo"]})
    g = work.groupby(["model", "series"], sort=False)
    out = g.agg(n=("abs", "size"), mae=("abs", "mean"), abs_sum=("abs", "sum"),
                y_sum=("absy", "sum"), pinball=("pin", "mean"), coverage=("cov", "mean"),
                width=("width", "mean")).reset_index()
    out["wape"] = out["abs_sum"] / out["y_sum"].where(out["y_sum"] > 0)
    out["fit_s"] = out["model"].map(lambda m: timings[m]["fit_s"])
    out["predict_s"] = out["model"].map(lambda m: timings[m]["predict_s"])
    return out[METRIC_COLUMNS]


def rolling_backtest(history_df: pd.DataFrame, models: Sequence[str] | Mapping[str, Forecaster],
                     horizon: int = 4, quantile: float = 0.9, weeks: float = 8,
                     refit: str | int = "daily", seed: int = 0,
                     progress: bool = False) -> pd.DataFrame:
    """Per model × series metrics (columns `METRIC_COLUMNS`); see the module doc."""
    return run_backtest(history_df, models, horizon, quantile, weeks, refit, seed, progress).metrics
