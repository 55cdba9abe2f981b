"""Run one simulation from a plain spec and keep its results as tables."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from gfs_opt.errors import GfsError
from gfs_opt.experiments.run_checks import check_window
from gfs_opt.experiments.setups import SETUPS, lp_window
from gfs_opt.fileio import json_safe, write_csv, write_folder, write_text
from gfs_opt.model import Params
from gfs_opt.policies import make_policy
from gfs_opt.quota.spot_quota import quota_warnings
from gfs_opt.sim.engine import RoundHook, SimConfig, Simulator
from gfs_opt.sim.metrics import per_class, per_pool, summarize
from gfs_opt.sim.slurm_model import SlurmModel
from gfs_opt.traces.alibaba import DEFAULT_GUARANTEE_H
from gfs_opt.traces.base import Trace, parse_time
from gfs_opt.traces.load import load_trace
from gfs_opt.traces.placeable import never_placeable_counts

#: summary keys whose values measure the machine, not the simulation (times, rates, and the
#: solver reports that carry solve times): left out wherever runs are compared or hashed
TIMING_KEYS = frozenset({"wall_s", "events_per_s", "cpu_s", "events_per_cpu_s", "solver_reports"})


@dataclass
class RunSpec:
    """Everything that defines one simulation (hashable into a sweep cell)."""

    trace: str = "small"
    policy: str = "gfs"
    policy_options: dict[str, Any] = field(default_factory=dict)
    window: tuple[str | float, str | float] | None = None
    replay_from: str | float | None = None
    pools: tuple[str, ...] | None = None
    lp_load: float = 1.0
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    check_invariants: bool = False
    drain_days: float = 3.0
    price_per_gpu_hour: float = 2.0
    capacity_scale: float = 1.0      # resize every pool (`Trace.scale_capacity`)
    time_scale: float = 1.0          # stretch submit times and durations (`Trace.stretch_time`)

    @classmethod
    def from_setup(cls, setup: str, **kw: Any) -> RunSpec:
        try:
            s = SETUPS[setup]
        except KeyError:
            raise GfsError(f"unknown setup '{setup}'; choose from {', '.join(SETUPS)}") from None
        base: dict[str, Any] = {"trace": s.trace, "window": s.window, "replay_from": s.replay_from,
                                "pools": s.pools}
        base.update({k: v for k, v in kw.items() if v is not None})
        return cls(**base)


@dataclass
class RunOutput:
    spec: RunSpec
    summary: dict[str, Any]
    per_class: pd.DataFrame
    per_pool: pd.DataFrame
    timeseries: pd.DataFrame
    jobs: pd.DataFrame
    quotas: pd.DataFrame
    wall_s: float
    events: int
    #: one row per eviction with its cause (`Recorder.eviction_table`); None where causes are
    #: not known (a live Slurm replay, a run written before they were recorded)
    evictions: pd.DataFrame | None = None
    #: the quota's feedback at each refresh (`Recorder.feedback_table`): η, what it moved on and
    #: the quota it gave; None where not recorded (a live Slurm replay, an older run)
    feedback: pd.DataFrame | None = None

    def write_folder(self, final: Path, then: Callable[[], None] | None = None) -> Path:
        """Write every table into the run folder ``final``, which appears whole (every table)
        or not at all (`fileio.write_folder`, with ``then`` run as it is renamed into place); an
        earlier folder of that name is replaced."""
        return write_folder(final, self.write, then)

    def write(self, out: Path) -> None:
        """Write every table into ``out`` (a folder that may hold other files); each file
        appears whole or not at all. A run folder of its own: `write_folder`."""
        out.mkdir(parents=True, exist_ok=True)
        _atomic_text(out / "summary.json", json.dumps(json_safe(
            {"spec": asdict(self.spec), "summary": self.summary, "wall_s": self.wall_s,
             "events": self.events}), indent=2, allow_nan=False))
        for name, df in (("per_class", self.per_class), ("per_pool", self.per_pool),
                         ("timeseries", self.timeseries), ("jobs", self.jobs),
                         ("quota_log", self.quotas)):
            _atomic_csv(out / f"{name}.csv", df)
        if self.evictions is not None:
            _atomic_csv(out / "evictions.csv", self.evictions)
        if self.feedback is not None:
            _atomic_csv(out / "quota_feedback.csv", self.feedback)


def _atomic_text(path: Path, text: str) -> None:
    write_text(path, text)


def _atomic_csv(path: Path, df: pd.DataFrame) -> None:
    write_csv(path, df, index=df.index.name is not None)


def prepare_trace(spec: RunSpec) -> tuple[Trace, float, float]:
    """Load, restrict and scale the trace; returns it with the scored window in seconds."""
    trace = load_trace(spec.trace, seed=spec.seed)
    try:
        trace = trace.stretch_time(spec.time_scale).scale_capacity(spec.capacity_scale)
    except ValueError as exc:
        raise GfsError(str(exc)) from None
    if spec.window is not None:
        lo = parse_time(spec.window[0], trace.origin, "window start")
        hi = parse_time(spec.window[1], trace.origin, "window end")
        assert lo is not None and hi is not None
        for bound, secs in ((spec.window[0], lo), (spec.window[1], hi)):
            if not np.isfinite(secs) or secs < 0:    # the rule of `traces.base.check_time`
                raise GfsError(f"window bound {bound} is before the start of trace "
                               f"{trace.name} ({trace.origin:%Y-%m-%d %H:%M}) or not finite")
        if hi <= lo:
            raise GfsError(f"window end {spec.window[1]} is not after its start {spec.window[0]}")
    else:
        lo, hi = lp_window(trace)
    start = parse_time(spec.replay_from, trace.origin, "replay start")
    if start is not None:
        if start > lo:
            raise GfsError("the replay must start before the scored window")
        trace = trace.replay_from(start)
    try:
        trace = trace.select(pools=list(spec.pools) if spec.pools else None, lp_window=(lo, hi),
                             lp_load=spec.lp_load, seed=spec.seed)
    except ValueError as exc:
        raise GfsError(str(exc)) from None
    if trace.jobs.empty:
        raise GfsError("no jobs left after selecting pools and window")
    check_window(trace, lo, hi)
    classes = spec.params.get("guarantee_classes")
    if classes:
        trace = assign_guarantee_classes(trace, tuple(float(c) for c in classes), spec.seed)
    return trace, lo, hi


def assign_guarantee_classes(trace: Trace, classes: tuple[float, ...], seed: int) -> Trace:
    """Give LP jobs a class of ``classes``: those whose class is not configured, and — when more
    than the default class is configured — those with the loaders' default.

    Public traces carry no guarantee class, so loaders give every LP job the default 1 h; with
    other classes configured, each such LP job draws one uniformly (seeded, so runs are
    reproducible). The default counts as "no class" even when it is among ``classes``: with
    classes (1, 2, 4) every LP job draws, rather than all keeping 1 h.
    """
    jobs = trace.jobs
    unknown = ~jobs["guarantee_h"].isin(classes)
    if tuple(classes) != (DEFAULT_GUARANTEE_H,):
        unknown |= jobs["guarantee_h"] == DEFAULT_GUARANTEE_H
    lp = (jobs["cls"] == "LP") & unknown
    if not lp.any():
        return trace
    rng = np.random.default_rng(seed + 7919)
    jobs = jobs.copy()
    jobs.loc[lp, "guarantee_h"] = rng.choice(np.asarray(classes, dtype=float), size=int(lp.sum()))
    notes = [*trace.notes, f"LP guarantee classes drawn uniformly from {classes} h (seed {seed})"]
    return Trace(trace.nodes, jobs, trace.origin, trace.name, notes)


def run(spec: RunSpec, progress: bool = False, trace: tuple[Trace, float, float] | None = None,
        desc: str | None = None, on_round: RoundHook | None = None,
        slurm: SlurmModel | None = None) -> RunOutput:
    """Simulate ``spec``; ``on_round`` is installed as `Simulator.on_round` (e.g. a tracer);
    ``slurm`` turns on the Slurm scheduling model (`gfs_opt.sim.slurm_model`, opt-in)."""
    trace_, lo, hi = trace or prepare_trace(spec)
    params = Params(**spec.params) if spec.params else Params()
    policy = make_policy(spec.policy, **spec.policy_options)
    cfg = SimConfig(eval_start=lo, eval_end=hi, drain_s=spec.drain_days * 86_400.0,
                    check_invariants=spec.check_invariants, slurm=slurm)
    sim = Simulator(trace_, policy, params, cfg)
    sim.on_round = on_round
    callback, bar = None, None
    if progress:
        t_first = float(trace_.jobs["submit"].min())
        total_days = (hi + cfg.drain_s - t_first) / 86_400.0
        bar = tqdm(total=round(total_days, 1), unit="sim-day", desc=desc or spec.policy,
                   leave=False, dynamic_ncols=True)

        def callback(t: float, events: int) -> None:
            done = round((t - t_first) / 86_400.0, 1)
            bar.update(max(0.0, min(done, bar.total) - bar.n))
            elapsed = bar.format_dict.get("elapsed") or 1e-9
            bar.set_postfix(events_per_s=f"{events / elapsed:,.0f}", refresh=False)
    try:
        res = sim.run(callback)
    finally:
        if bar is not None:
            bar.close()
    rec = res.recorder
    summary = summarize(rec, spec.price_per_gpu_hour)
    summary.update({"policy": spec.policy, "policy_options": res.options, "wall_s": res.wall_s,
                    "events": res.events, "events_per_s": res.events / max(res.wall_s, 1e-9),
                    "cpu_s": res.cpu_s, "events_per_cpu_s": res.events / max(res.cpu_s, 1e-9),
                    "trace_notes": trace_.notes})
    summary.update(never_placeable_counts(trace_))
    if slurm is not None:      # only then: default runs keep their summaries (and digests)
        summary["scheduler"] = {"name": "slurm", **slurm.as_dict()}
    diagnostics = policy.diagnostics()
    summary.update(diagnostics)
    warnings: list[str] = []
    quota = diagnostics.get("quota")
    if isinstance(quota, dict) and rec.jobs is not None and len(rec.jobs):
        lp = rec.jobs[rec.jobs["cls"] == "LP"]
        warnings += quota_warnings(quota, lp["pool"].value_counts().to_dict())
    summary["warnings"] = warnings
    return RunOutput(spec, summary, per_class(rec), per_pool(rec), rec.timeseries(),
                     rec.jobs if rec.jobs is not None else pd.DataFrame(), rec.quota_table(),
                     res.wall_s, res.events, rec.eviction_table(), rec.feedback_table())
