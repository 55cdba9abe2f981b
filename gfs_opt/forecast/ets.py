"""A fast model for short or sparse tenant series: exponential smoothing around an hour-of-day profile.

``y_t = level_t + profile[hour(t)] + noise``. The profile is the mean hour-of-day deviation over the
last ``profile_days`` days, shrunk towards zero when few days exist. The level is simple exponential
smoothing of the de-seasonalised series; its factor α is picked from a small grid by the mean
squared error of the forecasts the rule would have made over the history at leads
1..``score_leads`` (the leads the quota uses between daily refits), not just one step ahead.

The spread is empirical per lead: the root-mean-square of those same in-sample errors at each lead
(leads beyond ``max_lead`` reuse the last one). Series with too few errors fall back to
`cold_start_std`. Pure numpy/scipy: a few hundred µs per series.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.signal import lfilter

from gfs_opt.forecast.base import BaseForecaster, SeriesData, SeriesForecast, cold_start_std

ALPHAS = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9, 1.0)


@dataclass(slots=True)
class _EtsState:
    level: float
    profile: np.ndarray  # 24 values, indexed by hour of day
    std: np.ndarray      # per lead 1..max_lead
    alpha: float


def _smooth(x: np.ndarray, alpha: float) -> np.ndarray:
    """level_t = α·x_t + (1−α)·level_{t−1}, starting from level_0 = x_0."""
    zi = np.array([(1.0 - alpha) * x[0]])
    level, _ = lfilter([alpha], [1.0, alpha - 1.0], x, zi=zi)
    return level


class SeasonalETS(BaseForecaster):
    """Exponential smoothing with an additive hour-of-day profile (numpy only)."""

    def __init__(self, window_h: int = 28 * 24, profile_days: int = 14, profile_shrink: float = 0.5,
                 score_leads: int = 24, max_lead: int = 48, min_residuals: int = 24,
                 alphas: Sequence[float] = ALPHAS, quantiles: Sequence[float] = (0.9,),
                 seed: int = 0) -> None:
        super().__init__(quantiles, seed)
        self.window_h = window_h
        self.profile_days = profile_days
        self.profile_shrink = profile_shrink
        self.score_leads = score_leads
        self.max_lead = max_lead
        self.min_residuals = min_residuals
        self.alphas = tuple(alphas)

    @property
    def history_hours(self) -> int | None:
        return self.window_h

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

    def _fit_series(self, data: SeriesData) -> _EtsState:
        y = data.y[-self.window_h:]
        first = data.start.hour + (len(data.y) - len(y))
        hod = (first + np.arange(len(y))) % 24
        profile = self._profile(y, hod)
        x = y - profile[hod]
        cold = cold_start_std(y)
        if len(x) < 2 or np.ptp(y) == 0:
            return _EtsState(float(x[-1]), profile, np.full(self.max_lead, cold), 1.0)
        best: tuple[float, float, np.ndarray] | None = None
        for alpha in self.alphas:
            level = _smooth(x, alpha)
            err = self._lead_errors(x, level)
            if err is None:
                continue
            score = float(np.mean(err[:, : self.score_leads] ** 2))
            if best is None or score < best[0]:
                best = (score, alpha, level)
        if best is None:  # shorter than one lead window: naive level, cold spread
            return _EtsState(float(x[-1]), profile, np.full(self.max_lead, cold), 1.0)
        _, alpha, level = best
        std = self._lead_std(x, level, cold)
        return _EtsState(float(level[-1]), profile, std, alpha)

    def _lead_errors(self, x: np.ndarray, level: np.ndarray) -> np.ndarray | None:
        """Errors x[t+L] − level[t] for origins with all leads 1..L_s observed (rows = origins)."""
        lead = min(self.score_leads, self.max_lead)
        if len(x) <= lead + 1:
            return None
        future = sliding_window_view(x[1:], lead)   # row t: x[t+1 .. t+lead]
        return future - level[: len(future), None]

    def _lead_std(self, x: np.ndarray, level: np.ndarray, cold: float) -> np.ndarray:
        std = np.empty(self.max_lead)
        for lead in range(1, self.max_lead + 1):
            err = x[lead:] - level[:-lead] if len(x) > lead else np.empty(0)
            if len(err) >= self.min_residuals:
                std[lead - 1] = np.sqrt(np.mean(err ** 2))
            else:
                std[lead - 1] = std[lead - 2] if lead > 1 else cold
        return std

    def _forecast(self, key: str, state: _EtsState, data: SeriesData,
                  horizon: int, n_samples: int = 0) -> SeriesForecast:
        hod = (data.end.hour + np.arange(1, horizon + 1)) % 24
        mean = state.level + state.profile[hod]
        lead = np.minimum(np.arange(horizon), self.max_lead - 1)
        return SeriesForecast(mean, state.std[lead])
