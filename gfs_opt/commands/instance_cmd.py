"""`gfs-opt instance …`: validate instance files, summarise one, print the JSON Schema."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gfs_opt.commands import args as cargs
from gfs_opt.fileio import check_out_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("instance", help="check and describe instance files (one scheduling round)")
    isub = p.add_subparsers(dest="instance_command", metavar="ACTION")
    isub.required = True

    v = isub.add_parser("validate", help="check files; one line per problem, exit 2 if any is invalid")
    v.add_argument("files", nargs="+", type=Path, metavar="FILE")
    v.set_defaults(handler=_validate)

    s = isub.add_parser("show", help="summary of one file: pools, GPUs in use, queues")
    s.add_argument("file", type=Path, metavar="FILE")
    s.set_defaults(handler=_show)

    d = isub.add_parser("dump", help="simulate and save contested rounds as instance files")
    d.add_argument("--trace", default=None, help=cargs.TRACE_HELP)
    d.add_argument("--setup", default=None,
                   help=cargs.LazyHelp(lambda: "instead of --trace, a named setup: "
                                       + cargs.setup_names()))
    d.add_argument("--policy", default="gfs",
                   help=cargs.LazyHelp(lambda: f"one of: {cargs.policy_names()} (default gfs)"))
    d.add_argument("--forecaster", default=None)
    d.add_argument("--window", nargs=2, metavar=("START", "END"), default=None,
                   type=cargs.time_point)
    d.add_argument("--lp-load", type=cargs.lp_load, default=None,
                   help=f"LP arrival multiplier in [0, {cargs.MAX_LP_LOAD:g}] (default 1)")
    d.add_argument("--kind", choices=["preemption", "admission", "any"], default="any")
    d.add_argument("--every", type=cargs.number(0, 1e9), default=3600.0,
                   help="min simulated seconds between dumps")
    d.add_argument("--max", type=cargs.number(1, 100_000, integer=True), default=5,
                   help="stop after this many files")
    d.add_argument("--min-pending-hp", type=cargs.number(0, integer=True), default=1)
    d.add_argument("--min-running-lp", type=cargs.number(0, integer=True), default=0)
    d.add_argument("--confirm", action="store_true",
                   help="keep a round only if the greedy step evicts LP (preemption) or admits "
                        "some but not all pending LP (admission) on it")
    d.add_argument("--prefix", default="round")
    d.add_argument("--out", type=Path, required=True)
    d.set_defaults(handler=_dump)

    sc = isub.add_parser("schema", help="print the JSON Schema (draft 2020-12) of the format")
    sc.set_defaults(handler=_schema)


def _validate(args: argparse.Namespace) -> int:
    from gfs_opt.instance import validate_file

    bad = 0
    for path in args.files:
        problems = validate_file(path)
        if problems:
            bad += 1
            for line in problems:
                print(f"{path}: {line}")
        else:
            print(f"{path}: ok")
    if bad and len(args.files) > 1:
        print(f"{bad} of {len(args.files)} files invalid", file=sys.stderr)
    return 2 if bad else 0


def _show(args: argparse.Namespace) -> int:
    from gfs_opt.instance import load_instance
    from gfs_opt.instance.summary import format_summary, summarise

    inst = load_instance(args.file)
    print(format_summary(summarise(inst.round), title=f"{args.file}  (time {inst.round.time:g} s)",
                         meta=inst.meta))
    return 0


def _dump(args: argparse.Namespace) -> int:
    from gfs_opt.errors import GfsError
    from gfs_opt.experiments.runner import RunSpec, prepare_trace
    from gfs_opt.instance.dump import ContestedRoundDump
    from gfs_opt.model import Params
    from gfs_opt.policies import make_policy
    from gfs_opt.sim.engine import SimConfig, Simulator
    from gfs_opt.traces.placeable import never_placeable_warning

    if args.setup and args.trace:
        raise GfsError("give either --setup or --trace, not both")
    check_out_dir(args.out)
    make_policy(args.policy)          # an unknown policy fails before the trace is loaded
    kw = {"policy": args.policy, "lp_load": args.lp_load,
          "window": tuple(args.window) if args.window else None}
    if args.setup:
        spec = RunSpec.from_setup(args.setup, **kw)
    else:
        spec = RunSpec(trace=args.trace or "small", **{k: v for k, v in kw.items() if v is not None})
    if args.forecaster:
        spec.policy_options = {"forecaster": args.forecaster}
    trace, lo, hi = prepare_trace(spec)
    sim = Simulator(trace, make_policy(spec.policy, **spec.policy_options), Params(),
                    SimConfig(eval_start=lo, eval_end=hi))
    hook = ContestedRoundDump(args.out, prefix=args.prefix, every_s=args.every,
                              max_files=args.max, kind=args.kind,
                              min_pending_hp=args.min_pending_hp,
                              min_running_lp=args.min_running_lp, after=lo,
                              confirm=args.confirm, policy=sim.policy.name,
                              source=f"{spec.trace} policy={spec.policy} lp_load={spec.lp_load}")
    sim.on_round = hook
    _warn = never_placeable_warning(trace)
    if _warn:
        print(f"gfs-opt: warning: {_warn}", file=sys.stderr)
    try:
        sim.run()
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"instance dump interrupted; {len(hook.written)} complete "
                                f"file(s) kept in {args.out}") from None
    for path in hook.written:
        print(path)
    print(f"{len(hook.written)} contested round(s) written to {args.out}")
    return 0


def _schema(args: argparse.Namespace) -> int:
    from gfs_opt.instance.schema import json_schema_text

    sys.stdout.write(json_schema_text())
    return 0
