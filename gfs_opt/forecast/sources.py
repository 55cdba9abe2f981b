"""Where backtest histories come from: the real per-GPU-model hourly demand, a trace, or a CSV.

``"alibaba-hourly"``: ``derived_sultanul_ovi/tables_extra/hourly_concurrency_top_models.csv`` (GPUs
requested by active jobs per GPU model, hour 0 = 2024-03-01 00:00; one series per pool). The
recording stops inside hour 4,416: the last hours collapse to ~0 because jobs stop being recorded,
not because demand fell, so trailing hours whose total is below 10 % of the previous day's median
total are dropped (3 hours here). Any CSV with columns ``ds, series, y`` is read as is. Anything
else goes to `gfs_opt.traces.load.load_trace` and becomes per-tenant HP series via
`series_from_trace`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gfs_opt.errors import GfsError, InputError
from gfs_opt.forecast.series import series_from_trace
from gfs_opt.forecast.series_csv import load_series_file
from gfs_opt.paths import alibaba_dir
from gfs_opt.traces.base import ALIBABA_ORIGIN
from gfs_opt.traces.load import load_trace

ALIBABA_HOURLY = "alibaba-hourly"
ALIBABA_HOURLY_FILE = Path("derived_sultanul_ovi") / "tables_extra" / "hourly_concurrency_top_models.csv"


def alibaba_hourly_path() -> Path:
    return alibaba_dir() / ALIBABA_HOURLY_FILE


def drop_trailing_collapse(wide: pd.DataFrame, ratio: float = 0.1) -> pd.DataFrame:
    """Drop final rows whose row total is below ``ratio`` × the median total of the day before."""
    total = wide.sum(axis=1).to_numpy()
    end = len(total)
    while end > 24:
        ref = float(pd.Series(total[end - 25:end - 1]).median())
        if total[end - 1] >= ratio * ref:
            break
        end -= 1
    return wide.iloc[:end]


def load_alibaba_hourly(path: Path | None = None) -> pd.DataFrame:
    path = path or alibaba_hourly_path()
    if not path.exists():
        raise InputError(path, "not found (shipped in gfs_opt/data: reinstall gfs-opt)")
    try:
        wide = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(path, f"unreadable CSV: {exc}") from None
    if "hour" not in wide.columns or wide.shape[1] < 2:
        raise InputError(path, "expected an 'hour' column and one column per GPU model")
    wide = drop_trailing_collapse(wide.set_index("hour").sort_index())
    ds = ALIBABA_ORIGIN + pd.to_timedelta(wide.index.to_numpy(), unit="h")
    long = wide.set_axis(ds).rename_axis("ds").reset_index().melt(
        id_vars="ds", var_name="series", value_name="y")
    long["y"] = long["y"].clip(lower=0.0)  # float residue such as -3e-12
    return long.sort_values(["series", "ds"], kind="stable").reset_index(drop=True)


def _csv_header(path: Path) -> list[str]:
    try:
        return list(pd.read_csv(path, nrows=0).columns)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(path, f"unreadable CSV: {exc}") from None


def load_series_csv(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(path, f"unreadable CSV: {exc}") from None
    try:
        df["ds"] = pd.to_datetime(df["ds"])
    except (ValueError, TypeError) as exc:
        raise InputError(path, f"cannot parse timestamps: {exc}", column="ds") from None
    return df[["ds", "series", "y"]]


def _is_trace_file(path: Path) -> bool:
    name = path.name
    return (name == "job_info_df.csv" or name.startswith("openb_pod_list")
            or name.startswith("trace_job_"))


def load_history(source: str, seed: int = 0,
                 columns: dict[str, str | None] | None = None) -> tuple[pd.DataFrame, str]:
    """(ds, series, y) frame and a one-line description of where it came from.

    ``columns`` (time_col, series_col, value_col) maps a CSV's column names; see `series_csv`."""
    if source == ALIBABA_HOURLY:
        df = load_alibaba_hourly()
        return df, f"alibaba-hourly: {df['series'].nunique()} pools × {df['ds'].nunique()} hours"
    path = Path(source).expanduser()
    if path.is_file() and path.suffix == ".csv" and not _is_trace_file(path):

        df = load_series_file(path, **(columns or {}))
        return df, f"{path}: {df['series'].nunique()} series × {df['ds'].nunique()} hours"
    if columns and any(columns.values()):
        raise GfsError("--time-col/--series-col/--value-col apply to a series CSV, not to "
                       f"trace source {source!r}")
    if path.is_file() and path.suffix == ".csv" and {"ds", "series", "y"} & set(_csv_header(path)):
        missing = sorted({"ds", "series", "y"} - set(_csv_header(path)))
        if missing:
            raise InputError(path, f"lacks column(s) {missing}; a series CSV has ds, series, y")
        df = load_series_csv(path)
        return df, f"{path}: {df['series'].nunique()} series × {df['ds'].nunique()} hours"

    try:
        trace = load_trace(source, seed=seed)
    except (ValueError, KeyError) as exc:
        raise GfsError(f"cannot load trace {source!r}: {exc}") from None
    df = series_from_trace(trace)
    return df, (f"trace {trace.name}: {df['series'].nunique()} (pool, org) HP series × "
                f"{df['ds'].nunique()} hours")
