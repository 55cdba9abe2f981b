# %% [markdown]
# # Forecasting HP demand: Prophet vs simple baselines
#
# GFS sizes the spot quota from a forecast of high-priority (HP) GPU demand: the ρ-quantile of the
# next hours' demand decides how many GPUs LP may use. Here we backtest the forecasters of
# `gfs_opt.forecast` on **real** demand: the hourly GPUs requested by active jobs per GPU model of
# the Alibaba 2026 trace (a published aggregate of the real job file, `alibaba-hourly`).
#
# Protocol (`gfs_opt.forecast.backtest`, the simulator's): refit daily at midnight on all earlier
# hours, then at every hour update the model with the hour that just ended and forecast the next 4
# hours from it; score mean error (MAE, WAPE), the 0.9-quantile (pinball loss and coverage — the
# share of hours below it, target 0.9) and the width of the 10–90 % band.

# %%
import os
from pathlib import Path
from tempfile import mkdtemp

import pandas as pd
from IPython.display import Image, display

QUICK = os.environ.get("GFS_NOTEBOOK_QUICK") == "1"   # tests set it: small, fast settings
FIGS = Path(mkdtemp(prefix="gfs-nb-"))                  # PNGs written by gfs_opt's plot helpers
pd.set_option("display.width", 160, "display.max_columns", 30, "display.precision", 3)
# %matplotlib inline

# %%
from gfs_opt.forecast.backtest import run_backtest
from gfs_opt.forecast.plot import plot_bands
from gfs_opt.forecast.sources import load_history

history, about = load_history("alibaba-hourly")
print(about)
history.groupby("series")["y"].describe()[["mean", "50%", "max"]].sort_values("mean", ascending=False)

# %% [markdown]
# The quick variant scores the two busiest pools over half a week; the full one scores every pool
# over the last four weeks.

# %%
busiest = history.groupby("series")["y"].mean().sort_values(ascending=False).index
series = list(busiest[:2]) if QUICK else list(busiest)
weeks = 0.5 if QUICK else 4
bt = run_backtest(history[history["series"].isin(series)],
                  ["prophet", "week-peak", "seasonal-naive", "ets"],
                  horizon=4, quantile=0.9, weeks=weeks)
bt.summary().sort_values("pinball")

# %% [markdown]
# **Coverage per pool.** A calibrated 0.9-quantile sits above the actual demand 90 % of the time.
# Above 0.9 means the quota is more conservative than it needs to be (LP waits); below means more
# evictions than ρ promises.

# %%
bt.metrics.pivot(index="series", columns="model", values="coverage")

# %%
# does the band hold over the quota's horizon? coverage by step h (1 = the next hour)
bt.forecasts.assign(covered=lambda d: d["y"] <= d["hi"]).pivot_table(
    index="h", columns="model", values="covered", aggfunc="mean")

# %% [markdown]
# **Bands.** Next-hour mean and 10–90 % band of each model against the actual demand.

# %%
path = plot_bands(bt.forecasts, FIGS / "bands.png", 0.9, series=series[:2], days=3 if QUICK else 7)
display(Image(str(path)))
