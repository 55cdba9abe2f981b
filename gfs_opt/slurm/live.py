"""The live cluster in gfs_opt's vocabulary: `squeue --json` records → `LiveJob` → `Round`.

Conventions (the Slurm mapping of GFS):

* accounts are tenants (``org``); the whole cluster is one pool (name chosen by the caller);
* QOS ``hp`` → HP; QOS ``spot-<d>h`` → LP of guarantee class d hours; any other QOS counts as
  load that is neither HP demand nor evictable;
* a worker is a Slurm task (``--ntasks=w --gpus-per-task=g``); jobs asking GPUs per node count
  one worker per node;
* the guarantee window is Slurm's ``PreemptExemptTime``: the first d hours of every (re)start, so
  ``RunningJob.window_start`` is the start of the current run; LP jobs checkpoint at the end of
  each window (GFS-SPEC §1), so the last checkpoint is the last window boundary.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from gfs_opt.model import (
    MILLI,
    ClusterState,
    Job,
    JobClass,
    Params,
    PoolStatus,
    Round,
    RunningJob,
)
from gfs_opt.slurm.clock import TraceClock
from gfs_opt.slurm.layout import HP_QOSES

_IDX = re.compile(r"IDX:([0-9,\-]+)")
#: pending reasons under which an HP job waits for GPUs (and preemption could help)
WAITING_FOR_GPUS = {"Resources", "Priority", "ReqNodeNotAvail", "Nodes_required_for_job_are_DOWN"}
#: pending reason of a spot job held back by its QOS GPU limit
QUOTA_REASONS = {"QOSGrpGRES", "QOSGrpGRESRunMinutes", "QOSGrpTRES"}


def gpu_indices(detail: str) -> tuple[int, ...]:
    """``"gpu:2(IDX:0,3-4)"`` → (0, 3, 4)."""
    m = _IDX.search(detail or "")
    if not m:
        return ()
    out: list[int] = []
    for part in m.group(1).split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return tuple(out)


def gres_count(text: str) -> int:
    """GPUs in a TRES request such as ``gres:gpu:2`` or ``gres/gpu:a100=2`` (0 if none)."""
    for item in (text or "").split(","):
        if "gpu" in item:
            m = re.search(r"(\d+)\s*$", item)
            if m:
                return int(m.group(1))
    return 0


def guarantee_of(qos: str) -> float | None:
    """``spot-1h`` (or a pool's ``spot-1h-a100``) → 1.0; anything else → None."""
    m = re.fullmatch(r"spot-([0-9.]+)h(?:-[a-z0-9]+)?", qos or "")
    return float(m.group(1)) if m else None


def _state(raw: object) -> str:
    if isinstance(raw, list):
        return str(raw[0]) if raw else ""
    return str(raw or "")


@dataclass
class LiveJob:
    """One Slurm job as the controller sees it (times are Unix wall seconds)."""

    job_id: int
    name: str
    account: str
    qos: str
    state: str
    reason: str
    submit: float
    start: float
    restarts: int
    g: int                    # per-worker milli-GPU
    workers: int
    alloc: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)  # node, GPU indices
    time_limit_s: float = 0.0
    partition: str = ""

    @property
    def cls(self) -> JobClass | None:
        if self.qos in HP_QOSES:
            return JobClass.HP
        if guarantee_of(self.qos) is not None:
            return JobClass.LP
        return None

    @property
    def gpus(self) -> int:
        return self.g // MILLI * self.workers

    @property
    def running(self) -> bool:
        return self.state in ("RUNNING", "COMPLETING") and bool(self.alloc)

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> LiveJob:
        per_task = gres_count(str(d.get("tres_per_task") or ""))
        per_node = gres_count(str(d.get("tres_per_node") or ""))
        per_job = gres_count(str(d.get("tres_per_job") or ""))
        if per_task:
            g, w = per_task, int(d.get("tasks") or 1)     # type: ignore[call-overload]
        elif per_node:
            g, w = per_node, int(d.get("node_count") or 1)  # type: ignore[call-overload]
        else:   # a job-wide request: no gang shape known, one GPU per worker
            g, w = 1, max(per_job, 0)
        alloc: list[tuple[str, tuple[int, ...]]] = []
        res = d.get("job_resources") or {}
        nodes = [n.get("nodename", "") for n in res.get("allocated_nodes", [])]  # type: ignore[attr-defined]
        details = list(d.get("gres_detail") or [])       # type: ignore[call-overload]
        for i, node in enumerate(nodes):
            alloc.append((str(node), gpu_indices(details[i]) if i < len(details) else ()))
        limit = d.get("time_limit")
        return cls(
            job_id=int(d["job_id"]),       # type: ignore[call-overload]
            name=str(d.get("name", "")), account=str(d.get("account", "")),
            qos=str(d.get("qos", "")), state=_state(d.get("job_state")),
            reason=str(d.get("state_reason", "")),
            submit=float(d.get("submit_time") or 0),    # type: ignore[arg-type]
            start=float(d.get("start_time") or 0),      # type: ignore[arg-type]
            restarts=int(d.get("restart_cnt") or 0),    # type: ignore[call-overload]
            g=max(g, 1) * MILLI, workers=max(w, 0), alloc=alloc,
            time_limit_s=60.0 * float(limit) if isinstance(limit, int | float) else 0.0,
            partition=str(d.get("partition") or ""))


def parse_jobs(records: Iterable[Mapping[str, object]]) -> list[LiveJob]:
    return [LiveJob.from_json(r) for r in records]


def placement_of(job: LiveJob, node_index: Mapping[str, int]) -> tuple | None:
    """Slurm's allocation as a gfs_opt placement (one entry per worker), or None when it does
    not split into whole workers (then the job is treated as an opaque load)."""
    k = job.g // MILLI
    out = []
    for node, idx in job.alloc:
        if node not in node_index or len(idx) % k:
            return None
        for i in range(0, len(idx), k):
            out.append((node_index[node], tuple(idx[i:i + k])))
    return tuple(out) if len(out) == job.workers else None


@dataclass
class LiveView:
    """A `Round` built from a snapshot, plus what it left out."""

    rnd: Round
    protected: list[int]           # LP jobs inside their guarantee window
    opaque: list[int]              # running jobs whose allocation could not be mapped
    lp_gpus_by_qos: dict[str, int]
    hp_gpus_by_account: dict[str, int]


def build_round(jobs: list[LiveJob], node_names: list[str], gpus_per_node: int, pool: str,
                clock: TraceClock, params: Params, pools: dict[str, PoolStatus],
                protect_windows: bool = True) -> LiveView:
    """The live cluster as a `Round` at trace time ``clock.now()``.

    ``rnd.running`` holds only the LP jobs that may be evicted: with ``protect_windows`` the
    jobs inside their guarantee window are left out (they still hold their GPUs in
    ``rnd.state``), which is how both the greedy pass and the MILP see a protected job.
    """
    t = clock.now()
    state = ClusterState([pool], [pool] * len(node_names), [gpus_per_node] * len(node_names),
                         node_names)
    index = {n: i for i, n in enumerate(node_names)}
    jobs_by_id: dict[int, Job] = {}
    running: dict[int, RunningJob] = {}
    protected: list[int] = []
    opaque: list[int] = []
    lp_by_qos: dict[str, int] = {}
    hp_by_account: dict[str, int] = {}
    pending_hp: list[int] = []
    pending_lp: list[int] = []
    queued_since: dict[int, float] = {}
    for j in jobs:
        cls = j.cls or JobClass.HP     # other QOS: load that is never evicted
        d = guarantee_of(j.qos) or 1.0
        job = Job(j.job_id, j.account, pool, cls, j.g, max(j.workers, 1), clock.trace(j.submit),
                  j.time_limit_s * clock.speedup, guarantee_h=d)
        if j.running:
            placement = placement_of(j, index)
            try:
                if placement is None:
                    raise ValueError("unmapped")
                state.allocate(job, placement)
            except ValueError:
                opaque.append(j.job_id)
                continue
            jobs_by_id[j.job_id] = job
            if j.cls is JobClass.LP:
                lp_by_qos[j.qos] = lp_by_qos.get(j.qos, 0) + j.gpus
                start = clock.trace(j.start)
                window = job.guarantee_s
                ckpt = start + math.floor(max(0.0, t - start) / window) * window
                run = RunningJob(job, start, ckpt, start, placement)
                if protect_windows and run.in_window(t):
                    protected.append(j.job_id)
                else:
                    running[j.job_id] = run
            elif j.cls is JobClass.HP:
                hp_by_account[j.account] = hp_by_account.get(j.account, 0) + j.gpus
        elif j.state == "PENDING" and j.workers > 0:
            if j.cls is JobClass.HP and j.reason in WAITING_FOR_GPUS:
                pending_hp.append(j.job_id)
            elif j.cls is JobClass.LP:
                pending_lp.append(j.job_id)
            else:
                continue
            jobs_by_id[j.job_id] = job
            queued_since[j.job_id] = clock.trace(j.submit)
    pending_hp.sort(key=lambda i: (jobs_by_id[i].submit, i))
    rnd = Round(time=t, state=state, jobs=jobs_by_id, running=running, pending_hp=pending_hp,
                pending_lp=pending_lp, queued_since=queued_since, pools=pools, params=params)
    return LiveView(rnd, protected, opaque, lp_by_qos, hp_by_account)


@dataclass
class WindowEvent:
    t: float          # trace seconds
    ok: bool
    job_id: int
    nodes: tuple[str, ...] = ()


class WindowTracker:
    """Guarantee-window outcomes and evictions seen across successive snapshots.

    A window succeeds when an LP run lasts d hours past its (re)start or completes; an LP run
    that stops any other way than completing (requeued by the controller, preempted by Slurm)
    fails its window — the simulator's definition (GFS-SPEC §5).
    """

    def __init__(self, horizon_s: float) -> None:
        self.horizon_s = horizon_s
        self.runs: dict[int, tuple[float, int, str, tuple[str, ...], int]] = {}  # id → start, windows, qos, nodes, restarts
        self.events: deque[WindowEvent] = deque()
        self.evictions: deque[tuple[float, tuple[str, ...]]] = deque()
        self.failed = 0
        self.succeeded = 0

    def _add(self, ev: WindowEvent) -> None:
        self.events.append(ev)
        if ev.ok:
            self.succeeded += 1
        else:
            self.failed += 1
            self.evictions.append((ev.t, ev.nodes))

    def update(self, jobs: list[LiveJob], clock: TraceClock) -> list[WindowEvent]:
        t = clock.now()
        new: list[WindowEvent] = []
        seen: set[int] = set()
        for j in jobs:
            d = guarantee_of(j.qos)
            if d is None:
                continue
            seen.add(j.job_id)
            window = d * 3600.0
            prev = self.runs.get(j.job_id)
            if prev is not None and (not j.running or j.start != prev[0]):
                start, done, _q, nodes, restarts = prev
                if j.state == "COMPLETED":
                    new.append(WindowEvent(t, True, j.job_id, nodes))
                elif j.state in ("PENDING", "REQUEUED", "PREEMPTED", "REQUEUE_HOLD") or (
                        j.restarts > restarts) or (j.running and j.start != prev[0]):
                    new.append(WindowEvent(t, False, j.job_id, nodes))
                del self.runs[j.job_id]
                prev = None
            if j.running:
                start = clock.trace(j.start)
                full = int(max(0.0, t - start) // window)
                if prev is None:
                    prev = (j.start, 0, j.qos, tuple(n for n, _ in j.alloc), j.restarts)
                s0, done, q, nodes, r = prev
                for k in range(done + 1, full + 1):
                    new.append(WindowEvent(start + k * window, True, j.job_id, nodes))
                self.runs[j.job_id] = (s0, max(done, full), q, nodes, r)
        for jid in [jid for jid in self.runs if jid not in seen]:   # vanished (MinJobAge)
            del self.runs[jid]
        for ev in new:
            self._add(ev)
        while self.events and self.events[0].t < t - self.horizon_s:
            self.events.popleft()
        while self.evictions and self.evictions[0][0] < t - 86_400.0:
            self.evictions.popleft()
        return new

    def filled(self, status: PoolStatus) -> PoolStatus:
        """``status`` with the window outcomes seen so far (PTS's node cost F and S). η's
        evidence is the spot quota's: the controller reports each outcome to it
        (`gfs_opt.slurm.bridge.GfsBrain.observe_window`)."""
        return replace(status, failed=self.failed, succeeded=self.succeeded)

    def node_evictions(self, node_names: list[str], t: float) -> tuple[np.ndarray, np.ndarray]:
        """LP evictions per node over the last hour and day (the E(n) inputs)."""
        index = {n: i for i, n in enumerate(node_names)}
        c1h = np.zeros(len(node_names), dtype=np.int32)
        c1d = np.zeros(len(node_names), dtype=np.int32)
        for te, nodes in self.evictions:
            for n in nodes:
                if n in index:
                    c1d[index[n]] += 1
                    if te >= t - 3600.0:
                        c1h[index[n]] += 1
        return c1h, c1d


def oldest_quota_wait(jobs: list[LiveJob], clock: TraceClock) -> float:
    """Trace seconds the longest-waiting LP job held back by its QOS limit has waited."""
    t = clock.now()
    waits = [t - clock.trace(j.submit) for j in jobs
             if j.cls is JobClass.LP and j.state == "PENDING" and j.reason in QUOTA_REASONS]
    return max(waits, default=0.0)
