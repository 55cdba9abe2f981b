"""Who asks for what: organisation, GPU model, per-worker GPUs, workers and CPUs of each job.

* **Organisation × model.** The real per-org job counts (84 orgs) and per-model job counts are
  both known, and so is each org's model mix (by GPU-seconds). Iterative proportional fitting
  (Sinkhorn) turns that mix into a job-count table whose row and column sums are the real ones and
  whose zeros stay zeros (an org never uses a model it never used). Jobs draw their cell without
  replacement from the table scaled to the number of jobs, so org and model shares are exact.
* **Requests.** Per model, a profile (``PROFILES``): the share of fractional jobs, the pmf of
  whole-GPU per-worker requests and the share of multi-worker jobs. Profiles respect node sizes
  (A10 nodes hold one GPU, so A10 workers ask for ≤ 1 GPU) and the real medians per model
  (A10, A100, GPU-series-1: 1; A800: 2; GPU-series-2: 4; H800: 8). Multi-worker jobs draw the
  worker count from the real worker-count distribution tilted by ``w**alpha``; ``alpha`` is
  solved per model so that the mean ``g·w`` equals the real per-model demand
  (``demand_by_model.csv``), which is what sets each pool's requested-GPU pressure.
  A gang never asks for more workers than its pool can host; in a scaled-down trace
  `narrow_gangs` also keeps it to a share of its pool, running longer instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gfs_opt.traces.synth_inputs import MODELS, RealAggregates

# fractional per-worker requests: the real counts of 0.1 … 0.5, plus 0.05 and 0.25 standing in
# for part of the 214 real "other" requests
FRACTIONS = {0.05: 50, 0.1: 2428, 0.2: 8354, 0.25: 100, 0.3: 11996, 0.5: 26372}
ALPHA_RANGE = (-6.0, 4.0)


@dataclass(frozen=True)
class Profile:
    frac: float                  # share of jobs asking for a fraction of one GPU (one worker)
    whole: dict[int, float]      # pmf of whole-GPU per-worker requests
    multi: float                 # share of whole-GPU jobs with ≥ 2 workers


# Hand-set so that, mixed by the real per-model job counts, they reproduce the real per-worker
# request mix (gpu_request_per_worker_counts, ≤ 0.5 pt off per value), the real share of
# multi-worker jobs (8.4 %) and the real per-model median request.
PROFILES = {
    "A10": Profile(0.19, {1: 1.0}, 0.012),
    "A100-SXM4-80GB": Profile(0.02, {1: .62, 2: .10, 3: .002, 4: .05, 6: .002, 8: .226}, 0.12),
    "GPU-series-2": Profile(0.005, {1: .25, 2: .10, 4: .30, 6: .003, 8: .347}, 0.30),
    "GPU-series-1": Profile(0.10, {1: .85, 2: .03, 4: .04, 8: .08}, 0.05),
    "H800": Profile(0.005, {1: .15, 2: .05, 4: .05, 8: .75}, 0.50),
    "A800-SXM4-80GB": Profile(0.005, {1: .30, 2: .35, 4: .10, 8: .25}, 0.12),
}


def fit_org_model_table(agg: RealAggregates, iterations: int = 500) -> np.ndarray:
    """Jobs per (org, model) with the real margins and the real org mix's zero pattern."""
    table = agg.org_model_prior * agg.org_jobs[:, None] + 0.0
    rows, cols = agg.org_jobs.astype(float), agg.model_jobs.astype(float)
    for _ in range(iterations):
        table *= (cols / np.maximum(table.sum(axis=0), 1e-300))[None, :]
        table *= (rows / np.maximum(table.sum(axis=1), 1e-300))[:, None]
    return table


def exact_counts(weights: np.ndarray, n: int) -> np.ndarray:
    """Largest-remainder rounding of ``n·weights/Σweights`` (sums to n exactly)."""
    w = np.asarray(weights, dtype=float).ravel()
    quota = n * w / w.sum()
    counts = np.floor(quota).astype(np.int64)
    short = n - int(counts.sum())
    if short > 0:
        counts[np.argsort(-(quota - counts), kind="stable")[:short]] += 1
    return counts.reshape(np.shape(weights))


def draw_cells(table: np.ndarray, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(org index, model index) for n jobs, drawn without replacement from the scaled table."""
    counts = exact_counts(table, n).ravel()
    cells = rng.permutation(np.repeat(np.arange(counts.size), counts))
    return np.divmod(cells, table.shape[1])


def worker_capacity(nodes: pd.DataFrame, model: str, gpus_per_worker: np.ndarray) -> np.ndarray:
    """Most workers of ``gpus_per_worker`` GPUs each that the model's pool can host at once."""
    sizes = nodes.loc[nodes["gpu_model"] == model, "gpu_capacity_num"].to_numpy(dtype=np.int64)
    k = np.maximum(np.asarray(gpus_per_worker, dtype=np.int64), 1)
    return (sizes[None, :] // k[:, None]).sum(axis=1)


@dataclass(frozen=True)
class ModelSampler:
    """Samples (g, w) for one model; ``g`` in GPUs (fractional below 1)."""

    profile: Profile
    g_values: np.ndarray
    g_probs: np.ndarray
    caps: dict[int, int]        # whole g → most workers the pool can host
    w_values: np.ndarray        # multi-worker support (≥ 2)
    w_probs: np.ndarray         # tilted pmf over w_values

    def mean_single(self) -> float:
        """Mean per-worker GPUs (the request of a single-worker job)."""
        return self.profile.frac * _frac_mean() + (1 - self.profile.frac) * float(
            self.g_values @ self.g_probs)

    def sample(self, n: int, rng: np.random.Generator,
               single: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``single``: one worker each (residents: long-running single-worker services)."""
        p = self.profile
        frac_v = np.array(list(FRACTIONS))
        frac_p = np.array(list(FRACTIONS.values()), dtype=float)
        is_frac = rng.random(n) < p.frac
        g = np.where(is_frac, rng.choice(frac_v, n, p=frac_p / frac_p.sum()),
                     rng.choice(self.g_values, n, p=self.g_probs))
        multi = ~is_frac & (rng.random(n) < (0.0 if single else p.multi))
        w = np.where(multi, rng.choice(self.w_values, n, p=self.w_probs), 1)
        cap = np.ones(n, dtype=np.int64)
        for gv, c in self.caps.items():
            cap[g == gv] = c
        w = np.where(is_frac, 1, np.minimum(w, np.maximum(cap, 1)))
        return g, w.astype(np.int64)


def _frac_mean() -> float:
    return sum(v * c for v, c in FRACTIONS.items()) / sum(FRACTIONS.values())


def _tilted(values: np.ndarray, counts: np.ndarray, alpha: float) -> np.ndarray:
    logw = np.log(counts) + alpha * np.log(values)
    p = np.exp(logw - logw.max())
    return p / p.sum()


def build_sampler(agg: RealAggregates, nodes: pd.DataFrame, model: str) -> ModelSampler:
    """The model's request sampler with ``alpha`` solved against the real mean ``g·w``.

    Per-worker requests fit the biggest node of ``nodes`` (the cluster being generated); gang
    widths are those the real pool can host (`narrow_gangs` fits them to a smaller cluster).
    """
    prof = PROFILES[model]
    biggest = int(nodes.loc[nodes["gpu_model"] == model, "gpu_capacity_num"].max())
    whole = {g: q for g, q in prof.whole.items() if g <= biggest} or {1: 1.0}
    g_values = np.array(list(whole), dtype=float)
    g_probs = np.array(list(whole.values()), dtype=float)
    g_probs /= g_probs.sum()
    caps = dict(zip(whole, worker_capacity(agg.nodes, model, np.array(list(whole))).tolist(),
                    strict=True))
    wc = agg.worker_counts[agg.worker_counts.index >= 2]
    w_values, w_counts = wc.index.to_numpy(dtype=np.int64), wc.to_numpy(dtype=float)
    frac_mean = _frac_mean()
    i = MODELS.index(model)
    target = agg.model_demand[i] / agg.model_jobs[i]

    def mean_gw(alpha: float) -> float:
        pw = _tilted(w_values, w_counts, alpha)
        per_g = [(1 - prof.multi) * g + prof.multi * g * float(pw @ np.minimum(w_values, caps[g]))
                 for g in whole]
        return prof.frac * frac_mean + (1 - prof.frac) * float(g_probs @ np.array(per_g))

    lo, hi = ALPHA_RANGE
    if mean_gw(lo) >= target:
        alpha = lo
    elif mean_gw(hi) <= target:
        alpha = hi
    else:
        # scipy.optimize costs ≈ 0.4 s of CPU to import; only a synthetic trace needs it
        from scipy.optimize import brentq

        alpha = brentq(lambda a: mean_gw(a) - target, lo, hi, xtol=1e-6)
    return ModelSampler(prof, g_values, g_probs, caps, w_values, _tilted(w_values, w_counts, alpha))


def sample_requests(models: np.ndarray, agg: RealAggregates, nodes: pd.DataFrame,
                    rng: np.random.Generator, single: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per-worker GPUs and workers for jobs of the given model indices."""
    g = np.zeros(models.size)
    w = np.ones(models.size, dtype=np.int64)
    for i, model in enumerate(MODELS):
        sel = np.flatnonzero(models == i)
        if sel.size == 0 or not (nodes["gpu_model"] == model).any():
            continue
        g[sel], w[sel] = build_sampler(agg, nodes, model).sample(sel.size, rng, single)
    return g, w


def narrow_gangs(g: np.ndarray, w: np.ndarray, models: np.ndarray, nodes: pd.DataFrame,
                 share: float) -> np.ndarray:
    """Workers once every gang fits its pool in ``nodes`` and asks for at most ``share`` of the
    pool's GPUs (one worker at least).

    The caller stretches the duration by the same factor, so each job keeps its GPU-seconds and
    every pool its load.
    """
    out = w.copy()
    per_worker = np.where(g < 1, 1, g).astype(np.int64)
    for i, model in enumerate(MODELS):
        sel = np.flatnonzero((models == i) & (w > 1))
        if sel.size == 0:
            continue
        pool_gpus = int(nodes.loc[nodes["gpu_model"] == model, "gpu_capacity_num"].sum())
        hosts = worker_capacity(nodes, model, per_worker[sel])
        cap = np.minimum(hosts, np.floor(share * pool_gpus / per_worker[sel]).astype(np.int64))
        out[sel] = np.minimum(w[sel], np.maximum(cap, 1))
    return out


def sample_cpus(g: np.ndarray, models: np.ndarray, agg: RealAggregates, nodes: pd.DataFrame,
                rng: np.random.Generator) -> np.ndarray:
    """CPU cores per worker: the real CPU-per-GPU bucket mix (log-uniform inside a bucket)."""
    cpg = agg.cpu_per_gpu
    b = rng.choice(len(cpg), g.size, p=cpg["share"].to_numpy())
    lo = np.maximum(cpg["lo"].to_numpy()[b], 0.5)
    ratio = lo * np.exp(rng.random(g.size) * np.log(cpg["hi"].to_numpy()[b] / lo))
    node_cpu = nodes.groupby("gpu_model")["cpu_num"].max().reindex(list(MODELS)).fillna(1).to_numpy()
    return np.clip(np.round(ratio * g), 1, node_cpu[models]).astype(np.int64)
