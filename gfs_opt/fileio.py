"""File-writing conventions shared by every command."""

from __future__ import annotations

import math
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from gfs_opt.errors import GfsError


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
