"""`gfs-paper` is the published GFS (GFS-SPEC §2) step by step, on constructed rounds; `gfs` differs
from it by the departures of `gfs_opt.policies.departures` and by nothing else."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gfs_opt.errors import GfsError
from gfs_opt.model import (
    MILLI,
    ClusterState,
    Decision,
    Job,
    JobClass,
    Params,
    PoolForecast,
    Round,
    RunningJob,
    WindowOutcome,
)
from gfs_opt.pending import PTS_ORDER
from gfs_opt.policies import POLICIES, make_policy, parse_policy, split_policies
from gfs_opt.policies.departures import (
    ALL_KEYS,
    DEPARTURES,
    PAPER_PARTS,
    compose,
    departures_markdown,
)
from gfs_opt.policies.gfs import GFSPolicy
from gfs_opt.quota.eta import AttributableEta, PaperEta

HP, LP = JobClass.HP, JobClass.LP
T = 200_000.0
DOCS = Path(__file__).resolve().parent.parent / "docs" / "departures.md"


def _job(jid: int, cls: JobClass, gpus: int, workers: int = 1, submit: float = T - 10) -> Job:
    return Job(jid, "org", "A100", cls, gpus * MILLI, workers, submit, 50_000.0)


def _round(st: ClusterState, running: list[tuple[Job, tuple, float]], pending: list[Job]) -> Round:
    jobs: dict[int, Job] = {}
    run: dict[int, RunningJob] = {}
    for j, pl, window_start in running:
        st.allocate(j, pl)
        jobs[j.id] = j
        run[j.id] = RunningJob(j, window_start, window_start, window_start, pl)
    for j in pending:
        jobs[j.id] = j
    return Round(time=T, state=st, jobs=jobs, running=run,
                 pending_hp=[j.id for j in pending if j.is_hp],
                 pending_lp=[j.id for j in pending if not j.is_hp],
                 queued_since={j.id: j.submit for j in pending}, params=Params())


def _decide(name: str, rnd: Round) -> Decision:
    pol = make_policy(name, forecaster="ets")
    pol.reset(rnd.state, rnd.params)
    rnd.state.begin()
    try:
        return pol.decide(rnd)
    finally:
        rnd.state.rollback()
        rnd.state.commit()


def _nodes(n: int) -> ClusterState:
    return ClusterState.from_nodes(("A100", 8, f"n{i}") for i in range(n))


# ---- the parts ---------------------------------------------------------------------------------
def test_gfs_paper_is_the_paper_parts_and_gfs_every_departure() -> None:
    paper, ours = make_policy("gfs-paper"), make_policy("gfs")
    assert isinstance(paper, GFSPolicy) and isinstance(ours, GFSPolicy)
    assert paper.departures == () and ours.departures == ALL_KEYS
    assert paper.design == PAPER_PARTS
    assert paper.order == PTS_ORDER and not paper.order.ages
    assert paper.spot is not None and isinstance(paper.spot.eta_rule, PaperEta)
    assert not paper.spot.shape and paper.patience is None and paper.hp_wait_s == 0.0
    assert not paper.victim_rule.gang_aware and not paper.placement.lp_beside_hp
    assert ours.spot is not None and isinstance(ours.spot.eta_rule, AttributableEta)
    assert ours.spot.shape and ours.patience is not None and ours.victim_rule.gang_aware
    assert ours.placement.lp_beside_hp and ours.order.ages and ours.order.hp_fifo
    assert not paper.order.hp_fifo


def test_the_registry_is_generated_from_the_table() -> None:
    for d in DEPARTURES:
        pol = make_policy(f"gfs-no-{d.key}")
        assert isinstance(pol, GFSPolicy)
        assert pol.departures == tuple(k for k in ALL_KEYS if k != d.key)
        # each departure changes the composition, and its row alone does
        assert compose([d.key]) != PAPER_PARTS
        assert compose(ALL_KEYS) == make_policy("gfs").design   # type: ignore[attr-defined]
    names = {n for n in POLICIES if n.startswith("gfs-no-")} - {"gfs-no-history", "gfs-no-notice"}
    assert names == {f"gfs-no-{d.key}" for d in DEPARTURES}


def test_docs_departures_page_holds_the_generated_table() -> None:
    text = DOCS.read_text()
    assert departures_markdown() in text, ("docs/departures.md is out of step with "
                                           "gfs_opt.policies.departures: regenerate its table "
                                           "with departures_markdown()")


# ---- HP pass: PTS evicts at once ---------------------------------------------------------------
def _contested() -> Round:
    """n0 half held by HP, n1 held by an 8-GPU LP job 30 min into its 1 h window, n2 by HP: an
    8-GPU HP gang must evict the LP job."""
    st = _nodes(3)
    return _round(st, [(_job(1, HP, 4), ((0, tuple(range(4))),), 0.0),
                       (_job(2, LP, 8), ((1, tuple(range(8))),), T - 1800.0),
                       (_job(3, HP, 8), ((2, tuple(range(8))),), 0.0)],
                  [_job(10, HP, 8)])


def test_paper_hp_pass_evicts_at_once_mid_window() -> None:
    d = _decide("gfs-paper", _contested())
    assert d.victims == [2] and 10 in d.placements and not d.requeue
    held = _decide("gfs", _contested())                  # HP patience: the gang waits
    assert not held.victims and 10 not in held.placements


# ---- HP order: largest first, or submit order with hp-fifo -------------------------------------
def _hp_backlog() -> Round:
    """One free node, the other held by HP (nothing to evict): an older 4-GPU HP job and a newer
    8-GPU one both fit it alone, not together; both have waited past any HP patience."""
    st = _nodes(2)
    return _round(st, [(_job(1, HP, 8), ((1, tuple(range(8))),), 0.0)],
                  [_job(10, HP, 4, submit=T - 7300), _job(11, HP, 8, submit=T - 7200)])


def test_hp_pass_is_largest_first_and_hp_fifo_takes_submit_order() -> None:
    assert set(_decide("gfs-paper", _hp_backlog()).placements) == {11}
    assert set(_decide("gfs-no-hp-fifo", _hp_backlog()).placements) == {11}
    assert set(_decide("gfs", _hp_backlog()).placements) == {10}


# ---- victims: worker by worker -----------------------------------------------------------------
def _gang_round() -> Round:
    st = _nodes(4)
    return _round(st, [(_job(1, LP, 8, 2), ((0, tuple(range(8))), (1, tuple(range(8)))), 0.0),
                       (_job(2, LP, 8), ((2, tuple(range(8))),), 0.0),
                       (_job(3, LP, 8), ((3, tuple(range(8))),), 0.0)],
                  [_job(9, HP, 8, 2)])


def test_paper_victims_are_chosen_worker_by_worker() -> None:
    # the cheapest node for each worker holds a single-node job (half the gang's wasted work)
    assert sorted(_decide("gfs-paper", _gang_round()).victims) == [2, 3]
    # gang-aware (gfs without its patience, which would hold the gang back): one LP gang
    assert _decide("gfs-no-wait", _gang_round()).victims == [1]


# ---- LP pass: PTS order, best fit beside the job's own class -------------------------------
def _lp_round() -> Round:
    """Two 8-GPU nodes, n0 with 4 HP GPUs, n1 with 4 LP GPUs: room for one 4-GPU LP job on each.
    Pending: a 4-GPU LP job, a 1-GPU LP job waiting two days, a 4-GPU LP job that fits too."""
    st = _nodes(2)
    return _round(st, [(_job(1, HP, 4), ((0, tuple(range(4))),), 0.0),
                       (_job(2, LP, 4), ((1, tuple(range(4))),), 0.0)],
                  [_job(20, LP, 4, submit=T - 100), _job(21, LP, 1, submit=T - 2 * 86_400)])


def test_paper_lp_order_is_largest_first_and_lp_goes_beside_lp() -> None:
    d = _decide("gfs-paper[quota=none]", _lp_round())
    # (−g, w, s): the 4-GPU job first, though the 1-GPU one has waited two days
    assert next(iter(d.placements)) == 20           # placements keep the pass's order
    # best fit ties (4 free on each node) go to the node with LP work (same class)
    assert {n for n, _g in d.placements[20]} == {1}


def test_gfs_departs_in_lp_order_and_placement() -> None:
    d = _decide("gfs-no-wait[quota=none]", _lp_round())
    assert next(iter(d.placements)) == 21               # aged LP first
    d = _decide("gfs-no-wait[quota=none,lp_age_h=1000]", _lp_round())
    assert next(iter(d.placements)) == 20 and {n for n, _g in d.placements[20]} == {0}   # beside HP


# ---- the quota: the paper's η rule, a count quota -----------------------------------------------
def test_paper_eta_shrinks_on_every_eviction_gfs_on_attributable_ones() -> None:
    st = _nodes(4)
    rnd = _round(st, [], [])
    fc = PoolForecast(np.array([10.0] * 4), np.array([2.0] * 4))
    etas = {}
    for name in ("gfs-paper", "gfs"):
        pol = make_policy(name, forecaster="ets")
        pol.reset(rnd.state, rnd.params)
        assert pol.spot is not None
        first = Decision()
        pol.spot.refresh(Round(time=0.0, state=st, jobs={}, running={}, pending_hp=[],
                               pending_lp=[], queued_since={}, params=rnd.params,
                               quota_due=True), first)
        pol.spot.ledger.plan({"A100": fc}, {"A100": 1.0})
        # 5 of 10 windows broken with HP at 11 GPUs, inside the plan (10 + 1.28·2 = 12.6)
        for k in range(10):
            pol.spot.observe_window(WindowOutcome(100.0 + k, "A100", ok=k >= 5,
                                                  lp_milli=8 * MILLI,
                                                  hp_milli=None if k >= 5 else 11 * MILLI))
        later = Decision()
        pol.spot.refresh(Round(time=3600.0, state=st, jobs={}, running={}, pending_hp=[],
                               pending_lp=[], queued_since={}, params=rnd.params,
                               quota_due=True), later)
        assert later.eta is not None
        etas[name] = later.eta["A100"]
        # a count quota: only gfs keeps whole nodes for whole-node HP
        assert (later.reserves is not None) == (name == "gfs")
    assert etas["gfs-paper"] == pytest.approx(0.2)    # ER 0.5: η·0.1/0.5
    assert etas["gfs"] == 1.0                         # no attributable eviction


# ---- the command-line syntax --------------------------------------------------------------------
def test_policy_options_on_the_command_line() -> None:
    assert split_policies("gfs,gfs[hp_notice_h=0.0333,hp_wait_h=0],yarn-cs") == [
        "gfs", "gfs[hp_notice_h=0.0333,hp_wait_h=0]", "yarn-cs"]
    assert parse_policy("gfs[hp_notice_h=0.0333, departures=wait+shape]") == (
        "gfs", {"hp_notice_h": 0.0333, "departures": "wait+shape"})
    pol = make_policy("gfs[departures=wait+shape,hp_wait_h=0.5]")
    assert isinstance(pol, GFSPolicy) and pol.departures == ("wait", "shape")
    assert pol.hp_wait_s == 1800.0
    for bad, says in (("gfs[no_such_option=1]", "no option 'no_such_option'"),
                      ("gfs-paper[hp_wait_h=1]", "belongs to departure 'wait'"),
                      ("gfs-week-peak[forecaster=ets]", "fixes it"),
                      ("gfs-paper[departures=wait]", "fixes it"),
                      ("gfs[departures=wait+teleport]", "unknown departure 'teleport'"),
                      ("gfs[hp_wait_h=-1]", "hp_wait_h must be"),
                      ("gfs[hp_wait_h]", "not key=value"), ("gfs[", "expected NAME")):
        with pytest.raises(GfsError, match=says.replace("[", r"\[")):
            make_policy(bad)
