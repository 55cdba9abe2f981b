"""Unit tests of the greedy pieces of GFS on hand-built cluster states (GFS-SPEC §2.2–2.3).

Every expected value below is worked out by hand in the comments, from the spec's formulas.
"""

from __future__ import annotations

from random import Random
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from milp_rounds import contested_rounds

import gfs_opt.preempt.hp_pass as hp_pass_module
from gfs_opt.model import (
    MILLI,
    ClusterState,
    Job,
    JobClass,
    Params,
    Placement,
    PoolForecast,
    PoolStatus,
    Round,
    RunningJob,
)
from gfs_opt.preempt.greedy import (
    PreemptContext,
    PreemptRule,
    choose_on_gpu,
    choose_on_node,
    gfs_node_cost,
    lyra_node_cost,
    naive_order,
    place_gang_preemptive,
    preemptive_worker,
    two_pointer,
)
from gfs_opt.preempt.hp_pass import greedy_preemption
from gfs_opt.preempt.scoring import (
    best_gpu_fraction,
    best_node_whole,
    default_eviction_scores,
    eviction_scores,
    place_gang,
    place_worker,
)
from gfs_opt.quota.admission import quota_allows
from gfs_opt.quota.rule import free_of_hp, pool_quota, rule_quotas

HP, LP = JobClass.HP, JobClass.LP


# ---- helpers ------------------------------------------------------------------------------------
def cluster(*sizes: int, pool: str = "A100") -> ClusterState:
    return ClusterState.from_nodes((pool, g, f"n{i}") for i, g in enumerate(sizes))


def job(jid: int, cls: JobClass, g: int, w: int = 1, pool: str = "A100") -> Job:
    return Job(jid, "org", pool, cls, g, w, 0.0, 10_000.0)


def put(state: ClusterState, running: dict[int, RunningJob], j: Job, placement: Placement,
        ckpt: float = 0.0) -> None:
    state.allocate(j, placement)
    running[j.id] = RunningJob(j, 0.0, ckpt, ckpt, placement)


def ctx(state: ClusterState, running: dict[int, RunningJob], t: float = 1000.0,
        status: PoolStatus | None = None, horizon_s: float = 86_400.0) -> PreemptContext:
    return PreemptContext(state, running, t, status or PoolStatus(), state.capacity_gpus("A100"),
                          horizon_s, Params().restart_overhead)


def snapshot(state: ClusterState) -> tuple:
    return (state.gpu_used.copy(), state.gpu_hp.copy(), state.node_free.copy(), dict(state.alloc))


def same_state(state: ClusterState, snap: tuple) -> bool:
    used, hp, free, alloc = snap
    return (np.array_equal(state.gpu_used, used) and np.array_equal(state.gpu_hp, hp)
            and np.array_equal(state.node_free, free) and state.alloc == alloc
            and not state.check())


# ---- node eviction score E(n) -------------------------------------------------------------------
@pytest.mark.parametrize(("c1h", "c1d", "expected"), [
    (0, 0, 9900.0),                                  # 10000·(1 − 0.01·2^0)
    (1, 1, 9800.0),                                  # 2^(0.8 + 0.2) = 2
    (0, 5, 9800.0),                                  # 2^(0.2·5) = 2
    (5, 5, 6800.0),                                  # 2^(4 + 1) = 32 → 1 − 0.32
    (2, 0, 10_000.0 * (1 - 0.01 * 2 ** 1.6)),
    (6, 10, 0.0),                                    # 2^(4.8 + 2) ≈ 111 > 100 → clipped at 0
    (10**6, 10**6, 0.0),                             # no overflow, still 0
])
def test_eviction_scores_formula(c1h: int, c1d: int, expected: float) -> None:
    e = eviction_scores(np.array([c1h]), np.array([c1d]))
    assert e[0] == pytest.approx(expected, abs=1e-9)


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=20))
def test_eviction_scores_bounded_and_monotone(counts: list[tuple[int, int]]) -> None:
    c1h = np.array([c[0] for c in counts])
    c1d = np.array([c[1] for c in counts])
    e = eviction_scores(c1h, c1d)
    assert ((e >= 0) & (e <= 9900)).all()
    assert (eviction_scores(c1h + 1, c1d) <= e).all() and (eviction_scores(c1h, c1d + 1) <= e).all()
    assert (default_eviction_scores(len(counts)) == 9900).all()


# ---- non-preemptive node scores -----------------------------------------------------------------
def test_best_fit_picks_the_node_with_least_spare_room() -> None:
    st_ = cluster(8, 4, 8)
    st_.allocate(job(1, HP, 6000), ((0, tuple(range(6))),))    # node 0: 2 free
    st_.allocate(job(2, HP, 5000), ((2, tuple(range(5))),))    # node 2: 3 free; node 1: 4 free
    assert best_node_whole(st_, 0, 2, LP, None) == 0           # score 100·3 beats 100·4, 100·5
    assert best_node_whole(st_, 0, 3, LP, None) == 2           # node 0 cannot hold 3
    assert best_node_whole(st_, 0, 4, LP, None) == 1
    assert best_node_whole(st_, 0, 5, LP, None) == -1


def test_co_location_breaks_equal_free_counts() -> None:
    st_ = cluster(4, 4)
    st_.allocate(job(1, HP, 2000), ((0, (0, 1)),))             # node 0: 2 HP GPUs
    st_.allocate(job(2, LP, 2000), ((1, (0, 1)),))             # node 1: 2 LP GPUs
    # same free count (2): LP joins LP (300 − 2 < 300), HP joins HP
    assert best_node_whole(st_, 0, 1, LP, None) == 1
    assert best_node_whole(st_, 0, 1, HP, None) == 0


def test_eviction_history_breaks_remaining_ties() -> None:
    st_ = cluster(4, 4, 4)
    e = np.array([9900.0, 3000.0, 9800.0])                     # node 1 saw evictions lately
    assert best_node_whole(st_, 0, 1, LP, e) == 0              # LP: calmest node (highest E)
    assert best_node_whole(st_, 0, 1, HP, e) == 1              # HP: most troubled node
    assert best_node_whole(st_, 0, 1, LP, e, use_history=False) == 0
    assert best_node_whole(st_, 0, 1, HP, e, use_history=False) == 0
    # E never outweighs one GPU of fit: node 2 with 3 free beats calm node 0 with 4 free
    st_.allocate(job(1, HP, 1000), ((2, (0,)),))
    assert best_node_whole(st_, 0, 1, LP, e) == 2


def test_fractional_best_fit_residual() -> None:
    st_ = cluster(2, 2)
    st_.allocate(job(1, LP, 300), ((0, (0,)),))                # residual 700
    st_.allocate(job(2, LP, 700), ((0, (1,)),))                # residual 300
    st_.allocate(job(3, LP, 500), ((1, (0,)),))                # residual 500
    assert best_gpu_fraction(st_, 0, 250) == 1                 # 300 − 250 = 50 is the tightest
    assert best_gpu_fraction(st_, 0, 400) == 2                 # 500 − 400 = 100 beats 700 − 400
    assert best_gpu_fraction(st_, 0, 600) == 0                 # only the 700 residual fits
    assert best_gpu_fraction(st_, 0, 800) == -1                # no partly used GPU fits
    # no partly used GPU fits → a fresh GPU on the best-fit node (node 1 has 1 free GPU)
    assert place_worker(st_, job(4, LP, 800), None) == (1, (1,))
    assert place_worker(st_, job(5, LP, 250), None) == (0, (1,))


def test_place_gang_is_all_or_nothing_and_leaves_state_untouched() -> None:
    st_ = cluster(8, 4)
    st_.allocate(job(1, HP, 4000), ((0, (0, 1, 2, 3)),))
    snap = snapshot(st_)
    ok = place_gang(st_, job(2, LP, 4000, w=2), None)
    assert ok is not None and sorted(n for n, _ in ok) == [0, 1]
    assert same_state(st_, snap)
    assert place_gang(st_, job(3, LP, 4000, w=3), None) is None     # only two 4-GPU slots
    assert same_state(st_, snap)
    # each worker sees the previous ones: two 0.6-GPU workers cannot share one GPU
    one = cluster(1)
    assert place_gang(one, job(4, LP, 600, w=2), None) is None
    two = cluster(2)
    assert place_gang(two, job(5, LP, 600, w=2), None) == ((0, (0,)), (0, (1,)))
    assert place_gang(two, job(6, LP, 500, w=2), None) == ((0, (0,)), (0, (0,)))


# ---- victim selection -----------------------------------------------------------------------------
def four_lp_jobs() -> tuple[ClusterState, dict[int, RunningJob]]:
    """One 8-GPU node, four 2-GPU LP jobs; at t = 1000 their wasted work c_j = 2·(t − ckpt):
    A = 1: 100, B = 2: 10, C = 3: 50, D = 4: 1 GPU-seconds."""
    st_ = cluster(8)
    running: dict[int, RunningJob] = {}
    for jid, gpus, ckpt in ((1, (0, 1), 950.0), (2, (2, 3), 995.0), (3, (4, 5), 975.0),
                            (4, (6, 7), 999.5)):
        put(st_, running, job(jid, LP, 2000), ((0, gpus),), ckpt)
    return st_, running


def test_two_pointer_order_alternates_costly_and_cheap() -> None:
    st_, running = four_lp_jobs()
    c = ctx(st_, running)
    assert [c.cost(j) for j in (1, 2, 3, 4)] == [100.0, 10.0, 50.0, 1.0]
    # ascending D, B, C, A → most costly A, least D, then C, then B
    assert two_pointer(c, [1, 2, 3, 4]) == [1, 4, 3, 2]
    assert two_pointer(c, []) == []
    assert two_pointer(c, [3]) == [3]


def test_two_pointer_victims_on_hand_example() -> None:
    """k = 4 GPUs. A spared (6 GPUs left ≥ 4), D spared (4 left), C and B must go:
    victims {B, C} (waste 60), the GPUs of B then C."""
    st_, running = four_lp_jobs()
    c = ctx(st_, running)
    snap = snapshot(st_)
    ch = choose_on_node(c, 0, 4, two_pointer, gfs_node_cost)
    assert ch is not None
    assert ch.victims == (2, 3) and ch.gpus == (2, 3, 4, 5)
    # node cost (F + r)/(F + S + r) + 5·Σc/(C·T) with F = S = 0, r = 2, Σc = 60, C = 8, T = 1 day
    assert ch.cost == pytest.approx(1.0 + 5 * 60 / (8 * 86_400))
    assert same_state(st_, snap)
    # the ablation's naive order (by id, descending) spares D and C and evicts B and A (waste 110)
    naive = choose_on_node(c, 0, 4, naive_order, gfs_node_cost)
    assert naive is not None and naive.victims == (1, 2)


def test_free_gpus_are_used_before_victims() -> None:
    st_ = cluster(8)
    running: dict[int, RunningJob] = {}
    put(st_, running, job(1, LP, 2000), ((0, (0, 1)),), 950.0)     # c = 100
    put(st_, running, job(2, LP, 2000), ((0, (2, 3)),), 995.0)     # c = 10
    put(st_, running, job(3, LP, 2000), ((0, (4, 5)),), 975.0)     # c = 50; GPUs 6, 7 free
    ch = choose_on_node(ctx(st_, running), 0, 4, two_pointer, gfs_node_cost)
    # order A, B, C: A spared (6 ≥ 4), B spared (4 ≥ 4), C victim → free 6, 7 + C's 4, 5
    assert ch is not None and ch.victims == (3,) and ch.gpus == (4, 5, 6, 7)
    assert choose_on_node(ctx(st_, running), 0, 2, two_pointer, gfs_node_cost).victims == ()


def test_hp_gpus_and_protected_jobs_are_never_victims() -> None:
    st_ = cluster(4)
    running: dict[int, RunningJob] = {}
    st_.allocate(job(1, HP, 2000), ((0, (0, 1)),))
    put(st_, running, job(2, LP, 1000), ((0, (2,)),))
    st_.allocate(job(3, LP, 1000), ((0, (3,)),))                    # LP outside ctx.running
    assert choose_on_node(ctx(st_, running), 0, 3, two_pointer, gfs_node_cost) is None
    assert choose_on_node(ctx(st_, running), 0, 2, two_pointer, gfs_node_cost) is None
    ch = choose_on_node(ctx(st_, running), 0, 1, two_pointer, gfs_node_cost)
    assert ch is not None and ch.victims == (2,)


def test_fractional_victims_on_one_gpu() -> None:
    """GPU 0 holds x = 300 (c 30), y = 300 (c 3), z = 200 (c 10) milli; 200 free; HP needs 500.
    Order x, y, z: x spared (200 + 500 ≥ 500), y victim (400 < 500), z spared → evict y only."""
    st_ = cluster(1)
    running: dict[int, RunningJob] = {}
    put(st_, running, job(1, LP, 300), ((0, (0,)),), 900.0)
    put(st_, running, job(2, LP, 300), ((0, (0,)),), 990.0)
    put(st_, running, job(3, LP, 200), ((0, (0,)),), 950.0)
    c = ctx(st_, running)
    assert [round(c.cost(j), 9) for j in (1, 2, 3)] == [30.0, 3.0, 10.0]
    ch = choose_on_gpu(c, 0, 500, two_pointer, gfs_node_cost)
    assert ch is not None and ch.victims == (2,) and ch.gpus == (0,)
    assert choose_on_gpu(c, 0, 200, two_pointer, gfs_node_cost).victims == ()
    full = choose_on_gpu(c, 0, 999, two_pointer, gfs_node_cost)
    assert full is not None and full.victims == (1, 2, 3)


def test_node_costs_on_hand_numbers() -> None:
    st_, running = four_lp_jobs()
    status = PoolStatus(failed=2, succeeded=6)
    c = ctx(st_, running, status=status, horizon_s=1000.0)
    # (2 + 2)/(2 + 6 + 2) + 5·(10 + 50)/(8·1000)
    assert gfs_node_cost(c, [2, 3]) == pytest.approx(0.4 + 0.0375)
    assert gfs_node_cost(ctx(st_, running), []) == 0.0               # 0/0 = 0
    assert lyra_node_cost(c, [2, 3]) == pytest.approx(0.5 + 0.5)    # Σ 1/(w·max(g, 1))


def test_preemptive_worker_picks_the_cheapest_node() -> None:
    st_ = cluster(4, 4)
    running: dict[int, RunningJob] = {}
    put(st_, running, job(1, LP, 4000), ((0, (0, 1, 2, 3)),), 0.0)      # c = 4000
    put(st_, running, job(2, LP, 4000), ((1, (0, 1, 2, 3)),), 900.0)    # c = 400
    hp = job(3, HP, 4000)
    ch = preemptive_worker(ctx(st_, running), hp, PreemptRule("two-pointer", "gfs"))
    assert ch is not None and (ch.node, ch.victims) == (1, (2,))
    naive = preemptive_worker(ctx(st_, running), hp, PreemptRule("naive", "count", True))
    assert naive is not None and (naive.node, naive.victims) == (0, (1,))


def test_preemptive_gang_all_or_nothing() -> None:
    st_ = cluster(4, 4)
    running: dict[int, RunningJob] = {}
    st_.allocate(job(1, HP, 4000), ((0, (0, 1, 2, 3)),))
    put(st_, running, job(2, LP, 2000), ((1, (0, 1)),), 500.0)
    put(st_, running, job(3, LP, 1000), ((1, (2,)),), 900.0)
    snap = snapshot(st_)
    rule = PreemptRule()
    # 2 × 2 GPUs fit on node 1 only by evicting both LP jobs
    res = place_gang_preemptive(ctx(st_, running), job(4, HP, 2000, w=2), rule, None)
    assert res is not None
    placement, victims = res
    assert sorted(victims) == [2, 3] and all(n == 1 for n, _ in placement)
    assert same_state(st_, snap)
    # 3 × 2 GPUs cannot fit beside the HP job whatever is evicted
    assert place_gang_preemptive(ctx(st_, running), job(5, HP, 2000, w=3), rule, None) is None
    assert same_state(st_, snap)


# ---- SQA: η feedback and the quota rule (GFS-SPEC §2.2, ρ = 0.9 so 1 − ρ = 0.1) ----------------
# η feedback: tests/test_quota_loop.py
def round_with_forecast(mean: list[float], std: list[float], eta: float = 1.0,
                        history: bool = True) -> Round:
    st_ = cluster(8, 8)                                          # C_p = 16 GPUs
    return Round(time=0.0, state=st_, jobs={}, running={}, pending_hp=[], pending_lp=[],
                 forecasts={"A100": PoolForecast(np.array(mean), np.array(std))},
                 pools={"A100": PoolStatus(eta=eta, has_hp_history=history)},
                 params=Params(guarantee_classes=(1.0, 2.0, 4.0), horizon_h=4))


def test_rule_quotas_hand_numbers() -> None:
    # σ = 0: U_h = μ_h = 4, 6, 10, 3 → F_h = 12, 10, 6, 13 GPUs
    rnd = round_with_forecast([4, 6, 10, 3], [0, 0, 0, 0])
    assert list(free_of_hp(rnd.forecasts["A100"], 16, 0.9)) == [12, 10, 6, 13]
    # class 1 h: min over h = 0, 1 → 10; class 2 h: h ≤ 2 → 6; class 4 h: limited by H = 4 → 6
    assert rule_quotas(rnd) == {("A100", 1.0): 10_000, ("A100", 2.0): 6000, ("A100", 4.0): 6000}
    # with σ = 0 there is no margin for η to scale
    assert rule_quotas(round_with_forecast([4, 6, 10, 3], [0] * 4, eta=0.5))[("A100", 1.0)] == 10_000
    # σ = 2: η = 0.5 doubles the margin (U = μ + 5.13), an explicit η overrides the pool status
    # (η = 4: U = μ + 0.64)
    wide = round_with_forecast([4, 6, 10, 3], [2] * 4, eta=0.5)
    assert rule_quotas(wide)[("A100", 1.0)] == (16 - 11) * 1000
    assert rule_quotas(wide, {"A100": 4.0})[("A100", 2.0)] == (16 - 10) * 1000


def test_rule_quotas_use_the_rho_quantile() -> None:
    z = NormalDist().inv_cdf(0.9)                                # ≈ 1.2816
    rnd = round_with_forecast([4, 6, 10, 3], [1, 1, 1, 1])
    # U = μ + 1.28 → ⌊U⌋ = 5, 7, 11, 4 → F = 11, 9, 5, 12
    assert list(free_of_hp(rnd.forecasts["A100"], 16, 0.9)) == [11, 9, 5, 12]
    assert rule_quotas(rnd)[("A100", 1.0)] == 9000
    assert 4 + z == pytest.approx(5.2816, abs=1e-4)


def test_rule_quota_edge_cases() -> None:
    p = Params()
    over = PoolForecast(np.array([20.0, 30.0]), np.array([0.0, 0.0]))
    assert pool_quota(over, 16, 1.0, 1.0, p) == 0                     # HP beyond C → F = 0
    under = PoolForecast(np.array([-5.0, -1.0]), np.array([0.0, 0.0]))
    assert pool_quota(under, 16, 1.0, 1.0, p) == 16_000               # clipped at 0 → F = C
    assert pool_quota(over, 16, 1.0, 1.0, p, has_history=False) == 16_000
    assert pool_quota(None, 16, 1.0, 1.0, p) == 16_000
    assert pool_quota(under, 16, 10.0, 1.0, p) == 16_000              # never above C
    fc = PoolForecast(np.array([1.0]), np.array([1.0]))
    assert pool_quota(fc, 3, 0.3333, 1.0, p) == 0                      # U = 1 + 3.85 ≥ C


def test_quota_admission_boundary() -> None:
    j = job(1, LP, 500, w=4)                                          # g·w = 2000 milli
    assert quota_allows(6000, j, 8000)                                # 6000 + 2000 = 8000 ≤ Q
    assert not quota_allows(6001, j, 8000)
    assert quota_allows(10**9, j, None)                               # no quota
    assert not quota_allows(0, j, 1999)


def test_gang_aware_victims_evict_one_lp_gang_instead_of_one_job_per_worker() -> None:
    # LP gang 1 (2 × 8 GPUs) on nodes 0-1, LP jobs 2 and 3 (8 GPUs each) on nodes 2-3; an HP
    # gang of two 8-GPU workers must evict. Worker by worker, the cheapest node each time holds
    # a single-node job (half the wasted work of the gang): two evictions. With the gang in view,
    # evicting gang 1 frees both nodes it runs on: one eviction.
    def cluster() -> tuple[ClusterState, dict[int, RunningJob]]:
        st = ClusterState(["A100"], ["A100"] * 4, [8] * 4)
        running: dict[int, RunningJob] = {}
        put(st, running, job(1, JobClass.LP, 8 * MILLI, 2), ((0, tuple(range(8))),
                                                             (1, tuple(range(8)))))
        put(st, running, job(2, JobClass.LP, 8 * MILLI), ((2, tuple(range(8))),))
        put(st, running, job(3, JobClass.LP, 8 * MILLI), ((3, tuple(range(8))),))
        return st, running

    hp = job(9, JobClass.HP, 8 * MILLI, 2)
    for aware, want in ((False, [2, 3]), (True, [1])):
        st, running = cluster()
        snap = snapshot(st)
        got = place_gang_preemptive(ctx(st, running), hp,
                                    PreemptRule("two-pointer", "gfs", gang_aware=aware), None)
        assert got is not None
        placement, victims = got
        assert sorted(victims) == want
        assert len({n for n, _g in placement}) == 2
        assert same_state(st, snap)   # the probe left the state as it was


# ---- an evictable subset looks at its own nodes only ---------------------------------------------
@given(contested_rounds(max_nodes=6, max_pending=3), st.randoms(use_true_random=False),
       st.sampled_from([PreemptRule(), PreemptRule(gang_aware=True),
                        PreemptRule("naive", "count", first_candidate_only=True)]))
def test_an_evictable_subset_is_searched_on_its_own_nodes_alike(
        rnd: Round, rng: Random, rule: PreemptRule) -> None:
    """`PreemptContext.nodes` (the nodes of the jobs a pass may evict, e.g. those at a window
    boundary) skips only nodes that offer nothing: the pass decides as it does searching every
    node."""
    lp = sorted(j for j, r in rnd.running.items() if not r.job.is_hp)
    subset = {j: rnd.running[j] for j in lp if rng.random() < 0.5}
    restricted = greedy_preemption(rnd, rule, evictable=subset)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hp_pass_module, "evictable_nodes", lambda _e: None)
        everywhere = greedy_preemption(rnd, rule, evictable=subset)
    assert restricted.placements == everywhere.placements
    assert restricted.victims == everywhere.victims
    assert set(restricted.victims) <= subset.keys()
