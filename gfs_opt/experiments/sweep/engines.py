"""Where sweep cells run: worker processes on this machine, or Ray tasks on a cluster.

An engine takes the cells to run and calls ``on_done(outcome)`` in the calling thread as each
one finishes (the caller writes results, so workers never touch the output folder and a killed
worker cannot leave a half-written file). A failing cell is an outcome, never an exception. On
Ctrl-C an engine stops its workers and re-raises `KeyboardInterrupt`.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from gfs_opt.errors import GfsError
from gfs_opt.experiments.sweep.cell import CellOutcome, execute_cell, failed
from gfs_opt.experiments.sweep.spec import Cell
from gfs_opt.interrupts import SIGNALS, held, interrupted_by, reclaim, worker_signals

RAY_HINT = "--engine ray needs Ray: pip install 'gfs-opt[ray]'"

OnDone = Callable[[CellOutcome], None]


@dataclass(frozen=True)
class Task:
    cell: Cell
    memory_mb: int


class Engine(Protocol):
    name: str

    def run(self, tasks: Sequence[Task], on_done: OnDone) -> None: ...


def ignore_sigint() -> None:
    """Pool-worker initializer: Ctrl-C or a SIGTERM to the whole process group reaches the
    parent alone, which stops its workers itself (`gfs_opt.interrupts`)."""
    worker_signals()


#: imported once by the fork server, so that each worker starts warm
PRELOAD = ["gfs_opt.experiments.sweep.server_signals", "gfs_opt.experiments.sweep.cell",
           "gfs_opt.experiments.runner", "gfs_opt.forecast.provider", "scipy.stats"]


def worker_context() -> multiprocessing.context.BaseContext:
    """``forkserver``: workers fork from a clean server process that never ran the parent's
    threads (unlike ``fork``) yet has the simulation stack imported (unlike ``spawn``, where
    every worker pays ~2 s of imports, again after each pool restart)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    _start_fork_server()
    return ctx


def _start_fork_server() -> None:
    """Start the fork server with SIGINT and SIGTERM blocked, as CPython starts its resource
    tracker: the server inherits the mask across exec, so a signal to the process group while
    it is still importing `PRELOAD` waits (and is then discarded by `server_signals`) instead of
    printing a `KeyboardInterrupt` traceback from the server. This process gets its own signals
    as soon as the mask is restored."""
    from multiprocessing import forkserver, resource_tracker

    # the fork server starts the resource tracker first, which unblocks both signals as it
    # returns: start it before blocking them
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class LocalEngine:
    """A process pool on this machine (workers share no state with the parent).

    A worker that dies (killed, out of memory) breaks the whole pool; the cells it was running
    are then re-run one at a time in a fresh pool, so only the cell that kills its worker again
    is recorded as failed and the others finish normally.
    """

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)

    def _pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=worker_context(),
                                   initializer=ignore_sigint)

    def run(self, tasks: Sequence[Task], on_done: OnDone) -> None:
        queue: deque[Task] = deque(tasks)
        suspects: deque[Task] = deque()          # were running when a worker died
        inflight: dict[Future[CellOutcome], tuple[Task, bool]] = {}
        pool: ProcessPoolExecutor | None = None
        try:
            while queue or suspects or inflight:
                if pool is None:
                    pool = self._pool()
                broken = False
                try:
                    if suspects and not inflight:     # isolate: one suspect alone in the pool
                        task = suspects.popleft()
                        inflight[_submit(pool, task)] = (task, True)
                    elif not suspects:
                        while queue and len(inflight) < self.workers:
                            inflight[_submit(pool, queue[0])] = (queue[0], False)
                            queue.popleft()
                except BrokenProcessPool:
                    broken = True
                if not broken:
                    done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                    for fut in done:
                        task, alone = inflight.pop(fut)
                        try:
                            outcome = fut.result()
                        except BrokenProcessPool:
                            broken = True
                            if alone:
                                on_done(failed(task.cell.id, "the worker process died while "
                                                             "running this cell (killed or out "
                                                             "of memory?)"))
                            else:
                                suspects.append(task)
                            continue
                        on_done(outcome)
                if broken:
                    # the other cells of a dead pool fail the same way: re-run them one by one
                    for fut, (task, _alone) in list(inflight.items()):
                        wait([fut])
                        if fut.exception() is None:
                            on_done(fut.result())
                        else:
                            suspects.append(task)
                    inflight.clear()
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = None
        except BaseException:
            if pool is not None:
                terminate_pool(pool)
                pool = None
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)


def _submit(pool: ProcessPoolExecutor, task: Task) -> Future[CellOutcome]:
    # held: a submit may start worker processes, and a signal between the fork server's fork
    # and the pool's record of the new worker would leave that worker unknown to
    # `terminate_pool`, to start after we exit (and fail loudly on our vanished semaphores)
    with held():
        return pool.submit(execute_cell, task.cell.id, task.cell.spec, task.cell.imports)


def terminate_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now. `ProcessPoolExecutor` has no public way to kill running workers before
    Python 3.14, so kill its processes directly, then let it clean up. SIGKILL: workers ignore
    SIGTERM (`ignore_sigint`) and hold nothing worth saving (the parent writes every result)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    # `shutdown` forgets both
    manager = getattr(pool, "_executor_manager_thread", None)
    results = getattr(pool, "_result_queue", None)
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(timeout=5)
    pool.shutdown(wait=False, cancel_futures=True)
    # Let the pool's manager thread see its dead workers and close its wake-up pipe now: left
    # running, it races Python 3.11's exit hook, which can write to that pipe as it closes
    # ("Exception ignored … OSError: Bad file descriptor" on stderr after a Ctrl-C).
    if manager is not None:
        manager.join(timeout=5)
        if manager.is_alive() and results is not None:
            _finish_half_sent_result(manager, results)


def _finish_half_sent_result(manager: threading.Thread, results: Any) -> None:
    """Unblock a pool's manager thread stuck on half a result: a worker killed while it sent
    one leaves a partial message in the result pipe, and the thread waits for the rest for
    ever (this process holds the pipe's write end too), and Python's exit hook with it, so a
    command that has said it was interrupted never exits. Filler bytes complete the message;
    the thread fails to unpickle it, counts the pool as broken and ends."""
    writer = getattr(results, "_writer", None)
    if writer is None or writer.closed:
        return
    fd = writer.fileno()
    os.set_blocking(fd, False)   # a full pipe must not block us in turn
    filler = bytes(4096)
    deadline = time.monotonic() + 5
    while manager.is_alive() and time.monotonic() < deadline:
        with contextlib.suppress(BlockingIOError):
            os.write(fd, filler)
        manager.join(timeout=0.05)


class RayEngine:
    """Ray tasks (one CPU each, a memory hint per cell) on an existing cluster or a local one."""

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None) -> None:
        # Ray's native failure-signal handler turns a SIGTERM to the driver into a stack dump,
        # and its removal at ``ray.shutdown`` leaves SIGTERM at the default action (a SIGTERM
        # then kills the driver before it has said what was kept). Ray reads this once, as it
        # is imported.
        os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        try:
            import ray  # noqa: F401
        except ImportError:
            raise GfsError(RAY_HINT) from None
        self.address = address
        self.num_cpus = num_cpus or 2

    def _connect(self) -> bool:
        """Connect (or start a local Ray); True if this engine started it and must stop it."""
        import ray

        if ray.is_initialized():
            return False
        kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR,
                              "configure_logging": True}
        if self.address:
            _check_reachable(self.address)
        try:
            # held: a signal during ray.init waits for it to finish, then stops what it started
            # (cut half-way, Ray leaves agent processes that no shutdown knows of)
            with _ray_keeps_our_sigterm(), held():
                if self.address:
                    ray.init(address=self.address, **kw)
                else:
                    ray.init(num_cpus=self.num_cpus, include_dashboard=False, **kw)
        except SystemExit as exc:
            # a SIGTERM while ray.init runs meets Ray's own handler (a bare exit): stop what it
            # started and go on as any interrupt
            with contextlib.suppress(Exception):
                ray.shutdown()
            if exc.code == signal.SIGTERM:
                raise interrupted_by(signal.SIGTERM) from None
            raise
        except KeyboardInterrupt:
            with contextlib.suppress(Exception):
                _stop_local_ray()
            raise
        except Exception as exc:  # connection refused, bad address, version mismatch …
            where = f"at {self.address}" if self.address else "locally"
            raise GfsError(f"cannot start Ray {where}: {' '.join(str(exc).split())[:300]}") from None
        finally:
            reclaim()     # ray.init replaces the SIGTERM handler with a bare exit
        return True

    def run(self, tasks: Sequence[Task], on_done: OnDone) -> None:
        import ray

        started = self._connect()
        refs: dict[Any, Task] = {}
        try:
            remote = ray.remote(execute_cell)
            cap = _largest_node_memory_mb()
            for task in tasks:
                # a hint above every node's memory would leave the task unschedulable forever
                mem = min(task.memory_mb, cap) if cap else task.memory_mb
                ref = remote.options(num_cpus=1, memory=int(mem) * 2**20, max_retries=1,
                                     retry_exceptions=False,
                                     name=f"gfs-cell-{task.cell.id}").remote(  # type: ignore[call-arg]  # ray's stubs know one argument
                    task.cell.id, task.cell.spec, task.cell.imports)
                refs[ref] = task
            while refs:
                # Ray's core worker installs a native SIGTERM handler (a stack dump, then an
                # abort) at moments of its own: take SIGTERM back every second
                reclaim()
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=1.0)
                for ref in ready:
                    task = refs.pop(ref)
                    try:
                        outcome = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        outcome = failed(task.cell.id, _ray_error(exc), type(exc).__name__)
                    on_done(outcome)
        except BaseException:
            for ref in refs:
                # already finished or the cluster is gone: nothing left to stop
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise
        finally:
            if started:
                _stop_local_ray()


def _stop_local_ray() -> None:
    """``ray.shutdown``, then `_kill_stray_ray_processes` (agents whose raylet died first, e.g.
    to a SIGTERM to the whole group, outlive it), as one held section: a signal cutting the
    shutdown half-way would skip the scan and leave Ray's agents running (seen once in four
    SIGTERMs as the last cell ended)."""
    import ray

    with held():
        try:
            ray.shutdown()
        finally:
            _kill_stray_ray_processes()


def _kill_stray_ray_processes() -> None:
    """Ray processes left in our process group after ``ray.shutdown``: a SIGTERM to the whole
    group kills the raylet while it starts (or runs) its agents, which then ignore SIGTERM and
    are known to no ``ray.shutdown``. Only when this process leads its group (a command started from
    a shell), so that nothing but our own children can match; Linux (/proc) only."""
    me = os.getpid()
    if os.getpgrp() != me:
        return
    # a process the dying raylet forks after a scan has listed /proc is missed by that scan:
    # scan again until one finds nothing (a few tenths of a second at most)
    for _ in range(20):
        if not _kill_ray_in_group(me):
            return
        time.sleep(0.05)


def _kill_ray_in_group(me: int) -> bool:
    """One scan of `_kill_stray_ray_processes`; whether it found (and killed) any process."""
    found = False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1:text.rfind(")")]
        fields = text.rsplit(")", 1)[1].split()
        pid = int(stat.parent.name)
        # a zombie is dead already: killing it "succeeds" at every scan and would keep the
        # repeat going to its bound
        if pid == me or int(fields[2]) != me or fields[0] == "Z":
            continue
        if name.startswith("ray::") or name in ("raylet", "gcs_server") or _runs_ray(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                found = True
    return found


def _runs_ray(pid: int) -> bool:
    """Whether ``pid`` runs a script of Ray's package (its agents are plain ``python``)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"/site-packages/ray/" in a or b"/ray/_private/" in a for a in argv)


@contextlib.contextmanager
def _ray_keeps_our_sigterm() -> Iterator[None]:
    """``ray.init`` replaces the driver's SIGTERM handler with a bare ``sys.exit(15)``; keep
    ours (`gfs_opt.interrupts`) so that a SIGTERM is held and handled like Ctrl-C."""
    import ray

    utils = getattr(getattr(ray, "_private", None), "utils", None)
    original = getattr(utils, "set_sigterm_handler", None)
    if original is None:
        yield
        return
    utils.set_sigterm_handler = lambda handler: None   # type: ignore[union-attr]
    try:
        yield
    finally:
        utils.set_sigterm_handler = original   # type: ignore[union-attr]


def _check_reachable(address: str) -> None:
    """Fail fast on a wrong host:port: Ray itself keeps retrying for minutes."""
    if address in ("auto", "local"):
        return
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise GfsError(f"--address {address!r}: expected host:port or ray://host:port") from None
    if not host or port is None:
        raise GfsError(f"--address {address!r}: expected host:port or ray://host:port")
    try:
        with socket.create_connection((host, port), timeout=10):
            pass
    except OSError as exc:
        raise GfsError(f"cannot reach Ray at {address} ({exc.strerror or exc})") from None


def _largest_node_memory_mb() -> int | None:
    import ray

    try:
        mems = [n.get("Resources", {}).get("memory", 0) for n in ray.nodes() if n.get("Alive")]
    except Exception:
        return None
    return int(max(mems) / 2**20) if mems and max(mems) > 0 else None


def _ray_error(exc: BaseException) -> str:
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    return f"Ray task failed ({type(exc).__name__}): {first[:300]}"


def make_engine(name: str, *, workers: int | None = None, address: str | None = None) -> Engine:
    if name == "local":
        if address:
            raise GfsError("--address is for --engine ray")
        return LocalEngine(workers)
    if name == "ray":
        return RayEngine(address, workers)
    raise GfsError(f"unknown engine {name!r}; use local or ray")
