"""Daemons started in their own session and stopped by the PID recorded at start — never by name.

A record holds the PID and the kernel's start time of that PID (``/proc/PID/stat`` field 22), so
a PID reused by an unrelated process after a crash is never signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gfs_opt.errors import GfsError

PIDS_FILE = "pids.json"


@dataclass(frozen=True)
class ProcRecord:
    name: str
    pid: int
    start_ticks: int
    argv: tuple[str, ...]


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a PID, or None when it does not exist."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # the command name may contain spaces or parentheses: split after its closing ')'
    rest = raw[raw.rindex(")") + 2:].split()
    return rest[0], int(rest[19])


def _threads_running(pid: int) -> bool:
    """Whether any thread of ``pid`` has not exited. A daemon whose main thread returned shows
    state Z for its leader while its other threads still shut down (slurmctld, slurmdbd and
    mariadbd do, for seconds): judging by the leader alone declared them stopped too early."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    for task in tasks:
        try:
            raw = (task / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if raw[raw.rindex(")") + 2:].split()[0] not in ("Z", "X"):
            return True
    return False


def alive(rec: ProcRecord) -> bool:
    st = _stat(rec.pid)
    if st is None or st[1] != rec.start_ticks:
        return False
    if st[0] in ("Z", "X"):
        if _threads_running(rec.pid):
            return True
        _reap(rec.pid)
        return False
    return True


def _reap(pid: int) -> None:
    child = _STARTED.pop(pid, None)
    if child is not None:            # ours: its handle collects the exit status
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


#: daemons started by this process, by PID: they outlive a `slurm up` on purpose, but while this
#: process lives it holds their handles (no "still running" warning when one is dropped) and
#: `stop` reaps them (no zombie left behind)
_STARTED: dict[int, subprocess.Popen[bytes]] = {}


def start(name: str, argv: list[str], log: Path, env: dict[str, str],
          cwd: Path | None = None) -> ProcRecord:
    """Start a daemon in the foreground of its own session, output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        try:
            p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=env, cwd=cwd, start_new_session=True)
        except FileNotFoundError:
            raise GfsError(f"cannot start {name}: {argv[0]} not found") from None
    _STARTED[p.pid] = p
    st = None
    for _ in range(50):   # /proc entry appears at once; the loop only guards odd kernels
        st = _stat(p.pid)
        if st is not None:
            break
        time.sleep(0.01)
    if st is None:
        raise GfsError(f"{name} exited at once; see {log}")
    return ProcRecord(name, p.pid, st[1], tuple(argv))


def stop(rec: ProcRecord, timeout_s: float = 10.0) -> str:
    """TERM, then KILL after ``timeout_s``; returns what happened."""
    return stop_all([rec], timeout_s)[0]


def stop_all(recs: list[ProcRecord], timeout_s: float = 10.0, kill_wait_s: float = 5.0) -> list[str]:
    """TERM every record at once, wait until each has exited (every thread), KILL the ones left
    after ``timeout_s`` and wait ``kill_wait_s`` more. Returns, per record, "not running",
    "stopped", "killed" or "still running" (only then did a process survive)."""
    out = ["not running" if not alive(r) else "" for r in recs]
    for r, o in zip(recs, out, strict=True):
        if not o:
            with contextlib.suppress(ProcessLookupError):
                os.kill(r.pid, signal.SIGTERM)
    for phase, wait_s, sig in (("stopped", timeout_s, signal.SIGKILL), ("killed", kill_wait_s, None)):
        deadline = time.monotonic() + wait_s
        while True:
            for i, r in enumerate(recs):
                if not out[i] and not alive(r):
                    out[i] = phase
            if all(out) or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if sig is not None:
            for i, r in enumerate(recs):
                if not out[i]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(r.pid, sig)
    return [o or "still running" for o in out]


def pid_record(pid: int, name: str = "job") -> ProcRecord | None:
    """A record for a PID seen now (None when it is already gone)."""
    st = _stat(pid)
    return None if st is None else ProcRecord(name, pid, st[1], ())


def load(folder: Path) -> list[ProcRecord]:
    path = folder / PIDS_FILE
    if not path.exists():
        return []
    try:
        rows = json.loads(path.read_text())
        return [ProcRecord(r["name"], int(r["pid"]), int(r["start_ticks"]), tuple(r["argv"]))
                for r in rows]
    except (ValueError, KeyError, TypeError) as exc:
        raise GfsError(f"{path}: unreadable PID record ({exc})") from None


def save(folder: Path, records: list[ProcRecord]) -> None:
    path = folder / PIDS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(r) for r in records], indent=1))
    os.replace(tmp, path)


def strays(marker: str, skip: set[int]) -> list[int]:
    """PIDs whose environment holds ``marker`` (e.g. ``SLURM_CONF=<our conf>``): job steps and
    payloads that our daemons spawned. Matching on our private config path, not on names."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if needle in env.split(b"\0"):
            st = _stat(int(entry.name))
            if st is not None and (st[0] not in ("Z", "X") or _threads_running(int(entry.name))):
                found.append(int(entry.name))
    return sorted(found)
