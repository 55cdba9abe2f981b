"""η's evidence is the spot quota's ledger (`gfs_opt.quota.ledger`), fed by reported outcomes.

The engine keeps no η bookkeeping: it reports each ended window (`WindowOutcome`) and the quota
reads its own ledger at a refresh. These tests check that the ledger is a function of what it is
told — the same stream recorded from a replay and fed to a fresh ledger gives the same evidence
at every refresh — and that the engine holds none of it.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gfs_opt.experiments.runner import RunSpec, prepare_trace
from gfs_opt.model import MILLI, EtaEvidence, Params, PoolForecast, WindowOutcome
from gfs_opt.policies import make_policy
from gfs_opt.quota.ledger import EtaLedger
from gfs_opt.sim.engine import SimConfig, Simulator


def _replay(policy: str) -> Simulator:
    trace, lo, hi = prepare_trace(RunSpec.from_setup("small", policy=policy, lp_load=2.0))
    return Simulator(trace, make_policy(policy, forecaster="ets"), Params(),
                     SimConfig(eval_start=lo, eval_end=hi))


@pytest.mark.parametrize("policy", ["gfs", "gfs-paper"])
def test_the_ledger_fed_by_the_engine_and_by_a_recorded_stream_agree(policy: str) -> None:
    sim = _replay(policy)
    spot = sim.policy.spot
    assert spot is not None
    ledger = spot.ledger
    stream: list[tuple[str, Any]] = []
    readings: list[tuple[float, dict[str, EtaEvidence]]] = []

    def wrap(name: str) -> None:
        inner = getattr(ledger, name)

        def recorded(*args: Any) -> Any:
            stream.append((name, args))
            out = inner(*args)
            if name == "refresh":
                readings.append((args[0], {p: ledger.reading(p) for p in ledger.pools}))
            return out
        setattr(ledger, name, recorded)

    for name in ("record", "plan", "moved", "refresh"):
        wrap(name)
    sim.run()
    outcomes = [a[0] for n, a in stream if n == "record"]
    assert len(outcomes) > 100 and any(not o.ok for o in outcomes)
    assert any(o.hp_milli is not None for o in outcomes)    # evictions came with HP context
    fresh = EtaLedger(ledger.pools, ledger.capacity, ledger.params,
                      ledger.evidence_s / 3600, ledger.band_s / 3600)
    got = []
    for name, args in stream:
        getattr(fresh, name)(*args)
        if name == "refresh":
            got.append((args[0], {p: fresh.reading(p) for p in fresh.pools}))
    assert got == readings
    assert any(r.recent_failed for _t, by_pool in readings for r in by_pool.values())


def test_the_engine_keeps_no_eta_bookkeeping() -> None:
    sim = _replay("gfs")
    kept = {k for k in vars(sim) if any(w in k for w in ("eta", "band", "recent", "evidence",
                                                         "attribut", "growth", "plan_cache"))}
    assert kept == set()
    # a policy without a spot quota is told nothing
    assert make_policy("yarn-cs").window_observer() is None


def test_attribution_against_the_plan() -> None:
    led = EtaLedger(["P"], {"P": 100}, Params(), 4.0, 24.0)
    z = 1.2815515655446004
    fc = PoolForecast([50.0, 50.0], [10.0, 10.0])
    led.plan({"P": fc}, {"P": 2.0})
    plan = 50 + z * 10 / 2
    assert led.plan_gpus("P") == pytest.approx(plan)
    # HP above the plan: the quota's to answer for, with η's share of the overrun
    att, growth = led.attribution("P", int((plan + 3) * MILLI))
    plan1 = 50 + z * 10
    assert att and growth == pytest.approx((min(plan + 3, plan1) - plan) / 3, rel=1e-3)
    # HP within the plan: not the quota's; no HP context (a lease ends): the quota's, no share
    assert led.attribution("P", int((plan - 1) * MILLI)) == (False, 0.0)
    assert led.attribution("P", None) == (True, 0.0)
    # no forecast: no plan, every eviction is the quota's
    led.plan({}, {"P": 1.0})
    assert math.isnan(led.plan_gpus("P")) and led.attribution("P", 1)[0]


def test_evidence_restarts_when_eta_moves_and_ages_out() -> None:
    led = EtaLedger(["P"], {"P": 8}, Params(), 4.0, 24.0)
    for t, ok in ((0.0, False), (10.0, True), (20.0, False)):
        led.record(WindowOutcome(t, "P", ok, 4 * MILLI, None if ok else 8 * MILLI))
    led.refresh(300.0)
    r = led.reading("P")
    assert (r.recent_failed, r.recent_succeeded, r.eta_windows, r.eta_failed_quota) == (2, 1, 3, 2)
    led.moved("P")
    led.refresh(600.0)
    assert led.reading("P").eta_windows == 0 and led.reading("P").recent_failed == 2
    led.refresh(4 * 3600.0 + 15.0)      # the first two are older than H = 4 h now
    r = led.reading("P")
    assert (r.recent_failed, r.recent_succeeded) == (1, 0)
