"""The paper's spot-quota rule (SQA, GFS-SPEC §2.2 steps 1–3); η's feedback is `gfs_opt.quota.eta`.

Per pool and future hour h: ``U_h = μ_h + z_ρ·σ_h/η`` bounds the HP demand, ``F_h = C − clip(⌊U_h⌋,
0, C)`` GPUs are expected to stay free of HP, and a guarantee class of d hours gets
``Q_d = min_{h ≤ d} F_h``. η = 1 is the plain ρ-quantile; η > 1 narrows the margin (more LP),
η < 1 widens it. An earlier reading multiplied F by η, which cannot help when F = 0 (the forecast
mean alone fills the pool): η then sat at its clamp while the quota stayed 0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist

import numpy as np

from gfs_opt.model import MILLI, Params, PoolForecast, Round


@functools.lru_cache(maxsize=16)
def _z(rho: float) -> float:
    return NormalDist().inv_cdf(rho)


def demand_bound(forecast: PoolForecast, rho: float, eta: float = 1.0) -> np.ndarray:
    """U_h = μ_h + z_ρ·σ_h/η (GPUs): the HP demand the quota plans for."""
    return forecast.mean + _z(rho) * np.maximum(forecast.std, 0.0) / eta


def free_of_hp(forecast: PoolForecast, capacity: int, rho: float, eta: float = 1.0) -> np.ndarray:
    """F_h = C − clip(⌊U_h⌋, 0, C)."""
    return capacity - np.clip(np.floor(demand_bound(forecast, rho, eta)), 0, capacity)


def class_hours(guarantee_h: float, horizon_h: int) -> int:
    """Forecast hours a window of ``guarantee_h`` hours starting now can touch: h = 0..⌈d⌉."""
    return min(horizon_h, math.ceil(guarantee_h) + 1)


def pool_quota(forecast: PoolForecast | None, capacity: int, eta: float, guarantee_h: float,
               params: Params, has_history: bool = True) -> int:
    """Q_{p,d} = min_{h ≤ d} F_h in milli-GPU; a pool without HP history gets Q = C."""
    return class_quotas(forecast, capacity, eta, (guarantee_h,), params, has_history)[0]


def class_quotas(forecast: PoolForecast | None, capacity: int, eta: float,
                 guarantee_h: Sequence[float], params: Params,
                 has_history: bool = True) -> list[int]:
    """`pool_quota` for several guarantee classes of one pool (F_h computed once)."""
    if forecast is None or not has_history or len(forecast.mean) == 0:
        return [capacity * MILLI] * len(guarantee_h)
    free = free_of_hp(forecast, capacity, params.rho, eta)
    return [int(free[:class_hours(d, len(free))].min()) * MILLI for d in guarantee_h]


def rule_quotas(rnd: Round, eta: Mapping[str, float] | None = None, *,
                forecasts: Mapping[str, PoolForecast] | None = None,
                history: Mapping[str, bool] | None = None) -> dict[tuple[str, float], int]:
    """Quota (milli-GPU) per (pool, guarantee class) for a round.

    ``eta``, ``forecasts`` and ``history`` (whether a pool has HP history) replace the round's
    own where given: a refresh computes them before the engine hands them back in a round.
    """
    fcs = rnd.forecasts if forecasts is None else forecasts
    out: dict[tuple[str, float], int] = {}
    for pool in rnd.state.pools:
        status = rnd.pool_status(pool)
        e = status.eta if eta is None else eta.get(pool, status.eta)
        has = status.has_hp_history if history is None else history.get(pool, status.has_hp_history)
        classes = rnd.params.guarantee_classes
        quotas = class_quotas(fcs.get(pool), rnd.state.capacity_gpus(pool), e, classes,
                              rnd.params, has)
        for d, q in zip(classes, quotas, strict=True):
            out[(pool, d)] = q
    return out
