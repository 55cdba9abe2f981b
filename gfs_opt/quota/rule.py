"""The paper's spot-quota rule (SQA, GFS-SPEC §2.2) with η feedback on the safety margin.

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

from gfs_opt.model import MILLI, Params, PoolForecast, PoolStatus, Round

#: the growth branch needs an LP job that has waited this long on the quota
QUOTA_WAIT_S = 3600.0


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


#: the η rules `update_eta` knows
ETA_RULES = ("attributable", "paper")


def check_eta_rule(rule: str) -> None:
    """ValueError unless ``rule`` is one of `ETA_RULES`."""
    if rule not in ETA_RULES:
        raise ValueError(f"unknown η rule {rule!r}; expected one of {', '.join(ETA_RULES)}")


def update_eta(status: PoolStatus, params: Params, quota_wait: float | None,
               rule: str = "paper") -> float:
    """η feedback (GFS-SPEC §2.2 step 4); ``rule="attributable"`` is GFS's rule in gfs_opt
    (`_attributable_eta`), ``"paper"`` the paper's, below.

    The paper's: from the eviction rate ER of the last H hours.

    ``quota_wait``: how long the oldest LP job that the quota (and nothing else) keeps from
    starting has waited, or None when no LP job waits on the quota. With no window ended in the
    last H hours, ER counts as 0 while LP jobs wait on the quota (otherwise a low η that starves
    every LP job would never see a window again and never recover) and η is left alone when none
    waits. ER ≥ 1.5(1−ρ) shrinks η by (1−ρ)/ER; ER ≤ 0.5(1−ρ) grows it by 1.5 − ER/(1−ρ) once
    that job has waited over an hour. Bounded to [η_min, η_max].
    """
    eta = status.eta
    if params.eta_static:
        return eta
    check_eta_rule(rule)
    if rule == "attributable":
        return _attributable_eta(status, params, quota_wait)
    windows = status.recent_failed + status.recent_succeeded
    if windows == 0 and quota_wait is None:
        return eta
    er = status.recent_failed / windows if windows else 0.0
    return _eta_step(eta, er, params, quota_wait)


def _eta_step(eta: float, er: float, params: Params, quota_wait: float | None) -> float:
    """One move of η: shrink by (1−ρ)/ER when ER ≥ 1.5(1−ρ); otherwise grow by 1.5 − ER/(1−ρ)
    when ER ≤ 0.5(1−ρ) and an LP job has waited on the quota for over an hour; bounded to
    [η_min, η_max]."""
    target = 1.0 - params.rho
    if er >= 1.5 * target:
        eta *= target / er
    elif er <= 0.5 * target and quota_wait is not None and quota_wait > QUOTA_WAIT_S:
        eta *= 1.5 - er / target
    return min(params.eta_max, max(params.eta_min, eta))


def _attributable_eta(status: PoolStatus, params: Params, quota_wait: float | None) -> float:
    """η moves on the evictions the quota answers for (formulations/spot_quota.md, "η rule").

    Only windows broken while HP demand exceeded the quota's plan U_0 count (a forecast error a
    wider margin would have absorbed); evictions with HP inside the plan come from where LP sits
    and no η prevents them. The evidence is the windows ended under the current η (since it last
    moved) within the last ``eta_window_h`` hours: each outcome moves η once, where a sliding
    window re-reads a burst at every hourly update and compounds one burst into a fall to the
    floor. ERq = eta_failed_quota / eta_windows, then the paper's step.

    Growth above η = 1 must keep the promise too: the windows that only the growth let in (the
    band above the quota at η = 1) fail at their own rate, which the pool's average hides. While
    that band's failure rate over the last ``eta_band_window_h`` hours breaks the promise
    (above 1 − ρ), η does not grow beyond max(η, 1); it still shrinks, and a low η still grows
    back to 1, where there is no band.
    """
    er = status.eta_failed_quota / status.eta_windows if status.eta_windows else 0.0
    eta = _eta_step(status.eta, er, params, quota_wait)
    if eta > max(status.eta, 1.0) and band_breaks_promise(status, params.rho):
        return max(status.eta, 1.0)
    return eta


#: one-sided 95 % normal quantile: the band is held to its promise on evidence, not on noise
_Z_BAND = 1.6448536269514722


def band_breaks_promise(status: PoolStatus, rho: float) -> bool:
    """Whether the growth band's windows of the last ``eta_band_window_h`` hours fail more often
    than 1 − ρ with 95 % confidence: the Wilson score lower bound of `band_rate` over
    ``band_windows`` outcomes is above 1 − ρ. A few band windows with one failure among them
    (a rate of 50 % on two windows) prove nothing and hold nothing."""
    n = status.band_windows
    if n < 1.0:          # less than one window's worth of band outcomes: no evidence
        return False
    r, z2 = band_rate(status), _Z_BAND * _Z_BAND
    lower = (r + z2 / (2 * n) - _Z_BAND * math.sqrt(r * (1 - r) / n + z2 / (4 * n * n))) / (1 + z2 / n)
    return lower > 1.0 - rho


def band_rate(status: PoolStatus) -> float:
    """The growth band's failure rate over the last ``Params.eta_band_window_h`` hours (0 with
    no band outcome: η ≤ 1 all along, or nothing ended)."""
    return status.band_failed / status.band_windows if status.band_windows > 0.0 else 0.0
