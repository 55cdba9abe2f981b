"""``slurm-demo``: a small seeded trace sized for the emulated cluster, for trying the Slurm
commands (and for CI) without any data set.

Three days of HP history (three tenants with a daily cycle, together about a quarter of the GPUs) let the
forecaster fit; on the fourth day LP jobs arrive for four hours next to the HP load. Job sizes
(1, 2, 4 GPUs; LP gangs of up to 2 workers) always fit one node of the emulated cluster.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gfs_opt.model import MILLI
from gfs_opt.traces.base import ALIBABA_ORIGIN, Trace

NAME = "slurm-demo"
DAY = 86_400.0
HISTORY_DAYS = 7
LP_HOURS = 4


def demo_trace(nodes: int = 4, gpus: int = 8, seed: int = 0, pool: str = "A100") -> Trace:
    rng = np.random.default_rng(seed)
    cap = nodes * gpus
    sizes = np.array([1, 2, 4])
    size_p = np.array([0.5, 0.3, 0.2])
    mean_gpu_s = float((sizes * size_p).sum()) * 2400.0     # E[size] · E[duration]
    rows = []
    jid = 0
    horizon = HISTORY_DAYS * DAY + LP_HOURS * 3600.0
    tenants = [("org-a", 0.12, 0.0), ("org-b", 0.08, 6.0), ("org-c", 0.05, 12.0)]
    for org, share, phase in tenants:
        for h in range(int(horizon // 3600)):
            load = cap * share * (1.0 + 0.35 * np.sin(2 * np.pi * (h - phase) / 24.0))
            for _ in range(rng.poisson(max(load, 0.0) * 3600.0 / mean_gpu_s)):
                g = int(rng.choice(sizes, p=size_p))
                rows.append((jid, org, "HP", g, 1, h * 3600.0 + rng.uniform(0, 3600),
                             float(rng.uniform(1200, 3600))))
                jid += 1
    t_lp = HISTORY_DAYS * DAY
    for org in ("org-a", "org-b", "org-c"):
        n = rng.poisson(10 * LP_HOURS / 3)
        for _ in range(n):
            g = int(rng.choice(sizes, p=size_p))
            w = 2 if g <= 2 and rng.random() < 0.25 else 1
            rows.append((jid, org, "LP", g, w, t_lp + rng.uniform(0, LP_HOURS * 3600.0),
                         float(rng.uniform(900, 5400))))
            jid += 1
    jobs = pd.DataFrame(rows, columns=["job_id", "org", "cls", "g", "workers", "submit",
                                       "duration"])
    jobs["submit"] = jobs["submit"].round()
    jobs["duration"] = jobs["duration"].round()
    jobs["g"] = jobs["g"] * MILLI
    jobs["name"] = jobs["job_id"].astype(str)
    jobs["pool"] = pool
    jobs["cpu"] = 4.0
    jobs["guarantee_h"] = 1.0
    jobs["resident"] = False
    jobs = jobs.sort_values(["submit", "job_id"], kind="stable").reset_index(drop=True)
    node_frame = pd.DataFrame({"node_name": [f"n{i}" for i in range(1, nodes + 1)], "pool": pool,
                               "gpus": gpus, "cpus": 16.0})
    return Trace(node_frame, jobs, ALIBABA_ORIGIN, NAME,
                 [f"{NAME}: seeded ({seed}) demo trace for {nodes} × {gpus} GPUs"])
