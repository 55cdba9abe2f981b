"""Greedy vs exact, per instance: size, greedy objective/time, MILP objective/bound/gap/time.

    python benchmarks/bench_milp.py [FILES…] [--solver scip] [--time-limit 10] [--presolve fast]
                                    [--markdown] [--brief]

Without FILES, every instances/*.json. Greedy times are the best of ``--repeat`` runs (the
greedy takes milliseconds, so one run is noise); MILP times are one run, including model
building, the greedy warm start and both lexicographic phases. Ratios printed at the end:
how often the MILP proved optimality within the limit, and the greedy's mean gap.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gfs_opt.instance import load_round
from gfs_opt.instance.milp_gap import PTS_POLICY
from gfs_opt.instance.solve_round import run_greedy_preempt, run_greedy_quota
from gfs_opt.model import JobClass, Round
from gfs_opt.preempt.milp import solve_preemption
from gfs_opt.quota.milp import solve_quota
from gfs_opt.solve import PRESOLVE, SolverOptions

#: P in milli-GPU (as instance files' meta.optimum and `gfs-opt solve`), C in GPU·s
COLUMNS = ["instance", "nodes", "GPUs", "run LP", "pend HP", "pend LP",
           "greedy P", "greedy C", "greedy ms", "greedy ok",
           "MILP P", "P bound", "MILP C", "C bound", "C gap", "MILP s", "status",
           "P gap greedy", "C excess greedy",
           "quota greedy", "quota MILP", "quota gap", "quota s"]
#: ``--brief``: the columns of the per-instance gap table in BENCHMARKS.md
BRIEF = ["instance", "nodes", "GPUs", "run LP", "pend HP", "pend LP", "greedy ms", "MILP s",
         "status", "C gap", "P gap greedy", "C excess greedy", "quota gap", "quota s"]


def _best_time(fn, repeat: int) -> tuple[object, float]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def bench_one(path: Path, solver: SolverOptions, repeat: int) -> dict[str, object]:
    rnd: Round = load_round(path)
    # the paper's PTS answers the MILP's question (place every HP gang now); GFS's own HP gangs
    # may wait for LP window boundaries instead, which the MILP does not model
    g, g_t = _best_time(lambda: run_greedy_preempt(rnd, policy=PTS_POLICY), repeat)
    res = solve_preemption(rnd, solver=solver, greedy=g.decision)  # type: ignore[attr-defined]
    qg = run_greedy_quota(rnd, policy=PTS_POLICY)
    q = solve_quota(rnd, solver=solver, greedy=qg.admitted)
    rep = res.decision.reports[-1]
    gs, ms = g.score, res.score  # type: ignore[attr-defined]
    # a greedy answer that breaks a rule (hard_guarantee) has no gap, however much it places
    p_gap: float | str = ((ms.placed - gs.placed) / ms.placed if ms.placed else 0.0) \
        if not g.problems else "greedy infeasible"  # type: ignore[attr-defined]
    c_exc = None
    if gs.placed == ms.placed:
        c_exc = (gs.eviction_cost - ms.eviction_cost) / ms.eviction_cost if ms.eviction_cost else 0.0
    p2 = res.phase2
    n_lp = sum(1 for r in rnd.running.values() if r.job.cls is JobClass.LP)
    return {
        "instance": path.stem, "nodes": rnd.state.n_nodes, "GPUs": rnd.state.n_gpus,
        "run LP": n_lp, "pend HP": len(rnd.pending_hp), "pend LP": len(rnd.pending_lp),
        "greedy P": gs.placed, "greedy C": gs.eviction_cost, "greedy ms": 1000 * g_t,
        "greedy ok": "yes" if not g.problems else "NO",  # type: ignore[attr-defined]
        "MILP P": ms.placed,
        "P bound": None if res.phase1 is None or res.phase1.bound is None else res.phase1.bound,
        "MILP C": ms.eviction_cost, "C bound": None if p2 is None else p2.bound,
        "C gap": None if p2 is None else p2.gap, "MILP s": rep.time_s,
        "status": rep.status + (" (fallback)" if rep.fallback else "") + (" top-K" if res.restricted else ""),
        "P gap greedy": p_gap, "C excess greedy": c_exc,
        "quota greedy": qg.value, "quota MILP": q.value,
        "quota gap": (q.value - qg.value) / q.value if q.value else 0.0, "quota s": q.report.time_s,
    }


def _fmt(key: str, v: object) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if key in ("C gap", "P gap greedy", "C excess greedy", "quota gap"):
            return f"{100 * v:.2f} %"
        if key in ("MILP s", "quota s"):
            return f"{v:.2f}"
        if key == "greedy ms":
            return f"{v:.1f}"
        return f"{v:,.1f}"
    return str(v)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--solver", default="scip")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--presolve", choices=list(PRESOLVE), default=SolverOptions().presolve,
                    help="SCIP's presolve effort (default: the code's, fast)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--brief", action="store_true", help="only the gap-table columns")
    args = ap.parse_args(argv)
    files = args.files or sorted(Path("instances").glob("*.json"))
    solver = SolverOptions(solver=args.solver, time_limit=args.time_limit, presolve=args.presolve)
    columns = BRIEF if args.brief else COLUMNS
    rows = []
    for path in files:
        row = bench_one(path, solver, args.repeat)
        rows.append(row)
        if not args.markdown:
            print("  ".join(f"{k}={_fmt(k, row[k])}" for k in columns), flush=True)
    if args.markdown:
        print("| " + " | ".join(columns) + " |")
        print("|" + "|".join("---" for _ in columns) + "|")
        for row in rows:
            print("| " + " | ".join(_fmt(k, row[k]) for k in columns) + " |")
    valid = [r for r in rows if r["greedy ok"] == "yes"]
    optimal = sum(1 for r in rows if str(r["status"]).startswith("optimal"))
    within = sum(1 for r in rows if str(r["status"]).startswith("optimal") and float(r["MILP s"]) <= 10)  # type: ignore[arg-type]
    print(f"\n{optimal}/{len(rows)} proven optimal ({within} within 10 s); "
          f"greedy mean P gap {100 * sum(float(r['P gap greedy']) for r in valid) / max(len(valid), 1):.2f} % "  # type: ignore[arg-type]
          f"over {len(valid)} rounds where the greedy is feasible; "
          f"max greedy time {max(float(r['greedy ms']) for r in rows):.1f} ms", file=sys.stderr)  # type: ignore[arg-type]
    excess = [float(r["C excess greedy"]) for r in valid if r["C excess greedy"] is not None]  # type: ignore[arg-type]
    quota = [float(r["quota gap"]) for r in rows]  # type: ignore[arg-type]
    if excess:
        print(f"greedy eviction cost above the MILP's (same P): mean {100 * sum(excess) / len(excess):.1f} %, "
              f"max {100 * max(excess):.1f} % over {len(excess)} rounds; greedy admission value below "
              f"the MILP's: mean {100 * sum(quota) / len(quota):.1f} %, max {100 * max(quota):.1f} %",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
