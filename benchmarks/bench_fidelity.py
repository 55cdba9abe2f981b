"""Does GFS keep its promise? The targets of the quota-loop issue, measured in one command.

    python benchmarks/bench_fidelity.py [--forecaster prophet] [--seeds 0,1,2]
                                        [--loads low,medium,high] [--workers 2]
                                        [--out results/bench-fidelity] [--skip-small]
                                        [--skip-toy] [--milp]

Part 1 — ``paper-a100`` (2,296 A100 GPUs, August scored) at each load and seed: GFS, the four
baselines with no quota (yarn-cs, chronus, lyra, fgd) and the three under GFS's spot quota with a
static η (yarn-cs+sqa, lyra+sqa, fgd+sqa), all with the same forecaster. The cells run as a
resumable sweep (``--out``; re-running the command reuses finished cells). Targets per load
(means over seeds):

- LP eviction: GFS's mean relative change vs the four no-quota baselines ≤ −33 %; GFS's
  eviction rate at medium load ≤ 1.21 % (the paper's);
- LP JQT (all scored LP jobs): ≤ −44 % vs the mean of the +sqa baselines, and ≤ 1.5× the mean
  of the no-quota baselines; 0 LP jobs never started (the quota lifts after the window).

Part 2 — the README main job (``small``, seed 0): GFS evicts less than the no-quota baselines'
mean, and its LP JQT is ≤ 1.5× theirs. Part 3 — ``ref-toy``: ≤ 5 % of LP jobs unfinished under
GFS. ``--milp``: ``gfs-milp`` vs ``gfs`` at medium load for every seed (LP eviction).

Each verdict line says PASS or MISS with the measured number. CPU time (self + children) and
wall time of the whole command are printed last.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from gfs_opt.experiments.compare import compare, table
from gfs_opt.experiments.runner import RunSpec
from gfs_opt.experiments.sweep.engines import make_engine
from gfs_opt.experiments.sweep.run import run_sweep
from gfs_opt.experiments.sweep.spec import expand, validate_spec
from gfs_opt.policies import options_for

NO_QUOTA = ("yarn-cs", "chronus", "lyra", "fgd")
SQA = ("yarn-cs+sqa", "lyra+sqa", "fgd+sqa")


def cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def paper_grid(args: argparse.Namespace) -> pd.DataFrame:
    doc = {"name": "bench-fidelity", "setup": "paper-a100",
           "policies": ["gfs", *NO_QUOTA, *SQA], "loads": args.loads.split(","),
           "seeds": [int(s) for s in args.seeds.split(",")],
           "options": {"forecaster": args.forecaster}}
    spec = validate_spec(doc)
    cells = expand(spec)
    res = run_sweep(cells, Path(args.out) / "paper-a100", make_engine("local", workers=args.workers),
                    resume=True, spec_name="bench-fidelity", progress=sys.stderr.isatty())
    if res.failed:
        raise SystemExit(f"{res.failed} cell(s) failed: see {args.out}/paper-a100/results.csv")
    return res.table


def report_grid(t: pd.DataFrame) -> list[str]:
    cols = ["lp_eviction_rate", "lp_jqt_mean", "lp_jqt_started_mean", "lp_never_started",
            "hp_jqt_mean", "allocation_rate"]
    mean = t.groupby(["load", "policy"], sort=False)[cols].mean()
    lines = ["", "paper-a100, means over seeds "
             f"{sorted(t['seed'].unique().tolist())} (lower is better but alloc):", ""]
    lines.append(f"{'load':<7}{'policy':<13}{'LP evict':>9}{'LP JQT s':>10}{'started':>10}"
                 f"{'never':>7}{'HP JQT s':>10}{'alloc':>8}")
    for (load, pol), r in mean.iterrows():
        lines.append(f"{load:<7}{pol:<13}{100 * r['lp_eviction_rate']:>8.2f}%"
                     f"{r['lp_jqt_mean']:>10.0f}{r['lp_jqt_started_mean']:>10.0f}"
                     f"{r['lp_never_started']:>7.1f}{r['hp_jqt_mean']:>10.0f}"
                     f"{100 * r['allocation_rate']:>7.1f}%")
    lines += ["", "targets:"]
    for load in mean.index.get_level_values(0).unique():
        m = mean.loc[load]
        g = m.loc["gfs"]
        ev = np.mean([g["lp_eviction_rate"] / m.loc[b, "lp_eviction_rate"] - 1 for b in NO_QUOTA])
        jq_sqa = g["lp_jqt_mean"] / m.loc[list(SQA), "lp_jqt_mean"].mean() - 1
        jq_none = g["lp_jqt_mean"] / m.loc[list(NO_QUOTA), "lp_jqt_mean"].mean()
        never = t[(t["load"] == load) & (t["policy"] == "gfs")]["lp_never_started"].sum()
        lines += [
            f"  {load:<7}LP evict mean change vs no-quota {100 * ev:+.1f} % (≤ −33 %): "
            f"{verdict(ev <= -0.33)}",
            f"  {load:<7}LP JQT vs +sqa mean {100 * jq_sqa:+.1f} % (≤ −44 %): "
            f"{verdict(jq_sqa <= -0.44)}",
            f"  {load:<7}LP JQT ÷ no-quota mean {jq_none:.2f}× (≤ 1.5×): {verdict(jq_none <= 1.5)}",
            f"  {load:<7}GFS LP jobs never started {never:.0f} (0): {verdict(never == 0)}",
        ]
        if load == "medium":
            lines.append(f"  {load:<7}GFS LP eviction {100 * g['lp_eviction_rate']:.2f} % "
                         f"(≤ 1.21 %): {verdict(g['lp_eviction_rate'] <= 0.0121)}")
    return lines


def small_job(args: argparse.Namespace) -> list[str]:
    base = RunSpec.from_setup("small", policy_options={"forecaster": args.forecaster})
    res = compare(base, ["gfs", *NO_QUOTA, *SQA], {"medium": 1.0})
    df = table(res)
    df.to_csv(Path(args.out) / "small.csv", index=False)
    g = df[df["policy"] == "gfs"].iloc[0]
    base_rows = df[df["policy"].isin(NO_QUOTA)]
    ev_ok = g["lp_eviction_rate"] < base_rows["lp_eviction_rate"].mean()
    ratio = g["lp_jqt_mean"] / base_rows["lp_jqt_mean"].mean()
    return ["", "README main job (small, seed 0):",
            f"  GFS LP eviction {100 * g['lp_eviction_rate']:.2f} % vs no-quota mean "
            f"{100 * base_rows['lp_eviction_rate'].mean():.2f} %: {verdict(ev_ok)}",
            f"  GFS LP JQT ÷ no-quota mean {ratio:.2f}× (≤ 1.5×): {verdict(ratio <= 1.5)}"]


def toy(args: argparse.Namespace) -> list[str]:
    from gfs_opt.experiments.runner import run

    lines = ["", "ref-toy (scored 2024-03-11..12):"]
    for pol in ("gfs", "yarn-cs"):
        s = run(RunSpec.from_setup("ref-toy", policy=pol,
                                   policy_options=options_for(pol, {"forecaster": args.forecaster}))
                ).summary
        share = s["lp_unfinished"] / max(1, s["jobs_lp"])
        lines.append(f"  {pol:<8}LP unfinished {s['lp_unfinished']} of {s['jobs_lp']} "
                     f"({100 * share:.1f} %), LP evict {100 * s['lp_eviction_rate']:.2f} %, "
                     f"LP JQT {s['lp_jqt_mean']:,.0f} s, alloc {100 * s['allocation_rate']:.1f} %"
                     + (f": {verdict(share <= 0.05)} (≤ 5 %)" if pol == "gfs" else ""))
    return lines


def milp(args: argparse.Namespace, grid: pd.DataFrame) -> list[str]:
    """gfs-milp at medium load for every seed (a resumable sweep of its own), against the grid's
    gfs cells of the same seeds."""
    seeds = [int(s) for s in args.seeds.split(",")]
    doc = {"name": "bench-fidelity-milp", "setup": "paper-a100", "policies": ["gfs-milp"],
           "loads": ["medium"], "seeds": seeds, "options": {"forecaster": args.forecaster}}
    res = run_sweep(expand(validate_spec(doc)), Path(args.out) / "paper-a100-milp",
                    make_engine("local", workers=args.workers), resume=True,
                    spec_name="bench-fidelity-milp", progress=sys.stderr.isatty())
    if res.failed:
        raise SystemExit(f"{res.failed} cell(s) failed: see {args.out}/paper-a100-milp/results.csv")
    cells = pd.concat([grid[(grid["policy"] == "gfs") & (grid["load"] == "medium")], res.table])
    per = cells.pivot_table(index="seed", columns="policy",
                            values=["lp_eviction_rate", "lp_jqt_mean"])
    lines = ["", "gfs-milp vs gfs (paper-a100, medium):"]
    for seed, r in per.iterrows():
        lines.append(f"  seed {seed}: LP eviction {100 * r['lp_eviction_rate', 'gfs-milp']:.2f} % vs "
                     f"{100 * r['lp_eviction_rate', 'gfs']:.2f} %, LP JQT "
                     f"{r['lp_jqt_mean', 'gfs-milp']:,.0f} vs {r['lp_jqt_mean', 'gfs']:,.0f} s")
    m = per.mean()
    fewer = int((per["lp_eviction_rate", "gfs-milp"] < per["lp_eviction_rate", "gfs"]).sum())
    lines.append(f"  mean: LP eviction {100 * m['lp_eviction_rate', 'gfs-milp']:.2f} % vs "
                 f"{100 * m['lp_eviction_rate', 'gfs']:.2f} % (fewer in {fewer} of {len(per)} "
                 f"seeds), LP JQT {m['lp_jqt_mean', 'gfs-milp']:,.0f} vs "
                 f"{m['lp_jqt_mean', 'gfs']:,.0f} s: "
                 f"{verdict(m['lp_eviction_rate', 'gfs-milp'] < m['lp_eviction_rate', 'gfs'])} "
                 "(fewer evictions on the mean)")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forecaster", default="prophet")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--loads", default="low,medium,high")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="results/bench-fidelity")
    ap.add_argument("--skip-small", action="store_true")
    ap.add_argument("--skip-toy", action="store_true")
    ap.add_argument("--milp", action="store_true")
    args = ap.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    t0, c0 = time.perf_counter(), cpu_s()
    lines = [f"forecaster {args.forecaster}"]
    grid = paper_grid(args)
    lines += report_grid(grid)
    if not args.skip_small:
        lines += small_job(args)
    if not args.skip_toy:
        lines += toy(args)
    if args.milp:
        lines += milp(args, grid)
    lines += ["", f"CPU {cpu_s() - c0:,.0f} s (self + children), wall {time.perf_counter() - t0:,.0f} s"]
    text = "\n".join(lines)
    print(text)
    (Path(args.out) / "report.txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
