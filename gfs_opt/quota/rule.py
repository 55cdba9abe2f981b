"""The paper's spot-quota rule (SQA, GFS-SPEC §2.2) with η feedback."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from gfs_opt.model import MILLI, Params, PoolForecast, PoolStatus, Round


def free_of_hp(forecast: PoolForecast, capacity: int, rho: float) -> np.ndarray:
    """F_h = C − clip(⌊U_h⌋, 0, C) with U_h the ρ-quantile of the Gaussian N(μ_h, σ_h)."""
    z = NormalDist().inv_cdf(rho)
    upper = forecast.mean + z * np.maximum(forecast.std, 0.0)
    return capacity - np.clip(np.floor(upper), 0, capacity)


def class_hours(guarantee_h: float, horizon_h: int) -> int:
    """Forecast hours a window of ``guarantee_h`` hours starting now can touch: h = 0..⌈d⌉."""
    return min(horizon_h, math.ceil(guarantee_h) + 1)


def pool_quota(forecast: PoolForecast | None, capacity: int, eta: float, guarantee_h: float,
               params: Params, has_history: bool = True) -> int:
    """Q_{p,d} = η · min_{h ≤ d} F_h in milli-GPU; a pool without HP history gets Q = C."""
    if forecast is None or not has_history or len(forecast.mean) == 0:
        return capacity * MILLI
    free = free_of_hp(forecast, capacity, params.rho)
    hours = class_hours(guarantee_h, len(free))
    return math.floor(eta * float(free[:hours].min()) * MILLI)


def rule_quotas(rnd: Round, eta: dict[str, float] | None = None) -> dict[tuple[str, float], int]:
    """Quota (milli-GPU) per (pool, guarantee class) for a round."""
    out: dict[tuple[str, float], int] = {}
    for pool in rnd.state.pools:
        status = rnd.pool_status(pool)
        e = status.eta if eta is None else eta.get(pool, status.eta)
        cap = rnd.state.capacity_gpus(pool)
        for d in rnd.params.guarantee_classes:
            out[(pool, d)] = pool_quota(rnd.forecasts.get(pool), cap, e, d, rnd.params,
                                        status.has_hp_history)
    return out


def update_eta(status: PoolStatus, params: Params) -> float:
    """η feedback from the eviction rate ER of the last H hours (GFS-SPEC §2.2 step 4)."""
    eta = status.eta
    windows = status.recent_failed + status.recent_succeeded
    if params.eta_static or windows == 0:
        return eta
    er = status.recent_failed / windows
    target = 1.0 - params.rho
    if er >= 1.5 * target:
        eta *= target / er
    elif er <= 0.5 * target and status.oldest_lp_wait > 3600.0:
        eta *= 1.5 - er / target
    return min(params.eta_max, max(params.eta_min, eta))
