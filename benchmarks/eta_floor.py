"""How often GFS's η sits at its floor, and with what attributable eviction rate.

    python benchmarks/eta_floor.py POLICY (chronus|SETUP) LP_LOAD [SEED]

Replays one trace (``chronus``: the Chronus MIX1 trace of $GFS_DATA_DIR, time ×24) with the ETS
forecaster and counts, over the η refreshes inside the scored window, those with η at η_min and,
among the refreshes whose quota-attributable eviction rate of the last H hours is under the
target 1 − ρ, those at η_min; it also prints the run's evictions by cause.
"""

from __future__ import annotations

import sys

from replay_spec import replay_spec

from gfs_opt.experiments.runner import prepare_trace
from gfs_opt.model import Decision, Params, Round
from gfs_opt.policies import make_policy
from gfs_opt.sim.engine import SimConfig, Simulator


def main(argv: list[str]) -> int:
    policy, where, load = argv[0], argv[1], float(argv[2])
    seed = int(argv[3]) if len(argv) > 3 else 0
    spec = replay_spec(where, policy, load, seed)
    trace, lo, hi = prepare_trace(spec)
    params = Params()
    sim = Simulator(trace, make_policy(policy, **spec.policy_options), params,
                    SimConfig(eval_start=lo, eval_end=hi))
    seen = {"refreshes": 0, "floor": 0, "under": 0, "floor_under": 0}

    def on_decision(rnd: Round, d: Decision) -> None:
        if not d.eta or not lo <= rnd.time < hi:
            return
        for pool, eta in d.eta.items():
            st = rnd.pool_status(pool)
            windows = st.recent_failed + st.recent_succeeded
            rate = st.recent_failed_quota / windows if windows else 0.0
            at_floor = eta <= params.eta_min + 1e-12
            under = rate < 1.0 - params.rho
            seen["refreshes"] += 1
            seen["floor"] += at_floor
            seen["under"] += under
            seen["floor_under"] += at_floor and under

    sim.on_decision = on_decision
    s = sim.run().summary()
    n = max(seen["refreshes"], 1)
    print(f"{policy} {where} LP×{load:g} seed {seed}: LP evict {s['lp_eviction_rate']:.2%}, "
          f"LP JQT {s['lp_jqt_mean']:,.0f} s; evictions {s['lp_evictions']} (count "
          f"{s['lp_evictions_count']}, fragmentation {s['lp_evictions_fragmentation']}, "
          f"quota-attributable {s['lp_evictions_quota_attributable']}); η at its floor at "
          f"{seen['floor'] / n:.1%} of {seen['refreshes']} refreshes, "
          f"{seen['floor_under'] / max(seen['under'], 1):.1%} of the {seen['under']} with the "
          "attributable rate under target")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
