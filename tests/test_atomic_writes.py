"""A signal that arrives just as a temporary file or folder is made leaves nothing behind: the
interrupt is raised where the clean-up of `fileio.atomic_write` and `fileio.write_folder` sees it
(a SIGTERM to a busy `compare` once left a ``.tmp-<run>-XXXX`` folder beside the kept runs)."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gfs_opt import fileio, interrupts

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signal handlers are set in the main thread only")


@pytest.fixture
def handlers() -> Iterator[None]:
    interrupts.install()
    try:
        yield
    finally:
        interrupts.uninstall()


def _then_sigterm(make: Callable[..., Any]) -> Callable[..., Any]:
    """``make``, with a SIGTERM to this process as soon as it has returned: the instant before
    the caller can name what it made."""
    def made(*args: Any, **kwargs: Any) -> Any:
        out = make(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return out
    return made


def test_a_signal_as_the_temporary_folder_is_made_leaves_no_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handlers: None) -> None:
    monkeypatch.setattr(tempfile, "mkdtemp", _then_sigterm(tempfile.mkdtemp))
    with pytest.raises(KeyboardInterrupt):
        fileio.write_folder(tmp_path / "run", lambda d: (d / "a.csv").write_text("x\n"))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_signal_as_the_temporary_file_is_made_leaves_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handlers: None) -> None:
    monkeypatch.setattr(tempfile, "mkstemp", _then_sigterm(tempfile.mkstemp))
    with pytest.raises(KeyboardInterrupt):
        fileio.write_text(tmp_path / "a.txt", "x\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_without_a_signal_both_write_whole(tmp_path: Path) -> None:
    fileio.write_folder(tmp_path / "run", lambda d: (d / "a.csv").write_text("x\n"))
    fileio.write_text(tmp_path / "a.txt", "y\n")
    assert (tmp_path / "run" / "a.csv").read_text() == "x\n"
    assert (tmp_path / "a.txt").read_text() == "y\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "run"]
