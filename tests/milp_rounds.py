"""Small hand-built rounds for the MILP tests (built directly, independent of instance files)."""

from __future__ import annotations

from collections.abc import Sequence

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
