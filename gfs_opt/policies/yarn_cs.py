"""YARN Capacity Scheduler baseline: FIFO queues with head-of-line blocking.

HP tries a non-preemptive best fit, then evicts LP on one node (newest containers first, the
node needing the fewest victims). The head of a queue blocks the jobs behind it for at most
``hol_timeout_s`` (default 1 h); after that later jobs may pass, as YARN's reservations do
(``reservations-continue-look-all-nodes``). Without the bound, one gang that cannot fit for
weeks (long-running residents hold the GPUs it needs) deadlocks the whole pool. A head the
quota refuses blocks the line the same way, and for no longer.

LP admission: no quota (``quota="none"``); GFS's spot quota at a static η (``"sqa"``, the policy
`yarn-cs+sqa`, how the authors ran YARN-CS); or ``"static"``: the capacity not used by HP right
now (no forecast), a common operator setting.
"""

from __future__ import annotations

from typing import Any

from gfs_opt.model import MILLI, Decision, Round
from gfs_opt.pending import QueueOrder
from gfs_opt.policies.base import GreedyPolicy, shared_quota
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.hp_pass import hp_pass
from gfs_opt.preempt.scoring import BEST_FIT
from gfs_opt.quota.admission import Quotas, lp_pass


class YarnCSPolicy(GreedyPolicy):
    name = "yarn-cs"

    def __init__(self, quota: str = "none", hol_timeout_s: float = 3600.0,
                 forecaster: str = "prophet") -> None:
        self.quota_mode = quota
        self.hol_timeout_s = hol_timeout_s
        self.forecaster_name = forecaster
        self.rule = PreemptRule("newest", "count")
        self.order = QueueOrder(fifo=True, head_of_line=True, hol_timeout_s=hol_timeout_s)
        self.spot = None if quota == "static" else shared_quota(quota, forecaster, self.name)

    def options(self) -> dict[str, Any]:
        return {"quota": self.quota_mode, "hol_timeout_s": self.hol_timeout_s,
                **({"forecaster": self.forecaster_name} if self.spot else {})}

    def static_quotas(self, rnd: Round) -> dict[tuple[str, float], int]:
        st = rnd.state
        return {(p, d): int(st.pool_capacity[i] - st.pool_hp[i]) // MILLI * MILLI
                for i, p in enumerate(st.pools) for d in rnd.params.guarantee_classes}

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Quotas | None:
        if self.quota_mode == "static":
            return self.static_quotas(rnd)
        return super().quotas_for_pass(rnd, decision)

    def standalone_quotas(self, rnd: Round) -> Quotas | None:
        if self.quota_mode == "static":
            return self.static_quotas(rnd)
        return super().standalone_quotas(rnd)

    def hp_step(self, rnd: Round, decision: Decision) -> None:
        hp_pass(rnd, decision, order=self.order, placer=BEST_FIT, victims=self.rule,
                memo=self.fit_memo("hp", preemptive=True))

    def lp_step(self, rnd: Round, decision: Decision, quotas: Quotas | None) -> dict[str, int]:
        return lp_pass(rnd, decision, order=self.order, placer=BEST_FIT, quotas=quotas,
                         memo=self.fit_memo("lp", preemptive=False))
