"""Check a user-supplied ``job_info_df.csv`` against the published fingerprint (GFS-SPEC §7)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from gfs_opt.errors import InputError

JOB_FILE_SHA256 = "113ccee4c28f5c3bbaaca974cd164b9280b7d4c39e53b745443b28eea05e03dd"


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in chunks (the job file is ~22 MB)."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file")
    if not path.is_file():
        raise InputError(path, "not a regular file")
    try:
        with path.open("rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None


def verify_job_file(path: Path, expected: str | None = None) -> tuple[bool, str]:
    """(matches, actual digest) for ``path`` against the upstream job file's sha256."""
    digest = file_sha256(path)
    return digest == (expected or JOB_FILE_SHA256).lower(), digest
