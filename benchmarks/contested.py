"""Synthetic *contested* scheduling rounds: a nearly full pool, LP work everywhere, and a burst
of pending HP jobs that cannot start without preemption. Used by bench_milp.py and by
make_instances.py until instances cut from simulations replace them.

Request sizes follow the Alibaba v2026 per-worker mix (calibration_targets.json:
gpu_request_per_worker_counts, worker_num_share) — coarsely: 10 % fractional, 67 % one GPU,
5 % two, 4 % four, 14 % eight; 8 % multi-worker gangs.
"""

from __future__ import annotations

import numpy as np

from gfs_opt.model import (
    HOUR,
    MILLI,
    ClusterState,
    Job,
    JobClass,
    Params,
    PoolForecast,
    Round,
    RunningJob,
    gpus_per_worker,
    milli_per_gpu,
)

SIZES = np.array([100, 200, 300, 500, 1000, 2000, 4000, 8000])
SIZE_P = np.array([0.01, 0.02, 0.03, 0.04, 0.67, 0.05, 0.04, 0.14])


def _request(rng: np.random.Generator, max_gpus: int) -> tuple[int, int]:
    g = int(rng.choice(SIZES, p=SIZE_P))
    while g > max_gpus * MILLI:
        g = int(rng.choice(SIZES, p=SIZE_P))
    w = 1
    if rng.random() < 0.08:
        w = int(rng.choice([2, 3, 4, 8, 16], p=[0.45, 0.15, 0.2, 0.12, 0.08]))
        if g >= 4 * MILLI:
            w = min(w, 4)
    return g, w


def _first_fit(st: ClusterState, g: int, w: int, order: np.ndarray):
    per, k = milli_per_gpu(g), gpus_per_worker(g)
    extra: dict[int, int] = {}
    out = []
    for _ in range(w):
        for n in order:
            base = int(st.node_first_gpu[n])
            fits = [lg for lg in range(int(st.node_gpus[n]))
                    if st.gpu_used[base + lg] + extra.get(base + lg, 0) + per <= MILLI]
            if len(fits) >= k:
                ch = tuple(fits[:k])
                for lg in ch:
                    extra[base + lg] = extra.get(base + lg, 0) + per
                out.append((int(n), ch))
                break
        else:
            return None
    return tuple(out)


def contested_round(seed: int = 0, nodes: int = 300, gpus_per_node: int = 8, hp_share: float = 0.55,
                    lp_share: float = 0.42, pending_hp: int = 100, pending_lp: int = 150,
                    pool: str = "A100-SXM4-80GB", hard_guarantee: bool = False) -> Round:
    rng = np.random.default_rng(seed)
    st = ClusterState.from_nodes([(pool, gpus_per_node, f"node-{i:04d}") for i in range(nodes)])
    t = 30 * 24 * HOUR
    params = Params(guarantee_classes=(1.0, 2.0, 4.0), hard_guarantee=hard_guarantee)
    jobs: dict[int, Job] = {}
    running: dict[int, RunningJob] = {}
    cap = st.n_gpus * MILLI
    nid = 1

    def fill(cls: JobClass, target: float, packed: bool) -> None:
        nonlocal nid
        misses = 0
        while st.pool_used[0] < target * cap and misses < 400:
            g, w = _request(rng, gpus_per_node)
            order = np.arange(nodes) if packed else rng.permutation(nodes)
            pl = _first_fit(st, g, w, order)
            if pl is None:
                misses += 1
                continue
            d = float(rng.choice([1.0, 2.0, 4.0], p=[0.6, 0.25, 0.15]))
            start = t - float(rng.uniform(60, 12 * HOUR))
            job = Job(nid, f"org{rng.integers(8)}", pool, cls, g, w, start - float(rng.uniform(0, 1800)),
                      float(rng.uniform(HOUR, 48 * HOUR)), guarantee_h=d)
            st.allocate(job, pl)
            jobs[nid] = job
            win = d * HOUR
            ckpt = start + np.floor((t - start) / win) * win
            running[nid] = RunningJob(job, start, float(ckpt), float(ckpt), pl)
            nid += 1

    fill(JobClass.HP, hp_share, packed=False)
    fill(JobClass.LP, hp_share + lp_share, packed=False)
    pend_hp, pend_lp = [], []
    for _ in range(pending_hp):
        g, w = _request(rng, gpus_per_node)
        jobs[nid] = Job(nid, f"org{rng.integers(8)}", pool, JobClass.HP, g, w,
                        t - float(rng.uniform(0, 1800)), float(rng.uniform(600, 10 * HOUR)))
        pend_hp.append(nid)
        nid += 1
    for _ in range(pending_lp):
        g, w = _request(rng, gpus_per_node)
        jobs[nid] = Job(nid, f"org{rng.integers(8)}", pool, JobClass.LP, g, w,
                        t - float(rng.uniform(0, 3 * HOUR)), float(rng.uniform(600, 10 * HOUR)),
                        guarantee_h=float(rng.choice([1.0, 2.0, 4.0], p=[0.6, 0.25, 0.15])))
        pend_lp.append(nid)
        nid += 1
    hp_now = float(st.pool_hp[0]) / MILLI
    mean = hp_now * np.array([1.0, 1.03, 1.06, 1.04])
    fc = PoolForecast(mean=mean, std=0.04 * mean)
    return Round(time=t, state=st, jobs=jobs, running=running, pending_hp=pend_hp,
                 pending_lp=pend_lp, forecasts={pool: fc}, params=params)
