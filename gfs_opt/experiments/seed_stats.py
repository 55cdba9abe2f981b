"""Means over seeds with 95 % Student-t intervals, and whether a difference is inside the noise.

A replay's metrics move from seed to seed (another synthetic draw, another LP subsample), so one
seed can make a policy look better or worse by a single eviction. Over n ≥ 2 seeds the mean gets
the half-width t(0.975, n − 1)·s/√n (s: sample standard deviation); a difference between two
policies is paired by seed (same trace for both) and is *inside the noise* when the interval of
its per-seed values contains 0. With one seed there is no interval (NaN half-width) and nothing
is called inside or outside the noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtrit  # = scipy.stats.t.ppf, without importing scipy.stats (≈ 1 s)

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` values with the half-width of its 95 % t interval (NaN when n < 2)."""

    mean: float
    half: float
    n: int

    @property
    def lo(self) -> float:
        return self.mean - self.half

    @property
    def hi(self) -> float:
        return self.mean + self.half

    @property
    def has_interval(self) -> bool:
        return self.n >= 2 and math.isfinite(self.half)

    def contains(self, x: float) -> bool | None:
        """Whether ``x`` lies in the closed interval; None without an interval."""
        if not self.has_interval:
            return None
        return self.lo <= x <= self.hi

    def overlaps(self, other: Interval) -> bool | None:
        """Whether two closed intervals share a point; None unless both have one."""
        if not (self.has_interval and other.has_interval):
            return None
        return self.lo <= other.hi and other.lo <= self.hi


def t_quantile(df: int, level: float = LEVEL) -> float:
    """Two-sided Student-t critical value, e.g. 4.303 for df = 2 at 95 %."""
    return float(stdtrit(df, 0.5 + level / 2))


def t_interval(values: Iterable[float], level: float = LEVEL) -> Interval:
    """Mean and half-width of the ``level`` t interval of the finite values (NaN ones dropped)."""
    x = np.asarray([float(v) for v in values], dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, 0)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, n)
    half = t_quantile(n - 1, level) * float(x.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, half, n)


def inside_noise(differences: Iterable[float], level: float = LEVEL) -> bool | None:
    """Paired per-seed differences: True when their interval contains 0, None with < 2 seeds."""
    return t_interval(differences, level).contains(0.0)
