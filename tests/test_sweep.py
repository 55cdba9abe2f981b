"""`gfs-opt sweep`: tables, resume, interrupts, failed and killed cells, Ray vs local.

Sweeps here run on a two-day, 4-node trace in the Alibaba file format (cells take well under a
second), so most of the time goes into starting worker processes.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pytest
from tiny_trace import write_tiny_trace

from gfs_opt.cli import main
from gfs_opt.experiments.runner import run
from gfs_opt.experiments.sweep.cell import execute_cell
from gfs_opt.experiments.sweep.engines import OnDone, Task
from gfs_opt.experiments.sweep.run import ci95, merge, run_sweep
from gfs_opt.experiments.sweep.spec import Cell, expand, load_spec_file

REPO = Path(__file__).resolve().parent.parent


def write_spec(folder: Path, policies: Sequence[str] = ("yarn-cs", "gfs"),
               seeds: Sequence[int] = (0, 1), extra: str = "", name: str = "tiny.toml",
               options: str = "") -> Path:
    """A sweep over the tiny trace; LP load 1.5 so that the seed changes the trace. GFS
    variants use the previous-week-peak forecaster (nothing to fit)."""
    write_tiny_trace(folder / "trace")
    spec = folder / name
    if any(p.startswith("gfs") and p != "gfs-week-peak" for p in policies):
        options = f'forecaster = "week-peak"\n{options}'
    spec.write_text(
        f'trace = "trace"\nwindow = ["2024-03-01", "2024-03-03"]\n'
        f"policies = {json.dumps(list(policies))}\nloads = [1.5]\nseeds = {list(seeds)}\n"
        f"drain_days = 1.0\n{extra}\n" + (f"[options]\n{options}" if options else ""))
    return spec


def spec_cells(spec: Path) -> list[Cell]:
    return expand(load_spec_file(spec)[0], spec.parent, source=spec)


class InlineEngine:
    """Runs cells one by one in this process; optionally 'presses Ctrl-C' after k cells."""

    name = "inline"

    def __init__(self, interrupt_after: int | None = None) -> None:
        self.interrupt_after = interrupt_after
        self.ran: list[str] = []

    def run(self, tasks: Sequence[Task], on_done: OnDone) -> None:
        for task in tasks:
            if self.interrupt_after is not None and len(self.ran) >= self.interrupt_after:
                raise KeyboardInterrupt
            self.ran.append(task.cell.id)
            on_done(execute_cell(task.cell.id, task.cell.spec, task.cell.imports))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def leftovers(out: Path) -> list[Path]:
    """Temporary files or folders that an atomic write would have renamed or removed."""
    return list(out.rglob(".*"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny sweep (2 policies × 2 seeds) run once with the local engine: (spec, out)."""
    root = tmp_path_factory.mktemp("ref")
    spec = write_spec(root)
    out = root / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "2", "--no-progress"]) == 0
    return spec, out


def test_local_sweep_writes_one_tidy_row_per_cell(reference: tuple[Path, Path]) -> None:
    spec, out = reference
    cells = spec_cells(spec)
    table = pd.read_parquet(out / "results.parquet")
    assert list(table["cell"]) == [c.id for c in cells] and len(table) == 4
    csv = pd.read_csv(out / "results.csv", keep_default_na=False, na_values=[""])
    assert list(csv.columns) == list(table.columns)
    pd.testing.assert_series_equal(csv["lp_jqt_mean"], table["lp_jqt_mean"])
    assert (table["status"] == "ok").all() and (table["error"] == "").all()
    for col in ("trace", "policy", "load", "lp_load", "forecaster", "seed", "lp_eviction_rate",
                "lp_jqt_mean", "hp_jqt_p99", "allocation_rate", "hp_evictions", "milp_solves",
                "milp_fallbacks", "events"):
        assert col in table.columns, col
    assert "wall_s" not in table.columns             # timings live apart: tables stay comparable
    assert (table["hp_evictions"] == 0).all()
    assert table.loc[table["policy"] == "yarn-cs", "forecaster"].isna().all()
    # each row is its cell's own summary, and the same as running the cell in this process
    for cell, (_i, row) in zip(cells, table.iterrows(), strict=True):
        rec = json.loads((out / "cells" / cell.id / "cell.json").read_text())
        assert rec["status"] == "ok" and rec["params"] == cell.params
        assert row["lp_jqt_mean"] == rec["metrics"]["lp_jqt_mean"]
        assert (out / "cells" / cell.id / "jobs.csv").exists()
    direct = run(cells[0].spec).summary
    assert table.iloc[0]["lp_jqt_mean"] == direct["lp_jqt_mean"]
    assert table.iloc[0]["events"] == direct["events"]
    # seeds matter (LP load 1.5 resamples the trace), so the CI is a real one
    assert table.iloc[0]["events"] != table.iloc[1]["events"]
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["policy"]) == ["yarn-cs", "gfs"] and (summary["seeds"] == 2).all()
    for pol, grp in table.groupby("policy", sort=False):
        s = summary[summary["policy"] == pol].iloc[0]
        assert s["lp_jqt_mean_mean"] == pytest.approx(grp["lp_jqt_mean"].mean())
        assert s["lp_jqt_mean_ci95"] == pytest.approx(ci95(grp["lp_jqt_mean"]))
    timings = pd.read_csv(out / "timings.csv")
    assert (timings["cell_s"] > 0).all() and (timings["engine"] == "local").all()
    assert not leftovers(out)


def test_a_policy_with_its_own_options_sweeps_and_prints_its_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``NAME[key=value]`` in ``policies`` (the CLI's syntax) runs, and the printed table names
    it (the table's grouping once looked the bracketed name up as a registered one)."""
    spec = write_spec(tmp_path, policies=("gfs", "gfs[hp_wait_h=0]"), seeds=(0,))
    code, out, err = cli(capsys, "sweep", str(spec), "--out", str(tmp_path / "out"),
                         "--workers", "1", "--no-progress")
    assert code == 0, err
    assert "gfs[hp_wait_h=0]" in out and "Traceback" not in err
    table = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert sorted(table["policy"]) == ["gfs", "gfs[hp_wait_h=0]"]
    assert (table["status"] == "ok").all()


def test_ci95_is_the_student_t_half_width() -> None:
    assert ci95(pd.Series([1.0, 3.0])) == pytest.approx(12.7062 * math.sqrt(2) / math.sqrt(2), 1e-4)
    assert math.isnan(ci95(pd.Series([5.0])))


def test_resume_redoes_only_unfinished_cells(reference: tuple[Path, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    spec, ref_out = reference
    out = tmp_path / "out"
    import shutil

    shutil.copytree(ref_out, out)
    cells = spec_cells(spec)
    code, _o, err = cli(capsys, "sweep", str(spec), "--out", str(out), "--no-progress")
    assert code == 2 and "add --resume" in err and len(err.strip().splitlines()) == 1
    # one cell never finished, one was left half-written by a crash: both are redone
    shutil.rmtree(out / "cells" / cells[1].id)
    (out / "cells" / cells[2].id / "cell.json").write_text('{"status": "o')
    (out / "cells" / ".tmp-deadbeef-x").mkdir()
    before = {c.id: (out / "cells" / c.id / "cell.json").stat().st_mtime_ns
              for c in (cells[0], cells[3])}
    engine = InlineEngine()
    res = run_sweep(cells, out, engine, resume=True, progress=False, echo=lambda s: None)
    assert sorted(engine.ran) == sorted([cells[1].id, cells[2].id])
    assert (res.ran, res.skipped, res.failed) == (2, 2, 0)
    for cid, mtime in before.items():
        assert (out / "cells" / cid / "cell.json").stat().st_mtime_ns == mtime
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"),
                                  pd.read_parquet(ref_out / "results.parquet"))
    assert not leftovers(out)


def test_interrupt_keeps_finished_cells_and_resume_completes(reference: tuple[Path, Path],
                                                             tmp_path: Path) -> None:
    spec, ref_out = reference
    cells = spec_cells(spec)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt, match=r"1 of 4 cells finished.*--resume"):
        run_sweep(cells, out, InlineEngine(interrupt_after=1), progress=False)
    assert [p.name for p in (out / "cells").iterdir()] == [cells[0].id]
    assert not leftovers(out)
    # the tables list exactly the cells on disk: one finished, the others missing
    table = pd.read_csv(out / "results.csv")
    assert list(table["status"]) == ["ok", "missing", "missing", "missing"]
    engine = InlineEngine()
    run_sweep(cells, out, engine, resume=True, progress=False, echo=lambda s: None)
    assert engine.ran == [c.id for c in cells[1:]]
    assert (out / "results.csv").read_bytes() == (ref_out / "results.csv").read_bytes()


def test_interrupt_while_writing_a_cell_leaves_nothing_half_written(
        reference: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gfs_opt.experiments import runner

    spec, _ref = reference
    cells = spec_cells(spec)[:1]
    real_write = runner.RunOutput.write

    def write_then_interrupt(self: runner.RunOutput, out: Path) -> None:
        real_write(self, out)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner.RunOutput, "write", write_then_interrupt)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(cells, out, InlineEngine(), progress=False)
    assert list((out / "cells").iterdir()) == []


def _descendants(pid: int) -> set[int]:
    """Live processes below ``pid``: worker pool, fork server … (from /proc; Linux)."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parent[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int], wait_s: float = 5.0) -> set[int]:
    deadline = time.monotonic() + wait_s
    while True:
        alive = {p for p in pids if Path(f"/proc/{p}").exists()}
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_ctrl_c_stops_workers_and_exits_130(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, policies=("yarn-cs", "lyra"), seeds=(0, 1, 2))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "gfs_opt.cli", "sweep", str(spec), "--out", str(out),
           "--workers", "1", "--no-progress"]
    # pytest-xdist workers ignore SIGINT, and an ignored signal stays ignored across exec
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 90
    while not list((out / "cells").glob("*/cell.json")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    workers = _descendants(proc.pid)
    assert workers
    proc.send_signal(signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gfs-opt: sweep interrupted"), stderr
    assert "Traceback" not in stderr
    assert not _alive(workers)
    assert not leftovers(out)
    finished = {p.parent.name for p in (out / "cells").glob("*/cell.json")}
    assert 1 <= len(finished) < 6
    code, stdout, err = cli(capsys, *cmd[3:], "--resume", "--workers", "2")
    assert code == 0, err
    left = 6 - len(finished)
    assert f"resuming: {len(finished)} of 6 cells already finished, {left} to run" in stdout
    assert f"6 cells: {left} run, {len(finished)} already done, 0 failed" in stdout
    assert len(pd.read_csv(out / "results.csv")) == 6


PLUGIN = '''
import os
import signal

from gfs_opt.policies import register_policy
from gfs_opt.policies.yarn_cs import YarnCSPolicy


class Crash(YarnCSPolicy):
    def decide(self, rnd):
        raise RuntimeError("boom at t=%d" % rnd.time)


class Die(YarnCSPolicy):
    def decide(self, rnd):
        os.kill(os.getpid(), signal.SIGKILL)


register_policy("test-crash", Crash)
register_policy("test-die", Die)
'''


def test_failed_and_killed_cells_are_recorded_and_the_sweep_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from gfs_opt.policies import POLICIES

    (tmp_path / "sweep_test_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))     # spawned workers inherit sys.path
    monkeypatch.delitem(sys.modules, "sweep_test_plugin", raising=False)
    for name in ("test-crash", "test-die"):
        monkeypatch.setitem(POLICIES, name, POLICIES["yarn-cs"])  # restored after the test
    spec = write_spec(tmp_path, policies=("yarn-cs", "test-crash", "test-die", "lyra"),
                      seeds=(0,), extra='imports = ["sweep_test_plugin"]')
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "sweep", str(spec), "--out", str(out), "--workers", "2",
                            "--no-progress")
    assert code == 1, err
    table = pd.read_parquet(out / "results.parquet").set_index("policy")
    assert list(table["status"]) == ["ok", "failed", "failed", "ok"]
    assert table.loc["test-crash", "error"].startswith("RuntimeError: boom at t=")
    assert "worker process died" in table.loc["test-die", "error"]
    assert math.isnan(table.loc["test-crash", "lp_jqt_mean"])
    rec = json.loads((out / "cells" / table.loc["test-crash", "cell"] / "cell.json").read_text())
    assert "Traceback" in rec["traceback"] and rec["error_type"] == "RuntimeError"
    assert "Traceback" not in stdout + err
    # the failures are summarised on stderr: the count, then each reason with its first cell
    assert "gfs-opt: 2 of 4 cell(s) failed" in err and "boom at t=" in err, err
    assert "worker process died" in err and "(first: cell " in err, err
    assert not leftovers(out)
    # resume retries exactly the failed cells
    code, stdout, _err = cli(capsys, "sweep", str(spec), "--out", str(out), "--workers", "2",
                             "--no-progress", "--resume")
    assert code == 1 and "4 cells: 2 run, 2 already done, 2 failed" in stdout


def test_ray_missing_gives_a_one_line_hint(reference: tuple[Path, Path], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    spec, _ref = reference
    monkeypatch.setitem(sys.modules, "ray", None)      # import ray → ImportError
    code, _o, err = cli(capsys, "sweep", str(spec), "--engine", "ray", "--out",
                        str(tmp_path / "o"), "--no-progress")
    assert code == 2 and err.strip() == "gfs-opt: error: --engine ray needs Ray: pip install " \
                                        "'gfs-opt[ray]'"
    code, _o, err = cli(capsys, "sweep", str(spec), "--address", "auto", "--out",
                        str(tmp_path / "o"), "--no-progress")
    assert code == 2 and "--address is for --engine ray" in err


@pytest.mark.slow   # starts a local Ray (≈ 30 s of CPU, ~1 GB)
def test_ray_and_local_give_identical_tables(reference: tuple[Path, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'gfs-opt[ray]')")
    spec, ref_out = reference
    out = tmp_path / "ray"
    t0 = time.perf_counter()
    code, stdout, err = cli(capsys, "sweep", str(spec), "--engine", "ray", "--workers", "2",
                            "--out", str(out), "--no-progress")
    assert code == 0, err
    assert time.perf_counter() - t0 < 60
    assert not ray.is_initialized()                     # the local Ray was shut down
    assert "with engine ray" in stdout
    for name in ("results.csv", "summary.csv"):
        assert (out / name).read_bytes() == (ref_out / name).read_bytes(), name
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"),
                                  pd.read_parquet(ref_out / "results.parquet"))
    assert (pd.read_csv(out / "timings.csv")["engine"] == "ray").all()
    _table, timings = merge(spec_cells(spec), out / "cells")
    assert timings["worker"].str.contains(":").all()
