"""The OR-Tools wrapper: status mapping, gap, warm start, export round trip."""

from __future__ import annotations

import pytest
from ortools.math_opt.io.python import mps_converter
from ortools.math_opt.python import mathopt

from gfs_opt.errors import GfsError
from gfs_opt.solve import (
    SolverOptions,
    add_row,
    certify,
    export,
    objective_at,
    relative_gap,
    satisfies,
    solve,
)


def knapsack(n: int = 40) -> tuple[mathopt.Model, list[mathopt.Variable]]:
    m = mathopt.Model(name="knap")
    xs = [m.add_binary_variable(name=f"x_{i}") for i in range(n)]
    w = [(7 * i) % 23 + 5 for i in range(n)]
    v = [(11 * i) % 29 + 3 for i in range(n)]
    m.add_linear_constraint(mathopt.fast_sum(a * x for a, x in zip(w, xs, strict=True)) <= 4 * n)
    m.maximize(mathopt.fast_sum(a * x for a, x in zip(v, xs, strict=True)))
    return m, xs


@pytest.mark.parametrize("solver", ["scip", "highs", "cpsat"])
def test_all_solvers_agree(solver: str) -> None:
    m, _ = knapsack()
    out = solve(m, SolverOptions(solver=solver, rel_gap=0.0))
    ref = solve(m, SolverOptions(rel_gap=0.0))
    assert out.status == "optimal" and out.objective == pytest.approx(ref.objective)
    assert out.gap == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("presolve", ["fast", "default", "off"])
@pytest.mark.parametrize("solver", ["scip", "highs", "cpsat"])
def test_presolve_settings_keep_the_optimum(solver: str, presolve: str) -> None:
    """SCIP's presolve effort changes the search, not the optimum; other back-ends ignore it."""
    m, _ = knapsack()
    out = solve(m, SolverOptions(solver=solver, rel_gap=0.0, presolve=presolve))
    ref = solve(m, SolverOptions(rel_gap=0.0, presolve="default"))
    assert out.status == "optimal" and out.objective == pytest.approx(ref.objective)


def test_gfs_milp_passes_its_presolve_setting_on() -> None:
    from gfs_opt.policies.gfs_milp import GFSMilpPolicy

    policy = GFSMilpPolicy(presolve="off")
    assert policy.solver.presolve == "off" and policy.options()["presolve"] == "off"
    with pytest.raises(GfsError, match="unknown presolve setting 'probing'"):
        GFSMilpPolicy(presolve="probing")


def test_infeasible_and_error_statuses() -> None:
    m = mathopt.Model()
    x = m.add_binary_variable(name="x")
    m.add_linear_constraint(x >= 2)
    assert solve(m, SolverOptions()).status == "infeasible"
    bad = mathopt.Model()
    bad.add_binary_variable(name="dup")
    bad.add_binary_variable(name="dup")
    out = solve(bad, SolverOptions())
    assert out.status == "error" and "duplicate" in out.detail


def test_warm_start_is_accepted() -> None:
    m, xs = knapsack()
    hint = {x: 0.0 for x in xs}
    out = solve(m, SolverOptions(), hints=[hint])
    assert out.status == "optimal"


def test_relative_gap() -> None:
    assert relative_gap(100.0, 101.0) == pytest.approx(0.01)
    assert relative_gap(0.0, 0.5) == pytest.approx(0.5)
    assert relative_gap(None, 1.0) is None


def test_mps_round_trip_keeps_the_optimum() -> None:
    m, _ = knapsack()
    again = mathopt.Model.from_model_proto(mps_converter.mps_to_model_proto(export(m, "mps")))
    # the file is the minimisation form of the maximised knapsack: its optimum is the negation
    assert solve(again, SolverOptions(rel_gap=0.0)).objective == pytest.approx(
        -solve(m, SolverOptions(rel_gap=0.0)).objective)
    lp = export(m, "lp")
    assert lp.count("x_") >= 40 and "Binaries" in lp


def test_satisfies_checks_bounds_and_rows() -> None:
    m = mathopt.Model()
    x, y = m.add_binary_variable(name="x"), m.add_integer_variable(lb=0, ub=3, name="y")
    m.add_linear_constraint(expr=x + 2 * y, lb=1, ub=4)
    assert satisfies(m, {x: 1.0, y: 1.0}) and satisfies(m, {y: 2.0})   # x missing reads 0
    assert not satisfies(m, {x: 0.0, y: 0.0})                         # row below its lower side
    assert not satisfies(m, {x: 1.0, y: 2.0})                         # row above its upper side
    assert not satisfies(m, {x: 2.0, y: 1.0})                         # x above its bound


def cover(n: int = 30) -> tuple[mathopt.Model, list[mathopt.Variable]]:
    """A minimisation: the cheapest set of items with enough value."""
    m = mathopt.Model(name="cover")
    xs = [m.add_binary_variable(name=f"x_{i}") for i in range(n)]
    w = [(7 * i) % 23 + 5.5 for i in range(n)]
    v = [(11 * i) % 29 + 3 for i in range(n)]
    m.add_linear_constraint(mathopt.fast_sum(a * x for a, x in zip(v, xs, strict=True)) >= 3 * n)
    m.minimize(mathopt.fast_sum(a * x for a, x in zip(w, xs, strict=True)) + 2.5)
    return m, xs


@pytest.mark.parametrize("make", [knapsack, cover])
def test_certify_proves_an_optimal_warm_start_and_leaves_the_model_as_it_was(make) -> None:
    m, _ = make()
    text = export(m, "lp")
    best = solve(m, SolverOptions(rel_gap=0.0, certifier=None))
    out = certify(m, best.values, SolverOptions(), time_limit=10.0)
    assert out is not None and out.status == "optimal" and out.values == best.values
    assert out.objective == pytest.approx(objective_at(m, best.values))
    assert out.objective == pytest.approx(best.objective) and out.gap is not None
    assert out.gap < 1e-5 and "cpsat" in out.detail
    assert export(m, "lp") == text                       # cut row gone, objective restored
    assert solve(m, SolverOptions(rel_gap=0.0)).objective == pytest.approx(best.objective)


@pytest.mark.parametrize("make", [knapsack, cover])
def test_certify_refuses_a_warm_start_that_can_be_beaten(make) -> None:
    m, xs = make()
    text = export(m, "lp")
    best = solve(m, SolverOptions(rel_gap=0.0, certifier=None))
    worse = {x: 1.0 for x in xs} if make is cover else {x: 0.0 for x in xs}
    assert satisfies(m, worse) and objective_at(m, worse) != pytest.approx(best.objective)
    assert certify(m, worse, SolverOptions(), time_limit=10.0) is None
    assert export(m, "lp") == text


def test_certify_needs_a_distinct_lighter_back_end() -> None:
    m, _ = knapsack()
    best = solve(m, SolverOptions(rel_gap=0.0))
    assert certify(m, best.values, SolverOptions(certifier=None), time_limit=10.0) is None
    assert certify(m, best.values, SolverOptions(solver="cpsat"), time_limit=10.0) is None
    assert certify(m, best.values, SolverOptions(certifier="highs"), time_limit=10.0) is not None
    with pytest.raises(GfsError, match="unknown solver 'gurobi'"):
        SolverOptions(certifier="gurobi")


def test_satisfies_after_deletions_reads_rows_and_columns_by_id() -> None:
    m = mathopt.Model()
    a, b, c = (m.add_integer_variable(lb=0, ub=5, name=n) for n in "abc")
    gone = m.add_linear_constraint(a + b <= 0)
    m.add_linear_constraint(expr=b + 2 * c, lb=3, ub=3)
    m.delete_linear_constraint(gone)
    m.delete_variable(a)                    # ids are no longer 0..n-1
    assert satisfies(m, {b: 1.0, c: 1.0}) and satisfies(m, {b: 3.0})
    assert not satisfies(m, {b: 1.0, c: 2.0}) and not satisfies(m, {c: 6.0})


def test_add_row_is_the_row_of_the_same_expression() -> None:
    """Rows from (coefficient, variable) pairs equal those MathOpt makes of expressions, with a
    repeated variable summed (the placement block builds its rows this way)."""
    def model(rows: bool) -> mathopt.Model:
        m = mathopt.Model(name="rows")
        x, y, z = (m.add_integer_variable(lb=0, ub=9, name=n) for n in "xyz")
        if rows:
            add_row(m, [(1000, x), (250, y), (-300, z)], ub=700, name="cap")
            add_row(m, [(2, x), (-1, y), (-1, z), (1, y)], lb=0, ub=0, name="eq")
            add_row(m, [(1, x), (-3, z)], lb=-1, name="ge")
        else:
            m.add_linear_constraint(1000 * x + 250 * y - 300 * z <= 700, name="cap")
            m.add_linear_constraint(2 * x == z, name="eq")
            m.add_linear_constraint(x - 3 * z >= -1, name="ge")
        m.maximize(x + y)
        return m

    assert export(model(True), "lp") == export(model(False), "lp")
