"""Calibrated synthetic Alibaba-like trace (cluster-trace-v2026-spot-gpu schema).

`synthesize` returns raw node and job frames in the real file layout; `synth_to_dir` writes them
as ``node_info_df.csv`` / ``job_info_df.csv``; `builtin_trace` gives ready `Trace` objects for the
built-in setups. At scale 1 the trace matches every statistic of ``calibration_targets.json``
within tolerance (see `gfs_opt.traces.stats`), and it is driven by the real aggregates rather than
by textbook distributions:

* arrivals — the real per-hour submission counts (`synth_arrivals`);
* job class — the real per-day HP / Spot counts (`synth_arrivals`);
* org, GPU model, requests — the real org and model margins and org model mix, per-model request
  profiles matched to the real per-model demand (`synth_requests`);
* timing of big gangs — dealt to the hours where the real trace submitted big demand
  (`synth_timing`);
* durations — per-class CDFs fitted to the real buckets and quantiles, censored at the end of
  the recording as the real trace is (`synth_durations`), and coupled to job size, model and
  week so the GPU-seconds land where the real ones do (`synth_coupling`);
* the cluster — the real node file, stratified-sampled when scaled (`synth_cluster`);
* residents — 3,588 HP jobs with submit 0 holding the real hour-0 GPU load and GPU-seconds of
  each model (`synth_residents`).

Stages draw from independent child streams of ``SeedSequence(seed)``, so one seed gives one
trace, byte for byte, and a pool filter or window cut never changes the jobs it keeps.

Scaling by ``scale < 1`` thins jobs and nodes alike (each model keeps its share of nodes), so the
requested-GPU pressure of every pool stays as in the full trace.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.traces.alibaba import trace_from_frames
from gfs_opt.traces.base import ALIBABA_ORIGIN, Trace, parse_time
from gfs_opt.traces.synth_arrivals import DAY, HOUR, regular_hour_counts, spot_mask, submit_times
from gfs_opt.traces.synth_cluster import scale_nodes
from gfs_opt.traces.synth_coupling import Margin, coupled_durations, size_bucket
from gfs_opt.traces.synth_durations import censor
from gfs_opt.traces.synth_inputs import MODELS, RealAggregates, load_aggregates
from gfs_opt.traces.synth_requests import (
    draw_cells,
    fit_org_model_table,
    narrow_gangs,
    sample_cpus,
    sample_requests,
)
from gfs_opt.traces.synth_residents import Residents, make_residents
from gfs_opt.traces.synth_timing import deal_to_hours

NODE_COLUMNS_RAW = ["gpu_model", "gpu_capacity_num", "cpu_num", "node_name"]
JOB_COLUMNS_RAW = ["job_name", "organization", "gpu_model", "cpu_request", "gpu_request",
                   "worker_num", "submit_time", "duration", "job_type"]
PAPER_A100_GPUS = 2296  # the paper's simulated cluster: 287 nodes × 8 A100
# Largest gang, as a share of its pool's GPUs, at scale → 0 (1 at full scale, linear between).
# Real gangs reach ~40–80 % of a 432-node pool; copied unchanged into a 20-node pool they would
# need the whole pool at once and, as HP placement goes largest-first, stall every job behind
# them. A narrowed gang runs proportionally longer, so it keeps its GPU-seconds.
MIN_GANG_SHARE = 0.25


@dataclass(frozen=True)
class Setup:
    """A named synthetic setup. ``lp_from``: LP jobs are kept only from then on (the window to
    score); ``carry_in``: HP jobs still running at ``start`` are kept, re-submitted at ``start``
    with their remaining duration, so a late window starts with a realistically loaded cluster."""

    scale: float = 1.0
    pools: tuple[str, ...] | None = None
    start: str | None = None
    end: str | None = None
    lp_from: str | None = None
    carry_in: bool = False
    about: str = ""


SETUPS: dict[str, Setup] = {
    "synthetic": Setup(about="full-scale Alibaba-like trace: 4,278 nodes, ≈ 466,867 jobs, Mar–Aug 2024"),
    "paper-a100": Setup(
        scale=PAPER_A100_GPUS / 3456, pools=("A100-SXM4-80GB",),
        about="the paper's A100-only cluster (287 × 8 = 2,296 GPUs); A100 jobs, HP and Spot both "
              "thinned by 2296/3456 so pressure matches the real A100 pool (= medium LP load)"),
    # A10 is left out on purpose: the real A10 jobs ask for 1.33× the A10 pool's GPU-seconds
    # (52.8 B vs 2,494 GPUs × 184 days), so any faithful A10 replay queues HP jobs without end
    "small": Setup(
        scale=0.05, pools=("A100-SXM4-80GB", "GPU-series-1"), start="2024-07-11",
        end="2024-08-01", lp_from="2024-07-22", carry_in=True,
        about="demo: A100 + GPU-series-1 at 5 % scale (71 nodes, 248 GPUs), 3 weeks of HP "
              "(running jobs carried in at the start), LP in the last 10 days"),
}


def to_seconds(value: str | float | int | None, what: str) -> float | None:
    """'YYYY-MM-DD' (midnight, trace origin 2024-03-01) or a number of seconds."""
    return parse_time(value, ALIBABA_ORIGIN, f"--{what}")


def _resolve(scale: float, pools: list[str] | tuple[str, ...] | None, start: str | float | None,
             end: str | float | None,
             setup: str | None) -> tuple[float, list[str] | None, float | None, float | None, Setup]:
    if setup is not None:
        if setup not in SETUPS:
            raise GfsError(f"unknown setup {setup!r}; built-in setups: {', '.join(SETUPS)}")
        s = SETUPS[setup]
        # a built-in setup fixes the cluster; explicit start/end still narrow its window
        scale, pools = s.scale, list(s.pools) if s.pools else None
        start = start if start is not None else s.start
        end = end if end is not None else s.end
    else:
        s = Setup()
    if not (0.0 < float(scale) <= 1.0):
        raise GfsError(f"--scale {scale}: must be in (0, 1] (1 = the full real trace)")
    if pools:
        unknown = sorted(set(pools) - set(MODELS))
        if unknown:
            raise GfsError(f"unknown pool(s) {', '.join(unknown)}; GPU models: {', '.join(MODELS)}")
    lo, hi = to_seconds(start, "start"), to_seconds(end, "end")
    if lo is not None and hi is not None and hi <= lo:
        raise GfsError(f"--end ({end}) must be after --start ({start})")
    return float(scale), list(pools) if pools else None, lo, hi, s


def synthesize(seed: int = 0, scale: float = 1.0, pools: list[str] | None = None,
               start: str | float | None = None, end: str | float | None = None,
               setup: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(nodes_raw, jobs_raw) in the real Alibaba v2026 column order; deterministic per seed.

    ``scale`` in (0, 1] thins jobs and nodes together; ``start``/``end`` ('YYYY-MM-DD' or seconds
    since 2024-03-01, end exclusive) keep jobs submitted in the window plus the residents (submit
    0); ``pools`` keeps those GPU models; ``setup`` names a built-in setup (`SETUPS`), which fixes
    scale and pools (``start``/``end`` given explicitly still override its window).
    """
    scale, pools, lo, hi, spec = _resolve(scale, pools, start, end, setup)
    agg = load_aggregates()
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(9)]
    nodes = scale_nodes(agg.nodes, scale, streams[0])

    n_res_real = int(agg.targets["resident_hp_jobs_at_t0"])
    n_res = n_res_real if scale >= 1 else int(streams[1].binomial(n_res_real, scale))
    counts = regular_hour_counts(agg.hourly_jobs, n_res_real, scale, streams[1])
    submit = submit_times(counts, streams[1])
    is_spot = spot_mask(submit, agg.daily_hp, agg.daily_spot, n_res_real, streams[2])

    table = fit_org_model_table(agg)
    org, model = draw_cells(table, submit.size, streams[4])
    res = make_residents(agg, table, nodes, n_res, streams[5])
    g, w = sample_requests(model, agg, nodes, streams[6])
    hour_demand = agg.hourly_demand.copy()
    hour_demand[0] = max(0.0, hour_demand[0] - float((res.g * res.w).sum()) / max(scale, 1e-9))
    order = deal_to_hours(submit // HOUR, g * w, hour_demand, streams[8])
    org, model, g, w = org[order], model[order], g[order], w[order]
    duration = _regular_durations(agg, scale, is_spot, submit, g * w, model, res, streams[3])
    narrow = narrow_gangs(g, w, model, nodes, MIN_GANG_SHARE + (1.0 - MIN_GANG_SHARE) * scale)
    duration = censor(np.ceil(duration * (w / narrow)), submit).astype(np.int64)
    w = narrow

    org, model = np.concatenate([res.org, org]), np.concatenate([res.model, model])
    g, w = np.concatenate([res.g, g]), np.concatenate([res.w, w])
    submit = np.concatenate([np.zeros(n_res, dtype=np.int64), submit])
    duration = np.concatenate([res.duration, duration])
    is_spot = np.concatenate([np.zeros(n_res, dtype=bool), is_spot])
    cpu = sample_cpus(g, model, agg, nodes, streams[7])

    jobs = pd.DataFrame({
        "job_name": np.arange(submit.size, dtype=np.int64),
        "organization": agg.orgs[org].astype(np.int64),
        "gpu_model": np.asarray(MODELS, dtype=object)[model],
        "cpu_request": cpu,
        "gpu_request": g.astype(float),
        "worker_num": w,
        "submit_time": submit,
        "duration": duration,
        "job_type": np.where(is_spot, "Spot", "HP"),
    })[JOB_COLUMNS_RAW]
    capacity = nodes.groupby("gpu_model")["gpu_capacity_num"].sum().to_dict()
    jobs = _cut(jobs, lo, hi, to_seconds(spec.lp_from, "lp_from"), spec.carry_in, capacity)
    if pools:
        nodes = nodes[nodes["gpu_model"].isin(pools)]
        jobs = jobs[jobs["gpu_model"].isin(pools)]
    return nodes[NODE_COLUMNS_RAW].reset_index(drop=True), jobs.reset_index(drop=True)


def _regular_durations(agg: RealAggregates, scale: float, is_spot: np.ndarray, submit: np.ndarray,
                       gw: np.ndarray, model: np.ndarray, res: Residents,
                       rng: np.random.Generator) -> np.ndarray:
    """Durations of the regular jobs, coupled to size, model and week (`synth_coupling`).

    Targets are the real GPU-seconds (× scale) minus what the residents already hold; where the
    residents exceed a group's share the group keeps 1 % of it rather than nothing. Groups with
    no job get nothing.
    """
    r_gw = res.g * res.w
    r_gs = r_gw * res.duration
    week_real = np.bincount(np.arange(len(agg.daily_gpu_seconds)) // 7, agg.daily_gpu_seconds)
    week = np.minimum(submit // (7 * DAY), len(week_real) - 1)
    specs = [
        ("size", size_bucket(gw), agg.size_gpu_seconds, size_bucket(r_gw)),
        ("model", model, agg.model_gpu_seconds, res.model),
        ("week", week, week_real, np.zeros(r_gw.size, dtype=np.int64)),
    ]
    margins = []
    for name, index, real, r_index in specs:
        target = np.maximum(scale * real - np.bincount(r_index, r_gs, len(real)), 0.01 * scale * real)
        target[np.bincount(index, minlength=len(real)) == 0] = 0.0
        margins.append(Margin(name, index, target))
    # all margins must agree on the total; the per-model one (which sets each pool's pressure)
    # wins when some groups are empty, e.g. no ≥ 129-GPU gangs in a scaled-down trace
    total = margins[1].target.sum()
    margins = [Margin(m.name, m.index, m.target * total / m.target.sum()) for m in margins]
    return coupled_durations(is_spot, submit, gw, margins, agg.targets, res.to_end, rng)


def _cut(jobs: pd.DataFrame, lo: float | None, hi: float | None, lp_from: float | None,
         carry_in: bool, capacity: dict[str, float] | None = None) -> pd.DataFrame:
    s = jobs["submit_time"].to_numpy()
    resident = s == 0
    keep = np.ones(len(jobs), dtype=bool)
    if lo is not None:
        keep &= s >= lo
    if hi is not None:
        keep &= s < hi
    if carry_in and lo is not None:
        jobs, carried = _carry_in(jobs, lo, capacity if capacity is not None else {})
        keep |= carried
    else:
        keep |= resident
    if lp_from is not None:
        keep &= (jobs["job_type"].to_numpy() != "Spot") | (s >= lp_from)
    out = jobs[keep]
    return out.sort_values(["submit_time", "job_name"], kind="stable")


def _carry_in(jobs: pd.DataFrame, lo: float,
              capacity: dict[str, float]) -> tuple[pd.DataFrame, np.ndarray]:
    """HP jobs running at ``lo`` re-submitted at ``lo`` with their remaining duration.

    The synthetic history has no scheduler, so the jobs "running" at ``lo`` may ask for more than
    a pool holds; like a real cluster, only the earliest-submitted ones that fit within the
    pool's GPUs are running, and the others (which would have been queued) are left out.
    Returns the jobs (carried ones moved) and the mask of carried jobs.
    """
    s = jobs["submit_time"].to_numpy()
    end = s + jobs["duration"].to_numpy()
    running = (jobs["job_type"].to_numpy() == "HP") & (s < lo) & (end > lo)
    idx = np.flatnonzero(running)
    gw = (jobs["gpu_request"] * jobs["worker_num"]).to_numpy()[idx]
    pool = jobs["gpu_model"].to_numpy()[idx]
    fits = np.zeros(idx.size, dtype=bool)
    for p in np.unique(pool):
        sel = np.flatnonzero(pool == p)  # already in submit order
        fits[sel] = np.cumsum(gw[sel]) <= capacity.get(p, np.inf)
    moved = idx[fits]
    duration = jobs["duration"].to_numpy().copy()
    submit = s.copy()
    duration[moved] = end[moved] - int(lo)
    submit[moved] = int(lo)
    carried = np.zeros(len(jobs), dtype=bool)
    carried[moved] = True
    return jobs.assign(duration=duration, submit_time=submit), carried


def synth_to_dir(out: Path | str, seed: int = 0, scale: float = 1.0, pools: list[str] | None = None,
                 start: str | float | None = None, end: str | float | None = None,
                 setup: str | None = None) -> tuple[int, int]:
    """Write node_info_df.csv and job_info_df.csv into ``out``; returns (nodes, jobs)."""
    nodes, jobs = synthesize(seed, scale, pools, start, end, setup)
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GfsError(f"{out}: cannot create the output folder ({exc.strerror})") from None
    for frame, name in ((nodes, "node_info_df.csv"), (jobs, "job_info_df.csv")):
        _write_atomic(frame, out / name)
    return len(nodes), len(jobs)


def _write_atomic(frame: pd.DataFrame, path: Path) -> None:
    """Write to a temporary file beside ``path`` and rename it, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        frame.to_csv(tmp, index=False, lineterminator="\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise GfsError(f"{path}: cannot write ({exc.strerror})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class UnknownTraceError(KeyError):
    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


@lru_cache(maxsize=8)
def builtin_trace(name: str, seed: int = 0) -> Trace:
    """A built-in synthetic `Trace` (cached per process: treat it as read-only).

    Names: the keys of `SETUPS` — "synthetic" (full scale), "small" (demo), "paper-a100".
    """
    if name not in SETUPS:
        raise UnknownTraceError(f"no built-in trace {name!r}; built-in: {', '.join(SETUPS)}")
    nodes, jobs = synthesize(seed=seed, setup=name)
    trace = trace_from_frames(nodes, jobs, name=name, source=f"<synthetic {name} seed {seed}>")
    trace.notes.append(f"synthetic setup {name!r} (seed {seed}): {SETUPS[name].about}")
    return trace


__all__ = ["SETUPS", "Setup", "UnknownTraceError", "builtin_trace", "synth_to_dir", "synthesize"]
