"""Lyra (EuroSys'23) baseline: capacity loaning with reclaim-cost-aware preemption.

LP jobs borrow idle capacity; when HP needs it back, the node and GPUs with the lowest per-GPU
victim cost Σ 1/(w·max(g,1)) are reclaimed, so few and small jobs are broken. ``quota="sqa"``
(the policy `lyra+sqa`) caps the borrowed capacity with GFS's spot quota at a static η.
"""

from __future__ import annotations

from typing import Any

from gfs_opt.model import Decision, Round
from gfs_opt.policies.base import Policy, hp_pass, shared_quota
from gfs_opt.preempt.greedy import PreemptRule


class LyraPolicy(Policy):
    name = "lyra"

    def __init__(self, quota: str = "none", forecaster: str = "prophet") -> None:
        self.rule = PreemptRule("lyra", "lyra")
        self.quota_mode = quota
        self.forecaster_name = forecaster
        self.spot = shared_quota(quota, forecaster, self.name)

    def options(self) -> dict[str, Any]:
        return {"quota": self.quota_mode,
                **({"forecaster": self.forecaster_name} if self.spot else {})}

    def decide(self, rnd: Round) -> Decision:
        decision = Decision()
        quotas = self.quotas_for_pass(rnd, decision)
        hp_pass(rnd, decision, rule=self.rule, use_history=False, fifo=True,
                memo=self.fit_memo("hp", preemptive=True))
        self.lp_pass_under_quota(rnd, decision, quotas, use_history=False, fifo=True,
                                 memo=self.fit_memo("lp", preemptive=False))
        return decision
