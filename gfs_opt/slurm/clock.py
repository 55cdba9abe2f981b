"""Wall time ↔ trace time under a compression factor K: ``t = t0 + K·(wall − wall0)``.

Trace time is what gfs_opt's model speaks (seconds since the trace origin); wall time is Unix
time on this machine. With K = 1 and ``t0 = wall0 − origin`` the clock is the real calendar.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.traces.base import ALIBABA_ORIGIN


@dataclass(frozen=True)
class TraceClock:
    wall0: float
    t0: float
    speedup: float = 1.0

    def __post_init__(self) -> None:
        if not self.speedup > 0:
            raise GfsError(f"speedup must be positive, got {self.speedup}")

    def trace(self, wall: float) -> float:
        return self.t0 + self.speedup * (wall - self.wall0)

    def wall(self, t: float) -> float:
        return self.wall0 + (t - self.t0) / self.speedup

    def now(self) -> float:
        return self.trace(time.time())

    def to_seconds(self, wall_span: float) -> float:
        """A wall duration in trace seconds."""
        return wall_span * self.speedup

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> TraceClock:
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError) as exc:
            raise GfsError(f"{path}: not a clock file ({exc})") from None

    @classmethod
    def calendar(cls, speedup: float = 1.0, t0: float | None = None,
                 origin: pd.Timestamp = ALIBABA_ORIGIN) -> TraceClock:
        """Start now; trace time ``t0`` (default: real seconds since ``origin``)."""
        wall0 = time.time()
        if t0 is None:
            t0 = wall0 - origin.tz_localize("UTC").timestamp()
        return cls(wall0, float(t0), float(speedup))
