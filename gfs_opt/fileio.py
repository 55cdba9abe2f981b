"""File-writing conventions shared by every command."""

from __future__ import annotations

import math
import os
from functools import lru_cache


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
