# %% [markdown]
# # Quickstart: trace → simulation → metrics → plots
#
# `gfs_opt` replays a GPU-cluster trace through a scheduling policy and measures what the GFS paper
# measures: LP ("spot") eviction rate, queueing time (JQT), completion time (JCT) and GPU
# allocation. This notebook takes the built-in synthetic trace, runs GFS and YARN-CS on it, and
# looks at the results. With `GFS_NOTEBOOK_QUICK=1` it uses the small setup (the tests' choice),
# otherwise the paper's 2,296-GPU A100 cluster.

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

# %% [markdown]
# ## 1. A trace
#
# A `Trace` is two tables: nodes (one pool per GPU model) and jobs (GPU request per worker `g`,
# `workers`, submit time and duration in seconds since 2024-03-01, class HP or LP). Named setups
# say which part of the trace is replayed and which window is scored.

# %%
from gfs_opt.experiments.runner import RunSpec, prepare_trace
from gfs_opt.experiments.setups import SETUPS

setup = "small" if QUICK else "paper-a100"
print(setup, "—", SETUPS[setup].about)
spec = RunSpec.from_setup(setup, policy_options={"forecaster": "ets"})
trace, start, end = prepare_trace(spec)
print(f"{trace.nodes['gpus'].sum():,} GPUs on {len(trace.nodes)} nodes, {len(trace.jobs):,} jobs; "
      f"scored window {(end - start) / 86400:.0f} days")
assert QUICK or trace.nodes["gpus"].sum() == 2296   # the cluster the introduction names
# GPU amounts are integer milli-GPUs inside gfs_opt (1000 = one GPU)
trace.jobs.assign(gpus=trace.jobs["g"] / 1000).groupby(["pool", "cls"]).agg(
    jobs=("job_id", "size"), gpus_per_worker=("gpus", "mean"), workers=("workers", "mean"),
    median_duration_s=("duration", "median"))

# %% [markdown]
# ## 2. Simulate two policies on the identical trace
#
# `compare` runs each policy on the same prepared trace. GFS forecasts HP demand per tenant (here
# with the fast seasonal ETS model; the default is Prophet) and admits LP jobs only within a spot
# quota; YARN-CS lets LP borrow any idle GPU and evicts it when HP needs the GPU back.

# %%
from gfs_opt.experiments.compare import compare, format_table, plot, table

results = compare(spec, ["gfs", "yarn-cs"], {"medium": 1.0})
print(format_table(table(results)))

# %% [markdown]
# ## 3. Metrics
#
# Each run keeps its headline numbers (`summary`), per-class and per-pool tables, a 60-second
# usage time series and one row per scored job.

# %%
gfs = results["medium"]["gfs"]
keys = ["lp_eviction_rate", "lp_share_evicted", "lp_jqt_mean", "lp_jqt_p50", "lp_jqt_p99",
        "hp_jqt_mean", "hp_evictions", "allocation_rate", "useful_gpu_time_rate", "wall_s"]
pd.DataFrame({pol: {k: out.summary[k] for k in keys} for pol, out in results["medium"].items()})

# %%
gfs.per_pool

# %%
gfs.jobs.query("cls == 'LP'").sort_values("jqt", ascending=False).head()

# %% [markdown]
# ## 4. Plots
#
# `compare.plot` draws the paper's figures for a comparison: the CDF of LP queueing time, GPU
# allocation over time and the eviction rate per pool.

# %%
for path in plot(results, FIGS):
    display(Image(str(path)))
