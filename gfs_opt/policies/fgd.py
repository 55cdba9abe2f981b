"""FGD (Weng et al., *Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent*, ATC'23) baseline.

FGD places each task where it increases the cluster's expected fragmentation least. A node's
fragmentation, measured against the typical request mix M = {1: .35, 2: .10, 4: .05, 8: .50}
GPUs, counts the free capacity a request of size m cannot use — all of it when fewer than m whole
GPUs are free, otherwise the residuals of partly used GPUs — weighted by the mix; a task goes to
the node where that expectation grows least (ties: best fit, lowest index). FGD does not define
preemption: here it preempts like YARN-CS (newest first, on the node needing the fewest), and
serves jobs first come, first served.

Composition: FIFO order · no quota (or ``quota="sqa"``: GFS's spot quota at η = 1, the policy
`fgd+sqa`) · fragmentation-gradient placement · newest-first victims on the node needing the
fewest. (Preemptive placement takes free spots by best fit, as for every policy.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gfs_opt.model import MILLI, ClusterState, Job, Round, WorkerPlacement, gpus_per_worker
from gfs_opt.policies.base import ComposedPolicy
from gfs_opt.policies.parts import FIFO_ORDER, PreemptRule, baseline_admission
from gfs_opt.preempt.scoring import Placer, best_gpu_fraction, free_gpus_on

TYPICAL_MIX: dict[int, float] = {1: 0.35, 2: 0.10, 4: 0.05, 8: 0.50}


def whole_fragmentation(max_free: int, mix: dict[int, float] = TYPICAL_MIX) -> np.ndarray:
    """frag[f] = Σ_m p_m · [f < m] · f · 1000: free whole GPUs stranded for size-m requests."""
    f = np.arange(max_free + 1)
    out = np.zeros(max_free + 1)
    for m, p in mix.items():
        out = out + p * (f < m) * f * MILLI
    return out


class FragmentationGradient:
    """FGD's placement score: each worker where the expected fragmentation grows least."""

    name = "fragmentation gradient"

    def __init__(self, mix: dict[int, float] = TYPICAL_MIX) -> None:
        self.frag = whole_fragmentation(64, mix)
        # its worker choice fills one slot per worker like best fit's, so `FitMemo` holds
        self._placer = Placer(None, use_history=False, worker_fn=self.place_worker)

    def placer(self, rnd: Round) -> Placer:
        return self._placer

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
        if state.max_free(pool) < k:
            return None
        ok = free >= k
        delta = self.frag[np.maximum(free - k, 0)] - self.frag[free] + extra
        key = np.where(ok, delta * 64.0 + free, np.inf)  # ties → best fit
        node = lo + int(np.argmin(key))
        return node, free_gpus_on(state, node, k)


class FGDPolicy(ComposedPolicy):
    name = "fgd"

    def __init__(self, quota: str = "none", forecaster: str = "prophet", quota_eta: float = 1.0) -> None:
        super().__init__(order=FIFO_ORDER,
                         admission=baseline_admission(quota, forecaster, self.name,
                                         eta=quota_eta),
                         placement=FragmentationGradient(),
                         victim_rule=PreemptRule("newest", "count"))
        self.quota_mode = quota
        self.forecaster_name = forecaster
        self.quota_eta = quota_eta

    def options(self) -> dict[str, Any]:
        return {"quota": self.quota_mode,
                **({"forecaster": self.forecaster_name} if self.spot else {}),
                **({"quota_eta": self.quota_eta} if self.quota_eta != 1.0 else {})}
