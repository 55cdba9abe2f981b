"""The engine/policy contract: the round a policy is handed is read-only, and what a policy wants
changed (quotas, η, forecasts, HP history) travels in its `Decision` and comes back in later
rounds. Observers see rounds through declared hooks, never the simulator."""

from __future__ import annotations

import dataclasses

import pytest
from standins import TOY_SETUP

from gfs_opt.experiments.runner import RunSpec, prepare_trace
from gfs_opt.model import Decision, Params, Round
from gfs_opt.policies import make_policy, options_for
from gfs_opt.sim.engine import SimConfig, Simulator


def simulator(policy: str = "gfs", params: Params | None = None) -> Simulator:
    spec = RunSpec.from_setup(TOY_SETUP, policy=policy)
    trace, lo, hi = prepare_trace(spec)
    return Simulator(trace, make_policy(policy, **options_for(policy, {"forecaster": "ets"})), params,
                     SimConfig(eval_start=lo, eval_end=hi, drain_s=0.0))


def test_the_round_a_policy_gets_is_read_only() -> None:
    sim = simulator()
    seen: list[Round] = []

    def on_round(rnd: Round) -> bool:
        seen.append(rnd)
        return bool(len(rnd.running) and len(rnd.pending_hp) and rnd.quotas)

    sim.on_round = on_round
    sim.run()
    rnd = seen[-1]
    assert rnd.running and rnd.quotas and rnd.pools, "ran too short to see a populated round"
    with pytest.raises(dataclasses.FrozenInstanceError):
        rnd.forecasts = {}  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rnd.dirty_pools = frozenset()  # type: ignore[misc]
    for name in ("jobs", "running", "queued_since", "forecasts", "pools", "quotas", "released",
                 "hp_released"):
        with pytest.raises(TypeError):
            getattr(rnd, name)[0] = None      # read-only views of the engine's containers
    pool = next(iter(rnd.pools))
    with pytest.raises(dataclasses.FrozenInstanceError):
        rnd.pools[pool].has_hp_history = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rnd.params.eval_end = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        next(iter(rnd.running.values())).window_start = 0.0  # type: ignore[misc]


def test_the_engines_round_is_the_one_the_constructor_builds() -> None:
    """`Simulator.round_at` fills a Round without its __init__ (speed); every field must be
    what the constructor would have set, for a refresh and for a pass over dirty pools."""
    sim = simulator()
    sim.run()
    sim.dirty.update(sim.state.pools[:1])
    for quota_due in (True, False):
        fast = sim.round_at(123.0, quota_due)
        built = Round(**{f.name: getattr(fast, f.name) for f in dataclasses.fields(Round)})
        assert fast == built and vars(fast) == vars(built)
        assert fast.time == 123.0 and fast.quota_due is quota_due and fast.state is sim.state
        assert fast.dirty_pools == (None if quota_due else frozenset(sim.state.pools[:1]))
        assert fast.pending_hp is sim.hp_q and fast.params is sim.params
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.time = 0.0  # type: ignore[misc]


def test_the_engine_leaves_the_callers_params_alone() -> None:
    params = Params(rho=0.8)
    sim = simulator(params=params)
    assert params.eval_start == 0.0 and params.eval_end == float("inf")
    assert sim.params.rho == 0.8 and sim.params.eval_end == sim.cfg.eval_end


def test_what_a_refresh_decides_comes_back_in_the_next_round() -> None:
    """Forecasts, η, HP history and quotas travel in the decision; the engine applies them, so
    the next round shows exactly what the refresh returned."""
    sim = simulator()
    pending: list[Decision] = []
    checked: list[float] = []

    def on_round(rnd: Round) -> bool:
        if pending:
            d = pending.pop()
            assert dict(rnd.forecasts) == d.forecasts
            assert dict(rnd.quotas) == d.quotas
            assert d.eta and d.hp_history
            for pool, eta in d.eta.items():
                assert rnd.pools[pool].eta == eta
                assert rnd.pools[pool].has_hp_history == d.hp_history[pool]
            checked.append(rnd.time)
        return len(checked) >= 3

    def on_decision(rnd: Round, d: Decision) -> None:
        if d.forecasts is not None and d.forecasts:
            pending.append(d)

    sim.on_round, sim.on_decision = on_round, on_decision
    sim.run()
    assert len(checked) == 3


@pytest.mark.parametrize("policy", ["yarn-cs", "chronus", "gfs"])
def test_a_kept_plan_and_a_redone_plan_give_the_same_replay(policy: str) -> None:
    """A policy plans on the live state (each allocate/release validated); the engine keeps
    exactly those changes when they are the decision's, and otherwise undoes them and applies the
    decision from scratch. Both paths must give the same replay, byte for byte."""

    def replay(undo_plans: bool) -> tuple[str, int, int]:
        sim = simulator(policy)
        if undo_plans:
            inner = sim.policy.decide

            def decide(rnd: Round) -> Decision:
                d = inner(rnd)
                rnd.state.rollback(0)   # the plan is gone: the engine must redo the decision
                return d

            sim.policy.decide = decide  # type: ignore[method-assign]
        res = sim.run()
        jobs = res.recorder.jobs
        assert jobs is not None
        return jobs.to_csv(index=False), sim.kept_plans, res.passes

    kept, n_kept, passes = replay(undo_plans=False)
    redone, n_redone_kept, _ = replay(undo_plans=True)
    assert kept == redone
    assert n_kept == passes            # every pass of these policies plans on the live state
    # only passes that change nothing still match an (empty) plan when it was undone
    assert n_redone_kept < n_kept


def test_node_eviction_counts_equal_a_recount_and_are_reused_while_unchanged() -> None:
    """The per-node counts a round carries are those of the evictions in the last hour and day
    (recounted here from the engine's eviction log at every refresh); the engine hands the same
    arrays again while no count has moved, so E(n) is not recomputed for nothing."""
    import numpy as np

    # the published GFS evicts at once: the built-in setup has evictions to count under it (under
    # `gfs`, which waits for boundaries and serves HP in submit order, it has none)
    sim = simulator("gfs-paper")
    log: list[tuple[float, tuple[int, ...]]] = []       # every eviction, never trimmed
    real = sim._evict

    def evict(r, t, voluntary, planned=False):  # type: ignore[no-untyped-def]
        n_before = len(sim.node_evictions)
        real(r, t, voluntary=voluntary, planned=planned)
        log.extend(list(sim.node_evictions)[n_before:])

    sim._evict = evict  # type: ignore[method-assign]
    seen = {"refreshes": 0, "reused": 0, "fresh": 0, "nonzero": 0}
    last: list[object] = [None, None]

    def on_round(rnd: Round) -> bool:
        if not rnd.quota_due or rnd.node_evictions_1h is None:
            return False
        want = {}
        for span, name in ((3600.0, "1h"), (86_400.0, "1d")):
            counts = np.zeros(rnd.state.n_nodes, dtype=np.int64)
            for t, nodes in log:
                if t >= rnd.time - span:
                    for n in nodes:
                        counts[n] += 1
            want[name] = counts
        assert np.array_equal(rnd.node_evictions_1h, want["1h"]), rnd.time
        assert np.array_equal(rnd.node_evictions_1d, want["1d"]), rnd.time
        same = rnd.node_evictions_1h is last[0] and rnd.node_evictions_1d is last[1]
        seen["reused" if same else "fresh"] += 1
        seen["refreshes"] += 1
        seen["nonzero"] += int(want["1d"].any())
        last[:] = [rnd.node_evictions_1h, rnd.node_evictions_1d]
        return False

    sim.on_round = on_round
    sim.run()
    assert seen["refreshes"] > 50 and seen["nonzero"] > 0, seen
    assert seen["reused"] > 0 and seen["fresh"] > 1, seen


def test_the_recorders_timeseries_is_built_once_and_handed_out_as_copies() -> None:
    sim = simulator()
    sim.run()
    rec = sim.recorder
    first = rec.timeseries()
    assert len(first) and (first["allocated"] >= 0).all()
    first["allocated"] = -1.0                      # a caller's edit stays the caller's
    again = rec.timeseries()
    assert (again["allocated"] >= 0).all()
    assert again.equals(rec._build_timeseries())
    rec.sample(rec.sample_t[-1] + 60.0)            # a new sample: the table follows
    assert len(rec.timeseries()) == len(again) + len(sim.state.pools)
