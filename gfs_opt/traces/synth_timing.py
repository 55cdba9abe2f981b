"""Which request lands in which hour: big gangs go where the real trace submitted big demand.

Arrival counts per hour are the real ones (`synth_arrivals`), but a count burst is not a GPU
burst: the real hour with 633 submissions asked for 1,041 GPUs, while 633 requests drawn at
random can ask for 5,000 (a few 200-worker H800 gangs), and such collisions put the hourly
requested-GPU peak far above the real one (1.49). So the drawn requests (org, model, g, w travel
together) are dealt to the submission slots using the real per-hour submitted demand
(``hourly_summary.csv``): every gang of more than ``BIG`` GPUs, largest first, takes a slot in
the hour whose remaining demand fits it most tightly (best fit; the hour with the most remaining
demand if none is large enough), which spreads the giants over the real giant hours instead of
piling them into the single largest one. The many small requests then fill the remaining slots
at random, so every hour keeps exactly its real number of submissions.
"""

from __future__ import annotations

import bisect

import numpy as np

BIG = 8.0  # GPUs: gangs larger than one 8-GPU node


def deal_to_hours(slot_hour: np.ndarray, gw: np.ndarray, hour_demand: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """``order`` such that request ``order[k]`` goes to slot ``k``.

    ``slot_hour``: hour of each submission slot; ``gw``: GPUs of each request (as many as
    slots); ``hour_demand``: real GPUs submitted per hour (any scale).
    """
    n = slot_hour.size
    hours, free_slots = np.unique(slot_hour, return_counts=True)
    want = np.maximum(hour_demand[hours].astype(float), 0.0)
    big = np.flatnonzero(gw > BIG)
    if want.sum() > 0:
        want *= gw.sum() / want.sum()
    free = dict(zip(hours.tolist(), free_slots.tolist(), strict=True))
    # (remaining demand, tie-break, hour), kept sorted for best-fit look-ups
    holes = sorted(zip(want.tolist(), rng.random(hours.size).tolist(), hours.tolist(), strict=True))
    hour_of = np.full(n, -1, dtype=np.int64)
    for j in big[np.lexsort((rng.random(big.size), -gw[big]))].tolist():
        size = float(gw[j])
        k = bisect.bisect_left(holes, (size, -1.0, -1))
        left, tie, h = holes.pop(k if k < len(holes) else len(holes) - 1)
        hour_of[j] = h
        free[h] -= 1
        if free[h] > 0:
            bisect.insort(holes, (left - size, tie, h))
    # the rest fill the remaining slots at random
    rest = np.flatnonzero(hour_of < 0)
    remaining = np.repeat(np.array(list(free), dtype=np.int64), np.array(list(free.values())))
    hour_of[rest] = rng.permutation(remaining)
    # pair requests and slots hour by hour; within an hour in random order
    slots = np.lexsort((rng.random(n), slot_hour))
    requests = np.lexsort((rng.random(n), hour_of))
    order = np.empty(n, dtype=np.int64)
    order[slots] = requests
    return order
