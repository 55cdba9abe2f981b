"""`gfs-milp`: solver time-outs fall back to the greedy answer and are counted in the results."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from test_sweep import InlineEngine, spec_cells, write_spec

from gfs_opt.experiments.sweep.run import format_summary, run_sweep
from gfs_opt.instance import load_instance
from gfs_opt.preempt.milp import greedy_decision, solve_preemption
from gfs_opt.quota.milp import solve_quota
from gfs_opt.solve import SolverOptions

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
TINY_LIMIT = 1e-6      # the solver is given its 10 ms minimum: far too little for these models


@pytest.mark.parametrize("name", ["contested-300.json", "tiny-04-gang16.json"])
def test_forced_preemption_time_out_returns_the_greedy_decision(name: str) -> None:
    if not (INSTANCES / name).exists():
        pytest.skip(f"instances/{name} is gone")
    rnd = load_instance(INSTANCES / name).round
    greedy = greedy_decision(rnd)
    assert greedy is not None
    res = solve_preemption(rnd, solver=SolverOptions(time_limit=TINY_LIMIT))
    rep = res.decision.reports[-1]
    if rep.status == "optimal":
        pytest.skip("solved to optimality within the minimum time limit on this machine")
    assert rep.status == "timeout" and rep.fallback and res.fallback
    assert "greedy answer returned" in rep.message
    assert res.decision.placements == greedy.placements
    assert sorted(res.decision.victims) == sorted(greedy.victims)


def test_forced_quota_time_out_returns_the_greedy_admission() -> None:
    if not (INSTANCES / "admission-150.json").exists():
        pytest.skip("instances/admission-150.json is gone")
    rnd = load_instance(INSTANCES / "admission-150.json").round
    res = solve_quota(rnd, solver=SolverOptions(time_limit=TINY_LIMIT))
    if res.report.status == "optimal":
        pytest.skip("solved to optimality within the minimum time limit on this machine")
    assert res.report.fallback and res.greedy_admitted is not None
    assert res.admitted == res.greedy_admitted and res.value == res.greedy_value


def test_gfs_milp_fallbacks_are_counted_in_sweep_results(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, policies=("gfs-milp",), seeds=(0,),
                      options=f"time_limit = [{TINY_LIMIT}, 5.0]\n")
    cells = spec_cells(spec)
    res = run_sweep(cells, tmp_path / "out", InlineEngine(), progress=False)
    table = res.table.set_index("time_limit")
    forced, relaxed = table.loc[TINY_LIMIT], table.loc[5.0]
    # not necessarily equal: a time-out returns the greedy answer, which may differ from the
    # MILP's and steer the rest of the run through other contested rounds
    assert forced["milp_solves"] > 0 and relaxed["milp_solves"] > 0
    assert forced["milp_timeouts"] > 0
    assert 0 < forced["milp_fallbacks"] <= forced["milp_solves"]
    assert forced["milp_fallbacks"] > relaxed["milp_fallbacks"]
    assert (res.table["hp_evictions"] == 0).all()
    text = format_summary(res.summary, cells)
    assert "MILP fallback/solves" in text
    csv = pd.read_csv(tmp_path / "out" / "results.csv")
    assert {"milp_solves", "milp_fallbacks", "milp_timeouts"} <= set(csv.columns)
