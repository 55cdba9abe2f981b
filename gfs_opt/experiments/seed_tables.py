"""`compare` over several seeds: per-seed rows, each metric as mean ± 95 % interval, and GFS
against each baseline family paired by seed, with a plain statement when it is inside the noise.

The family comparison is the one `compare.family_summary` makes for one seed (GFS's relative
change against the family's mean), made per seed and then given a t interval over seeds — a
paired comparison, since GFS and the family replay the same trace within a seed. Beside it,
GFS's own interval and the family mean's interval, and whether they overlap (the cruder test a
reader does by eye on the table).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gfs_opt.experiments.compare import (
    DRAIN_NOTE,
    FAMILY_LABEL,
    HP_CHOICE_NOTE,
    RELATIVE,
    TABLE_COLUMNS,
    SeedResults,
    _rel,
    family_groups,
    table,
)
from gfs_opt.experiments.seed_stats import t_interval
from gfs_opt.policies import family

#: how each metric is shown in the seed table: (header, scale, decimals)
SHOWN = {
    "lp_eviction_rate": ("LP evict %", 100.0, 2),
    "lp_eviction_rate_drain": ("LP evict % drain", 100.0, 2),
    "hp_delay_choice_mean": ("HP choice s", 1.0, 0),
    "lp_jqt_mean": ("LP JQT s (all)", 1.0, 0),
    "lp_jqt_started_mean": ("LP JQT s (started)", 1.0, 0),
    "lp_never_started": ("LP never started", 1.0, 1),
    "hp_jqt_mean": ("HP JQT s", 1.0, 0),
    "hp_jqt_p99": ("HP JQT p99 s", 1.0, 0),
    "allocation_rate": ("alloc %", 100.0, 1),
}
METRIC_WORDS = {"lp_eviction_rate": "LP evict", "lp_jqt_mean": "LP JQT"}


def seed_table(by_seed: SeedResults, reference: str = "gfs") -> pd.DataFrame:
    """`compare.table` of every seed, one row per (load, policy, seed)."""
    return pd.concat([table(results, reference) for results in by_seed.values()],
                     ignore_index=True)


def _metrics(df: pd.DataFrame) -> list[str]:
    return [k for k in TABLE_COLUMNS if k in df.columns]


def seed_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per (load, policy): seeds, and for each table metric its mean, the half-width of its 95 %
    t interval (``_ci95``, NaN with one seed) and the interval's ends (``_lo``, ``_hi``)."""
    rows = []
    for (load, pol), sub in df.groupby(["load", "policy"], sort=False):
        row: dict[str, object] = {"load": load, "policy": pol, "family": family(str(pol)),
                                  "seeds": int(sub["seed"].nunique())}
        for key in _metrics(df):
            iv = t_interval(sub[key])
            row |= {f"{key}_mean": iv.mean, f"{key}_ci95": iv.half, f"{key}_lo": iv.lo,
                    f"{key}_hi": iv.hi}
        rows.append(row)
    return pd.DataFrame(rows)


def family_seed_summary(df: pd.DataFrame, reference: str = "gfs") -> pd.DataFrame:
    """Per load and baseline family, for each metric of `compare.RELATIVE`: GFS's interval, the
    interval of the family's per-seed mean, whether they overlap, and the interval of GFS's
    per-seed relative change against the family mean (``vs_mean_``; ``noise_`` True when it
    contains 0, None with one seed)."""
    rows = []
    for load, ref_rows, fam, base in family_groups(df, reference):
        ref = ref_rows.set_index("seed")
        row: dict[str, object] = {"load": load, "family": fam,
                                  "baselines": ",".join(dict.fromkeys(base["policy"])),
                                  "seeds": len(ref)}
        for key in RELATIVE:
            fam_mean = base.groupby("seed")[key].mean()
            seeds = [s for s in ref.index if s in fam_mean.index]
            g = t_interval(ref.loc[seeds, key])
            f = t_interval(fam_mean.loc[seeds])
            rel = t_interval(_rel(float(ref.loc[s, key]), float(fam_mean.loc[s]))
                             for s in seeds)
            row |= {f"gfs_{key}_mean": g.mean, f"gfs_{key}_ci95": g.half,
                    f"family_{key}_mean": f.mean, f"family_{key}_ci95": f.half,
                    f"overlap_{key}": g.overlaps(f),
                    f"vs_mean_{key}": rel.mean, f"vs_mean_{key}_ci95": rel.half,
                    f"vs_mean_{key}_n": rel.n, f"noise_{key}": rel.contains(0.0)}
        rows.append(row)
    return pd.DataFrame(rows)


def _pm(mean: float, half: float, scale: float, digits: int) -> str:
    if math.isnan(mean):
        return "n/a"
    text = f"{scale * mean:,.{digits}f}"
    return text if math.isnan(half) else f"{text} ± {scale * half:,.{digits}f}"


def _pct_pm(mean: float, half: float) -> str:
    if math.isnan(mean):
        return "n/a"
    text = f"{100 * mean:+.1f}%"
    return text if math.isnan(half) else f"{text} ± {100 * half:.1f}%"


def _noise_words(noise: object) -> str:
    if noise is None or (isinstance(noise, float) and math.isnan(noise)):
        return "no interval"
    return "inside the noise" if noise else "outside the noise"


def format_family_seed_summary(fam: pd.DataFrame, reference: str = "gfs") -> list[str]:
    """Two lines per (load, family): the paired relative change with its interval and verdict,
    then GFS's eviction interval against the family's, saying plainly whether they overlap."""
    lines = []
    for _, r in fam.iterrows():
        label = FAMILY_LABEL[str(r["family"])]
        parts = [f"{METRIC_WORDS.get(k, k)} {_pct_pm(r[f'vs_mean_{k}'], r[f'vs_mean_{k}_ci95'])}"
                 f" ({_noise_words(r[f'noise_{k}'])})" for k in RELATIVE]
        lines.append(f"{r['load']}: {reference} vs mean of {label}, paired over "
                     f"{r['seeds']} seeds: " + ", ".join(parts))
        key = "lp_eviction_rate"
        overlap = r[f"overlap_{key}"]
        g = _pm(r[f"gfs_{key}_mean"], r[f"gfs_{key}_ci95"], 100.0, 2)
        f = _pm(r[f"family_{key}_mean"], r[f"family_{key}_ci95"], 100.0, 2)
        verdict = ("no interval" if overlap is None else
                   "the intervals overlap (they include the spread between seeds' traces; "
                   "the paired change above is the sharper test)" if overlap else
                   f"the intervals do not overlap: {reference} evicts "
                   f"{'less' if r[f'gfs_{key}_mean'] < r[f'family_{key}_mean'] else 'more'}")
        lines.append(f"{'':<{len(str(r['load']))}}  LP evict {reference} {g} % vs "
                     f"{label.split(' (')[0]} {f} %: {verdict}")
    return lines


def format_seed_table(df: pd.DataFrame, reference: str = "gfs") -> str:
    """The comparison table over seeds: each cell mean ± half-width of its 95 % t interval."""
    summ = seed_summary(df)
    seeds = sorted(int(s) for s in df["seed"].unique())
    drain = _has_drain(df)
    shown = [k for k in SHOWN if f"{k}_mean" in summ.columns
             and (drain or k != "lp_eviction_rate_drain")]
    cells = [[_pm(r[f"{k}_mean"], r[f"{k}_ci95"], SHOWN[k][1], SHOWN[k][2]) for k in shown]
             for _, r in summ.iterrows()]
    widths = [max(len(SHOWN[k][0]), *(len(c[i]) for c in cells)) + 2
              for i, k in enumerate(shown)]
    head = f"{'load':<7}{'policy':<13}" + "".join(f"{SHOWN[k][0]:>{w}}"
                                                  for k, w in zip(shown, widths, strict=True))
    lines = [f"{len(seeds)} seeds ({', '.join(map(str, seeds))}): each cell is the mean over "
             f"seeds ± the half-width of its 95 % Student-t interval", head, "-" * len(head)]
    for (_, r), row in zip(summ.iterrows(), cells, strict=True):
        lines.append(f"{r['load']:<7}{r['policy']:<13}"
                     + "".join(f"{c:>{w}}" for c, w in zip(row, widths, strict=True)))
    fam = family_seed_summary(df, reference)
    if len(fam):
        lines += ["", *format_family_seed_summary(fam, reference)]
    lines += ["", "Lower is better for every column but alloc (higher is better); a negative "
              f"change means {reference} is lower. A change is inside the noise when the 95 % "
              "interval of its per-seed values contains 0.",
              *([DRAIN_NOTE] if drain else []),
              "LP JQT (all) counts a job that never started with its wait until the replay ended "
              "(a lower bound); (started) averages the jobs that started.",
              HP_CHOICE_NOTE]
    return "\n".join(lines)


def _has_drain(df: pd.DataFrame) -> bool:
    """Whether any row counted windows in the drain (the quota lifted after the window)."""
    cols = [c for c in ("lp_windows_failed_drain", "lp_windows_ok_drain") if c in df.columns]
    return bool(cols) and bool(df[cols].fillna(0).to_numpy().sum())


def identical_seeds(df: pd.DataFrame) -> list[str]:
    """Loads whose seeds all gave the same numbers for every policy (a real trace at ×1 load:
    the seed draws nothing there), so their intervals say nothing about the noise."""
    keys = _metrics(df)
    out = []
    for load, sub in df.groupby("load", sort=False):
        if sub["seed"].nunique() < 2:
            continue
        same = all(np.allclose(g[keys].to_numpy(dtype=float), g[keys].iloc[[0]].to_numpy(dtype=float),
                               equal_nan=True, rtol=0, atol=0)
                   for _, g in sub.groupby("policy", sort=False))
        if same:
            out.append(str(load))
    return out

