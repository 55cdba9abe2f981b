"""GFS (Duan et al., *GFS: A Preemption-aware Scheduling Framework for GPU Clusters with
Predictive Spot Instance Management*, ASPLOS'26), greedy core.

GFS forecasts each tenant's high-priority GPU demand per pool for the next hours and turns the
forecast into a spot quota per guarantee class: a low-priority ("spot") job of class d starts
only while the pool's running LP GPUs plus its own stay within the GPUs expected to remain free
of HP for its whole d-hour window with probability ρ, and a feedback factor η narrows or widens
that safety margin as the observed eviction rate falls below or rises above 1 − ρ. Jobs are
scheduled by PTS: both queues sorted largest request first; a gang goes to the nodes that fit it
most tightly, ties broken by each node's recent eviction history; an HP job that does not fit
evicts LP work, chosen node by node by a two-pointer pass that spares the costliest work, on the
node whose evictions cost least (failure ratio plus wasted GPU time).

That is `gfs-paper` (GFS-SPEC §2). gfs_opt's `gfs` replaces some of its parts with the
departures of `gfs_opt.policies.departures` (HP patience, the attributable η rule, the shape
reserve, gang-aware victims, LP beside HP, the aged LP order, HP in submit order), each a named
row with its measured effect; ``departures`` picks them (default: all).

Composition: PTS order · spot quota with the paper's η rule · best fit with E(n) · two-pointer
victims with the GFS node cost, at once (`gfs-paper`); `gfs` adds, by departure, HP patience
before evicting · the attributable η rule · the whole-node shape reserve · gang-aware victims ·
LP beside HP · LP waiting over a day first · HP in submit order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gfs_opt.policies.base import ComposedPolicy
from gfs_opt.policies.departures import (
    ALL_KEYS,
    BY_KEY,
    OPTION_OWNER,
    GFSParts,
    compose,
    departure_keys,
)
from gfs_opt.policies.parts import BestFit, NoQuota, PreemptRule, SpotQuota


class GFSPolicy(ComposedPolicy):
    """GFS as `gfs_opt.policies.departures` composes it. Options:

    departures: the departures from the paper it runs ("all", the default; "none" = the
        published GFS; else keys joined by "+", e.g. "wait+shape").
    hp_wait_h, hp_notice_h: HP patience's waits (departure "wait"; default 1 h and 1 min).
    eta_window_h, eta_band_window_h: the attributable η rule's spans ("attributable-eta").
    lp_age_h: LP jobs waiting longer go first ("aged-order"; default a day).
    An option of a departure the policy leaves out is an error.

    The ablations of the paper's own components (GFS-SPEC §8), on whichever departures:
    forecaster: name for `gfs_opt.forecast.make_forecaster` ("prophet", "week-peak", …).
    static_eta: η stays at ``quota_eta`` (1 by default): the "static η" ablation.
    use_history: False = PTS without eviction-history scores (E(n) ignored).
    victims: "two-pointer" (GFS) or "naive" (first candidate node, no cost awareness).
    quota: "rule" (the spot quota) or "none" (admit LP whenever it fits).
    aggregation: how per-tenant forecasts add up to a pool's ("independent",
        "sum-quantiles", `gfs_opt.forecast.aggregate`; or "calibrated": the independent sum
        with each lead's spread scaled by the RMS of the pool's own standardised errors,
        `gfs_opt.forecast.pool_calibration` — for a high ρ on bursty demand).
    eta_every_s: how often the η feedback may act (default hourly; see `SpotQuota`).
    """

    name = "gfs"

    def __init__(self, departures: str | Iterable[str] | None = None, forecaster: str = "prophet",
                 static_eta: bool = False, use_history: bool = True, victims: str = "two-pointer",
                 quota: str = "rule", aggregation: str = "independent",
                 eta_every_s: float = 3600.0, quota_eta: float = 1.0,
                 hp_wait_h: float | None = None, hp_notice_h: float | None = None,
                 eta_window_h: float | None = None, eta_band_window_h: float | None = None,
                 lp_age_h: float | None = None) -> None:
        if quota not in {"rule", "none"}:
            raise ValueError("gfs quota must be 'rule' or 'none'")
        if victims not in {"two-pointer", "naive"}:
            raise ValueError("gfs victims must be 'two-pointer' or 'naive'")
        self.departures = departure_keys(departures)
        given = {"hp_wait_h": hp_wait_h, "hp_notice_h": hp_notice_h,
                 "eta_window_h": eta_window_h, "eta_band_window_h": eta_band_window_h,
                 "lp_age_h": lp_age_h}
        parts: GFSParts = compose(self.departures, given)
        self.design = parts
        # every option of the chosen departures, as it is in force (defaults filled in)
        self.departure_options = {
            k: (v if v is not None else BY_KEY[OPTION_OWNER[k]].options[k])
            for k, v in given.items() if OPTION_OWNER[k] in self.departures}
        super().__init__(
            order=parts.order,
            admission=SpotQuota(forecaster, adaptive=not static_eta, aggregation=aggregation,
                                eta_every_s=eta_every_s, shape=parts.shape, fixed_eta=quota_eta,
                                eta_rule=parts.eta_rule)
            if quota == "rule" else NoQuota(),
            placement=BestFit(history=use_history, lp_beside_hp=parts.lp_beside_hp),
            victim_rule=(PreemptRule("naive", "count", first_candidate_only=True)
                         if victims == "naive" else parts.victims),
            patience=parts.patience)
        self.forecaster_name = forecaster
        self.static_eta = static_eta
        self.use_history = use_history
        self.victims = victims
        self.quota_mode = quota
        self.aggregation = aggregation
        self.eta_every_s = eta_every_s
        self.quota_eta = quota_eta

    @classmethod
    def unsettable(cls, fixed: dict[str, Any]) -> set[str]:
        """The options a registered variant (its ``fixed`` options) cannot take: those of the
        departures it leaves out."""
        if "departures" in fixed:
            keys = set(departure_keys(fixed["departures"]))
            return {o for o, owner in OPTION_OWNER.items() if owner not in keys}
        return set()

    def options(self) -> dict[str, Any]:
        chosen = "all" if self.departures == ALL_KEYS else ("+".join(self.departures) or "none")
        return {"departures": chosen, **self.departure_options,
                "forecaster": self.forecaster_name, "static_eta": self.static_eta,
                "use_history": self.use_history, "victims": self.victims,
                "quota": self.quota_mode, "aggregation": self.aggregation,
                "eta_every_s": self.eta_every_s,
                **({"quota_eta": self.quota_eta} if self.quota_eta != 1.0 else {})}
