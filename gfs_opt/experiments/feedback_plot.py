"""Why the quota moved: η, the quota it gave and the eviction rate it read, over a replay.

Reads a run's quota feedback table (`gfs_opt.sim.recorder.FEEDBACK_COLUMNS`, written as
``quota_feedback.csv``). Three panels share the time axis (hours into the scored window):

1. η per pool, on a log scale between its bounds;
2. the spot quota of the shortest guarantee class beside HP demand and the plan
   U_0 = μ_0 + z_ρ·σ_0/η the quota was set for, summed over pools, and LP running;
3. the eviction rate over the last H hours, all failures and the quota-attributable ones, and the
   growth band's failure rate over the last day (the windows only η > 1 let in; η grows above 1
   only while it does not exceed 1 − ρ beyond the noise), against the target 1 − ρ and the rule's thresholds
   0.5(1 − ρ) (grow) and 1.5(1 − ρ) (shrink).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from gfs_opt.model import Params


def feedback_over_time(fb: pd.DataFrame, start: float) -> pd.DataFrame:
    """The feedback summed over pools per refresh, with hours since ``start`` (the scored
    window's start): quota, HP, plan, LP in GPUs and the last H hours' rates."""
    if fb.empty:
        return pd.DataFrame(columns=["hours", "quota_gpus", "hp_gpus", "plan_gpus", "lp_gpus",
                                     "er", "er_attributable", "er_band"])
    # a run written before the band was logged has no band columns: no band rate then
    fb = fb.assign(**{c: 0.0 for c in ("band_windows", "band_failed") if c not in fb})
    g = fb.groupby("t")[["quota_gpus", "hp_gpus", "plan_gpus", "lp_gpus", "windows", "failed",
                         "failed_quota", "band_windows", "band_failed"]].sum(min_count=1)
    windows = g["windows"].where(g["windows"] > 0)
    band = g["band_windows"].where(g["band_windows"] > 0)
    return pd.DataFrame({
        "hours": (g.index.to_numpy() - start) / 3600.0,
        "quota_gpus": g["quota_gpus"], "hp_gpus": g["hp_gpus"], "plan_gpus": g["plan_gpus"],
        "lp_gpus": g["lp_gpus"], "er": g["failed"] / windows,
        "er_attributable": g["failed_quota"] / windows,
        "er_band": g["band_failed"] / band}).reset_index(drop=True)


def plot_feedback(fb: pd.DataFrame, start: float, title: str,
                  params: Params | None = None) -> Any:
    """The three panels for one run (a matplotlib Figure); ``start``: the scored window's start
    (the table also holds the day before it, where the quota the window starts with was set)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = params or Params()
    target = 1.0 - p.rho
    fig, (ax_eta, ax_q, ax_er) = plt.subplots(3, 1, figsize=(9, 7.5), sharex=True)
    for pool, rows in fb.groupby("pool", sort=True):
        ax_eta.step((rows["t"] - start) / 3600.0, rows["eta"], where="post", lw=1, label=pool)
    ax_eta.set_yscale("log")
    ax_eta.set_ylim(p.eta_min * 0.8, p.eta_max * 1.25)
    for bound in (p.eta_min, 1.0, p.eta_max):
        ax_eta.axhline(bound, color="grey", lw=0.6, ls=":")
    ax_eta.set_ylabel("η")
    if fb["pool"].nunique() > 1:
        ax_eta.legend(loc="upper left", fontsize=7, ncols=4)

    sums = feedback_over_time(fb, start)
    h = sums["hours"]
    ax_q.step(h, sums["quota_gpus"], where="post", lw=1.2, label="spot quota (shortest class)")
    ax_q.plot(h, sums["hp_gpus"], lw=0.8, label="HP GPUs")
    ax_q.plot(h, sums["plan_gpus"], lw=0.8, ls="--", label="plan U₀ (μ₀ + z_ρσ₀/η)")
    ax_q.plot(h, sums["lp_gpus"], lw=0.8, alpha=0.8, label="LP GPUs")
    ax_q.set_ylabel("GPUs (all pools)")
    ax_q.legend(loc="upper left", fontsize=7, ncols=2)

    ax_er.plot(h, 100 * sums["er"], lw=0.8, label="eviction rate, last H h")
    ax_er.plot(h, 100 * sums["er_attributable"], lw=1.2, label="quota-attributable")
    ax_er.plot(h, 100 * sums["er_band"], lw=1.0, ls="--", label="growth band (η > 1), last day")
    ax_er.axhline(100 * target, color="black", lw=0.8, label="target 1 − ρ")
    for k in (0.5, 1.5):
        ax_er.axhline(100 * k * target, color="grey", lw=0.6, ls=":")
    ax_er.set_ylabel("failed windows %")
    ax_er.set_xlabel("hours into the scored window")
    ax_er.legend(loc="upper left", fontsize=7, ncols=3)
    fig.suptitle(title)
    return fig
