"""Run the greedy and/or exact steps on one `Round` and compare them (used by `gfs-opt solve`
and benchmarks/bench_milp.py). Plain data out; printing lives in the command module.

By default the round is answered as the paper poses it (`gfs-paper`: every HP gang placed now,
with preemption), greedy against MILP. The greedy steps are a policy's own passes
(`GreedyPolicy.hp_step` / `lp_step`), the code the simulator runs, on a copy of the round: the preemption step is its HP pass, the quota step its
quota rule on the round's forecast and η and its LP pass under those quotas, each on the round as
given. On a round cut from a simulation inside the scored window (`gfs-opt instance dump`) they
return what the simulator decided there (tests/test_solve_sim_agreement.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from gfs_opt.errors import GfsError
from gfs_opt.model import MILLI, Decision, Placement, Round, SolveReport
from gfs_opt.policies import POLICIES, make_policy, policy_name
from gfs_opt.policies.base import ComposedPolicy, GreedyPolicy
from gfs_opt.policies.gfs_milp import standalone_round
from gfs_opt.preempt.boundary import patient_gangs, still_running, with_held_nodes
from gfs_opt.preempt.milp import (
    DEFAULT_PREEMPT_OPTIONS,
    PreemptOptions,
    PreemptResult,
    solve_preemption,
)
from gfs_opt.preempt.objective import PreemptScore, check_decision, score
from gfs_opt.quota.admission import lp_order_key
from gfs_opt.quota.milp import (
    DEFAULT_QUOTA_OPTIONS,
    QuotaOptions,
    QuotaResult,
    admission_problems,
    admission_value,
    solve_quota,
)
from gfs_opt.solve import DEFAULT_SOLVER, SolverOptions

METHODS = ("greedy", "milp", "both")
STEPS = ("all", "quota", "preemption")
#: the question an instance poses by default: the published GFS's step
DEFAULT_POLICY = "gfs-paper"


def greedy_policy_names() -> list[str]:
    """Registered policies whose round is greedy passes that an instance file can feed."""
    return [name for name, (cls, _opts) in POLICIES.items()
            if issubclass(cls, GreedyPolicy) and cls.standalone]


def greedy_policy(name: str) -> GreedyPolicy:
    """The policy whose greedy steps `solve_round` runs."""
    policy = make_policy(name)
    if not isinstance(policy, GreedyPolicy) or policy_name(name) not in greedy_policy_names():
        raise GfsError(f"policy '{name}' has no greedy steps for a standalone round; choose "
                       f"from {', '.join(greedy_policy_names())}")
    return policy


def _standalone(rnd: Round) -> Round:
    """The round with a copy of its state, for a pass to plan on."""
    return replace(rnd, state=rnd.state.copy())


@dataclass(slots=True)
class GreedyQuota:
    quotas: dict[tuple[str, float], int]
    admitted: list[int]
    value: float
    time_s: float
    feasible: bool          # within the MILP's chance constraint
    placements: dict[int, Placement] = field(default_factory=dict)   # where the LP pass put them


@dataclass(slots=True)
class GreedyPreempt:
    decision: Decision
    score: PreemptScore
    time_s: float
    problems: list[str]


@dataclass(slots=True)
class HeldBack:
    """HP gangs a patient policy holds back for LP window boundaries on a round, and what the
    paper's step (`gfs-paper`) does for them on the same round."""

    gangs: list[int]                 # held back by the policy
    wait_s: float                    # whole-node gangs wait up to this
    notice_s: float                  # the others up to this
    paper: GreedyPreempt             # the paper's greedy HP pass on the round
    paper_placed: list[int]          # of ``gangs``, those the paper's step places now

    def as_dict(self) -> dict[str, Any]:
        return {"gangs": self.gangs, "hp_wait_h": self.wait_s / 3600,
                "hp_notice_h": self.notice_s / 3600, "paper_placed": self.paper_placed,
                "paper_victims": sorted(self.paper.decision.victims),
                "paper_eviction_cost": self.paper.score.eviction_cost}


@dataclass(slots=True)
class RoundResult:
    method: str
    policy: str = DEFAULT_POLICY
    quota_greedy: GreedyQuota | None = None
    quota_milp: QuotaResult | None = None
    preempt_greedy: GreedyPreempt | None = None
    preempt_milp: PreemptResult | None = None
    held_back: HeldBack | None = None
    notes: list[str] = field(default_factory=list)

    # -- gaps of the greedy to the exact answer ------------------------------------------------
    def quota_gap(self) -> float | None:
        if self.quota_greedy is None or self.quota_milp is None:
            return None
        best = self.quota_milp.value
        return (best - self.quota_greedy.value) / best if best > 0 else 0.0

    def placed_gap(self, to_bound: bool = False) -> float | None:
        """(P* − P_greedy)/P*: HP value the greedy leaves unplaced (vs MILP objective or bound)."""
        g, m = self.preempt_greedy, self.preempt_milp
        if g is None or m is None or g.problems:   # an infeasible greedy answer has no gap
            return None
        best = float(m.score.placed)
        if to_bound and m.phase1 is not None and m.phase1.bound is not None:
            best = max(best, m.phase1.bound)
        return (best - g.score.placed) / best if best > 0 else 0.0

    def cost_excess(self) -> float | None:
        """(C_greedy − C*)/C* when both place the same HP value (else None)."""
        g, m = self.preempt_greedy, self.preempt_milp
        if g is None or m is None or g.problems or g.score.placed != m.score.placed:
            return None
        c = m.score.eviction_cost
        return (g.score.eviction_cost - c) / c if c > 0 else (0.0 if g.score.eviction_cost == 0 else None)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method}
        if self.quota_greedy or self.quota_milp:
            q: dict[str, Any] = {}
            if self.quota_greedy:
                g = self.quota_greedy
                q["greedy"] = {"quotas": _quotas(g.quotas), "admitted": g.admitted,
                               "value": g.value, "time_s": g.time_s, "chance_feasible": g.feasible}
            if self.quota_milp:
                m = self.quota_milp
                q["milp"] = {"quotas": _quotas(m.quotas), "admitted": m.admitted, "value": m.value,
                             "report": m.report.as_dict()}
            if self.quota_gap() is not None:
                q["greedy_gap"] = self.quota_gap()
            out["quota"] = q
        if self.preempt_greedy or self.preempt_milp:
            p: dict[str, Any] = {}
            if self.preempt_greedy:
                p["greedy"] = _decision(self.preempt_greedy.decision, self.preempt_greedy.score)
                p["greedy"]["time_s"] = self.preempt_greedy.time_s
                p["greedy"]["problems"] = self.preempt_greedy.problems
            if self.preempt_milp:
                p["milp"] = _decision(self.preempt_milp.decision, self.preempt_milp.score)
            if self.placed_gap() is not None:
                p["greedy_gap"] = {"placed": self.placed_gap(), "placed_to_bound": self.placed_gap(True),
                                   "eviction_cost_excess": self.cost_excess()}
            if self.held_back is not None:
                p["held_back"] = self.held_back.as_dict()
            out["preemption"] = p
        if self.notes:
            out["notes"] = self.notes
        return out


def _quotas(q: dict[tuple[str, float], int]) -> list[dict[str, Any]]:
    return [{"pool": p, "class_h": d, "gpus": v / MILLI} for (p, d), v in sorted(q.items())]


def _decision(d: Decision, s: PreemptScore) -> dict[str, Any]:
    return {
        "placements": {str(j): [[n, list(g)] for n, g in pl] for j, pl in sorted(d.placements.items())},
        "victims": sorted(d.victims),
        **({"requeued": sorted(d.requeue)} if d.requeue else {}),
        "placed_value": s.placed, "placed_gpus": s.placed_gpus, "eviction_cost": s.eviction_cost,
        "reports": [r.as_dict() for r in d.reports],
    }


def run_greedy_quota(rnd: Round, opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS,
                     policy: str = DEFAULT_POLICY) -> GreedyQuota:
    """The policy's quotas for the round and its LP pass under them (admitted in PTS LP order)."""
    pol = greedy_policy(policy)
    t0 = time.perf_counter()
    quotas = pol.standalone_quotas(rnd)
    decision = Decision()
    pol.lp_step(_standalone(rnd), decision, quotas)
    admitted = sorted(decision.placements, key=lambda j: lp_order_key(rnd.jobs[j]))
    elapsed = time.perf_counter() - t0
    return GreedyQuota(dict(quotas or {}), admitted, admission_value(rnd, admitted, opts), elapsed,
                       not admission_problems(rnd, admitted, opts), dict(decision.placements))


def run_greedy_preempt(rnd: Round, opts: PreemptOptions = DEFAULT_PREEMPT_OPTIONS,
                       policy: str = DEFAULT_POLICY) -> GreedyPreempt:
    """The policy's HP pass on the round."""
    pol = greedy_policy(policy)
    t0 = time.perf_counter()
    decision = Decision()
    pol.hp_step(_standalone(rnd), decision)
    elapsed = time.perf_counter() - t0
    decision.reports.append(SolveReport(
        step="preemption", method="greedy", status="heuristic", time_s=elapsed,
        solver="pts-greedy" if pol.name == "gfs" else f"{pol.name}-greedy"))   # every GFS variant
    return GreedyPreempt(decision, score(rnd, decision, opts.objective), elapsed,
                         check_decision(rnd, decision))


def hp_patience(policy: str) -> tuple[float, float]:
    """How long the policy's HP gangs wait for LP window boundaries (0: never): whole-node
    gangs, then the others (the notice)."""
    pol = greedy_policy(policy)
    return (float(getattr(pol, "hp_wait_s", 0.0)), float(getattr(pol, "hp_notice_s", 0.0)))


def held_for_boundaries(rnd: Round, policy: str) -> list[int]:
    """The HP gangs the policy's boundary step leaves waiting for LP window boundaries on the
    round: patient, not placed (free GPUs or jobs at a boundary now), and helped by a boundary in
    reach (`gfs_opt.preempt.boundary.reach`; the others evict now, as the paper's step does)."""
    pol = greedy_policy(policy)
    if not isinstance(pol, ComposedPolicy) or not pol.waits:
        return []
    first = Decision()
    patient = pol.boundary_step(_standalone(rnd), first)
    return [j for j in patient if j not in first.placements]


def exact_after_boundary(rnd: Round, policy: str, opts: PreemptOptions, solver: SolverOptions,
                         greedy: Decision | None) -> PreemptResult:
    """GFS's exact preemption step on a round where HP gangs wait for window
    boundaries (as `gfs-milp` runs it): the policy's greedy boundary step for the waiting
    gangs first (it re-queues, it breaks no window), then the MILP for the other gangs on the
    round it leaves. The answer is both, scored on the whole round."""
    pol = greedy_policy(policy)
    assert isinstance(pol, ComposedPolicy)   # only composed policies wait (`hp_wait_s`)
    work = _standalone(rnd)
    first = Decision()
    patient = pol.boundary_step(work, first)
    skip = set(patient)
    rest = [j for j in work.pending_hp if j not in skip]
    sub = standalone_round(still_running(work, first), pending_hp=rest, pending_lp=[])
    hint = None if greedy is None else Decision(
        placements={j: p for j, p in greedy.placements.items() if j not in first.placements},
        victims=list(greedy.victims))
    if hint is not None and check_decision(sub, hint):
        hint = None   # the greedy's victims overlap what the boundary step took
    res = solve_preemption(sub, opts, solver, greedy=hint)
    decision = Decision(placements={**first.placements, **res.decision.placements},
                        victims=list(res.decision.victims), requeue=list(first.requeue),
                        reports=list(res.decision.reports))
    return replace(res, decision=decision, score=score(rnd, decision, opts.objective))


def solve_round(rnd: Round, method: str = "both", step: str = "all",
                solver: SolverOptions = DEFAULT_SOLVER,
                preempt_opts: PreemptOptions = DEFAULT_PREEMPT_OPTIONS,
                quota_opts: QuotaOptions = DEFAULT_QUOTA_OPTIONS,
                deadline: float | None = None, policy: str = DEFAULT_POLICY) -> RoundResult:
    """Greedy, MILP or both, for the quota step, the preemption step or both.

    ``policy``: whose greedy steps answer (`greedy_policy_names`, with ``[key=value]`` options;
    default the published GFS, which places every HP gang now). The MILPs are GFS's exact steps
    whatever the policy. A policy whose HP gangs wait for window boundaries (`gfs`) says which
    gangs it holds back and what the paper's step would evict for them (`HeldBack`).

    ``deadline`` (a `time.perf_counter` value) bounds the MILP steps together: each gets at most
    what is left, and a step with nothing left is skipped with a note (the greedy answer stands).
    """
    res = RoundResult(method, policy)
    wait, notice = hp_patience(policy)

    def budget(name: str) -> SolverOptions | None:
        if deadline is None:
            return solver
        left = deadline - time.perf_counter()
        if left <= 0.05:
            res.notes.append(f"{name} MILP skipped: the time limit was used up before it")
            return None
        return replace(solver, time_limit=min(solver.time_limit, left))

    if step in ("all", "quota"):
        if method in ("greedy", "both"):
            res.quota_greedy = run_greedy_quota(rnd, quota_opts, policy)
        if method in ("milp", "both") and (opts := budget("quota")) is not None:
            greedy = res.quota_greedy.admitted if res.quota_greedy else None
            res.quota_milp = solve_quota(with_held_nodes(rnd, wait), quota_opts, opts,
                                         greedy=greedy)
    if step in ("all", "preemption"):
        held = held_for_boundaries(rnd, policy) if wait > 0 or notice > 0 else []
        if held:
            paper = run_greedy_preempt(rnd, preempt_opts, DEFAULT_POLICY)
            placed = [j for j in held if j in paper.decision.placements]
            res.held_back = HeldBack(held, wait, notice, paper, placed)
            shown = ", ".join(map(str, held[:10])) + (" …" if len(held) > 10 else "")
            res.notes.append(
                f"{policy} holds back {len(held)} HP gang(s) for LP window boundaries ({shown}); "
                f"the paper's step ({DEFAULT_POLICY}) places {len(placed)} of them now, evicting "
                f"{len(paper.decision.victims)} LP job(s) (eviction cost "
                f"{paper.score.eviction_cost:,.0f} GPU·s)")
        if method in ("greedy", "both"):
            res.preempt_greedy = run_greedy_preempt(rnd, preempt_opts, policy)
        if method in ("milp", "both") and (opts := budget("preemption")) is not None:
            greedy_d = res.preempt_greedy.decision if res.preempt_greedy else None
            patient = patient_gangs(rnd, wait, notice)
            if patient:   # the boundary step may place some, hold some, let the rest evict
                res.preempt_milp = exact_after_boundary(rnd, policy, preempt_opts, opts, greedy_d)
                shown = ", ".join(map(str, patient[:10])) + (" …" if len(patient) > 10 else "")
                res.notes.append(
                    f"{len(patient)} HP gang(s) may wait for LP window boundaries ({shown}; "
                    f"whole-node gangs ≤ {wait / 3600:g} h, hp_wait_h, the others ≤ "
                    f"{notice / 3600:g} h, hp_notice_h, while a boundary in reach gives them "
                    "room): both answers apply the greedy boundary step to them, the MILP solves "
                    "the rest")
            else:
                res.preempt_milp = solve_preemption(rnd, preempt_opts, opts, greedy=greedy_d)
    return res
