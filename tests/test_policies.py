"""Policy behaviour on hand-built rounds (GFS-SPEC §2.3, §6), and valid decisions on random ones."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import rounds

from gfs_opt.errors import GfsError
from gfs_opt.model import (
    ClusterState,
    Decision,
    Job,
    JobClass,
    Params,
    Placement,
    Round,
    RunningJob,
)
from gfs_opt.pending import PTS_ORDER
from gfs_opt.policies import POLICIES, make_policy, options_for
from gfs_opt.policies.base import Policy
from gfs_opt.policies.chronus import ChronusPolicy
from gfs_opt.policies.fgd import FGDPolicy, whole_fragmentation
from gfs_opt.policies.gfs import GFSPolicy
from gfs_opt.policies.yarn_cs import YarnCSPolicy
from gfs_opt.preempt.scoring import BEST_FIT
from gfs_opt.quota.admission import lp_pass

HP, LP = JobClass.HP, JobClass.LP


def cluster(*sizes: int) -> ClusterState:
    return ClusterState.from_nodes(("A100", g, f"n{i}") for i, g in enumerate(sizes))


def job(jid: int, cls: JobClass, g: int, w: int = 1, submit: float = 0.0) -> Job:
    return Job(jid, "org", "A100", cls, g, w, submit, 10_000.0)


class RoundBuilder:
    def __init__(self, *sizes: int, time: float = 1000.0) -> None:
        self.state = cluster(*sizes)
        self.jobs: dict[int, Job] = {}
        self.running: dict[int, RunningJob] = {}
        self.pending_hp: list[int] = []
        self.pending_lp: list[int] = []
        self.time = time

    def run(self, j: Job, placement: Placement, start: float = 0.0, ckpt: float = 0.0
            ) -> RoundBuilder:
        self.jobs[j.id] = j
        self.state.allocate(j, placement)
        self.running[j.id] = RunningJob(j, start, ckpt, ckpt, placement)
        return self

    def pend(self, j: Job) -> RoundBuilder:
        self.jobs[j.id] = j
        (self.pending_hp if j.is_hp else self.pending_lp).append(j.id)
        return self

    def build(self) -> Round:
        return Round(time=self.time, state=self.state, jobs=self.jobs, running=self.running,
                     pending_hp=list(self.pending_hp), pending_lp=list(self.pending_lp),
                     params=Params())


def decide(policy: Policy, rnd: Round) -> Decision:
    """Like the engine: the policy plans on the live state, which is rolled back afterwards."""
    policy.reset(rnd.state, rnd.params)
    rnd.state.begin()
    try:
        return policy.decide(rnd)
    finally:
        rnd.state.rollback()
        rnd.state.commit()


def gfs() -> Policy:
    return make_policy("gfs", quota="none")


# ---- Chronus: leases, re-queue instead of eviction ----------------------------------------------
def chronus_round(time: float, hp_waiting: bool = True) -> Round:
    b = RoundBuilder(4, time=time).run(job(1, LP, 4000), ((0, (0, 1, 2, 3)),), start=0.0)
    if hp_waiting:
        b.pend(job(2, HP, 4000, submit=time - 100))
    return b.build()


def test_chronus_requeues_at_lease_end_instead_of_evicting() -> None:
    d = decide(ChronusPolicy(), chronus_round(1200.0))      # lease 0 → 1200 just ended
    assert d.victims == [] and d.requeue == [1]
    assert d.placements == {2: ((0, (0, 1, 2, 3)),)}


@pytest.mark.parametrize("time", [1000.0, 1500.0, 2100.0])
def test_chronus_never_interrupts_a_running_lease(time: float) -> None:
    d = decide(ChronusPolicy(), chronus_round(time))         # leases end at 1200, 2400, …
    assert d.victims == [] and d.requeue == [] and d.placements == {}


def test_chronus_renews_leases_nobody_needs() -> None:
    d = decide(ChronusPolicy(), chronus_round(2400.0, hp_waiting=False))
    assert d.requeue == [] and d.victims == []


def test_chronus_schedules_only_on_rounds() -> None:
    assert ChronusPolicy.every_event is False
    assert all(cls.every_event for name, (cls, _o) in POLICIES.items() if name != "chronus")


def test_preemptive_policies_evict_where_chronus_waits() -> None:
    for name in ("gfs-no-wait", "yarn-cs", "lyra", "fgd"):
        pol = make_policy(name, quota="none") if name == "gfs-no-wait" else make_policy(name)
        d = decide(pol, chronus_round(1000.0))
        assert d.victims == [1] and d.requeue == [] and 2 in d.placements, name


def test_gfs_waits_for_the_window_boundary_where_its_gang_takes_a_whole_node() -> None:
    """GFS's HP job of a whole node waits (the LP job is mid-window, the wait has just begun)
    and, at the LP job's window end, takes it as a re-queue (`gfs_opt.preempt.boundary`)."""
    d = decide(gfs(), chronus_round(1000.0))
    assert d.victims == [] and d.requeue == [] and d.placements == {}
    at_end = RoundBuilder(4, time=3600.0).run(job(1, LP, 4000), ((0, (0, 1, 2, 3)),), start=0.0,
                                              ckpt=3600.0)
    d = decide(gfs(), at_end.pend(job(2, HP, 4000, submit=3500.0)).build())
    assert d.victims == [] and d.requeue == [1] and 2 in d.placements


# ---- YARN-CS: FIFO with head-of-line blocking ------------------------------------------------------
def blocked_round() -> Round:
    """Node 0 is full of HP; node 1 has 2 free GPUs. The oldest HP job needs 4 GPUs (cannot run,
    even by preemption), the younger ones need 1; the same for LP."""
    b = RoundBuilder(4, 4)
    b.run(job(1, HP, 4000), ((0, (0, 1, 2, 3)),)).run(job(2, HP, 2000), ((1, (0, 1)),))
    b.pend(job(10, HP, 4000, submit=1.0)).pend(job(11, HP, 1000, submit=2.0))
    b.pend(job(20, LP, 4000, submit=1.0)).pend(job(21, LP, 1000, submit=2.0))
    return b.build()


def test_yarn_cs_head_of_line_blocking() -> None:
    d = decide(make_policy("yarn-cs"), blocked_round())
    assert d.placements == {} and d.victims == []


def test_policies_without_head_of_line_blocking_go_around() -> None:
    # the small HP and LP jobs go around the big ones and share node 1's two free GPUs
    for pol in (gfs(), make_policy("lyra"), make_policy("fgd"), make_policy("chronus")):
        d = decide(pol, blocked_round())
        assert set(d.placements) == {11, 21} and d.victims == [], pol.name


def test_yarn_cs_static_quota_is_capacity_minus_hp() -> None:
    b = RoundBuilder(4, 4)
    b.run(job(1, HP, 3000), ((0, (0, 1, 2)),))
    q = YarnCSPolicy(quota="static").standalone_quotas(b.build())
    assert q == {("A100", 1.0): 5000}
    with pytest.raises(ValueError, match="quota"):
        YarnCSPolicy(quota="rule")


# ---- PTS order and fail_size in GFS -----------------------------------------------------------------
def test_gfs_hp_order_is_largest_first_with_fail_size() -> None:
    b = RoundBuilder(4, 4)
    b.run(job(1, HP, 2000), ((0, (0, 1)),))
    # room: node 0 has 2 free, node 1 has 4 free. Order (−g, submit): 12 (4 GPUs), 10, 11 (2 GPUs)
    b.pend(job(10, HP, 2000, submit=1.0)).pend(job(11, HP, 2000, submit=2.0))
    b.pend(job(12, HP, 4000, submit=3.0))
    d = decide(gfs(), b.build())
    assert list(d.placements) == [12, 10]             # 12 took node 1, 10 node 0, 11 no room
    assert d.victims == []


def test_lp_jobs_never_preempt() -> None:
    b = RoundBuilder(4)
    b.run(job(1, LP, 2000), ((0, (0, 1)),), ckpt=999.0).run(job(2, HP, 2000), ((0, (2, 3)),))
    b.pend(job(3, LP, 2000, submit=5.0))
    for name in POLICIES:
        pol = make_policy(name, quota="none") if name.startswith("gfs") else _policy(name)
        d = decide(pol, b.build())
        assert d.victims == [] and d.requeue == [] and d.placements == {}, name


def test_gfs_quota_blocks_lp_and_keeps_going_with_smaller_jobs() -> None:
    b = RoundBuilder(8)
    b.pend(job(1, LP, 4000, submit=1.0)).pend(job(2, LP, 2000, submit=2.0))
    rnd = replace(b.build(), quota_due=False)
    pol = GFSPolicy(quota="rule", forecaster="week-peak")
    pol.reset(rnd.state, rnd.params)
    assert pol.spot is not None
    pol.spot.quotas = {("A100", 1.0): 3000}          # as if the last refresh gave 3 GPUs
    rnd.state.begin()
    d = pol.decide(rnd)
    rnd.state.rollback()
    rnd.state.commit()
    assert list(d.placements) == [2]                 # 4 GPUs > quota, 2 GPUs ≤ quota


def test_gfs_hp_prefers_cheap_victims() -> None:
    """Node 0: one 8-GPU LP job (waste 8·1000); node 1: eight 1-GPU LP jobs (waste 1000 each).
    An HP job needs 2 GPUs. GFS breaks two small jobs (waste 2000, ratio term equal when
    F = S = 0); Lyra's Σ 1/(w·max(g,1)) = 1/8 < 2 breaks the big job; YARN-CS, fewest victims,
    also the big one."""
    def rnd() -> Round:
        b = RoundBuilder(8, 8)
        b.run(job(1, LP, 8000), ((0, tuple(range(8))),))
        for i in range(8):
            b.run(job(10 + i, LP, 1000), ((1, (i,)),))
        return b.pend(job(99, HP, 2000)).build()

    d = decide(gfs(), rnd())
    assert len(d.victims) == 2 and all(v >= 10 for v in d.victims) and d.placements[99][0][0] == 1
    for name in ("lyra", "yarn-cs"):
        d = decide(make_policy(name), rnd())
        assert d.victims == [1] and d.placements[99][0][0] == 0, name


# ---- FGD --------------------------------------------------------------------------------------
def test_fgd_fragmentation_table() -> None:
    frag = whole_fragmentation(8)
    # frag(f) = Σ_m p_m·[f < m]·f·1000 with p = {1: .35, 2: .10, 4: .05, 8: .50}
    assert frag[0] == 0 and frag[8] == 0
    assert frag[1] == pytest.approx(650.0)           # (.10 + .05 + .50)·1000
    assert frag[3] == pytest.approx(1650.0)          # (.05 + .50)·3000
    assert frag[7] == pytest.approx(3500.0)          # .50·7000


def test_fgd_places_where_fragmentation_grows_least() -> None:
    st_ = cluster(8, 8)
    st_.allocate(job(1, HP, 5000), ((1, (0, 1, 2, 3, 4)),))          # node 1: 3 free
    pol = FGDPolicy()
    # 1 GPU: node 0 Δ = frag(7) − frag(8) = 3500; node 1 Δ = frag(2) − frag(3) = −550 → node 1
    assert pol.placement.place_worker(st_, job(2, LP, 1000)) == (1, (5,))
    # 8 GPUs: only node 0
    assert pol.placement.place_worker(st_, job(3, LP, 8000))[0] == 0
    # fractional: a fresh GPU adds its unused 1000 − g; best fit on a shared GPU comes first
    assert pol.placement.place_worker(st_, job(4, LP, 300))[0] == 1
    st_.allocate(job(5, LP, 600), ((0, (7,)),))
    assert pol.placement.place_worker(st_, job(6, LP, 300)) == (0, (7,))


# ---- registry -------------------------------------------------------------------------------------
def test_make_policy_errors_are_one_line_gfs_errors() -> None:
    with pytest.raises(GfsError, match="unknown policy 'nope'; choose from gfs"):
        make_policy("nope")
    with pytest.raises(GfsError, match="policy 'lyra'"):
        make_policy("lyra", colour="red")


def test_ablations_are_gfs_with_options() -> None:
    assert make_policy("gfs-static-eta", quota="none").options()["static_eta"] is True
    assert make_policy("gfs-no-history", quota="none").options()["use_history"] is False
    assert make_policy("gfs-naive-victims", quota="none").options()["victims"] == "naive"
    assert make_policy("gfs-week-peak", quota="none").options()["forecaster"] == "week-peak"


# ---- every policy returns an applicable decision on any valid round --------------------------------
def _policy(name: str) -> Policy:
    """A registered policy with a fast forecaster wherever it forecasts."""
    return make_policy(name, **options_for(name, {"forecaster": "week-peak"}))


@pytest.mark.parametrize("name", list(POLICIES))
@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rnd=rounds(max_nodes=5, max_jobs=10))
def test_decisions_are_applicable(name: str, rnd: Round) -> None:
    before = rnd.state.copy()
    d = decide(_policy(name), rnd)
    st_ = rnd.state
    assert st_.alloc == before.alloc and not st_.check(), "the round's state was not restored"
    evicted = list(d.victims) + list(d.requeue)
    assert len(evicted) == len(set(evicted))
    for jid in evicted:
        assert jid in rnd.running and not rnd.jobs[jid].is_hp, f"{name} evicts {jid}"
        st_.release(rnd.jobs[jid])
    pending = set(rnd.pending_hp) | set(rnd.pending_lp)
    for jid, placement in d.placements.items():
        assert jid in pending, f"{name} places job {jid} which is not pending"
        st_.allocate(rnd.jobs[jid], placement)     # raises on over-allocation / partial gangs
    assert not st_.check()
    if d.victims:                                  # only HP placements justify an eviction
        assert any(rnd.jobs[j].is_hp for j in d.placements)


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rnd=rounds(max_nodes=5, max_jobs=12))
def test_lp_pass_admits_within_quota(rnd: Round) -> None:
    """Sequentially, each admitted LP job keeps its pool's running LP within its class quota."""
    st_ = rnd.state
    lp_now = {p: int(st_.pool_lp[i]) for i, p in enumerate(st_.pools)}
    d = Decision()
    st_.begin()
    lp_pass(rnd, d, order=PTS_ORDER, placer=BEST_FIT, quotas=rnd.quotas)
    st_.rollback()
    st_.commit()
    assert d.victims == []
    for jid in d.placements:
        j = rnd.jobs[jid]
        assert not j.is_hp and jid in rnd.pending_lp
        q = rnd.quotas.get((j.pool, j.guarantee_h))
        assert q is None or lp_now[j.pool] + j.demand <= q, (jid, lp_now[j.pool], j.demand, q)
        lp_now[j.pool] += j.demand
