"""`gfs-opt slurm …`: a private single-host Slurm, the GFS controller on it, trace replay, sim-vs-real."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gfs_opt.errors import GfsError
from gfs_opt.fileio import write_csv, write_text


def _classes(text: str) -> tuple[float, ...]:
    try:
        out = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected hours like 1 or 1,2,4, got {text!r}") from None
    if not out or any(c <= 0 for c in out):
        raise argparse.ArgumentTypeError(f"guarantee classes must be positive hours, got {text!r}")
    return out


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return v


def _dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", type=Path, default=None,
                   help="private cluster folder (default $GFS_SLURM_DIR or /tmp/gfs-opt-slurm)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("slurm", help="GFS on a real (single-host) Slurm: cluster, controller, "
                                     "replay, sim-vs-real")
    ssub = p.add_subparsers(dest="slurm_command", metavar="ACTION")
    ssub.required = True

    u = ssub.add_parser("up", help="install (if needed) and start a private Slurm cluster")
    _dir_arg(u)
    u.add_argument("--nodes", type=int, default=None,
                   help="emulated nodes (default 4, or the sum of --pools)")
    u.add_argument("--pools", default=None, metavar="NAME:NODES,…",
                   help="several pools (GPU types), e.g. A100-SXM4-80GB:8,A10:8 — names as in "
                        "the trace to replay; each pool gets typed GRES gpu:<tag>, its own "
                        "partition <tag> and its own spot QOS spot-<d>h-<tag> (<tag>: the "
                        "name's first word, lower case). Default: one pool, partition gpu")
    u.add_argument("--gpus", type=int, default=8, help="fake GPUs per node (default 8)")
    u.add_argument("--guarantee-classes", type=_classes, default=(1.0,),
                   help="guarantee classes in hours, one spot QOS each (default 1)")
    u.add_argument("--speedup", type=_positive, default=1.0,
                   help="time compression K: exempt time of class d is d·3600/K s (default 1)")
    u.add_argument("--exempt-margin", type=float, default=0.0,
                   help="wall seconds added to every PreemptExemptTime: the controller's head "
                        "start on Slurm's own preemption (default 0: exempt = guarantee)")
    u.add_argument("--port-base", type=int, default=16800, help="first private port (default 16800)")
    u.add_argument("--no-install", action="store_true", help="fail instead of running apt-get")
    u.set_defaults(handler=_up)

    d = ssub.add_parser("down", help="cancel jobs and stop the daemons by their recorded PIDs")
    _dir_arg(d)
    d.set_defaults(handler=_down)

    s = ssub.add_parser("status", help="daemons, nodes, QOS and jobs of the private cluster")
    _dir_arg(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=_status)
    register_more(ssub)


def _folder(args: argparse.Namespace) -> Path:
    from gfs_opt.slurm.layout import default_dir

    return (args.dir or default_dir()).resolve()


def _up(args: argparse.Namespace) -> int:
    from gfs_opt.slurm.cluster import up
    from gfs_opt.slurm.layout import ClusterSpec, parse_pools

    pools = parse_pools(args.pools) if args.pools else ()
    nodes = args.nodes if args.nodes is not None else (sum(n for _, n in pools) or 4)
    spec = ClusterSpec(dir=str(_folder(args)), nodes=nodes, gpus=args.gpus,
                       classes=args.guarantee_classes, speedup=args.speedup,
                       exempt_margin_s=args.exempt_margin, port_base=args.port_base, pools=pools)
    timings = up(spec, install=not args.no_install)
    where = "" if not pools else " in pools " + ", ".join(
        f"{p} (partition {spec.partition(p)}, {n} nodes)" for p, n in pools)
    print(f"slurm up: {spec.nodes} nodes × {spec.gpus} GPUs{where}, QOS hp + "
          f"{', '.join(spec.spot_qos)} in {spec.root}  ·  {timings.line()}")
    print(f"use it with: export SLURM_CONF={spec.conf}")
    return 0


def _down(args: argparse.Namespace) -> int:
    from gfs_opt.slurm.cluster import down

    timings = down(_folder(args))
    print(f"slurm down: {timings.line()}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from gfs_opt.slurm.cluster import status

    st: dict[str, Any] = status(_folder(args))
    if args.json:
        spec = st.get("spec")
        st["spec"] = asdict(spec) if spec is not None else None
        json.dump(st, sys.stdout, indent=2, default=str)
        print()
        return 0 if st["daemons"] else 1
    if not st["daemons"]:
        print(f"no cluster in {st['dir']}")
        return 1
    spec = st["spec"]
    print(f"cluster in {st['dir']}: {spec.nodes} nodes × {spec.gpus} GPUs, speedup ×{spec.speedup:g}"
          + (f", pools {dict(spec.pools)}" if spec is not None and spec.pools else "")
          if spec is not None else f"cluster in {st['dir']}")
    for name, pid, alive in st["daemons"]:
        print(f"  {name:<10} pid {pid:<8} {'running' if alive else 'NOT RUNNING'}")
    if "nodes" in st:
        print("  nodes: " + ", ".join(f"{n} {s.lower()}" for n, s in st["nodes"]))
        for q in st["qos"]:
            print(f"  qos {q['name']:<10} priority {q['priority']:<5} preempt {q['preempt'] or '-':<20}"
                  f" exempt {q['exempt'] or '-':<9} GrpTRES {q['grp_tres'] or '-'}")
        print("  jobs: " + (", ".join(f"{k.lower()} {v}" for k, v in st["jobs"].items()) or "none"))
    if "error" in st:
        print(f"  error: {st['error']}")
    if not all(a for _n, _p, a in st["daemons"]):
        raise GfsError("some daemons are not running: `gfs-opt slurm up` restarts the cluster")
    return 0


# ---- controller, replay, compare ------------------------------------------------------------
def _trace_time(text: str) -> float:
    """Seconds since the trace origin, or a date."""
    from gfs_opt.traces.base import parse_time

    try:
        v = parse_time(text)
    except GfsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    assert v is not None
    return v


def register_more(ssub: argparse._SubParsersAction) -> None:
    c = ssub.add_parser("controller", help="run the GFS loop against the live cluster")
    _dir_arg(c)
    c.add_argument("--pool", default="gpu", help="pool name of the cluster in the forecaster's "
                   "series (default gpu; a replay passes the trace's pool); on a cluster with "
                   "--pools, the pool this controller runs (its partition, nodes, spot QOS)")
    c.add_argument("--speedup", type=_positive, default=1.0,
                   help="time compression K: trace time runs K× faster than wall time")
    c.add_argument("--t0", type=_trace_time, default=None,
                   help="trace time at start (seconds or date; default: the real calendar)")
    c.add_argument("--eval-end", type=_trace_time, default=None,
                   help="end of the evaluation window T of PTS's node cost (default t0 + 30 d)")
    c.add_argument("--origin", default="2024-03-01", help="trace origin date (default 2024-03-01)")
    c.add_argument("--refresh", type=_positive, default=300.0,
                   help="quota refresh period in trace seconds (default 300; wall = refresh/K)")
    c.add_argument("--poll", type=_positive, default=1.0, help="wall seconds between polls (1)")
    c.add_argument("--forecaster", default="prophet",
                   help="prophet, week-peak, seasonal-naive, ets, auto (default prophet)")
    c.add_argument("--rho", type=float, default=0.9, help="guarantee probability ρ (0.9)")
    c.add_argument("--gfs", default="gfs", metavar="VARIANT", help=GFS_VARIANT_HELP)
    c.add_argument("--history", type=Path, default=None,
                   help="CSV ds,series,y of hourly HP GPUs per 'pool|account' before the start")
    c.add_argument("--exact", action="store_true",
                   help="choose victims with the preemption MILP (greedy fallback on time-out)")
    c.add_argument("--time-limit", type=_positive, default=2.0, help="MILP time limit (2 s)")
    c.add_argument("--soft-guarantee", action="store_true",
                   help="let victims come from inside their guarantee window (paper semantics; "
                        "default: never, as Slurm's PreemptExemptTime)")
    c.add_argument("--net-after", type=_positive, default=10.0,
                   help="wall seconds an HP job may pend after the controller first found it a "
                        "placement before it moves to QOS hp-net, the only one Slurm preempts "
                        "for: Slurm's preemption as a late safety net (10)")
    c.add_argument("--no-net", action="store_true",
                   help="never hand an HP job to Slurm's preemption")
    c.add_argument("--dry-run", action="store_true", help="decide and log, never act")
    c.add_argument("--ckpt-dir", type=Path, default=None,
                   help="the payloads' state folder: requeue a victim as soon as its checkpoint "
                        "is written (default: wait --ckpt-wait after the signal)")
    c.add_argument("--ckpt-wait", type=_positive, default=3.0,
                   help="wall seconds a victim gets to checkpoint before its requeue (3)")
    c.add_argument("--duration", type=_positive, default=None,
                   help="stop after this many wall seconds (default: run until SIGTERM)")
    c.add_argument("--clock", type=Path, default=None,
                   help="wait for this clock file (written by `slurm replay`) before starting")
    c.add_argument("--log", type=Path, default=None, help="append JSONL actions here")
    c.add_argument("--quiet", action="store_true", help="do not echo actions to stdout")
    c.set_defaults(handler=_controller)

    r = ssub.add_parser("replay", help="submit a trace slice at compressed times, collect outcomes")
    _dir_arg(r)
    r.add_argument("trace", help="trace source: folder, file, built-in name (ref-toy, …) or "
                   "slurm-demo (a small seeded trace sized for the cluster)")
    _replay_args(r)
    r.add_argument("--policy", default="gfs", choices=["gfs", "slurm-qos"],
                   help="gfs: the GFS controller runs beside Slurm; slurm-qos: plain QOS "
                        "preemption, no spot quota (default gfs)")
    r.add_argument("--out", type=Path, required=True, help="folder for tables, logs and summary")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    r.set_defaults(handler=_replay)

    me = ssub.add_parser("measure", help="latencies of the live cluster (start, requeue, GrpTRES, "
                         "Slurm's preemption, the controller's requeue) for the Slurm model")
    _dir_arg(me)
    me.add_argument("--repeats", type=int, default=3, help="samples per probe (3)")
    me.add_argument("--probes", default=",".join(["start", "requeue", "grptres", "preempt",
                                                   "controller"]),
                    help="comma-separated subset of start,requeue,grptres,preempt,controller")
    me.add_argument("--out", type=Path, required=True, help="folder for latencies.json and logs")
    me.set_defaults(handler=_measure)

    m = ssub.add_parser("compare", help="real replay vs simulation, GFS vs plain QOS preemption")
    _dir_arg(m)
    m.add_argument("--trace", default="ref-toy", help="trace source (default ref-toy)")
    _replay_args(m)
    m.add_argument("--policies", default="gfs,slurm-qos", help="gfs,slurm-qos (default both)")
    m.add_argument("--real", type=Path, default=None,
                   help="reuse replays from this folder (<policy>/summary.json) instead of "
                        "running them on the live cluster")
    m.add_argument("--out", type=Path, required=True, help="folder for both sides and the table")
    m.add_argument("--latencies", type=Path, default=None,
                   help="latencies.json of `gfs-opt slurm measure` for the simulator's Slurm "
                        "model (default: the values measured on the project's machine)")
    m.add_argument("--no-slurm-model", action="store_true",
                   help="skip the simulation with the Slurm scheduling model")
    m.set_defaults(handler=_compare)


GFS_VARIANT_HELP = ("the GFS variant whose quota and victims the controller runs, as the "
                    "simulator runs it: gfs (default), gfs-paper (the published GFS), any "
                    "gfs-no-<departure>, with options as NAME[key=value,...]")


def _replay_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", nargs=2, metavar=("START", "END"), default=None,
                   help="trace slice: dates or seconds (default: the trace's first LP day, 2 h)")
    p.add_argument("--pool", default=None, help="trace pool to replay (default: the largest)")
    p.add_argument("--speedup", type=_positive, default=60.0, help="compression K (default 60)")
    p.add_argument("--drain", type=float, default=6 * 3600.0,
                   help="trace seconds to let jobs finish after the slice (default 21600)")
    p.add_argument("--lp-load", type=float, default=1.0, help="LP arrival multiplier (1)")
    p.add_argument("--max-jobs", type=int, default=None, help="keep only the first N jobs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--forecaster", default="prophet", help="GFS forecaster (default prophet)")
    p.add_argument("--refresh", type=_positive, default=300.0,
                   help="quota refresh, trace seconds (300)")
    p.add_argument("--poll", type=_positive, default=1.0, help="controller poll, wall s (1)")
    p.add_argument("--rho", type=float, default=0.9)
    p.add_argument("--gfs", default="gfs", metavar="VARIANT", help=GFS_VARIANT_HELP)
    p.add_argument("--exact", action="store_true", help="controller victims by the MILP")
    p.add_argument("--soft-guarantee", action="store_true",
                   help="controller may evict inside guarantee windows")
    p.add_argument("--exempt-margin", type=float, default=None,
                   help="with --policy gfs: wall seconds added to PreemptExemptTime so the "
                        "controller's PTS victims come before Slurm's own (default 5, sized from "
                        "`slurm measure`: the controller requeues 0.5–1.5 s after a window ends)")
    p.add_argument("--net-after", type=float, default=None,
                   help="with --policy gfs: wall seconds an HP job may pend after the controller "
                        "found it a placement before it is handed to Slurm's own preemption (QOS hp-net; default 10; negative: "
                        "never)")


def _spec(args: argparse.Namespace):
    from gfs_opt.slurm.layout import load_spec

    folder = _folder(args)
    spec = load_spec(folder)
    if spec is None:
        raise GfsError(f"no cluster recorded in {folder}: run `gfs-opt slurm up` first")
    return spec


def _plan(args: argparse.Namespace, source: str, spec):
    from gfs_opt.slurm.plan import build_plan
    from gfs_opt.traces.load import load_trace

    if not 0 < args.rho < 1:
        raise GfsError("--rho must be in (0, 1)")
    window = args.window
    if window is None:
        from gfs_opt.slurm import demo

        tr = (demo.demo_trace(spec.nodes, spec.gpus, args.seed) if source == demo.NAME
              else load_trace(source, seed=args.seed))
        lp = tr.jobs[tr.jobs["cls"] == "LP"]
        first = float((lp if len(lp) else tr.jobs)["submit"].min()) // 86_400 * 86_400
        window = (first, first + 7200.0)
    return build_plan(source, tuple(window), spec.nodes, spec.gpus, pool=args.pool,
                      classes=spec.classes, lp_load=args.lp_load, seed=args.seed,
                      max_jobs=args.max_jobs, pools=tuple(spec.pools))


def _replay_config(args: argparse.Namespace, policy: str):
    from gfs_opt.slurm.replay import DEFAULT_EXEMPT_MARGIN_S, DEFAULT_NET_AFTER_S, ReplayConfig

    return ReplayConfig(policy=policy, gfs=args.gfs, speedup=args.speedup, drain_s=args.drain,
                        forecaster=args.forecaster, refresh_s=args.refresh, poll_s=args.poll,
                        exact=args.exact, protect_windows=not args.soft_guarantee, rho=args.rho,
                        exempt_margin_s=(DEFAULT_EXEMPT_MARGIN_S if args.exempt_margin is None
                                         else args.exempt_margin),
                        net_after_s=(DEFAULT_NET_AFTER_S if args.net_after is None else
                                     None if args.net_after < 0 else args.net_after))


def _controller(args: argparse.Namespace) -> int:
    import pandas as pd

    from gfs_opt.slurm.controller import Controller, ControllerConfig

    if not 0 < args.rho < 1:
        raise GfsError("--rho must be in (0, 1)")
    try:
        origin = pd.Timestamp(args.origin)
    except ValueError:
        raise GfsError(f"--origin {args.origin!r}: expected a date") from None
    cfg = ControllerConfig(
        pool=args.pool, speedup=args.speedup, t0=args.t0, eval_end=args.eval_end,
        refresh_s=args.refresh, poll_s=args.poll, forecaster=args.forecaster, rho=args.rho,
        policy=args.gfs,
        exact=args.exact, time_limit=args.time_limit, protect_windows=not args.soft_guarantee,
        dry_run=args.dry_run, duration_s=args.duration, origin=origin, history=args.history,
        clock_file=args.clock, log=args.log, ckpt_dir=args.ckpt_dir, ckpt_wait_s=args.ckpt_wait,
        net_after_s=None if args.no_net else args.net_after)
    if args.clock is not None and args.t0 is None:
        raise GfsError("--clock needs --t0 (the trace time the replay starts at)")
    counts = Controller(_spec(args), cfg, echo=not args.quiet).run()
    print(f"controller stopped: {counts}", file=sys.stderr)
    return 0


def _measure(args: argparse.Namespace) -> int:
    from gfs_opt.slurm.measure import measure

    probes = tuple(p.strip() for p in args.probes.split(",") if p.strip())
    res = measure(_spec(args), args.out, repeats=args.repeats, probes=probes)
    for name in [k for k in res if k != "cluster"]:
        r = res[name]
        print(f"{name:<19} mean {r['mean']:6.2f} s  min {r['min']:6.2f}  max {r['max']:6.2f}  "
              f"(n={r['n']})")
    print(f"wrote {args.out / 'latencies.json'}")
    return 0


def _print_replay(summary: dict) -> None:
    from gfs_opt.commands.sim_cmd import format_summary

    print(format_summary(summary))
    keys = ["jobs_planned", "jobs_done", "jobs_running_at_end", "jobs_pending_at_end",
            "jobs_conserved", "hp_evictions", "lp_evictions_in_exempt_window",
            "evictions_by_slurm", "evictions_by_controller", "lp_evictions_by_controller",
            "lp_evictions_by_slurm", "lp_evictions_controller_pct", "spot_starts_over_limit"]
    print("  checks  " + ", ".join(f"{k}={summary[k]}" for k in keys if k in summary))
    t = summary.get("timings", {})
    print("  timings " + ", ".join(f"{k} {v:.1f}" for k, v in t.items()))


def _replay(args: argparse.Namespace) -> int:
    from gfs_opt.slurm.replay import replay

    spec = _spec(args)
    plan = _plan(args, args.trace, spec)
    res = replay(spec, plan, _replay_config(args, args.policy), args.out)
    if args.json:
        json.dump(res.summary, sys.stdout, indent=2, default=str)
        print()
    else:
        _print_replay(res.summary)
        print(f"tables written to {args.out}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from gfs_opt.slurm.compare import (
        Side,
        format_table,
        load_side,
        markdown,
        real_folder,
        simulate,
        slurm_model,
        table,
    )
    from gfs_opt.slurm.layout import ClusterSpec

    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    bad = [p for p in policies if p not in ("gfs", "slurm-qos")]
    if bad or not policies:
        raise GfsError(f"--policies: unknown {bad}; choose from gfs, slurm-qos")
    if args.real is not None:
        # the earlier real runs define the cluster the plan is for
        summary = json.loads((real_folder(args.real, policies[0]) / "summary.json").read_text())
        s = summary["summary"]
        if "cluster_nodes" not in s:
            raise GfsError(f"--real {args.real}: the summary does not record the cluster shape")
        spec = ClusterSpec(nodes=int(s["cluster_nodes"]), gpus=int(s["cluster_gpus_per_node"]),
                           classes=tuple(float(c) for c in s.get("guarantee_classes", [1.0])),
                           pools=tuple((str(p), int(n)) for p, n in s.get("cluster_pools", [])))
    else:
        spec = _spec(args)
    plan = _plan(args, args.trace, spec)
    sides: dict[str, tuple[Side, Side]] = {}
    modelled: dict[str, Side] = {}
    for pol in policies:
        if args.real is not None:
            real = load_side(real_folder(args.real, pol))
        else:
            from gfs_opt.slurm.replay import replay

            res = replay(spec, plan, _replay_config(args, pol), args.out / pol / "real")
            real = load_side(res.out)
        sim = simulate(plan, pol, args.out / pol / "sim", spec.classes, args.forecaster,
                       args.refresh, args.rho, args.drain)
        sides[pol] = (real, sim)
        if not args.no_slurm_model:
            modelled[pol] = simulate(plan, pol, args.out / pol / "sim-slurm", spec.classes,
                                     args.forecaster, args.refresh, args.rho, args.drain,
                                     slurm=slurm_model(args.speedup, args.latencies))
    df = table(sides, modelled)
    print(plan.describe() + f", ×{args.speedup:g}")
    print(format_table(df))
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "compare.csv", df)
    write_text(args.out / "compare.md", markdown(df) + "\n")
    print(f"wrote {args.out / 'compare.csv'} and compare.md")
    return 0
