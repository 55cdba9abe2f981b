"""Small hand-built rounds for the MILP tests (built directly, independent of instance files)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from gfs_opt.model import (
    MILLI,
    ClusterState,
    Job,
    JobClass,
    Params,
    Placement,
    Round,
    RunningJob,
)


def job(jid: int, cls: str, g: float, w: int = 1, *, pool: str = "A", submit: float = 0.0,
        d: float = 1.0, duration: float = 3600.0) -> Job:
    milli = round(g * MILLI) if g < 1 else int(g) * MILLI
    return Job(jid, "org", pool, JobClass(cls), milli, w, submit, duration, guarantee_h=d)


def make_round(nodes: Sequence[tuple[str, int]], running: Sequence[tuple[Job, Placement, float]],
               pending: Sequence[Job], t: float = 7200.0, params: Params | None = None,
               window_start: float | None = None) -> Round:
    """``running``: (job, placement, last_ckpt); the window starts at ``window_start`` or the ckpt."""
    state = ClusterState.from_nodes([(p, n, f"n{i}") for i, (p, n) in enumerate(nodes)])
    jobs: dict[int, Job] = {}
    run: dict[int, RunningJob] = {}
    for jb, pl, ckpt in running:
        state.allocate(jb, pl)
        jobs[jb.id] = jb
        ws = ckpt if window_start is None else window_start
        run[jb.id] = RunningJob(jb, start=ckpt, last_ckpt=ckpt, window_start=ws, placement=pl)
    for jb in pending:
        jobs[jb.id] = jb
    return Round(time=t, state=state, jobs=jobs, running=run,
                 pending_hp=[j.id for j in pending if j.cls is JobClass.HP],
                 pending_lp=[j.id for j in pending if j.cls is JobClass.LP],
                 params=params or Params())


# ---- contested random rounds (hypothesis) --------------------------------------------------
from hypothesis import strategies as st  # noqa: E402

from gfs_opt.model import gpus_per_worker, milli_per_gpu  # noqa: E402

_SIZES = [100, 250, 500, 700, 1000, 1000, 2000, 4000, 8000]


def _fit(state: ClusterState, g: int, w: int, order: list[int]) -> Placement | None:
    per, k = milli_per_gpu(g), gpus_per_worker(g)
    extra: dict[int, int] = {}
    out = []
    for _ in range(w):
        for n in order:
            base = int(state.node_first_gpu[n])
            fits = [lg for lg in range(int(state.node_gpus[n]))
                    if state.gpu_used[base + lg] + extra.get(base + lg, 0) + per <= MILLI]
            if len(fits) >= k:
                for lg in fits[:k]:
                    extra[base + lg] = extra.get(base + lg, 0) + per
                out.append((n, tuple(fits[:k])))
                break
        else:
            return None
    return tuple(out)


@st.composite
def contested_rounds(draw: st.DrawFn, max_nodes: int = 4, max_pending: int = 4) -> Round:
    """A small, nearly full pool (two pools sometimes) with HP waiting: preemption is likely."""
    pools = ["A"] if draw(st.booleans()) else ["A", "B"]
    n_nodes = draw(st.integers(len(pools), max_nodes))
    nodes = [(pools[i % len(pools)], draw(st.sampled_from([1, 2, 4, 8]))) for i in range(n_nodes)]
    state = ClusterState.from_nodes([(p, n, f"n{i}") for i, (p, n) in enumerate(nodes)])
    t = 20_000.0
    jobs: dict[int, Job] = {}
    running: dict[int, RunningJob] = {}
    jid = 1
    for _ in range(draw(st.integers(2, 14))):
        pool = draw(st.sampled_from(pools))
        g = draw(st.sampled_from(_SIZES))
        w = draw(st.sampled_from([1, 1, 1, 2, 3]))
        cls = JobClass.HP if draw(st.integers(0, 4)) == 0 else JobClass.LP
        lo, hi = state.pool_slice(pool)
        order = draw(st.permutations(list(range(lo, hi))))
        if g > MILLI * int(state.node_gpus[lo:hi].max()):
            continue
        pl = _fit(state, g, w, order)
        if pl is None:
            continue
        job = Job(jid, "o", pool, cls, g, w, 0.0, 1e5, guarantee_h=draw(st.sampled_from([1.0, 2.0])))
        state.allocate(job, pl)
        ckpt = t - draw(st.integers(0, 7200))
        ws = ckpt if draw(st.integers(0, 3)) else ckpt - draw(st.integers(0, 9000))
        jobs[jid] = job
        running[jid] = RunningJob(job, start=min(ckpt, ws), last_ckpt=ckpt, window_start=ws, placement=pl)
        jid += 1
    pending = []
    for _ in range(draw(st.integers(1, max_pending))):
        pool = draw(st.sampled_from(pools))
        lo, hi = state.pool_slice(pool)
        biggest = int(state.node_gpus[lo:hi].max())
        g = draw(st.sampled_from([s for s in _SIZES if s <= biggest * MILLI]))
        job = Job(jid, "o", pool, JobClass.HP, g, draw(st.sampled_from([1, 1, 2, 3])),
                  t - draw(st.integers(0, 7200)), 1e4)
        jobs[jid] = job
        pending.append(jid)
        jid += 1
    params = Params(hard_guarantee=draw(st.integers(0, 4)) == 0)
    return Round(time=t, state=state, jobs=jobs, running=running, pending_hp=pending,
                 pending_lp=[], params=params)


@st.composite
def admission_rounds(draw: st.DrawFn, max_nodes: int = 4, max_pending: int = 8) -> Round:
    """A partly used pool, several LP jobs of mixed classes waiting, an uncertain HP forecast."""
    from gfs_opt.model import PoolForecast

    rnd = draw(contested_rounds(max_nodes=max_nodes, max_pending=1))
    pools = rnd.state.pools
    t = rnd.time
    running, jobs, pending_lp = dict(rnd.running), dict(rnd.jobs), list(rnd.pending_lp)
    forecasts = dict(rnd.forecasts)
    # free some capacity: drop a random share of the running LP jobs
    for jid in sorted(running):
        if running[jid].job.cls is JobClass.LP and draw(st.booleans()):
            rnd.state.release(running.pop(jid).job)
    jid = max(jobs) + 1
    for _ in range(draw(st.integers(1, max_pending))):
        pool = draw(st.sampled_from(pools))
        lo, hi = rnd.state.pool_slice(pool)
        biggest = int(rnd.state.node_gpus[lo:hi].max())
        g = draw(st.sampled_from([s for s in _SIZES if s <= biggest * MILLI]))
        jobs[jid] = Job(jid, "o", pool, JobClass.LP, g, draw(st.sampled_from([1, 1, 2])),
                        t - draw(st.integers(0, 7200)), 1e4,
                        guarantee_h=draw(st.sampled_from([1.0, 2.0, 4.0])))
        pending_lp.append(jid)
        jid += 1
    for pool in pools:
        cap = rnd.state.capacity_gpus(pool)
        h = draw(st.integers(1, 4))
        mean = np.array([draw(st.floats(0, cap)) for _ in range(h)])
        std = np.array([draw(st.floats(0, max(cap / 4, 0.1))) for _ in range(h)])
        samples = None
        if draw(st.booleans()):
            rng = np.random.default_rng(draw(st.integers(0, 2**16)))
            samples = rng.normal(mean, std, size=(draw(st.integers(5, 40)), h))
        forecasts[pool] = PoolForecast(mean, std, samples)
    return replace(rnd, running=running, jobs=jobs, pending_hp=[], pending_lp=pending_lp,
                   forecasts=forecasts,
                   params=Params(guarantee_classes=(1.0, 2.0, 4.0),
                                 rho=draw(st.sampled_from([0.8, 0.9]))))
