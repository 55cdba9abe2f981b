"""The worker pools' fork server starts with SIGINT and SIGTERM blocked (`engines.worker_context`):
a signal to the process group while it is still importing its preloaded modules must not print a
`KeyboardInterrupt` traceback from it, and the command itself must get its signals as before."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
from multiprocessing import forkserver
from gfs_opt.experiments.sweep.engines import worker_context

def blocked(pid):
    line = next(ln for ln in open(f"/proc/{pid}/status") if ln.startswith("SigBlk"))
    return int(line.split()[1], 16)

worker_context()
print(blocked(forkserver._forkserver._forkserver_pid), blocked("self"))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists()
                    or "forkserver" not in multiprocessing.get_all_start_methods(),
                    reason="needs Linux's /proc and the forkserver start method")
def test_fork_server_starts_with_both_signals_blocked_and_the_command_keeps_them() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    server, command = (int(x) for x in out)
    for sig in (signal.SIGINT, signal.SIGTERM):
        bit = 1 << (sig - 1)
        assert server & bit, f"the fork server does not block {sig.name}"
        assert not command & bit, f"the command itself still blocks {sig.name}"
