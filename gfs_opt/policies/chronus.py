"""Chronus (SoCC'21) baseline: 300 s scheduling rounds and 20-minute leases.

Both classes are scheduled only at round boundaries. HP jobs never preempt on arrival; instead,
when HP jobs are still waiting at a round, LP jobs whose lease has ended since the previous round
are not renewed (re-queued, paying a 120 s restart cost; a lease that ends inside a guarantee
window counts as a failed window). Leases of LP jobs that no HP job needs are renewed.
"""

from __future__ import annotations

from typing import Any

from gfs_opt.model import Decision, Round, RunningJob
from gfs_opt.pending import FIFO_ORDER
from gfs_opt.policies.base import GreedyPolicy
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.hp_pass import hp_pass
from gfs_opt.preempt.scoring import BEST_FIT
from gfs_opt.quota.admission import Quotas, lp_pass

LEASE_S = 1200.0
ROUND_S = 300.0
REQUEUE_COST_S = 120.0


class ChronusPolicy(GreedyPolicy):
    name = "chronus"
    every_event = False
    standalone = False     # leases end by the clock and are re-queued, not evicted

    def __init__(self, lease_s: float = LEASE_S) -> None:
        self.lease_s = lease_s
        self.rule = PreemptRule("newest", "count")

    def options(self) -> dict[str, Any]:
        return {"lease_s": self.lease_s}

    def lease_expired(self, r: RunningJob, t: float) -> bool:
        """A lease boundary start + k·lease fell within (t − round, t]."""
        age = t - r.start
        return age >= self.lease_s and (age % self.lease_s) < ROUND_S

    def hp_step(self, rnd: Round, decision: Decision) -> None:
        """No preemption on arrival; leases that ended since the last round are not renewed
        where the still-waiting HP jobs need their GPUs (re-queues, not evictions)."""
        hp_pass(rnd, decision, order=FIFO_ORDER, placer=BEST_FIT, victims=None,
                memo=self.fit_memo("hp", preemptive=False))
        expired = {j: r for j, r in rnd.running.items()
                   if not r.job.is_hp and self.lease_expired(r, rnd.time)}
        if expired:
            reclaim = Decision()
            hp_pass(rnd, reclaim, order=FIFO_ORDER, placer=BEST_FIT, victims=self.rule,
                    evictable=expired)
            decision.placements.update(reclaim.placements)
            decision.requeue.extend(reclaim.victims)

    def lp_step(self, rnd: Round, decision: Decision, quotas: Quotas | None) -> dict[str, int]:
        return lp_pass(rnd, decision, order=FIFO_ORDER, placer=BEST_FIT, quotas=quotas,
                       memo=self.fit_memo("lp", preemptive=False))
