"""Exact GPU-level placement of a batch of gangs, as a reusable MathOpt block.

Used by the preemption MILP (pending HP, LP victims allowed) and by the admission MILP with
packing (pending LP, no victims). The block adds variables and constraints to a model and
exposes ``u[j]`` (job j placed) and ``z[j]`` (running LP job j evicted); objectives are the
callers' business. Exact and still small because of three reductions:

* **job types** — pending jobs of one pool with equal (g, w) are interchangeable for placement,
  so workers are counted per type t (``y[t,n]`` whole-GPU workers on node n, ``q[t,s]``
  fractional workers on GPU slot s) and only *which* jobs are placed is per job (``u[j]``);
* **GPU classes** — GPUs of one node with the same usage and the same evictable LP jobs are
  interchangeable; a class of N GPUs gets ``min(N, F)`` individual *slots* (F = fractional
  workers pending in the pool: no more GPUs of a class can ever host them); the rest can only
  be taken whole, and are all empty or all occupied, so they count as one number per class;
* **candidate nodes** (optional, large rounds) — per type, the top-K nodes by an eviction-cost
  estimate, plus ``keep`` nodes (the greedy's) so that the greedy answer stays feasible.

Per slot s of class c:  ``1000·e_s + Σ_t g_t·q[t,s] − Σ_{j∈LP(c)} m_j·z_j ≤ room_c`` — a whole
GPU needs the slot empty after evictions, fractional workers share what is left. Per node:
``0 ≤ Σ_t k_t·y[t,n] − Σ_s e_s ≤ Σ_c R_c·f_c`` over the classes' ``R_c = N_c − S_c`` GPUs beyond
their slots, with ``f_c`` = 1 for an empty class, the LP job's ``z_j`` if it has one, else a
binary with ``f_c ≤ z_j`` for each. Per type: ``Σ workers = w_t · Σ_{j∈t} u_j`` (gangs are all or
nothing). The math, with why each reduction is exact: ``formulations/preemption.md``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from ortools.math_opt.python import mathopt

from gfs_opt.milp_writer import MilpWriter
from gfs_opt.model import (
    MILLI,
    Decision,
    JobClass,
    Placement,
    Round,
    WorkerPlacement,
    gpus_per_worker,
    milli_per_gpu,
)

TypeKey = tuple[str, int, int]  # (pool, g milli per worker, workers)


@dataclass(frozen=True, slots=True)
class BlockOptions:
    """``candidates``: None = automatic, 0 = all nodes, K = top-K nodes per job type."""

    candidates: int | None = None
    auto_pairs: int = 6000               # automatic restriction above this many (type, node) pairs
    auto_k: int = 32
    symmetry_breaking: bool = True


DEFAULT_BLOCK_OPTIONS = BlockOptions()


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
    n_rest: int = 0                      # GPUs beyond the slots that a whole worker may take
    # what frees those GPUs (the only LP job's z, or f = every LP job evicted); None: empty
    rest: mathopt.Variable | None = None


@dataclass(slots=True)
class Block:
    types: dict[TypeKey, list[int]]                 # type → job ids
    u: dict[int, mathopt.Variable]
    y: dict[tuple[TypeKey, int], mathopt.Variable]  # whole-GPU workers of type on node
    z: dict[int, mathopt.Variable]
    classes: list[GpuClass]
    restricted: bool
    n_pairs: int                                    # (type, node) pairs before any restriction
    writer: MilpWriter | None = None                # what it added (`MilpWriter.satisfied`)


class ClassSource(Protocol):
    """Where a block may take its GPU classes from instead of computing them
    (`gfs_opt.preempt.class_cache.ClassCache`: kept between passes)."""

    def classes(self, rnd: Round, pool: str, pools: Collection[str], protect: bool
                ) -> dict[int, list[GpuClass]]: ...


class DecodeError(RuntimeError):
    """The solver's values do not describe a placement (a modelling bug, never user input)."""


def type_of(rnd: Round, jid: int) -> TypeKey:
    job = rnd.jobs[jid]
    return (job.pool, job.g, job.workers)


def tname(t: TypeKey) -> str:
    pool = "".join(ch if ch.isalnum() else "_" for ch in t[0])
    return f"{pool}_g{t[1]}_w{t[2]}"


def evictable_lp(rnd: Round, protect: bool, pools: Collection[str] | None = None,
                 jobs: Iterable[int] | None = None) -> dict[int, list[tuple[int, int]]]:
    """Evictable LP jobs per GPU (global index) with their milli on it, by job id; only jobs of
    ``pools`` if given, and only the running jobs among ``jobs`` if given."""
    first = rnd.state.node_first_gpu.tolist()
    per_gpu: dict[int, list[tuple[int, int]]] = {}
    running = rnd.running
    # in job order, so each GPU's list comes out sorted
    for jid in sorted(running if jobs is None else (j for j in jobs if j in running)):
        run = running[jid]
        job = run.job
        if (job.cls is not JobClass.LP or (pools is not None and job.pool not in pools)
                or (protect and run.in_window(rnd.time))):
            continue
        m = milli_per_gpu(job.g)
        for node, gpus in run.placement:
            base = first[node]
            for lg in gpus:
                on = per_gpu.setdefault(base + lg, [])
                if on and on[-1][0] == jid:   # two fractional workers of one job on a GPU
                    on[-1] = (jid, on[-1][1] + m)
                else:
                    on.append((jid, m))
    return per_gpu


def pool_classes(rnd: Round, lo: int, hi: int, per_gpu: Mapping[int, list[tuple[int, int]]],
                 nodes: Collection[int] | None = None) -> dict[int, list[GpuClass]]:
    """The GPU classes of each node lo..hi−1 (only of ``nodes`` among them, if given), by first
    GPU. A class that no eviction can free any milli of (``fixed`` = 1000: HP or protected LP
    only) hosts nothing and is left out: a whole GPU needs ``fixed`` = 0, a fractional worker
    1000 − ``fixed`` ≥ g > 0."""
    if hi <= lo:
        return {}
    st = rnd.state
    g0 = int(st.node_first_gpu[lo])
    g1 = int(st.node_first_gpu[hi - 1] + st.node_gpus[hi - 1])
    used = st.gpu_used[g0:g1]
    # only GPUs with room or LP work can be in a class: a full GPU without LP has fixed = 1000
    # (on a backlogged pool most GPUs are such, so they are not walked)
    walk = (used < MILLI) | (used > st.gpu_hp[g0:g1])
    if nodes is not None:
        chosen = np.zeros(hi - lo, dtype=bool)
        chosen[np.fromiter(nodes, dtype=np.int64, count=len(nodes)) - lo] = True
        walk &= chosen[st.gpu_node[g0:g1] - lo]
    at = np.flatnonzero(walk)
    gpus = at + g0
    first = st.node_first_gpu
    groups: dict[int, dict[tuple, list[int]]] = {}
    for gi, n, u, lg in zip(gpus.tolist(), st.gpu_node[gpus].tolist(), used[at].tolist(),
                            (gpus - first[st.gpu_node[gpus]]).tolist(), strict=True):
        # groups open in order of their first GPU: the classes come out by first GPU
        groups.setdefault(n, {}).setdefault((u, tuple(per_gpu.get(gi, ()))), []).append(lg)
    out: dict[int, list[GpuClass]] = {n: [] for n in (range(lo, hi) if nodes is None else nodes)}
    for n, by_state in groups.items():
        # (most GPUs of a busy pool hold one LP job: its milli without a generator)
        out[n] = [GpuClass(n, lgs, MILLI - u, fixed, lp) for (u, lp), lgs in by_state.items()
                  if (fixed := u - (lp[0][1] if len(lp) == 1 else sum(m for _, m in lp))) < MILLI]
    return out


def _free_cost(cls: GpuClass, cost: Mapping[int, float]) -> float:
    return sum(cost.get(j, 0.0) for j, _ in cls.lp)


def _whole_costs(node: int, classes: list[GpuClass], cost: Mapping[int, float],
                 memo: dict[int, list[tuple[float, int]]]) -> list[tuple[float, int]]:
    """(cost of freeing one GPU, GPUs at that cost) of node's classes that can be freed
    entirely, cheapest first; kept in ``memo`` by node."""
    if node not in memo:
        memo[node] = sorted((0.0 if cl.room == MILLI else _free_cost(cl, cost), len(cl.gpus))
                            for cl in classes if cl.fixed == 0)
    return memo[node]


def candidate_nodes(pool_nodes: range, classes: Mapping[int, list[GpuClass]], t: TypeKey,
                    cost: Mapping[int, float], k_limit: int | None, keep: set[int],
                    memo: dict[int, list[tuple[float, int]]] | None = None) -> list[int]:
    """Nodes that can host a worker of type t, cheapest first; cut to ``k_limit + w`` (+ ``keep``).
    ``memo`` keeps each node's whole-GPU costs for the next type of the same round."""
    _pool, g, w = t
    if not k_limit:
        return hosts(pool_nodes, classes, g)
    memo = {} if memo is None else memo
    scored: list[tuple[float, int]] = []
    for n in pool_nodes:
        if g >= MILLI:
            k = gpus_per_worker(g)
            # the k cheapest GPUs, summed one by one as `sum` of the sorted per-GPU costs would
            total, left = 0.0, k
            for c, count in _whole_costs(n, classes[n], cost, memo):
                take = min(count, left)
                for _ in range(take):
                    total += c
                left -= take
                if not left:
                    scored.append((total, n))
                    break
        else:
            opts = [0.0 if cl.room >= g else _free_cost(cl, cost)
                    for cl in classes[n] if MILLI - cl.fixed >= g]
            if opts:
                scored.append((min(opts), n))
    scored.sort()
    if not k_limit:
        return [n for _, n in scored]
    top = {n for _, n in scored[: k_limit + w]}
    return [n for _, n in scored if n in top or n in keep]


def hosts(pool_nodes: range, classes: Mapping[int, list[GpuClass]], g: int) -> list[int]:
    """Nodes that can host a worker of ``g`` milli, in node order: `candidate_nodes` without a
    cut, which needs no costs (the order of a row's terms does not reach the solver: MathOpt
    exports the matrix sorted)."""
    out: list[int] = []
    if g >= MILLI:
        k = gpus_per_worker(g)
        for n in pool_nodes:
            if sum(len(cl.gpus) for cl in classes[n] if cl.fixed == 0) >= k:
                out.append(n)
    else:
        for n in pool_nodes:
            if any(MILLI - cl.fixed >= g for cl in classes[n]):
                out.append(n)
    return out


def build_block(m: mathopt.Model, rnd: Round, jobs: Iterable[int], *, evict: bool, protect: bool,
                cost: Mapping[int, float], opts: BlockOptions = DEFAULT_BLOCK_OPTIONS,
                keep: set[int] | None = None, u_name: str = "u",
                cache: ClassSource | None = None) -> Block:
    """Add the placement of ``jobs`` (pending, any class) to ``m``; LP victims iff ``evict``.

    ``u_name`` names the placed-or-not binaries (``x`` in the admission model). ``cache``: the
    GPU classes of earlier passes, reused where their nodes did not change (victims only).
    """
    st = rnd.state
    keep = keep or set()
    types: dict[TypeKey, list[int]] = defaultdict(list)
    for jid in jobs:
        if rnd.jobs[jid].pool in st.pool_index:
            types[type_of(rnd, jid)].append(jid)
    types = {t: sorted(js) for t, js in sorted(types.items())}
    pools = sorted({t[0] for t in types})
    classes: dict[int, list[GpuClass]] = {}
    if evict and cache is not None:
        for p in pools:
            classes.update(cache.classes(rnd, p, pools, protect))
    else:
        per_gpu = evictable_lp(rnd, protect, pools) if evict else {}
        for p in pools:
            classes.update(pool_classes(rnd, *st.pool_slice(p), per_gpu))

    memo: dict[int, list[tuple[float, int]]] = {}

    def candidates(k_limit: int | None) -> dict[TypeKey, list[int]]:
        return {t: candidate_nodes(range(*st.pool_slice(t[0])), classes, t, cost, k_limit, keep,
                                   memo) for t in types}

    pairs = candidates(None)
    n_pairs = sum(len(v) for v in pairs.values())
    k_limit = opts.candidates
    if k_limit is None:
        k_limit = opts.auto_k if n_pairs > opts.auto_pairs else 0
    if k_limit:
        pairs = candidates(k_limit)

    # the model is described with integer handles and written in bulk at the end (`MilpWriter`)
    w = MilpWriter(m)
    tn = {t: tname(t) for t in types}   # one name per type, not one per variable
    u = {j: w.binary(f"{u_name}_{j}") for js in types.values() for j in js}
    y: dict[tuple[TypeKey, int], int] = {}
    z: dict[int, int] = {}

    def zvar(j: int) -> int:
        if j not in z:
            z[j] = w.binary(f"z_{j}")
        return z[j]

    frac_workers: dict[str, int] = defaultdict(int)
    for t, js in types.items():
        if t[1] < MILLI:
            frac_workers[t[0]] += t[2] * len(js)
    whole_at: dict[int, list[TypeKey]] = defaultdict(list)
    frac_at: dict[int, list[TypeKey]] = defaultdict(list)
    for t, nodes in pairs.items():
        for n in nodes:
            (whole_at if t[1] >= MILLI else frac_at)[n].append(t)

    used_classes: list[GpuClass] = []
    slots: list[list[tuple[int | None, dict[TypeKey, int]]]] = []   # per used class, by handle
    rests: list[int | None] = []
    frac_terms: dict[TypeKey, list[int]] = defaultdict(list)
    for n in sorted(set(whole_at) | set(frac_at)):
        wt, ft = whole_at.get(n, []), frac_at.get(n, [])
        pool = st.pools[int(st.node_pool[n])]
        whole_slots: list[int] = []
        whole_supply: list[tuple[int, int]] = []   # (GPUs, the 0/1 that frees them)
        free_whole = 0
        for cl in classes[n]:
            if not ft:
                # whole workers only (a pool full of LP work: most nodes of most passes): no
                # slots, the class's GPUs are a supply freed by its LP jobs — the general case's
                # variables and rows in its order, without its per-class lists
                if cl.fixed != 0:
                    continue
                lp = cl.lp
                rest = cl.n_rest = len(cl.gpus)
                cl.n_slots = 0
                cl_rest = None
                if not lp:
                    free_whole += rest
                elif len(lp) == 1:          # most classes: `zvar` inline
                    cl_rest = z.get(j := lp[0][0])
                    if cl_rest is None:
                        cl_rest = z[j] = w.binary(f"z_{j}")
                else:
                    freed_z = [zvar(j) for j, _mm in lp]
                    cl_rest = w.binary(f"f_{n}_{cl.gpus[0]}")
                    for zv in freed_z:
                        w.row([(1, cl_rest), (-1, zv)], ub=0,
                              name=f"free_{n}_{cl.gpus[0]}_{w.name(zv)}")
                if cl_rest is not None:
                    whole_supply.append((rest, cl_rest))
                used_classes.append(cl)
                slots.append([])
                rests.append(cl_rest)
                continue
            can_whole = bool(wt) and cl.fixed == 0
            frac_here = [t for t in ft if MILLI - cl.fixed >= t[1]]
            if not can_whole and not frac_here:
                continue
            cl.n_rest = 0   # (a class may come from an earlier pass's model: `ClassCache`)
            freed = [(zvar(j), mm) for j, mm in cl.lp]
            cl.n_slots = min(len(cl.gpus), frac_workers[pool]) if frac_here else 0
            loads: list[list[tuple[float, int]]] = []   # 1000·e_s + Σ_t g_t·q_{t,s}
            cl_slots: list[tuple[int | None, dict[TypeKey, int]]] = []
            for s in range(cl.n_slots):
                tag = f"{n}_{cl.gpus[s]}"
                e = w.binary(f"e_{tag}") if can_whole else None
                qs = {t: w.integer(lb=0, ub=(MILLI - cl.fixed) // t[1], name=f"q_{tn[t]}_{tag}")
                      for t in frac_here}
                load: list[tuple[float, int]] = [(MILLI, e)] if e is not None else []
                load += [(t[1], q) for t, q in qs.items()]
                w.row([*load, *((-mm, zv) for zv, mm in freed)], ub=cl.room, name=f"gpucap_{tag}")
                cl_slots.append((e, qs))
                loads.append(load)
                if e is not None:
                    whole_slots.append(e)
                for t, q in qs.items():
                    frac_terms[t].append(q)
            if opts.symmetry_breaking:   # slots of a class are interchangeable: order by load
                for s in range(1, len(loads)):
                    w.row([*loads[s - 1], *((-a, x) for a, x in loads[s])], ub=0,
                          name=f"sym_{n}_{cl.gpus[s]}")
            rest = len(cl.gpus) - cl.n_slots
            cl_rest = None
            if can_whole and rest > 0:
                cl.n_rest = rest
                if not freed:               # empty GPUs: a constant supply
                    free_whole += rest
                elif len(freed) == 1:       # one LP job: evicting it frees the class
                    cl_rest = freed[0][0]
                else:                       # several: f_c ≤ z_j for each of them
                    cl_rest = w.binary(f"f_{n}_{cl.gpus[0]}")
                    for zv, _mm in freed:
                        w.row([(1, cl_rest), (-1, zv)], ub=0,
                              name=f"free_{n}_{cl.gpus[0]}_{w.name(zv)}")
                if cl_rest is not None:
                    whole_supply.append((rest, cl_rest))
            used_classes.append(cl)
            slots.append(cl_slots)
            rests.append(cl_rest)
        if wt:
            for t in wt:
                k = gpus_per_worker(t[1])
                y[(t, n)] = w.integer(lb=0, ub=min(t[2] * len(types[t]), int(st.node_gpus[n]) // k),
                                      name=f"y_{tn[t]}_{n}")
            taken = [*((gpus_per_worker(t[1]), y[(t, n)]) for t in wt), *((-1, e) for e in whole_slots)]
            # GPUs taken whole beyond the slots come from empty or freed classes, and every
            # slot marked whole is taken by a worker (one ranged row when nothing is freed)
            if whole_supply:
                w.row([*taken, *((-r, v) for r, v in whole_supply)], ub=free_whole, name=f"whole_{n}")
                if whole_slots:
                    w.row(taken, lb=0, name=f"slots_{n}")
            else:
                w.row(taken, lb=0 if whole_slots else -math.inf, ub=free_whole, name=f"whole_{n}")

    for t, js in types.items():
        workers = [y[(t, n)] for n in pairs[t] if (t, n) in y] if t[1] >= MILLI else frac_terms[t]
        w.row([*((1, v) for v in workers), *((-t[2], u[j]) for j in js)], lb=0, ub=0,
              name=f"gang_{tn[t]}")
    var = w.flush()
    for cl, cl_slots, cl_rest in zip(used_classes, slots, rests, strict=True):
        cl.slot_vars = [(None if e is None else var[e], {t: var[q] for t, q in qs.items()})
                        for e, qs in cl_slots]
        cl.rest = None if cl_rest is None else var[cl_rest]
    return Block(types, {j: var[h] for j, h in u.items()}, {k: var[h] for k, h in y.items()},
                 {j: var[h] for j, h in z.items()}, used_classes, bool(k_limit), n_pairs, w)


def decode_block(rnd: Round, b: Block, value: Mapping[mathopt.Variable, float]
                 ) -> tuple[dict[int, Placement], list[int]]:
    """Placements (node + local GPU indices) and victims from solver values."""
    # by id: a solver's values are keyed by new Variable objects, and a lookup by another
    # object of the same variable costs MathOpt's Python __hash__, __eq__ and __bool__
    by_id = {v.id: x for v, x in value.items()}

    def iv(var: mathopt.Variable | None) -> int:
        return 0 if var is None else round(by_id.get(var.id, 0.0))

    whole_gpus: dict[int, list[int]] = defaultdict(list)
    frac_pos: dict[TypeKey, list[WorkerPlacement]] = defaultdict(list)
    for cl in b.classes:
        for s, (e, qs) in enumerate(cl.slot_vars):
            if iv(e):
                whole_gpus[cl.node].append(cl.gpus[s])
            for t, q in qs.items():
                frac_pos[t].extend([(cl.node, (cl.gpus[s],))] * iv(q))
    # beyond the slots, GPUs are taken from empty classes first, then from freed ones
    need: dict[int, int] = defaultdict(int)
    for (t, n), var in b.y.items():
        need[n] += gpus_per_worker(t[1]) * iv(var)
    for n, gl in whole_gpus.items():
        need[n] -= len(gl)
    empty = [cl for cl in b.classes if cl.n_rest and cl.rest is None]
    freed = [cl for cl in b.classes if cl.n_rest and cl.rest is not None and iv(cl.rest)]
    for cl in (*empty, *freed):
        count = min(cl.n_rest, need[cl.node])
        if count > 0:
            whole_gpus[cl.node].extend(cl.gpus[cl.n_slots:cl.n_slots + count])
            need[cl.node] -= count
    whole_pos: dict[TypeKey, list[WorkerPlacement]] = defaultdict(list)
    for (t, n), var in b.y.items():
        k = gpus_per_worker(t[1])
        for _ in range(iv(var)):
            take, whole_gpus[n] = whole_gpus[n][:k], whole_gpus[n][k:]
            if len(take) < k:
                raise DecodeError(f"node {n}: fewer whole GPUs than workers need")
            whole_pos[t].append((n, tuple(sorted(take))))
    placements: dict[int, Placement] = {}
    for t, js in b.types.items():
        pos = whole_pos[t] if t[1] >= MILLI else frac_pos[t]
        placed = [j for j in js if iv(b.u[j])]
        if len(pos) != t[2] * len(placed):
            raise DecodeError(f"type {t}: {len(pos)} worker slots for {len(placed)} gangs")
        for idx, j in enumerate(placed):
            placements[j] = tuple(pos[idx * t[2]:(idx + 1) * t[2]])
    victims = sorted(j for j, v in b.z.items() if iv(v))
    return placements, drop_idle_victims(rnd, placements, victims)


def drop_idle_victims(rnd: Round, placements: Mapping[int, Placement], victims: list[int]) -> list[int]:
    """Keep only victims with a GPU that a new placement uses (others were evicted for nothing)."""
    touched = {(n, g) for pl in placements.values() for n, gpus in pl for g in gpus}
    return [j for j in victims
            if any((n, g) in touched for n, gpus in rnd.running[j].placement for g in gpus)]


def block_hint(rnd: Round, b: Block, decision: Decision) -> dict[mathopt.Variable, float] | None:
    """Block values reproducing ``decision`` (e.g. the greedy's), or None if it has no image.

    Slots of a class are filled in increasing load (empty, fractional, whole) to satisfy the
    symmetry-breaking order. Variables outside the block are left to the caller.
    """
    st = rnd.state
    h: dict[mathopt.Variable, float] = {v: 0.0 for v in b.u.values()}
    h.update({v: 0.0 for v in b.y.values()})
    h.update({v: 0.0 for v in b.z.values()})
    whole: set[int] = set()
    frac: dict[int, dict[TypeKey, int]] = defaultdict(lambda: defaultdict(int))
    for jid, pl in decision.placements.items():
        if jid not in b.u:
            continue
        h[b.u[jid]] = 1.0
        t = type_of(rnd, jid)
        for n, gpus in pl:
            if t[1] >= MILLI:
                if (t, n) not in b.y:
                    return None
                h[b.y[(t, n)]] += 1.0
                whole.update(int(st.node_first_gpu[n]) + g for g in gpus)
            else:
                frac[int(st.node_first_gpu[n]) + gpus[0]][t] += 1
    first = st.node_first_gpu.tolist()
    used_nodes = {int(st.gpu_node[g]) for g in (*whole, *frac)}
    seen: set[int] = set()
    for cl in b.classes:
        for e, qs in cl.slot_vars:
            if e is not None:
                h[e] = 0.0
            for q in qs.values():
                h[q] = 0.0
        if cl.rest is not None:
            h.setdefault(cl.rest, 0.0)   # a complete hint: the solver need not fill it in
        if cl.node not in used_nodes:   # nothing of the decision here (most classes)
            continue
        base = first[cl.node]
        gl = [base + g for g in cl.gpus]
        seen.update(gl)
        fr = sorted((g for g in gl if g in frac), key=lambda g: sum(t[1] * c for t, c in frac[g].items()))
        wh = [g for g in gl if g in whole]
        if len(fr) > cl.n_slots:
            return None
        ws = min(len(wh), cl.n_slots - len(fr))
        slots: list[int | None] = [*([None] * (cl.n_slots - len(fr) - ws)), *fr, *wh[:ws]]
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
        if len(wh) - ws > cl.n_rest:
            return None
        if len(wh) > ws and cl.rest is not None:
            h[cl.rest] = 1.0
    if not (whole | set(frac)) <= seen:
        return None
    for j in decision.victims:
        if j in b.z:
            h[b.z[j]] = 1.0
    return h
