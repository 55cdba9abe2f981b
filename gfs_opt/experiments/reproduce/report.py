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
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from gfs_opt.experiments.compare import plot as compare_plot
from gfs_opt.experiments.reproduce import figures as figs
from gfs_opt.experiments.reproduce.headline import (
    CHANGE_METRICS,
    EFFECT_METRICS,
    Comparison,
    ablation_table,
    change,
    changes,
    comparisons_frame,
    departure_effects,
    paper_comparisons,
    run_table,
)
from gfs_opt.experiments.reproduce.paper import MOTIVATION, fmt, is_change
from gfs_opt.experiments.reproduce.plan import (
    BASELINES,
    OURS,
    REFERENCE,
    SQA_BASELINES,
    STATIC_ETA,
    WEEK_PEAK,
    ReproConfig,
    ReproResults,
)
from gfs_opt.experiments.seed_tables import (
    SHOWN,
    family_seed_summary,
    format_family_seed_summary,
    seed_summary,
    seed_table,
)
from gfs_opt.fileio import write_csv, write_text
from gfs_opt.instance.milp_gap import summarize_gaps
from gfs_opt.model import Params
from gfs_opt.policies.departures import BY_KEY

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
        for p in compare_plot(grid, folder, feedback=False):
            out[p.stem] = p
        table = run_table(res.summaries()["grid"])
        out["headline_bars"] = figs.headline_bars(table, folder / "headline_bars.png",
                                                  f"{res.config.setup}: LP eviction and LP JQT")
    abl = res.group("ablations")
    if abl:
        for p in compare_plot({f"ablations-{k}": v for k, v in abl.items()}, folder,
                             feedback=False):
            out[p.stem] = p
    full = res.group("full")
    if full:
        for p in compare_plot({f"full-{k}": v for k, v in full.items()}, folder,
                             feedback=False):
            out[p.stem] = p
    for key, trace in sorted(res.quota_traces.items()):
        setup, load, pol = key.split("/")
        if pol not in (REFERENCE, OURS) or trace.empty or trace["fc_mean"].isna().all():
            continue
        name = f"quota_vs_demand_{setup}_{load}_{pol}"
        out[name] = figs.quota_vs_demand(trace, folder / f"{name}.png",
                                         title=f"Quota vs HP demand: {setup}, {load} load, "
                                               f"{pol} (first 7 days)")
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
            tables[f"change_{metric}"] = changes(summ["grid"], metric, REFERENCE)
            tables[f"change_{metric}_{OURS}"] = changes(summ["grid"], metric, OURS)
    for group in ("ablations", "full"):
        if group in summ:
            tables[group] = run_table(summ[group])
    by_seed = res.grid_by_seed()
    if len(by_seed) > 1:
        per_seed = seed_table(by_seed)
        tables["grid_by_seed"] = per_seed
        tables["grid_seeds"] = seed_summary(per_seed)
        tables["grid_families"] = family_seed_summary(per_seed)
    comps = paper_comparisons({**summ, "grid": res.grid_means()}, res.config.ablation_load,
                              res.best_baseline)
    tables["paper_vs_ours"] = comparisons_frame(comps)
    effects = _effects(res)
    if not effects.empty:
        tables["departures"] = effects
    if res.gaps is not None:
        tables["milp_gap"] = res.gaps
    for key, trace in res.quota_traces.items():
        if key.rsplit("/", 1)[1] in (REFERENCE, OURS) and not trace.empty:
            cov = figs.band_coverage(trace, Params().eta_max)
            if len(cov):
                cov.insert(0, "run", key)
                tables.setdefault("band_coverage", pd.DataFrame())
                tables["band_coverage"] = pd.concat([tables["band_coverage"], cov],
                                                    ignore_index=True)
    for name, df in tables.items():
        write_csv(folder / f"{name}.csv", df, index=name.startswith("change_"))
    return tables


def _git_commit() -> str:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, check=False, cwd=Path(__file__).parent)
        return r.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


# ---- section contexts (numbers and tables; the prose is in templates/report.md.j2) ---------------
DEPARTURES = Path(__file__).with_name("departures.md")
TEMPLATE = "report.md.j2"
WORDS = ("match", "exceed", "miss", "n/a", "production")


def departures() -> str:
    """The deliberate departures from the spec: one source for docs/departures.md and the report."""
    return DEPARTURES.read_text(encoding="utf-8").rstrip()


def _verdicts(comps: list[Comparison]) -> dict[str, str]:
    rows = []
    for c in comps:
        n = c.number
        signed = is_change(n)
        rows.append([n.label, fmt(n.value, n.unit, signed), fmt(c.ours, n.unit, signed),
                     f"**{c.verdict.word}**", c.verdict.delta, c.how])
    counts = pd.Series([c.verdict.word for c in comps]).value_counts().to_dict()
    tally = ", ".join(f"{counts[w]} {w}" for w in WORDS if counts.get(w, 0))
    return {"table": md_table(rows, ["paper number", "paper", "ours", "verdict", "difference",
                                     "how ours is measured"], "lrrlll"),
            "tally": tally}


def _motivation(res: ReproResults) -> dict[str, Any]:
    paper = "; ".join(f"{k} {v if isinstance(v, str) else pct(v)}" for k, v in MOTIVATION.items())
    med = res.summaries().get("grid", {}).get(res.config.ablation_load, {})
    ev = [med[b]["lp_eviction_rate"] for b in BASELINES if b in med]
    al = [s["allocation_rate"] for s in med.values()]
    ours = None
    if ev and al:
        ours = {"setup": res.config.setup, "load": res.config.ablation_load,
                "evict_lo": pct(min(ev), digits=2), "evict_hi": pct(max(ev), digits=2),
                "alloc_lo": pct(min(al)), "alloc_hi": pct(max(al))}
    return {"paper": paper, "ours": ours}


def _grid(res: ReproResults) -> dict[str, Any] | None:
    summ = res.summaries().get("grid")
    if not summ:
        return None
    table = run_table(summ)
    rows = [[r["load"], r["policy"], pct(r["lp_eviction_rate"], digits=2), secs(r["lp_jqt_mean"]),
             secs(r["lp_jqt_p50"]), secs(r["lp_jqt_p90"]), secs(r["lp_jqt_started_mean"]),
             num(r["lp_never_started"]), secs(r["hp_jqt_mean"]), secs(r["hp_jct_p99"]),
             pct(r["allocation_rate"]), pct(r["useful_gpu_time_rate"]), _causes(r),
             f"{r['wall_s']:,.0f}"]
            for _, r in table.iterrows()]
    any_s = next(iter(next(iter(summ.values())).values()))
    blocks = []
    for metric, label in CHANGE_METRICS.items():
        for fam, names in (("no-quota baselines", BASELINES), ("+sqa baselines", SQA_BASELINES)):
            ch = changes(summ, metric, baselines=names)
            if not ch.empty:
                ch_rows = [[idx, *[pct(v, signed=True) for v in ch.loc[idx]]] for idx in ch.index]
                blocks.append({"label": label, "family": fam,
                               "table": md_table(ch_rows, ["baseline", *ch.columns])})
    milp_rows = []
    for load, by_pol in summ.items():
        for p in res.config.milp_policies:
            if p in by_pol and OURS in by_pol:
                g, m = by_pol[OURS], by_pol[p]
                milp_rows.append([load, p, pct(m["lp_eviction_rate"], digits=2),
                                  pct(g["lp_eviction_rate"], digits=2), secs(m["lp_jqt_mean"]),
                                  secs(g["lp_jqt_mean"]), secs(m["hp_jqt_mean"]),
                                  secs(g["hp_jqt_mean"]), _milp_reports(m), f"{m['wall_s']:,.0f}"])
    return {
        "seeds": _seed_grid(res),
        "setup": res.config.setup, "n_loads": len(summ), "gpus": f"{any_s.get('gpus', 0):,.0f}",
        "jobs_hp": f"{any_s.get('jobs_hp', 0):,}",
        "table": md_table(rows, ["load", "policy", "LP evict", "LP JQT mean s", "p50 s", "p90 s",
                                 "LP JQT started s", "LP never started", "HP JQT s",
                                 "HP JCT p99 s", "alloc", "useful",
                                 "LP evictions: count / frag (frag share)", "wall s"]),
        "changes": blocks,
        "milp": md_table(milp_rows, ["load", "policy", "LP evict", OURS, "LP JQT s", OURS,
                                     "HP JQT s", OURS, "MILP solves (fallbacks)", "wall s"])
        if milp_rows else None,
    }


def _seed_grid(res: ReproResults) -> dict[str, Any] | None:
    """The grid over seeds: each metric as mean ± 95 % half-width, and GFS against each family
    paired by seed (None with one seed)."""
    by_seed = res.grid_by_seed()
    if len(by_seed) < 2:
        return None
    df = seed_table(by_seed, REFERENCE)
    summ = seed_summary(df)
    shown = [k for k in SHOWN if f"{k}_mean" in summ.columns]
    rows = [[r["load"], r["policy"], *[_pm(r[f"{k}_mean"], r[f"{k}_ci95"], SHOWN[k][1],
                                           SHOWN[k][2]) for k in shown]]
            for _, r in summ.iterrows()]
    seeds = sorted(by_seed)
    return {"n": len(seeds), "list": ", ".join(map(str, seeds)), "first": res.config.seed,
            "table": md_table(rows, ["load", "policy", *[SHOWN[k][0] for k in shown]]),
            "families": [line.strip() for ref in (REFERENCE, OURS) for line in
                         format_family_seed_summary(family_seed_summary(df, ref), ref)]}


def _pm(mean: Any, half: Any, scale: float, digits: int) -> str:
    if _nan(mean):
        return "–"
    text = f"{scale * mean:,.{digits}f}"
    return text if _nan(half) else f"{text} ± {scale * half:,.{digits}f}"
def _causes(r: Mapping[str, Any]) -> str:
    """A run's LP evictions split by cause: count / fragmentation (fragmentation's share); a
    dash for a summary written before causes were recorded."""
    if _nan(r.get("lp_evictions")):
        return "–"
    return (f"{num(r['lp_evictions_count'])} / {num(r['lp_evictions_fragmentation'])} "
            f"({pct(r['lp_fragmentation_share'], digits=0)})")


def _milp_reports(summary: Mapping[str, Any]) -> str:
    reps = summary.get("solver_reports") or []
    n = sum(int(r.get("count", 0)) for r in reps if r.get("method") == "milp")
    fb = sum(int(r.get("count", 0)) for r in reps if r.get("method") == "milp" and r.get("fallback"))
    return f"{n:,} ({fb:,})"


def _ablations(res: ReproResults) -> dict[str, Any] | None:
    load = res.config.ablation_load
    by_pol = res.summaries().get("ablations", {}).get(load, {})
    if not by_pol:
        return None
    t = ablation_table(by_pol, REFERENCE)
    paper = {REFERENCE: ("1.21 %", "575.4"), WEEK_PEAK: ("8.08 %", "10,502.4"),
             STATIC_ETA: ("–", "2,174.3")}
    about = {REFERENCE: "the published GFS", WEEK_PEAK: "forecaster = previous-week peak",
             STATIC_ETA: "η fixed at 1",
             "gfs-paper[use_history=false]": "PTS ignores eviction history E(n)",
             "gfs-paper[victims=naive]": "first candidate node, victims in arbitrary order"}
    rows = [[f"`{r['policy']}`", about.get(r["policy"], ""), pct(r["lp_eviction_rate"], digits=2),
             f"{r['lp_eviction_rate_x_gfs']:.2f}×", secs(r["lp_jqt_mean"]),
             f"{r['lp_jqt_mean_x_gfs']:.2f}×", secs(r["lp_jqt_p90"]), num(r["lp_never_started"]),
             secs(r["hp_jqt_mean"]), pct(r["allocation_rate"]),
             *paper.get(r["policy"], ("–", "–"))] for _, r in t.iterrows()]
    return {"setup": res.config.setup, "load": load,
            "table": md_table(rows, ["policy", "what changes", "LP evict", f"÷ {REFERENCE}",
                                     "LP JQT s", f"÷ {REFERENCE}", "LP JQT p90 s",
                                     "LP never started", "HP JQT s",
                                     "alloc", "paper LP evict", "paper LP JQT s"],
                              "llrrrrrrrrrr")}


def _effects(res: ReproResults) -> pd.DataFrame:
    """`departure_effects` of the run's departures group (empty without one)."""
    by_seed = {seed: {load: {p: o.summary for p, o in by_pol.items()}
                      for load, by_pol in by_load.items()}
               for seed, by_load in res.departures_by_seed().items()}
    return departure_effects(by_seed, OURS)


def _signed(mean: Any, half: Any, scale: float, digits: int) -> str:
    if _nan(mean):
        return "–"
    text = f"{scale * mean:+,.{digits}f}"
    return text if _nan(half) else f"{text} ± {scale * half:,.{digits}f}"


def _beyond(res: ReproResults) -> dict[str, Any] | None:
    """gfs_opt's GFS beyond the paper: the paper's numbers for both GFS, and each departure's
    effect over seeds."""
    grid = res.grid_means()
    if not any(OURS in by_pol for by_pol in grid.values()):
        return None
    means = {**res.summaries(), "grid": grid}
    load = res.config.ablation_load
    paper = {c.number.key: c for c in paper_comparisons(means, load, res.best_baseline,
                                                        REFERENCE, ablations=False)}
    ours = paper_comparisons(means, load, res.best_baseline, OURS, ablations=False)
    rows = []
    for c in ours:
        n = c.number
        signed = is_change(n)
        p = paper.get(n.key)
        rows.append([n.label, fmt(n.value, n.unit, signed),
                     fmt(p.ours, n.unit, signed) if p else "–", fmt(c.ours, n.unit, signed),
                     f"**{c.verdict.word}**", c.how.replace(OURS, f"`{OURS}`")])
    out: dict[str, Any] = {"numbers": md_table(rows, ["paper number", "paper", REFERENCE, OURS,
                                                      f"{OURS} verdict", "how measured"],
                                               "lrrrll"),
                           "effects": None, "seeds": None}
    eff = _effects(res)
    if not eff.empty:
        erows = []
        for _, r in eff.iterrows():
            d = BY_KEY.get(str(r["departure"]))
            erows.append([f"`{r['departure']}`", d.part if d else "", r["load"],
                          *[f"{_signed(r[f'{k}_effect'], r[f'{k}_ci95'], sc, dg)} {unit}"
                            for k, (_lab, sc, unit, dg) in EFFECT_METRICS.items()]])
        out["effects"] = md_table(erows, ["departure", "part", "load",
                                          *[lab for lab, *_ in EFFECT_METRICS.values()]],
                                  "lllrrrr")
        out["seeds"] = int(eff["seeds"].max())
    return out


def _mean(values: list[float]) -> float:
    vals = [v for v in values if not _nan(v)]
    return sum(vals) / len(vals) if vals else math.nan


def _rho_key(label: str) -> float:
    return float(label.rsplit("rho", 1)[1])


def _vs_baselines(s: Mapping[str, Any], base: Sequence[Mapping[str, Any]], metric: str) -> float:
    return _mean([change(s[metric], b[metric]) for b in base])


def _rho(res: ReproResults) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The ρ table and the fact drawn from it (GFS across ρ against the no-quota baselines)."""
    load = res.config.ablation_load
    summ = res.summaries()
    sweep = summ.get("rho", {}).get(load, {})
    grid = summ.get("grid", {}).get(load, {})
    base = [grid[b] for b in BASELINES if b in grid]
    if not sweep:
        return None, None
    rows = []
    for label, s in sorted(sweep.items(), key=lambda kv: _rho_key(kv[0])):
        rows.append([label.rsplit("rho", 1)[1], pct(s["lp_eviction_rate"], digits=2),
                     secs(s["lp_jqt_mean"]), secs(s.get("lp_jqt_p90")),
                     num(s.get("lp_never_started")), secs(s["hp_jqt_mean"]),
                     pct(s["allocation_rate"]),
                     pct(_vs_baselines(s, base, "lp_eviction_rate"), signed=True),
                     pct(_vs_baselines(s, base, "lp_jqt_mean"), signed=True)])
    table = {"setup": res.config.setup, "load": load, "forecaster": res.config.sweep_forecaster,
             "table": md_table(rows, ["ρ", "LP evict", "LP JQT s", "LP JQT p90 s",
                                      "LP never started", "HP JQT s", "alloc",
                                      "evict vs baselines", "LP JQT vs baselines"])}
    if not base:
        return table, None
    both = [lbl.rsplit("rho", 1)[1] for lbl, sm in sweep.items()
            if _vs_baselines(sm, base, "lp_eviction_rate") < 0
            and _vs_baselines(sm, base, "lp_jqt_mean") < 0]
    label, s = min(sweep.items(), key=lambda kv: _rho_key(kv[0]))
    fact = {"rho": label.rsplit("rho", 1)[1], "jqt": secs(s["lp_jqt_mean"]),
            "jqt_change": pct(_vs_baselines(s, base, "lp_jqt_mean"), signed=True),
            "evict": pct(s["lp_eviction_rate"], digits=2),
            "evict_change": pct(_vs_baselines(s, base, "lp_eviction_rate"), signed=True),
            "both": ", ".join(both)}
    return table, fact


def _full(res: ReproResults) -> dict[str, Any] | None:
    full = res.summaries().get("full", {})
    if not full:
        return None
    by_pol = next(iter(full.values()))
    rows = [[p, pct(s["lp_eviction_rate"], digits=2), secs(s["lp_jqt_mean"]),
             secs(s.get("lp_jqt_started_mean")), num(s.get("lp_never_started")),
             secs(s["hp_jqt_mean"]), pct(s["allocation_rate"]), f"{s['wall_s']:,.0f}"]
            for p, s in by_pol.items()]
    any_s = next(iter(by_pol.values()))
    out: dict[str, Any] = {
        "setup": res.config.full_setup, "gpus": f"{any_s.get('gpus', 0):,.0f}",
        "best": res.best_baseline,
        "table": md_table(rows, ["policy", "LP evict", "LP JQT s", "LP JQT started s",
                                 "LP never started", "HP JQT s", "alloc", "wall s"]),
        "pools": None, "saturated": None, "a10": False, "value": None}
    pools = res.per_pool().get("full", {})
    if pools:
        recs = next(iter(pools.values()))
        prow = []
        saturated: dict[str, tuple[int, int]] = {}
        for pol, rs in recs.items():
            for r in rs:
                prow.append([pol, r["pool"], f"{r['gpus']:,.0f}", pct(r["allocation"]),
                             pct(r["hp_share"]), pct(r["lp_share"]),
                             pct(r["lp_eviction_rate"], digits=2), secs(r["lp_jqt_mean"]),
                             secs(r.get("hp_jqt_mean")),
                             f"{r.get('hp_never_started', 0):,} / {r.get('hp_jobs', 0):,}"])
                never, n = int(r.get("hp_never_started", 0) or 0), int(r.get("hp_jobs", 0) or 0)
                if n and never > 0.1 * n:
                    saturated[r["pool"]] = (never, n)
        out["pools"] = md_table(prow, ["policy", "pool", "GPUs", "alloc", "HP share", "LP share",
                                       "LP evict", "LP JQT s", "HP JQT s", "HP never started"],
                                "llrrrrrrrr")
        if saturated:
            out["saturated"] = ", ".join(f"{p} ({v[0]:,} of {v[1]:,} HP jobs)"
                                         for p, v in saturated.items())
            out["a10"] = "A10" in saturated
    g, b = by_pol.get(REFERENCE), by_pol.get(res.best_baseline or "")
    if g and b:
        extra = g["allocated_gpu_hours_per_month"] - b["allocated_gpu_hours_per_month"]
        price = g.get("price_per_gpu_hour", 2.0)
        out["value"] = {"extra": f"{extra:+,.0f}", "price": f"{price:g}",
                        "dollars": fmt(extra * price, "$")}
    return out


def _gaps(res: ReproResults, figures: Mapping[str, Path], report: Path) -> dict[str, Any] | None:
    if res.gaps is None or res.gaps.empty:
        return None
    g = res.gaps
    s = summarize_gaps(g)
    rows = [[r["instance"], num(r["nodes"]), num(r["pending_hp"]), num(r["pending_lp"]),
             pct(r.get("placed_gap"), digits=2), pct(r.get("cost_excess"), digits=1),
             pct(r.get("quota_gap"), digits=1),
             "yes" if r.get("greedy_infeasible") is True else "",
             str(r.get("preempt_status", "") if not _nan(r.get("preempt_status")) else ""),
             _sum_s(r, "greedy"), _sum_s(r, "milp")] for _, r in g.iterrows()]
    return {"n": len(g), "folder": res.config.instances, "limit": f"{res.config.milp_time_limit:g}",
            "placed_mean": pct(s.get("placed_gap_mean"), digits=2),
            "placed_max": pct(s.get("placed_gap_max"), digits=2),
            "cost_mean": pct(s.get("cost_excess_mean")), "quota_mean": pct(s.get("quota_gap_mean")),
            "infeasible": f"{s.get('greedy_infeasible', 0):.0f}",
            "table": md_table(rows, ["instance", "nodes", "pend HP", "pend LP", "placement gap",
                                     "cost excess", "admission gap", "greedy infeasible",
                                     "MILP status", "greedy s", "MILP s"], "lrrrrrrllrr"),
            "figure": _link(figures["milp_gap"], report) if "milp_gap" in figures else None}


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


def _pictures(keys: Sequence[str], figures: Mapping[str, Path], report: Path) -> list[dict[str, str]]:
    return [{"caption": caption(k), "link": _link(figures[k], report)} for k in keys]


def _figure_keys(figures: Mapping[str, Path]) -> list[str]:
    keys = [k for k in ("headline_bars",) if k in figures]
    for prefix in ("lp_jqt_cdf_", "eviction_by_pool_", "allocation_"):
        keys += sorted(k for k in figures if k.startswith(prefix))
    return keys


def _quota(res: ReproResults, figures: Mapping[str, Path], report: Path) -> dict[str, Any] | None:
    """How well the forecast band covered HP demand, and what quota it gave LP."""
    rows, names = [], []
    for key, trace in sorted(res.quota_traces.items()):
        if key.rsplit("/", 1)[1] not in (REFERENCE, OURS) or trace.empty:
            continue
        for _, r in figs.band_coverage(trace, Params().eta_max).iterrows():
            rows.append([key.rsplit("/", 1)[0], r["pool"], f"{r['samples']:,}",
                         pct(r["coverage"]), pct(r["quota_share"]), pct(r["quota_zero"]),
                         f"{r['eta_mean']:.2f}", pct(r["eta_at_max"])])
        name = "quota_vs_demand_" + key.replace("/", "_")
        if name in figures:
            names.append(name)
    if not rows:
        return None
    return {"rho": f"{Params().rho:g}", "eta_max": f"{Params().eta_max:g}",
            "table": md_table(rows, ["run", "pool", "samples", "coverage", "quota share",
                                     "quota < 1 GPU", "mean η", "η at max"], "llrrrrrr"),
            "figures": _pictures(names, figures, report)}


def _queueing(g: Mapping[str, Any], base: Mapping[str, Mapping[str, Any]], load: str,
              trace: pd.DataFrame | None) -> dict[str, Any]:
    """GFS's LP numbers against the baselines, and what the quota trace shows behind them."""
    ev = [s["lp_eviction_rate"] for s in base.values()]
    jqt = [s["lp_jqt_mean"] for s in base.values()]
    never = [int(s.get("lp_never_started", 0) or 0) for s in base.values()]
    fewer_ev = g["lp_eviction_rate"] < sum(ev) / len(ev)
    longer_q = g["lp_jqt_mean"] > max(jqt)
    out: dict[str, Any] = {
        "head": ("GFS trades LP queueing for fewer evictions." if fewer_ev and longer_q else
                 "GFS evicts less and queues less." if fewer_ev else
                 "GFS queues LP longer and does not evict less." if longer_q else
                 "GFS is between the baselines."),
        "load": load, "evict": pct(g["lp_eviction_rate"], digits=2),
        "n_lower": sum(g["lp_eviction_rate"] < e for e in ev), "n_base": len(ev),
        "evict_lo": pct(min(ev), digits=2), "evict_hi": pct(max(ev), digits=2),
        "jqt": secs(g["lp_jqt_mean"]), "jqt_lo": secs(min(jqt)), "jqt_hi": secs(max(jqt)),
        "p50": secs(g.get("lp_jqt_p50")), "p90": secs(g.get("lp_jqt_p90")),
        "never": int(g.get("lp_never_started", 0) or 0), "jobs_lp": f"{g.get('jobs_lp', 0):,}",
        "never_lo": f"{min(never):,}", "never_hi": f"{max(never):,}",
        "jqt_started": secs(g.get("lp_jqt_started_mean")), "longer": longer_q,
        "pool": None, "at_max": None}
    if trace is not None and not trace.empty:
        pool = str(trace.groupby("pool")["capacity"].max().idxmax())
        d = trace[trace["pool"] == pool]
        out.update(pool=pool, zero=pct(float((d["quota_gpus"] < 1).mean())),
                   busy=pct(float((d["hp"] >= 0.9 * d["capacity"]).mean())))
        at_max = float((d["eta"] >= Params().eta_max - 1e-9).mean())
        if at_max > 0.5:
            out["at_max"] = pct(at_max)
    return out


def _facts(res: ReproResults, rho_fact: dict[str, Any] | None) -> dict[str, Any]:
    summ = res.summaries()
    load = res.config.ablation_load
    grid = summ.get("grid", {})
    med = grid.get(load, {})
    g = med.get(REFERENCE, {})
    base = {b: med[b] for b in (*BASELINES, *SQA_BASELINES) if b in med}
    facts: dict[str, Any] = {"queueing": None, "families": None, "chronus": None,
                             "synthetic": None, "rho": rho_fact}
    if g and base:
        facts["queueing"] = _queueing(g, base, load, res.quota_traces.get(
            f"{res.config.setup}/{load}/{REFERENCE}"))
    fam = {f: changes(grid, "lp_jqt_mean", REFERENCE, names)
           for f, names in (("none", BASELINES), ("sqa", SQA_BASELINES))}
    if any(not t.empty for t in fam.values()):
        facts["families"] = {f: pct(float(t.loc["mean", "mean"]) if not t.empty else math.nan,
                                    signed=True) for f, t in fam.items()}
    if g and "chronus" in med:
        c = med["chronus"]
        facts["chronus"] = {"load": load, "evict": pct(c["lp_eviction_rate"], digits=2),
                            "gfs_evict": pct(g["lp_eviction_rate"], digits=2),
                            "hp": secs(c["hp_jqt_mean"]), "gfs_hp": secs(g["hp_jqt_mean"])}
    per_pool = res.per_pool().get("grid", {}).get(load, {}).get(REFERENCE, [])
    if g and per_pool:
        gpus = sum(r["gpus"] for r in per_pool)
        facts["synthetic"] = {
            "setup": res.config.setup, "load": load,
            "hp": pct(sum(r["hp_share"] * r["gpus"] for r in per_pool) / gpus),
            "lp": pct(sum(r["lp_share"] * r["gpus"] for r in per_pool) / gpus)}
    return facts


def _config(res: ReproResults, command: str, assets: Path) -> dict[str, Any]:
    c = res.config
    rows = []
    for group, by_load in res.runs.items():
        outs = [o for by_pol in by_load.values() for o in by_pol.values()]
        rows.append([f"simulation: {group} ({len(outs)} runs, wall time when first run)",
                     f"{sum(o.wall_s for o in outs):,.0f}"])
    rows += [[f"this invocation: {k}", f"{v:,.1f}"] for k, v in res.timings.items()
             if not k.startswith("run ")]
    return {
        "command": command, "commit": _git_commit(),
        "generated": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "config": {"setup": c.setup, "loads": ", ".join(f"{n} ×{f:g}" for n, f in c.loads),
                   "policies": ", ".join(c.policies),
                   "milp": f"{', '.join(c.milp_policies) or '–'} at {', '.join(c.milp_loads) or '–'}",
                   "ablation_load": c.ablation_load, "full": c.full_setup or "skipped",
                   "seed": (f"{', '.join(map(str, c.grid_seeds))} (grid), {c.seed} elsewhere"
                            if len(c.grid_seeds) > 1 else str(c.seed)), "out": str(res.out), "reused": len(res.reused),
                   "assets": str(assets)},
        "timings": md_table(rows, ["step", "seconds"])}


def scoring(cfg: ReproConfig) -> dict[str, str]:
    """How the report's eviction rates are scored (`gfs_opt.sim.metrics`): ``drain`` a clause on
    what happens after the window, ``text`` the paragraph that says it for every number."""
    paper = ("The paper's numbers come from the authors' simulator, which lifts the spot quota "
             "when the scored window ends and counts every window of a scored LP job, those of "
             "the flood that follows too.")
    if cfg.lift_quota_after_window:
        return {"drain": "the quota lifted after the window (the authors' drain)",
                "text": "**Scoring.** Every run of this report lifts the spot quota when the "
                        "scored window ends (`--lift-quota-after-window`, the authors' drain). "
                        "*LP evict* counts the guarantee windows that started under the quota; "
                        "those that started in the drain are in each run's summary apart "
                        "(`lp_eviction_rate_drain`; both together: `lp_eviction_rate_all`, the "
                        "authors' scoring). " + paper}
    return {"drain": "the quota kept through the drain",
            "text": "**Scoring.** Every run of this report keeps the spot quota on until the "
                    "replay ends (`Params.quota_after_window`, the default), so *LP evict* "
                    "counts every guarantee window of a scored LP job and each of them is one "
                    "the quota governs. " + paper + " With the quota lifted the quota'd "
                    "policies' rates grow by that flood (BENCHMARKS.md measures both scorings; "
                    "`gfs-opt reproduce --lift-quota-after-window` reruns this report that "
                    "way)."}


def render(res: ReproResults, report: Path, figures: Mapping[str, Path], assets: Path,
           command: str = "") -> str:
    """The report's Markdown (see templates/report.md.j2)."""
    env = Environment(loader=FileSystemLoader(Path(__file__).with_name("templates")),
                      undefined=StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
                      autoescape=False)
    comps = paper_comparisons({**res.summaries(), "grid": res.grid_means()},
                              res.config.ablation_load, res.best_baseline)
    rho, rho_fact = _rho(res)
    c = res.config
    context = {
        "quick": c.quick, "drain_days": f"{c.drain_days:g}", "scoring": scoring(c),
        "verdicts": _verdicts(comps),
        "motivation": _motivation(res), "grid": _grid(res), "ablations": _ablations(res),
        "rho": rho, "full": _full(res), "gaps": _gaps(res, figures, report),
        "quota": _quota(res, figures, report) or {"eta_max": f"{Params().eta_max:g}"},
        "facts": _facts(res, rho_fact), "departures": departures(),
        "beyond": _beyond(res), "reference": REFERENCE, "ours": OURS,
        "forecaster": c.forecaster,
        "full_forecaster": c.full_forecaster if c.full_forecaster and c.full_setup else None,
        "figures": _pictures(_figure_keys(figures), figures, report),
        **_config(res, command, assets)}
    text = env.get_template(TEMPLATE).render(**context)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def write_report(res: ReproResults, report: Path, assets: Path | None = None,
                 command: str = "") -> Path:
    """Write figures, tables, results.json (under ``assets``) and the Markdown report."""
    assets = assets or res.out
    assets.mkdir(parents=True, exist_ok=True)
    report.parent.mkdir(parents=True, exist_ok=True)
    figures = make_figures(res, assets / "figures")
    write_tables(res, assets / "tables")
    write_text(assets / "results.json", json.dumps(_clean(res.to_json()), indent=1, default=_json))
    write_text(report, render(res, report, figures, assets, command))
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
