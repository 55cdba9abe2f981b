"""η-rule variants of issue 40, measured on the issue's cells (not part of the package).

The variants live in ``growth_budget.patch`` (environment switches on top of GFS's η rule, kept
out of the package because none of them dominated; it applies to commit f00c454, the rule
before the growth band). To reproduce a row of BENCHMARKS.md, "η variants measured in the second
session":

    git checkout f00c454 -- gfs_opt   # the rule the patch was written against
    git apply benchmarks/eta_variants/growth_budget.patch
    python benchmarks/eta_variants/run_variants.py '{"GFS_ETA_FLOOR1": "1"}'
    git apply -R benchmarks/eta_variants/growth_budget.patch && git checkout HEAD -- gfs_opt

Switches: ``GFS_GROWTH_BUDGET=β`` with ``GFS_GROWTH_MODE`` ``step`` (η ÷ 1.5 when η's growth
answers for more than β of the failures since η last moved: HP above the plan at the current
η > 1 but within the plan at η = 1, counted as η's share of the overrun), ``one`` (η back to 1)
or ``cap`` (η back to 1 and a ceiling halfway down, which ``GFS_CAP_RECOVER=r`` lets grow ×r a
day); ``GFS_ETA_FLOOR1`` (η never below 1); ``GFS_SHRINK_MIN=f`` (one shrink at most ×f).
Later sessions' switches live in their own patches, each against the commit it names in
BENCHMARKS.md: ``lp_order.patch`` (``GFS_LP_ORDER``, ``GFS_ETA_ADMITTED``), ``wait_stat.patch``
(``GFS_WAIT_STAT``), ``band_step.patch`` (``GFS_BAND_LEVEL``, ``GFS_BAND_MODE``,
``GFS_BAND_SHRINK``: the paper's step on the growth band's rate) and ``reserve_eta.patch``
(``GFS_RESERVE_ETA=min1``: the whole-node reserve at min(η, 1)), both against 0d3bc4d.
Cells: Chronus MIX1 ×24 at LP loads 2 and 4 and paper-a100 at LP loads 0.5 / 1 / 2 (seeds 0–2),
paper-a100 seeds 3–4 at load 1, and held out (no variant was chosen on them) Chronus seeds 3–4
at both loads and paper-a100 seeds 5–6, then seeds 5–6 / 7–8, then (fifth session) paper-a100
medium seeds 9–11, low and high seeds 3–4 and Chronus seeds 7–8, then (sixth session, after
the wait (`gfs-wait`, GFS's default since the seventh session) was fixed) paper-a100 medium seeds 12–14, low and high seeds 5–6 and Chronus seeds
9–10; ETS. ``hp_patience.py`` runs the same cells with HP JQT and issue 37's bound. ``CASES_ONLY=name,name`` runs some cases only; a
second argument runs another policy (the `+sqa` references of the held-out cases). Summaries
are cached in ``results/eta-variants/`` under the cell, the switches and a fingerprint of the
package's source, so a cell of other code is never read back.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from code_fingerprint import code_fingerprint
from replay_spec import CHRONUS, replay_spec

CACHE = Path(__file__).resolve().parents[2] / "results" / "eta-variants"
SWITCHES = ("GFS_GROWTH_BUDGET", "GFS_GROWTH_MODE", "GFS_ETA_FLOOR1", "GFS_CAP_RECOVER",
            "GFS_SHRINK_MIN", "GFS_BAND_LEVEL", "GFS_BAND_MODE", "GFS_BAND_SHRINK",
            "GFS_LP_ORDER", "GFS_ETA_ADMITTED", "GFS_WAIT_STAT", "GFS_RESERVE_ETA", "GFS_RESERVE_H")
#: the `+sqa` family's mean LP eviction rate (%) and LP JQT (s) per case, BENCHMARKS.md issue 40
REF = {"chronus2": (2.54, 2006), "chronus4": (2.93, 70421), "low": (0.78, 6927),
       "medium": (0.87, 9173), "high": (0.95, 15504), "seeds34": (0.37, 2997),
       # the held-out cells' `+sqa` means, measured with this script (policy argument)
       "chronus2x": (2.52, 2017), "chronus4x": (2.93, 70625), "seeds56": (0.58, 19264),
       "chronus2y": (2.47, 2008), "chronus4y": (2.98, 70602), "seeds78": (0.28, 3180),
       "seedsz": (1.29, 16551), "lowz": (0.30, 2809), "highz": (0.40, 5844),
       "chronus2z": (2.57, 2008), "chronus4z": (2.94, 70509),
       # the fourth held-out set's (sixth session), measured the same way
       "seedsw": (0.73, 12433), "loww": (0.61, 11602), "highw": (0.67, 29214),
       "chronus2w": (2.53, 2022), "chronus4w": (2.91, 71039)}
CASES = [("chronus2", {"trace": CHRONUS, "time_scale": 24.0}, 2.0, (0, 1, 2)),
         ("chronus4", {"trace": CHRONUS, "time_scale": 24.0}, 4.0, (0, 1, 2)),
         ("low", {"setup": "paper-a100"}, 0.5, (0, 1, 2)),
         ("medium", {"setup": "paper-a100"}, 1.0, (0, 1, 2)),
         ("high", {"setup": "paper-a100"}, 2.0, (0, 1, 2)),
         ("seeds34", {"setup": "paper-a100"}, 1.0, (3, 4)),
         # held out: cells no variant was chosen on
         ("chronus2x", {"trace": CHRONUS, "time_scale": 24.0}, 2.0, (3, 4)),
         ("chronus4x", {"trace": CHRONUS, "time_scale": 24.0}, 4.0, (3, 4)),
         ("seeds56", {"setup": "paper-a100"}, 1.0, (5, 6)),
         # held out again, after the last choice (the confidence bound) was made
         ("chronus2y", {"trace": CHRONUS, "time_scale": 24.0}, 2.0, (5, 6)),
         ("chronus4y", {"trace": CHRONUS, "time_scale": 24.0}, 4.0, (5, 6)),
         ("seeds78", {"setup": "paper-a100"}, 1.0, (7, 8)),
         # held out a third time (fifth session), after the band's step was chosen
         ("seedsz", {"setup": "paper-a100"}, 1.0, (9, 10, 11)),
         ("lowz", {"setup": "paper-a100"}, 0.5, (3, 4)),
         ("highz", {"setup": "paper-a100"}, 2.0, (3, 4)),
         ("chronus2z", {"trace": CHRONUS, "time_scale": 24.0}, 2.0, (7, 8)),
         ("chronus4z", {"trace": CHRONUS, "time_scale": 24.0}, 4.0, (7, 8)),
         # held out a fourth time (sixth session), after the wait (1 h, gathering nodes) was
         # fixed and before it ran on them
         ("seedsw", {"setup": "paper-a100"}, 1.0, (12, 13, 14)),
         ("loww", {"setup": "paper-a100"}, 0.5, (5, 6)),
         ("highw", {"setup": "paper-a100"}, 2.0, (5, 6)),
         ("chronus2w", {"trace": CHRONUS, "time_scale": 24.0}, 2.0, (9, 10)),
         ("chronus4w", {"trace": CHRONUS, "time_scale": 24.0}, 4.0, (9, 10))]
if os.environ.get("CASES_ONLY"):
    CASES = [c for c in CASES if c[0] in os.environ["CASES_ONLY"].split(",")]


CODE = code_fingerprint()


def _key(cell: dict) -> str:
    return hashlib.sha1(json.dumps({**cell, "code": CODE}, sort_keys=True).encode()
                        ).hexdigest()[:16]


def run_cell(cell: dict) -> tuple[dict, dict]:
    for k in SWITCHES:
        os.environ.pop(k, None)
    os.environ.update(cell["env"])
    from gfs_opt.experiments.runner import run

    # every trace cell is Chronus MIX1 ×24 (CASES), `replay_spec`'s "chronus"
    where = "chronus" if "trace" in cell else cell["setup"]
    out = run(replay_spec(where, cell["policy"], cell["load"], cell["seed"]))
    s = {k: float(out.summary[k]) for k in ("lp_eviction_rate", "lp_jqt_mean")}
    fb = out.feedback
    s["eta_mean"] = float(fb.eta.mean()) if fb is not None and len(fb) else 1.0
    return cell, s


def main() -> None:
    env = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    policy = sys.argv[2] if len(sys.argv) > 2 else "gfs"
    CACHE.mkdir(parents=True, exist_ok=True)
    cells = [{**kw, "load": load, "seed": s, "policy": policy, "env": env}
             for _n, kw, load, seeds in CASES for s in seeds]
    todo = [c for c in cells if not (CACHE / f"{_key(c)}.json").exists()]
    with ProcessPoolExecutor(2) as ex:
        for f in as_completed([ex.submit(run_cell, c) for c in todo]):
            c, s = f.result()
            (CACHE / f"{_key(c)}.json").write_text(json.dumps({"cell": c, "s": s}))
    res = [json.loads((CACHE / f"{_key(c)}.json").read_text())["s"] for c in cells]
    print(policy, env)
    i = 0
    for name, _kw, _load, seeds in CASES:
        r = res[i:i + len(seeds)]
        i += len(seeds)
        e = 100 * np.mean([x["lp_eviction_rate"] for x in r])
        j = np.mean([x["lp_jqt_mean"] for x in r])
        ref_e, ref_j = REF.get(name, (float("nan"), float("nan")))
        print(f"{name:9s} evict {e:.2f}% (allowance {ref_e * 1.05:.2f}%) "
              f"{'met' if e <= ref_e * 1.05 else 'MISSED'}  LP JQT {j:,.0f} s (+sqa {ref_j:,}) "
              f"{'met' if j <= ref_j else 'MISSED'}  mean η {np.mean([x['eta_mean'] for x in r]):.2f}")


if __name__ == "__main__":
    main()
