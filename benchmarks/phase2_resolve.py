"""gfs-milp's exact solves of a replay, solved again outside it with other solver settings
(is SCIP's search, not our Python, the cost of the long HP backlog's MILP steps, and
what would a cheaper setting change? which of SCIP's own parameters could go).

    python benchmarks/phase2_resolve.py chronus@0.25                  # other back-ends, emphases
    python benchmarks/phase2_resolve.py chronus@1 --set scip --repeat 3   # SCIP's parameters

The replay runs once with the default policy; every solve that reaches the solver — phase 2
(minimum eviction cost at the pinned HP value) and phase 1 (maximum HP value) — is kept as its
exported model and hints. Each setting then solves all of them with the same hints, one thread
and seed 0, and reports process time, how many solutions differ from the replay's and how many
objectives do (a different solution of the same objective is a tie broken another way, which
would change the replay's later rounds). `--set scip` keeps the replay's configured presolve and
changes one group of SCIP parameters per row (`SolveParameters.gscip`); `--repeat N` reports the
least CPU of N rounds, the rounds interleaved so that the shared machine's load falls on every
setting alike (a setting already 1.5× slower than the first row in round one is not repeated).
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
from ortools.math_opt.solvers.gscip import gscip_pb2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solve_capture import capture_solves

#: (phase, exported model, hints by variable id, the replay's objective, its values by id)
Captured = tuple[int, bytes, list[dict[int, float]], float, dict[int, float]]
Tweak = Callable[[mathopt.SolveParameters], None]
Setting = tuple[str, mathopt.SolverType, Tweak]


def capture(case: str) -> list[Captured]:
    def keep(model: mathopt.Model, out: Any, kw: dict[str, Any]) -> Captured | None:
        if out.objective is None:
            return None
        return (1 if model.objective.is_maximize else 2, model.export_model().SerializeToString(),
                [{v.id: x for v, x in h.items()} for h in kw.get("hints", ())],
                out.objective, {v.id: x for v, x in out.values.items()})

    return capture_solves(case, keep)


def resolve(kept: list[Captured], solver: mathopt.SolverType, tweak: Tweak
            ) -> tuple[float, dict[int, tuple[int, int]]]:
    """CPU seconds of the solves, and per phase (solutions differing, objectives differing)."""
    cpu, counts = 0.0, {}
    for phase, raw, hints, objective, values in kept:
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
        differ, obj = counts.get(phase, (0, 0))
        counts[phase] = (
            differ + any(abs(got.get(i, 0.0) - values.get(i, 0.0)) > 1e-6 for i in {*got, *values}),
            obj + (abs(res.objective_value() - objective) > 1e-6 * max(1.0, abs(objective))))
    return cpu, counts


def emphasis(**fields: mathopt.Emphasis | None) -> Tweak:
    def tweak(p: mathopt.SolveParameters) -> None:
        for field, value in fields.items():
            setattr(p, field, value)
    return tweak


def scip(presolve: mathopt.Emphasis | None, *, bools: dict[str, bool] | None = None,
         ints: dict[str, int] | None = None, chars: dict[str, str] | None = None) -> Tweak:
    """The given presolve emphasis plus SCIP parameters by name (SCIP rejects unknown names)."""
    def tweak(p: mathopt.SolveParameters) -> None:
        p.presolve = presolve
        g = gscip_pb2.GScipParameters()
        g.bool_params.update(bools or {})
        g.int_params.update(ints or {})
        g.char_params.update(chars or {})
        p.gscip = g
    return tweak


def solver_settings(fast: mathopt.Emphasis | None) -> list[Setting]:
    off, gscip = mathopt.Emphasis.OFF, mathopt.SolverType.GSCIP
    return [
        ("SCIP as configured", gscip, emphasis(presolve=fast)),
        ("SCIP, its own presolve", gscip, emphasis()),
        ("SCIP, heuristics off", gscip, emphasis(presolve=fast, heuristics=off)),
        ("SCIP, presolve off", gscip, emphasis(presolve=off)),
        ("SCIP, cuts off", gscip, emphasis(presolve=fast, cuts=off)),
        ("CP-SAT", mathopt.SolverType.CP_SAT, emphasis()),
        ("HiGHS", mathopt.SolverType.HIGHS, emphasis()),
    ]


#: SCIP parameters that should not steer the search (bookkeeping, symmetry, restarts that these
#: models never reach); measured one by one first, then together
BOOKKEEPING: dict[str, dict[str, Any]] = {
    "ints": {"misc/usesymmetry": 0, "presolving/maxrestarts": 0, "timing/clocktype": 2,
             "display/verblevel": 0},
    "bools": {"misc/calcintegral": False, "misc/usevartable": False, "misc/useconstable": False,
              "timing/statistictiming": False},
}


def scip_settings(fast: mathopt.Emphasis | None) -> list[Setting]:
    g = mathopt.SolverType.GSCIP
    rows: list[tuple[str, dict[str, Any]]] = [
        ("SCIP as configured", {}),
        ("symmetry off", {"ints": {"misc/usesymmetry": 0}}),
        ("restarts off", {"ints": {"presolving/maxrestarts": 0}}),
        ("primal integral off", {"bools": {"misc/calcintegral": False}}),
        ("name tables off", {"bools": {"misc/usevartable": False, "misc/useconstable": False}}),
        ("wall clock, no plugin clocks", {"ints": {"timing/clocktype": 2},
                                          "bools": {"timing/statistictiming": False}}),
        ("no messages", {"ints": {"display/verblevel": 0}}),
        ("the six rows above together", BOOKKEEPING),
        ("conflict analysis off", {"bools": {"conflict/enable": False}}),
        ("conflicts of infeasible LPs off", {"chars": {"conflict/useinflp": "o"}}),
        ("conflicts of bound-exceeding LPs off", {"chars": {"conflict/useboundlp": "o"}}),
        ("… from the conflict graph only", {"chars": {"conflict/useboundlp": "c"}}),
        ("… from the dual proof only", {"chars": {"conflict/useboundlp": "d"}}),
        ("root propagation: 1 round", {"ints": {"propagating/maxroundsroot": 1}}),
        ("root separation: 5 rounds", {"ints": {"separating/maxroundsroot": 5}}),
        ("pairwise linear presolve off", {"bools": {"constraints/linear/presolpairwise": False}}),
        ("presolve: 1 round", {"ints": {"presolving/maxrounds": 1}}),
        ("LP: primal simplex first", {"chars": {"lp/initalgorithm": "p"}}),
        ("LP: primal simplex resolves", {"chars": {"lp/resolvealgorithm": "p"}}),
        ("LP: SoPlex's presolve off", {"bools": {"lp/presolving": False}}),
        ("heuristic locks off", {"ints": {"heuristics/locks/freq": -1}}),
        ("heuristic locks without propagation", {"ints": {"heuristics/locks/maxproprounds": 0}}),
        ("heuristic trivial off", {"ints": {"heuristics/trivial/freq": -1}}),
        ("heuristic randrounding off", {"ints": {"heuristics/randrounding/freq": -1}}),
        ("heuristic shifting off", {"ints": {"heuristics/shifting/freq": -1}}),
        ("separator aggregation off", {"ints": {"separating/aggregation/freq": -1}}),
        ("separator rapidlearning off", {"ints": {"separating/rapidlearning/freq": -1}}),
        ("knapsack cuts from linear rows off", {"ints": {"constraints/linear/sepafreq": -1}}),
    ]
    return [(name, g, scip(fast, **kw)) for name, kw in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("--set", choices=("solvers", "scip"), default="solvers",
                    help="other back-ends and emphases, or SCIP's own parameters")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; least CPU reported")
    a = ap.parse_args()
    kept = capture(a.case)
    n1 = sum(phase == 1 for phase, *_ in kept)
    print(f"{a.case}: {len(kept) - n1} phase-2 solves, {n1} phase-1 solves")
    if not kept:
        return

    from gfs_opt.solve import DEFAULT_SOLVER, PRESOLVE

    # the replay's own presolve first, read from the code so that this row cannot drift from it
    fast = PRESOLVE[DEFAULT_SOLVER.presolve]
    settings = (scip_settings if a.set == "scip" else solver_settings)(fast)
    best: dict[str, float] = {}
    counts: dict[str, dict[int, tuple[int, int]]] = {}
    for rnd in range(a.repeat):
        for name, solver, tweak in settings:
            if rnd and best[name] > 1.5 * best[settings[0][0]]:
                continue
            cpu, counts[name] = resolve(kept, solver, tweak)
            best[name] = min(cpu, best.get(name, cpu))
    base = best[settings[0][0]]
    for name, _, _ in settings:
        cells = "  ".join(f"phase {ph}: {d:4d} solutions, {o:4d} objectives differ"
                          for ph, (d, o) in sorted(counts[name].items(), reverse=True))
        print(f"  {name:38s} {best[name]:7.2f} s CPU ({best[name] / base:5.2f}×)  {cells}")


if __name__ == "__main__":
    main()
