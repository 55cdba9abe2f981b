"""Phase 2 of the preemption MILP without a solver, where it is a knapsack cover with one answer.

When every gang of the model is a single worker of one whole GPU (the usual contested pass of a
pool full of LP work: an HP arrival that does not fit the free GPUs) and phase 1 placed them all,
phase 2 asks: which LP jobs to evict, at least cost, so that N GPUs come free. With no empty GPU
in the model (there is none: a one-GPU gang would have started on it) and every GPU class that a
whole worker may take held by exactly one evictable LP job, evicting job j frees ``G_j`` GPUs
(its classes' GPUs) and nothing else frees any: the model's feasible victim sets are exactly the
sets with ``Σ G_j ≥ N`` (the per-node rows only cap ``y_n`` by the GPUs freed on node n, and the
gang row needs ``Σ_n y_n = N``). `solve_cover` finds the cheapest such set and the cheapest other
one; when the runner-up costs more than the solver's stopping gap allows above the optimum, every
answer SCIP can return has exactly these victims (a solution it stops with is within
``rel_gap``/``abs_gap`` of its dual bound, which is at most the optimum), and when the freed GPUs
leave no choice of nodes (exactly N of them, or all on one node) the values of every variable —
and so the decoded placement — are the ones SCIP would report. Anything else: None, and the model
is solved as before. Why the search is exact: ``formulations/preemption.md`` ("A knapsack cover
answered without a solve").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ortools.math_opt.python import mathopt

from gfs_opt.model import MILLI
from gfs_opt.preempt.block import Block

#: ratios closer than this (relative) count as a tie
RATIO_SEP = 1e-9


@dataclass(frozen=True, slots=True)
class Cover:
    """The unique cheapest victim set and the values of the block that state it."""

    victims: tuple[int, ...]
    cost: float
    values: dict[mathopt.Variable, float]


def _items(b: Block) -> tuple[dict[int, int], dict[int, dict[int, int]]] | None:
    """GPUs freed by each LP job (``G_j``) and by node; None when the model is not a plain cover."""
    freed: dict[int, int] = defaultdict(int)
    by_node: dict[int, dict[int, int]] = {}
    z = b.z
    for cl in b.classes:
        if cl.slot_vars or cl.fixed != 0:
            return None
        if cl.rest is None:                 # empty GPUs (or a class no whole worker took)
            if cl.n_rest:
                return None
            continue
        # the block hands out one Variable object per variable: the class's own z_j, or an f_c
        # of several LP jobs
        if len(cl.lp) != 1 or z.get(j := cl.lp[0][0]) is not cl.rest:
            return None
        freed[j] += cl.n_rest
        node = by_node.setdefault(j, {})
        node[cl.node] = node.get(cl.node, 0) + cl.n_rest
    if set(freed) != set(b.z):
        return None
    return freed, by_node


def _top_two(items: list[tuple[float, int, int]], need: int) -> tuple[float, frozenset[int], float]:
    """Cheapest set of (cost, size, job) items with Σ size ≥ need, its jobs, and the cheapest
    cost of any other such set (inf if none). Two best per covered amount (capped at ``need``):
    the two branches of an item (without, with) are different sets, so the two smallest of their
    union are the two best sets (k-best dynamic programming)."""
    inf = float("inf")
    # best[x]: up to two (cost, jobs) of distinct sets covering at least x, cheapest first
    best: list[list[tuple[float, frozenset[int]]]] = [[] for _ in range(need + 1)]
    best[0] = [(0.0, frozenset())]
    for cost, size, job in items:
        new = [list(b) for b in best]
        for x in range(need + 1):
            src = best[max(0, x - size)]
            if not src:
                continue
            merged = new[x] + [(c + cost, s | {job}) for c, s in src]
            merged.sort(key=lambda e: e[0])
            new[x] = merged[:2]
        best = new
    top = best[need]
    if not top:
        return inf, frozenset(), inf
    return top[0][0], top[0][1], (top[1][0] if len(top) > 1 else inf)


def solve_cover(b: Block, cost: dict[int, float], rel_gap: float, abs_gap: float,
                hint_cost: float) -> Cover | None:
    """Phase 2's answer for a model of one-GPU single-worker gangs, all placed, warm-started at
    ``hint_cost``: the cheapest victim set when every solution SCIP may stop with has exactly
    these victims, and the workers' nodes are forced; None otherwise."""
    if len(b.types) != 1:
        return None
    (t, jobs), = b.types.items()
    if t[1] != MILLI or t[2] != 1 or not jobs:
        return None
    got = _items(b)
    if got is None:
        return None
    freed, by_node = got
    need = len(jobs)
    found = _lp_integral(freed, cost, need)
    if found is not None:
        chosen, best = found
        slack = 1.5 * (rel_gap * max(1.0, best) + abs_gap)
        if hint_cost - best <= slack:
            found = None   # SCIP may stop at the warm start, within its gap
    if found is None:
        best, picked, runner_up = _ip_unique(freed, cost, need)
        slack = 1.5 * (rel_gap * max(1.0, best) + abs_gap)
        if best == float("inf") or runner_up - best <= slack:
            return None    # another solution within the gap: SCIP's pick
        chosen = sorted(picked)
    nodes: dict[int, int] = defaultdict(int)
    for j in chosen:
        for n, g in by_node[j].items():
            nodes[n] += g
    if sum(nodes.values()) != need and len(nodes) != 1:
        return None   # more GPUs freed than needed, on several nodes: which ones is SCIP's pick
    values: dict[mathopt.Variable, float] = {v: 1.0 for v in b.u.values()}
    values.update({v: 0.0 for v in b.y.values()})
    chosen_set = set(chosen)
    values.update({v: (1.0 if j in chosen_set else 0.0) for j, v in b.z.items()})
    for n, g in nodes.items():
        y = b.y.get((t, n))
        if y is None:
            return None
        values[y] = float(min(g, need))
    return Cover(tuple(sorted(chosen)), best, values)


def _lp_integral(freed: dict[int, int], cost: dict[int, float], need: int
                 ) -> tuple[list[int], float] | None:
    """The LP relaxation's optimum (jobs by cost per GPU freed, the last one partly) when it is
    unique and integral — then it is the MILP's only optimum, found at SCIP's root; None
    otherwise."""
    ranked = sorted((cost[j] / g, j) for j, g in freed.items())
    chosen: list[int] = []
    covered = 0
    for _ratio, j in ranked:
        if covered >= need:
            break
        chosen.append(j)
        covered += freed[j]
    if covered != need:
        return None   # the LP takes a fraction of the last job
    if len(chosen) < len(ranked):
        last, nxt = ranked[len(chosen) - 1][0], ranked[len(chosen)][0]
        if not last * (1.0 + RATIO_SEP) < nxt:
            return None   # two LP optima
    return chosen, sum(cost[j] for j in chosen)


def _ip_unique(freed: dict[int, int], cost: dict[int, float], need: int
               ) -> tuple[float, frozenset[int], float]:
    """The cheapest victim set freeing ``need`` GPUs, its cost and the cost of the cheapest other
    one (inf: none)."""
    # jobs freeing equally many GPUs (capped at need) differ only in cost: the two best sets use,
    # per size g, only the ⌈need/g⌉ + 1 cheapest (a minimal set has at most ⌈need/g⌉ of them; the
    # runner-up swaps one for the next or adds the cheapest unused one)
    by_size: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for j, g in freed.items():
        by_size[min(g, need)].append((cost[j], j))
    items: list[tuple[float, int, int]] = []
    for g, js in sorted(by_size.items()):
        js.sort()
        items += [(c, g, j) for c, j in js[: -(-need // g) + 1]]
    if any(c <= 0.0 for c, _g, _j in items):   # a free victim: equal-cost sets abound
        return float("inf"), frozenset(), float("inf")
    return _top_two(items, need)
