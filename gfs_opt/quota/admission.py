"""LP admission: the quota check of SQA step 5, and the greedy admission of a standalone round."""

from __future__ import annotations

from collections.abc import Mapping

from gfs_opt.model import Job, JobClass, Round
from gfs_opt.preempt.scoring import pool_can_fit, worker_slots
from gfs_opt.sim.queues import as_queue


def quota_allows(lp_running_milli: int, job: Job, quota_milli: int | None) -> bool:
    """Running LP GPUs of the pool plus this job's g·w stay within the quota (None = no quota)."""
    return quota_milli is None or lp_running_milli + job.demand <= quota_milli


def quota_for(quotas: Mapping[tuple[str, float], int], pool: str, d: float) -> int | None:
    """Quota of class ``d`` in ``pool``; a class without its own entry is held to the nearest
    longer class (a longer window needs more hours free, so its quota is the stricter), else to
    the pool's smallest quota. None only when the pool has no quota at all."""
    q = quotas.get((pool, d))
    if q is not None:
        return q
    entries = sorted((dd, qq) for (pp, dd), qq in quotas.items() if pp == pool)
    if not entries:
        return None
    longer = [qq for dd, qq in entries if dd >= d]
    return longer[0] if longer else min(qq for _dd, qq in entries)


def fits_now(rnd: Round, job: Job) -> bool:
    """The whole gang could start right now without preemption (exact worker-slot count)."""
    st = rnd.state
    return pool_can_fit(st, job) and worker_slots(st, job) >= job.workers


def quota_wait(rnd: Round, pool: str, quotas: Mapping[tuple[str, float], int]) -> float | None:
    """Wait since its last (re)queue of the oldest pending LP job of ``pool`` that the quota alone
    keeps from starting (it would fit now), or None when there is none.

    A gang that fits nowhere is not waiting on the quota: counting it would let a job no quota
    can help push η up without bound.
    """
    if pool not in rnd.state.pool_index:
        return None
    lp_running = int(rnd.state.pool_lp[rnd.state.pool_index[pool]])
    queue = as_queue(rnd.pending_lp, rnd.jobs, JobClass.LP)
    oldest: float | None = None
    # the quota and fitting are properties of a gang's shape, so each shape is asked once; its
    # jobs come in submit order and a job waits at most since its submission, so the walk of a
    # shape stops at the first submission no older than the oldest wait found so far
    for (_g, _w, d), entries in queue.shapes(pool).items():
        first = rnd.jobs[entries[0][1]]
        if quota_allows(lp_running, first, quota_for(quotas, pool, d)) or not fits_now(rnd, first):
            continue
        for submit, jid in entries:
            if oldest is not None and submit >= oldest:
                break
            since = rnd.queued_since.get(jid, submit)
            if oldest is None or since < oldest:
                oldest = since
    return None if oldest is None else max(0.0, rnd.time - oldest)


def lp_order_key(job: Job) -> tuple[int, int, float, int]:
    """PTS LP order: (−g, w, submit, id)."""
    return (-job.g, job.workers, job.submit, job.id)


def greedy_admission(rnd: Round, quotas: dict[tuple[str, float], int] | None = None) -> list[int]:
    """LP job ids the greedy LP pass would start in this round (quota + non-preemptive fit).

    Works on a copy of the state; the round is left untouched.
    """
    from gfs_opt.preempt.scoring import place_gang

    quotas = rnd.quotas if quotas is None else quotas
    st = rnd.state.copy()
    from gfs_opt.policies.base import FailSizes

    admitted: list[int] = []
    fails: dict[str, FailSizes] = {}
    for jid in sorted(rnd.pending_lp, key=lambda j: lp_order_key(rnd.jobs[j])):
        job = rnd.jobs[jid]
        pool_fails = fails.setdefault(job.pool, FailSizes())
        if job.pool not in st.pool_index or pool_fails.dominated(job.g, job.workers):
            continue
        p = st.pool_index[job.pool]
        if not quota_allows(int(st.pool_lp[p]), job, quotas.get((job.pool, job.guarantee_h))):
            continue
        placement = place_gang(st, job, None)
        if placement is None:
            pool_fails.add(job.g, job.workers)
            continue
        st.allocate(job, placement)
        admitted.append(jid)
    return admitted
