"""REPRODUCTION.md from a `ReproResults`: figures, tables (CSV + Markdown), results.json.

Layout of ``assets`` (default: the run folder): ``figures/*.png``, ``tables/*.csv`` and
``results.json`` (every run summary, so the tables can be rebuilt without the runs). Links in the
report are relative to the report's own folder, so it can live anywhere (e.g. the repository root).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gfs_opt.experiments.compare import plot as compare_plot
from gfs_opt.experiments.reproduce import figures as figs
from gfs_opt.experiments.reproduce.headline import (
    CHANGE_METRICS,
    Comparison,
    ablation_table,
    change,
    changes,
    comparisons_frame,
    paper_comparisons,
    run_table,
)
from gfs_opt.experiments.reproduce.paper import MOTIVATION, fmt, is_change
from gfs_opt.experiments.reproduce.plan import BASELINES, SQA_BASELINES, ReproResults
from gfs_opt.instance.milp_gap import summarize_gaps
from gfs_opt.model import Params

Fmt = Callable[[Any], str]


# ---- small Markdown helpers ---------------------------------------------------------------------
def md_table(rows: Sequence[Sequence[str]], header: Sequence[str], align: str = "") -> str:
    """A GitHub table; ``align`` has one of l/r per column (default: first left, rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    sep = ["---:" if a == "r" else ":---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def pct(x: Any, signed: bool = False, digits: int = 1) -> str:
    if _nan(x):
        return "–"
    return f"{100 * x:+.{digits}f} %" if signed else f"{100 * x:.{digits}f} %"


def secs(x: Any) -> str:
    return "–" if _nan(x) else f"{x:,.0f}"


def num(x: Any) -> str:
    return "–" if _nan(x) else f"{x:,.0f}"


def _link(target: Path, report: Path) -> str:
    return Path(os.path.relpath(target, report.parent)).as_posix()


# ---- figures and tables -----------------------------------------------------------------------
def make_figures(res: ReproResults, folder: Path) -> dict[str, Path]:
    """Every figure of the report, by a short name."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    grid = res.group("grid")
    if grid:
        for p in compare_plot(grid, folder):
            out[p.stem] = p
        table = run_table(res.summaries()["grid"])
        out["headline_bars"] = figs.headline_bars(table, folder / "headline_bars.png",
                                                  f"{res.config.setup}: LP eviction and LP JQT")
    abl = res.group("ablations")
    if abl:
        for p in compare_plot({f"ablations-{k}": v for k, v in abl.items()}, folder):
            out[p.stem] = p
    full = res.group("full")
    if full:
        for p in compare_plot({f"full-{k}": v for k, v in full.items()}, folder):
            out[p.stem] = p
    for key, trace in sorted(res.quota_traces.items()):
        setup, load, pol = key.split("/")
        if pol != "gfs" or trace.empty or trace["fc_mean"].isna().all():
            continue
        name = f"quota_vs_demand_{setup}_{load}"
        out[name] = figs.quota_vs_demand(trace, folder / f"{name}.png",
                                         title=f"Quota vs HP demand: {setup}, {load} load, "
                                               f"GFS (first 7 days)")
    if res.gaps is not None and len(res.gaps):
        out["milp_gap"] = figs.gap_histogram(res.gaps, folder / "milp_gap.png")
    return out


def write_tables(res: ReproResults, folder: Path) -> dict[str, pd.DataFrame]:
    folder.mkdir(parents=True, exist_ok=True)
    summ = res.summaries()
    tables: dict[str, pd.DataFrame] = {}
    if "grid" in summ:
        tables["grid"] = run_table(summ["grid"])
        for metric in CHANGE_METRICS:
            tables[f"change_{metric}"] = changes(summ["grid"], metric)
    for group in ("ablations", "full"):
        if group in summ:
            tables[group] = run_table(summ[group])
    comps = paper_comparisons(summ, res.config.ablation_load, res.best_baseline)
    tables["paper_vs_ours"] = comparisons_frame(comps)
    if res.gaps is not None:
        tables["milp_gap"] = res.gaps
    for key, trace in res.quota_traces.items():
        if key.endswith("/gfs") and not trace.empty:
            cov = figs.band_coverage(trace, Params().eta_max)
            if len(cov):
                cov.insert(0, "run", key)
                tables.setdefault("band_coverage", pd.DataFrame())
                tables["band_coverage"] = pd.concat([tables["band_coverage"], cov],
                                                    ignore_index=True)
    for name, df in tables.items():
        df.to_csv(folder / f"{name}.csv", index=name.startswith("change_"))
    return tables


def _git_commit() -> str:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, check=False, cwd=Path(__file__).parent)
        return r.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


# ---- sections ---------------------------------------------------------------------------------
def _verdict_section(comps: list[Comparison]) -> str:
    rows = []
    for c in comps:
        n = c.number
        signed = is_change(n)
        rows.append([n.label, fmt(n.value, n.unit, signed), fmt(c.ours, n.unit, signed),
                     f"**{c.verdict.word}**", c.verdict.delta, c.how])
    counts = pd.Series([c.verdict.word for c in comps]).value_counts().to_dict()
    tally = ", ".join(f"{counts.get(w, 0)} {w}"
                      for w in ("match", "exceed", "miss", "n/a", "production")
                      if counts.get(w, 0))
    return "\n".join([
        "## Headline: the paper's numbers and ours",
        "",
        "Relative changes are (GFS − baseline)/baseline: negative means GFS is lower. A value is a "
        "**match** when it is within ±20 % of the paper's magnitude (or inside its published range "
        "widened by that), **exceed** when it is better than that in the number's direction, "
        "**miss** when worse. Numbers without a better side — the baselines' own JQT and the "
        "ablations' absolute values — can only match or miss; the ablation factors (÷ GFS's) "
        "carry the paper's claim that each ablation is worse. The allocation gain and the "
        "monthly value were observed in Alibaba's production cluster: they are shown with what "
        "our simulation gives (**production**), not scored. GFS is compared with two baseline "
        "families: each baseline as its own paper describes it (no spot quota) and under GFS's "
        "spot quota with a static η (`+sqa`), the way the authors ran them.",
        "",
        md_table(rows, ["paper number", "paper", "ours", "verdict", "difference", "how ours is measured"],
                 "lrrlll"),
        "",
        f"Tally: {tally}.",
    ])


def _grid_section(res: ReproResults) -> str:
    summ = res.summaries()["grid"]
    table = run_table(summ)
    rows = [[r["load"], r["policy"], pct(r["lp_eviction_rate"], digits=2), secs(r["lp_jqt_mean"]),
             secs(r["lp_jqt_p50"]), secs(r["lp_jqt_p90"]), secs(r["lp_jqt_started_mean"]),
             num(r["lp_never_started"]), secs(r["hp_jqt_mean"]), secs(r["hp_jct_p99"]),
             pct(r["allocation_rate"]), pct(r["useful_gpu_time_rate"]), f"{r['wall_s']:,.0f}"]
            for _, r in table.iterrows()]
    any_s = next(iter(next(iter(summ.values())).values()))
    parts = [
        f"## The paper's simulation: `{res.config.setup}` at {len(summ)} LP load"
        f"{'s' if len(summ) > 1 else ''}",
        "",
        f"{any_s.get('gpus', 0):,.0f} GPUs, {any_s.get('jobs_hp', 0):,} HP jobs scored; LP jobs "
        f"scored per load are in the per-run summaries. *LP JQT started* is the mean over LP jobs "
        f"that started at all; *LP never started* counts LP jobs still waiting when the replay "
        f"ended ({res.config.drain_days:g} days after the window; their JQT runs to that end).",
        "",
        md_table(rows, ["load", "policy", "LP evict", "LP JQT mean s", "p50 s", "p90 s",
                        "LP JQT started s", "LP never started", "HP JQT s", "HP JCT p99 s",
                        "alloc", "useful", "wall s"]),
    ]
    for metric, label in CHANGE_METRICS.items():
        for fam, names in (("no-quota baselines", BASELINES), ("+sqa baselines", SQA_BASELINES)):
            ch = changes(summ, metric, baselines=names)
            if ch.empty:
                continue
            rows = [[idx, *[pct(v, signed=True) for v in ch.loc[idx]]] for idx in ch.index]
            parts += ["", f"**{label}: GFS vs each of the {fam}** ((GFS − baseline)/baseline)",
                      "", md_table(rows, ["baseline", *ch.columns])]
    milp = [p for p in res.config.milp_policies]
    if milp:
        rows = []
        for load, by_pol in summ.items():
            for p in milp:
                if p in by_pol and "gfs" in by_pol:
                    g, m = by_pol["gfs"], by_pol[p]
                    rep = _milp_reports(m)
                    rows.append([load, p, pct(m["lp_eviction_rate"], digits=2),
                                 pct(g["lp_eviction_rate"], digits=2), secs(m["lp_jqt_mean"]),
                                 secs(g["lp_jqt_mean"]), secs(m["hp_jqt_mean"]),
                                 secs(g["hp_jqt_mean"]), rep, f"{m['wall_s']:,.0f}"])
        if rows:
            parts += ["", "**Exact per-round preemption (GFS-MILP) vs greedy GFS**", "",
                      md_table(rows, ["load", "policy", "LP evict", "GFS", "LP JQT s", "GFS",
                                      "HP JQT s", "GFS", "MILP solves (fallbacks)", "wall s"])]
    return "\n".join(parts)


def _milp_reports(summary: Mapping[str, Any]) -> str:
    reps = summary.get("solver_reports") or []
    n = sum(int(r.get("count", 0)) for r in reps if r.get("method") == "milp")
    fb = sum(int(r.get("count", 0)) for r in reps if r.get("method") == "milp" and r.get("fallback"))
    return f"{n:,} ({fb:,})"


def _ablation_section(res: ReproResults) -> str:
    load = res.config.ablation_load
    by_pol = res.summaries().get("ablations", {}).get(load, {})
    if not by_pol:
        return ""
    t = ablation_table(by_pol)
    paper = {"gfs": ("1.21 %", "575.4"), "gfs-week-peak": ("8.08 %", "10,502.4"),
             "gfs-static-eta": ("–", "2,174.3")}
    about = {"gfs": "GFS as published", "gfs-week-peak": "forecaster = previous-week peak",
             "gfs-static-eta": "η fixed at 1", "gfs-no-history": "PTS ignores eviction history E(n)",
             "gfs-naive-victims": "first candidate node, victims in arbitrary order"}
    rows = [[r["policy"], about.get(r["policy"], ""), pct(r["lp_eviction_rate"], digits=2),
             f"{r['lp_eviction_rate_x_gfs']:.2f}×", secs(r["lp_jqt_mean"]),
             f"{r['lp_jqt_mean_x_gfs']:.2f}×", secs(r["lp_jqt_p90"]), num(r["lp_never_started"]),
             secs(r["hp_jqt_mean"]), pct(r["allocation_rate"]),
             *paper.get(r["policy"], ("–", "–"))] for _, r in t.iterrows()]
    return "\n".join([
        f"## Ablations (`{res.config.setup}`, {load} load)", "",
        md_table(rows, ["policy", "what changes", "LP evict", "÷ GFS", "LP JQT s", "÷ GFS",
                        "LP JQT p90 s", "LP never started", "HP JQT s", "alloc",
                        "paper LP evict", "paper LP JQT s"], "llrrrrrrrrrr"),
    ])


def _rho_section(res: ReproResults) -> str:
    """GFS across ρ next to the baselines of the same load."""
    load = res.config.ablation_load
    summ = res.summaries()
    sweep = summ.get("rho", {}).get(load, {})
    if not sweep:
        return ""
    grid = summ.get("grid", {}).get(load, {})
    base = [grid[b] for b in BASELINES if b in grid]
    rows = []
    for label, s in sorted(sweep.items(), key=lambda kv: float(kv[0].rsplit("rho", 1)[1])):
        rho = label.rsplit("rho", 1)[1]
        ev = [change(s["lp_eviction_rate"], b["lp_eviction_rate"]) for b in base]
        jq = [change(s["lp_jqt_mean"], b["lp_jqt_mean"]) for b in base]
        rows.append([rho, pct(s["lp_eviction_rate"], digits=2), secs(s["lp_jqt_mean"]),
                     secs(s.get("lp_jqt_p90")), num(s.get("lp_never_started")),
                     secs(s["hp_jqt_mean"]), pct(s["allocation_rate"]),
                     pct(_mean(ev), signed=True), pct(_mean(jq), signed=True)])
    return "\n".join([
        f"## Sensitivity to ρ (`{res.config.setup}`, {load} load, GFS with "
        f"`{res.config.sweep_forecaster}`)", "",
        "ρ is both the quantile of HP demand the quota keeps free and the eviction-rate target "
        "1 − ρ of the η feedback. The last two columns are GFS's mean change against the "
        "baselines of the grid at the same load.", "",
        md_table(rows, ["ρ", "LP evict", "LP JQT s", "LP JQT p90 s", "LP never started",
                        "HP JQT s", "alloc", "evict vs baselines", "LP JQT vs baselines"]),
    ])


def _mean(values: list[float]) -> float:
    vals = [v for v in values if not _nan(v)]
    return sum(vals) / len(vals) if vals else math.nan


def _rho_fact(res: ReproResults) -> str | None:
    """Where on the ρ curve GFS matches the baselines' queueing, if anywhere."""
    load = res.config.ablation_load
    summ = res.summaries()
    sweep = summ.get("rho", {}).get(load, {})
    grid = summ.get("grid", {}).get(load, {})
    base = [grid[b] for b in BASELINES if b in grid]
    if not sweep or not base:
        return None
    both = []
    for lbl, sm in sweep.items():
        ev_c = _mean([change(sm["lp_eviction_rate"], b["lp_eviction_rate"]) for b in base])
        jq_c = _mean([change(sm["lp_jqt_mean"], b["lp_jqt_mean"]) for b in base])
        if ev_c < 0 and jq_c < 0:
            both.append(lbl.rsplit("rho", 1)[1])
    label, s = min(sweep.items(), key=lambda kv: float(kv[0].rsplit("rho", 1)[1]))
    rho = label.rsplit("rho", 1)[1]
    ev = _mean([change(s["lp_eviction_rate"], b["lp_eviction_rate"]) for b in base])
    jq = _mean([change(s["lp_jqt_mean"], b["lp_jqt_mean"]) for b in base])
    tail = (f"GFS lowers both against the baselines' mean at ρ = {', '.join(both)}."
            if both else "The paper reports both reductions at once at ρ = 0.9; on this trace "
            "no ρ of the sweep achieves both.")
    return (f"- **ρ sets the trade-off.** With ρ = {rho}, GFS's mean LP JQT is "
            f"{secs(s['lp_jqt_mean'])} s (mean change vs the baselines {pct(jq, signed=True)}) at "
            f"an eviction rate of {pct(s['lp_eviction_rate'], digits=2)} (mean change "
            f"{pct(ev, signed=True)}); raising ρ trades one for the other (table *Sensitivity to "
            f"ρ*). {tail}")


def _full_section(res: ReproResults) -> str:
    full = res.summaries().get("full", {})
    if not full:
        return (f"## Full-cluster replay\n\nSkipped in this run"
                f"{' (quick mode)' if res.config.quick else ' (--skip-full)'}.")
    by_pol = next(iter(full.values()))
    rows = [[p, pct(s["lp_eviction_rate"], digits=2), secs(s["lp_jqt_mean"]),
             secs(s.get("lp_jqt_started_mean")), num(s.get("lp_never_started")),
             secs(s["hp_jqt_mean"]), pct(s["allocation_rate"]), f"{s['wall_s']:,.0f}"]
            for p, s in by_pol.items()]
    any_s = next(iter(by_pol.values()))
    parts = [
        f"## Full-cluster August replay (`{res.config.full_setup}`)", "",
        f"{any_s.get('gpus', 0):,.0f} GPUs, all pools, March–August replayed, August scored; GFS "
        f"against the best baseline of the A100 grid at medium load "
        f"(`{res.best_baseline}`: lowest mean LP JQT).", "",
        md_table(rows, ["policy", "LP evict", "LP JQT s", "LP JQT started s", "LP never started",
                        "HP JQT s", "alloc", "wall s"]),
    ]
    pools = res.per_pool().get("full", {})
    if pools:
        recs = next(iter(pools.values()))
        rows = []
        saturated: dict[str, tuple[int, int]] = {}
        for pol, rs in recs.items():
            for r in rs:
                rows.append([pol, r["pool"], f"{r['gpus']:,.0f}", pct(r["allocation"]),
                             pct(r["hp_share"]), pct(r["lp_share"]),
                             pct(r["lp_eviction_rate"], digits=2), secs(r["lp_jqt_mean"]),
                             secs(r.get("hp_jqt_mean")),
                             f"{r.get('hp_never_started', 0):,} / {r.get('hp_jobs', 0):,}"])
                never, n = int(r.get("hp_never_started", 0) or 0), int(r.get("hp_jobs", 0) or 0)
                if n and never > 0.1 * n:
                    saturated[r["pool"]] = (never, n)
        parts += ["", "Per pool:", "", md_table(rows, ["policy", "pool", "GPUs", "alloc",
                                                       "HP share", "LP share", "LP evict",
                                                       "LP JQT s", "HP JQT s",
                                                       "HP never started"], "llrrrrrrrr")]
        if saturated:
            names = ", ".join(f"{p} ({v[0]:,} of {v[1]:,} HP jobs)" for p, v in saturated.items())
            parts += ["", f"**Saturated pools.** HP demand alone exceeds capacity in {names}: "
                          "more than a tenth of its HP jobs never start under any policy, and "
                          "its queues dominate the cluster-wide JQT means above. Compare the "
                          "other pools row by row."
                          + (" (The real per-model demand series shows the same for A10: on "
                             "average 3,369 GPUs requested by active jobs against 2,494 A10 GPUs "
                             "in the node file; the synthetic trace inherits it.)"
                             if "A10" in saturated else "")]
    g, b = by_pol.get("gfs"), by_pol.get(res.best_baseline or "")
    if g and b:
        extra = g["allocated_gpu_hours_per_month"] - b["allocated_gpu_hours_per_month"]
        price = g.get("price_per_gpu_hour", 2.0)
        parts += ["", f"Monthly value (GFS-SPEC §5): {extra:+,.0f} allocated GPU-hours per month "
                      f"vs `{res.best_baseline}` × ${price:g}/GPU·h = "
                      f"**{fmt(extra * price, '$')}** (paper: ≈ $459,715 on > 10,000 GPUs, price "
                      f"not stated)."]
    return "\n".join(parts)


def _gap_section(res: ReproResults, figures: Mapping[str, Path], report: Path) -> str:
    if res.gaps is None or res.gaps.empty:
        return ""
    g = res.gaps
    s = summarize_gaps(g)
    rows = []
    for _, r in g.iterrows():
        rows.append([r["instance"], num(r["nodes"]), num(r["pending_hp"]), num(r["pending_lp"]),
                     pct(r.get("placed_gap"), digits=2), pct(r.get("cost_excess"), digits=1),
                     pct(r.get("quota_gap"), digits=1),
                     "yes" if r.get("greedy_infeasible") is True else "",
                     str(r.get("preempt_status", "") if not _nan(r.get("preempt_status")) else ""),
                     _sum_s(r, "greedy"), _sum_s(r, "milp")])
    parts = [
        "## Greedy vs exact on the instance files", "",
        f"{len(g)} files of `{res.config.instances}` through both solvers "
        f"(time limit {res.config.milp_time_limit:g} s per MILP step). Gap = the greedy's "
        f"shortfall to the MILP; *cost excess* only where both place the same HP value. "
        f"Mean placement gap {pct(s.get('placed_gap_mean'), digits=2)} "
        f"(max {pct(s.get('placed_gap_max'), digits=2)}), mean eviction-cost excess "
        f"{pct(s.get('cost_excess_mean'))}, mean admission gap {pct(s.get('quota_gap_mean'))}; "
        f"the greedy answer breaks a hard constraint on {s.get('greedy_infeasible', 0):.0f} "
        f"file(s).", "",
        md_table(rows, ["instance", "nodes", "pend HP", "pend LP", "placement gap",
                        "cost excess", "admission gap", "greedy infeasible", "MILP status",
                        "greedy s", "MILP s"], "lrrrrrrllrr"),
    ]
    if "milp_gap" in figures:
        parts += ["", f"![greedy vs MILP]({_link(figures['milp_gap'], report)})"]
    return "\n".join(parts)


def _sum_s(r: pd.Series, which: str) -> str:
    vals = [r.get(f"preempt_{which}_s"), r.get(f"quota_{which}_s")]
    vals = [v for v in vals if not _nan(v)]
    return f"{sum(vals):.3f}" if vals else "–"


def caption(key: str) -> str:
    """A readable caption for a figure name of `make_figures`."""
    for prefix, what in (("lp_jqt_cdf_", "CDF of LP queueing time"),
                         ("allocation_", "GPU allocation over time (1 h mean)"),
                         ("eviction_by_pool_", "LP eviction rate per pool")):
        if key.startswith(prefix):
            rest = key[len(prefix):]
            group, _, load = rest.rpartition("-")
            where = {"ablations": "ablations", "full": "full-cluster replay"}.get(group, "grid")
            return f"{what} — {where}, {load} load"
    if key.startswith("quota_vs_demand_"):
        return "Spot quota vs HP demand with the forecast's ρ-band — " + \
            key[len("quota_vs_demand_"):].replace("_", ", ") + " load, GFS"
    if key == "headline_bars":
        return "LP eviction rate and mean LP JQT per policy and load"
    return key.replace("_", " ")


def _figure_section(figures: Mapping[str, Path], report: Path) -> str:
    keys = [k for k in ("headline_bars",) if k in figures]
    for prefix in ("lp_jqt_cdf_", "eviction_by_pool_", "allocation_"):
        keys += sorted(k for k in figures if k.startswith(prefix))
    parts = ["## Figures", ""]
    for key in keys:
        cap = caption(key)
        parts += [f"**{cap}**", "", f"![{cap}]({_link(figures[key], report)})", ""]
    return "\n".join(parts)


def _quota_section(res: ReproResults, figures: Mapping[str, Path], report: Path) -> str:
    """How well the forecast band covered HP demand, and what quota it gave LP."""
    rows, pics = [], []
    for key, trace in sorted(res.quota_traces.items()):
        if not key.endswith("/gfs") or trace.empty:
            continue
        for _, r in figs.band_coverage(trace, Params().eta_max).iterrows():
            rows.append([key.rsplit("/", 1)[0], r["pool"], f"{r['samples']:,}",
                         pct(r["coverage"]), pct(r["quota_share"]), pct(r["quota_zero"]),
                         f"{r['eta_mean']:.2f}", pct(r["eta_at_max"])])
        name = "quota_vs_demand_" + key.rsplit("/", 1)[0].replace("/", "_")
        if name in figures:
            cap = caption(name)
            pics += [f"**{cap}**", "", f"![{cap}]({_link(figures[name], report)})", ""]
    if not rows:
        return ""
    return "\n".join([
        "## Spot quota and forecast (GFS runs)", "",
        "Coverage = share of 300 s samples in the scored window with HP GPUs in use ≤ the "
        f"forecast's ρ-quantile for the current hour (target ρ = {Params().rho:g}); quota share = "
        "mean LP quota (shortest guarantee class) ÷ capacity; quota < 1 GPU = share of samples "
        f"in which no LP job could be admitted; η at max = share of samples with η at its upper "
        f"clamp {Params().eta_max:g} (the feedback asks for more quota than it may give).", "",
        md_table(rows, ["run", "pool", "samples", "coverage", "quota share", "quota < 1 GPU",
                        "mean η", "η at max"], "llrrrrrr"),
        "", *pics])


def _differences_section(res: ReproResults) -> str:
    summ = res.summaries()
    load = res.config.ablation_load
    med = summ.get("grid", {}).get(load, {})
    g = med.get("gfs", {})
    base = {b: med[b] for b in BASELINES if b in med}
    facts: list[str] = []
    if g and base:
        facts.append(_queueing_fact(g, base, load, res.quota_traces.get(
            f"{res.config.setup}/{load}/gfs")))
    grid = summ.get("grid", {})
    ours = {fam: changes(grid, "lp_jqt_mean", baselines=names)
            for fam, names in (("none", BASELINES), ("sqa", SQA_BASELINES))}
    mean = {fam: float(t.loc["mean", "mean"]) if not t.empty else math.nan
            for fam, t in ours.items()}
    facts.append(
        "- **Two baseline families.** The authors gave YARN-CS, Lyra and FGD GFS's spot quota, "
        "and in their simulator that quota stayed at 0 all month (HP usage is never decremented "
        "for the baselines, GFS-SPEC §9), which inflates the baselines' LP JQT (paper: "
        "1,211.7–5,450.5 s). We run each baseline as its own paper describes it (no quota: LP "
        "borrows any idle GPU) and under the same SQA quota as GFS with a static η (`+sqa`), "
        f"without that defect. GFS's mean LP JQT change is {pct(mean['sqa'], signed=True)} "
        f"against the +sqa baselines and {pct(mean['none'], signed=True)} against the no-quota "
        "ones (paper: −44.1 % against its baselines). A quota can only hold LP work back, so "
        "against baselines that start LP on any idle GPU GFS pays for its fewer evictions with "
        "some queueing.")
    if g:
        per_pool = res.per_pool().get("grid", {}).get(load, {}).get("gfs", [])
        if per_pool:
            hp = sum(r["hp_share"] * r["gpus"] for r in per_pool) / sum(r["gpus"] for r in per_pool)
            lp = sum(r["lp_share"] * r["gpus"] for r in per_pool) / sum(r["gpus"] for r in per_pool)
            facts.append(
                f"- **Synthetic trace.** The real `job_info_df.csv` is not available offline; every "
                f"number here comes from the calibrated synthetic Alibaba-like trace "
                f"(`gfs-opt trace stats synthetic`). On `{res.config.setup}` at {load} load HP "
                f"holds {pct(hp)} of the GPUs on average and LP {pct(lp)} under GFS: LP is a small "
                f"share of the work, so allocation hardly moves between policies (the paper's "
                f"+22.8 % is a production figure on a cluster with far more spot demand).")
    rho_fact = _rho_fact(res)
    if rho_fact:
        facts.append(rho_fact)
    facts += [
        "- **Load scaling.** The paper does not say how it scales LP load. Ours "
        "(`Trace.select`): ×x < 1 keeps each LP job with probability x; ×x > 1 adds ⌊x⌋−1 copies "
        "(plus one with probability frac(x)) with submit times jittered by ±30 min. Low / medium "
        "/ high = ×0.5 / ×1 / ×2.",
        "- **Defects of the authors' simulator that gfs_opt does not repeat** (GFS-SPEC §9): HP "
        "usage accounting (adds g, subtracts g·w), η feedback and node eviction scores that never "
        "run, partial placement of multi-worker HP jobs, LP admission that ignores w, a 20-hour "
        "clock skew in forecaster training, Chronus never recording a failure. Each of these "
        "changes the published numbers in a direction we cannot quantify without their trace.",
        "- **Deliberate departures** (README): η scales the safety margin (U = μ + z_ρ·σ/η, "
        "bounds [0.1, 10]) instead of multiplying the free capacity; an hour with no guarantee "
        "window while LP jobs wait on the quota counts as ER = 0; the quota is lifted after the "
        "scored window so the backlog drains; the forecast is conditioned on the latest completed "
        "hour at every refresh; `fail_size` is gang-aware (a failed w × g gang only rules out "
        "gangs at least as large in both), η feedback acts at most hourly on the eviction rate of "
        "the last H hours, YARN-CS head-of-line blocking (incl. a head the quota refuses) is "
        "bounded at 1 h, Chronus renews leases unless HP needs the GPUs.",
        f"- **Forecaster.** The paper uses a DLinear-style network; gfs_opt uses Prophet (daily and "
        f"weekly seasonality, Chinese holidays) per tenant, or the fast seasonal ETS. This run "
        f"used `{res.config.forecaster}` for the A100 grid"
        + (f" and `{res.config.full_forecaster}` for the full replay"
           if res.config.full_forecaster and res.config.full_setup else "")
        + "; the Prophet-vs-ETS accuracy comparison is `gfs-opt forecast backtest` "
        "(notebook 02).",
        "- **JQT of jobs that never start** counts up to the end of the replay (window + "
        f"{res.config.drain_days:g} days drain, the quota lifted after the window). The tables "
        "show it apart: *LP JQT mean* over all scored LP jobs, *LP JQT started* over those that "
        "started, *LP never started*.",
    ]
    return "\n".join(["## Where we differ and why", "", *facts])


def _queueing_fact(g: Mapping[str, Any], base: Mapping[str, Mapping[str, Any]], load: str,
                   trace: pd.DataFrame | None = None) -> str:
    """What GFS's LP numbers look like against the baselines, and the mechanism behind them."""
    ev = [s["lp_eviction_rate"] for s in base.values()]
    jqt = [s["lp_jqt_mean"] for s in base.values()]
    never = [int(s.get("lp_never_started", 0) or 0) for s in base.values()]
    fewer_ev = g["lp_eviction_rate"] < sum(ev) / len(ev)
    longer_q = g["lp_jqt_mean"] > max(jqt)
    n_lower = sum(g["lp_eviction_rate"] < e for e in ev)
    head = ("GFS trades LP queueing for fewer evictions." if fewer_ev and longer_q else
            "GFS evicts less and queues less." if fewer_ev else
            "GFS queues LP longer and does not evict less." if longer_q else
            "GFS is between the baselines.")
    text = (f"- **{head}** At {load} load GFS breaks {pct(g['lp_eviction_rate'], digits=2)} of LP "
            f"guarantee windows, fewer than {n_lower} of the {len(ev)} baselines (baselines "
            f"{pct(min(ev), digits=2)}–{pct(max(ev), digits=2)}); its "
            f"mean LP JQT is {secs(g['lp_jqt_mean'])} s (baselines {secs(min(jqt))}–"
            f"{secs(max(jqt))} s), median {secs(g.get('lp_jqt_p50'))} s, p90 "
            f"{secs(g.get('lp_jqt_p90'))} s.")
    n_never = int(g.get("lp_never_started", 0) or 0)
    if n_never:
        text += (f" {n_never:,} of {g.get('jobs_lp', 0):,} LP jobs never start under GFS "
                 f"(baselines {min(never):,}–{max(never):,}); over the LP jobs that do start, "
                 f"GFS's mean JQT is {secs(g.get('lp_jqt_started_mean'))} s.")
    if longer_q:
        text += (" LP waits because the quota is min_h(C − U_h) with U_h = μ_h + z_ρ·σ_h/η the "
                 "HP demand the quota plans for: when HP demand nears capacity the quota is 0 "
                 "and LP waits by design, and a large LP gang waits until the quota has room for "
                 "all of it; the baselines start LP on any free GPU and evict it later.")
        if trace is not None and not trace.empty:
            pool = str(trace.groupby("pool")["capacity"].max().idxmax())
            d = trace[trace["pool"] == pool]
            zero = float((d["quota_gpus"] < 1).mean())
            busy = float((d["hp"] >= 0.9 * d["capacity"]).mean())
            text += (f" In pool {pool} the quota was below one GPU in {pct(zero)} of the "
                     f"samples and HP held ≥ 90 % of the pool in {pct(busy)}.")
            eta_max = Params().eta_max
            at_max = float((d["eta"] >= eta_max - 1e-9).mean())
            if at_max > 0.5:
                text += (f" η sat at its upper clamp {eta_max:g} in {pct(at_max)} of the samples: "
                         f"evictions stayed below the 1 − ρ target, so the feedback shrank the "
                         f"safety margin to z_ρ·σ/{eta_max:g} — the forecast mean of HP demand "
                         f"itself, not the margin, is what holds LP back then.")
    return text


def _config_section(res: ReproResults, command: str, assets: Path) -> str:
    c = res.config
    loads = ", ".join(f"{n} ×{f:g}" for n, f in c.loads)
    rows = []
    for group, by_load in res.runs.items():
        outs = [o for by_pol in by_load.values() for o in by_pol.values()]
        rows.append([f"simulation: {group} ({len(outs)} runs, wall time when first run)",
                     f"{sum(o.wall_s for o in outs):,.0f}"])
    rows += [[f"this invocation: {k}", f"{v:,.1f}"] for k, v in res.timings.items()
             if not k.startswith("run ")]
    return "\n".join([
        "## How this report was made", "",
        f"- command: `{command}`" if command else "- command: (Python API)",
        f"- gfs_opt commit `{_git_commit()}`, generated "
        f"{datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- setup `{c.setup}`, loads {loads}; policies {', '.join(c.policies)}; exact "
        f"{', '.join(c.milp_policies) or '–'} at {', '.join(c.milp_loads) or '–'}; ablations at "
        f"{c.ablation_load}; full replay: {c.full_setup or 'skipped'}; forecaster `{c.forecaster}`"
        f"{f' (full replay `{c.full_forecaster}`)' if c.full_forecaster else ''}; seed {c.seed}"
        f"{'; QUICK MODE (small settings, not the paper setup)' if c.quick else ''}",
        f"- runs: `{res.out}` (reused from an earlier invocation: {len(res.reused)}); figures, "
        f"tables and `results.json`: `{assets}`", "",
        md_table(rows, ["step", "seconds"]),
    ])


def _motivation_line(res: ReproResults) -> str:
    """The paper's production observations, with what our simulation shows beside them."""
    text = ("Production observations that motivate the paper (not simulation targets): "
            + "; ".join(f"{k} {v if isinstance(v, str) else pct(v)}" for k, v in MOTIVATION.items())
            + ".")
    med = res.summaries().get("grid", {}).get(res.config.ablation_load, {})
    ev = [med[b]["lp_eviction_rate"] for b in BASELINES if b in med]
    al = [s["allocation_rate"] for s in med.values()]
    if ev and al:
        text += (f" Our simulation ({res.config.setup}, {res.config.ablation_load} load): the "
                 f"no-quota baselines break {pct(min(ev), digits=2)}–{pct(max(ev), digits=2)} of "
                 f"LP guarantee windows and every policy allocates {pct(min(al))}–{pct(max(al))} "
                 f"of the GPUs.")
    return text


def write_report(res: ReproResults, report: Path, assets: Path | None = None,
                 command: str = "") -> Path:
    """Write figures, tables, results.json (under ``assets``) and the Markdown report."""
    assets = assets or res.out
    assets.mkdir(parents=True, exist_ok=True)
    report.parent.mkdir(parents=True, exist_ok=True)
    figures = make_figures(res, assets / "figures")
    write_tables(res, assets / "tables")
    (assets / "results.json").write_text(json.dumps(_clean(res.to_json()), indent=1, default=_json))
    comps = paper_comparisons(res.summaries(), res.config.ablation_load, res.best_baseline)
    title = "# Reproducing GFS (arXiv 2509.11134) with gfs_opt"
    intro = ("Our measurements beside the paper's published numbers (GFS-SPEC §8), generated by "
             "`gfs-opt reproduce`. Everything below is regenerated by the command in the last "
             "section; nothing is edited by hand.")
    if res.config.quick:
        intro += ("\n\n> **Quick mode**: small synthetic setup and settings meant for tests; the "
                  "numbers are not comparable with the paper's.")
    sections = [title, intro, _verdict_section(comps),
                _motivation_line(res),
                _grid_section(res) if res.group("grid") else "", _ablation_section(res),
                _rho_section(res),
                _full_section(res), _gap_section(res, figures, report),
                _quota_section(res, figures, report), _differences_section(res),
                _figure_section(figures, report),
                _config_section(res, command, assets)]
    text = "\n\n".join(s for s in sections if s) + "\n"
    tmp = report.with_name(f".{report.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(report)
    return report


def _json(o: object) -> object:
    if isinstance(o, float) and math.isnan(o):
        return None
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def _clean(o: Any) -> Any:
    """NaN → null everywhere (strict JSON)."""
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    if isinstance(o, float) and math.isnan(o):
        return None
    return o
