"""`gfs-opt simulate` and `gfs-opt compare` through `gfs_opt.cli.main` (in-process)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from standins import needs_ref_toy
from tiny_trace import write_tiny_trace

from gfs_opt.cli import main
from gfs_opt.experiments.runner import TIMING_KEYS
from gfs_opt.paths import ref_toy_dir

REF_TOY = ref_toy_dir()   # in the data folder, not shipped


@pytest.fixture
def tiny_trace(tmp_path: Path) -> Path:
    """Two days of a 2-pool cluster in the Alibaba v2026 file format (times from 2024-03-01)."""
    return write_tiny_trace(tmp_path / "tiny")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gfs-opt: error: "), err
    for f in fragments:
        assert f in lines[0], (f, lines[0])


@needs_ref_toy
def test_simulate_ref_toy_window(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "simulate", "--trace", str(REF_TOY), "--policy", "yarn-cs",
                             "--window", "2024-03-11", "2024-03-13", "--no-progress")
    assert code == 0, err
    assert "policy yarn-cs" in out
    assert "window [864000, 1036800) s" in out          # 2024-03-11 … 2024-03-13 exclusive
    assert "80 GPUs" in out
    for line in ("LP eviction rate", "LP JQT mean/p50/p99", "HP JQT mean/p99", "allocation",
                 "unfinished at end"):
        assert line in out
    assert "HP evictions 0" in out


def test_simulate_json_and_tables(tiny_trace: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "run"
    code, out, err = run_cli(capsys, "simulate", "--trace", str(tiny_trace), "--policy", "gfs",
                             "--forecaster", "week-peak", "--window", "2024-03-01", "2024-03-03",
                             "--check-invariants", "--json", "--out", str(out_dir),
                             "--no-progress")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["policy"] == "gfs" and summary["hp_evictions"] == 0
    assert summary["window"] == [0.0, 172_800.0]
    assert summary["jobs_hp"] + summary["jobs_lp"] == 121
    for name in ("summary.json", "per_class.csv", "per_pool.csv", "timeseries.csv", "jobs.csv",
                 "quota_log.csv"):
        assert (out_dir / name).is_file(), name
    jobs = pd.read_csv(out_dir / "jobs.csv")
    assert len(jobs) == 121 and (jobs.loc[jobs["cls"] == "HP", "evictions"] == 0).all()
    # --out promises tables and plots: the plots `compare --out` draws, for this run
    for name in ("lp_jqt_cdf_x1.png", "allocation_x1.png", "eviction_by_pool_x1.png",
                 "quota_feedback_x1_gfs.png"):
        assert (out_dir / name).stat().st_size > 1000, name


def test_simulate_takes_a_setup_as_compare_does(tiny_trace: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "simulate", "--setup", "small", "--policy", "yarn-cs",
                             "--no-progress")
    assert code == 0, err
    assert "policy yarn-cs" in out and "253 GPUs" in out
    code, _out, err = run_cli(capsys, "simulate", "--setup", "small", "--trace", str(tiny_trace),
                              "--no-progress")
    assert_one_line_error(code, err, "either --setup or --trace")
    code, _out, err = run_cli(capsys, "simulate", "--setup", "nope", "--no-progress")
    assert_one_line_error(code, err, "unknown setup 'nope'", "demo")


def test_compare_says_how_often_the_milp_answered(tiny_trace: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "compare", "--trace", str(tiny_trace), "--policies",
                             "gfs,gfs-milp", "--forecaster", "week-peak", "--workers", "1",
                             "--no-progress")
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("gfs-milp @ medium: "))
    solves, exact, fell = (int(x.replace(",", "")) for x in re.findall(r"[\d,]+(?= MILP solves| answered| fell)", line))
    assert solves == exact + fell and solves > 0
    assert not any(ln.startswith("gfs @ ") for ln in out.splitlines())   # no MILP, no line


def test_simulate_window_in_seconds_matches_dates(tiny_trace: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--trace", str(tiny_trace), "--policy", "lyra", "--json", "--no-progress"]
    _, by_date, _ = run_cli(capsys, *args, "--window", "2024-03-01", "2024-03-02")
    _, by_secs, _ = run_cli(capsys, *args, "--window", "0", "86400")
    a, b = json.loads(by_date), json.loads(by_secs)
    for volatile in TIMING_KEYS:
        a.pop(volatile), b.pop(volatile)
    assert a == b


@pytest.mark.parametrize(("extra", "fragments"), [
    (["--policy", "no-such-policy"], ["unknown policy 'no-such-policy'", "yarn-cs"]),
    (["--window", "2024-03-02", "2024-03-01"], ["window end 2024-03-01 is not after its start"]),
    (["--window", "2024-03-01", "2024-03-01"], ["is not after its start"]),
    (["--window", "yesterday-ish", "2024-03-02"], ["'yesterday-ish' is neither a date"]),
    (["--pools", "H800"], ["unknown pool(s) ['H800']", "A100"]),
    (["--lp-load", "-1"], ["argument --lp-load: -1 is out of range (must be [0, 100])"]),
    (["--rho", "1.5"], ["argument --rho: 1.5 is out of range (must be (0, 1))"]),
])
def test_simulate_bad_inputs(tiny_trace: Path, capsys: pytest.CaptureFixture[str],
                             extra: list[str], fragments: list[str]) -> None:
    code, _out, err = run_cli(capsys, "simulate", "--trace", str(tiny_trace), "--policy",
                              "yarn-cs", "--no-progress", *extra)
    assert_one_line_error(code, err, *fragments)


def test_simulate_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere" / "trace"
    code, _out, err = run_cli(capsys, "simulate", "--trace", str(missing), "--policy", "yarn-cs",
                              "--no-progress")
    assert_one_line_error(code, err, str(missing), "no such file or folder")


def test_simulate_folder_without_trace_files(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "simulate", "--trace", str(tmp_path), "--no-progress")
    assert_one_line_error(code, err, "node_info_df.csv")


def test_compare_writes_table_csv_and_plots(tiny_trace: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "cmp"
    code, out, err = run_cli(capsys, "compare", "--trace", str(tiny_trace),
                             "--policies", "gfs,yarn-cs,chronus,lyra,fgd",
                             "--forecaster", "week-peak", "--window", "2024-03-01", "2024-03-03",
                             "--out", str(out_dir), "--no-progress")
    assert code == 0, err
    header = " ".join(out.splitlines()[:2])
    for col in ("LP evict", "LP JQT s", "(all)", "(started)", "LP never", "HP JQT s", "alloc"):
        assert col in header
    assert "Lower is better" in out and "gfs vs mean of no-quota baselines" in out
    for pol in ("gfs", "yarn-cs", "chronus", "lyra", "fgd"):
        assert any(line.split()[1:2] == [pol] for line in out.splitlines()), pol
    df = pd.read_csv(out_dir / "compare.csv")
    assert list(df["policy"]) == ["gfs", "yarn-cs", "chronus", "lyra", "fgd"]
    assert (df["hp_evictions"] == 0).all()
    assert df["gfs_vs_lp_jqt_mean"].iloc[0] != df["gfs_vs_lp_jqt_mean"].iloc[0]  # NaN for gfs
    pngs = sorted(p.name for p in out_dir.glob("*.png"))
    # only gfs has a spot quota: its η, quota and eviction rate over time
    assert pngs == ["allocation_medium.png", "eviction_by_pool_medium.png",
                    "lp_jqt_cdf_medium.png", "quota_feedback_medium_gfs.png"]
    for p in out_dir.glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000
    assert (out_dir / "medium" / "lyra" / "summary.json").is_file()


def test_compare_in_worker_processes_gives_the_same_table(tiny_trace: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    tables = []
    for workers in ("1", "2"):
        out_dir = tmp_path / f"w{workers}"
        code, _out, err = run_cli(capsys, "compare", "--trace", str(tiny_trace), "--policies",
                                  "gfs,yarn-cs,fgd+sqa", "--forecaster", "week-peak", "--window",
                                  "2024-03-01", "2024-03-03", "--out", str(out_dir),
                                  "--no-progress", "--workers", workers)
        assert code == 0, err
        tables.append(pd.read_csv(out_dir / "compare.csv").drop(columns="wall_s"))
        assert (out_dir / "medium" / "fgd+sqa" / "summary.json").is_file()
    pd.testing.assert_frame_equal(tables[0], tables[1])
    code, _out, err = run_cli(capsys, "compare", "--trace", str(tiny_trace), "--workers", "0",
                              "--no-progress")
    assert_one_line_error(code, err, "--workers must be ≥ 1")


def test_compare_bad_inputs(tiny_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "compare", "--trace", str(tiny_trace), "--policies",
                              "gfs,bogus", "--no-progress")
    assert_one_line_error(code, err, "unknown policy 'bogus'")
    code, _out, err = run_cli(capsys, "compare", "--trace", str(tiny_trace), "--setup", "small",
                              "--no-progress")
    assert_one_line_error(code, err, "either --setup or --trace")
    code, _out, err = run_cli(capsys, "compare", "--setup", "no-such-setup", "--no-progress")
    assert_one_line_error(code, err, "unknown setup 'no-such-setup'")
    code, _out, err = run_cli(capsys, "compare", "--trace", str(tiny_trace), "--loads", "huge",
                              "--policies", "lyra", "--no-progress")
    assert_one_line_error(code, err, "unknown load 'huge'")
