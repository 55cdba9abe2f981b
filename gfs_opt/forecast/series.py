"""Hourly-maximum HP demand series per (pool, organisation), in GPUs.

`HourlyMaxSeries` is fed by the simulator once per simulated minute and keeps the running hourly
maximum incrementally (a Python list for the current hour, flushed into a growing numpy array when
the hour changes), so a refit never re-reads raw samples. `series_from_trace` computes the same
series straight from a trace, assuming every HP job runs from submit to submit + duration.

Conventions shared by both: series key ``"pool|org"``; a series exists from the first hour it was
observed (``observe``) or had a running job (trace), and is 0 in later hours without usage; hour
``k`` is ``origin + k hours`` with seconds measured from ``origin``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.traces.base import ALIBABA_ORIGIN, Trace

HOUR_S = 3600


def series_key(key: Hashable) -> str:
    """``(pool, org)`` → ``"pool|org"``; strings pass through."""
    if isinstance(key, tuple):
        return "|".join(str(k) for k in key)
    return str(key)


def long_frame(origin: pd.Timestamp, names: list[str], first_hour: np.ndarray,
               base_hour: int, values: np.ndarray) -> pd.DataFrame:
    """(hours × series) matrix → long (ds, series, y) frame, each series from its first hour."""
    n_hours = values.shape[0]
    hours = base_hour + np.arange(n_hours)
    valid = hours[:, None] >= first_hour[None, :]
    order = np.argsort(np.asarray(names, dtype=object), kind="stable")
    valid, values = valid[:, order], values[:, order]
    cols, rows = np.nonzero(valid.T)  # series-major order: series, then time
    ds = origin + pd.to_timedelta(hours[rows], unit="h")
    return pd.DataFrame({"ds": ds, "series": np.asarray(names, dtype=object)[order][cols],
                         "y": values[rows, cols].astype(float)})


class HourlyMaxSeries:
    """Incremental hourly max of per-series usage samples (see module doc). Units: GPUs."""

    def __init__(self, origin: pd.Timestamp | str = ALIBABA_ORIGIN) -> None:
        self.origin = pd.Timestamp(origin)
        self.names: list[str] = []
        self._index: dict[Hashable, int] = {}
        self._first: list[int] = []
        self._base: int | None = None        # hour index of row 0
        self._hour: int | None = None        # hour being accumulated
        self._row: list[float] = []          # current hour's running max per series
        self._data = np.zeros((0, 0))        # completed rows (hours × series), grown by doubling
        self._rows = 0                       # rows of _data in use
        self._peak = np.zeros(0)             # max of completed rows per series

    # ---- feeding ---------------------------------------------------------------------------------
    def observe(self, t_seconds: float,
                usage: Mapping[str, float] | Mapping[tuple[str, str], float]) -> None:
        """Record one sample: HP GPUs in use per series key (str or (pool, org)) at ``t_seconds``."""
        hour = int(t_seconds // HOUR_S)
        if hour != self._hour:
            self._advance(hour)
        row, index = self._row, self._index
        for key, value in usage.items():
            i = index.get(key)
            if i is None:
                i = self._add(key, hour)
            if value > row[i]:
                row[i] = value

    def _add(self, key: Hashable, hour: int) -> int:
        name = series_key(key)
        i = self.names.index(name) if name in self.names else -1
        if i < 0:
            i = len(self.names)
            self.names.append(name)
            self._first.append(hour)
            self._row.append(0.0)
        self._index[key] = i
        return i

    def _advance(self, hour: int) -> None:
        if self._hour is not None and hour < self._hour:
            raise GfsError(f"time went backwards: hour {hour} after hour {self._hour}")
        if self._base is None:
            self._base = hour
        else:
            self._store(self._hour - self._base, self._row)  # type: ignore[operator]
        self._hour = hour
        self._row = [0.0] * len(self.names)

    def _store(self, r: int, row: list[float]) -> None:
        need_rows, need_cols = r + 1, len(row)
        rows, cols = self._data.shape
        if need_rows > rows or need_cols > cols:
            grown = np.zeros((max(need_rows, 2 * rows, 64), max(need_cols, 2 * cols, 8)))
            grown[:rows, :cols] = self._data
            self._data = grown
        self._data[r, :need_cols] = row
        self._rows = max(self._rows, need_rows)
        if len(self._peak) < need_cols:
            self._peak = np.r_[self._peak, np.zeros(need_cols - len(self._peak))]
        self._peak[:need_cols] = np.maximum(self._peak[:need_cols], row)

    # ---- reading -------------------------------------------------------------------------------
    @property
    def current_hour(self) -> int | None:
        return self._hour

    def matrix(self) -> tuple[int, np.ndarray]:
        """(hour index of row 0, values hours × series) including the current, partial hour."""
        if self._base is None or self._hour is None:
            return 0, np.zeros((0, len(self.names)))
        return self._base, self._between(0, self._hour - self._base + 1)

    def _between(self, lo: int, hi: int) -> np.ndarray:
        """Rows lo..hi−1 of `matrix` (relative to its row 0), without copying the other rows."""
        assert self._base is not None and self._hour is not None
        out = np.zeros((hi - lo, len(self.names)))
        top = min(hi, self._rows)
        if top > lo:
            out[: top - lo, : self._data.shape[1]] = self._data[lo:top, : len(self.names)]
        last = self._hour - self._base
        if lo <= last < hi:
            out[last - lo, : len(self._row)] = self._row
        return out

    def recent(self, since: int, until: int) -> list[tuple[str, int, np.ndarray]]:
        """Complete hours ``since..until−1`` (hour indices from the origin) per series, each from
        its first hour: ``(name, first hour index, values)`` sorted by name, series without such
        hours left out. The arrays behind ``history(since·3600, until·3600)``, for the hourly
        update (building and re-splitting that frame cost more than the update itself)."""
        if self._base is None or self._hour is None:
            return []
        n = self._hour - self._base + 1
        lo = max(0, since - self._base)
        hi = max(lo, min(n, until - self._base))
        if hi == lo:
            return []
        block = self._between(lo, hi)
        out: list[tuple[str, int, np.ndarray]] = []
        for i in sorted(range(len(self.names)), key=self.names.__getitem__):
            start = max(lo, self._first[i] - self._base)
            if start < hi:
                out.append((self.names[i], self._base + start, block[start - lo:, i].copy()))
        return out

    def last_complete(self, until: int) -> int | None:
        """Hour index of the latest hour before ``until`` that ``history(until=until·3600)``
        holds a row for, or None when it holds none."""
        if self._base is None or self._hour is None or not self._first:
            return None
        last = min(self._hour, until - 1)
        return last if last >= min(self._first) else None

    def peaks(self) -> dict[str, float]:
        """Largest hourly value seen so far per series (cheap: no matrix copy)."""
        top = np.zeros(len(self.names))
        top[: len(self._peak)] = self._peak[: len(self.names)]
        top[: len(self._row)] = np.maximum(top[: len(self._row)], self._row)
        return dict(zip(self.names, top.tolist(), strict=True))

    def history(self, since: float | None = None, until: float | None = None) -> pd.DataFrame:
        """Long frame (ds, series, y) of hours from ``since``'s hour; with ``until``, only hours
        that ended by then (complete hours), otherwise up to the current, partial hour."""
        base, values = self.matrix()
        if len(values) == 0:
            return pd.DataFrame({"ds": pd.Series(dtype="datetime64[ns]"),
                                 "series": pd.Series(dtype=object), "y": pd.Series(dtype=float)})
        lo = 0 if since is None else max(0, int(since // HOUR_S) - base)
        hi = len(values) if until is None else max(0, min(len(values), int(until // HOUR_S) - base))
        return long_frame(self.origin, self.names, np.asarray(self._first), base + lo,
                          values[lo:max(lo, hi)])


def series_from_trace(trace: Trace, freq_s: int = 60, end: float | None = None,
                      cls: str = "HP") -> pd.DataFrame:
    """Per (pool, org) hourly max of GPUs in use by ``cls`` jobs, sampled every ``freq_s`` seconds.

    A job counts at sample times ``s`` with ``submit ≤ s < submit + duration`` (no queueing).
    ``end`` (seconds) defaults to the last submit time: after it the trace stops recording and
    running jobs only drain, which is not demand. Vectorised per series (difference array over the
    sample grid in integer milli-GPU, cumulative sum, reshape to hours and max).
    """
    if freq_s <= 0 or HOUR_S % freq_s:
        raise GfsError(f"sampling period must divide one hour, got {freq_s} s")
    jobs = trace.jobs[trace.jobs["cls"] == cls]
    if jobs.empty:
        raise GfsError(f"trace {trace.name!r} has no {cls} jobs")
    submit = jobs["submit"].to_numpy(dtype=float)
    finish = submit + jobs["duration"].to_numpy(dtype=float)
    horizon = float(submit.max()) if end is None else float(end)
    per_hour = HOUR_S // freq_s
    n_hours = int(horizon // HOUR_S) + 1
    n_samples = n_hours * per_hour
    i0 = np.clip(np.ceil(submit / freq_s), 0, n_samples).astype(np.int64)
    i1 = np.clip(np.ceil(finish / freq_s), 0, n_samples).astype(np.int64)
    demand = (jobs["g"].to_numpy(dtype=np.int64) * jobs["workers"].to_numpy(dtype=np.int64))
    keys = (jobs["pool"].astype(str) + "|" + jobs["org"].astype(str)).to_numpy()
    names, codes = np.unique(keys, return_inverse=True)
    values = np.zeros((n_hours, len(names)))
    first = np.full(len(names), n_hours, dtype=np.int64)
    for j in range(len(names)):
        sel = (codes == j) & (i1 > i0)
        if not sel.any():
            continue
        diff = (np.bincount(i0[sel], weights=demand[sel], minlength=n_samples + 1)
                - np.bincount(i1[sel], weights=demand[sel], minlength=n_samples + 1))
        usage = np.cumsum(diff[:n_samples]).reshape(n_hours, per_hour).max(axis=1)
        values[:, j] = np.round(usage) / 1000.0  # milli-GPU sums are integers; undo float drift
        active = np.flatnonzero(usage > 0)
        if len(active):
            first[j] = int(active[0])
    keep = first < n_hours
    if not keep.any():
        raise GfsError(f"trace {trace.name!r}: no {cls} job runs before t = {horizon:.0f} s")
    return long_frame(trace.origin, list(names[keep]), first[keep], 0, values[:, keep])
