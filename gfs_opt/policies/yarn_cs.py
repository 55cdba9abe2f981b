"""YARN Capacity Scheduler (Apache Hadoop YARN, CapacityScheduler with preemption) baseline.

YARN serves each queue first in, first out: the application at the head of a queue that cannot
start reserves its place and the ones behind it wait. Containers go where they fit best. A
container of a high-priority queue that finds no room preempts containers of lower-priority
queues on one node, the most recently started first (they lose the least work), on the node
that needs the fewest preemptions. Here the head of a queue blocks the jobs behind it for at
most ``hol_timeout_s`` (default 1 h); after that later jobs may pass, as YARN's reservations
do (``reservations-continue-look-all-nodes``): without the bound one gang that cannot fit for
weeks (long-running residents hold the GPUs it needs) deadlocks its pool. A head the quota
refuses blocks the line the same way, and for no longer.

Composition: FIFO order with head-of-line blocking · no quota (or ``quota="sqa"``: GFS's spot
quota at η = 1, the policy `yarn-cs+sqa`, as the GFS authors ran it; or ``"static"``: the
capacity HP does not use now, a common operator setting) · best fit · newest-first victims on
the node needing the fewest.
"""

from __future__ import annotations

from typing import Any

from gfs_opt.pending import QueueOrder
from gfs_opt.policies.base import ComposedPolicy
from gfs_opt.policies.parts import BestFit, PreemptRule, baseline_admission


class YarnCSPolicy(ComposedPolicy):
    name = "yarn-cs"

    def __init__(self, quota: str = "none", hol_timeout_s: float = 3600.0,
                 forecaster: str = "prophet", quota_eta: float = 1.0) -> None:
        super().__init__(
            order=QueueOrder(fifo=True, head_of_line=True, hol_timeout_s=hol_timeout_s),
            admission=baseline_admission(quota, forecaster, self.name, extra=("static",),
                                         eta=quota_eta),
            placement=BestFit(), victim_rule=PreemptRule("newest", "count"))
        self.quota_mode = quota
        self.hol_timeout_s = hol_timeout_s
        self.forecaster_name = forecaster
        self.quota_eta = quota_eta

    def options(self) -> dict[str, Any]:
        return {"quota": self.quota_mode, "hol_timeout_s": self.hol_timeout_s,
                **({"forecaster": self.forecaster_name} if self.spot else {}),
                **({"quota_eta": self.quota_eta} if self.quota_eta != 1.0 else {})}
