"""The Slurm commands behind one small class. Slurm 22.05 has ``--json`` for squeue, sacct and
sinfo only; scontrol and sacctmgr are parsed from their parsable (``-P``) output.

Every call runs with ``SLURM_CONF`` pointing at the private cluster, and a failing command
becomes a one-line `SlurmError` naming the command and Slurm's own message.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from gfs_opt.errors import GfsError
from gfs_opt.slurm.layout import ClusterSpec


class SlurmError(GfsError):
    """A Slurm command failed."""


class SlurmClient:
    def __init__(self, spec: ClusterSpec, timeout_s: float = 60.0) -> None:
        self.spec = spec
        self.env = spec.env()
        self.timeout_s = timeout_s
        self.calls = 0
        self.call_s = 0.0      # wall seconds spent in Slurm commands (controller overhead)

    def run(self, argv: Sequence[str], check: bool = True, input_text: str | None = None,
            timeout_s: float | None = None) -> str:
        return self.run_full(argv, check, input_text, timeout_s)[1]

    def run_full(self, argv: Sequence[str], check: bool = True, input_text: str | None = None,
                 timeout_s: float | None = None) -> tuple[int, str, str]:
        """(exit code, stdout, stderr); with ``check`` a non-zero exit raises `SlurmError`."""
        t0 = time.perf_counter()
        try:
            p = subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                               timeout=timeout_s or self.timeout_s, input=input_text)
        except FileNotFoundError:
            raise SlurmError(f"{argv[0]} not found: install Slurm with `gfs-opt slurm up`") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"`{' '.join(argv[:3])} …` timed out after "
                             f"{timeout_s or self.timeout_s:.0f} s") from None
        finally:
            self.calls += 1
            self.call_s += time.perf_counter() - t0
        if check and p.returncode != 0:
            msg = (p.stderr or p.stdout).strip().splitlines()
            raise SlurmError(f"`{' '.join(argv[:4])}` failed (exit {p.returncode}): "
                             f"{msg[-1] if msg else 'no message'}")
        return p.returncode, p.stdout, p.stderr

    # ---- reading --------------------------------------------------------------------------
    def jobs(self) -> list[dict[str, Any]]:
        """Every job slurmctld still knows (pending, running, and finished within MinJobAge)."""
        return json.loads(self.run(["squeue", "--json", "--states=all"])).get("jobs", [])

    def accounting(self, job_ids: Sequence[int] | None = None, since: str = "now-2days",
                   ) -> list[dict[str, Any]]:
        """sacct records, one per run of a job (``--duplicates``: requeued runs are kept)."""
        argv = ["sacct", "--json", "--duplicates", "--allusers", f"--starttime={since}"]
        if job_ids:
            argv.append("--jobs=" + ",".join(str(j) for j in job_ids))
        return json.loads(self.run(argv)).get("jobs", [])

    def nodes(self) -> list[dict[str, Any]]:
        return json.loads(self.run(["sinfo", "--json"])).get("nodes", [])

    def ping(self) -> bool:
        return "UP" in self.run(["scontrol", "ping"], check=False)

    def show_job_detail(self, job_id: int) -> str:
        return self.run(["scontrol", "-d", "show", "job", str(job_id)], check=False)

    def qos_table(self) -> list[dict[str, str]]:
        out = self.run(["sacctmgr", "-P", "-n", "show", "qos",
                        "format=Name,Priority,Preempt,PreemptMode,PreemptExemptTime,GrpTRES"])
        keys = ["name", "priority", "preempt", "preempt_mode", "exempt", "grp_tres"]
        return [dict(zip(keys, line.split("|"), strict=False)) for line in out.splitlines() if line]

    def tres(self) -> list[str]:
        out = self.run(["sacctmgr", "-P", "-n", "show", "tres", "format=Type,Name"])
        return [line.replace("|", "/").rstrip("/") for line in out.splitlines() if line]

    def accounts(self) -> set[str]:
        out = self.run(["sacctmgr", "-P", "-n", "show", "account", "format=Account"])
        return {line.strip() for line in out.splitlines() if line.strip()}

    # ---- acting ---------------------------------------------------------------------------
    def sacctmgr(self, *args: str) -> str:
        return self.run(["sacctmgr", "-i", *args])

    def set_qos(self, name: str, **settings: str) -> None:
        self.sacctmgr("modify", "qos", name, "set", *(f"{k}={v}" for k, v in settings.items()))

    def set_gpu_limit(self, qos: str, gpus: int | None) -> None:
        """GrpTRES=gres/gpu=Q on a QOS; None lifts the limit."""
        self.set_qos(qos, GrpTRES=f"gres/gpu={-1 if gpus is None else int(gpus)}")

    def submit(self, script: str, options: Sequence[str]) -> int:
        out = self.run(["sbatch", "--parsable", *options], input_text=script)
        try:
            return int(out.strip().split(";")[0])
        except ValueError:
            raise SlurmError(f"sbatch returned no job id: {out.strip()!r}") from None

    def signal(self, job_id: int, sig: str, timeout_s: float = 3.0) -> None:
        """Signal the batch script of a running job (a checkpoint request). scancel retries for a
        minute while a job "can not be altered now" (e.g. Slurm is preempting it): we do not."""
        self.run(["scancel", "--batch", f"--signal={sig}", str(job_id)], timeout_s=timeout_s)

    def requeue(self, job_id: int, timeout_s: float = 10.0) -> None:
        self.run(["scontrol", "requeue", str(job_id)], timeout_s=timeout_s)

    def set_job_qos(self, job_id: int, qos: str) -> None:
        self.run(["scontrol", "update", f"jobid={job_id}", f"qos={qos}"], timeout_s=10.0)

    def cancel_all(self) -> None:
        # scancel takes one partition (a comma list matches none): one call per pool
        parts = [self.spec.partition(p) for p in self.spec.pool_names()] or [
            self.spec.partition(None)]
        for part in parts:
            self.run(["scancel", f"--partition={part}"], check=False)
