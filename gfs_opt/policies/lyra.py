"""Lyra (EuroSys'23) baseline: capacity loaning with reclaim-cost-aware preemption.

LP jobs borrow idle capacity; when HP needs it back, the node and GPUs with the lowest per-GPU
victim cost Σ 1/(w·max(g,1)) are reclaimed, so few and small jobs are broken. ``quota="sqa"``
(the policy `lyra+sqa`) caps the borrowed capacity with GFS's spot quota at a static η.
"""

from __future__ import annotations

from typing import Any

from gfs_opt.model import Decision, Round
from gfs_opt.pending import FIFO_ORDER
from gfs_opt.policies.base import GreedyPolicy, shared_quota
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.hp_pass import hp_pass
from gfs_opt.preempt.scoring import BEST_FIT
from gfs_opt.quota.admission import Quotas, lp_pass


class LyraPolicy(GreedyPolicy):
    name = "lyra"

    def __init__(self, quota: str = "none", forecaster: str = "prophet") -> None:
        self.rule = PreemptRule("lyra", "lyra")
        self.quota_mode = quota
        self.forecaster_name = forecaster
        self.spot = shared_quota(quota, forecaster, self.name)

    def options(self) -> dict[str, Any]:
        return {"quota": self.quota_mode,
                **({"forecaster": self.forecaster_name} if self.spot else {})}

    def hp_step(self, rnd: Round, decision: Decision) -> None:
        hp_pass(rnd, decision, order=FIFO_ORDER, placer=BEST_FIT, victims=self.rule,
                memo=self.fit_memo("hp", preemptive=True))

    def lp_step(self, rnd: Round, decision: Decision, quotas: Quotas | None) -> dict[str, int]:
        return lp_pass(rnd, decision, order=FIFO_ORDER, placer=BEST_FIT, quotas=quotas,
                         memo=self.fit_memo("lp", preemptive=False))
