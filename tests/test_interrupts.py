"""Interrupting `compare` and `sweep`: run folders whole or absent, messages true, no process
left behind (`interrupts_harness` states the properties).

The default suite kills `compare` once, deterministically, with SIGTERM to its own process (not
its group) as its first run folder appears: the case where the parent alone must stop its pool.
(`test_sweep.test_ctrl_c_stops_workers_and_exits_130` does the same for `sweep` with SIGINT.)
The property test draws the command, the signal, its target (the process or its whole group)
and the instant, over the whole life of the command; it is slow (-m slow, its own CI step):

    python -m pytest -q -n 0 -m slow tests/test_interrupts.py

GFS_INTERRUPT_EXAMPLES sets how many instants it draws (default 200). A sweep on a local Ray is
killed the same way (slow too: Ray takes its time to start).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interrupts_harness import finish, group_members, run_folders, send, start

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


@pytest.mark.slow      # a real compare with a process pool: .ci/run's interruption step
def test_sigterm_to_compare_alone_stops_its_pool_and_keeps_whole_folders(tmp_path: Path) -> None:
    job = start("compare", tmp_path, workers=2)
    deadline = time.monotonic() + 120
    while not (job.out.exists() and run_folders(job)):
        assert job.proc.poll() is None and time.monotonic() < deadline, job.proc.communicate()
        time.sleep(0.02)
    job.proc.send_signal(signal.SIGTERM)          # the process only: its group is left alone
    code, stderr = finish(job, signal.SIGTERM)
    if code == 0:
        pytest.skip("compare finished before the signal arrived (machine too fast)")
    assert code == 143 and "kept, each folder whole" in stderr, stderr


SIGNALS = [signal.SIGINT, signal.SIGTERM]
EXAMPLES = int(os.environ.get("GFS_INTERRUPT_EXAMPLES", "200"))


@pytest.fixture(scope="module")
def durations(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """Wall time of one whole run of each command here: instants are drawn up to 1.2 × it."""
    out = {}
    for kind in ("compare", "sweep"):
        job = start(kind, tmp_path_factory.mktemp(kind))
        t0 = time.monotonic()
        code, stderr = finish(job, None)
        assert code == 0, stderr
        out[kind] = time.monotonic() - t0
    return out


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["compare", "sweep"]), sig=st.sampled_from(SIGNALS),
       group=st.booleans(), at=st.floats(0.0, 1.2), workers=st.sampled_from([1, 2]))
def test_interrupt_at_any_instant(durations: dict[str, float], tmp_path_factory:
                                  pytest.TempPathFactory, kind: str, sig: int, group: bool,
                                  at: float, workers: int) -> None:
    root = tmp_path_factory.mktemp("kill")
    job = start(kind, root, workers=workers)
    time.sleep(at * durations[kind])
    send(job, sig, group)
    finish(job, sig)


@pytest.mark.slow
@pytest.mark.parametrize("group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("wait_s", [0.0, 5.0])
def test_sigterm_stops_a_local_ray(tmp_path: Path, group: bool, wait_s: float) -> None:
    """A sweep on a local Ray, SIGTERM once Ray's processes are up (during ``ray.init``, which
    sets its own SIGTERM handler, or later): Ray stops with the command, nothing is left."""
    pytest.importorskip("ray")
    job = start("sweep", tmp_path, workers=2, engine="ray")
    deadline = time.monotonic() + 180
    while len(group_members(job.proc.pid)) < 6:      # the driver, GCS, raylet, agents …
        assert job.proc.poll() is None and time.monotonic() < deadline, job.proc.communicate()
        time.sleep(0.2)
    time.sleep(wait_s)
    send(job, signal.SIGTERM, group)
    finish(job, signal.SIGTERM, timeout=180)
