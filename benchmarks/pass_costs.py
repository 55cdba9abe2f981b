"""Where a replay's event-loop time goes, by kind of event (the speed target "events/s at full scale
within 2× of the toy's": is a pass dearer on a big cluster, or is the mix of events different?).

    python benchmarks/pass_costs.py toy yarn-cs
    python benchmarks/pass_costs.py full@0.25 yarn-cs --by-pool   # and per dirty pool

Cases are `bench_sim.py`'s. Policy passes are timed one by one (process time) and split into
quota refreshes, passes after job events that started or evicted something, and passes after
job events that changed nothing; "other" is the rest of the event loop (arrivals, completions,
window ends, samples, hour and day boundaries). ``--by-pool`` also splits the job-event passes by
the pools they visit, with the mean HP queue of the pool (a standing backlog makes its passes
dearer). The timing adds a little to every pass. The first line gives the trace's mean gang
(GPUs and workers per job): a start's cost grows with it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import spec_for


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("policy")
    ap.add_argument("--by-pool", action="store_true")
    a = ap.parse_args()
    from gfs_opt.experiments.runner import prepare_trace, run
    from gfs_opt.sim import engine

    cost: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    by_pool: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])
    loop: list[float] = []
    plain_pass, plain_run = engine.Simulator._policy_pass, engine.Simulator._run

    def timed_pass(sim: engine.Simulator, t: float, quota_due: bool) -> None:
        before = (len(sim.hp_q), len(sim.lp_q), len(sim.running))
        if a.by_pool:   # only when asked: it lands in "other event handling" otherwise
            pools = ",".join(sorted(sim.dirty))
            hp_waiting = sum(len(lst) for p in sim.dirty for lst in sim.hp_q.shapes(p).values())
        c0 = time.process_time()
        plain_pass(sim, t, quota_due)
        dt = time.process_time() - c0
        changed = (len(sim.hp_q), len(sim.lp_q), len(sim.running)) != before
        kind = ("quota refresh" if quota_due else
                "job event, something started or evicted" if changed else
                "job event, nothing changed")
        cost[kind][0] += 1
        cost[kind][1] += dt
        if a.by_pool and not quota_due:
            row = by_pool[pools]
            row[0] += 1
            row[1] += dt
            row[2] += hp_waiting

    def timed_run(sim: engine.Simulator, progress: object) -> engine.SimResult:
        c0 = time.process_time()
        out = plain_run(sim, progress)  # type: ignore[arg-type]
        loop.append(time.process_time() - c0)
        return out

    engine.Simulator._policy_pass = timed_pass  # type: ignore[method-assign]
    engine.Simulator._run = timed_run  # type: ignore[method-assign]
    spec = spec_for(a.case, a.policy, None)
    prepared = prepare_trace(spec)
    out = run(spec, trace=prepared)
    passes = sum(s for _n, s in cost.values())
    jobs, nodes = prepared[0].jobs, prepared[0].nodes
    # a start books, best-fits and releases per worker and GPU: bigger gangs, dearer events
    print(f"{a.case}: {len(jobs):,} jobs on {len(nodes):,} nodes; per job "
          f"{(jobs.g * jobs.workers).mean() / 1000:.2f} GPUs, {jobs.workers.mean():.2f} workers")
    print(f"{a.case} {a.policy}: {out.events:,} events, event loop {loop[0]:.2f} s process time "
          f"({loop[0] / out.events * 1e6:.0f} µs per event)")
    for kind, (n, s) in sorted(cost.items()):
        print(f"  {kind:42s} {int(n):>9,} passes {s:8.2f} s {s / max(n, 1) * 1e6:7.0f} µs each")
    print(f"  {'other event handling':42s} {'':>16s} {loop[0] - passes:8.2f} s")
    if a.by_pool:
        print("job-event passes by the pools they visit (the ten dearest):")
        for pools, (n, s, q) in sorted(by_pool.items(), key=lambda kv: -kv[1][1])[:10]:
            print(f"  {pools[:42]:42s} {int(n):>9,} passes {s:8.2f} s {s / n * 1e6:7.0f} µs each, "
                  f"mean HP queue {q / n:,.1f}")


if __name__ == "__main__":
    main()
