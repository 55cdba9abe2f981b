"""File-writing conventions shared by every command."""

from __future__ import annotations

import io
import math
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gfs_opt.errors import GfsError
from gfs_opt.interrupts import held

if TYPE_CHECKING:
    import pandas as pd


@lru_cache(maxsize=1)
def file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give (0644 under the usual umask 022).

    Atomic writes go through `tempfile.mkstemp`, which creates files 0600; results meant to be
    shared would then be private, and differ from files written directly.
    """
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def json_safe(obj: object) -> object:
    """``obj`` with NaN/±inf as None and numpy scalars as Python numbers: strict JSON (`null`).

    Python's json writes NaN as a bare ``NaN``, which is not JSON and which most readers reject.
    """
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, str | bytes):
        try:
            obj = obj.item()
        except (TypeError, ValueError):
            return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    return str(obj)


def check_out_dir(path: Path | None, flag: str = "--out") -> None:
    """Fail before any work if ``path`` cannot be a folder we write into (creates it)."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise GfsError(f"{flag} {path}: exists and is not a folder")
    _writable_folder(path, path, flag, "the folder")


def check_out_file(path: Path | None, flag: str = "--out") -> None:
    """Fail before any work if ``path`` cannot be written as a file (creates its folder)."""
    if path is None:
        return
    if path.is_dir():
        raise GfsError(f"{flag} {path}: is a folder (expected a file name)")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise GfsError(f"{flag} {path}: {parent} is not a folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise GfsError(f"{flag} {path}: file is not writable")
    _writable_folder(parent, path, flag, str(parent))


def _writable_folder(folder: Path, named: Path, flag: str, what: str) -> None:
    """Create ``folder`` and write and remove a scratch file in it: permission bits alone do not
    tell (root, read-only mounts)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GfsError(f"{flag} {named}: cannot create {what} ({exc.strerror or exc})") from None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gfs-opt-probe-")
    except OSError as exc:
        raise GfsError(f"{flag} {named}: not writable ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(tmp)


# ---- checked writes ---------------------------------------------------------------------------
# Every command writes through these: a full device, a closed pipe or a read-only folder is a
# one-line `OutputError` (exit 2) naming what could not be written, never a traceback.
class OutputError(GfsError):
    """A write failed (full device, read-only folder, closed pipe …)."""


def _reason(exc: OSError) -> str:
    if isinstance(exc, BrokenPipeError):
        return "the reader closed the pipe"
    return exc.strerror or type(exc).__name__


def output_error(target: object, exc: OSError) -> OutputError:
    """One line: what could not be written and why (``cannot write X: No space left on device``)."""
    return OutputError(f"cannot write {target}: {_reason(exc)}")


@contextmanager
def writing(target: object) -> Iterator[None]:
    """Turn an `OSError` raised while writing ``target`` into an `OutputError` naming it."""
    try:
        yield
    except OutputError:
        raise
    except OSError as exc:
        raise output_error(target, exc) from None


def atomic_write(path: Path, write: Callable[[str], None], *, label: object = None) -> Path:
    """Write ``path`` via ``write(tmp)`` on a temporary file beside it, then rename: the file
    appears whole or not at all. A path that exists and is not a regular file (a device such
    as /dev/full, a named pipe) is written in place: renaming over it would replace it.
    Any failure is an `OutputError` naming ``label`` (default: the path)."""
    path = Path(path)
    label = path if label is None else label
    with writing(label):
        if path.exists() and not path.is_file():
            write(str(path))
            return path
        tmp: str | None = None
        try:
            # held: a signal between the file's creation and ``tmp`` naming it would leave it
            # behind; raised as the hold ends, it meets the clean-up below
            with held():
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                           suffix=".tmp")
                os.close(fd)
            os.chmod(tmp, file_mode())   # not mkstemp's private 0600
            write(tmp)
            os.replace(tmp, path)
        except BaseException:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise
    return path


def write_text(path: Path, text: str, *, label: object = None) -> Path:
    """`atomic_write` of a text (UTF-8, ``\\n`` line ends)."""
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)

    return atomic_write(path, write, label=label)


def write_csv(path: Path, df: pd.DataFrame, *, index: bool = False, label: object = None) -> Path:
    """`atomic_write` of a table as CSV (compressed when the name ends in .gz)."""
    compression = "gzip" if str(path).endswith(".gz") else None
    return atomic_write(path, lambda tmp: df.to_csv(tmp, index=index, compression=compression),
                        label=label)


#: prefix of a folder being written; `write_folder` renames it into place when complete
TMP_FOLDER = ".tmp-"


def write_folder(final: Path, fill: Callable[[Path], None],
                 then: Callable[[], None] | None = None) -> Path:
    """Write a folder whole or not at all: ``fill(tmp)`` writes into a temporary sibling
    (``.tmp-NAME-XXXX``), which is renamed to ``final`` when complete (an earlier ``final`` is
    replaced). Interrupted, the temporary folder is removed; `remove_partial_folders` clears
    what a killed process left. The rename and ``then()`` (the caller's record of the folder) run
    with interrupts held back (`gfs_opt.interrupts.held`): a signal cannot fall between them, so
    the caller's records and the folders on disk agree. Writing the files is not held (a signal
    there removes the temporary folder)."""
    final = Path(final)
    with writing(final):
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp: Path | None = None
        try:
            # held: a signal between the folder's creation and ``tmp`` naming it would leave it
            # behind (seen once in 60 SIGTERMs to a busy compare); raised as the hold ends, it
            # meets the clean-up below
            with held():
                tmp = Path(tempfile.mkdtemp(dir=final.parent,
                                            prefix=f"{TMP_FOLDER}{final.name}-"))
            fill(tmp)
            tmp.chmod(folder_mode())   # not mkdtemp's private 0700
            with held():
                if final.exists():
                    old = final.parent / f"{TMP_FOLDER}old-{final.name}-{uuid.uuid4().hex[:8]}"
                    os.replace(final, old)
                    os.replace(tmp, final)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.replace(tmp, final)
                if then is not None:
                    then()
        except BaseException:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final


@lru_cache(maxsize=1)
def folder_mode() -> int:
    """The mode a plain ``mkdir`` would give (0755 under umask 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


def remove_partial_folders(parent: Path) -> None:
    """Temporary folders a killed process left in ``parent`` (never a finished one)."""
    if parent.is_dir():
        for p in parent.glob(f"{TMP_FOLDER}*"):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)


class CheckedStream(io.TextIOBase):
    """Standard output whose failed writes are an `OutputError` ("cannot write to standard
    output: No space left on device"), so `gfs-opt … > /dev/full` or a closed pipe ends with one
    line and exit 2 like any other bad output."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        with writing("to standard output"):
            return self._stream.write(text)

    def flush(self) -> None:
        with writing("to standard output"):
            self._stream.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)
