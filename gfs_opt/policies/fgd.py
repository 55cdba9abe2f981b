"""FGD (ATC'23) baseline: fragmentation-gradient-descent placement, YARN-CS preemption.

A node's expected fragmentation under the typical request mix M = {1: .35, 2: .10, 4: .05,
8: .50} GPUs counts the free capacity a request of size m cannot use: all of it when fewer than
m whole GPUs are free, otherwise the residuals of partly used GPUs. Each worker goes where that
expectation grows least (ties: best fit, lowest index). ``quota="sqa"`` (the policy `fgd+sqa`)
admits LP work under GFS's spot quota at a static η.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gfs_opt.model import (
    MILLI,
    ClusterState,
    Decision,
    Job,
    Round,
    WorkerPlacement,
    gpus_per_worker,
)
from gfs_opt.pending import FIFO_ORDER
from gfs_opt.policies.base import GreedyPolicy, shared_quota
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.hp_pass import hp_pass
from gfs_opt.preempt.scoring import Placer, best_gpu_fraction, free_gpus_on
from gfs_opt.quota.admission import Quotas, lp_pass

TYPICAL_MIX: dict[int, float] = {1: 0.35, 2: 0.10, 4: 0.05, 8: 0.50}


def whole_fragmentation(max_free: int, mix: dict[int, float] = TYPICAL_MIX) -> np.ndarray:
    """frag[f] = Σ_m p_m · [f < m] · f · 1000: free whole GPUs stranded for size-m requests."""
    f = np.arange(max_free + 1)
    return sum(p * (f < m) * f * MILLI for m, p in mix.items())  # type: ignore[return-value]


class FGDPolicy(GreedyPolicy):
    name = "fgd"

    def __init__(self, quota: str = "none", forecaster: str = "prophet") -> None:
        self.rule = PreemptRule("newest", "count")
        self.frag = whole_fragmentation(64)
        self.quota_mode = quota
        self.forecaster_name = forecaster
        self.spot = shared_quota(quota, forecaster, self.name)
        self._placer = Placer(None, use_history=False, worker_fn=self.place_worker)

    def options(self) -> dict[str, Any]:
        return {"quota": self.quota_mode,
                **({"forecaster": self.forecaster_name} if self.spot else {})}

    def place_worker(self, state: ClusterState, job: Job) -> WorkerPlacement | None:
        pool = state.pool_index[job.pool]
        lo, hi = state.pool_slice(pool)
        free = state.node_free[lo:hi]
        if job.g < MILLI:
            gi = best_gpu_fraction(state, pool, job.g)  # Δ = −g, never beaten by a fresh GPU
            if gi >= 0:
                node = int(state.gpu_node[gi])
                return node, (gi - int(state.node_first_gpu[node]),)
            k, extra = 1, MILLI - job.g
        else:
            k, extra = gpus_per_worker(job.g), 0
        ok = free >= k
        if not ok.any():
            return None
        delta = self.frag[np.maximum(free - k, 0)] - self.frag[free] + extra
        key = np.where(ok, delta * 64.0 + free, np.inf)  # ties → best fit
        node = lo + int(np.argmin(key))
        return node, free_gpus_on(state, node, k)

    def placer(self, rnd: Round) -> Placer:
        return self._placer

    # FGD's worker choice fills one slot per worker like the default's, so FitMemo holds
    def hp_step(self, rnd: Round, decision: Decision) -> None:
        hp_pass(rnd, decision, order=FIFO_ORDER, placer=self._placer, victims=self.rule,
                memo=self.fit_memo("hp", preemptive=True))

    def lp_step(self, rnd: Round, decision: Decision, quotas: Quotas | None) -> dict[str, int]:
        return lp_pass(rnd, decision, order=FIFO_ORDER, placer=self._placer, quotas=quotas,
                         memo=self.fit_memo("lp", preemptive=False))
