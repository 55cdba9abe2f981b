"""The synthetic cluster: the real node file, or a stratified sample of it when scaled down."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gfs_opt.traces.synth_requests import exact_counts


def scale_nodes(nodes: pd.DataFrame, scale: float, rng: np.random.Generator) -> pd.DataFrame:
    """Keep ≈ ``scale`` of each GPU model's nodes (at least one), node sizes in proportion.

    Per model the node count is rounded, then split over node sizes by largest remainder, and the
    nodes of each size are a seeded random sample of the real ones (file order kept). At full
    scale this is the real node file, unchanged.
    """
    if scale >= 1.0:
        return nodes.reset_index(drop=True)
    keep: list[np.ndarray] = []
    for _model, grp in nodes.groupby("gpu_model", sort=True):
        n_model = max(1, round(scale * len(grp)))
        sizes = grp.groupby("gpu_capacity_num").size()
        per_size = exact_counts(sizes.to_numpy(dtype=float), n_model)
        for size, k in zip(sizes.index, per_size, strict=True):
            idx = grp.index[grp["gpu_capacity_num"] == size].to_numpy()
            keep.append(rng.choice(idx, int(k), replace=False))
    chosen = np.sort(np.concatenate(keep))
    return nodes.loc[chosen].reset_index(drop=True)
