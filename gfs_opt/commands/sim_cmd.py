"""`gfs-opt simulate` and `gfs-opt compare`."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from gfs_opt.errors import GfsError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pools", default=None, help="comma-separated pools (GPU models) to keep")
    p.add_argument("--lp-load", type=float, default=None, help="LP arrival multiplier (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--forecaster", default=None,
                   help="GFS demand forecaster: prophet, week-peak, seasonal-naive, ets, auto")
    p.add_argument("--rho", type=float, default=None, help="guarantee probability ρ (0.9)")
    p.add_argument("--guarantee-classes", default=None,
                   help="comma-separated guarantee classes in hours (default 1)")
    p.add_argument("--capacity-scale", type=float, default=None, metavar="X",
                   help="resize every pool to X × its nodes (e.g. 0.5 to make a trace sized to "
                        "its peak demand contend)")
    p.add_argument("--time-scale", type=float, default=None, metavar="K",
                   help="stretch submit times and durations by K (time-compressed traces)")
    p.add_argument("--keep-quota-after-window", action="store_true",
                   help="keep the spot quota on after the scored window (default: lifted, so "
                        "the LP backlog drains as in the authors' simulator)")
    p.add_argument("--check-invariants", action="store_true",
                   help="assert capacity, HP-never-evicted, whole gangs after every round")
    p.add_argument("--replay-from", default=None, help="start the replay here (date or seconds)")
    p.add_argument("--out", type=Path, default=None, help="write tables and plots here")
    p.add_argument("--no-progress", action="store_true")


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("simulate", help="replay a trace through one policy")
    s.add_argument("--trace", default="small",
                   help="folder with node_info_df.csv + job_info_df.csv, a trace file, or a "
                        "built-in name (small, paper-a100, synthetic, ref-toy)")
    s.add_argument("--policy", default="gfs")
    s.add_argument("--window", nargs=2, metavar=("START", "END"), default=None,
                   help="scored window: dates (END exclusive) or seconds since the trace origin")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    _common(s)
    s.set_defaults(handler=_simulate)

    c = sub.add_parser("compare", help="run several policies on the same trace and tabulate")
    c.add_argument("--policies", default="gfs,yarn-cs,chronus,lyra,fgd,yarn-cs+sqa,lyra+sqa,fgd+sqa",
                   help="comma-separated policies (default: GFS and both baseline families)")
    c.add_argument("--setup", default=None, help="small, paper-a100, full, ref-toy")
    c.add_argument("--trace", default=None, help="instead of --setup: any trace source")
    c.add_argument("--window", nargs=2, metavar=("START", "END"), default=None)
    c.add_argument("--loads", default=None,
                   help="comma-separated LP loads: low, medium, high or numbers "
                        "(default: the setup's three for paper-a100, else medium)")
    _common(c)
    c.set_defaults(handler=_compare)


def _spec_kwargs(args: argparse.Namespace) -> dict:
    params = {}
    if args.rho is not None:
        if not 0 < args.rho < 1:
            raise GfsError("--rho must be in (0, 1)")
        params["rho"] = args.rho
    if args.guarantee_classes:
        try:
            params["guarantee_classes"] = tuple(float(x) for x in args.guarantee_classes.split(","))
        except ValueError:
            raise GfsError("--guarantee-classes takes numbers of hours, e.g. 1,2,4") from None
    if args.keep_quota_after_window:
        params["quota_after_window"] = True
    for flag, value in (("--capacity-scale", args.capacity_scale),
                        ("--time-scale", args.time_scale)):
        if value is not None and not (math.isfinite(value) and 0 < value <= 1000):
            raise GfsError(f"{flag} must be a number in (0, 1000], got {value}")
    kw: dict = {"pools": tuple(args.pools.split(",")) if args.pools else None,
                "capacity_scale": args.capacity_scale, "time_scale": args.time_scale,
                "lp_load": args.lp_load, "seed": args.seed, "params": params,
                "check_invariants": args.check_invariants, "replay_from": args.replay_from}
    if args.lp_load is not None and args.lp_load < 0:
        raise GfsError("--lp-load must be ≥ 0")
    if args.window:
        kw["window"] = tuple(args.window)
    return kw


def _policy_options(policy: str, args: argparse.Namespace) -> dict:
    from gfs_opt.policies import POLICIES, options_for

    if policy not in POLICIES:
        return {}
    return options_for(policy, {"forecaster": args.forecaster})


def _simulate(args: argparse.Namespace) -> int:
    from gfs_opt.experiments.runner import RunSpec, run
    from gfs_opt.experiments.setups import SETUPS

    kw = _spec_kwargs(args)
    kw["policy"] = args.policy
    kw["policy_options"] = _policy_options(args.policy, args)
    if args.trace in SETUPS and args.trace not in ("small",) and "window" not in kw:
        spec = RunSpec.from_setup(args.trace, **kw)
    else:
        kw = {k: v for k, v in kw.items() if v is not None}
        spec = RunSpec(trace=args.trace, **kw)
    out = run(spec, progress=not args.no_progress)
    if args.out:
        out.write(args.out)
    if args.json:
        json.dump(out.summary, sys.stdout, indent=2, default=str)
        print()
    else:
        print(format_summary(out.summary))
        if args.out:
            print(f"tables written to {args.out}")
    print_warnings({args.policy: out.summary})
    return 0


def print_warnings(summaries: dict[str, dict]) -> None:
    """Each run's warnings on stderr, one line each, named by the run."""
    for name, s in summaries.items():
        for w in s.get("warnings", []):
            print(f"warning: {name}: {w}", file=sys.stderr)


def format_summary(s: dict) -> str:
    lo, hi = s["window"]
    lines = [
        f"policy {s['policy']}  ·  window [{lo:.0f}, {hi:.0f}) s  ·  {s['gpus']:.0f} GPUs  ·  "
        f"{s['jobs_hp']:,} HP / {s['jobs_lp']:,} LP jobs scored",
        f"  LP eviction rate      {100 * s['lp_eviction_rate']:6.2f} %  "
        f"({s['lp_windows_failed']} of {s['lp_windows_failed'] + s['lp_windows_ok']} windows; "
        f"{s['lp_evictions_per_job']:.2f} evictions/job, {100 * s['lp_share_evicted']:.1f} % of "
        f"LP jobs evicted)",
        f"  LP JQT mean/p50/p99   {s['lp_jqt_mean']:.1f} / {s['lp_jqt_p50']:.1f} / "
        f"{s['lp_jqt_p99']:.1f} s   (all LP jobs; a job that never started counts its wait "
        f"until the replay ended)",
        f"  LP JQT of started     {s['lp_jqt_started_mean']:.1f} s mean over the jobs that "
        f"started; {s['lp_never_started']} LP job(s) never started",
        f"  LP JCT mean/p99       {s['lp_jct_mean']:.1f} / {s['lp_jct_p99']:.1f} s",
        f"  HP JQT mean/p99       {s['hp_jqt_mean']:.1f} / {s['hp_jqt_p99']:.1f} s   "
        f"HP evictions {s['hp_evictions']}",
        f"  allocation            {100 * s['allocation_rate']:6.2f} %   useful GPU time "
        f"{100 * s['useful_gpu_time_rate']:.2f} %",
        f"  unfinished at end     {s['hp_unfinished']} HP, {s['lp_unfinished']} LP",
        f"  wall {s['wall_s']:.1f} s, {s['events']:,} events ({s['events_per_s']:,.0f}/s)",
    ]
    return "\n".join(lines)


def _compare(args: argparse.Namespace) -> int:
    from gfs_opt.experiments.compare import compare, format_table, plot, table
    from gfs_opt.experiments.runner import RunSpec
    from gfs_opt.experiments.setups import LOADS, SETUPS

    if args.setup and args.trace:
        raise GfsError("give either --setup or --trace, not both")
    setup = args.setup or (None if args.trace else "small")
    kw = _spec_kwargs(args)
    base = RunSpec.from_setup(setup, **kw) if setup else RunSpec(
        trace=args.trace, **{k: v for k, v in kw.items() if v is not None})
    if args.lp_load is not None:
        loads = {f"x{args.lp_load:g}": args.lp_load}
    elif args.loads:
        loads = {}
        for item in args.loads.split(","):
            item = item.strip()
            try:
                loads[item] = LOADS[item] if item in LOADS else float(item)
            except ValueError:
                raise GfsError(f"unknown load '{item}': use low, medium, high or a number") from None
    elif setup == "paper-a100":
        loads = dict(SETUPS["paper-a100"].loads)
    else:
        loads = {"medium": 1.0}
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    from gfs_opt.policies import POLICIES

    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise GfsError(f"unknown policy {unknown}; choose from {', '.join(POLICIES)}")
    if args.forecaster:
        base.policy_options = {"forecaster": args.forecaster}
    results = compare(base, policies, loads, progress=not args.no_progress)
    df = table(results)
    print(format_table(df))
    print_warnings({f"{pol} @ {load}": o.summary for load, by_pol in results.items()
                    for pol, o in by_pol.items()})
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out / "compare.csv", index=False)
        for load, by_pol in results.items():
            for pol, o in by_pol.items():
                o.write(args.out / load / pol)
        pngs = plot(results, args.out)
        print(f"wrote {args.out / 'compare.csv'} and {len(pngs)} plots to {args.out}")
    return 0
