"""Pool-level demand from tenant forecasts (GFS-SPEC §2.1), outside the models.

``independent``: tenants' errors are independent, so ``μ_p = Σ_o μ_o`` and ``σ_p² = Σ_o σ_o²``.
``sum-quantiles``: the conservative alternative (errors move together); the pool ρ-quantile is the
sum of the tenants' ρ-quantiles. It is encoded through the std, ``σ_p = (Σ_o q_o − μ_p) / Φ⁻¹(ρ)``,
so that quota code computing ``μ_p + Φ⁻¹(ρ)·σ_p`` gets exactly that sum (for ρ = 0.5, where the
ratio is undefined, ``σ_p = Σ_o σ_o``, the comonotone spread). Tenant quantiles come from the
prediction's ``q<ρ>`` column when present, else from ``μ + Φ⁻¹(ρ)σ`` clipped at 0.

Samples (``{series: (S, H)}``): summed per pool across tenants as drawn (independent) or after
sorting each tenant's draws per hour (comonotone coupling, the sample analogue of summing
quantiles). Tenants without samples contribute their mean; draws are cut to the smallest S.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtri  # = scipy.stats.norm.ppf, without importing scipy.stats

from gfs_opt.errors import GfsError
from gfs_opt.forecast.base import qcol
from gfs_opt.model import PoolForecast

METHODS = ("independent", "sum-quantiles")


def pool_of(series: str, series_pool: Mapping[str, str] | None) -> str:
    """Pool of a series key: from the mapping, else the part before '|' of "pool|org"."""
    if series_pool is not None and series in series_pool:
        return series_pool[series]
    if "|" in series:
        return series.split("|", 1)[0]
    raise GfsError(f"series {series!r} has no pool: give series_pool or name it 'pool|org'")


def pool_forecasts(pred: pd.DataFrame, series_pool: Mapping[str, str] | None = None,
                   method: str = "independent", rho: float = 0.9,
                   samples: Mapping[str, np.ndarray] | None = None) -> dict[str, PoolForecast]:
    """Aggregate a prediction frame (series, h, mean, std[, q…]) into one forecast per pool.

    Arrays are indexed by the sorted distinct ``h`` of the frame (h = 1 first).
    """
    if method not in METHODS:
        raise GfsError(f"unknown pool aggregation {method!r}; expected one of {list(METHODS)}")
    if not 0.0 < rho < 1.0:
        raise GfsError(f"rho must lie strictly between 0 and 1, got {rho}")
    missing = [c for c in ("series", "h", "mean", "std") if c not in pred.columns]
    if missing:
        raise GfsError(f"prediction frame lacks column(s) {missing}")
    if pred.empty:
        return {}
    col = qcol(rho)
    return pool_forecasts_arrays(
        pred["series"].astype(str).to_numpy(), pred["h"].to_numpy(),
        pred["mean"].to_numpy(dtype=float), pred["std"].to_numpy(dtype=float),
        pred[col].to_numpy(dtype=float) if col in pred.columns else None,
        series_pool, method, rho, samples)


@dataclass(frozen=True, slots=True)
class PoolLayout:
    """Where each row of a prediction (one per series × h) is summed: its pool and hour index.
    It depends on the rows' series and hours only, so an hourly caller whose rows keep their
    series and leads keeps it."""

    pools: np.ndarray            # distinct pools, sorted
    p_idx: np.ndarray            # per row: index into pools
    h_idx: np.ndarray            # per row: index into hours
    hours: np.ndarray            # distinct h, sorted
    uniq_series: np.ndarray      # distinct series, sorted
    series_pool_idx: np.ndarray  # per distinct series: index into pools


def pool_layout(series: np.ndarray, h: np.ndarray,
                series_pool: Mapping[str, str] | None = None) -> PoolLayout:
    """The `PoolLayout` of rows with these series keys and hours."""
    uniq_series, s_idx = np.unique(series, return_inverse=True)
    pools_of_series = np.array([pool_of(s, series_pool) for s in uniq_series], dtype=object)
    pools, series_pool_idx = np.unique(pools_of_series, return_inverse=True)
    hours, h_idx = np.unique(h, return_inverse=True)
    return PoolLayout(pools, series_pool_idx[s_idx], h_idx, hours, uniq_series,
                      series_pool_idx)


def pool_forecasts_arrays(series: np.ndarray, h: np.ndarray, mean: np.ndarray, std: np.ndarray,
                          q: np.ndarray | None, series_pool: Mapping[str, str] | None = None,
                          method: str = "independent", rho: float = 0.9,
                          samples: Mapping[str, np.ndarray] | None = None,
                          layout: PoolLayout | None = None) -> dict[str, PoolForecast]:
    """`pool_forecasts` on the frame's columns as arrays (one row per series × h; ``q`` = the
    ``q<ρ>`` column or None), for callers that never built the frame. Sums run in row order.
    ``layout``: `pool_layout` of these rows, if the caller kept it."""
    if method not in METHODS:
        raise GfsError(f"unknown pool aggregation {method!r}; expected one of {list(METHODS)}")
    if not 0.0 < rho < 1.0:
        raise GfsError(f"rho must lie strictly between 0 and 1, got {rho}")
    if len(series) == 0:
        return {}
    lay = pool_layout(series, h, series_pool) if layout is None else layout
    pools, p_idx, h_idx, hours = lay.pools, lay.p_idx, lay.h_idx, lay.hours
    shape = (len(pools), len(hours))
    mu = np.zeros(shape)
    np.add.at(mu, (p_idx, h_idx), mean)
    z = float(ndtri(rho))
    if method == "independent":
        var = np.zeros(shape)
        np.add.at(var, (p_idx, h_idx), std ** 2)
        sigma = np.sqrt(var)
    elif abs(z) < 1e-12:
        sigma = np.zeros(shape)
        np.add.at(sigma, (p_idx, h_idx), std)
    else:
        if q is None:
            q = np.maximum(mean + z * std, 0.0)
        qsum = np.zeros(shape)
        np.add.at(qsum, (p_idx, h_idx), q)
        sigma = np.maximum((qsum - mu) / z, 0.0)
    pool_samples = None
    if samples is not None:
        table = pd.DataFrame({"series": series, "h": h, "mean": mean}).pivot_table(
            index="series", columns="h", values="mean", aggfunc="first")
        pool_samples = _pool_samples(table, lay.uniq_series, lay.series_pool_idx, len(pools),
                                     hours, samples, comonotone=method == "sum-quantiles")
    return {str(p): PoolForecast(mu[i], sigma[i], None if pool_samples is None else pool_samples[i])
            for i, p in enumerate(pools)}


def _pool_samples(means: pd.DataFrame, uniq_series: np.ndarray, series_pool_idx: np.ndarray,
                  n_pools: int, hours: np.ndarray, samples: Mapping[str, np.ndarray],
                  comonotone: bool) -> list[np.ndarray]:
    given = [np.asarray(samples[s]) for s in uniq_series if s in samples]
    if not given:
        raise GfsError("samples were given but none matches a series of the prediction frame")
    n = min(a.shape[0] for a in given)
    out = [np.zeros((n, len(hours))) for _ in range(n_pools)]
    for s, p in zip(uniq_series, series_pool_idx, strict=True):
        draws = samples.get(s)
        if draws is None:
            out[p] += means.loc[s].reindex(hours).fillna(0.0).to_numpy()[None, :]
            continue
        draws = np.asarray(draws, dtype=float)
        if draws.ndim != 2 or draws.shape[1] != len(hours):
            raise GfsError(f"samples of series {s!r} have shape {draws.shape}, "
                           f"expected (S, {len(hours)})")
        draws = draws[:n]
        out[p] += np.sort(draws, axis=0) if comonotone else draws
    return out
