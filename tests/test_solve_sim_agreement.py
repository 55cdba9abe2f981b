"""`gfs-opt solve --method greedy` answers a round cut from a simulation exactly as the simulator
decided it (one greedy implementation serves both).

Rounds are cut from short simulations of several policies: the round the policy is handed
(a standalone copy, taken before the policy runs) and the decision it returns. Each round goes
through an instance file (save → load, as `gfs-opt instance dump` and `gfs-opt solve` do) and is
solved with ``solve_round(..., "greedy", policy=...)``:

- the preemption step must return the simulator's HP placements and victims;
- the quota step, on the round as the simulator's LP pass saw it (after the HP pass: HP placements
  allocated, victims released), must return the simulator's LP placements, under quotas equal to
  the ones in force.

Only rounds inside the scored window that are not quota refreshes are cut: at a refresh the policy
draws a new forecast from its forecaster's state, which a round does not hold.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from standins import needs_ref_toy

from gfs_opt.experiments.runner import RunSpec, prepare_trace
from gfs_opt.instance import load_round, save_round
from gfs_opt.instance.solve_round import greedy_policy_names, solve_round
from gfs_opt.model import Decision, Params, Placement, Round, RunningJob
from gfs_opt.policies import make_policy, options_for
from gfs_opt.quota.admission import greedy_admission
from gfs_opt.sim.engine import SimConfig, Simulator

#: (setup, policy, seed, LP load): every kind of part the instance format can express — PTS and
#: FIFO orders, head-of-line blocking, best fit with and without E(n), FGD's placement, each
#: victim rule, the spot quota adaptive and static, and no quota
#: (the 24-node ``ref-toy`` setup: its quotas bind and its runs take about a second; it is read
#: from $GFS_DATA_DIR and skips without it — the two built-in ``small`` cases, where the quota
#: binds too, run everywhere)
CASES = [
    pytest.param(*case, marks=needs_ref_toy, id="{}-{}-s{}-x{:g}".format(*case)) for case in [
        ("ref-toy", "gfs", 0, 1.0),
        ("ref-toy", "gfs", 1, 2.0),
        ("ref-toy", "gfs-paper", 0, 2.0),
        ("ref-toy", "gfs-naive-victims", 2, 2.0),
        ("ref-toy", "gfs-no-history", 0, 2.0),
        ("ref-toy", "gfs-static-eta", 1, 2.0),
        ("ref-toy", "gfs-no-shape", 2, 2.0),
        ("ref-toy", "gfs-no-beside", 0, 2.0),
        ("ref-toy", "gfs-no-gang-victims", 1, 2.0),
        ("ref-toy", "gfs-no-attributable-eta", 2, 1.0),
        ("ref-toy", "gfs-no-aged-order", 1, 2.0),
        ("ref-toy", "gfs-no-hp-fifo", 0, 2.0),
        ("ref-toy", "gfs-no-wait", 2, 2.0),
        ("ref-toy", "gfs-no-notice", 0, 2.0),
        ("ref-toy", "yarn-cs", 0, 2.0),
        ("ref-toy", "yarn-cs+sqa", 1, 1.0),
        ("ref-toy", "lyra", 2, 1.0),
        ("ref-toy", "lyra+sqa", 0, 2.0),
        ("ref-toy", "fgd", 1, 2.0),
        ("ref-toy", "fgd+sqa", 2, 1.0),
    ]
] + [pytest.param(*case, id="{}-{}-s{}-x{:g}".format(*case))
     for case in [("small", "gfs-static-eta", 1, 1.0), ("small", "fgd+sqa", 2, 1.0)]]
#: rounds to compare per case: with victims, and with LP placements
WANT = 3


@dataclass
class Cut:
    before: Round          # what the policy was handed (a standalone copy)
    decision: Decision     # what it returned


def cut_rounds(setup: str, policy: str, seed: int, load: float) -> list[Cut]:
    """Rounds of one simulation where the policy evicted or started LP work."""
    opts = options_for(policy, {"forecaster": "ets"})
    spec = RunSpec.from_setup(setup, policy=policy, seed=seed, lp_load=load, policy_options=opts)
    trace, lo, hi = prepare_trace(spec)
    sim = Simulator(trace, make_policy(policy, **opts), Params(),
                    SimConfig(eval_start=lo, eval_end=hi))
    cuts: list[Cut] = []
    counts = {"victims": 0, "lp": 0}
    held: list[Round] = []

    def on_round(rnd: Round) -> bool:
        held.clear()
        if (lo <= rnd.time < hi and not rnd.quota_due
                and ((len(rnd.pending_hp) and counts["victims"] < WANT)
                     or (len(rnd.pending_lp) and counts["lp"] < WANT))):
            held.append(rnd.copy())
        return min(counts.values()) >= WANT

    def on_decision(rnd: Round, d: Decision) -> None:
        if not held:
            return
        before = held[0]
        kind = ("victims" if d.victims or d.requeue else
                "lp" if any(not before.jobs[j].is_hp for j in d.placements) else None)
        if kind is not None and counts[kind] < WANT:
            counts[kind] += 1
            cuts.append(Cut(before, d))

    sim.on_round, sim.on_decision = on_round, on_decision
    sim.run()
    return cuts


def by_name(rnd: Round, placements: dict[int, Placement]) -> dict[int, tuple]:
    """Placements keyed by node name (files renumber nodes)."""
    names = rnd.state.node_names
    return {j: tuple((names[n], tuple(g)) for n, g in pl) for j, pl in placements.items()}


def after_hp_pass(rnd: Round, placements: dict[int, Placement], victims: list[int]) -> Round:
    """The round as the LP pass saw it: victims (and re-queued jobs) released, HP placements
    allocated."""
    st = rnd.state.copy()
    running = dict(rnd.running)
    for v in victims:
        st.release(running.pop(v).job)
    for j, pl in placements.items():
        st.allocate(rnd.jobs[j], pl)
        running[j] = RunningJob(rnd.jobs[j], rnd.time, rnd.time, rnd.time, pl)
    hp = [j for j in rnd.pending_hp if j not in placements]
    return replace(rnd, state=st, running=running, pending_hp=hp,
                   queued_since={j: t for j, t in rnd.queued_since.items() if j not in placements})


def through_file(rnd: Round, path: Path) -> Round:
    save_round(rnd, path)
    return load_round(path)


@pytest.mark.parametrize(("setup", "policy", "seed", "load"), CASES)
def test_greedy_solve_returns_what_the_simulator_decided(setup: str, policy: str, seed: int,
                                                         load: float, tmp_path: Path) -> None:
    cuts = cut_rounds(setup, policy, seed, load)
    assert len(cuts) >= 2, f"{policy}: too few contested rounds to compare"
    preemptive = any(c.decision.victims or c.decision.requeue for c in cuts)
    spot = make_policy(policy).spot is not None
    binding = 0
    for i, cut in enumerate(cuts):
        rnd = through_file(cut.before, tmp_path / f"round-{i}.json")
        hp = {j: p for j, p in cut.decision.placements.items() if rnd.jobs[j].is_hp}
        lp = {j: p for j, p in cut.decision.placements.items() if not rnd.jobs[j].is_hp}
        where = f"{policy} round t={rnd.time:g}"

        res = solve_round(rnd, "greedy", "preemption", policy=policy)
        assert res.preempt_greedy is not None
        got = res.preempt_greedy.decision
        assert by_name(rnd, got.placements) == by_name(cut.before, hp), where
        assert sorted(got.victims) == sorted(cut.decision.victims), where
        assert sorted(got.requeue) == sorted(cut.decision.requeue), where
        assert not res.preempt_greedy.problems, where

        taken = [*cut.decision.victims, *cut.decision.requeue]
        lp_round = through_file(after_hp_pass(cut.before, hp, taken),
                                tmp_path / f"round-{i}-lp.json")
        res = solve_round(lp_round, "greedy", "quota", policy=policy)
        assert res.quota_greedy is not None
        assert by_name(lp_round, res.quota_greedy.placements) == by_name(cut.before, lp), where
        assert sorted(res.quota_greedy.admitted) == sorted(lp), where
        if spot:   # the rule on the round's forecast and η is the quota in force
            assert res.quota_greedy.quotas == dict(rnd.quotas), where
            binding += len(greedy_admission(lp_round, {})) > len(res.quota_greedy.admitted)
    assert preemptive, f"{policy}: no round with victims or re-queues was cut"
    if spot:
        assert binding, f"{policy}: the quota held no LP job back in any round compared"


def test_every_greedy_policy_is_covered() -> None:
    """The cases above exercise every registered policy `solve --policy` accepts."""
    covered = {c.values[1] for c in CASES}
    missing = set(greedy_policy_names()) - covered - {"gfs-week-peak"}   # only its forecaster differs
    assert not missing, f"add a case for {sorted(missing)}"


def test_a_class_without_its_own_quota_is_held_to_the_next_longer_one() -> None:
    """The disagreement that had two greedy implementations: an LP job of the 1 h class in a pool
    whose only quota is the 4 h class's (0 GPUs). The simulator's LP pass holds it to that quota
    and starts nothing; the solver's greedy admission treated it as unlimited and started it."""
    from gfs_opt.model import ClusterState, Job, JobClass

    st = ClusterState.from_nodes([("A100", 8, "n0")])
    job = Job(1, "org", "A100", JobClass.LP, 2000, 1, 0.0, 3600.0, guarantee_h=1.0)
    rnd = Round(time=100.0, state=st, jobs={1: job}, running={}, pending_hp=[], pending_lp=[1],
                quotas={("A100", 4.0): 0}, params=Params(guarantee_classes=(4.0,)))
    assert greedy_admission(rnd) == []          # the round's quotas in force
    assert greedy_admission(rnd, {}) == [1]     # without a quota it starts
