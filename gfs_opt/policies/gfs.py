"""GFS (greedy core): forecast → spot quota with η feedback → PTS placement and preemption."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gfs_opt.model import ClusterState, Decision, Params, Round, SolveReport
from gfs_opt.policies.base import Policy, hp_pass, lp_pass
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.scoring import default_eviction_scores, eviction_scores
from gfs_opt.quota.rule import rule_quotas, update_eta


class GFSPolicy(Policy):
    """The paper's policy. Options double as the ablations of GFS-SPEC §8.

    forecaster: name for `gfs_opt.forecast.make_forecaster` ("prophet", "week-peak", …).
    static_eta: ablation "static η" (η stays 1).
    use_history: False = ablation "PTS without eviction-history scores" (E(n) ignored).
    victims: "two-pointer" (GFS) or "naive" (ablation: first candidate node, no cost awareness).
    quota: "rule" (paper) or "none" (admit LP whenever it fits).
    eta_every_s: how often the η feedback acts (default hourly). The quota refreshes every 300 s
        but ER looks back H hours; applying the multiplicative correction at every refresh would
        compound one measurement up to 48 times (η hits its clamp after a single eviction), so
        the correction acts at most once per ``eta_every_s`` on the ER of the last H hours.
    """

    name = "gfs"

    def __init__(self, forecaster: str = "prophet", static_eta: bool = False,
                 use_history: bool = True, victims: str = "two-pointer", quota: str = "rule",
                 aggregation: str = "independent", eta_every_s: float = 3600.0) -> None:
        self.forecaster_name = forecaster
        self.static_eta = static_eta
        self.use_history = use_history
        self.victims = victims
        self.quota_mode = quota
        self.aggregation = aggregation
        self.eta_every_s = eta_every_s
        self.rule = (PreemptRule("naive", "count", first_candidate_only=True) if victims == "naive"
                     else PreemptRule("two-pointer", "gfs"))

    def options(self) -> dict[str, Any]:
        return {"forecaster": self.forecaster_name, "static_eta": self.static_eta,
                "use_history": self.use_history, "victims": self.victims,
                "quota": self.quota_mode, "eta_every_s": self.eta_every_s}

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        super().reset(state, params, origin)
        if self.static_eta:
            params.eta_static = True
        self.e_score = default_eviction_scores(state.n_nodes)
        self.quotas: dict[tuple[str, float], int] = {}
        self.last_eta_update = -float("inf")
        self.provider = None
        if self.quota_mode == "rule":
            from gfs_opt.forecast.provider import ForecastProvider

            self.provider = ForecastProvider(
                self.forecaster_name, horizon_h=params.horizon_h, rho=params.rho,
                aggregation=self.aggregation,
                refit_from=max(0.0, params.eval_start - 86_400.0),
                **({"origin": origin} if origin is not None else {}))

    def observe_hour(self, t: float, hp_usage: Mapping[tuple[str, str], float]) -> None:
        if self.provider is not None:
            # the maximum belongs to the hour that just ended
            self.provider.observe(t - 3600.0, hp_usage)

    def on_day(self, t: float) -> None:
        if self.provider is not None:
            self.provider.refit(t)

    def refresh(self, rnd: Round, decision: Decision) -> None:
        """Every 300 s: η feedback, E(n) from recent evictions, new quotas."""
        eta = {}
        feedback = rnd.time - self.last_eta_update >= self.eta_every_s
        if feedback:
            self.last_eta_update = rnd.time
        for pool in rnd.state.pools:
            status = rnd.pool_status(pool)
            eta[pool] = update_eta(status, rnd.params) if feedback else status.eta
            if self.provider is not None:
                status.has_hp_history = self.provider.has_history(pool)
        if rnd.node_evictions_1h is not None and rnd.node_evictions_1d is not None:
            self.e_score = eviction_scores(rnd.node_evictions_1h, rnd.node_evictions_1d)
        if self.provider is not None:
            rnd.forecasts = self.provider.pool_forecasts(rnd.time)
        self.quotas = rule_quotas(rnd, eta)
        decision.eta = eta
        decision.quotas = dict(self.quotas)
        decision.reports.append(SolveReport(step="quota", method="rule", status="heuristic",
                                            objective=float(sum(self.quotas.values())) / 1000.0))

    def decide(self, rnd: Round) -> Decision:
        decision = Decision()
        if self.quota_mode == "rule" and (rnd.quota_due or not self.quotas):
            self.refresh(rnd, decision)
        e = self.e_score if self.use_history else None
        hp_pass(rnd, decision, rule=self.rule, e_score=e, use_history=self.use_history)
        quotas = self.quotas if self.quota_mode == "rule" else None
        lp_pass(rnd, decision, quotas=quotas, e_score=e, use_history=self.use_history)
        return decision
