"""`gfs-opt trace …`: verify a job file, synthesise a calibrated trace, compute trace statistics."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gfs_opt.commands import args as cargs
from gfs_opt.errors import GfsError
from gfs_opt.fileio import check_out_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trace", help="load, verify, synthesise and describe traces")
    tsub = p.add_subparsers(dest="trace_command", metavar="ACTION")
    tsub.required = True

    v = tsub.add_parser("verify", help="check a job_info_df.csv against the published sha256")
    v.add_argument("file", type=Path)
    v.set_defaults(handler=_verify)

    s = tsub.add_parser("synth", help="write a calibrated synthetic Alibaba-like trace")
    s.add_argument("--seed", type=cargs.seed, default=0)
    s.add_argument("--scale", type=cargs.number(0, 1, lo_open=True), default=1.0,
                   help="fraction of the real job volume and cluster (1 = full size)")
    s.add_argument("--pools", default=None, help="comma-separated GPU models to keep")
    s.add_argument("--start", default=None, help="first day kept (YYYY-MM-DD or seconds)")
    s.add_argument("--end", default=None, help="end, exclusive (YYYY-MM-DD or seconds)")
    s.add_argument("--setup", default=None, help="a built-in setup instead (e.g. paper-a100)")
    s.add_argument("--out", type=Path, required=True)
    s.set_defaults(handler=_synth)

    st = tsub.add_parser("stats", help="calibration statistics of any trace")
    st.add_argument("source", help=cargs.TRACE_HELP)
    st.add_argument("--json", action="store_true", help="print JSON instead of a table")
    st.add_argument("--seed", type=cargs.seed, default=0)
    st.add_argument("--targets", type=Path, default=None,
                    help="calibration_targets.json to score against (default: the shipped targets "
                         "of the Alibaba v2026 trace, used only for traces on its cluster)")
    st.set_defaults(handler=_stats)


def _verify(args: argparse.Namespace) -> int:
    from gfs_opt.traces.verify import JOB_FILE_SHA256, verify_job_file

    ok, digest = verify_job_file(args.file)
    if ok:
        print(f"ok  sha256 {digest}  {args.file}")
        return 0
    print(f"MISMATCH  {args.file}\n  expected sha256 {JOB_FILE_SHA256} (upstream "
          f"job_info_df.csv)\n  found    sha256 {digest}")
    return 1


def _synth(args: argparse.Namespace) -> int:
    from gfs_opt.traces.synth import synth_to_dir

    check_out_dir(args.out)
    t0 = time.perf_counter()
    nodes, jobs = synth_to_dir(args.out, seed=args.seed, scale=args.scale,
                               pools=args.pools.split(",") if args.pools else None,
                               start=args.start, end=args.end, setup=args.setup)
    print(f"wrote {nodes:,} nodes and {jobs:,} jobs to {args.out} in {time.perf_counter() - t0:.1f} s")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from gfs_opt.fileio import json_safe
    from gfs_opt.traces.calibration import calibration_scale
    from gfs_opt.traces.load import load_trace
    from gfs_opt.traces.stats import calibration_report, format_report, trace_stats

    trace = load_trace(args.source, seed=args.seed)
    stats = trace_stats(trace)
    if args.targets is not None and not args.targets.is_file():
        raise GfsError(f"--targets {args.targets}: no such file")
    scale = calibration_scale(trace)
    scored = args.targets is not None or scale is not None
    report = calibration_report(stats, args.targets, scale=scale or 1.0) if scored else []
    note = None if scored else (
        f"not scored: the calibration targets describe the Alibaba v2026 trace on its "
        f"4,278-node cluster (or a stratified sample of it, as `trace synth --scale` writes), "
        f"and {trace.name} runs on another cluster (--targets FILE scores it anyway)")
    if args.json:
        doc = {"stats": stats, "calibration": report}
        if note:
            doc["calibration_note"] = note
        json.dump(json_safe(doc), sys.stdout, indent=2, allow_nan=False)
        print()
    else:
        text = format_report(stats, report)
        if note:
            text = text.replace("no calibration targets found (calibration_targets.json "
                                "missing): statistics only", note)
        print(text)
    failed = [r for r in report if r.get("ok") is False]
    return 1 if failed else 0
