"""How often the windows that only η's growth let in fail: the growth band's failure rate over a
whole replay, beside the pool's.

    python benchmarks/band_rate.py (chronus|SETUP) LP_LOAD SEED [--no-gate]

Replays GFS (ETS) and sums every window outcome's band weights (`Simulator._band_weight`: a
success by the band's share of the running LP GPUs, a failure by η's share of its overrun).
``--no-gate`` replays the rule without the band's gate (η grows whatever its band does), which
is what the band measured before the gate existed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gfs_opt.quota.rule as rule
import gfs_opt.sim.engine as engine
from gfs_opt.experiments.runner import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_spec import case_parser, replay_spec


def main() -> None:
    ap = case_parser(__doc__ or "")
    ap.add_argument("--no-gate", action="store_true")
    a = ap.parse_args()
    if a.no_gate:
        rule.band_breaks_promise = lambda status, rho: False   # type: ignore[assignment]
    sums = {"band": 0.0, "band_failed": 0.0, "windows": 0, "failed": 0}
    weigh = engine.Simulator._band_weight

    def counted(self: engine.Simulator, pool: str, ok: bool) -> tuple[float, float]:
        w, f = weigh(self, pool, ok)
        sums["band"] += w
        sums["band_failed"] += f
        sums["windows"] += 1
        sums["failed"] += not ok
        return w, f

    engine.Simulator._band_weight = counted   # type: ignore[method-assign]
    out = run(replay_spec(a.where, "gfs", a.load, a.seed))
    print(json.dumps({
        "case": f"{a.where} LP {a.load:g} seed {a.seed}", "gate": not a.no_gate,
        "band_windows": round(sums["band"], 1), "band_failed": round(sums["band_failed"], 1),
        "band_failure_rate": round(sums["band_failed"] / sums["band"], 4) if sums["band"] else None,
        "band_share_of_windows": round(sums["band"] / sums["windows"], 4),
        "pool_failure_rate": round(sums["failed"] / sums["windows"], 4),
        "lp_eviction_rate": round(out.summary["lp_eviction_rate"], 4),
        "lp_jqt_mean": round(out.summary["lp_jqt_mean"])}))


if __name__ == "__main__":
    main()
