"""Rolling-origin backtest that mirrors how the simulator uses a forecaster.

Evaluation window: ``[start, end)`` if given, else the last ``weeks`` weeks of the data starting
at midnight. Every ``refit`` hours (``"daily"`` = 24, ``"hourly"`` = 1, or an int) from the
window's start, each model is fitted on all earlier hours (the expensive step). Between refits,
at every hour ``k`` (the first hour not yet observed, as at a quota refresh), the forecasts for
hours ``k .. k+horizon−1`` (``h = 1..horizon``) are scored against the actual hourly values.
Two protocols for those hourly forecasts:

- ``update="hourly"`` (default; what `ForecastProvider` does): at each hour the model is first
  conditioned on the hour that just ended (``model.update``), then predicts ``horizon`` steps
  from it, so ``h`` is the lead after the latest observed hour.
- ``update="none"``: the forecast path computed at the refit is sliced (the provider before
  GFS-SPEC §2.1 required hourly conditioning; most forecasts were then day-ahead).

Each scored row has ``h`` (position in the quota's horizon), ``lead`` (hours between the latest
hour the model had seen and the target: ``h`` with hourly updates, up to ``refit + horizon − 1``
without) and ``since_fit`` (hours since the refit).

Metrics per model × series (`METRIC_COLUMNS`): MAE and WAPE of the mean, pinball loss of the
``quantile`` forecast, its coverage P(y ≤ q), the mean width of the central interval
[q_{1−τ}, q_τ], and the seconds per fit / per update / per predict of the model (all series
together). Per model × series × h (`LEAD_COLUMNS`): the same coverage, P(y < q) (together they
bound the coverage of a step-valued series whose quantile ties its value, e.g. y = q = 0), pinball
and MAE. `calibration_report` turns them into the calibration target: the share of eligible series
whose coverage lies in a band at each h (`eligible_series` states who is scored).
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
UPDATES = ("hourly", "none")
TIE_EPS = 1e-6  # GPUs; demand is a multiple of 0.001 GPU, float sums differ by far less
METRIC_COLUMNS = ["model", "series", "n", "mae", "wape", "pinball", "coverage", "width",
                  "fit_s", "update_s", "predict_s"]
LEAD_COLUMNS = ["model", "series", "h", "n", "coverage", "coverage_lt", "pinball", "mae"]


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
    """Scored forecasts (one row per model × series × hourly origin × h) and their summaries."""

    forecasts: pd.DataFrame
    metrics: pd.DataFrame
    quantile: float
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    lead_metrics: pd.DataFrame = field(default_factory=pd.DataFrame)

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


def _hour(ts: str | pd.Timestamp) -> int:
    try:
        stamp = pd.Timestamp(ts)
    except (ValueError, TypeError):
        raise GfsError(f"cannot read {ts!r} as a date/time") from None
    return int(np.datetime64(stamp.floor("h"), "h").astype(np.int64))


def _window(first: int, last: int, weeks: float, start: str | pd.Timestamp | None,
            end: str | pd.Timestamp | None) -> tuple[int, int]:
    """[lo, hi) absolute hours of the evaluation window (hi exclusive)."""
    hi = last + 1 if end is None else min(_hour(end), last + 1)
    lo = (((hi - round(weeks * 168)) + 23) // 24 * 24) if start is None else _hour(start)
    if lo <= first:
        raise GfsError(f"the evaluation window leaves no training history (it starts at "
                       f"{np.datetime64(lo, 'h')}, the data at {np.datetime64(first, 'h')})")
    if hi <= lo:
        raise GfsError(f"the evaluation window is empty ({np.datetime64(lo, 'h')} to "
                       f"{np.datetime64(hi, 'h')})")
    return lo, hi


def run_backtest(history: pd.DataFrame, models: Sequence[str] | Mapping[str, Forecaster],
                 horizon: int = 4, quantile: float = 0.9, weeks: float = 8,
                 refit: str | int = "daily", seed: int = 0, progress: bool = False,
                 update: str = "hourly", start: str | pd.Timestamp | None = None,
                 end: str | pd.Timestamp | None = None) -> BacktestResult:
    """Run the protocol of the module doc; see `BacktestResult`."""
    if int(horizon) != horizon or horizon < 1:
        raise GfsError(f"horizon must be a positive number of hours, got {horizon}")
    if update not in UPDATES:
        raise GfsError(f"update must be one of {list(UPDATES)}, got {update!r}")
    horizon = int(horizon)
    levels = interval_levels(quantile)
    every = refit_hours(refit)
    fitted = _models(models, levels, seed)
    df = validate_history(history).sort_values("ds", kind="stable").reset_index(drop=True)
    if df.empty:
        raise GfsError("history is empty")
    hours = (df["ds"].to_numpy().astype("datetime64[h]").astype(np.int64))
    first, last = int(hours[0]), int(hours[-1])
    lo_h, hi_h = _window(first, last, weeks, start, end)
    origins = list(range(lo_h, hi_h, every))
    hourly = update == "hourly" and every > 1
    parts: list[pd.DataFrame] = []
    hourly_preds: list[pd.DataFrame] = []
    hourly_meta: list[tuple[str, int, int, int]] = []   # model, origin k, refit o, rows
    timings = {name: {"fit_s": 0.0, "update_s": 0.0, "predict_s": 0.0, "fits": 0.0,
                      "updates": 0.0, "predicts": 0.0} for name in fitted}
    bar = tqdm(origins, desc="backtest refits", disable=not progress, unit="refit")
    for o in bar:
        hi = np.searchsorted(hours, o, side="left")
        block = range(o, min(o + every, hi_h))
        for name, model in fitted.items():
            # only the hours the model uses: validating months of history per refit is wasted time
            window = getattr(model, "history_hours", None) or (o - first)
            lo = np.searchsorted(hours, o - window - 1, side="left")
            train = df.iloc[lo:hi]
            if train.empty:
                continue
            tm = timings[name]
            t0 = time.perf_counter()
            model.fit(train)
            tm["fit_s"] += time.perf_counter() - t0
            tm["fits"] += 1
            if not hourly:
                t0 = time.perf_counter()
                pred = model.predict(len(block) + horizon - 1)
                tm["predict_s"] += time.perf_counter() - t0
                tm["predicts"] += 1
                parts.append(_expand_path(name, pred, o, len(block), horizon))
                continue
            for k in block:
                if k > o:
                    a, b = np.searchsorted(hours, [k - 1, k], side="left")
                    t0 = time.perf_counter()
                    model.update(df.iloc[a:b])
                    tm["update_s"] += time.perf_counter() - t0
                    tm["updates"] += 1
                t0 = time.perf_counter()
                pred = model.predict(horizon)
                tm["predict_s"] += time.perf_counter() - t0
                tm["predicts"] += 1
                hourly_preds.append(pred)
                hourly_meta.append((name, k, o, len(pred)))
    bar.close()
    if hourly_preds:
        parts.append(_label_hourly(hourly_preds, hourly_meta))
    for tm in timings.values():
        for what in ("fit", "update", "predict"):
            tm[f"{what}_s"] /= max(tm.pop(f"{what}s"), 1.0)
    if not parts:
        raise GfsError("the backtest produced no scored forecast (no series overlaps the window)")
    forecasts = _score(pd.concat(parts, ignore_index=True), df, levels, hi_h)
    if forecasts.empty:
        raise GfsError("the backtest produced no scored forecast (no series overlaps the window)")
    metrics = _metrics(forecasts, quantile, timings)
    return BacktestResult(forecasts, metrics, quantile, timings, lead_metrics(forecasts, quantile))


def _label_hourly(preds: list[pd.DataFrame],
                  meta: list[tuple[str, int, int, int]]) -> pd.DataFrame:
    """Concatenate the hourly predictions, labelled once (per-hour frame edits are slow)."""
    out = pd.concat(preds, ignore_index=True)
    names, ks, os_, lens = zip(*meta, strict=True)
    rows = np.asarray(lens)
    out["model"] = np.repeat(np.asarray(names, dtype=object), rows)
    out["origin"] = np.repeat(np.asarray(ks, dtype=np.int64), rows).astype(
        "datetime64[h]").astype("datetime64[ns]")
    out["lead"] = out["h"]
    out["since_fit"] = out["h"].to_numpy() + np.repeat(np.asarray(ks) - np.asarray(os_), rows)
    return out


def _expand_path(name: str, pred: pd.DataFrame, o: int, block: int, horizon: int) -> pd.DataFrame:
    """One refit's path → the (hourly origin k, h) pairs it serves without updates."""
    k_off, h = np.meshgrid(np.arange(block), np.arange(1, horizon + 1), indexing="ij")
    lead = (k_off + h).ravel()
    pieces = []
    for _series, g in pred.groupby("series", sort=True):
        g = g.sort_values("h")
        if len(g) < lead.max():
            continue
        sel = g.iloc[lead - 1].reset_index(drop=True)
        pieces.append(sel.assign(model=name, h=h.ravel(), lead=lead, since_fit=lead,
                                 origin=np.datetime64(o, "h") + k_off.ravel().astype(
                                     "timedelta64[h]")))
    return pd.concat(pieces, ignore_index=True) if pieces else pd.DataFrame()


def _score(pred: pd.DataFrame, df: pd.DataFrame, levels: tuple[float, float],
           hi_h: int) -> pd.DataFrame:
    """Attach actuals; keep forecasts that start at their origin (a series that stopped before
    it is not forecast from it) and whose target lies in the window and is observed."""
    pred = pred[(pred["ds"] - pred["origin"]) // HOUR + 1 == pred["h"]]
    pred = pred[pred["ds"] < np.datetime64(hi_h, "h")]
    actual = df.groupby(["series", "ds"], sort=False)["y"].max().rename("y").reset_index()
    out = pred.merge(actual, on=["series", "ds"], how="inner")
    lo_col, hi_col = qcol(levels[0]), qcol(levels[1])
    out = out.rename(columns={lo_col: "lo", hi_col: "hi"})
    cols = ["model", "series", "origin", "h", "lead", "since_fit", "ds", "y", "mean", "std",
            "lo", "hi"]
    return out[cols].sort_values(["model", "series", "origin", "h"], kind="stable",
                                 ignore_index=True)


def _quantile_col(f: pd.DataFrame, quantile: float) -> pd.Series:
    return f["hi"] if quantile > 0.5 else f["lo"]


def _metrics(f: pd.DataFrame, quantile: float, timings: dict[str, dict[str, float]]) -> pd.DataFrame:
    q = _quantile_col(f, quantile)
    work = pd.DataFrame({"model": f["model"], "series": f["series"],
                         "abs": (f["y"] - f["mean"]).abs(), "absy": f["y"].abs(),
                         "pin": pinball(f["y"].to_numpy(), q.to_numpy(), quantile),
                         "cov": (f["y"] <= q + TIE_EPS).astype(float), "width": f["hi"] - f["lo"]})
    g = work.groupby(["model", "series"], sort=False)
    out = g.agg(n=("abs", "size"), mae=("abs", "mean"), abs_sum=("abs", "sum"),
                y_sum=("absy", "sum"), pinball=("pin", "mean"), coverage=("cov", "mean"),
                width=("width", "mean")).reset_index()
    out["wape"] = out["abs_sum"] / out["y_sum"].where(out["y_sum"] > 0)
    for what in ("fit_s", "update_s", "predict_s"):
        out[what] = out["model"].map(lambda m, w=what: timings[m][w])
    return out[METRIC_COLUMNS]


def lead_metrics(f: pd.DataFrame, quantile: float) -> pd.DataFrame:
    """`LEAD_COLUMNS` from a scored forecast frame (model, series, h, y, mean, lo, hi)."""
    q = _quantile_col(f, quantile)
    work = pd.DataFrame({"model": f["model"], "series": f["series"], "h": f["h"],
                         "cov": (f["y"] <= q + TIE_EPS).astype(float),
                         "cov_lt": (f["y"] < q - TIE_EPS).astype(float),
                         "pin": pinball(f["y"].to_numpy(), q.to_numpy(), quantile),
                         "abs": (f["y"] - f["mean"]).abs()})
    out = work.groupby(["model", "series", "h"], sort=False).agg(
        n=("cov", "size"), coverage=("cov", "mean"), coverage_lt=("cov_lt", "mean"),
        pinball=("pin", "mean"), mae=("abs", "mean")).reset_index()
    return out[LEAD_COLUMNS]


def eligible_series(history: pd.DataFrame, start: str | pd.Timestamp,
                    end: str | pd.Timestamp | None = None, min_active: float = 0.5) -> pd.Series:
    """Which series the calibration target scores (bool per series), stated before any result:
    the series was observed before ``start`` (so it is forecast from every hourly origin) and its
    demand is non-zero in at least ``min_active`` of its hours in ``[start, end)``. Idle or
    mostly idle tenants are not scored: their 0.9-quantile is 0 and ``y = q = 0`` most hours,
    which says nothing about calibration."""
    df = validate_history(history)
    t0 = pd.Timestamp(start)
    inside = (df["ds"] >= t0) & (df["ds"] < (pd.Timestamp(end) if end is not None else df["ds"].max()
                                                + HOUR))
    seen_before = df[df["ds"] < t0].groupby("series").size() > 0
    active = (df.loc[inside, "y"] > 0).groupby(df.loc[inside, "series"]).mean()
    keys = sorted(df["series"].unique())
    before = seen_before.reindex(keys, fill_value=False)
    act = active.reindex(keys, fill_value=0.0)
    return pd.Series((before & (act >= min_active)).to_numpy(), index=keys, name="eligible")


def calibration_report(lead_metrics: pd.DataFrame, eligible: pd.Series | None = None,
                       band: tuple[float, float] = (0.85, 0.95)) -> pd.DataFrame:
    """Per model × h: eligible series, how many have coverage in ``band``.

    ``in_band``: the tie-aware test — [P(y < q), P(y ≤ q)] meets the band (for a continuous
    series both are the coverage; for a step-valued one a quantile equal to the value is right
    for any level in between). ``in_band_plain``: P(y ≤ q) alone in the band. ``all_h`` rows
    count series in band at every h.
    """
    lm = lead_metrics
    if eligible is not None:
        lm = lm[lm["series"].map(eligible).fillna(False).astype(bool)]
    lo, hi = band
    tie = (lm["coverage_lt"] <= hi) & (lm["coverage"] >= lo)
    plain = (lm["coverage"] >= lo) & (lm["coverage"] <= hi)
    work = lm.assign(in_band=tie, in_band_plain=plain)
    per_h = work.groupby(["model", "h"], sort=False).agg(
        series=("series", "nunique"), in_band=("in_band", "sum"),
        in_band_plain=("in_band_plain", "sum"), median_coverage=("coverage", "median"),
        mean_coverage=("coverage", "mean")).reset_index()
    per_h["h"] = per_h["h"].astype(str)
    every = work.groupby(["model", "series"], sort=False).agg(
        in_band=("in_band", "all"), in_band_plain=("in_band_plain", "all"),
        coverage=("coverage", "mean")).reset_index()
    all_h = every.groupby("model", sort=False).agg(
        series=("series", "nunique"), in_band=("in_band", "sum"),
        in_band_plain=("in_band_plain", "sum"), median_coverage=("coverage", "median"),
        mean_coverage=("coverage", "mean")).reset_index().assign(h="all")
    out = pd.concat([per_h, all_h], ignore_index=True)
    out["share"] = out["in_band"] / out["series"].where(out["series"] > 0)
    out["share_plain"] = out["in_band_plain"] / out["series"].where(out["series"] > 0)
    return out[["model", "h", "series", "in_band", "share", "in_band_plain", "share_plain",
                "median_coverage", "mean_coverage"]]


def rolling_backtest(history_df: pd.DataFrame, models: Sequence[str] | Mapping[str, Forecaster],
                     horizon: int = 4, quantile: float = 0.9, weeks: float = 8,
                     refit: str | int = "daily", seed: int = 0, progress: bool = False,
                     update: str = "hourly") -> pd.DataFrame:
    """Per model × series metrics (columns `METRIC_COLUMNS`); see the module doc."""
    return run_backtest(history_df, models, horizon, quantile, weeks, refit, seed, progress,
                        update).metrics
