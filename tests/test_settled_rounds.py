"""`Policy.settled`: a round the policy says is settled gets an empty decision, and skipping it
leaves the replay as it was (the per-job table, quota log, diagnostics and pass count)."""

from __future__ import annotations

import pytest
from standins import TOY_SETUP, needs_ref_toy

from gfs_opt.experiments.runner import RunSpec, prepare_trace
from gfs_opt.model import Params, Round
from gfs_opt.policies import make_policy, options_for
from gfs_opt.policies.base import ComposedPolicy, Policy
from gfs_opt.sim.engine import SimConfig, Simulator

POLICIES = ["yarn-cs", "yarn-cs+sqa", "yarn-cs:static", "fgd", "gfs", "gfs-milp"]


def _policy(name: str) -> Policy:
    base, _, quota = name.partition(":")
    opts = options_for(base, {"forecaster": "ets"} if "gfs" in base or "+" in base else {})
    if quota:
        opts["quota"] = quota
    return make_policy(base, **opts)


def _replay(name: str) -> tuple[str, str, dict, int]:
    trace, lo, hi = prepare_trace(RunSpec.from_setup(TOY_SETUP, policy=name.partition(":")[0]))
    sim = Simulator(trace, _policy(name), Params(), SimConfig(eval_start=lo, eval_end=hi))
    res = sim.run()
    jobs = res.recorder.jobs
    assert jobs is not None
    return (jobs.to_csv(index=False), res.recorder.quota_table().to_csv(index=False),
            sim.policy.diagnostics(), res.passes)


def _check_skips(name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int, int]:
    """Replay ``name`` with every settled round checked against the decision it skips, then
    with the skip and without it (all three equal); returns (settled rounds, settled rounds with
    patient HP gangs, quota refusals those rounds counted)."""
    cls = type(_policy(name))
    real = cls.settled
    said: list[bool] = []
    patient_said: list[bool] = []   # settled rounds with HP gangs waiting for a boundary
    denials: list[int] = []

    def counting(self: ComposedPolicy, into: list[dict[str, int]]) -> None:
        self.count_denials = lambda _rnd, denied: into.append(dict(denied))  # type: ignore[method-assign]

    def settled(self: ComposedPolicy, rnd: Round) -> bool:
        recorded: list[dict[str, int]] = []   # the quota refusals a settled round records
        counting(self, recorded)
        try:
            out = real(self, rnd)
        finally:
            del self.count_denials
        said.append(out)
        assert out or not recorded
        if out and isinstance(self, ComposedPolicy) and self.patient(rnd):
            patient_said.append(out)
        if out:   # what the skipped call would have answered, and it touches no GPU
            before = dict(rnd.state.alloc)
            counted: list[dict[str, int]] = []
            counting(self, counted)
            try:
                d = self.decide(rnd)
            finally:
                del self.count_denials
            assert not (d.placements or d.victims or d.requeue or d.reports)
            assert d.quotas is None and d.eta is None and d.forecasts is None
            assert rnd.state.alloc == before
            # … and the same refusals its LP pass counts
            assert [c for c in counted if c] == [c for c in recorded if c]
            denials.extend(n for c in recorded for n in c.values())
        for c in recorded:
            self.count_denials(rnd, c)
        return out

    monkeypatch.setattr(cls, "settled", settled)
    checked = _replay(name)
    monkeypatch.setattr(cls, "settled", real)
    assert _replay(name) == checked
    monkeypatch.setattr(cls, "settled", lambda *_a: False)
    assert _replay(name) == checked
    return sum(said), len(patient_said), sum(denials)


@pytest.mark.parametrize("name", POLICIES)
def test_skipping_settled_rounds_changes_nothing(name: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    said, _patient, denials = _check_skips(name, monkeypatch)
    assert said > 0, "no round was settled: the case does not exercise the skip"
    if name in ("gfs", "gfs-milp"):   # a backlog the quota holds back settles with refusals
        assert denials > 0, "no settled round counted a refusal"


@needs_ref_toy
@pytest.mark.parametrize("name", ["gfs", "gfs-milp"])
def test_skipping_settled_rounds_with_patient_gangs(name: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds whose HP gangs wait for a window boundary settle too, and skipping them changes
    nothing. On ref-toy HP gangs meet boundaries within their notice; the built-in stand-in
    (``small``) has almost none, so it cannot exercise this case."""
    _said, patient, _denials = _check_skips(name, monkeypatch)
    assert patient > 0, "no round with a patient HP gang was settled"
