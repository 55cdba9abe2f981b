"""Which jobs run long: durations coupled to job size and GPU model.

In the real trace duration and size are far from independent in GPU-seconds: single-GPU jobs
average ≈ 3 days per GPU, gangs of ≥ 129 GPUs ≈ 7 hours, and GPU-series-1 jobs run ten times
longer than H800 jobs. Drawing the two independently puts ≈ 2.5× the real GPU-seconds on the
cluster (requested-GPU pressure ≈ 2.2 instead of 0.9).

The coupling keeps every duration marginal exact and moves only *which* job gets which
duration: each job has a latent score ``z = δ_size + δ_model + δ_week + σ·ε`` (ε standard normal,
σ shrinking slowly with the gang size, see ``SPREAD_EXPONENT``);
within each class the jobs are ranked by z and rank r of n gets the class's duration quantile at
(r + ½)/n (`synth_durations`), so the duration marginals are untouched. The shifts δ are fitted
(cyclic damped updates in log space, like iterative proportional fitting) so that the
GPU-seconds per size bucket, per GPU model and per submission week equal the real ones
(``bucket_gpu_demand.csv``, ``demand_by_model.csv``, ``daily_summary.csv``) minus what the
residents hold. Shifts only move GPU-seconds between groups; the total is set by how many HP
jobs of the tail above the real p99 run until the end of the recording, adjusted alongside.
The weekly margin keeps the slow rise and fall of the real load (without it a
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
ITERATIONS = 60
TOLERANCE = 0.02     # stop when every margin is within 2 % of its target (the fit plateaus near 1 %)
# Bigger gangs get a narrower latent spread, σ = (g·w)^-SPREAD_EXPONENT: with one common spread
# the fitted shifts send big gangs to minutes-or-months extremes and the real mass of GPU-seconds
# in jobs of hours to days (bucket_duration.csv) goes missing; 0.2 puts it within ≈ 2×.
SPREAD_EXPONENT = 0.2


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
    u[np.argsort(z)] = (np.arange(z.size) + 0.5) / max(z.size, 1)
    return u


def coupled_durations(is_spot: np.ndarray, submit: np.ndarray, gw: np.ndarray,
                      margins: list[Margin], targets: dict, resident_to_end: float,
                      rng: np.random.Generator) -> np.ndarray:
    """Observed (censored, integer) durations whose GPU-seconds per margin group hit the targets.

    Each class keeps its exact duration marginal: within HP and within Spot the jobs' scores are
    ranked, and rank r of n gets the class quantile at (r + ½)/n.
    """
    n = submit.size
    eps = rng.standard_normal(n) * np.maximum(gw, 1.0) ** -SPREAD_EXPONENT
    hp = ~is_spot
    hx, hg = hp_observed_knots(targets, resident_to_end)
    hf = uncensored_cdf(hg, surviving_share(hx, submit[hp]))
    sx, sc = np.array(SPOT_KNOTS).T
    shifts = [np.zeros(len(m.target)) for m in margins]
    sizes = [np.bincount(m.index, minlength=len(m.target)) for m in margins]
    total = float(margins[0].target.sum())
    to_end = 0.0  # share of HP jobs, taken from the tail above the last quantile, that never end

    def uncensored() -> np.ndarray:
        z = eps + sum(sh[m.index] for sh, m in zip(shifts, margins, strict=True))
        d = np.empty(n)
        tx, tf = _with_to_end(hx, hf, to_end)
        for mask, xs, cdf in ((hp, tx, tf), (is_spot, sx, sc)):
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
            # shifts only move GPU-seconds between groups; the total is set by the tail
            room = 1.0 - hf[-2]
            to_end = float(np.clip(to_end + room * np.log(total / gs.sum()), 0.0, room))
            if max(_worst(gs, mm) for mm in margins) < TOLERANCE:
                break
    return censor(uncensored(), submit).astype(np.int64)


def _with_to_end(xs: np.ndarray, cdf: np.ndarray, share: float) -> tuple[np.ndarray, np.ndarray]:
    """The CDF with ``share`` of the mass above its last inner knot moved to the very end.

    Quantiles up to that knot (the real p99) are unchanged; the jobs moved run until the end of
    the recording, as the real ones that were still running when it stopped.
    """
    if share <= 0:
        return xs, cdf
    end = xs[-1]
    return (np.concatenate([xs[:-1], [end - 1.0, end]]),
            np.concatenate([cdf[:-1], [1.0 - share, 1.0]]))


def _worst(gs: np.ndarray, m: Margin) -> float:
    got = np.bincount(m.index, gs, len(m.target))
    live = (got > 0) & (m.target > 0)
    return float(np.abs(np.log(m.target[live] / got[live])).max()) if live.any() else 0.0
