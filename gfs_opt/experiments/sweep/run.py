"""Run a grid of simulations (a sweep) on an engine, resumably, into one tidy table.

Output folder::

    OUT/sweep.json          the spec (text) and the grid: cell id → parameters
    OUT/cells/<id>/         one finished cell: cell.json (parameters, metrics or error, timing)
                            plus RunOutput's tables (summary.json, jobs.csv, …)
    OUT/results.parquet     one row per cell: parameters, status, error, summary metrics
                            (with the `parquet` extra, pyarrow)
    OUT/results.csv         the same as CSV
    OUT/summary.csv         per configuration (all parameters but the seed): mean and 95 % CI
    OUT/timings.csv         wall times per cell (kept apart: they differ from run to run)

A cell folder appears whole or not at all (written under a temporary name, then renamed), so
an interrupted sweep leaves only finished cells, and ``resume`` re-runs exactly the others
(failed cells included). The tables are built from the cell records on disk, in grid order, so
the same grid gives identical tables whichever engine ran it and however often it was resumed.
"""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from gfs_opt.errors import GfsError
from gfs_opt.experiments.compare import RELATIVE, family_summary, format_family_summary
from gfs_opt.experiments.runner import TIMING_KEYS, RunOutput
from gfs_opt.experiments.seed_stats import t_interval
from gfs_opt.experiments.sweep.cell import CellOutcome
from gfs_opt.experiments.sweep.engines import Engine, Task
from gfs_opt.experiments.sweep.spec import Cell, memory_hint_mb
from gfs_opt.fileio import atomic_write, remove_partial_folders, write_folder, write_text
from gfs_opt.interrupts import held
from gfs_opt.policies import policy_name, settable_options

CELL_FILE = "cell.json"
RESULT_FILES = ("results.parquet", "results.csv", "summary.csv", "timings.csv")
#: summary keys that are not per-run metrics (or not deterministic: those go to timings.csv)
_NOT_METRICS = TIMING_KEYS | {"policy", "policy_options", "trace_notes", "window"}
#: headline metrics of the printed summary: key → (heading, scale)
HEADLINE = {"lp_eviction_rate": ("LP evict %", 100.0),
            "lp_eviction_rate_drain": ("LP evict % drain", 100.0), "lp_jqt_mean": ("LP JQT s (all)", 1.0),
            "lp_jqt_started_mean": ("LP JQT s (started)", 1.0),
            "lp_never_started": ("LP never started", 1.0),
            "lp_jct_mean": ("LP JCT s", 1.0), "hp_jqt_mean": ("HP JQT s", 1.0),
            "allocation_rate": ("alloc %", 100.0)}


@dataclass
class SweepResult:
    out: Path
    table: pd.DataFrame           # one row per cell
    summary: pd.DataFrame         # one row per configuration
    cells: int
    ran: int
    skipped: int
    failed: int                   # failed cells in the table (this run or earlier)
    wall_s: float
    engine: str


# ---- files --------------------------------------------------------------------------------
def _atomic_write(path: Path, write: Callable[[str], None]) -> None:
    """Write via ``write(tmp)`` then rename: the file appears whole or not at all."""
    atomic_write(path, write)


def _write_text(path: Path, text: str) -> None:
    write_text(path, text)


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf → None, numpy scalars → Python, tuples → lists."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def flat_metrics(out: RunOutput) -> dict[str, Any]:
    """The run's scalar summary metrics (deterministic ones only)."""
    s = out.summary
    flat: dict[str, Any] = {}
    lo, hi = s.get("window", [math.nan, math.nan])
    flat["window_start"], flat["window_end"] = lo, hi
    for key, value in s.items():
        if key in _NOT_METRICS or isinstance(value, dict | list | tuple):
            continue
        flat[key] = value
    flat["policy_options"] = json.dumps(_clean(s.get("policy_options", {})), sort_keys=True)
    return _clean(flat)


def cell_record(cell: Cell, outcome: CellOutcome, engine: str) -> dict[str, Any]:
    out = outcome.output
    timing = {"cell_s": outcome.cell_s, "worker": outcome.worker, "engine": engine,
              "finished_at": datetime.now(UTC).isoformat(timespec="seconds")}
    if out is not None:
        timing |= {"sim_wall_s": out.wall_s, "events_per_s": out.summary.get("events_per_s"),
                   "sim_cpu_s": out.summary.get("cpu_s")}
    return _clean({
        "id": cell.id, "status": "ok" if out is not None else "failed", "params": cell.params,
        "spec": asdict(cell.spec), "metrics": flat_metrics(out) if out is not None else {},
        "error": outcome.error, "error_type": outcome.error_type,
        "traceback": outcome.traceback, "timing": timing})


def write_cell(cells_dir: Path, cell: Cell, outcome: CellOutcome, engine: str,
               then: Callable[[], None] | None = None) -> None:
    """Write one cell folder whole or not at all (replacing an earlier, failed, record of it);
    ``then`` runs as it is renamed into place (`fileio.write_folder`)."""
    def fill(tmp: Path) -> None:
        if outcome.output is not None:
            outcome.output.write(tmp)
        _write_text(tmp / CELL_FILE, json.dumps(cell_record(cell, outcome, engine), indent=1))

    write_folder(cells_dir / cell.id, fill, then)


def read_record(cells_dir: Path, cid: str) -> dict[str, Any] | None:
    path = cells_dir / cid / CELL_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _has_cells(cells_dir: Path) -> bool:
    return cells_dir.is_dir() and any(p.is_dir() and not p.name.startswith(".")
                                      for p in cells_dir.iterdir())


def _remove_leftovers(cells_dir: Path) -> None:
    """Temporary folders of an interrupted earlier run (never a finished cell)."""
    remove_partial_folders(cells_dir)
    for p in cells_dir.glob(".old-*"):      # the name of older versions
        shutil.rmtree(p, ignore_errors=True)


# ---- tables -------------------------------------------------------------------------------
def merge(cells: Sequence[Cell], cells_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(results, timings): one row per cell of the grid, in grid order; cells without a
    record are 'missing'."""
    rows, timing_rows = [], []
    for cell in cells:
        rec = read_record(cells_dir, cell.id) or {}
        status = rec.get("status", "missing")
        row = {"cell": cell.id, **cell.params, "status": status, "error": rec.get("error", "")}
        for key, value in (rec.get("metrics") or {}).items():
            row[key if key not in row else f"metric_{key}"] = value
        rows.append(row)
        timing_rows.append({"cell": cell.id, **cell.params, "status": status,
                            **(rec.get("timing") or {})})
    table = _arrow_safe(pd.DataFrame(rows))
    for col in table.columns:   # metrics that are None everywhere stay numeric
        if table[col].dtype == object and table[col].isna().all():
            table[col] = table[col].astype(float)
    return table, _arrow_safe(pd.DataFrame(timing_rows))


def _arrow_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Parquet needs one type per column: a column mixing types is written as text."""
    for col in df.columns:
        if df[col].dtype != object:
            continue
        kinds = {type(v) for v in df[col] if v is not None and not (isinstance(v, float)
                                                                      and math.isnan(v))}
        if len(kinds) > 1 and not kinds <= {int, float}:
            df[col] = df[col].map(lambda v: v if v is None else str(v))
    return df


def config_columns(cells: Sequence[Cell]) -> list[str]:
    return [k for k in cells[0].params if k != "seed"] if cells else []


def ci95(values: pd.Series) -> float:
    """Half-width of the 95 % Student-t confidence interval of the mean (NaN below 2 values)."""
    return t_interval(values.dropna()).half     # the same interval as `compare --seeds`


def summarize(table: pd.DataFrame, cells: Sequence[Cell]) -> pd.DataFrame:
    """Per configuration: seeds run, seeds failed, mean and 95 % CI of every numeric metric."""
    keys = config_columns(cells)
    params = set(cells[0].params) if cells else set()
    skip = {"cell", "status", "error", *params}
    metrics = [c for c in table.columns if c not in skip and pd.api.types.is_numeric_dtype(table[c])]
    rows = []
    for key, grp in table.groupby(keys, sort=False, dropna=False):
        ok = grp[grp["status"] == "ok"]
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row |= {"seeds": len(grp), "ok": len(ok), "failed": int((grp["status"] == "failed").sum())}
        for m in metrics:
            row[f"{m}_mean"] = float(ok[m].mean()) if len(ok) else math.nan
            row[f"{m}_ci95"] = ci95(ok[m])
        rows.append(row)
    return pd.DataFrame(rows)


def has_parquet() -> bool:
    """pyarrow is an extra (`gfs-opt[parquet]`); without it the tables are written as CSV only."""
    return importlib.util.find_spec("pyarrow") is not None


def write_tables(out: Path, table: pd.DataFrame, summary: pd.DataFrame,
                 timings: pd.DataFrame) -> None:
    if has_parquet():
        _atomic_write(out / "results.parquet", lambda tmp: table.to_parquet(tmp, index=False))
    _atomic_write(out / "results.csv", lambda tmp: table.to_csv(tmp, index=False))
    _atomic_write(out / "summary.csv", lambda tmp: summary.to_csv(tmp, index=False))
    _atomic_write(out / "timings.csv", lambda tmp: timings.to_csv(tmp, index=False))


def format_summary(summary: pd.DataFrame, cells: Sequence[Cell]) -> str:
    """Mean ± 95 % CI over seeds of the headline metrics, one line per configuration."""
    keys = config_columns(cells)
    varying = [k for k in keys if k == "policy" or len({str(c.params[k]) for c in cells}) > 1]
    if "lp_load" in varying and "load" in varying:
        varying.remove("lp_load")
    heads = {m: h for m, h in HEADLINE.items() if f"{m}_mean" in summary}
    drain = [f"lp_windows_{k}_drain_mean" for k in ("failed", "ok")]
    if not all(c in summary for c in drain) or not summary[drain].fillna(0).to_numpy().any():
        heads.pop("lp_eviction_rate_drain", None)     # no drain: the quota was kept
    extra = "milp_fallbacks_mean" in summary and (summary["milp_solves_mean"].fillna(0) > 0).any()
    rows = [[*varying, "seeds", *(h for h, _ in heads.values()),
             *(["MILP fallback/solves"] if extra else [])]]
    for _, r in summary.iterrows():
        line = [_text(r[k]) for k in varying]
        line.append(f"{r['ok']}" + (f" ({r['failed']} failed)" if r["failed"] else ""))
        for m, (_h, scale) in heads.items():
            line.append(_pm(r[f"{m}_mean"], r[f"{m}_ci95"], scale))
        if extra:
            line.append(f"{_num(r['milp_fallbacks_mean'])}/{_num(r['milp_solves_mean'])}")
        rows.append(line)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    text = ["  ".join(c.ljust(w) if i < len(varying) else c.rjust(w)
                      for i, (c, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    text.insert(1, "-" * len(text[0]))
    options = set().union(*(settable_options(policy_name(p))
                            for p in {c.params["policy"] for c in cells}))
    groups = [k for k in varying if k != "policy" and k not in options]
    return "\n".join(text + _family_lines(summary, groups))


def _family_lines(summary: pd.DataFrame, groups: list[str]) -> list[str]:
    """GFS against the mean of each baseline family, per configuration of the other axes
    (policy options such as the forecaster belong to the policy, not to the configuration)."""
    if "policy" not in summary or "gfs" not in set(summary["policy"]):
        return []
    labels = (summary[groups].map(_text).agg(" · ".join, axis=1) if groups
              else pd.Series("all", index=summary.index))
    df = pd.DataFrame({"policy": summary["policy"], "group": labels})
    for key in RELATIVE:
        df[key] = summary.get(f"{key}_mean", math.nan)
    fam = family_summary(df, by="group")
    if fam.empty:
        return []
    return ["", "Means over seeds; lower is better (negative: GFS lower).",
            *format_family_summary(fam, by="group")]


def _pm(mean: float, ci: float, scale: float) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "—"
    digits = 2 if scale != 1.0 else 1
    text = f"{scale * mean:,.{digits}f}"
    return text + (f" ± {scale * ci:,.{digits}f}" if not np.isnan(ci) else "")


def _text(value: Any) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _num(x: float) -> str:
    return "—" if x is None or math.isnan(x) else f"{x:g}"


# ---- driver -------------------------------------------------------------------------------
def run_sweep(cells: Sequence[Cell], out: Path, engine: Engine, *, resume: bool = False,
              spec_text: str = "", spec_name: str = "", memory_gb: float | None = None,
              progress: bool = True, echo: Callable[[str], None] = print) -> SweepResult:
    """Run the cells not yet finished in ``out`` and merge every cell into the tables."""
    t0 = time.perf_counter()
    out = Path(out)
    cells_dir = out / "cells"
    manifest = out / "sweep.json"
    if out.exists() and not out.is_dir():
        raise GfsError(f"{out}: exists and is not a folder")
    if not resume and _has_cells(cells_dir):
        raise GfsError(f"{out} already holds sweep results: add --resume to continue that "
                       f"sweep, or choose another --out")
    try:
        cells_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GfsError(f"{out}: cannot create the output folder ({exc.strerror or exc})") from None
    _remove_leftovers(cells_dir)
    _write_text(manifest, json.dumps(_clean({
        "name": spec_name, "spec": spec_text,
        "cells": [{"id": c.id, "params": c.params} for c in cells]}), indent=1))

    finished = {c.id for c in cells
                if resume and (read_record(cells_dir, c.id) or {}).get("status") == "ok"}
    todo = [c for c in cells if c.id not in finished]
    if finished:
        echo(f"resuming: {len(finished)} of {len(cells)} cells already finished, "
             f"{len(todo)} to run")
    by_id = {c.id: c for c in cells}
    counts = {"ok": 0, "failed": 0}
    bar = None
    if progress and todo:
        bar = tqdm(total=len(todo), unit="cell", desc=f"sweep ({engine.name})",
                   dynamic_ncols=True, file=sys.stderr)

    def on_done(outcome: CellOutcome) -> None:
        cell = by_id[outcome.id]
        def count() -> None:      # as the folder is renamed: the count and the disk agree
            counts["ok" if outcome.ok else "failed"] += 1

        write_cell(cells_dir, cell, outcome, engine.name, then=count)
        if not outcome.ok:
            msg = f"cell {cell.id} ({_describe(cell)}) failed: {' '.join(outcome.error.split())}"
            if bar is not None:
                bar.write(msg, file=sys.stderr)
            else:
                sys.stderr.write(f"gfs-opt: {msg}\n")
        if bar is not None:
            bar.update(1)
            bar.set_postfix(ok=counts["ok"], failed=counts["failed"], refresh=False)

    tasks = [Task(c, memory_hint_mb(c.spec, memory_gb)) for c in todo]
    try:
        engine.run(tasks, on_done)
        if bar is not None:
            bar.close()
        with held():       # the tables and the cells on disk agree
            table, timings = merge(cells, cells_dir)
            summary = summarize(table, cells)
            write_tables(out, table, summary, timings)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        with held():       # the tables list what is on disk now
            table, timings = merge(cells, cells_dir)
            write_tables(out, table, summarize(table, cells), timings)
        failed = f" ({counts['failed']} of them failed)" if counts["failed"] else ""
        raise KeyboardInterrupt(
            f"sweep interrupted: {counts['ok'] + counts['failed']} of {len(todo)} cells finished "
            f"in this run{failed}, each saved whole in {cells_dir}/ID and listed in "
            f"{out / 'results.csv'}; run again with --resume to do the rest") from None
    return SweepResult(out, table, summary, len(cells), len(todo), len(finished),
                       int((table["status"] == "failed").sum()), time.perf_counter() - t0,
                       engine.name)


def _describe(cell: Cell) -> str:
    return " ".join(f"{k}={v}" for k, v in cell.params.items() if k != "lp_load" and v is not None)
