"""The real Alibaba v2026 aggregates that drive the synthetic generator, read once per process.

Everything comes from the package data ``gfs_opt/data/alibaba-spot-gpu-v2026`` (provenance in
``gfs_opt/data/NOTICE``): the real node file, the calibration targets and the per-hour / per-day /
per-org tables derived from the real job file (``derived_sultanul_ovi``). A missing file (a broken
install) is one line naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.paths import alibaba_dir

DERIVED = "derived_sultanul_ovi"
# job sizes g·w as bucketed by the real aggregate tables (label, lower edge in GPUs)
SIZE_BUCKETS = (("0", 0.0), ("1", 1.0), ("2 to 4", 2.0), ("5 to 8", 5.0), ("9 to 16", 9.0),
                ("17 to 32", 17.0), ("33 to 64", 33.0), ("65 to 128", 65.0), ("129 plus", 129.0))
MODELS = ("A10", "A100-SXM4-80GB", "GPU-series-2", "GPU-series-1", "H800", "A800-SXM4-80GB")


@dataclass(frozen=True)
class RealAggregates:
    """Read-only inputs of the generator (arrays indexed by hour, day, org or model)."""

    targets: dict
    nodes: pd.DataFrame            # real node file, raw column names
    hourly_jobs: np.ndarray        # jobs submitted in hour h (h = 0..4417), residents included
    hourly_demand: np.ndarray      # Σ g·w of the jobs submitted in hour h
    hour0_gpu_seconds: float       # Σ g·w·duration of the jobs submitted in hour 0 (mostly residents)
    daily_hp: np.ndarray           # HP jobs submitted on day d, residents included
    daily_spot: np.ndarray         # Spot jobs submitted on day d
    daily_gpu_seconds: np.ndarray  # Σ g·w·duration of the jobs submitted on day d
    orgs: np.ndarray               # organisation labels (str)
    org_jobs: np.ndarray           # jobs per organisation
    org_model_prior: np.ndarray    # orgs × MODELS, the real (GPU-seconds) model mix per org
    model_jobs: np.ndarray         # jobs per model (MODELS order)
    model_demand: np.ndarray       # Σ g·w per model
    model_gpu_seconds: np.ndarray  # Σ g·w·duration per model
    size_gpu_seconds: np.ndarray   # Σ g·w·duration per job-size bucket (SIZE_BUCKETS order)
    worker_counts: pd.Series       # worker_num → jobs
    cpu_per_gpu: pd.DataFrame      # lo, hi, share
    resident_gpus: np.ndarray      # requested GPUs per model active in hour 0 (MODELS order)


def _read(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise GfsError(f"{path}: missing; the synthetic Alibaba-like trace is driven by the real "
                       f"aggregates shipped in gfs_opt/data (reinstall gfs-opt)")
    return pd.read_csv(path)


def _per_hour(hours: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n)
    out[hours] = values
    return out


def _bucket_edges(label: str) -> tuple[float, float]:
    """'8 to 16' → (8, 16); 'over 128' → (128, 512): the open bucket is capped at 4× its edge."""
    if label.startswith("over"):
        lo = float(label.split()[1])
        return lo, 4 * lo
    low, high = label.split(" to ")
    return float(low), float(high)


@lru_cache(maxsize=4)
def load_aggregates(folder: Path | None = None) -> RealAggregates:
    root = Path(folder) if folder is not None else alibaba_dir()
    tables, extra = root / DERIVED / "tables", root / DERIVED / "tables_extra"
    tpath = root / "calibration_targets.json"
    if not tpath.exists():
        _read(tpath)
    targets = json.loads(tpath.read_text())

    hourly = _read(tables / "hourly_summary.csv").sort_values("submit_hour")
    hours = hourly["submit_hour"].to_numpy(dtype=np.int64)
    hourly_jobs = np.zeros(hours.max() + 1, dtype=np.int64)
    hourly_jobs[hours] = hourly["jobs"].to_numpy(dtype=np.int64)
    daily = _read(tables / "daily_summary.csv").sort_values("submit_day")

    org = _read(tables / "org_by_gpu_seconds.csv")
    mix = _read(extra / "org_model_mix_share.csv").set_index("organization")
    mix = mix.reindex(index=org["organization"], columns=list(MODELS)).fillna(0.0)
    by_model = _read(tables / "demand_by_model.csv").set_index("gpu_model").reindex(list(MODELS))
    workers = _read(tables / "worker_count_distribution.csv").set_index("worker_num")["jobs"]
    cpg = _read(extra / "bucket_cpu_per_gpu.csv")
    edges = np.array([_bucket_edges(b) for b in cpg["cpu_per_gpu_bucket"]])
    cpu_per_gpu = pd.DataFrame({"lo": edges[:, 0], "hi": edges[:, 1],
                                "share": cpg["jobs"] / cpg["jobs"].sum()}).sort_values("lo")
    conc = _read(extra / "hourly_concurrency_top_models.csv").set_index("hour")
    sizes = _read(extra / "bucket_gpu_demand.csv").set_index("gpu_demand_bucket")
    sizes = sizes.reindex([label for label, _ in SIZE_BUCKETS])
    nodes = _read(root / "node_info_df.csv")[["gpu_model", "gpu_capacity_num", "cpu_num", "node_name"]]
    return RealAggregates(
        targets=targets,
        nodes=nodes,
        hourly_jobs=hourly_jobs,
        hourly_demand=_per_hour(hours, hourly["gpu_demand"].to_numpy(dtype=float), len(hourly_jobs)),
        hour0_gpu_seconds=float(hourly["gpu_seconds"].iloc[0]),
        daily_hp=daily["hp_jobs"].to_numpy(dtype=np.int64),
        daily_spot=daily["spot_jobs"].to_numpy(dtype=np.int64),
        daily_gpu_seconds=daily["gpu_seconds"].to_numpy(dtype=float),
        orgs=org["organization"].astype(str).to_numpy(),
        org_jobs=org["jobs"].to_numpy(dtype=np.int64),
        org_model_prior=mix.to_numpy(dtype=float),
        model_jobs=by_model["jobs"].to_numpy(dtype=np.int64),
        model_demand=by_model["gpu_demand"].to_numpy(dtype=float),
        model_gpu_seconds=by_model["gpu_seconds"].to_numpy(dtype=float),
        size_gpu_seconds=sizes["gpu_seconds"].to_numpy(dtype=float),
        worker_counts=workers.astype(np.int64),
        cpu_per_gpu=cpu_per_gpu.reset_index(drop=True),
        resident_gpus=conc.loc[0, list(MODELS)].to_numpy(dtype=float),
    )
