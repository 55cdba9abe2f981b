"""The pool forecast's spread calibrated on the pool's own errors (aggregation ``calibrated``).

The independent sum (`gfs_opt.forecast.aggregate`) gives a pool the spread σ_p = √(Σ_o σ_o²) of
its tenants' forecasts, each measured on that tenant's own errors. When the tenants' errors move
together (one surge reaches several of them) or are larger now than over their calibration
window, the pool's demand leaves that spread far more often than the Gaussian says, and the
ρ-quantile the quota plans for is too low. Every issued pool forecast is therefore scored once its
hour is complete, s = (y − μ_p)/σ_p with y the pool's demand that hour (the sum of its tenants'
hourly maxima, what was forecast), and each lead's spread is scaled by

    κ_L = √(mean of s² over the last ``window_h`` hours of forecasts at lead L),

the RMS of the standardised errors (1 for a calibrated forecast), once ``min_scores`` of them
exist (κ = 1 before). Scores use the unscaled spread, so κ does not feed on itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

import numpy as np

from gfs_opt.model import PoolForecast

#: scores a lead needs before its spread is scaled (a day of hourly forecasts)
MIN_SCORES = 24


class PoolCalibration:
    """Issued pool forecasts, their scores and each (pool, lead)'s scale κ (module doc)."""

    def __init__(self, window_h: int = 14 * 24, min_scores: int = MIN_SCORES) -> None:
        if window_h < 1 or min_scores < 1:
            raise ValueError("calibration window and minimum scores must be ≥ 1")
        self.window_h = int(window_h)
        self.min_scores = int(min_scores)
        # target hour → [(pool, lead, μ, σ)] of the forecasts issued for it, not yet scored
        self._issued: dict[int, list[tuple[str, int, float, float]]] = {}
        # (pool, lead) → (target hour, s) within the window, with the running sum of s²
        self._scores: dict[tuple[str, int], deque[tuple[int, float]]] = {}
        self._sums: dict[tuple[str, int], float] = {}

    def pending_since(self) -> int | None:
        """The earliest target hour of an issued forecast not scored yet."""
        return min(self._issued, default=None)

    def score(self, hour: int, demand: Mapping[str, np.ndarray], first: int) -> None:
        """Score the forecasts whose target hour is before ``hour``: ``demand[pool][x − first]``
        is the pool's demand in hour x (GPUs); a pool without demand there is not scored."""
        for x in sorted(x for x in self._issued if x < hour):
            for pool, lead, mu, sd in self._issued.pop(x):
                d = demand.get(pool)
                i = x - first
                if d is None or not 0 <= i < len(d) or sd <= 0.0:
                    continue
                s = (float(d[i]) - mu) / sd
                key = (pool, lead)
                self._scores.setdefault(key, deque()).append((x, s))
                self._sums[key] = self._sums.get(key, 0.0) + s * s
        for key, q in self._scores.items():
            while q and q[0][0] < hour - self.window_h:
                _x, s = q.popleft()
                self._sums[key] -= s * s
            if not q:           # no drift of the float sum once the window is empty
                self._sums[key] = 0.0

    def kappa(self, pool: str, leads: int) -> np.ndarray:
        """κ per lead 1..``leads`` of ``pool`` (1 where too few scores exist)."""
        out = np.ones(leads)
        for lead in range(1, leads + 1):
            q = self._scores.get((pool, lead))
            if q is not None and len(q) >= self.min_scores:
                out[lead - 1] = float(np.sqrt(max(self._sums[(pool, lead)], 0.0) / len(q)))
        return out

    def issue(self, hour: int, forecasts: Mapping[str, PoolForecast]) -> dict[str, PoolForecast]:
        """Record the forecasts made in ``hour`` (index k targets hour + k, lead k + 1) and return
        them with each lead's spread scaled by κ."""
        out: dict[str, PoolForecast] = {}
        for pool, fc in forecasts.items():
            for k, (mu, sd) in enumerate(zip(fc.mean.tolist(), fc.std.tolist(), strict=True)):
                self._issued.setdefault(hour + k, []).append((pool, k + 1, mu, sd))
            out[pool] = PoolForecast(fc.mean, fc.std * self.kappa(pool, len(fc.mean)),
                                     fc.samples)
        return out


def pool_demand(rows: Iterable[tuple[str, int, np.ndarray]], pool_of_series: Mapping[str, str],
                first: int, hours: int) -> dict[str, np.ndarray]:
    """Per pool, its demand in hours first..first + hours − 1: the sum of its series' values
    (``rows`` as `HourlyMaxSeries.recent` gives them: name, first hour, values)."""
    out: dict[str, np.ndarray] = {}
    for name, start, y in rows:
        pool = pool_of_series[name]
        arr = out.setdefault(pool, np.zeros(hours))
        a = start - first
        arr[a:a + len(y)] += y
    return out
