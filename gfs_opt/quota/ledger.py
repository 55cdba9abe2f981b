"""η's evidence, kept by the spot quota from the outcomes a scheduler reports.

The simulator and the live Slurm controller report each ended guarantee window
(`gfs_opt.model.WindowOutcome`: succeeded or broken, with the pool's LP GPUs then and, for a
window broken by an HP eviction, the pool's HP GPUs once that eviction's decision applies). The
ledger turns them into what the η rules read at a quota refresh (`EtaEvidence`):

* the windows of the last H hours, failed and succeeded — the paper's eviction rate ER
  (GFS-SPEC §2.2 step 4);
* of the failures, the *quota-attributable* ones: broken while HP demand exceeded the plan
  U_0 = μ_0 + z_ρ·σ_0/η the quota was set for (a forecast error a wider margin would have
  absorbed), or with no plan at all. Evictions with HP inside the plan come from where LP sits
  or from LP admitted under an earlier, larger quota; no η prevents those;
* the windows since η last moved within the attributable rule's span, and their attributable
  failures (each outcome moves η at most once);
* the growth band: LP that only η > 1 let in (above the quota at η = 1). A success weighs the
  band's share of the pool's running LP GPUs; a failure weighs η's share of the overrun behind
  it (of the HP demand above the current plan, the part the plan at η = 1 would have left room
  for).

The plan is the quota's own (the forecasts and η of its latest refresh, `plan`), so the same
ledger gives the same evidence in a replay and on a live cluster. Evidence is trimmed and read
only at quota refreshes (`refresh`); between them the η rules see the last reading.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping

from gfs_opt.model import (
    MILLI,
    NO_EVIDENCE,
    EtaEvidence,
    Params,
    PoolForecast,
    WindowOutcome,
)
from gfs_opt.quota.rule import demand_bound, free_of_hp

HOUR = 3600.0


class _PoolLedger:
    """One pool's outcomes over the three spans and their running counts."""

    __slots__ = ("band", "band_sums", "evidence", "evidence_quota", "recent", "recent_ok",
                 "recent_quota")

    def __init__(self) -> None:
        # (t, ok, quota-attributable) of the last H hours, with counts of successes and of
        # attributable failures
        self.recent: deque[tuple[float, bool, bool]] = deque()
        self.recent_ok = 0
        self.recent_quota = 0
        # the same since η last moved, within the attributable rule's span
        self.evidence: deque[tuple[float, bool, bool]] = deque()
        self.evidence_quota = 0
        # (t, window weight, failure weight) of the growth band, and their sums
        self.band: deque[tuple[float, float, float]] = deque()
        self.band_sums = [0.0, 0.0]


class EtaLedger:
    """η's evidence per pool (module doc). ``capacity``: GPUs per pool; spans in hours."""

    def __init__(self, pools: Iterable[str], capacity: Mapping[str, int], params: Params,
                 evidence_h: float, band_h: float) -> None:
        self.params = params
        self.capacity = dict(capacity)
        self.horizon_s = params.horizon_h * HOUR
        self.evidence_s = evidence_h * HOUR
        self.band_s = band_h * HOUR
        self.pools = {p: _PoolLedger() for p in pools}
        self.readings: dict[str, EtaEvidence] = {}
        self.forecasts: Mapping[str, PoolForecast] = {}
        self.eta: Mapping[str, float] = {}
        # per pool: (forecast, η, plan U_0) and (forecast, η, U_0 at η = 1, F_0 at η = 1,
        # F_0 at η), kept while neither moves (outcomes come far more often than refreshes)
        self._plan_cache: dict[str, tuple[PoolForecast, float, float]] = {}
        self._band_cache: dict[str, tuple[PoolForecast, float, float, float, float]] = {}

    # ---- what the quota tells it --------------------------------------------------------
    def plan(self, forecasts: Mapping[str, PoolForecast], eta: Mapping[str, float]) -> None:
        """The forecasts and η of the quota's latest refresh: what attribution measures against."""
        self.forecasts = forecasts
        self.eta = eta

    def moved(self, pool: str) -> None:
        """η moved in ``pool``: the next move reads only outcomes newer than this one."""
        led = self.pools.get(pool)
        if led is not None:
            led.evidence.clear()
            led.evidence_quota = 0

    # ---- what the scheduler reports ------------------------------------------------------
    def record(self, ev: WindowOutcome) -> None:
        led = self.pools.get(ev.pool)
        if led is None:
            return
        pool, ok, t = ev.pool, ev.ok, ev.t
        if ok:
            quota = False
            band, band_failed = self._success_weight(pool, ev.lp_milli)
        else:
            quota, growth = self.attribution(pool, ev.hp_milli)
            band = band_failed = growth
        led.recent.append((t, ok, quota))
        led.recent_ok += ok
        led.recent_quota += quota
        led.evidence.append((t, ok, quota))
        led.evidence_quota += quota
        if band > 0.0:
            led.band.append((t, band, band_failed))
            led.band_sums[0] += band
            led.band_sums[1] += band_failed

    # ---- what the η rules read --------------------------------------------------------------
    def refresh(self, t: float) -> None:
        """Drop outcomes older than each span at a refresh at ``t`` and take a new reading."""
        for pool, led in self.pools.items():
            recent = led.recent
            while recent and recent[0][0] < t - self.horizon_s:
                _t, was_ok, was_quota = recent.popleft()
                led.recent_ok -= was_ok
                led.recent_quota -= was_quota
            evidence = led.evidence
            while evidence and evidence[0][0] < t - self.evidence_s:
                led.evidence_quota -= evidence.popleft()[2]
            band, sums = led.band, led.band_sums
            while band and band[0][0] < t - self.band_s:
                _t, was_band, was_failed = band.popleft()
                sums[0] -= was_band
                sums[1] -= was_failed
            if not band:        # no drift of float sums once the band has no outcome left
                sums[0] = sums[1] = 0.0
            band_windows = max(sums[0], 0.0)     # float sums' drift clipped
            band_failed = min(max(sums[1], 0.0), band_windows)
            reading = EtaEvidence(led.recent_ok, len(recent) - led.recent_ok, led.recent_quota,
                                  len(evidence), led.evidence_quota, band_windows, band_failed)
            if self.readings.get(pool) != reading:
                self.readings[pool] = reading

    def reading(self, pool: str) -> EtaEvidence:
        """The evidence of ``pool`` as the last `refresh` read it."""
        return self.readings.get(pool, NO_EVIDENCE)

    # ---- attribution -------------------------------------------------------------------------
    def plan_gpus(self, pool: str) -> float:
        """The plan U_0 = μ_0 + z_ρ·σ_0/η the pool's quota is set for (GPUs), NaN without a
        forecast."""
        fc = self.forecasts.get(pool)
        if fc is None or len(fc.mean) == 0:
            return math.nan
        eta = self.eta.get(pool, 1.0)
        got = self._plan_cache.get(pool)
        if got is None or got[0] is not fc or got[1] != eta:
            got = self._plan_cache[pool] = (fc, eta, float(demand_bound(fc, self.params.rho,
                                                                       eta)[0]))
        return got[2]

    def attribution(self, pool: str, hp_milli: int | None) -> tuple[bool, float]:
        """(whether a window broken with the pool's HP at ``hp_milli`` is the quota's to answer
        for, η's share of the overrun behind it). Without an HP context (not an HP eviction) it
        counts as the quota's, with no share in the growth band."""
        if hp_milli is None:
            return True, 0.0
        plan = self.plan_gpus(pool)
        attributable = math.isnan(plan) or hp_milli > plan * MILLI
        got = self._band_plans(pool)
        hp = hp_milli / MILLI
        growth = (max(0.0, min(1.0, (min(hp, got[0]) - plan) / (hp - plan)))
                  if attributable and got is not None and hp > plan else 0.0)
        return attributable, growth

    def _band_plans(self, pool: str) -> tuple[float, float, float] | None:
        """(plan U_0 at η = 1, GPUs free of HP F_0 at η = 1, F_0 at the current η); None without
        a forecast or at η ≤ 1, where there is no growth band."""
        eta = self.eta.get(pool, 1.0)
        fc = self.forecasts.get(pool)
        if eta <= 1.0 or fc is None or len(fc.mean) == 0:
            return None
        got = self._band_cache.get(pool)
        if got is None or got[0] is not fc or got[1] != eta:
            cap, rho = self.capacity[pool], self.params.rho
            got = (fc, eta, float(demand_bound(fc, rho, 1.0)[0]),
                   float(free_of_hp(fc, cap, rho, 1.0)[0]), float(free_of_hp(fc, cap, rho, eta)[0]))
            self._band_cache[pool] = got
        return got[2], got[3], got[4]

    def _success_weight(self, pool: str, lp_milli: int) -> tuple[float, float]:
        """A success's (window weight, failure weight) in the growth band: the band's share of
        the pool's running LP GPUs (the chance that it ran in the band)."""
        plans = self._band_plans(pool)
        if plans is None:
            return 0.0, 0.0
        _plan1, free1, free_eta = plans
        lp = float(lp_milli) / MILLI
        if lp <= 0.0:
            return 0.0, 0.0
        return max(0.0, min(lp, free_eta) - free1) / lp, 0.0
