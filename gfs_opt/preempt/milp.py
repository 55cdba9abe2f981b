"""Batch preemption MILP of the HP pass (GFS-SPEC §3; math in formulations/preemption.md).

One model places every pending HP gang at once and chooses LP victims, exactly at GPU level,
while staying small:

* **job types** — pending HP jobs of one pool with equal (g, w) are interchangeable for
  placement, so workers are counted per type t (``y[t,n]``, ``q[t,s]``) and only the choice of
  *which* jobs are placed (``u[i]``) is per job;
* **GPU classes** — GPUs of one node with the same usage and the same evictable LP jobs are
  interchangeable; a class of N GPUs gets ``min(N, F)`` individual *slots* (F = fractional HP
  workers pending in the pool: no more GPUs of a class can ever host them) and one integer ``E``
  for the rest, which can only be taken whole;
* **candidate nodes** (optional, large rounds) — per type, the top-K nodes by an eviction-cost
  estimate plus the nodes the greedy used, so the greedy answer stays feasible.

The objective is lexicographic (`gfs_opt.preempt.objective`): phase 1 maximises the waiting-
weighted HP value P; phase 2 pins P and minimises the eviction cost C.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from ortools.math_opt.python import mathopt

from gfs_opt.model import MILLI, Decision, JobClass, Round, WorkerPlacement, gpus_per_worker
from gfs_opt.preempt.objective import (
    DEFAULT_OBJECTIVE,
    PreemptObjective,
    PreemptScore,
    check_decision,
    eviction_cost,
    hp_value,
    score,
)
from gfs_opt.solve import DEFAULT_SOLVER, Outcome, SolverOptions, report
from gfs_opt.solve import solve as run_solver

TypeKey = tuple[str, int, int]  # (pool, g milli per worker, workers)


@dataclass(frozen=True, slots=True)
class PreemptOptions:
    """Model options. ``candidates``: None = automatic, 0 = all nodes, K = top-K nodes per type."""

    objective: PreemptObjective = DEFAULT_OBJECTIVE
    hard_guarantee: bool | None = None   # None: take the round's params.hard_guarantee
    candidates: int | None = None
    auto_pairs: int = 6000               # automatic restriction above this many (type, node) pairs
    auto_k: int = 32
    symmetry_breaking: bool = True


@dataclass(slots=True)
class GpuClass:
    """Interchangeable GPUs of one node: same usage, same evictable LP jobs."""

    node: int
    gpus: list[int]                      # node-local indices
    room: int                            # 1000 − used: free milli now
    fixed: int                           # milli that no eviction can free (HP, protected LP)
    lp: tuple[tuple[int, int], ...]      # evictable (job id, milli on each GPU of the class)
    n_slots: int = 0
    slot_vars: list[tuple[mathopt.Variable | None, dict[TypeKey, mathopt.Variable]]] = field(
        default_factory=list)
    rest: mathopt.Variable | None = None  # E: whole GPUs taken among gpus[n_slots:]


@dataclass(slots=True)
class PreemptModel:
    model: mathopt.Model
    types: dict[TypeKey, list[int]]                 # type → pending job ids
    u: dict[int, mathopt.Variable]
    y: dict[tuple[TypeKey, int], mathopt.Variable]  # whole-GPU workers of type on node
    z: dict[int, mathopt.Variable]
    classes: list[GpuClass]
    value: dict[int, int]
    cost: dict[int, float]
    placed: mathopt.LinearExpression
    evicted: mathopt.LinearExpression
    restricted: bool
    n_pairs: int


def _type_of(rnd: Round, jid: int) -> TypeKey:
    job = rnd.jobs[jid]
    return (job.pool, job.g, job.workers)


def _gpu_lp(rnd: Round, protect: bool) -> tuple[dict[int, list[tuple[int, int]]], set[int]]:
    """Evictable LP jobs per GPU (global index) and the set of protected LP jobs."""
    st = rnd.state
    per_gpu: dict[int, list[tuple[int, int]]] = defaultdict(list)
    protected: set[int] = set()
    for jid, run in rnd.running.items():
        if run.job.cls is not JobClass.LP:
            continue
        if protect and run.in_window(rnd.time):
            protected.add(jid)
            continue
        m = run.job.g if run.job.g < MILLI else MILLI
        for node, gpus in run.placement:
            for lg in gpus:
                per_gpu[int(st.node_first_gpu[node]) + lg].append((jid, m))
    return per_gpu, protected


def _node_classes(rnd: Round, node: int, per_gpu: dict[int, list[tuple[int, int]]]) -> list[GpuClass]:
    st = rnd.state
    base = int(st.node_first_gpu[node])
    groups: dict[tuple, list[int]] = {}
    for lg in range(int(st.node_gpus[node])):
        gi = base + lg
        lp = tuple(sorted(per_gpu.get(gi, ())))
        used = int(st.gpu_used[gi])
        groups.setdefault((used, lp), []).append(lg)
    out = []
    for (used, lp), gpus in groups.items():
        fixed = used - sum(m for _, m in lp)
        out.append(GpuClass(node, gpus, MILLI - used, fixed, lp))
    return sorted(out, key=lambda c: c.gpus[0])


def _free_cost(cls: GpuClass, cost: dict[int, float]) -> float:
    return sum(cost[j] for j, _ in cls.lp)


def _candidate_nodes(rnd: Round, pool_nodes: range, classes: dict[int, list[GpuClass]],
                     t: TypeKey, cost: dict[int, float], k_limit: int | None,
                     keep: set[int]) -> list[int]:
    """Nodes that can host a worker of type t, best first; cut to ``k_limit`` (+ ``keep``)."""
    _pool, g, w = t
    scored: list[tuple[float, int]] = []
    for n in pool_nodes:
        if g >= MILLI:
            k = gpus_per_worker(g)
            per = sorted(c for cl in classes[n] if cl.fixed == 0
                         for c in [0.0 if cl.room == MILLI else _free_cost(cl, cost)] * len(cl.gpus))
            if len(per) < k:
                continue
            scored.append((sum(per[:k]), n))
        else:
            opts = [0.0 if cl.room >= g else _free_cost(cl, cost)
                    for cl in classes[n] if MILLI - cl.fixed >= g]
            if opts:
                scored.append((min(opts), n))
    scored.sort()
    if k_limit is None:
        return [n for _, n in scored]
    top = {n for _, n in scored[: k_limit + w]}
    return [n for _, n in scored if n in top or n in keep]


def build_model(rnd: Round, opts: PreemptOptions = PreemptOptions(),
                keep_nodes: set[int] | None = None) -> PreemptModel:
    """The phase-1 model (objective: maximise P); `solve_preemption` adds phase 2."""
    st = rnd.state
    obj = opts.objective
    protect = rnd.params.hard_guarantee if opts.hard_guarantee is None else opts.hard_guarantee
    keep = keep_nodes or set()
    m = mathopt.Model(name="gfs_preemption")

    types: dict[TypeKey, list[int]] = defaultdict(list)
    for jid in rnd.pending_hp:
        job = rnd.jobs[jid]
        if job.cls is JobClass.HP and job.pool in st.pool_index:
            types[_type_of(rnd, jid)].append(jid)
    types = {t: sorted(js) for t, js in sorted(types.items())}
    value = {j: hp_value(rnd, j, obj) for js in types.values() for j in js}

    per_gpu, _protected = _gpu_lp(rnd, protect)
    cost = {j: eviction_cost(rnd, j, obj) for j in rnd.running
            if rnd.running[j].job.cls is JobClass.LP}

    pools = sorted({t[0] for t in types})
    classes: dict[int, list[GpuClass]] = {}
    for p in pools:
        lo, hi = st.pool_slice(p)
        for n in range(lo, hi):
            classes[n] = _node_classes(rnd, n, per_gpu)

    # candidate nodes per type
    pairs_all: dict[TypeKey, list[int]] = {}
    for t in types:
        lo, hi = st.pool_slice(t[0])
        pairs_all[t] = _candidate_nodes(rnd, range(lo, hi), classes, t, cost, None, keep)
    n_pairs = sum(len(v) for v in pairs_all.values())
    k_limit = opts.candidates
    if k_limit is None:
        k_limit = opts.auto_k if n_pairs > opts.auto_pairs else 0
    restricted = bool(k_limit)
    if restricted:
        for t in types:
            lo, hi = st.pool_slice(t[0])
            pairs_all[t] = _candidate_nodes(rnd, range(lo, hi), classes, t, cost, k_limit, keep)

    u = {j: m.add_binary_variable(name=f"u_{j}") for js in types.values() for j in js}
    y: dict[tuple[TypeKey, int], mathopt.Variable] = {}
    z: dict[int, mathopt.Variable] = {}

    def zvar(j: int) -> mathopt.Variable:
        if j not in z:
            z[j] = m.add_binary_variable(name=f"z_{j}")
        return z[j]

    frac_workers = defaultdict(int)
    for t, js in types.items():
        if t[1] < MILLI:
            frac_workers[t[0]] += t[2] * len(js)

    whole_at: dict[int, list[TypeKey]] = defaultdict(list)
    frac_at: dict[int, list[TypeKey]] = defaultdict(list)
    for t, nodes in pairs_all.items():
        for n in nodes:
            (whole_at if t[1] >= MILLI else frac_at)[n].append(t)

    pool_of = {n: st.pools[int(st.node_pool[n])] for n in classes}
    used_classes: list[GpuClass] = []
    frac_terms: dict[TypeKey, list[mathopt.Variable]] = defaultdict(list)
    for n in sorted(set(whole_at) | set(frac_at)):
        wt, ft = whole_at.get(n, []), frac_at.get(n, [])
        whole_supply: list[mathopt.Variable] = []
        for cl in classes[n]:
            can_whole = bool(wt) and cl.fixed == 0
            frac_here = [t for t in ft if MILLI - cl.fixed >= t[1]]
            if not can_whole and not frac_here:
                continue
            freed = [(zvar(j), mm) for j, mm in cl.lp]
            cl.n_slots = min(len(cl.gpus), frac_workers[pool_of[n]]) if frac_here else 0
            loads = []
            for s in range(cl.n_slots):
                tag = f"{n}_{cl.gpus[s]}"
                e = m.add_binary_variable(name=f"e_{tag}") if can_whole else None
                qs = {t: m.add_integer_variable(lb=0, ub=(MILLI - cl.fixed) // t[1],
                                                name=f"q_{_tname(t)}_{tag}") for t in frac_here}
                load = mathopt.fast_sum([MILLI * e] if e is not None else []) + \
                    mathopt.fast_sum(t[1] * q for t, q in qs.items())
                m.add_linear_constraint(
                    load - mathopt.fast_sum(mm * zv for zv, mm in freed) <= cl.room,
                    name=f"gpucap_{tag}")
                cl.slot_vars.append((e, qs))
                loads.append(load)
                if e is not None:
                    whole_supply.append(e)
                for t, q in qs.items():
                    frac_terms[t].append(q)
            if opts.symmetry_breaking:
                for s in range(1, len(loads)):
                    m.add_linear_constraint(loads[s - 1] <= loads[s],
                                            name=f"sym_{n}_{cl.gpus[s]}")
            rest = len(cl.gpus) - cl.n_slots
            if can_whole and rest > 0:
                cl.rest = m.add_integer_variable(lb=0, ub=rest, name=f"E_{n}_{cl.gpus[0]}")
                for zv, _mm in freed:
                    m.add_linear_constraint(cl.rest <= rest * zv,
                                            name=f"free_{n}_{cl.gpus[0]}_{zv.name}")
                whole_supply.append(cl.rest)
            used_classes.append(cl)
        if wt:
            for t in wt:
                k = gpus_per_worker(t[1])
                y[(t, n)] = m.add_integer_variable(
                    lb=0, ub=min(t[2] * len(types[t]), int(st.node_gpus[n]) // k),
                    name=f"y_{_tname(t)}_{n}")
            m.add_linear_constraint(
                mathopt.fast_sum(gpus_per_worker(t[1]) * y[(t, n)] for t in wt)
                == mathopt.fast_sum(whole_supply), name=f"whole_{n}")

    for t, js in types.items():
        workers = [y[(t, n)] for n in pairs_all[t] if (t, n) in y] if t[1] >= MILLI else frac_terms[t]
        m.add_linear_constraint(
            mathopt.fast_sum(workers) == t[2] * mathopt.fast_sum(u[j] for j in js),
            name=f"gang_{_tname(t)}")

    placed = mathopt.fast_sum(value[j] * u[j] for j in u)
    evicted = mathopt.fast_sum(cost[j] * z[j] for j in z)
    m.maximize(placed)
    return PreemptModel(m, types, u, y, z, used_classes, value, cost,
                        mathopt.LinearExpression(placed), mathopt.LinearExpression(evicted),
                        restricted, n_pairs)


def _tname(t: TypeKey) -> str:
    pool = "".join(ch if ch.isalnum() else "_" for ch in t[0])
    return f"{pool}_g{t[1]}_w{t[2]}"


# ---- decoding and warm start --------------------------------------------------------------
class DecodeError(RuntimeError):
    """The solver's values do not describe a placement (a modelling bug, never user input)."""


def decode(rnd: Round, pm: PreemptModel, out: Outcome) -> Decision:
    """Turn solver values into placements (node + local GPU indices) and victims."""
    whole_gpus: dict[int, list[int]] = defaultdict(list)
    frac_pos: dict[TypeKey, list[WorkerPlacement]] = defaultdict(list)
    for cl in pm.classes:
        for s, (e, qs) in enumerate(cl.slot_vars):
            gpu = cl.gpus[s]
            if e is not None and out.int_value(e):
                whole_gpus[cl.node].append(gpu)
            for t, q in qs.items():
                frac_pos[t].extend([(cl.node, (gpu,))] * out.int_value(q))
        if cl.rest is not None:
            whole_gpus[cl.node].extend(cl.gpus[cl.n_slots:cl.n_slots + out.int_value(cl.rest)])
    whole_pos: dict[TypeKey, list[WorkerPlacement]] = defaultdict(list)
    for (t, n), var in pm.y.items():
        k = gpus_per_worker(t[1])
        for _ in range(out.int_value(var)):
            take, whole_gpus[n] = whole_gpus[n][:k], whole_gpus[n][k:]
            if len(take) < k:
                raise DecodeError(f"node {n}: fewer whole GPUs than workers need")
            whole_pos[t].append((n, tuple(sorted(take))))
    decision = Decision()
    for t, js in pm.types.items():
        pos = whole_pos[t] if t[1] >= MILLI else frac_pos[t]
        placed = [j for j in js if out.int_value(pm.u[j])]
        if len(pos) != t[2] * len(placed):
            raise DecodeError(f"type {t}: {len(pos)} worker slots for {len(placed)} gangs")
        for idx, j in enumerate(placed):
            decision.placements[j] = tuple(pos[idx * t[2]:(idx + 1) * t[2]])
    victims = sorted(j for j, v in pm.z.items() if out.int_value(v))
    decision.victims = drop_idle_victims(rnd, decision, victims)
    return decision


def drop_idle_victims(rnd: Round, decision: Decision, victims: list[int]) -> list[int]:
    """Keep only victims with a GPU that a new placement uses (others were evicted for nothing)."""
    touched = {(n, g) for pl in decision.placements.values() for n, gpus in pl for g in gpus}
    return [j for j in victims
            if any((n, g) in touched for n, gpus in rnd.running[j].placement for g in gpus)]


def warm_start(rnd: Round, pm: PreemptModel, decision: Decision) -> dict[mathopt.Variable, float] | None:
    """Model values that reproduce ``decision`` (e.g. the greedy's), or None if it has no image."""
    st = rnd.state
    h: dict[mathopt.Variable, float] = dict.fromkeys(pm.model.variables(), 0.0)
    whole: set[int] = set()
    frac: dict[int, dict[TypeKey, int]] = defaultdict(lambda: defaultdict(int))
    for jid, pl in decision.placements.items():
        if jid not in pm.u:
            continue
        h[pm.u[jid]] = 1.0
        t = _type_of(rnd, jid)
        for n, gpus in pl:
            if t[1] >= MILLI:
                if (t, n) not in pm.y:
                    return None
                h[pm.y[(t, n)]] += 1.0
                whole.update(int(st.node_first_gpu[n]) + g for g in gpus)
            else:
                frac[int(st.node_first_gpu[n]) + gpus[0]][t] += 1
    for cl in pm.classes:
        base = int(st.node_first_gpu[cl.node])
        gl = [base + g for g in cl.gpus]
        fr = sorted((g for g in gl if g in frac), key=lambda g: sum(t[1] * c for t, c in frac[g].items()))
        wh = [g for g in gl if g in whole]
        s_total = cl.n_slots
        if len(fr) > s_total:
            return None
        ws = min(len(wh), s_total - len(fr))
        slots = [None] * (s_total - len(fr) - ws) + fr + wh[:ws]
        for (e, qs), g in zip(cl.slot_vars, slots, strict=True):
            if g is None:
                continue
            if g in whole:
                if e is None:
                    return None
                h[e] = 1.0
            for t, c in frac.get(g, {}).items():
                if t not in qs:
                    return None
                h[qs[t]] = float(c)
        if len(wh) > ws:
            if cl.rest is None:
                return None
            h[cl.rest] = float(len(wh) - ws)
    for j in decision.victims:
        if j in pm.z:
            h[pm.z[j]] = 1.0
    return h


# ---- solving ------------------------------------------------------------------------------
@dataclass(slots=True)
class PreemptResult:
    """The chosen decision plus everything needed to judge it."""

    decision: Decision
    score: PreemptScore
    greedy: Decision | None = None
    greedy_score: PreemptScore | None = None
    phase1: Outcome | None = None
    phase2: Outcome | None = None
    n_vars: int = 0
    n_cons: int = 0
    restricted: bool = False
    fallback: bool = False


def greedy_decision(rnd: Round) -> Decision | None:
    """The PTS HP pass (lead's greedy) on the round, or None where it is not available."""
    try:
        from gfs_opt.preempt.greedy import hp_pass
    except ImportError:
        return None
    return hp_pass(rnd)


def solve_preemption(rnd: Round, opts: PreemptOptions = PreemptOptions(),
                     solver: SolverOptions = DEFAULT_SOLVER,
                     greedy: Decision | None = None, use_greedy: bool = True) -> PreemptResult:
    """Exact HP pass: lexicographic MILP, warm-started and, if it fails, replaced by the greedy."""
    t0 = time.perf_counter()
    if greedy is None and use_greedy:
        greedy = greedy_decision(rnd)
    g_score = score(rnd, greedy, opts.objective) if greedy is not None else None
    keep = {n for pl in (greedy.placements.values() if greedy else ()) for n, _ in pl}
    pm = build_model(rnd, opts, keep)
    n_vars, n_cons = pm.model.get_num_variables(), pm.model.get_num_linear_constraints()
    res = PreemptResult(Decision(), PreemptScore(0, 0.0), greedy, g_score, n_vars=n_vars,
                        n_cons=n_cons, restricted=pm.restricted)
    hints = []
    if greedy is not None and (h := warm_start(rnd, pm, greedy)) is not None:
        hints.append(h)

    if not pm.u:
        p1 = Outcome("optimal", 0.0, 0.0, 0.0, 0.0, {})
        res.phase1 = p1
        return _finish(rnd, pm, res, p1, None, opts, solver, t0)

    p1 = run_solver(pm.model, solver, hints=hints)
    res.phase1 = p1
    p2 = None
    left = solver.time_limit - (time.perf_counter() - t0)
    if p1.has_solution and p1.status == "optimal" and left > 0:
        best_p = round(p1.objective or 0.0)
        pin = pm.model.add_linear_constraint(pm.placed >= best_p - 0.5, name="pin_placed_value")
        pm.model.minimize(pm.evicted)
        hints2 = [p1.values] + [h for h in hints if _placed_of(pm, h) >= best_p - 0.5]
        p2 = run_solver(pm.model, solver, time_limit=left, hints=hints2)
        res.phase2 = p2
        # restore phase 1 so the model object still means what `build_model` promised
        pm.model.delete_linear_constraint(pin)
        pm.model.maximize(pm.placed)
    return _finish(rnd, pm, res, p1, p2, opts, solver, t0)


def _placed_of(pm: PreemptModel, values: dict[mathopt.Variable, float]) -> float:
    return sum(pm.value[j] * values.get(v, 0.0) for j, v in pm.u.items())


def _finish(rnd: Round, pm: PreemptModel, res: PreemptResult, p1: Outcome, p2: Outcome | None,
            opts: PreemptOptions, solver: SolverOptions, t0: float) -> PreemptResult:
    final = p2 if p2 is not None and p2.has_solution else p1
    problems: list[str] = []
    decision: Decision | None = None
    if final.has_solution or not pm.u:
        try:
            decision = decode(rnd, pm, final)
            problems = check_decision(rnd, decision)
        except DecodeError as exc:
            problems = [str(exc)]
    milp_score = score(rnd, decision, opts.objective) if decision is not None and not problems else None
    status = _status(p1, p2)
    use_greedy = milp_score is None or (
        res.greedy_score is not None and not milp_score.at_least(res.greedy_score))
    if use_greedy and res.greedy is not None:
        if problems:
            status, why = "error", "MILP solution rejected: " + "; ".join(problems[:3])
        elif milp_score is None:
            why = f"no MILP solution ({status})"
        else:
            why = f"MILP incumbent worse than greedy ({status})"
        decision, res.fallback = Decision(dict(res.greedy.placements), list(res.greedy.victims)), True
        milp_score = res.greedy_score
        message = why + "; greedy answer returned"
    else:
        if decision is None:
            decision = Decision()
        milp_score = milp_score or PreemptScore(0, 0.0)
        message = ""
    assert milp_score is not None
    res.decision, res.score = decision, milp_score
    c_info = ""
    if p2 is not None:
        c_info = (f"eviction cost {milp_score.eviction_cost:.1f} GPU·s (bound "
                  f"{_fmt(p2.bound)}, gap {_pct(p2.gap)}), ")
    else:
        c_info = f"eviction cost {milp_score.eviction_cost:.1f} GPU·s (not minimised), "
    cand = f"top-{opts.candidates or opts.auto_k} candidate nodes" if pm.restricted else "all nodes"
    msg = (f"{c_info}{milp_score.victims} victims; {res.n_vars} vars, {res.n_cons} cons, {cand}")
    message = f"{message}; {msg}" if message else msg
    elapsed = time.perf_counter() - t0
    out = Outcome(status, milp_score.placed / MILLI,
                  None if p1.bound is None else p1.bound / MILLI, p1.gap, elapsed)
    decision.reports.append(report("preemption", out, solver, fallback=res.fallback,
                                   message=message, time_s=elapsed))
    return res


def _status(p1: Outcome, p2: Outcome | None) -> str:
    if p1.status != "optimal":
        return p1.status
    if p2 is None:
        return "timeout"
    return "optimal" if p2.status == "optimal" else p2.status


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.3g}%"


def export_preemption(rnd: Round, fmt: str, opts: PreemptOptions = PreemptOptions()) -> str:
    """LP/MPS text of the preemption model with the lexicographic objective in one line:
    maximise ``P − λ·C`` with ``λ = 1/(1 + Σ_j c_j)``; since P is integral, this has exactly the
    lexicographic optima (solve it with a zero relative gap)."""
    from gfs_opt.solve import export

    pm = build_model(rnd, opts)
    lam = 1.0 / (1.0 + sum(pm.cost[j] for j in pm.z))
    pm.model.maximize(pm.placed - lam * pm.evicted)
    return export(pm.model, fmt)
