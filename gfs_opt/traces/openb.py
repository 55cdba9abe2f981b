"""Loader for the Alibaba 2023 GPU-sharing trace (``openb_pod_list_*.csv`` + ``openb_node_list_*.csv``).

Documented choices (the trace has neither tenants, priorities in GFS's sense, nor durations):

- **Class.** qos ``BE`` (best effort) → LP; every other qos (LS, Burstable, Guaranteed) → HP.
- **Request.** One worker per pod. ``num_gpu == 1``: ``g = gpu_milli`` (a share of one GPU, 1000 =
  the whole GPU). ``num_gpu > 1``: whole GPUs, ``g = 1000·num_gpu`` (``gpu_milli`` is ignored; it
  is 1000 for all such pods). ``num_gpu == 0`` pods are CPU-only and dropped with a note.
- **Pool.** A pod runs on one GPU model. Its allowed models are those listed in ``gpu_spec``
  (``|``-separated; models absent from the node file are ignored) or, when ``gpu_spec`` is empty,
  every model; models whose largest node is too small for the pod are removed. ``assign="hash"``
  (default) picks among the allowed models with probability proportional to their GPU capacity,
  using a fixed hash of the pod name: deterministic, independent of row order, and the same pod
  lands in the same pool in every file where it has the same constraint. ``assign="first"`` takes
  the first listed model, and the largest pool (by GPUs) for unconstrained pods.
- **Times.** submit = creation_time; duration = deletion_time − scheduled_time (the time the pod
  actually held its GPU). Pods never scheduled (``scheduled_time`` empty, phase Pending) get
  deletion_time − creation_time: the time they asked for. HP pods created at 0 are ``resident``.
- **Tenant.** Pod names (``openb-pod-NNNN``) carry no tenant, so org = ``"default"``.
- **Nodes.** Nodes with 0 GPUs (in ``openb_node_list_all_node.csv``) are dropped with a note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from gfs_opt.errors import InputError, shown, shown_list
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

DEFAULT_NODE_FILE = "openb_node_list_gpu_node.csv"
POD_COLUMNS = ["name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time",
               "scheduled_time"]
NODE_FILE_COLUMNS = ["sn", "gpu", "model"]
LP_QOS = "BE"
DEFAULT_ORG = "default"

Assign = Literal["hash", "first"]


def load_openb_nodes(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """GPU nodes of an openb node list in gfs_opt columns; CPU-only nodes are dropped."""
    raw = read_table(Path(path), NODE_FILE_COLUMNS, text=["sn", "model"])
    gpus = numeric_column(raw, "gpu", path, integer=True, minimum=0, maximum=1024)
    has_gpu = gpus > 0
    names = text_column(raw, "sn", path)
    model = text_column(raw, "model", path, required=has_gpu)
    unique_column(names, path, "sn", "node name")
    cpus = (numeric_column(raw, "cpu_milli", path, minimum=0) / MILLI if "cpu_milli" in raw
            else np.zeros(len(raw)))
    nodes = pd.DataFrame({"node_name": names.to_numpy(), "pool": model.to_numpy(),
                          "gpus": gpus.astype(np.int64), "cpus": cpus})[NODE_COLUMNS]
    notes = []
    if not has_gpu.all():
        notes.append(f"dropped {int((~has_gpu).sum()):,} node(s) without GPUs from {Path(path).name}")
        nodes = nodes[has_gpu].reset_index(drop=True)
    if nodes.empty:
        raise InputError(path, "no GPU nodes")
    return nodes, notes


def load_openb(pod_csv: Path, node_csv: Path | None = None, *, assign: Assign = "hash",
               name: str | None = None) -> Trace:
    """Load an openb pod list; ``node_csv`` defaults to openb_node_list_gpu_node.csv beside it."""
    pod_csv = Path(pod_csv)
    node_csv = Path(node_csv) if node_csv is not None else pod_csv.parent / DEFAULT_NODE_FILE
    if assign not in ("hash", "first"):
        raise ValueError(f"assign must be 'hash' or 'first', got {assign!r}")
    nodes, notes = load_openb_nodes(node_csv)
    raw = read_table(pod_csv, POD_COLUMNS, text=["name", "qos", "gpu_spec"])
    src = pod_csv
    require_rows(raw, src, "pods")

    names = text_column(raw, "name", src)
    unique_column(names, src, "name", "pod name")
    qos = text_column(raw, "qos", src)
    num_gpu = numeric_column(raw, "num_gpu", src, integer=True, minimum=0, maximum=1024)
    milli = numeric_column(raw, "gpu_milli", src, integer=True, minimum=0)
    uses_gpu = num_gpu > 0
    shared = num_gpu == 1
    fail_first(shared & ((milli < 1) | (milli > MILLI)), src, "gpu_milli",
               lambda p: f"a 1-GPU pod needs gpu_milli in 1..{MILLI}, got {milli[p]:g}")
    created = numeric_column(raw, "creation_time", src, minimum=0, maximum=MAX_TIME_S)
    deleted = numeric_column(raw, "deletion_time", src, minimum=0, maximum=MAX_TIME_S)
    scheduled = numeric_column(raw, "scheduled_time", src, minimum=0, maximum=MAX_TIME_S,
                               allow_missing=True)
    fail_first(scheduled < created, src, "scheduled_time",
               lambda p: f"scheduled at {scheduled[p]:g}, before its creation at {created[p]:g}")
    start = np.where(np.isnan(scheduled), created, scheduled)
    fail_first(deleted < start, src, "deletion_time",
               lambda p: f"deleted at {deleted[p]:g}, before it started at {start[p]:g}")

    g = np.where(shared, milli, num_gpu * MILLI).astype(np.int64)
    spec = (text_column(raw, "gpu_spec", src, required=np.zeros(len(raw), dtype=bool))
            if "gpu_spec" in raw else pd.Series([""] * len(raw)))
    pool = _assign_pools(names, spec, num_gpu.astype(np.int64), uses_gpu, nodes, assign, src)
    cls = np.where(qos.to_numpy() == LP_QOS, "LP", "HP")
    cpu = (numeric_column(raw, "cpu_milli", src, minimum=0) / MILLI if "cpu_milli" in raw
           else np.zeros(len(raw)))
    jobs = pd.DataFrame({
        "job_id": np.arange(len(raw), dtype=np.int64),
        "name": names.to_numpy(),
        "org": DEFAULT_ORG,
        "pool": pool,
        "cls": cls,
        "g": g,
        "workers": np.ones(len(raw), dtype=np.int64),
        "submit": created,
        "duration": deleted - start,
        "cpu": cpu,
        "guarantee_h": DEFAULT_GUARANTEE_H,
        "resident": (cls == "HP") & (created == 0),
    })[JOB_COLUMNS]
    dropped = int((~uses_gpu).sum())
    if dropped:
        notes.append(f"dropped {dropped:,} CPU-only pod(s) with num_gpu 0 "
                     f"(first at {src} row {data_row(int(np.argmax(~uses_gpu)))})")
        jobs = jobs[uses_gpu].reset_index(drop=True)
        if jobs.empty:
            raise InputError(src, "every job is CPU-only (num_gpu 0): nothing to schedule")
    notes.append(f"pools assigned by {assign!r}; org = {DEFAULT_ORG!r} (the trace has no tenants)")
    return Trace(nodes, jobs, name=name or pod_csv.stem, notes=notes)


def _assign_pools(names: pd.Series, spec: pd.Series, num_gpu: np.ndarray, uses_gpu: np.ndarray,
                  nodes: pd.DataFrame, assign: Assign, src: Path) -> np.ndarray:
    """One pool per pod; work is done once per distinct (gpu_spec, GPUs per pod) pair."""
    by_pool = nodes.groupby("pool")["gpus"].agg(["max", "sum"])
    order = by_pool.sort_values("sum", ascending=False, kind="stable").index.tolist()
    # the fraction in [0, 1) that picks a pool, from a hash of the name (stable across runs)
    u = pd.util.hash_pandas_object(names, index=False).to_numpy() / 2.0**64
    pool = np.full(len(names), "", dtype=object)
    need = np.maximum(num_gpu, 1)
    gpu_rows = np.flatnonzero(uses_gpu)
    keys = pd.DataFrame({"spec": spec.to_numpy()[gpu_rows], "need": need[gpu_rows]})
    for (sp, k), idx in keys.groupby(["spec", "need"], sort=False).indices.items():
        rows = gpu_rows[idx]
        listed = [m.strip() for m in str(sp).split("|") if m.strip()] if sp else order
        known = list(dict.fromkeys(m for m in listed if m in by_pool.index))
        if not known:
            raise InputError(src, f"unknown GPU model(s) in gpu_spec {shown(sp)} (node file has "
                                  f"{shown_list(sorted(by_pool.index))})",
                             row=data_row(int(rows[0])), column="gpu_spec")
        fits = [m for m in known if by_pool.at[m, "max"] >= k]
        if not fits:
            raise InputError(src, f"a pod needs {k} GPUs but no node of {', '.join(known)} has that many",
                             row=data_row(int(rows[0])), column="num_gpu")
        if assign == "first":
            pool[rows] = fits[0]
            continue
        weights = np.cumsum(by_pool.loc[fits, "sum"].to_numpy(dtype=float))
        pick = np.searchsorted(weights / weights[-1], u[rows], side="right")
        pool[rows] = np.asarray(fits, dtype=object)[np.minimum(pick, len(fits) - 1)]
    return pool
