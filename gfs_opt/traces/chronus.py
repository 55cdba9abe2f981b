"""Loader for Chronus's Philly-derived SLO trace (``trace_job_*.csv``, SoCC'21 artifact).

Documented choices:

- **Class.** ``job_type`` is the source of truth: ``strict`` (a hard-deadline SLO job) → HP,
  ``best`` (best effort) → LP, and ``soft`` (an SLO job whose deadline may slip, as in other
  Chronus mixes) → HP by default: it still carries an SLO, and GFS's HP class is the one with
  an SLO that is never preempted. ``soft_class="LP"`` runs soft jobs as spot jobs instead; the
  trace notes say how many jobs each mapping moved. When the ``best_effort`` column is present
  it must agree (1 ⇔ best); in the published MIX1 file the two columns agree on every row.
- **Tenant.** ``user`` (a Philly virtual cluster) → org.
- **Request.** ``num_gpu`` whole GPUs. Jobs of up to ``gpus_per_node`` GPUs are one worker. Larger
  jobs are split into identical workers of k GPUs, k the largest divisor of num_gpu that fits on a
  node, so the GPU total stays exact: 16 → 2×8, 32 → 4×8, 12 → 2×6, 20 → 4×5. ``num_gpu == 0``
  jobs are CPU-only and dropped with a note.
- **Cluster.** The trace has no node file. One pool (``pool``, default "V100") of identical
  ``gpus_per_node``-GPU nodes (default 8). ``nodes=None`` sizes it to the peak GPU demand the
  trace would have if every job started at its submit time (an uncontended cluster); pass a
  smaller ``nodes`` to create contention.
- **Times.** submit_time and duration are seconds (the file is time-compressed: the whole trace
  spans ~5.6 h). The trace has no calendar date; the Trace keeps the default origin.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from gfs_opt.errors import GfsError, InputError
from gfs_opt.model import MILLI
from gfs_opt.traces.alibaba import DEFAULT_GUARANTEE_H
from gfs_opt.traces.base import JOB_COLUMNS, NODE_COLUMNS, Trace
from gfs_opt.traces.csvio import (
    MAX_TIME_S,
    data_row,
    fail_first,
    numeric_column,
    read_table,
    require_rows,
    text_column,
    unique_column,
)

JOB_FILE_COLUMNS = ["job_id", "user", "num_gpu", "submit_time", "duration", "job_type"]
CLASS_OF_JOB_TYPE = {"strict": "HP", "soft": "HP", "best": "LP"}
DEFAULT_POOL = "V100"
DEFAULT_GPUS_PER_NODE = 8


def worker_split(num_gpu: np.ndarray, gpus_per_node: int) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs per worker, workers) for whole-GPU jobs: the largest node-sized divisor of num_gpu."""
    per_worker = np.zeros_like(num_gpu)
    for n in np.unique(num_gpu):
        if n > 0:
            per_worker[num_gpu == n] = max(k for k in range(1, min(int(n), gpus_per_node) + 1) if n % k == 0)
    workers = np.where(per_worker > 0, num_gpu // np.maximum(per_worker, 1), 0)
    return per_worker, workers


def peak_demand(submit: np.ndarray, duration: np.ndarray, gpus: np.ndarray) -> int:
    """Largest number of GPUs in use at once if every job ran from submit to submit + duration."""
    if len(submit) == 0:
        return 0
    times = np.concatenate([submit, submit + duration])
    delta = np.concatenate([gpus, -gpus])
    order = np.lexsort((delta, times))  # at equal times, releases (negative) come first
    return int(np.cumsum(delta[order]).max())


def load_chronus(csv: Path, *, nodes: int | None = None, gpus_per_node: int = DEFAULT_GPUS_PER_NODE,
                 pool: str = DEFAULT_POOL, name: str | None = None,
                 soft_class: str = "HP") -> Trace:
    """Load a Chronus ``trace_job_*.csv`` onto a synthesised single-pool cluster."""
    csv = Path(csv)
    if gpus_per_node < 1:
        raise ValueError("gpus_per_node must be ≥ 1")
    if soft_class not in ("HP", "LP"):
        raise ValueError(f"soft_class must be 'HP' or 'LP', got {soft_class!r}")
    class_of = {**CLASS_OF_JOB_TYPE, "soft": soft_class}
    raw = read_table(csv, JOB_FILE_COLUMNS, text=["user", "job_type"])
    require_rows(raw, csv, "jobs")
    job_id = numeric_column(raw, "job_id", csv, integer=True, minimum=0,
                            maximum=2**53).astype(np.int64)  # exact in float64, fits int64
    unique_column(pd.Series(job_id), csv, "job_id", "job_id")
    org = text_column(raw, "user", csv)
    jtype = text_column(raw, "job_type", csv)
    fail_first(~jtype.isin(list(class_of)).to_numpy(), csv, "job_type",
               lambda p: f"unknown job_type {jtype.iloc[p]!r} (expected strict, soft or best)")
    if "best_effort" in raw:
        best = numeric_column(raw, "best_effort", csv, integer=True, minimum=0)
        fail_first((best == 1) != (jtype == "best").to_numpy(), csv, "best_effort",
                   lambda p: f"best_effort {best[p]:g} contradicts job_type {jtype.iloc[p]!r}")
    # the cluster is sized to the peak demand: bound requests so a typo cannot size it absurdly
    num_gpu = numeric_column(raw, "num_gpu", csv, integer=True, minimum=0,
                             maximum=100_000).astype(np.int64)
    submit = numeric_column(raw, "submit_time", csv, minimum=0, maximum=MAX_TIME_S)
    duration = numeric_column(raw, "duration", csv, minimum=0, maximum=MAX_TIME_S)

    per_worker, workers = worker_split(num_gpu, gpus_per_node)
    cls = jtype.map(class_of).to_numpy()
    jobs = pd.DataFrame({
        "job_id": job_id,
        "name": job_id.astype(str),
        "org": org.to_numpy(),
        "pool": pool,
        "cls": cls,
        "g": per_worker * MILLI,
        "workers": workers,
        "submit": submit,
        "duration": duration,
        "cpu": 0.0,
        "guarantee_h": DEFAULT_GUARANTEE_H,
        "resident": (cls == "HP") & (submit == 0),
    })[JOB_COLUMNS]
    notes: list[str] = []
    n_soft = int((jtype == "soft").sum())
    if n_soft:
        notes.append(f"{n_soft:,} soft-SLO job(s) run as {soft_class} (job_type soft → {soft_class})")
    uses_gpu = num_gpu > 0
    if not uses_gpu.all():
        notes.append(f"dropped {int((~uses_gpu).sum()):,} CPU-only job(s) with num_gpu 0 "
                     f"(first at {csv} row {data_row(int(np.argmax(~uses_gpu)))})")
        jobs = jobs[uses_gpu].reset_index(drop=True)
        if jobs.empty:
            raise InputError(csv, "every job is CPU-only (num_gpu 0): nothing to schedule")
    split = int((num_gpu > gpus_per_node).sum())
    if split:
        notes.append(f"{split} job(s) above {gpus_per_node} GPUs split into equal multi-GPU workers")

    peak = peak_demand(submit[uses_gpu], duration[uses_gpu], num_gpu[uses_gpu])
    if nodes is None:
        nodes = max(1, math.ceil(peak / gpus_per_node))
    elif nodes < 1:
        raise GfsError(f"a Chronus cluster needs at least one node, got nodes={nodes}")
    notes.append(f"cluster synthesised: {nodes} × {gpus_per_node}-GPU {pool} nodes "
                     f"(uncontended peak demand {peak} GPUs)")
    node_frame = pd.DataFrame({
        "node_name": [f"{pool}-{i:04d}" for i in range(nodes)],
        "pool": pool,
        "gpus": np.full(nodes, gpus_per_node, dtype=np.int64),
        "cpus": 0.0,
    })[NODE_COLUMNS]
    return Trace(node_frame, jobs, name=name or csv.stem, notes=notes)
