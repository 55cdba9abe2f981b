"""Demand histories from CSV files, in either of two layouts, checked cell by cell.

* **long**: one row per (time, series) with columns ``ds, series, y`` — other names are mapped
  with ``time_col`` / ``series_col`` / ``value_col`` (CLI: ``--time-col`` …);
* **wide**: one time column (``ds``, ``hour``, ``time``, ``timestamp``, ``date`` or ``time_col``)
  and one numeric column per series (the layout of the real per-GPU-model demand table).

Times are timestamps, or for a column named ``hour`` hours since the Alibaba origin
(2024-03-01 00:00). Demand is a number of GPUs in [0, 1e9]; a (series, time) appears once;
times carry one time zone throughout, or none. Every problem is an `InputError` naming the file and its CSV row (header =
row 1) and column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from gfs_opt.errors import InputError
from gfs_opt.traces.base import ALIBABA_ORIGIN
from gfs_opt.traces.csvio import data_row, fail_first, numeric_column, read_table

TIME_NAMES = ("ds", "hour", "time", "timestamp", "date")
MAX_SPAN_H = 10 * 365 * 24          # ten years of hours: hourly arrays stay small
#: GPUs of demand: above any cluster by orders of magnitude, and far enough below float64's
#: range that sums and squared errors in a backtest stay finite
MAX_DEMAND = 1e9
ACCEPTED = ("a long CSV with columns ds, series, y (other names via --time-col, --series-col, "
            "--value-col), or a wide CSV with a time column (ds, hour, time, timestamp, date or "
            "--time-col) and one numeric column per series")


def _times(df: pd.DataFrame, column: str, path: Path) -> pd.Series:
    raw = df[column]
    if column == "hour" or pd.api.types.is_numeric_dtype(raw):
        hours = numeric_column(df, column, path, minimum=0, maximum=MAX_SPAN_H)
        fail_first(hours != np.floor(hours), path, column,
                   lambda p: f"expected a whole hour number, got {hours[p]:g}")
        return pd.Series(ALIBABA_ORIGIN + pd.to_timedelta(hours, unit="h"))
    text = raw.astype(str).str.strip()
    try:
        ds = pd.to_datetime(text.where(raw.notna(), None), errors="coerce", format="mixed")
    except ValueError:     # "Mixed timezones": some times carry a zone, others none or another
        _mixed_zones(raw, path, column)
        raise
    fail_first(ds.isna().to_numpy(), path, column,
               lambda p: f"not a timestamp: {raw.iloc[p]!r}")
    fail_first(((ds.dt.minute != 0) | (ds.dt.second != 0)).to_numpy(), path, column,
               lambda p: f"{raw.iloc[p]!r} is not a whole hour (hourly series expected)")
    return ds


def _zone(value: object) -> str | None:
    try:
        tz = pd.Timestamp(str(value).strip()).tzinfo
    except (ValueError, TypeError):
        return None
    return None if tz is None else str(tz)


def _mixed_zones(raw: pd.Series, path: Path, column: str) -> None:
    """Name the first time whose zone differs from the first row's (zone-aware and naive times,
    or two offsets, cannot be ordered on one hourly axis)."""
    zones = [_zone(v) for v in raw]
    first = zones[0]
    pos = next((i for i, z in enumerate(zones) if z != first), None)
    if pos is None:
        return
    def what(z: str | None) -> str:
        return f"zone {z}" if z else "no time zone"

    raise InputError(path, f"mixed time zones: {raw.iloc[pos]!r} has {what(zones[pos])}, but "
                           f"row {data_row(0)} ({raw.iloc[0]!r}) has {what(first)}; give every "
                           f"time the same zone, or none", row=data_row(pos), column=column)


def _duplicates(ds: pd.Series, series: pd.Series | None, path: Path, column: str) -> None:
    """A (series, time) given twice: refuse, naming both rows (which y is meant is unknowable)."""
    key = pd.DataFrame({"s": series.to_numpy() if series is not None else 0, "t": ds.to_numpy()})
    dup = key.duplicated(keep="first").to_numpy()
    if dup.any():
        pos = int(np.argmax(dup))
        same = ((key["s"] == key["s"].iloc[pos]) & (key["t"] == key["t"].iloc[pos])).to_numpy()
        first = int(np.argmax(same))
        of = f" for series {series.iloc[pos]!r}" if series is not None else ""
        raise InputError(path, f"duplicate time {ds.iloc[pos]}{of} (first at row "
                               f"{data_row(first)})",
                         row=data_row(pos), column=column)


def _check_span(ds: pd.Series, path: Path, column: str) -> None:
    if ds.empty:
        return
    span_h = (ds.max() - ds.min()) / pd.Timedelta(hours=1)
    if span_h > MAX_SPAN_H:
        last = int(np.argmax(ds.to_numpy()))
        raise InputError(path, f"the series span {span_h:,.0f} hours (more than ten years)",
                         row=data_row(last), column=column)


def load_series_file(path: Path, time_col: str | None = None, series_col: str | None = None,
                     value_col: str | None = None) -> pd.DataFrame:
    """Read a long or wide CSV into the (ds, series, y) history frame."""
    path = Path(path)
    df = read_table(path, [])
    if df.empty:
        raise InputError(path, "no data rows (the file has only a header)")
    cols = list(df.columns)
    long_cols = (time_col or "ds", series_col or "series", value_col or "y")
    given = [(flag, c) for flag, c in (("--time-col", time_col), ("--series-col", series_col),
                                       ("--value-col", value_col)) if c is not None]
    for flag, c in given:
        if c not in cols:
            raise InputError(path, f"{flag} {c!r}: no such column (columns: {', '.join(map(str, cols))})")
    if set(long_cols) <= set(cols):
        return _long(df, path, *long_cols)
    if series_col is not None or value_col is not None or set(long_cols[:2]) <= set(cols):
        missing = [c for c in long_cols if c not in cols]
        raise InputError(path, f"long layout lacks column(s) {missing}; accepted: {ACCEPTED}")
    tcol = time_col or next((c for c in TIME_NAMES if c in cols), None)
    if tcol is None or len(cols) < 2:
        raise InputError(path, f"unrecognised layout (columns: {', '.join(map(str, cols[:8]))}"
                               f"{' …' if len(cols) > 8 else ''}); accepted: {ACCEPTED}")
    return _wide(df, path, tcol)


def _long(df: pd.DataFrame, path: Path, tcol: str, scol: str, vcol: str) -> pd.DataFrame:
    ds = _times(df, tcol, path)
    _check_span(ds, path, tcol)
    series = df[scol]
    fail_first((series.isna() | (series.astype(str).str.strip() == "")).to_numpy(), path, scol,
               lambda _p: "missing series name")
    names = series.astype(str).str.strip()
    _duplicates(ds, names, path, tcol)
    y = numeric_column(df, vcol, path, minimum=0, maximum=MAX_DEMAND)
    out = pd.DataFrame({"ds": ds.to_numpy(), "series": names.to_numpy(), "y": y})
    return out.sort_values(["series", "ds"], kind="stable").reset_index(drop=True)


def _wide(df: pd.DataFrame, path: Path, tcol: str) -> pd.DataFrame:
    ds = _times(df, tcol, path)
    _check_span(ds, path, tcol)
    parts = []
    for col in df.columns:
        if col == tcol:
            continue
        if df[col].notna().any() and pd.to_numeric(df[col], errors="coerce").isna().all():
            raise InputError(path, f"column {col!r} holds no number, so this is not a wide CSV "
                                   f"(one numeric column per series); accepted: {ACCEPTED}")
        y = numeric_column(df, col, path, minimum=0, maximum=MAX_DEMAND)
        parts.append(pd.DataFrame({"ds": ds.to_numpy(), "series": str(col), "y": y}))
    _duplicates(ds, None, path, tcol)       # a wide file is known to be one once its columns are
    return pd.concat(parts, ignore_index=True).sort_values(
        ["series", "ds"], kind="stable").reset_index(drop=True)
