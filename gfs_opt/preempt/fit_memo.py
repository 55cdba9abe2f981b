"""Which gang shapes are known not to fit: PTS's ``fail_size`` rule within one pass (`FailSizes`)
and, across passes, until GPUs of the pool are released (`FitMemo`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gfs_opt.model import MILLI, ClusterState, Decision, Round, gpus_per_worker

if TYPE_CHECKING:
    from gfs_opt.pending import PendingQueue


class FailSizes:
    """PTS's ``fail_size`` rule, generalised to gangs.

    A gang of w workers × g that failed proves that every gang with g' ≥ g and w' ≥ w fails too
    (placement only gets harder), and nothing more. The paper's rule keys on g alone, which —
    with gangs placed whole — lets one huge gang that can never fit starve every smaller job of
    its size (the authors' simulator placed gangs partially and never saw this).
    """

    __slots__ = ("_seen", "front")

    def __init__(self, front: list[tuple[int, int]] | None = None) -> None:
        self.front: list[tuple[int, int]] = list(front) if front else []
        # the last `covers_queue` answer: (the pool's shape map, its version, the answer)
        self._seen: tuple[object, int, bool] | None = None

    def dominated(self, g: int, w: int) -> bool:
        for gf, wf in self.front:  # noqa: SIM110 (a plain loop: hot, and any() is slower)
            if g >= gf and w >= wf:
                return True
        return False

    def add(self, g: int, w: int) -> None:
        self.front = [(gf, wf) for gf, wf in self.front if not (gf >= g and wf >= w)]
        self.front.append((g, w))
        self._seen = None

    def covers(self, shapes: Iterable[tuple[int, int, float]]) -> bool:
        """Every (g, w, …) shape is dominated."""
        front = self.front
        # `dominated` inlined: a pass asks this of every waiting shape of a backlogged pool
        for s in shapes:
            g, w = s[0], s[1]
            for gf, wf in front:
                if g >= gf and w >= wf:
                    break
            else:
                return False
        return True

    def covers_queue(self, queue: PendingQueue, pool: str) -> bool:
        """`covers` of the shapes waiting in ``pool`` of ``queue``. The answer is remembered
        until that set of shapes changes (`PendingQueue.shape_version`): a backlogged pool is
        asked it at most job events, and most of them leave its shapes as they were."""
        shapes = queue.shapes(pool)
        version = queue.shape_version(pool)
        seen = self._seen
        if seen is not None and seen[0] is shapes and seen[1] == version:
            return seen[2]
        answer = self.covers(shapes)
        self._seen = (shapes, version, answer)
        return answer

    def skips(self, shape: tuple[int, int, float]) -> bool:
        """`dominated` for a queue shape (a `PendingQueue.cursors` filter)."""
        g, w = shape[0], shape[1]
        for gf, wf in self.front:  # noqa: SIM110 (`dominated` inlined: a cursor asks it per shape)
            if g >= gf and w >= wf:
                return True
        return False

    def blocks(self, g: int) -> bool:
        """Every job with per-worker request ≥ g is dominated (a single worker of ≤ g failed)."""
        return any(gf <= g and wf <= 1 for gf, wf in self.front)


@dataclass(slots=True)
class IdlePass:
    """A pass of one pool that started nothing (`FitMemo.idle`): what it depended on besides
    the fits — the pool's running LP milli, the quotas, the queue as of its `edits` count —
    what it counted, and the (g, w, order key) of each gang that failed, in walk order."""

    count: int
    lp_running: int
    quotas: dict | None
    edits: int
    counted: int
    failed: list[tuple[int, int, tuple]]
    whole: int = -1   # the pool's whole free nodes then, where a reserve holds some back


class FitMemo:
    """Gang shapes known not to fit in a pool, carried from one pass to the next.

    Whether a gang fits is a count of worker slots (`worker_slots`; the greedy placements fill
    one slot per worker, so they succeed exactly when enough exist): without preemption the count
    grows only when GPUs of the pool are released, and when any running LP job may be evicted,
    only when HP GPUs are released. A shape that failed therefore keeps failing until the engine
    reports such a release in the pool (``Round.released`` / ``Round.hp_released``) or a pass of
    the same round released victims there. A pass uses the memo only to skip work whose outcome
    it knows: the tries of shapes that will fail, the walk over them where no job of theirs can
    stop the pass, and a pool where every waiting shape will fail; decisions do not change.
    Built-in placement functions only: a worker rule that can fail with free slots
    left would break the premise. A round without release counts (a standalone instance) never
    uses the memo.

    After a release the shapes are not all forgotten: those that still lack the room to fit at
    all (`lacks_room`, a count of slots on the live state) stay known. In a pool with a standing
    backlog most releases are taken by the head of the queue, and what failed before still
    cannot fit; the pass then skips the pool or the tries as it does between releases.

    A pass that started nothing is kept as well (`keep_idle`): until a release in the pool
    every gang it tried fails again, so the LP pass can tell what a later pass over the same
    queue plus some arrivals does without walking it (`gfs_opt.quota.admission`).
    """

    def __init__(self, preemptive: bool) -> None:
        self.preemptive = preemptive
        # per pool: (release count it holds for, the shapes known to fail, the pool's whole free
        # nodes then or −1: `_whole`); a pass only reads the FailSizes it is handed (`keep`
        # builds a new one), so it is handed out uncopied
        self._known: dict[str, tuple[int, FailSizes, int]] = {}
        #: per pool, its last pass that started nothing (`idle` says whether it still holds)
        self.idle_passes: dict[str, IdlePass] = {}

    def _count(self, rnd: Round, pool: str) -> int | None:
        counts = rnd.hp_released if self.preemptive else rnd.released
        return None if counts is None else counts.get(pool, 0)

    def _whole(self, rnd: Round, pool: str) -> int:
        """The pool's whole free nodes where the round holds some back from LP (the shape
        reserve, `Placer.reserves`), else −1. Under a reserve an LP fit can appear without a
        release: an HP worker that breaks a held-back node leaves the rest of it to LP. The
        count only falls, so a known failure holds while it is unchanged."""
        if self.preemptive or not rnd.reserves or not any(p == pool for p, _d in rnd.reserves):
            return -1
        p = rnd.state.pool_index.get(pool)
        return -1 if p is None else rnd.state.whole_free_nodes(p)

    def known(self, rnd: Round, pool: str, decision: Decision) -> FailSizes | None:
        """Shapes known to fail in ``pool`` now (None: nothing known)."""
        entry = self._known.get(pool)
        count = self._count(rnd, pool)
        if entry is None or count is None:
            return None
        whole = self._whole(rnd, pool)
        current = entry[0] == count and entry[2] == whole
        if current and (self.preemptive or not released_in(rnd, pool, decision)):
            return entry[1]
        # GPUs came free since: what still has no room stays known (room only shrinks until
        # the next release, and a shape without room fails under any placement rule)
        st, preemptive = rnd.state, self.preemptive
        still = [(g, w) for g, w in entry[1].front if lacks_room(st, pool, g, w, preemptive)]
        known = FailSizes(still) if still else None
        if not current:   # kept for the passes until the next release, which may skip the pool
            if known is None:
                del self._known[pool]
            else:
                self._known[pool] = (count, known, whole)
        return known

    def idle(self, rnd: Round, pool: str, decision: Decision) -> IdlePass | None:
        """The pool's last pass that started nothing, if no GPUs of the pool came free since
        (nor in this round): every gang it tried would fail again."""
        last = self.idle_passes.get(pool)
        if (last is None or last.count != self._count(rnd, pool)
                or last.whole != self._whole(rnd, pool)):
            return None
        return None if released_in(rnd, pool, decision) else last

    def keep_idle(self, rnd: Round, pool: str, lp_running: int,
                  quotas: Mapping[tuple[str, float], int] | None, edits: int, counted: int,
                  failed: list[tuple[int, int, tuple]]) -> None:
        """Remember a pass of ``pool`` that started nothing (`forget_idle` after one that did)."""
        count = self._count(rnd, pool)
        if count is not None:
            kept = None if quotas is None else dict(quotas)
            self.idle_passes[pool] = IdlePass(count, lp_running, kept, edits, counted, failed,
                                              self._whole(rnd, pool))

    def forget_idle(self, pool: str) -> None:
        """A pass of ``pool`` started a job: its last idle pass tells nothing any more."""
        self.idle_passes.pop(pool, None)

    def keep(self, rnd: Round, pool: str, known: FailSizes | None, fails: FailSizes) -> None:
        """Remember what this pass saw fail (with what was known before it)."""
        count = self._count(rnd, pool)
        if count is None:
            return
        merged = FailSizes(known.front if known is not None else None)
        for g, w in fails.front:
            if not merged.dominated(g, w):
                merged.add(g, w)
        self._known[pool] = (count, merged, self._whole(rnd, pool))


def lacks_room(state: ClusterState, pool: str, g: int, w: int, preemptive: bool) -> bool:
    """Whether ``w`` workers of ``g`` milli cannot fit side by side in ``pool`` now, even by
    evicting every LP job when ``preemptive`` (then only GPUs with HP work count as taken).

    A necessary condition of every placement (a worker takes a slot), so a shape it holds for
    fails whatever the placement or victim rule; so does every shape it dominates (larger g and
    w never have more slots).
    """
    return slots(state, state.pool_index[pool], g, preemptive) < w


def slots(state: ClusterState, p: int, g: int, preemptive: bool) -> int:
    """Workers of ``g`` milli that fit side by side in pool ``p`` (by index) now, or once every
    LP job is evicted when ``preemptive``: what `lacks_room` compares a gang's size with."""
    if g >= MILLI:
        k = gpus_per_worker(g)
        return state.nonhp_slots(p, k) if preemptive else state.whole_slots(p, k)
    return state.hp_shared_slots(p, g) if preemptive else state.shared_slots(p, g)


def released_in(rnd: Round, pool: str, decision: Decision) -> bool:
    """Whether this round already freed GPUs of ``pool`` (victims or re-queues)."""
    jobs = rnd.jobs
    return any(jobs[j].pool == pool for j in decision.victims) or any(
        jobs[j].pool == pool for j in decision.requeue)
