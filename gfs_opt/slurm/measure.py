"""`gfs-opt slurm measure`: the latencies of the live cluster that the simulator's Slurm model and
the controller's exempt margin are sized from (docs/slurm-model.md).

On an idle cluster, each probe repeated ``repeats`` times (wall seconds; payload times are the
payload's own `time.time()`, Slurm's are whole seconds):

``start``      sbatch → the payload runs, on free GPUs (the scheduler's first look + launch);
``requeue``    `scontrol requeue` → the same job runs again (Slurm's ``cred_expire`` wait);
``grptres``    `sacctmgr modify qos … GrpTRES` raise → a job held by the old limit runs;
``preempt``    end of a spot job's PreemptExemptTime → Slurm's own preemption signals it, with
               an HP job waiting for its GPUs (how late Slurm's safety net fires);
``controller`` end of a spot job's guarantee window → the controller's requeue signals it
               (poll + decision + checkpoint + requeue), with Slurm's preemption held far back.

Each probe also reports a second number: for the first three, the same delay to Slurm's own
start time (``<probe>_slurm``: what the replay's queue times use, so what the simulator's Slurm
model takes); for the last two, to the start of the HP job the eviction made room for
(``<probe>_hp_start``).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from gfs_opt.errors import GfsError
from gfs_opt.slurm.client import SlurmClient
from gfs_opt.slurm.clock import TraceClock
from gfs_opt.slurm.cluster import configure_qos, ensure_accounts
from gfs_opt.slurm.controller import Controller, ControllerConfig
from gfs_opt.slurm.layout import HP_QOS, ClusterSpec, spot_qos
from gfs_opt.slurm.live import parse_jobs
from gfs_opt.slurm.outcomes import read_run_log
from gfs_opt.slurm.replay import batch_script

PROBES = ("start", "requeue", "grptres", "preempt", "controller")
#: each probe's second number: Slurm's own start time of the job (whole second + 0.5, what the
#: replay's JQT uses) for the first three; the HP job's start after the window for the others
SECOND = {"start": "Slurm's start", "requeue": "Slurm's restart", "grptres": "Slurm's start",
          "preempt": "HP start", "controller": "HP start"}
SECOND_KEY = {"start": "slurm", "requeue": "slurm", "grptres": "slurm", "preempt": "hp_start",
              "controller": "hp_start"}


class Probe:
    def __init__(self, spec: ClusterSpec, out: Path, log: Callable[[str], None]) -> None:
        self.spec = spec
        self.client = SlurmClient(spec)
        self.runs = out / "runs"
        self.runs.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.log = log
        self.qos1 = spot_qos(spec.classes[0])

    def submit(self, qos: str, gpus: int, work_s: float, window_s: float = 0.0) -> tuple[int, float]:
        env = f"GFS_WORK={work_s},GFS_WINDOW={window_s},GFS_OVERHEAD=0,GFS_STATE={self.runs}"
        t = time.time()
        jid = self.client.submit(batch_script(), [
            f"--account={ACCOUNT}", f"--qos={qos}", "--partition=gpu", "--ntasks=1",
            f"--gpus-per-task={gpus}", "--cpus-per-task=1", "--time=10", "--requeue",
            "--output=/dev/null", f"--export={env}"])
        return jid, t

    def events(self, jid: int, ev: str, restart: int | None = None) -> list[dict[str, Any]]:
        return [e for e in read_run_log(self.runs / f"{jid}.log")
                if e.get("ev") == ev and (restart is None or e.get("restart") == restart)]

    def wait_event(self, jid: int, ev: str, restart: int | None = None,
                   timeout_s: float = 60.0) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.events(jid, ev, restart)
            if found:
                return float(found[0]["t"])
            time.sleep(0.05)
        raise GfsError(f"measure: job {jid} logged no {ev!r} within {timeout_s:.0f} s")

    def job(self, jid: int) -> Any:
        return {j.job_id: j for j in parse_jobs(self.client.jobs())}.get(jid)

    def idle(self, timeout_s: float = 60.0) -> None:
        self.client.cancel_all()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not [j for j in parse_jobs(self.client.jobs())
                    if j.state in ("RUNNING", "PENDING", "COMPLETING", "CONFIGURING")]:
                return
            time.sleep(0.3)
        raise GfsError("measure: the cluster did not become idle")

    def slurm_start(self, jid: int) -> float:
        """Slurm's start of the job's current run, mid-second (as the replay's outcomes)."""
        j = self.job(jid)
        if j is None or not j.start:
            raise GfsError(f"measure: no start time for job {jid}")
        return j.start + 0.5

    # ---- probes: (payload's view, Slurm's view) ------------------------------------------------
    def start(self) -> tuple[float, float]:
        jid, t = self.submit(HP_QOS, 1, 3.0)
        return self.wait_event(jid, "start") - t, self.slurm_start(jid) - t

    def requeue(self) -> tuple[float, float]:
        jid, _t = self.submit(self.qos1, 1, 120.0)
        self.wait_event(jid, "start", 0)
        t = time.time()
        self.client.requeue(jid)
        return self.wait_event(jid, "start", 1, timeout_s=180) - t, self.slurm_start(jid) - t

    def grptres(self) -> tuple[float, float]:
        self.client.set_gpu_limit(self.qos1, 0)
        time.sleep(5.0)                        # the old limit has surely landed
        jid, _t = self.submit(self.qos1, 1, 3.0)
        deadline = time.monotonic() + 30
        while (j := self.job(jid)) is None or j.reason != "QOSGrpGRES":
            if time.monotonic() > deadline:
                raise GfsError(f"measure: job {jid} was not held by GrpTRES=0")
            time.sleep(0.2)
        t = time.time()
        self.client.set_gpu_limit(self.qos1, 1)
        try:
            return self.wait_event(jid, "start") - t, self.slurm_start(jid) - t
        finally:
            self.client.set_gpu_limit(self.qos1, None)

    def _fill(self, window_s: float) -> list[int]:
        """Node-sized spot jobs on every node, started one after another."""
        ids = []
        for _ in range(self.spec.nodes):
            jid, _t = self.submit(self.qos1, self.spec.gpus, 600.0, window_s)
            self.wait_event(jid, "start")
            ids.append(jid)
        return ids

    def _victim(self, ids: list[int], timeout_s: float) -> tuple[int, float]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for jid in ids:
                terms = self.events(jid, "term", 0)
                if terms:
                    return jid, float(terms[0]["t"])
            time.sleep(0.05)
        raise GfsError("measure: no spot job was preempted")

    def preempt(self, exempt_s: int = 5) -> tuple[float, float]:
        self.client.set_qos(self.qos1, PreemptExemptTime=f"00:00:{exempt_s:02d}")
        time.sleep(5.0)
        ids = self._fill(0.0)
        starts = {j.job_id: j.start for j in parse_jobs(self.client.jobs()) if j.job_id in ids}
        hp, _t = self.submit(HP_QOS, self.spec.gpus, 3.0)
        jid, t_term = self._victim(ids, 60 + exempt_s)
        # the oldest spot job's exempt time ends first; Slurm counts from its whole-second start
        end = starts[jid] + exempt_s
        return t_term - end, self.wait_event(hp, "start") - end

    def controller(self, window_s: float = 6.0) -> tuple[float, float]:
        speedup = 3600.0 * self.spec.classes[0] / window_s
        # Slurm's own preemption far behind the window: only the controller can act
        configure_qos(self.client, replace(self.spec, speedup=speedup, exempt_margin_s=60.0))
        time.sleep(5.0)
        ids = self._fill(window_s)
        cfg = ControllerConfig(pool="gpu", speedup=speedup, t0=0.0, forecaster="seasonal-naive",
                               log=self.out / "controller.jsonl", ckpt_dir=self.runs)
        ctl = Controller(self.spec, cfg, self.client)
        ctl.warm_up(0.0)
        ctl.clock = TraceClock(time.time(), 0.0, speedup)
        ctl.log.clock = ctl.clock
        starts = {j.job_id: j.start for j in parse_jobs(self.client.jobs()) if j.job_id in ids}
        hp, _t = self.submit(HP_QOS, self.spec.gpus, 3.0)
        deadline = time.monotonic() + 60 + window_s
        while time.monotonic() < deadline:
            tick = time.time()
            ctl.poll()
            for jid in ids:
                terms = self.events(jid, "term", 0)
                if terms:
                    end = starts[jid] + window_s
                    return float(terms[0]["t"]) - end, self.wait_event(hp, "start") - end
            time.sleep(max(0.0, cfg.poll_s - (time.time() - tick)))
        raise GfsError("measure: the controller requeued no spot job")


ACCOUNT = "org-measure"


def _stats(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "mean": round(statistics.fmean(xs), 3), "min": round(min(xs), 3),
            "max": round(max(xs), 3)}


def measure(spec: ClusterSpec, out: Path, repeats: int = 3, probes: tuple[str, ...] = PROBES,
            log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the probes; write and return ``{probe: {n, mean, min, max, samples}}`` (wall s)."""
    bad = [p for p in probes if p not in PROBES]
    if bad:
        raise GfsError(f"--probes: unknown {bad}; choose from {', '.join(PROBES)}")
    if repeats < 1:
        raise GfsError(f"--repeats must be ≥ 1, got {repeats}")
    if spec.pools:
        raise GfsError("`slurm measure` probes a single-pool cluster (partition gpu): run "
                       "`gfs-opt slurm up` without --pools")
    client = SlurmClient(spec)
    if not client.ping():
        raise GfsError(f"no slurmctld answers for {spec.dir}: run `gfs-opt slurm up` first")
    out.mkdir(parents=True, exist_ok=True)
    ensure_accounts(client, spec, [ACCOUNT])
    probe = Probe(spec, out, log)
    result: dict[str, Any] = {"cluster": {"nodes": spec.nodes, "gpus": spec.gpus,
                                          "sched_interval_s": spec.sched_interval,
                                          "cred_expire_s": spec.cred_expire}}
    try:
        for name in probes:
            samples: list[float] = []
            second: list[float] = []
            for i in range(repeats):
                probe.idle()
                a, b = getattr(probe, name)()
                samples.append(a)
                second.append(b)
                log(f"  {name} #{i + 1}: {a:.2f} s ({SECOND[name]} {b:.2f} s)")
            result[name] = {**_stats(samples), "samples": [round(x, 3) for x in samples]}
            result[f"{name}_{SECOND_KEY[name]}"] = {**_stats(second),
                                                    "samples": [round(x, 3) for x in second]}
    finally:
        probe.idle()
        configure_qos(client, spec)
        for q in spec.spot_qos:
            client.set_gpu_limit(q, None)
    (out / "latencies.json").write_text(json.dumps(result, indent=2))
    return result
