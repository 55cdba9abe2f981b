"""One interface for every scheduling policy (in the spirit of Gavel's policies).

A policy turns a `Round` into a `Decision`. The round is read-only (see `gfs_opt.model`): the
policy may plan on ``round.state`` (the engine records the changes and rolls them back before
applying the returned decision through its own checks), and everything else it wants changed —
quotas, η, forecasts — goes into the decision; what it must remember lives in the policy. It
never reaches into the simulator. Hooks let it see HP usage history and the daily clock.

A greedy policy's round is three steps: the quotas in force (`quotas_for_pass`), the HP pass
(`hp_step`) and the LP pass (`lp_step`). The same steps run on a standalone round
(`standalone_quotas`, and the two passes on a copy of its state), which is what
`gfs-opt solve --method greedy` answers: one implementation for simulator and solver. A
`ComposedPolicy` takes them from named parts (`gfs_opt.policies.parts`): queue order, admission
rule, placement score, victim rule; GFS and every baseline are such compositions.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import ClassVar

from gfs_opt.model import (
    ClusterState,
    Decision,
    JobClass,
    Params,
    Round,
    RunningJob,
    WindowOutcome,
)
from gfs_opt.pending import PendingQueue, QueueOrder, as_queue
from gfs_opt.policies.parts import (
    Admission,
    PlacementScore,
    describe_order,
    describe_victims,
)
from gfs_opt.preempt.boundary import (
    HPPatience,
    Patience,
    PatientMemo,
    at_boundary,
    boundary_pass,
    held_reserves,
    patience,
    patience_end,
    reach,
    still_running,
    waiting_workers,
)
from gfs_opt.preempt.fit_memo import FailSizes, FitMemo, lacks_room
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.hp_pass import hp_pass
from gfs_opt.preempt.scoring import BEST_FIT, Placer
from gfs_opt.quota.admission import Quotas, lp_pass, lp_pool_repeat, lp_pool_settled
from gfs_opt.quota.spot_quota import SpotQuota

#: the decision of a pass that has not started (read only: what `FitMemo.known` is asked with)
_NOTHING = Decision()
#: per `ComposedPolicy` subclass, whether its round is the composed steps alone (`settled`)
_PLAIN_STEPS: dict[type, bool] = {}


class Policy(ABC):
    """Base class: subclasses set ``name`` and implement `decide`.

    A policy that admits LP work under the spot quota holds a `SpotQuota` in ``spot``; the clock
    hooks below feed it, and `diagnostics` reports what it did.
    """

    name: ClassVar[str] = "policy"
    #: called at every event time (False: only on quota-refresh rounds, e.g. Chronus' 300 s rounds)
    every_event: ClassVar[bool] = True
    spot: SpotQuota | None = None
    #: an LP job's window end in a pool with HP waiting is a scheduling event for this policy
    #: (its HP gangs may take LP jobs at their boundary, `gfs_opt.preempt.boundary`)
    wakes_at_window_ends: bool = False

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        """Called once before a simulation (or a standalone solve) starts."""
        self.params = params
        self._fit_memos: dict[str, FitMemo] = {}
        self._lp_reserves: Mapping[tuple[str, float], int] | None = None
        self._lp_placer: tuple[Placer, Placer] | None = None   # (placer, it under _lp_reserves)
        if self.spot is not None:
            self.spot.reset(state, params, origin)

    def fit_memo(self, name: str, preemptive: bool) -> FitMemo:
        """The `FitMemo` of one of the policy's passes (fresh after `reset`)."""
        try:
            memos = self._fit_memos
        except AttributeError:   # a policy asked before its first `reset`
            memos = self._fit_memos = {}
        memo = memos.get(name)
        if memo is None:
            memo = memos[name] = FitMemo(preemptive)
        return memo

    @abstractmethod
    def decide(self, rnd: Round) -> Decision: ...

    def settled(self, rnd: Round) -> bool:
        """Whether `decide` is known to return an empty decision for ``rnd``: the engine then
        skips the call. Answering True, the policy records what that `decide` would have
        changed in it (the quota refusals its LP pass counts). Exact or False (the default): a
        wrong True would change the replay."""
        return False

    def observe_hour(self, t: float, hp_usage: Mapping[tuple[str, str], float],
                     whole_usage: Mapping[str, float] | None = None) -> None:
        """Hourly maximum of HP GPUs in use per (pool, org) for the hour that ends at ``t``, and
        of HP GPUs held by whole-node workers per pool (None where the caller does not know)."""
        if self.spot is not None:
            self.spot.observe_hour(t, hp_usage, whole_usage)

    def on_day(self, t: float) -> None:
        """Midnight of simulated time (forecaster refits)."""
        if self.spot is not None:
            self.spot.on_day(t)

    def window_observer(self) -> Callable[[WindowOutcome], None] | None:
        """Where a scheduler reports each ended LP window (`WindowOutcome`): the spot quota's
        η evidence; None when the policy keeps none (the report may then be skipped)."""
        return None if self.spot is None else self.spot.observe_window

    def observe_window(self, outcome: WindowOutcome) -> None:
        """An LP window ended (succeeded, or broken with its HP context)."""
        if self.spot is not None:
            self.spot.observe_window(outcome)

    def attribution(self, pool: str, hp_milli: int) -> tuple[bool, float]:
        """(whether an eviction with ``pool``'s HP at ``hp_milli`` is the quota's to answer
        for, the plan U_0 in GPUs; NaN without one): recorded with each eviction's cause."""
        if self.spot is None:
            return True, math.nan
        return self.spot.attribution(pool, hp_milli)

    def options(self) -> dict[str, object]:
        return {}

    def diagnostics(self) -> dict[str, object]:
        """What the policy wants said about the run (e.g. the quota's activity), JSON-friendly."""
        return {"quota": self.spot.diagnostics()} if self.spot is not None else {}

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Quotas | None:
        """Refresh the spot quota when due; the quotas this pass applies (None: no quota)."""
        return None if self.spot is None else self.spot.quotas_for_pass(rnd, decision)

    def count_denials(self, rnd: Round, denied: Mapping[str, int]) -> None:
        """The LP pass's quota refusals, for the quota's diagnostics."""
        if self.spot is not None:
            self.spot.count_denials(rnd.time, denied)


class GreedyPolicy(Policy):
    """A policy whose round is the quotas in force, a greedy HP pass and a greedy LP pass."""

    #: its steps can answer a standalone round (`gfs-opt solve --policy`): they need nothing an
    #: instance file does not hold (False e.g. for exact steps or leases re-queued by time)
    standalone: ClassVar[bool] = True

    def decide(self, rnd: Round) -> Decision:
        decision = Decision()
        quotas = self.quotas_for_pass(rnd, decision)
        self.hp_step(rnd, decision)
        self.count_denials(rnd, self.lp_step(rnd, decision, quotas))
        return decision

    @abstractmethod
    def hp_step(self, rnd: Round, decision: Decision) -> None:
        """The HP pass on the round's state: placements and victims (or re-queues) into
        ``decision``."""

    @abstractmethod
    def lp_step(self, rnd: Round, decision: Decision, quotas: Quotas | None) -> dict[str, int]:
        """The LP pass on the round's state under ``quotas`` (None: no quota); returns the
        starts the quota refused, per pool."""

    def placer(self, rnd: Round) -> Placer:
        """How this round's passes pick free GPUs (default: best fit, no eviction history)."""
        return BEST_FIT

    def standalone_quotas(self, rnd: Round) -> Quotas | None:
        """The quotas this policy applies to a standalone round (an instance file): the quota
        rule on the round's forecast and η when it holds a spot quota, else None."""
        return self.spot.standalone_quotas(rnd) if self.spot is not None else None


class ComposedPolicy(GreedyPolicy):
    """A greedy policy composed of named parts (`gfs_opt.policies.parts`).

    order: the `QueueOrder` both passes walk the queues in.
    admission: the LP quota rule (`NoQuota`, `SpotQuota`, `FreeCapacityQuota`, …).
    placement: where free GPUs are taken (`BestFit`, or a paper's own `PlacementScore`).
    victim_rule: which LP jobs an HP job may evict (`PreemptRule`); None: no preemption.

    patience: how long a contested HP gang waits for LP jobs at a window boundary before it
    evicts (`HPPatience`, `gfs_opt.preempt.boundary`; None: never, the paper's PTS).

    `evictable` narrows the running LP jobs the victim rule may choose from (default: all).
    """

    def __init__(self, *, order: QueueOrder, admission: Admission, placement: PlacementScore,
                 victim_rule: PreemptRule | None, patience: HPPatience | None = None) -> None:
        self.order = order
        self.admission = admission
        self.placement = placement
        self.victim_rule = victim_rule
        self.spot = admission if isinstance(admission, SpotQuota) else None
        self.patience = patience if victim_rule is not None else None
        # the patience in seconds, read on every pass (0: none)
        self.hp_wait_s = self.patience.wait_s if self.patience is not None else 0.0
        self.hp_notice_s = self.patience.notice_s if self.patience is not None else 0.0
        self.wakes_at_window_ends = self.waits
        self._held: dict[str, int] = {}   # workers of HP gangs waiting for a boundary, per pool
        # gangs for which no boundary in reach gave room (`reach`): ordinary gangs from then on
        self._hopeless: set[int] = set()
        self._kept: set[int] = set()     # gangs judged worth their wait (`judge`)
        self._patient_memo: tuple[Round, Patience] | None = None
        self._patient_pools: PatientMemo = {}
        self._patient_queue: tuple[PendingQueue, set[int]] = (PendingQueue(JobClass.HP), set())

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        super().reset(state, params, origin)
        self._held = {}
        self._hopeless = set()
        self._kept = set()
        self._patient_memo = None
        self._patient_pools = {}
        self._patient_queue = (PendingQueue(JobClass.HP), set())

    def parts(self) -> dict[str, str]:
        """What the policy is made of, part by part, in words (ARCHITECTURE.md lists them)."""
        victims = describe_victims(self.victim_rule)
        if self.hp_wait_s > 0:
            victims += (f"; whole-node HP gangs first wait ≤ {self.hp_wait_s / 3600:g} h for LP "
                        "window boundaries (re-queues)")
        if self.hp_notice_s > 0:
            victims += (f"; other HP gangs give LP {self.hp_notice_s / 60:g} min notice (take "
                        "only jobs at a boundary meanwhile)")
        if self.waits:
            victims += "; a gang waits only while a boundary in reach gives it room"
        return {"queue order": describe_order(self.order), "admission": self.admission.name,
                "placement": self.placement.name, "victims": victims}

    def quotas_for_pass(self, rnd: Round, decision: Decision) -> Quotas | None:
        return self.admission.quotas_for_pass(rnd, decision)

    def count_denials(self, rnd: Round, denied: Mapping[str, int]) -> None:
        self.admission.count_denials(rnd.time, denied)

    def standalone_quotas(self, rnd: Round) -> Quotas | None:
        return self.admission.standalone_quotas(rnd)

    def placer(self, rnd: Round) -> Placer:
        return self.placement.placer(rnd)

    def evictable(self, rnd: Round) -> Mapping[int, RunningJob] | None:
        """The running jobs the victim rule may choose from (None: every running LP job)."""
        return None

    def settled(self, rnd: Round) -> bool:
        """True when no quota refresh is due and, in every pool the passes would visit, every
        waiting gang shape is known not to fit (`FitMemo`; a gang that waits for a window
        boundary, not to fit without preemption, `patience_settled`) and none is refused by the
        quota: both passes would then skip each pool (a backlog's usual round). A subclass with
        steps of its own answers False, unless it says otherwise."""
        cls = type(self)
        plain = _PLAIN_STEPS.get(cls)
        if plain is None:   # asked at every job event: once per class
            plain = _PLAIN_STEPS[cls] = (
                cls.decide is GreedyPolicy.decide and cls.hp_step is ComposedPolicy.hp_step
                and cls.lp_step is ComposedPolicy.lp_step
                and cls.quotas_for_pass is ComposedPolicy.quotas_for_pass)
        if not plain:
            return False
        patient = self.patience_settled(rnd)
        if patient is None:
            return False
        hp_memo = (self.fit_memo("hp", preemptive=self.victim_rule is not None)
                   if self.evictable(rnd) is None else None)
        denied = self.passes_settled(rnd, hp_memo, patient)
        if denied is None:
            return False
        if denied:
            self.count_denials(rnd, denied)
        return True

    def passes_settled(self, rnd: Round, hp_memo: FitMemo | None,
                       patient: AbstractSet[int] = frozenset()) -> dict[str, int] | None:
        """For the greedy passes of ``rnd`` (the HP one skipping pools by ``hp_memo``; None: it
        never skips): the quota refusals the LP pass would count, per pool, when neither pass
        would start or evict anything, else None. Every pool an LP pass would walk is known to
        start nothing: its shapes are known not to fit and none is refused, or the pass is told
        from an earlier one (`lp_pool_repeat`: a backlog the quota holds back). ``patient``:
        gangs that wait for a window boundary (`patience_settled`); a shape of theirs alone
        need only lack the room to start without preemption."""
        if rnd.dirty_pools is None:
            return None
        settled, quotas = self.admission.settled_quotas(rnd)
        if not settled:
            return None
        lp_memo = self.fit_memo("lp", preemptive=False)
        hp_q = as_queue(rnd.pending_hp, rnd.jobs, JobClass.HP)
        lp_q = as_queue(rnd.pending_lp, rnd.jobs, JobClass.LP, rnd.queued_since)
        st = rnd.state
        nothing = _NOTHING
        denied: dict[str, int] = {}
        repeats = not self.order.head_of_line   # an LP pass may be told from an earlier one
        for pool in rnd.dirty_pools:
            if hp_q.shapes(pool):
                if hp_memo is None:
                    return None
                known = hp_memo.known(rnd, pool, nothing)
                if not ((known is not None and known.covers_queue(hp_q, pool))
                        or (patient and patient_shapes_fail(rnd, hp_q, pool, known, patient))):
                    return None
            p = st.pool_index.get(pool)
            if lp_q.shapes(pool) and p is not None:
                n = (lp_pool_repeat(lp_memo, rnd, lp_q, pool, nothing, self.order, quotas, {})
                     if repeats and pool in lp_memo.idle_passes else None)
                if n is not None:
                    if n:
                        denied[pool] = n
                    continue
                known = lp_memo.known(rnd, pool, nothing)
                if known is None or not lp_pool_settled(known, lp_q, pool, quotas, {},
                                                        st.pool_lp.item(p)):
                    return None
        return denied

    def patience_settled(self, rnd: Round) -> AbstractSet[int] | None:
        """The round's patient gangs (`patient`) when their steps would change nothing, given
        that none of them can start on free GPUs (`passes_settled` checks that): no LP job of
        their pools is at a window boundary now (steps 2–3 take only such jobs), and they hold
        the nodes the last LP pass held for them (step 4; the LP memo learnt under those
        reserves). None when their steps might act, or a held reserve ends with this round."""
        if not self.waits:
            return frozenset()
        found = self._patient_of(rnd)
        if not found.gangs and not self._held:
            return frozenset()
        kept = self._kept
        if any(j not in kept for j in found.gangs):   # not judged yet (`judge` may evict)
            return None
        if found.gangs and self.victim_rule is not None and rnd.window_restarts != ():
            jobs = rnd.jobs
            pools = {jobs[j].pool for j in found.gangs}
            if any(r.job.pool in pools for r in at_boundary(rnd).values()):
                return None
        if found.held != self._held:
            return None
        return found.members

    @property
    def waits(self) -> bool:
        """Whether some HP gangs wait for window boundaries (`hp_wait_s` or `hp_notice_s`)."""
        return self.hp_wait_s > 0 or self.hp_notice_s > 0

    def patient(self, rnd: Round) -> list[int]:
        """`patient_gangs` of the round, not yet placed. A pass asks three times (`settled`,
        the HP step, the LP pass's reserve) on one round: the gangs are found once per round
        and filtered by what the pass has placed since."""
        if not self.waits:
            return []
        alloc = rnd.state.alloc
        hopeless = self._hopeless
        return [j for j in self._patient_of(rnd).gangs if j not in alloc and j not in hopeless]

    def _patient_of(self, rnd: Round) -> Patience:
        """`patience` of the round as first asked (once a round), without the gangs no boundary
        in reach helps (`judge`)."""
        memo = self._patient_memo
        if memo is None or memo[0] is not rnd:
            found = patience(rnd, self.hp_wait_s, self.hp_notice_s, self._patient_pools)
            hopeless = self._hopeless
            if hopeless and not hopeless.isdisjoint(found.members):
                gangs = [j for j in found.gangs if j not in hopeless]
                whole = frozenset(j for j in found.whole if j not in hopeless)
                found = Patience(gangs, whole, frozenset(gangs),
                                 waiting_workers(rnd, gangs, whole))
            memo = self._patient_memo = (rnd, found)
        return memo[1]

    def judge(self, rnd: Round, gangs: list[int], decision: Decision) -> list[int]:
        """Of the patient ``gangs`` that cannot start now, those a window boundary known to come
        within their patience gives room (`reach`); the others are ordinary gangs from now on
        (they evict in this round's pass). The kept gangs' wakes go into ``decision``: the
        boundaries they count on and the end of their patience, when they are retried."""
        found = self._patient_of(rnd)
        since = rnd.queued_since
        jobs = rnd.jobs
        kept = self._kept
        # a verdict stands until a window ends in the gang's pool (a boundary it may have
        # counted on came and went): `patience_settled` can then tell a quiet round from one
        # whose judgement would change
        restarts = rnd.window_restarts
        if restarts is None:
            ask = gangs
        else:
            again = {jobs[j].pool for j in restarts if j in jobs}
            ask = [j for j in gangs if j not in kept or jobs[j].pool in again]
        if not ask:
            return gangs
        deadlines = {j: patience_end(since.get(j, jobs[j].submit),
                                     self.hp_wait_s if j in found.whole else self.hp_notice_s)
                     for j in ask}
        keep, hopeless, wakes = reach(rnd, ask, deadlines, found.whole)
        self._hopeless.update(hopeless)
        kept.update(keep)
        decision.wakes.extend(wakes)
        gone = set(hopeless)
        return [j for j in gangs if j not in gone]

    def held_workers(self, rnd: Round, patient: list[int]) -> dict[str, int]:
        """`waiting_workers` of ``patient`` (the round's patient gangs not yet placed)."""
        found = self._patient_of(rnd)
        if len(patient) == len(found.gangs):   # none placed since
            return dict(found.held)
        return waiting_workers(rnd, patient, found.whole)

    def boundary_step(self, rnd: Round, decision: Decision, placer: Placer | None = None,
                      tried: bool = False) -> list[int]:
        """Steps 1–3 of `gfs_opt.preempt.boundary` for the round's patient gangs (those that
        wait for window boundaries); returns them (none when the policy does not wait).
        ``tried``: as `boundary_pass`'s (step 1 is then skipped)."""
        patient = self.patient(rnd)
        if patient:
            boundary_pass(rnd, decision, patient, order=self.order,
                          placer=self.placer(rnd) if placer is None else placer,
                          rule=self.victim_rule,
                          queue=None if tried else self.patient_queue(rnd, patient),
                          tried=tried,
                          judge=lambda r, gangs: self.judge(r, gangs, decision))
            hopeless = self._hopeless
            patient = [j for j in patient if j not in hopeless]
        return patient

    def patient_queue(self, rnd: Round, patient: list[int]) -> PendingQueue:
        """``patient`` as a queue, kept from round to round and edited by the gangs that came
        and went: on a backlog most rounds' patient gangs are the last round's, give or take a
        few, and building the queue anew was the wait's largest cost."""
        queue, members = self._patient_queue
        now = set(patient)
        for j in members - now:
            queue.remove(j)
        for j in patient:
            if j not in members:
                queue.add(rnd.jobs[j])
        self._patient_queue = (queue, now)
        return queue

    def hp_step(self, rnd: Round, decision: Decision) -> None:
        if self.waits and self.evictable(rnd) is None:
            placer = self.placer(rnd)
            patient = self.boundary_step(rnd, decision, placer)
            waited = bool(patient) or bool(decision.requeue)
        else:
            patient, waited = [], False
        if waited:   # the others as PTS (the memo learns nothing from gangs not tried)
            hp_pass(still_running(rnd, decision), decision, order=self.order, placer=placer,
                    victims=self.victim_rule, waiting=set(patient),
                    memo=self.fit_memo("hp", preemptive=self.victim_rule is not None))
            return
        hp_pass(rnd, decision, order=self.order, placer=self.placer(rnd),
                victims=self.victim_rule, evictable=self.evictable(rnd),
                memo=self.fit_memo("hp", preemptive=self.victim_rule is not None))

    def lp_step(self, rnd: Round, decision: Decision, quotas: Quotas | None) -> dict[str, int]:
        return lp_pass(rnd, decision, order=self.order, placer=self.lp_placer(rnd, decision),
                       quotas=quotas, memo=self.fit_memo("lp", preemptive=False))

    def lp_placer(self, rnd: Round, decision: Decision) -> Placer:
        """The LP pass's placer: the round's, holding back the whole-node reserves in force
        (a refresh's new ones in ``decision``, else the round's). The LP memo's failures were
        seen under the reserves they were tried with, so new reserves forget them (they change
        only at a quota refresh)."""
        placer = self.placer(rnd)
        reserves = (decision.reserves if decision.reserves is not None else rnd.reserves) or None
        if self.waits:
            self._held = self.held_workers(rnd, self.patient(rnd))
            reserves = held_reserves(reserves, self._held, rnd.params.guarantee_classes)
        if reserves != getattr(self, "_lp_reserves", None):
            self._lp_reserves = None if reserves is None else dict(reserves)
            getattr(self, "_fit_memos", {}).pop("lp", None)
            self._lp_placer = None
        if reserves is None:
            return placer
        # the same placer under the same reserves (most passes): the same frozen placer
        kept = getattr(self, "_lp_placer", None)
        if kept is None or kept[0] is not placer:
            kept = self._lp_placer = (placer, replace(placer, reserves=self._lp_reserves))
        return kept[1]


def patient_shapes_fail(rnd: Round, queue: PendingQueue, pool: str, known: FailSizes | None,
                        patient: AbstractSet[int]) -> bool:
    """Every gang shape waiting in ``pool`` fails this round's HP step: it is known to fail
    (``known``), or all its gangs are ``patient`` — the boundary step tries them on free GPUs
    only — and they lack the room to start there (`lacks_room`: a necessary condition of every
    placement)."""
    st = rnd.state
    for (g, w, _d), entries in queue.shapes(pool).items():
        if known is not None and known.dominated(g, w):
            continue
        # a shape's gangs are listed by queue time and the patient ones are its newest: all
        # are patient when the oldest is
        if entries[0][1] in patient and lacks_room(st, pool, g, w, preemptive=False):
            continue
        return False
    return True
