"""GDE — HP demand forecasting (GFS-SPEC §2.1).

`make_forecaster(name)` builds a model ("prophet", "week-peak", "seasonal-naive", "ets", "auto")
that follows the `Forecaster` protocol — ``fit`` (daily, expensive), ``update`` (hourly, cheap:
condition on the hours observed since), ``predict`` / ``predict_samples`` (steps 1..H after each
series' latest hour, spread calibrated per lead); `pool_forecasts` aggregates tenant forecasts per
pool; `HourlyMaxSeries` builds the hourly-max demand series incrementally; `ForecastProvider` is
what the simulator talks to (refit at 00:00, update + predict from the latest completed hour at
each quota refresh). Units everywhere: GPUs (not milli-GPU). Prophet is imported only when used.
"""

from gfs_opt.forecast.aggregate import pool_forecasts
from gfs_opt.forecast.base import BaseForecaster, Forecaster, qcol
from gfs_opt.forecast.provider import ForecastProvider
from gfs_opt.forecast.registry import MODELS, make_forecaster
from gfs_opt.forecast.series import HourlyMaxSeries, series_from_trace

__all__ = [
    "MODELS",
    "BaseForecaster",
    "ForecastProvider",
    "Forecaster",
    "HourlyMaxSeries",
    "make_forecaster",
    "pool_forecasts",
    "qcol",
    "series_from_trace",
]
