"""ρ as a dial: what a sweep over the guarantee probability ρ gives, per policy and guarantee class.

ρ is a promise: each LP guarantee window survives with probability at least ρ. Read off a sweep
whose cells vary ρ (``examples/sweep-rho.toml``), the dial works when

- the realised window success of each guarantee class is at least ρ (the promise is kept),
- LP queueing time does not rise as ρ falls (a looser promise admits more LP work), and
- the eviction rate under the quota does not fall as ρ falls (it buys that work with evictions).

Windows are counted under the quota (`gfs_opt.sim.metrics`): with the quota kept through the
drain (the default) that is every window of a scored LP job; with the authors' lifted drain the
windows that start in the drain are left out, since no quota governs them.

    python -m gfs_opt.experiments.rho_dial results/sweep-rho [--out rho-dial.png]

prints the table (mean ± 95 % t interval over seeds), the three checks per policy, and draws the
dial: success per class against ρ (the diagonal is the promise) and LP JQT against ρ.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.experiments.seed_stats import t_interval
from gfs_opt.sim.metrics import per_guarantee_class

#: run metrics the dial reads (summary keys)
RUN_METRICS = ("lp_eviction_rate", "lp_eviction_rate_drain", "lp_jqt_mean", "lp_never_started",
               "hp_jqt_mean", "allocation_rate")
#: policies drawn in this order when present (the rest follow in the sweep's order)
ORDER = ("gfs", "gfs-paper", "yarn-cs+sqa", "lyra+sqa", "fgd+sqa")


@dataclass
class Dial:
    """A ρ sweep read back: ``runs`` one row per finished cell (policy, rho, seed and
    `RUN_METRICS`); ``classes`` one row per cell and guarantee class (`per_guarantee_class`)."""

    runs: pd.DataFrame
    classes: pd.DataFrame


def load_dial(out: Path) -> Dial:
    """Read every finished cell of the sweep in ``out`` (cell.json and its jobs.csv)."""
    cells = Path(out) / "cells"
    if not cells.is_dir():
        raise GfsError(f"{out}: no sweep results here (no cells/ folder)")
    runs, classes = [], []
    for d in sorted(cells.iterdir()):
        rec_file = d / "cell.json"
        if not rec_file.is_file():
            continue
        rec = json.loads(rec_file.read_text())
        if rec.get("status") != "ok":
            continue
        p, m = rec["params"], rec.get("metrics") or {}
        rho = float(p.get("rho", 0.9))
        key = {"cell": rec["id"], "policy": p["policy"], "rho": rho, "seed": int(p["seed"])}
        runs.append({**key, **{k: m.get(k, math.nan) for k in RUN_METRICS}})
        jobs_file = d / "jobs.csv"
        if jobs_file.is_file():
            per = per_guarantee_class(pd.read_csv(jobs_file))
            for h, row in per.iterrows():
                classes.append({**key, "guarantee_h": float(h), **row.to_dict()})
    if not runs:
        raise GfsError(f"{out}: no finished cell yet")
    return Dial(pd.DataFrame(runs), pd.DataFrame(classes))


def _order(policies: Sequence[str]) -> list[str]:
    seen = list(dict.fromkeys(policies))
    return [p for p in ORDER if p in seen] + [p for p in seen if p not in ORDER]


def dial_table(dial: Dial) -> pd.DataFrame:
    """Per (policy, ρ): seeds, and mean / 95 % half-width of LP eviction (under the quota), LP
    JQT, and of each guarantee class's realised success (``success_<h>h``)."""
    rows = []
    for (pol, rho), sub in dial.runs.groupby(["policy", "rho"], sort=False):
        row: dict[str, object] = {"policy": pol, "rho": rho, "seeds": len(sub)}
        for k in ("lp_eviction_rate", "lp_jqt_mean", "lp_never_started"):
            iv = t_interval(sub[k])
            row |= {f"{k}_mean": iv.mean, f"{k}_ci95": iv.half}
        cls = dial.classes
        if len(cls):
            mine = cls[(cls["policy"] == pol) & (cls["rho"] == rho)]
            for h, g in mine.groupby("guarantee_h"):
                iv = t_interval(g["success"].dropna())
                row |= {f"success_{h:g}h_mean": iv.mean, f"success_{h:g}h_ci95": iv.half,
                        f"windows_{h:g}h": int((g["windows_ok"] + g["windows_failed"]).sum())}
        rows.append(row)
    df = pd.DataFrame(rows)
    df["policy"] = pd.Categorical(df["policy"], _order(df["policy"]), ordered=True)
    return df.sort_values(["policy", "rho"]).reset_index(drop=True)


def class_hours(table: pd.DataFrame) -> list[str]:
    """The guarantee classes of a `dial_table`, as their column labels ("1h", "2h", …)."""
    labels = [c.removeprefix("success_").removesuffix("_mean") for c in table.columns
              if c.startswith("success_") and c.endswith("_mean")]
    return sorted(labels, key=lambda s: float(s[:-1]))


@dataclass(frozen=True)
class Check:
    """One of the dial's checks for one policy: whether it holds on the means, and where not."""

    policy: str
    what: str
    holds: bool
    misses: tuple[str, ...]


def checks(table: pd.DataFrame, promise_for: Sequence[str] = ("gfs",)) -> list[Check]:
    """The module doc's three checks on the means over seeds: success ≥ ρ per class (for the
    policies of ``promise_for``, with any options), LP JQT not rising as ρ falls and eviction
    under the quota not falling as ρ falls (every policy; adjacent ρ values compared). A miss
    names the ρ values and says whether the two intervals overlap (inside the noise)."""
    out = []
    for pol, sub in table.groupby("policy", sort=False, observed=True):
        sub = sub.sort_values("rho")
        pol = str(pol)
        if pol.split("[", 1)[0] in promise_for:   # a policy with options: its base name
            misses = []
            for _, r in sub.iterrows():
                for h in class_hours(table):
                    m, half = r.get(f"success_{h}_mean"), r.get(f"success_{h}_ci95")
                    if m is not None and not pd.isna(m) and m < r["rho"]:
                        noise = (not pd.isna(half)) and m + half >= r["rho"]
                        misses.append(f"ρ={r['rho']:g} {h}: {100 * m:.2f} %"
                                      + (" (inside the noise)" if noise else ""))
            out.append(Check(pol, "realised window success ≥ ρ in every class", not misses,
                             tuple(misses)))
        for key, what, rises in (("lp_jqt_mean", "LP JQT does not rise as ρ falls", True),
                                 ("lp_eviction_rate", "eviction under the quota does not fall "
                                                      "as ρ falls", False)):
            misses = []
            rows = list(sub.iterrows())
            for (_, lo), (_, hi) in itertools.pairwise(rows):   # lo: the smaller ρ
                a, b = lo[f"{key}_mean"], hi[f"{key}_mean"]
                bad = a > b if rises else a < b
                if bad:
                    ha, hb = lo[f"{key}_ci95"], hi[f"{key}_ci95"]
                    noise = not (pd.isna(ha) or pd.isna(hb)) and abs(a - b) <= ha + hb
                    scale, unit, digits = ((1.0, " s", 0) if key == "lp_jqt_mean"
                                           else (100.0, " %", 2))
                    misses.append(f"ρ={lo['rho']:g} → {hi['rho']:g}: {scale * a:,.{digits}f} vs "
                                  f"{scale * b:,.{digits}f}{unit}"
                                  + (" (inside the noise)" if noise else ""))
            out.append(Check(pol, what, not misses, tuple(misses)))
    return out


def _pm(mean: float, half: float, scale: float, digits: int) -> str:
    if pd.isna(mean):
        return "n/a"
    text = f"{scale * mean:,.{digits}f}"
    return text if pd.isna(half) else f"{text} ± {scale * half:,.{digits}f}"


def format_dial(table: pd.DataFrame, found: Sequence[Check] = ()) -> str:
    """The table (mean ± 95 % half-width over seeds) and the checks, one line each."""
    hours = class_hours(table)
    head = ["policy", "ρ", "seeds", "LP evict %", "LP JQT s", *(f"success {h} %" for h in hours)]
    rows = [head]
    for _, r in table.iterrows():
        rows.append([str(r["policy"]), f"{r['rho']:g}", str(r["seeds"]),
                     _pm(r["lp_eviction_rate_mean"], r["lp_eviction_rate_ci95"], 100.0, 2),
                     _pm(r["lp_jqt_mean_mean"], r["lp_jqt_mean_ci95"], 1.0, 0),
                     *(_pm(r.get(f"success_{h}_mean"), r.get(f"success_{h}_ci95"), 100.0, 2)
                       for h in hours)])
    widths = [max(len(x[i]) for x in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 1 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(x, widths, strict=True))) for x in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines += ["", "mean ± half-width of the 95 % t interval over seeds; eviction and success "
              "count the windows under the quota"]
    for c in found:
        lines.append(f"{c.policy}: {c.what}: " + ("yes" if c.holds else
                                                 "no — " + "; ".join(c.misses)))
    return "\n".join(lines)


def plot_dial(table: pd.DataFrame, path: Path, title: str = "") -> Path:
    """Two panels: realised window success per class against ρ (dashed diagonal: the promise)
    and LP JQT against ρ, one colour per policy (markers per class)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = class_hours(table)
    markers = dict(zip(hours, "osD^v<>", strict=False))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    rhos = sorted(table["rho"].unique())
    ax1.plot(rhos, rhos, "k--", lw=1, label="promise: success = ρ")
    for i, (pol, sub) in enumerate(table.groupby("policy", sort=False, observed=True)):
        colour = f"C{i}"
        for h in hours:
            col = f"success_{h}_mean"
            if col in sub and sub[col].notna().any():
                ax1.errorbar(sub["rho"], sub[col], yerr=sub[f"success_{h}_ci95"].fillna(0),
                             color=colour, marker=markers[h], ms=4, lw=1, capsize=2,
                             label=f"{pol} {h}")
        ax2.errorbar(sub["rho"], sub["lp_jqt_mean_mean"], yerr=sub["lp_jqt_mean_ci95"].fillna(0),
                     color=colour, marker="o", ms=4, lw=1, capsize=2, label=str(pol))
    ax1.set_xlabel("guarantee probability ρ")
    ax1.set_ylabel("realised window success (under the quota)")
    # zoomed on the realised success (the diagonal leaves the view where every class is far
    # above its promise)
    lo = float(table[[f"success_{h}_mean" for h in hours]].min().min())
    ax1.set_ylim(max(0.0, min(lo, max(rhos)) - 0.01), 1.002)
    ax1.legend(fontsize=6, ncol=2, loc="lower right")
    ax2.set_xlabel("guarantee probability ρ")
    ax2.set_ylabel("mean LP queueing time (s)")
    ax2.set_yscale("log")
    ax2.legend(fontsize=7, loc="upper left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="ρ as a dial: read a ρ sweep, check and draw it.")
    ap.add_argument("sweep", type=Path, help="a sweep's output folder (results/sweep-NAME)")
    ap.add_argument("--out", type=Path, default=None, help="write the plot here (PNG)")
    ap.add_argument("--csv", type=Path, default=None, help="write the table here (CSV)")
    args = ap.parse_args(argv)
    try:
        table = dial_table(load_dial(args.sweep))
    except GfsError as exc:
        print(f"error: {exc}")
        return 2
    print(format_dial(table, checks(table)))
    if args.csv is not None:
        table.to_csv(args.csv, index=False)
    if args.out is not None:
        print(f"wrote {plot_dial(table, args.out, args.sweep.name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
