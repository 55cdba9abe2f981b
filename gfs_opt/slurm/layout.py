"""What the private single-host cluster looks like: its spec, folder layout, ports and config files.

Everything lives under one private folder (default ``$GFS_SLURM_DIR`` or
``/tmp/gfs-opt-slurm``); templates come from ``deploy/slurm/*.in`` in the repository.
"""

from __future__ import annotations

import json
import math
import os
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


def spot_qos(guarantee_h: float) -> str:
    """QOS name of a guarantee class: 1 → ``spot-1h``, 0.5 → ``spot-0.5h``."""
    return f"spot-{guarantee_h:g}h"


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

    def __post_init__(self) -> None:
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
        return [spot_qos(c) for c in self.classes]

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


def render_configs(spec: ClusterSpec, db_password: str) -> dict[str, str]:
    """File name (relative to the private folder) → content."""
    node_lines = "\n".join(
        f"NodeName={n} NodeHostname={spec.host} NodeAddr=127.0.0.1 Port={spec.node_port(i)} "
        f"CPUs={spec.cpus} RealMemory=1024 Gres=gpu:{spec.gpus} State=UNKNOWN"
        for i, n in enumerate(spec.node_names(), start=1))
    values: dict[str, object] = {
        "cluster": spec.cluster, "host": spec.host, "dir": spec.root, "ctld_port": spec.ctld_port,
        "dbd_port": spec.dbd_port, "db_port": spec.db_port, "munge_socket": spec.munge_socket,
        "cred_expire": spec.cred_expire, "sched_interval": spec.sched_interval,
        "sched_min_interval_us": spec.sched_min_interval_us,
        "node_lines": node_lines, "node_range": spec.node_range, "last_gpu": spec.gpus - 1,
        "db_password": db_password,
    }
    return {
        "etc/slurm.conf": _render("slurm.conf.in", values),
        "etc/slurmdbd.conf": _render("slurmdbd.conf.in", values),
        "etc/gres.conf": _render("gres.conf.in", values),
        "etc/my.cnf": _render("my.cnf.in", values),
    }
