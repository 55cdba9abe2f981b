"""Simulator benchmarks (issue 3 targets). Prints wall time, events/s, peak RSS and ratios.

    python benchmarks/bench_sim.py --only toy          # ref-toy through yarn-cs and gfs
    python benchmarks/bench_sim.py --only a100         # paper-a100 medium load, 5 policies
    python benchmarks/bench_sim.py --only full         # full-scale synthetic trace, gfs

Each suite runs in a fresh process so that peak RSS belongs to that suite. Ratios are against a
baseline measured in the same run (yarn-cs), and, for the toy trace, against the authors' public
simulator's published wall time on this kind of machine (≈ 1,000 s; GFS-SPEC data README).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

AUTHORS_TOY_S = {"gfs": 1034.0, "yarn-cs": 981.0}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def one(setup: str, policy: str, forecaster: str | None, load: float) -> dict:
    from gfs_opt.experiments.runner import RunSpec, prepare_trace, run

    kw = {"policy": policy, "lp_load": load}
    if forecaster and policy.startswith("gfs"):
        kw["policy_options"] = {"forecaster": forecaster}
    if setup == "toy":
        spec = RunSpec(trace="ref-toy", window=("2024-03-11", "2024-03-13"), **kw)
    else:
        spec = RunSpec.from_setup(setup, **kw)
    t0 = time.perf_counter()
    prepared = prepare_trace(spec)
    t_load = time.perf_counter() - t0
    out = run(spec, trace=prepared)
    s = out.summary
    return {"setup": setup, "policy": policy, "forecaster": forecaster, "load_s": t_load,
            "sim_s": out.wall_s, "events": out.events, "events_per_s": s["events_per_s"],
            "jobs": len(prepared[0].jobs), "rss_mb": rss_mb(),
            "lp_eviction_rate": s["lp_eviction_rate"], "lp_jqt_mean": s["lp_jqt_mean"],
            "hp_jqt_mean": s["hp_jqt_mean"], "allocation_rate": s["allocation_rate"]}


def child(args: list[str]) -> dict:
    cmd = [sys.executable, __file__, "--child", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"benchmark child failed: {' '.join(args)}\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="toy,a100", help="toy, a100, full (comma-separated)")
    ap.add_argument("--forecaster", default=None, help="GFS forecaster (default: the policy's)")
    ap.add_argument("--child", nargs=4, metavar=("SETUP", "POLICY", "FORECASTER", "LOAD"))
    a = ap.parse_args()
    if a.child:
        setup, policy, fc, load = a.child
        print(json.dumps(one(setup, policy, None if fc == "-" else fc, float(load))))
        return
    fc = a.forecaster or "-"
    rows = []
    suites = a.only.split(",")
    if "toy" in suites:
        for pol in ("yarn-cs", "gfs"):
            rows.append(child(["toy", pol, fc, "1"]))
    if "a100" in suites:
        for pol in ("yarn-cs", "gfs", "chronus", "lyra", "fgd"):
            rows.append(child(["paper-a100", pol, fc, "1"]))
    if "full" in suites:
        for pol in ("yarn-cs", "gfs"):
            rows.append(child(["full", pol, fc, "1"]))
    base = {(r["setup"]): r["sim_s"] for r in rows if r["policy"] == "yarn-cs"}
    print(f"{'setup':<11}{'policy':<9}{'jobs':>9}{'load s':>8}{'sim s':>9}{'events/s':>11}"
          f"{'RSS MB':>9}{'vs yarn-cs':>11}{'vs authors':>11}")
    for r in rows:
        ratio = r["sim_s"] / base[r["setup"]] if r["setup"] in base else float("nan")
        auth = (f"{AUTHORS_TOY_S[r['policy']] / (r['sim_s'] + r['load_s']):>10.0f}x"
                if r["setup"] == "toy" else f"{'':>11}")
        print(f"{r['setup']:<11}{r['policy']:<9}{r['jobs']:>9,}{r['load_s']:>8.1f}{r['sim_s']:>9.1f}"
              f"{r['events_per_s']:>11,.0f}{r['rss_mb']:>9.0f}{ratio:>10.2f}x{auth}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
