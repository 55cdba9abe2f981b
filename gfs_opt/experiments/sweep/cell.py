"""What runs inside a sweep worker (a local process or a Ray task): one cell, never raising."""

from __future__ import annotations

import importlib
import os
import socket
import time
import traceback
from dataclasses import dataclass

from gfs_opt.errors import GfsError
from gfs_opt.experiments.runner import RunOutput, RunSpec, run


@dataclass
class CellOutcome:
    """A finished cell: its output, or the error that stopped it (one line + traceback)."""

    id: str
    output: RunOutput | None = None
    error: str = ""
    error_type: str = ""
    traceback: str = ""
    cell_s: float = 0.0
    worker: str = ""

    @property
    def ok(self) -> bool:
        return self.output is not None


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def execute_cell(cell_id: str, spec: RunSpec, imports: tuple[str, ...] = ()) -> CellOutcome:
    """Run one simulation; any exception becomes a failed outcome (the sweep goes on)."""
    t0 = time.perf_counter()
    try:
        for module in imports:   # user modules that register extra policies
            importlib.import_module(module)

        out = run(spec)
        return CellOutcome(cell_id, out, cell_s=time.perf_counter() - t0, worker=worker_name())
    except Exception as exc:

        msg = " ".join(str(exc).split()) or type(exc).__name__
        return CellOutcome(
            cell_id, error=msg if isinstance(exc, GfsError) else f"{type(exc).__name__}: {msg}",
            error_type=type(exc).__name__, traceback=traceback.format_exc(),
            cell_s=time.perf_counter() - t0, worker=worker_name())


def failed(cell_id: str, message: str, error_type: str = "WorkerDied") -> CellOutcome:
    """An outcome for a cell whose worker never reported back."""
    return CellOutcome(cell_id, error=message, error_type=error_type)
