"""Share of GFS's failed windows that η's growth answers for (needs growth_budget.patch applied).

    python benchmarks/eta_variants/growth_share.py chronus 4 0      # trace, LP load, seed
    python benchmarks/eta_variants/growth_share.py paper-a100 1 3   # a setup

Each failed window counts η's share of the overrun at its eviction: HP above the plan at the
current η > 1 but within the plan at η = 1 (the engine's ``_growth`` with the patch).
"""

from __future__ import annotations

import sys

from gfs_opt.experiments.runner import RunSpec, prepare_trace
from gfs_opt.model import Params
from gfs_opt.paths import data_dir
from gfs_opt.policies import make_policy
from gfs_opt.sim.engine import SimConfig, Simulator


def main() -> None:
    where, load, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    if where == "chronus":
        spec = RunSpec(trace=str(data_dir() / "chronus-philly-slo/trace_job_Philly_MIX1.csv"),
                       policy="gfs", lp_load=load, seed=seed, time_scale=24.0)
    else:
        spec = RunSpec.from_setup(where, policy="gfs", lp_load=load, seed=seed)
    trace, lo, hi = prepare_trace(spec)
    sim = Simulator(trace, make_policy("gfs", forecaster="ets"), Params(),
                    SimConfig(eval_start=lo, eval_end=hi))
    if not hasattr(sim, "_growth"):
        sys.exit("apply benchmarks/eta_variants/growth_budget.patch first")
    tot = {"failed": 0.0, "attributable": 0.0, "growth": 0.0}
    outcome = sim._window_outcome

    def counted(r, t, ok):  # type: ignore[no-untyped-def]
        if not ok:
            pool = r.job.pool
            tot["failed"] += 1
            tot["attributable"] += sim._attributable.get(pool, True)
            tot["growth"] += sim._growth.get(pool, 0.0)  # type: ignore[attr-defined]
        outcome(r, t, ok)

    sim._window_outcome = counted  # type: ignore[method-assign]
    sim.run()
    print(f"{where} load {load:g} seed {seed}: {tot['failed']:.0f} failed windows, "
          f"{tot['attributable']:.0f} attributable, growth's share {tot['growth']:.1f} "
          f"({tot['growth'] / max(1.0, tot['failed']):.0%})")


if __name__ == "__main__":
    main()
