"""How Slurm 22.05 (sched/backfill, select/cons_tres, preempt/qos) starts jobs — the simulator's
opt-in scheduling model (`SimConfig.slurm`; `gfs-opt slurm compare` uses it).

With the model on, the policy still decides quotas and victims (the GFS controller's part on a
live cluster), but Slurm decides which pending jobs start and where:

* **priority order**: HP (QOS priority 1000) before spot (10); then age — the oldest since its
  last (re)queue first; then the job id;
* **main loop, head-of-line stop**: jobs start in that order until the first one of a
  partition (pool) that does not fit; the rest of that partition waits for backfill. A spot job
  held by its QOS's ``GrpTRES`` limit is skipped, not a stop (Slurm's reason ``QOSGrpGRES``);
* **backfill with reservations**: in priority order (at most ``bf_max_job_test`` jobs), each job
  not started gets the earliest time it fits, assuming every running job ends at its *time
  limit* (not its real end) and honouring the reservations of the jobs before it; it starts
  now only if that time is now;
* **latencies**: a submitted job is first seen ``start_latency`` later; a requeued one may run
  again only after ``requeue_delay`` (``cred_expire``); a new ``GrpTRES`` takes
  ``quota_delay`` to reach slurmctld.

Latencies are wall seconds measured on the live cluster (`gfs-opt slurm measure`, see
docs/slurm-model.md) and scale with the replay's compression: trace s = wall s × ``speedup``.
Time limits are the replay's sbatch ``--time``: ⌈(1.2·duration + restart overhead + 60 s·K)
/ 60 s·K⌉ minutes of wall time. Workers take whole GPUs (a fraction rounds up), as on Slurm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gfs_opt.errors import GfsError
from gfs_opt.model import MILLI, ClusterState, Job, Params, Placement, RunningJob

#: measured on the project's machine (docs/slurm-model.md), wall s: the start latency is the mean
#: Slurm-view start delay of the HP jobs that found free GPUs in the 6 h ref-toy replays (0.74 and
#: 0.80 s; `slurm measure` gave 1.0 s on a busier host), the others `slurm measure` means
MEASURED_START_S = 0.75
MEASURED_REQUEUE_S = 12.0
MEASURED_QUOTA_S = 1.6


@dataclass(frozen=True)
class SlurmModel:
    start_latency_wall_s: float = MEASURED_START_S
    requeue_delay_wall_s: float = MEASURED_REQUEUE_S
    quota_delay_wall_s: float = MEASURED_QUOTA_S
    speedup: float = 1.0                 # trace seconds per wall second (the replay's K)
    hol_stop: bool = True
    backfill: bool = True
    bf_max_job_test: int = 100           # Slurm's default
    limit_factor: float = 1.2            # sbatch --time = factor·work + overhead + pad, in minutes
    limit_pad_wall_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("start_latency_wall_s", "requeue_delay_wall_s", "quota_delay_wall_s",
                     "limit_pad_wall_s"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise GfsError(f"Slurm model: {name} must be ≥ 0, got {v}")
        if not math.isfinite(self.speedup) or self.speedup <= 0:
            raise GfsError(f"Slurm model: speedup must be > 0, got {self.speedup}")
        if self.bf_max_job_test < 0 or self.limit_factor <= 0:
            raise GfsError("Slurm model: bf_max_job_test must be ≥ 0 and limit_factor > 0")

    @property
    def start_latency_s(self) -> float:
        return self.start_latency_wall_s * self.speedup

    @property
    def requeue_delay_s(self) -> float:
        return self.requeue_delay_wall_s * self.speedup

    @property
    def quota_delay_s(self) -> float:
        return self.quota_delay_wall_s * self.speedup

    def time_limit(self, job: Job, params: Params) -> float:
        """The job's time limit in trace seconds (whole wall minutes, as sbatch --time)."""
        minute = 60.0 * self.speedup
        need = self.limit_factor * job.duration + params.restart_overhead(job) + \
            self.limit_pad_wall_s * self.speedup
        return max(1, math.ceil(need / minute - 1e-9)) * minute

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def worker_gpus(job: Job) -> int:
    """Whole GPUs per worker (Slurm has no fractions: a fraction takes a GPU)."""
    return max(1, math.ceil(job.g / MILLI))


def fit_counts(avail: dict[int, int], g: int, w: int) -> dict[int, int] | None:
    """Workers per node for ``w`` workers of ``g`` GPUs from per-node available GPU counts, as
    cons_tres places a gang on the live cluster: on one node when one holds it all (the
    tightest such node, then the lowest index), else on as few nodes as possible (the roomiest
    first). None when they do not fit. (A replay placed a 4 × 2-GPU gang on 2 nodes where
    best fit per worker would have spread it over 4 and blocked whole-node HP jobs.)"""
    if sum(a // g for a in avail.values()) < w:
        return None
    whole = [n for n, a in avail.items() if a // g >= w]
    if whole:
        return {min(whole, key=lambda n: (avail[n], n)): w}
    out: dict[int, int] = {}
    left = w
    for n in sorted(avail, key=lambda n: (-(avail[n] // g), n)):
        k = min(left, avail[n] // g)
        if k > 0:
            out[n] = k
            left -= k
        if left == 0:
            return out
    return None


@dataclass
class Reservation:
    start: float
    end: float
    gpus: dict[int, int]          # node → GPUs held


def earliest_fit(now: float, free: dict[int, int], releases: list[tuple[float, int, int]],
                 reservations: list[Reservation], g: int, w: int, length: float
                 ) -> tuple[float, dict[int, int]] | None:
    """The earliest time ≥ now a gang of ``w`` × ``g`` GPUs fits for ``length`` seconds, with
    its workers per node. ``free``: GPUs free now per node; ``releases``: (time, node, GPUs)
    freed when running jobs reach their time limit; ``reservations``: held by earlier jobs.
    Availability only grows with releases, so a start at T needs room at T and at every
    reservation start inside [T, T + length)."""
    times = sorted({now, *(t for t, _n, _g in releases if t > now),
                    *(r.end for r in reservations if r.end > now)})
    for t in times:
        base = dict(free)
        for tr, n, gp in releases:
            if tr <= t:
                base[n] = base.get(n, 0) + gp
        checks = [t, *(r.start for r in reservations if t < r.start < t + length)]
        avail = {}
        for n, a in base.items():
            lowest = a
            for c in checks:
                held = sum(r.gpus.get(n, 0) for r in reservations if r.start <= c < r.end)
                lowest = min(lowest, a + sum(gp for tr, nn, gp in releases
                                             if nn == n and t < tr <= c) - held)
            avail[n] = lowest
        fit = fit_counts(avail, g, w)
        if fit is not None:
            return t, fit
    return None


def lp_gpus_held(running: Mapping[int, RunningJob]) -> dict[tuple[str, float], int]:
    """Whole GPUs the running LP jobs hold per (pool, guarantee class): what each spot QOS's
    ``GrpTRES`` counts."""
    held: dict[tuple[str, float], int] = {}
    for rj in running.values():
        if not rj.job.is_hp:
            key = (rj.job.pool, rj.job.guarantee_h)
            held[key] = held.get(key, 0) + worker_gpus(rj.job) * rj.job.workers
    return held


def schedule(model: SlurmModel, params: Params, state: ClusterState, jobs: Mapping[int, Job],
             running: Mapping[int, RunningJob], queued_since: Mapping[int, float],
             limits: Mapping[tuple[str, float], int], t: float) -> list[tuple[int, Placement]]:
    """One Slurm pass at ``t``: the jobs it starts, in order, with their placements — the main
    loop, then backfill (see the module's doc). ``limits``: the ``GrpTRES`` in force per (pool,
    guarantee class), GPUs; reads ``state`` and ``running`` only, as they were before the pass."""
    order = sorted(queued_since, key=lambda j: (not jobs[j].is_hp, queued_since[j], j))
    lp_held = lp_gpus_held(running)
    free: dict[int, list[int]] = {}
    pool_nodes: dict[str, list[int]] = {}
    for pool in state.pools:
        a, b = state.pool_slice(pool)
        pool_nodes[pool] = list(range(a, b))
        for n in range(a, b):
            base = int(state.node_first_gpu[n])
            free[n] = [k for k in range(int(state.node_gpus[n])) if state.gpu_used[base + k] == 0]
    started: list[tuple[int, Placement]] = []

    def held_back(job: Job) -> bool:
        if job.is_hp:
            return False
        lim = limits.get((job.pool, job.guarantee_h))
        return lim is not None and lp_held.get((job.pool, job.guarantee_h), 0) + \
            worker_gpus(job) * job.workers > lim

    def start(job: Job, fit: dict[int, int]) -> None:
        g = worker_gpus(job)
        placement = []
        for n, k in sorted(fit.items()):
            for _ in range(k):
                gpus, free[n] = free[n][:g], free[n][g:]
                placement.append((n, tuple(gpus)))
        started.append((job.id, tuple(placement)))
        if not job.is_hp:
            key = (job.pool, job.guarantee_h)
            lp_held[key] = lp_held.get(key, 0) + g * job.workers

    def counts(pool: str) -> dict[int, int]:
        return {n: len(free[n]) for n in pool_nodes[pool]}

    blocked: set[str] = set()
    left: list[int] = []
    for jid in order:                                   # the main loop
        job = jobs[jid]
        if held_back(job):
            continue
        if job.pool in blocked:
            left.append(jid)
            continue
        fit = fit_counts(counts(job.pool), worker_gpus(job), job.workers)
        if fit is not None:
            start(job, fit)
        else:
            left.append(jid)
            if model.hol_stop:
                blocked.add(job.pool)
    if not model.backfill or not left:
        return started
    # every running job, those the main loop just started included, ends at its time limit
    releases: dict[str, list[tuple[float, int, int]]] = {p: [] for p in state.pools}
    holders = [(rj.job, rj.start, rj.placement) for rj in running.values()]
    holders += [(jobs[jid], t, placement) for jid, placement in started]
    for job, begun, placement in holders:
        end = begun + model.time_limit(job, params)
        per_node: dict[int, int] = {}
        for n, gpus in placement:
            per_node[n] = per_node.get(n, 0) + len(gpus)
        for n, k in per_node.items():
            releases[job.pool].append((end, n, k))
    reservations: dict[str, list[Reservation]] = {p: [] for p in state.pools}
    for jid in left[:model.bf_max_job_test]:
        job = jobs[jid]
        if held_back(job):
            continue
        length = model.time_limit(job, params)
        g = worker_gpus(job)
        found = earliest_fit(t, counts(job.pool), releases[job.pool],
                             reservations[job.pool], g, job.workers, length)
        if found is None:
            continue
        when, fit = found
        if when <= t:
            start(job, fit)
            for n, k in fit.items():
                releases[job.pool].append((t + length, n, k * g))
        else:
            reservations[job.pool].append(
                Reservation(when, when + length, {n: k * g for n, k in fit.items()}))
    return started
