"""Simulator benchmarks: CPU time, wall time, events/s, peak RSS, ratios.

    python benchmarks/bench_sim.py --only toy            # ref-toy: yarn-cs, gfs
    python benchmarks/bench_sim.py --only a100           # paper-a100 medium load, 5 policies
    python benchmarks/bench_sim.py --only small,a100 --policies all    # every policy
    python benchmarks/bench_sim.py --only full           # full-scale synthetic trace
    python benchmarks/bench_sim.py --only scale          # full trace ×¼, ×½, ×1 (replay length)
    python benchmarks/bench_sim.py --only chronus        # Chronus trace, half of its nodes
    python benchmarks/bench_sim.py --only chronus-backlog --policies all   # a quarter: HP queues
    python benchmarks/bench_sim.py --only chronus-backlog --capacities 0.2,0.3   # other depths
    python benchmarks/bench_sim.py --only a100 --before /tmp/gfs-main   # + old code, same run
    python benchmarks/bench_sim.py --only toy,small --repeat 5   # least CPU of 5 interleaved runs
    python benchmarks/bench_sim.py --only toy,full --policies yarn-cs --repeat 3   # events/CPU-s

Each case runs in a fresh process, so peak RSS and CPU time (``resource.getrusage``, self +
children: Prophet's Stan fits run as child processes) belong to that case; CPU covers loading
the trace and simulating. Ratios are CPU time against yarn-cs measured on the same setup in the
same run (the machine is shared: CPU time is the number to compare; wall time is shown too),
events per second of the replay's wall time and of its CPU time (``ev/CPU-s``: the event loop's
own process time, steadier than wall time on a shared machine),
and, for the toy trace, the authors' simulator's published wall time (≈ 1,000 s; GFS-SPEC data
README) against ours. ``--before DIR`` runs every case a second time on the code in DIR (e.g.
``git archive main | tar -x -C DIR``) and adds the CPU ratio new/old. A second table counts
gfs-milp's exact steps: solves, solves per CPU-second and how each was answered.

Setups: ``toy`` = ref-toy 2024-03-11..12; ``small``, ``a100`` (paper-a100) and ``full`` are the
named setups at medium load; ``scale`` replays the last ¼, ½ and all of the full trace's March–
August (August scored); ``chronus`` = the Chronus Philly trace ($GFS_DATA_DIR/chronus-philly-slo)
stretched ×24 in time at LP load 4 (the slow case of the speed work) on half of its nodes, so that HP jobs
queue too (the "long HP backlog" case).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

AUTHORS_TOY_S = {"gfs": 1034.0, "yarn-cs": 981.0}
A100 = ("yarn-cs", "gfs", "chronus", "lyra", "fgd")
#: replay start per fraction of the full trace (March 1 .. August 31; August is scored)
SCALE_FROM = {0.25: "2024-07-16", 0.5: "2024-06-01", 1.0: None}
CHRONUS_FILE = "chronus-philly-slo/trace_job_Philly_MIX1.csv"
CHRONUS_BACKLOG_CAPACITY = 0.25


def cpu_s() -> float:
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def spec_for(case: str, policy: str, forecaster: str | None) -> Any:
    from gfs_opt.experiments.runner import RunSpec

    kw: dict[str, Any] = {"policy": policy}
    if forecaster and policy.startswith("gfs"):
        kw["policy_options"] = {"forecaster": forecaster}
    if case == "toy":
        return RunSpec(trace="ref-toy", window=("2024-03-11", "2024-03-13"), **kw)
    if case.startswith("full@"):
        frac = float(case.split("@")[1])
        return RunSpec.from_setup("full", replay_from=SCALE_FROM[frac], **kw)
    if case.split("@")[0] == "chronus":
        from gfs_opt.paths import data_dir

        data = data_dir()
        capacity = float(case.split("@")[1]) if "@" in case else 0.5
        return RunSpec(trace=str(data / CHRONUS_FILE), time_scale=24.0, lp_load=4.0,
                       capacity_scale=capacity, **kw)
    return RunSpec.from_setup("paper-a100" if case == "a100" else case, **kw)


def register_variant(forecaster: str) -> None:
    """``name:key=value,...`` (e.g. ``prophet:refit_days=4``) → a forecaster registered under that
    name for this process, so that a cost option can be benchmarked without a new model name."""
    if ":" not in forecaster:
        return
    from functools import partial

    from gfs_opt.forecast.registry import MODELS

    name, _, raw = forecaster.partition(":")
    params = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in raw.split(","))}
    base = MODELS[name]
    MODELS[forecaster] = lambda: partial(base(), **params)  # type: ignore[assignment, return-value]


def one(case: str, policy: str, forecaster: str | None) -> dict[str, Any]:
    import gfs_opt.experiments.runner as runner
    from gfs_opt.experiments.runner import prepare_trace, run

    if forecaster:
        register_variant(forecaster)
    # the policy object, for gfs-milp's counts of how its exact steps were answered
    made: list[Any] = []
    make = runner.make_policy
    runner.make_policy = lambda *a, **k: made.append(make(*a, **k)) or made[-1]  # type: ignore[assignment]
    c0, w0 = cpu_s(), time.perf_counter()
    spec = spec_for(case, policy, forecaster)
    prepared = prepare_trace(spec)
    t_load = time.perf_counter() - w0
    out = run(spec, trace=prepared)
    runner.make_policy = make  # type: ignore[assignment]
    s = out.summary
    routes = dict(getattr(made[0], "preempt_routes", {})) if made else {}
    return {"case": case, "policy": policy, "forecaster": forecaster, "load_s": t_load,
            "sim_s": out.wall_s, "wall_s": time.perf_counter() - w0, "cpu_s": cpu_s() - c0,
            "events": out.events, "events_per_s": s["events_per_s"],
            # the event loop's own CPU time (older code without it: nan)
            "sim_cpu_s": s.get("cpu_s", float("nan")),
            "jobs": len(prepared[0].jobs), "rss_mb": rss_mb(),
            "lp_eviction_rate": s["lp_eviction_rate"], "lp_jqt_mean": s["lp_jqt_mean"],
            "hp_jqt_mean": s["hp_jqt_mean"], "allocation_rate": s["allocation_rate"],
            # gfs-milp: preemption steps by how each phase was answered ("bound/cover": the
            # greedy placed every gang and phase 2 was a cover with one answer; "…/solved": SCIP)
            "milp_solves": s.get("milp_solves", 0), "preempt_routes": routes}


def child(args: list[str], code: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    # a case measures its own fits: no Prophet fit from an earlier run or case is reused
    env.setdefault("GFS_FIT_CACHE", "off")
    if code is not None:
        env["PYTHONPATH"] = code
    cmd = [sys.executable, __file__, "--child", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if res.returncode != 0:
        raise SystemExit(f"benchmark child failed: {' '.join(args)} (code {code})\n"
                         f"{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def plan(suites: list[str], policies: str | None,
         fractions: tuple[float, ...] = tuple(SCALE_FROM),
         capacities: tuple[float, ...] = (CHRONUS_BACKLOG_CAPACITY,)) -> list[tuple[str, str]]:
    from gfs_opt.policies import POLICIES

    def pick(default: tuple[str, ...]) -> tuple[str, ...]:
        if policies is None:
            return default
        chosen = tuple(POLICIES) if policies == "all" else tuple(policies.split(","))
        return ("yarn-cs", *[p for p in chosen if p != "yarn-cs"])

    out: list[tuple[str, str]] = []
    for suite in suites:
        if suite == "scale":
            out += [(f"full@{f:g}", p) for f in fractions for p in pick(("yarn-cs", "gfs"))]
        elif suite in ("a100", "small"):
            out += [(suite, p) for p in pick(A100 if suite == "a100" else ("yarn-cs", "gfs"))]
        elif suite in ("toy", "full", "chronus"):
            out += [(suite, p) for p in pick(("yarn-cs", "gfs"))]
        elif suite == "chronus-backlog":   # a quarter of the nodes: HP jobs queue for hours
            out += [(f"chronus@{c:g}", p) for c in capacities for p in pick(("yarn-cs", "gfs"))]
        else:
            raise SystemExit(f"unknown suite {suite!r}: toy, small, a100, full, scale, chronus, "
                             "chronus-backlog")
    return out


def table(rows: list[dict[str, Any]], title: str) -> None:
    base = {r["case"]: r["cpu_s"] for r in rows if r["policy"] == "yarn-cs"}
    # with --repeat, the ratio of medians too: least-of-N favours whichever case had a lucky run
    runs = {r["case"]: r.get("cpu_runs", [r["cpu_s"]]) for r in rows if r["policy"] == "yarn-cs"}
    repeated = any(len(r.get("cpu_runs", ())) > 1 for r in rows)
    print(title)
    print(f"{'case':<14}{'policy':<18}{'jobs':>9}{'events':>11}{'CPU s':>9}{'wall s':>9}"
          f"{'events/s':>10}{'ev/CPU-s':>10}{'RSS MB':>8}{'CPU/yarn':>9}{'old CPU':>9}{'new/old':>8}"
          f"{'vs authors':>11}" + (f"{'median/yarn':>12}" if repeated else ""))
    for r in rows:
        ratio = r["cpu_s"] / base[r["case"]] if r["case"] in base else float("nan")
        med = (f"{statistics.median(r['cpu_runs']) / statistics.median(runs[r['case']]):>11.2f}x"
               if repeated and r["case"] in runs and r.get("cpu_runs") else "")
        old = r.get("old")
        old_s = f"{old['cpu_s']:>9.1f}{r['cpu_s'] / old['cpu_s']:>7.2f}x" if old else " " * 17
        auth = (f"{AUTHORS_TOY_S[r['policy']] / r['wall_s']:>10.0f}x"
                if r["case"] == "toy" and r["policy"] in AUTHORS_TOY_S else "")
        print(f"{r['case']:<14}{r['policy']:<18}{r['jobs']:>9,}{r['events']:>11,}{r['cpu_s']:>9.1f}"
              f"{r['wall_s']:>9.1f}{r['events'] / max(r['sim_s'], 1e-9):>10,.0f}"
              f"{r['events'] / max(r.get('sim_cpu_s', math.nan), 1e-9):>10,.0f}{r['rss_mb']:>8.0f}"
              f"{ratio:>8.2f}x{old_s}{auth:>11}{med}")


def routes_table(rows: list[dict[str, Any]]) -> None:
    """gfs-milp's exact steps: how many, per CPU-second of the case, and how they were answered
    (``no SCIP``: neither phase needed it — the greedy's bound, a certificate or a cover)."""
    exact = [r for r in rows if r.get("preempt_routes")]
    if not exact:
        return
    print(f"{'case':<14}{'policy':<18}{'solves':>8}{'solves/CPU-s':>13}{'no SCIP':>9}  routes")
    for r in exact:
        routes = r["preempt_routes"]
        n = sum(routes.values())
        free = sum(c for k, c in routes.items() if "solved" not in k)
        print(f"{r['case']:<14}{r['policy']:<18}{n:>8,}{n / max(r['cpu_s'], 1e-9):>13.1f}"
              f"{free / max(n, 1):>8.1%}  "
              + ", ".join(f"{k} {c}" for k, c in sorted(routes.items(), key=lambda kv: -kv[1])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="toy,a100",
                    help="toy, small, a100, full, scale, chronus, chronus-backlog (comma-separated)")
    ap.add_argument("--policies", default=None,
                    help="comma-separated policies, or 'all' (yarn-cs always runs first)")
    ap.add_argument("--forecaster", default=None,
                    help="GFS forecaster (default: the policy's); name:key=value,... sets options "
                         "of the model, e.g. prophet:refit_days=4")
    ap.add_argument("--fractions", default="0.25,0.5,1",
                    help="fractions of the full trace for --only scale (of 0.25, 0.5, 1)")
    ap.add_argument("--capacities", default=f"{CHRONUS_BACKLOG_CAPACITY:g}",
                    help="fractions of the Chronus trace's nodes for --only chronus-backlog "
                         "(fewer nodes, longer HP queues), e.g. 0.2,0.25,0.3")
    ap.add_argument("--before", default=None, metavar="DIR",
                    help="also run every case on the code in DIR (PYTHONPATH) in the same run")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run the whole plan N times, interleaved, and keep each case's run "
                         "with the least CPU (all CPU times listed in the JSON as cpu_runs): "
                         "short runs vary by ±30 %% on a shared machine")
    ap.add_argument("--json", type=Path, default=None, help="write the rows as JSON")
    ap.add_argument("--child", nargs=3, metavar=("CASE", "POLICY", "FORECASTER"))
    a = ap.parse_args()
    if a.child:
        case, policy, fc = a.child
        print(json.dumps(one(case, policy, None if fc == "-" else fc)))
        return
    fc = a.forecaster or "-"
    fractions = tuple(float(f) for f in a.fractions.split(","))
    if any(f not in SCALE_FROM for f in fractions):
        raise SystemExit(f"--fractions: choose from {', '.join(f'{f:g}' for f in SCALE_FROM)}")
    if a.repeat < 1:
        raise SystemExit("--repeat must be at least 1")
    try:
        capacities = tuple(float(c) for c in a.capacities.split(","))
    except ValueError:
        raise SystemExit(f"--capacities: numbers in (0, 1], got {a.capacities!r}") from None
    if not all(0 < c <= 1 for c in capacities):
        raise SystemExit(f"--capacities: numbers in (0, 1], got {a.capacities!r}")
    cases = plan(a.only.split(","), a.policies, fractions, capacities)
    done: dict[tuple[str, str], list[dict[str, Any]]] = {c: [] for c in cases}
    for _ in range(a.repeat):
        for case, policy in cases:
            row = child([case, policy, fc])
            if a.before:
                row["old"] = child([case, policy, fc], code=a.before)
            done[(case, policy)].append(row)
            print(f"  {case} {policy}: {row['cpu_s']:.1f} s CPU, {row['wall_s']:.1f} s wall"
                  + (f" (old {row['old']['cpu_s']:.1f} s CPU)" if a.before else ""), flush=True)
    rows = []
    for c in cases:
        row = dict(min(done[c], key=lambda r: r["cpu_s"]))
        row["cpu_runs"] = [r["cpu_s"] for r in done[c]]
        if a.before:
            row["old"] = min((r["old"] for r in done[c]), key=lambda r: r["cpu_s"])
            row["old_cpu_runs"] = [r["old"]["cpu_s"] for r in done[c]]
        rows.append(row)
    table(rows, f"forecaster: {a.forecaster or 'policy default'}; CPU = getrusage self+children"
          + (f"; least of {a.repeat} runs" if a.repeat > 1 else ""))
    routes_table(rows)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
