"""Spot-quota / LP-admission MILP: chance-constrained, scenario form (GFS-SPEC §3;
math in formulations/spot_quota.md).

Per pool p with capacity C, multiplier η, scenarios s = 1..S of HP demand U[h,s] for forecast
hours h, guaranteed running-LP load L[h], and pending LP jobs j (a_j milli-GPU, class d_j):

    max Σ_j v_j x_j
    s.t. Σ_{j covers h} a_j x_j ≤ R[h,s] + M[h,s]·z_s      ∀ h, s   (R = η(C − U) − L, ≥ 0)
         Σ_s z_s ≤ k = ⌊(1 − ρ)·S⌋
         Σ_j a_j x_j ≤ free milli now                     (the admitted set must fit today)

with the quantile strengthening of Luedtke et al.: at most k scenarios may fail, so the
(k+1)-th smallest R[h,·] — R*[h] — bounds the admitted load outright, M[h,s] = R*[h] − R[h,s],
and scenarios with R[h,s] ≥ R*[h] need no row at all.

The paper's rule is the special case of one class and Gaussian scenarios: without forecast
samples the scenarios are μ_h + σ_h·Φ⁻¹(s/(S+1)) — one standard-normal quantile per scenario,
shared by all hours — so the joint chance constraint becomes the rule's per-hour quantile.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
from ortools.math_opt.python import mathopt

from gfs_opt.model import (
    HOUR,
    MILLI,
    Decision,
    Job,
    Placement,
    Round,
    SolveReport,
    gpus_per_worker,
)
from gfs_opt.preempt.block import (
    DEFAULT_BLOCK_OPTIONS,
    Block,
    BlockOptions,
    DecodeError,
    block_hint,
    build_block,
    decode_block,
)
from gfs_opt.preempt.objective import check_decision
from gfs_opt.preempt.scoring import Placer
from gfs_opt.quota.admission import greedy_admission, lp_order_key
from gfs_opt.quota.rule import class_hours, rule_quotas
from gfs_opt.solve import DEFAULT_SOLVER, Outcome, SolverOptions, export, report
from gfs_opt.solve import solve as run_solver


@dataclass(frozen=True, slots=True)
class QuotaOptions:
    scenarios: int = 200          # S drawn from (μ, σ) when the forecast has no samples
    max_samples: int = 1000       # forecast samples beyond this are thinned evenly
    ageing_per_h: float = 1.0     # value bonus per hour waited, in guaranteed hours
    pack: bool = True             # exact packing of admitted jobs now (else aggregate capacity)
    block: BlockOptions = DEFAULT_BLOCK_OPTIONS


DEFAULT_QUOTA_OPTIONS = QuotaOptions()


@dataclass(slots=True)
class PoolData:
    """Everything the model needs about one pool, in milli-GPU."""

    pool: str
    capacity: int                 # C (milli)
    eta: float
    U: np.ndarray                 # (S, H) HP demand scenarios, milli
    L: np.ndarray                 # (H,) guaranteed running LP load, milli
    k: int                        # scenarios allowed to fail
    free_now: int                 # capacity − used now (milli)
    jobs: list[int] = field(default_factory=list)

    @property
    def horizon(self) -> int:
        return int(self.U.shape[1])

    def slack(self) -> np.ndarray:
        """R[h, s] = max(0, ⌊C − U − L⌋), shape (H, S) (η is already in the scenarios U)."""
        r = np.floor(self.capacity - self.U.T - self.L[:, None])
        return np.maximum(r, 0.0)

    def quantile_slack(self) -> np.ndarray:
        """R*[h]: the (k+1)-th smallest R[h, ·]."""
        return np.sort(self.slack(), axis=1)[:, self.k]


def scenarios(rnd: Round, pool: str, opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS
              ) -> tuple[np.ndarray, float]:
    """HP demand scenarios (S, H) in GPUs, clipped and floored as in the rule, and the pool's η.

    η scales the scenarios' spread around the forecast mean, ``μ + (U − μ)/η``, as it scales the
    rule's margin ``z_ρ·σ/η``: the rule stays the Gaussian-quantile special case of the model.
    """
    cap = rnd.state.capacity_gpus(pool)
    fc = rnd.forecasts.get(pool)
    status = rnd.pool_status(pool)
    if fc is None or not status.has_hp_history or len(fc.mean) == 0:
        return np.zeros((1, 1)), 1.0           # the rule: no HP history → Q = C
    if fc.samples is not None and len(fc.samples) > 0:
        samples = fc.samples
        if len(samples) > opts.max_samples:
            idx = np.linspace(0, len(samples) - 1, opts.max_samples).round().astype(int)
            samples = samples[idx]
    else:
        nd = NormalDist()
        eps = np.array([nd.inv_cdf(s / (opts.scenarios + 1)) for s in range(1, opts.scenarios + 1)])
        samples = fc.mean[None, :] + eps[:, None] * np.maximum(fc.std, 0.0)[None, :]
    eta = status.eta
    samples = fc.mean[None, :] + (samples - fc.mean[None, :]) / eta
    return np.clip(np.floor(samples), 0, cap), eta


def guaranteed_load(rnd: Round, pool: str, horizon: int) -> np.ndarray:
    """L[h]: milli of running LP jobs whose current guarantee window touches hour h."""
    load = np.zeros(horizon, dtype=float)
    for run in rnd.running.values():
        job = run.job
        if job.pool != pool or job.is_hp:
            continue
        left_h = (run.window_start + job.guarantee_s - rnd.time) / HOUR
        if left_h > 0:
            load[:class_hours(left_h, horizon)] += job.demand
    return load


def lp_value(rnd: Round, job: Job, opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS) -> float:
    """v_j: GPUs × (guaranteed hours + ageing bonus for the wait since the last (re)queue)."""
    wait = max(0.0, rnd.time - rnd.queued_since.get(job.id, job.submit))
    return job.demand / MILLI * (job.guarantee_h + opts.ageing_per_h * wait / HOUR)


def pool_data(rnd: Round, opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS) -> list[PoolData]:
    out = []
    st = rnd.state
    for pool in st.pools:
        U, eta = scenarios(rnd, pool, opts)
        cap = st.capacity_gpus(pool) * MILLI
        k = math.floor((1.0 - rnd.params.rho) * len(U) + 1e-9)
        pi = st.pool_index[pool]
        jobs = [j for j in rnd.pending_lp if rnd.jobs[j].pool == pool and rnd.jobs[j].demand <= cap]
        out.append(PoolData(pool, cap, eta, U * MILLI, guaranteed_load(rnd, pool, U.shape[1]), k,
                            int(cap - st.pool_used[pi]), jobs))
    return out


def implied_quotas(rnd: Round, data: list[PoolData]) -> dict[tuple[str, float], int]:
    """Q[p,d] = ⌊min_{h ≤ d}(C − U^{(k+1)}[h])⌋: the rule with the scenario quantile.

    Every admitted set of the MILP keeps L[h] + admitted ≤ Q (the MILP is at least as strict).
    """
    out: dict[tuple[str, float], int] = {}
    for pd in data:
        upper = np.sort(pd.U, axis=0)[len(pd.U) - 1 - pd.k]      # (k+1)-th largest per hour
        free = pd.capacity - upper
        classes = set(rnd.params.guarantee_classes) | {rnd.jobs[j].guarantee_h for j in pd.jobs}
        for d in sorted(classes):
            out[(pd.pool, d)] = max(0, math.floor(float(free[:class_hours(d, pd.horizon)].min())))
    return out


@dataclass(slots=True)
class QuotaModel:
    model: mathopt.Model
    data: list[PoolData]
    x: dict[int, mathopt.Variable]
    z: dict[tuple[str, int], mathopt.Variable]
    value: dict[int, float]
    block: Block | None = None        # exact packing of the admitted jobs (``pack``)


def build_model(rnd: Round, opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS) -> QuotaModel:
    m = mathopt.Model(name="gfs_spot_quota")
    data = pool_data(rnd, opts)
    x: dict[int, mathopt.Variable] = {}
    z: dict[tuple[str, int], mathopt.Variable] = {}
    value: dict[int, float] = {}
    block = None
    if opts.pack:
        # admitted jobs must be placeable now, without preemption: the LP pass's packing, exactly
        block = build_block(m, rnd, [j for pd in data for j in pd.jobs], evict=False,
                            protect=False, cost={}, opts=opts.block, u_name="x")
        x = dict(block.u)
    for pd in data:
        if not opts.pack:
            for j in pd.jobs:
                x[j] = m.add_binary_variable(name=f"x_{j}")
        jobs = [j for j in pd.jobs if j in x]
        if not jobs:
            continue
        for j in jobs:
            value[j] = lp_value(rnd, rnd.jobs[j], opts)
        tag = "".join(ch if ch.isalnum() else "_" for ch in pd.pool)
        R, Rstar = pd.slack(), pd.quantile_slack()
        for h in range(pd.horizon):
            cover = [j for j in jobs if h < class_hours(rnd.jobs[j].guarantee_h, pd.horizon)]
            if not cover or sum(rnd.jobs[j].demand for j in cover) <= R[h].min():
                continue                                   # nothing to admit, or never binding
            load = mathopt.fast_sum(rnd.jobs[j].demand * x[j] for j in cover)
            m.add_linear_constraint(load <= float(Rstar[h]), name=f"quantile_{tag}_h{h}")
            for s in np.flatnonzero(R[h] < Rstar[h]):
                key = (pd.pool, int(s))
                if key not in z:
                    z[key] = m.add_binary_variable(name=f"z_{tag}_s{s}")
                m.add_linear_constraint(
                    load - float(Rstar[h] - R[h, s]) * z[key] <= float(R[h, s]),
                    name=f"scen_{tag}_h{h}_s{s}")
        zs = [v for (p, _s), v in z.items() if p == pd.pool]
        if zs:
            m.add_linear_constraint(mathopt.fast_sum(zs) <= pd.k, name=f"budget_{tag}")
        if not opts.pack:
            m.add_linear_constraint(
                mathopt.fast_sum(rnd.jobs[j].demand * x[j] for j in jobs) <= max(pd.free_now, 0),
                name=f"fit_now_{tag}")
    if block is not None and rnd.reserves:
        _shape_rows(m, rnd, block)
    m.maximize(mathopt.fast_sum(value[j] * x[j] for j in x))
    return QuotaModel(m, data, x, z, value, block)


def whole_free(rnd: Round, pool: str) -> list[int]:
    """The pool's whole free nodes of its largest size (global indices)."""
    st = rnd.state
    p = st.pool_index[pool]
    lo, hi = st.pool_slice(p)
    size = st.pool_node_gpus[p]
    return [n for n in range(lo, hi)
            if st.node_gpus[n] == size and st.node_free[n] == size]


def shape_room(rnd: Round, pool: str) -> int:
    """Whole free nodes admitted LP may break: |W_p| − R_p, none below 0 (the reserve in force,
    its strictest class; `gfs_opt.quota.shape`)."""
    reserve = max((r for (p, _d), r in rnd.reserves.items() if p == pool), default=0)
    return max(0, len(whole_free(rnd, pool)) - reserve)


def _shape_rows(m: mathopt.Model, rnd: Round, block: Block) -> None:
    """The shape dimension (formulations/spot_quota.md): a binary b_n per whole free node n
    that any admitted worker touches (whole-GPU workers y[t,n] ≤ ⌊G/k_t⌋·b_n, fractional ones
    q[t,s] ≤ ⌊1000/g_t⌋·b_n on its slots), and Σ_n b_n ≤ |W_p| − R_p per pool."""
    by_node: dict[int, list[tuple[mathopt.Variable, int]]] = {}
    for (t, n), y in block.y.items():
        by_node.setdefault(n, []).append((y, max(1, int(rnd.state.node_gpus[n]) // gpus_per_worker(t[1]))))
    for cl in block.classes:
        for _e, qs in cl.slot_vars:
            for t, q in qs.items():
                by_node.setdefault(cl.node, []).append((q, max(1, MILLI // t[1])))
    for pool in rnd.state.pools:
        if not any(p == pool for p, _d in rnd.reserves):
            continue
        nodes = [n for n in whole_free(rnd, pool) if n in by_node]
        room = shape_room(rnd, pool)
        if len(nodes) <= room:
            continue                         # the reserve cannot bind
        tag = "".join(ch if ch.isalnum() else "_" for ch in pool)
        touched = []
        for n in nodes:
            b = m.add_binary_variable(name=f"b_{tag}_n{n}")
            touched.append(b)
            for v, cap in by_node[n]:
                m.add_linear_constraint(v <= cap * b, name=f"touch_{tag}_n{n}_{v.name}")
        m.add_linear_constraint(mathopt.fast_sum(touched) <= room, name=f"shape_{tag}")


def admission_problems(rnd: Round, admitted: list[int], opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS,
                       placements: dict[int, Placement] | None = None) -> list[str]:
    """Why ``admitted`` breaks the chance constraint or does not fit now (empty = feasible).

    Recomputed scenario by scenario. With ``placements`` the packing is checked by the
    independent checker; without, by the aggregate free capacity of each pool.
    """
    problems = []
    chosen = set(admitted)
    data = pool_data(rnd, opts)
    for pd in data:
        mine = [j for j in pd.jobs if j in chosen]
        R = pd.slack()
        failed = np.zeros(len(pd.U), dtype=bool)
        for h in range(pd.horizon):
            load = sum(rnd.jobs[j].demand for j in mine
                       if h < class_hours(rnd.jobs[j].guarantee_h, pd.horizon))
            if load:
                failed |= load > R[h] + 1e-6
        if failed.sum() > pd.k:
            problems.append(f"pool {pd.pool}: {int(failed.sum())} scenarios overloaded, "
                            f"at most {pd.k} allowed")
        if sum(rnd.jobs[j].demand for j in mine) > max(pd.free_now, 0):
            problems.append(f"pool {pd.pool}: admitted LP exceeds the free GPUs now")
    stray = chosen - {j for pd in data for j in pd.jobs}
    if stray:
        problems.append(f"not pending LP jobs of a known pool: {sorted(stray)}")
    if placements is not None:
        if set(placements) != chosen:
            problems.append("placements do not match the admitted set")
        problems += check_decision(rnd, Decision(placements=dict(placements)))
        for pool in {p for p, _d in rnd.reserves}:
            if pool not in rnd.state.pool_index:
                continue
            broken = {n for j, pl in placements.items() if rnd.jobs[j].pool == pool
                      for n, _g in pl} & set(whole_free(rnd, pool))
            room = shape_room(rnd, pool) if broken else 0
            if len(broken) > room:
                problems.append(f"pool {pool}: admitted LP breaks {len(broken)} whole free "
                                f"nodes, the reserve leaves {room}")
    return problems


def _hint(qm: QuotaModel, rnd: Round, admitted: list[int],
          placements: dict[int, Placement] | None) -> dict[mathopt.Variable, float] | None:
    h = {v: 0.0 for v in qm.model.variables()}
    chosen = set(admitted)
    if qm.block is not None:
        bh = block_hint(rnd, qm.block, Decision(placements=dict(placements or {})))
        if bh is None:
            return None
        h.update(bh)
    for j, v in qm.x.items():
        h[v] = float(j in chosen)
    for pd in qm.data:
        R = pd.slack()
        for h_ in range(pd.horizon):
            load = sum(rnd.jobs[j].demand for j in pd.jobs
                       if j in chosen and h_ < class_hours(rnd.jobs[j].guarantee_h, pd.horizon))
            for s in np.flatnonzero(load > R[h_] + 1e-6):
                if (pd.pool, int(s)) in qm.z:
                    h[qm.z[(pd.pool, int(s))]] = 1.0
    return h


@dataclass(slots=True)
class QuotaResult:
    admitted: list[int]
    quotas: dict[tuple[str, float], int]
    value: float
    report: SolveReport
    placements: dict[int, Placement] = field(default_factory=dict)  # with ``pack``
    greedy_admitted: list[int] | None = None
    greedy_value: float | None = None
    greedy_feasible: bool | None = None
    outcome: Outcome | None = None
    n_vars: int = 0
    n_cons: int = 0

    def decision(self) -> Decision:
        """Quotas, and the admitted LP jobs' placements when the model packed them."""
        return Decision(placements=dict(self.placements), quotas=dict(self.quotas),
                        reports=[self.report])


def place_admitted(rnd: Round, admitted: list[int]) -> dict[int, Placement]:
    """The LP pass's packing of an admitted set, in PTS LP order (on a copy of the state),
    holding back the round's whole-node reserves."""
    st = rnd.state.copy()
    placer = Placer(None, use_history=False, reserves=rnd.reserves or None)
    placed: dict[int, Placement] = {}
    for j in sorted(admitted, key=lambda j: lp_order_key(rnd.jobs[j])):
        pl = placer.gang(st, rnd.jobs[j])
        if pl is not None:
            st.allocate(rnd.jobs[j], pl)
            placed[j] = pl
    return placed


def greedy_admitted(rnd: Round) -> list[int]:
    """The warm start: the paper's rule and GFS's greedy LP pass on the round, without eviction
    history (E(n) only breaks ties the model does not see)."""
    return greedy_admission(rnd, rule_quotas(rnd),
                            placer=Placer(None, use_history=False, reserves=rnd.reserves or None))


def admission_value(rnd: Round, admitted: list[int], opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS) -> float:
    return sum(lp_value(rnd, rnd.jobs[j], opts) for j in admitted)


def solve_quota(rnd: Round, opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS,
                solver: SolverOptions = DEFAULT_SOLVER, greedy: list[int] | None = None,
                use_greedy: bool = True) -> QuotaResult:
    """Exact admission (+ packing) and implied quotas; the greedy (rule) answer on failure."""
    t0 = time.perf_counter()
    if greedy is None and use_greedy:
        greedy = greedy_admitted(rnd)
    qm = build_model(rnd, opts)
    quotas = implied_quotas(rnd, qm.data)
    g_place = place_admitted(rnd, greedy) if greedy is not None else None
    g_ok = greedy is not None and not admission_problems(
        rnd, greedy, opts, g_place if opts.pack else None)
    g_val = admission_value(rnd, greedy, opts) if greedy is not None else None
    n_vars, n_cons = qm.model.get_num_variables(), qm.model.get_num_linear_constraints()
    if not qm.x:
        out = Outcome("optimal", 0.0, 0.0, 0.0, time.perf_counter() - t0)
    else:
        hint = _hint(qm, rnd, greedy, g_place) if g_ok and greedy is not None else None
        out = run_solver(qm.model, solver, hints=[hint] if hint else [])
    order = {j: i for i, j in enumerate(rnd.pending_lp)}
    admitted = sorted((j for j, v in qm.x.items() if out.int_value(v)), key=order.__getitem__)
    placements: dict[int, Placement] = {}
    fallback, message = False, ""
    if not out.has_solution and qm.x:
        admitted, fallback = (list(greedy), True) if greedy is not None else ([], False)
        detail = f": {out.detail}" if out.status == "error" and out.detail else ""
        message = f"no MILP solution ({out.status}{detail})" + (
            "; rule + greedy admission returned" if fallback else "")
    else:
        try:
            if qm.block is not None:
                placements, _ = decode_block(rnd, qm.block, out.values)
            problems = admission_problems(rnd, admitted, opts, placements if opts.pack else None)
        except DecodeError as exc:
            problems = [str(exc)]
        if problems:   # a modelling bug, never expected: do not hand out a broken answer
            out.status = "error"
            admitted, fallback = (list(greedy), True) if greedy is not None else ([], False)
            placements = {}
            message = "MILP admission rejected: " + "; ".join(problems[:2])
        elif (qm.x and out.status != "optimal" and g_ok and greedy is not None
              and g_val is not None and admission_value(rnd, admitted, opts) <= g_val + 1e-9):
            # cut short (time-out) without beating the greedy admission: use the greedy's
            admitted, fallback, placements = list(greedy), True, {}
            message = f"MILP stopped ({out.status}) without improving on the greedy admission"
    if fallback and opts.pack and g_place is not None:
        placements = {j: g_place[j] for j in admitted if j in g_place}
    value = admission_value(rnd, admitted, opts)
    elapsed = time.perf_counter() - t0
    info = f"{len(admitted)} LP admitted ({sum(rnd.jobs[j].demand for j in admitted) / MILLI:g} GPUs" \
           f"{', packed' if opts.pack else ''}); {n_vars} vars, {n_cons} cons"
    message = f"{message}; {info}" if message else info
    rep = report("quota", Outcome(out.status, value, out.bound if out.has_solution or not qm.x else None,
                                  out.gap if qm.x else 0.0, elapsed),
                 solver, fallback=fallback, message=message, time_s=elapsed)
    return QuotaResult(admitted, quotas, value, rep, placements, greedy, g_val,
                       g_ok if greedy is not None else None, out, n_vars, n_cons)


def export_quota(rnd: Round, fmt: str, opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS) -> str:
    return export(build_model(rnd, opts).model, fmt)
