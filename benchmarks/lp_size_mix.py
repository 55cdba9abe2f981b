"""Who waits on a backlog: LP queueing by job size, and which sizes the scored window served
(e.g. Chronus ×24 at LP load 4).

    python benchmarks/lp_size_mix.py (chronus|SETUP) LP_LOAD SEED POLICY [POLICY ...]

Per policy (ETS): the LP JQT mean, weighted by GPUs and by GPU-hours, the median; the mean JQT
per size class; and the GPU-hours of LP jobs that started inside the scored window, per size
class. A policy that serves the same GPU-hours to larger jobs first has the same GPU-hour-weighted
JQT and a larger plain mean (most LP jobs take one GPU).
"""

from __future__ import annotations

import sys

import pandas as pd
from replay_spec import replay_spec

from gfs_opt.experiments.runner import run

SIZES = [0, 1, 4, 8, 10_000]
LABELS = ["1", "2-4", "5-8", "9+"]


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__)
        return 2
    where, load, seed, policies = argv[0], float(argv[1]), int(argv[2]), argv[3:]
    rows = []
    for policy in policies:
        out = run(replay_spec(where, policy, load, seed))
        end = float(out.summary["window"][1])
        j = out.jobs[out.jobs["cls"] == "LP"].copy()
        j["g"] = j["gpus_per_worker"] * j["workers"]
        j["size"] = pd.cut(j["g"], SIZES, labels=LABELS)
        gpu_h = j["g"] * j["duration"]
        row = {"policy": policy, "jqt_mean": j["jqt"].mean(),
               "jqt_gpu_weighted": (j["jqt"] * j["g"]).sum() / j["g"].sum(),
               "jqt_gpu_hour_weighted": (j["jqt"] * gpu_h).sum() / gpu_h.sum(),
               "jqt_p50": j["jqt"].median()}
        row |= {f"jqt {s} GPU": v for s, v in j.groupby("size", observed=True)["jqt"].mean().items()}
        started = j["first_start"] < end
        row |= {f"served {s} GPU (GPU-h)": v / 3600 for s, v in
                gpu_h[started].groupby(j["size"][started], observed=True).sum().items()}
        rows.append(row)
    print(pd.DataFrame(rows).set_index("policy").T.round(0).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
