"""SIGINT and SIGTERM stop every command the same way: as a `KeyboardInterrupt` in the main
process, which stops its workers (`gfs_opt.experiments.sweep.engines.terminate_pool`, Ray's
``shutdown``), says what was kept, and exits 128 + the signal (130 for Ctrl-C, 143 for SIGTERM).

Worker processes ignore both signals (`worker_signals`): a signal sent to the whole process group
(Ctrl-C in a terminal, a batch system's SIGTERM) is then handled by the parent alone, which kills
its workers itself, so a worker never dies half-way through in a way the parent must guess at.

`held()` marks a section that must not be cut (renaming a finished run folder into place and
recording it): a signal arriving inside it is raised when the section ends. Once a command is
stopping, further signals are not raised again, so its clean-up runs to its end; a third one
exits at once.
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _State:
    def __init__(self) -> None:
        self.signum: int | None = None      # the first signal received
        self.count = 0
        self.held = 0
        self.pending = False
        self.stopping = False               # a signal came: the command is stopping
        self.delivered = False              # its KeyboardInterrupt was raised (once)
        self.retry = False                  # the next call of `_handler` is `_retry_soon`'s
        self.early = False                  # installed at start-up, held until the command runs
        self.command = False                # installed by the command itself (not a test)
        self.previous: dict[int, Any] = {}


_state = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    retry, _state.retry = _state.retry, False
    if not retry:
        _state.count += 1
        if _state.signum is None:
            _state.signum = signum
        if _state.count >= 3:            # asked three times: stop now, whatever is half-done
            os._exit(128 + signum)
        if _state.stopping:              # already stopping: let the clean-up finish
            return
        _state.stopping = True
    if _state.held:
        _state.pending = True
        return
    if _importing(frame):
        # raised during an import the interrupt can be swallowed (a module lock's weakref
        # callback, an extension module calling back into Python, print it and run on, and the
        # command would finish as if never interrupted): deliver it once the import is done
        _retry_soon()
        return
    _state.delivered = True
    raise KeyboardInterrupt


def _importing(frame: FrameType | None) -> bool:
    """Whether the main thread is inside an import (a frame of the import machinery below)."""
    for _ in range(500):
        if frame is None:
            return False
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _retry_soon() -> None:
    def fire() -> None:
        _state.retry = True
        _thread.interrupt_main(signal.SIGINT)   # runs `_handler` in the main thread

    timer = threading.Timer(0.02, fire)
    timer.daemon = True
    timer.start()


def install(early: bool = False) -> None:
    """Route SIGINT and SIGTERM to `KeyboardInterrupt` (main thread only; a no-op elsewhere).

    ``early``: installed as the command starts, before its modules are imported, and held until
    `release_early` (a signal in between is raised there, inside the command's error handling,
    not as a traceback out of an import). A later `install` keeps what the early one received.
    """
    global _state
    if threading.current_thread() is not threading.main_thread():
        return
    if _state.previous and _state.early and not early:
        return
    previous = _state.previous if _state.previous else {}
    _state = _State()
    _state.early = early
    _state.command = early
    _state.held = 1 if early else 0
    for sig in SIGNALS:
        old = signal.signal(sig, _handler)
        previous.setdefault(sig, old)
    _state.previous = previous


def release_early() -> None:
    """End the hold of an early `install`: a signal that came meanwhile is raised now."""
    if _state.early:
        _state.early = False
        _release()


def interrupted_by(signum: int) -> KeyboardInterrupt:
    """The interrupt for a signal another handler caught first (e.g. ``ray.init``'s): counted
    as if ours had, so the exit status and later signals are handled the same way."""
    _state.count += 1
    if _state.signum is None:
        _state.signum = signum
    _state.stopping = _state.delivered = True
    return KeyboardInterrupt()


def reclaim() -> None:
    """Take SIGINT and SIGTERM back after a library set its own handlers (``ray.init`` makes
    SIGTERM a bare ``sys.exit(15)``, which would skip saying what was kept)."""
    if threading.current_thread() is not threading.main_thread() or not _state.previous:
        return
    for sig in SIGNALS:
        signal.signal(sig, _handler)


def uninstall() -> None:
    """Restore the handlers `install` replaced. The command itself (installed early) ignores
    both signals from here to the end of the process: once it has returned there is nothing
    left to stop, and a signal during the interpreter's exit (a local Ray shutting down) must
    not end it by the default action, as if it had been cut short. Ignored, not handled: as it
    finalizes CPython puts every signal with a Python handler back to the default action, but
    leaves an ignored one ignored."""
    if threading.current_thread() is not threading.main_thread():
        return
    if _state.command:
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        return
    for sig, old in _state.previous.items():
        signal.signal(sig, old if old is not None else signal.SIG_DFL)
    _state.previous = {}
    _state.early = False


def exit_code() -> int:
    """128 + the signal that stopped the command (130 for Ctrl-C or an in-process interrupt)."""
    return 128 + (_state.signum or signal.SIGINT)


def signal_name() -> str:
    return signal.Signals(_state.signum or signal.SIGINT).name


@contextmanager
def held() -> Iterator[None]:
    """A section no signal cuts: one arriving inside is raised as it ends."""
    _state.held += 1
    try:
        yield
    finally:
        _release()


def _release() -> None:
    _state.held -= 1
    if not _state.held and _state.pending:
        _state.pending = False
        if not _state.delivered:
            _state.delivered = True
            raise KeyboardInterrupt


def worker_signals() -> None:
    """Pool-worker initializer: the parent alone decides what stops and when (see above)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
