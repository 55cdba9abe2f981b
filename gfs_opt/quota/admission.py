"""LP admission: the quota check of SQA step 5, and the greedy admission of a standalone round."""

from __future__ import annotations

from gfs_opt.model import Job, Round


def quota_allows(lp_running_milli: int, job: Job, quota_milli: int | None) -> bool:
    """Running LP GPUs of the pool plus this job's g·w stay within the quota (None = no quota)."""
    return quota_milli is None or lp_running_milli + job.demand <= quota_milli


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
