"""Could GLOP's LP relaxation answer gfs-milp's SCIP solves? (an exactness certificate)

    python benchmarks/lp_certificate.py chronus@1

The replay runs once with the default policy; every preemption model that goes to SCIP is kept
(exported, with SCIP's values, objective and time). Each is then relaxed (integer variables made
continuous) and solved by GLOP, with phase 2's pin `P ≥ best_p − 0.5` tightened to `P ≥ best_p`
(the same integer points: P is an integer). A relaxation whose optimal vertex is integral and
dual non-degenerate (every non-basic column and row with a reduced cost or dual value away from
zero) has that vertex as its only optimum, hence so does the MILP, and SCIP must report it: those
are the solves such a certificate could skip without changing any answer. The other classes say
why it cannot: a fractional vertex (the relaxation is weaker than what SCIP's presolve and root
cuts make of it), or an integral one with ties, where SCIP may report another solution of the
same objective, or one worse by up to its 10⁻⁴ relative gap.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ortools.math_opt import model_pb2
from ortools.math_opt.python import mathopt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from solve_capture import capture_solves

#: (exported model, SCIP's values by variable id, SCIP's objective, SCIP's seconds)
Captured = tuple[bytes, dict[int, float], float, float]
INTEGRAL_TOL = 1e-9
REDUCED_COST_TOL = 1e-7   # relative to the largest objective coefficient
PIN = "pin_placed_value"


def capture(case: str) -> list[Captured]:
    def keep(model: mathopt.Model, out: Any, _kw: dict[str, Any]) -> Captured | None:
        if out.objective is None:
            return None
        return (model.export_model().SerializeToString(),
                {v.id: x for v, x in out.values.items()}, out.objective, out.time_s)

    return capture_solves(case, keep)


def classify(raw: bytes, scip: dict[int, float], scip_objective: float) -> tuple[str, float]:
    """(class, GLOP's seconds) of one captured model."""
    proto = model_pb2.ModelProto()
    proto.ParseFromString(raw)
    model = mathopt.Model.from_model_proto(proto)
    for v in model.variables():
        v.integer = False
    for row in model.linear_constraints():
        if row.name == PIN:
            row.lower_bound = round(row.lower_bound + 0.5)
    t = time.process_time()
    res = mathopt.solve(model, mathopt.SolverType.GLOP, params=mathopt.SolveParameters(threads=1))
    glop_s = time.process_time() - t
    if res.termination.reason is not mathopt.TerminationReason.OPTIMAL or not res.has_basis():
        return "LP not solved", glop_s
    x = res.variable_values()
    if any(abs(a - round(a)) > INTEGRAL_TOL for a in x.values()):
        return "fractional", glop_s
    tol = REDUCED_COST_TOL * max([1.0, *(abs(t.coefficient) for t in model.objective.linear_terms())])
    movable = (mathopt.BasisStatus.AT_LOWER_BOUND, mathopt.BasisStatus.AT_UPPER_BOUND,
               mathopt.BasisStatus.FREE)
    rc, duals = res.reduced_costs(), res.dual_values()
    ties = (sum(s in movable and abs(rc[v]) <= tol for v, s in res.variable_status().items())
            + sum(s in movable and abs(duals[c]) <= tol for c, s in res.constraint_status().items()))
    same = all(abs(round(x[v]) - scip.get(v.id, 0.0)) < 1e-6 for v in model.variables())
    if ties == 0:
        return f"integral, unique, SCIP {'the same' if same else 'DIFFERS'}", glop_s
    if same:
        return "integral, ties, SCIP the same", glop_s
    worse = abs(scip_objective - res.objective_value()) > 1e-9 * max(1.0, abs(scip_objective))
    return f"integral, ties, SCIP {'worse within its gap' if worse else 'another tie'}", glop_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    a = ap.parse_args()
    kept = capture(a.case)
    classes: Counter[str] = Counter()
    glop = scip = 0.0
    for raw, values, objective, scip_s in kept:
        cls, glop_s = classify(raw, values, objective)
        classes[cls] += 1
        glop, scip = glop + glop_s, scip + scip_s
    n = len(kept)
    print(f"{a.case}: {n} SCIP solves, {scip:.2f} s in SCIP (wall), {glop:.2f} s CPU in GLOP")
    for cls, count in classes.most_common():
        print(f"  {cls:40s} {count:5d}  {count / max(n, 1):6.1%}")


if __name__ == "__main__":
    main()
