"""Each hand-made instance shows what its name promises under `gfs-opt solve`'s default: the
paper's per-round question (`gfs-paper`: every HP gang placed now), greedy against the MILP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gfs_opt.instance import load_round
from gfs_opt.instance.solve_round import DEFAULT_POLICY, RoundResult, solve_round
from gfs_opt.solve import SolverOptions

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
SOLVER = SolverOptions(time_limit=60.0)


def _solve(stem: str, step: str = "preemption", policy: str = DEFAULT_POLICY) -> tuple[RoundResult, dict]:
    path = next(INSTANCES.glob(f"{stem}*.json"))
    res = solve_round(load_round(path), "both", step, SOLVER, policy=policy)
    return res, json.loads(path.read_text())["meta"]["optimum"]


def _victims(res: RoundResult) -> tuple[list[int], list[int]]:
    assert res.preempt_greedy is not None and res.preempt_milp is not None
    return sorted(res.preempt_greedy.decision.victims), sorted(res.preempt_milp.decision.victims)


@pytest.mark.parametrize("stem", ["tiny-01", "tiny-02", "tiny-03", "tiny-04", "tiny-05",
                                  "tiny-06", "tiny-07", "tiny-09"])
def test_the_milp_reaches_the_derived_optimum(stem: str) -> None:
    res, opt = _solve(stem)
    m = res.preempt_milp
    assert m is not None and m.decision.reports[-1].status == "optimal"
    assert m.score.placed == opt["preemption"]["placed_value"]
    assert m.score.eviction_cost == pytest.approx(opt["preemption"]["eviction_cost"])
    assert sorted(m.decision.victims) == opt["victims"]
    assert res.held_back is None          # the paper's step holds no gang back


@pytest.mark.parametrize("stem", ["tiny-01", "tiny-02", "tiny-09"])
def test_contested_rounds_evict_under_both_methods(stem: str) -> None:
    greedy, milp = _victims(_solve(stem)[0])
    assert greedy and milp


def test_cheapest_victim() -> None:
    res, opt = _solve("tiny-01")
    greedy, milp = _victims(res)
    assert greedy == milp == opt["victims"] == [1]    # of two 4-GPU LP jobs, the cheaper one


def test_one_big_victim_beats_two_small_once_broken_windows_count() -> None:
    res, _opt = _solve("tiny-02")
    greedy, milp = _victims(res)
    assert len(greedy) == 2 and len(milp) == 1
    assert res.preempt_greedy is not None and res.preempt_milp is not None
    assert res.preempt_greedy.score.eviction_cost > res.preempt_milp.score.eviction_cost


def test_the_sixteen_worker_gang_is_placed() -> None:
    res, _opt = _solve("tiny-04")
    assert res.preempt_greedy is not None and res.preempt_milp is not None
    for answer in (res.preempt_greedy, res.preempt_milp):
        assert len(answer.decision.placements) == 1 and answer.score.placed_gpus == 16


def test_hard_guarantee_evicts_nobody() -> None:
    res, _opt = _solve("tiny-05")
    greedy, milp = _victims(res)
    assert milp == []
    # PTS knows no hard guarantee: its answer breaks windows, and the checker says so
    assert res.preempt_greedy is not None
    assert greedy and any("window" in p for p in res.preempt_greedy.problems)


def test_infeasible_hp_requests_stay_queued() -> None:
    res, opt = _solve("tiny-06")
    assert res.preempt_greedy is not None
    assert res.preempt_greedy.score.placed == opt["preemption"]["placed_value"]
    assert len(res.preempt_greedy.decision.placements) < 3


def test_quota_classes_admission() -> None:
    res, opt = _solve("tiny-08", step="quota")
    assert res.quota_milp is not None and res.quota_greedy is not None
    assert res.quota_milp.admitted == opt["quota"]["admitted"]
    assert res.quota_milp.value == pytest.approx(opt["quota"]["value"])


def test_gfs_says_what_it_holds_back_and_what_the_paper_would_evict() -> None:
    """On tiny-09 a boundary within its patience gives gang 10 room: gfs holds it back, where
    the paper's step places it now. On tiny-01 no boundary is in reach: gfs evicts now, as the
    paper's step does, and holds nothing back."""
    res, _opt = _solve("tiny-09", policy="gfs")
    held = res.held_back
    assert held is not None and held.gangs == [10] and held.paper_placed == [10]
    assert res.preempt_greedy is not None and 10 not in res.preempt_greedy.decision.placements
    assert any("holds back 1 HP gang" in n for n in res.notes)
    res, opt = _solve("tiny-01", policy="gfs")
    assert res.held_back is None and res.preempt_greedy is not None
    assert sorted(res.preempt_greedy.decision.victims) == opt["victims"]
