# %% [markdown]
# # Reproducing the paper's tables
#
# `gfs-opt reproduce` runs the paper's evaluation (the 2,296-GPU A100 cluster at three LP loads,
# GFS against YARN-CS, Chronus, Lyra and FGD, GFS-MILP, the ablations, the full-cluster replay and
# greedy vs exact on the instance files) and writes `REPRODUCTION.md` (the README says how long
# the full run takes). This notebook runs the same steps at small settings (the `small` setup at medium
# load, the fast ETS forecaster) and builds the same tables from that run; the last section shows
# the committed full run's tables (`docs/reproduction/results.json`, written by the full command)
# beside them. The small run's numbers are not comparable with the paper's: 64 LP jobs, where the
# paper's cluster scores thousands.

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
import json

from gfs_opt.experiments.reproduce.headline import (ablation_table, changes, comparisons_frame,
                                          paper_comparisons, run_table)
from gfs_opt.experiments.reproduce.plan import ReproConfig, reproduce
from gfs_opt.paths import REPO_ROOT

# gfs-paper (the published GFS) is the row scored against the paper; gfs is gfs_opt's
policies = (("gfs-paper", "gfs", "yarn-cs", "lyra") if QUICK
            else ("gfs-paper", "gfs", "yarn-cs", "chronus", "lyra", "fgd"))
cfg = ReproConfig.quick_config(policies=policies, milp_policies=(), departures=(),
                               ablations=("gfs-paper[static_eta=true]",), instances=None)
res = reproduce(cfg, Path(mkdtemp(prefix="gfs-repro-")), say=lambda msg: None)
summaries, best = res.summaries(), res.best_baseline
print("groups run here:", {g: list(v) for g, v in summaries.items()})
# the introduction's count: the small setup scores 64 LP jobs
assert summaries["grid"]["medium"]["gfs-paper"]["jobs_lp"] == 64

# %% [markdown]
# ## The paper's numbers and ours
#
# `verdict`: **match** within ±20 % of the paper's number (or inside its published range),
# **exceed** better than that, **miss** worse. Changes are (GFS − baseline)/baseline, GFS being
# the published one (`gfs-paper`).

# %%
comparisons_frame(paper_comparisons(summaries, "medium", best))

# %% [markdown]
# ## Every run of the grid

# %%
run_table(summaries["grid"]).set_index(["load", "policy"])

# %% [markdown]
# ## GFS vs each baseline
#
# LP eviction rate and mean LP JQT, per load and averaged.

# %%
changes(summaries['grid'], 'lp_eviction_rate')

# %%
changes(summaries['grid'], 'lp_jqt_mean')

# %% [markdown]
# ## Ablations

# %%
ablation_table(summaries["ablations"]["medium"]).set_index("policy")

# %% [markdown]
# Why our numbers differ from the paper's — synthetic trace, an unpublished load-scaling method,
# baselines that are not handicapped by a quota stuck at 0 as in the authors' simulator — is
# discussed in `REPRODUCTION.md`, section *Where we differ and why*.

# %% [markdown]
# ## The committed full run
#
# The same tables from `docs/reproduction/results.json`, which `gfs-opt reproduce --out
# results/reproduce --report REPRODUCTION.md --assets docs/reproduction` wrote (REPRODUCTION.md
# is generated from the same file). They are read, not recomputed here; the cell checks that the
# file holds the full grid (three loads, the paper's cluster) and that GFS ran in it.

# %%
saved = json.loads((REPO_ROOT / "docs" / "reproduction" / "results.json").read_text())
full, full_best = saved["summaries"], saved["best_baseline"]
assert saved["config"]["setup"] == "paper-a100" and not saved["config"]["quick"]
assert set(full["grid"]) == {"low", "medium", "high"}
assert all("gfs-paper" in by_policy and "gfs" in by_policy for by_policy in full["grid"].values())
comparisons_frame(paper_comparisons(full, "medium", full_best))

# %%
run_table(full["grid"]).set_index(["load", "policy"])

# %%
run_table(full["rho"]).set_index("policy") if "rho" in full else "no ρ sweep in the saved run"
