"""Loader for the Alibaba cluster-trace-v2026-spot-gpu (the GFS paper's trace).

Node file ``node_info_df.csv``: gpu_model, gpu_capacity_num, cpu_num, node_name (read by name: the
real column order differs from the upstream README). Job file ``job_info_df.csv``: job_name,
organization, gpu_model, cpu_request, gpu_request (per worker), worker_num, submit_time, duration,
job_type (HP | Spot).

Conversion: Spot → LP; ``g`` = per-worker milli-GPU (`gfs_opt.model.gpus_to_milli`); pool = the
job's gpu_model; HP jobs submitted at 0 were already running when recording began (``resident``);
every LP job gets the default 1-hour guarantee class. Jobs with gpu_request 0 are CPU-only and are
dropped (counted in `Trace.notes`); their gpu_model is not checked since they never need a pool.
The whole input is validated before anything is returned, so a bad file never half-loads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from gfs_opt.errors import InputError, shown, shown_list
from gfs_opt.model import MILLI, gpus_to_milli
from gfs_opt.traces.base import JOB_COLUMNS, NODE_COLUMNS, Trace
from gfs_opt.traces.csvio import (
    MAX_TIME_S,
    apply_unique,
    data_row,
    fail_first,
    numeric_column,
    read_table,
    require_columns,
    require_rows,
    text_column,
    unique_column,
)

NODE_FILE = "node_info_df.csv"
JOB_FILE = "job_info_df.csv"
RAW_NODE_COLUMNS = ["gpu_model", "gpu_capacity_num", "cpu_num", "node_name"]
RAW_JOB_COLUMNS = ["job_name", "organization", "gpu_model", "cpu_request", "gpu_request",
                   "worker_num", "submit_time", "duration", "job_type"]
CLASS_OF_JOB_TYPE = {"HP": "HP", "Spot": "LP"}
DEFAULT_GUARANTEE_H = 1.0
# bounds as in the instance-file schema: per-GPU state is allocated per node, so a typo such as
# 10**9 GPUs on one node would otherwise exhaust memory instead of failing
MAX_NODE_GPUS = 1024
MAX_WORKERS = 1_000_000

_NODE_TEXT = ["gpu_model", "node_name"]
_JOB_TEXT = ["job_name", "organization", "gpu_model", "job_type"]


def _name(text: str) -> str:
    """A GPU model for a message: as written when it is plain text, else quoted on one line."""
    return text if text.isprintable() else shown(text)


def nodes_from_raw(raw: pd.DataFrame, source: object = "<memory>") -> pd.DataFrame:
    """Validate a raw node frame and return it in gfs_opt columns (node_name, pool, gpus, cpus)."""
    require_columns(raw, RAW_NODE_COLUMNS, source)
    raw = raw.reset_index(drop=True)
    if raw.empty:
        raise InputError(source, "no nodes (the file has a header but no data rows)")
    pool = text_column(raw, "gpu_model", source)
    names = text_column(raw, "node_name", source)
    gpus = numeric_column(raw, "gpu_capacity_num", source, integer=True, minimum=1,
                          maximum=MAX_NODE_GPUS)
    cpus = numeric_column(raw, "cpu_num", source, minimum=0)
    unique_column(names, source, "node_name", "node name")
    return pd.DataFrame({"node_name": names.to_numpy(), "pool": pool.to_numpy(),
                         "gpus": gpus.astype(np.int64), "cpus": cpus})[NODE_COLUMNS]


def load_alibaba_nodes(path: Path) -> pd.DataFrame:
    """Read and validate a ``node_info_df.csv``; gfs_opt node columns."""
    return nodes_from_raw(read_table(Path(path), RAW_NODE_COLUMNS, text=_NODE_TEXT), path)


def jobs_from_raw(raw: pd.DataFrame, nodes: pd.DataFrame,
                  source: object = "<memory>") -> tuple[pd.DataFrame, list[str]]:
    """Validate a raw job frame against gfs_opt ``nodes``; returns (jobs, notes)."""
    require_columns(raw, RAW_JOB_COLUMNS, source)
    raw = raw.reset_index(drop=True)
    names = text_column(raw, "job_name", source)
    org = text_column(raw, "organization", source)
    jtype = text_column(raw, "job_type", source)
    fail_first(~jtype.isin(list(CLASS_OF_JOB_TYPE)).to_numpy(), source, "job_type",
               lambda p: f"unknown job_type {jtype.iloc[p]!r} (expected HP or Spot)")
    cpu = numeric_column(raw, "cpu_request", source, minimum=0)
    gpu_req = numeric_column(raw, "gpu_request", source, minimum=0, maximum=MAX_NODE_GPUS)
    workers = numeric_column(raw, "worker_num", source, integer=True, minimum=1,
                             maximum=MAX_WORKERS)
    submit = numeric_column(raw, "submit_time", source, minimum=0, maximum=MAX_TIME_S)
    duration = numeric_column(raw, "duration", source, minimum=0, maximum=MAX_TIME_S)
    unique_column(names, source, "job_name", "job_name")

    uses_gpu = gpu_req > 0
    pool = text_column(raw, "gpu_model", source, required=uses_gpu)
    biggest = nodes.groupby("pool")["gpus"].max()
    known = pool.isin(biggest.index).to_numpy()
    fail_first(uses_gpu & ~known, source, "gpu_model",
               lambda p: f"unknown GPU model {shown(pool.iloc[p])} (node file has "
                         f"{shown_list(biggest.index)})")
    g = np.zeros(len(raw), dtype=np.int64)
    g[uses_gpu] = apply_unique(gpu_req[uses_gpu], gpus_to_milli)
    gpus_needed = np.where(g < MILLI, 1, g // MILLI)
    room = pool.map(biggest).fillna(0).to_numpy(dtype=np.int64)
    fail_first(uses_gpu & (gpus_needed > room), source, "gpu_request",
               lambda p: f"a worker needs {shown(gpu_req[p])} GPUs but the largest "
                         f"{_name(pool.iloc[p])} node has {room[p]}")

    cls = jtype.map(CLASS_OF_JOB_TYPE)
    jobs = pd.DataFrame({
        "job_id": _job_ids(names),
        "name": names.to_numpy(),
        "org": org.to_numpy(),
        "pool": pool.to_numpy(),
        "cls": cls.to_numpy(),
        "g": g,
        "workers": workers.astype(np.int64),
        "submit": submit,
        "duration": duration,
        "cpu": cpu,
        "guarantee_h": DEFAULT_GUARANTEE_H,
        "resident": ((cls == "HP").to_numpy() & (submit == 0)),
    })[JOB_COLUMNS]
    notes: list[str] = []
    dropped = int((~uses_gpu).sum())
    if dropped:
        first = int(np.argmax(~uses_gpu))
        notes.append(f"dropped {dropped:,} CPU-only job(s) with gpu_request 0 "
                     f"(first at {source} row {data_row(first)})")
        jobs = jobs[uses_gpu].reset_index(drop=True)
    return jobs, notes


def _job_ids(names: pd.Series) -> np.ndarray:
    """Integer job names when every name is an integer (and they stay distinct), else 0..n-1."""
    if len(names) and names.str.fullmatch(r"[+-]?\d{1,18}").all():
        ids = names.astype(np.int64).to_numpy()
        if pd.Index(ids).is_unique:  # "7" and "007" are distinct names but one id
            return ids
    return np.arange(len(names), dtype=np.int64)


def trace_from_frames(nodes_raw: pd.DataFrame, jobs_raw: pd.DataFrame, name: str = "alibaba",
                      source: str = "<memory>", *, node_source: str | None = None) -> Trace:
    """Build a `Trace` from raw frames in the Alibaba v2026 schema (``source`` names the job file)."""
    nodes = nodes_from_raw(nodes_raw, node_source if node_source is not None else source)
    jobs, notes = jobs_from_raw(jobs_raw, nodes, source)
    return Trace(nodes, jobs, name=name, notes=notes)


def load_alibaba(folder: Path, name: str | None = None) -> Trace:
    """Load ``folder``/node_info_df.csv and ``folder``/job_info_df.csv."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "not a folder (expected one holding node_info_df.csv and job_info_df.csv)")
    node_path, job_path = folder / NODE_FILE, folder / JOB_FILE
    nodes = load_alibaba_nodes(node_path)
    raw_jobs = read_table(job_path, RAW_JOB_COLUMNS, text=_JOB_TEXT)
    require_rows(raw_jobs, job_path, "jobs")
    jobs, notes = jobs_from_raw(raw_jobs, nodes, job_path)
    if jobs.empty:
        raise InputError(job_path, "every job is CPU-only (gpu_request 0): nothing to schedule")
    return Trace(nodes, jobs, name=name or folder.resolve().name, notes=notes)
