"""Jobs that can never start: a gang larger than its whole pool, even with every GPU free.

Such a job waits until the end of the replay whatever the policy does, so its queueing time
measures the trace, not the scheduler. Runs count them apart (``never_placeable_hp/_lp``) and
the CLI warns about them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gfs_opt.model import MILLI, gpus_per_worker, milli_per_gpu
from gfs_opt.traces.base import Trace


def _slots(node_gpus: np.ndarray, g: int) -> int:
    """Workers of request ``g`` an empty pool holds at most (an upper bound: never too few)."""
    if g <= 0:
        return np.iinfo(np.int64).max
    if g < MILLI:
        return int(node_gpus.sum()) * (MILLI // milli_per_gpu(g))
    return int((node_gpus // gpus_per_worker(g)).sum())


def never_placeable(trace: Trace) -> np.ndarray:
    """Boolean mask over ``trace.jobs``: the job's gang does not fit its empty pool."""
    jobs = trace.jobs
    if jobs.empty:
        return np.zeros(0, dtype=bool)
    gpus = {pool: grp["gpus"].to_numpy(dtype=np.int64)
            for pool, grp in trace.nodes.groupby("pool")}
    keys = pd.MultiIndex.from_frame(jobs[["pool", "g"]])
    slots = {k: _slots(gpus.get(k[0], np.zeros(0, dtype=np.int64)), int(k[1]))
             for k in keys.unique()}
    cap = np.fromiter((slots[k] for k in keys), dtype=np.float64, count=len(jobs))
    return jobs["workers"].to_numpy(dtype=np.float64) > cap


def never_placeable_counts(trace: Trace) -> dict[str, int]:
    mask = never_placeable(trace)
    cls = trace.jobs["cls"].to_numpy()
    return {"never_placeable_hp": int((mask & (cls == "HP")).sum()),
            "never_placeable_lp": int((mask & (cls == "LP")).sum())}


def never_placeable_warning(trace: Trace) -> str | None:
    """One line naming how many jobs can never start and the first of them, or None."""
    mask = never_placeable(trace)
    if not mask.any():
        return None
    jobs = trace.jobs[mask]
    first = jobs.iloc[0]
    pool_gpus = int(trace.nodes.loc[trace.nodes["pool"] == first["pool"], "gpus"].sum())
    n_hp, n_lp = int((jobs["cls"] == "HP").sum()), int((jobs["cls"] == "LP").sum())
    return (f"{n_hp} HP / {n_lp} LP job(s) can never be placed: the gang is larger than its "
            f"whole pool (e.g. job {first['name']}: {int(first['workers']):,} × "
            f"{first['g'] / MILLI:g} GPUs, pool {first['pool']} has {pool_gpus:,} GPUs); "
            f"they wait until the end and are counted in never_placeable_hp/_lp")
