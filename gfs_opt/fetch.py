"""Download public traces that are too large to ship: resumable, verified, atomic.

A download goes to ``DEST/.NAME.part``; each chunk is appended and hashed as it arrives. When the
server has sent everything, the sha256 is compared with the pinned one: a match is renamed to
``DEST/NAME`` in one step (so ``NAME`` is either absent or whole and verified), a mismatch
deletes the part file (nothing is left behind). An interrupted download (network error, Ctrl-C)
keeps its part file, and the same command resumes it with an HTTP Range request. A dataset is a
folder of such files (`DATASETS`: each file's source, size and sha256); ``file://`` mirrors work
the same way, and a file with no public copy is read from this repository's git history.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from gfs_opt.errors import GfsError
from gfs_opt.fileio import check_out_dir, file_mode
from gfs_opt.paths import REPO_ROOT, alibaba_dir, data_dir

CHUNK = 1 << 16
TIMEOUT_S = 30.0      # per socket operation: a stalled server fails instead of hanging


@dataclass(frozen=True)
class Remote:
    """One file of a dataset: its name in the dataset's folder, where it is published, and the
    size and sha256 it must have."""

    file_name: str
    url: str | None            # None: no public copy (read from `Dataset.git` instead)
    sha256: str
    size: int


@dataclass(frozen=True)
class Dataset:
    """A fetchable folder: its files, the shipped companions that complete it, and where it comes
    from. ``git`` = (commit, folder): the files are also in this repository's history there."""

    name: str
    files: tuple[Remote, ...]
    source: str
    licence: str
    about: str
    companions: tuple[Path, ...] = ()
    git: tuple[str, str] | None = None

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def _github(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


CLUSTERDATA_COMMIT = "0d0f3f1efdbf1add6a7bcc63676eafbd1eb11f71"
OPENB_COMMIT = "50a91c7c74abe3b658188dc78ac1dd302970d40c"
PHILLY_RUNTIME_COMMIT = "1d729891010857ac8edc60881beaa582fec94ae2"
CHRONUS_COMMIT = "bc7e15fefd53b80d1897170ab3c1aa7d353c3b79"
#: the last commit of this repository whose package still held ref-toy (it has no public copy)
REF_TOY_COMMIT = "3bc9d04374a8fe412cd84802ca03a4064ee1de50"


def _openb(name: str, sha256: str, size: int) -> Remote:
    return Remote(name, _github("alibaba/clusterdata", OPENB_COMMIT,
                                f"cluster-trace-gpu-v2023/csv/{name}"), sha256, size)


def _chronus(name: str, path: str, sha256: str, size: int) -> Remote:
    return Remote(name, _github("S-Lab-System-Group/ChronusArtifact", CHRONUS_COMMIT, path),
                  sha256, size)


#: every optional trace the tests, benchmarks and documents use; each goes to its own folder,
#: named like the dataset, under the data folder ($GFS_DATA_DIR) unless --dest says otherwise
DATASETS: dict[str, Dataset] = {d.name: d for d in (
    Dataset(
        name="alibaba-v2026",
        files=(Remote("job_info_df.csv",
                      _github("alibaba/clusterdata", CLUSTERDATA_COMMIT,
                              "cluster-trace-v2026-spot-gpu/job_info_df.csv"),
                      "113ccee4c28f5c3bbaaca974cd164b9280b7d4c39e53b745443b28eea05e03dd",
                      23_055_929),),
        companions=(alibaba_dir() / "node_info_df.csv",),
        source=f"alibaba/clusterdata @ {CLUSTERDATA_COMMIT[:8]}: cluster-trace-v2026-spot-gpu/",
        licence="Alibaba Cluster Trace Program: research or study use",
        about="the real Alibaba cluster-trace-v2026-spot-gpu job file (466,867 jobs), with the "
              "shipped node file beside it"),
    Dataset(
        name="ref-toy",
        files=(Remote("job_info_df.csv", None,
                      "5c2f2810845423a830d089cf73b69ccba2c73e3a1e7fde82bde6a5775789ba00", 141_623),
               Remote("node_info_df.csv", None,
                      "6e9aa17f05369a2cbbed355f0df6dca06b7a4c5b4db9cf56538620ee5bc8d2f0", 435)),
        git=(REF_TOY_COMMIT, "gfs_opt/data/ref-toy"),
        source=f"generated for this project (seed 0); in this repository's history at "
               f"{REF_TOY_COMMIT[:8]} (gfs_opt/data/ref-toy/)",
        licence="this project's licence (MIT)",
        about="a 24-node toy trace in the Alibaba v2026 schema (3,601 jobs over 14 days, LP "
              "jobs on 2024-03-11..12): the speed and Slurm benchmarks' fixed point"),
    Dataset(
        name="chronus-philly-slo",
        files=(_chronus("trace_job_Philly_MIX1.csv", "code/data/exp/trace_job_Philly_MIX1.csv",
                        "6228d86e2c1fddb2d9e1c006f7a71b4127b7dbed4efbab5aea428fa72ea2dd74",
                        1_842_793),
               _chronus("model_info.json", "code/data/model_info.json",
                        "d53f2d8e9cd4fdbf1cb6b862db010ed28f9432082a885f7a68125b83492ddbc7", 1_162),
               _chronus("LICENSE.ChronusArtifact.MIT.txt", "LICENSE",
                        "6f6e1eadc02f7c93d1f5ffd357f8e6d95d415bc438d9b9fd91496c6d0b71ada3",
                        1_076)),
        source=f"S-Lab-System-Group/ChronusArtifact @ {CHRONUS_COMMIT[:8]}: code/data/",
        licence="MIT (the licence file is fetched with the trace)",
        about="Chronus' Philly-derived SLO trace MIX1: 30,940 jobs of 11 tenants, time-compressed "
              "(strict jobs run as HP, best-effort as LP)"),
    Dataset(
        name="alibaba-openb-gpu-v2023",
        files=(_openb("openb_pod_list_default.csv",
                      "1ee7ed79c27a3b0861cda8ddba86a004c6aba904caafa329a76ae93ca63834a8", 575_468),
               _openb("openb_pod_list_gpuspec33.csv",
                      "eca4f746db1e5b25864ad021b55ece3943e101a3ebd4574d09dcb95c46117652", 587_467),
               _openb("openb_node_list_gpu_node.csv",
                      "2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5", 42_353),
               _openb("openb_node_list_all_node.csv",
                      "5a85c2af79c66a1efff8bbcbda430400aae56d8431370d738480967e1a9c6b15", 52_287)),
        source=f"alibaba/clusterdata @ {OPENB_COMMIT[:8]}: cluster-trace-gpu-v2023/csv/",
        licence="Alibaba Cluster Trace Program: research or study use",
        about="the Alibaba 2023 GPU-sharing trace (openb): 8,152 pods over ~149 days and their "
              "1,213 GPU nodes (BE pods run as LP, the rest as HP)"),
    Dataset(
        name="philly-2017",
        files=(Remote("philly_job_runtime_seconds.csv",
                      _github("alibaba/clusterdata", PHILLY_RUNTIME_COMMIT,
                              "cluster-trace-gpu-v2020/analysis/philly_runtime.csv"),
                      "e99015baaea66833ebeac68d27c994aa13d83847f73b4a7c7dc71fe94b395247",
                      535_725),),
        source=f"alibaba/clusterdata @ {PHILLY_RUNTIME_COMMIT[:8]}: "
               "cluster-trace-gpu-v2020/analysis/philly_runtime.csv",
        licence="CC BY 4.0 (cluster-trace-gpu-v2020/LICENSE)",
        about="83,154 job runtimes of Microsoft's Philly cluster (2017), in seconds"),
)}


def default_dest(name: str) -> Path:
    """Where `fetch` puts dataset ``name`` by default: its folder in the data folder."""
    return data_dir() / name


def fetch_hint(name: str) -> str:
    """How to get a missing dataset, for error messages and skip reasons."""
    return (f"not in {default_dest(name)}: run `gfs-opt data fetch {name}`, or set "
            f"$GFS_DATA_DIR to a folder that holds {name}/")


@dataclass
class FileResult:
    path: Path
    downloaded: int          # bytes received in this call
    resumed_from: int        # bytes already on disk when this call started
    already_present: bool


@dataclass
class FetchResult:
    dest: Path
    files: list[FileResult]
    notes: list[str]

    @property
    def path(self) -> Path:
        """The first (for most datasets the only) fetched file."""
        return self.files[0].path

    @property
    def already_present(self) -> bool:
        return all(f.already_present for f in self.files)


def _sha256_of(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _check_url(url: str) -> None:
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https", "file"):
        raise GfsError(f"--url {url!r}: expected an http://, https:// or file:// address")


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


def fetch(name: str, dest: Path | None = None, *, url: str | None = None,
          sha256: str | None = None, progress: bool = True) -> FetchResult:
    """Fetch every file of dataset ``name`` into ``dest`` (default: its folder in the data
    folder); see the module docstring for the guarantees. ``url``: a mirror, read as
    ``URL/<file name>`` for each file (for a one-file dataset, the file itself when ``URL`` does
    not end in ``/``); ``sha256`` replaces the pinned hash of a one-file dataset."""
    if name not in DATASETS:
        raise GfsError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    ds = DATASETS[name]
    dest = default_dest(name) if dest is None else dest
    if url is not None:
        _check_url(url)
    if sha256 is not None and len(ds.files) != 1:
        raise GfsError(f"--sha256: {name} has {len(ds.files)} files, each with its pinned hash")
    check_out_dir(dest, "--dest")
    results = [_fetch_file(ds, remote, dest, url, sha256, progress) for remote in ds.files]
    notes: list[str] = []
    _copy_companions(ds, dest, notes)
    return FetchResult(dest, results, notes)


def _source_url(ds: Dataset, remote: Remote, mirror: str | None) -> str | None:
    if mirror is None:
        return remote.url
    if len(ds.files) == 1 and not mirror.endswith("/"):
        return mirror
    return mirror.rstrip("/") + "/" + urllib.parse.quote(remote.file_name)


def _fetch_file(ds: Dataset, remote: Remote, dest: Path, mirror: str | None,
                sha256: str | None, progress: bool) -> FileResult:
    url = _source_url(ds, remote, mirror)
    expected = _check_hex(sha256 or remote.sha256)
    pinned = expected == remote.sha256
    final = dest / remote.file_name
    part = dest / f".{remote.file_name}.part"
    if final.exists():
        found = _sha256_of(final)
        if found != expected:
            raise GfsError(f"{final}: exists with another sha256 (expected {expected}, found "
                           f"{found}); move it away to download again")
        return FileResult(final, 0, 0, True)
    if url is None:
        return _from_git(ds, remote, part, final, expected)
    offset = part.stat().st_size if part.exists() else 0
    digest = hashlib.sha256()
    if offset:
        with part.open("rb") as fh:
            while block := fh.read(CHUNK):
                digest.update(block)
    received = 0
    try:
        received, offset, digest = _download(url, part, offset, digest,
                                             remote.size if pinned else None, progress)
    except KeyboardInterrupt:
        have = part.stat().st_size if part.exists() else 0
        raise KeyboardInterrupt(
            f"download of {remote.file_name} interrupted; {have:,} bytes kept in {part}: run "
            f"the same command again to resume") from None
    _settle(part, final, digest.hexdigest(), expected, url)
    return FileResult(final, received, offset, False)


def _settle(part: Path, final: Path, found: str, expected: str, where: str) -> None:
    """Rename a complete part file into place, or delete it if its hash is not the pinned one."""
    if found != expected:
        part.unlink(missing_ok=True)
        raise GfsError(f"{where}: sha256 mismatch (expected {expected}, found {found}); the "
                       f"download was deleted")
    os.chmod(part, file_mode())
    os.replace(part, final)


def _from_git(ds: Dataset, remote: Remote, part: Path, final: Path,
              expected: str) -> FileResult:
    """A file with no public copy, read from this repository's history (a clone holds it)."""
    assert ds.git is not None, ds.name
    commit, folder = ds.git
    spec = f"{commit}:{folder}/{remote.file_name}"
    why = (f"{ds.name} has no public download; it is in this repository's history "
           f"(commit {commit[:8]}, {folder}/), which needs a git clone of gfs_opt")
    try:
        res = subprocess.run(["git", "-C", str(REPO_ROOT), "show", spec], capture_output=True,
                             timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GfsError(f"{why}: git failed ({exc}); or give --url a copy") from None
    if res.returncode != 0:
        raise GfsError(f"{why}: not found there ({res.stderr.decode(errors='replace').strip()}"
                       f"); or give --url a copy") from None
    part.write_bytes(res.stdout)
    _settle(part, final, hashlib.sha256(res.stdout).hexdigest(), expected, f"git show {spec}")
    return FileResult(final, len(res.stdout), 0, False)


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

