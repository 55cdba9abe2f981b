"""Pending queues kept in PTS order, one sorted list per (pool, gang shape), and the queue-order
part of a policy (`QueueOrder`).

HP order is (−g, submit, id); LP order is (−g, w, submit, id); FIFO policies take (submit, id).
A shape is (g, w, guarantee class): the ``fail_size`` rule and the quota refuse whole shapes at a
time, so a pass walks the shapes' lists merged in policy order (`ShapeCursor`) and drops a shape
at its first refusal — a long queue costs one try per shape, not one per job. Each shape's first
key is also kept sorted per order (`_Heads`), so the merge takes a shape up only when it reaches
it: a pass that stops early, or passes over shapes a failure dominates, costs what it reaches.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from gfs_opt.model import Job, JobClass

#: (per-worker request g, workers w, guarantee class in hours)
Shape = tuple[int, int, float]
Entry = tuple[float, int]            # (submit, id), a shape list's sort key
#: (order-key prefix, shape, its entries, the entries of its re-queued jobs)
ShapeEntries = tuple[tuple, Shape, list[Entry], list[Entry]]
NONE: list[Entry] = []


class ShapeCursor:
    """Jobs of several shapes in one merged order; a dropped shape yields nothing more.

    Built from the sorted (first key, shape) of every waiting shape (`_Heads`) and the shapes'
    sorted entries: the order key of an entry is prefix + entry (prefix () for submit order,
    (w,) for LP's (w, submit, id) inside a size). A shape is taken up when the merged order
    reaches its first job, so a pass that stops early or drops what it meets touches only the
    shapes it reaches, not every shape of the pool; ``skip`` is asked of a shape when it is
    reached, and a skipped shape yields nothing. Iterating gives (job id, shape). `drop` stops
    the shape just returned; `defer` does the same but keeps its remaining jobs countable
    (`settle`): a pass uses it for a shape the quota refuses, whose jobs would each have been
    refused in turn.
    """

    __slots__ = ("_again", "_entries", "_h", "_heads", "_heap", "_key", "_last", "_lists",
                 "_pending", "_pos", "_prefix", "_skip")

    def __init__(self, heads: list[tuple[tuple, Shape]], lists: Mapping[Shape, list[Entry]],
                 again: Mapping[Shape, list[Entry]], prefix: Callable[[Shape], tuple],
                 skip: Callable[[Shape], bool] | None) -> None:
        self._entries: list[ShapeEntries] = []
        self._pos: list[int] = []
        self._heap: list[tuple[tuple, int]] = []   # only shapes already reached
        self._last = -1
        self._key: tuple = ()
        self._pending: dict[int, int] = {}   # deferred shape → index of its next job
        self._heads, self._h = heads, 0
        self._lists, self._again, self._prefix, self._skip = lists, again, prefix, skip

    def __iter__(self) -> Iterator[tuple[int, Shape]]:
        return self

    def __next__(self) -> tuple[int, Shape]:
        heap = self._heap
        i = self._last
        if i >= 0:
            prefix, _s, lst, _again = self._entries[i]
            p = self._pos[i] + 1
            self._pos[i] = p
            if p < len(lst):
                heapq.heappush(heap, (prefix + lst[p], i))
        heads, h, skip = self._heads, self._h, self._skip
        n = len(heads)
        if skip is not None:
            while h < n and skip(heads[h][1]):
                h += 1
        if h < n and (not heap or heads[h][0] < heap[0][0]):
            key, shape = heads[h]
            self._h = h + 1
            i = len(self._entries)
            self._entries.append((self._prefix(shape), shape, self._lists[shape],
                                  self._again.get(shape, NONE)))
            self._pos.append(0)
        else:
            self._h = h
            if not heap:
                self._last = -1
                raise StopIteration
            key, i = heapq.heappop(heap)
        self._last = i
        self._key = key
        return key[-1], self._entries[i][1]

    @property
    def key(self) -> tuple:
        """The order key of the job just returned (prefix + (submit, id))."""
        return self._key

    def drop(self) -> None:
        """Yield no more jobs of the shape just returned."""
        self._last = -1

    def defer(self) -> None:
        """Like `drop`, but the shape's later jobs stay countable by `settle`."""
        i = self._last
        self._pending[i] = self._pos[i] + 1
        self._last = -1

    def defer_until(self, stops: Callable[[int], bool],
                    stops_since: Callable[[float], bool]) -> None:
        """Like `defer`, but the shape's first later job for which ``stops(job id)`` holds comes
        back in the merged order (the jobs before it stay countable by `settle`). A pass under
        head-of-line blocking uses it for a shape the quota refuses: the refused jobs that no
        longer hold the line are passed over, the next one that does must still stop the pass.

        ``stops_since(t)`` is ``stops`` of a job queued at ``t`` and must not decrease with t
        (a later queue time means a shorter wait). A job never re-queued was queued at its
        submission, so among those the first that stops is found by bisection; only re-queued
        jobs before it (their wait restarted) are asked one by one.
        """
        i = self._last
        prefix, _s, lst, again = self._entries[i]
        self.defer()
        lo, hi = self._pending[i], len(lst)
        start = lo
        while lo < hi:
            mid = (lo + hi) // 2
            if stops_since(lst[mid][0]):
                hi = mid
            else:
                lo = mid + 1
        k = lo
        if again and start < len(lst):
            end = lst[k] if k < len(lst) else None
            for j in range(bisect_left(again, lst[start]), len(again)):
                e = again[j]
                if end is not None and e >= end:
                    break
                if stops(e[1]):
                    k = bisect_left(lst, e)
                    break
        if k < len(lst):
            self._pos[i] = k
            heapq.heappush(self._heap, (prefix + lst[k], i))

    def deferred(self) -> list[Shape]:
        return [self._entries[i][1] for i in self._pending]

    def settle(self, shapes: Iterable[Shape] | None = None, at_end: bool = False) -> int:
        """Count the deferred jobs the merged order reached: those before the job just returned
        (or all of them with ``at_end``), for the given deferred shapes (None: all); they are
        forgotten afterwards."""
        wanted = None if shapes is None else set(shapes)
        n = 0
        for i in list(self._pending):
            prefix, shape, lst, _again = self._entries[i]
            if wanted is not None and shape not in wanted:
                continue
            start = self._pending.pop(i)
            if at_end:
                n += len(lst) - start
                continue
            head = self._key[:len(prefix)]
            if prefix < head:
                end = len(lst)
            elif prefix > head:
                end = start
            else:
                end = max(start, bisect_left(lst, self._key[len(prefix):]))
            n += end - start
        return n


def _no_prefix(_shape: Shape) -> tuple:
    return ()


def _w_prefix(shape: Shape) -> tuple:
    return (shape[1],)


class _Heads:
    """Per pool and group, the (first key, shape) of every waiting shape, sorted: what a
    `ShapeCursor` walks. Groups: one for submit order (key = (submit, id)), or one per size g
    for PTS's order (key = prefix + (submit, id), prefix (w,) for LP)."""

    __slots__ = ("by_pool", "prefix", "sized")

    def __init__(self, sized: bool, prefix: Callable[[Shape], tuple]) -> None:
        self.sized = sized
        self.prefix = prefix
        self.by_pool: dict[str, dict[int, list[tuple[tuple, Shape]]]] = {}

    def build(self, shapes: Mapping[str, Mapping[Shape, list[Entry]]]) -> None:
        for pool, lists in shapes.items():
            for shape, lst in lists.items():
                self.moved(pool, shape, None, lst[0])

    def moved(self, pool: str, shape: Shape, old: Entry | None, new: Entry | None) -> None:
        """The first entry of ``shape`` went from ``old`` to ``new`` (None: no entry)."""
        groups = self.by_pool.get(pool)
        if groups is None:
            groups = self.by_pool[pool] = {}
        group = shape[0] if self.sized else 0
        heads = groups.get(group)
        if heads is None:
            heads = groups[group] = []
        prefix = self.prefix(shape)
        if old is None:
            insort(heads, (prefix + new, shape))  # type: ignore[operator]
            return
        i = bisect_left(heads, (prefix + old, shape))
        if new is None:
            del heads[i]
            if not heads:
                del groups[group]
            return
        item = (prefix + new, shape)
        # a shape's next job usually keeps its place among the first keys: no shift then
        if (i + 1 == len(heads) or item < heads[i + 1]) and (i == 0 or heads[i - 1] < item):
            heads[i] = item
            return
        del heads[i]
        insort(heads, item)


class PendingQueue:
    """Ordered pending jobs of one class; iterable over ids like a list.

    Jobs queued again after their submission (evicted or re-queued) are also listed apart, per
    shape: their wait restarted, which `ShapeCursor.defer_until` must know. The first key of
    every shape is kept sorted per order asked for (`_Heads`, from the first `cursors` call on):
    a pass's cursors then take shapes up as they are reached.
    """

    def __init__(self, cls: JobClass) -> None:
        self.cls = cls
        self._shapes: dict[str, dict[Shape, list[Entry]]] = {}
        self._again: dict[str, dict[Shape, list[Entry]]] = {}
        self._sizes: dict[str, dict[int, int]] = {}          # pool → g → jobs waiting
        self._members: dict[int, tuple[str, Shape, Entry, bool]] = {}
        self._heads: dict[bool, _Heads] = {}   # by ``fifo``: the orders asked for so far
        self._versions: dict[str, int] = {}   # pool → changes of its set of shapes
        # pool → [its `edits` count at the last removal, the ids queued since, in order]
        self._added: dict[str, list] = {}

    @classmethod
    def from_ids(cls_, jobs: Mapping[int, Job], ids: Iterable[int], cls: JobClass,
                 queued_since: Mapping[int, float] | None = None) -> PendingQueue:
        q = cls_(cls)
        for jid in ids:
            q.add(jobs[jid], None if queued_since is None else queued_since.get(jid))
        return q

    def add(self, job: Job, since: float | None = None) -> None:
        """Queue ``job``; ``since``: when it was (re)queued (default: at its submission)."""
        if job.id in self._members:
            return
        log = self._added.get(job.pool)
        if log is None:
            log = self._added[job.pool] = [0, []]
        log[1].append(job.id)
        shape = (job.g, job.workers, job.guarantee_h)
        entry = (job.submit, job.id)
        lst = self._shapes.setdefault(job.pool, {}).setdefault(shape, [])
        if not lst or lst[-1] < entry:
            lst.append(entry)
            first = len(lst) == 1
        else:
            i = bisect_left(lst, entry)
            lst.insert(i, entry)
            first = i == 0
        if first:
            if len(lst) == 1:
                self._versions[job.pool] = self._versions.get(job.pool, 0) + 1
            for heads in self._heads.values():
                heads.moved(job.pool, shape, lst[1] if len(lst) > 1 else None, entry)
        again = since is not None and since != job.submit
        if again:
            insort(self._again.setdefault(job.pool, {}).setdefault(shape, []), entry)
        sizes = self._sizes.setdefault(job.pool, {})
        sizes[job.g] = sizes.get(job.g, 0) + 1
        self._members[job.id] = (job.pool, shape, entry, again)

    def remove(self, job_id: int) -> None:
        pool, shape, entry, again = self._members.pop(job_id)
        log = self._added[pool]
        log[0] += len(log[1]) + 1
        log[1].clear()
        shapes = self._shapes[pool]
        lst = shapes[shape]
        i = bisect_left(lst, entry)
        del lst[i]
        if i == 0:
            for heads in self._heads.values():
                heads.moved(pool, shape, entry, lst[0] if lst else None)
        if not lst:
            del shapes[shape]
            self._versions[pool] += 1
        if again:
            requeued = self._again[pool]
            lst = requeued[shape]
            del lst[bisect_left(lst, entry)]
            if not lst:
                del requeued[shape]
        sizes = self._sizes[pool]
        g = shape[0]
        if sizes[g] == 1:
            del sizes[g]
        else:
            sizes[g] -= 1

    def pools(self) -> list[str]:
        return [p for p, s in self._shapes.items() if s]

    def shapes(self, pool: str) -> Mapping[Shape, list[Entry]]:
        """The pool's shapes and their (submit, id) lists (read-only)."""
        return self._shapes.get(pool, {})

    def shape_version(self, pool: str) -> int:
        """A count that changes whenever a shape of ``pool`` appears or goes (its jobs come and
        go otherwise): what an answer about the pool's set of shapes can be remembered by."""
        return self._versions.get(pool, 0)

    def edits(self, pool: str) -> int:
        """How many times a job of ``pool`` was queued or left the queue so far."""
        log = self._added.get(pool)
        return 0 if log is None else log[0] + len(log[1])

    def added_since(self, pool: str, edits: int) -> list[int] | None:
        """The ids queued in ``pool`` since its `edits` count was ``edits``, in order; None if a
        job left the pool's queue since."""
        log = self._added.get(pool)
        if log is None:
            return []
        return None if edits < log[0] else log[1][edits - log[0]:]

    def order_key(self, job: Job, fifo: bool) -> tuple:
        """The key of ``job`` in the order ``fifo`` selects (what `ShapeCursor.key` returns)."""
        prefix = self._index(fifo).prefix((job.g, job.workers, job.guarantee_h))
        return (*prefix, job.submit, job.id)

    def cursors(self, pool: str, fifo: bool,
                skip: Callable[[Shape], bool] | None = None) -> list[ShapeCursor]:
        """The pool's jobs in policy order: one cursor in submit order (``fifo``), else one per
        size g, largest first, each in (submit, id) order for HP and (w, submit, id) for LP.
        Shapes for which ``skip`` holds are left out. The queue must not change while a cursor
        is in use (the engine mutates after a pass)."""
        shapes = self._shapes.get(pool)
        if not shapes:
            return []
        index = self._index(fifo)
        groups = index.by_pool.get(pool)
        if not groups:
            return []
        again = self._again.get(pool, {})
        return [ShapeCursor(groups[g], shapes, again, index.prefix, skip)
                for g in sorted(groups, reverse=True)]

    def _index(self, fifo: bool) -> _Heads:
        """The sorted first keys for one order, built when first asked for."""
        index = self._heads.get(fifo)
        if index is None:
            lp = self.cls is JobClass.LP and not fifo
            index = self._heads[fifo] = _Heads(sized=not fifo,
                                               prefix=_w_prefix if lp else _no_prefix)
            index.build(self._shapes)
        return index

    def buckets(self, pool: str) -> list[tuple[int, Iterator[int]]]:
        """(g, lazy job ids in order) for one pool, largest g first."""
        sizes = sorted(self._sizes.get(pool, {}), reverse=True)
        return [(g, _ids(c)) for g, c in zip(sizes, self.cursors(pool, fifo=False), strict=True)]

    def fifo_ids(self, pool: str) -> Iterator[int]:
        """Job ids of one pool in submit order (lazy; same no-mutation rule as `cursors`)."""
        for c in self.cursors(pool, fifo=True):
            yield from _ids(c)

    def min_g(self, pool: str) -> int:
        """Smallest per-worker request waiting in a pool."""
        sizes = self._sizes.get(pool)
        return min(sizes) if sizes else 0

    def pool_ids(self, pool: str) -> Iterator[int]:
        for _g, ids in self.buckets(pool):
            yield from ids

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[int]:
        for pool in sorted(self._shapes):
            yield from self.pool_ids(pool)


def _ids(cursor: ShapeCursor) -> Iterator[int]:
    for jid, _shape in cursor:
        yield jid


def as_queue(pending: Iterable[int], jobs: Mapping[int, Job], cls: JobClass,
             queued_since: Mapping[int, float] | None = None) -> PendingQueue:
    """The engine hands policies a `PendingQueue`; instance rounds carry plain id lists."""
    if isinstance(pending, PendingQueue):
        return pending
    return PendingQueue.from_ids(jobs, pending, cls, queued_since)


@dataclass(frozen=True, slots=True)
class QueueOrder:
    """A policy's queue part: the order a pass walks a pool's pending jobs, and what a job that
    cannot start (no room, or the quota refuses it) does to the jobs behind it.

    ``fifo``: submit order (else PTS's size classes, largest first). ``head_of_line``: a blocked
    job holds the line until it has waited (since its last (re)queue) longer than
    ``hol_timeout_s``; after that later jobs may pass it. ``lp_age_s`` (LP pass, PTS order
    only): an LP job submitted longer than this ago goes ahead of the rest, in submit order —
    largest-first alone hands every bit of room to the largest gang that fits, so on a backlog
    the one-GPU jobs and the gangs too large for most room wait without bound. ``hp_fifo``: the
    HP pass walks in submit order whatever ``fifo`` says (the LP pass keeps its order).
    """

    fifo: bool = False
    hp_fifo: bool = False
    head_of_line: bool = False
    hol_timeout_s: float = math.inf
    lp_age_s: float = math.inf

    @property
    def hp_in_submit_order(self) -> bool:
        """Whether the HP pass walks its queue in submit order."""
        return self.fifo or self.hp_fifo

    @property
    def ages(self) -> bool:
        """Whether the LP pass takes long-waiting jobs first (`lp_age_s`)."""
        return not self.fifo and self.lp_age_s < math.inf

    def holds_line(self, now: float, queued_since: float) -> bool:
        """Whether a blocked job queued at ``queued_since`` still blocks the jobs behind it."""
        return self.head_of_line and now - queued_since <= self.hol_timeout_s


#: PTS's order (GFS): sizes largest first, HP by (submit, id), LP by (w, submit, id); no blocking
PTS_ORDER = QueueOrder()
#: submit order, a blocked job blocks nobody (Lyra, FGD, Chronus)
FIFO_ORDER = QueueOrder(fifo=True)
