"""Exported models (`gfs-opt solve --export lp|mps`) open anywhere and keep the MILP's optimum.

Every hand-made instance (instances/tiny-*.json) is exported in both formats through the CLI;
each written file is read by PuLP (MPS), CBC (the binary PuLP ships: LP and MPS) and HiGHS (LP and
MPS), solved, and its optimum compared with the optimum OR-Tools finds for the very model object
that was exported (captured on its way to the writer): the files are minimisations, so the two
have opposite signs. Where the instance's `meta.optimum` gives the optimal HP value P, the
exported preemption optimum places exactly that P (its objective is P − λ·C with 0 ≤ λ·C < 1).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gfs_opt.milp_export import OFFSET_COLUMN, to_lp, to_mps
from gfs_opt.paths import REPO_ROOT
from gfs_opt.solve import SolverOptions, export, solve

pulp = pytest.importorskip("pulp")
highspy = pytest.importorskip("highspy")

TINY = sorted((REPO_ROOT / "instances").glob("tiny-*.json"))
STEPS = {"preemption": "gfs_opt.preempt.milp", "quota": "gfs_opt.quota.milp"}


def _exported(inst: Path, step: str, fmt: str, out: Path,
              monkeypatch: pytest.MonkeyPatch) -> tuple[Path, float | None, str]:
    """Export one step through the CLI; the file, the optimum of the exported model object
    (None when it has no column) and what the command printed."""
    import contextlib
    import importlib
    import io

    from gfs_opt.cli import main

    models: list[Any] = []
    module = importlib.import_module(STEPS[step])

    def capture(model: Any, f: str) -> str:
        models.append(model)
        return export(model, f)

    monkeypatch.setattr(module, "export", capture)
    path = out / f"{inst.stem}.{step}.{fmt}"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["solve", str(inst), "--step", step, "--export", fmt, "--out", str(path)])
    assert code == 0
    (model,) = models
    if not model.export_model().variables.ids:
        return path, None, buf.getvalue()
    best = solve(model, SolverOptions(rel_gap=0.0, time_limit=30.0))
    assert best.status == "optimal"
    return path, best.objective, buf.getvalue()


def _cbc(path: Path, tmp: Path) -> float:
    sol = tmp / f"{path.name}.sol"
    res = subprocess.run([pulp.PULP_CBC_CMD().path, str(path), "solve", "solu", str(sol)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stdout[-2000:]
    first = sol.read_text().splitlines()[0]
    assert first.startswith("Optimal"), first
    return float(re.search(r"objective value\s+(\S+)", first).group(1))  # type: ignore[union-attr]


def _highs(path: Path) -> float:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    assert h.modelStatusToString(h.getModelStatus()) == "Optimal"
    return float(h.getInfo().objective_function_value)


def _pulp_mps(path: Path) -> float:
    _vars, prob = pulp.LpProblem.fromMPS(str(path))
    prob.solve(pulp.PULP_CBC_CMD(msg=False, gapRel=0.0))
    assert pulp.LpStatus[prob.status] == "Optimal"
    return float(pulp.value(prob.objective) or 0.0)


@pytest.mark.parametrize("fmt", ["lp", "mps"])
@pytest.mark.parametrize("step", list(STEPS))
@pytest.mark.parametrize("inst", TINY, ids=[p.stem for p in TINY])
def test_exported_model_solves_to_the_milp_optimum_elsewhere(
        inst: Path, step: str, fmt: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    path, optimum, printed = _exported(inst, step, fmt, tmp_path, monkeypatch)
    assert f"wrote {path}:" in printed                  # every written file is named
    if optimum is None:                                 # nothing pending for this step
        return
    found = {"cbc": _cbc(path, tmp_path), "highs": _highs(path)}
    if fmt == "mps":
        found["pulp"] = _pulp_mps(path)
    for who, value in found.items():
        assert value == pytest.approx(-optimum, rel=1e-9, abs=1e-7), (who, value, optimum)
    meta = json.loads(inst.read_text()).get("meta", {}).get("optimum", {})
    if step == "preemption" and "preemption" in meta:
        placed = meta["preemption"]["placed_value"]
        assert math.ceil(-found["highs"] - 1e-9) == placed


def test_writer_keeps_offsets_ranges_free_columns_and_full_precision(tmp_path: Path) -> None:
    """A model with every feature the writer rewrites: a maximised objective with a constant,
    a ranged row, a free and a negative column, an unbounded integer, an odd coefficient, names
    no LP reader accepts as they are. All three readers find the same optimum."""
    from ortools.math_opt.python import mathopt

    m = mathopt.Model(name="odd model")
    x = m.add_binary_variable(name="x-1")
    y = m.add_integer_variable(lb=-3, ub=math.inf, name="e2")
    z = m.add_variable(lb=-math.inf, ub=2.5, name="2z")
    w = m.add_variable(lb=-math.inf, ub=math.inf, name="w")
    m.add_linear_constraint(expr=x + y + z, lb=-1.0, ub=4.0, name="range")
    m.add_linear_constraint(expr=w - z, lb=0.0, ub=0.0, name="tie")
    m.add_linear_constraint(expr=y + w, lb=-math.inf, ub=1.0 / 3.0, name="cap")
    m.maximize(0.1234567891234 * x + y + 2 * z - w + 7.25)
    best = solve(m, SolverOptions(rel_gap=0.0))
    assert best.status == "optimal"
    proto = m.export_model()
    lp, mps = tmp_path / "odd.lp", tmp_path / "odd.mps"
    lp.write_text(to_lp(proto))
    mps.write_text(to_mps(proto))
    assert "0.1234567891234" in lp.read_text() and OFFSET_COLUMN in mps.read_text()
    for value in (_cbc(lp, tmp_path), _cbc(mps, tmp_path), _highs(lp), _highs(mps),
                  _pulp_mps(mps)):
        assert value == pytest.approx(-best.objective, abs=1e-7)
