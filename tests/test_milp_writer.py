"""`MilpWriter`: the bulk path writes the very model the element-at-a-time path writes (same ids,
names, bounds, integrality and coefficients), for hand-made rows and for the exact models."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from milp_rounds import admission_rounds, contested_rounds
from ortools.math_opt.python import mathopt

from gfs_opt import milp_writer
from gfs_opt.instance import load_round
from gfs_opt.milp_writer import MilpWriter
from gfs_opt.model import Round
from gfs_opt.preempt import milp as pmilp
from gfs_opt.quota import milp as qmilp

INSTANCES = Path(__file__).resolve().parents[1] / "instances"


def _both(build, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    monkeypatch.setattr(milp_writer, "BULK", True)
    bulk = build().export_model()
    monkeypatch.setattr(milp_writer, "BULK", False)
    plain = build().export_model()
    monkeypatch.setattr(milp_writer, "BULK", True)
    return bulk.SerializeToString(deterministic=True), plain.SerializeToString(deterministic=True)


def _hand_made() -> mathopt.Model:
    m = mathopt.Model(name="t")
    before = m.add_binary_variable(name="before")          # the writer appends after it
    w = MilpWriter(m)
    x, y = w.binary("x"), w.integer(lb=0, ub=5, name="y")
    c = w.variable(name="c")                                # continuous, unbounded
    w.row([(1.0, x), (2.0, y), (3.0, x)], ub=4.0, name="r0")     # x repeated: 4·x + 2·y
    w.row([(1.0, c), (-1.0, c), (1.0, y)], lb=-1.0, ub=1.0, name="r1")   # c cancels out
    w.row([], name="empty")
    got = w.flush()
    assert [v.name for v in got] == ["x", "y", "c"] and got[0].id == before.id + 1
    assert got[1].integer and got[1].upper_bound == 5 and not got[2].integer
    assert math.isinf(got[2].lower_bound)
    m.add_linear_constraint(got[0] + before <= 1, name="after")   # the public API goes on
    return m


def test_bulk_and_plain_paths_write_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    bulk, plain = _both(_hand_made, monkeypatch)
    assert bulk == plain
    m = _hand_made()
    r0 = m.get_linear_constraint(0)
    assert {t.variable.name: t.coefficient for t in r0.terms()} == {"x": 4.0, "y": 2.0}
    r1 = m.get_linear_constraint(1)
    assert {t.variable.name: t.coefficient for t in r1.terms()} == {"y": 1.0}   # no zero entry


def _assert_same_models(rnd: Round, monkeypatch: pytest.MonkeyPatch) -> None:
    bulk, plain = _both(lambda: pmilp.build_model(rnd).model, monkeypatch)
    assert bulk == plain
    packed = qmilp.QuotaOptions(pack=True)
    bulk, plain = _both(lambda: qmilp.build_model(rnd, packed).model, monkeypatch)
    assert bulk == plain


@pytest.mark.parametrize("name", ["tiny-03-fractional.json", "tiny-04-gang16.json",
                                  "tiny-09-two-pools.json", "sim-small-high-preemption.json",
                                  "sim-paper-a100-medium-admission.json"])
def test_exact_models_are_the_same_either_way(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_same_models(load_round(INSTANCES / name), monkeypatch)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rnd=contested_rounds(max_nodes=5, max_pending=4))
def test_preemption_models_are_the_same_either_way(rnd: Round,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    bulk, plain = _both(lambda: pmilp.build_model(rnd).model, monkeypatch)
    assert bulk == plain


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rnd=admission_rounds())
def test_packed_admission_models_are_the_same_either_way(rnd: Round,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    packed = qmilp.QuotaOptions(pack=True)
    bulk, plain = _both(lambda: qmilp.build_model(rnd, packed).model, monkeypatch)
    assert bulk == plain


def test_objective_set_in_bulk_is_the_expression_objective(monkeypatch: pytest.MonkeyPatch) -> None:
    def model(how: str) -> bytes:
        m = mathopt.Model(name="o")
        x, y, z = (m.add_binary_variable(name=n) for n in "xyz")
        m.minimize(7 * z + 1.5)                     # replaced whole, offset included
        if how == "expr":
            m.maximize(2 * x + 3.5 * y)
        else:
            monkeypatch.setattr(milp_writer, "BULK", how == "bulk")
            milp_writer.set_objective(m, {x: 2.0, y: 3.5}, maximize=True)
            monkeypatch.setattr(milp_writer, "BULK", True)
        return m.export_model().SerializeToString(deterministic=True)

    assert model("bulk") == model("plain") == model("expr")
