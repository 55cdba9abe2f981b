"""Preemption MILP: known optima, independent feasibility, never worse than the greedy,
agreement with the plain PuLP model, fallback, candidate restriction, solvers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from milp_rounds import contested_rounds, job, make_round
from strategies import rounds

from gfs_opt.crosscheck.pulp_models import solve_preemption_pulp
from gfs_opt.instance import load_instance, load_round
from gfs_opt.model import Decision, Round
from gfs_opt.preempt import milp as pmilp
from gfs_opt.preempt.hp_pass import greedy_preemption
from gfs_opt.preempt.milp import PreemptOptions, export_preemption, solve_preemption
from gfs_opt.preempt.objective import check_decision, running_usage, score
from gfs_opt.solve import Outcome, SolverOptions

INSTANCES = Path(__file__).resolve().parents[1] / "instances"
EXACT = SolverOptions(rel_gap=0.0, time_limit=20.0)


def _known(kind: str) -> list[Path]:
    out = []
    for path in sorted(INSTANCES.glob("tiny-*.json")):
        opt = load_instance(path).meta.get("optimum")
        if isinstance(opt, dict) and kind in opt:
            out.append(path)
    return out


def applies(rnd: Round, decision: Decision) -> None:
    """The decision must go through ClusterState itself after the victims are released."""
    st = rnd.state.copy()
    for j in decision.victims:
        st.release(rnd.running[j].job)
    for j, pl in decision.placements.items():
        st.allocate(rnd.jobs[j], pl)
    assert st.check() == []


@pytest.mark.parametrize("path", _known("preemption"), ids=lambda p: p.stem)
def test_tiny_instances_hit_their_known_optimum(path: Path) -> None:
    inst = load_instance(path)
    want = inst.meta["optimum"]["preemption"]
    res = solve_preemption(inst.round, solver=EXACT)
    assert res.score.placed == want["placed_value"]
    assert res.score.eviction_cost == pytest.approx(want["eviction_cost"])
    if "victims" in inst.meta["optimum"]:
        assert sorted(res.decision.victims) == inst.meta["optimum"]["victims"]
    assert check_decision(inst.round, res.decision) == []
    applies(inst.round, res.decision)
    rep = res.decision.reports[-1]
    assert (rep.method, rep.status, rep.fallback) == ("milp", "optimal", False)


def test_greedy_gap_on_hand_made_traps() -> None:
    """The paper's g-only fail_size would skip a job that fits (tiny-07); the gang-aware rule
    does not. The two-pointer pass still evicts more than needed (tiny-02)."""
    trap = load_round(INSTANCES / "tiny-07-fail-size-trap.json")
    g, m = score(trap, greedy_preemption(trap)), solve_preemption(trap, solver=EXACT).score
    assert g.placed == m.placed and g.eviction_cost == m.eviction_cost
    pen = load_round(INSTANCES / "tiny-02-window-penalty.json")
    g, m = score(pen, greedy_preemption(pen)), solve_preemption(pen, solver=EXACT).score
    assert g.placed == m.placed and g.eviction_cost > m.eviction_cost


def test_hard_guarantee_greedy_is_rejected_not_preferred() -> None:
    rnd = load_round(INSTANCES / "tiny-05-all-in-window-hard.json")
    greedy = greedy_preemption(rnd)
    assert any("guarantee window" in p for p in check_decision(rnd, greedy))
    res = solve_preemption(rnd, greedy=greedy)
    assert res.decision.victims == [] and not res.fallback
    assert check_decision(rnd, res.decision) == []


def test_greedy_image_that_breaks_the_model_is_no_phase1_answer() -> None:
    """Phase 1 is read off the greedy only if the greedy's image is a solution of the model: the
    same image without its evictions leaves GPUs over-full and is refused."""
    rnd = load_round(INSTANCES / "tiny-02-window-penalty.json")
    greedy = greedy_preemption(rnd)
    assert greedy.victims
    pm = pmilp.build_model(rnd, keep_nodes={n for pl in greedy.placements.values() for n, _ in pl})
    hint = pmilp.warm_start(rnd, pm, greedy)
    assert hint is not None and pmilp.satisfies(pm.model, hint)
    assert pmilp._phase1_by_bound(pm, greedy, [hint]) is not None
    kept = {**hint, **{v: 0.0 for v in pm.block.z.values()}}
    assert not pmilp.satisfies(pm.model, kept)
    assert pmilp._phase1_by_bound(pm, greedy, [kept]) is None
    # a greedy that evicts a protected job has no image at all: phase 1 is solved
    hard = load_round(INSTANCES / "tiny-05-all-in-window-hard.json")
    res = solve_preemption(hard)
    assert res.phase1 is not None and res.phase1.time_s > 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested_rounds(max_nodes=5, max_pending=4))
def test_phase1_read_off_the_greedy_is_the_solved_optimum(rnd: Round) -> None:
    """When the greedy places every gang, phase 1 is not solved; the answer (P, then C) is the
    one the full two-phase solve finds."""
    from unittest import mock

    res = solve_preemption(rnd, solver=EXACT)
    with mock.patch.object(pmilp, "_phase1_by_bound", lambda *a: None):
        solved = solve_preemption(rnd, solver=EXACT)
    assert solved.phase1 is not None and res.phase1 is not None
    assert res.phase1.objective == pytest.approx(solved.phase1.objective)
    assert res.score.placed == solved.score.placed
    assert res.score.eviction_cost == pytest.approx(solved.score.eviction_cost, rel=1e-6, abs=1e-6)
    assert check_decision(rnd, res.decision) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested_rounds(max_nodes=5, max_pending=4))
def test_phase2_certified_by_cpsat_is_the_solved_optimum(rnd: Round) -> None:
    """A phase 2 proven by the lighter back-end (the warm start returned as is) has the P and C
    of a phase 2 solved by SCIP."""
    res = solve_preemption(rnd, solver=EXACT)
    solved = solve_preemption(rnd, solver=replace(EXACT, certifier=None))
    assert solved.phase2 is None or "proven" not in solved.phase2.detail
    assert res.score.placed == solved.score.placed
    assert res.score.eviction_cost == pytest.approx(solved.score.eviction_cost, rel=1e-6, abs=1e-6)
    assert check_decision(rnd, res.decision) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested_rounds(max_nodes=5, max_pending=4))
def test_phase1_certified_by_cpsat_is_the_solved_optimum(rnd: Round) -> None:
    """A phase 1 proven by the lighter back-end (the greedy's image, gangs left waiting) leads
    to the P and C of a phase 1 solved by SCIP."""
    from unittest import mock

    res = solve_preemption(rnd, solver=EXACT)
    with mock.patch.object(pmilp, "_phase1_certified", lambda *a: None):
        solved = solve_preemption(rnd, solver=EXACT)
    assert solved.phase1 is not None and res.phase1 is not None
    assert "proven" not in solved.phase1.detail
    assert res.score.placed == solved.score.placed
    assert res.score.eviction_cost == pytest.approx(solved.score.eviction_cost, rel=1e-6, abs=1e-6)
    assert check_decision(rnd, res.decision) == []


def test_phase1_certificate_when_the_greedy_leaves_a_gang_that_cannot_fit() -> None:
    rnd = load_round(INSTANCES / "tiny-06-infeasible-hp.json")
    greedy = greedy_preemption(rnd)
    res = solve_preemption(rnd, solver=EXACT, greedy=greedy)
    assert res.phase1 is not None and "proven optimal by cpsat" in res.phase1.detail
    assert not all(j in greedy.placements for j in rnd.pending_hp)     # not read off the bound
    # spelled out for every variable, as a solve reports its values
    pm = pmilp.build_model(rnd, keep_nodes={n for pl in greedy.placements.values() for n, _ in pl})
    assert len(res.phase1.values) == pm.model.get_num_variables()
    assert res.score == score(rnd, greedy)
    # a greedy that is beaten gets no certificate: phase 1 is solved
    hard = load_round(INSTANCES / "tiny-05-all-in-window-hard.json")
    assert "proven" not in (solve_preemption(hard, solver=EXACT).phase1 or Outcome("", 0, 0, 0, 0)).detail


def test_phase2_certificate_on_an_optimal_greedy_and_not_on_a_beatable_one() -> None:
    optimal = load_round(INSTANCES / "tiny-01-cheapest-victim.json")
    res = solve_preemption(optimal, solver=EXACT)
    assert res.phase2 is not None and "proven optimal by cpsat" in res.phase2.detail
    assert res.score == score(optimal, greedy_preemption(optimal))
    beatable = load_round(INSTANCES / "tiny-02-window-penalty.json")   # phase 2 improves on it
    res = solve_preemption(beatable, solver=EXACT)
    assert res.phase2 is not None and "proven" not in res.phase2.detail
    assert res.score.eviction_cost < score(beatable, greedy_preemption(beatable)).eviction_cost


def test_phase1_is_read_off_a_greedy_that_places_everything() -> None:
    rnd = load_round(INSTANCES / "tiny-02-window-penalty.json")
    greedy = greedy_preemption(rnd)
    res = solve_preemption(rnd, solver=EXACT, greedy=greedy)
    assert res.phase1 is not None and res.phase2 is not None
    assert set(greedy.placements) == set(res.decision.placements)
    assert res.phase1.time_s == 0.0 and res.phase1.gap == 0.0     # no solve
    assert res.phase1.bound == res.phase1.objective == res.score.placed
    assert res.score.eviction_cost < score(rnd, greedy).eviction_cost   # phase 2 still improves


def test_checker_catches_broken_decisions() -> None:
    rnd = make_round([("A", 4)], [(job(1, "HP", 2), ((0, (0, 1)),), 0.0),
                                 (job(2, "LP", 2), ((0, (2, 3)),), 7000.0)],
                     [job(10, "HP", 2), job(11, "HP", 0.5, 2)])
    assert check_decision(rnd, Decision(placements={10: ((0, (0, 2)),)}))          # HP GPU taken
    assert check_decision(rnd, Decision(placements={10: ((0, (2, 2)),)}, victims=[2]))  # not distinct
    assert check_decision(rnd, Decision(placements={11: ((0, (3,)),)}, victims=[2]))    # half a gang
    assert check_decision(rnd, Decision(victims=[1]))                                 # HP victim
    assert check_decision(rnd, Decision(placements={10: ((0, (2, 3)),)}, victims=[2])) == []
    usage = running_usage(rnd)                      # shared by several checks of one round
    before = usage.copy()
    assert check_decision(rnd, Decision(placements={10: ((0, (2, 3)),)}, victims=[2]), usage) == []
    assert check_decision(rnd, Decision(placements={10: ((0, (0, 2)),)}), usage)
    assert (usage == before).all() and usage.tolist() == [1000, 1000, 1000, 1000]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_nodes=5, max_jobs=10))
def test_milp_is_feasible_on_any_valid_round(rnd: Round) -> None:
    res = solve_preemption(rnd, solver=EXACT)
    assert check_decision(rnd, res.decision) == []
    applies(rnd, res.decision)
    assert res.decision.reports[-1].status == "optimal"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested_rounds())
def test_milp_is_feasible_and_never_worse_than_greedy(rnd: Round) -> None:
    greedy = greedy_preemption(rnd)
    res = solve_preemption(rnd, solver=EXACT, greedy=greedy)
    assert check_decision(rnd, res.decision) == []
    applies(rnd, res.decision)
    assert res.decision.reports[-1].status == "optimal"
    if not check_decision(rnd, greedy):
        assert res.score.at_least(score(rnd, greedy))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested_rounds(max_nodes=6, max_pending=6))
def test_greedy_choice_cache_changes_no_answer(rnd: Round) -> None:
    """The pass-wide cache of victim choices is an optimisation only: without it (every
    candidate evaluated afresh) the greedy HP pass decides exactly the same."""
    import gfs_opt.preempt.greedy as greedy

    cached = greedy_preemption(rnd)
    original = greedy._cached
    greedy._cached = lambda cache, node, key, choose: choose()
    try:
        fresh = greedy_preemption(rnd)
    finally:
        greedy._cached = original
    assert (cached.placements, cached.victims) == (fresh.placements, fresh.victims)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested_rounds(max_nodes=5, max_pending=5))
def test_gfs_milp_filter_never_drops_a_placeable_gang(rnd: Round) -> None:
    """`may_fit_by_preemption` is a necessary condition: the exact answer only ever places
    gangs that pass it, so gfs-milp may leave the others out of its MILP."""
    from gfs_opt.policies.gfs_milp import may_fit_by_preemption

    res = solve_preemption(rnd, solver=EXACT)
    for jid in res.decision.placements:
        assert may_fit_by_preemption(rnd.state, rnd.jobs[jid])


def test_gfs_milp_filter_on_a_simulated_round() -> None:
    from gfs_opt.policies.gfs_milp import may_fit_by_preemption

    rnd = load_round(INSTANCES / "sim-paper-a100-lyra-x8-preemption.json")
    fits = {(rnd.jobs[j].g, rnd.jobs[j].workers): may_fit_by_preemption(rnd.state, rnd.jobs[j])
            for j in rnd.pending_hp}
    assert fits[(4000, 96)]                 # the new arrival: placed by greedy and MILP
    assert not fits[(8000, 214)] and not fits[(6000, 185)]   # gangs stuck for weeks


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested_rounds(max_nodes=3, max_pending=3))
def test_ortools_and_pulp_agree(rnd: Round) -> None:
    res = solve_preemption(rnd, solver=EXACT, use_greedy=False)
    plain = solve_preemption_pulp(rnd)
    assert plain.status == "Optimal"
    assert res.score.placed == plain.placed
    assert res.score.eviction_cost == pytest.approx(plain.cost, rel=1e-6, abs=1e-6)
    assert check_decision(rnd, plain.decision) == []


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contested_rounds(max_nodes=6, max_pending=5))
def test_ortools_and_pulp_agree_on_larger_rounds(rnd: Round) -> None:
    """The block counts whole GPUs per class (``R_c·f_c``), the PuLP model per GPU: the same
    optima on rounds with several LP jobs per node, multi-GPU workers and two pools."""
    res = solve_preemption(rnd, solver=EXACT, use_greedy=False)
    plain = solve_preemption_pulp(rnd)
    assert plain.status == "Optimal"
    assert res.score.placed == plain.placed
    assert res.score.eviction_cost == pytest.approx(plain.cost, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("solver", ["highs", "cpsat"])
def test_other_solvers_reach_the_same_optimum(solver: str) -> None:
    rnd = load_round(INSTANCES / "tiny-04-gang16.json")
    res = solve_preemption(rnd, solver=SolverOptions(solver=solver, rel_gap=0.0))
    assert (res.score.placed, res.score.eviction_cost) == (16000, pytest.approx(22480.0))
    assert res.decision.reports[-1].solver == f"ortools-{solver}"


def test_solver_failure_falls_back_to_greedy(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = load_round(INSTANCES / "tiny-02-window-penalty.json")
    monkeypatch.setattr(pmilp, "run_solver",
                        lambda *a, **k: Outcome("timeout", None, None, None, 0.01, {}))
    res = solve_preemption(rnd)
    rep = res.decision.reports[-1]
    assert res.fallback and rep.fallback and rep.status == "timeout"
    assert res.decision.placements == greedy_preemption(rnd).placements
    assert "greedy answer returned" in rep.message


def test_candidate_restriction_keeps_greedy_feasible_and_result_valid() -> None:
    rnd = load_round(INSTANCES / "sim-paper-a100-yarn-cs-x8-preemption.json")
    greedy = greedy_preemption(rnd)
    full = solve_preemption(rnd, PreemptOptions(candidates=0), greedy=greedy)
    cut = solve_preemption(rnd, PreemptOptions(candidates=2), greedy=greedy)
    assert cut.restricted and not full.restricted
    assert cut.n_vars < full.n_vars
    assert check_decision(rnd, cut.decision) == []
    assert cut.score.at_least(score(rnd, greedy))
    assert full.score.at_least(cut.score)


def test_export_is_the_lexicographic_problem() -> None:
    """The exported single-objective model, re-read from MPS, has the two-phase optimum."""
    from ortools.math_opt.io.python import mps_converter
    from ortools.math_opt.python import mathopt

    rnd = load_round(INSTANCES / "tiny-04-gang16.json")
    lp = export_preemption(rnd, "lp")
    assert "Minimize" in lp and "gang_" in lp       # the minimisation of −(P − λ·C)
    model = mathopt.Model.from_model_proto(mps_converter.mps_to_model_proto(export_preemption(rnd, "mps")))
    res = mathopt.solve(model, mathopt.SolverType.GSCIP,
                        params=mathopt.SolveParameters(relative_gap_tolerance=0, absolute_gap_tolerance=1e-9))
    lam = 1.0 / (1.0 + sum(pmilp.build_model(rnd).cost.values()))
    assert res.objective_value() == pytest.approx(-(16000 - lam * 22480.0), abs=1e-6)


SIM_CUTS = sorted(INSTANCES.glob("sim-*.json"))


@pytest.mark.parametrize("path", SIM_CUTS, ids=lambda p: p.stem)
def test_rounds_cut_from_simulations_are_contested_and_solved(path: Path) -> None:
    """Every sim-* round is a real choice (the greedy evicts, or the rule admits some LP jobs
    but not all), and the MILP proves its optimum without falling behind the greedy."""
    from gfs_opt.quota.admission import greedy_admission

    inst = load_instance(path)
    rnd = inst.round
    greedy = greedy_preemption(rnd)
    if inst.meta["contested"] == "preemption":
        assert greedy.victims
    else:
        assert 0 < len(greedy_admission(rnd)) < len(rnd.pending_lp)
    res = solve_preemption(rnd, greedy=greedy)
    rep = res.decision.reports[-1]
    assert rep.status == "optimal" and not rep.fallback
    assert check_decision(rnd, res.decision) == []
    assert res.score.at_least(score(rnd, greedy))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["contested-300", "contested-300-hard", "admission-150",
                                  "sim-paper-a100-lyra-x8-preemption",
                                  "sim-paper-a100-yarn-cs-x8-preemption"])
def test_large_instances_are_solved_to_optimality_within_10_s(name: str) -> None:
    from gfs_opt.quota.milp import solve_quota

    rnd = load_round(INSTANCES / f"{name}.json")
    res = solve_preemption(rnd)
    rep = res.decision.reports[-1]
    assert rep.status == "optimal" and not rep.fallback and rep.time_s <= 10.0
    assert (rep.gap or 0.0) <= 1e-3
    assert check_decision(rnd, res.decision) == []
    q = solve_quota(rnd)
    assert q.report.status == "optimal" and q.report.time_s <= 10.0
