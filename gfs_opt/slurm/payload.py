"""The replayed job: sleeps for its (compressed) duration, with the simulator's checkpoint model.

Run as ``python -S -E payload.py`` by the batch script (standard library only, so it starts in
milliseconds). Environment:

``GFS_WORK``      seconds of work (duration / K)
``GFS_WINDOW``    guarantee window in seconds (class·3600 / K); 0 = no checkpoints (HP)
``GFS_OVERHEAD``  restart overhead in seconds, paid on every restart (simulator: 40/60 s / K)
``GFS_STATE``     folder for the progress file and the run log (shared by every run of the job)

Model (as `gfs_opt.sim.engine`): a run started at s with saved progress P ends at
s + overhead + (work − P); at each window end s + k·window the progress is checkpointed; SIGUSR1
(the controller's checkpoint request) checkpoints now; SIGTERM (requeue or Slurm preemption)
ends the run, losing the work since the last checkpoint. Every event is one JSON line in
``GFS_STATE/<job id>.log`` with a precise wall time.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def main() -> int:
    work = float(os.environ["GFS_WORK"])
    window = float(os.environ.get("GFS_WINDOW", "0") or 0)
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    overhead = float(os.environ.get("GFS_OVERHEAD", "0") or 0) if restarts else 0.0
    folder = os.environ["GFS_STATE"]
    job = os.environ.get("SLURM_JOB_ID", str(os.getpid()))
    ckpt_path = os.path.join(folder, f"{job}.ckpt")
    log_path = os.path.join(folder, f"{job}.log")
    start = time.time()
    try:
        with open(ckpt_path) as fh:
            saved_base = float(fh.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        saved_base = 0.0
    saved = saved_base

    def log(event: str, **kw: float | int | str) -> None:
        with open(log_path, "a") as fh:
            fh.write(json.dumps({"ev": event, "t": time.time(), "restart": restarts, **kw}) + "\n")

    def progress(now: float) -> float:
        return min(work, saved_base + max(0.0, now - start - overhead))

    def checkpoint(why: str) -> None:
        nonlocal saved
        saved = progress(time.time())
        tmp = ckpt_path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(f"{saved:.6f}")
        os.replace(tmp, ckpt_path)
        log("ckpt", saved=saved, why=why)

    def on_term(signum: int, _frame: object) -> None:
        log("term", progress=progress(time.time()), saved=saved, signal=signum)
        sys.exit(128 + signum)

    signal.signal(signal.SIGUSR1, lambda _s, _f: checkpoint("signal"))
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    log("start", saved=saved_base, overhead=overhead, work=work, window=window,
        nodes=os.environ.get("SLURM_JOB_NODELIST", ""), gpus=os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    done_at = start + overhead + (work - saved_base)
    k = 1
    while True:
        now = time.time()
        if now >= done_at:
            break
        next_window = start + k * window if window > 0 else float("inf")
        if now >= next_window:
            checkpoint("window")
            k += 1
            continue
        time.sleep(max(0.0, min(done_at, next_window) - now))
    log("done", progress=work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
