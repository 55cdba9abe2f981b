"""`FitMemo` only skips work whose outcome is known: a replay with the memo switched off must
give the same per-job table, quota log and refusal counts, for every queue order it is used
with (head-of-line FIFO, plain FIFO, PTS) and with and without a quota."""

from __future__ import annotations

import pytest
from standins import TOY_SETUP

from gfs_opt.experiments.runner import RunSpec, prepare_trace
from gfs_opt.model import Params
from gfs_opt.policies import make_policy, options_for
from gfs_opt.preempt.fit_memo import FailSizes, FitMemo
from gfs_opt.sim.engine import SimConfig, Simulator


@pytest.mark.parametrize("policy", ["yarn-cs", "yarn-cs+sqa", "lyra", "gfs"])
def test_replay_is_the_same_without_the_memo(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trace, lo, hi = prepare_trace(RunSpec.from_setup(TOY_SETUP, policy=policy))
    skipped: list[int] = []
    real_covers = FailSizes.covers

    def covers(self: FailSizes, shapes: object) -> bool:
        out = real_covers(self, shapes)  # type: ignore[arg-type]
        skipped.append(out)
        return out

    def replay() -> tuple[str, str, dict]:
        opts = options_for(policy, {"forecaster": "ets"} if "gfs" in policy or "+" in policy
                           else {})
        sim = Simulator(trace, make_policy(policy, **opts), Params(),
                        SimConfig(eval_start=lo, eval_end=hi))
        res = sim.run()
        jobs = res.recorder.jobs
        assert jobs is not None
        return (jobs.to_csv(index=False), res.recorder.quota_table().to_csv(index=False),
                sim.policy.diagnostics())

    monkeypatch.setattr(FailSizes, "covers", covers)
    with_memo = replay()
    assert sum(skipped) > 0, "no pool pass was skipped: the case does not exercise the memo"
    monkeypatch.setattr(FitMemo, "known", lambda *_a, **_k: None)
    assert replay() == with_memo
