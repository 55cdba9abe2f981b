"""Job durations of the synthetic trace: per-class piecewise log-linear CDFs fitted to the real
duration buckets and quantiles, with the real right-censoring at the end of the recording.

Three populations, mixed exactly as in the real trace:

* **Residents** (HP jobs already running at t = 0): a share ``to_end`` runs to the end of the
  recording (as the real top-200 longest jobs all do); the rest end log-uniformly between one
  hour and the end. ``to_end`` is solved (`resident_to_end`) so that the residents hold the real
  hour-0 GPU-seconds (≈ 20.5 B).
* **Spot** jobs: the CDF ``SPOT_KNOTS`` (an assumption, since the real per-class buckets are not
  published) passing through the real Spot p50 = 2,095.5 s and p90 = 21,740 s, with 10.2 % of
  jobs longer than 6 h (the real ``long_job_slices_by_type``) and at most two weeks.
* **Regular HP** jobs: whatever the overall targets leave once Spot and residents are taken
  out, i.e. at every knot x, ``G_HP(x) = (N·G_all(x) − N_spot·G_spot(x) − N_res·G_res(x)) / N_HP``.
  The knots are the real bucket edges (1 min … 3 days) and the real overall p50…p99.

Censoring: a job cannot outlive the recording (``CENSOR_END``), so the observed duration is
``min(D, CENSOR_END − submit)``. The targets describe observed durations, so the HP CDF is
corrected: ``F(x) = 1 − (1 − G(x)) / R(x)`` with ``R(x)`` the share of jobs whose duration
exceeds x that were submitted more than x before the end (`surviving_share`; re-evaluated by
`synth_coupling` once it knows which jobs get the long durations), which makes the censored
sample hit the observed targets.
"""

from __future__ import annotations

import numpy as np

CENSOR_END = 15_897_599  # 2024-08-31 23:59:59: the real longest jobs (submit 0) end exactly here
MIN_DURATION = 1.0
# the real file has ~20 submissions on 1 September, after CENSOR_END; they may run an hour
AFTER_END_ROOM = 3600
RESIDENT_MIN = 3600.0
BUCKET_EDGES = {"<1min": 60.0, "1-10min": 600.0, "10-60min": 3600.0, "1-6h": 21_600.0,
                "6-24h": 86_400.0, "1-3d": 259_200.0}
SPOT_KNOTS = (  # (seconds, CDF) — see module docstring
    (MIN_DURATION, 0.0), (60.0, 0.06), (600.0, 0.22), (2095.5, 0.50), (3600.0, 0.62),
    (21_740.0, 0.90), (86_400.0, 0.965), (259_200.0, 0.99), (1_209_600.0, 1.0))


def loglinear_quantile(u: np.ndarray, xs: np.ndarray, cdf: np.ndarray) -> np.ndarray:
    """Inverse of a CDF that is linear in log(x) between knots ``(xs, cdf)``."""
    # np.interp needs strictly increasing abscissae; flat CDF stretches carry no mass anyway
    strict = cdf + np.arange(len(cdf)) * 1e-12
    return np.exp(np.interp(u, strict, np.log(xs)))


def loglinear_cdf(x: np.ndarray | float, xs: np.ndarray, cdf: np.ndarray) -> np.ndarray:
    return np.interp(np.log(np.maximum(x, MIN_DURATION)), np.log(xs), cdf)


def _loguniform_mean(lo: float, hi: float) -> float:
    return (hi - lo) / np.log(hi / lo)


def resident_to_end(mean_duration: float) -> float:
    """Share of residents that run to the end so that their mean duration is ``mean_duration``."""
    body = _loguniform_mean(RESIDENT_MIN, CENSOR_END)
    return float(np.clip((mean_duration - body) / (CENSOR_END - body), 0.0, 1.0))


def resident_cdf(x: np.ndarray | float, to_end: float) -> np.ndarray:
    span = np.log(CENSOR_END / RESIDENT_MIN)
    body = np.clip(np.log(np.maximum(x, RESIDENT_MIN) / RESIDENT_MIN) / span, 0.0, 1.0)
    return np.where(np.asarray(x) >= CENSOR_END, 1.0, (1.0 - to_end) * body)


def resident_durations(n: int, to_end: float, rng: np.random.Generator) -> np.ndarray:
    until_end = rng.random(n) < to_end
    body = RESIDENT_MIN * np.exp(rng.uniform(0.0, np.log(CENSOR_END / RESIDENT_MIN), n))
    return np.where(until_end, CENSOR_END, np.floor(body)).astype(np.int64)


def overall_knots(targets: dict) -> tuple[np.ndarray, np.ndarray]:
    """(x, G) of the real overall duration CDF: bucket edges plus the published quantiles."""
    shares = targets["duration_bucket_job_share"]
    pts = {}
    acc = 0.0
    for label, edge in BUCKET_EDGES.items():
        acc += shares[label]
        pts[edge] = acc / sum(shares.values())
    for q, x in targets["duration_quantiles_all"].items():
        pts[float(x)] = int(q[1:]) / 100.0
    pts[MIN_DURATION] = 0.0
    pts[float(CENSOR_END)] = 1.0
    xs = np.array(sorted(pts))
    return xs, np.maximum.accumulate(np.array([pts[x] for x in xs]))


def hp_observed_knots(targets: dict, to_end: float) -> tuple[np.ndarray, np.ndarray]:
    """(x, G): the observed (censored) duration CDF regular HP jobs need (module docstring)."""
    n_all = float(targets["jobs_total"])
    n_spot = n_all * targets["job_type_share"]["Spot"]
    n_res = float(targets["resident_hp_jobs_at_t0"])
    n_hp = n_all - n_spot - n_res
    xs, g_all = overall_knots(targets)
    sx, sc = np.array(SPOT_KNOTS).T
    g_hp = (n_all * g_all - n_spot * loglinear_cdf(xs, sx, sc) - n_res * resident_cdf(xs, to_end)) / n_hp
    return xs, np.maximum.accumulate(np.clip(g_hp, 0.0, 1.0))


def surviving_share(xs: np.ndarray, submit: np.ndarray,
                    uncensored: np.ndarray | None = None) -> np.ndarray:
    """R(x): share of jobs not censored below x — among all jobs, or among those whose
    uncensored duration exceeds x (what matters once long durations favour some weeks)."""
    left = (CENSOR_END - submit).astype(float)
    if uncensored is None:
        srt = np.sort(left)
        return 1.0 - np.searchsorted(srt, xs, side="right") / max(len(srt), 1)
    long_enough = uncensored[:, None] > xs[None, :]
    n_long = long_enough.sum(axis=0)
    kept = (long_enough & (left[:, None] > xs[None, :])).sum(axis=0)
    return np.where(n_long > 0, kept / np.maximum(n_long, 1), 1.0)


def uncensored_cdf(g_observed: np.ndarray, surviving: np.ndarray) -> np.ndarray:
    """F(x) = 1 − (1 − G(x)) / R(x): the CDF to draw from so that censoring lands on G."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(surviving > 0, 1.0 - (1.0 - g_observed) / surviving, 1.0)
    f[-1] = 1.0
    return np.maximum.accumulate(np.clip(f, 0.0, 1.0))


def censor(duration: np.ndarray, submit: np.ndarray) -> np.ndarray:
    room = np.where(submit < CENSOR_END, CENSOR_END - submit, AFTER_END_ROOM)
    return np.maximum(np.minimum(duration, room), MIN_DURATION)

