"""The spot-quota loop (GFS-SPEC §2.2): η on the safety margin, the η feedback without deadlock,
the quota lifted after the scored window, the `+sqa` baselines, and what the quota reports."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gfs_opt.errors import GfsError
from gfs_opt.model import (
    ClusterState,
    Decision,
    EtaEvidence,
    Job,
    JobClass,
    Params,
    PoolForecast,
    Round,
)
from gfs_opt.pending import QueueOrder
from gfs_opt.policies import POLICIES, family, make_policy, options_for, settable_options
from gfs_opt.preempt.scoring import BEST_FIT
from gfs_opt.quota.admission import lp_pass, quota_for, quota_wait
from gfs_opt.quota.eta import (
    QUOTA_WAIT_S,
    AttributableEta,
    PaperEta,
    band_breaks_promise,
    band_rate,
)
from gfs_opt.quota.ledger import EtaLedger
from gfs_opt.quota.rule import demand_bound, free_of_hp, pool_quota
from gfs_opt.quota.spot_quota import quota_warnings
from gfs_opt.sim.engine import SimConfig, Simulator
from gfs_opt.sim.metrics import summarize
from gfs_opt.traces.base import JOB_COLUMNS, NODE_COLUMNS, Trace

HP, LP = JobClass.HP, JobClass.LP
RULES = {"paper": PaperEta(), "attributable": AttributableEta()}


@dataclass(frozen=True)
class EtaState:
    """A pool's η and the evidence its feedback reads (what a quota refresh hands a rule)."""

    eta: float = 1.0
    recent_failed: int = 0
    recent_succeeded: int = 0
    recent_failed_quota: int = 0
    eta_windows: int = 0
    eta_failed_quota: int = 0
    band_windows: float = 0.0
    band_failed: float = 0.0

    @property
    def evidence(self) -> EtaEvidence:
        return EtaEvidence(self.recent_succeeded, self.recent_failed, self.recent_failed_quota,
                           self.eta_windows, self.eta_failed_quota, self.band_windows,
                           self.band_failed)


def update_eta(state: EtaState, params: Params, wait: float | None,
               rule: str = "paper") -> float:
    return RULES[rule].update(state.eta, state.evidence, params, wait)
Z90 = NormalDist().inv_cdf(0.9)
DAY = 86_400.0


# ---- the rule: η scales the margin ----------------------------------------------------------------
def test_eta_divides_the_safety_margin() -> None:
    fc = PoolForecast(np.array([6.0, 6.0]), np.array([2.0, 2.0]))
    np.testing.assert_allclose(demand_bound(fc, 0.9), 6 + Z90 * 2)
    np.testing.assert_allclose(demand_bound(fc, 0.9, eta=4.0), 6 + Z90 * 0.5)
    # C = 8: at η = 1 the ρ-quantile (8.56) fills the pool, so the quota is 0 …
    assert pool_quota(fc, 8, 1.0, 1.0, Params()) == 0
    # … and a larger η narrows the margin until GPUs are free again: 6 + 1.28·2/4 = 6.64 → F = 2.
    # (η multiplying F, the earlier reading, would keep 0 whatever η does.)
    assert pool_quota(fc, 8, 4.0, 1.0, Params()) == 2000
    # a smaller η widens the margin
    assert pool_quota(PoolForecast(np.array([2.0]), np.array([1.0])), 8, 0.5, 1.0, Params()) \
        == (8 - math.floor(2 + Z90 * 2)) * 1000


@settings(max_examples=200, deadline=None)
@given(mu=st.floats(0, 100), sigma=st.floats(0, 50), cap=st.integers(1, 120),
       e1=st.floats(0.1, 10), e2=st.floats(0.1, 10))
def test_quota_grows_with_eta_and_stays_in_the_pool(mu: float, sigma: float, cap: int,
                                                    e1: float, e2: float) -> None:
    fc = PoolForecast(np.array([mu]), np.array([sigma]))
    lo, hi = sorted((e1, e2))
    q_lo = pool_quota(fc, cap, lo, 1.0, Params())
    q_hi = pool_quota(fc, cap, hi, 1.0, Params())
    assert 0 <= q_lo <= q_hi <= cap * 1000
    assert free_of_hp(fc, cap, 0.9, hi)[0] == q_hi // 1000


# ---- η feedback ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("eta", "failed", "ok", "wait", "expected"), [
    (1.0, 0, 0, None, 1.0),          # no window, nobody waits on the quota: unchanged
    (1.0, 0, 0, 3601.0, 1.5),        # no window while a job waits on the quota: ER = 0, grow
    (1.0, 0, 0, 1800.0, 1.0),        # … but only once it has waited over an hour
    (1.0, 2, 8, None, 0.5),          # ER 0.2 ≥ 0.15: η·0.1/0.2
    (1.0, 3, 17, None, 0.1 / 0.15),  # ER 0.15 (boundary)
    (1.0, 1, 9, 9e9, 1.0),           # ER 0.1: between the thresholds
    (1.0, 1, 24, 3601.0, 1.1),       # ER 0.04: η·(1.5 − 0.4)
    (1.0, 1, 24, 3600.0, 1.0),       # a wait of exactly 1 h is not > 1 h
    (1.0, 0, 10, None, 1.0),         # ER 0 but no job waits on the quota: no growth
    (8.0, 0, 10, 7200.0, 10.0),      # 12 clamped to η_max = 10
    (0.15, 10, 0, None, 0.1),        # ER 1: 0.015 clamped to η_min = 0.1
])
def test_update_eta_hand_numbers(eta: float, failed: int, ok: int, wait: float | None,
                                 expected: float) -> None:
    status = EtaState(eta=eta, recent_failed=failed, recent_succeeded=ok)
    assert update_eta(status, Params(), wait) == pytest.approx(expected)
    assert status.eta == eta                      # a pure function of its inputs


@settings(max_examples=300, deadline=None)
@given(eta=st.floats(0.1, 10), failed=st.integers(0, 50), ok=st.integers(0, 50),
       wait=st.one_of(st.none(), st.floats(0, 1e6)), lo=st.floats(0.05, 1), hi=st.floats(1, 20),
       rule=st.sampled_from(sorted(RULES)))
def test_eta_stays_within_its_bounds(eta: float, failed: int, ok: int, wait: float | None,
                                     lo: float, hi: float, rule: str) -> None:
    p = Params(eta_min=lo, eta_max=hi)
    eta = min(hi, max(lo, eta))
    new = update_eta(EtaState(eta=eta, recent_failed=failed, recent_succeeded=ok,
                              eta_windows=failed + ok, eta_failed_quota=failed), p, wait, rule)
    assert lo <= new <= hi


@settings(max_examples=100, deadline=None)
@given(start=st.floats(0.1, 10), lo=st.floats(0.05, 1), hi=st.floats(1.5, 20))
def test_eta_recovers_from_any_value_while_lp_waits_on_the_quota(start: float, lo: float,
                                                                 hi: float) -> None:
    """The deadlock: η low, no LP job runs, so no window ends. Each hour counts as ER = 0 while
    a job waits on the quota, so η climbs to η_max in ⌈log(η_max/η)/log 1.5⌉ hours."""
    p = Params(eta_min=lo, eta_max=hi)
    eta = min(hi, max(lo, start))
    hours = 0
    while eta < hi:
        eta = update_eta(EtaState(eta=eta), p, 2 * QUOTA_WAIT_S)
        hours += 1
        assert hours <= math.ceil(math.log(hi / lo) / math.log(1.5)) + 1
    assert eta == hi


def test_eta_shrinks_under_evictions_then_regrows() -> None:
    p, eta = Params(), 1.0
    eta = update_eta(EtaState(eta=eta, recent_failed=5, recent_succeeded=5), p, 1e4)
    assert eta == pytest.approx(0.2)
    for _ in range(3):
        eta = update_eta(EtaState(eta=eta), p, 1e4)
    assert eta == pytest.approx(0.2 * 1.5 ** 3)


# ---- who waits on the quota ---------------------------------------------------------------------
def cluster(*sizes: int) -> ClusterState:
    return ClusterState.from_nodes(("A100", g, f"n{i}") for i, g in enumerate(sizes))


def lp_job(jid: int, g: int, w: int = 1, submit: float = 0.0) -> Job:
    return Job(jid, "org", "A100", LP, g, w, submit, 10_000.0)


def pending_round(jobs: list[Job], time: float = 10_000.0, sizes: tuple[int, ...] = (8,),
                  queued: dict[int, float] | None = None) -> Round:
    return Round(time=time, state=cluster(*sizes), jobs={j.id: j for j in jobs}, running={},
                 pending_hp=[], pending_lp=[j.id for j in jobs],
                 queued_since=queued or {j.id: j.submit for j in jobs}, params=Params())


def test_quota_wait_counts_only_jobs_the_quota_alone_holds_back() -> None:
    quotas = {("A100", 1.0): 2000}
    fits_but_quota = lp_job(1, 4000, submit=1000.0)        # 4 GPUs fit on the 8-GPU node
    never_fits = lp_job(2, 8000, w=2, submit=0.0)          # 16 GPUs: no quota can help
    allowed = lp_job(3, 1000, submit=500.0)                # within the quota
    rnd = pending_round([fits_but_quota, never_fits, allowed])
    assert quota_wait(rnd, "A100", quotas) == pytest.approx(9000.0)
    assert quota_wait(pending_round([never_fits, allowed]), "A100", quotas) is None
    # the wait runs from the last (re)queue, not from the submit
    rnd = pending_round([fits_but_quota], queued={1: 9000.0})
    assert quota_wait(rnd, "A100", quotas) == pytest.approx(1000.0)


def test_quota_wait_is_the_oldest_wait_across_shapes_and_requeues() -> None:
    """One check per shape, then a walk in submit order that may stop early: the answer must be
    the brute-force minimum over every held-back job, requeued ones (waiting since later than
    their submit) included."""
    quotas = {("A100", 1.0): 2000}
    jobs = [lp_job(1, 4000, submit=100.0), lp_job(2, 4000, submit=200.0),
            lp_job(3, 3000, submit=50.0), lp_job(4, 4000, submit=300.0)]
    queued = {1: 7000.0, 2: 6500.0, 3: 6000.0, 4: 300.0}     # 1–3 requeued, 4 never ran
    rnd = pending_round(jobs, queued=queued)
    assert quota_wait(rnd, "A100", quotas) == pytest.approx(10_000.0 - 300.0)
    queued[4] = 8000.0
    rnd = pending_round(jobs, queued=queued)
    assert quota_wait(rnd, "A100", quotas) == pytest.approx(10_000.0 - 6000.0)


def test_fifo_head_refused_by_the_quota_blocks_only_until_its_timeout() -> None:
    """The bug: a head of line refused by the quota blocked the FIFO forever (one 800-GPU gang
    held YARN-CS+quota's LP queue for 19 days); it must hold the line no longer than a head
    that does not fit."""
    quotas = {("A100", 1.0): 2000}
    big, small = lp_job(1, 4000, submit=0.0), lp_job(2, 1000, submit=10.0)
    for waited, placed in ((600.0, []), (7200.0, [2])):
        rnd = pending_round([big, small], time=waited)
        d = Decision()
        rnd.state.begin()
        lp_pass(rnd, d, order=QueueOrder(fifo=True, head_of_line=True, hol_timeout_s=3600.0),
                placer=BEST_FIT, quotas=quotas)
        rnd.state.rollback()
        rnd.state.commit()
        assert list(d.placements) == placed, waited


def test_aging_lets_a_backlog_s_oldest_small_jobs_ahead_of_a_younger_gang() -> None:
    """Largest-first gives the quota's room to the 8-GPU gang and refuses the four one-GPU jobs
    that waited for hours; with `lp_age_s` the ones submitted over an hour ago go first, in
    submit order, and the gang is refused instead (the room is one node)."""
    quotas = {("A100", 1.0): 8000}
    small = [lp_job(i, 1000, submit=600.0 * i) for i in range(1, 5)]   # t = 600 … 2,400
    gang = lp_job(9, 8000, submit=7000.0)
    for age, placed, refused in ((math.inf, [9], 4), (3600.0, [1, 2, 3, 4], 1),
                                 (7000.0, [9], 4)):   # 7,000 s: no job that old yet
        rnd = pending_round([*small, gang], time=7200.0)
        d = Decision()
        denied = lp_pass(rnd, d, order=QueueOrder(lp_age_s=age), placer=BEST_FIT, quotas=quotas)
        assert sorted(d.placements) == placed, age
        assert denied.get("A100", 0) == refused, age


def test_gfs_ages_its_lp_queue_by_a_day_and_the_ablation_does_not() -> None:
    pol = make_policy("gfs")
    assert pol.order.lp_age_s == 24 * 3600.0 and pol.options()["lp_age_h"] == 24.0
    assert "waiting > 24 h first" in pol.parts()["queue order"]
    paper = make_policy("gfs-no-aged-order")
    assert not paper.order.ages and "lp_age_h" not in paper.options()
    assert paper.parts()["queue order"] == "PTS (largest first); HP in submit order"
    assert not make_policy("gfs-paper").order.ages
    assert make_policy("gfs-paper").parts()["queue order"] == "PTS (largest first)"
    with pytest.raises(GfsError, match="lp_age_h"):
        make_policy("gfs", lp_age_h=0)


def reference_lp_pass(rnd: Round, quotas: dict[tuple[str, float], int],
                      order: QueueOrder) -> tuple[dict[int, object], int]:
    """The LP pass as documented, job by job in policy order (no head-of-line blocking): a job
    dominated by a failure of this pass is passed over uncounted, one the quota refuses counts
    once, one that does not fit is a failure. With aging (`QueueOrder.lp_age_s`) the jobs
    submitted that long ago are first walked in submit order, uncounted and with failures of
    their own; the walk in PTS order then passes over the ones placed, as if on its own."""
    st = rnd.state.copy()
    pending = [rnd.jobs[j] for j in rnd.pending_lp]
    placed: dict[int, object] = {}

    def walk(jobs: list[Job], count: bool) -> int:
        fails: list[tuple[int, int]] = []
        n = 0
        for job in jobs:
            if job.id in placed or any(job.g >= gf and job.workers >= wf for gf, wf in fails):
                continue
            quota = quota_for(quotas, job.pool, job.guarantee_h)
            if quota is not None and int(st.pool_lp[st.pool_index[job.pool]]) + job.demand > quota:
                n += count
                continue
            placement = BEST_FIT.gang(st, job)
            if placement is None:
                fails.append((job.g, job.workers))
                continue
            st.allocate(job, placement)
            placed[job.id] = placement
        return n

    if order.ages:
        walk(sorted((j for j in pending if j.submit <= rnd.time - order.lp_age_s),
                    key=lambda j: (j.submit, j.id)), count=False)
    denied = walk(sorted(pending, key=(lambda j: (j.submit, j.id)) if order.fifo
                         else (lambda j: (-j.g, j.workers, j.submit, j.id))), count=True)
    return placed, denied


@settings(max_examples=150, deadline=None)
# a class the quota refuses throughout, interleaved with one whose gang stops fitting: the
# refused class's jobs after that failure are dominated, and not counted
@example(spec=[(8000, 1, 0, 4.0), (8000, 1, 1, 1.0), (8000, 1, 2, 4.0), (8000, 1, 3, 1.0)],
         q1=0, q4=40, fifo=False, sizes=(8,), age=math.inf)
@example(spec=[(4000, 1, 0, 4.0), (4000, 1, 1, 1.0), (4000, 1, 2, 4.0), (2000, 2, 3, 4.0),
               (8000, 1, 4, 1.0), (4000, 1, 5, 1.0)], q1=0, q4=40, fifo=True, sizes=(8,),
         age=math.inf)
@given(spec=st.lists(st.tuples(st.sampled_from([500, 1000, 2000, 4000, 8000]),
                               st.integers(1, 3), st.integers(0, 20), st.sampled_from([1.0, 4.0])),
                     min_size=1, max_size=14),
       q1=st.integers(0, 40), q4=st.integers(0, 40), fifo=st.booleans(),
       sizes=st.sampled_from([(8,), (4, 8), (2, 2, 4)]),
       age=st.sampled_from([math.inf, 0.0, 5.0, 12.0]))
def test_lp_pass_counts_what_a_job_by_job_walk_counts(spec: list[tuple[int, int, int, float]],
                                                      q1: int, q4: int, fifo: bool,
                                                      sizes: tuple[int, ...], age: float) -> None:
    """The pass drops and defers whole shapes and counts a refused shape's later jobs from their
    positions (`ShapeCursor.settle`): placements and denials must be the job-by-job walk's, with
    aging too (the round is at t = 20, so ``age`` 5 ages the jobs submitted by t = 15)."""
    jobs = [Job(i, "org", "A100", LP, g, w, float(t), 10_000.0, guarantee_h=d)
            for i, (g, w, t, d) in enumerate(spec, start=1)]
    rnd = pending_round(jobs, sizes=sizes, time=20.0)
    quotas = {("A100", 1.0): q1 * 500, ("A100", 4.0): q4 * 500}
    order = QueueOrder(fifo=fifo, lp_age_s=age)
    placed, denied = reference_lp_pass(rnd, quotas, order)
    d = Decision()
    got = lp_pass(rnd, d, order=order, placer=BEST_FIT, quotas=quotas)
    assert got.get("A100", 0) == denied
    assert d.placements == placed


# ---- simulations with a forecast we control ----------------------------------------------------
class FixedForecast:
    """ForecastProvider stand-in: a constant per-pool μ and σ once any HP usage was seen."""

    def __init__(self, mean: float, std: float, horizon_h: int = 4) -> None:
        self.mean, self.std, self.h = mean, std, horizon_h
        self.seen: set[str] = set()

    def observe(self, t: float, usage: dict[tuple[str, str], float]) -> None:
        self.seen |= {pool for (pool, _org), v in usage.items() if v > 0}

    def refit(self, t: float) -> bool:
        return True

    def has_history(self, pool: str) -> bool:
        return pool in self.seen

    def pool_forecasts(self, t: float) -> dict[str, PoolForecast]:
        return {p: PoolForecast(np.full(self.h, self.mean), np.full(self.h, self.std))
                for p in self.seen}


def make_trace(lp_submits: list[float], hp_gpus: int = 3, horizon_s: float = 3 * DAY) -> Trace:
    """One 8-GPU node; an HP resident holding ``hp_gpus`` all along; 1-GPU LP jobs of 30 min."""
    nodes = pd.DataFrame({"node_name": ["n0"], "pool": ["A100"], "gpus": [8], "cpus": [0.0]})
    rows = [(0, "hp", "t", "A100", "HP", hp_gpus * 1000, 1, 0.0, horizon_s, 0.0, 1.0, True)]
    for i, s in enumerate(lp_submits, start=1):
        rows.append((i, f"lp{i}", "t", "A100", "LP", 1000, 1, s, 1800.0, 0.0, 1.0, False))
    jobs = pd.DataFrame(rows, columns=JOB_COLUMNS)
    return Trace(nodes[NODE_COLUMNS], jobs, name="fixed")


def simulate(policy_name: str, forecast: FixedForecast, params: Params, window: tuple[float, float],
             start_eta: float | None = None) -> Simulator:
    trace = make_trace([window[0] + 600.0 * k for k in range(6)])
    policy = make_policy(policy_name, forecaster="ets")
    sim = Simulator(trace, policy, params, SimConfig(eval_start=window[0], eval_end=window[1],
                                                     drain_s=DAY, check_invariants=True))
    assert policy.spot is not None
    policy.spot.provider = forecast
    if start_eta is not None:
        sim.pool_status["A100"] = replace(sim.pool_status["A100"], eta=start_eta)
    sim.run()
    return sim


def test_eta_climbs_out_of_a_quota_of_zero() -> None:
    """μ = 3, σ = 4 on 8 GPUs: at η = 1 the quota is 8 − ⌊3 + 1.28·4⌋ = 0 and no LP job can
    start, so no guarantee window ever ends. The old feedback skipped hours without windows and
    stayed stuck; now η grows while the jobs wait on the quota and they all start in the window."""
    sim = simulate("gfs", FixedForecast(3.0, 4.0), Params(), (DAY, 2 * DAY))
    jobs = sim.recorder.jobs
    lp = jobs[jobs["cls"] == "LP"]
    assert lp["first_start"].notna().all()
    assert (lp["first_start"] < 2 * DAY).all()                 # inside the window, not the drain
    assert sim.pool_status["A100"].eta >= 1.5                 # one growth step: F = 8 − 6 = 2


def test_static_eta_keeps_the_quota_at_zero_until_it_is_lifted() -> None:
    """The same forecast under `yarn-cs+sqa` (η fixed at 1): nothing starts in the window; with
    the authors' lifted drain the quota lifts at the window's end and the backlog drains; kept
    (the default), the quota of zero holds and nothing ever starts."""
    window = (DAY, 2 * DAY)
    sim = simulate("yarn-cs+sqa", FixedForecast(3.0, 4.0), Params(quota_after_window=False),
                   window)
    lp = sim.recorder.jobs[sim.recorder.jobs["cls"] == "LP"]
    assert (lp["first_start"] >= window[1]).all() and lp["first_start"].notna().all()
    s = summarize(sim.recorder)
    assert s["lp_never_started"] == 0
    assert s["lp_jqt_started_mean"] == pytest.approx(s["lp_jqt_mean"])
    kept = simulate("yarn-cs+sqa", FixedForecast(3.0, 4.0), Params(), window)
    lp = kept.recorder.jobs[kept.recorder.jobs["cls"] == "LP"]
    assert len(lp) and lp["first_start"].isna().all()
    assert summarize(kept.recorder)["lp_never_started"] == len(lp)


def test_quota_kept_after_the_window_leaves_jobs_never_started_and_says_so() -> None:
    window = (DAY, 2 * DAY)
    sim = simulate("yarn-cs+sqa", FixedForecast(3.0, 4.0), Params(quota_after_window=True), window)
    s = summarize(sim.recorder)
    assert s["lp_never_started"] == 6
    assert math.isnan(s["lp_jqt_started_mean"])
    # a never-started job counts its wait up to the end of the replay: a lower bound
    assert s["lp_jqt_mean"] >= window[1] + DAY - window[0] - 3600.0


def test_quota_diagnostics_and_warnings() -> None:
    window = (DAY, 2 * DAY)
    held = simulate("gfs", FixedForecast(3.0, 4.0), Params(), window).policy.diagnostics()
    pools = held["quota"]["pools"]["A100"]
    assert pools["refreshes"] == 288 and pools["with_forecast"] == 288
    assert pools["denials"] > 0 and pools["binding"] > 0
    assert quota_warnings(held["quota"], {"A100": 6}) == []
    free = simulate("gfs", FixedForecast(0.0, 0.0), Params(), window).policy.diagnostics()
    assert free["quota"]["pools"]["A100"]["denials"] == 0
    (w,) = quota_warnings(free["quota"], {"A100": 6})
    assert "never held an LP job back" in w and "--capacity-scale" in w
    none = {"pools": {"A100": {**pools, "with_forecast": 0}}}
    assert "no HP demand forecast" in quota_warnings(none, {"A100": 6})[0]
    assert quota_warnings(none, {"A100": 0}) == []            # no LP job to govern


# ---- the +sqa baselines ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["yarn-cs+sqa", "lyra+sqa", "fgd+sqa"])
def test_sqa_baselines_share_the_quota_with_a_static_eta(name: str) -> None:
    pol = make_policy(name)
    assert name in POLICIES and family(name) == "sqa"
    assert pol.spot is not None and pol.spot.adaptive is False
    assert pol.options()["quota"] == "sqa"
    assert options_for(name, {"forecaster": "ets"}) == {"forecaster": "ets"}
    base = name.removesuffix("+sqa")
    assert family(base) == "none" and make_policy(base).spot is None
    assert "forecaster" not in settable_options(base)       # nothing to forecast for
    assert family("gfs") == family("gfs-milp") == "gfs"


def test_chronus_has_no_quota_variant() -> None:
    assert "chronus+sqa" not in POLICIES
    assert make_policy("chronus").spot is None


# ---- capacity and time scaling ----------------------------------------------------------------------
def scaling_trace() -> Trace:
    nodes = pd.DataFrame({"node_name": [f"a{i}" for i in range(6)] + ["b0", "b1"],
                          "pool": ["A"] * 6 + ["B"] * 2, "gpus": [8, 8, 8, 8, 1, 1, 4, 4],
                          "cpus": 0.0})
    jobs = pd.DataFrame([(1, "j", "o", "A", "HP", 1000, 1, 10.0, 100.0, 0.0, 1.0, False)],
                        columns=JOB_COLUMNS)
    return Trace(nodes, jobs)


def test_scale_capacity_keeps_the_node_mix_and_is_deterministic() -> None:
    tr = scaling_trace()
    half = tr.scale_capacity(0.5)
    counts = half.nodes.groupby("pool").size().to_dict()
    assert counts == {"A": 3, "B": 1}
    assert sorted(half.nodes.loc[half.nodes["pool"] == "A", "gpus"]) == [1, 8, 8]
    assert half.nodes.equals(tr.scale_capacity(0.5).nodes)
    assert tr.scale_capacity(0.01).nodes.groupby("pool").size().to_dict() == {"A": 1, "B": 1}
    double = tr.scale_capacity(2.0)
    assert len(double.nodes) == 16 and double.nodes["node_name"].is_unique
    assert int(double.nodes["gpus"].sum()) == 2 * int(tr.nodes["gpus"].sum())
    assert "capacity scaled ×2" in double.notes[-1]
    assert tr.scale_capacity(1.0) is tr
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="capacity scale"):
            tr.scale_capacity(bad)


def test_stretch_time() -> None:
    tr = scaling_trace().stretch_time(24.0)
    assert tr.jobs["submit"].iloc[0] == 240.0 and tr.jobs["duration"].iloc[0] == 2400.0
    with pytest.raises(ValueError, match="time scale"):
        scaling_trace().stretch_time(0.0)


def test_refused_jobs_past_their_head_of_line_timeout_are_passed_over_exactly() -> None:
    """Under head-of-line blocking a quota-refused job stops the pass only while its wait is
    under ``hol_timeout_s``. The pass jumps over the refused jobs of a shape that no longer hold
    the line (`ShapeCursor.defer_until`); walking them one by one, as before, must give the same
    replay and the same refusal counts."""
    from standins import TOY_SETUP

    from gfs_opt.experiments.runner import RunSpec, prepare_trace
    from gfs_opt.pending import ShapeCursor

    spec = RunSpec.from_setup(TOY_SETUP, policy="yarn-cs+sqa")
    trace, lo, hi = prepare_trace(spec)
    real = ShapeCursor.defer_until
    jumps = []

    def replay(walk: bool) -> tuple[str, str, dict]:
        def defer_until(self: ShapeCursor, stops: object, stops_since: object) -> None:
            jumps.append(1)
            if not walk:
                real(self, stops, stops_since)  # type: ignore[arg-type]

        ShapeCursor.defer_until = defer_until  # type: ignore[method-assign]
        try:
            opts = options_for("yarn-cs+sqa", {"forecaster": "ets", "hol_timeout_s": 600.0})
            sim = Simulator(trace, make_policy("yarn-cs+sqa", **opts), Params(),
                            SimConfig(eval_start=lo, eval_end=hi))
            res = sim.run()
        finally:
            ShapeCursor.defer_until = real  # type: ignore[method-assign]
        jobs = res.recorder.jobs
        assert jobs is not None
        return (jobs.to_csv(index=False), res.recorder.quota_table().to_csv(index=False),
                sim.policy.diagnostics())

    jumped = replay(walk=False)
    n_jumps = len(jumps)
    walked = replay(walk=True)
    assert n_jumps > 0, "the case never reached a refused job past its timeout"
    assert jumped == walked


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.one_of(st.none(), st.integers(0, 60))),
                min_size=1, max_size=40),
       st.integers(0, 70), st.integers(0, 30))
def test_defer_until_finds_the_first_later_job_that_holds_the_line(
        jobs: list[tuple[int, int | None]], now: int, timeout: int) -> None:
    """The jump bisects over submission times and asks re-queued jobs one by one; it must land
    where walking every later job of the shape would."""
    from gfs_opt.pending import PendingQueue

    q = PendingQueue(JobClass.LP)
    since: dict[int, float] = {}
    for jid, (submit, requeued_at) in enumerate(jobs):
        at = float(submit if requeued_at is None else max(submit, requeued_at))
        since[jid] = at
        q.add(Job(jid, "o", "A", JobClass.LP, 1000, 1, float(submit), 60.0), at)
    order = QueueOrder(fifo=True, head_of_line=True, hol_timeout_s=float(timeout))

    def stops(jid: int) -> bool:
        return order.holds_line(float(now), since[jid])

    (cursor,) = q.cursors("A", fifo=True)
    first, _shape = next(cursor)
    cursor.defer_until(stops, lambda t: order.holds_line(float(now), t))
    got = next(iter(cursor), (None, None))[0]
    walked = [jid for _s, jid in sorted((float(s), j) for j, (s, _r) in enumerate(jobs))]
    later = walked[walked.index(first) + 1:]
    assert got == next((j for j in later if stops(j)), None)


# ---- GFS's η rule: only quota-attributable evictions move it down (issue 40) ------------------
@st.composite
def statuses(draw: st.DrawFn, attributable: bool = True) -> EtaState:
    failed = draw(st.integers(0, 50))
    ok = draw(st.integers(0, 200))
    quota = draw(st.integers(0, failed)) if attributable else 0
    day = draw(st.integers(failed + ok, failed + ok + 500))
    day_quota = draw(st.integers(quota, quota + (day - failed - ok) // 10)) if attributable else 0
    band = draw(st.floats(0, 500))
    # a band failure is an attributable one (η's share of an overrun above the plan)
    band_failed = draw(st.floats(0, band)) if attributable else 0.0
    return EtaState(eta=draw(st.floats(0.1, 10)), recent_failed=failed, recent_succeeded=ok,
                    recent_failed_quota=quota, eta_windows=day, eta_failed_quota=day_quota,
                    band_windows=band, band_failed=band_failed)


@given(status=statuses(), wait=st.one_of(st.none(), st.floats(0, 1e6)))
def test_attributable_eta_stays_in_bounds(status: EtaState, wait: float | None) -> None:
    p = Params()
    eta = update_eta(status, p, wait, rule="attributable")
    assert p.eta_min <= eta <= p.eta_max


@given(status=statuses(attributable=False), waits=st.lists(st.one_of(st.none(), st.floats(0, 1e5)),
                                                          min_size=1, max_size=48))
def test_eta_never_shrinks_without_attributable_evictions(status: EtaState,
                                                         waits: list[float | None]) -> None:
    # however many windows fail, none the quota answers for: η never goes down, so it cannot
    # sit at its floor unless it started there
    p = Params()
    eta = status.eta
    for wait in waits:
        new = update_eta(replace(status, eta=eta), p, wait, rule="attributable")
        assert new >= min(eta, p.eta_max)
        eta = new
    if status.eta > p.eta_min:
        assert eta > p.eta_min


@given(status=statuses(), wait=st.one_of(st.none(), st.floats(0, 1e6)))
def test_eta_grows_above_one_only_while_the_growth_band_keeps_the_promise(
        status: EtaState, wait: float | None) -> None:
    p = Params()
    eta = update_eta(status, p, wait, rule="attributable")
    unbanded = update_eta(replace(status, band_windows=0.0, band_failed=0.0), p, wait,
                          rule="attributable")
    if band_breaks_promise(status.evidence, p.rho):
        assert band_rate(status.evidence) > 1 - p.rho
        assert eta <= max(status.eta, 1.0)
        assert eta == min(unbanded, max(status.eta, 1.0))   # a fall, or growth up to 1, as before
    else:
        assert eta == unbanded


def test_growth_band_holds_eta_in_hand_numbers() -> None:
    p = Params()
    wait = 2 * QUOTA_WAIT_S
    # the pool's windows fail at 1 % (grow: ×1.4), but its growth band's at 20 % over the day,
    # above the promise 1 − ρ = 10 % beyond the noise of 50 windows
    calm = EtaState(eta=2.0, eta_windows=100, eta_failed_quota=1, band_windows=50.0,
                    band_failed=10.0)
    assert band_rate(calm.evidence) == pytest.approx(0.2) and band_breaks_promise(calm.evidence, p.rho)
    assert update_eta(calm, p, wait, rule="attributable") == 2.0
    # the paper's rule reads no band (and no window of the last H hours: ER = 0): ×1.5
    assert update_eta(calm, p, wait, rule="paper") == pytest.approx(3.0)
    # 12 % of 50 windows is within the noise of 10 %; 12 % of 1,000 is not
    assert not band_breaks_promise(replace(calm, band_failed=6.0).evidence, p.rho)
    assert band_breaks_promise(replace(calm, band_windows=1000.0, band_failed=120.0).evidence, p.rho)
    # the band keeping the promise (8 %): growth as before
    assert update_eta(replace(calm, band_failed=4.0), p, wait,
                      rule="attributable") == pytest.approx(2.8)
    # below 1 there is no band: η climbs back, to 1 at most while the band's day is bad
    assert update_eta(replace(calm, eta=0.5), p, wait, rule="attributable") == pytest.approx(0.7)
    assert update_eta(replace(calm, eta=0.8), p, wait, rule="attributable") == 1.0
    # a shrink is never held
    burst = replace(calm, eta_windows=10, eta_failed_quota=5)
    assert update_eta(burst, p, wait, rule="attributable") == pytest.approx(0.4)


def test_paper_rule_shrinks_where_the_attributable_rule_does_not() -> None:
    # 5 of 10 windows failed in the last H hours, none while HP exceeded the plan
    st_ = EtaState(eta=1.0, recent_failed=5, recent_succeeded=5, recent_failed_quota=0,
                   eta_windows=40, eta_failed_quota=0)
    p = Params()
    assert update_eta(st_, p, None, rule="paper") == pytest.approx(0.2)
    assert update_eta(st_, p, None, rule="attributable") == 1.0
    # the same failures attributable and read since η last moved: both shrink alike
    att = replace(st_, recent_failed_quota=5, eta_windows=10, eta_failed_quota=5)
    assert update_eta(att, p, None, rule="attributable") == pytest.approx(0.2)
    # once η has moved on them they are no longer its evidence (the engine restarts it): no
    # second shrink on the same burst, where the paper's sliding H hours shrink again (to the
    # floor: 0.2 · 0.1/0.5 = 0.04 < η_min)
    after = replace(att, eta=0.2, eta_windows=0, eta_failed_quota=0)
    assert update_eta(after, p, None, rule="attributable") == pytest.approx(0.2)
    assert update_eta(after, p, None, rule="paper") == pytest.approx(p.eta_min)
    # growth needs a low attributable rate over eta_window_h and an LP job waiting on the quota
    calm = EtaState(eta=1.0, recent_succeeded=10, eta_windows=100, eta_failed_quota=1)
    assert update_eta(calm, p, 2 * QUOTA_WAIT_S, rule="attributable") == pytest.approx(1.4)
    assert update_eta(calm, p, None, rule="attributable") == 1.0
    with pytest.raises(ValueError, match="eta_window_h must be a positive"):
        AttributableEta(window_h=0.0)


def _gfs_small_replay() -> tuple[Simulator, Params]:
    """GFS (ETS) on `small` at LP load 2, ready to run: η moves and its band fills there."""
    from gfs_opt.experiments.runner import RunSpec, prepare_trace

    trace, lo, hi = prepare_trace(RunSpec.from_setup("small", policy="gfs", lp_load=2.0))
    params = Params()
    return (Simulator(trace, make_policy("gfs", forecaster="ets"), params,
                      SimConfig(eval_start=lo, eval_end=hi)), params)


def _ledger(sim: Simulator) -> EtaLedger:
    assert sim.policy.spot is not None    # the simulator has reset the policy: its ledger exists
    return sim.policy.spot.ledger


def test_eta_evidence_is_the_windows_since_eta_last_moved() -> None:
    # recount, from the engine's last-H-hours outcomes, the windows ended after the refresh
    # that last moved η and within eta_window_h: that is what every refresh hands the η rule
    sim, _params = _gfs_small_replay()
    ledger = _ledger(sim)
    window_s = sim.policy.spot.eta_rule.window_h * 3600
    moved: dict[str, tuple[float, int]] = {}   # pool → (time of η's last move, outcomes it read then)
    checked = moves = 0

    def check(rnd: Round, decision: Decision) -> None:
        nonlocal checked, moves
        if not rnd.quota_due:
            return
        for pool in rnd.state.pools:
            status, reading = rnd.pool_status(pool), ledger.reading(pool)
            recent = ledger.pools[pool].recent
            at, read = moved.get(pool, (-math.inf, 0))
            outcomes = [(t, quota) for t, _ok, quota in recent
                        if t >= max(at, rnd.time - window_s)]
            outcomes = outcomes[read:] if outcomes and outcomes[0][0] == at else outcomes
            assert reading.eta_windows == len(outcomes)
            assert reading.eta_failed_quota == sum(q for _t, q in outcomes)
            checked += reading.eta_windows > 0
            if decision.eta is not None and decision.eta.get(pool, status.eta) != status.eta:
                moved[pool] = (rnd.time, sum(t == rnd.time for t, _ok, _q in recent))
                moves += 1

    sim.on_decision = check
    sim.run()
    assert moves > 0 and checked > 0    # η moved, and windows were read between its moves


def test_growth_band_outcomes_come_from_eta_above_one() -> None:
    # the band's day of outcomes, recounted from the engine's log: only windows that ended while
    # η > 1 weigh in, each success by at most 1 and each failure by η's share (≤ 1) of its
    # overrun; what every refresh hands the η rule is their sum over eta_band_window_h
    sim, _params = _gfs_small_replay()
    ledger = _ledger(sim)
    band_s = sim.policy.spot.eta_rule.band_window_h * 3600
    above: dict[str, list[tuple[float, float]]] = {}   # pool → (from, to) times with η > 1
    banded = broken = kept = 0

    def check(rnd: Round, decision: Decision) -> None:
        nonlocal banded, broken, kept
        if not rnd.quota_due:
            return
        for pool in rnd.state.pools:
            status, eta_now = ledger.reading(pool), rnd.pool_status(pool).eta
            day = [(t, w, f) for t, w, f in ledger.pools[pool].band
                   if t >= rnd.time - band_s]
            assert status.band_windows == pytest.approx(sum(w for _t, w, _f in day), abs=1e-6)
            assert status.band_failed == pytest.approx(sum(f for _t, _w, f in day), abs=1e-6)
            assert status.band_failed <= status.band_windows
            for t, w, f in day:
                assert 0 < w <= 1 and f in (0.0, w)
                assert any(a <= t <= b for a, b in above.get(pool, ())), "band outcome at η ≤ 1"
            banded += status.band_windows > 0
            broken += status.band_failed > 0
            kept += status.band_windows > status.band_failed + 1e-9
            new = (decision.eta or {}).get(pool, eta_now)
            spans = above.setdefault(pool, [])
            if new > 1 and not (spans and spans[-1][1] == math.inf):
                spans.append((rnd.time, math.inf))
            elif new <= 1 and spans and spans[-1][1] == math.inf:
                spans[-1] = (spans[-1][0], rnd.time)

    sim.on_decision = check
    sim.run()
    assert banded > 0     # η rose above 1 and windows ended in its band
    assert broken > 0 and kept > 0    # and some of them failed there, some ran their window
