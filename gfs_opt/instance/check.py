"""Cross-reference checks of a structurally valid instance file, and its conversion to a `Round`.

`gfs_opt.instance.schema` has already checked each value on its own; here every reference between
parts is checked (pools, job ids, queues, placements against node sizes and each other) with one
line per problem, worded with the file's own indices. Only a file without problems is turned into
a `Round`, so `ClusterState.allocate` never sees a bad placement.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from gfs_opt.errors import shown
from gfs_opt.instance.schema import InstanceFile, JobIn, QuotaIn, ReserveIn, format_loc
from gfs_opt.model import (
    MILLI,
    AllocationError,
    ClusterState,
    Job,
    JobClass,
    Params,
    PoolForecast,
    PoolStatus,
    Round,
    RunningJob,
    gpus_per_worker,
    gpus_to_milli,
    milli_per_gpu,
)


def _q(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


def _num(x: float) -> str:
    return shown(x)     # as given: 8.0000001, not 8


def _hours(n: int) -> str:
    return f"{n} hour" if n == 1 else f"{n} hours"


class _Checker:
    def __init__(self, doc: InstanceFile) -> None:
        self.doc = doc
        self.problems: list[str] = []
        nodes = doc.nodes
        # ClusterState groups nodes by pool in sorted pool order; file index → state index
        self.order = sorted(range(len(nodes)), key=lambda i: (nodes[i].pool, i))
        self.to_state = {old: new for new, old in enumerate(self.order)}
        self.pool_max: dict[str, int] = {}
        for n in nodes:
            self.pool_max[n.pool] = max(self.pool_max.get(n.pool, 0), n.gpus)
        self.jobs: dict[int, tuple[int, JobIn, int | None]] = {}  # id → (index, job, milli or None)
        self.running_at: dict[int, int] = {}

    def add(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def pool_known(self, where: str, pool: str) -> bool:
        if pool in self.pool_max:
            return True
        names = ", ".join(sorted(self.pool_max)[:6]) + (", …" if len(self.pool_max) > 6 else "")
        self.add(where, f"unknown pool {_q(pool)} (no node has it; pools: {names})")
        return False

    # ---- sections --------------------------------------------------------------------------
    def params(self) -> None:
        p = self.doc.params
        if p.eta_min > p.eta_max:
            self.add("params.eta_min", f"{_num(p.eta_min)} is above eta_max {_num(p.eta_max)}")
        if p.eval_end is not None and p.eval_end < p.eval_start:
            self.add("params.eval_end", f"{_num(p.eval_end)} is before eval_start {_num(p.eval_start)}")

    def nodes(self) -> None:
        first: dict[str, int] = {}
        for i, n in enumerate(self.doc.nodes):
            if n.name in first:
                self.add(f"nodes[{i}].name", f"duplicate node name {_q(n.name)} (also nodes[{first[n.name]}])")
            else:
                first[n.name] = i
        for pool in self.doc.pools:
            self.pool_known(format_loc(("pools", pool)), pool)

    def jobs_section(self) -> None:
        for i, j in enumerate(self.doc.jobs):
            where = f"jobs[{i}]"
            if j.id in self.jobs:
                self.add(f"{where}.id", f"duplicate job id {j.id} (also jobs[{self.jobs[j.id][0]}])")
                continue
            g: int | None = None
            x = j.gpus_per_worker
            if x >= 1 and x != math.floor(x):
                self.add(f"{where}.gpus_per_worker",
                         f"a request above 1 GPU must be a whole number of GPUs (got {_num(x)})")
            else:
                g = gpus_to_milli(x)
            if self.pool_known(f"{where}.pool", j.pool) and g is not None:
                k = gpus_per_worker(g)
                if k > self.pool_max[j.pool]:
                    self.add(f"{where}.gpus_per_worker",
                             f"{_num(x)} GPUs per worker, but the largest node of pool {_q(j.pool)} has "
                             f"{self.pool_max[j.pool]}")
                    g = None
            else:
                g = None
            self.jobs[j.id] = (i, j, g)

    def running(self) -> None:
        doc, nodes = self.doc, self.doc.nodes
        used: dict[tuple[int, int], int] = defaultdict(int)
        holders: dict[tuple[int, int], list[int]] = defaultdict(list)
        for r, rj in enumerate(doc.running):
            where = f"running[{r}]"
            entry = self.jobs.get(rj.job)
            if entry is None:
                self.add(f"{where}.job", f"job {rj.job} is not in jobs")
                continue
            if rj.job in self.running_at:
                self.add(f"{where}.job", f"job {rj.job} is already running at running[{self.running_at[rj.job]}]")
                continue
            self.running_at[rj.job] = r
            _i, job, g = entry
            for name in ("start", "last_ckpt", "window_start"):
                t = getattr(rj, name)
                if t > doc.time:
                    self.add(f"{where}.{name}", f"{_num(t)} is after the round time {_num(doc.time)}")
            if rj.start < job.submit:
                self.add(f"{where}.start", f"{_num(rj.start)} is before job {job.id}'s submit time {_num(job.submit)}")
            if g is None:
                continue  # the job's own problem is already reported
            if len(rj.placement) != job.workers:
                self.add(f"{where}.placement",
                         f"{len(rj.placement)} workers placed, job {job.id} has {job.workers}")
            k, per_gpu = gpus_per_worker(g), milli_per_gpu(g)
            want: dict[tuple[int, int], int] = defaultdict(int)
            for w, (node, gpus) in enumerate(rj.placement):
                pw = f"{where}.placement[{w}]"
                if node >= len(nodes):
                    self.add(pw, f"node index {node} does not exist (the file has {len(nodes)} nodes)")
                    continue
                nd = nodes[node]
                if nd.pool != job.pool:
                    self.add(pw, f"node {node} ({_q(nd.name)}) is in pool {_q(nd.pool)}, job {job.id} needs {_q(job.pool)}")
                    continue
                if len(gpus) != k:
                    self.add(pw, f"a worker of job {job.id} takes {k} GPU(s), {len(gpus)} listed")
                if len(set(gpus)) != len(gpus):
                    self.add(pw, "a GPU is listed twice")
                for lg in sorted(set(gpus)):
                    if lg >= nd.gpus:
                        self.add(pw, f"node {node} ({_q(nd.name)}) has no GPU {lg} (it has {nd.gpus})")
                    else:
                        want[(node, lg)] += per_gpu
            for key, m in want.items():
                if used[key] + m > MILLI:
                    node, lg = key
                    others = f" with jobs {holders[key]}" if holders[key] else ""
                    self.add(f"{where}.placement",
                             f"GPU {lg} of node {node} ({_q(nodes[node].name)}) over-allocated: "
                             f"{used[key]} + {m} > {MILLI} milli-GPU{others}")
                used[key] += m
                holders[key].append(job.id)

    def queues(self) -> None:
        doc = self.doc
        queued: dict[int, str] = {}
        for qname, ids, cls in (("pending_hp", doc.pending_hp, "HP"), ("pending_lp", doc.pending_lp, "LP")):
            for i, jid in enumerate(ids):
                where = f"{qname}[{i}]"
                entry = self.jobs.get(jid)
                if entry is None:
                    self.add(where, f"job {jid} is not in jobs")
                    continue
                if jid in self.running_at:
                    self.add(where, f"job {jid} is both pending and running (running[{self.running_at[jid]}])")
                    continue
                if jid in queued:
                    self.add(where, f"job {jid} is already queued at {queued[jid]}")
                    continue
                queued[jid] = where
                job = entry[1]
                if job.cls != cls:
                    self.add(where, f"job {jid} is {job.cls}, it cannot wait in the {cls} queue")
                if job.submit > doc.time:
                    self.add(where, f"job {jid} is submitted at {_num(job.submit)}, after the round time {_num(doc.time)}")
        for jid, t in doc.queued_since.items():
            where = format_loc(("queued_since", str(jid)))
            if jid not in self.jobs:
                self.add(where, f"job {jid} is not in jobs")
            elif t > doc.time:
                self.add(where, f"{_num(t)} is after the round time {_num(doc.time)}")

    def forecasts(self) -> None:
        for pool, f in self.doc.forecasts.items():
            where = format_loc(("forecasts", pool))
            self.pool_known(where, pool)
            hours = len(f.mean)
            if len(f.std) != hours:
                self.add(f"{where}.std", f"has {_hours(len(f.std))}, mean has {_hours(hours)}")
            for s, row in enumerate(f.samples or []):
                if len(row) != hours:
                    self.add(f"{where}.samples[{s}]", f"has {_hours(len(row))}, mean has {_hours(hours)}")
                    break

    def quotas(self) -> None:
        self._one_per_class("quotas", self.doc.quotas)

    def reserves(self) -> None:
        self._one_per_class("reserves", self.doc.reserves)

    def _one_per_class(self, name: str, entries: Sequence[QuotaIn | ReserveIn]) -> None:
        """Each entry names a known pool, and each (pool, class) once."""
        first: dict[tuple[str, float], int] = {}
        for i, q in enumerate(entries):
            self.pool_known(f"{name}[{i}].pool", q.pool)
            key = (q.pool, q.class_h)
            if key in first:
                self.add(f"{name}[{i}]", f"pool {_q(q.pool)} class {_num(q.class_h)} h is already at {name}[{first[key]}]")
            else:
                first[key] = i

    def evictions(self) -> None:
        n = len(self.doc.nodes)
        for name in ("node_evictions_1h", "node_evictions_1d"):
            arr = getattr(self.doc, name)
            if arr is not None and len(arr) != n:
                self.add(name, f"has {len(arr)} entries, the file has {n} nodes")

    def run(self) -> list[str]:
        self.params()
        self.nodes()
        self.jobs_section()
        self.running()
        self.queues()
        self.forecasts()
        self.quotas()
        self.reserves()
        self.evictions()
        return self.problems

    # ---- conversion -------------------------------------------------------------------------
    def per_node(self, values: list[int] | None) -> np.ndarray | None:
        if values is None:
            return None
        arr = np.zeros(len(values), dtype=np.int32)
        for old, v in enumerate(values):
            arr[self.to_state[old]] = v
        return arr

    def build(self) -> Round:
        doc = self.doc
        state = ClusterState.from_nodes(
            (doc.nodes[i].pool, doc.nodes[i].gpus, doc.nodes[i].name) for i in self.order)
        jobs: dict[int, Job] = {}
        for _i, j, g in self.jobs.values():
            assert g is not None
            jobs[j.id] = Job(id=j.id, org=j.org, pool=j.pool, cls=JobClass(j.cls), g=g,
                             workers=j.workers, submit=j.submit, duration=j.duration,
                             guarantee_h=j.guarantee_h, cpu=j.cpu)
        running: dict[int, RunningJob] = {}
        for rj in doc.running:
            job = jobs[rj.job]
            placement = tuple((self.to_state[n], tuple(gpus)) for n, gpus in rj.placement)
            state.allocate(job, placement)
            running[job.id] = RunningJob(job=job, start=rj.start, last_ckpt=rj.last_ckpt,
                                         window_start=rj.window_start, placement=placement,
                                         evictions=rj.evictions)
        p = doc.params
        params = Params(
            rho=p.rho, horizon_h=p.horizon_h, guarantee_classes=tuple(p.guarantee_classes),
            quota_refresh_s=p.quota_refresh_s, eta_min=p.eta_min, eta_max=p.eta_max,
            eval_start=p.eval_start,
            eval_end=math.inf if p.eval_end is None else p.eval_end,
            restart_small_s=p.restart_small_s, restart_large_s=p.restart_large_s,
            hard_guarantee=p.hard_guarantee,
            quota_after_window=p.quota_after_window)
        return Round(
            time=doc.time, state=state, jobs=jobs, running=running,
            pending_hp=list(doc.pending_hp), pending_lp=list(doc.pending_lp),
            queued_since=dict(doc.queued_since),
            forecasts={pool: PoolForecast(np.array(f.mean, dtype=float), np.array(f.std, dtype=float),
                                          None if f.samples is None else np.array(f.samples, dtype=float))
                       for pool, f in doc.forecasts.items()},
            pools={pool: PoolStatus(**s.model_dump()) for pool, s in doc.pools.items()},
            quotas={(q.pool, q.class_h): round(q.gpus * MILLI) for q in doc.quotas},
            reserves={(r.pool, r.class_h): r.nodes for r in doc.reserves},
            node_evictions_1h=self.per_node(doc.node_evictions_1h),
            node_evictions_1d=self.per_node(doc.node_evictions_1d),
            params=params, quota_due=doc.quota_due)


def check_instance(doc: InstanceFile) -> tuple[Round | None, list[str]]:
    """All cross-reference problems of ``doc``; the `Round` when there are none."""
    checker = _Checker(doc)
    problems = checker.run()
    if problems:
        return None, problems
    try:
        return checker.build(), []
    except (AllocationError, ValueError) as exc:  # defensive: the checks above should cover these
        return None, [f"cannot build the round: {exc}"]


__all__ = ["check_instance"]
