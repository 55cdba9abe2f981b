"""The one objective of the HP pass, and an independent feasibility checker.

Both the greedy PTS pass and the preemption MILP are scored here, so "MILP ≥ greedy" compares
like with like. The objective is lexicographic:

1. maximise the value of HP work placed, ``P = Σ_i v_i u_i`` with
   ``v_i = round(g_i·w_i · (1 + wait_i / wait_unit))`` in milli-GPU (an integer, so that the
   second phase of the MILP can pin ``P`` exactly);
2. then minimise the eviction cost ``C = Σ_j c_j z_j`` with
   ``c_j = G_j·(t − last_ckpt_j) + G_j·restart_j + window_penalty·[j inside its guarantee window]``
   in GPU-seconds (``G_j`` = GPUs of the whole gang).

`check_decision` re-derives per-GPU usage from the running jobs' placements, not from the MILP
or from `ClusterState`'s counters, so it can catch mistakes in either.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import numpy as np

from gfs_opt.model import (
    MILLI,
    ClusterState,
    Decision,
    JobClass,
    Round,
    RunningJob,
    gpus_per_worker,
    milli_per_gpu,
)


@dataclass(frozen=True, slots=True)
class PreemptObjective:
    """Weights of the HP-pass objective (GPU-seconds for costs, seconds for waiting)."""

    window_penalty: float = 3600.0   # GPU-seconds charged for breaking a guarantee window
    wait_unit_s: float = 3600.0      # an HP job waiting this long counts double


DEFAULT_OBJECTIVE = PreemptObjective()


def hp_value(rnd: Round, job_id: int, obj: PreemptObjective = DEFAULT_OBJECTIVE) -> int:
    """v_i: milli-GPU of the gang, weighted by how long it has waited (integer)."""
    job = rnd.jobs[job_id]
    wait = max(0.0, rnd.time - job.submit)
    return round(job.demand * (1.0 + wait / obj.wait_unit_s))


def eviction_cost(rnd: Round, job_id: int, obj: PreemptObjective = DEFAULT_OBJECTIVE) -> float:
    """c_j: GPU-seconds thrown away + restart overhead + the penalty for a broken window."""
    run = rnd.running[job_id]
    gpus = run.job.demand / MILLI
    cost = gpus * max(0.0, rnd.time - run.last_ckpt) + gpus * rnd.params.restart_overhead(run.job)
    if run.in_window(rnd.time):
        cost += obj.window_penalty
    return cost


def lp_eviction_costs(rnd: Round, pools: Collection[str],
                      obj: PreemptObjective = DEFAULT_OBJECTIVE,
                      jobs: Iterable[int] | None = None) -> dict[int, float]:
    """`eviction_cost` of every running LP job of ``pools`` (of those among ``jobs``, if given),
    by job id: the same arithmetic in one loop (a contested pass prices every LP job of its
    pool: hundreds per model)."""
    t, params, penalty = rnd.time, rnd.params, obj.window_penalty
    small, large = params.restart_small_s, params.restart_large_s
    out: dict[int, float] = {}
    running = rnd.running
    for j, run in (running.items() if jobs is None else ((j, running[j]) for j in jobs)):
        job = run.job
        if job.cls is not JobClass.LP or job.pool not in pools:
            continue
        demand = job.g * job.workers
        gpus = demand / MILLI
        cost = gpus * max(0.0, t - run.last_ckpt) + gpus * (small if demand <= 8 * MILLI else large)
        if t - run.window_start < job.guarantee_s:
            cost += penalty
        out[j] = cost
    return out


@dataclass(frozen=True, slots=True)
class PreemptScore:
    """Lexicographic score: more ``placed`` is better, then less ``eviction_cost``."""

    placed: int              # Σ v_i over placed HP jobs (milli-GPU, waiting-weighted)
    eviction_cost: float     # Σ c_j over victims (GPU-seconds)
    placed_gpus: float = 0.0  # unweighted HP GPUs placed, for display
    victims: int = 0

    def key(self) -> tuple[int, float]:
        return (self.placed, -round(self.eviction_cost, 6))

    def at_least(self, other: PreemptScore, tol: float = 1e-6) -> bool:
        """True if this score is as good as ``other`` (lexicographically, with cost tolerance)."""
        if self.placed != other.placed:
            return self.placed > other.placed
        return self.eviction_cost <= other.eviction_cost + tol * max(1.0, abs(other.eviction_cost))


def score(rnd: Round, decision: Decision, obj: PreemptObjective = DEFAULT_OBJECTIVE) -> PreemptScore:
    """Score the HP part of a decision (LP placements and quotas do not count here)."""
    hp = [j for j in decision.placements if rnd.jobs[j].cls is JobClass.HP]
    return PreemptScore(
        placed=sum(hp_value(rnd, j, obj) for j in hp),
        eviction_cost=sum(eviction_cost(rnd, j, obj) for j in set(decision.victims)),
        placed_gpus=sum(rnd.jobs[j].demand for j in hp) / MILLI,
        victims=len(set(decision.victims)))


def running_usage(rnd: Round) -> np.ndarray:
    """Milli per GPU recomputed from the running jobs' placements (not from the state's
    counters: `check_decision` compares the two)."""
    st = rnd.state
    first = st.node_first_gpu.tolist()
    usage = [0] * st.n_gpus   # a list: numpy's per-element += costs several times more
    for run in rnd.running.values():
        m = milli_per_gpu(run.job.g)
        for node, gpus in run.placement:
            base = first[node]
            for lg in gpus:
                usage[base + lg] += m
    return np.array(usage, dtype=np.int64)


class RunningUsage:
    """`running_usage` kept from one pass to the next: the last answer, corrected for the running
    jobs that ended, started or changed since (a `RunningJob` is frozen: a job whose entry is
    the same object holds the same GPUs). The same numbers, still from the placements and not
    from the state's counters; a pass of a busy pool changes a few of its thousand jobs."""

    def __init__(self) -> None:
        self._runs: dict[int, RunningJob] = {}
        self._usage: list[int] = []
        self._first: np.ndarray | None = None

    def of(self, rnd: Round) -> np.ndarray:
        st = rnd.state
        first = st.node_first_gpu
        if self._first is None or not np.array_equal(self._first, first):
            self._runs, self._usage, self._first = {}, [0] * st.n_gpus, first.copy()
        firsts = first.tolist()
        usage, old, now = self._usage, self._runs, rnd.running

        def add(run: RunningJob, sign: int) -> None:
            m = sign * milli_per_gpu(run.job.g)
            for node, gpus in run.placement:
                base = firsts[node]
                for lg in gpus:
                    usage[base + lg] += m

        for j, run in old.items():
            if now.get(j) is not run:
                add(run, -1)
        for j, run in now.items():
            if old.get(j) is not run:
                add(run, 1)
        self._runs = dict(now)
        return np.array(usage, dtype=np.int64)


def _take_back(usage: np.ndarray, st: ClusterState, run: RunningJob) -> None:
    """Remove a running job's milli from ``usage`` (an evicted or re-queued job's GPUs)."""
    m = milli_per_gpu(run.job.g)
    for node, gpus in run.placement:
        base = int(st.node_first_gpu[node])
        for lg in gpus:
            usage[base + lg] -= m


def check_decision(rnd: Round, decision: Decision, usage: np.ndarray | None = None) -> list[str]:
    """Everything wrong with applying ``decision`` to ``rnd`` (empty list = feasible).

    Checks: victims are running LP jobs (outside their window under ``hard_guarantee``);
    re-queued jobs are running LP jobs at a window boundary;
    placed jobs are pending, whole gangs, each worker on one node of the job's pool with the
    right number of distinct, existing GPUs; and no GPU exceeds 1000 milli once the victims
    are gone and the new placements are in. ``usage``: `running_usage(rnd)`, when the caller
    checks several decisions on one round (it is O(running jobs); it is not changed).
    """
    st = rnd.state
    problems: list[str] = []
    pending = set(rnd.pending_hp) | set(rnd.pending_lp)

    usage = running_usage(rnd) if usage is None else usage.copy()
    if not np.array_equal(usage, st.gpu_used.astype(np.int64)):
        problems.append("round state: per-GPU usage differs from the running jobs' placements")

    if len(set(decision.victims)) != len(decision.victims):
        problems.append("a victim is listed twice")
    for jid in sorted(set(decision.requeue)):
        # a re-queue is free only at the instant the job's window restarts (a checkpoint)
        run = rnd.running.get(jid)
        if run is None or run.job.cls is not JobClass.LP:
            problems.append(f"re-queued job {jid} is not a running LP job")
            continue
        if jid in decision.victims:
            problems.append(f"job {jid} is both a victim and re-queued")
        if not run.at_boundary(rnd.time):
            problems.append(f"re-queued job {jid} is not at a window boundary (it would break "
                            "its window: that is an eviction)")
        _take_back(usage, st, run)
    for jid in sorted(set(decision.victims)):
        victim = rnd.running.get(jid)
        if victim is None:
            problems.append(f"victim {jid} is not running")
            continue
        if victim.job.cls is not JobClass.LP:
            problems.append(f"victim {jid} is an HP job")
            continue
        if rnd.params.hard_guarantee and victim.in_window(rnd.time):
            problems.append(f"victim {jid} is inside its guarantee window (hard_guarantee)")
        _take_back(usage, st, victim)

    for jid, placement in decision.placements.items():
        job = rnd.jobs.get(jid)
        if job is None:
            problems.append(f"placed job {jid} is unknown")
            continue
        if jid not in pending:
            problems.append(f"placed job {jid} is not pending")
        if jid in decision.victims:
            problems.append(f"job {jid} is both placed and a victim")
        if jid in decision.requeue:
            problems.append(f"job {jid} is both placed and re-queued")
        if len(placement) != job.workers:
            problems.append(f"job {jid}: {len(placement)} workers placed, gang needs {job.workers}")
        k, m = gpus_per_worker(job.g), milli_per_gpu(job.g)
        for node, gpus in placement:
            if not 0 <= node < st.n_nodes:
                problems.append(f"job {jid}: no node {node}")
                continue
            if st.pools[int(st.node_pool[node])] != job.pool:
                problems.append(f"job {jid}: node {node} is not in pool {job.pool}")
            if len(gpus) != k or len(set(gpus)) != k:
                problems.append(f"job {jid}: a worker needs {k} distinct GPUs, got {list(gpus)}")
            for lg in gpus:
                if not 0 <= lg < int(st.node_gpus[node]):
                    problems.append(f"job {jid}: node {node} has no GPU {lg}")
                    continue
                usage[int(st.node_first_gpu[node]) + lg] += m

    over = np.flatnonzero(usage > MILLI)
    for gi in over[:5]:
        node = int(st.gpu_node[gi])
        problems.append(f"GPU {int(gi) - int(st.node_first_gpu[node])} of node {node} over-allocated "
                        f"({int(usage[gi])} milli)")
    if len(over) > 5:
        problems.append(f"… and {len(over) - 5} more over-allocated GPUs")
    return problems
