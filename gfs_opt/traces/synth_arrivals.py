"""Arrival times and job classes of the synthetic trace.

The arrival intensity is the real one: each hour keeps the real number of submissions of that
hour (binomially thinned when ``scale < 1``), which carries the real burstiness (hourly Fano
factor ≈ 90), the diurnal and weekly cycles and the monthly profile; a Poisson process would match
none of them. Inside an hour, jobs fall into twelve 5-minute slots with Gamma(4)-distributed
weights (a Cox process), which reproduces the real inter-arrival quantiles (p50 16 s, p99 252 s)
better than uniform times (p99 ≈ 228 s). Each day then gets the real number of Spot jobs of that
day (hypergeometric under thinning), so Spot stays almost absent in March as in the real trace.
"""

from __future__ import annotations

import numpy as np

HOUR = 3600
DAY = 86400
SLOTS_PER_HOUR = 12
SLOT_SHAPE = 4.0


def regular_hour_counts(hourly_jobs: np.ndarray, residents: int, scale: float,
                        rng: np.random.Generator) -> np.ndarray:
    """Non-resident submissions per hour; the real residents (submit 0) are taken out of hour 0."""
    counts = hourly_jobs.astype(np.int64).copy()
    counts[0] = max(0, counts[0] - residents)
    if scale >= 1.0:
        return counts
    return rng.binomial(counts, scale)


def submit_times(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sorted integer submit times (s) for ``counts[h]`` jobs in each hour ``h`` (never 0)."""
    weights = rng.gamma(SLOT_SHAPE, 1.0, size=(len(counts), SLOTS_PER_HOUR))
    weights /= weights.sum(axis=1, keepdims=True)
    per_slot = rng.multinomial(counts, weights)
    slot_index = np.repeat(np.arange(per_slot.size), per_slot.ravel())
    slot_len = HOUR // SLOTS_PER_HOUR
    t = slot_index * slot_len + np.floor(rng.uniform(0, slot_len, slot_index.size)).astype(np.int64)
    # submit 0 marks a resident job in the Alibaba schema, so regular jobs start at 1 s
    return np.sort(np.maximum(t, 1))


def spot_mask(submit: np.ndarray, daily_hp: np.ndarray, daily_spot: np.ndarray, residents: int,
              rng: np.random.Generator) -> np.ndarray:
    """True for the jobs that are Spot: per day, the real Spot count among that day's jobs.

    With ``scale < 1`` each day's kept jobs are a random subset of the real ones, so the number of
    Spot jobs among them is hypergeometric; at full scale it is exactly the real daily count.
    """
    day = (submit // DAY).astype(np.int64)
    ndays = len(daily_hp)
    kept = np.bincount(day, minlength=ndays)[:ndays]
    hp_regular = daily_hp.astype(np.int64).copy()
    hp_regular[0] = max(0, hp_regular[0] - residents)
    n_spot = np.zeros(ndays, dtype=np.int64)
    has = kept > 0
    n_spot[has] = rng.hypergeometric(daily_spot[has], hp_regular[has], kept[has])
    # rank the jobs of each day in random order; the first n_spot[day] of them are Spot
    order = np.lexsort((rng.random(submit.size), day))
    day_sorted = day[order]
    first_of_day = np.searchsorted(day_sorted, np.arange(ndays))
    rank = np.arange(submit.size) - first_of_day[day_sorted]
    mask = np.zeros(submit.size, dtype=bool)
    mask[order] = rank < n_spot[day_sorted]
    return mask
