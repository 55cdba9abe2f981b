"""η's feedback rules (GFS-SPEC §2.2 step 4): the part of the spot quota that moves η.

η divides the quota's safety margin (U = μ + z_ρ·σ/η): shrinking it widens the margin when
evictions run above the promise 1 − ρ, growing it narrows the margin when they run well below and
LP jobs wait on the quota. Both rules read the pool's `EtaEvidence` (`gfs_opt.quota.ledger`) at
a quota refresh and return the new η, bounded to [η_min, η_max] (`Params`).

* `PaperEta` — the paper's rule: the eviction rate ER of the last H hours.
* `AttributableEta` — gfs_opt's departure (`gfs_opt.policies.departures`, "attributable-eta"):
  η moves on the evictions the quota answers for, each outcome once, and grows above 1 only
  while the windows that growth let in keep the promise (formulations/spot_quota.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Protocol

from gfs_opt.model import EtaEvidence, Params

#: the growth branch needs an LP job that has waited this long on the quota
QUOTA_WAIT_S = 3600.0


class EtaRule(Protocol):
    """How η moves at a feedback step; the spans its evidence needs (hours)."""

    @property
    def name(self) -> str: ...

    def spans(self, params: Params) -> tuple[float, float]:
        """(hours of windows since η last moved, hours of growth-band outcomes) to keep."""

    def update(self, eta: float, evidence: EtaEvidence, params: Params,
               quota_wait: float | None) -> float:
        """The new η of a pool from its ``evidence``; ``quota_wait``: how long the oldest LP
        job that the quota (and nothing else) keeps from starting has waited, None when none
        waits on the quota."""


def eta_step(eta: float, er: float, params: Params, quota_wait: float | None) -> float:
    """One move of η: shrink by (1−ρ)/ER when ER ≥ 1.5(1−ρ); otherwise grow by 1.5 − ER/(1−ρ)
    when ER ≤ 0.5(1−ρ) and an LP job has waited on the quota for over an hour; bounded to
    [η_min, η_max]."""
    target = 1.0 - params.rho
    if er >= 1.5 * target:
        eta *= target / er
    elif er <= 0.5 * target and quota_wait is not None and quota_wait > QUOTA_WAIT_S:
        eta *= 1.5 - er / target
    return min(params.eta_max, max(params.eta_min, eta))


@dataclass(frozen=True)
class PaperEta:
    """The paper's rule: from the eviction rate ER of the last H hours.

    With no window ended in the last H hours, ER counts as 0 while LP jobs wait on the quota
    (otherwise a low η that starves every LP job would never see a window again and never
    recover) and η is left alone when none waits.
    """

    name: ClassVar[str] = "paper"

    def spans(self, params: Params) -> tuple[float, float]:
        return float(params.horizon_h), 24.0

    def update(self, eta: float, evidence: EtaEvidence, params: Params,
               quota_wait: float | None) -> float:
        windows = evidence.recent_failed + evidence.recent_succeeded
        if windows == 0 and quota_wait is None:
            return eta
        er = evidence.recent_failed / windows if windows else 0.0
        return eta_step(eta, er, params, quota_wait)



@dataclass(frozen=True)
class AttributableEta:
    """η moves on the evictions the quota answers for (formulations/spot_quota.md, "η rule").

    Only windows broken while HP demand exceeded the quota's plan U_0 count (a forecast error a
    wider margin would have absorbed); evictions with HP inside the plan come from where LP sits
    and no η prevents them. The evidence is the windows ended under the current η (since it last
    moved) within the last ``window_h`` hours: each outcome moves η once, where a sliding window
    re-reads a burst at every hourly update and compounds one burst into a fall to the floor.
    ERq = eta_failed_quota / eta_windows, then the paper's step.

    Growth above η = 1 must keep the promise too: the windows that only the growth let in (the
    band above the quota at η = 1) fail at their own rate, which the pool's average hides. While
    that band's failure rate over the last ``band_window_h`` hours breaks the promise (above
    1 − ρ), η does not grow beyond max(η, 1); it still shrinks, and a low η still grows back to
    1, where there is no band.

    window_h: hours of evidence (the forecast horizon H by default, as the paper's rule; a day
        was measured: it holds a burst of evictions for 24 h and starves LP meanwhile).
    band_window_h: hours of growth-band outcomes read before growing above 1 (a day: one cycle
        of the HP demand the band is exposed to; its failures come in daily bursts).
    """

    name: ClassVar[str] = "attributable"
    window_h: float = 4.0
    band_window_h: float = 24.0

    def __post_init__(self) -> None:
        for key, v in (("eta_window_h", self.window_h),
                       ("eta_band_window_h", self.band_window_h)):
            if not 0 < v < math.inf:
                raise ValueError(f"{key} must be a positive finite number of hours, got {v}")

    def spans(self, params: Params) -> tuple[float, float]:
        return self.window_h, self.band_window_h

    def update(self, eta: float, evidence: EtaEvidence, params: Params,
               quota_wait: float | None) -> float:
        er = (evidence.eta_failed_quota / evidence.eta_windows if evidence.eta_windows
              else 0.0)
        new = eta_step(eta, er, params, quota_wait)
        if new > max(eta, 1.0) and band_breaks_promise(evidence, params.rho):
            return max(eta, 1.0)
        return new



#: one-sided 95 % normal quantile: the band is held to its promise on evidence, not on noise
_Z_BAND = 1.6448536269514722


def band_breaks_promise(evidence: EtaEvidence, rho: float) -> bool:
    """Whether the growth band's windows fail more often than 1 − ρ with 95 % confidence: the
    Wilson score lower bound of `band_rate` over ``band_windows`` outcomes is above 1 − ρ. A few
    band windows with one failure among them (a rate of 50 % on two windows) prove nothing and
    hold nothing."""
    n = evidence.band_windows
    if n < 1.0:          # less than one window's worth of band outcomes: no evidence
        return False
    r, z2 = band_rate(evidence), _Z_BAND * _Z_BAND
    lower = (r + z2 / (2 * n) - _Z_BAND * math.sqrt(r * (1 - r) / n + z2 / (4 * n * n))) / (1 + z2 / n)
    return lower > 1.0 - rho


def band_rate(evidence: EtaEvidence) -> float:
    """The growth band's failure rate over its span (0 with no band outcome: η ≤ 1 all along,
    or nothing ended)."""
    return evidence.band_failed / evidence.band_windows if evidence.band_windows > 0.0 else 0.0
