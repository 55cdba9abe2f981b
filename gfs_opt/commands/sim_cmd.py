"""`gfs-opt simulate` and `gfs-opt compare`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from gfs_opt.commands import args as cargs
from gfs_opt.errors import GfsError
from gfs_opt.fileio import check_out_dir, remove_partial_folders, write_csv
from gfs_opt.interrupts import held

DEFAULT_POLICIES = "gfs,yarn-cs,chronus,lyra,fgd,yarn-cs+sqa,lyra+sqa,fgd+sqa"




def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pools", default=None, help="comma-separated pools (GPU models) to keep")
    p.add_argument("--lp-load", type=cargs.lp_load, default=None,
                   help=f"LP arrival multiplier in [0, {cargs.MAX_LP_LOAD:g}] (default 1)")
    p.add_argument("--seed", type=cargs.seed, default=0, help="random seed ≥ 0 (default 0)")
    p.add_argument("--forecaster", default=None,
                   help="GFS demand forecaster: prophet, week-peak, seasonal-naive, ets, auto")
    p.add_argument("--rho", type=cargs.number(0, 1, lo_open=True, hi_open=True), default=None,
                   help="guarantee probability ρ in (0, 1) (default 0.9)")
    p.add_argument("--guarantee-classes", type=cargs.guarantee_classes, default=None,
                   help=f"comma-separated guarantee classes in hours, each in (0, "
                        f"{cargs.MAX_GUARANTEE_H:g}] (default 1)")
    p.add_argument("--capacity-scale", type=cargs.number(0, 1000, lo_open=True), default=None,
                   metavar="X",
                   help="resize every pool to X × its nodes, in (0, 1000] (e.g. 0.5 to make a "
                        "trace sized to its peak demand contend)")
    p.add_argument("--time-scale", type=cargs.number(0, 1000, lo_open=True), default=None,
                   metavar="K",
                   help="stretch submit times and durations by K, in (0, 1000] "
                        "(time-compressed traces)")
    drain = p.add_mutually_exclusive_group()
    drain.add_argument("--lift-quota-after-window", action="store_true",
                       help="the authors' lifted drain: lift the spot quota when the scored "
                            "window ends so the LP backlog floods in (default: the quota is kept "
                            "until the replay ends); the windows that start in the drain are "
                            "reported apart (lp_eviction_rate_drain)")
    drain.add_argument("--keep-quota-after-window", action="store_true",
                       help="keep the spot quota on until the replay ends (the default)")
    p.add_argument("--check-invariants", action="store_true",
                   help="assert capacity, HP-never-evicted, whole gangs after every round")
    p.add_argument("--replay-from", default=None, type=cargs.time_point,
                   help="start the replay here (date or seconds)")
    p.add_argument("--out", type=Path, default=None,
                   help="write the run's tables (CSV, summary.json) and plots (PNG) into this "
                        "folder (checked before the run)")
    p.add_argument("--no-progress", action="store_true")


def register(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("simulate", help="replay a trace through one policy")
    s.add_argument("--setup", default=None,
                   help=cargs.LazyHelp(lambda: "a named setup (trace, warm-up and scored "
                                       "window): " + cargs.setup_names()))
    s.add_argument("--trace", default=None,
                   help="instead of --setup: " + cargs.TRACE_HELP + "; a setup name here runs that "
                        "setup (default: the setup small)")
    s.add_argument("--policy", default="gfs",
                   help=cargs.LazyHelp(lambda: f"one of: {cargs.policy_names()} (default gfs); "
                                       + cargs.POLICY_OPTIONS_HELP))
    s.add_argument("--window", nargs=2, metavar=("START", "END"), default=None,
                   type=cargs.time_point,
                   help="scored window: dates (END exclusive) or seconds since the trace origin")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--scheduler", choices=["default", "slurm"], default="default",
                   help="slurm: Slurm 22.05 decides which pending jobs start and where (head-of-line "
                        "stop, backfill by time limit, start/requeue/GrpTRES latencies; "
                        "docs/slurm-model.md); the policy keeps quotas and victims (default: default)")
    s.add_argument("--slurm-speedup", type=cargs.number(0, 1e6, lo_open=True), default=1.0,
                   help="with --scheduler slurm: trace seconds per wall second of the Slurm "
                        "latencies (a replay's compression K; default 1, real time)")
    _common(s)
    s.set_defaults(handler=_simulate)

    c = sub.add_parser("compare", help="run several policies on the same trace and tabulate")
    c.add_argument("--policies", default=DEFAULT_POLICIES,
                   help=cargs.LazyHelp(lambda: "comma-separated, from: " + cargs.policy_names()
                                       + "; " + cargs.POLICY_OPTIONS_HELP
                                       + " (default: GFS and both baseline families, "
                                       + DEFAULT_POLICIES + ")"))
    c.add_argument("--setup", default=None,
                   help=cargs.LazyHelp(lambda: "a named setup (default small): " + cargs.setup_names()))
    c.add_argument("--trace", default=None,
                   help="instead of --setup: " + cargs.TRACE_HELP + "; a setup name here runs that "
                        "setup")
    c.add_argument("--window", nargs=2, metavar=("START", "END"), default=None,
                   type=cargs.time_point,
                   help="scored window: dates (END exclusive) or seconds since the trace origin")
    c.add_argument("--loads", default=None,
                   help="comma-separated LP loads: low, medium, high or numbers "
                        "(default: the setup's three for paper-a100, else medium)")
    c.add_argument("--seeds", type=cargs.seeds, default=None, metavar="S,S,…",
                   help="run every (load, policy) once per seed, e.g. 0,1,2, and report each "
                        "metric as mean ± 95 %% interval over seeds (default: the one --seed). "
                        "A seed draws a built-in setup's synthetic trace, the LP sample of a "
                        "load ≠ 1 and guarantee classes; on a real trace at load 1 it changes "
                        "nothing")
    c.add_argument("--workers", type=int, default=None, metavar="N",
                   help="simulations run at once in worker processes (default: all CPUs; 1 runs "
                        "them one after another in this process, with a progress bar each)")
    _common(c)
    c.set_defaults(handler=_compare)


def _spec_kwargs(args: argparse.Namespace) -> dict:
    params = {}
    if args.rho is not None:
        params["rho"] = args.rho
    if args.guarantee_classes:
        params["guarantee_classes"] = args.guarantee_classes
    if args.lift_quota_after_window:
        params["quota_after_window"] = False
    kw: dict = {"pools": tuple(args.pools.split(",")) if args.pools else None,
                "capacity_scale": args.capacity_scale, "time_scale": args.time_scale,
                "lp_load": args.lp_load, "seed": args.seed, "params": params,
                "check_invariants": args.check_invariants, "replay_from": args.replay_from}
    if args.window:
        kw["window"] = tuple(args.window)
    return kw


def _policy_options(policy: str, args: argparse.Namespace) -> dict:
    from gfs_opt.policies import options_for

    return options_for(policy, {"forecaster": args.forecaster})


def _warn(line: str | None) -> None:
    if line:
        print(f"gfs-opt: warning: {line}", file=sys.stderr)


def _simulate(args: argparse.Namespace) -> int:
    from gfs_opt.experiments.runner import RunSpec, prepare_trace, run
    from gfs_opt.experiments.setups import SETUPS
    from gfs_opt.fileio import json_safe
    from gfs_opt.policies import make_policy
    from gfs_opt.sim.slurm_model import SlurmModel
    from gfs_opt.traces.placeable import never_placeable_warning

    if args.setup and args.trace:
        raise GfsError("give either --setup or --trace, not both")
    if args.setup and args.setup not in SETUPS:
        raise GfsError(f"--setup: unknown setup '{args.setup}'; choose from {', '.join(SETUPS)}")
    check_out_dir(args.out)
    make_policy(args.policy)          # an unknown policy fails before the trace is loaded
    kw = _spec_kwargs(args)
    kw["policy"] = args.policy
    kw["policy_options"] = _policy_options(args.policy, args)
    name = args.setup or args.trace or "small"
    if args.setup or (name in SETUPS and name != "small" and "window" not in kw):
        spec = RunSpec.from_setup(name, **kw)
    else:
        kw = {k: v for k, v in kw.items() if v is not None}
        spec = RunSpec(trace=name, **kw)
    prepared = prepare_trace(spec)
    _warn(never_placeable_warning(prepared[0]))
    slurm = SlurmModel(speedup=args.slurm_speedup) if args.scheduler == "slurm" else None
    try:
        out = run(spec, progress=not args.no_progress, trace=prepared, slurm=slurm)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"simulate interrupted: {spec.policy} on {spec.trace} did not "
                                f"finish; nothing written") from None
    pngs: list[Path] = []
    if args.out:
        from gfs_opt.experiments.compare import plot

        out.write(args.out)
        # the plots `compare --out` draws, for this one run (named by its LP load)
        pngs = plot({f"x{spec.lp_load:g}": {args.policy: out}}, args.out)
    if args.json:
        json.dump(json_safe(out.summary), sys.stdout, indent=2, allow_nan=False)
        print()
    else:
        print(format_summary(out.summary))
        if args.out:
            print(f"wrote the tables (summary.json, jobs.csv, …) and {len(pngs)} plots "
                  f"({', '.join(p.name for p in pngs)}) to {args.out}")
    print_warnings({args.policy: out.summary})
    return 0


def print_warnings(summaries: dict[str, dict]) -> None:
    """Each run's warnings on stderr, one line each, named by the run."""
    for name, s in summaries.items():
        for w in s.get("warnings", []):
            _warn(f"{name}: {w}")


def milp_line(s: dict) -> str | None:
    """How a policy's exact steps went over a replay (None when it solved no MILP)."""
    n = int(s.get("milp_solves") or 0)
    if not n:
        return None
    fb, to = int(s.get("milp_fallbacks") or 0), int(s.get("milp_timeouts") or 0)
    return (f"{n:,} MILP solves: {n - fb:,} answered by the MILP, {fb:,} fell back to the "
            f"greedy answer ({to:,} on time-out)")


def drain_line(s: dict) -> str | None:
    """The windows that started in the drain (the quota lifted after the scored window), apart
    from the headline's; None when there was no drain."""
    n = int(s.get("lp_windows_failed_drain", 0)) + int(s.get("lp_windows_ok_drain", 0))
    if not n:
        return None
    return (f"  LP evict in the drain {100 * s['lp_eviction_rate_drain']:6.2f} %  "
            f"({s['lp_windows_failed_drain']} of {n} windows started after the scored window, "
            f"the quota lifted; all windows {100 * s['lp_eviction_rate_all']:.2f} %)")


def _cost_line(s: dict) -> str:
    line = f"  wall {s['wall_s']:.1f} s, {s['events']:,} events ({s['events_per_s']:,.0f}/s)"
    if "cpu_s" not in s:   # a Slurm replay: its time is the cluster's, not this process's
        return line
    return (f"  wall {s['wall_s']:.1f} s, CPU {s['cpu_s']:.1f} s, {s['events']:,} events "
            f"({s['events_per_s']:,.0f}/s wall, {s['events_per_cpu_s']:,.0f}/s CPU)")


def format_summary(s: dict) -> str:
    lo, hi = s["window"]
    lines = [
        f"policy {s['policy']}  ·  window [{lo:.0f}, {hi:.0f}) s  ·  {s['gpus']:.0f} GPUs  ·  "
        f"{s['jobs_hp']:,} HP / {s['jobs_lp']:,} LP jobs scored",
        f"  LP eviction rate      {100 * s['lp_eviction_rate']:6.2f} %  "
        f"({s['lp_windows_failed']} of {s['lp_windows_failed'] + s['lp_windows_ok']} windows "
        f"under the quota; {s['lp_evictions_per_job']:.2f} evictions/job, "
        f"{100 * s['lp_share_evicted']:.1f} % of LP jobs evicted)",
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
        _cost_line(s),
    ]
    if "lp_evictions" in s:   # a simulation: each eviction has its cause (not a Slurm replay)
        lines.insert(2, f"  LP evictions by cause {s['lp_evictions']} = {s['lp_evictions_count']} "
                        f"count + {s['lp_evictions_fragmentation']} fragmentation "
                        f"({100 * s['lp_fragmentation_share']:.0f} %) + {s['lp_evictions_other']} "
                        f"other   (fragmentation: the pool had room, no node set hosts the gang)")
    if "hp_delay_choice_mean" in s:   # a simulation: each HP wait has its cause
        i = next(i for i, x in enumerate(lines) if x.startswith("  HP JQT"))
        lines.insert(i + 1, f"  HP wait by cause      choice {s['hp_delay_choice_mean']:.1f} / "
                            f"{s['hp_delay_choice_p99']:.1f} s, capacity "
                            f"{s['hp_delay_capacity_mean']:.1f} / "
                            f"{s['hp_delay_capacity_p99']:.1f} s (mean/p99); "
                            f"{100 * s['hp_share_delayed_by_choice']:.1f} % of HP jobs waited "
                            "by choice   (choice: the pool had room by eviction)")
    drain = drain_line(s)
    if drain:
        lines.insert(2, drain)
    if milp_line(s):
        lines.insert(-1, f"  exact steps           {milp_line(s)}")
    if s.get("never_placeable_hp") or s.get("never_placeable_lp"):
        lines.insert(-1, f"  never placeable       {s.get('never_placeable_hp', 0)} HP, "
                         f"{s.get('never_placeable_lp', 0)} LP (gang larger than its pool)")
    return "\n".join(lines)


def _compare_interrupted(out: Path | None, done: dict, seeds: list[int], loads: dict,
                         policies: list[str], folder: Callable[[str, str, int], Path]) -> str:
    """What an interrupted compare kept, counted from the runs whose folders are on disk (each
    whole), and compare.csv rewritten to list exactly those."""
    from gfs_opt.experiments.seed_tables import seed_table

    multi = len(seeds) > 1
    finished = [(ld, p, sd) for sd in seeds for ld in loads for p in policies
                if p in done.get(sd, {}).get(ld, {})]
    pending = [(ld, p, sd) for sd in seeds for ld in loads for p in policies
               if (ld, p, sd) not in finished]
    where = (f"{pending[0][1]} @ {pending[0][0]}" + (f" seed {pending[0][2]}" if multi else "")
             if pending else "the summary")
    head = f"compare interrupted during {where}"
    if not finished:
        return f"{head}; no run had finished" + (f", nothing written to {out}" if out else "")
    if out is None:
        return f"{head}; {len(finished)} finished run(s) not saved (no --out)"
    table = write_csv(out / "compare.csv", seed_table(done))
    shown = [str(folder(*f)) for f in finished]
    folders = ", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "")
    return (f"{head}; {len(finished)} finished run(s) kept, each folder whole: {folders}; "
            f"listed in {table}")


def _report_compare(args: argparse.Namespace, by_seed: dict, seeds: list[int]) -> None:
    """The table on stdout, and with --out compare.csv (and the seed tables) and the plots."""
    from gfs_opt.experiments.compare import format_table, plot
    from gfs_opt.experiments.seed_tables import (
        family_seed_summary,
        format_seed_table,
        identical_seeds,
        seed_summary,
        seed_table,
    )

    multi = len(seeds) > 1
    df = seed_table(by_seed)
    if multi:
        print(format_seed_table(df))
        for load in identical_seeds(df):
            _warn(f"every seed gave the same numbers at load {load} (the seed draws nothing on "
                  f"this trace at this load: a real trace at ×1), so the intervals are 0")
    else:
        print(format_table(df))
        print(f"1 seed ({seeds[0]}): no interval; --seeds 0,1,2 gives each metric a 95 % "
              f"interval over seeds and says which differences are inside the noise")
    for seed, results in by_seed.items():      # policies with exact steps: how often they held
        for load, by_pol in results.items():
            for pol, o in by_pol.items():
                if line := milp_line(o.summary):
                    print(f"{pol} @ {load}" + (f" seed {seed}" if multi else "") + f": {line}")
    print_warnings({f"{pol} @ {load}" + (f" seed {seed}" if multi else ""): o.summary
                    for seed, results in by_seed.items() for load, by_pol in results.items()
                    for pol, o in by_pol.items()})
    if args.out:
        written = [write_csv(args.out / "compare.csv", df)]
        if multi:
            written += [write_csv(args.out / "compare_seeds.csv", seed_summary(df)),
                        write_csv(args.out / "compare_families.csv", family_seed_summary(df))]
        pngs = plot(by_seed[seeds[0]], args.out)
        print(f"wrote {', '.join(map(str, written))} and {len(pngs)} plots"
              + (f" (seed {seeds[0]})" if multi else "") + f" to {args.out}")


def _compare(args: argparse.Namespace) -> int:
    from gfs_opt.experiments.compare import SeedResults, compare_seeds
    from gfs_opt.experiments.runner import RunOutput, RunSpec
    from gfs_opt.experiments.setups import LOADS, SETUPS

    if args.setup and args.trace:
        raise GfsError("give either --setup or --trace, not both")
    if args.workers is not None and args.workers < 1:
        raise GfsError(f"--workers must be ≥ 1, got {args.workers}")
    check_out_dir(args.out)
    # a setup's name given as --trace runs that setup, as in `simulate`
    setup = args.setup or (args.trace if args.trace in SETUPS else None if args.trace
                           else "small")
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
                loads[item] = LOADS[item] if item in LOADS else cargs.lp_load(item)
            except argparse.ArgumentTypeError as exc:
                raise GfsError(f"--loads: unknown load '{item}' ({exc}); use low, medium, high "
                               f"or a number in [0, {cargs.MAX_LP_LOAD:g}]") from None
    elif setup == "paper-a100":
        loads = dict(SETUPS["paper-a100"].loads)
    else:
        loads = {"medium": 1.0}
    from gfs_opt.policies import make_policy, split_policies

    policies = split_policies(args.policies)
    for pol in policies:      # a bad name or option fails before any trace is loaded
        try:
            make_policy(pol)
        except GfsError as exc:
            raise GfsError(f"--policies: {exc}") from None
    if len(set(policies)) < len(policies):
        raise GfsError(f"--policies: a policy is named twice in {args.policies!r}")
    if not policies:
        raise GfsError("--policies: no policy given")
    if args.forecaster:
        base.policy_options = {"forecaster": args.forecaster}
    seeds = list(args.seeds) if args.seeds else [args.seed]
    multi = len(seeds) > 1
    done: SeedResults = {}
    warned: set[str] = set()

    def folder(load: str, pol: str, seed: int) -> Path:
        assert args.out is not None
        return args.out / load / pol / f"seed{seed}" if multi else args.out / load / pol

    def finished(load: str, pol: str, seed: int, o: RunOutput) -> None:
        n_hp, n_lp = o.summary.get("never_placeable_hp", 0), o.summary.get("never_placeable_lp", 0)
        if (n_hp or n_lp) and load not in warned:
            warned.add(load)
            _warn(f"{n_hp} HP / {n_lp} LP job(s) at load {load} can never be placed (a gang "
                  f"larger than its whole pool); counted in never_placeable_hp/_lp")
        def record() -> None:
            done.setdefault(seed, {}).setdefault(load, {})[pol] = o

        # recorded as its folder is renamed into place, no signal in between: what the interrupt
        # message counts and compare.csv lists is exactly what is on disk
        if args.out:
            o.write_folder(folder(load, pol, seed), then=record)
        else:
            with held():
                record()

    if args.out:      # temporary folders a killed earlier compare left (never a finished run)
        for sub in (args.out.glob("*/*") if multi else args.out.glob("*")):
            remove_partial_folders(sub)
    try:
        by_seed = compare_seeds(base, policies, loads, seeds, progress=not args.no_progress,
                                on_result=finished, workers=args.workers or os.cpu_count() or 1)
        _report_compare(args, by_seed, seeds)
    except KeyboardInterrupt:
        with held():
            said = _compare_interrupted(args.out, done, seeds, loads, policies, folder)
        raise KeyboardInterrupt(said) from None
    return 0
