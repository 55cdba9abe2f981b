"""`gfs-opt` command line. Each command group lives in its own module under `gfs_opt.commands`
and exposes ``register(subparsers)``; handlers return an exit code.

Errors a user can cause (bad files, impossible requests) are `GfsError`s: printed as one line on
stderr with exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import importlib
import io
import os
import signal
import sys
from collections.abc import Sequence
from typing import TextIO

from gfs_opt import __version__, interrupts
from gfs_opt.commands.args import OneLineParser
from gfs_opt.errors import GfsError
from gfs_opt.fileio import CheckedStream, OutputError

if __name__ == "__main__" or os.path.basename(sys.argv[0]) == "gfs-opt":
    # the command itself (not an import by a test or a notebook): a signal from here on is
    # held until the command runs, then stops it cleanly rather than as an import's traceback
    interrupts.install(early=True)
    # ``kill -USR1 PID``: every thread's stack on stderr, to see where a command is stuck
    faulthandler.register(signal.SIGUSR1, all_threads=True)

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
    """Run one command; every write to standard output is checked (`fileio.CheckedStream`) and
    SIGINT/SIGTERM stop it cleanly (`gfs_opt.interrupts`)."""
    stdout = sys.stdout
    sys.stdout = CheckedStream(stdout)
    interrupts.install()
    try:
        code = _run(argv)
        try:
            sys.stdout.flush()     # output buffered for a file fails here on a full device
        except OutputError as exc:
            _error(exc)
            code = 2
    finally:
        interrupts.uninstall()
        sys.stdout = stdout
        _drop_unwritable(stdout)
    return code


def _run(argv: Sequence[str] | None) -> int:
    args = None
    try:
        interrupts.release_early()
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:   # --help, --version, or a bad flag (reported in one line)
            return exc.code if isinstance(exc.code, int) else 2
        return int(args.handler(args) or 0)
    except GfsError as exc:
        _error(exc)
        return 2
    except OSError as exc:     # a write outside the checked helpers: still one line
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}{exc.strerror or type(exc).__name__}")
        return 2
    except KeyboardInterrupt as exc:   # a handler may say what was saved and how to go on
        said = str(exc) or (f"{args.command} interrupted" if args is not None else "interrupted")
        sys.stderr.write(f"gfs-opt: {said}\n")
        return interrupts.exit_code()


def _error(exc: object) -> None:
    sys.stderr.write(f"gfs-opt: error: {exc}\n")


def _drop_unwritable(stream: TextIO) -> None:
    """Output that could not be written is dropped: left in the buffer, Python would fail on it
    again at exit ("Exception ignored … OSError") and exit 120."""
    try:
        stream.flush()
    except (OSError, ValueError):
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


if __name__ == "__main__":
    sys.exit(main())
