"""`make_forecaster(name, **params)`: the one place that maps model names to classes.

Importing a model class never imports Prophet: `gfs_opt.forecast.prophet_fit.import_prophet`
loads it at the first Prophet fit.
"""

from __future__ import annotations

from typing import Any

from gfs_opt.errors import GfsError
from gfs_opt.forecast.auto import AutoForecaster
from gfs_opt.forecast.base import BaseForecaster
from gfs_opt.forecast.baselines import PreviousWeekPeak, SeasonalNaive
from gfs_opt.forecast.ets import SeasonalETS
from gfs_opt.forecast.prophet_model import ProphetForecaster

MODELS: dict[str, type[BaseForecaster]] = {
    "prophet": ProphetForecaster,
    "week-peak": PreviousWeekPeak,
    "seasonal-naive": SeasonalNaive,
    "ets": SeasonalETS,
    "auto": AutoForecaster,
}


def make_forecaster(name: str, **params: Any) -> BaseForecaster:
    """Build a forecaster by name; ``params`` go to its ``__init__`` (bad ones → GfsError)."""
    cls = MODELS.get(name)
    if cls is None:
        raise GfsError(f"unknown forecaster {name!r}; expected one of {sorted(MODELS)}")
    try:
        return cls(**params)
    except TypeError as exc:
        raise GfsError(f"forecaster {name!r}: {exc}") from None
