"""GFS (greedy core): forecast → spot quota with η feedback → PTS placement and preemption."""

from __future__ import annotations

from typing import Any

from gfs_opt.model import ClusterState, Decision, Params, Round
from gfs_opt.policies.base import Policy, hp_pass
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.scoring import default_eviction_scores, eviction_scores
from gfs_opt.quota.spot_quota import SpotQuota


class GFSPolicy(Policy):
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

    def options(self) -> dict[str, Any]:
        return {"forecaster": self.forecaster_name, "static_eta": self.static_eta,
                "use_history": self.use_history, "victims": self.victims,
                "quota": self.quota_mode, "eta_every_s": self.eta_every_s}

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        super().reset(state, params, origin)
        self.e_score = default_eviction_scores(state.n_nodes)

    def refresh_scores(self, rnd: Round) -> None:
        """E(n) from the recent evictions, at every quota refresh (300 s)."""
        if rnd.quota_due and rnd.node_evictions_1h is not None and rnd.node_evictions_1d is not None:
            self.e_score = eviction_scores(rnd.node_evictions_1h, rnd.node_evictions_1d)

    def decide(self, rnd: Round) -> Decision:
        decision = Decision()
        quotas = self.quotas_for_pass(rnd, decision)
        self.refresh_scores(rnd)
        e = self.e_score if self.use_history else None
        hp_pass(rnd, decision, rule=self.rule, e_score=e, use_history=self.use_history,
                memo=self.fit_memo("hp", preemptive=True))
        self.lp_pass_under_quota(rnd, decision, quotas, e_score=e, use_history=self.use_history,
                                 memo=self.fit_memo("lp", preemptive=False))
        return decision
