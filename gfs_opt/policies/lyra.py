"""Lyra (EuroSys'23) baseline: capacity loaning with reclaim-cost-aware preemption.

LP jobs borrow idle capacity with no quota; when HP needs it back, the node and GPUs with the
lowest per-GPU victim cost Σ 1/(w·max(g,1)) are reclaimed, so few and small jobs are broken.
"""

from __future__ import annotations

from gfs_opt.model import Decision, Round
from gfs_opt.policies.base import Policy, hp_pass, lp_pass
from gfs_opt.preempt.greedy import PreemptRule


class LyraPolicy(Policy):
    name = "lyra"

    def __init__(self) -> None:
        self.rule = PreemptRule("lyra", "lyra")

    def decide(self, rnd: Round) -> Decision:
        decision = Decision()
        hp_pass(rnd, decision, rule=self.rule, use_history=False, fifo=True)
        lp_pass(rnd, decision, quotas=None, use_history=False, fifo=True)
        return decision
