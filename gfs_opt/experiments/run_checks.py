"""Checks on a prepared run that catch a request whose metrics would be meaningless."""

from __future__ import annotations

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.traces.base import Trace


def _when(trace: Trace, seconds: float) -> str:
    try:
        return f"{trace.origin + pd.Timedelta(seconds=seconds):%Y-%m-%d %H:%M}"
    except (OverflowError, ValueError):
        return f"{seconds:g} s"


def check_window(trace: Trace, lo: float, hi: float) -> None:
    """The scored window must contain at least one submission, else every metric is undefined."""
    submit = trace.jobs["submit"]
    if submit.empty or ((submit >= lo) & (submit < hi)).any():
        return
    first, last = float(submit.min()), float(submit.max())
    raise GfsError(
        f"window [{_when(trace, lo)}, {_when(trace, hi)}) holds no job submission of trace "
        f"{trace.name}, whose jobs are submitted from {_when(trace, first)} to "
        f"{_when(trace, last)} (seconds {first:,.0f} … {last:,.0f} since its origin)")
