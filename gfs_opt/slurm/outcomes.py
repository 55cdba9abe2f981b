"""Per-job outcomes of a real replay → the same tables and summary as `gfs-opt simulate`.

Sources: the payload's run log (precise wall times of every start, checkpoint and end) and
`sacct --duplicates` (one record per run: how it ended — COMPLETED, PREEMPTED by Slurm,
REQUEUED by the controller — with Slurm's own start/end in whole seconds). Everything is turned
into trace seconds with the replay's clock and poured into a `gfs_opt.sim.recorder.Recorder`, so
`summarize`, `per_class` and `per_pool` compute the metrics exactly as for a simulation.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gfs_opt.model import MILLI, Params
from gfs_opt.sim.metrics import per_class, per_pool, summarize
from gfs_opt.sim.recorder import Recorder
from gfs_opt.slurm.clock import TraceClock
from gfs_opt.slurm.layout import spot_qos
from gfs_opt.slurm.plan import ReplayPlan

EVICTED = {"PREEMPTED": "slurm", "REQUEUED": "controller", "REQUEUE_HOLD": "controller",
           "REQUEUE_FED": "controller"}


@dataclass
class Run:
    start: float                  # wall seconds (payload start, else Slurm's)
    end: float | None             # None: still running at the cut-off
    how: str                      # done | evicted | running
    by: str = ""                  # who evicted: slurm | controller | unknown
    last_ckpt: float = 0.0
    slurm_start: float | None = None
    slurm_end: float | None = None
    payload_start: float | None = None


@dataclass
class JobOutcome:
    trace_id: int
    slurm_id: int | None
    runs: list[Run] = field(default_factory=list)
    status: str = "pending"       # done | running | pending


def read_run_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue    # a line cut by SIGKILL
    return out


def _sacct_state(rec: dict[str, Any]) -> str:
    st = rec.get("state", {})
    cur = st.get("current") if isinstance(st, dict) else st
    return str(cur[0] if isinstance(cur, list) else cur or "")


def job_runs(events: list[dict[str, Any]], records: list[dict[str, Any]], cutoff: float) -> list[Run]:
    """Runs of one job up to the cut-off (wall), from its run log and sacct records."""
    recs = sorted((r for r in records if (r.get("time") or {}).get("start")),
                  key=lambda r: r["time"]["start"])
    by_restart: dict[int, dict[str, Any]] = {}
    for ev in events:
        if ev.get("t", math.inf) > cutoff:
            continue
        d = by_restart.setdefault(int(ev.get("restart", 0)), {"ckpt": []})
        if ev["ev"] == "start":
            d["start"] = float(ev["t"])
        elif ev["ev"] == "ckpt":
            d["ckpt"].append(float(ev["t"]))
        elif ev["ev"] in ("done", "term"):
            d[ev["ev"]] = float(ev["t"])
    runs: list[Run] = []
    n = max(len(recs), max(by_restart, default=-1) + 1)
    for i in range(n):
        rec = recs[i] if i < len(recs) else None
        ev = by_restart.get(i, {"ckpt": []})
        s_start = float(rec["time"]["start"]) if rec else None
        s_end = float(rec["time"]["end"]) if rec and rec["time"].get("end") else None
        # the scheduler's start, not the payload's: launching a step takes 1–4 s on a busy
        # host, which is not queueing; Slurm keeps whole seconds, so take the second's midpoint
        start = s_start + 0.5 if s_start is not None else ev.get("start")
        if start is None or start > cutoff:
            continue
        state = _sacct_state(rec) if rec else ""
        if "done" in ev or state == "COMPLETED":
            end = ev.get("done", s_end)
            how, by = "done", ""
        elif state in EVICTED and (s_end is None or s_end <= cutoff):
            end, how, by = ev.get("term", s_end), "evicted", EVICTED[state]
        elif "term" in ev and s_end is not None and s_end <= cutoff and state not in (
                "CANCELLED", "RUNNING", "TIMEOUT"):
            end, how, by = ev["term"], "evicted", "unknown"
        else:
            end, how, by = None, "running", ""
        if end is not None and end > cutoff:
            end, how, by = None, "running", ""
        ckpts = [c for c in ev["ckpt"] if end is None or c <= end]
        runs.append(Run(start, end, how, by, max(ckpts, default=start), s_start, s_end,
                        ev.get("start")))
    return runs


def collect(plan: ReplayPlan, slurm_ids: dict[int, int], sacct: list[dict[str, Any]],
            log_dir: Path, cutoff: float) -> list[JobOutcome]:
    by_slurm: dict[int, list[dict[str, Any]]] = {}
    for rec in sacct:
        by_slurm.setdefault(int(rec["job_id"]), []).append(rec)
    out = []
    for tid in plan.jobs["job_id"].astype(int):
        sid = slurm_ids.get(tid)
        o = JobOutcome(tid, sid)
        if sid is not None:
            o.runs = job_runs(read_run_log(log_dir / f"{sid}.log"), by_slurm.get(sid, []), cutoff)
            if o.runs and o.runs[-1].how == "done":
                o.status = "done"
            elif o.runs and o.runs[-1].how == "running":
                o.status = "running"
        out.append(o)
    return out


EVICTION_COLUMNS = ["job_id", "slurm_job_id", "cls", "run", "start", "end", "by",
                    "inside_exempt_window"]


@dataclass
class RealRun:
    """What the real replay produced, in the simulator's shapes."""

    recorder: Recorder
    jobs: pd.DataFrame
    checks: dict[str, Any]
    #: one row per eviction: who made it (controller | slurm | unknown), when, inside the window?
    evictions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=EVICTION_COLUMNS))


def to_recorder(plan: ReplayPlan, outcomes: list[JobOutcome], clock: TraceClock, cutoff: float,
                params: Params, quota_log: pd.DataFrame | None = None,
                sample_s: float = 60.0) -> RealRun:
    """Fill a `Recorder` as the simulator would have: jobs table, windows, 60 s samples."""
    state = plan.trace.cluster_state()
    t_end = clock.trace(cutoff)
    rec = Recorder(state, params, plan.t0, plan.t1, sample_s)
    jobs = plan.jobs.set_index("job_id")
    rows = []
    segments: list[tuple[float, float, bool, int, int]] = []  # start, end, hp, milli, pool index
    exempt_evictions = 0
    launch_lag: list[float] = []
    evicted_by: Counter[str] = Counter()
    lp_by: Counter[str] = Counter()
    eviction_rows: list[tuple[Any, ...]] = []
    for o in outcomes:
        j = jobs.loc[o.trace_id]
        hp = j["cls"] == "HP"
        pool = str(j["pool"]) if plan.pool_nodes else plan.pool
        demand = int(j["g"]) * int(j["workers"])
        window = float(j["guarantee_h"]) * 3600.0
        submit = float(j["submit"])
        qt, queued_since = 0.0, submit
        ok = failed = evictions = 0
        lost = held = 0.0
        first_start = math.nan
        end = math.nan
        for k, r in enumerate(o.runs):
            if r.payload_start is not None and r.slurm_start is not None:
                launch_lag.append(r.payload_start - r.slurm_start - 0.5)
            s = max(clock.trace(r.start), queued_since)
            e = t_end if r.end is None else clock.trace(r.end)
            qt += s - queued_since
            if math.isnan(first_start):
                first_start = s
            held += demand / MILLI * max(0.0, e - s)
            segments.append((s, e, bool(hp), demand, state.pool_index[pool]))
            length = max(0.0, e - s)
            if r.how == "done":
                end = e
                if not hp:
                    ok += max(1, math.ceil(length / window - 1e-9))
            elif r.how == "evicted":
                evictions += 1
                evicted_by[r.by] += 1
                if not hp:
                    ok += int(length // window)
                    failed += 1
                lost += demand / MILLI * max(0.0, e - clock.trace(r.last_ckpt))
                inside = bool(r.slurm_start is not None and r.slurm_end is not None and not hp and (
                    r.slurm_end - r.slurm_start < window / clock.speedup - 1e-9))
                exempt_evictions += inside
                if not hp:
                    lp_by[r.by] += 1
                eviction_rows.append((o.trace_id, o.slurm_id, j["cls"], k, s, e, r.by, inside))
                queued_since = e
            elif not hp:
                ok += int(length // window)
        if o.status == "pending":
            qt += t_end - queued_since
        for _ in range(ok):
            rec.window(t_end, pool, True)
        for _ in range(failed):
            rec.window(t_end, pool, False)
        rows.append((o.trace_id, j["cls"], pool, str(j["org"]), int(j["g"]) / MILLI,
                     int(j["workers"]), submit, float(j["duration"]), float(j["guarantee_h"]),
                     first_start, end, qt, end - submit if o.status == "done" else math.nan,
                     evictions, 0, ok, failed, lost, held, o.status))
    rec.jobs = pd.DataFrame(rows, columns=[
        "job_id", "cls", "pool", "org", "gpus_per_worker", "workers", "submit", "duration",
        "guarantee_h", "first_start", "end", "jqt", "jct", "evictions", "requeues",
        "windows_ok", "windows_failed", "lost_gpu_s", "held_gpu_s", "status"])
    rec.end_time = t_end
    _sample(rec, segments, plan.t0, min(plan.t1, t_end), sample_s, len(state.pools))
    checks = {
        "jobs_planned": len(outcomes),
        "jobs_submitted": sum(o.slurm_id is not None for o in outcomes),
        "jobs_done": sum(o.status == "done" for o in outcomes),
        "jobs_running_at_end": sum(o.status == "running" for o in outcomes),
        "jobs_pending_at_end": sum(o.status == "pending" for o in outcomes),
        "hp_evictions": int(rec.jobs.loc[rec.jobs["cls"] == "HP", "evictions"].sum()),
        "lp_evictions_in_exempt_window": exempt_evictions,
        "evictions_by_slurm": evicted_by.get("slurm", 0),
        "evictions_by_controller": evicted_by.get("controller", 0),
        "evictions_unattributed": evicted_by.get("unknown", 0),
        "lp_evictions_by_controller": lp_by.get("controller", 0),
        "lp_evictions_by_slurm": lp_by.get("slurm", 0),
        "lp_evictions_unattributed": lp_by.get("unknown", 0),
        "lp_evictions_controller_pct": (100.0 * lp_by.get("controller", 0) / sum(lp_by.values())
                                        if sum(lp_by.values()) else math.nan),
        "launch_lag_mean_wall_s": float(np.mean(launch_lag)) if launch_lag else math.nan,
        "launch_lag_max_wall_s": float(np.max(launch_lag)) if launch_lag else math.nan,
    }
    checks["jobs_conserved"] = (checks["jobs_done"] + checks["jobs_running_at_end"]
                                + checks["jobs_pending_at_end"] == checks["jobs_planned"])
    if quota_log is not None and not quota_log.empty:
        checks.update(quota_admissions(plan, outcomes, quota_log))
    return RealRun(rec, rec.jobs, checks, pd.DataFrame(eviction_rows, columns=EVICTION_COLUMNS))


def _sample(rec: Recorder, segments: list[tuple[float, float, bool, int, int]], lo: float,
            hi: float, step: float, pools: int = 1) -> None:
    times = np.arange(lo, hi, step)
    used = np.zeros((len(times), pools), dtype=np.int64)
    hp = np.zeros((len(times), pools), dtype=np.int64)
    for s, e, is_hp, m, p in segments:
        a, b = np.searchsorted(times, s, "left"), np.searchsorted(times, e, "left")
        used[a:b, p] += m
        if is_hp:
            hp[a:b, p] += m
    for i, t in enumerate(times):
        rec.sample_t.append(float(t))
        rec.sample_used.append(used[i].copy())
        rec.sample_hp.append(hp[i].copy())
        rec.sample_lp.append(used[i] - hp[i])


def quota_admissions(plan: ReplayPlan, outcomes: list[JobOutcome], quota_log: pd.DataFrame,
                     propagation_s: float = 5.0) -> dict[str, Any]:
    """Spot runs that started while their QOS's GPUs (itself included) exceeded its GrpTRES.

    ``quota_log``: wall time ``t_wall``, ``qos``, ``limit`` (GPUs) as the controller set them.
    A limit takes 1–4.5 s to reach slurmctld, so a start is judged by the most permissive limit
    in force during the ``propagation_s`` before it. Slurm reports whole seconds: a start at
    second ``s`` happened in [s, s + 1), so a limit logged before s + 1 may already have been in
    force (the controller logs after the command returned; a raise logged at s + 0.5 let a job
    start at s + 0.9 that Slurm reports as s).
    """
    jobs = plan.jobs.set_index("job_id")

    runs = []   # (start, end, qos, gpus, resolution of the start time)
    for o in outcomes:
        j = jobs.loc[o.trace_id]
        if j["cls"] == "HP":
            continue
        q = spot_qos(float(j["guarantee_h"]), plan.pool_key(str(j["pool"])))
        for r in o.runs:
            # Slurm's own (whole-second) times on both ends, so a job that starts in the
            # second another one ended is not counted as overlapping it
            s = r.slurm_start if r.slurm_start is not None else r.start
            e = (r.slurm_end if r.slurm_end is not None else r.end) if r.end is not None \
                else math.inf
            res = 1.0 if r.slurm_start is not None else 0.0
            runs.append((s, e, q, int(j["g"]) * int(j["workers"]) // MILLI, res))
    log = quota_log.sort_values("t_wall")
    over = []
    for s, _e, q, _g, res in runs:
        lim = log[log["qos"] == q]
        at_start = lim[lim["t_wall"] <= s]
        # logged in the propagation time before the start or inside its reported second
        window = lim[(lim["t_wall"] > s - propagation_s) & (lim["t_wall"] < s + max(res, 1e-9))]
        if at_start.empty and window.empty:
            continue
        limit = max(float(at_start["limit"].iloc[-1]) if not at_start.empty else -1.0,
                    float(window["limit"].max()) if not window.empty else -1.0)
        using = sum(g for s2, e2, q2, g, _r in runs if q2 == q and s2 <= s < e2)
        if using > limit:
            over.append((s, q, using, limit))
    return {"spot_starts_checked": len(runs), "spot_starts_over_limit": len(over),
            "spot_starts_over_limit_detail": over[:10]}


def real_summary(real: RealRun, price_per_gpu_hour: float = 2.0) -> dict[str, Any]:
    rec = real.recorder
    summary = summarize(rec, price_per_gpu_hour)
    summary.update(real.checks)
    return summary


def real_tables(real: RealRun) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    rec = real.recorder
    return per_class(rec), per_pool(rec), rec.timeseries()
