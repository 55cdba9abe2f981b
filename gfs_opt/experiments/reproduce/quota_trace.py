"""What the spot-quota allocator saw, sampled during a run: forecast band, η, quota, usage.

The recorder keeps quotas but not the forecasts behind them; the quota-vs-demand figure needs
both. `QuotaTracer` is a `Simulator.on_round` hook (`gfs_opt.sim.engine.RoundHook`; pass it to
`runner.run(on_round=...)`): it reads the round each pass hands the policy — the forecasts, η
and quotas the previous refresh left — so it works for every policy and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist

import pandas as pd

from gfs_opt.model import MILLI, Round

COLUMNS = ["t", "pool", "capacity", "hp", "lp", "eta", "fc_mean", "fc_lo", "fc_hi", "quota_gpus"]


@dataclass
class QuotaTracer:
    """Samples every ``every_s`` seconds inside [start, end): per pool, HP/LP GPUs in use, η, the
    current hour's forecast mean with its central ρ-band [q_{1−ρ}, q_ρ] (Gaussian from μ, σ, as
    the quota rule reads it), and the quota of the shortest guarantee class (GPUs)."""

    start: float = 0.0
    end: float = float("inf")
    every_s: float = 300.0
    rows: list[tuple] = field(default_factory=list)
    _next: float = -float("inf")

    def __call__(self, rnd: Round) -> None:
        t = rnd.time
        if t < self.start or t >= self.end or t < self._next:
            return
        self._next = t + self.every_s
        st = rnd.state
        z = NormalDist().inv_cdf(rnd.params.rho)
        d_min = min(rnd.params.guarantee_classes)
        for pool in st.pools:
            p = st.pool_index[pool]
            fc = rnd.forecasts.get(pool)
            mean = float(fc.mean[0]) if fc is not None and len(fc.mean) else float("nan")
            std = float(max(fc.std[0], 0.0)) if fc is not None and len(fc.std) else float("nan")
            quota = rnd.quotas.get((pool, d_min))
            self.rows.append((t, pool, st.capacity_gpus(pool), st.pool_hp[p] / MILLI,
                              st.pool_lp[p] / MILLI, rnd.pool_status(pool).eta, mean,
                              max(0.0, mean - z * std), mean + z * std,
                              float("nan") if quota is None else quota / MILLI))

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)
