"""Download public traces that are too large to ship: resumable, verified, atomic.

A download goes to ``DEST/.NAME.part``; each chunk is appended and hashed as it arrives. When the
server has sent everything, the sha256 is compared with the pinned one: a match is renamed to
``DEST/NAME`` in one step (so ``NAME`` is either absent or whole and verified), a mismatch
deletes the part file (nothing is left behind). An interrupted download (network error, Ctrl-C)
keeps its part file, and the same command resumes it with an HTTP Range request.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from gfs_opt.errors import GfsError
from gfs_opt.fileio import check_out_dir, file_mode
from gfs_opt.paths import alibaba_dir

CHUNK = 1 << 16
TIMEOUT_S = 30.0      # per socket operation: a stalled server fails instead of hanging


@dataclass(frozen=True)
class Dataset:
    """A fetchable file and the shipped companions that make ``DEST`` a usable trace folder."""

    name: str
    url: str
    sha256: str
    size: int | None
    file_name: str
    companions: tuple[Path, ...] = ()
    about: str = ""


CLUSTERDATA_COMMIT = "0d0f3f1efdbf1add6a7bcc63676eafbd1eb11f71"
DATASETS: dict[str, Dataset] = {
    "alibaba-v2026": Dataset(
        name="alibaba-v2026",
        url=("https://raw.githubusercontent.com/alibaba/clusterdata/"
             f"{CLUSTERDATA_COMMIT}/cluster-trace-v2026-spot-gpu/job_info_df.csv"),
        sha256="113ccee4c28f5c3bbaaca974cd164b9280b7d4c39e53b745443b28eea05e03dd",
        size=23_055_929,
        file_name="job_info_df.csv",
        companions=(alibaba_dir() / "node_info_df.csv",),
        about="Alibaba cluster-trace-v2026-spot-gpu job file (466,867 jobs, ~22 MB; "
              "research or study use)"),
}


@dataclass
class FetchResult:
    path: Path
    downloaded: int          # bytes received in this call
    resumed_from: int        # bytes already on disk when this call started
    already_present: bool
    notes: list[str]


def _sha256_of(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _check_url(url: str) -> None:
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https"):
        raise GfsError(f"--url {url!r}: expected an http:// or https:// address")


def _check_hex(sha256: str) -> str:
    digest = sha256.strip().lower()
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise GfsError(f"--sha256 {sha256!r}: expected 64 hexadecimal digits")
    return digest


def _open(url: str, offset: int) -> http.client.HTTPResponse:
    request = urllib.request.Request(url, headers={"User-Agent": "gfs-opt"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT_S)  # scheme checked above
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:    # nothing after the bytes we hold: verify them
            raise _RangeDone from None
        raise GfsError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise GfsError(f"{url}: cannot connect ({reason})") from None


class _RangeDone(Exception):
    """The server has no bytes beyond what the part file already holds."""


def _copy_companions(ds: Dataset, dest: Path, notes: list[str]) -> None:
    for src in ds.companions:
        target = dest / src.name
        if target.exists():
            if _sha256_of(target) != _sha256_of(src):
                notes.append(f"kept the existing {target}, which differs from the shipped {src.name}")
            continue
        fd, tmp = tempfile.mkstemp(dir=dest, prefix=f".{src.name}.")
        os.fchmod(fd, file_mode())   # not mkstemp's private 0600
        os.close(fd)
        shutil.copyfile(src, tmp)
        os.replace(tmp, target)
        notes.append(f"copied the shipped {src.name} to {target}")


def fetch(name: str, dest: Path, *, url: str | None = None, sha256: str | None = None,
          progress: bool = True) -> FetchResult:
    """Download dataset ``name`` into ``dest`` (see the module docstring for the guarantees)."""
    if name not in DATASETS:
        raise GfsError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    ds = DATASETS[name]
    url = url or ds.url
    _check_url(url)
    expected = _check_hex(sha256 or ds.sha256)
    size = ds.size if url == ds.url and expected == ds.sha256 else None
    check_out_dir(dest, "--dest")
    final = dest / ds.file_name
    part = dest / f".{ds.file_name}.part"
    notes: list[str] = []
    if final.exists():
        found = _sha256_of(final)
        if found != expected:
            raise GfsError(f"{final}: exists with another sha256 (expected {expected}, found "
                           f"{found}); move it away to download again")
        _copy_companions(ds, dest, notes)
        return FetchResult(final, 0, 0, True, notes)

    offset = part.stat().st_size if part.exists() else 0
    digest = hashlib.sha256()
    if offset:
        with part.open("rb") as fh:
            while block := fh.read(CHUNK):
                digest.update(block)
    received = 0
    try:
        received, offset, digest = _download(url, part, offset, digest, size, progress)
    except KeyboardInterrupt:
        have = part.stat().st_size if part.exists() else 0
        raise KeyboardInterrupt(
            f"download of {ds.file_name} interrupted; {have:,} bytes kept in {part}: run the "
            f"same command again to resume") from None
    found = digest.hexdigest()
    if found != expected:
        part.unlink(missing_ok=True)
        raise GfsError(f"{url}: sha256 mismatch (expected {expected}, found {found}); the "
                       f"download was deleted")
    os.chmod(part, file_mode())
    os.replace(part, final)
    _copy_companions(ds, dest, notes)
    return FetchResult(final, received, offset, False, notes)


def _download(url: str, part: Path, offset: int, digest: hashlib._Hash, size: int | None,
              progress: bool) -> tuple[int, int, hashlib._Hash]:
    """Append the rest of ``url`` to ``part``; returns (bytes received, resumed-from, digest)."""
    from tqdm.auto import tqdm  # lazy: `gfs-opt` imports this module to build its parser

    try:
        resp = _open(url, offset)
    except _RangeDone:
        return 0, offset, digest
    with resp:
        if offset and resp.status != 206:   # the server ignored Range: start again
            offset, digest = 0, hashlib.sha256()
        total = resp.headers.get("Content-Length")
        total_size = offset + int(total) if total and total.isdigit() else size
        mode = "ab" if offset else "wb"
        received = 0
        bar = tqdm(total=total_size, initial=offset, unit="B", unit_scale=True,
                   unit_divisor=1024, desc=part.name.lstrip(".").removesuffix(".part"),
                   disable=not progress, leave=False)
        try:
            with part.open(mode) as fh:
                while True:
                    try:
                        block = resp.read(CHUNK)
                    except (OSError, http.client.HTTPException) as exc:
                        raise GfsError(
                            f"{url}: download broke off after {offset + received:,} bytes "
                            f"({exc or type(exc).__name__}); run the same command again to "
                            f"resume from {part}") from None
                    if not block:
                        break
                    fh.write(block)
                    digest.update(block)
                    received += len(block)
                    bar.update(len(block))
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            bar.close()
    if total and total.isdigit() and received < int(total):
        raise GfsError(f"{url}: download broke off after {offset + received:,} of "
                       f"{offset + int(total):,} bytes; run the same command again to resume "
                       f"from {part}")
    return received, offset, digest

