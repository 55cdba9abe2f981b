"""`gfs-opt solve`: text, JSON, export, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gfs_opt.cli import main
from gfs_opt.errors import GfsError
from gfs_opt.solve import SolverOptions

INSTANCES = Path(__file__).resolve().parents[1] / "instances"
TRAP = INSTANCES / "tiny-07-fail-size-trap.json"


def test_both_prints_side_by_side_with_gap(capsys: pytest.CaptureFixture[str]) -> None:
    # the paper's PTS: under GFS's defaults this round's HP gangs, just arrived, wait the notice
    assert main(["solve", str(TRAP), "--policy", "gfs-no-wait"]) == 0
    out = capsys.readouterr().out
    assert "greedy" in out and "MILP" in out
    # the gang-aware fail_size rule no longer falls into this trap (see instances/README.md)
    assert "greedy gap: P 0.00 % below MILP" in out
    assert "MILP victims: 3" in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", str(INSTANCES / "tiny-08-quota-classes.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["quota"]["milp"]["admitted"] == [22, 23]
    assert doc["quota"]["greedy"]["admitted"] == [20]
    assert doc["quota"]["greedy_gap"] == pytest.approx(0.5)
    assert doc["preemption"]["milp"]["reports"][0]["status"] == "optimal"


def test_certifier_flag(capsys: pytest.CaptureFixture[str]) -> None:
    tiny = str(INSTANCES / "tiny-01-cheapest-victim.json")
    pts = ["--policy", "gfs-no-wait"]   # under GFS's defaults the HP gang waits the notice
    assert main(["solve", tiny, "--method", "milp", "--step", "preemption", *pts]) == 0
    assert "warm start proven optimal by cpsat" in capsys.readouterr().out
    assert main(["solve", tiny, "--method", "milp", "--step", "preemption",
                 "--certifier", "none", *pts]) == 0
    out = capsys.readouterr().out
    assert "proven" not in out and "4,560.0" in out     # the same C, solved by SCIP


def test_single_method_and_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", str(TRAP), "--method", "greedy", "--step", "preemption"]) == 0
    out = capsys.readouterr().out
    assert "MILP" not in out and "spot quota" not in out
    assert main(["solve", str(TRAP), "--method", "milp", "--solver", "cpsat", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["preemption"]["milp"]["reports"][0]["solver"] == "ortools-cpsat"


def test_the_cli_choices_are_the_solvers_own() -> None:
    """`solve_cmd` spells out its choices (start-up time); they must be the modules' own."""
    from gfs_opt.commands import solve_cmd
    from gfs_opt.instance import solve_round
    from gfs_opt.solve import EXPORT_FORMATS, PRESOLVE, SOLVERS

    assert solve_cmd.METHODS == solve_round.METHODS and solve_cmd.STEPS == solve_round.STEPS
    assert tuple(SOLVERS) == solve_cmd.SOLVERS and solve_cmd.EXPORT_FORMATS == EXPORT_FORMATS
    assert tuple(PRESOLVE) == solve_cmd.PRESOLVE


def test_presolve_setting_keeps_the_optimum(capsys: pytest.CaptureFixture[str]) -> None:
    """SCIP's presolve effort changes how the optimum is found, not its value: every setting
    gives the same P and C on a contested instance, and an unknown one is refused."""
    path = str(INSTANCES / "tiny-09-two-pools.json")
    scores = set()
    for setting in ("fast", "default", "off"):
        assert main(["solve", path, "--method", "milp", "--step", "preemption",
                     "--presolve", setting, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)["preemption"]["milp"]
        assert doc["reports"][0]["status"] == "optimal"
        scores.add((doc["placed_value"], doc["eviction_cost"]))
    assert len(scores) == 1
    with pytest.raises(GfsError, match="unknown presolve"):
        SolverOptions(presolve="exhaustive")


def test_greedy_steps_of_another_policy(capsys: pytest.CaptureFixture[str]) -> None:
    """``--policy`` picks whose greedy passes answer: on tiny-09 GFS's two-pointer victims spare
    the costlier LP gang that Lyra's reclaim cost breaks, and Lyra has no spot quota."""
    path = str(INSTANCES / "tiny-09-two-pools.json")
    docs = {}
    for policy in ("gfs", "lyra"):
        assert main(["solve", path, "--method", "greedy", "--policy", policy, "--json"]) == 0
        docs[policy] = json.loads(capsys.readouterr().out)
    gfs, lyra = (docs[p]["preemption"]["greedy"] for p in ("gfs", "lyra"))
    assert gfs["victims"] != lyra["victims"]
    assert docs["gfs"]["quota"]["greedy"]["quotas"] and not docs["lyra"]["quota"]["greedy"]["quotas"]
    assert main(["solve", path, "--method", "greedy", "--policy", "lyra"]) == 0
    assert "no spot quota" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["lp", "mps"])
def test_export_writes_both_models(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"round.{fmt}"
    assert main(["solve", str(INSTANCES / "tiny-09-two-pools.json"), "--export", fmt, "--out", str(out)]) == 0
    quota = tmp_path / f"round.quota.{fmt}"
    assert out.exists() and quota.exists()
    text = out.read_text()
    # the minimisation form: no reader ignores the sense (CBC ignores an MPS OBJSENSE MAX)
    assert ("Minimize" in text) if fmt == "lp" else ("ROWS" in text and "OBJSENSE" not in text)
    printed = capsys.readouterr().out
    assert f"wrote {out}:" in printed and f"wrote {quota}:" in printed   # every file named


def test_export_without_out_writes_beside_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["solve", str(INSTANCES / "tiny-02-window-penalty.json"), "--export", "mps"]) == 0
    printed = capsys.readouterr().out
    for name in ("tiny-02-window-penalty.mps", "tiny-02-window-penalty.quota.mps"):
        assert (tmp_path / name).is_file() and f"wrote {name}:" in printed


@pytest.mark.parametrize("args, needle", [
    (["/no/such/file.json"], "cannot read"),
    (["{bad}"], "cannot read"),
    ([str(TRAP), "--time-limit", "0"], "argument --time-limit: 0 is out of range"),
    ([str(TRAP), "--policy", "gfs-milp"], "policy 'gfs-milp' has no greedy steps"),
    ([str(TRAP), "--policy", "nope"], "unknown policy 'nope'"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_bad_file_content(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "gfs-opt-instance", "version": 1, "time": -1}')
    assert main(["solve", str(bad)]) == 2
    assert capsys.readouterr().err.startswith("gfs-opt: error:")


def test_solver_options_reject_unknown_solver() -> None:
    with pytest.raises(GfsError):
        SolverOptions(solver="gurobi")


def test_hard_guarantee_flag_applies_to_greedy_and_milp(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(INSTANCES / "tiny-02-window-penalty.json")
    assert main(["solve", path, "--step", "preemption", "--hard-guarantee", "--json",
                 "--policy", "gfs-no-wait"]) == 0
    doc = json.loads(capsys.readouterr().out)["preemption"]
    assert doc["milp"]["victims"] == [] and not doc["milp"]["reports"][0]["fallback"]
    assert doc["greedy"]["problems"] and "greedy_gap" not in doc
