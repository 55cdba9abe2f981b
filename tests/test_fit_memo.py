"""`FitMemo` only skips work whose outcome is known: a replay with the memo switched off must
give the same per-job table, quota log and refusal counts, for every queue order it is used
with (head-of-line FIFO, plain FIFO, PTS) and with and without a quota."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standins import TOY_SETUP
from test_cluster_state import place_one

from gfs_opt.experiments.runner import RunSpec, prepare_trace
from gfs_opt.model import (
    ClusterState,
    Decision,
    Job,
    JobClass,
    Params,
    PoolStatus,
    Round,
    RunningJob,
)
from gfs_opt.policies import make_policy, options_for
from gfs_opt.preempt import fit_memo
from gfs_opt.preempt.fit_memo import FailSizes, FitMemo, lacks_room
from gfs_opt.preempt.greedy import PTS_RULE, PreemptContext, place_gang_preemptive
from gfs_opt.preempt.scoring import place_gang
from gfs_opt.sim.engine import SimConfig, Simulator


@pytest.mark.parametrize("policy", ["yarn-cs", "yarn-cs+sqa", "lyra", "gfs", "gfs-no-aged-order"])
def test_replay_is_the_same_without_the_memo(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trace, lo, hi = prepare_trace(RunSpec.from_setup(TOY_SETUP, policy=policy))
    skipped: list[int] = []
    kept: list[bool] = []   # shapes a release left without room (still known after it)
    repeats: list[bool] = []   # LP passes that found an earlier idle pass to build on
    real_covers, real_lacks_room = FailSizes.covers, fit_memo.lacks_room
    real_idle = FitMemo.idle

    def idle(self: FitMemo, *args: object) -> object:
        out = real_idle(self, *args)  # type: ignore[arg-type]
        repeats.append(out is not None)
        return out

    def lacks_room(*args: object) -> bool:
        out = real_lacks_room(*args)  # type: ignore[arg-type]
        kept.append(out)
        return out

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
    monkeypatch.setattr(fit_memo, "lacks_room", lacks_room)
    monkeypatch.setattr(FitMemo, "idle", idle)
    with_memo = replay()
    assert sum(skipped) > 0, "no pool pass was skipped: the case does not exercise the memo"
    assert sum(kept) > 0, "no shape outlived a release: the case does not exercise lacks_room"
    if policy in ("lyra", "gfs", "gfs-no-aged-order"):   # no head-of-line blocking: passes are told
        # from earlier ones
        assert sum(repeats) > 0, "no LP pass found an idle pass to build on"
    monkeypatch.setattr(FitMemo, "known", lambda *_a, **_k: None)
    monkeypatch.setattr(FitMemo, "idle", lambda *_a, **_k: None)
    assert replay() == with_memo


def _random_state(sizes: list[int], ops: list[tuple[int, int, bool]]
                  ) -> tuple[ClusterState, dict[int, RunningJob]]:
    """A one-pool cluster with one-worker HP and LP jobs (`place_one`); the LP jobs are the
    running (evictable) ones."""
    state = ClusterState.from_nodes(("A", g, f"n{i}") for i, g in enumerate(sizes))
    jobs: dict[int, Job] = {}
    for jid, (pick, g, hp) in enumerate(ops):
        place_one(state, jobs, jid, pick, g, JobClass.HP if hp else JobClass.LP)
    running = {jid: RunningJob(job, 0.0, 0.0, 0.0, state.alloc[jid][2])
               for jid, job in jobs.items() if not job.is_hp}
    return state, running


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=5),
       ops=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([250, 500, 1000, 2000]),
                              st.booleans()), max_size=25),
       g=st.sampled_from([250, 400, 500, 1000, 2000, 4000]), w=st.integers(1, 6))
def test_lacks_room_is_a_necessary_condition(sizes: list[int], ops: list[tuple[int, int, bool]],
                                             g: int, w: int) -> None:
    """What `FitMemo` keeps after a release: a shape `lacks_room` says cannot fit fails best fit
    (and, without preemption, best fit fails exactly those), and with preemption it fails even
    when every LP job may be evicted."""
    state, running = _random_state(sizes, ops)
    gang = Job(10_000, "o", "A", JobClass.HP, g, w, 0.0, 1.0)
    fits = place_gang(state, gang, None) is not None
    assert lacks_room(state, "A", g, w, preemptive=False) == (not fits)
    ctx = PreemptContext(state, running, 0.0, PoolStatus(), state.capacity_gpus("A"), 86_400.0,
                         Params().restart_overhead)
    if lacks_room(state, "A", g, w, preemptive=True):
        assert place_gang_preemptive(ctx, gang, PTS_RULE, None) is None
        assert not fits
    assert state.check() == []


def test_a_release_keeps_the_shapes_that_still_lack_room() -> None:
    """After a release the memo hands back the failed shapes the freed GPUs do not help: a
    4-GPU worker on 2-GPU nodes stays known, two 1-GPU workers that now fit are forgotten."""
    state = ClusterState.from_nodes(("A", 2, f"n{i}") for i in range(2))
    full = [Job(1 + i, "o", "A", JobClass.LP, 2000, 1, 0.0, 1.0) for i in range(2)]
    for i, j in enumerate(full):
        state.allocate(j, ((i, (0, 1)),))
    memo = FitMemo(preemptive=False)
    rnd = Round(time=0.0, state=state, jobs={}, running={}, pending_hp=[], pending_lp=[],
                released={"A": 0}, hp_released={"A": 0})
    fails = FailSizes()
    fails.add(1000, 2)
    fails.add(4000, 1)
    memo.keep(rnd, "A", None, fails)
    before = memo.known(rnd, "A", Decision())
    assert before is not None and before.front == [(1000, 2), (4000, 1)]
    state.release(full[0])
    known = memo.known(replace(rnd, released={"A": 1}), "A", Decision())
    assert known is not None and known.front == [(4000, 1)]
    assert not known.dominated(1000, 2) and known.dominated(8000, 1)
