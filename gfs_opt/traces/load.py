"""One entry point for every trace source: real files by name, built-in synthetic traces by name.

Recognised sources, in the order they are tried:
1. a folder holding node_info_df.csv + job_info_df.csv → Alibaba v2026 (`load_alibaba`);
   a path to a job_info_df.csv means its folder;
2. a file named ``openb_pod_list*.csv`` → Alibaba 2023 GPU-sharing pods (`load_openb`);
3. a file named ``trace_job_*.csv`` → Chronus's Philly-derived trace (`load_chronus`);
4. ``ref-toy`` → the reference toy trace in the data folder (``$GFS_DATA_DIR/ref-toy``);
5. any other name → `gfs_opt.traces.synth.builtin_trace` (synthetic traces, seeded).
"""

from __future__ import annotations

from pathlib import Path

from gfs_opt.errors import GfsError, InputError
from gfs_opt.paths import ref_toy_dir
from gfs_opt.traces.alibaba import JOB_FILE, NODE_FILE, load_alibaba
from gfs_opt.traces.base import Trace
from gfs_opt.traces.chronus import load_chronus
from gfs_opt.traces.openb import load_openb
from gfs_opt.traces.synth import builtin_trace

REF_TOY = "ref-toy"
ACCEPTED = ("a folder with node_info_df.csv + job_info_df.csv, an openb_pod_list*.csv, "
            "a trace_job_*.csv, 'ref-toy', or a built-in synthetic trace name")


def load_trace(source: str | Path, *, seed: int = 0) -> Trace:
    """Load any supported trace; ``seed`` only matters for synthetic traces."""
    path = Path(source).expanduser()
    if path.exists():
        return _load_path(path)
    text = str(source)
    if text == REF_TOY:
        return _ref_toy()
    if isinstance(source, Path) or "/" in text or text.endswith(".csv"):
        raise InputError(path, f"no such file or folder (expected {ACCEPTED})")
    return _builtin(text, seed)


def _ref_toy() -> Trace:
    folder = ref_toy_dir()
    if not (folder / JOB_FILE).is_file():
        raise InputError(folder, "the ref-toy trace is not there: it does not ship with the "
                                 "package and is read from the data folder ($GFS_DATA_DIR/ref-toy); "
                                 "get it with `gfs-opt data fetch ref-toy`")
    return load_alibaba(folder, name=REF_TOY)


def _load_path(path: Path) -> Trace:
    if path.is_dir():
        if (path / NODE_FILE).exists() or (path / JOB_FILE).exists():
            return load_alibaba(path)
        raise InputError(path, f"folder lacks {NODE_FILE} and {JOB_FILE} (expected {ACCEPTED})")
    name = path.name
    if name == JOB_FILE:
        return load_alibaba(path.parent)
    if name.startswith("openb_pod_list"):
        return load_openb(path)
    if name.startswith("trace_job_") and name.endswith(".csv"):
        return load_chronus(path)
    raise InputError(path, f"unrecognised trace file name (expected {ACCEPTED})")


def _builtin(name: str, seed: int) -> Trace:
    try:
        return builtin_trace(name, seed=seed)
    except (KeyError, ValueError) as exc:  # synth's way of saying "no such built-in"
        raise GfsError(f"unknown trace source {name!r} ({exc}); expected {ACCEPTED}") from None
    except GfsError as exc:
        if isinstance(exc, InputError):
            raise
        raise GfsError(f"{exc} (trace sources: {ACCEPTED})") from None
