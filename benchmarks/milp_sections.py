"""Where gfs-milp's exact HP step spends its time in a replay: process time per call.

    python benchmarks/milp_sections.py toy               # ref-toy, 278 contested passes
    python benchmarks/milp_sections.py chronus@0.25      # the long HP backlog
    python benchmarks/milp_sections.py full@0.25         # the full trace's last quarter
    python benchmarks/milp_sections.py chronus@0.25 --certify-max-vars 1000   # a cost option
    python benchmarks/milp_sections.py chronus@0.25 --phase2-solver cpsat      # another

Cases are `bench_sim.py`'s. Each listed function is timed with ``time.process_time`` around its
calls (nested ones count in both: the rows do not add up); the checks and the greedy warm start
are counted only inside the MILP step, state copies everywhere. The wrappers add a few percent.
The steps are then split by how each phase was answered: ``bound`` (phase 1 known from the
greedy placing every gang), ``certified`` (the warm start proven optimal by CP-SAT), ``solved``
(SCIP), ``none`` (no phase 2).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import spec_for

TOTAL: collections.Counter[str] = collections.Counter()
CALLS: collections.Counter[str] = collections.Counter()
INSIDE = [False]
ROUTES: collections.defaultdict[tuple[str, str], list[float]] = collections.defaultdict(
    lambda: [0, 0.0, 0.0])


def route(outcome: Any) -> str:
    if outcome is None:
        return "none"
    if outcome.detail.startswith("warm start"):
        return "certified"
    return "bound" if outcome.time_s == 0.0 and outcome.status == "optimal" else "solved"


def timed(owner: Any, name: str, label: str, only_inside: bool = True) -> None:
    f: Callable[..., Any] | None = getattr(owner, name, None)
    if f is None:   # older code (e.g. under --before) may lack a part
        return

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if only_inside and not INSIDE[0]:
            return f(*args, **kwargs)
        t = time.process_time()
        try:
            return f(*args, **kwargs)
        finally:
            TOTAL[label] += time.process_time() - t
            CALLS[label] += 1

    setattr(owner, name, wrapper)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("--certify-max-vars", type=int, default=None,
                    help="try CP-SAT's certificate on models up to this size (default: the code's)")
    ap.add_argument("--phase2-solver", default=None,
                    help="solve phase 2 (minimum eviction cost) with this back-end instead, e.g. "
                         "cpsat: a cost option whose ties may break differently")
    a = ap.parse_args()
    import gfs_opt.policies.gfs_milp as policy
    import gfs_opt.preempt.milp as milp
    from gfs_opt.experiments.runner import prepare_trace, run
    from gfs_opt.model import ClusterState

    if a.certify_max_vars is not None:
        milp.CERTIFY_MAX_VARS = a.certify_max_vars
    if a.phase2_solver is not None:
        from dataclasses import replace

        solve = milp.run_solver

        def phase2_by(model: Any, opts: Any, **kw: Any) -> Any:
            if not model.objective.is_maximize:
                opts = replace(opts, solver=a.phase2_solver)
            return solve(model, opts, **kw)

        milp.run_solver = phase2_by
    step = policy.solve_preemption

    def solve_preemption(*args: Any, **kwargs: Any) -> Any:
        INSIDE[0] = True
        t = time.process_time()
        try:
            res = step(*args, **kwargs)
        finally:
            INSIDE[0] = False
        row = ROUTES[(route(res.phase1), route(res.phase2))]
        row[0] += 1
        row[1] += time.process_time() - t
        row[2] += res.n_vars
        return res

    policy.solve_preemption = solve_preemption
    timed(policy, "solve_preemption", "solve_preemption (all of it)", only_inside=False)
    timed(policy, "standalone_round", "standalone_round", only_inside=False)
    timed(policy.GFSMilpPolicy, "contested_pools", "contested_pools", only_inside=False)
    for name in ("greedy_decision", "build_model", "_phase1_by_bound", "_phase1_certified",
                 "_certified", "run_solver", "_finish", "running_usage", "check_decision"):
        timed(milp, name, name)
    timed(ClusterState, "copy", "ClusterState.copy", only_inside=False)
    spec = spec_for(a.case, "gfs-milp", None)
    prepared = prepare_trace(spec)
    t = time.process_time()
    run(spec, trace=prepared)
    print(f"{a.case} gfs-milp: run {time.process_time() - t:.2f} s CPU (load excluded)")
    for label, total in TOTAL.most_common():
        print(f"  {label:30s} {total:8.3f} s  {CALLS[label]:7d} calls  "
              f"{1000 * total / CALLS[label]:7.2f} ms each")
    print("by how phase 1 / phase 2 were answered:")
    for (p1, p2), (n, cpu, n_vars) in sorted(ROUTES.items(), key=lambda kv: -kv[1][1]):
        print(f"  {p1 + ' / ' + p2:30s} {cpu:8.3f} s  {int(n):7d} steps  "
              f"{1000 * cpu / n:7.2f} ms each, {n_vars / n:6.0f} variables")


if __name__ == "__main__":
    main()
