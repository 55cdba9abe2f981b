"""One test per finding of the bad-input review (issue 12, part B) beyond "exit 2, one line":
what is kept on Ctrl-C, what is warned about, what is written, how long a command may take."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pandas as pd
import pytest
from standins import write_alibaba_standin
from test_fuzz_cli import run_cli
from tiny_trace import write_tiny_trace

REPO = Path(__file__).resolve().parent.parent
CONTESTED = REPO / "instances" / "contested-300.json"
TINY_INSTANCE = REPO / "instances" / "tiny-01-cheapest-victim.json"
FAST = ("--policy", "yarn-cs", "--no-progress")


def _strict_json(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: bare {name}")
    return json.loads(text, parse_constant=refuse)


def test_compare_ctrl_c_keeps_finished_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gfs_opt.experiments.compare as compare_mod

    real_run, calls = compare_mod.run, []

    def run(*args: object, **kw: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run(*args, **kw)

    monkeypatch.setattr(compare_mod, "run", run)
    out = tmp_path / "cmp"
    trace = write_tiny_trace(tmp_path / "t", n=6)
    code, _o, err = run_cli("compare", "--trace", str(trace), "--policies", "yarn-cs,fgd",
                            "--window", "2024-03-01", "2024-03-02", "--out", str(out),
                            "--no-progress", "--workers", "1")
    assert code == 130
    assert "compare interrupted during fgd @ medium" in err and "1 finished run(s) kept" in err
    assert (out / "medium" / "yarn-cs" / "summary.json").is_file()
    assert not (out / "medium" / "fgd").exists()
    assert list(pd.read_csv(out / "compare.csv")["policy"]) == ["yarn-cs"]


def test_simulate_ctrl_c_says_what_was_interrupted(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import gfs_opt.experiments.runner as runner

    def stop(*args: object, **kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner.Simulator, "run", stop)
    trace = write_alibaba_standin(tmp_path / "toy")
    code, _o, err = run_cli("simulate", "--trace", str(trace), *FAST)
    assert code == 130 and err.strip() == (f"gfs-opt: simulate interrupted: yarn-cs on {trace} did "
                                           "not finish; nothing written")


def test_out_is_checked_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gfs_opt.experiments.runner as runner

    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("ran before checking --out"))
    (tmp_path / "file").write_text("x")
    trace = write_alibaba_standin(tmp_path / "toy")
    for out in (tmp_path / "file", tmp_path / "file" / "sub"):
        code, _o, err = run_cli("simulate", "--trace", str(trace), *FAST, "--out", str(out))
        assert code == 2 and f"--out {out}" in err


def test_gang_larger_than_its_pool_is_warned_and_counted(tmp_path: Path) -> None:
    folder = write_tiny_trace(tmp_path / "t", n=6)
    jobs = pd.read_csv(folder / "job_info_df.csv")
    jobs.loc[len(jobs)] = ["giant", 1, "A100", 8, 8.0, 1000, 2000, 600, "HP"]   # 8,000 of 16 GPUs
    jobs.to_csv(folder / "job_info_df.csv", index=False)
    code, out, err = run_cli("simulate", "--trace", str(folder), *FAST, "--json",
                             "--window", "2024-03-01", "2024-03-02")
    assert code == 0, err
    warning = [ln for ln in err.splitlines() if ln.startswith("gfs-opt: warning:")]
    assert len(warning) == 1 and "1 HP / 0 LP job(s) can never be placed" in warning[0]
    assert "job giant: 1,000 × 8 GPUs, pool A100 has 16 GPUs" in warning[0]
    summary = _strict_json(out)
    assert summary["never_placeable_hp"] == 1 and summary["never_placeable_lp"] == 0


def test_json_writes_null_where_a_metric_is_undefined(tmp_path: Path) -> None:
    folder = write_tiny_trace(tmp_path / "t", n=6)
    jobs = pd.read_csv(folder / "job_info_df.csv")
    jobs[jobs["job_type"] == "HP"].to_csv(folder / "job_info_df.csv", index=False)  # no LP job
    out = tmp_path / "run"
    code, text, err = run_cli("simulate", "--trace", str(folder), *FAST, "--json", "--out",
                              str(out), "--window", "2024-03-01", "2024-03-02")
    assert code == 0, err
    summary = _strict_json(text)
    assert summary["jobs_lp"] == 0 and summary["lp_jqt_mean"] is None
    assert _strict_json((out / "summary.json").read_text())["summary"]["lp_jqt_mean"] is None


def test_files_are_0644_from_every_command(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        trace = write_tiny_trace(tmp_path / "t", n=6)
        common = ("--trace", str(trace), "--window", "2024-03-01", "2024-03-02")
        assert run_cli("simulate", *common, *FAST, "--out", str(tmp_path / "sim"))[0] == 0
        assert run_cli("compare", *common, "--policies", "yarn-cs", "--no-progress",
                       "--out", str(tmp_path / "cmp"))[0] == 0
        code, _o, err = run_cli("instance", "dump", *common, "--policy", "yarn-cs", "--max", "1",
                                "--min-pending-hp", "0", "--out", str(tmp_path / "dump"))
        assert code == 0, err
    finally:
        os.umask(old)
    files = [p for sub in ("sim", "cmp", "dump") for p in (tmp_path / sub).rglob("*") if p.is_file()]
    assert {p.suffix for p in files} >= {".json", ".csv"}
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in files}
    assert set(modes.values()) == {0o644}, modes


def test_trace_stats_scores_only_traces_on_the_calibrated_cluster(tmp_path: Path) -> None:
    trace = str(write_alibaba_standin(tmp_path / "toy"))
    code, out, err = run_cli("trace", "stats", trace)
    assert code == 0, err
    assert "not scored" in out and "FAIL" not in out
    code, out, _ = run_cli("trace", "stats", trace, "--json")
    doc = _strict_json(out)
    assert doc["calibration"] == [] and "not scored" in doc["calibration_note"]


def test_trace_verify_shows_expected_and_found(tmp_path: Path) -> None:
    from gfs_opt.traces.verify import JOB_FILE_SHA256

    f = tmp_path / "job_info_df.csv"
    f.write_bytes(b"job_name\n1\n")
    code, out, _ = run_cli("trace", "verify", str(f))
    assert code == 1
    assert f"expected sha256 {JOB_FILE_SHA256}" in out
    assert "found    sha256 " in out and JOB_FILE_SHA256 not in out.split("found")[1]


def test_solve_time_limit_bounds_the_whole_command() -> None:
    # CPU time of this process (the solvers run in it): wall time on a shared machine measures
    # the neighbours. Before the fix the quota MILP alone ran far past the limit.
    t0 = time.process_time()
    code, _out, err = run_cli("solve", str(CONTESTED), "--method", "both", "--time-limit", "1")
    cpu = time.process_time() - t0
    assert code == 0, err
    assert cpu < 5.0, f"--time-limit 1 took {cpu:.1f} s of CPU"   # load + greedy + ≤ 1 s of MILP


def test_solve_refuses_a_huge_round_for_the_milp(tmp_path: Path) -> None:
    from gfs_opt.commands.solve_cmd import MAX_MILP_PENDING

    doc = json.loads(TINY_INSTANCE.read_text())
    lp = next(j for j in doc["jobs"] if j["class"] == "LP")
    extra = [dict(lp, id=1000 + i, submit=0.0) for i in range(MAX_MILP_PENDING + 1)]
    doc["jobs"] += extra
    doc["pending_lp"] = [j["id"] for j in extra]
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(doc))
    code, _o, err = run_cli("solve", str(path), "--time-limit", "5")
    assert code == 2 and "huge.json: 10,001 pending LP jobs" in err and "--method greedy" in err
    code, _out, err = run_cli("solve", str(path), "--method", "greedy", "--step", "quota")
    assert code == 0, err


def test_a_failing_milp_exits_non_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    import gfs_opt.instance.solve_round as sr

    real = sr.solve_preemption

    def broken(*args: object, **kw: object) -> object:
        res = real(*args, **kw)
        res.decision.reports[-1].status = "error"
        res.decision.reports[-1].message = "solver said no"
        return res

    monkeypatch.setattr(sr, "solve_preemption", broken)
    code, out, err = run_cli("solve", str(TINY_INSTANCE), "--time-limit", "2")
    assert code == 1 and "preemption MILP failed (solver said no)" in err and "greedy" in out


def test_help_lists_policies_and_setups() -> None:
    from gfs_opt.experiments.setups import SETUPS
    from gfs_opt.policies import POLICIES

    for argv in (("simulate", "--help"), ("compare", "--help"), ("instance", "dump", "--help")):
        code, out, _ = run_cli(*argv)
        flat = " ".join(out.split()).replace("- ", "-")
        assert code == 0 and all(p in flat for p in POLICIES), argv
    _code, out, _ = run_cli("compare", "--help")
    assert all(s in out for s in SETUPS)


def test_one_default_output_root() -> None:
    from gfs_opt.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["forecast", "backtest", "--data", "alibaba-hourly"])
    assert args.out.parts[0] == "results"
    text = "\n".join(parser._subparsers._group_actions[0].choices[c].format_help()  # type: ignore[union-attr]
                     for c in ("sweep", "reproduce"))
    assert "default results/" in " ".join(text.split()) and "out/" not in text.replace(
        "--out", "")


def test_forecast_data_accepts_long_mapped_and_wide_csv(tmp_path: Path) -> None:
    hours = pd.date_range("2024-03-01", periods=24 * 15, freq="h")
    wide = pd.DataFrame({"time": hours, "A100": 10.0, "A10": 3.0})
    wide.to_csv(tmp_path / "wide.csv", index=False)
    long = wide.melt(id_vars="time", var_name="model", value_name="gpus")
    long.to_csv(tmp_path / "long.csv", index=False)
    outs = []
    for data, extra in (("wide.csv", ()), ("long.csv", ("--time-col", "time", "--series-col",
                                                        "model", "--value-col", "gpus"))):
        code, out, err = run_cli("forecast", "backtest", "--data", str(tmp_path / data), *extra,
                                 "--models", "week-peak", "--weeks", "1", "--no-progress",
                                 "--out", str(tmp_path / data.removesuffix(".csv")))
        assert code == 0, err
        metrics = pd.read_csv(tmp_path / data.removesuffix(".csv") / "metrics.csv")
        outs.append(metrics.drop(columns=[c for c in metrics if c.endswith("_s")]))  # timings
        assert "2 series × 360 hours" in out
    pd.testing.assert_frame_equal(outs[0], outs[1])
    code, _o, err = run_cli("forecast", "backtest", "--data", str(tmp_path / "long.csv"),
                            "--out", str(tmp_path / "x"))
    assert code == 2 and "accepted: a long CSV with columns ds, series, y" in err


def test_sim_result_tells_its_summary(tmp_path: Path) -> None:
    from gfs_opt.policies import make_policy
    from gfs_opt.sim.engine import SimConfig, Simulator
    from gfs_opt.traces.load import load_trace

    sim = Simulator(load_trace(write_alibaba_standin(tmp_path / "toy")), make_policy("yarn-cs"),
                    config=SimConfig(eval_start=864_000, eval_end=1_036_800, drain_s=0))
    summary = sim.run().summary()
    assert summary["jobs_lp"] > 0 and 0 <= summary["lp_eviction_rate"] <= 1
