"""Replay a benchmark case under gfs-milp and keep what each exact preemption solve was asked and
answered (for the offline studies `phase2_resolve.py` and `lp_certificate.py`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from bench_sim import spec_for
from ortools.math_opt.python import mathopt

T = TypeVar("T")


def capture_solves(case: str, keep: Callable[[mathopt.Model, Any, dict[str, Any]], T | None]
                   ) -> list[T]:
    """Run ``case`` (a `bench_sim` case) under gfs-milp once; for every solve of the preemption
    MILP collect ``keep(model, outcome, solve keyword arguments)`` unless it is None."""
    import gfs_opt.preempt.milp as milp
    from gfs_opt.experiments.runner import prepare_trace, run

    kept: list[T] = []
    solve = milp.run_solver

    def keeping(model: mathopt.Model, opts: Any, **kw: Any) -> Any:
        out = solve(model, opts, **kw)
        item = keep(model, out, kw)
        if item is not None:
            kept.append(item)
        return out

    milp.run_solver = keeping
    try:
        spec = spec_for(case, "gfs-milp", None)
        run(spec, trace=prepare_trace(spec))
    finally:
        milp.run_solver = solve
    return kept
