"""Where data lives.

Package data (``gfs_opt/data/``, see its NOTICE) holds the small inputs the built-in setups need:
the real Alibaba v2026 node file, calibration targets and aggregate tables; they work after a plain
``pip install``. No trace ships with the package: optional traces (``ref-toy``, openb, Chronus) are
read from the data folder: ``$GFS_DATA_DIR``, else a per-user data folder (platformdirs:
``~/.local/share/gfs-opt`` on Linux), where ``gfs-opt data fetch NAME`` puts them.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DATA = Path(__file__).resolve().parent / "data"


def data_dir() -> Path:
    """Folder of optional traces (``$GFS_DATA_DIR``); may not exist."""
    env = os.environ.get("GFS_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("gfs-opt", appauthor=False))


def alibaba_dir() -> Path:
    """The shipped Alibaba v2026 inputs: node file, calibration targets, aggregate tables."""
    return PACKAGE_DATA / "alibaba-spot-gpu-v2026"


def ref_toy_dir() -> Path:
    """The reference toy trace (``ref-toy``) in the data folder; may not exist."""
    return data_dir() / "ref-toy"


def calibration_targets_path() -> Path:
    return alibaba_dir() / "calibration_targets.json"
