"""The engine's record of one job's life (queue times, runs, checkpoints, window outcomes), which
the recorder turns into the per-job table."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gfs_opt.model import Job


@dataclass(slots=True)
class JobRun:
    """Engine-side life of one job."""

    job: Job
    status: str = "future"          # future → pending → running → … → done
    queued_since: float = 0.0
    queue_time: float = 0.0
    first_start: float = math.nan
    end: float = math.nan
    run_start: float = 0.0
    overhead: float = 0.0           # restart overhead of the current run
    saved_base: float = 0.0         # progress checkpointed before the current run started
    saved: float = 0.0              # progress at the last checkpoint
    ckpt_time: float = 0.0
    window_start: float = 0.0
    run_id: int = 0
    evictions: int = 0
    requeues: int = 0
    windows_ok: int = 0
    windows_failed: int = 0
    windows_ok_drain: int = 0       # of windows_ok / windows_failed: those that started in the
    windows_failed_drain: int = 0   # drain (after the scored window, the quota lifted)
    lost_gpu_s: float = 0.0
    held_gpu_s: float = 0.0
    in_eval: bool = False

    def progress(self, t: float) -> float:
        return self.saved_base + max(0.0, t - self.run_start - self.overhead)
