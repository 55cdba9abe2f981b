"""Lyra (Li et al., *Lyra: Elastic Scheduling for Deep Learning Clusters*, EuroSys'23) baseline.

Lyra loans capacity: training jobs borrow GPUs that inference does not use, and when inference
needs them back Lyra reclaims the servers whose preemption costs least, preferring to break few
and small jobs — a job's reclaim cost is 1/(w·max(g, 1)) for w workers of g GPUs, and the node
and GPUs with the lowest total cost are taken. Jobs are served first come, first served; a job
that does not fit waits without blocking the others.

Composition: FIFO order · no quota (or GFS's spot quota at η = 1, the policy `lyra+sqa`, as the
GFS authors ran it) · best fit · Lyra's reclaim-cost victims and node cost.
"""

from __future__ import annotations

from typing import Any

from gfs_opt.policies.base import ComposedPolicy
from gfs_opt.policies.parts import FIFO_ORDER, BestFit, PreemptRule, baseline_admission


class LyraPolicy(ComposedPolicy):
    name = "lyra"

    def __init__(self, quota: str = "none", forecaster: str = "prophet", quota_eta: float = 1.0) -> None:
        super().__init__(order=FIFO_ORDER,
                         admission=baseline_admission(quota, forecaster, self.name,
                                         eta=quota_eta),
                         placement=BestFit(), victim_rule=PreemptRule("lyra", "lyra"))
        self.quota_mode = quota
        self.forecaster_name = forecaster
        self.quota_eta = quota_eta

    def options(self) -> dict[str, Any]:
        return {"quota": self.quota_mode,
                **({"forecaster": self.forecaster_name} if self.spot else {}),
                **({"quota_eta": self.quota_eta} if self.quota_eta != 1.0 else {})}
