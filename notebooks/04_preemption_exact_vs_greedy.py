# %% [markdown]
# # Preemption: exact MILP vs the greedy PTS
#
# When HP jobs wait and LP jobs hold GPUs, the scheduler picks victims. The paper's greedy (PTS)
# goes job by job: best-fit node candidates, a two-pointer pass over LP jobs by wasted work, the
# cheapest node. gfs_opt's batch MILP places all waiting HP jobs of a round at once, gang-aware:
# first maximise the (waiting-weighted) HP GPUs placed, then minimise eviction cost — lost work
# since the last checkpoint, restart overhead, a penalty for breaking a guarantee window
# (`formulations/preemption.md`).
#
# Each file of `instances/` is one scheduling round; both solvers answer the paper's question on
# it — every waiting HP gang placed now, the question the published GFS (`gfs-paper`) poses and
# `gfs-opt solve`'s default — and `gfs_opt.instance.milp_gap` tabulates the greedy's gap to the
# optimum. (gfs_opt's own `gfs` would first hold just-arrived gangs back for LP window
# boundaries; `gfs-opt solve --policy gfs` says which, and what the paper's step evicts for them.) The quick variant uses
# the hand-made `tiny-*` rounds, whose optima are derived by hand in `instances/README.md`.

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
from gfs_opt.experiments.reproduce.figures import gap_histogram
from gfs_opt.instance.milp_gap import instance_files, solve_instances, summarize_gaps
from gfs_opt.paths import REPO_ROOT

files = instance_files(REPO_ROOT / "instances", ["tiny-"] if QUICK else None)
gaps = solve_instances(files, time_limit=2.0 if QUICK else 10.0)
cols = ["instance", "nodes", "pending_hp", "placed_greedy", "placed_milp", "cost_greedy",
        "cost_milp", "placed_gap", "cost_excess", "greedy_infeasible", "preempt_status",
        "preempt_greedy_s", "preempt_milp_s"]
gaps[[c for c in cols if c in gaps]]

# %% [markdown]
# Reading the table: `placed_gap` > 0 means the greedy left HP value unplaced that the MILP
# placed; `cost_excess` is the greedy's extra eviction cost when both place the same HP value;
# `greedy_infeasible` marks rounds where the greedy's answer breaks a hard rule (here:
# `hard_guarantee`, which the greedy does not know).

# %%
pd.Series(summarize_gaps(gaps))

# %%
# what the prose below says, checked on this run's table
feasible = gaps[gaps["greedy_infeasible"] == False]  # noqa: E712 (a column of objects)
assert (feasible["placed_gap"].fillna(0) == 0).all(), "the greedy left HP value unplaced"
by_name = gaps.set_index("instance")
assert by_name.loc["tiny-02-window-penalty", "cost_excess"] > 0
assert by_name.loc["tiny-03-fractional", "cost_excess"] > 0
assert by_name.loc["tiny-08-quota-classes", "quota_gap"] > 0
rejected = set(by_name.index[by_name["greedy_infeasible"] == True])  # noqa: E712
assert "tiny-05-all-in-window-hard" in rejected
assert rejected <= {"tiny-05-all-in-window-hard", "contested-300-hard"}, rejected
timed = gaps[(gaps["preempt_greedy_s"] > 0) & (gaps["preempt_milp_s"] > 0)]
ratio = timed["preempt_milp_s"] / timed["preempt_greedy_s"]
print(f"{len(gaps)} rounds: {gaps['instance'].str.startswith('sim-').sum()} cut from "
      f"simulations, {gaps['instance'].str.startswith('tiny-').sum()} hand-made; MILP time / "
      f"greedy time over the {len(timed)} rounds with an HP pass: median {ratio.median():.0f}×, "
      f"from {ratio.min():.2g}× to {ratio.max():.0f}×")
assert 3 <= ratio.median() <= 300, ratio.median()

# %%
display(Image(str(gap_histogram(gaps, FIGS / 'gaps.png'))))

# %% [markdown]
# The greedy is faster than the exact MILP, but by a median factor of tens, not by orders of
# magnitude: the line printed above gives this run's factor (the cell checks that it lies between
# 3× and 300×; a single MILP, model building included, takes milliseconds to about a second on
# these rounds). Where the greedy falls short, it places the same HP value as the MILP and pays in
# eviction cost — the two-pointer pass spares the LP job with the most wasted work even when
# evicting it alone would break fewer guarantee windows (tiny-02, tiny-03) — and, in the admission
# step, on packing guarantee classes (tiny-08); it does not know `hard_guarantee`, so its answers
# to tiny-05 (and contested-300-hard in the full variant) are rejected. The cell above checks
# each of these statements on this run. The full variant adds the synthetic rounds and the rounds
# cut from simulations (the line above counts them). `gfs-milp` uses the MILP only in contested
# rounds, with the greedy as warm start and fallback.
