"""`gfs-opt` command line. Each command group lives in its own module under `gfs_opt.commands`
and exposes ``register(subparsers)``; handlers return an exit code.

Errors a user can cause (bad files, impossible requests) are `GfsError`s: printed as one line on
stderr with exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gfs_opt import __version__
from gfs_opt.commands.args import OneLineParser
from gfs_opt.errors import GfsError

# Order here is the order of `gfs-opt --help`.
COMMAND_MODULES = [
    "gfs_opt.commands.trace_cmd",
    "gfs_opt.commands.data_cmd",
    "gfs_opt.commands.instance_cmd",
    "gfs_opt.commands.solve_cmd",
    "gfs_opt.commands.sim_cmd",
    "gfs_opt.commands.forecast_cmd",
    "gfs_opt.commands.sweep_cmd",
    "gfs_opt.commands.reproduce_cmd",
    "gfs_opt.commands.slurm_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gfs-opt",
        description="Preemption-aware GPU-cluster scheduling with predictive spot quotas (GFS).")
    parser.add_argument("--version", action="version", version=f"gfs-opt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:   # --help, --version, or a bad flag (already reported in one line)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return int(args.handler(args) or 0)
    except GfsError as exc:
        print(f"gfs-opt: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:   # output piped into e.g. `head`, which stopped reading
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt as exc:   # a handler may say what was saved and how to go on
        print(f"gfs-opt: {str(exc) or f'{args.command} interrupted'}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
