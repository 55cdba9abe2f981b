"""Job durations of the synthetic trace: per-class piecewise log-linear CDFs fitted to the real
duration buckets and quantiles, with the real right-censoring at the end of the recording.

Three populations, mixed exactly as in the real trace:

* **Residents** (HP jobs already running at t = 0): a share ``RESIDENT_TO_END`` runs to the end of
  the recording (as the real top-200 longest jobs all do); the rest end log-uniformly between one
  hour and the end. This puts ≈ 20 B GPU-seconds in hour 0, as the real hour-0 submissions hold.
* **Spot** jobs: the CDF ``SPOT_KNOTS`` (an assumption, since the real per-class buckets are not
  published) passing through the real Spot p50 = 2,095.5 s and p90 = 21,740 s, with 10.2 % of
  jobs longer than 6 h (the real ``long_job_slices_by_type``) and at most two weeks.
* **Regular HP** jobs: whatever the overall targets leave once Spot and residents are taken
  out, i.e. at every knot x, ``G_HP(x) = (N·G_all(x) − N_spot·G_spot(x) − N_res·G_res(x)) / N_HP``.
  The knots are the real bucket edges (1 min … 3 days) and the real overall p50…p99.

Censoring: a job cannot outlive the recording (``CENSOR_END``), so the observed duration is
``min(D, CENSOR_END − submit)``. The targets describe observed durations, so the HP CDF is first
corrected: ``F(x) = 1 − (1 − G(x)) / R(x)`` with ``R(x)`` the share of HP jobs submitted more
than x before the end, which makes the censored sample hit the observed targets.
"""

from __future__ import annotations

import numpy as np

CENSOR_END = 15_897_599  # 2024-08-31 23:59:59: the real longest jobs (submit 0) end exactly here
MIN_DURATION = 1.0
MIN_TAIL_AFTER_END = 60  # the few jobs submitted after CENSOR_END still run a minute at least
RESIDENT_TO_END = 0.08
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


def resident_cdf(x: np.ndarray | float) -> np.ndarray:
    span = np.log(CENSOR_END / RESIDENT_MIN)
    body = np.clip(np.log(np.maximum(x, RESIDENT_MIN) / RESIDENT_MIN) / span, 0.0, 1.0)
    return np.where(np.asarray(x) >= CENSOR_END, 1.0, (1.0 - RESIDENT_TO_END) * body)


def resident_durations(n: int, rng: np.random.Generator) -> np.ndarray:
    to_end = rng.random(n) < RESIDENT_TO_END
    body = RESIDENT_MIN * np.exp(rng.uniform(0.0, np.log(CENSOR_END / RESIDENT_MIN), n))
    return np.where(to_end, CENSOR_END, np.floor(body)).astype(np.int64)


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


def hp_knots(targets: dict, hp_submits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Uncensored CDF knots of regular HP jobs (see module docstring)."""
    n_all = float(targets["jobs_total"])
    n_spot = n_all * targets["job_type_share"]["Spot"]
    n_res = float(targets["resident_hp_jobs_at_t0"])
    n_hp = n_all - n_spot - n_res
    xs, g_all = overall_knots(targets)
    sx, sc = np.array(SPOT_KNOTS).T
    g_hp = (n_all * g_all - n_spot * loglinear_cdf(xs, sx, sc) - n_res * resident_cdf(xs)) / n_hp
    g_hp = np.clip(g_hp, 0.0, 1.0)
    left = np.sort(CENSOR_END - hp_submits.astype(float))
    surviving = 1.0 - np.searchsorted(left, xs, side="right") / max(len(left), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(surviving > 0, 1.0 - (1.0 - g_hp) / surviving, 1.0)
    f[-1] = 1.0
    f = np.maximum.accumulate(np.clip(f, 0.0, 1.0))
    return xs, f


def censor(duration: np.ndarray, submit: np.ndarray) -> np.ndarray:
    room = np.maximum(CENSOR_END - submit, MIN_TAIL_AFTER_END)
    return np.minimum(duration, room)


def sample_durations(is_spot: np.ndarray, submit: np.ndarray, targets: dict,
                     rng: np.random.Generator) -> np.ndarray:
    """Observed (censored, integer) durations of regular jobs."""
    u = rng.random(submit.size)
    hx, hf = hp_knots(targets, submit[~is_spot])
    sx, sc = np.array(SPOT_KNOTS).T
    d = np.where(is_spot, loglinear_quantile(u, sx, sc), loglinear_quantile(u, hx, hf))
    return censor(np.floor(d), submit).astype(np.int64)
