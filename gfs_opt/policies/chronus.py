"""Chronus (Gao et al., *Chronus: A Novel Deadline-aware Scheduler for Deep Learning Training
Jobs*, SoCC'21) baseline.

Chronus schedules in rounds (here every 300 s) and hands out GPUs as leases (here 20 minutes):
nothing preempts on arrival, and at each round a job whose lease has ended keeps its GPUs only
if no higher-priority job needs them. When HP jobs are still waiting at a round, LP jobs whose
lease ended since the previous round are not renewed where the waiting HP jobs need their GPUs:
they are re-queued (paying a 120 s restart cost; a lease that ends inside a guarantee window
counts as a failed window). Leases of LP jobs that no HP job needs are renewed.

Composition: FIFO order · no quota · best fit · no preemption on arrival; then a reclaim of
expired leases (newest-first victims on the node needing the fewest, as re-queues).
"""

from __future__ import annotations

from typing import Any

from gfs_opt.model import Decision, Round, RunningJob
from gfs_opt.policies.base import ComposedPolicy
from gfs_opt.policies.parts import FIFO_ORDER, BestFit, NoQuota, PreemptRule, describe_victims
from gfs_opt.preempt.hp_pass import hp_pass

LEASE_S = 1200.0
ROUND_S = 300.0
REQUEUE_COST_S = 120.0


class ChronusPolicy(ComposedPolicy):
    name = "chronus"
    every_event = False
    standalone = False     # leases end by the clock and are re-queued, not evicted

    def __init__(self, lease_s: float = LEASE_S) -> None:
        super().__init__(order=FIFO_ORDER, admission=NoQuota(), placement=BestFit(),
                         victim_rule=None)
        self.lease_s = lease_s
        self.reclaim_rule = PreemptRule("newest", "count")

    def options(self) -> dict[str, Any]:
        return {"lease_s": self.lease_s}

    def parts(self) -> dict[str, str]:
        return {**super().parts(), "victims": "none on arrival; expired leases re-queued ("
                + describe_victims(self.reclaim_rule) + ")"}

    def lease_expired(self, r: RunningJob, t: float) -> bool:
        """A lease boundary start + k·lease fell within (t − round, t]."""
        age = t - r.start
        return age >= self.lease_s and (age % self.lease_s) < ROUND_S

    def hp_step(self, rnd: Round, decision: Decision) -> None:
        """No preemption on arrival; leases that ended since the last round are not renewed
        where the still-waiting HP jobs need their GPUs (re-queues, not evictions)."""
        super().hp_step(rnd, decision)
        expired = {j: r for j, r in rnd.running.items()
                   if not r.job.is_hp and self.lease_expired(r, rnd.time)}
        if expired:
            reclaim = Decision()
            hp_pass(rnd, reclaim, order=self.order, placer=self.placer(rnd),
                    victims=self.reclaim_rule, evictable=expired)
            decision.placements.update(reclaim.placements)
            decision.requeue.extend(reclaim.victims)
