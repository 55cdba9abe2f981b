"""Policies are compositions of named parts (queue order, admission rule, placement score, victim
rule): a new baseline is a new composition, and each baseline module reads like its paper."""

from __future__ import annotations

import inspect
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from standins import TOY_SETUP

from gfs_opt.experiments.runner import RunSpec, run
from gfs_opt.instance import load_round
from gfs_opt.instance.solve_round import greedy_policy_names, solve_round
from gfs_opt.policies import POLICIES, make_policy, register_policy
from gfs_opt.policies.base import ComposedPolicy
from gfs_opt.policies.fgd import FragmentationGradient
from gfs_opt.policies.parts import FIFO_ORDER, BestFit, NoQuota, PreemptRule, SpotQuota

TWO_POOLS = Path(__file__).resolve().parent.parent / "instances" / "tiny-09-two-pools.json"


class LyraWithFGDPlacement(ComposedPolicy):
    """Lyra's reclaim-cost victims with FGD's placement: a composition no paper ran."""

    name = "lyra-fgd"

    def __init__(self, victims: str = "lyra") -> None:
        rule = PreemptRule("lyra", "lyra") if victims == "lyra" else PreemptRule()  # or PTS's
        super().__init__(order=FIFO_ORDER, admission=NoQuota(), placement=FragmentationGradient(),
                         victim_rule=rule)


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_registered_policy_is_a_composition_of_four_named_parts(name: str) -> None:
    policy = make_policy(name)
    assert isinstance(policy, ComposedPolicy)
    parts = policy.parts()
    assert list(parts) == ["queue order", "admission", "placement", "victims"]
    assert all(isinstance(v, str) and v for v in parts.values())
    assert (policy.spot is not None) == isinstance(policy.admission, SpotQuota)


def test_the_sqa_variants_differ_from_their_baselines_in_the_admission_part_only() -> None:
    for base in ("yarn-cs", "lyra", "fgd"):
        a, b = make_policy(base).parts(), make_policy(f"{base}+sqa").parts()
        assert {k for k in a if a[k] != b[k]} == {"admission"}, base


def test_each_baseline_module_reads_like_its_paper() -> None:
    """The module of every baseline opens with the paper it follows and ends its description
    with the composition."""
    for name in ("gfs", "yarn-cs", "chronus", "lyra", "fgd"):
        doc = inspect.getmodule(POLICIES[name][0]).__doc__ or ""
        first = doc.split("\n\n")[0]
        assert "(" in first and ")" in first, f"{name}: no paper named in {first!r}"
        assert "Composition:" in doc, name


def test_a_new_baseline_is_a_new_composition() -> None:
    """A class that only picks parts runs in the simulator and answers `solve --policy`."""
    register_policy("lyra-fgd", LyraWithFGDPlacement)
    try:
        assert "lyra-fgd" in greedy_policy_names()
        window = ("2024-03-11", "2024-03-12") if TOY_SETUP == "ref-toy" else None
        out = run(RunSpec.from_setup(TOY_SETUP, policy="lyra-fgd", check_invariants=True,
                                     window=window, drain_days=0.5))
        assert out.summary["policy"] == "lyra-fgd" and len(out.jobs)
        rnd = load_round(TWO_POOLS)
        mine = solve_round(rnd, "greedy", "preemption", policy="lyra-fgd").preempt_greedy
        lyra = solve_round(rnd, "greedy", "preemption", policy="lyra").preempt_greedy
        assert mine is not None and lyra is not None and not mine.problems
        # same victim rule as Lyra: the same victims; another placement part may place elsewhere
        assert sorted(mine.decision.victims) == sorted(lyra.decision.victims)
        # a different victim part changes the victims
        register_policy("pts-fgd", LyraWithFGDPlacement, victims="two-pointer")
        other = solve_round(rnd, "greedy", "preemption", policy="pts-fgd").preempt_greedy
        assert other is not None and sorted(other.decision.victims) != sorted(mine.decision.victims)
    finally:
        POLICIES.pop("lyra-fgd", None)
        POLICIES.pop("pts-fgd", None)


def test_best_fit_with_history_ranks_nodes_by_recent_evictions() -> None:
    """The placement part is what differs between gfs and gfs-no-history."""
    a, b = make_policy("gfs"), make_policy("gfs-no-history")
    assert isinstance(a.placement, BestFit) and a.placement.history
    assert isinstance(b.placement, BestFit) and not b.placement.history
    assert {k for k in a.parts() if a.parts()[k] != b.parts()[k]} == {"placement"}


def test_the_lp_placer_is_the_rounds_placer_under_the_reserves_in_force() -> None:
    """`lp_placer` keeps the placer it made while the round's placer (E(n) changes it every
    300 s) and the reserves stay, and makes it afresh when either moves."""
    from types import SimpleNamespace

    from gfs_opt.model import Decision
    from gfs_opt.preempt.scoring import Placer

    class Given:
        """A placement part handing out whichever placer the test sets."""

        placer_now = Placer(None, use_history=False)

        def placer(self, rnd: object) -> Placer:
            return self.placer_now

    given = Given()
    policy = ComposedPolicy(order=FIFO_ORDER, admission=NoQuota(), placement=given,  # type: ignore[arg-type]
                            victim_rule=None)
    a, b = {("p", 1.0): 1}, {("p", 1.0): 2}
    steps = [(Placer(None, use_history=False), a), (None, a), (Placer(np.ones(3)), a),
             (None, b), (None, None), (None, a)]
    for placer, reserves in steps:
        if placer is not None:
            given.placer_now = placer
        got = policy.lp_placer(SimpleNamespace(reserves=reserves), Decision())  # type: ignore[arg-type]
        want = given.placer_now if reserves is None else replace(given.placer_now,
                                                                  reserves=reserves)
        assert got == want
        assert got.e_score is given.placer_now.e_score
