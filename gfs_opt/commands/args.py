"""Argument checking shared by the commands: bounded numbers, writable outputs, one-line errors.

Every flag value is checked when it is parsed, before anything runs, and a bad one is reported in
one line naming the flag (``gfs-opt: error: simulate: argument --lp-load: …``), exit status 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn

#: LP arrival multipliers beyond this make no sense for any trace (the sweep spec uses the same cap)
MAX_LP_LOAD = 100.0
MAX_SEED = 2**32 - 1
MAX_GUARANTEE_H = 168.0     # one week: a guarantee longer than any forecast horizon is a typo


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as one ``gfs-opt: error: …`` line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("gfs-opt").strip()
        prefix = f"{where}: " if where else ""
        sys.stderr.write(f"gfs-opt: error: {prefix}{message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e16 else f"{v:g}"


def _range_text(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    if lo is not None and hi is not None:
        return f"{'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '≥'} {_fmt(lo)}"
    assert hi is not None
    return f"{'<' if hi_open else '≤'} {_fmt(hi)}"


def number(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False, integer: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number (whole if ``integer``) within the given bounds."""

    def parse(text: str) -> float:
        try:
            value: float = int(text) if integer else float(text)
        except ValueError:
            kind = "a whole number" if integer else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if ((lo is not None and (value < lo or (lo_open and value == lo)))
                or (hi is not None and (value > hi or (hi_open and value == hi)))):
            raise argparse.ArgumentTypeError(
                f"{text} is out of range (must be {_range_text(lo, hi, lo_open, hi_open)})")
        return value

    parse.__name__ = "number"
    return parse


seed = number(0, MAX_SEED, integer=True)
lp_load = number(0, MAX_LP_LOAD)


def time_point(text: str) -> str:
    """A window bound or replay start: a date or finite seconds ≥ 0 (the sweep spec's rule,
    `gfs_opt.traces.base.check_time`); kept as text, read against the trace's origin later."""
    from gfs_opt.traces.base import check_time

    try:
        check_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def seeds(text: str) -> tuple[int, ...]:
    """``0,1,2`` → (0, 1, 2): whole numbers in [0, 2³²−1], no duplicates, at least one."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"{text!r} names no seed (e.g. 0,1,2)")
    values = tuple(int(seed(p)) for p in parts)
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text!r} lists a seed twice")
    return values


def guarantee_classes(text: str) -> tuple[float, ...]:
    """``1,2,4`` → (1.0, 2.0, 4.0): positive, finite hours up to a week, no duplicates."""
    parts = [p.strip() for p in text.split(",")]
    values = []
    for p in parts:
        try:
            v = float(p)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{p!r} is not a number of hours (e.g. 1,2,4)") from None
        if not math.isfinite(v) or not 0 < v <= MAX_GUARANTEE_H:
            raise argparse.ArgumentTypeError(
                f"class {p} is out of range (hours in (0, {MAX_GUARANTEE_H:g}])")
        values.append(v)
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text!r} lists a class twice")
    return tuple(values)


class LazyHelp(str):
    """A help text computed only when help is shown: listing the policies needs their modules,
    which take a second to import, and most invocations never print help."""

    def __new__(cls, make: Callable[[], str]) -> LazyHelp:
        obj = super().__new__(cls, "…")   # non-empty: argparse skips a falsy help
        obj._make = make  # type: ignore[attr-defined]
        return obj

    def __mod__(self, params: object) -> str:   # argparse fills %(default)s etc. with `%`
        return self._make().replace("%", "%%") % params  # type: ignore[attr-defined]


#: how a policy's own options are given wherever a policy is named
POLICY_OPTIONS_HELP = ("each takes its own options as NAME[key=value,...], e.g. "
                       "'gfs[hp_notice_h=0.0333]' or 'gfs-paper' (the published GFS); a wrong "
                       "option is refused with the ones the policy takes")


def policy_names() -> str:
    from gfs_opt.policies import POLICIES

    return ", ".join(POLICIES)


#: what --trace accepts, for every command that takes one
TRACE_HELP = ("a trace source: a folder with node_info_df.csv + job_info_df.csv, an "
              "openb_pod_list_*.csv, a trace_job_*.csv, or a built-in trace (small, paper-a100, "
              "synthetic; ref-toy from $GFS_DATA_DIR, `gfs-opt data fetch ref-toy`)")


def setup_names() -> str:
    """The named setups with what each is, for help texts (use through `LazyHelp`)."""
    from gfs_opt.experiments.setups import SETUPS

    return "; ".join(f"{k} ({s.about})" for k, s in SETUPS.items())
