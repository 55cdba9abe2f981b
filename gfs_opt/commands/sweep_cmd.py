"""`gfs-opt sweep SPEC`: a grid of simulations on local worker processes or a Ray cluster."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gfs_opt.commands import args as cargs
from gfs_opt.errors import GfsError
from gfs_opt.fileio import check_out_dir

if TYPE_CHECKING:
    import pandas as pd

    from gfs_opt.experiments.sweep.run import SweepResult
    from gfs_opt.experiments.sweep.spec import Cell


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep", help="run a grid (policies × loads × seeds × parameters) from a TOML/YAML spec",
        description="Each cell of the grid is one simulation; finished cells are saved as they "
                    "complete and skipped with --resume. Results: OUT/results.parquet and "
                    ".csv (one row per cell), OUT/summary.csv (mean and 95 % CI over seeds).")
    p.add_argument("spec", type=Path, metavar="SPEC", help="sweep spec (.toml, .yaml or .yml)")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local worker processes (default) or Ray tasks")
    p.add_argument("--address", default=None,
                   help="Ray cluster to join (e.g. ray://head:10001 or auto); default: start a "
                        "local Ray with --workers CPUs")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local: worker processes (default: all CPUs); ray without --address: "
                        "CPUs of the local Ray (default 2)")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (default: results/sweep-<spec name>)")
    p.add_argument("--resume", action="store_true",
                   help="continue a sweep in --out: finished cells are skipped, the rest re-run")
    p.add_argument("--check-invariants", action="store_true",
                   help="assert simulation invariants after every round in every cell")
    p.add_argument("--dry-run", action="store_true",
                   help="validate the spec and list the cells without running them")
    p.add_argument("--max-cells", type=cargs.number(1, integer=True), default=None, metavar="N",
                   help=cargs.LazyHelp(lambda: "refuse a grid of more than N cells, counted "
                                       "from the axes before any cell is built (default "
                                       f"{_max_cells():,})"))
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_sweep)


def _max_cells() -> int:
    from gfs_opt.experiments.sweep.spec import MAX_CELLS

    return MAX_CELLS


def _sweep(args: argparse.Namespace) -> int:
    from gfs_opt.experiments.sweep.engines import make_engine
    from gfs_opt.experiments.sweep.run import run_sweep
    from gfs_opt.experiments.sweep.spec import expand, load_spec_file

    if args.workers is not None and args.workers < 1:
        raise GfsError("--workers must be ≥ 1")
    spec, text = load_spec_file(args.spec)
    cells = expand(spec, args.spec.resolve().parent, args.check_invariants, args.spec,
                   max_cells=int(args.max_cells) if args.max_cells else _max_cells())
    name = spec.name or args.spec.stem
    out = args.out or Path("results") / f"sweep-{name}"
    if args.dry_run:
        print(f"{args.spec}: {len(cells)} cells")
        for c in cells:
            print(f"  {c.id}  " + "  ".join(f"{k}={v}" for k, v in c.params.items()
                                           if v is not None and k != "lp_load"))
        return 0
    check_out_dir(out)
    engine = make_engine(args.engine, workers=args.workers, address=args.address)
    # SIGTERM (a batch system's stop) is Ctrl-C here as in every command: `gfs_opt.interrupts`
    res = run_sweep(cells, out, engine, resume=args.resume, spec_text=text, spec_name=name,
                    memory_gb=spec.memory_gb, progress=not args.no_progress)
    try:
        return _report(res, cells, out)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"sweep interrupted: {res.ran} of {res.ran} cells finished in this run, each saved "
            f"whole in {out / 'cells'}/ID and listed in {out / 'results.csv'} (interrupted while "
            f"printing the summary)") from None


def _report(res: SweepResult, cells: list[Cell], out: Path) -> int:
    from gfs_opt.experiments.sweep.run import format_summary, has_parquet

    print(format_summary(res.summary, cells))
    print(f"{res.cells} cells: {res.ran} run, {res.skipped} already done, {res.failed} failed; "
          f"{res.wall_s:.1f} s with engine {res.engine}")
    first = out / ("results.parquet" if has_parquet() else "results.csv")
    rest = "results.csv, " if has_parquet() else ""
    print(f"wrote {first}, {rest}summary.csv, timings.csv"
          + ("" if has_parquet() else " (install gfs-opt[parquet] for results.parquet)"))
    if res.failed:
        print_failures(res.table, out)
        return 1
    return 0


def print_failures(table: pd.DataFrame, out: Path, shown: int = 5) -> None:
    """Failed cells on stderr: how many, then each distinct reason with its count and first cell,
    so a sweep that fails is never silent there (its tables hold every error)."""
    failed = table[table["status"] == "failed"]
    err = sys.stderr
    err.write(f"gfs-opt: {len(failed)} of {len(table)} cell(s) failed (the 'error' column of "
              f"{out / 'results.csv'}; --resume re-runs them):\n")
    reasons = failed.groupby("error", sort=False)["cell"].agg(["count", "first"])
    for reason, row in reasons.head(shown).iterrows():
        err.write(f"gfs-opt:   {row['count']} × {' '.join(str(reason).split())[:300]} "
                  f"(first: cell {row['first']})\n")
    if len(reasons) > shown:
        err.write(f"gfs-opt:   … and {len(reasons) - shown} other reason(s)\n")
