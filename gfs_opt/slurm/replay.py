"""`gfs-opt slurm replay`: a trace slice submitted to the live cluster at compressed times.

Each job becomes a `payload` sleep of duration/K seconds in QOS ``hp`` or ``spot-<d>h``, under
the account of its tenant, as ``--ntasks=w --gpus-per-task=g``. With ``--policy gfs`` the GFS
controller runs beside it (a separate process, as in production); with ``--policy slurm-qos``
only Slurm's own QOS preemption acts (no spot quota). Submission stops at the slice end; jobs
then drain for ``--drain`` trace seconds, whatever is left is cancelled and reported as
running/pending. Outcomes come from the payload run logs and sacct (`outcomes`).
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.experiments.runner import RunOutput, RunSpec
from gfs_opt.model import MILLI, Params
from gfs_opt.slurm import payload as payload_module
from gfs_opt.slurm.client import SlurmClient, SlurmError
from gfs_opt.slurm.clock import TraceClock
from gfs_opt.slurm.cluster import configure_qos, ensure_accounts
from gfs_opt.slurm.layout import HP_QOS, ClusterSpec, partition_of, pool_tag, spot_qos
from gfs_opt.slurm.outcomes import collect, real_summary, real_tables, to_recorder
from gfs_opt.slurm.plan import ReplayPlan, account_of

POLICIES = ("gfs", "slurm-qos")
DEFAULT_EXEMPT_MARGIN_S = 5.0
DEFAULT_NET_AFTER_S = 10.0
ACTIVE = {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "REQUEUED"}


@dataclass
class ReplayConfig:
    policy: str = "gfs"
    gfs: str = "gfs"                     # the GFS variant the controller runs (`gfs-paper`, …)
    speedup: float = 60.0
    drain_s: float = 6 * 3600.0          # trace seconds after the slice end
    lead_s: float = 2.0                  # wall seconds between clock set and the first job
    warmup_timeout_s: float = 900.0
    forecaster: str = "prophet"
    refresh_s: float = 300.0             # trace seconds
    poll_s: float = 1.0                  # wall seconds (controller)
    exact: bool = False
    protect_windows: bool = True
    rho: float = 0.9
    # gfs only: wall seconds added to PreemptExemptTime, so at a window's end the controller
    # (0.5–1.5 s after it, measured) acts before Slurm's safety net may (docs/slurm-model.md)
    exempt_margin_s: float = DEFAULT_EXEMPT_MARGIN_S
    # gfs only: an HP job the controller has not started after this many wall seconds moves to
    # QOS hp-net, the only one Slurm preempts for (None: never)
    net_after_s: float | None = DEFAULT_NET_AFTER_S
    controller_args: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise GfsError(f"--policy {self.policy!r}: choose from {', '.join(POLICIES)}")
        if not self.speedup > 0:
            raise GfsError(f"--speedup must be > 0, got {self.speedup}")
        if self.drain_s < 0:
            raise GfsError(f"--drain must be ≥ 0, got {self.drain_s}")

    def params(self, plan: ReplayPlan, classes: tuple[float, ...]) -> Params:
        return Params(rho=self.rho, guarantee_classes=classes, quota_refresh_s=self.refresh_s,
                      eval_start=plan.t0, eval_end=plan.t1, hard_guarantee=self.protect_windows)


@dataclass
class ReplayResult:
    summary: dict[str, Any]
    out: Path
    timings: dict[str, float]


def batch_script() -> str:
    """The batch script: the payload in a bare interpreter (no site, no user env)."""
    return f"#!/bin/sh\nexec {sys.executable} -S -E {payload_module.__file__}\n"


def sbatch_options(job: pd.Series, plan: ReplayPlan, speedup: float, params: Params,
                   state_dir: Path) -> list[str]:
    hp = job["cls"] == "HP"
    # with pools, a job goes to its pool's partition and (spot) its pool's QOS; HP QOS are shared
    key = plan.pool_key(str(job["pool"]))
    qos = HP_QOS if hp else spot_qos(float(job["guarantee_h"]), key)
    work = float(job["duration"]) / speedup
    g = int(job["g"]) // MILLI
    w = int(job["workers"])
    overhead = (params.restart_small_s if g * w <= 8 else params.restart_large_s) / speedup
    window = 0.0 if hp else float(job["guarantee_h"]) * 3600.0 / speedup
    minutes = max(1, math.ceil((1.2 * work + overhead + 60.0) / 60.0))
    env = (f"GFS_WORK={work:.3f},GFS_WINDOW={window:.3f},GFS_OVERHEAD={overhead:.3f},"
           f"GFS_STATE={state_dir}")
    return [f"--job-name=gfs-{int(job['job_id'])}", f"--account={account_of(job['org'])}",
            f"--qos={qos}", f"--partition={partition_of(key)}", f"--ntasks={w}", f"--gpus-per-task={g}",
            "--cpus-per-task=1", f"--time={minutes}", "--requeue", "--output=/dev/null",
            f"--export={env}"]


def _active(records: list[dict[str, Any]], ids: set[int]) -> list[int]:
    out = []
    for r in records:
        st = r.get("job_state")
        st = st[0] if isinstance(st, list) and st else st
        if int(r.get("job_id", -1)) in ids and st in ACTIVE:
            out.append(int(r["job_id"]))
    return out


class ControllerProcess:
    """The controller as a child process, stopped by its PID. With pools, one per pool (the
    simulator's GFS decides each pool alone too: quota, η and victims are per pool)."""

    def __init__(self, spec: ClusterSpec, plan: ReplayPlan, cfg: ReplayConfig, out: Path,
                 pool: str | None = None) -> None:
        pool = plan.pool if pool is None else pool
        self.pool = pool
        name = "controller" if not plan.pool_nodes else f"controller-{pool_tag(pool)}"
        self.log = out / f"{name}.jsonl"
        self.log.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "gfs_opt.cli", "slurm", "controller", "--dir", spec.dir,
                "--pool", pool, "--speedup", f"{cfg.speedup:g}", "--t0", f"{plan.t0:.0f}",
                "--eval-end", f"{plan.t1:.0f}", "--clock", str(out / "clock.json"),
                "--history", str(out / "history.csv"), "--log", str(self.log),
                "--origin", str(plan.trace.origin), "--forecaster", cfg.forecaster,
                "--refresh", f"{cfg.refresh_s:g}", "--poll", f"{cfg.poll_s:g}",
                "--rho", f"{cfg.rho:g}", "--gfs", cfg.gfs, "--ckpt-dir", str(out / "runs"),
                *cfg.controller_args]
        argv += (["--no-net"] if cfg.net_after_s is None
                 else ["--net-after", f"{cfg.net_after_s:g}"])
        if cfg.exact:
            argv.append("--exact")
        if not cfg.protect_windows:
            argv.append("--soft-guarantee")
        self.stdout = open(out / f"{name}.out", "w")   # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdout=self.stdout, stderr=subprocess.STDOUT,
                                     env=dict(os.environ), start_new_session=True)
        (out / f"{name}.pid").write_text(str(self.proc.pid))

    def actions(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(a["action"] == "ready" for a in self.actions()):
                return
            if self.proc.poll() is not None:
                tail = Path(self.stdout.name).read_text().strip().splitlines()[-3:]
                raise GfsError(f"the controller exited during warm-up: {' | '.join(tail)}")
            time.sleep(0.2)
        self.stop()
        raise GfsError(f"the controller was not ready after {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.stdout.close()


def quota_log(actions: list[dict[str, Any]], clock: TraceClock, pool: str) -> pd.DataFrame:
    """The GrpTRES limits the controller set (GPUs; ``inf`` once lifted after the window)."""
    rows = [(a["t_wall"], clock.trace(a["t_wall"]), a["qos"],
             math.inf if a["limit"] is None else float(a["limit"]))
            for a in actions if a.get("action") == "quota" and not a.get("dry_run")]
    df = pd.DataFrame(rows, columns=["t_wall", "t", "qos", "limit"])
    df["pool"] = pool
    return df


def replay(spec: ClusterSpec, plan: ReplayPlan, cfg: ReplayConfig, out: Path,
           log: Callable[[str], None] = print) -> ReplayResult:
    t_begin = time.perf_counter()
    cpu_begin = _cpu_s()
    timings: dict[str, float] = {}
    client = SlurmClient(spec)
    if not client.ping():
        raise GfsError(f"no slurmctld answers for {spec.dir}: run `gfs-opt slurm up` first")
    if (spec.nodes, spec.gpus, tuple(spec.pools)) != (plan.nodes, plan.gpus, plan.pool_nodes):
        raise GfsError(f"the plan is for {plan.nodes} × {plan.gpus} GPUs "
                       f"{dict(plan.pool_nodes) or ''} but the cluster has {spec.nodes} × "
                       f"{spec.gpus} {dict(spec.pools) or ''}: restart the cluster")
    classes = tuple(sorted({float(c) for c in plan.jobs.loc[plan.jobs["cls"] == "LP",
                                                             "guarantee_h"]}))
    missing = [c for c in classes if c not in spec.classes]
    if missing:
        raise GfsError(f"the trace uses guarantee classes {missing} h the cluster has no spot "
                       f"QOS for: `gfs-opt slurm up --guarantee-classes "
                       f"{','.join(f'{c:g}' for c in sorted(set(spec.classes) | set(missing)))}`")
    busy = _active(client.jobs(), {int(j["job_id"]) for j in client.jobs()})
    if busy:
        raise GfsError(f"the cluster already runs {len(busy)} job(s): cancel them first "
                       f"(scancel with SLURM_CONF={spec.conf})")
    out.mkdir(parents=True, exist_ok=True)
    state_dir = out / "runs"
    state_dir.mkdir(exist_ok=True)
    for f in state_dir.iterdir():
        f.unlink()
    (out / "clock.json").unlink(missing_ok=True)
    params = cfg.params(plan, spec.classes)
    t = time.perf_counter()
    margin = cfg.exempt_margin_s if cfg.policy == "gfs" else 0.0
    # with GFS on, Slurm preempts only for HP jobs the controller escalated to hp-net
    configure_qos(client, replace(spec, speedup=cfg.speedup, exempt_margin_s=margin),
                  hp_preempts=cfg.policy != "gfs")
    ensure_accounts(client, spec, plan.accounts)
    for q in spec.spot_qos:
        client.set_gpu_limit(q, None)
    timings["setup_s"] = time.perf_counter() - t
    plan.history.to_csv(out / "history.csv", index=False)
    ctls: list[ControllerProcess] = []
    if cfg.policy == "gfs":
        t = time.perf_counter()
        try:
            for pool in (plan.pools if plan.pool_nodes else (plan.pool,)):
                ctls.append(ControllerProcess(spec, plan, cfg, out, pool))
            for c in ctls:
                c.wait_ready(cfg.warmup_timeout_s)
        except BaseException:
            for c in ctls:
                c.stop()
            raise
        timings["controller_warmup_s"] = time.perf_counter() - t
    clock = TraceClock(time.time() + cfg.lead_s, plan.t0, cfg.speedup)
    clock.write(out / "clock.json")
    log(f"replay ({cfg.policy}): {plan.describe()}, ×{cfg.speedup:g} → "
        f"{(plan.t1 - plan.t0) / cfg.speedup / 60:.1f} min of submissions + ≤ "
        f"{cfg.drain_s / cfg.speedup / 60:.1f} min drain")
    script = batch_script()
    slurm_ids: dict[int, int] = {}
    lag: list[float] = []
    errors: list[str] = []
    t_sub = time.perf_counter()
    try:
        jobs = plan.jobs.sort_values(["submit", "job_id"], kind="stable")
        for i, (_idx, job) in enumerate(jobs.iterrows()):
            target = clock.wall(float(job["submit"]))
            delay = target - time.time()
            if delay > 0:
                time.sleep(delay)
            lag.append(time.time() - target)
            try:
                slurm_ids[int(job["job_id"])] = client.submit(
                    script, sbatch_options(job, plan, cfg.speedup, params, state_dir))
            except SlurmError as exc:
                errors.append(f"job {int(job['job_id'])}: {exc}")
            if (i + 1) % 50 == 0:
                log(f"  submitted {i + 1}/{len(jobs)} (trace t={clock.now():.0f})")
        timings["submit_s"] = time.perf_counter() - t_sub
        deadline = clock.wall(plan.t1 + cfg.drain_s)
        ids = set(slurm_ids.values())
        t_drain = time.perf_counter()
        while time.time() < deadline:
            if not _active(client.jobs(), ids):
                break
            time.sleep(min(2.0, max(0.0, deadline - time.time())))
        timings["drain_s"] = time.perf_counter() - t_drain
        cutoff = time.time()
    finally:
        for c in ctls:
            c.stop()
        client.cancel_all()
    t = time.perf_counter()
    ids = set(slurm_ids.values())
    for _ in range(60):
        if not _active(client.jobs(), ids):
            break
        time.sleep(0.5)
    sacct = client.accounting(sorted(ids)) if ids else []
    (out / "sacct.json").write_text(json.dumps(sacct))   # raw records: outcomes can be recomputed
    outcomes = collect(plan, slurm_ids, sacct, state_dir, cutoff)
    actions = [a for c in ctls for a in c.actions()]
    qlog = (pd.concat([quota_log(c.actions(), clock, c.pool) for c in ctls], ignore_index=True)
            if ctls else None)
    real = to_recorder(plan, outcomes, clock, cutoff, params, qlog)
    timings["collect_s"] = time.perf_counter() - t
    timings["wall_s"] = time.perf_counter() - t_begin
    # this process and its waited-for children (the controller, sbatch …); not the daemons
    timings["cpu_s"] = _cpu_s() - cpu_begin
    summary = real_summary(real)
    summary.update({
        "policy": f"slurm:{cfg.policy}", "policy_options": {
            "speedup": cfg.speedup, "forecaster": cfg.forecaster if ctls else None,
            "gfs": cfg.gfs if ctls else None,
            "exact": cfg.exact, "protect_windows": cfg.protect_windows,
            "exempt_margin_s": margin,
            "net_after_s": cfg.net_after_s if ctls else None,
            "refresh_s": cfg.refresh_s, "poll_s": cfg.poll_s},
        "wall_s": timings["wall_s"], "events": 0, "events_per_s": 0.0,
        "trace_notes": plan.trace.notes, "submit_errors": errors,
        "submit_lag_max_s": max(lag, default=0.0), "submit_lag_mean_s":
            sum(lag) / len(lag) if lag else 0.0,
        "controller_actions": _count(actions), "timings": timings,
        "drain_trace_s": cfg.drain_s, "cutoff_t": clock.trace(cutoff),
        "cluster_nodes": spec.nodes, "cluster_gpus_per_node": spec.gpus,
        "guarantee_classes": list(spec.classes),
        "cluster_pools": [list(p) for p in spec.pools],
        "controllers": len(ctls),
    })
    write_outputs(out, plan, cfg, real, summary, qlog, slurm_ids)
    return ReplayResult(summary, out, timings)


def _cpu_s() -> float:
    ru_self = resource.getrusage(resource.RUSAGE_SELF)
    ru_kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru_self.ru_utime + ru_self.ru_stime + ru_kids.ru_utime + ru_kids.ru_stime


def _count(actions: list[dict[str, Any]]) -> dict[str, int]:
    c: dict[str, int] = {}
    for a in actions:
        c[a["action"]] = c.get(a["action"], 0) + 1
    return c


def write_outputs(out: Path, plan: ReplayPlan, cfg: ReplayConfig, real: Any,
                  summary: dict[str, Any], qlog: pd.DataFrame | None,
                  slurm_ids: dict[int, int]) -> None:
    """The files `gfs-opt simulate --out` writes, plus the Slurm job ids."""
    pc, pp, ts = real_tables(real)
    quotas = pd.DataFrame(columns=["t", "pool", "class_h", "quota_gpus"])
    if qlog is not None and not qlog.empty:
        quotas = pd.DataFrame({"t": qlog["t"], "pool": qlog["pool"],
                               "class_h": qlog["qos"].str.extract(r"spot-([0-9.]+)h")[0].astype(float),
                               "quota_gpus": qlog["limit"]})
    spec = RunSpec(trace=plan.source, policy=f"slurm:{cfg.policy}",
                   window=(plan.t0, plan.t1), pools=plan.pools,
                   params={"rho": cfg.rho, "quota_refresh_s": cfg.refresh_s})
    RunOutput(spec, summary, pc, pp, ts, real.jobs, quotas, summary["wall_s"], 0).write(out)
    real.evictions.to_csv(out / "evictions.csv", index=False)
    pd.DataFrame(sorted(slurm_ids.items()), columns=["job_id", "slurm_job_id"]).to_csv(
        out / "slurm_jobs.csv", index=False)
