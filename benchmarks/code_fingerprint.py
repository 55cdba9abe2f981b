"""A fingerprint of the imported package's source, for benchmark caches keyed by cell: a cell
computed by other code is never read back as if it were today's (``PYTHONPATH`` may point at
another checkout, and the fingerprint follows it)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def code_fingerprint() -> str:
    """SHA-1 (12 hex digits) of every ``.py`` file of the imported ``gfs_opt``, in path order."""
    import gfs_opt

    h = hashlib.sha1()
    for f in sorted(Path(gfs_opt.__file__).resolve().parent.rglob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:12]
