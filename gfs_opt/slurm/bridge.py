"""The ONE adapter between `gfs_opt.slurm` and gfs_opt's quota / forecast / preemption / policy code.

Nothing else under `gfs_opt/slurm/` imports `gfs_opt.quota`, `gfs_opt.forecast`,
`gfs_opt.preempt` or `gfs_opt.policies`; re-point this module when those change. Its surface:

``GfsBrain(params, forecaster, origin, state, policy="gfs")`` — the simulator's own `GFSPolicy`
    object (any GFS variant by name, ``gfs-paper`` included), driven by live inputs instead of
    the simulator:
    ``load_history(frame)``   hourly-max HP GPUs (columns ds, series "pool|org", y) before start;
    ``observe_hour(t, usage)`` hourly max of HP GPUs per (pool, org) for the hour ending at t;
    ``refit(t)``              the daily forecaster refit (midnight of trace time);
    ``observe_window(o)``     an LP guarantee window ended (`WindowOutcome`): η's evidence, kept
                              by the spot quota's ledger exactly as in the simulator;
    ``evidence(pool)``        what η's feedback read of the pool at the last refresh;
    ``refresh(rnd)``          → `QuotaUpdate`: quota per (pool, class) and η after feedback — the
                              same `SpotQuota.refresh` GFS runs in the simulator every 300 s;
    ``victims(rnd, exact)``   → `VictimPlan`: PTS's HP pass (or the preemption MILP) on a live
                              `Round` whose ``running`` holds only the evictable LP jobs.
``hp_history(trace, until, pool)`` — the same hourly series computed straight from a trace.
``SlurmGFSPolicy`` / ``SlurmQOSPolicy`` — simulator policies that model the live system (GFS on
    Slurm, and Slurm's plain QOS preemption), named ``gfs-slurm`` and ``slurm-qos`` inside
    ``run_simulation(spec, trace)`` (registered for that call only).

Units: trace seconds; quotas in milli-GPU (as in `Round.quotas`); usage in GPUs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.experiments.runner import run
from gfs_opt.forecast.series import series_from_trace
from gfs_opt.model import (
    ClusterState,
    Decision,
    EtaEvidence,
    Params,
    Placement,
    PoolForecast,
    Round,
    RunningJob,
    SolveReport,
    WindowOutcome,
)
from gfs_opt.pending import FIFO_ORDER, PTS_ORDER
from gfs_opt.policies import POLICIES, make_policy, register_policy
from gfs_opt.policies.base import ComposedPolicy
from gfs_opt.policies.gfs import GFSPolicy
from gfs_opt.policies.gfs_milp import may_fit_by_preemption
from gfs_opt.policies.parts import BestFit, NoQuota
from gfs_opt.preempt.greedy import PreemptRule
from gfs_opt.preempt.hp_pass import hp_pass
from gfs_opt.preempt.milp import solve_preemption
from gfs_opt.solve import SolverOptions
from gfs_opt.traces.base import Trace


@dataclass
class QuotaUpdate:
    quotas: dict[tuple[str, float], int]      # milli-GPU per (pool, class hours)
    eta: dict[str, float]
    forecasts: dict[str, PoolForecast]
    reports: list[SolveReport] = field(default_factory=list)
    lifted: bool = False                      # the scored window is over: no spot limit


@dataclass
class VictimPlan:
    victims: list[int]                         # LP job ids to evict
    placements: dict[int, Placement]           # HP job id → where the plan puts it
    method: str                                # "greedy" or "milp"
    reports: list[SolveReport] = field(default_factory=list)
    fallback: bool = False


def hp_history(trace: Trace, until: float, pool: str | None = None) -> pd.DataFrame:
    """Hourly max of HP GPUs per "pool|org" for the complete hours before ``until``, assuming HP
    jobs run from submit to submit + duration (`gfs_opt.forecast.series.series_from_trace`)."""
    jobs = trace.jobs
    if pool is not None:
        jobs = jobs[jobs["pool"] == pool]
    jobs = jobs[jobs["submit"] < until]
    if not (jobs["cls"] == "HP").any():
        return pd.DataFrame(columns=["ds", "series", "y"])
    frame = series_from_trace(Trace(trace.nodes, jobs, trace.origin, trace.name), end=until)
    limit = trace.origin + pd.Timedelta(seconds=math.floor(until / 3600.0) * 3600.0)
    return frame[frame["ds"] < limit].reset_index(drop=True)


def _feed(policy: GFSPolicy, frame: pd.DataFrame, origin: pd.Timestamp) -> int:
    """Replay an hourly history into the policy's forecast provider (in time order)."""
    if policy.spot is None or frame.empty:
        return 0
    provider = policy.spot.provider
    hours = 0
    for ds, rows in frame.sort_values(["ds", "series"]).groupby("ds", sort=True):
        t = (pd.Timestamp(ds) - origin).total_seconds()
        provider.observe(t, dict(zip(rows["series"], rows["y"].astype(float), strict=True)))
        hours += 1
    return hours


class GfsBrain:
    """GFS's decision code behind the calls the live controller makes (see module doc)."""

    def __init__(self, params: Params, forecaster: str, origin: pd.Timestamp,
                 state: ClusterState, victims: str = "two-pointer", policy: str = "gfs") -> None:
        self.params = params
        self.origin = pd.Timestamp(origin)
        made = make_policy(policy, forecaster=forecaster, victims=victims)
        if not isinstance(made, GFSPolicy) or made.spot is None:
            raise GfsError(f"policy {policy!r} is not a GFS variant with a spot quota")
        self.policy: GFSPolicy = made
        self.policy.reset(state, params, self.origin)

    def load_history(self, frame: pd.DataFrame) -> int:
        return _feed(self.policy, frame, self.origin)

    def observe_hour(self, t: float, usage: dict[tuple[str, str], float]) -> None:
        self.policy.observe_hour(t, usage)

    def observe_window(self, outcome: WindowOutcome) -> None:
        self.policy.observe_window(outcome)

    def evidence(self, pool: str) -> EtaEvidence:
        assert self.policy.spot is not None
        return self.policy.spot.ledger.reading(pool)

    def refit(self, t: float) -> bool:
        if self.policy.spot is None:
            return False
        provider = self.policy.spot.provider
        n = len(provider.refit_log)
        self.policy.on_day(t)
        return len(provider.refit_log) > n

    def refresh(self, rnd: Round) -> QuotaUpdate:
        decision = Decision()
        if self.policy.spot is not None:
            self.policy.spot.refresh(rnd, decision)
        lifted = self.policy.spot is not None and self.policy.spot.lifted
        forecasts = rnd.forecasts if decision.forecasts is None else decision.forecasts
        return QuotaUpdate(dict(decision.quotas or {}), dict(decision.eta or {}),
                           dict(forecasts), decision.reports, lifted)

    def victims(self, rnd: Round, exact: bool = False, time_limit: float = 2.0,
                protect_windows: bool = True) -> VictimPlan:
        """Victims so that the pending HP jobs of ``rnd`` start. ``rnd.running`` must hold only
        the LP jobs that may be evicted; every other allocation in ``rnd.state`` is kept."""
        # the simulator's placement: E(n) from the eviction counts the controller puts in the
        # round (no counts: every node alike)
        placer = self.policy.placer(rnd)
        if not exact:
            t0 = time.perf_counter()
            decision = Decision()
            hp_pass(rnd, decision, order=PTS_ORDER, placer=placer, victims=self.policy.victim_rule)
            rep = SolveReport(step="preemption", method="greedy", status="heuristic",
                              time_s=time.perf_counter() - t0, solver="pts-greedy")
            return VictimPlan(list(decision.victims), dict(decision.placements), "greedy", [rep])
        decision = Decision()
        hp_pass(rnd, decision, order=PTS_ORDER, placer=placer, victims=None)
        st = rnd.state
        waiting = [j for j in rnd.pending_hp
                   if j not in st.alloc and may_fit_by_preemption(st, rnd.jobs[j])]
        if not waiting:
            return VictimPlan([], dict(decision.placements), "milp")
        params = replace(rnd.params, hard_guarantee=protect_windows)
        sub = Round(time=rnd.time, state=st.copy(), jobs=dict(rnd.jobs), running=dict(rnd.running),
                    pending_hp=waiting, pending_lp=[],
                    queued_since={j: rnd.queued_since.get(j, rnd.jobs[j].submit) for j in waiting},
                    forecasts=dict(rnd.forecasts), pools=rnd.pools, quotas=dict(rnd.quotas),
                    node_evictions_1h=rnd.node_evictions_1h,
                    node_evictions_1d=rnd.node_evictions_1d, params=params)
        res = solve_preemption(sub, solver=SolverOptions(time_limit=time_limit))
        victims = [v for v in res.decision.victims if v in rnd.running]
        if len(victims) != len(res.decision.victims):
            raise GfsError("the preemption MILP chose a protected job as victim")
        placements = {**decision.placements, **res.decision.placements}
        return VictimPlan(victims, placements, "milp", list(res.decision.reports),
                          fallback=bool(res.fallback))


# ---- simulator models of the live system -------------------------------------------------
def past_exempt(rnd: Round) -> dict[int, RunningJob]:
    """Running jobs Slurm may preempt: LP jobs past the first d hours of their current run."""
    return {j: r for j, r in rnd.running.items()
            if not r.job.is_hp and rnd.time - r.start >= r.job.guarantee_s}


def _load_history_file(path: str | None) -> pd.DataFrame | None:
    if not path:
        return None
    try:
        frame = pd.read_csv(path, parse_dates=["ds"])
    except (OSError, ValueError) as exc:
        raise GfsError(f"{path}: cannot read the HP usage history ({exc})") from None
    missing = {"ds", "series", "y"} - set(frame.columns)
    if missing:
        raise GfsError(f"{path}: history lacks columns {sorted(missing)}")
    return frame


class SlurmGFSPolicy(GFSPolicy):
    """GFS as it runs on Slurm: the quota rule and PTS victims, but LP jobs inside the first d
    hours of a (re)start are never evicted (PreemptExemptTime) and jobs start in Slurm's order
    (submit order within a class, later jobs passing blocked ones, as backfill does).
    ``history``: CSV (ds, series, y) fed to the forecaster before the replay starts."""

    name = "gfs-slurm"

    def __init__(self, history: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.order = FIFO_ORDER      # Slurm starts jobs in submit order (backfill passes)
        self.history = history

    def options(self) -> dict[str, Any]:
        return {**super().options(), "history": self.history}

    def reset(self, state: ClusterState, params: Params, origin: object = None) -> None:
        super().reset(state, params, origin)
        frame = _load_history_file(self.history)
        if frame is not None:
            _feed(self, frame, pd.Timestamp(origin) if origin is not None else
                  pd.Timestamp("2024-03-01"))

    def evictable(self, rnd: Round) -> Mapping[int, RunningJob] | None:
        return past_exempt(rnd)


class SlurmQOSPolicy(ComposedPolicy):
    """Slurm's plain QOS preemption: no spot quota; an HP job that does not fit requeues LP jobs
    past their exempt time, youngest first, on the node needing the fewest victims."""

    name = "slurm-qos"

    def __init__(self) -> None:
        super().__init__(order=FIFO_ORDER, admission=NoQuota(), placement=BestFit(),
                         victim_rule=PreemptRule("newest", "count"))

    def evictable(self, rnd: Round) -> Mapping[int, RunningJob] | None:
        return past_exempt(rnd)


SIM_POLICIES: dict[str, type[ComposedPolicy]] = {"gfs-slurm": SlurmGFSPolicy, "slurm-qos": SlurmQOSPolicy}


def run_simulation(spec: Any, trace: tuple[Trace, float, float], slurm: Any = None) -> Any:
    """`gfs_opt.experiments.runner.run` on a prepared trace, with the two policies above
    registered for the duration of the call only (the global registry stays as it was);
    ``slurm``: a `gfs_opt.sim.slurm_model.SlurmModel` (Slurm starts the jobs) or None."""
    added = [name for name in SIM_POLICIES if name not in POLICIES]
    for name in added:
        register_policy(name, SIM_POLICIES[name])
    try:
        return run(spec, trace=trace, slurm=slurm)
    finally:
        for name in added:
            POLICIES.pop(name, None)
