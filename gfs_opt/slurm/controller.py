"""`gfs-opt slurm controller`: the GFS loop against a live Slurm cluster.

Every poll (default 1 s wall) it reads `squeue --json` and

* keeps the hourly maximum of HP GPUs per account (tenant) and hands each finished hour to the
  forecaster; refits the forecaster at every midnight of trace time;
* every refresh (default 300 s of trace time) sets ``GrpTRES=gres/gpu=Q`` on each spot QOS from
  GFS's quota rule with η feedback (the simulator's own code, through `gfs_opt.slurm.bridge`);
* when HP jobs pend for GPUs, chooses LP victims with PTS (or the preemption MILP with
  ``--exact``) among the jobs past their guarantee window (all LP jobs with ``--soft-guarantee``),
  signals each for a checkpoint, waits briefly and requeues it (`scontrol requeue`).

Slurm's own QOS preemption stays configured underneath as the safety net. Every action is one
JSON line with its reason; ``--dry-run`` logs the same decisions without acting.
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.model import MILLI, ClusterState, JobClass, Params, PoolStatus, WindowOutcome
from gfs_opt.slurm.bridge import GfsBrain
from gfs_opt.slurm.client import SlurmClient, SlurmError
from gfs_opt.slurm.clock import TraceClock
from gfs_opt.slurm.layout import HP_QOS, NET_QOS, ClusterSpec
from gfs_opt.slurm.live import (
    LiveJob,
    WindowEvent,
    WindowTracker,
    build_round,
    oldest_quota_wait,
    parse_jobs,
)
from gfs_opt.traces.base import ALIBABA_ORIGIN

HOUR = 3600.0
DAY = 86_400.0


@dataclass
class ControllerConfig:
    pool: str = "gpu"
    speedup: float = 1.0
    t0: float | None = None            # trace time at start (default: real calendar)
    eval_end: float | None = None      # T of PTS's node cost ends here (default t0 + 30 days)
    refresh_s: float = 300.0           # trace seconds between quota refreshes
    poll_s: float = 1.0                # wall seconds between polls
    forecaster: str = "prophet"
    policy: str = "gfs"                # the GFS variant whose quota and victims run (`gfs-paper`: the published GFS)
    rho: float = 0.9
    horizon_h: int = 4
    exact: bool = False
    time_limit: float = 2.0
    protect_windows: bool = True
    # as `Params.quota_after_window`: keep the spot limits after eval_end (False: lift them, the
    # authors' drain, as a simulation with --lift-quota-after-window does)
    quota_after_window: bool = True
    dry_run: bool = False
    ckpt_signal: str = "USR1"
    # Slurm delivers a signal asynchronously (0.1 s idle, over a second on a loaded host): with
    # the payloads' state folder we requeue as soon as the checkpoint is on disk, else after the
    # full wait.
    ckpt_wait_s: float = 3.0
    ckpt_dir: Path | None = None
    # Slurm's preemption as a late safety net: an HP job still pending this many wall seconds
    # after the controller first found it a placement (free GPUs or victims past their window)
    # moves to QOS hp-net, the only one that preempts (None: never). Sized from measured
    # latencies (docs/slurm-model.md): poll 1 s + decision and requeue 0.5 s + the victim's GPUs
    # freed and the HP job started 1–2 s, doubled for a loaded host. An HP job that waits only
    # on protected windows is not escalated: Slurm could not preempt for it either, and at the
    # moment a protected job ends Slurm's event-driven pass would beat the controller's poll.
    net_after_s: float | None = 10.0
    duration_s: float | None = None    # wall seconds to run (None: until SIGTERM)
    origin: pd.Timestamp = ALIBABA_ORIGIN
    history: Path | None = None
    clock_file: Path | None = None
    log: Path | None = None


class ActionLog:
    """JSON lines, each appended and closed at once: the replay and the tests read them while we
    run, and no handle outlives the controller."""

    def __init__(self, path: Path | None, echo: bool) -> None:
        self.path = path
        self.echo = echo
        self.clock: TraceClock | None = None

    def __call__(self, action: str, reason: str = "", **fields: Any) -> None:
        now = time.time()
        rec = {"t_wall": round(now, 3),
               "t": None if self.clock is None else round(self.clock.trace(now), 1),
               "action": action, "reason": reason, **fields}
        line = json.dumps(rec, default=_jsonable)
        if self.path is not None:
            with open(self.path, "a") as fh:
                fh.write(line + "\n")
        if self.echo:
            print(line, flush=True)


def _jsonable(o: object) -> object:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


class Controller:
    def __init__(self, spec: ClusterSpec, cfg: ControllerConfig, client: SlurmClient | None = None,
                 echo: bool = False) -> None:
        self.spec = spec
        self.cfg = cfg
        self.client = client or SlurmClient(spec)
        self.log = ActionLog(cfg.log, echo)
        # on a cluster with --pools, one controller per pool: its partition, nodes and spot QOS
        self.pool_key = cfg.pool if spec.pools else None
        self.nodes = spec.nodes_of(self.pool_key)
        self.partition = spec.partition(self.pool_key)
        self.qos_of = dict(zip(spec.classes, spec.spot_qos_of(self.pool_key), strict=True))
        self.status = {cfg.pool: PoolStatus()}
        self.tracker = WindowTracker(cfg.horizon_h * HOUR)
        self.limits: dict[str, int | None] = {}   # GrpTRES last set per spot QOS (None: lifted)
        self.hour_max: dict[tuple[str, str], float] = {}
        self.stop_requested = False
        self.clock: TraceClock | None = None
        self.brain: GfsBrain | None = None
        self.counts = {"polls": 0, "refreshes": 0, "requeues": 0, "quota_sets": 0,
                       "escalations": 0}
        self.escalated: set[int] = set()
        self.placeable_since: dict[int, float] = {}   # HP job → wall time of its first placement
        self.hp_context: dict[int, int] = {}   # requeued LP job → HP milli-GPUs its requeue planned for

    def mine(self, jobs: list[LiveJob]) -> list[LiveJob]:
        """The jobs of this controller's pool (every job on a single-pool cluster)."""
        if self.pool_key is None:
            return jobs
        return [j for j in jobs if j.partition == self.partition]

    # ---- set-up ----------------------------------------------------------------------------
    def params(self, t_start: float) -> Params:
        end = self.cfg.eval_end if self.cfg.eval_end is not None else t_start + 30 * DAY
        return Params(rho=self.cfg.rho, horizon_h=self.cfg.horizon_h,
                      guarantee_classes=self.spec.classes, quota_refresh_s=self.cfg.refresh_s,
                      eval_start=t_start, eval_end=end, hard_guarantee=self.cfg.protect_windows,
                      quota_after_window=self.cfg.quota_after_window)

    def warm_up(self, t_start: float) -> None:
        """History, first refit and first quota at trace time ``t_start`` (before jobs run)."""
        state = ClusterState([self.cfg.pool], [self.cfg.pool] * len(self.nodes),
                             [self.spec.gpus] * len(self.nodes), self.nodes)
        self.params_ = self.params(t_start)
        self.brain = GfsBrain(self.params_, self.cfg.forecaster, self.cfg.origin, state,
                              policy=self.cfg.policy)
        if self.cfg.history is not None:
            try:
                frame = pd.read_csv(self.cfg.history, parse_dates=["ds"])
            except (OSError, ValueError) as exc:
                raise GfsError(f"--history {self.cfg.history}: {exc}") from None
            if not {"ds", "series", "y"} <= set(frame.columns):
                raise GfsError(f"--history {self.cfg.history}: needs columns ds, series, y")
            if self.pool_key is not None:   # a replay writes every pool's series in one file
                frame = frame[frame["series"].astype(str).str.startswith(f"{self.cfg.pool}|")]
            hours = self.brain.load_history(frame)
            self.log("history", f"{hours} hours of HP usage loaded from {self.cfg.history}",
                     series=int(frame["series"].nunique()))
        t0 = time.perf_counter()
        fitted = self.brain.refit(t_start)
        self.log("refit", "start of the controller" if fitted else
                 "no HP history yet: quota = capacity until the first refit with history",
                 fitted=fitted, seconds=round(time.perf_counter() - t0, 2))
        self.next_hour = (math.floor(t_start / HOUR) + 1) * HOUR
        self.next_day = (math.floor(t_start / DAY) + 1) * DAY
        self.next_refresh = t_start

    def start_clock(self) -> TraceClock:
        cfg = self.cfg
        if cfg.clock_file is None:
            return TraceClock.calendar(cfg.speedup, cfg.t0, cfg.origin)
        while not cfg.clock_file.exists():
            if self.stop_requested:
                raise GfsError("stopped before the replay clock was set")
            time.sleep(0.05)
        clock = TraceClock.read(cfg.clock_file)
        if cfg.t0 is not None and abs(clock.t0 - cfg.t0) > 1e-6:
            raise GfsError(f"{cfg.clock_file}: clock starts at t={clock.t0}, expected {cfg.t0}")
        return clock

    # ---- one poll ---------------------------------------------------------------------------
    def poll(self, jobs: list[LiveJob] | None = None) -> None:
        assert self.clock is not None and self.brain is not None
        clock = self.clock
        jobs = self.mine(parse_jobs(self.client.jobs()) if jobs is None else jobs)
        t = clock.now()
        self.counts["polls"] += 1
        self.report_windows(self.tracker.update(jobs, clock), jobs)
        usage: dict[tuple[str, str], float] = {}
        for j in jobs:
            if j.running and j.cls is JobClass.HP:
                key = (self.cfg.pool, j.account)
                usage[key] = usage.get(key, 0.0) + j.gpus
        while t >= self.next_hour:
            self.brain.observe_hour(self.next_hour, dict(self.hour_max))
            self.log("observe_hour", "hourly max of HP GPUs per account handed to the forecaster",
                     hour_end=self.next_hour, usage={f"{p}|{a}": v for (p, a), v in
                                                     self.hour_max.items()})
            self.hour_max = {k: v for k, v in usage.items() if v > 0}
            self.next_hour += HOUR
        for k, v in usage.items():
            if v > self.hour_max.get(k, 0.0):
                self.hour_max[k] = v
        while t >= self.next_day:
            t_fit = time.perf_counter()
            fitted = self.brain.refit(self.next_day)
            self.log("refit", "daily forecaster refit (00:00 of trace time)", fitted=fitted,
                     day=self.next_day, seconds=round(time.perf_counter() - t_fit, 2))
            self.next_day += DAY
        if t >= self.next_refresh:
            self.refresh(jobs)
            while self.next_refresh <= t:
                self.next_refresh += self.cfg.refresh_s
        self.preempt(jobs)
        self.escalate(jobs)

    def report_windows(self, events: list[WindowEvent], jobs: list[LiveJob]) -> None:
        """Hand each ended window to the policy's spot quota (η's evidence), with the pool's LP
        GPUs now and, for a broken window, the HP context of its eviction: the HP GPUs the
        controller planned for when it requeued the job, else the HP GPUs running now."""
        if not events:
            return
        assert self.brain is not None
        lp = sum(j.g * j.workers for j in jobs if j.running and j.cls is JobClass.LP)
        hp = sum(j.g * j.workers for j in jobs if j.running and j.cls is JobClass.HP)
        for ev in events:
            ctx = None if ev.ok else self.hp_context.pop(ev.job_id, hp)
            self.brain.observe_window(WindowOutcome(ev.t, self.cfg.pool, ev.ok, lp, ctx))

    def escalate(self, jobs: list[LiveJob]) -> None:
        """Hand HP jobs the controller could not start in time to Slurm's own preemption."""
        if self.cfg.net_after_s is None:
            return
        now = time.time()
        for j in jobs:
            if j.state != "PENDING" or j.qos != HP_QOS or j.job_id in self.escalated or \
                    now - self.placeable_since.get(j.job_id, now) < self.cfg.net_after_s:
                continue
            self.escalated.add(j.job_id)
            if not self.cfg.dry_run:
                try:
                    self.client.set_job_qos(j.job_id, NET_QOS)
                except SlurmError as exc:
                    self.log("error", f"could not move the HP job to {NET_QOS}: {exc}",
                             job=j.job_id)
                    continue
                self.counts["escalations"] += 1
            self.log("escalate", f"HP job pending {now - j.submit:.1f} s, "
                     f"{now - self.placeable_since[j.job_id]:.1f} s (> "
                     f"{self.cfg.net_after_s:g} s) since it had a placement, reason {j.reason}: "
                     f"QOS {NET_QOS}, Slurm's own preemption may now requeue spot jobs past their "
                     "exempt time for it",
                     job=j.job_id, account=j.account, gpus=j.gpus, dry_run=self.cfg.dry_run)

    def _view(self, jobs: list[LiveJob]):
        assert self.clock is not None
        return build_round(jobs, self.nodes, self.spec.gpus, self.cfg.pool, self.clock,
                           self.params_, self.status, self.cfg.protect_windows)

    def refresh(self, jobs: list[LiveJob]) -> None:
        assert self.brain is not None and self.clock is not None
        self.status[self.cfg.pool] = replace(self.tracker.filled(self.status[self.cfg.pool]),
                                             oldest_lp_wait=oldest_quota_wait(jobs, self.clock))
        view = self._view(jobs)
        c1h, c1d = self.tracker.node_evictions(self.nodes, view.rnd.time)
        rnd = replace(view.rnd, node_evictions_1h=c1h, node_evictions_1d=c1d, quota_due=True)
        upd = self.brain.refresh(rnd)
        for pool, eta in upd.eta.items():
            if pool in self.status:
                self.status[pool] = replace(self.status[pool], eta=eta)
        st = self.status[self.cfg.pool]
        ev = self.brain.evidence(self.cfg.pool)
        self.counts["refreshes"] += 1
        if upd.lifted:
            self._lift_limits()
            return
        fc = upd.forecasts.get(self.cfg.pool)
        for d in self.spec.classes:
            q = upd.quotas.get((self.cfg.pool, d))
            name = self.qos_of[d]
            if q is None:
                continue
            others = sum(g for qos, g in view.lp_gpus_by_qos.items() if qos != name)
            limit = max(0, q // MILLI - others)
            if self.limits.get(name) == limit:
                continue
            reason = (f"quota Q={q / MILLI:.1f} GPUs for class {d:g} h "
                      f"(η={st.eta:.3f}, ER window {ev.recent_failed} failed/"
                      f"{ev.recent_succeeded} ok"
                      + (f", HP forecast μ0={float(fc.mean[0]):.1f} σ0={float(fc.std[0]):.1f}"
                         if fc is not None and len(fc.mean) else ", no forecast: Q = capacity")
                      + (f", minus {others} GPUs of other classes" if others else "") + ")")
            self._set_limit(name, limit, reason, quota_milli=q, eta=st.eta,
                            lp_gpus=view.lp_gpus_by_qos.get(name, 0),
                            evidence=dataclasses.asdict(ev))

    def _lift_limits(self) -> None:
        """With the quota lifted after the scored window (`Params.quota_after_window` off) the
        simulator admits LP freely so the backlog drains; the live cluster must do the same, or
        a replay's drain compares different rules."""
        for d in self.spec.classes:
            name = self.qos_of[d]
            if name in self.limits and self.limits[name] is None:
                continue
            self._set_limit(name, None, "quota lifted: the scored window is over "
                            "(Params.quota_after_window off), LP jobs are admitted freely as in "
                            "the simulator")

    def _set_limit(self, name: str, limit: int | None, reason: str, **fields: object) -> None:
        """GrpTRES of one spot QOS (None lifts it), remembered and logged; a dry run only logs."""
        if not self.cfg.dry_run:
            try:
                self.client.set_gpu_limit(name, limit)
            except SlurmError as exc:
                self.log("error", str(exc), qos=name)
                return
            self.counts["quota_sets"] += 1
        self.limits[name] = limit
        self.log("quota", reason, qos=name, limit=limit, **fields, dry_run=self.cfg.dry_run)

    def preempt(self, jobs: list[LiveJob]) -> None:
        assert self.brain is not None
        view = self._view(jobs)
        rnd = view.rnd
        if not rnd.pending_hp:
            return
        if view.opaque:
            # no victim choice: the safety net's clock starts now
            for h in rnd.pending_hp:
                self.placeable_since.setdefault(h, time.time())
            self.log("skip", f"jobs {view.opaque[:5]} hold GPUs in a shape the model cannot map: "
                     "no victim choice this poll")
            return
        c1h, c1d = self.tracker.node_evictions(self.nodes, rnd.time)
        rnd = replace(rnd, node_evictions_1h=c1h, node_evictions_1d=c1d)
        decided = time.time()
        plan = self.brain.victims(rnd, exact=self.cfg.exact, time_limit=self.cfg.time_limit,
                                  protect_windows=self.cfg.protect_windows)
        for h in plan.placements:
            if h in rnd.pending_hp:
                self.placeable_since.setdefault(h, decided)
        if not plan.victims:
            return
        # guard: victims must still run the same run, in a spot QOS, outside protection
        fresh = {j.job_id: j for j in parse_jobs(self.client.jobs())} if not self.cfg.dry_run \
            else {j.job_id: j for j in jobs}
        before = {j.job_id: j for j in jobs}
        hp_for = [h for h, pl in plan.placements.items() if h in rnd.pending_hp]
        # the HP context of these evictions: HP running now plus the HP jobs they make room for
        hp_after = sum(j.g * j.workers for j in jobs if j.running and j.cls is JobClass.HP) + \
            sum(rnd.jobs[h].demand for h in hp_for)
        chosen = []
        for v in plan.victims:
            now_v, then_v = fresh.get(v), before.get(v)
            run = rnd.running.get(v)
            if now_v is None or then_v is None or run is None or not now_v.running or \
                    now_v.start != then_v.start or not now_v.qos.startswith("spot-"):
                self.log("skip", "victim changed since the decision (ended, restarted or "
                         "not a spot job): not requeued", job=v)
                continue
            chosen.append((v, now_v, then_v, run))
        # every victim is signalled first and their checkpoints awaited together: the requeues
        # land one checkpoint wait after the decision however many victims there are, well
        # inside the exempt margin that holds Slurm's own preemption back
        sent: dict[int, float] = {}
        if not self.cfg.dry_run:
            for v, _now_v, then_v, _run in chosen:
                try:
                    sent[v] = time.time()
                    self.client.signal(v, self.cfg.ckpt_signal)
                except SlurmError as exc:
                    if not self._same_run(v, then_v):
                        self.log("skip", f"Slurm requeued the victim first ({exc})", job=v)
                        sent.pop(v)
                        continue
                    self.log("error", f"checkpoint signal failed, requeueing anyway: {exc}",
                             job=v)
            for v in self._await_checkpoints(sent):
                self.log("warn", f"no checkpoint within {self.cfg.ckpt_wait_s:g} s of "
                         "the signal: requeueing anyway", job=v)
        for v, now_v, then_v, run in chosen:
            if not self.cfg.dry_run and v not in sent:
                continue
            in_window = run.in_window(rnd.time)
            reason = (f"HP job(s) {hp_for} pending for GPUs; {plan.method} PTS victim on "
                      f"{[self.nodes[n] for n, _ in run.placement]}: wasted work "
                      f"{run.wasted_work(rnd.time):.0f} GPU·s since the last checkpoint, "
                      f"{'INSIDE' if in_window else 'past'} its {run.job.guarantee_h:g} h window")
            if not self.cfg.dry_run:
                try:
                    self.client.requeue(v)
                except SlurmError as exc:
                    self.log("skip" if not self._same_run(v, then_v) else "error",
                             f"requeue failed: {exc}", job=v)
                    continue
                self.counts["requeues"] += 1
            self.hp_context[v] = hp_after
            # wall seconds from the end of the victim's window (Slurm's whole-second start +
            # the compressed window) to this requeue: what the exempt margin must cover
            assert self.clock is not None
            window_end = now_v.start + run.job.guarantee_s / self.clock.speedup
            self.log("requeue", reason, job=v, account=now_v.account, qos=now_v.qos,
                     gpus=now_v.gpus, for_hp=hp_for, method=plan.method,
                     fallback=plan.fallback, dry_run=self.cfg.dry_run,
                     decided_wall=round(decided, 3),
                     after_window_s=round(time.time() - window_end, 3))

    def _await_checkpoints(self, sent: dict[int, float]) -> list[int]:
        """Wait for every signalled victim's checkpoint (until the last one's deadline); the
        victims without one."""
        missing = []
        for v, t in sent.items():
            if not self._await_checkpoint(v, t):
                missing.append(v)
        return missing

    def _await_checkpoint(self, job_id: int, sent: float) -> bool:
        """Wait for the victim's checkpoint: its payload rewrites ``<ckpt_dir>/<job>.ckpt`` on the
        signal. Without a folder to watch, wait the whole grace and assume it was taken."""
        deadline = sent + self.cfg.ckpt_wait_s
        if self.cfg.ckpt_dir is None:
            time.sleep(max(0.0, deadline - time.time()))
            return True
        path = self.cfg.ckpt_dir / f"{job_id}.ckpt"
        while True:
            try:
                if path.stat().st_mtime >= sent:
                    return True
            except FileNotFoundError:
                pass
            if time.time() >= deadline:
                return False
            time.sleep(0.05)

    def _same_run(self, job_id: int, then: LiveJob) -> bool:
        now = {j.job_id: j for j in parse_jobs(self.client.jobs())}.get(job_id)
        return now is not None and now.running and now.start == then.start

    # ---- main loop -------------------------------------------------------------------------
    def run(self) -> dict[str, int]:
        cfg = self.cfg
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        t_start = cfg.t0 if cfg.clock_file is not None else TraceClock.calendar(
            cfg.speedup, cfg.t0, cfg.origin).t0
        assert t_start is not None
        self.log("start", "GFS controller starting", pool=cfg.pool, speedup=cfg.speedup,
                 refresh_s=cfg.refresh_s, poll_s=cfg.poll_s, exact=cfg.exact,
                 protect_windows=cfg.protect_windows, dry_run=cfg.dry_run,
                 forecaster=cfg.forecaster)
        self.warm_up(t_start)
        # the first quota is in force before the first job arrives
        self.clock = TraceClock(time.time(), t_start, cfg.speedup)
        self.refresh(self.mine(parse_jobs(self.client.jobs())))
        self.next_refresh = t_start + cfg.refresh_s
        self.log("ready", "warm-up done: waiting for the clock" if cfg.clock_file else
                 "warm-up done")
        self.clock = self.start_clock()
        self.log.clock = self.clock
        wall_start = time.time()
        while not self.stop_requested:
            tick = time.time()
            try:
                self.poll()
            except SlurmError as exc:
                self.log("error", str(exc))
            if cfg.duration_s is not None and time.time() - wall_start >= cfg.duration_s:
                break
            time.sleep(max(0.0, cfg.poll_s - (time.time() - tick)))
        self.log("stop", "stop requested" if self.stop_requested else "duration reached",
                 **self.counts, slurm_calls=self.client.calls,
                 slurm_call_s=round(self.client.call_s, 2))
        return self.counts

    def _on_term(self, _signum: int, _frame: object) -> None:
        self.stop_requested = True
