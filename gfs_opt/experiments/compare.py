"""Policy comparison: the paper's table (LP eviction, LP JQT/JCT, HP JQT, allocation) and plots."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from gfs_opt.experiments.runner import RunOutput, RunSpec, prepare_trace, run

TABLE_COLUMNS = {
    "lp_eviction_rate": "LP evict %",
    "lp_jqt_mean": "LP JQT s",
    "lp_jct_mean": "LP JCT s",
    "hp_jqt_mean": "HP JQT s",
    "allocation_rate": "alloc %",
}


def compare(base: RunSpec, policies: Sequence[str], loads: dict[str, float],
            progress: bool = False,
            on_result: Callable[[str, str, RunOutput], None] | None = None,
            ) -> dict[str, dict[str, RunOutput]]:
    """Run every policy at every load on identical traces; results[load][policy].

    ``on_result(load, policy, output)`` is called as each run finishes (e.g. to save it, so that
    an interrupted comparison keeps its finished runs)."""
    results: dict[str, dict[str, RunOutput]] = {}
    for load_name, factor in loads.items():
        spec_l = replace(base, lp_load=factor)
        prepared = prepare_trace(spec_l)
        results[load_name] = {}
        for pol in policies:
            spec = replace(spec_l, policy=pol, policy_options=_options_for(pol, base.policy_options))
            results[load_name][pol] = run(spec, progress=progress, trace=prepared,
                                          desc=f"{pol} @ {load_name}")
            if on_result is not None:
                on_result(load_name, pol, results[load_name][pol])
    return results


def _options_for(policy: str, options: dict) -> dict:
    """CLI-wide GFS options (e.g. the forecaster) apply to GFS variants that do not fix them."""
    from gfs_opt.policies import POLICIES
    from gfs_opt.policies.gfs import GFSPolicy

    cls, fixed = POLICIES[policy]
    if not issubclass(cls, GFSPolicy):
        return {}
    return {k: v for k, v in options.items() if k not in fixed}


def table(results: dict[str, dict[str, RunOutput]], reference: str = "gfs") -> pd.DataFrame:
    """One row per (load, policy); relative change of the reference vs each row's policy."""
    rows = []
    for load, by_pol in results.items():
        ref = by_pol.get(reference)
        for pol, out in by_pol.items():
            s = out.summary
            row = {"load": load, "policy": pol}
            for key in TABLE_COLUMNS:
                row[key] = s.get(key, np.nan)
            row["hp_jqt_p99"] = s.get("hp_jqt_p99", np.nan)
            row["lp_unfinished"] = s.get("lp_unfinished", 0)
            row["hp_evictions"] = s.get("hp_evictions", 0)
            row["wall_s"] = out.wall_s
            if ref is not None and pol != reference:
                for key in ("lp_eviction_rate", "lp_jqt_mean"):
                    base_v, ref_v = s.get(key, np.nan), ref.summary.get(key, np.nan)
                    row[f"gfs_vs_{key}"] = (ref_v - base_v) / base_v if base_v else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def format_table(df: pd.DataFrame, reference: str = "gfs") -> str:
    """Readable table like the paper's, with GFS's relative change vs each baseline."""
    lines = []
    head = (f"{'load':<7}{'policy':<18}{'LP evict':>9}{'LP JQT s':>11}{'LP JCT s':>11}"
            f"{'HP JQT s':>10}{'alloc':>8}   {reference} vs policy: evict / LP JQT")
    lines.append(head)
    lines.append("-" * len(head))
    for _, r in df.iterrows():
        rel = ""
        if r["policy"] != reference and "gfs_vs_lp_eviction_rate" in r and not pd.isna(r.get("gfs_vs_lp_jqt_mean")):
            rel = f"{_pct(r['gfs_vs_lp_eviction_rate'])} / {_pct(r['gfs_vs_lp_jqt_mean'])}"
        lines.append(f"{r['load']:<7}{r['policy']:<18}{100 * r['lp_eviction_rate']:>8.2f}%"
                     f"{r['lp_jqt_mean']:>11.1f}{r['lp_jct_mean']:>11.1f}{r['hp_jqt_mean']:>10.1f}"
                     f"{100 * r['allocation_rate']:>7.1f}%   {rel}")
    return "\n".join(lines)


def _pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:+.1f}%"


def plot(results: dict[str, dict[str, RunOutput]], out: Path) -> list[Path]:
    """CDF of LP JQT, allocation over time, eviction rate by pool (one PNG each, per load)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for load, by_pol in results.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for pol, o in by_pol.items():
            jqt = np.sort(o.jobs.loc[o.jobs["cls"] == "LP", "jqt"].dropna().to_numpy())
            if len(jqt):
                ax.step(np.maximum(jqt, 1.0), np.arange(1, len(jqt) + 1) / len(jqt), label=pol,
                        where="post")
        ax.set_xscale("log")
        ax.set_xlabel("LP queueing time (s)")
        ax.set_ylabel("CDF")
        ax.set_title(f"LP JQT, {load} load")
        ax.legend()
        written.append(_save(fig, out / f"lp_jqt_cdf_{load}.png"))

        fig, ax = plt.subplots(figsize=(7, 4))
        for pol, o in by_pol.items():
            ts = o.timeseries
            if len(ts):
                g = ts.groupby("t")[["allocated", "capacity"]].sum()
                hours = (g.index - g.index.min()) / 3600.0
                rate = (g["allocated"] / g["capacity"]).rolling(60, min_periods=1).mean()
                ax.plot(hours, 100 * rate, label=pol, lw=1)
        ax.set_xlabel("hours into the window")
        ax.set_ylabel("GPU allocation % (1 h mean)")
        ax.set_title(f"Allocation over time, {load} load")
        ax.legend()
        written.append(_save(fig, out / f"allocation_{load}.png"))

        fig, ax = plt.subplots(figsize=(7, 4))
        pols = list(by_pol)
        pools = list(next(iter(by_pol.values())).per_pool.index)
        width = 0.8 / max(1, len(pols))
        for i, pol in enumerate(pols):
            rates = by_pol[pol].per_pool["lp_eviction_rate"].reindex(pools).fillna(0)
            ax.bar(np.arange(len(pools)) + i * width, 100 * rates.to_numpy(), width, label=pol)
        ax.set_xticks(np.arange(len(pools)) + 0.4 - width / 2, pools, rotation=15)
        ax.set_ylabel("LP eviction rate %")
        ax.set_title(f"Eviction rate by pool, {load} load")
        ax.legend()
        written.append(_save(fig, out / f"eviction_by_pool_{load}.png"))
    return written


def _save(fig: object, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()  # type: ignore[attr-defined]
    fig.savefig(path, dpi=110)  # type: ignore[attr-defined]
    plt.close(fig)  # type: ignore[arg-type]
    return path
