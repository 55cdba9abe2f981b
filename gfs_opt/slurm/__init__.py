"""GFS on a real Slurm: a private single-host cluster, a controller, trace replay, sim-vs-real.

Modules, one job each:

* `layout`     — what the private cluster looks like (spec, paths, ports) and its config files
* `procs`      — daemons started and stopped by recorded PID only
* `cluster`    — `gfs-opt slurm up|down|status` (package install, bring-up, QOS, teardown)
* `client`     — the Slurm commands behind one small class (`squeue --json`, `sacctmgr`, …)
* `live`       — the live cluster as gfs_opt model objects (`Round`, placements, windows)
* `bridge`     — the ONLY place that calls gfs_opt's quota / forecast / preemption / policy code
* `controller` — the GFS loop against the live cluster (`gfs-opt slurm controller`)
* `clock`      — wall time ↔ trace time under a compression factor K
* `plan`       — a trace slice turned into what the emulated cluster can run
* `payload`    — the `sleep` job itself (checkpoints, restart overhead, run log)
* `replay`     — submit a plan at compressed times and collect per-job outcomes
* `outcomes`   — run logs + sacct → the same tables and summary as `gfs-opt simulate`
* `compare`    — real vs simulated (with and without the simulator's Slurm model), GFS vs
                 plain Slurm QOS preemption
* `measure`    — the live cluster's latencies the Slurm model and the exempt margin are sized from
"""
