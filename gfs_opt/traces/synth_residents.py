"""Residents: the HP jobs already running when the recording began (submit 0 in the real file).

The real trace has 3,588 of them. They hold the real hour-0 GPU load of each model
(``hourly_concurrency_top_models.csv`` at hour 0, less what the ≈ 150 regular hour-0 jobs add)
and the real hour-0 GPU-seconds (≈ 20.5 B, a seventh of the whole trace). They are single-worker
jobs (the real longest jobs are all single-worker services), so per-model totals are stable
from seed to seed and always fit their pool. Their orgs follow the fitted org × model table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gfs_opt.traces.synth_durations import resident_durations, resident_to_end
from gfs_opt.traces.synth_inputs import MODELS, RealAggregates
from gfs_opt.traces.synth_requests import build_sampler, exact_counts


@dataclass(frozen=True)
class Residents:
    org: np.ndarray
    model: np.ndarray
    g: np.ndarray
    w: np.ndarray
    duration: np.ndarray
    to_end: float          # share that runs until the end of the recording


def make_residents(agg: RealAggregates, table: np.ndarray, nodes: pd.DataFrame, n: int,
                   rng: np.random.Generator) -> Residents:
    n_real = int(agg.targets["resident_hp_jobs_at_t0"])
    regular_hour0 = max(0, int(agg.hourly_jobs[0]) - n_real)
    mean_gw = agg.model_demand / agg.model_jobs
    share = agg.model_jobs / agg.model_jobs.sum()
    gpus = np.maximum(agg.resident_gpus - regular_hour0 * share * mean_gw, 0.0)
    present = np.array([(nodes["gpu_model"] == m).any() for m in MODELS])
    samplers = {i: build_sampler(agg, nodes, m) for i, m in enumerate(MODELS) if present[i]}
    per_job = np.array([samplers[i].mean_single() if present[i] else 1.0 for i in range(len(MODELS))])
    per_model = exact_counts(np.where(present, gpus / per_job, 0.0), n)
    model = np.repeat(np.arange(len(MODELS)), per_model)

    org = np.empty(n, dtype=np.int64)
    g = np.zeros(n)
    w = np.ones(n, dtype=np.int64)
    for i in np.flatnonzero(per_model):
        sel = np.flatnonzero(model == i)
        col = table[:, i]
        org[sel] = rng.choice(len(col), sel.size, p=col / col.sum())
        g[sel], w[sel] = samplers[int(i)].sample(sel.size, rng, single=True)

    regular_gs = (agg.daily_gpu_seconds.sum() - agg.hour0_gpu_seconds) / max(
        agg.model_jobs.sum() - agg.hourly_jobs[0], 1)
    resident_gs = agg.hour0_gpu_seconds - regular_hour0 * regular_gs
    to_end = resident_to_end(resident_gs / gpus.sum())
    return Residents(org, model, g, w, resident_durations(n, to_end, rng), to_end)
