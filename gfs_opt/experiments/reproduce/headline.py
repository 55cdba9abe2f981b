"""Reproduction tables from run summaries (plain dicts, so saved ``results.json`` works too).

``summaries`` is group → load → policy → summary (see `reproduce.ReproResults.summaries`).
Relative changes are ``(GFS − baseline) / baseline``: negative = GFS lower.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gfs_opt.experiments.reproduce.paper import PAPER, PaperNumber, Verdict, verdict
from gfs_opt.experiments.reproduce.plan import (
    BASELINES,
    REFERENCE,
    SQA_BASELINES,
    STATIC_ETA,
    WEEK_PEAK,
)
from gfs_opt.experiments.seed_stats import t_interval

Summaries = Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]]

#: columns of the per-run table: summary key → header
RUN_COLUMNS = {
    "lp_eviction_rate": "LP evict",
    "lp_jqt_mean": "LP JQT mean s",
    "lp_jqt_p50": "LP JQT p50 s",
    "lp_jqt_p90": "LP JQT p90 s",
    "lp_jqt_started_mean": "LP JQT started s",
    "lp_never_started": "LP never started",
    "hp_jqt_mean": "HP JQT s",
    "hp_jct_p99": "HP JCT p99 s",
    "allocation_rate": "alloc",
    "useful_gpu_time_rate": "useful",
    # evictions of scored LP jobs by cause (`gfs_opt.sim.causes`)
    "lp_evictions": "LP evictions",
    "lp_evictions_count": "LP evict count",
    "lp_evictions_fragmentation": "LP evict frag",
    "lp_fragmentation_share": "frag share",
}
#: metrics whose relative change vs the baselines the report shows
CHANGE_METRICS = {"lp_eviction_rate": "LP eviction", "lp_jqt_mean": "LP JQT",
                  "hp_jqt_mean": "HP JQT", "allocation_rate": "allocation"}


def _get(s: Mapping[str, Any] | None, key: str) -> float:
    if s is None:
        return math.nan
    v = s.get(key)
    return math.nan if v is None else float(v)


def change(gfs: float, base: float) -> float:
    """(gfs − base)/base; NaN when the base is 0 or missing."""
    if math.isnan(gfs) or math.isnan(base) or base == 0:
        return math.nan
    return (gfs - base) / base


def run_table(by_load: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> pd.DataFrame:
    """One row per (load, policy) with the `RUN_COLUMNS` metrics and wall time."""
    rows = []
    for load, by_pol in by_load.items():
        for pol, s in by_pol.items():
            row: dict[str, Any] = {"load": load, "policy": pol}
            row.update({k: _get(s, k) for k in RUN_COLUMNS})
            row["lp_unfinished"] = _get(s, "lp_unfinished")
            row["hp_evictions"] = _get(s, "hp_evictions")
            row["wall_s"] = _get(s, "wall_s")
            rows.append(row)
    return pd.DataFrame(rows)


def changes(by_load: Mapping[str, Mapping[str, Mapping[str, Any]]], metric: str,
            reference: str = REFERENCE, baselines: tuple[str, ...] = BASELINES) -> pd.DataFrame:
    """Change of ``reference`` vs each baseline (rows) per load (columns) plus row/column means."""
    data: dict[str, dict[str, float]] = {}
    for load, by_pol in by_load.items():
        ref = by_pol.get(reference)
        if ref is None:
            continue
        data[load] = {b: change(_get(ref, metric), _get(by_pol[b], metric))
                      for b in baselines if b in by_pol}
    df = pd.DataFrame(data)
    if df.empty:
        return df
    df["mean"] = df.mean(axis=1)
    df.loc["mean"] = df.mean(axis=0)
    return df


@dataclass(frozen=True, slots=True)
class Comparison:
    number: PaperNumber
    ours: float
    verdict: Verdict
    how: str          # how our number was computed


def paper_comparisons(summaries: Summaries, medium: str = "medium",
                      best_baseline: str | None = None, reference: str = REFERENCE,
                      ablations: bool = True) -> list[Comparison]:
    """Each published number of GFS-SPEC §8 next to ``reference``'s (see `paper.verdict`): the
    published GFS by default; ``ablations`` adds the paper's ablations (of the published GFS)."""
    grid = summaries.get("grid", {})
    med = grid.get(medium, {})
    gfs = med.get(reference)
    out: list[Comparison] = []

    def add(key: str, ours: float, how: str) -> None:
        out.append(Comparison(PAPER[key], ours, verdict(ours, PAPER[key]), how))

    ev = changes(grid, "lp_eviction_rate", reference)
    jqt = changes(grid, "lp_jqt_mean", reference)
    hp = changes(grid, "hp_jqt_mean", reference)
    ev_sqa = changes(grid, "lp_eviction_rate", reference, SQA_BASELINES)
    jqt_sqa = changes(grid, "lp_jqt_mean", reference, SQA_BASELINES)
    for key, table, fam in (("lp_eviction_change", ev, "no-quota"),
                            ("lp_eviction_change_sqa", ev_sqa, "+sqa"),
                            ("lp_jqt_change", jqt_sqa, "+sqa"),
                            ("lp_jqt_change_noquota", jqt, "no-quota")):
        if not table.empty:
            add(key, float(table.loc["mean", "mean"]),
                f"mean change over {len(table) - 1} {fam} baselines × {len(table.columns) - 1} "
                f"loads")
    full = summaries.get("full", {}).get("medium", {})
    al_all = changes(grid, "allocation_rate", reference, (*BASELINES, *SQA_BASELINES))
    gains = ([float(al_all.drop(index="mean", columns="mean").max().max())]
             if not al_all.empty else [])
    how_gain = "largest over baselines × loads"
    if reference in full and best_baseline is not None and best_baseline in full:
        gains.append(change(_get(full[reference], "allocation_rate"),
                            _get(full[best_baseline], "allocation_rate")))
        how_gain += " (A100 grid and full replay)"
    if gains:
        add("allocation_gain_max", float(np.nanmax(gains)), how_gain)
    if reference in full and best_baseline is not None and best_baseline in full:
        extra = (_get(full[reference], "allocated_gpu_hours_per_month")
                 - _get(full[best_baseline], "allocated_gpu_hours_per_month"))
        price = _get(full[reference], "price_per_gpu_hour")
        add("monthly_value", extra * price,
            f"full replay, {reference} vs {best_baseline}, ${price:g}/GPU·h (the paper's price "
            "is unknown)")
    if gfs is not None:
        add("gfs_lp_jqt", _get(gfs, "lp_jqt_mean"), "paper-a100, medium load")
        base_jqt = [_get(med[b], "lp_jqt_mean") for b in SQA_BASELINES if b in med]
        if base_jqt:
            # a range is judged by where our range sits: its mean against the published one
            add("baseline_lp_jqt", float(np.mean(base_jqt)),
                f"mean of the +sqa baselines (ours range {min(base_jqt):,.0f}–"
                f"{max(base_jqt):,.0f} s)")
        add("gfs_lp_eviction", _get(gfs, "lp_eviction_rate"), "paper-a100, medium load")
        if medium in hp:
            add("hp_jqt_change", float(hp.loc["mean", medium]),
                f"mean over baselines, medium load (ours {hp[medium].drop('mean').min():+.0%} "
                f"to {hp[medium].drop('mean').max():+.0%})")
        p99 = [_get(s, "hp_jct_p99") for p, s in med.items()
               if p in (reference, *BASELINES, *SQA_BASELINES)]
        p99 = [x for x in p99 if not math.isnan(x)]
        if p99:
            add("hp_jct_p99_spread", (max(p99) - min(p99)) / max(min(p99), 1e-9),
                f"(max − min)/min over {reference} and the baselines, medium load")
    if not ablations:
        return out
    abl = summaries.get("ablations", {}).get(medium, {})
    g = abl.get(reference, gfs)
    for pol, key, metric in ((WEEK_PEAK, "week_peak_lp_jqt", "lp_jqt_mean"),
                             (WEEK_PEAK, "week_peak_lp_eviction", "lp_eviction_rate"),
                             (STATIC_ETA, "static_eta_lp_jqt", "lp_jqt_mean")):
        if pol in abl:
            add(key, _get(abl[pol], metric), f"`{pol}`, medium load, seed 0")
    for pol, key, metric in ((WEEK_PEAK, "week_peak_jqt_factor", "lp_jqt_mean"),
                             (WEEK_PEAK, "week_peak_eviction_factor", "lp_eviction_rate"),
                             (STATIC_ETA, "static_eta_jqt_factor", "lp_jqt_mean")):
        if pol in abl and g is not None:
            base = _get(g, metric)
            add(key, _get(abl[pol], metric) / base if base else math.nan,
                f"`{pol}` ÷ {reference}")
    return out


def comparisons_frame(rows: list[Comparison]) -> pd.DataFrame:
    return pd.DataFrame([{"key": c.number.key, "paper": c.number.value, "ours": c.ours,
                          "verdict": c.verdict.word, "delta": c.verdict.delta, "how": c.how}
                         for c in rows])


def ablation_table(by_policy: Mapping[str, Mapping[str, Any]], reference: str = REFERENCE
                   ) -> pd.DataFrame:
    """Ablations vs GFS: metric values and the factor to GFS's value."""
    ref = by_policy.get(reference)
    rows = []
    for pol, s in by_policy.items():
        row: dict[str, Any] = {"policy": pol}
        for key in ("lp_eviction_rate", "lp_jqt_mean", "lp_jqt_p90", "lp_never_started",
                    "hp_jqt_mean", "allocation_rate"):
            row[key] = _get(s, key)
        for key in ("lp_eviction_rate", "lp_jqt_mean"):
            base = _get(ref, key)
            row[f"{key}_x_gfs"] = row[key] / base if base else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


#: what each departure's effect is measured on: summary key → (label, scale, unit, digits)
EFFECT_METRICS = {"lp_eviction_rate": ("LP evict", 100.0, "pp", 2),
                  "lp_jqt_mean": ("LP JQT", 1.0, "s", 0),
                  "hp_jqt_mean": ("HP JQT mean", 1.0, "s", 0),
                  "hp_jqt_p99": ("HP JQT p99", 1.0, "s", 0)}


def departure_effects(by_seed: Mapping[int, Mapping[str, Mapping[str, Mapping[str, Any]]]],
                      ours: str = "gfs") -> pd.DataFrame:
    """Each departure's effect, paired by seed: for every ``gfs-no-<key>`` run, ``ours`` minus
    it on the same trace (what adding the departure does; negative = lower with it), as the mean
    and 95 % half-width over seeds, per load; ``by_seed`` is seed → load → policy → summary."""
    rows: list[dict[str, Any]] = []
    loads = list(dict.fromkeys(ld for by_load in by_seed.values() for ld in by_load))
    policies = list(dict.fromkeys(p for by_load in by_seed.values() for by_pol in by_load.values()
                                  for p in by_pol if p.startswith("gfs-no-")))
    for pol in policies:
        for load in loads:
            row: dict[str, Any] = {"departure": pol.removeprefix("gfs-no-"), "load": load}
            for key in EFFECT_METRICS:
                diffs, with_it = [], []
                for by_load in by_seed.values():
                    by_pol = by_load.get(load, {})
                    if ours in by_pol and pol in by_pol:
                        diffs.append(_get(by_pol[ours], key) - _get(by_pol[pol], key))
                        with_it.append(_get(by_pol[ours], key))
                ci = t_interval(diffs)
                row[f"{key}_effect"], row[f"{key}_ci95"], row["seeds"] = ci.mean, ci.half, ci.n
                row[f"{key}_gfs"] = float(np.mean(with_it)) if with_it else math.nan
            rows.append(row)
    return pd.DataFrame(rows)
