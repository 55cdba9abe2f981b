"""Batch preemption MILP of the HP pass (GFS-SPEC §3; math in formulations/preemption.md).

One model places every pending HP gang at once and chooses LP victims, exactly at GPU level
(`gfs_opt.preempt.block` builds the placement part). The objective is lexicographic
(`gfs_opt.preempt.objective`): phase 1 maximises the waiting-weighted HP value P; phase 2 pins P
and minimises the eviction cost C. Warm start: the greedy PTS pass; on time-out or failure the
greedy answer is returned, flagged as a fallback. When the greedy places every gang of the model
and its image is a solution, phase 1's optimum is known (Σ_i v_i) and only phase 2 is solved;
on a small model whose greedy image leaves gangs waiting, CP-SAT may prove that image optimal
instead of SCIP solving phase 1 (`gfs_opt.solve.certify`), and likewise for phase 2. Where
phase 2 is a knapsack cover whose answer every SCIP stop would report, it is taken without a
solve (`gfs_opt.preempt.cover`); `PreemptResult.routes` says how each phase was answered. A
caller solving pass after pass keeps a `PassCache`: the GPU classes and running usage of nodes
that did not change are reused, and the model is the one built from scratch.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

from ortools.math_opt.python import mathopt

from gfs_opt.milp_writer import set_objective
from gfs_opt.model import MILLI, Decision, JobClass, Round
from gfs_opt.preempt.block import (
    Block,
    BlockOptions,
    DecodeError,
    block_hint,
    build_block,
    decode_block,
)
from gfs_opt.preempt.class_cache import ClassCache
from gfs_opt.preempt.cover import solve_cover
from gfs_opt.preempt.hp_pass import greedy_preemption
from gfs_opt.preempt.objective import (
    DEFAULT_OBJECTIVE,
    PreemptObjective,
    PreemptScore,
    RunningUsage,
    check_decision,
    hp_value,
    lp_eviction_costs,
    running_usage,
    score,
)
from gfs_opt.solve import (
    DEFAULT_SOLVER,
    Outcome,
    SolverOptions,
    add_row,
    certify,
    export,
    report,
    satisfies,
)
from gfs_opt.solve import solve as run_solver


@dataclass(frozen=True, slots=True)
class PreemptOptions:
    """Model options. ``candidates``: None = automatic, 0 = all nodes, K = top-K nodes per type."""

    objective: PreemptObjective = DEFAULT_OBJECTIVE
    hard_guarantee: bool | None = None   # None: take the round's params.hard_guarantee
    candidates: int | None = None
    auto_pairs: int = 6000               # automatic restriction above this many (type, node) pairs
    auto_k: int = 32
    symmetry_breaking: bool = True

    def block(self) -> BlockOptions:
        return BlockOptions(self.candidates, self.auto_pairs, self.auto_k, self.symmetry_breaking)


DEFAULT_PREEMPT_OPTIONS = PreemptOptions()
#: phase 2 tries a certificate (`_certified`) only on models up to this size: SCIP's fixed set-up
#: (≈ 5 ms) dominates small models, while on large ones a failed proof costs more than it saves
#: (1.0 s on `instances/contested-300.json`, 6,879 variables). 100 since the block counts whole
#: GPUs per class (half the variables): at 200, failed proofs on the long HP backlog cost
#: 0.6 s of 5.2 s at chronus@0.25 and of 9.1 s at @0.4; toy, paper-a100 and the full trace's
#: last quarter are unchanged (benchmarks/milp_sections.py CASE --certify-max-vars N)
CERTIFY_MAX_VARS = 100


@dataclass(slots=True)
class PassCache:
    """What `solve_preemption` keeps from one pass to the next, for a caller that solves pass
    after pass (gfs-milp): the pools' GPU classes and the running jobs' usage, each corrected
    for what changed since (issue 39). Neither changes an answer."""

    classes: ClassCache = field(default_factory=ClassCache)
    usage: RunningUsage = field(default_factory=RunningUsage)


@dataclass(slots=True)
class PreemptModel:
    model: mathopt.Model
    block: Block
    value: dict[int, int]                 # v_i of pending HP jobs in the model
    cost: dict[int, float]                # c_j of evictable LP jobs

    @property
    def u(self) -> dict[int, mathopt.Variable]:
        return self.block.u

    def placed_terms(self) -> dict[mathopt.Variable, float]:
        """P = Σ_i v_i·u_i as {u_i: v_i}."""
        return {v: self.value[j] for j, v in self.block.u.items()}

    def evicted_terms(self) -> dict[mathopt.Variable, float]:
        """C = Σ_j c_j·z_j as {z_j: c_j}."""
        return {v: self.cost[j] for j, v in self.block.z.items()}

    @property
    def placed(self) -> mathopt.LinearExpression:
        """P"""
        return mathopt.LinearExpression(mathopt.fast_sum(c * v for v, c in self.placed_terms().items()))

    @property
    def evicted(self) -> mathopt.LinearExpression:
        """C"""
        return mathopt.LinearExpression(
            mathopt.fast_sum(c * v for v, c in self.evicted_terms().items()))

    @property
    def restricted(self) -> bool:
        return self.block.restricted

    def satisfied(self, values: dict[mathopt.Variable, float]) -> bool:
        """`gfs_opt.solve.satisfies` on the model; from the block's own rows while the model
        holds nothing else (as `build_model` leaves it), without exporting it."""
        w = self.block.writer
        if w is None or (self.model.get_num_linear_constraints(), self.model.get_num_variables()) != (
                w.n_rows, w.n_vars):
            return satisfies(self.model, values)
        return w.satisfied({v.id: x for v, x in values.items()})


class _PoolCosts(Mapping[int, float]):
    """`lp_eviction_costs` of the pools' LP jobs, priced on first use: only a model restricted
    to candidate nodes reads them all."""

    def __init__(self, rnd: Round, pools: Collection[str], obj: PreemptObjective) -> None:
        self._args = (rnd, pools, obj)
        self.costs: dict[int, float] | None = None

    def _all(self) -> dict[int, float]:
        if self.costs is None:
            self.costs = lp_eviction_costs(*self._args)
        return self.costs

    def __getitem__(self, j: int) -> float:
        return self._all()[j]

    def __iter__(self) -> Iterator[int]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def build_model(rnd: Round, opts: PreemptOptions = DEFAULT_PREEMPT_OPTIONS,
                keep_nodes: set[int] | None = None, cache: ClassCache | None = None
                ) -> PreemptModel:
    """The phase-1 model (objective: maximise P); `solve_preemption` adds phase 2. ``cache``:
    the GPU classes of the pool's earlier passes (the same model, built from what changed)."""
    obj = opts.objective
    protect = rnd.params.hard_guarantee if opts.hard_guarantee is None else opts.hard_guarantee
    m = mathopt.Model(name="gfs_preemption")
    hp = [j for j in rnd.pending_hp if rnd.jobs[j].cls is JobClass.HP]
    pools = {rnd.jobs[j].pool for j in hp}   # LP jobs elsewhere cannot make room for these
    every = _PoolCosts(rnd, pools, obj)
    b = build_block(m, rnd, hp, evict=True, protect=protect, cost=every, opts=opts.block(),
                    keep=keep_nodes, cache=cache)
    value = {j: hp_value(rnd, j, obj) for j in b.u}
    # c_j of the model's victims only, unless choosing candidate nodes priced them all
    known = every.costs if every.costs is not None else lp_eviction_costs(rnd, pools, obj, b.z)
    cost = {j: known[j] for j in b.z}
    pm = PreemptModel(m, b, value, cost)
    set_objective(m, pm.placed_terms(), maximize=True)
    return pm


def decode(rnd: Round, pm: PreemptModel, out: Outcome) -> Decision:
    placements, victims = decode_block(rnd, pm.block, out.values)
    return Decision(placements=placements, victims=victims)


def warm_start(rnd: Round, pm: PreemptModel, decision: Decision) -> dict[mathopt.Variable, float] | None:
    return block_hint(rnd, pm.block, decision)


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
    # how each phase was answered: "bound" (phase 1: the greedy placed every gang), "cover"
    # (phase 2: a knapsack cover with one answer, `gfs_opt.preempt.cover`), "certified"
    # (CP-SAT proved the warm start optimal), "solved" (SCIP), "" (no such phase)
    routes: tuple[str, str] = ("", "")


def greedy_decision(rnd: Round) -> Decision:
    """The warm start: GFS's greedy HP pass on the round, without eviction history (E(n) only
    breaks ties the model does not see)."""
    return greedy_preemption(rnd)


def solve_preemption(rnd: Round, opts: PreemptOptions = DEFAULT_PREEMPT_OPTIONS,
                     solver: SolverOptions = DEFAULT_SOLVER,
                     greedy: Decision | None = None, use_greedy: bool = True,
                     cache: PassCache | None = None) -> PreemptResult:
    """Exact HP pass: lexicographic MILP, warm-started and, if it fails, replaced by the greedy.
    ``cache``: the caller's `PassCache`, kept from one pass to the next."""
    t0 = time.perf_counter()
    if greedy is None and use_greedy:
        greedy = greedy_decision(rnd)
    g_score = score(rnd, greedy, opts.objective) if greedy is not None else None
    keep = {n for pl in (greedy.placements.values() if greedy else ()) for n, _ in pl}
    pm = build_model(rnd, opts, keep, None if cache is None else cache.classes)
    n_vars, n_cons = pm.model.get_num_variables(), pm.model.get_num_linear_constraints()
    res = PreemptResult(Decision(), PreemptScore(0, 0.0), greedy, g_score, n_vars=n_vars,
                        n_cons=n_cons, restricted=pm.restricted)
    hints = []
    if greedy is not None and (h := warm_start(rnd, pm, greedy)) is not None:
        hints.append(h)

    if not pm.u:
        p1 = Outcome("optimal", 0.0, 0.0, 0.0, 0.0, {})
        res.phase1 = p1
        return _finish(rnd, pm, res, p1, None, opts, solver, t0, cache)

    r1 = "bound"
    known = _phase1_by_bound(pm, greedy, hints)
    if known is None:
        known, r1 = _phase1_certified(pm, hints, solver), "certified"
    if known is None:
        r1 = "solved"
    p1 = known if known is not None else run_solver(pm.model, solver, hints=hints)
    res.phase1 = p1
    p2, r2 = None, ""
    left = solver.time_limit - (time.perf_counter() - t0)
    if p1.has_solution and p1.status == "optimal" and left > 0:
        t1 = time.perf_counter()
        # every gang placed by the greedy's image: phase 2 may be a cover with one answer
        p2 = _covered(pm, greedy, solver, t1) if r1 == "bound" and greedy is not None else None
        r2 = "cover"
    if p2 is None and p1.has_solution and p1.status == "optimal" and left > 0:
        best_p = round(p1.objective or 0.0)
        placed = pm.placed_terms()
        pin = add_row(pm.model, [(c, v) for v, c in placed.items()], lb=best_p - 0.5,
                      name="pin_placed_value")
        t1 = time.perf_counter()
        set_objective(pm.model, pm.evicted_terms(), maximize=False)
        # cheapest first: some back-ends (CP-SAT) use only the first hint
        hints2 = sorted([p1.values, *(h for h in hints if h is not p1.values
                                      and _placed_of(pm, h) >= best_p - 0.5)],
                        key=lambda h: _cost_of(pm, h))
        p2, r2 = _certified(pm, hints2, p1, solver, left), "certified"
        if p2 is None:
            r2 = "solved"
            p2 = run_solver(pm.model, solver, time_limit=left - (time.perf_counter() - t1),
                            hints=hints2)
        # restore phase 1 so the model object still means what `build_model` promised
        pm.model.delete_linear_constraint(pin)
        set_objective(pm.model, placed, maximize=True)
    res.phase2 = p2
    res.routes = (r1, r2)
    return _finish(rnd, pm, res, p1, p2, opts, solver, t0, cache)


def _phase1_by_bound(pm: PreemptModel, greedy: Decision | None,
                     hints: list[dict[mathopt.Variable, float]]) -> Outcome | None:
    """Phase 1's answer without a solve when the greedy's image places every gang of the model
    and satisfies every constraint: P cannot exceed Σ_i v_i, so that image is an optimal phase-1
    solution (bound Σ_i v_i, gap 0), and phase 2 starts from it. None otherwise (then solve)."""
    if greedy is None or not hints or not all(j in greedy.placements for j in pm.u):
        return None
    values = hints[0]
    if not all(values.get(v, 0.0) > 0.5 for v in pm.u.values()) or not pm.satisfied(values):
        return None
    upper = float(sum(pm.value.values()))
    return Outcome("optimal", upper, upper, 0.0, 0.0, values)


def _covered(pm: PreemptModel, greedy: Decision, solver: SolverOptions, t0: float
             ) -> Outcome | None:
    """Phase 2's answer when it is a knapsack cover with one answer (`gfs_opt.preempt.cover`):
    the values every solve would report, so no solve; None otherwise. ``greedy``: the warm
    start's decision (its image is the hint: z_j = 1 for its victims in the model)."""
    victims = set(greedy.victims)
    cover = solve_cover(pm.block, pm.cost, solver.rel_gap, solver.abs_gap,
                        hint_cost=sum(c for j, c in pm.cost.items() if j in victims))
    if cover is None:
        return None
    # every variable of such a model is a u, y or z: the cover states them all
    return Outcome("optimal", cover.cost, cover.cost, 0.0, time.perf_counter() - t0, cover.values,
                   detail="unique knapsack cover")


def _phase1_certified(pm: PreemptModel, hints: list[dict[mathopt.Variable, float]],
                      solver: SolverOptions) -> Outcome | None:
    """Phase 1's answer when the greedy's image (``hints[0]``) is a solution that a lighter
    back-end proves optimal although it leaves gangs waiting (`gfs_opt.solve.certify`); None
    otherwise (then solve). Its values are spelled out for every variable, as a solve reports
    them, so phase 2 is handed the hints it would have had.

    SCIP, warm-started from such an image, returned that image in every case measured (all 95 of
    the long HP backlog's phase-1 solves; replays digest the same on the toy, `small`,
    paper-a100, the full trace's last quarter and the backlog). It is not bound to: SCIP may
    report another solution of the same P, and then the decision can differ while being just as
    optimal (the hypothesis test compares P and C, not the placements)."""
    if not hints or pm.model.get_num_variables() > CERTIFY_MAX_VARS:
        return None
    image = hints[0]
    if not pm.satisfied(image):
        return None
    # P = Σ_i v_i·u_i with integer v_i: nothing beats the image unless by a whole unit
    proof = certify(pm.model, image, solver, time_limit=0.1 * solver.time_limit, integral=True)
    if proof is None:
        return None
    proof.values = {v: image.get(v, 0.0) for v in pm.model.variables()}
    return proof


def _certified(pm: PreemptModel, hints: list[dict[mathopt.Variable, float]], p1: Outcome,
               solver: SolverOptions, time_limit: float) -> Outcome | None:
    """Phase 2's answer when the cheapest hint is feasible, strictly cheaper than the others
    (so the solver could not have preferred another one) and a lighter back-end proves it optimal
    (`gfs_opt.solve.certify`); None otherwise (then solve)."""
    if (not hints or pm.model.get_num_variables() > CERTIFY_MAX_VARS
            or (len(hints) > 1 and _cost_of(pm, hints[1]) <= _cost_of(pm, hints[0]))):
        return None
    best = hints[0]
    if best is not p1.values and not satisfies(pm.model, best):
        return None
    # a proof that fails must not starve the solve that follows: a tenth of what is left
    return certify(pm.model, best, solver, time_limit=0.1 * time_limit)


def _placed_of(pm: PreemptModel, values: dict[mathopt.Variable, float]) -> float:
    return sum(pm.value[j] * values.get(v, 0.0) for j, v in pm.u.items())


def _cost_of(pm: PreemptModel, values: dict[mathopt.Variable, float]) -> float:
    return sum(pm.cost[j] * values.get(v, 0.0) for j, v in pm.block.z.items())


def _finish(rnd: Round, pm: PreemptModel, res: PreemptResult, p1: Outcome, p2: Outcome | None,
            opts: PreemptOptions, solver: SolverOptions, t0: float,
            cache: PassCache | None = None) -> PreemptResult:
    final = p2 if p2 is not None and p2.has_solution else p1
    problems: list[str] = []
    decision: Decision | None = None
    # both checks below start from it
    usage = running_usage(rnd) if cache is None else cache.usage.of(rnd)
    if final.has_solution or not pm.u:
        try:
            decision = decode(rnd, pm, final)
            problems = check_decision(rnd, decision, usage)
        except DecodeError as exc:
            problems = [str(exc)]
    milp_score = score(rnd, decision, opts.objective) if decision is not None and not problems else None
    status = _status(p1, p2)
    # a greedy answer that breaks a rule (e.g. hard_guarantee) only stands in when nothing else exists
    protect = rnd.params.hard_guarantee if opts.hard_guarantee is None else opts.hard_guarantee
    greedy_ok = res.greedy is not None and not check_decision(rnd, res.greedy, usage) and not (
        protect and any(rnd.running[j].in_window(rnd.time) for j in res.greedy.victims))
    # a solve cut short (time-out, error) keeps its incumbent only if it beats the greedy answer
    improves = (milp_score is not None and res.greedy_score is not None
                and not res.greedy_score.at_least(milp_score))
    use_greedy = milp_score is None or (
        greedy_ok and res.greedy_score is not None and (
            not milp_score.at_least(res.greedy_score) or (status != "optimal" and not improves)))
    if use_greedy and res.greedy is not None:
        if problems:
            status, why = "error", "MILP solution rejected: " + "; ".join(problems[:3])
        elif milp_score is None:
            detail = f": {final.detail}" if status == "error" and final.detail else ""
            why = f"no MILP solution ({status}{detail})"
        elif not milp_score.at_least(res.greedy_score):  # type: ignore[arg-type]
            why = f"MILP incumbent worse than greedy ({status})"
        else:
            why = f"MILP stopped ({status}) without improving on the greedy answer"
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
        how = f", {p2.detail}" if p2.detail.startswith("warm start") else ""
        c_info = (f"eviction cost {milp_score.eviction_cost:.1f} GPU·s (bound "
                  f"{_fmt(p2.bound)}, gap {_pct(p2.gap)}{how}), ")
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
    if p2 is None and p1.objective == 0.0 and not p1.values:
        return "optimal"        # nothing pending: no model was solved
    if p2 is None:
        return "timeout"
    return "optimal" if p2.status == "optimal" else p2.status


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{100 * x:.3g}%"


def export_preemption(rnd: Round, fmt: str, opts: PreemptOptions = DEFAULT_PREEMPT_OPTIONS) -> str:
    """LP/MPS text of the preemption model with the lexicographic objective in one line:
    maximise ``P − λ·C`` with ``λ = 1/(1 + Σ_j c_j)``; since P is integral, this has exactly the
    lexicographic optima (solve it with a zero relative gap)."""
    pm = build_model(rnd, opts)
    lam = 1.0 / (1.0 + sum(pm.cost.values()))
    pm.model.maximize(pm.placed - lam * pm.evicted)
    return export(pm.model, fmt)
