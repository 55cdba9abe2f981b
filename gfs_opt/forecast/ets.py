"""A fast model for short or sparse tenant series: exponential smoothing around an hour-of-day profile.

``y_t = level_t + profile[hour(t)] + noise``. The profile is the mean hour-of-day deviation over the
last ``profile_days`` days, shrunk towards zero when few days exist. The level is simple exponential
smoothing of the de-seasonalised series; its factor α is picked from a small grid by the mean
squared error of the forecasts the rule would have made over the history at leads
1..``score_leads`` (default 4: the quota's horizon, forecast afresh from every completed hour).

``fit`` estimates profile and α; ``update`` advances the level over the new hours with that α
(``level ← α·x + (1−α)·level``), so the forecast always starts from the latest completed hour.
The spread is measured per lead by the base class from the errors ``x_{o+L} − level_o`` of this
rule at hourly origins. Pure numpy/scipy: well under a millisecond per series.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from gfs_opt.forecast.base import BaseForecaster, SeriesData, SeriesForecast, lead_grid

ALPHAS = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 1.0)


@dataclass(slots=True)
class _EtsState:
    level_start: int        # absolute hour of levels[0]
    levels: np.ndarray      # smoothed level after each hour, up to the last observed one
    profile: np.ndarray     # 24 values, indexed by hour of day
    alpha: float


#: points smoothed in plain Python before `_smooth` switches to scipy's filter for good
PY_SMOOTH_BUDGET = 10_000_000
_py_smoothed = 0


def _smooth(x: np.ndarray, alpha: float, level0: float | None = None) -> np.ndarray:
    """level_t = α·x_t + (1−α)·level_{t−1}, starting from ``level0`` (default: level_0 = x_0).

    scipy's ``lfilter`` does this ≈ 6× faster per series but costs ≈ 1.2–2 s of CPU to import
    (scipy.signal pulls in scipy.stats) — more than most runs spend smoothing. So the first
    `PY_SMOOTH_BUDGET` points go through a plain loop and only a process that smooths more
    imports scipy (ski rental: never more than about twice the cheaper choice). Both compute
    the same floating-point operations in the same order, so the result does not depend on which
    one ran (tests/test_forecast_models.py checks bit equality).
    """
    global _py_smoothed
    prev = float(x[0] if level0 is None else level0)
    if _py_smoothed < PY_SMOOTH_BUDGET:
        _py_smoothed += len(x)
        return _smooth_loop(x, alpha, prev)
    from scipy.signal import lfilter

    level, _ = lfilter([alpha], [1.0, alpha - 1.0], x, zi=np.array([(1.0 - alpha) * prev]))
    return level


def _smooth_loop(x: np.ndarray, alpha: float, prev: float) -> np.ndarray:
    # lfilter's direct form II transposed for one pole: y = α·x + z, then z = (1−α)·y
    c = 1.0 - alpha
    z = c * prev
    out = []
    for v in x.tolist():
        y = alpha * v + z
        out.append(y)
        z = c * y
    return np.array(out, dtype=float)


class SeasonalETS(BaseForecaster):
    """Exponential smoothing with an additive hour-of-day profile (numpy only)."""

    def __init__(self, window_h: int = 28 * 24, profile_days: int = 14, profile_shrink: float = 0.5,
                 score_leads: int = 4, calibration_window_h: int = 14 * 24,
                 min_residuals: int = 24, alphas: Sequence[float] = ALPHAS,
                 quantiles: Sequence[float] = (0.9,), seed: int = 0) -> None:
        super().__init__(quantiles, seed)
        self.window_h = window_h
        self.profile_days = profile_days
        self.profile_shrink = profile_shrink
        self.score_leads = score_leads
        self.calibration_window_h = calibration_window_h
        self.min_residuals = min_residuals
        self.alphas = tuple(alphas)

    @property
    def history_hours(self) -> int | None:
        return self.window_h

    def _calibration_hours(self) -> int:
        return self.calibration_window_h

    def _profile(self, y: np.ndarray, hod: np.ndarray) -> np.ndarray:
        take = min(len(y), self.profile_days * 24)
        days = take / 24.0
        if days < 1.0:
            return np.zeros(24)
        yy, hh = y[-take:], hod[-take:]
        sums = np.bincount(hh, weights=yy, minlength=24)
        counts = np.bincount(hh, minlength=24)
        means = np.divide(sums, counts, out=np.full(24, yy.mean()), where=counts > 0)
        return (means - yy.mean()) * days / (days + self.profile_shrink)

    def _fit_series(self, data: SeriesData, prev: object = None) -> _EtsState:
        y = data.y[-self.window_h:]
        first = data.end_hour - len(y) + 1
        hod = (first + np.arange(len(y))) % 24
        profile = self._profile(y, hod)
        x = y - profile[hod]
        if len(x) < 2 or np.ptp(y) == 0:
            return _EtsState(first, x.copy(), profile, 1.0)
        best: tuple[float, float, np.ndarray] | None = None
        for alpha in self.alphas:
            level = _smooth(x, alpha)
            err = self._score_errors(x, level)
            if err is None:
                continue
            score = float(np.mean(err ** 2))
            if best is None or score < best[0]:
                best = (score, alpha, level)
        if best is None:  # shorter than one lead window: naive level
            return _EtsState(first, x.copy(), profile, 1.0)
        _, alpha, level = best
        return _EtsState(first, level, profile, alpha)

    def _score_errors(self, x: np.ndarray, level: np.ndarray) -> np.ndarray | None:
        """Errors x[t+L] − level[t] for origins with all leads 1..score_leads observed."""
        lead = max(1, self.score_leads)
        if len(x) <= lead + 1:
            return None
        future = sliding_window_view(x[1:], lead)   # row t: x[t+1 .. t+lead]
        return future - level[: len(future), None]

    def _update_series(self, key: str, state: _EtsState, data: SeriesData,
                       n_old: int) -> _EtsState:
        hours = data.start_hour + np.arange(n_old, len(data.y))
        x = data.y[n_old:] - state.profile[hours % 24]
        if len(x) <= 8:  # the hourly case: the plain loop beats lfilter's set-up cost at any budget
            new = _smooth_loop(x, state.alpha, float(state.levels[-1]))
        else:
            new = _smooth(x, state.alpha, float(state.levels[-1]))
        state.levels = np.concatenate([state.levels, new])
        return state

    def _forecast(self, key: str, state: _EtsState, data: SeriesData,
                  horizon: int, n_samples: int = 0) -> SeriesForecast:
        hod = (data.end_hour + np.arange(1, horizon + 1)) % 24
        return SeriesForecast(state.levels[-1] + state.profile[hod])

    def _errors(self, key: str, state: _EtsState, data: SeriesData, origins: np.ndarray,
                horizon: int) -> np.ndarray:
        pos = origins - state.level_start
        ok = (pos >= 0) & (pos < len(state.levels))
        level = np.full(len(origins), np.nan)
        level[ok] = state.levels[pos[ok]]
        target = lead_grid(origins, horizon)
        return data.values_at(target) - (level[:, None] + state.profile[target % 24])
