"""`make_forecaster(name, **params)`: the one place that maps model names to classes."""

from __future__ import annotations

from typing import Any

from gfs_opt.errors import GfsError
from gfs_opt.forecast.base import BaseForecaster


def _prophet() -> type[BaseForecaster]:
    from gfs_opt.forecast.prophet_model import ProphetForecaster
    return ProphetForecaster


def _auto() -> type[BaseForecaster]:
    from gfs_opt.forecast.auto import AutoForecaster
    return AutoForecaster


def _week_peak() -> type[BaseForecaster]:
    from gfs_opt.forecast.baselines import PreviousWeekPeak
    return PreviousWeekPeak


def _seasonal_naive() -> type[BaseForecaster]:
    from gfs_opt.forecast.baselines import SeasonalNaive
    return SeasonalNaive


def _ets() -> type[BaseForecaster]:
    from gfs_opt.forecast.ets import SeasonalETS
    return SeasonalETS


# name → class loader (lazy so that importing gfs_opt.forecast never imports Prophet)
MODELS = {
    "prophet": _prophet,
    "week-peak": _week_peak,
    "seasonal-naive": _seasonal_naive,
    "ets": _ets,
    "auto": _auto,
}


def make_forecaster(name: str, **params: Any) -> BaseForecaster:
    """Build a forecaster by name; ``params`` go to its ``__init__`` (bad ones → GfsError)."""
    loader = MODELS.get(name)
    if loader is None:
        raise GfsError(f"unknown forecaster {name!r}; expected one of {sorted(MODELS)}")
    cls = loader()
    try:
        return cls(**params)
    except TypeError as exc:
        raise GfsError(f"forecaster {name!r}: {exc}") from None
