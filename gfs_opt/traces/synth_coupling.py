"""Which jobs run long: durations coupled to job size and GPU model.

In the real trace duration and size are far from independent in GPU-seconds: single-GPU jobs
average ≈ 3 days per GPU, gangs of ≥ 129 GPUs ≈ 7 hours, and GPU-series-1 jobs run ten times
longer than H800 jobs. Drawing the two independently puts ≈ 2.5× the real GPU-seconds on the
cluster (requested-GPU pressure ≈ 2.2 instead of 0.9).

The coupling keeps every duration marginal exact and moves only *which* job gets which
duration: each job has a latent score ``z = δ_size + δ_model + δ_week + ε`` (ε standard normal);
within each class the jobs are ranked by z and rank r of n gets the class's duration quantile at
(r + ½)/n (`synth_durations`), so the duration marginals are untouched. The shifts δ are fitted
(cyclic damped updates in log space, like iterative proportional fitting) so that the
GPU-seconds per size bucket, per GPU model and per submission week equal the real ones
(``bucket_gpu_demand.csv``, ``demand_by_model.csv``, ``daily_summary.csv``) minus what the
residents hold. The weekly margin keeps the slow rise and fall of the real load (without it a
few lucky weeks collect the long jobs and pressure drifts away from the real hourly series).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gfs_opt.traces.synth_durations import (
    SPOT_KNOTS,
    censor,
    hp_observed_knots,
    loglinear_quantile,
    surviving_share,
    uncensored_cdf,
)
from gfs_opt.traces.synth_inputs import SIZE_BUCKETS

STEP = 0.35          # damping of the log-space updates
ITERATIONS = 120
TOLERANCE = 0.01     # stop when every margin is within 1 % of its target


@dataclass(frozen=True)
class Margin:
    """GPU-seconds wanted per group: ``index[j]`` is job j's group, ``target[k]`` group k's total."""

    name: str
    index: np.ndarray
    target: np.ndarray


def size_bucket(gw: np.ndarray) -> np.ndarray:
    edges = np.array([lo for _, lo in SIZE_BUCKETS])
    return np.clip(np.searchsorted(edges, gw, side="right") - 1, 0, len(edges) - 1)


def _uniform_ranks(z: np.ndarray) -> np.ndarray:
    """Empirical probability integral transform: mid-ranks of z scaled into (0, 1)."""
    u = np.empty(z.size)
    u[np.argsort(z, kind="stable")] = (np.arange(z.size) + 0.5) / max(z.size, 1)
    return u


def coupled_durations(is_spot: np.ndarray, submit: np.ndarray, gw: np.ndarray,
                      margins: list[Margin], targets: dict, resident_to_end: float,
                      rng: np.random.Generator, spread: np.ndarray | None = None) -> np.ndarray:
    """Observed (censored, integer) durations whose GPU-seconds per margin group hit the targets.

    Each class keeps its exact duration marginal: within HP and within Spot the jobs' scores are
    ranked, and rank r of n gets the class quantile at (r + ½)/n.
    """
    n = submit.size
    eps = rng.standard_normal(n) * (1.0 if spread is None else spread)
    hp = ~is_spot
    hx, hg = hp_observed_knots(targets, resident_to_end)
    hf = uncensored_cdf(hg, surviving_share(hx, submit[hp]))
    sx, sc = np.array(SPOT_KNOTS).T
    shifts = [np.zeros(len(m.target)) for m in margins]
    sizes = [np.bincount(m.index, minlength=len(m.target)) for m in margins]

    def uncensored() -> np.ndarray:
        z = eps + sum(sh[m.index] for sh, m in zip(shifts, margins, strict=True))
        d = np.empty(n)
        for mask, xs, cdf in ((hp, hx, hf), (is_spot, sx, sc)):
            if mask.any():
                d[mask] = loglinear_quantile(_uniform_ranks(z[mask]), xs, cdf)
        return np.floor(d)

    for it in range(ITERATIONS):
        raw = uncensored()
        gs = gw * censor(raw, submit)
        k = it % len(margins)
        m, sh = margins[k], shifts[k]
        got = np.bincount(m.index, gs, len(m.target))
        live = (sizes[k] > 0) & (got > 0) & (m.target > 0)
        sh[live] += STEP * np.log(m.target[live] / got[live])
        if k == len(margins) - 1:
            # long durations now favour some weeks: re-aim the HP tail at the observed targets
            hf = uncensored_cdf(hg, surviving_share(hx, submit[hp], raw[hp]))
            if max(_worst(gs, mm) for mm in margins) < TOLERANCE:
                break
    return censor(uncensored(), submit).astype(np.int64)


def _worst(gs: np.ndarray, m: Margin) -> float:
    got = np.bincount(m.index, gs, len(m.target))
    live = (got > 0) & (m.target > 0)
    return float(np.abs(np.log(m.target[live] / got[live])).max()) if live.any() else 0.0
