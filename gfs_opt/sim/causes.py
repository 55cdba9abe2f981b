"""Why an LP job was evicted: the cause the engine records with each eviction.

An eviction is tied to the HP placement of the same decision that needed the victim's GPUs, and
classified by what that HP gang met in its pool just before its victims were released:

* ``count``: the pool had fewer free GPUs than the gang asks for (no placement could avoid it);
* ``fragmentation``: the pool had enough free GPUs, but no set of nodes could host the gang on
  free GPUs alone (they were spread over the wrong nodes, or over partly used GPUs);
* ``other``: no HP placement of the decision needed the victim's GPUs, or the gang would have
  fitted the free GPUs anyway (a policy that evicts by choice).

Chronus's re-queues at a lease end are voluntary and are not evictions: they get no cause.

"Free GPUs" are the pool's capacity minus what is allocated, in milli-GPU like the state (a partly
used GPU counts with what is left of it), so ``count`` ⇔ ``pool_free_gpus < hp_demand_gpus``
holds exactly in the log. "Could host the gang" is the exact slot count of `ClusterState`:
Σ_n ⌊free_n / k⌋ workers of k whole GPUs, Σ_gpu ⌊(1000 − used) / g⌋ fractional ones.

The state the gang met is rebuilt per GPU from the decision, in its own order: the state before
the decision (the live state, minus the decision's placements and plus its releases when the
policy planned them on it, `Simulator._is_plan`), then each placement in turn — the releases it
needed first, then its GPUs. That is the order the greedy passes plan in (HP jobs one by one,
each after its victims, then LP), so for them the state is the one the pass saw. A placement
needs a released job when one of its GPUs would be over-allocated while that job still holds it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Literal

import numpy as np

from gfs_opt.model import MILLI, ClusterState, Decision, Job, Placement, RunningJob, milli_per_gpu

CauseKind = Literal["count", "fragmentation", "other"]
KINDS: tuple[CauseKind, ...] = ("count", "fragmentation", "other")


@dataclass(frozen=True, slots=True)
class EvictionCause:
    """The cause of one eviction (module doc). GPU amounts in GPUs; ``hp_job`` None and
    ``hp_demand_gpus`` NaN when no HP placement of the decision needed the victim (then
    ``pool_free_gpus`` is the pool's before the decision). A field added here becomes a column of
    the eviction table (`CAUSE_FIELDS`); give it a default so the constructors below still hold."""

    kind: CauseKind
    hp_job: int | None
    pool: str
    #: free GPUs of the pool just before the HP gang's victims were released
    pool_free_gpus: float
    #: the HP gang's total request g·w
    hp_demand_gpus: float
    #: each HP worker takes a whole node of the pool's largest node size
    whole_node: bool
    #: HP GPUs of the pool once the decision is applied, and the plan U_0 = μ_0 + z_ρ·σ_0/η the
    #: spot quota was set for (NaN: no forecast); filled in by the engine
    hp_after_gpus: float = math.nan
    plan_gpus: float = math.nan
    #: HP demand above the plan (or no plan): the quota is answerable for it, and GFS's η rule
    #: moves on these alone (`gfs_opt.quota.rule.update_eta`)
    quota_attributable: bool = True


#: the fields of `EvictionCause`, in order (the eviction table's columns take them from here)
CAUSE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(EvictionCause))


def classify(pool_free: int, demand: int, fits: bool) -> CauseKind:
    """The kind of an eviction an HP gang of ``demand`` milli-GPU needed when its pool had
    ``pool_free`` milli free and the gang ``fits`` (or not) on free GPUs alone."""
    if pool_free < demand:
        return "count"
    return "other" if fits else "fragmentation"


def slots_on(used: np.ndarray, node_starts: np.ndarray, g: int) -> int:
    """Workers of ``g`` milli that fit side by side on GPUs with usage ``used`` (one pool's
    GPUs; ``node_starts``: each node's first GPU in ``used``) — `ClusterState.whole_slots` and
    `ClusterState.shared_slots` on an array rather than on the state's counts."""
    if g >= MILLI:
        free = np.add.reduceat((used == 0).astype(np.int64), node_starts)
        return int((free // (g // MILLI)).sum())
    return int((np.maximum(MILLI - used, 0) // g).sum())


class _Pool:
    """One pool's GPUs as the walk over a decision sees them (usage per GPU, by position)."""

    def __init__(self, state: ClusterState, pool: str) -> None:
        p = state.pool_index[pool]
        self.lo, self.hi = state.pool_slice(p)
        self.first = int(state.node_first_gpu[self.lo])
        self.used = state.gpu_used[self.first:int(state.node_first_gpu[self.hi])].astype(np.int64)
        self.node_starts = state.node_first_gpu[self.lo:self.hi] - self.first
        self.capacity = int(state.pool_capacity[p])
        self.state = state
        self.holders: dict[int, list[int]] = {}    # GPU → released jobs holding it
        self.free_before = 0                       # free milli before the decision

    def free(self) -> int:
        return self.capacity - int(self.used.sum())

    def cause(self, job: Job) -> EvictionCause:
        """What HP ``job`` meets on the pool's GPUs as they are now."""
        free = self.free()
        fits = slots_on(self.used, self.node_starts, job.g) >= job.workers
        return EvictionCause(classify(free, job.demand, fits), job.id, job.pool, free / MILLI,
                             job.demand / MILLI, self.state.takes_whole_node(job))

    def add(self, gpus: dict[int, int], sign: int) -> None:
        used = self.used
        for i, m in gpus.items():
            used[i] += sign * m

    def needed(self, gpus: dict[int, int], held: Mapping[int, dict[int, int]]) -> list[int]:
        """The released jobs, not released yet, on the GPUs a placement would over-allocate."""
        used = self.used
        out: list[int] = []
        for i, m in gpus.items():
            if int(used[i]) + m > MILLI:
                for jid in self.holders.get(i, ()):
                    if jid in held and jid not in out:
                        out.append(jid)
        return out


def _gpus(state: ClusterState, pool: _Pool, job: Job, placement: Placement
          ) -> dict[int, int] | None:
    """Milli-GPU a placement holds per GPU of the pool (positions in ``pool.used``); None if it
    names GPUs outside the pool (the engine refuses such a decision)."""
    m = milli_per_gpu(job.g)
    out: dict[int, int] = {}
    for node, gpus in placement:
        node = int(node)
        if not pool.lo <= node < pool.hi:
            return None
        base = int(state.node_first_gpu[node]) - pool.first
        n_gpus = int(state.node_gpus[node])
        for lg in gpus:
            if not 0 <= int(lg) < n_gpus:
                return None
            i = base + int(lg)
            out[i] = out.get(i, 0) + m
    return out


def eviction_causes(state: ClusterState, jobs: Mapping[int, Job],
                    running: Mapping[int, RunningJob], decision: Decision, planned: bool
                    ) -> list[EvictionCause]:
    """The cause of each of ``decision.victims``, in order (see the module doc), before the
    engine applies the decision; ``planned``: the state already holds the decision's changes.
    Entries the engine will refuse (a victim not running, a placement off its pool) are
    skipped here: the engine raises on them right after."""
    pools = {running[v].job.pool: _Pool(state, running[v].job.pool)
             for v in decision.victims if v in running}
    held: dict[int, dict[int, int]] = {}       # released job → milli it holds per GPU
    for jid in [*decision.victims, *decision.requeue]:
        r = running.get(jid)
        pool = pools.get(r.job.pool) if r is not None else None
        if r is not None and pool is not None and jid not in held:
            got = _gpus(state, pool, r.job, r.placement)
            if got is not None:
                held[jid] = got
                for i in got:
                    pool.holders.setdefault(i, []).append(jid)
    placed: list[tuple[Job, _Pool, dict[int, int]]] = []
    for jid, pl in decision.placements.items():
        job = jobs.get(jid)
        pool = pools.get(job.pool) if job is not None else None
        if job is not None and pool is not None:
            got = _gpus(state, pool, job, pl)
            if got is not None:
                placed.append((job, pool, got))
    if planned:       # back to the state before the decision
        for jid, gpus in held.items():
            pools[running[jid].job.pool].add(gpus, +1)
        for _job, pool, gpus in placed:
            pool.add(gpus, -1)
    for pool in pools.values():
        pool.free_before = pool.free()
    found: dict[int, EvictionCause] = {}
    for job, pool, gpus in placed:
        if job.is_hp:
            needed = pool.needed(gpus, held)
            if needed:
                met = pool.cause(job)
                for jid in needed:
                    pool.add(held.pop(jid), -1)
                    found[jid] = met
        pool.add(gpus, +1)
    out: list[EvictionCause] = []
    for v in decision.victims:
        cause = found.get(v)
        if cause is None:   # needed by no HP placement: the pool as the decision found it
            r = running.get(v)
            pool_name = r.job.pool if r is not None else ""
            free = pools[pool_name].free_before / MILLI if pool_name in pools else math.nan
            cause = EvictionCause("other", None, pool_name, free, math.nan, False)
        out.append(cause)
    return out
