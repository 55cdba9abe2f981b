"""YARN Capacity Scheduler baseline: FIFO queues with head-of-line blocking.

HP tries a non-preemptive best fit, then evicts LP on one node (newest containers first, the
node needing the fewest victims). LP needs no quota unless ``quota="static"``: then the quota is
the capacity not used by HP right now (no forecast), a common operator setting.
"""

from __future__ import annotations

from typing import Any

from gfs_opt.model import MILLI, Decision, Round
from gfs_opt.policies.base import Policy, hp_pass, lp_pass
from gfs_opt.preempt.greedy import PreemptRule


class YarnCSPolicy(Policy):
    name = "yarn-cs"

    def __init__(self, quota: str = "none") -> None:
        if quota not in {"none", "static"}:
            raise ValueError("yarn-cs quota must be 'none' or 'static'")
        self.quota_mode = quota
        self.rule = PreemptRule("newest", "count")

    def options(self) -> dict[str, Any]:
        return {"quota": self.quota_mode}

    def quotas(self, rnd: Round) -> dict[tuple[str, float], int] | None:
        if self.quota_mode == "none":
            return None
        st = rnd.state
        return {(p, d): int(st.pool_capacity[i] - st.pool_hp[i]) // MILLI * MILLI
                for i, p in enumerate(st.pools) for d in rnd.params.guarantee_classes}

    def decide(self, rnd: Round) -> Decision:
        decision = Decision()
        hp_pass(rnd, decision, rule=self.rule, use_history=False, fifo=True, head_of_line=True)
        lp_pass(rnd, decision, quotas=self.quotas(rnd), use_history=False, fifo=True,
                head_of_line=True)
        return decision
