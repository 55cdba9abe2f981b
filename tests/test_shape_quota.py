"""The shape dimension of the spot quota (`gfs_opt.quota.shape`): the whole-node reserve's bounds
and the LP placement that honours it."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import rounds

from gfs_opt.model import MILLI, ClusterState, Job, JobClass, PoolForecast, Round
from gfs_opt.preempt.scoring import Placer
from gfs_opt.quota.shape import whole_node_reserve

CLASSES = (1.0, 4.0)


@st.composite
def forecasts(draw: st.DrawFn, hours: int = 4) -> PoolForecast:
    mean = draw(st.lists(st.floats(0, 200), min_size=hours, max_size=hours))
    std = draw(st.lists(st.floats(0, 50), min_size=hours, max_size=hours))
    return PoolForecast(np.array(mean), np.array(std))


@given(fc=forecasts(), size=st.sampled_from([4, 8]), nodes=st.integers(0, 30),
       held=st.integers(0, 30), eta=st.floats(0.1, 10), rho=st.floats(0.5, 0.99))
def test_reserve_is_within_the_nodes_not_held(fc: PoolForecast, size: int, nodes: int,
                                              held: int, eta: float, rho: float) -> None:
    held = min(held, nodes)
    got = whole_node_reserve(fc, size, nodes, held, rho, eta, CLASSES)
    for r in got:
        assert 0 <= r <= nodes - held
    # a longer window looks at more hours: never a smaller reserve
    assert got[0] <= got[1]


@given(fc=forecasts(), size=st.sampled_from([4, 8]), nodes=st.integers(1, 30),
       eta_lo=st.floats(0.1, 10), eta_hi=st.floats(0.1, 10))
def test_a_narrower_margin_never_reserves_more(fc: PoolForecast, size: int, nodes: int,
                                               eta_lo: float, eta_hi: float) -> None:
    lo, hi = sorted((eta_lo, eta_hi))
    wide = whole_node_reserve(fc, size, nodes, 0, 0.9, lo, CLASSES)
    narrow = whole_node_reserve(fc, size, nodes, 0, 0.9, hi, CLASSES)
    assert all(n <= w for n, w in zip(narrow, wide, strict=True))


def test_reserve_counts_nodes_for_the_bound_beyond_those_held() -> None:
    # U^W = 20 + z·0 = 20 GPUs on 8-GPU nodes: 3 nodes, one held now → 2 more
    fc = PoolForecast(np.array([20.0, 12.0]), np.zeros(2))
    assert whole_node_reserve(fc, 8, 10, 1, 0.9, 1.0, (1.0,)) == [2]
    assert whole_node_reserve(None, 8, 10, 1, 0.9, 1.0, (1.0,)) == [0]
    assert whole_node_reserve(fc, 8, 2, 1, 0.9, 1.0, (1.0,)) == [1]   # only one node not held


def _lp(jid: int, pool: str, g: int, w: int, d: float = 1.0) -> Job:
    return Job(jid, "o", pool, JobClass.LP, g, w, 0.0, 3600.0, d)


def test_lp_packs_partly_used_nodes_and_keeps_the_reserve() -> None:
    st_ = ClusterState(["A"], ["A"] * 4, [8] * 4)
    st_.allocate(_lp(1, "A", 4 * MILLI, 1), ((0, (0, 1, 2, 3)),))
    placer = Placer(reserves={("A", 1.0): 3})
    # 4 GPUs fit beside job 1 on node 0: allowed, no whole node broken
    pl = placer.gang(st_, _lp(2, "A", 4 * MILLI, 1))
    assert pl is not None and pl[0][0] == 0
    st_.allocate(_lp(2, "A", 4 * MILLI, 1), pl)
    # three whole free nodes, all reserved: a new gang may not break one
    assert placer.gang(st_, _lp(3, "A", 2 * MILLI, 1)) is None
    # another class without its own entry gets the pool's strictest reserve
    assert placer.gang(st_, _lp(4, "A", 2 * MILLI, 1, d=2.0)) is None
    # with a reserve of 2 one whole node may be broken, not two
    placer2 = Placer(reserves={("A", 1.0): 2})
    assert placer2.gang(st_, _lp(5, "A", 8 * MILLI, 1)) is not None
    assert placer2.gang(st_, _lp(6, "A", 8 * MILLI, 2)) is None
    # HP work is never held back by the reserve
    hp = Job(7, "o", "A", JobClass.HP, 8 * MILLI, 3, 0.0, 3600.0)
    assert placer.gang(st_, hp) is not None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=rounds(), reserve=st.integers(0, 4), beside=st.booleans(), data=st.data())
def test_lp_placement_never_breaks_into_the_reserve(rnd: Round, reserve: int, beside: bool,
                                                   data: st.DataObject) -> None:
    lp = [rnd.jobs[j] for j in rnd.pending_lp]
    if not lp:
        return
    job = data.draw(st.sampled_from(lp))
    state = rnd.state
    p = state.pool_index[job.pool]
    before = state.whole_free_nodes(p)
    placer = Placer(reserves={(job.pool, job.guarantee_h): reserve}, lp_beside_hp=beside)
    pl = placer.gang(state, job)
    free_pl = Placer(lp_beside_hp=beside).gang(state, job)
    if pl is None:
        return
    assert free_pl is not None   # the reserve only ever takes options away
    state.allocate(job, pl)
    after = state.whole_free_nodes(p)
    assert after == before or after >= reserve
    assert not state.check()
