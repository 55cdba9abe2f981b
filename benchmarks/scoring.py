"""How LP evictions are scored, read off a sweep over ``quota_after_window`` (benchmarks/specs/).

Three scorings of the same runs: **kept** — the quota stays on through the drain (the default)
and every window of a scored LP job counts; **window start** — the quota is lifted after the
scored window and only the windows that started before it ended count (`lp_eviction_rate` of
a lifted run); **authors'** — the quota lifted and every window counted, the drain's flood too
(`lp_eviction_rate_all`). Per policy: mean ± 95 % t interval over seeds of the LP eviction rate,
failed windows and LP JQT; then GFS against the `+sqa` family under each scoring (LP eviction
against every baseline, LP JQT against their mean, paired by seed).

    python benchmarks/scoring.py results/sweep-scoring-paper-a100 [more sweep folders]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from gfs_opt.experiments.seed_stats import t_interval

SQA = ("yarn-cs+sqa", "lyra+sqa", "fgd+sqa")
#: scoring → (quota_after_window of its runs, eviction key, failed-window keys)
SCORINGS = {
    "kept": (True, "lp_eviction_rate", ("lp_windows_failed",)),
    "window start": (False, "lp_eviction_rate", ("lp_windows_failed",)),
    "authors'": (False, "lp_eviction_rate_all", ("lp_windows_failed", "lp_windows_failed_drain")),
}


def load(folder: Path) -> pd.DataFrame:
    rows = []
    for f in sorted((folder / "cells").glob("*/cell.json")):
        rec = json.loads(f.read_text())
        if rec.get("status") != "ok":
            continue
        p, m = rec["params"], rec["metrics"]
        rows.append({"policy": p["policy"], "seed": p["seed"],
                     "kept": bool(p.get("quota_after_window", True)), **m})
    return pd.DataFrame(rows)


def pm(values: pd.Series, scale: float = 1.0, digits: int = 2) -> str:
    iv = t_interval(values)
    return f"{scale * iv.mean:,.{digits}f} ± {scale * iv.half:,.{digits}f}"


def report(df: pd.DataFrame, name: str) -> list[str]:
    lines = [f"{name} ({df['seed'].nunique()} seeds): LP evict % and LP JQT s, mean ± 95 %", "",
             "| policy | kept: evict | kept: LP JQT | window start: evict | drain: evict "
             "| authors': evict | lifted: LP JQT |", "|---|---:|---:|---:|---:|---:|---:|"]
    pols = [p for p in ("gfs", "gfs-paper", *SQA) if p in set(df["policy"])]
    for pol in pols:
        kept = df[(df["policy"] == pol) & df["kept"]]
        lifted = df[(df["policy"] == pol) & ~df["kept"]]
        cells = [pm(kept["lp_eviction_rate"], 100), pm(kept["lp_jqt_mean"], 1, 0)]
        cells += [pm(lifted[k], 100) for k in ("lp_eviction_rate", "lp_eviction_rate_drain",
                                               "lp_eviction_rate_all")]
        cells.append(pm(lifted["lp_jqt_mean"], 1, 0))
        lines.append(f"| {pol} | " + " | ".join(cells) + " |")
    lines.append("")
    for ref in ("gfs", "gfs-paper"):
        for sc, (kept, key, _f) in SCORINGS.items():
            sub = df[df["kept"] == kept].set_index(["policy", "seed"])
            if ref not in sub.index.get_level_values(0):
                continue
            g = sub.loc[ref]
            base = [b for b in SQA if b in sub.index.get_level_values(0)]
            if not base:
                continue
            worse = [b for b in base if g[key].mean() > sub.loc[b][key].mean()]
            # the family's mean per seed, over the seeds every baseline finished
            fam = pd.concat([sub.loc[b]["lp_jqt_mean"] for b in base], axis=1).mean(axis=1)
            rel = (g["lp_jqt_mean"] - fam) / fam
            fam_ev = pd.concat([sub.loc[b][key] for b in base], axis=1).mean(axis=1)
            rel_ev = (g[key] - fam_ev) / fam_ev
            lines.append(f"- {ref}, {sc}: LP evict ≤ every +sqa baseline: "
                         f"{'yes' if not worse else 'no (above ' + ', '.join(worse) + ')'}; "
                         f"vs the +sqa mean (paired): LP evict {pm(rel_ev, 100, 1)} %, "
                         f"LP JQT {pm(rel, 100, 1)} %")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("sweeps", nargs="+", type=Path)
    a = ap.parse_args()
    for folder in a.sweeps:
        print("\n".join(report(load(folder), folder.name)))
        print()


if __name__ == "__main__":
    main()
