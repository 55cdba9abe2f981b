"""Shared hypothesis strategies for gfs_opt tests.

Import from any test module in ``tests/`` (pytest puts this folder on ``sys.path``)::

    from strategies import rounds

    @given(rounds(max_nodes=4, max_jobs=8))
    def test_something(rnd): ...

`rounds()` draws a random **valid** `gfs_opt.model.Round`: 1–`max_pools` pools, nodes of 1/2/4/8
GPUs, HP and LP jobs with fractional (0.001–0.999) or whole-GPU requests that fit the pool's
largest node, some of them running on feasible placements (allocated on the round's
`ClusterState`, possibly sharing GPUs), the rest pending in random queue order or only mentioned.
Forecasts, pool feedback state, quotas, node eviction counts and `Params` are drawn too. Every
drawn round satisfies `gfs_opt.instance` validation, so it can be saved and loaded.

Times are consistent: submit ≤ start ≤ time, last_ckpt/window_start in [start, time].
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from gfs_opt.model import (
    MILLI,
    ClusterState,
    Job,
    JobClass,
    Params,
    Placement,
    PoolForecast,
    PoolStatus,
    Round,
    RunningJob,
    gpus_per_worker,
    milli_per_gpu,
)

POOL_NAMES = ("A10", "A100-SXM4-80GB", "H800", "L20", "GPU ü")
NODE_SIZES = (1, 2, 4, 8)
GUARANTEE_CLASSES = (1.0, 2.0, 4.0)

# finite, non-negative times; keep them moderate so tests read well when they fail
_T_MAX = 3.0e7


def _times(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


@st.composite
def params(draw: st.DrawFn) -> Params:
    """Random policy parameters within the ranges instance files accept."""
    eta_min = draw(st.floats(0.01, 1.0))
    eval_start = draw(_times(0, _T_MAX))
    return Params(
        rho=draw(st.floats(0.5, 0.99)),
        horizon_h=draw(st.integers(1, 8)),
        guarantee_classes=tuple(sorted(draw(st.sets(st.sampled_from(GUARANTEE_CLASSES), min_size=1)))),
        quota_refresh_s=draw(st.sampled_from([60.0, 300.0, 900.0])),
        eta_min=eta_min,
        eta_max=draw(st.floats(eta_min, 4.0)),
        eval_start=eval_start,
        eval_end=draw(st.one_of(st.just(math.inf), _times(eval_start, 2 * _T_MAX))),
        restart_small_s=draw(st.sampled_from([0.0, 40.0])),
        restart_large_s=draw(st.sampled_from([0.0, 60.0, 90.5])),
        hard_guarantee=draw(st.booleans()),
    )


def _find_placement(state: ClusterState, job: Job, node_order: list[int]) -> Placement | None:
    """First-fit over ``node_order`` for every worker (workers may share a node or a GPU)."""
    per_gpu, k = milli_per_gpu(job.g), gpus_per_worker(job.g)
    extra: dict[int, int] = {}
    out = []
    for _ in range(job.workers):
        for node in node_order:
            base = int(state.node_first_gpu[node])
            fits = [lg for lg in range(int(state.node_gpus[node]))
                    if state.gpu_used[base + lg] + extra.get(base + lg, 0) + per_gpu <= MILLI]
            if len(fits) >= k:
                chosen = tuple(fits[:k])
                for lg in chosen:
                    extra[base + lg] = extra.get(base + lg, 0) + per_gpu
                out.append((node, chosen))
                break
        else:
            return None
    return tuple(out)


@st.composite
def rounds(draw: st.DrawFn, max_nodes: int = 6, max_jobs: int = 12, max_pools: int = 3) -> Round:
    """A random valid `Round` (see the module docstring)."""
    n_pools = draw(st.integers(1, max(1, min(max_pools, max_nodes, len(POOL_NAMES)))))
    pools = draw(st.lists(st.sampled_from(POOL_NAMES), min_size=n_pools, max_size=n_pools, unique=True))
    n_nodes = draw(st.integers(n_pools, max(n_pools, max_nodes)))
    node_pools = pools + draw(st.lists(st.sampled_from(pools), min_size=n_nodes - n_pools,
                                       max_size=n_nodes - n_pools))
    sizes = draw(st.lists(st.sampled_from(NODE_SIZES), min_size=n_nodes, max_size=n_nodes))
    state = ClusterState.from_nodes((p, g, f"node-{i}") for i, (p, g) in enumerate(zip(node_pools, sizes, strict=True)))
    pool_max = {p: max(g for q, g in zip(node_pools, sizes, strict=True) if q == p) for p in pools}
    pool_nodes = {p: list(range(*state.pool_slice(p))) for p in pools}

    time = draw(_times(0, _T_MAX))
    ids = draw(st.lists(st.integers(0, 10**9), max_size=max_jobs, unique=True))
    orgs = st.text(alphabet="abcxyz-é_", min_size=0, max_size=6)
    jobs: dict[int, Job] = {}
    running: dict[int, RunningJob] = {}
    pending: dict[JobClass, list[int]] = {JobClass.HP: [], JobClass.LP: []}
    for jid in ids:
        pool = draw(st.sampled_from(pools))
        whole = draw(st.booleans())
        g = draw(st.integers(1, pool_max[pool])) * MILLI if whole else draw(st.integers(1, MILLI - 1))
        job = Job(id=jid, org=draw(orgs), pool=pool, cls=draw(st.sampled_from(JobClass)), g=g,
                  workers=draw(st.integers(1, 3)), submit=draw(_times(0, time)),
                  duration=draw(_times(0, 1e6)), guarantee_h=draw(st.sampled_from(GUARANTEE_CLASSES)),
                  cpu=draw(st.sampled_from([0.0, 1.0, 7.5, 96.0])))
        jobs[jid] = job
        fate = draw(st.sampled_from(["run", "run", "pend", "none"]))
        if fate == "run":
            order = draw(st.permutations(pool_nodes[pool]))
            placement = _find_placement(state, job, order)
            if placement is not None:
                state.allocate(job, placement)
                start = draw(_times(job.submit, time))
                running[jid] = RunningJob(job=job, start=start, last_ckpt=draw(_times(start, time)),
                                          window_start=draw(_times(start, time)),
                                          placement=placement, evictions=draw(st.integers(0, 5)))
                continue
            fate = "pend"
        if fate == "pend":
            pending[job.cls].append(jid)
    pending_hp = draw(st.permutations(pending[JobClass.HP]))
    pending_lp = draw(st.permutations(pending[JobClass.LP]))
    queued_since = {jid: draw(_times(jobs[jid].submit, time))
                    for jid in pending_hp + pending_lp if draw(st.booleans())}

    forecasts: dict[str, PoolForecast] = {}
    for pool in draw(st.lists(st.sampled_from(pools), unique=True)):
        h = draw(st.integers(1, 6))
        vals = st.floats(-50, 1e4, allow_nan=False)
        samples = draw(st.one_of(st.none(), st.integers(1, 4)))
        forecasts[pool] = PoolForecast(
            mean=np.array(draw(st.lists(vals, min_size=h, max_size=h))),
            std=np.array(draw(st.lists(st.floats(0, 500), min_size=h, max_size=h))),
            samples=None if samples is None else np.array(
                [draw(st.lists(vals, min_size=h, max_size=h)) for _ in range(samples)]))
    statuses = {pool: PoolStatus(eta=draw(st.floats(0.1, 2.0)), failed=draw(st.integers(0, 999)),
                                 succeeded=draw(st.integers(0, 999)),
                                 oldest_lp_wait=draw(_times(0, 1e5)), has_hp_history=draw(st.booleans()))
                for pool in draw(st.lists(st.sampled_from(pools), unique=True))}
    rnd_params = draw(params())
    quotas = {(pool, d): draw(st.integers(0, 2 * state.capacity_gpus(pool) * MILLI))
              for pool in draw(st.lists(st.sampled_from(pools), unique=True))
              for d in rnd_params.guarantee_classes}
    evictions = st.one_of(st.none(), st.lists(st.integers(0, 30), min_size=state.n_nodes,
                                              max_size=state.n_nodes).map(lambda v: np.array(v, dtype=np.int32)))
    return Round(time=time, state=state, jobs=jobs, running=running, pending_hp=list(pending_hp),
                 pending_lp=list(pending_lp), queued_since=queued_since, forecasts=forecasts,
                 pools=statuses, quotas=quotas, node_evictions_1h=draw(evictions),
                 node_evictions_1d=draw(evictions), params=rnd_params, quota_due=draw(st.booleans()))
