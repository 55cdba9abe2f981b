"""What the private single-host cluster looks like: its spec, folder layout, ports and config files.

Everything lives under one private folder (default ``$GFS_SLURM_DIR`` or
``/tmp/gfs-opt-slurm``); templates come from ``deploy/slurm/*.in`` in the repository.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from string import Template

from gfs_opt.errors import GfsError
from gfs_opt.paths import REPO_ROOT

DEFAULT_DIR = Path("/tmp/gfs-opt-slurm")
TEMPLATES = REPO_ROOT / "deploy" / "slurm"
#: the QOS of HP jobs; spot QOS are named by `spot_qos`
HP_QOS = "hp"
#: the QOS the controller moves an HP job into when it has waited past the safety-net delay:
#: with GFS on, only this QOS may preempt spot jobs (Slurm's preemption as a late safety net)
NET_QOS = "hp-net"
HP_QOSES = (HP_QOS, NET_QOS)
SPEC_FILE = "cluster.json"


def default_dir() -> Path:
    env = os.environ.get("GFS_SLURM_DIR")
    return Path(env).expanduser() if env else DEFAULT_DIR


#: the one partition of a single-pool cluster (`--pools` not given)
DEFAULT_PARTITION = "gpu"


def pool_tag(pool: str) -> str:
    """Short Slurm-safe name of a pool — its GRES type, partition and spot-QOS suffix: the first
    ``-``-separated word, lower case, letters and digits only (``A100-SXM4-80GB`` → ``a100``)."""
    tag = re.sub(r"[^a-z0-9]", "", str(pool).lower().split("-")[0])
    if not tag or not tag[0].isalpha():
        raise GfsError(f"pool {pool!r}: its name must start with a letter (it names a Slurm "
                       "partition and GRES type)")
    return tag


def spot_qos(guarantee_h: float, pool: str | None = None) -> str:
    """QOS name of a guarantee class: 1 → ``spot-1h``, 0.5 → ``spot-0.5h``; on a cluster with
    ``--pools`` one per pool, since GrpTRES is per QOS: (1, "A100") → ``spot-1h-a100``."""
    base = f"spot-{guarantee_h:g}h"
    return base if pool is None else f"{base}-{pool_tag(pool)}"


def partition_of(pool: str | None) -> str:
    """The partition a pool's jobs go to (``gpu`` on a single-pool cluster)."""
    return DEFAULT_PARTITION if pool is None else pool_tag(pool)


def parse_pools(text: str) -> tuple[tuple[str, int], ...]:
    """``A100:8,H800:8`` → (("A100", 8), ("H800", 8)); a bad item is a one-line GfsError."""
    out: list[tuple[str, int]] = []
    for item in (x.strip() for x in text.split(",")):
        name, sep, count = item.rpartition(":")
        if not sep or not name or not count.strip().isdigit():
            raise GfsError(f"--pools {text!r}: expected NAME:NODES[,NAME:NODES…], got {item!r}")
        out.append((name.strip(), int(count)))
    return tuple(out)


def exempt_seconds(guarantee_h: float, speedup: float) -> int:
    """PreemptExemptTime of a class under compression K (whole seconds, at least 1)."""
    return max(1, round(guarantee_h * 3600.0 / speedup))


def hms(seconds: int) -> str:
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h:02d}:{m:02d}:{s:02d}"


@dataclass(frozen=True)
class ClusterSpec:
    """The cluster `gfs-opt slurm up` builds. Two specs with equal fields are the same cluster."""

    dir: str = str(DEFAULT_DIR)
    nodes: int = 4
    gpus: int = 8
    cpus: int = 16                      # per node, declared (config_overrides): jobs need 1 each
    classes: tuple[float, ...] = (1.0,)  # guarantee classes (hours) → one spot QOS each
    speedup: float = 1.0                # compression of the exempt times (K)
    exempt_margin_s: float = 0.0        # wall s added to every PreemptExemptTime (see up --help)
    port_base: int = 16800
    cred_expire: int = 10
    sched_interval: int = 5
    sched_min_interval_us: int = 100_000
    cluster: str = "gfs"
    host: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    #: (pool, nodes) in node order; empty: one untyped pool in partition `gpu` (the default).
    #: With pools, each gets typed GRES ``gpu:<tag>``, its own partition and its own spot QOS.
    pools: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.pools:
            tags = [pool_tag(p) for p, _ in self.pools]
            if len(set(tags)) != len(tags):
                raise GfsError(f"--pools {self.pool_names()}: two pools share the Slurm name "
                               f"{sorted({t for t in tags if tags.count(t) > 1})}")
            if any(n < 1 for _, n in self.pools):
                raise GfsError(f"--pools: every pool needs ≥ 1 node, got {dict(self.pools)}")
            if sum(n for _, n in self.pools) != self.nodes:
                raise GfsError(f"--pools has {sum(n for _, n in self.pools)} nodes but "
                               f"--nodes is {self.nodes}")
        if not 1 <= self.nodes <= 64:
            raise GfsError(f"--nodes must be in 1..64, got {self.nodes}")
        if not 1 <= self.gpus <= 16:
            raise GfsError(f"--gpus must be in 1..16, got {self.gpus}")
        if not self.classes or any(not math.isfinite(c) or c <= 0 for c in self.classes):
            raise GfsError(f"guarantee classes must be positive hours, got {self.classes}")
        if not math.isfinite(self.speedup) or self.speedup <= 0:
            raise GfsError(f"--speedup must be positive, got {self.speedup}")
        if not math.isfinite(self.exempt_margin_s) or self.exempt_margin_s < 0:
            raise GfsError(f"--exempt-margin must be ≥ 0 s, got {self.exempt_margin_s}")
        if not 1024 <= self.port_base <= 65000 - 200:
            raise GfsError(f"--port-base must be in 1024..64800, got {self.port_base}")

    # ---- ports and names --------------------------------------------------------------
    @property
    def root(self) -> Path:
        return Path(self.dir)

    @property
    def db_port(self) -> int:
        return self.port_base + 6

    @property
    def ctld_port(self) -> int:
        return self.port_base + 17

    @property
    def dbd_port(self) -> int:
        return self.port_base + 19

    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    def node_port(self, i: int) -> int:
        return self.port_base + 100 + i

    @property
    def node_range(self) -> str:
        return "n1" if self.nodes == 1 else f"n[1-{self.nodes}]"

    @property
    def spot_qos(self) -> list[str]:
        """Every spot QOS of the cluster (classes × pools when pooled)."""
        if not self.pools:
            return [spot_qos(c) for c in self.classes]
        return [q for p in self.pool_names() for q in self.spot_qos_of(p)]

    def spot_classes(self) -> list[tuple[float, str]]:
        """(guarantee class, spot QOS) of every spot QOS of the cluster."""
        pools: list[str | None] = [*self.pool_names()] or [None]
        return [(c, q) for p in pools for c, q in zip(self.classes, self.spot_qos_of(p),
                                                        strict=True)]

    def pool_names(self) -> list[str]:
        return [p for p, _ in self.pools]

    def _check_pool(self, pool: str | None) -> str | None:
        if not self.pools:
            return None
        if pool not in self.pool_names():
            raise GfsError(f"pool {pool!r}: the cluster has pools {', '.join(self.pool_names())}")
        return pool

    def spot_qos_of(self, pool: str | None) -> list[str]:
        """The spot QOS (one per class) of a pool; the cluster's own without pools."""
        p = self._check_pool(pool)
        return [spot_qos(c, p) for c in self.classes]

    def partition(self, pool: str | None) -> str:
        return partition_of(self._check_pool(pool))

    def nodes_of(self, pool: str | None) -> list[str]:
        """Node names of a pool (all nodes without pools); pools take consecutive nodes."""
        p = self._check_pool(pool)
        if p is None:
            return self.node_names()
        first = 1
        for name, n in self.pools:
            if name == p:
                return [f"n{i}" for i in range(first, first + n)]
            first += n
        raise AssertionError(p)

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus

    # ---- files --------------------------------------------------------------------------
    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    @property
    def db_socket(self) -> Path:
        return self.root / "dbrun" / "mariadb.sock"

    def env(self) -> dict[str, str]:
        """Environment for every Slurm command and daemon of this cluster."""
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        return env

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> ClusterSpec:
        data = json.loads(text)
        data["classes"] = tuple(data.get("classes", (1.0,)))
        data["pools"] = tuple((str(p), int(n)) for p, n in data.get("pools", ()))
        return cls(**data)

    def same_cluster(self, other: ClusterSpec) -> bool:
        """Equal up to the exempt times (which `configure_qos` changes live)."""
        a, b = asdict(self), asdict(other)
        for key in ("speedup", "exempt_margin_s"):
            a.pop(key)
            b.pop(key)
        return a == b

    def exempt(self, guarantee_h: float) -> int:
        """PreemptExemptTime (s) of a class: its compressed window plus the margin."""
        return exempt_seconds(guarantee_h, self.speedup) + math.ceil(self.exempt_margin_s)


def load_spec(folder: Path) -> ClusterSpec | None:
    path = folder / SPEC_FILE
    if not path.exists():
        return None
    try:
        return ClusterSpec.from_json(path.read_text())
    except (ValueError, TypeError, KeyError) as exc:
        raise GfsError(f"{path}: unreadable cluster record ({exc}); run `gfs-opt slurm down`") from None


def _render(name: str, values: dict[str, object]) -> str:
    path = TEMPLATES / name
    if not path.exists():
        raise GfsError(f"template {path} is missing (deploy/slurm/ must sit beside gfs_opt/)")
    try:
        return Template(path.read_text()).substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:
        raise GfsError(f"template {path}: unknown placeholder {exc}") from None


def _range(names: list[str]) -> str:
    """n1..nK → ``n[1-K]`` (consecutive numbers, as `nodes_of` gives them)."""
    nums = [int(n[1:]) for n in names]
    return names[0] if len(nums) == 1 else f"n[{nums[0]}-{nums[-1]}]"


def render_configs(spec: ClusterSpec, db_password: str) -> dict[str, str]:
    """File name (relative to the private folder) → content.

    With pools, node GRES are typed (``gpu:a100:8``) and each pool is its own partition: a
    partition is what a job names to land on one GPU type, and Slurm 22.05 counts an untyped
    ``--gpus-per-task`` request against ``gres/gpu`` — the TRES the spot QOS limit — whatever
    the type, so jobs need no typed request and the per-pool quota is a per-pool QOS."""
    gres = {n: f"gpu:{spec.gpus}" for n in spec.node_names()}
    for p in spec.pool_names():
        for n in spec.nodes_of(p):
            gres[n] = f"gpu:{pool_tag(p)}:{spec.gpus}"
    node_lines = "\n".join(
        f"NodeName={n} NodeHostname={spec.host} NodeAddr=127.0.0.1 Port={spec.node_port(i)} "
        f"CPUs={spec.cpus} RealMemory=1024 Gres={gres[n]} State=UNKNOWN"
        for i, n in enumerate(spec.node_names(), start=1))
    dev = f"{spec.root}/dev/gpu[0-{spec.gpus - 1}]"
    if spec.pools:
        gres_lines = "\n".join(
            f"NodeName={_range(spec.nodes_of(p))} Name=gpu Type={pool_tag(p)} File={dev}"
            for p in spec.pool_names())
        partition_lines = "\n".join(
            f"PartitionName={spec.partition(p)} Nodes={_range(spec.nodes_of(p))} "
            f"Default={'YES' if i == 0 else 'NO'} MaxTime=INFINITE State=UP"
            for i, p in enumerate(spec.pool_names()))
    else:
        gres_lines = f"NodeName={spec.node_range} Name=gpu File={dev}"
        partition_lines = (f"PartitionName={DEFAULT_PARTITION} Nodes={spec.node_range} "
                           "Default=YES MaxTime=INFINITE State=UP")
    values: dict[str, object] = {
        "cluster": spec.cluster, "host": spec.host, "dir": spec.root, "ctld_port": spec.ctld_port,
        "dbd_port": spec.dbd_port, "db_port": spec.db_port, "munge_socket": spec.munge_socket,
        "cred_expire": spec.cred_expire, "sched_interval": spec.sched_interval,
        "sched_min_interval_us": spec.sched_min_interval_us,
        "node_lines": node_lines, "node_range": spec.node_range, "last_gpu": spec.gpus - 1,
        "db_password": db_password, "gres_lines": gres_lines,
        "partition_lines": partition_lines,
    }
    return {
        "etc/slurm.conf": _render("slurm.conf.in", values),
        "etc/slurmdbd.conf": _render("slurmdbd.conf.in", values),
        "etc/gres.conf": _render("gres.conf.in", values),
        "etc/my.cnf": _render("my.cnf.in", values),
    }
