"""OR-Tools (MathOpt) wrapper shared by the exact models: solver choice, time limit, warm start,
termination → `SolveReport` status, relative gap, and LP/MPS export.

The models are built with MathOpt so that one formulation runs on SCIP (default), HiGHS or
CP-SAT unchanged. Nothing here knows about scheduling.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from ortools.math_opt.python import mathopt

from gfs_opt.errors import GfsError
from gfs_opt.milp_export import export_text
from gfs_opt.model import SolveReport

SOLVERS: dict[str, mathopt.SolverType] = {
    "scip": mathopt.SolverType.GSCIP,
    "highs": mathopt.SolverType.HIGHS,
    "cpsat": mathopt.SolverType.CP_SAT,
}
EXPORT_FORMATS = ("lp", "mps")
#: SCIP's presolve effort: "fast" skips its exhaustive rounds (probing above all), "default" is
#: SCIP's own setting, "off" none. Other back-ends keep their defaults.
PRESOLVE: dict[str, mathopt.Emphasis | None] = {
    "fast": mathopt.Emphasis.LOW, "default": None, "off": mathopt.Emphasis.OFF}
#: `certify` proves that nothing beats the warm start by more than this, relative to its objective
#: (SCIP's own stopping gap, `SolverOptions.rel_gap`, is a hundred times wider)
CERTIFY_TOL = 1e-6


@dataclass(frozen=True, slots=True)
class SolverOptions:
    """How to solve: which backend, for how long, and when a solution counts as optimal."""

    solver: str = "scip"
    time_limit: float = 10.0          # seconds for the whole step (all phases)
    rel_gap: float = 1e-4             # stop when (bound − objective)/|objective| ≤ rel_gap
    abs_gap: float = 1e-6
    threads: int = 1                  # one thread: deterministic, and the machine is shared
    seed: int = 0
    verbose: bool = False
    # back-end that may prove a feasible warm start optimal before the main solve (`certify`);
    # None: never
    certifier: str | None = "cpsat"
    # SCIP's probing is most of a preemption model's solve and rarely pays on these models:
    # on three long-backlog replays' 1,781 phase-2 models "fast" took 1.6–2.5× less CPU with
    # every objective unchanged (benchmarks/phase2_resolve.py)
    presolve: str = "fast"

    def __post_init__(self) -> None:
        if self.presolve not in PRESOLVE:
            raise GfsError(f"unknown presolve setting '{self.presolve}' (choose from "
                           f"{', '.join(PRESOLVE)})")
        for name in (self.solver, self.certifier):
            if name is not None and name not in SOLVERS:
                raise GfsError(f"unknown solver '{name}' (choose from {', '.join(SOLVERS)})")
        if not self.time_limit > 0:
            raise GfsError(f"time limit must be positive, got {self.time_limit}")


DEFAULT_SOLVER = SolverOptions()


@dataclass(slots=True)
class Outcome:
    """Result of one MathOpt solve, in plain values."""

    status: str                      # optimal | feasible | timeout | infeasible | error
    objective: float | None
    bound: float | None
    gap: float | None
    time_s: float
    values: dict[mathopt.Variable, float] = field(default_factory=dict)
    detail: str = ""

    @property
    def has_solution(self) -> bool:
        return bool(self.values)

    def value(self, var: mathopt.Variable) -> float:
        return self.values.get(var, 0.0)

    def int_value(self, var: mathopt.Variable) -> int:
        return round(self.values.get(var, 0.0))


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """|bound − objective| / max(|objective|, 1); None when either side is unknown."""
    if objective is None or bound is None or not math.isfinite(bound) or not math.isfinite(objective):
        return None
    return abs(bound - objective) / max(abs(objective), 1.0)


def _params(opts: SolverOptions, time_limit: float) -> mathopt.SolveParameters:
    kw: dict[str, object] = dict(
        time_limit=datetime.timedelta(seconds=max(time_limit, 0.01)),
        relative_gap_tolerance=opts.rel_gap, absolute_gap_tolerance=opts.abs_gap,
        enable_output=opts.verbose, random_seed=opts.seed)
    if opts.solver != "highs":  # HiGHS takes its thread count from a global setting only
        kw["threads"] = opts.threads
    if opts.solver == "scip" and (emphasis := PRESOLVE[opts.presolve]) is not None:
        kw["presolve"] = emphasis
    return mathopt.SolveParameters(**kw)


def add_row(model: mathopt.Model, terms: Iterable[tuple[float, mathopt.Variable]], *,
            lb: float = -math.inf, ub: float = math.inf, name: str = "") -> mathopt.LinearConstraint:
    """``lb ≤ Σ a·x ≤ ub`` from (a, x) pairs, a variable's repeats summed: the row
    ``add_linear_constraint`` makes of the same expression, without building and normalising
    the expression first (most of the time of building a contested pass's model)."""
    coef: dict[mathopt.Variable, float] = {}
    for a, x in terms:
        coef[x] = coef.get(x, 0.0) + a
    row = model.add_linear_constraint(lb=lb, ub=ub, name=name)
    for x, a in coef.items():
        row.set_coefficient(x, a)
    return row


def solve(model: mathopt.Model, opts: SolverOptions, *, time_limit: float | None = None,
          hints: Sequence[Mapping[mathopt.Variable, float]] = ()) -> Outcome:
    """Solve once, warm-started from ``hints`` (full or partial solutions).

    Never raises for solver trouble: that is reported as status 'error'.
    """
    limit = opts.time_limit if time_limit is None else time_limit
    model_params = mathopt.ModelSolveParameters(
        solution_hints=[mathopt.SolutionHint(variable_values=dict(h)) for h in hints if h])
    t0 = time.perf_counter()
    try:
        res = mathopt.solve(model, SOLVERS[opts.solver], params=_params(opts, limit),
                            model_params=model_params)
    except Exception as exc:  # solver back-ends raise assorted status errors
        cause = exc.__context__ or exc   # ortools' error translation can itself fail; keep the cause
        return Outcome("error", None, None, None, time.perf_counter() - t0,
                       detail=f"{type(cause).__name__}: {cause}")
    elapsed = time.perf_counter() - t0
    reason = res.termination.reason
    T = mathopt.TerminationReason
    values: dict[mathopt.Variable, float] = {}
    objective = bound = None
    if res.has_primal_feasible_solution():
        values = dict(res.variable_values())
        objective = float(res.objective_value())
        bound = float(res.termination.objective_bounds.dual_bound)
    if reason is T.OPTIMAL:
        status = "optimal"
    elif reason is T.INFEASIBLE:
        status = "infeasible"
    elif reason in (T.FEASIBLE, T.NO_SOLUTION_FOUND):
        # CP-SAT does not say which limit stopped it; the clock does
        timed_out = res.termination.limit is mathopt.Limit.TIME or (
            res.termination.limit in (None, mathopt.Limit.UNDETERMINED) and elapsed >= 0.95 * limit)
        status = "timeout" if timed_out else "feasible"
    else:
        status = "error"
    if status == "optimal" and objective is not None and bound is not None and not math.isfinite(bound):
        bound = objective
    return Outcome(status, objective, bound, relative_gap(objective, bound), elapsed, values,
                   detail=res.termination.detail)


def report(step: str, outcome: Outcome, opts: SolverOptions, *, fallback: bool = False,
           message: str = "", time_s: float | None = None) -> SolveReport:
    return SolveReport(step=step, method="milp", status=outcome.status,
                       objective=outcome.objective, bound=outcome.bound, gap=outcome.gap,
                       time_s=outcome.time_s if time_s is None else time_s,
                       solver=f"ortools-{opts.solver}", fallback=fallback, message=message)


def export(model: mathopt.Model, fmt: str) -> str:
    """The model as LP or MPS text that PuLP, CBC, HiGHS and OR-Tools read alike: minimisation
    form (a maximised objective is written negated), full precision (`gfs_opt.milp_export`)."""
    if fmt not in EXPORT_FORMATS:
        raise GfsError(f"unknown export format '{fmt}' (choose lp or mps)")
    return export_text(model.export_model(), fmt)


def satisfies(model: mathopt.Model, values: Mapping[mathopt.Variable, float],
              tol: float = 1e-6) -> bool:
    """Whether ``values`` (missing variables read as 0) meet every bound and linear constraint
    of ``model`` — integrality aside, which hints built from a decision have by construction."""
    # through the exported model: a third of the time of walking MathOpt's Python objects
    proto = model.export_model()
    cols, rows = proto.variables, proto.linear_constraints
    col_ids = np.asarray(cols.ids, dtype=np.int64)
    by_id = {v.id: x for v, x in values.items()}
    x = np.array([by_id.get(i, 0.0) for i in col_ids.tolist()], dtype=float)
    if np.any(x < np.asarray(cols.lower_bounds) - tol) or np.any(x > np.asarray(cols.upper_bounds) + tol):
        return False
    mat = proto.linear_constraint_matrix
    row_ids = np.asarray(rows.ids, dtype=np.int64)
    at_row = np.searchsorted(row_ids, np.asarray(mat.row_ids, dtype=np.int64))
    at_col = np.searchsorted(col_ids, np.asarray(mat.column_ids, dtype=np.int64))
    activity = np.bincount(at_row, weights=np.asarray(mat.coefficients) * x[at_col],
                           minlength=len(row_ids))
    return bool(np.all(activity >= np.asarray(rows.lower_bounds) - tol)
                and np.all(activity <= np.asarray(rows.upper_bounds) + tol))


def objective_at(model: mathopt.Model, values: Mapping[mathopt.Variable, float]) -> float:
    """The linear objective of ``model`` at ``values`` (missing variables read as 0)."""
    obj = model.objective
    return obj.offset + sum(t.coefficient * values.get(t.variable, 0.0)
                            for t in obj.linear_terms())


def certify(model: mathopt.Model, values: Mapping[mathopt.Variable, float], opts: SolverOptions,
            *, time_limit: float, integral: bool = False) -> Outcome | None:
    """``values`` — a feasible solution, e.g. a warm start checked with `satisfies` — as a proven
    optimum, when the lighter back-end ``opts.certifier`` shows that no solution beats their
    objective by more than `CERTIFY_TOL` (relative): the model plus that row, without an
    objective, is infeasible. None otherwise, or without a certifier distinct from the main
    back-end: then solve as usual. The model is restored before returning.

    A small MILP costs SCIP a set-up of several milliseconds that CP-SAT does not pay, and a
    feasibility question ends at the first solution found (on the toy trace's contested
    HP passes, 1.5 ms against SCIP's 5.3 ms when the warm start is optimal — 227 of 278 — and
    4.4 ms lost when it is not). When the warm start is optimal, the main back-end returned it
    unchanged wherever this was measured with a single cheapest hint, so the values are returned
    as given; it is not bound to, though: with two hints of equal cost SCIP reported another
    solution of the same objective in 10 of 60 passes (benchmarks/phase2_resolve.py), which is
    why callers ask for a strictly cheapest hint.

    ``integral``: the objective is an integer at every solution (e.g. integer weights of binary
    variables), so the proof asks for a solution better by at least 1 and, without one, the
    values are exactly optimal (bound = objective, gap 0)."""
    by = opts.certifier
    if by is None or by == opts.solver:
        return None
    obj = model.objective
    terms = [(t.coefficient, t.variable) for t in obj.linear_terms()]   # the cut's row too
    offset, target = obj.offset, objective_at(model, values)
    slack = 0.5 if integral else CERTIFY_TOL * max(1.0, abs(target))
    cut = (add_row(model, terms, lb=target - offset + slack) if obj.is_maximize
           else add_row(model, terms, ub=target - offset - slack))
    obj.clear()   # a feasibility question: the first solution found ends the search
    params = _params(replace(opts, solver=by, certifier=None), time_limit)
    t0 = time.perf_counter()
    try:
        reason = mathopt.solve(model, SOLVERS[by], params=params).termination.reason
    except Exception:  # any trouble: no certificate, the main solve decides
        return None
    finally:
        model.delete_linear_constraint(cut)
        for c, v in terms:
            obj.set_linear_coefficient(v, c)
        obj.offset = offset
    if reason is not mathopt.TerminationReason.INFEASIBLE:
        return None
    bound = target if integral else target + slack if obj.is_maximize else target - slack
    return Outcome("optimal", target, bound, relative_gap(target, bound), time.perf_counter() - t0,
                   dict(values), detail=f"warm start proven optimal by {by}")
