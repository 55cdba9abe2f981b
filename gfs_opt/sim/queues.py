"""Pending queues kept in PTS order, bucketed per (pool, per-worker request g).

HP order is (−g, submit, id); LP order is (−g, w, submit, id). Buckets let a pass apply the
``fail_size`` rule by skipping a whole bucket, so a long queue costs one failed try per size.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping

from gfs_opt.model import Job, JobClass


class PendingQueue:
    """Ordered pending jobs of one class; iterable over ids like a list."""

    def __init__(self, cls: JobClass) -> None:
        self.cls = cls
        self._buckets: dict[str, dict[int, list[tuple]]] = {}
        # per (pool, g): (submit, id) in submit order, for FIFO policies
        self._fifo: dict[str, dict[int, list[tuple[float, int]]]] = {}
        self._members: dict[int, tuple[str, int, tuple]] = {}

    @classmethod
    def from_ids(cls_, jobs: Mapping[int, Job], ids: Iterable[int], cls: JobClass) -> PendingQueue:
        q = cls_(cls)
        for jid in ids:
            q.add(jobs[jid])
        return q

    def _key(self, job: Job) -> tuple:
        if self.cls is JobClass.HP:
            return (job.submit, job.id)
        return (job.workers, job.submit, job.id)

    def add(self, job: Job) -> None:
        if job.id in self._members:
            return
        key = self._key(job)
        insort(self._buckets.setdefault(job.pool, {}).setdefault(job.g, []), key)
        insort(self._fifo.setdefault(job.pool, {}).setdefault(job.g, []), (job.submit, job.id))
        self._members[job.id] = (job.pool, job.g, key)

    def remove(self, job_id: int) -> None:
        pool, g, key = self._members.pop(job_id)
        bucket = self._buckets[pool][g]
        del bucket[bisect_left(bucket, key)]
        if not bucket:
            del self._buckets[pool][g]
        fifo = self._fifo[pool][g]
        submit = key[-2]
        del fifo[bisect_left(fifo, (submit, job_id))]
        if not fifo:
            del self._fifo[pool][g]

    def pools(self) -> list[str]:
        return [p for p, b in self._buckets.items() if b]

    def buckets(self, pool: str) -> list[tuple[int, Iterator[int]]]:
        """(g, lazy job ids in order) for one pool, largest g first.

        Lazy so that a pass which stops at a bucket's first failure costs O(1) per bucket;
        the queue must not change while a pass iterates it (the engine mutates after).
        """
        b = self._buckets.get(pool, {})
        return [(g, (k[-1] for k in b[g])) for g in sorted(b, reverse=True)]

    def fifo_ids(self, pool: str, skip_size: Callable[[int], bool] | None = None
                 ) -> Iterator[int]:
        """Job ids of one pool in submit order (lazy; same no-mutation rule as `buckets`).

        ``skip_size(g)`` is asked before each job; once it says True for a size, the rest of that
        size is dropped, so a backlog of a size that cannot start costs nothing per pass.
        """
        sizes = self._fifo.get(pool, {})
        heads = [(lst[0][0], lst[0][1], g, 0) for g, lst in sizes.items() if lst]
        heapq.heapify(heads)
        while heads:
            _s, jid, g, i = heapq.heappop(heads)
            if skip_size is not None and skip_size(g):
                continue
            yield jid
            lst = sizes[g]
            if i + 1 < len(lst):
                heapq.heappush(heads, (lst[i + 1][0], lst[i + 1][1], g, i + 1))

    def min_g(self, pool: str) -> int:
        """Smallest per-worker request waiting in a pool (a pass can stop once that failed)."""
        b = self._buckets.get(pool)
        return min(b) if b else 0

    def pool_ids(self, pool: str) -> Iterator[int]:
        for _g, ids in self.buckets(pool):
            yield from ids

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[int]:
        for pool in sorted(self._buckets):
            yield from self.pool_ids(pool)


def as_queue(pending: Iterable[int], jobs: Mapping[int, Job], cls: JobClass) -> PendingQueue:
    """The engine hands policies a `PendingQueue`; instance rounds carry plain id lists."""
    if isinstance(pending, PendingQueue):
        return pending
    return PendingQueue.from_ids(jobs, pending, cls)
