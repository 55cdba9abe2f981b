"""Signals at a command's edges: the worker pools' fork server starts with SIGINT and SIGTERM
blocked (`engines.worker_context`), so a signal to the process group while it still imports its
preloaded modules prints no `KeyboardInterrupt` traceback from it, and the command keeps getting
its own; once the command has returned it ignores both (`interrupts.uninstall`)."""

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


ENDING = """
import os, signal, sys, time
sys.argv[0] = "gfs-opt"
import gfs_opt.cli  # noqa: F401  (installs the handlers, as the command does)
from gfs_opt import interrupts
interrupts.uninstall()
print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN, signal.getsignal(signal.SIGTERM) == signal.SIG_IGN)
sys.stdout.flush()
os.kill(os.getpid(), signal.SIGTERM)         # as the interpreter is about to finalize
time.sleep(0.2)
"""


def test_a_command_that_has_returned_ignores_both_signals_to_its_exit() -> None:
    """Once the command has returned, SIGINT and SIGTERM are ignored, not handled: CPython puts a
    handled signal back to the default action as it finalizes, and a SIGTERM then (a batch
    system's, a local Ray's shutdown) would end a finished command as if it had been cut short."""
    done = subprocess.run([sys.executable, "-c", ENDING], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["True", "True"], done.stderr
    assert done.returncode == 0, (done.returncode, done.stderr)


HALF_A_RESULT = """
import struct, time
from concurrent.futures import ProcessPoolExecutor
from gfs_opt.experiments.sweep.engines import ignore_sigint, terminate_pool, worker_context

pool = ProcessPoolExecutor(max_workers=1, mp_context=worker_context(), initializer=ignore_sigint)
pool.submit(time.sleep, 60)
time.sleep(2)   # the worker runs the task
# what a worker killed half-way through sending its result leaves in the result pipe: a header
# announcing 1,000 bytes and 10 of them; the pool's manager thread starts reading the rest
pool._result_queue._writer._send(struct.pack("!i", 1000) + bytes(10))
time.sleep(0.5)
terminate_pool(pool)
print("terminated", flush=True)
"""


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(),
                    reason="needs the forkserver start method")
def test_a_pool_terminated_with_half_a_result_in_its_pipe_lets_the_command_exit() -> None:
    """A sweep that had said it was interrupted hung at exit (once in a few hundred SIGTERMs):
    Python's exit hook joined the pool's manager thread, blocked for ever on half a message a
    killed worker had sent, since this process holds the pipe's write end too."""
    try:
        done = subprocess.run([sys.executable, "-c", HALF_A_RESULT], capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the command did not exit within 60 s of terminating its pool")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "terminated"
    assert done.stderr == ""      # the manager thread ended quietly, broken pool and all
