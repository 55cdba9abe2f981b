"""Run `compare` or `sweep` as a real process, signal it, and judge what it left behind.

Shared by the fast interruption test (one deterministic kill, default suite) and the property
test (drawn instants, `-m slow`). What must hold after any signal at any instant:

* every run folder is whole (all of its tables, each readable) or absent, and no temporary
  folder or file is left;
* the message is true: the runs it counts are exactly the folders on disk, and compare.csv /
  results.csv list exactly those;
* the exit status is 128 + the signal (or 0 if the command had finished; see `finish` for the
  one case where CPython ends the process by SIGINT instead), with no traceback;
* no process of the command's process group (workers, fork server, resource tracker) is alive
  5 s after it exited.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from test_sweep import write_spec
from tiny_trace import write_tiny_trace

#: what every finished run folder holds (`RunOutput.write`)
RUN_FILES = {"summary.json", "per_class.csv", "per_pool.csv", "timeseries.csv", "jobs.csv",
             "quota_log.csv", "evictions.csv"}
POLICIES = "yarn-cs,fgd,lyra,chronus"
WINDOW = ("2024-03-01", "2024-03-03")


@dataclass
class Job:
    kind: str            # compare | sweep
    out: Path
    proc: subprocess.Popen[str]
    started: float


def command(kind: str, root: Path, workers: int = 2, engine: str = "local") -> list[str]:
    out = root / "out"
    if kind == "compare":
        trace = root / "trace"
        if not trace.exists():
            write_tiny_trace(trace)
        return ["compare", "--trace", str(trace), "--window", *WINDOW, "--policies", POLICIES,
                "--workers", str(workers), "--no-progress", "--out", str(out)]
    spec = root / "tiny.toml"
    if not spec.exists():
        write_spec(root, policies=tuple(POLICIES.split(",")), seeds=(0,))
    return ["sweep", str(spec), "--workers", str(workers), "--no-progress", "--out", str(out),
            "--engine", engine]


def start(kind: str, root: Path, workers: int = 2, engine: str = "local") -> Job:
    argv = [sys.executable, "-m", "gfs_opt.cli", *command(kind, root, workers, engine)]

    def child() -> None:
        # pytest-xdist workers ignore SIGINT, and an ignored signal stays ignored across exec
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=root, start_new_session=True, preexec_fn=child)
    return Job(kind, root / "out", proc, time.monotonic())


def send(job: Job, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(job.proc.pid, sig)      # its own session: process group id = its pid
        else:
            job.proc.send_signal(sig)
    except ProcessLookupError:
        pass


def group_members(pgid: int) -> set[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.add(int(stat.parent.name))
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _state(pid: int) -> str:
    """A process's state letter and the kernel function it sleeps in (/proc)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return "?"
    return f"{state}/{wchan or '-'}"


def wait_group_gone(pgid: int, seconds: float = 5.0) -> set[int]:
    deadline = time.monotonic() + seconds
    while (alive := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def run_folders(job: Job) -> list[Path]:
    if job.kind == "compare":
        return sorted(p for p in job.out.glob("*/*") if p.is_dir() and not p.name.startswith("."))
    return sorted(p for p in (job.out / "cells").glob("*")
                  if p.is_dir() and not p.name.startswith("."))


def assert_whole(folder: Path, kind: str) -> None:
    names = {p.name for p in folder.iterdir()}
    need = RUN_FILES | ({"cell.json"} if kind == "sweep" else set())
    assert need <= names, (folder, sorted(need - names))
    assert not [n for n in names if n.startswith(".")], (folder, names)
    json.loads((folder / "summary.json").read_text())
    for name in names:
        if name.endswith(".csv"):
            pd.read_csv(folder / name)


def finish(job: Job, sig: int | None, timeout: float = 120) -> tuple[int, str]:
    """Wait for the command, then check every property; returns (exit status, stderr)."""
    try:
        _stdout, stderr = job.proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # where it hangs: the command's threads' stacks (`gfs-opt` dumps them on SIGUSR1), and
        # which processes of its group are still there, in what state
        status = job.proc.poll()        # None: the command itself is still running
        if status is None:
            job.proc.send_signal(signal.SIGUSR1)
            time.sleep(1.0)
        alive = ", ".join(f"{p} {_comm(p)} {_state(p)}" for p in sorted(group_members(job.proc.pid)))
        os.killpg(job.proc.pid, signal.SIGKILL)
        _stdout, stderr = job.proc.communicate()
        tail = (stderr or "")[-4000:]
        said = "still running" if status is None else f"exited {status}"
        raise AssertionError(f"{job.kind} did not stop within {timeout} s ({said}); its group "
                             f"then: {alive or 'none'}; its stderr ends:\n{tail}") from None
    code = job.proc.returncode
    alive = wait_group_gone(job.proc.pid)
    assert not alive, ("processes of the command still alive 5 s after it exited "
                       f"({code}): " + ", ".join(f"{p} {_comm(p)}" for p in alive)
                       + f"; its stderr ends:\n{(stderr or '')[-3000:]}")
    leftovers = [p for p in job.out.rglob(".*")] if job.out.exists() else []
    assert not leftovers, leftovers
    folders = run_folders(job) if job.out.exists() else []
    for f in folders:
        assert_whole(f, job.kind)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if sig is not None and not job.out.exists() and not any(
            ln.startswith("gfs-opt") for ln in lines):
        # stopped by the signal's default action before gfs-opt installed its handlers (the
        # interpreter starting up: killed, or "Fatal Python error: init_import_site"): nothing
        # was written and nothing said
        return code, stderr
    assert "Traceback" not in stderr, stderr
    if code == 0:
        _check_complete(job, folders)
        return code, stderr
    # 128 + the signal; or ended by SIGINT itself: CPython does that at exit when a
    # KeyboardInterrupt went through code it runs as a string (some extension modules' import),
    # even though gfs-opt caught it and said what it kept (a shell shows it as 130 all the same)
    assert sig is not None and code in (128 + sig, -sig, -signal.SIGINT), (code, sig, stderr)
    if code == -signal.SIGINT and not (lines and lines[-1].startswith("gfs-opt: ")):
        # a SIGINT that came as the command was ending, its work done: CPython ends the process
        # by the signal and nothing is said, so what is on disk must be the whole result
        _check_complete(job, folders)
        return code, stderr
    assert lines and lines[-1].startswith("gfs-opt: "), stderr
    _check_message(job, lines[-1], folders)
    return code, stderr


def _check_complete(job: Job, folders: list[Path]) -> None:
    n = len(POLICIES.split(","))
    assert len(folders) == n, folders
    table = job.out / ("compare.csv" if job.kind == "compare" else "results.csv")
    assert len(pd.read_csv(table)) == n


def _check_message(job: Job, line: str, folders: list[Path]) -> None:
    if job.kind == "compare":
        if "no run had finished" in line or line in ("gfs-opt: compare interrupted",
                                                     "gfs-opt: interrupted"):
            assert not folders, (line, folders)
            assert not (job.out / "compare.csv").exists()
            return
        m = re.search(r"; (\d+) finished run\(s\) kept, each folder whole: (.*); listed in", line)
        assert m, line
        assert int(m.group(1)) == len(folders), (line, folders)
        named = [Path(p) for p in m.group(2).split(" and ")[0].split(", ")]
        assert all(p in folders for p in named), (named, folders)
        listed = pd.read_csv(job.out / "compare.csv")
        assert sorted(listed["policy"]) == sorted(f.name for f in folders), (listed, folders)
        return
    if line in ("gfs-opt: sweep interrupted", "gfs-opt: interrupted"):   # before it started
        assert not folders, (line, folders)
        return
    m = re.search(r"sweep interrupted: (\d+) of (\d+) cells finished", line)
    assert m, line
    assert int(m.group(1)) == len(folders), (line, folders)
    results = pd.read_csv(job.out / "results.csv")
    assert (results["status"] == "ok").sum() == len(folders), (results, folders)
