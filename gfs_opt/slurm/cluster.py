"""`gfs-opt slurm up|down|status`: a private single-host Slurm 22.05 from Debian packages.

Order: munged → MariaDB (private datadir, 127.0.0.1) → slurmdbd → slurmctld → one slurmd per
emulated node; then the QOS (`hp` preempts every spot QOS; one spot QOS per guarantee class with
its PreemptExemptTime). `up` is idempotent: a running cluster with the same spec is left alone
(only the exempt times follow a new ``--speedup``); another spec is torn down and rebuilt.
`down` cancels jobs and stops the daemons by recorded PID (TERM, KILL after 10 s), stage by
stage, and returns only when every thread of every daemon it started (and every job process they
spawned) has exited — or raises naming the survivors.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gfs_opt.errors import GfsError
from gfs_opt.slurm import procs
from gfs_opt.slurm.client import SlurmClient
from gfs_opt.slurm.layout import (
    HP_QOS,
    NET_QOS,
    SPEC_FILE,
    ClusterSpec,
    hms,
    load_spec,
    render_configs,
)

PACKAGES = ["slurmctld", "slurmd", "slurm-client", "slurmdbd", "munge", "mariadb-server"]
BINARIES = ["slurmctld", "slurmd", "slurmdbd", "sbatch", "sacctmgr", "munged", "mariadbd",
            "mariadb-install-db", "mariadb"]
#: stop order: compute nodes and controller first, the database last
STOP_ORDER = ["slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"]
DAEMON_MARK = "GFS_SLURM_DAEMON"
DB_PASSWORD_FILE = "db.secret"


@dataclass
class Timings:
    steps: dict[str, float] = field(default_factory=dict)

    def timed(self, name: str, fn: Callable[[], object]) -> object:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.steps[name] = self.steps.get(name, 0.0) + time.perf_counter() - t0

    def line(self) -> str:
        total = sum(self.steps.values())
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in self.steps.items())
        return f"{total:.1f} s ({parts})"


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None]


def install_packages(log: Callable[[str], None] = print) -> bool:
    """apt-get the Debian packages when a binary is missing; False when nothing was needed."""
    missing = missing_binaries()
    if not missing:
        return False
    if os.geteuid() != 0:
        raise GfsError(f"Slurm is not installed ({', '.join(missing)} missing) and installing "
                       f"needs root: apt-get install {' '.join(PACKAGES)}")
    if shutil.which("apt-get") is None:
        raise GfsError(f"Slurm is not installed ({', '.join(missing)} missing) and apt-get is "
                       "not available: install Slurm 22.05, munge and MariaDB by hand")
    log(f"installing {' '.join(PACKAGES)} (missing: {', '.join(missing)})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-q"],
                 ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]):
        p = subprocess.run(argv, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            tail = (p.stderr or p.stdout).strip().splitlines()
            raise GfsError(f"`{' '.join(argv[:3])}` failed: {tail[-1] if tail else p.returncode}")
    still = missing_binaries()
    if still:
        raise GfsError(f"installed the packages but {', '.join(still)} are still missing")
    return True


# ---- waiting helpers -------------------------------------------------------------------------
def _wait(what: str, check: Callable[[], bool], timeout_s: float, log_file: Path | None,
          records: list[procs.ProcRecord] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if records and not all(procs.alive(r) for r in records):
            dead = [r.name for r in records if not procs.alive(r)]
            raise GfsError(f"{', '.join(dead)} exited while waiting for {what}"
                           + (f"; see {log_file}" if log_file else ""))
        time.sleep(0.2)
    raise GfsError(f"timed out after {timeout_s:.0f} s waiting for {what}"
                   + (f"; see {log_file}" if log_file else ""))


def _unix_socket_open(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# ---- bring-up ----------------------------------------------------------------------------
class Bringup:
    """One bring-up; every started daemon is recorded at once so a failure can be undone."""

    def __init__(self, spec: ClusterSpec, log: Callable[[str], None]) -> None:
        self.spec = spec
        self.log = log
        self.root = spec.root
        self.records: list[procs.ProcRecord] = []
        self.env = spec.env()
        self.env[DAEMON_MARK] = str(self.root)
        self.client = SlurmClient(spec)

    def _start(self, name: str, argv: list[str], log: Path) -> procs.ProcRecord:
        rec = procs.start(name, argv, log, self.env, cwd=self.root)
        self.records.append(rec)
        procs.save(self.root, self.records)
        return rec

    def prepare(self) -> None:
        r = self.root
        for parent in r.resolve().parents:   # MariaDB runs as `mysql` and must reach its datadir
            if parent.exists() and not os.stat(parent).st_mode & 0o001:
                raise GfsError(f"--dir {r}: the MariaDB user cannot enter {parent} (mode "
                               f"{oct(os.stat(parent).st_mode & 0o777)}); pick a folder whose "
                               "parents are world-executable, e.g. under /tmp")
        for sub in ("etc", "run", "log", "state", "dev", "munge", "db", "dbrun", "jobs"):
            (r / sub).mkdir(parents=True, exist_ok=True)
        for n in self.spec.node_names():
            (r / "spool" / n).mkdir(parents=True, exist_ok=True)
        os.chmod(r, 0o755)
        os.chmod(r / "munge", 0o700)
        secret = r / DB_PASSWORD_FILE
        if not secret.exists():
            secret.write_text(secrets.token_hex(16))
            os.chmod(secret, 0o600)
        for name, text in render_configs(self.spec, secret.read_text().strip()).items():
            path = r / name
            path.write_text(text)
            os.chmod(path, 0o600 if name.endswith("slurmdbd.conf") else 0o644)
        for i in range(self.spec.gpus):
            dev = r / "dev" / f"gpu{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))   # like /dev/null
        key = r / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(secrets.token_bytes(1024))
            os.chmod(key, 0o400)
        shutil.chown(r / "db", "mysql", "mysql")
        shutil.chown(r / "dbrun", "mysql", "mysql")
        (r / SPEC_FILE).write_text(self.spec.to_json())

    def munge(self) -> None:
        m = self.root / "munge"
        self.spec.munge_socket.unlink(missing_ok=True)    # stale after a machine reset
        self._start("munged", ["munged", "--foreground", "--force", f"--key-file={m / 'munge.key'}",
                               f"--socket={self.spec.munge_socket}", f"--pid-file={m / 'munged.pid'}",
                               f"--seed-file={m / 'munged.seed'}", f"--log-file={m / 'munged.log'}",
                               "--num-threads=2"],
                    self.root / "log" / "munged.out")
        _wait("the munge socket", lambda: _unix_socket_open(self.spec.munge_socket), 15, m / "munged.log", self.records)

    def mariadb(self) -> None:
        cnf = self.root / "etc" / "my.cnf"
        if not (self.root / "db" / "mysql").exists():
            p = subprocess.run(["mariadb-install-db", f"--defaults-file={cnf}", "--user=mysql",
                                "--auth-root-authentication-method=socket", "--skip-test-db"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise GfsError(f"mariadb-install-db failed: {(p.stderr or p.stdout).strip()[-300:]}")
        # A machine reset leaves the old server's socket and pid file behind; a stale socket
        # would pass the readiness check below before the new server listens.
        for stale in (self.spec.db_socket, self.root / "dbrun" / "mariadb.pid"):
            stale.unlink(missing_ok=True)
        self._start("mariadbd", ["mariadbd", f"--defaults-file={cnf}"],
                    self.root / "log" / "mariadbd.out")
        _wait("MariaDB", lambda: _unix_socket_open(self.spec.db_socket), 60, self.root / "dbrun" / "mariadb.log",
              self.records)
        pw = (self.root / DB_PASSWORD_FILE).read_text().strip()
        sql = (f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{pw}';"
               "CREATE DATABASE IF NOT EXISTS slurm_acct_db;"
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")
        p = subprocess.run(["mariadb", "--no-defaults", f"--socket={self.spec.db_socket}", "-u",
                            "root", "-e", sql], capture_output=True, text=True)
        if p.returncode != 0:
            raise GfsError(f"creating the slurm database user failed: {p.stderr.strip()}")

    def slurmdbd(self) -> None:
        self._start("slurmdbd", ["slurmdbd", "-D"], self.root / "log" / "slurmdbd.out")
        _wait("slurmdbd", lambda: _port_open(self.spec.dbd_port), 60,
              self.root / "log" / "slurmdbd.log", self.records)
        out = self.client.run(["sacctmgr", "-P", "-n", "show", "cluster", "format=Cluster"])
        if self.spec.cluster not in out.split():
            self.client.sacctmgr("add", "cluster", self.spec.cluster)

    def slurmctld(self) -> None:
        self._start("slurmctld", ["slurmctld", "-D", "-f", str(self.spec.conf)],
                    self.root / "log" / "slurmctld.out")
        _wait("slurmctld", self.client.ping, 60, self.root / "log" / "slurmctld.log", self.records)

    def slurmd(self) -> None:
        for n in self.spec.node_names():
            self._start("slurmd", ["slurmd", "-D", "-N", n, "-f", str(self.spec.conf)],
                        self.root / "log" / f"slurmd-{n}.out")

        def idle() -> bool:
            nodes = self.client.nodes()
            up = [n for n in nodes if not {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING"} & set(
                _state_list(n))]
            return len(up) >= self.spec.nodes
        _wait(f"{self.spec.nodes} nodes to come up", idle, 90, self.root / "log", self.records)

    def accounting(self) -> None:
        _wait("the gres/gpu TRES", lambda: "gres/gpu" in self.client.tres(), 60,
              self.root / "log" / "slurmctld.log", self.records)
        configure_qos(self.client, self.spec)


def _state_list(node: dict) -> list[str]:
    st = node.get("state", "")
    flags = node.get("state_flags", [])
    return [str(st).upper(), *(str(f).upper() for f in flags)]


def configure_qos(client: SlurmClient, spec: ClusterSpec, hp_preempts: bool = True) -> None:
    """Create or update QOS `hp`, `hp-net` and one spot QOS per class (exempt time = class / K).

    ``hp_preempts``: Slurm preempts spot jobs for every HP job (plain QOS preemption). Off (GFS
    on), `hp` preempts nothing and only `hp-net` does — the QOS the controller moves an HP job
    into once it has waited past its safety-net delay — so every eviction the controller can
    make is the controller's: Slurm's scheduler would otherwise preempt on the HP job's
    submission, before any poll could see it (docs/slurm-model.md, "who evicts").
    """
    have = {q["name"] for q in client.qos_table()}
    for d, name in spec.spot_classes():
        settings = {"Priority": "10", "PreemptMode": "requeue",
                    "PreemptExemptTime": hms(spec.exempt(d))}
        if name not in have:
            client.sacctmgr("add", "qos", name, *(f"{k}={v}" for k, v in settings.items()))
        else:
            client.set_qos(name, **settings)
    preempt = ",".join(spec.spot_qos)
    for name, target in ((HP_QOS, preempt if hp_preempts else ""), (NET_QOS, preempt)):
        if name not in have:
            client.sacctmgr("add", "qos", name, "Priority=1000")
        # an empty value clears the list (sacctmgr's `Preempt=''`)
        client.set_qos(name, Priority="1000", Preempt=target)


def ensure_accounts(client: SlurmClient, spec: ClusterSpec, accounts: list[str],
                    user: str = "root") -> None:
    """Accounts (= tenants) with the submitting user allowed every QOS of the cluster."""
    have = client.accounts()
    new = [a for a in accounts if a not in have]
    if new:
        client.sacctmgr("add", "account", ",".join(new), f"Cluster={spec.cluster}")
    qos = ",".join(["normal", HP_QOS, NET_QOS, *spec.spot_qos])
    rc, out, err = client.run_full(["sacctmgr", "-i", "add", "user", user,
                                    f"Account={','.join(accounts)}", f"Cluster={spec.cluster}"],
                                   check=False)
    # exit 1 with "Nothing new added" and no error is sacctmgr's way of saying "already there"
    if rc != 0 and (err.strip() or "Nothing new added" not in out):
        raise GfsError(f"sacctmgr could not give user {user} accounts {accounts}: "
                       f"{(err or out).strip().splitlines()[-1]}")
    client.sacctmgr("modify", "user", user, "set", f"QOS={qos}", "DefaultQOS=normal")


def _cluster_alive(folder: Path) -> tuple[list[procs.ProcRecord], list[procs.ProcRecord]]:
    recs = procs.load(folder)
    return [r for r in recs if procs.alive(r)], [r for r in recs if not procs.alive(r)]


def up(spec: ClusterSpec, install: bool = True, log: Callable[[str], None] = print) -> Timings:
    timings = Timings()
    if os.geteuid() != 0:
        raise GfsError("`gfs-opt slurm up` must run as root (daemons, device files, apt-get)")
    if install:
        timings.timed("install", lambda: install_packages(log))
    elif missing_binaries():
        raise GfsError(f"Slurm is not installed ({', '.join(missing_binaries())} missing); "
                       "drop --no-install")
    root = spec.root
    old = load_spec(root)
    if old is not None:
        live, dead = _cluster_alive(root)
        if live and not dead and old.same_cluster(spec):
            if (old.speedup, old.exempt_margin_s) != (spec.speedup, spec.exempt_margin_s):
                configure_qos(SlurmClient(spec), spec)
                (root / SPEC_FILE).write_text(spec.to_json())
                log(f"cluster already up; exempt times set for speedup ×{spec.speedup:g}"
                    f" + {spec.exempt_margin_s:g} s")
            else:
                log(f"cluster already up in {root} ({len(live)} daemons)")
            return timings
        log("stopping the previous cluster (different spec or a daemon died)")
        down(root, log=log)
    elif (root.exists() and any(root.iterdir()) and not (root / procs.PIDS_FILE).exists()
          and not (root / "etc" / "slurm.conf").exists()):
        raise GfsError(f"{root} is not empty and holds no gfs-opt cluster: choose another --dir")
    # fresh state: job and node state of an earlier cluster must not leak into this one
    for sub in ("state", "spool", "db", "jobs"):
        shutil.rmtree(root / sub, ignore_errors=True)
    b = Bringup(spec, log)
    try:
        timings.timed("prepare", b.prepare)
        timings.timed("munged", b.munge)
        timings.timed("mariadb", b.mariadb)
        timings.timed("slurmdbd", b.slurmdbd)
        timings.timed("slurmctld", b.slurmctld)
        timings.timed("slurmd", b.slurmd)
        timings.timed("qos", b.accounting)
    except BaseException:
        log("bring-up failed; stopping what was started")
        down(root, log=lambda _m: None)
        raise
    return timings


def down(folder: Path, log: Callable[[str], None] = print, timeout_s: float = 10.0) -> Timings:
    timings = Timings()
    recs = procs.load(folder)
    spec = load_spec(folder)
    live = [r for r in recs if procs.alive(r)]
    if spec is not None and any(r.name == "slurmctld" for r in live):
        client = SlurmClient(spec, timeout_s=15)

        def cancel() -> None:
            try:
                client.cancel_all()
                _wait("jobs to end", lambda: not [j for j in client.jobs() if _active(j)], 20, None)
            except GfsError as exc:
                log(f"warning: {exc}")
        timings.timed("cancel", cancel)
    outcome: dict[str, str] = {}

    def stop_daemons() -> None:
        # one stage at a time (slurmd and slurmctld before their database), each stage waited
        # for in full, so `down && up` never meets a daemon of this cluster still shutting down
        for name in STOP_ORDER:
            group = [r for r in recs if r.name == name]
            for r, how in zip(group, procs.stop_all(group, timeout_s), strict=True):
                outcome[f"{name}[{r.pid}]"] = how
    timings.timed("stop", stop_daemons)

    def stop_strays() -> None:
        # job steps and payloads our slurmd started carry the cluster's marker in their
        # environment; recorded now (PID + start time) so a reused PID is never signalled
        found = [procs.pid_record(pid, "job process")
                 for pid in procs.strays(f"{DAEMON_MARK}={folder}", {r.pid for r in recs})]
        stray = [r for r in found if r is not None]
        if stray:
            for r, how in zip(stray, procs.stop_all(stray, timeout_s), strict=True):
                outcome[f"job process[{r.pid}]"] = how
            log(f"stopped {len(stray)} leftover job process(es) of this cluster: "
                f"{[r.pid for r in stray]}")
    timings.timed("strays", stop_strays)
    if recs:
        procs.save(folder, [r for r in recs if procs.alive(r)])
        if not [r for r in recs if procs.alive(r)]:
            (folder / procs.PIDS_FILE).unlink(missing_ok=True)
            (folder / SPEC_FILE).unlink(missing_ok=True)
    left = [k for k, v in outcome.items() if v == "still running"]
    if left:
        raise GfsError(f"could not stop {', '.join(left)} (TERM, then KILL after "
                       f"{timeout_s:g} s): see `ps -p` for them; the PID record is kept")
    if not recs:
        log(f"no cluster recorded in {folder}")
    return timings


def _active(job: dict) -> bool:
    st = job.get("job_state", "")
    states = st if isinstance(st, list) else [st]
    return any(s in ("RUNNING", "COMPLETING", "CONFIGURING", "PENDING", "SUSPENDED")
               for s in states)


def status(folder: Path) -> dict[str, object]:
    spec = load_spec(folder)
    recs = procs.load(folder)
    out: dict[str, object] = {
        "dir": str(folder), "spec": None if spec is None else replace(spec),
        "daemons": [(r.name, r.pid, procs.alive(r)) for r in recs],
    }
    if spec is not None and any(r.name == "slurmctld" and procs.alive(r) for r in recs):
        client = SlurmClient(spec, timeout_s=15)
        try:
            out["nodes"] = [(n.get("name"), "+".join(_state_list(n))) for n in client.nodes()]
            out["qos"] = client.qos_table()
            jobs = client.jobs()
            counts: dict[str, int] = {}
            for j in jobs:
                st = j.get("job_state", "?")
                key = st if isinstance(st, str) else "+".join(st)
                counts[key] = counts.get(key, 0) + 1
            out["jobs"] = counts
        except GfsError as exc:
            out["error"] = str(exc)
    return out
