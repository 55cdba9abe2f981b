"""HP delay by cause: the policy's choice apart from the capacity no policy had.

An HP gang waits in the queue for one of two reasons. Either the pool could have hosted it by
evicting LP work — its free GPUs plus those LP jobs hold had room for the gang in some placement
(the slots every placement needs, `gfs_opt.preempt.fit_memo.slots` with preemption; HP work is
never moved) — and the policy chose to let it wait (to keep a window, to wait for a boundary, by
its order); or the pool lacked that room, and no policy could have started it. `HPDelay` splits
each gang's wait into those two parts: ``choice`` and ``capacity`` (they add up to its queueing
time).

Each gang is judged on its own: two gangs that could each start by eviction, but not both, both
count as delayed by choice while they wait (the policy chose which goes first). Whether a gang
of a given shape has room changes only when its pool's state does, so the tracker keeps, per
pool and shape (g, w) with gangs waiting, whether it has room and the time it has had room so
far, updated for the pools that changed at each instant; a gang's choice delay is that time
between its queueing and its start (an HP job is queued once and never evicted).

Recorded beside the results, never acted on: it changes no replay.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from gfs_opt.model import ClusterState, Job
from gfs_opt.preempt.fit_memo import slots

#: a shape's key: (pool index, milli per worker, workers)
_Key = tuple[int, int, int]
#: a choice delay above this (s) counts the gang as delayed by choice (float sums round)
_SOME = 1e-6


class HPDelay:
    """Per HP gang, its wait split into the policy's choice and the capacity it lacked (module
    doc). The engine calls `enqueue`, `start` and, once per instant after the policy's pass,
    `refresh` with the pools whose state or queue changed."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        # per shape with gangs waiting: [has room (0/1), since, time with room up to since, gangs]
        self._shapes: dict[_Key, list[float]] = {}
        self._by_pool: dict[int, set[_Key]] = {}
        # per waiting gang: its shape, when it was queued, its shape's time with room then
        self._waiting: dict[int, tuple[_Key, float, float]] = {}
        #: per gang that waited (started or not): (choice s, capacity s)
        self.delays: dict[int, tuple[float, float]] = {}

    def _room_time(self, key: _Key, t: float) -> float:
        room, since, acc, _n = self._shapes[key]
        return acc + (t - since if room else 0.0)

    def enqueue(self, job: Job, t: float) -> None:
        p = self.state.pool_index.get(job.pool)
        if p is None:   # a pool without nodes: never placeable, all capacity
            return
        key = (p, job.g, job.workers)
        entry = self._shapes.get(key)
        if entry is None:
            # room is judged at this instant's `refresh` (the pool is marked changed)
            entry = self._shapes[key] = [0.0, t, 0.0, 0.0]
            self._by_pool.setdefault(p, set()).add(key)
        entry[3] += 1
        self._waiting[job.id] = (key, t, self._room_time(key, t))

    def start(self, job: Job, t: float) -> None:
        got = self._waiting.pop(job.id, None)
        if got is None:
            return
        key, t0, acc0 = got
        choice = self._room_time(key, t) - acc0
        self.delays[job.id] = (choice, max(0.0, t - t0 - choice))
        entry = self._shapes[key]
        entry[3] -= 1
        if entry[3] <= 0:
            del self._shapes[key]
            self._by_pool[key[0]].discard(key)

    def refresh(self, t: float, pools: Iterable[int]) -> None:
        """The shapes of ``pools`` judged on the state at ``t`` (after the instant's pass)."""
        st = self.state
        for p in pools:
            keys = self._by_pool.get(p)
            if not keys:
                continue
            room_by_g: dict[int, int] = {}
            for key in keys:
                entry = self._shapes[key]
                _p, g, w = key
                n = room_by_g.get(g)
                if n is None:
                    n = room_by_g[g] = slots(st, p, g, True)
                room = 1.0 if n >= w else 0.0
                if room != entry[0]:
                    entry[2] = self._room_time(key, t)
                    entry[0], entry[1] = room, t

    def finish(self, t: float) -> None:
        """The gangs still waiting at the end count their wait up to ``t``."""
        for jid, (key, t0, acc0) in list(self._waiting.items()):
            choice = self._room_time(key, t) - acc0
            self.delays[jid] = (choice, max(0.0, t - t0 - choice))


def _stats(x: np.ndarray) -> tuple[float, float]:
    if not len(x):
        return math.nan, math.nan
    return float(x.mean()), float(np.quantile(x, 0.99))


def delay_summary(choice: Iterable[float], capacity: Iterable[float]) -> dict[str, float]:
    """The summary keys of HP delay by cause over the scored HP gangs (one value each)."""
    c = np.asarray(list(choice), dtype=float)
    k = np.asarray(list(capacity), dtype=float)
    c_mean, c_p99 = _stats(c)
    k_mean, k_p99 = _stats(k)
    return {"hp_delay_choice_mean": c_mean, "hp_delay_choice_p99": c_p99,
            "hp_delay_capacity_mean": k_mean, "hp_delay_capacity_p99": k_p99,
            "hp_share_delayed_by_choice": float((c > _SOME).mean()) if len(c) else math.nan}


#: the summary keys `delay_summary` adds (recorded beside the results, never acted on)
HP_DELAY_KEYS = ("hp_delay_choice_mean", "hp_delay_choice_p99", "hp_delay_capacity_mean",
                 "hp_delay_capacity_p99", "hp_share_delayed_by_choice")
