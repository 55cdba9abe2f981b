"""`gfs-opt sweep SPEC`: a grid of simulations on local worker processes or a Ray cluster."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

from gfs_opt.errors import GfsError
from gfs_opt.fileio import check_out_dir


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
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(handler=_sweep)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """A batch system's SIGTERM stops the sweep like Ctrl-C: workers stopped, nothing half-written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _sweep(args: argparse.Namespace) -> int:
    from gfs_opt.experiments.sweep.engines import make_engine
    from gfs_opt.experiments.sweep.run import format_summary, run_sweep
    from gfs_opt.experiments.sweep.spec import expand, load_spec_file

    if args.workers is not None and args.workers < 1:
        raise GfsError("--workers must be ≥ 1")
    spec, text = load_spec_file(args.spec)
    cells = expand(spec, args.spec.resolve().parent, args.check_invariants, args.spec)
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
    with _sigterm_as_interrupt():
        res = run_sweep(cells, out, engine, resume=args.resume, spec_text=text, spec_name=name,
                        memory_gb=spec.memory_gb, progress=not args.no_progress)
    print(format_summary(res.summary, cells))
    print(f"{res.cells} cells: {res.ran} run, {res.skipped} already done, {res.failed} failed; "
          f"{res.wall_s:.1f} s with engine {res.engine}")
    from gfs_opt.experiments.sweep.run import has_parquet

    first = out / ("results.parquet" if has_parquet() else "results.csv")
    rest = "results.csv, " if has_parquet() else ""
    print(f"wrote {first}, {rest}summary.csv, timings.csv"
          + ("" if has_parquet() else " (install gfs-opt[parquet] for results.parquet)"))
    if res.failed:
        print(f"{res.failed} cell(s) failed: see the 'error' column of {out / 'results.csv'}; "
              f"--resume re-runs them")
        return 1
    return 0
