"""The shape dimension of the spot quota: whole nodes kept free of LP for whole-node HP workers
(formulations/spot_quota.md, "Shape dimension").

The count quota bounds how many GPUs LP holds, not where they sit: an HP gang whose workers each
take a whole node (8 GPUs on 8-GPU nodes) evicts LP even when the pool has room, if LP is spread
over every node. The forecast of that part of the HP demand, at the same quantile and η as the
count quota, says how many whole nodes the next hours need beyond those such workers hold now:

    R_{p,d} = clip( max_{h ≤ d} ⌈U^W_h / G_p⌉ − N^W_p , 0 , N_p − N^W_p ),
    U^W_h = μ^W_h + z_ρ·σ^W_h/η,

with G_p the pool's largest node size, N^W_p the nodes whole-node HP workers hold now and N_p the
pool's nodes of size G_p. An LP gang of class d may not break a whole free node while only
R_{p,d} are left (`gfs_opt.preempt.scoring.Placer.reserves`); it may always start on partly used
nodes, and best fit tries those first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from gfs_opt.model import ClusterState, PoolForecast, PoolStatus
from gfs_opt.quota.rule import class_hours, demand_bound


def whole_node_reserve(forecast: PoolForecast | None, node_gpus: int, nodes: int,
                       held_nodes: float, rho: float, eta: float,
                       guarantee_h: Sequence[float]) -> list[int]:
    """R_{p,d} per class ``d`` of ``guarantee_h`` (whole nodes; 0 without a forecast)."""
    if forecast is None or len(forecast.mean) == 0 or node_gpus <= 0:
        return [0] * len(guarantee_h)
    need = np.ceil(np.maximum(demand_bound(forecast, rho, eta), 0.0) / node_gpus - 1e-9)
    held = math.floor(held_nodes + 1e-9)
    room = max(0, nodes - held)
    out = []
    for d in guarantee_h:
        peak = float(need[:class_hours(d, len(need))].max())
        out.append(int(min(room, max(0.0, peak - held))))
    return out


def pool_reserves(state: ClusterState, forecasts: Mapping[str, PoolForecast],
                  status: Mapping[str, PoolStatus], eta: Mapping[str, float], rho: float,
                  guarantee_h: Sequence[float]) -> dict[tuple[str, float], int]:
    """R per (pool, class) for every pool with a whole-node forecast (others: no entry)."""
    out: dict[tuple[str, float], int] = {}
    for pool, fc in forecasts.items():
        p = state.pool_index.get(pool)
        if p is None:
            continue
        size = state.pool_node_gpus[p]
        lo, hi = state.pool_slice(p)
        nodes = int((state.node_gpus[lo:hi] == size).sum())
        st = status.get(pool)
        held = (st.hp_whole_gpus if st is not None else 0.0) / size if size else 0.0
        for d, r in zip(guarantee_h, whole_node_reserve(fc, size, nodes, held, rho,
                                                         eta.get(pool, 1.0), guarantee_h),
                        strict=True):
            out[(pool, d)] = r
    return out
