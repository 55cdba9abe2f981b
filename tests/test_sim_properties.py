"""Property tests of the simulation spine (issue 3, item 8) on random small clusters and traces.

Every policy of `gfs_opt.policies.POLICIES` (ablations included) runs with the engine's own
invariant checks on, and each run is then re-audited independently from a log of every start and
release (see `sim_audit`): no GPU over-allocated at any moment, whole gangs only, HP never evicted,
every job ends at most once and is otherwise reported pending/running, GPU-seconds held and lost
match the LP work model, the 60 s samples match the log, LP admissions respect the quota in force.
The engine must also refuse a malicious policy (HP victim, over-allocation, partial gang).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_audit import AuditedSimulator, audit, compare_jobs_table, usage_at
from sim_strategies import trace_summary, traces

from gfs_opt.model import MILLI, Decision, Params, PoolForecast, Round
from gfs_opt.policies import POLICIES, make_policy
from gfs_opt.policies.base import Policy
from gfs_opt.policies.chronus import ChronusPolicy
from gfs_opt.policies.gfs import GFSPolicy
from gfs_opt.policies.yarn_cs import YarnCSPolicy
from gfs_opt.sim.engine import InvalidDecision, SimConfig, Simulator
from gfs_opt.sim.metrics import summarize
from gfs_opt.traces.base import JOB_COLUMNS, NODE_COLUMNS, Trace

CLASSES = (1.0, 2.0)
# 15 draws per policy × forecaster keeps the default suite within its budget; the long runs
# (tests/test_invariants_long.py, -m slow, in .ci/run) give each invariant ≥ 10⁵ rounds
SETTINGS = settings(max_examples=15, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---- policies under test ----------------------------------------------------------------------
class StubProvider:
    """A forecast provider that needs no model: next hours = last hour's pool peak, σ = 1 GPU.

    Lets the quota rule bind from the first hour on, on traces far shorter than a real
    forecaster's first refit."""

    def __init__(self, horizon_h: int) -> None:
        self.horizon_h = horizon_h
        self.last: dict[str, float] = {}

    def observe(self, t: float, usage: dict[tuple[str, str], float]) -> None:
        peak: dict[str, float] = {}
        for (pool, _org), v in usage.items():
            peak[pool] = peak.get(pool, 0.0) + v
        self.last = peak

    def refit(self, t: float) -> None:
        pass

    def has_history(self, pool: str) -> bool:
        return pool in self.last

    def pool_forecasts(self, t: float) -> dict[str, PoolForecast]:
        h = self.horizon_h
        return {p: PoolForecast(np.full(h, v), np.ones(h)) for p, v in self.last.items()}


class StubForecastMixin:
    """Feeds a policy's spot quota from `StubProvider` (the rule binds early and often)."""

    def reset(self, state, params, origin=None) -> None:  # type: ignore[no-untyped-def]
        super().reset(state, params, origin)  # type: ignore[misc]
        self.spot.provider = StubProvider(params.horizon_h)  # type: ignore[attr-defined]


def with_stub_forecast(cls: type[GFSPolicy]) -> type[GFSPolicy]:
    return type(f"StubForecast{cls.__name__}", (StubForecastMixin, cls), {})


StubForecastGFS = with_stub_forecast(GFSPolicy)


def _case(name: str, **opts: object) -> Callable[[], Policy]:
    return lambda: make_policy(name, **opts)


def policy_cases() -> dict[str, Callable[[], Policy]]:
    """Every registered policy; GFS variants with no quota, the stub forecast and real forecasters."""
    cases: dict[str, Callable[[], Policy]] = {}
    for name, (cls, fixed) in POLICIES.items():
        if issubclass(cls, GFSPolicy):
            cases[f"{name}/quota-none"] = _case(name, quota="none")
            cases[f"{name}/stub-forecast"] = (
                lambda cls=cls, fixed=fixed: with_stub_forecast(cls)(**fixed))
            if "forecaster" in fixed:
                cases[f"{name}/rule"] = _case(name)
            else:
                cases[f"{name}/week-peak"] = _case(name, forecaster="week-peak")
        elif make_policy(name).spot is not None:      # a baseline under the shared quota
            cases[f"{name}/week-peak"] = _case(name, forecaster="week-peak")
            cases[f"{name}/stub-forecast"] = (
                lambda cls=cls, fixed=fixed: with_stub_forecast(cls)(**fixed))
        else:
            cases[name] = _case(name)
    cases["gfs/seasonal-naive"] = _case("gfs", forecaster="seasonal-naive")
    cases["yarn-cs/quota-static"] = lambda: YarnCSPolicy(quota="static")
    if "gfs-milp" in POLICIES:   # the chance-constrained admission MILP sets the quota
        milp_cls, _fixed = POLICIES["gfs-milp"]
        cases["gfs-milp/quota-milp-stub"] = lambda: with_stub_forecast(milp_cls)(
            quota_method="milp")  # type: ignore[call-arg]
    return cases


CASES = policy_cases()
# exact (MILP) policies solve per round: fewer examples keep the file within its time budget
EXACT_CASES = [c for c in CASES if "milp" in c]
FAST_CASES = [c for c in CASES if c not in EXACT_CASES]
QUOTA_CASES = [c for c in FAST_CASES if (c.startswith("gfs") or "+sqa" in c)
               and "quota-none" not in c] + ["yarn-cs/quota-static"]


def yarn_static_quota(sim: AuditedSimulator) -> dict[tuple[str, float], int]:
    """YARN-CS's static quota as in force for this round: capacity minus HP at the round start."""
    st_ = sim.state
    return {(p, d): int(st_.pool_capacity[i] - sim.round_hp[i]) // MILLI * MILLI
            for i, p in enumerate(st_.pools) for d in sim.params.guarantee_classes}


class RoundSnoop(AuditedSimulator):
    """Also remembers HP usage at the start of each policy pass (for YARN's static quota)."""

    def _policy_pass(self, t: float, quota_due: bool) -> None:
        self.round_hp = self.state.pool_hp.copy()
        super()._policy_pass(t, quota_due)


def simulate(trace: Trace, policy: Policy, **cfg: object) -> RoundSnoop:
    last = float(trace.jobs["submit"].max())
    config = SimConfig(eval_start=0.0, eval_end=last + 1.0, sample_s=300.0, check_invariants=True,
                       drain_s=2 * 86_400.0)
    for k, v in cfg.items():
        setattr(config, k, v)
    sim = RoundSnoop(trace, policy, Params(guarantee_classes=CLASSES), config)
    if isinstance(policy, YarnCSPolicy) and policy.quota_mode == "static":
        sim.external_quota = yarn_static_quota
    sim.run()
    return sim


# ---- the properties -----------------------------------------------------------------------------
def check_run(sim: RoundSnoop, trace: Trace) -> None:
    """Everything issue 3 item 8 promises, on one finished simulation."""
    rep = audit(sim, trace)                       # occupancy replay, gangs, pools, HP never evicted
    assert rep.max_gpu_use <= MILLI
    jobs = sim.recorder.jobs
    assert jobs is not None
    compare_jobs_table(jobs, rep, trace)          # per-job held/lost/windows/JQT/status from the log

    # HP jobs never evicted, nor re-queued
    hp = jobs[jobs["cls"] == "HP"]
    assert int(hp["evictions"].sum()) == 0 and int(hp["requeues"].sum()) == 0
    assert summarize(sim.recorder)["hp_evictions"] == 0

    # conservation: each submitted job is done once, or still running, or still pending
    counts = jobs["status"].value_counts().to_dict()
    assert set(counts) <= {"done", "running", "pending"}, counts
    assert sum(counts.values()) == len(trace.jobs)
    assert counts.get("running", 0) == len(sim.running)
    assert counts.get("pending", 0) == len(sim.hp_q) + len(sim.lp_q)

    # GPU-seconds: held − lost = demand × (duration + restart overheads actually paid)
    for row in jobs[jobs["status"] == "done"].itertuples(index=False):
        a = row.gpus_per_worker * row.workers   # the gang's GPUs
        paid = rep.expected[row.job_id].paid_overhead
        assert math.isclose(row.held_gpu_s - row.lost_gpu_s, a * (row.duration + paid),
                            rel_tol=1e-9, abs_tol=1e-4), f"job {row.job_id} work identity"
        if row.cls == "HP":
            assert math.isclose(row.held_gpu_s, a * row.duration, rel_tol=1e-9, abs_tol=1e-4)
            assert row.lost_gpu_s == 0
        else:
            # the bound readable from the table alone
            hi = a * (row.duration + 60.0 * row.evictions + sim.cfg.requeue_cost_s * row.requeues)
            assert a * row.duration - 1e-4 <= row.held_gpu_s - row.lost_gpu_s <= hi + 1e-4
    # Chronus never evicts: it re-queues at lease ends, so it never loses work
    if isinstance(sim.policy, ChronusPolicy):
        assert int(jobs["evictions"].sum()) == 0 and float(jobs["lost_gpu_s"].sum()) == 0.0

    # total GPU-seconds held = the area under the log's allocation curve (closed runs)
    area = sum(r.job.demand / MILLI * (r.end - r.start) for r in sim.log if r.how != "open")
    assert math.isclose(float(jobs["held_gpu_s"].sum()), area, rel_tol=1e-9, abs_tol=1e-4)

    # every 300 s sample equals the HP/LP usage reconstructed from the log
    ts = sim.recorder.timeseries()
    if len(ts):
        hp_log, lp_log = usage_at(sim.log, ts["t"].to_numpy(), ts["pool"].to_numpy())
        got_hp = np.rint(ts["hp"].to_numpy() * MILLI).astype(np.int64)
        got_lp = np.rint(ts["lp"].to_numpy() * MILLI).astype(np.int64)
        bad = np.flatnonzero((got_hp != hp_log) | (got_lp != lp_log))
        assert not len(bad), (f"sample {ts.iloc[bad[0]].to_dict()} disagrees with the log: "
                              f"HP {hp_log[bad[0]]}, LP {lp_log[bad[0]]} milli")

    # η feedback stays clamped to [η_min, η_max]
    for status in sim.pool_status.values():
        assert sim.params.eta_min <= status.eta <= sim.params.eta_max

    # quota: no LP start pushed its pool's running LP work above the quota in force
    assert not sim.quota_breaches, sim.quota_breaches[:3]


def _simulate_and_check(case: str, trace: Trace) -> None:
    sim = simulate(trace, CASES[case]())
    try:
        check_run(sim, trace)
    except AssertionError as exc:
        raise AssertionError(f"{case}: {exc}\n{trace_summary(trace)}") from None


@pytest.mark.parametrize("case", FAST_CASES)
@SETTINGS
@given(trace=traces(guarantee_classes=CLASSES))
def test_simulation_invariants(case: str, trace: Trace) -> None:
    _simulate_and_check(case, trace)


@pytest.mark.parametrize("case", EXACT_CASES)
@settings(SETTINGS, max_examples=8)
@given(trace=traces(guarantee_classes=CLASSES))
def test_simulation_invariants_exact_policies(case: str, trace: Trace) -> None:
    _simulate_and_check(case, trace)


@pytest.mark.parametrize("case", QUOTA_CASES)
@settings(SETTINGS, max_examples=10)
@given(trace=traces(max_jobs=30, span_s=40 * 3600, guarantee_classes=CLASSES))
def test_quota_respected_over_days(case: str, trace: Trace) -> None:
    """Longer traces so the real forecasters refit at midnight and their quotas bind."""
    sim = simulate(trace, CASES[case]())
    check_run(sim, trace)


def test_quota_audit_is_exercised() -> None:
    """The stub-forecast GFS really admits LP under a binding quota, and the audit sees it."""
    nodes = pd.DataFrame([("n0", "A100", 8, 64.0)], columns=NODE_COLUMNS)
    rows = [(0, "hp", "o", "A100", "HP", 6000, 1, 0.0, 7200.0, 0.0, 1.0, True)]
    rows += [(i, f"lp{i}", "o", "A100", "LP", 1000, 1, 3700.0, 600.0, 0.0, 1.0, False)
             for i in range(1, 6)]
    trace = Trace(nodes, pd.DataFrame(rows, columns=JOB_COLUMNS))
    sim = simulate(trace, StubForecastGFS(), eval_end=7200.0)
    check_run(sim, trace)
    assert sim.quota_checks == 5
    q = sim.recorder.quota_table().set_index("t")
    # no HP history in the first hour → quota = capacity; then the forecast is 6 GPUs of HP,
    # its 0.9-quantile 6 + 1.28 → 7 GPUs, F = 8 − 7 = 1 GPU → one LP job at a time
    assert (q.loc[q.index < 3600, "quota_gpus"] == 8.0).all()
    assert (q.loc[(q.index >= 3600) & (q.index < 7200), "quota_gpus"] == 1.0).all()
    lp = sim.recorder.jobs.query("cls == 'LP'")
    starts = sorted(lp["first_start"])
    assert all(b >= a + 600.0 for a, b in pairwise(starts)), starts


# ---- determinism ----------------------------------------------------------------------------------
def _comparable(sim: Simulator) -> tuple[dict, pd.DataFrame]:
    s = summarize(sim.recorder)
    s["solver_reports"] = [{k: v for k, v in r.items() if k != "total_time_s"}
                           for r in s["solver_reports"]]
    return s, sim.recorder.jobs


@pytest.mark.parametrize("case", ["gfs/stub-forecast", "gfs/week-peak", "chronus", "lyra", "fgd",
                                  "yarn-cs", "gfs-naive-victims/quota-none"])
@settings(SETTINGS, max_examples=8)
@given(trace=traces(guarantee_classes=CLASSES), load=st.sampled_from([0.5, 1.0, 1.7]),
       seed=st.integers(0, 3))
def test_same_seed_same_results(case: str, trace: Trace, load: float, seed: int) -> None:
    a = trace.select(lp_load=load, seed=seed)
    b = trace.select(lp_load=load, seed=seed)
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    if a.jobs.empty:
        return
    sa, ja = _comparable(simulate(a, CASES[case]()))
    sb, jb = _comparable(simulate(b, CASES[case]()))
    assert _nan_equal(sa, sb)
    pd.testing.assert_frame_equal(ja, jb)


def _nan_equal(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_nan_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_nan_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


# ---- the engine refuses bad decisions -----------------------------------------------------------
class Malicious(Policy):
    """Runs every job where the `plan` says, at the first pass where it is pending."""

    name = "malicious"

    def __init__(self, plan: Callable[[Round], Decision]) -> None:
        self.plan = plan

    def decide(self, rnd: Round) -> Decision:
        return self.plan(rnd)


def _tiny_trace(jobs: list[tuple]) -> Trace:
    nodes = pd.DataFrame([("n0", "A100", 2, 64.0), ("n1", "A100", 2, 64.0)], columns=NODE_COLUMNS)
    rows = [(jid, f"j{jid}", "o", "A100", cls, g, w, s, 1000.0, 0.0, 1.0, False)
            for jid, cls, g, w, s in jobs]
    return Trace(nodes, pd.DataFrame(rows, columns=JOB_COLUMNS))


def _first_pending(rnd: Round, jid: int) -> bool:
    return jid in set(rnd.pending_hp) | set(rnd.pending_lp)


def _run_malicious(trace: Trace, plan: Callable[[Round], Decision]) -> None:
    Simulator(trace, Malicious(plan), Params(),
              SimConfig(eval_start=0.0, eval_end=100.0, check_invariants=True)).run()


def test_engine_rejects_hp_victim() -> None:
    trace = _tiny_trace([(1, "HP", 1000, 1, 0.0), (2, "HP", 1000, 1, 10.0)])

    def plan(rnd: Round) -> Decision:
        if _first_pending(rnd, 1):
            return Decision(placements={1: ((0, (0,)),)})
        if 1 in rnd.running:
            return Decision(victims=[1], placements={2: ((0, (0,)),)})
        return Decision()

    with pytest.raises(InvalidDecision, match=r"evict HP job 1"):
        _run_malicious(trace, plan)


def test_engine_rejects_hp_requeue() -> None:
    trace = _tiny_trace([(1, "HP", 1000, 1, 0.0), (2, "LP", 1000, 1, 10.0)])

    def plan(rnd: Round) -> Decision:
        if _first_pending(rnd, 1):
            return Decision(placements={1: ((0, (0,)),)})
        if 1 in rnd.running:
            return Decision(requeue=[1])
        return Decision()

    with pytest.raises(InvalidDecision, match=r"evict HP job 1"):
        _run_malicious(trace, plan)


def test_engine_rejects_over_allocation() -> None:
    trace = _tiny_trace([(1, "LP", 600, 1, 0.0), (2, "HP", 500, 1, 10.0)])

    def plan(rnd: Round) -> Decision:
        if _first_pending(rnd, 1):
            return Decision(placements={1: ((0, (1,)),)})
        if _first_pending(rnd, 2):
            return Decision(placements={2: ((0, (1,)),)})  # 600 + 500 > 1000 milli on GPU 1
        return Decision()

    with pytest.raises(InvalidDecision, match=r"invalid placement: job 2: GPU 1 over-allocated"):
        _run_malicious(trace, plan)


def test_engine_rejects_two_workers_on_one_whole_gpu() -> None:
    trace = _tiny_trace([(1, "HP", 1000, 2, 0.0)])

    def plan(rnd: Round) -> Decision:
        return Decision(placements={1: ((0, (0,)), (0, (0,)))}) if _first_pending(rnd, 1) else Decision()

    with pytest.raises(InvalidDecision, match=r"over-allocated"):
        _run_malicious(trace, plan)


def test_engine_rejects_partial_gang() -> None:
    trace = _tiny_trace([(1, "LP", 1000, 3, 0.0)])

    def plan(rnd: Round) -> Decision:
        return Decision(placements={1: ((0, (0,)), (1, (0,)))}) if _first_pending(rnd, 1) else Decision()

    with pytest.raises(InvalidDecision, match=r"job 1: 2 workers placed, gang needs 3"):
        _run_malicious(trace, plan)


@pytest.mark.parametrize(("placement", "message"), [
    (((0, (0,)),), r"worker needs 2 distinct GPUs"),          # a 2-GPU worker on one GPU
    (((0, (0, 0)),), r"worker needs 2 distinct GPUs"),        # the same GPU twice
    (((5, (0, 1)),), r"unknown node 5"),
    (((0, (1, 2)),), r"node 0 has no GPU 2"),
])
def test_engine_rejects_malformed_worker(placement: tuple, message: str) -> None:
    trace = _tiny_trace([(1, "HP", 2000, 1, 0.0)])

    def plan(rnd: Round) -> Decision:
        return Decision(placements={1: placement}) if _first_pending(rnd, 1) else Decision()

    with pytest.raises(InvalidDecision, match=message):
        _run_malicious(trace, plan)


def test_engine_rejects_wrong_pool_and_unknown_jobs() -> None:
    nodes = pd.DataFrame([("a", "A10", 1, 8.0), ("b", "A100", 1, 8.0)], columns=NODE_COLUMNS)
    rows = [(1, "j1", "o", "A100", "HP", 1000, 1, 0.0, 100.0, 0.0, 1.0, False)]
    trace = Trace(nodes, pd.DataFrame(rows, columns=JOB_COLUMNS))

    def wrong_pool(rnd: Round) -> Decision:
        return Decision(placements={1: ((0, (0,)),)}) if _first_pending(rnd, 1) else Decision()

    with pytest.raises(InvalidDecision, match=r"node 0 is not in pool A100"):
        _run_malicious(trace, wrong_pool)
    with pytest.raises(InvalidDecision, match=r"victim 99 is not running"):
        _run_malicious(trace, lambda rnd: Decision(victims=[99]))
    with pytest.raises(InvalidDecision, match=r"placed job 42 is not pending"):
        _run_malicious(trace, lambda rnd: Decision(placements={42: ((1, (0,)),)}))


def test_invalid_decision_is_a_one_line_user_error() -> None:
    from gfs_opt.errors import GfsError

    assert issubclass(InvalidDecision, GfsError)


def test_audit_catches_an_engine_that_skips_its_checks() -> None:
    """The independent replay is not a copy of the engine's check: with the engine's allocation
    check bypassed, an over-allocating policy is caught by the audit alone."""
    trace = _tiny_trace([(1, "LP", 600, 1, 0.0), (2, "HP", 500, 1, 10.0)])

    def plan(rnd: Round) -> Decision:
        if _first_pending(rnd, 1):
            return Decision(placements={1: ((0, (1,)),)})
        if _first_pending(rnd, 2):
            return Decision(placements={2: ((0, (1,)),)})
        return Decision()

    sim = AuditedSimulator(trace, Malicious(plan), Params(),
                           SimConfig(eval_start=0.0, eval_end=100.0))
    real_allocate = sim.state.allocate

    def lax_allocate(job, placement):  # type: ignore[no-untyped-def]
        sim.state.gpu_used[:] = 0      # hide existing usage from the engine's own check
        real_allocate(job, placement)

    sim.state.allocate = lax_allocate  # type: ignore[method-assign]
    sim.run()
    with pytest.raises(AssertionError, match=r"GPU \(0, 1\) at 1100 milli"):
        audit(sim, trace)


# ---- defects these tests found (fixed; kept as regression tests) --------------------------------
def _one_node(gpus: int, rows: list[tuple]) -> Trace:
    nodes = pd.DataFrame([("n0", "A100", gpus, 64.0)], columns=NODE_COLUMNS)
    return Trace(nodes, pd.DataFrame(rows, columns=JOB_COLUMNS))


def test_lp_job_held_by_quota_starts_once_the_forecast_drops() -> None:
    # HP holds all 4 GPUs until 5400 s; the stub forecast (last hour's peak) keeps Q = 0 until
    # the hour ending 10800 s reports no HP, then Q = 4 GPUs and the LP job can start
    trace = _one_node(4, [(0, "hp", "o", "A100", "HP", 4000, 1, 0.0, 5400.0, 0.0, 1.0, True),
                          (1, "lp", "o", "A100", "LP", 2000, 1, 4000.0, 600.0, 0.0, 1.0, False)])
    sim = simulate(trace, StubForecastGFS(), eval_end=4001.0)
    lp = sim.recorder.jobs.set_index("job_id").loc[1]
    assert lp["status"] == "done", f"LP job left {lp['status']}; run ended at {sim.recorder.end_time}"


def test_chronus_requeue_on_a_window_boundary_fails_no_window() -> None:
    # LP runs from 0; its first window ends at 3600 (success); HP waits from 3500, so at the
    # 3600 round (lease age 3600 = 3·1200) Chronus re-queues the LP job — between two windows
    trace = _one_node(1, [(0, "lp", "o", "A100", "LP", 1000, 1, 0.0, 10_000.0, 0.0, 1.0, False),
                          (1, "hp", "o", "A100", "HP", 1000, 1, 3500.0, 100.0, 0.0, 1.0, False)])
    sim = simulate(trace, make_policy("chronus"))
    lp = sim.recorder.jobs.set_index("job_id").loc[0]
    assert lp["requeues"] == 1 and lp["windows_ok"] == 3
    assert lp["windows_failed"] == 0


def test_lp_class_outside_the_configured_classes_is_still_quota_bound() -> None:
    # as `gfs-opt simulate --guarantee-classes 2` does with a trace whose LP jobs are all 1 h
    rows = [(0, "hp", "o", "A100", "HP", 6000, 1, 0.0, 7200.0, 0.0, 1.0, True)]
    rows += [(i, f"lp{i}", "o", "A100", "LP", 1000, 1, 3700.0, 600.0, 0.0, 1.0, False)
             for i in range(1, 6)]
    trace = _one_node(8, rows)
    last = float(trace.jobs["submit"].max())
    sim = RoundSnoop(trace, StubForecastGFS(), Params(guarantee_classes=(2.0,)),
                     SimConfig(eval_start=0.0, eval_end=last + 1.0, check_invariants=True))
    sim.run()
    # no quota (A100, 1.0) exists: the 1 h jobs are held to the 2 h class's quota
    assert not sim.quota_breaches, sim.quota_breaches
