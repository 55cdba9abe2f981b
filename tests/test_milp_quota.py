"""Spot-quota / admission MILP: known optimum, the paper's rule as the Gaussian single-class
special case, feasibility, never worse than the rule + greedy admission, PuLP agreement."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from milp_rounds import admission_rounds, job, make_round
from strategies import rounds

from gfs_opt.crosscheck.pulp_models import solve_quota_pulp
from gfs_opt.instance import load_instance, load_round
from gfs_opt.model import MILLI, Params, PoolForecast, Round
from gfs_opt.preempt.objective import check_decision
from gfs_opt.quota import milp as qmilp
from gfs_opt.quota.milp import (
    QuotaOptions,
    admission_problems,
    implied_quotas,
    pool_data,
    solve_quota,
)
from gfs_opt.quota.rule import rule_quotas
from gfs_opt.solve import Outcome, SolverOptions

INSTANCES = Path(__file__).resolve().parents[1] / "instances"
EXACT = SolverOptions(rel_gap=0.0, time_limit=20.0)


def _empty_pool(pending: int, mean: list[float], std: list[float], samples: np.ndarray | None = None,
                guarantee: float = 1.0) -> Round:
    """64 free GPUs, ``pending`` one-GPU LP jobs of one class, a forecast of HP demand."""
    rnd = make_round([("A", 8)] * 8, [], [job(100 + i, "LP", 1, d=guarantee, submit=7200.0)
                                          for i in range(pending)],
                     params=Params(guarantee_classes=(guarantee,)))
    rnd.forecasts["A"] = PoolForecast(np.array(mean), np.array(std), samples)
    return rnd


def test_tiny_quota_instance_hits_its_known_optimum() -> None:
    inst = load_instance(INSTANCES / "tiny-08-quota-classes.json")
    want = inst.meta["optimum"]["quota"]
    res = solve_quota(inst.round, solver=EXACT)
    assert res.value == pytest.approx(want["value"])
    assert res.admitted == want["admitted"]
    assert res.greedy_value == pytest.approx(3.0)          # the rule admits LP 20 only
    assert solve_quota_pulp(inst.round).value == pytest.approx(want["value"])
    assert check_decision(inst.round, res.decision()) == []


@pytest.mark.parametrize("name", ["tiny-08-quota-classes", "tiny-09-two-pools"])
def test_known_quota_optima(name: str) -> None:
    inst = load_instance(INSTANCES / f"{name}.json")
    res = solve_quota(inst.round, solver=EXACT)
    assert res.value == pytest.approx(inst.meta["optimum"]["quota"]["value"])
    assert res.report.status == "optimal"


def test_rule_is_the_single_class_gaussian_special_case() -> None:
    """With many Gaussian samples of one hour, the MILP admits what the rule's quota allows."""
    rng = np.random.default_rng(0)
    mean, std = [30.0], [4.0]
    samples = rng.normal(mean[0], std[0], size=(4000, 1))
    rnd = _empty_pool(60, mean, std, samples)
    quota = rule_quotas(rnd)[("A", 1.0)] // MILLI                  # 64 − ⌊30 + 1.2816·4⌋ = 29
    res = solve_quota(rnd, QuotaOptions(max_samples=4000), solver=EXACT)
    assert quota == 29
    assert abs(len(res.admitted) - quota) <= 1
    assert abs(res.quotas[("A", 1.0)] // MILLI - quota) <= 1


def test_without_samples_the_scenario_quantile_is_the_rules() -> None:
    """Forecast mean/std only: one quantile per scenario shared by all hours → the rule, per hour."""
    rnd = _empty_pool(60, [30.0, 32.0, 35.0], [4.0, 5.0, 2.0])
    rule = rule_quotas(rnd)[("A", 1.0)]
    res = solve_quota(rnd, QuotaOptions(scenarios=2000), solver=EXACT)
    assert abs(res.quotas[("A", 1.0)] - rule) <= MILLI
    assert abs(len(res.admitted) * MILLI - rule) <= MILLI
    assert res.value >= res.greedy_value


def test_quantile_strengthening_matches_plain_big_m() -> None:
    rng = np.random.default_rng(1)
    rnd = _empty_pool(30, [30.0, 31.0], [4.0, 4.0], rng.normal(30, 5, size=(60, 2)), guarantee=1.0)
    rnd.jobs[100].guarantee_h = 2.0
    assert solve_quota(rnd, solver=EXACT).value == pytest.approx(solve_quota_pulp(rnd).value)


def test_packing_is_a_restriction_of_the_aggregate_model() -> None:
    rnd = load_round(INSTANCES / "admission-150.json")
    packed = solve_quota(rnd, QuotaOptions(pack=True))
    loose = solve_quota(rnd, QuotaOptions(pack=False))
    assert loose.value >= packed.value - 1e-6
    assert set(packed.placements) == set(packed.admitted)
    assert check_decision(rnd, packed.decision()) == []
    assert packed.value >= packed.greedy_value - 1e-6
    assert packed.report.status == "optimal"


def test_implied_quota_bounds_every_admitted_set() -> None:
    rnd = load_round(INSTANCES / "admission-150.json")
    res = solve_quota(rnd)
    data = {pd.pool: pd for pd in pool_data(rnd)}
    q = implied_quotas(rnd, list(data.values()))
    for (pool, d), quota in q.items():
        hours = range(min(data[pool].horizon, int(np.ceil(d)) + 1))
        for h in hours:
            load = data[pool].L[h] + sum(rnd.jobs[j].demand for j in res.admitted
                                         if rnd.jobs[j].guarantee_h >= d)
            assert load <= quota + 1e-6


def test_solver_failure_returns_the_rules_admission(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = load_round(INSTANCES / "tiny-08-quota-classes.json")
    monkeypatch.setattr(qmilp, "run_solver", lambda *a, **k: Outcome("error", None, None, None, 0.0, {}))
    res = solve_quota(rnd)
    assert res.report.fallback and res.admitted == [20]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_nodes=4, max_jobs=10))
def test_admission_is_feasible_on_any_valid_round(rnd: Round) -> None:
    res = solve_quota(rnd, solver=EXACT)
    assert admission_problems(rnd, res.admitted, placements=res.placements) == []
    assert res.report.status == "optimal"


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(admission_rounds())
def test_admission_is_feasible_and_never_worse_than_the_rule(rnd: Round) -> None:
    res = solve_quota(rnd, solver=EXACT)
    assert admission_problems(rnd, res.admitted, placements=res.placements) == []
    assert check_decision(rnd, res.decision()) == []
    assert res.report.status == "optimal"
    if res.greedy_feasible:
        assert res.value >= res.greedy_value - 1e-6


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(admission_rounds(max_nodes=3, max_pending=5))
def test_ortools_and_pulp_agree(rnd: Round) -> None:
    opts = QuotaOptions(scenarios=40)
    res = solve_quota(rnd, opts, solver=EXACT, use_greedy=False)
    plain = solve_quota_pulp(rnd, opts)
    assert plain.status == "Optimal"
    assert res.value == pytest.approx(plain.value, rel=1e-7, abs=1e-7)
    assert admission_problems(rnd, plain.admitted, opts, plain.placements) == []


def test_admission_keeps_the_whole_node_reserve() -> None:
    # 4 nodes × 8 GPUs, LP on half of node 0; pending LP: 4 GPUs (fits beside it) and 8 GPUs
    # (needs a whole free node). With 3 whole free nodes reserved only the first may start;
    # with 2 both may (one whole node broken); without a reserve the MILP takes both too.
    from dataclasses import replace

    running = [(job(1, "LP", 4), ((0, (0, 1, 2, 3)),), 7000.0)]
    rnd = make_round([("A", 8)] * 4, running, [job(2, "LP", 4), job(3, "LP", 8)])
    free = solve_quota(rnd)
    assert sorted(free.admitted) == [2, 3]
    for reserve, want in ((3, [2]), (2, [2, 3])):
        held = replace(rnd, reserves={("A", 1.0): reserve})
        res = solve_quota(held)
        assert res.report.status == "optimal" and not res.report.fallback
        assert sorted(res.admitted) == want
        assert not admission_problems(held, res.admitted, placements=res.placements)
    # the checker refuses an admission that breaks into the reserve
    held = replace(rnd, reserves={("A", 1.0): 3})
    bad = admission_problems(held, [2, 3], placements=free.placements)
    assert any("reserve" in p for p in bad)
