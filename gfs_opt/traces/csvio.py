"""Strict, vectorised CSV reading shared by the trace loaders.

Every problem becomes an `InputError` naming the source, the row and the column. Rows are
counted as in the file: the header is row 1, so the i-th data row (0-based position ``i``) is
row ``i + 2``. Frames handed in from memory are numbered the same way, by position.
Checks run on whole columns (numpy masks) so that a 466,867-row job file validates in well
under a second; only the first offending row is reported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from gfs_opt.errors import InputError, shown

HEADER_ROW = 1
#: upper bound of submit times and durations (seconds): ten years is longer than any public trace,
#: and a typo such as 1e15 would otherwise size hourly arrays to terabytes downstream
MAX_TIME_S = 10 * 365 * 86_400.0


def data_row(position: int) -> int:
    """CSV row number of the data row at 0-based ``position`` (header = row 1)."""
    return position + HEADER_ROW + 1


def read_table(path: Path, required: Sequence[str], *, text: Sequence[str] = ()) -> pd.DataFrame:
    """Read a CSV whose ``text`` columns keep their exact spelling (ids stay strings)."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file")
    if not path.is_file():
        raise InputError(path, "not a regular file")
    try:
        df = pd.read_csv(path, dtype=dict.fromkeys(text, str), skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise InputError(path, "file is empty (no header row)") from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else "malformed CSV"
        m = re.search(r"line (\d+)", msg)
        raise InputError(path, f"malformed CSV: {msg}", row=int(m.group(1)) if m else None) from None
    except UnicodeDecodeError:
        raise InputError(path, "not a UTF-8 text file") from None
    require_columns(df, required, path)
    return df


def require_rows(df: pd.DataFrame, source: object, what: str) -> None:
    if df.empty:
        raise InputError(source, f"no {what} (the file has a header but no data rows)")


def require_columns(df: pd.DataFrame, required: Sequence[str], source: object) -> None:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(source, f"missing column(s) {', '.join(missing)}; expected {', '.join(required)}",
                         row=HEADER_ROW, column=missing[0])


def fail_first(mask: np.ndarray | pd.Series, source: object, column: str,
               describe: Callable[[int], str]) -> None:
    """Raise for the first True position of ``mask``; ``describe(pos)`` words the problem."""
    m = np.asarray(mask, dtype=bool)
    if m.any():
        pos = int(np.argmax(m))
        raise InputError(source, describe(pos), row=data_row(pos), column=column)


def text_column(df: pd.DataFrame, column: str, source: object,
                required: np.ndarray | None = None) -> pd.Series:
    """A column as stripped strings; empty cells are errors where ``required`` (default: all rows)."""
    raw = df[column]
    s = raw.astype(str).str.strip()
    missing = raw.isna().to_numpy() | (s == "").to_numpy()
    need = missing if required is None else missing & required
    fail_first(need, source, column, lambda _pos: "missing value")
    return s.where(~missing, "")


def numeric_column(df: pd.DataFrame, column: str, source: object, *, integer: bool = False,
                   minimum: float | None = None, maximum: float | None = None,
                   allow_missing: bool = False) -> np.ndarray:
    """A column as float64, checked: numeric, present, finite, whole if ``integer``, within
    [``minimum``, ``maximum``].

    Missing cells come back as NaN when ``allow_missing``.
    """
    raw = df[column]
    s = raw
    if not pd.api.types.is_numeric_dtype(raw) or pd.api.types.is_bool_dtype(raw):
        s = pd.to_numeric(raw, errors="coerce")
        bad = (s.isna() & raw.notna()).to_numpy()
        if bad.any():
            # an all-blank cell read as text counts as missing, not as non-numeric
            blank = raw.astype(str).str.strip().eq("").to_numpy()
            fail_first(bad & ~blank, source, column,
                       lambda p: f"non-numeric value {shown(raw.iloc[p])}")
    vals = np.asarray(s.to_numpy(dtype=float, na_value=np.nan), dtype=float)
    missing = np.isnan(vals)
    if not allow_missing:
        fail_first(missing, source, column, lambda _p: "missing value")
    present = ~missing
    def given(p: int) -> str:     # the cell as written (8.0000001, not 8)
        cell = raw.iloc[p]
        return cell.strip() if isinstance(cell, str) else shown(vals[p])

    fail_first(present & ~np.isfinite(vals), source, column,
               lambda p: f"non-finite value {given(p)}")
    if integer:
        with np.errstate(invalid="ignore"):
            frac = present & (vals != np.floor(vals))
        fail_first(frac, source, column, lambda p: f"expected a whole number, got {given(p)}")
    if minimum is not None:
        word = "negative value" if minimum == 0 else "value"
        fail_first(present & (vals < minimum), source, column,
                   lambda p: f"{word} {given(p)} (must be ≥ {minimum:g})")
    if maximum is not None:
        fail_first(present & (vals > maximum), source, column,
                   lambda p: f"value {given(p)} is implausibly large (must be ≤ {maximum:g})")
    return vals


def unique_column(values: pd.Series, source: object, column: str, what: str) -> None:
    """Fail on the second occurrence of any value, pointing back at the first."""
    dup = values.duplicated(keep="first").to_numpy()
    if dup.any():
        pos = int(np.argmax(dup))
        first = int(np.argmax((values == values.iloc[pos]).to_numpy()))
        raise InputError(source, f"duplicate {what} {values.iloc[pos]!r} (first at row {data_row(first)})",
                         row=data_row(pos), column=column)


def apply_unique(values: np.ndarray, fn: Callable[[float], int]) -> np.ndarray:
    """Apply a scalar function once per distinct value (requests take a handful of values)."""
    codes, uniq = pd.factorize(values)
    mapped = np.fromiter((fn(float(u)) for u in uniq), dtype=np.int64, count=len(uniq))
    return mapped[codes]
