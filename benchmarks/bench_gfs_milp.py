"""GFS with exact per-round preemption (`gfs-milp`) vs GFS (`gfs`) in simulation.

    python benchmarks/bench_gfs_milp.py [--setup paper-a100] [--load medium] [--forecaster ets]
                                        [--time-limit 2] [--policies gfs,gfs-milp]
                                        [--seeds 0,1,2] [--markdown]

Both policies replay the same prepared trace with the same forecaster (ETS by default: Prophet
refits every tenant daily and would dominate the wall time of both runs alike). Prints LP
eviction rate and LP JQT (the two numbers GFS-SPEC §3 asks for), HP queueing, allocation, and
for the exact policy how many MILPs it solved, how many fell back to the greedy answer, and the
share of the simulation's wall time spent in them. With several ``--seeds`` (each seed is a
different synthetic trace) a last block gives the mean over seeds, so that a difference can be
told from run-to-run noise. Ratios at the end: gfs-milp / gfs (of the means).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from gfs_opt.experiments.runner import RunSpec, prepare_trace, run
from gfs_opt.experiments.setups import LOADS

COLUMNS = ["policy", "seed", "LP eviction rate", "LP windows failed", "LP JQT mean s", "LP JQT p50 s",
           "LP JQT p90 s", "LP JQT p99 s", "HP JQT mean s", "HP evictions", "allocation",
           "wall s", "MILP solves", "fallbacks", "time-outs", "MILP s", "MILP share"]


def milp_time(summary: dict[str, Any]) -> float:
    """Seconds in exact steps; the recorder repeats a (step, method) total on each status row."""
    totals: dict[tuple[str, str], float] = {}
    for row in summary.get("solver_reports", []):
        if row["method"] == "milp":
            totals[(row["step"], row["method"])] = float(row["total_time_s"])
    return float(sum(totals.values()))


def one(spec: RunSpec, prepared: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    out = run(spec, trace=prepared)
    wall = time.perf_counter() - t0
    s = out.summary
    m_s = milp_time(s)
    return {
        "policy": spec.policy, "seed": spec.seed, "LP eviction rate": s["lp_eviction_rate"],
        "LP windows failed": s.get("lp_windows_failed"),
        "LP JQT mean s": s["lp_jqt_mean"], "LP JQT p50 s": s["lp_jqt_p50"],
        "LP JQT p90 s": s["lp_jqt_p90"], "LP JQT p99 s": s["lp_jqt_p99"],
        "HP JQT mean s": s["hp_jqt_mean"], "HP evictions": s.get("hp_evictions", 0),
        "allocation": s["allocation_rate"], "wall s": wall,
        "MILP solves": s.get("milp_solves", 0), "fallbacks": s.get("milp_fallbacks", 0),
        "time-outs": s.get("milp_timeouts", 0), "MILP s": m_s,
        "MILP share": m_s / out.wall_s if out.wall_s > 0 else 0.0,
    }


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "—"
    if key in ("LP eviction rate", "allocation", "MILP share"):
        return f"{100 * v:.2f} %"
    if isinstance(v, float):
        if key in ("LP windows failed", "MILP solves", "fallbacks", "time-outs", "HP evictions"):
            return f"{v:,.1f}"   # a mean over seeds
        return f"{v:,.1f}" if key != "MILP s" else f"{v:,.2f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def mean_rows(rows: list[dict[str, Any]], policies: list[str]) -> list[dict[str, Any]]:
    out = []
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy]
        row: dict[str, Any] = {"policy": policy, "seed": "mean"}
        for key in COLUMNS[2:]:
            vals = [r[key] for r in mine if r[key] is not None]
            row[key] = sum(vals) / len(vals) if vals else None
        out.append(row)
    return out


def print_table(rows: list[dict[str, Any]], markdown: bool) -> None:
    if not markdown:
        for row in rows:
            print("  ".join(f"{k}={_fmt(k, row[k])}" for k in COLUMNS))
        return
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in rows:
        print("| " + " | ".join(_fmt(k, row[k]) for k in COLUMNS) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setup", default="paper-a100")
    ap.add_argument("--load", default="medium", help="low | medium | high, or a multiplier")
    ap.add_argument("--forecaster", default="ets")
    ap.add_argument("--time-limit", type=float, default=2.0, help="per MILP solve (s)")
    ap.add_argument("--solver", default="scip")
    ap.add_argument("--policies", default="gfs,gfs-milp")
    ap.add_argument("--seeds", default="0", help="comma-separated trace seeds")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    load = LOADS.get(args.load) or float(args.load)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    rows = []
    for seed in seeds:
        prepared = prepare_trace(RunSpec.from_setup(args.setup, policy=policies[0], lp_load=load,
                                                    seed=seed))
        for policy in policies:
            opts: dict[str, Any] = {"forecaster": args.forecaster}
            if policy == "gfs-milp":
                opts.update(time_limit=args.time_limit, solver=args.solver)
            spec = RunSpec.from_setup(args.setup, policy=policy, lp_load=load, seed=seed,
                                      policy_options=opts)
            row = one(spec, prepared)
            rows.append(row)
            if not args.markdown:
                print_table([row], False)
                sys.stdout.flush()
    print(f"setup {args.setup}, LP load {args.load} (×{load:g}), forecaster {args.forecaster}, "
          f"MILP time limit {args.time_limit:g} s ({args.solver}), seeds {args.seeds}")
    means = mean_rows(rows, policies)
    if args.markdown:
        print_table(rows + (means if len(seeds) > 1 else []), True)
    elif len(seeds) > 1:
        print_table(means, False)
    by = {r["policy"]: r for r in means}
    if "gfs" in by and "gfs-milp" in by:
        g, m = by["gfs"], by["gfs-milp"]
        for key in ("LP eviction rate", "LP JQT mean s", "HP JQT mean s", "wall s"):
            ratio = m[key] / g[key] if g[key] else float("nan")
            print(f"gfs-milp / gfs  {key}: {ratio:.3f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
