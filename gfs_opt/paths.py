"""Where the shared public data lives: ``$GFS_DATA_DIR``, else ``../shared/data`` beside the repo."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    env = os.environ.get("GFS_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return REPO_ROOT.parent / "shared" / "data"


def alibaba_dir() -> Path:
    return data_dir() / "alibaba-spot-gpu-v2026"


def calibration_targets_path() -> Path:
    return alibaba_dir() / "calibration_targets.json"
