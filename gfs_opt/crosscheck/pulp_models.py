"""Independent PuLP/CBC builds of both MILPs, for cross-checking optimal objectives.

These are the *plain* formulations — one binary per (job, worker, node) and per (job, worker,
GPU), all scenarios with a naive big-M — with none of the type/GPU-class aggregation, slots,
symmetry breaking or quantile strengthening of the OR-Tools models. They share only the
objective definitions (`gfs_opt.preempt.objective`, `gfs_opt.quota.milp.lp_value`) and the
scenario data, so agreeing optima check the reductions. Small rounds only.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import numpy as np

try:
    import pulp
except ModuleNotFoundError as exc:   # an extra: the package itself never needs it
    raise ModuleNotFoundError(
        "gfs_opt.crosscheck needs PuLP: pip install 'gfs-opt[crosscheck]'", name=exc.name
    ) from None

from gfs_opt.model import (
    HOUR,
    MILLI,
    Decision,
    JobClass,
    Placement,
    Round,
    gpus_per_worker,
    milli_per_gpu,
)
from gfs_opt.preempt.objective import DEFAULT_OBJECTIVE, PreemptObjective, eviction_cost, hp_value
from gfs_opt.quota.milp import DEFAULT_QUOTA_OPTIONS, QuotaOptions, lp_value, scenarios
from gfs_opt.quota.rule import class_hours


def _cbc(time_limit: float) -> pulp.LpSolver:
    """CBC through COIN_CMD (PuLP ≥ 3.3): a ``cbc`` on PATH (``pulp[cbc]``), else PuLP's own.

    CBC's integer preprocessing is off: on a 9-binary phase-2 model (a hypothesis example of
    `test_ortools_and_pulp_agree`) it reported 7,250.25 "optimal" where 7,250.00 is feasible
    (its root cuts logged an objective of −1.8e308); a cross-check must not be the inexact side."""
    path = shutil.which("cbc")
    if path is None:
        try:
            from pulp.apis.coin_api import pulp_cbc_path
        except ImportError:   # a PuLP without the bundled binary: COIN_CMD finds cbc itself
            pulp_cbc_path = None
        path = pulp_cbc_path
    return pulp.COIN_CMD(msg=False, timeLimit=time_limit, gapRel=0.0, threads=1, path=path,
                         options=["preprocess off"])


@dataclass(slots=True)
class _Plain:
    u: dict[int, pulp.LpVariable]
    b: dict[tuple[int, int, int], pulp.LpVariable]   # (job, worker, global GPU) → binary


def _plain_placement(prob: pulp.LpProblem, rnd: Round, jobs: list[int],
                     z: dict[int, pulp.LpVariable]) -> _Plain:
    """Each worker on one node, on k GPUs of it; every GPU within 1000 milli after evictions."""
    st = rnd.state
    lp_on: dict[int, list[tuple[int, int]]] = {}
    for j in z:
        run = rnd.running[j]
        for n, gpus in run.placement:
            for g in gpus:
                lp_on.setdefault(int(st.node_first_gpu[n]) + g, []).append((j, milli_per_gpu(run.job.g)))
    u = {i: prob.add_variable(f"u_{i}", cat="Binary") for i in jobs}
    b: dict[tuple[int, int, int], pulp.LpVariable] = {}
    for i in jobs:
        job = rnd.jobs[i]
        lo, hi = st.pool_slice(job.pool)
        k = gpus_per_worker(job.g)
        for r in range(job.workers):
            on_node = []
            for n in range(lo, hi):
                p = prob.add_variable(f"p_{i}_{r}_{n}", cat="Binary")
                on_node.append(p)
                gl = []
                for g in range(int(st.node_gpus[n])):
                    gi = int(st.node_first_gpu[n]) + g
                    b[(i, r, gi)] = prob.add_variable(f"b_{i}_{r}_{gi}", cat="Binary")
                    gl.append(b[(i, r, gi)])
                prob += pulp.lpSum(gl) == k * p
            prob += pulp.lpSum(on_node) == u[i]
    for gi in range(st.n_gpus):
        use = [milli_per_gpu(rnd.jobs[i].g) * v for (i, _r, g), v in b.items() if g == gi]
        if use:
            prob += pulp.lpSum(use) <= MILLI - int(st.gpu_used[gi]) + pulp.lpSum(
                m * z[j] for j, m in lp_on.get(gi, []))
    return _Plain(u, b)


def _placements(rnd: Round, plain: _Plain) -> dict[int, Placement]:
    st = rnd.state
    out: dict[int, Placement] = {}
    for i, ui in plain.u.items():
        if (ui.value() or 0) < 0.5:
            continue
        workers = []
        for r in range(rnd.jobs[i].workers):
            sel = [gi for (ii, rr, gi), v in plain.b.items() if ii == i and rr == r and (v.value() or 0) > 0.5]
            node = int(st.gpu_node[sel[0]])
            workers.append((node, tuple(gi - int(st.node_first_gpu[node]) for gi in sel)))
        out[i] = tuple(workers)
    return out


@dataclass(slots=True)
class PulpPreemption:
    placed: int                  # optimal Σ v_i u_i
    cost: float                  # optimal Σ c_j z_j given that
    decision: Decision
    status: str


def solve_preemption_pulp(rnd: Round, obj: PreemptObjective = DEFAULT_OBJECTIVE,
                          hard_guarantee: bool | None = None,
                          time_limit: float = 60.0) -> PulpPreemption:
    protect = rnd.params.hard_guarantee if hard_guarantee is None else hard_guarantee
    prob = pulp.LpProblem("preemption_plain", pulp.LpMaximize)
    jobs = [j for j in rnd.pending_hp
            if rnd.jobs[j].cls is JobClass.HP and rnd.jobs[j].pool in rnd.state.pool_index]
    z = {j: prob.add_variable(f"z_{j}", cat="Binary") for j, run in rnd.running.items()
         if run.job.cls is JobClass.LP and not (protect and run.in_window(rnd.time))}
    plain = _plain_placement(prob, rnd, jobs, z)
    value = {i: hp_value(rnd, i, obj) for i in jobs}
    cost = {j: eviction_cost(rnd, j, obj) for j in z}
    placed = pulp.lpSum(value[i] * plain.u[i] for i in jobs)
    evicted = pulp.lpSum(cost[j] * z[j] for j in z)
    prob += placed
    prob.solve(_cbc(time_limit))
    status = pulp.LpStatus[prob.status]
    best = round(pulp.value(placed) or 0)
    prob.sense = pulp.LpMinimize
    prob.setObjective(evicted)
    prob += placed >= best - 0.5
    prob.solve(_cbc(time_limit))
    status = status if status != "Optimal" else pulp.LpStatus[prob.status]
    decision = Decision(placements=_placements(rnd, plain),
                        victims=sorted(j for j in z if (z[j].value() or 0) > 0.5))
    return PulpPreemption(best, float(pulp.value(evicted) or 0.0), decision, status)


@dataclass(slots=True)
class PulpQuota:
    value: float
    admitted: list[int]
    placements: dict[int, Placement]
    status: str


def solve_quota_pulp(rnd: Round, opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS,
                     time_limit: float = 60.0) -> PulpQuota:
    st = rnd.state
    prob = pulp.LpProblem("admission_plain", pulp.LpMaximize)
    pending = [j for j in rnd.pending_lp if rnd.jobs[j].pool in st.pool_index
               and rnd.jobs[j].demand <= st.capacity_gpus(rnd.jobs[j].pool) * MILLI]
    plain = _plain_placement(prob, rnd, pending, {}) if opts.pack else None
    x = plain.u if plain else {j: prob.add_variable(f"x_{j}", cat="Binary") for j in pending}
    for pool in st.pools:
        jobs = [j for j in pending if rnd.jobs[j].pool == pool]
        if not jobs:
            continue
        U, _eta = scenarios(rnd, pool, opts)     # η is already in the scenarios' spread
        U = U * MILLI
        cap = st.capacity_gpus(pool) * MILLI
        H, S = U.shape[1], U.shape[0]
        k = int(np.floor((1.0 - rnd.params.rho) * S + 1e-9))
        L = np.zeros(H)
        for run in rnd.running.values():
            if run.job.pool == pool and run.job.cls is JobClass.LP:
                left = (run.window_start + run.job.guarantee_s - rnd.time) / HOUR
                for h in range(H):
                    if left > 0 and h < class_hours(left, H):
                        L[h] += run.job.demand
        tag = "".join(ch if ch.isalnum() else "_" for ch in pool)
        z = [prob.add_variable(f"z_{tag}_{s}", cat="Binary") for s in range(S)]
        big_m = sum(rnd.jobs[j].demand for j in jobs)
        for h in range(H):
            cover = [j for j in jobs if h < class_hours(rnd.jobs[j].guarantee_h, H)]
            for s in range(S):
                rhs = max(0.0, np.floor(cap - U[s, h] - L[h]))
                prob += pulp.lpSum(rnd.jobs[j].demand * x[j] for j in cover) <= rhs + big_m * z[s]
        prob += pulp.lpSum(z) <= k
        free = cap - int(st.pool_used[st.pool_index[pool]])
        prob += pulp.lpSum(rnd.jobs[j].demand * x[j] for j in jobs) <= max(free, 0)
    if not x:
        return PulpQuota(0.0, [], {}, "Optimal")
    value = {j: lp_value(rnd, rnd.jobs[j], opts) for j in x}
    prob += pulp.lpSum(value[j] * x[j] for j in x)
    prob.solve(_cbc(time_limit))
    admitted = sorted(j for j in x if (x[j].value() or 0) > 0.5)
    return PulpQuota(sum(value[j] for j in admitted), admitted,
                     _placements(rnd, plain) if plain else {}, pulp.LpStatus[prob.status])
