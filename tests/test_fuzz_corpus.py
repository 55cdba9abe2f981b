"""A fixed corpus of malformed inputs across every surface of the CLI.

Each case is one bad input (an instance file, a trace file or folder of any format, a sweep
spec, a forecast CSV, or a command-line flag) and must end with exit status 2 and exactly one
line ``gfs-opt: error: …`` on stderr that names the culprit (its file or flag), no traceback and
no hang. The cases run in-process (`gfs_opt.cli.main`) under an alarm, so the corpus is fast.
`test_corpus_size` keeps it at ≥ 200 cases and reports the count per surface.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from standins import write_alibaba_standin
from test_fuzz_cli import CALL_LIMIT_S, alarm, run_cli
from tiny_trace import write_tiny_trace

from gfs_opt.cli import main

REPO = Path(__file__).resolve().parent.parent
TINY_INSTANCE = REPO / "instances" / "tiny-01-cheapest-victim.json"
SIM = ("simulate", "--policy", "yarn-cs", "--no-progress", "--window", "2024-03-01", "2024-03-02")


@dataclass(frozen=True)
class Case:
    surface: str
    id: str
    argv: tuple[str, ...]                     # "{d}" is replaced by the case's folder
    names: str                                # the file or flag the message must name
    make: Callable[[Path], None] | None = None
    contains: str = ""                        # an extra fragment the message must hold


CASES: list[Case] = []


def case(surface: str, id_: str, argv: tuple[str, ...], names: str,
         make: Callable[[Path], None] | None = None, contains: str = "") -> None:
    CASES.append(Case(surface, id_, argv, names, make, contains))


def _toy(d: Path) -> None:
    write_alibaba_standin(d / "toy")


# ---- CLI flags --------------------------------------------------------------------------------
def _flag_cases() -> None:
    bad_numbers = {"inf": "finite", "nan": "finite", "-1": "out of range", "1e300": "out of range",
                   "abc": "not a number"}
    for cmd in (("simulate",), ("compare",), ("instance", "dump", "--out", "{d}/o")):
        for v, why in {**bad_numbers, "1e6": "out of range"}.items():
            case("cli-flags", f"{cmd[0]}-lp-load-{v}", (*cmd, "--lp-load", v), "--lp-load",
                 contains=why)
    for cmd in (("simulate",), ("compare",), ("forecast", "backtest", "--data", "x.csv"),
                ("trace", "synth", "--out", "{d}/s"), ("trace", "stats", "small"),
                ("reproduce", "--quick")):
        for v in ("-1", "1.5", "abc", "99999999999999999999"):
            case("cli-flags", f"{'-'.join(cmd[:2])}-seed-{v}", (*cmd, "--seed", v), "--seed")
    for v in ("0", "1", "1.5", "-0.1", "nan", "inf"):
        case("cli-flags", f"simulate-rho-{v}", ("simulate", "--rho", v), "--rho")
    for v in ("0", "-1", "0,-1", "1,x", "1,1", "nan", "1e300", "", "169"):
        case("cli-flags", f"simulate-guarantee-classes-{v or 'empty'}",
             ("simulate", "--guarantee-classes", v), "--guarantee-classes")
    for v in ("huge", "-1", "1e300", "inf", "nan", "101"):
        case("cli-flags", f"compare-loads-{v}", ("compare", "--loads", f"medium,{v}"), "--loads")
    case("cli-flags", "compare-policies-unknown", ("compare", "--policies", "gfs,nope"),
         "--policies")
    case("cli-flags", "compare-policies-empty", ("compare", "--policies", ","), "--policies")
    case("cli-flags", "compare-setup-unknown", ("compare", "--setup", "huge"), "huge")
    case("cli-flags", "compare-setup-and-trace", ("compare", "--setup", "small", "--trace", "x"),
         "--setup")
    for cmd in (("simulate",), ("compare",), ("instance", "dump"),
                ("forecast", "backtest", "--data", "alibaba-hourly"), ("trace", "synth"),
                ("sweep", "{d}/spec.toml"), ("reproduce", "--quick")):
        case("cli-flags", f"{'-'.join(c for c in cmd[:2] if '{' not in c)}-out-is-a-file",
             (*cmd, "--out", "{d}/afile"), "--out", make=_afile_and_spec)
        case("cli-flags", f"{'-'.join(c for c in cmd[:2] if '{' not in c)}-out-under-a-file",
             (*cmd, "--out", "{d}/afile/sub"), "--out", make=_afile_and_spec)
    case("cli-flags", "forecast-series-out-is-a-folder",
         ("forecast", "series", "--data", "alibaba-hourly", "--out", "{d}"), "--out")
    case("cli-flags", "simulate-policy-unknown", ("simulate", "--policy", "nope"), "nope")
    case("cli-flags", "simulate-pools-unknown", ("simulate", "--trace", "{d}/toy", "--pools", "H9",
                                                 "--policy", "yarn-cs"), "H9", make=_toy)
    case("cli-flags", "simulate-trace-missing", ("simulate", "--trace", "{d}/nothing"), "nothing")
    case("cli-flags", "simulate-trace-unknown-name", ("simulate", "--trace", "tiny"), "tiny")
    case("cli-flags", "simulate-window-reversed",
         ("simulate", "--trace", "{d}/toy", "--window", "2024-03-12", "2024-03-11"), "window", make=_toy)
    case("cli-flags", "simulate-window-garbage",
         ("simulate", "--trace", "{d}/toy", "--window", "someday", "2024-03-11"), "window", make=_toy)
    case("cli-flags", "simulate-window-outside-trace",
         ("simulate", "--trace", "{d}/toy", "--policy", "yarn-cs", "--window", "2030-01-01",
          "2030-01-02"), "window", make=_toy)
    case("cli-flags", "simulate-replay-garbage",
         ("simulate", "--trace", "{d}/toy", "--replay-from", "later"), "replay", make=_toy)
    for v in ("0", "-1", "inf", "nan", "1e300"):
        case("cli-flags", f"solve-time-limit-{v}", ("solve", str(TINY_INSTANCE), "--time-limit", v),
             "--time-limit")
    for v in ("1", "-0.1", "nan"):
        case("cli-flags", f"solve-gap-{v}", ("solve", str(TINY_INSTANCE), "--gap", v), "--gap")
    for flag, v in (("--candidates", "-1"), ("--candidates", "1.5"), ("--limit", "-1"),
                    ("--method", "exact"), ("--step", "both"), ("--solver", "cplex")):
        case("cli-flags", f"solve{flag}-{v}", ("solve", str(TINY_INSTANCE), flag, v), flag)
    case("cli-flags", "solve-export-out-is-folder",
         ("solve", str(TINY_INSTANCE), "--export", "lp", "--out", "{d}"), "--out")
    for flag, v in (("--max", "0"), ("--max", "-1"), ("--every", "-1"), ("--every", "inf"),
                    ("--min-pending-hp", "-1"), ("--kind", "all")):
        case("cli-flags", f"dump{flag}-{v}", ("instance", "dump", "--out", "{d}/o", flag, v), flag)
    case("cli-flags", "dump-setup-and-trace",
         ("instance", "dump", "--setup", "small", "--trace", "ref-toy", "--out", "{d}/o"), "--setup")
    for flag, v in (("--horizon", "0"), ("--horizon", "169"), ("--horizon", "1.5"),
                    ("--quantile", "0"), ("--quantile", "1"), ("--quantile", "nan"),
                    ("--weeks", "0"), ("--weeks", "-1"), ("--weeks", "inf"),
                    ("--max-series", "0"), ("--refit", "weekly")):
        case("cli-flags", f"backtest{flag}-{v}",
             ("forecast", "backtest", "--data", "alibaba-hourly", "--out", "{d}/bt", flag, v), flag)
    case("cli-flags", "backtest-models-unknown",
         ("forecast", "backtest", "--data", "alibaba-hourly", "--out", "{d}/bt", "--models", "x"),
         "'x'")
    case("cli-flags", "backtest-series-unknown",
         ("forecast", "backtest", "--data", "alibaba-hourly", "--out", "{d}/bt", "--series", "x"),
         "series")
    case("cli-flags", "backtest-data-missing",
         ("forecast", "backtest", "--data", "{d}/none.csv", "--out", "{d}/bt"), "none.csv")
    case("cli-flags", "series-columns-on-a-trace",
         ("forecast", "series", "--data", "{d}/toy", "--time-col", "t", "--out", "{d}/s.csv"),
         "--time-col", make=_toy)
    for v in ("0", "-1", "2", "nan"):
        case("cli-flags", f"synth-scale-{v}", ("trace", "synth", "--out", "{d}/s", "--scale", v),
             "--scale")
    case("cli-flags", "synth-setup-unknown", ("trace", "synth", "--out", "{d}/s", "--setup", "x"),
         "'x'")
    case("cli-flags", "stats-targets-missing",
         ("trace", "stats", "{d}/toy", "--targets", "{d}/none.json"), "--targets", make=_toy)
    case("cli-flags", "stats-source-missing", ("trace", "stats", "{d}/none"), "none")
    case("cli-flags", "verify-missing", ("trace", "verify", "{d}/none.csv"), "none.csv")
    case("cli-flags", "sweep-workers-0", ("sweep", "{d}/spec.toml", "--workers", "0"), "--workers",
         make=_afile_and_spec)
    case("cli-flags", "sweep-engine-unknown", ("sweep", "{d}/spec.toml", "--engine", "slurm"),
         "--engine", make=_afile_and_spec)
    case("cli-flags", "sweep-spec-missing", ("sweep", "{d}/none.toml"), "none.toml")
    case("cli-flags", "reproduce-milp-time-limit-0", ("reproduce", "--milp-time-limit", "0"),
         "--milp-time-limit")
    case("cli-flags", "reproduce-loads-unknown", ("reproduce", "--quick", "--loads", "extreme"),
         "extreme")
    case("cli-flags", "reproduce-forecaster-unknown", ("reproduce", "--quick", "--forecaster", "x"),
         "'x'")
    case("cli-flags", "fetch-sha256-bad",
         ("data", "fetch", "alibaba-v2026", "--dest", "{d}/f", "--sha256", "xyz"), "--sha256")
    case("cli-flags", "fetch-url-ftp",
         ("data", "fetch", "alibaba-v2026", "--dest", "{d}/f", "--url", "ftp://127.0.0.1/x"),
         "--url")
    case("cli-flags", "fetch-dest-is-file",
         ("data", "fetch", "alibaba-v2026", "--dest", "{d}/afile"), "--dest", make=_afile_and_spec)
    case("cli-flags", "fetch-dataset-unknown", ("data", "fetch", "imagenet"), "imagenet")
    case("cli-flags", "unknown-command", ("frobnicate",), "frobnicate")


def _afile_and_spec(d: Path) -> None:
    (d / "afile").write_text("not a folder\n")
    (d / "spec.toml").write_text('setup = "small"\npolicies = ["yarn-cs"]\n')


# ---- instance files ---------------------------------------------------------------------------
def _instance(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        doc = json.loads(TINY_INSTANCE.read_text())
        edit(doc)
        (d / "round.json").write_text(json.dumps(doc))
    return make


def _set(path: str, value: object) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        parts = path.split(".")
        obj = doc
        for p in parts[:-1]:
            obj = obj[int(p)] if p.isdigit() else obj[p]
        last = parts[-1]
        obj[int(last) if last.isdigit() else last] = value
    return edit


def _instance_cases() -> None:
    fields = ["time", "jobs.0.duration", "jobs.0.submit", "jobs.0.guarantee_h", "jobs.0.cpu",
              "jobs.0.workers", "jobs.0.gpus_per_worker", "running.0.start",
              "running.0.last_ckpt", "params.restart_small_s", "params.quota_refresh_s",
              "params.rho", "params.horizon_h", "params.eta_max", "nodes.0.gpus"]
    for f in fields:
        for v in (1e300, -1, "x", None):
            case("instance-json", f"{f}={v}", ("solve", "{d}/round.json", "--time-limit", "1"),
                 "round.json", make=_instance(_set(f, v)))
    for name, edit in (("pending-unknown-job", _set("pending_hp", [999])),
                       ("duplicate-node", lambda d: d["nodes"].append(dict(d["nodes"][0]))),
                       ("format", _set("format", "other")), ("version", _set("version", 9)),
                       ("placement-out-of-node", _set("running.0.placement", [[0, [8]]])),
                       ("no-nodes", _set("nodes", [])),
                       ("guarantee-classes-empty", _set("params.guarantee_classes", [])),
                       ("guarantee-classes-1e300", _set("params.guarantee_classes", [1e300]))):
        case("instance-json", name, ("instance", "show", "{d}/round.json"), "round.json",
             make=_instance(edit))
    for name, text in (("truncated", '{"format": "gfs-opt-instance", "nodes": ['),
                       ("empty", ""), ("not-json", "nodes: []"), ("array", "[1, 2]"),
                       ("nan", '{"format": "gfs-opt-instance", "version": 1, "time": NaN}'),
                       ("binary", "\x00\x01\x02")):
        case("instance-json", f"file-{name}", ("solve", "{d}/round.json"), "round.json",
             make=lambda d, text=text: (d / "round.json").write_text(text))


# ---- trace files of every format --------------------------------------------------------------
def _alibaba(target: str, edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        folder = write_tiny_trace(d / "t", n=6)
        path = folder / target
        edit(pd.read_csv(path, dtype=str)).to_csv(path, index=False)
    return make


def _cell(column: str, value: str, row: int = 1) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def edit(df: pd.DataFrame) -> pd.DataFrame:
        df.loc[row, column] = value
        return df
    return edit


def _trace_cases() -> None:
    job_cells = {"submit_time": ["1e15", "1e300", "-1", "abc", "inf"],
                 "duration": ["1e15", "-5", "nan", ""],
                 "worker_num": ["0", "1.5", "1e9"], "gpu_request": ["2000", "-1", "x"],
                 "gpu_model": ["H9000"], "job_type": ["Batch"], "cpu_request": ["-1"],
                 "job_name": [""]}
    for col, values in job_cells.items():
        for v in values:
            case("trace-alibaba", f"job-{col}={v or 'empty'}", (*SIM[:1], "--trace", "{d}/t",
                                                                *SIM[1:]),
                 "job_info_df.csv", make=_alibaba("job_info_df.csv", _cell(col, v)))
    node_cells = {"gpu_capacity_num": ["0", "1e9", "x", "1.5"], "cpu_num": ["-1"],
                  "node_name": [""], "gpu_model": [""]}
    for col, values in node_cells.items():
        for v in values:
            case("trace-alibaba", f"node-{col}={v or 'empty'}", (*SIM[:1], "--trace", "{d}/t",
                                                                 *SIM[1:]),
                 "node_info_df.csv", make=_alibaba("node_info_df.csv", _cell(col, v)))
    for target in ("job_info_df.csv", "node_info_df.csv"):
        case("trace-alibaba", f"{target}-header-only", ("trace", "stats", "{d}/t"), target,
             make=_alibaba(target, lambda df: df.iloc[:0]))
        case("trace-alibaba", f"{target}-missing-column", ("trace", "stats", "{d}/t"), target,
             make=_alibaba(target, lambda df: df.drop(columns=df.columns[1])))
        case("trace-alibaba", f"{target}-empty-file", ("trace", "stats", "{d}/t"), target,
             make=lambda d, target=target: (write_tiny_trace(d / "t", n=2) / target).write_text(""))
    case("trace-alibaba", "duplicate-job-name", ("trace", "stats", "{d}/t"), "job_info_df.csv",
         make=_alibaba("job_info_df.csv", lambda df: pd.concat([df, df.iloc[:1]])))
    case("trace-alibaba", "gang-split-cell", ("trace", "stats", "{d}/t"), "job_info_df.csv",
         make=_alibaba("job_info_df.csv", _cell("worker_num", "1;2")))
    case("trace-alibaba", "folder-without-files", ("trace", "stats", "{d}"), "{d}")

    openb_nodes = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,1,8,V100M16\nn1,64000,1,2,T4\n"
    openb_head = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
                  "creation_time,deletion_time,scheduled_time\n")
    good = "p1,1000,1,1,500,,LS,Running,0,100,0\np2,1000,1,2,1000,,BE,Running,10,200,20\n"
    openb_bad = {"creation-1e15": "p3,1000,1,1,500,,LS,Running,1e15,1e15,1e15\n",
                 "deletion-before-start": "p3,1000,1,1,500,,LS,Running,50,10,50\n",
                 "scheduled-before-creation": "p3,1000,1,1,500,,LS,Running,50,100,10\n",
                 "gpu-milli-0": "p3,1000,1,1,0,,LS,Running,0,10,0\n",
                 "num-gpu-huge": "p3,1000,1,5000,1000,,LS,Running,0,10,0\n",
                 "num-gpu-text": "p3,1000,1,two,1000,,LS,Running,0,10,0\n",
                 "duplicate-name": "p1,1000,1,1,500,,LS,Running,0,100,0\n",
                 "negative-time": "p3,1000,1,1,500,,LS,Running,-5,100,0\n"}

    def openb(rows: str, nodes: str = openb_nodes) -> Callable[[Path], None]:
        def make(d: Path) -> None:
            (d / "openb_pod_list_x.csv").write_text(openb_head + rows)
            (d / "openb_node_list_gpu_node.csv").write_text(nodes)
        return make

    for name, row in openb_bad.items():
        case("trace-openb", name, ("trace", "stats", "{d}/openb_pod_list_x.csv"),
             "openb_pod_list_x.csv", make=openb(good + row))
    case("trace-openb", "header-only", ("trace", "stats", "{d}/openb_pod_list_x.csv"),
         "openb_pod_list_x.csv", make=openb(""))
    case("trace-openb", "cpu-only", ("trace", "stats", "{d}/openb_pod_list_x.csv"),
         "openb_pod_list_x.csv", make=openb("p1,1000,1,0,0,,LS,Running,0,100,0\n"))
    case("trace-openb", "node-file-missing", ("trace", "stats", "{d}/openb_pod_list_x.csv"),
         "openb_node_list_gpu_node.csv",
         make=lambda d: (d / "openb_pod_list_x.csv").write_text(openb_head + good))
    case("trace-openb", "node-file-no-gpus", ("trace", "stats", "{d}/openb_pod_list_x.csv"),
         "openb_node_list_gpu_node.csv",
         make=openb(good, "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,1,0,\n"))

    ch_head = ("job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,"
               "expect_time_list,expect_value_list,best_effort,job_type\n")
    ch_good = "1,u1,1,0,1,m,60,1,1,1,0,strict\n2,u2,2,5,1,m,30,1,1,1,1,best\n"
    ch_bad = {"submit-1e15": "3,u1,1,1e15,1,m,60,1,1,1,0,strict\n",
              "duration-1e300": "3,u1,1,5,1,m,1e300,1,1,1,0,strict\n",
              "num-gpu-huge": "3,u1,1000000,5,1,m,60,1,1,1,0,strict\n",
              "job-type-bad": "3,u1,1,5,1,m,60,1,1,1,0,urgent\n",
              "best-effort-contradiction": "3,u1,1,5,1,m,60,1,1,1,1,strict\n",
              "duplicate-id": "1,u1,1,5,1,m,60,1,1,1,0,strict\n",
              "user-missing": "3,,1,5,1,m,60,1,1,1,0,strict\n"}
    for name, row in ch_bad.items():
        case("trace-chronus", name, ("trace", "stats", "{d}/trace_job_x.csv"), "trace_job_x.csv",
             make=lambda d, row=row: (d / "trace_job_x.csv").write_text(ch_head + ch_good + row))
    case("trace-chronus", "header-only", ("trace", "stats", "{d}/trace_job_x.csv"),
         "trace_job_x.csv", make=lambda d: (d / "trace_job_x.csv").write_text(ch_head))
    case("trace-chronus", "unrecognised-file-name", ("trace", "stats", "{d}/jobs.csv"), "jobs.csv",
         make=lambda d: (d / "jobs.csv").write_text(ch_head + ch_good))


# ---- sweep specs ------------------------------------------------------------------------------
def _sweep_cases() -> None:
    base = 'setup = "small"\npolicies = ["yarn-cs"]\n'
    specs = {
        "typo-policies": ('setup = "small"\npolices = ["gfs"]\n', "polices"),
        "typo-param": (base + "[params]\nroh = 0.5\n", "roh"),
        "typo-option-table": (base + "[option]\nforecaster = \"ets\"\n", "option"),
        "reversed-window-dates": (base + 'window = ["2024-08-10", "2024-08-01"]\n', "window"),
        "reversed-window-seconds": (base + "window = [5000, 100]\n", "window"),
        "empty-window": (base + 'window = ["2024-08-01", "2024-08-01"]\n', "window"),
        "window-garbage": (base + 'window = ["soon", "later"]\n', "window"),
        "seeds-negative": (base + "seeds = [-1]\n", "seeds"),
        "seeds-text": (base + 'seeds = ["one"]\n', "seeds"),
        "loads-huge": (base + "loads = [1e6]\n", "loads"),
        "loads-unknown": (base + 'loads = ["extreme"]\n', "loads"),
        "policy-unknown": ('setup = "small"\npolicies = ["nope"]\n', "policies"),
        "setup-unknown": ('setup = "huge"\npolicies = ["gfs"]\n', "setup"),
        "setup-and-trace": (base + 'trace = "ref-toy"\n', "setup"),
        "rho-out-of-range": (base + "[params]\nrho = [0.5, 2]\n", "rho"),
        "guarantee-negative": (base + "[params]\nguarantee_classes = [[-1]]\n", "guarantee_classes"),
        "imports-missing": (base + 'imports = ["no_such_module_xyz"]\n', "imports"),
        "drain-days-huge": (base + "drain_days = 1e9\n", "drain_days"),
        "not-toml": ("policies = [\n", "spec.toml"),
        "not-a-table-yaml": ("- 1\n- 2\n", "spec.yaml"),
    }
    for name, (text, names) in specs.items():
        fname = "spec.yaml" if name.endswith("yaml") else "spec.toml"
        case("sweep-spec", name, ("sweep", f"{{d}}/{fname}", "--dry-run"), names,
             make=lambda d, text=text, fname=fname: (d / fname).write_text(text))
    for name, (text, names) in {"unknown-extension": ('setup = "small"\n', "spec.json")}.items():
        case("sweep-spec", name, ("sweep", "{d}/spec.json", "--dry-run"), names,
             make=lambda d, text=text: (d / "spec.json").write_text(text))


# ---- forecast CSVs ----------------------------------------------------------------------------
def _forecast_cases() -> None:
    files = {
        "header-only": ("ds,series,y\n", ()),
        "empty": ("", ()),
        "bad-y": ("ds,series,y\n2024-03-01 00:00,a,1\n2024-03-01 01:00,a,x\n", ("row 3",)),
        "missing-y": ("ds,series,y\n2024-03-01 00:00,a,1\n2024-03-01 01:00,a,\n", ("row 3",)),
        "inf-y": ("ds,series,y\n2024-03-01 00:00,a,inf\n", ("row 2",)),
        "bad-ds": ("ds,series,y\n2024-03-01 00:00,a,1\nyesterday,a,2\n", ("row 3",)),
        "not-whole-hour": ("ds,series,y\n2024-03-01 00:30,a,1\n", ("whole hour",)),
        "missing-series": ("ds,series,y\n2024-03-01 00:00,,1\n", ("series",)),
        "span-too-long": ("ds,series,y\n1900-01-01 00:00,a,1\n2100-01-01 00:00,a,1\n", ("ten years",)),
        "unknown-layout": ("foo,bar\n1,2\n", ("accepted",)),
        "wide-bad-cell": ("time,a,b\n2024-03-01 00:00,1,2\n2024-03-01 01:00,3,z\n", ("row 3",)),
        "wide-hour-negative": ("hour,a\n-1,3\n", ("row 2",)),
        "wide-hour-fraction": ("hour,a\n0.5,3\n", ("row 2",)),
        "binary": ("\x00\xff\x00", ()),
        "duplicate-series-ds": ("ds,series,y\n2024-03-01 00:00,a,1\n2024-03-01 01:00,a,2\n"
                                "2024-03-01 00:00,a,3\n", ("first at row 2",)),
        "wide-duplicate-time": ("hour,a\n0,1\n1,2\n0,3\n", ("first at row 2",)),
        "negative-y": ("ds,series,y\n2024-03-01 00:00,a,-1\n", ("negative value -1",)),
        "wide-negative": ("hour,a\n0,1\n1,-0.5\n", ("negative value -0.5",)),
        "absurd-y": ("ds,series,y\n2024-03-01 00:00,a,1e308\n2024-03-01 01:00,a,1e308\n",
                     ("1e+308",)),
        "mixed-zones": ("ds,series,y\n2024-03-01 00:00,a,1\n2024-03-01 01:00+00:00,a,2\n",
                        ("mixed time zones",)),
        "two-offsets": ("ds,series,y\n2024-03-01 00:00+00:00,a,1\n2024-03-01 01:00+02:00,a,2\n",
                        ("mixed time zones",)),
    }
    for name, (text, extra) in files.items():
        for cmd in (("forecast", "series", "--out", "{d}/out.csv"),
                    ("forecast", "backtest", "--out", "{d}/bt", "--models", "week-peak")):
            case("forecast-csv", f"{cmd[1]}-{name}", (*cmd, "--data", "{d}/demand.csv"),
                 "demand.csv", contains=extra[0] if extra else "",
                 make=lambda d, text=text: (d / "demand.csv").write_bytes(
                     text.encode("latin-1")))
    case("forecast-csv", "mapping-missing-column",
         ("forecast", "series", "--out", "{d}/o.csv", "--data", "{d}/demand.csv",
          "--value-col", "gpus"), "--value-col",
         make=lambda d: (d / "demand.csv").write_text("ds,series,y\n2024-03-01 00:00,a,1\n"))


# ---- numeric edge values: shown as given, refused by the same rule everywhere ---------------------
def _deep_json(d: Path) -> None:
    doc = json.loads(TINY_INSTANCE.read_text())
    nested: object = 0
    for _ in range(500):
        nested = [nested]
    doc["meta"] = {"deep": nested}
    (d / "deep.json").write_text(json.dumps(doc))


def _huge_json(d: Path) -> None:
    with open(d / "huge.json", "wb") as fh:     # sparse: no disk is used
        fh.truncate(300 * 2**20)


def _gpu_edge(d: Path) -> None:
    write_tiny_trace(d / "t")
    jobs = pd.read_csv(d / "t" / "job_info_df.csv")
    jobs["gpu_request"] = jobs["gpu_request"].astype(object)
    jobs.loc[1, "gpu_request"] = "8.0000001"
    jobs.to_csv(d / "t" / "job_info_df.csv", index=False)


def _multiline_model(d: Path) -> None:
    """A node's GPU model holding a line break (a mangled CSV): messages listing the models
    must stay one line."""
    write_tiny_trace(d / "t")
    nodes = pd.read_csv(d / "t" / "node_info_df.csv")
    nodes.loc[0, "gpu_model"] = ",1,64,a0\nA10"
    nodes.to_csv(d / "t" / "node_info_df.csv", index=False)
    jobs = pd.read_csv(d / "t" / "job_info_df.csv")
    jobs.loc[1, "gpu_model"] = "H100"
    jobs.to_csv(d / "t" / "job_info_df.csv", index=False)


def _edge_cases() -> None:
    case("numeric-edge", "node-model-with-a-line-break", ("trace", "stats", "{d}/t"),
         "gpu_model", make=_multiline_model, contains="'H100'")
    def set_gpus(value: float) -> Callable[[Path], None]:
        def make(d: Path) -> None:
            doc = json.loads(TINY_INSTANCE.read_text())
            doc["jobs"][0]["gpus_per_worker"] = value
            (d / "i.json").write_text(json.dumps(doc))
        return make

    for v, shown in ((8.0000001, "8.0000001"), (1.5, "1.5"), (2.000000000001, "2.000000000001")):
        case("numeric-edge", f"instance-gpus-per-worker-{shown}", ("solve", "{d}/i.json"),
             "gpus_per_worker", make=set_gpus(v), contains=shown)
    case("numeric-edge", "trace-gpu-request-8.0000001", ("trace", "stats", "{d}/t"),
         "gpu_request", make=_gpu_edge, contains="8.0000001")
    case("numeric-edge", "instance-nested-500-deep", ("solve", "{d}/deep.json"), "deep.json",
         make=_deep_json, contains="nested 502 levels deep")
    case("numeric-edge", "instance-300-mb", ("solve", "{d}/huge.json"),
         "huge.json", make=_huge_json, contains="limited to 256 MB")
    for window, why in ((("-86400", "90000"), "-86400"), (("2024-03-02", "1e400"), "1e400"),
                        (("nan", "90000"), "nan"), (("0", "inf"), "inf")):
        for cmd in ("simulate", "compare"):
            case("numeric-edge", f"{cmd}-window-{'_'.join(window)}",
                 (cmd, "--window", *window), "--window", contains=why)
    case("numeric-edge", "simulate-window-before-the-trace",
         ("simulate", "--trace", "{d}/toy", "--policy", "yarn-cs", "--no-progress", "--window",
          "2023-03-01", "2024-03-02"), "2023-03-01", make=_toy, contains="before the start")
    case("numeric-edge", "simulate-replay-from-negative", ("simulate", "--replay-from", "-5"),
         "--replay-from")
    big = ('setup = "small"\npolicies = ["yarn-cs", "fgd"]\nseeds = ['
           + ", ".join(map(str, range(1010))) + "]\nloads = [0.5, 1, 1.5, 2, 3, 4, 5, 6, 7, 8]\n")
    case("numeric-edge", "sweep-grid-too-large", ("sweep", "{d}/spec.toml", "--dry-run"),
         "spec.toml", make=lambda d: (d / "spec.toml").write_text(big), contains="20,200 cells")
    case("numeric-edge", "sweep-grid-above-max-cells",
         ("sweep", "{d}/spec.toml", "--dry-run", "--max-cells", "3"), "spec.toml",
         make=lambda d: (d / "spec.toml").write_text(
             'setup = "small"\npolicies = ["yarn-cs", "fgd"]\nseeds = [0, 1]\n'),
         contains="4 cells, more than the limit of 3")
    for v in ("0", "-1", "1.5", "inf"):
        case("numeric-edge", f"sweep-max-cells-{v}",
             ("sweep", "{d}/spec.toml", "--max-cells", v), "--max-cells", make=_afile_and_spec)


_flag_cases()
_edge_cases()
_instance_cases()
_trace_cases()
_sweep_cases()
_forecast_cases()


def test_corpus_size() -> None:
    counts = Counter(c.surface for c in CASES)
    print("fuzz corpus per surface:", dict(counts), "total", len(CASES))
    assert len(CASES) >= 200
    assert len({(c.surface, c.id) for c in CASES}) == len(CASES), "case ids must be unique"
    assert {"cli-flags", "instance-json", "trace-alibaba", "trace-openb", "trace-chronus",
            "sweep-spec", "forecast-csv", "numeric-edge"} <= set(counts)


@pytest.mark.parametrize("c", CASES, ids=[f"{c.surface}:{c.id}" for c in CASES])
def test_bad_input_is_one_named_line(c: Case, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if c.make is not None:
        c.make(tmp_path)
    argv = [a.replace("{d}", str(tmp_path)) for a in c.argv]
    code, _out, err = run_cli(*argv)
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("gfs-opt: error: "), err
    assert c.names.replace("{d}", str(tmp_path)) in lines[0], (c.names, lines[0])
    assert c.contains in lines[0], (c.contains, lines[0])


# ---- output errors: a full device, a closed pipe, a read-only folder ---------------------------
# Every command that writes (standard output included) ends with exit 2 and one line naming what
# it could not write. Standard output is replaced in-process by /dev/full or by a pipe whose
# reader has gone; a read-only folder is a read-only tmpfs (root) or a 0555 folder (others).
def _spec(d: Path) -> None:
    write_tiny_trace(d / "trace", n=4)
    (d / "spec.toml").write_text('trace = "trace"\nwindow = ["2024-03-01", "2024-03-02"]\n'
                                 'policies = ["yarn-cs"]\ndrain_days = 0.5\n')


TINY_SIM = ("--trace", "{d}/trace", "--window", "2024-03-01", "2024-03-02", "--policy", "yarn-cs",
            "--no-progress")
#: (id, argv, make): commands whose standard output is checked
STDOUT_COMMANDS: list[tuple[str, tuple[str, ...], Callable[[Path], None] | None]] = [
    ("help", ("--help",), None),
    ("trace-stats", ("trace", "stats", "small"), None),
    ("data-list", ("data", "list"), None),
    ("instance-schema", ("instance", "schema"), None),
    ("instance-show", ("instance", "show", str(TINY_INSTANCE)), None),
    ("instance-validate", ("instance", "validate", str(TINY_INSTANCE)), None),
    ("solve", ("solve", str(TINY_INSTANCE)), None),
    ("solve-json", ("solve", str(TINY_INSTANCE), "--json"), None),
    ("simulate", ("simulate", *TINY_SIM), lambda d: write_tiny_trace(d / "trace", n=4)),
    ("simulate-json", ("simulate", *TINY_SIM, "--json"),
     lambda d: write_tiny_trace(d / "trace", n=4)),
    ("compare", ("compare", *TINY_SIM[:5], "--policies", "yarn-cs", "--workers", "1",
                 "--no-progress"), lambda d: write_tiny_trace(d / "trace", n=4)),
    ("sweep-dry-run", ("sweep", "{d}/spec.toml", "--dry-run"), _spec),
    ("sweep", ("sweep", "{d}/spec.toml", "--workers", "1", "--no-progress", "--out", "{d}/sw"),
     _spec),
    ("forecast-series", ("forecast", "series", "--data", "{d}/demand.csv", "--out", "{d}/o.csv"),
     lambda d: (d / "demand.csv").write_text("ds,series,y\n2024-03-01 00:00,a,1\n")),
    ("reproduce-help", ("reproduce", "--help"), None),
    ("slurm-help", ("slurm", "--help"), None),
]


@contextlib.contextmanager
def _stdout_to(where: str) -> Iterator[None]:
    if where == "full":
        stream = open("/dev/full", "w")  # noqa: SIM115
    else:
        r, w = os.pipe()
        os.close(r)                                  # the reader is gone
        stream = os.fdopen(w, "w")
    try:
        with contextlib.redirect_stdout(stream):
            yield
    finally:
        with contextlib.suppress(OSError):
            stream.close()


def _one_error_line(code: int, err: str, names: str) -> None:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("gfs-opt: warning")]
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("gfs-opt: error: cannot write"), err
    assert names in lines[0], (names, lines[0])


@pytest.mark.slow      # one process per command: .ci/run's interruption step runs them
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("where", ["full", "closed-pipe"])
@pytest.mark.parametrize("cid,argv,make", STDOUT_COMMANDS, ids=[c[0] for c in STDOUT_COMMANDS])
def test_stdout_that_cannot_be_written_is_one_line(
        cid: str, argv: tuple[str, ...], make: Callable[[Path], None] | None, where: str,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if make is not None:
        make(tmp_path)
    err = io.StringIO()
    with _stdout_to(where), contextlib.redirect_stderr(err), alarm(CALL_LIMIT_S):
        code = main([a.replace("{d}", str(tmp_path)) for a in argv])
    _one_error_line(code, err.getvalue(), "standard output")


#: (id, argv, make, what the message names): commands writing a file given by --out
FILE_COMMANDS = [
    ("forecast-series-dev-full", ("forecast", "series", "--data", "{d}/demand.csv", "--out",
                                  "/dev/full"),
     lambda d: (d / "demand.csv").write_text("ds,series,y\n2024-03-01 00:00,a,1\n"), "/dev/full"),
    ("solve-export-dev-full", ("solve", str(TINY_INSTANCE), "--export", "lp", "--out",
                               "/dev/full"), None, "/dev/full"),
]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("cid,argv,make,names", FILE_COMMANDS, ids=[c[0] for c in FILE_COMMANDS])
def test_file_on_a_full_device_is_one_line(cid: str, argv: tuple[str, ...],
                                           make: Callable[[Path], None] | None, names: str,
                                           tmp_path: Path) -> None:
    if make is not None:
        make(tmp_path)
    code, _out, err = run_cli(*(a.replace("{d}", str(tmp_path)) for a in argv))
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("gfs-opt: error: "), err
    assert names in lines[0] and "No space left" in lines[0], lines[0]


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder no one can write into: a read-only tmpfs as root, a 0555 folder otherwise."""
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0:
        ro.chmod(0o555)
        yield ro
        ro.chmod(0o755)
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "gfs-opt-ro", str(ro)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here")
    try:
        yield ro
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


READ_ONLY_COMMANDS = [
    ("simulate", ("simulate", "--out", "{ro}/o")),
    ("compare", ("compare", "--out", "{ro}/o")),
    ("sweep", ("sweep", "{d}/spec.toml", "--out", "{ro}/o")),
    ("instance-dump", ("instance", "dump", "--out", "{ro}/o")),
    ("trace-synth", ("trace", "synth", "--out", "{ro}/o")),
    ("forecast-backtest", ("forecast", "backtest", "--data", "alibaba-hourly", "--out", "{ro}/o")),
    ("forecast-series", ("forecast", "series", "--data", "alibaba-hourly", "--out", "{ro}/o.csv")),
    ("solve-export", ("solve", str(TINY_INSTANCE), "--export", "lp", "--out", "{ro}/o.lp")),
    ("reproduce", ("reproduce", "--quick", "--out", "{ro}/o")),
    ("data-fetch", ("data", "fetch", "alibaba-v2026", "--dest", "{ro}/o")),
]


@pytest.mark.slow
@pytest.mark.parametrize("cid,argv", READ_ONLY_COMMANDS, ids=[c[0] for c in READ_ONLY_COMMANDS])
def test_read_only_folder_is_one_line(cid: str, argv: tuple[str, ...], read_only: Path,
                                      tmp_path: Path) -> None:
    _afile_and_spec(tmp_path)
    args = [a.replace("{ro}", str(read_only)).replace("{d}", str(tmp_path)) for a in argv]
    code, _out, err = run_cli(*args)
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("gfs-opt: error: "), err
    assert str(read_only) in lines[0] and ("Read-only" in lines[0] or "ermission" in lines[0]), \
        lines[0]
