"""Reproduction figures beyond `compare.plot` (which draws the per-load JQT CDF, allocation over
time and eviction by pool): quota vs HP demand with forecast bands, greedy-vs-MILP gaps, and
headline bars. Each function writes one PNG (Agg backend) and returns its path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gfs_opt.experiments.compare import _save


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def quota_vs_demand(trace: pd.DataFrame, path: Path, pool: str | None = None,
                    days: float | None = 7.0, title: str = "") -> Path:
    """Top: HP GPUs in use against the forecast mean and its ρ-band; bottom: the spot quota
    against the LP GPUs in use and the GPUs free of HP, with η on a second axis.

    ``trace`` is a `QuotaTracer` table; ``pool`` defaults to the largest pool; ``days`` keeps the
    first days of the window (None: all of it) so that hourly structure stays visible.
    """
    plt = _plt()
    if pool is None:
        pool = str(trace.groupby("pool")["capacity"].max().idxmax())
    d = trace[trace["pool"] == pool].sort_values("t")
    if days is not None and len(d):
        d = d[d["t"] < d["t"].iloc[0] + days * 86_400.0]
    hours = (d["t"] - d["t"].min()) / 3600.0 if len(d) else d["t"]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    cap = float(d["capacity"].max()) if len(d) else 0.0
    ax1.fill_between(hours, d["fc_lo"], d["fc_hi"], color="tab:blue", alpha=0.2,
                     label="forecast band [q1−ρ, qρ]")
    ax1.plot(hours, d["fc_mean"], color="tab:blue", lw=1, label="forecast mean (current hour)")
    ax1.plot(hours, d["hp"], color="black", lw=1, label="HP GPUs in use")
    ax1.axhline(cap, color="grey", ls="--", lw=0.8, label="capacity")
    ax1.set_ylabel("GPUs")
    ax1.set_title(title or f"Quota vs HP demand, {pool}")
    ax1.legend(fontsize=7, loc="lower left", ncol=2)
    ax2.plot(hours, d["quota_gpus"], color="tab:green", lw=1, label="LP quota (shortest class)")
    ax2.plot(hours, d["lp"], color="tab:orange", lw=1, label="LP GPUs in use")
    ax2.plot(hours, d["capacity"] - d["hp"], color="grey", lw=0.8, ls=":",
             label="GPUs free of HP")
    ax2.set_ylabel("GPUs")
    ax2.set_xlabel("hours into the scored window")
    eta = ax2.twinx()
    eta.plot(hours, d["eta"], color="tab:red", lw=0.8, alpha=0.7, label="η")
    eta.set_ylabel("η", color="tab:red")
    lines = ax2.get_legend_handles_labels()
    lines_eta = eta.get_legend_handles_labels()
    ax2.legend(lines[0] + lines_eta[0], lines[1] + lines_eta[1], fontsize=7, loc="upper left",
               ncol=2)
    return _save(fig, Path(path))


def band_coverage(trace: pd.DataFrame, eta_max: float = 2.0) -> pd.DataFrame:
    """Per pool: share of samples with HP in use ≤ the forecast's ρ-quantile (target ρ), the mean
    share of capacity the quota gave to LP, how often it was below one GPU, and η (mean, share of
    samples at its upper clamp)."""
    d = trace.dropna(subset=["fc_hi"])
    rows = []
    for pool, g in d.groupby("pool"):
        rows.append({"pool": pool, "samples": len(g),
                     "coverage": float((g["hp"] <= g["fc_hi"] + 1e-9).mean()),
                     "quota_share": float((g["quota_gpus"] / g["capacity"]).mean()),
                     "eta_mean": float(g["eta"].mean()),
                     "eta_at_max": float((g["eta"] >= eta_max - 1e-9).mean()),
                     "quota_zero": float((g["quota_gpus"] < 1).mean())})
    return pd.DataFrame(rows)


def gap_histogram(gaps: pd.DataFrame, path: Path) -> Path:
    """Left: histogram of the greedy's gaps to the MILP over the instances; right: solve times."""
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    series = {"HP value not placed (placement gap)": "placed_gap",
              "extra eviction cost (same HP placed)": "cost_excess",
              "admission value lost (quota gap)": "quota_gap"}
    data, labels = [], []
    for label, col in series.items():
        if col in gaps:
            v = 100 * pd.to_numeric(gaps[col], errors="coerce").dropna().to_numpy()
            if len(v):
                data.append(v)
                labels.append(f"{label} (n={len(v)})")
    if data:
        top = max(float(np.max(np.concatenate(data))), 1.0)
        bins = np.linspace(0, top * 1.05, 16)
        ax1.hist(data, bins=bins, label=labels)
        ax1.legend(fontsize=7)
    ax1.set_xlabel("greedy's gap to the MILP (%)")
    ax1.set_ylabel("instances")
    ax1.set_title("Greedy vs exact, per instance")
    names = gaps["instance"].tolist()
    x = np.arange(len(names))
    g_s = gaps.get("preempt_greedy_s", pd.Series(np.nan, index=gaps.index)).fillna(0) + \
        gaps.get("quota_greedy_s", pd.Series(np.nan, index=gaps.index)).fillna(0)
    m_s = gaps.get("preempt_milp_s", pd.Series(np.nan, index=gaps.index)).fillna(0) + \
        gaps.get("quota_milp_s", pd.Series(np.nan, index=gaps.index)).fillna(0)
    ax2.bar(x - 0.2, np.maximum(g_s, 1e-4), 0.4, label="greedy")
    ax2.bar(x + 0.2, np.maximum(m_s, 1e-4), 0.4, label="MILP")
    ax2.set_yscale("log")
    ax2.set_xticks(x, names, rotation=75, fontsize=6)
    ax2.set_ylabel("seconds (both steps)")
    ax2.set_title("Solve time")
    ax2.legend(fontsize=7)
    return _save(fig, Path(path))


def headline_bars(table: pd.DataFrame, path: Path, title: str = "") -> Path:
    """LP eviction rate and mean LP JQT per policy, one group of bars per load."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    loads = list(dict.fromkeys(table["load"]))
    pols = list(dict.fromkeys(table["policy"]))
    width = 0.8 / max(1, len(pols))
    for ax, (col, label, scale) in zip(axes, (("lp_eviction_rate", "LP eviction rate %", 100),
                                              ("lp_jqt_mean", "mean LP JQT (s)", 1)), strict=True):
        for i, pol in enumerate(pols):
            vals = [float(table[(table["load"] == ld) & (table["policy"] == pol)][col].sum())
                    if ((table["load"] == ld) & (table["policy"] == pol)).any() else np.nan
                    for ld in loads]
            ax.bar(np.arange(len(loads)) + i * width, scale * np.asarray(vals), width, label=pol)
        ax.set_xticks(np.arange(len(loads)) + 0.4 - width / 2, loads)
        ax.set_ylabel(label)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    return _save(fig, Path(path))
