"""YARN Capacity Scheduler baseline: FIFO queues with head-of-line blocking.

HP tries a non-preemptive best fit, then evicts LP on one node (newest containers first, the
node needing the fewest victims). The head of a queue blocks the jobs behind it for at most
``hol_timeout_s`` (default 1 h); after that later jobs may pass, as YARN's reservations do
(``reservations-continue-look-all-nodes``). Without the bound, one gang that cannot fit for
weeks (long-running residents hold the GPUs it needs) deadlocks the whole pool. LP needs no quota unless ``quota="static"``: then the quota is
the capacity not used by HP right now (no forecast), a common operator setting.
"""

from __future__ import annotations

from typing import Any

from gfs_opt.model import MILLI, Decision, Round
from gfs_opt.policies.base import Policy, hp_pass, lp_pass
from gfs_opt.preempt.greedy import PreemptRule


class YarnCSPolicy(Policy):
    name = "yarn-cs"

    def __init__(self, quota: str = "none", hol_timeout_s: float = 3600.0) -> None:
        if quota not in {"none", "static"}:
            raise ValueError("yarn-cs quota must be 'none' or 'static'")
        self.quota_mode = quota
        self.hol_timeout_s = hol_timeout_s
        self.rule = PreemptRule("newest", "count")

    def options(self) -> dict[str, Any]:
        return {"quota": self.quota_mode, "hol_timeout_s": self.hol_timeout_s}

    def quotas(self, rnd: Round) -> dict[tuple[str, float], int] | None:
        if self.quota_mode == "none":
            return None
        st = rnd.state
        return {(p, d): int(st.pool_capacity[i] - st.pool_hp[i]) // MILLI * MILLI
                for i, p in enumerate(st.pools) for d in rnd.params.guarantee_classes}

    def decide(self, rnd: Round) -> Decision:
        decision = Decision()
        hp_pass(rnd, decision, rule=self.rule, use_history=False, fifo=True, head_of_line=True,
                hol_timeout_s=self.hol_timeout_s)
        lp_pass(rnd, decision, quotas=self.quotas(rnd), use_history=False, fifo=True,
                head_of_line=True, hol_timeout_s=self.hol_timeout_s)
        return decision
