"""GFS (greedy core): forecast → spot quota with η feedback → PTS placement and preemption."""

from __future__ import annotations

from typing import Any

from gfs_opt.model import Decision, Round
from gfs_opt.pending import PTS_ORDER
from gfs_opt.policies.base import GreedyPolicy
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.hp_pass import hp_pass
from gfs_opt.preempt.scoring import EvictionHistory, Placer
from gfs_opt.quota.admission import Quotas, lp_pass
from gfs_opt.quota.spot_quota import SpotQuota


class GFSPolicy(GreedyPolicy):
    """The paper's policy. Options double as the ablations of GFS-SPEC §8.

    forecaster: name for `gfs_opt.forecast.make_forecaster` ("prophet", "week-peak", …).
    static_eta: ablation "static η" (η stays 1).
    use_history: False = ablation "PTS without eviction-history scores" (E(n) ignored).
    victims: "two-pointer" (GFS) or "naive" (ablation: first candidate node, no cost awareness).
    quota: "rule" (paper) or "none" (admit LP whenever it fits).
    eta_every_s: how often the η feedback may act (default hourly; see `SpotQuota`).
    """

    name = "gfs"

    def __init__(self, forecaster: str = "prophet", static_eta: bool = False,
                 use_history: bool = True, victims: str = "two-pointer", quota: str = "rule",
                 aggregation: str = "independent", eta_every_s: float = 3600.0) -> None:
        if quota not in {"rule", "none"}:
            raise ValueError("gfs quota must be 'rule' or 'none'")
        if victims not in {"two-pointer", "naive"}:
            raise ValueError("gfs victims must be 'two-pointer' or 'naive'")
        self.forecaster_name = forecaster
        self.static_eta = static_eta
        self.use_history = use_history
        self.victims = victims
        self.quota_mode = quota
        self.aggregation = aggregation
        self.eta_every_s = eta_every_s
        self.rule = (PreemptRule("naive", "count", first_candidate_only=True) if victims == "naive"
                     else PreemptRule("two-pointer", "gfs"))
        if quota == "rule":
            self.spot = SpotQuota(forecaster, adaptive=not static_eta, aggregation=aggregation,
                                  eta_every_s=eta_every_s)
        self.evictions = EvictionHistory()

    def options(self) -> dict[str, Any]:
        return {"forecaster": self.forecaster_name, "static_eta": self.static_eta,
                "use_history": self.use_history, "victims": self.victims,
                "quota": self.quota_mode, "eta_every_s": self.eta_every_s}

    def placer(self, rnd: Round) -> Placer:
        """Best fit with E(n), from the round's recent evictions, as the tie-break."""
        if not self.use_history:
            return Placer(None, use_history=False)
        return Placer(self.evictions.scores(rnd), use_history=True)

    def hp_step(self, rnd: Round, decision: Decision) -> None:
        hp_pass(rnd, decision, order=PTS_ORDER, placer=self.placer(rnd), victims=self.rule,
                memo=self.fit_memo("hp", preemptive=True))

    def lp_step(self, rnd: Round, decision: Decision, quotas: Quotas | None) -> dict[str, int]:
        return lp_pass(rnd, decision, order=PTS_ORDER, placer=self.placer(rnd), quotas=quotas,
                         memo=self.fit_memo("lp", preemptive=False))
