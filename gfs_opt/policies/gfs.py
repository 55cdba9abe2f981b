"""GFS (Duan et al., *GFS: A Preemption-aware Scheduling Framework for GPU Clusters with
Predictive Spot Instance Management*, ASPLOS'26), greedy core.

GFS forecasts each tenant's high-priority GPU demand per pool for the next hours and turns the
forecast into a spot quota per guarantee class: a low-priority ("spot") job of class d starts
only while the pool's running LP GPUs plus its own stay within the GPUs expected to remain free
of HP for its whole d-hour window with probability ρ, and a feedback factor η narrows or widens
that safety margin as the observed eviction rate falls below or rises above 1 − ρ. Jobs are
scheduled by PTS: both queues sorted largest request first (in gfs_opt, LP jobs that have waited
over a day go first, in submit order, so a backlog's small jobs are not starved); a gang goes to
the nodes that fit it most tightly, ties broken by each node's recent eviction history; an HP job
that does not fit evicts LP work, chosen node by node by a two-pointer pass that spares the
costliest work, on the node whose evictions cost least (failure ratio plus wasted GPU time). In
gfs_opt an HP gang of whole-node workers first waits up to an hour for LP jobs to reach the end of
their guarantee window and takes them there, re-queued at their checkpoint, before it evicts, and
every other HP gang gives LP five minutes' notice the same way (`gfs_opt.preempt.boundary`;
departures from the paper, ablations `gfs-no-notice` and `gfs-no-wait`).

Composition: PTS order with aged LP jobs first · spot quota with adaptive η · best fit with E(n) ·
two-pointer victims with the GFS node cost, HP gangs first waiting for boundaries. Its
options are the ablations of GFS-SPEC §8.
"""

from __future__ import annotations

import math
from typing import Any

from gfs_opt.model import HOUR
from gfs_opt.pending import PTS_ORDER, QueueOrder
from gfs_opt.policies.base import ComposedPolicy
from gfs_opt.policies.parts import BestFit, NoQuota, PreemptRule, SpotQuota

#: the notice an LP job gets before an HP gang that does not take whole nodes evicts it (hours):
#: five minutes, the spec's quota-refresh period
NOTICE_H = 5 / 60


class GFSPolicy(ComposedPolicy):
    """The paper's policy. Options double as the ablations of GFS-SPEC §8.

    forecaster: name for `gfs_opt.forecast.make_forecaster` ("prophet", "week-peak", …).
    static_eta: ablation "static η" (η stays at ``quota_eta``, 1 by default).
    use_history: False = ablation "PTS without eviction-history scores" (E(n) ignored).
    victims: "two-pointer" (GFS) or "naive" (ablation: first candidate node, no cost awareness).
    quota: "rule" (paper) or "none" (admit LP whenever it fits).
    eta_every_s: how often the η feedback may act (default hourly; see `SpotQuota`).
    shape: the quota's shape dimension: whole nodes kept free of LP for the forecast
        whole-node HP demand (`gfs_opt.quota.shape`); False = ablation `gfs-no-shape`.
    lp_beside_hp: LP gangs go beside HP work among equally tight nodes; False = ablation
        `gfs-no-beside` (beside other LP, PTS's co-location).
    eta_rule: "attributable" (η moves on the evictions the quota answers for) or "paper"
        (ablation `gfs-paper-eta`: on every eviction of the last H hours).
    gang_victims: an HP gang's victims are chosen with the gang in view (a node's cost shared
        by the workers its victims make room for); False = ablation `gfs-worker-victims`.
    lp_age_h: LP jobs submitted more than this many hours ago (default a day) go first, in
        submit order, before PTS's largest-first order (`QueueOrder.lp_age_s`); None or
        ``math.inf`` = the paper's order alone (ablation `gfs-pts-order`; an override of None
        means "the default" to `make_policy`, as for every option, so pass ``math.inf``).
    hp_wait_h: an HP gang of whole-node workers waits up to this many hours for LP jobs at a
        guarantee-window boundary (re-queued at their checkpoint, no window broken) before it
        evicts (`gfs_opt.preempt.boundary`; default one hour, the default guarantee window d);
        0 = the paper's PTS (ablation `gfs-no-wait`).
    hp_notice_h: every other HP gang that needs LP's GPUs first waits up to this many hours,
        taking only LP jobs at a window boundary meanwhile: the notice LP gets before an
        eviction (default NOTICE_H; 0 = evict at once, as the paper's PTS).
    """

    name = "gfs"

    def __init__(self, forecaster: str = "prophet", static_eta: bool = False,
                 use_history: bool = True, victims: str = "two-pointer", quota: str = "rule",
                 aggregation: str = "independent", eta_every_s: float = 3600.0,
                 shape: bool = True, lp_beside_hp: bool = True,
                 gang_victims: bool = True, quota_eta: float = 1.0,
                 eta_rule: str = "attributable", lp_age_h: float | None = 24.0,
                 hp_wait_h: float = 1.0, hp_notice_h: float = NOTICE_H) -> None:
        if quota not in {"rule", "none"}:
            raise ValueError("gfs quota must be 'rule' or 'none'")
        if victims not in {"two-pointer", "naive"}:
            raise ValueError("gfs victims must be 'two-pointer' or 'naive'")
        if lp_age_h is not None and not lp_age_h > 0:
            raise ValueError("gfs lp_age_h must be a positive number of hours")
        if not 0 <= hp_wait_h < math.inf:
            raise ValueError("gfs hp_wait_h must be a finite number of hours ≥ 0")
        if not 0 <= hp_notice_h < math.inf:
            raise ValueError("gfs hp_notice_h must be a finite number of hours ≥ 0")
        super().__init__(
            order=PTS_ORDER if lp_age_h is None else QueueOrder(lp_age_s=lp_age_h * HOUR),
            admission=SpotQuota(forecaster, adaptive=not static_eta, aggregation=aggregation,
                                eta_every_s=eta_every_s, shape=shape, fixed_eta=quota_eta,
                                eta_rule=eta_rule)
            if quota == "rule" else NoQuota(),
            placement=BestFit(history=use_history, lp_beside_hp=lp_beside_hp),
            victim_rule=(PreemptRule("naive", "count", first_candidate_only=True)
                         if victims == "naive"
                         else PreemptRule("two-pointer", "gfs", gang_aware=gang_victims)),
            hp_wait_s=hp_wait_h * HOUR, hp_notice_s=hp_notice_h * HOUR)
        self.forecaster_name = forecaster
        self.static_eta = static_eta
        self.use_history = use_history
        self.victims = victims
        self.quota_mode = quota
        self.aggregation = aggregation
        self.eta_every_s = eta_every_s
        self.shape = shape
        self.lp_beside_hp = lp_beside_hp
        self.gang_victims = gang_victims
        self.quota_eta = quota_eta
        self.eta_rule = eta_rule
        self.lp_age_h = lp_age_h
        self.hp_wait_h = hp_wait_h
        self.hp_notice_h = hp_notice_h

    def options(self) -> dict[str, Any]:
        return {"forecaster": self.forecaster_name, "static_eta": self.static_eta,
                "use_history": self.use_history, "victims": self.victims,
                "quota": self.quota_mode, "eta_every_s": self.eta_every_s,
                "shape": self.shape, "lp_beside_hp": self.lp_beside_hp,
                "gang_victims": self.gang_victims, "eta_rule": self.eta_rule,
                "lp_age_h": self.lp_age_h,
                "hp_wait_h": self.hp_wait_h, "hp_notice_h": self.hp_notice_h,
                **({"quota_eta": self.quota_eta} if self.quota_eta != 1.0 else {})}
