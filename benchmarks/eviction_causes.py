"""Evictions by cause for one replay of the η and backlog studies (ETS): window outcomes, evictions split
into count / fragmentation / other, how many had HP above the quota's plan, and the JQTs.

    python benchmarks/eviction_causes.py (chronus|SETUP) LP_LOAD SEED POLICY [POLICY ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gfs_opt.experiments.runner import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_spec import case_parser, replay_spec

KEYS = ("lp_eviction_rate", "lp_windows_failed", "lp_windows_ok", "lp_evictions_count",
        "lp_evictions_fragmentation", "lp_evictions_other", "lp_evictions_quota_attributable",
        "lp_jqt_mean", "hp_jqt_mean", "hp_jqt_p99")


def main() -> None:
    ap = case_parser(__doc__ or "")
    ap.add_argument("policies", nargs="+")
    a = ap.parse_args()
    for policy in a.policies:
        s = run(replay_spec(a.where, policy, a.load, a.seed)).summary
        print(json.dumps({"policy": policy, "case": f"{a.where} LP {a.load:g} seed {a.seed}",
                          **{k: round(float(s[k]), 4) for k in KEYS}}))


if __name__ == "__main__":
    main()
