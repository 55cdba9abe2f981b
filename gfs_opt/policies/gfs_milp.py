"""GFS with exact per-round steps: the preemption MILP (and optionally the quota MILP).

Each pass places what fits without preemption greedily (that part is never contested). Where HP
jobs are still waiting in a pool that runs LP work, the remaining HP pass is solved exactly on a
standalone copy of the round, with a time limit; on time-out or failure the greedy PTS answer is
used instead and the report says so (``fallback``). Gangs that could not start even if every LP
job were evicted (`may_fit_by_preemption`) are left out, and with none left no MILP is solved:
on `paper-a100` a few such gangs wait for weeks and would otherwise cost one solve per pass.
With ``quota_method="milp"`` the chance-constrained admission MILP (with the shape rows of the
whole-node reserve) decides which LP jobs start at the first quota refresh of each hour with LP
waiting, and its implied quotas govern the greedy LP passes until the next refresh.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from gfs_opt.model import (
    ClusterState,
    Decision,
    Job,
    JobClass,
    Params,
    Round,
    RunningJob,
    plain_dict,
)
from gfs_opt.pending import PendingQueue, Shape, as_queue
from gfs_opt.policies.gfs import GFSPolicy
from gfs_opt.preempt.boundary import still_running, with_held_nodes
from gfs_opt.preempt.fit_memo import lacks_room
from gfs_opt.preempt.hp_pass import hp_pass
from gfs_opt.preempt.milp import PassCache, PreemptOptions, solve_preemption
from gfs_opt.preempt.objective import PreemptObjective
from gfs_opt.quota.admission import lp_order_key
from gfs_opt.quota.milp import QuotaOptions, solve_quota
from gfs_opt.solve import SolverOptions

#: the window penalty of gfs-milp's preemption objective: above any GPU-seconds of lost work a
#: replay can reach, so the MILP breaks the fewest guarantee windows first (the LP eviction
#: rate counts windows) and, among those, throws away the least work. The solver's default
#: (3,600 GPU-s, `PreemptObjective`) trades one broken window for an hour of one GPU's work.
COUNT_FIRST_PENALTY = 1e7


def may_fit_by_preemption(st: ClusterState, job: Job) -> bool:
    """Necessary condition for an HP gang to start if every LP job could be evicted: enough
    worker slots on GPUs that hold no HP. A gang that fails it can never be placed this round,
    so leaving it out of the MILP (or skipping the MILP) changes no answer. Long-waiting huge
    gangs fail it pass after pass; without this test every pass would solve a MILP for them.
    """
    if job.pool not in st.pool_index:
        return False
    return not lacks_room(st, job.pool, job.g, job.workers, preemptive=True)


def _unfit(fits: Mapping[tuple[int, int], bool], shape: Shape) -> bool:
    """A `PendingQueue.cursors` filter: the shape's gangs cannot fit even by preemption."""
    return not fits[(shape[0], shape[1])]


def standalone_round(rnd: Round, pending_hp: list[int] | None = None,
                     pending_lp: list[int] | None = None) -> Round:
    """A self-contained copy of a live round: only the jobs it mentions, state copied, jobs
    placed earlier in this pass counted as running (they may not be undone)."""
    st = rnd.state.copy()
    running: dict[int, RunningJob] = plain_dict(rnd.running)
    for jid, (_cls, _g, placement) in st.alloc.items():
        if jid not in running:
            running[jid] = RunningJob(rnd.jobs[jid], rnd.time, rnd.time, rnd.time, placement)
    hp = [j for j in (rnd.pending_hp if pending_hp is None else pending_hp) if j not in st.alloc]
    lp = [j for j in (rnd.pending_lp if pending_lp is None else pending_lp) if j not in st.alloc]
    jobs: dict[int, Job] = {j: rnd.jobs[j] for j in (*running, *hp, *lp)}
    return Round(time=rnd.time, state=st, jobs=jobs, running=running, pending_hp=hp,
                 pending_lp=lp, queued_since={j: rnd.queued_since.get(j, rnd.jobs[j].submit)
                                              for j in (*hp, *lp)},
                 forecasts=dict(rnd.forecasts), pools=rnd.pools, quotas=dict(rnd.quotas),
                 reserves=dict(rnd.reserves), node_evictions_1h=rnd.node_evictions_1h,
                 node_evictions_1d=rnd.node_evictions_1d, params=rnd.params,
                 quota_due=rnd.quota_due)


class GFSMilpPolicy(GFSPolicy):
    name = "gfs-milp"
    standalone = False     # its HP step is the MILP; `gfs-opt solve --method milp` runs that

    def __init__(self, time_limit: float = 2.0, solver: str = "scip", quota_method: str = "rule",
                 presolve: str = "fast", window_penalty: float = COUNT_FIRST_PENALTY,
                 **gfs_options: Any) -> None:
        super().__init__(**gfs_options)
        if not window_penalty >= 0:
            raise ValueError(f"window_penalty must be ≥ 0, got {window_penalty}")
        self.window_penalty = float(window_penalty)
        self.preempt_options = PreemptOptions(objective=PreemptObjective(
            window_penalty=self.window_penalty))
        if quota_method not in {"rule", "milp"}:
            raise ValueError("quota_method must be 'rule' or 'milp'")
        self.solver = SolverOptions(solver=solver, time_limit=time_limit, presolve=presolve)
        self.quota_method = quota_method
        self.milp_solves = 0
        self.milp_fallbacks = 0
        # how the preemption steps were answered (`PreemptResult.routes`), e.g. "bound/cover":
        # kept here, not in the run's summary (the golden digests read that)
        self.preempt_routes: Counter[str] = Counter()
        # what the preemption models keep between passes (most nodes do not change)
        self.pass_cache = PassCache()

    def options(self) -> dict[str, Any]:
        return {**super().options(), "time_limit": self.solver.time_limit,
                "solver": self.solver.solver, "presolve": self.solver.presolve,
                "quota_method": self.quota_method, "window_penalty": self.window_penalty}

    def parts(self) -> dict[str, str]:
        out = {**super().parts(), "victims": "preemption MILP on contested pools (greedy "
               "fallback: " + super().parts()["victims"] + ")"}
        if self.quota_method == "milp":
            out["admission"] += ", replaced by the admission MILP at each refresh"
        return out

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        super().reset(state, params, origin)
        self._milp_due = False
        self._milp_last = -float("inf")

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Mapping[tuple[str, float], int] | None:
        """The rule's quotas; with ``quota_method="milp"`` the admission MILP is due at the first
        refresh of each hour with LP waiting (`lp_step` solves it after the HP pass)."""
        due = self.spot is not None and self.spot.due(rnd)
        quotas = super().quotas_for_pass(rnd, decision)
        self._milp_due = bool(
            due and quotas and self.quota_method == "milp" and len(rnd.pending_lp)
            and rnd.time - self._milp_last >= self.eta_every_s)
        return quotas

    def lp_step(self, rnd: Round, decision: Decision,
                quotas: Mapping[tuple[str, float], int] | None) -> dict[str, int]:
        """With the admission MILP due: start the set it admits, packed on the GPUs the HP pass
        left and holding back the whole-node reserves (its shape rows), take its implied
        quotas, then the greedy LP pass under them for what it left waiting."""
        if self._milp_due and self.spot is not None:
            self._milp_due = False
            self._milp_last = rnd.time
            # the refresh's forecasts, HP history and reserves, the η the round came with
            pools = {p: replace(st, has_hp_history=decision.hp_history.get(p, st.has_hp_history))
                     for p, st in rnd.pools.items()} if decision.hp_history else rnd.pools
            fresh = replace(rnd, pools=pools, quotas=dict(quotas or {}),
                            forecasts=rnd.forecasts if decision.forecasts is None
                            else decision.forecasts,
                            reserves=rnd.reserves if decision.reserves is None
                            else decision.reserves)
            # the nodes waiting HP gangs need are held back, as the greedy LP pass does
            sub = standalone_round(with_held_nodes(fresh, self.hp_wait_s), pending_hp=[])
            res = solve_quota(sub, QuotaOptions(pack=True), self.solver)
            self.milp_solves += 1
            self.milp_fallbacks += int(res.report.fallback)
            st = rnd.state
            for jid in sorted(res.placements, key=lambda j: lp_order_key(rnd.jobs[j])):
                st.allocate(rnd.jobs[jid], res.placements[jid])
                decision.placements[jid] = res.placements[jid]
            quotas = self.spot.override(res.quotas)
            decision.quotas = dict(quotas)
            decision.reports.append(res.report)
        return super().lp_step(rnd, decision, quotas)

    def contested_pools(self, rnd: Round) -> set[str]:
        """Pools (that changed since the last pass) with HP waiting while LP work runs there."""
        st = rnd.state
        dirty = rnd.dirty_pools
        queue = as_queue(rnd.pending_hp, rnd.jobs, JobClass.HP)
        # by pool: a pool that is clean or runs no LP is not walked at all; `any` needs no
        # order, so the shape lists, not `pool_ids`' cursors (half this call's time: it is asked
        # at every pass)
        alloc = st.alloc
        return {pool for pool in queue.pools()
                if (dirty is None or pool in dirty) and st.pool_lp[st.pool_index[pool]] > 0
                and any(j not in alloc for entries in queue.shapes(pool).values()
                        for _s, j in entries)}

    @staticmethod
    def _waiting(rnd: Round, pools: set[str]) -> list[int]:
        """HP jobs of ``pools`` still waiting that could start if LP work were evicted, in the
        queue's order."""
        st = rnd.state
        queue = rnd.pending_hp
        if not isinstance(queue, PendingQueue):
            return [j for j in queue if rnd.jobs[j].pool in pools and j not in st.alloc
                    and may_fit_by_preemption(st, rnd.jobs[j])]
        # the test reads the gang's pool and shape only, and the state does not move here: a
        # long backlog is asked once per shape, and the jobs of a shape that cannot fit are
        # never walked (most contested passes of a backlog find none that can)
        out: list[int] = []
        for pool in sorted(pools):
            fits: dict[tuple[int, int], bool] = {}
            for (g, w, _d), entries in queue.shapes(pool).items():
                if (g, w) not in fits:
                    fits[(g, w)] = may_fit_by_preemption(st, rnd.jobs[entries[0][1]])
            # the queue's own order (sizes largest first, each by submission)
            for cursor in queue.cursors(pool, fifo=False, skip=partial(_unfit, fits)):
                out.extend(j for j, _shape in cursor if j not in st.alloc)
        return out

    def settled(self, rnd: Round) -> bool:
        """The greedy passes are settled and no waiting HP gang, but those waiting for a window
        boundary, could start by evicting LP work: no MILP would be built (`hp_step`)."""
        patient = self.patience_settled(rnd)
        if patient is None:
            return False
        denied = self.passes_settled(rnd, self.fit_memo("hp", preemptive=False), patient)
        if denied is None:
            return False
        pools = self.contested_pools(rnd)
        if pools and any(j not in patient for j in self._waiting(rnd, pools)):
            return False
        if denied:
            self.count_denials(rnd, denied)
        return True

    def hp_step(self, rnd: Round, decision: Decision) -> None:
        """What fits without preemption greedily, then the preemption MILP on the contested
        pools (the greedy PTS answer on time-out)."""
        placer = self.placer(rnd)
        hp_pass(rnd, decision, order=self.order, placer=placer, victims=None,
                memo=self.fit_memo("hp", preemptive=False))
        # those the pass above left waiting (it tried them all on free GPUs); the boundary step
        # is greedy: it re-queues, it breaks no window
        patient = self.boundary_step(rnd, decision, placer, tried=True)
        if patient:
            rnd = still_running(rnd, decision)
        pools = self.contested_pools(rnd)
        st = rnd.state
        waiting = self._waiting(rnd, pools) if pools else []
        if patient:
            skip = set(patient)
            waiting = [j for j in waiting if j not in skip]
        if waiting:
            sub = standalone_round(rnd, pending_hp=waiting, pending_lp=[])
            res = solve_preemption(sub, self.preempt_options, solver=self.solver,
                                   cache=self.pass_cache)
            self.milp_solves += 1
            self.milp_fallbacks += int(res.fallback)
            self.preempt_routes["/".join(r for r in res.routes if r)] += 1
            for v in res.decision.victims:
                st.release(rnd.jobs[v])
            decision.victims.extend(res.decision.victims)
            for jid, placement in res.decision.placements.items():
                st.allocate(rnd.jobs[jid], placement)
                decision.placements[jid] = placement
            decision.reports.extend(res.decision.reports)
