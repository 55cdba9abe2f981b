"""gfs-milp's phase-2 models of a replay, solved again outside it with other solver settings
(issue 13: is SCIP's search, not our Python, the cost of the long HP backlog's MILP steps, and
what would a cheaper setting change?).

    python benchmarks/phase2_resolve.py chronus@0.25

The replay runs once with the default policy; every phase-2 solve (minimum eviction cost at the
pinned HP value) is kept as its exported model and hints. Each setting then solves all of them
with the same hints, one thread and seed 0, and reports process time, how many solutions differ
from the replay's and how many objectives do (a different solution of the same objective is a
tie broken another way, which would change the replay's later rounds).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ortools.math_opt import model_pb2
from ortools.math_opt.python import mathopt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solve_capture import capture_solves

Captured = tuple[bytes, list[dict[int, float]], float, dict[int, float]]


def capture(case: str) -> list[Captured]:
    def keep(model: mathopt.Model, out: Any, kw: dict[str, Any]) -> Captured | None:
        if model.objective.is_maximize or out.objective is None:   # phase 2 only
            return None
        return (model.export_model().SerializeToString(),
                [{v.id: x for v, x in h.items()} for h in kw.get("hints", ())],
                out.objective, {v.id: x for v, x in out.values.items()})

    return capture_solves(case, keep)


def resolve(kept: list[Captured], solver: mathopt.SolverType,
            tweak: Callable[[mathopt.SolveParameters], None]) -> tuple[float, int, int]:
    cpu, differ, objective_differs = 0.0, 0, 0
    for raw, hints, objective, values in kept:
        proto = model_pb2.ModelProto()
        proto.ParseFromString(raw)
        model = mathopt.Model.from_model_proto(proto)
        by_id = {v.id: v for v in model.variables()}
        hint = mathopt.ModelSolveParameters(solution_hints=[
            mathopt.SolutionHint(variable_values={by_id[i]: x for i, x in h.items()}) for h in hints])
        params = mathopt.SolveParameters(time_limit=datetime.timedelta(seconds=10),
                                         relative_gap_tolerance=1e-4, absolute_gap_tolerance=1e-6,
                                         random_seed=0)
        if solver is not mathopt.SolverType.HIGHS:
            params.threads = 1
        tweak(params)
        t = time.process_time()
        res = mathopt.solve(model, solver, params=params, model_params=hint)
        cpu += time.process_time() - t
        got = {v.id: x for v, x in res.variable_values().items()}
        differ += any(abs(got.get(i, 0.0) - values.get(i, 0.0)) > 1e-6 for i in {*got, *values})
        objective_differs += abs(res.objective_value() - objective) > 1e-6 * max(1.0, abs(objective))
    return cpu, differ, objective_differs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    a = ap.parse_args()
    kept = capture(a.case)
    print(f"{a.case}: {len(kept)} phase-2 solves")

    def emphasis(**fields: mathopt.Emphasis | None) -> Callable[[mathopt.SolveParameters], None]:
        def tweak(p: mathopt.SolveParameters) -> None:
            for field, value in fields.items():
                setattr(p, field, value)
        return tweak

    from gfs_opt.solve import DEFAULT_SOLVER, PRESOLVE

    # the replay's own presolve first, read from the code so that this row cannot drift from it
    fast, off = PRESOLVE[DEFAULT_SOLVER.presolve], mathopt.Emphasis.OFF
    settings: list[tuple[str, mathopt.SolverType, Callable[[mathopt.SolveParameters], None]]] = [
        ("SCIP as configured", mathopt.SolverType.GSCIP, emphasis(presolve=fast)),
        ("SCIP, its own presolve", mathopt.SolverType.GSCIP, emphasis()),
        ("SCIP, heuristics off", mathopt.SolverType.GSCIP, emphasis(presolve=fast, heuristics=off)),
        ("SCIP, presolve off", mathopt.SolverType.GSCIP, emphasis(presolve=off)),
        ("SCIP, cuts off", mathopt.SolverType.GSCIP, emphasis(presolve=fast, cuts=off)),
        ("CP-SAT", mathopt.SolverType.CP_SAT, emphasis()),
        ("HiGHS", mathopt.SolverType.HIGHS, emphasis()),
    ]
    for name, solver, tweak in settings:
        cpu, differ, obj = resolve(kept, solver, tweak)
        print(f"  {name:22s} {cpu:6.2f} s CPU  {differ:4d} solutions differ  {obj:4d} objectives differ")


if __name__ == "__main__":
    main()
