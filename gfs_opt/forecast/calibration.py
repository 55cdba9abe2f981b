"""Per-lead spread from a series' own forecast errors: std, quantile offsets and bootstrap draws.

Input per series: an error matrix ``E`` (origins × leads), ``E[o, L−1] = y[o+L] − mean(o, L)`` —
what the model's forecast issued after hour ``o`` missed by at lead ``L`` (NaN where the target
is not observed yet). Output per lead: the root-mean-square error (the std handed to pool
aggregation, bias included), the empirical error quantiles (numpy's default, linear
interpolation), so that the ``q<level>`` columns follow the errors' real shape — demand errors are
skewed and heavy-tailed and a Gaussian quantile of the RMS is not their quantile — and bootstrap
draws of whole error rows (they keep the correlation between leads).

A lead with fewer than ``min_errors`` errors takes the previous lead's spread, or the cold-start
spread with Gaussian quantiles when no lead has enough. All series are handled in one vectorised
pass (sorting a series × origins × leads array), since the provider re-measures every hour.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import ndtri  # = scipy.stats.norm.ppf, without importing scipy.stats


def _stack(errors: Sequence[np.ndarray], horizon: int) -> np.ndarray:
    """(S, max origins, horizon) array, NaN-padded (missing rows and leads)."""
    depth = max((len(e) for e in errors), default=0)
    out = np.full((len(errors), max(depth, 1), horizon), np.nan)
    for i, e in enumerate(errors):
        if len(e):
            width = min(horizon, e.shape[1])
            out[i, : len(e), :width] = e[:, :width]
    return out


def stack_parts(parts: Sequence[Sequence[np.ndarray]], horizon: int) -> np.ndarray:
    """`_stack` of each series' error rows given as consecutive blocks of ``horizon`` columns
    (what `_stack` would make of their concatenation, without making it)."""
    depth = max((sum(len(p) for p in blocks) for blocks in parts), default=0)
    out = np.full((len(parts), max(depth, 1), horizon), np.nan)
    for i, blocks in enumerate(parts):
        at = 0
        for p in blocks:
            out[i, at: at + len(p)] = p
            at += len(p)
    return out


def lead_spreads(errors: Sequence[np.ndarray], horizon: int, levels: Sequence[float],
                 cold_std: np.ndarray, min_errors: int) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Per series and lead 1..horizon: (std (S, H), {level: quantile offset (S, H)})."""
    return stacked_spreads(_stack(errors, horizon), levels, cold_std, min_errors)


def stacked_spreads(a: np.ndarray, levels: Sequence[float], cold_std: np.ndarray,
                    min_errors: int) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """`lead_spreads` of the errors already stacked (series × rows × leads, NaN-padded)."""
    horizon = a.shape[2]
    # rows outermost (rows × series × leads): numpy's sum down axis 1 adds the rows in order
    # when leads are the inner axis (H > 1); so does a sum down the rows of this layout, each row
    # of series × leads in one inner loop rather than one per series — half the hourly spread's
    # time, asked every hour for every series at once. With one lead numpy sums the rows
    # pairwise instead (contiguous), and the layout stays as it is.
    rows_first = horizon > 1
    b = np.ascontiguousarray(a.transpose(1, 0, 2)) if rows_first else a
    axis = 0 if rows_first else 1
    missing = np.isnan(b)
    count = (~missing).sum(axis=axis)   # (S, H); exact in any order
    enough = count >= max(min_errors, 1)
    safe = np.maximum(count, 1)
    square = b * b
    np.copyto(square, 0.0, where=missing)   # np.nansum's own steps, without its second scan
    std = np.sqrt(square.sum(axis=axis) / safe)
    ordered = np.sort(a, axis=1) if len(levels) else a         # NaN sorts last
    offsets: dict[float, np.ndarray] = {}
    for lv in levels:
        pos = lv * (safe - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, safe - 1)
        frac = pos - lo
        q_lo = np.take_along_axis(ordered, lo[:, None, :], axis=1)[:, 0, :]
        q_hi = np.take_along_axis(ordered, hi[:, None, :], axis=1)[:, 0, :]
        offsets[lv] = q_lo + frac * (q_hi - q_lo)
    cold = np.asarray(cold_std, dtype=float)
    for j in range(horizon):
        short = ~enough[:, j]
        if not short.any():
            continue
        if j > 0:
            std[short, j] = std[short, j - 1]
            for lv in levels:
                offsets[lv][short, j] = offsets[lv][short, j - 1]
        else:
            std[short, 0] = cold[short]
            for lv in levels:
                offsets[lv][short, 0] = float(ndtri(lv)) * cold[short]
    return std, offsets


def draw(mean: np.ndarray, std: np.ndarray, errors: np.ndarray, n: int, min_rows: int,
         rng: np.random.Generator) -> np.ndarray:
    """``n`` sample paths (n, H): mean + bootstrapped complete error rows when at least
    ``min_rows`` exist, else Gaussian draws from mean/std; clipped at 0."""
    horizon = len(mean)
    rows = errors[:, :horizon] if errors.ndim == 2 and errors.shape[1] >= horizon else None
    if rows is not None:
        rows = rows[~np.isnan(rows).any(axis=1)]
    if rows is not None and len(rows) >= max(min_rows, 1):
        paths = mean + rows[rng.integers(len(rows), size=n)]
    else:
        paths = mean + std * rng.standard_normal((n, horizon))
    return np.maximum(paths, 0.0)
