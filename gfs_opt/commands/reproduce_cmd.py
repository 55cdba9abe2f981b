"""`gfs-opt reproduce`: the paper's evaluation and REPRODUCTION.md in one command."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gfs_opt.commands import args as cargs
from gfs_opt.errors import GfsError
from gfs_opt.fileio import check_out_dir, check_out_file

if TYPE_CHECKING:
    from gfs_opt.experiments.reproduce.plan import ReproConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reproduce", help="run the paper's comparison, ablations and full replay; write a report",
        description="Runs paper-a100 at low/medium/high LP load × GFS and four baselines, "
                    "GFS-MILP, the ablations, the full-cluster August replay and greedy-vs-MILP "
                    "on the instance files; writes REPRODUCTION.md with tables and figures. "
                    "Finished runs found in --out are reused (use --fresh to redo them).")
    p.add_argument("--quick", action="store_true",
                   help="small settings (setup 'small', medium load, ETS forecaster, no full "
                        "replay, tiny instances): a few minutes at most")
    p.add_argument("--out", type=Path, default=None,
                   help="runs, tables, figures (default results/reproduce[-quick])")
    p.add_argument("--report", type=Path, default=None,
                   help="Markdown report to write (default OUT/REPRODUCTION.md)")
    p.add_argument("--assets", type=Path, default=None,
                   help="where figures/, tables/ and results.json go (default OUT)")
    p.add_argument("--forecaster", default=None,
                   help="GFS forecaster for the A100 grid (default prophet; --quick: ets)")
    p.add_argument("--full-forecaster", default=None,
                   help="forecaster for the full replay (default ets: Prophet there takes hours)")
    p.add_argument("--skip-full", action="store_true", help="skip the full-cluster replay")
    p.add_argument("--skip-milp", action="store_true",
                   help="skip GFS-MILP runs and the greedy-vs-MILP instance study")
    p.add_argument("--loads", default=None,
                   help="comma-separated loads among low, medium, high (default all three; "
                        "--quick: medium)")
    p.add_argument("--setup", default=None, help="grid setup (default paper-a100; --quick: small)")
    p.add_argument("--instances", type=Path, default=None,
                   help="folder of instance files (default ./instances)")
    p.add_argument("--milp-time-limit", type=cargs.number(0, 3600, lo_open=True), default=None,
                   metavar="S",
                   help="time limit per MILP step on the instances (default 10; --quick: 2)")
    p.add_argument("--seed", type=cargs.seed, default=0)
    p.add_argument("--seeds", type=cargs.seeds, default=None, metavar="S,S,…",
                   help="run the grid's policies and the departures once per seed (default: "
                        "three seeds from --seed on; --quick: --seed alone; the first replaces "
                        "--seed, which everything else runs on) and give each metric a mean ± "
                        "95 %% interval over seeds; each seed adds a grid's worth of runs")
    p.add_argument("--lift-quota-after-window", action="store_true",
                   help="the authors' lifted drain in every run: the spot quota is lifted when "
                        "the scored window ends (default: kept until the replay ends)")
    p.add_argument("--fresh", action="store_true", help="re-run even where results exist")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(handler=_reproduce)


def _config(args: argparse.Namespace) -> ReproConfig:
    from gfs_opt.experiments.reproduce.plan import ReproConfig
    from gfs_opt.experiments.setups import LOADS
    from gfs_opt.forecast.registry import MODELS

    cfg = ReproConfig.quick_config() if args.quick else ReproConfig()
    kw: dict = {"seed": args.seeds[0] if args.seeds else args.seed}
    if args.seeds:
        kw["seeds"] = tuple(args.seeds) if len(args.seeds) > 1 else ()
    elif cfg.seeds:           # three seeds from --seed on
        kw["seeds"] = tuple(args.seed + k for k in range(len(cfg.seeds)))
    for name in ("forecaster", "full_forecaster"):
        value = getattr(args, name)
        if value is not None:
            if value not in MODELS:
                raise GfsError(f"unknown forecaster '{value}'; choose from {', '.join(MODELS)}")
            kw[name] = value
    if args.setup:
        kw["setup"] = args.setup
    if args.loads:
        names = [x.strip() for x in args.loads.split(",") if x.strip()]
        bad = [x for x in names if x not in LOADS]
        if bad or not names:
            raise GfsError(f"unknown load(s) {bad}; choose from {', '.join(LOADS)}")
        kw["loads"] = tuple((n, LOADS[n]) for n in names)
        if cfg.ablation_load not in names:
            kw["ablation_load"] = names[0]
        kw["milp_loads"] = tuple(n for n in cfg.milp_loads if n in names) or (names[0],)
    if args.skip_full:
        kw["full_setup"] = None
    if args.skip_milp:
        kw["milp_policies"] = ()
        kw["instances"] = None
    elif args.instances is not None:
        if not args.instances.is_dir():
            raise GfsError(f"{args.instances}: not a folder of instance files")
        kw["instances"] = str(args.instances)
    elif cfg.instances and not Path(cfg.instances).is_dir():
        kw["instances"] = _package_instances()
    if args.milp_time_limit is not None:
        kw["milp_time_limit"] = args.milp_time_limit
    if args.lift_quota_after_window:
        kw["lift_quota_after_window"] = True
    return replace(cfg, **kw)


def _package_instances() -> str | None:
    """./instances when run from the repository root, else the repository's next to the package."""
    here = Path(__file__).resolve().parents[2] / "instances"
    return str(here) if here.is_dir() else None


def _reproduce(args: argparse.Namespace) -> int:
    from gfs_opt.experiments.reproduce.plan import reproduce
    from gfs_opt.experiments.reproduce.report import write_report

    cfg = _config(args)
    out = args.out or Path("results") / ("reproduce-quick" if args.quick else "reproduce")
    report = args.report or out / "REPRODUCTION.md"
    check_out_dir(out)
    check_out_file(report, "--report")
    check_out_dir(args.assets, "--assets")

    def say(msg: str) -> None:
        print(msg, flush=True)

    say(f"reproduce → {out} ({'quick' if cfg.quick else 'full'}; forecaster {cfg.forecaster})")
    res = reproduce(cfg, out, say=say, progress_bars=not args.no_progress, fresh=args.fresh)
    command = "gfs-opt reproduce " + " ".join(shlex.quote(a) for a in sys.argv[2:]) \
        if len(sys.argv) > 1 and sys.argv[1] == "reproduce" else ""
    path = write_report(res, report, args.assets, command=command)
    say(f"report: {path}  ({res.timings.get('total', 0):,.0f} s)")
    return 0
