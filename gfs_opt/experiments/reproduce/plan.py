"""The paper's evaluation, end to end: the run plan, running it (resumable), and its results.

Plan (`ReproConfig`; `ReproConfig.quick()` is the small variant the test suite runs):

- **grid** — setup ``paper-a100`` at low / medium / high LP load × the published GFS
  (``gfs-paper``, `REFERENCE`: what is scored against the paper), gfs_opt's GFS (``gfs``), the
  four baselines with no quota and the three under GFS's quota (``+sqa``), plus GFS-MILP at the
  loads in ``milp_loads``;
- **ablations** — the paper's own ablations of the published GFS (previous-week-peak forecaster,
  static η, no eviction history, naive victims) at ``ablation_load``;
- **departures** — ``gfs`` without each of its departures (``gfs-no-<key>``,
  `gfs_opt.policies.departures`) at every load and seed: each departure's measured effect;
- **rho** — the published GFS at ``ablation_load`` for each ρ of ``rho_sweep`` (fast
  forecaster): how much of the eviction/queueing trade-off is the choice of ρ;
- **full** — the full-cluster August replay: both GFS and the best baseline of the grid at
  medium load (lowest mean LP JQT, then lowest eviction rate);
- **instances** — every file of ``instances/`` through the greedy and the exact solvers;
- **seeds** — with ``seeds`` of more than one seed, the grid's policies (not GFS-MILP) again at
  every load for each seed but the first, so the report gives each grid metric a mean ± 95 %
  interval over seeds; everything else runs on the first seed.

Every run is written to ``OUT/runs/<setup>/<load>/<policy>[-rho<ρ>][-seed<s>]/`` (`RunOutput.write`, plus
the quota trace of GFS variants). A run whose folder already holds the same spec is loaded instead of
re-run, so an interrupted reproduction resumes where it stopped and the report can be rebuilt
without simulating anything. Identical specs (GFS at medium load in the grid and the ablations)
run once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.experiments.reproduce.quota_trace import QuotaTracer
from gfs_opt.experiments.runner import RunOutput, RunSpec, prepare_trace, run
from gfs_opt.experiments.setups import LOADS, SETUPS
from gfs_opt.fileio import write_csv, write_folder
from gfs_opt.instance.milp_gap import instance_files, solve_instances
from gfs_opt.policies import POLICIES, options_for, parse_policy, policy_name
from gfs_opt.policies.departures import DEPARTURES
from gfs_opt.policies.gfs import GFSPolicy
from gfs_opt.traces.base import Trace

#: the baselines as their own papers describe them (no spot quota) …
BASELINES = ("yarn-cs", "chronus", "lyra", "fgd")
#: … and under GFS's spot quota with a static η, as the authors ran them (Chronus has no quota)
SQA_BASELINES = ("yarn-cs+sqa", "lyra+sqa", "fgd+sqa")
#: the published GFS, scored against the paper's numbers; gfs_opt's GFS is "beyond the paper"
REFERENCE = "gfs-paper"
OURS = "gfs"
#: the paper's ablations of its own components (GFS-SPEC §8), on the published GFS
ABLATIONS = ("gfs-paper[forecaster=week-peak]", "gfs-paper[static_eta=true]",
             "gfs-paper[use_history=false]", "gfs-paper[victims=naive]")
WEEK_PEAK, STATIC_ETA = ABLATIONS[0], ABLATIONS[1]
#: gfs without each of its departures, generated from the departures table
DEPARTURE_POLICIES = tuple(f"gfs-no-{d.key}" for d in DEPARTURES)
GROUPS = ("grid", "ablations", "departures", "rho", "full", "seeds")
QUOTA_TRACE = "quota_trace.csv"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReproConfig:
    """What to run. Loads are (name, factor) pairs; ``None`` skips a part."""

    setup: str = "paper-a100"
    loads: tuple[tuple[str, float], ...] = tuple(LOADS.items())
    policies: tuple[str, ...] = (REFERENCE, OURS, *BASELINES, *SQA_BASELINES)
    milp_policies: tuple[str, ...] = ("gfs-milp",)
    milp_loads: tuple[str, ...] = ("medium",)
    ablations: tuple[str, ...] = ABLATIONS
    ablation_load: str = "medium"
    # gfs without each departure, at every load and grid seed (empty: skip)
    departures: tuple[str, ...] = DEPARTURE_POLICIES
    # sensitivity of GFS to ρ at ``ablation_load``, with a fast forecaster so it costs minutes
    rho_sweep: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
    sweep_forecaster: str = "ets"
    full_setup: str | None = "full"
    full_policies: tuple[str, ...] = (REFERENCE, OURS)
    full_best_baseline: bool = True
    forecaster: str = "prophet"
    # Prophet per tenant over six months of the full cluster takes hours on 2 cores; the
    # fast seasonal ETS keeps the full replay to minutes (None: same as ``forecaster``)
    full_forecaster: str | None = "ets"
    window: tuple[str, str] | None = None      # overrides the setup's scored window
    instances: str | None = "instances"        # folder of instance files (None: skip)
    instance_include: tuple[str, ...] | None = None   # file-name prefixes to keep
    milp_time_limit: float = 10.0
    seed: int = 0
    # seeds of the grid and the departures (the first is ``seed``); empty: ``seed`` alone
    seeds: tuple[int, ...] = (0, 1, 2)
    drain_days: float = 3.0
    # the authors' lifted drain in every run (`Params.quota_after_window` off); default: the
    # quota is kept through the drain, so every window scored is one the quota governs
    lift_quota_after_window: bool = False
    quick: bool = False

    @classmethod
    def quick_config(cls, **overrides: Any) -> ReproConfig:
        """Seconds, not hours: the small setup at medium load, fast forecaster, no full replay,
        no GFS-MILP simulation (a MILP per contested round is the slow part), tiny instances."""
        base = cls(setup="small", loads=(("medium", 1.0),), forecaster="ets", full_setup=None,
                   milp_policies=(), rho_sweep=(), instance_include=("tiny-",),
                   milp_time_limit=2.0, quick=True, seeds=(), departures=("gfs-no-wait",),
                   ablations=ABLATIONS[:2])
        return replace(base, **overrides)

    def validate(self) -> None:
        for setup in (self.setup, self.full_setup):
            if setup is not None and setup not in SETUPS:
                raise GfsError(f"unknown setup '{setup}'; choose from {', '.join(SETUPS)}")
        names = [*self.policies, *self.milp_policies, *self.ablations, *self.full_policies,
                 *self.departures]
        for name in names:
            parse_policy(name)     # a GfsError names an unknown policy or option
        load_names = {name for name, _ in self.loads}
        if not self.loads:
            raise GfsError("no LP load to run")
        for name in (*self.milp_loads, self.ablation_load):
            if name not in load_names:
                raise GfsError(f"load '{name}' is not among the grid's loads {sorted(load_names)}")
        for needed in (REFERENCE, OURS):
            if needed not in self.policies:
                raise GfsError(f"the grid needs policy '{needed}' ({REFERENCE}: the published "
                               f"GFS, scored against the paper; {OURS}: gfs_opt's, beyond it)")
        if self.milp_time_limit <= 0:
            raise GfsError("the MILP time limit must be positive")
        bad = [r for r in self.rho_sweep if not 0 < r < 1]
        if bad:
            raise GfsError(f"ρ must lie in (0, 1), got {bad}")
        if self.seeds and (self.seeds[0] != self.seed or len(set(self.seeds)) != len(self.seeds)):
            raise GfsError(f"seeds {self.seeds}: distinct, starting with seed {self.seed}")

    @property
    def grid_seeds(self) -> tuple[int, ...]:
        return self.seeds or (self.seed,)


@dataclass
class Cell:
    """One simulation of the plan."""

    group: str
    setup: str
    load: str
    factor: float
    policy: str
    rho: float | None = None          # ρ of the sensitivity sweep (None: the default)
    seed: int | None = None           # another seed of the grid (None: the plan's seed)

    @property
    def label(self) -> str:
        """Name of the run within its load: the policy, plus ρ in the sweep, plus its seed in
        the seeds group."""
        label = self.policy if self.rho is None else f"{self.policy}-rho{self.rho:g}"
        return label if self.seed is None else f"{label}-seed{self.seed}"

    @property
    def key(self) -> str:
        return f"{self.setup}/{self.load}/{self.label}"


@dataclass
class ReproResults:
    """Outputs by group → load → policy, the instance gaps, timings and where it all lives."""

    config: ReproConfig
    out: Path
    runs: dict[str, dict[str, dict[str, RunOutput]]] = field(default_factory=dict)
    quota_traces: dict[str, pd.DataFrame] = field(default_factory=dict)   # by Cell.key
    run_dirs: dict[str, Path] = field(default_factory=dict)               # by Cell.key
    reused: set[str] = field(default_factory=set)                         # Cell.keys loaded
    gaps: pd.DataFrame | None = None
    timings: dict[str, float] = field(default_factory=dict)
    best_baseline: str | None = None

    def group(self, name: str) -> dict[str, dict[str, RunOutput]]:
        return self.runs.get(name, {})

    def grid_by_seed(self) -> dict[int, dict[str, dict[str, RunOutput]]]:
        """The grid's policies (GFS-MILP left out: it runs on the first seed only) by seed →
        load → policy; one seed unless the plan has several."""
        cfg = self.config
        out = {cfg.seed: {load: {p: o for p, o in by_pol.items() if p in cfg.policies}
                          for load, by_pol in self.group("grid").items()}}
        for load, by_label in self.group("seeds").items():
            for label, o in by_label.items():
                policy, _, seed = label.rpartition("-seed")
                out.setdefault(int(seed), {}).setdefault(load, {})[policy] = o
        return out

    def departures_by_seed(self) -> dict[int, dict[str, dict[str, RunOutput]]]:
        """``gfs`` and ``gfs`` without each departure by seed → load → policy."""
        by_seed = self.grid_by_seed()
        out: dict[int, dict[str, dict[str, RunOutput]]] = {}
        for seed, by_load in by_seed.items():
            for load, by_pol in by_load.items():
                if OURS in by_pol:
                    out.setdefault(seed, {}).setdefault(load, {})[OURS] = by_pol[OURS]
        for load, by_label in self.group("departures").items():
            for label, o in by_label.items():
                policy, _, tag = label.rpartition("-seed")
                if not policy:            # the first seed's run carries no suffix
                    policy, tag = label, str(self.config.seed)
                out.setdefault(int(tag), {}).setdefault(load, {})[policy] = o
        return out

    def grid_means(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The grid's summaries averaged over seeds (numeric values; load → policy → summary):
        what the paper's numbers are compared with. One seed: that seed's summaries."""
        by_seed = self.grid_by_seed()
        first = self.summaries().get("grid", {})
        if len(by_seed) < 2:
            return first
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for load, by_pol in first.items():
            for pol, s in by_pol.items():
                runs = [by_seed[sd][load][pol].summary for sd in by_seed
                        if pol in by_seed[sd].get(load, {})]
                mean = dict(s)
                if not runs:              # run on the first seed only (GFS-MILP): as it is
                    out.setdefault(load, {})[pol] = mean
                    continue
                for k, v in s.items():
                    vals = [r.get(k) for r in runs]
                    nums = [float(x) for x in vals
                            if isinstance(x, int | float) and not isinstance(x, bool)]
                    if isinstance(v, int | float) and not isinstance(v, bool) and \
                            len(nums) == len(vals):
                        mean[k] = sum(nums) / len(nums)
                out.setdefault(load, {})[pol] = mean
        return out

    def summaries(self) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
        """JSON-friendly summaries (with the extras of `extras`) by group → load → policy."""
        return {g: {ld: {p: {**o.summary, **extras(o)} for p, o in by_pol.items()}
                    for ld, by_pol in by_load.items()} for g, by_load in self.runs.items()}

    def per_pool(self) -> dict[str, dict[str, dict[str, list[dict[str, Any]]]]]:
        """Per-pool records (`metrics.per_pool` plus HP columns of `pool_extras`)."""
        return {g: {ld: {p: pool_extras(o).reset_index().to_dict(orient="records")
                         for p, o in by_pol.items()} for ld, by_pol in by_load.items()}
                for g, by_load in self.runs.items()}

    def to_json(self) -> dict[str, Any]:
        return {"config": asdict(self.config), "best_baseline": self.best_baseline,
                "summaries": self.summaries(), "per_pool": self.per_pool(),
                "gaps": None if self.gaps is None else self.gaps.to_dict(orient="records"),
                "timings": self.timings}


def extras(out: RunOutput) -> dict[str, Any]:
    """Numbers the report needs beyond the run summary: the LP JQT p90 of the jobs that started."""
    jobs = out.jobs
    if jobs is None or jobs.empty or "cls" not in jobs:
        return {}
    lp = jobs[jobs["cls"] == "LP"]
    started = lp[lp["first_start"].notna()]
    return {"lp_jqt_p90_started": float(started["jqt"].quantile(0.9)) if len(started)
            else float("nan")}


def pool_extras(out: RunOutput) -> pd.DataFrame:
    """`per_pool` with HP jobs, HP mean JQT and HP jobs that never started, per pool: a pool whose
    HP demand alone exceeds its capacity dominates cluster-wide means and must be visible."""
    table = out.per_pool.copy()
    jobs = out.jobs
    if jobs is None or jobs.empty or "cls" not in jobs:
        return table
    hp = jobs[jobs["cls"] == "HP"]
    g = hp.groupby("pool")
    table["hp_jobs"] = g.size().reindex(table.index).fillna(0).astype(int)
    table["hp_jqt_mean"] = g["jqt"].mean().reindex(table.index)
    table["hp_never_started"] = g["first_start"].apply(lambda s: int(s.isna().sum())) \
        .reindex(table.index).fillna(0).astype(int)
    return table


# ---- the plan ---------------------------------------------------------------------------------
def grid_cells(cfg: ReproConfig) -> list[Cell]:
    cells = [Cell("grid", cfg.setup, name, f, p) for name, f in cfg.loads for p in cfg.policies]
    cells += [Cell("grid", cfg.setup, name, f, p) for name, f in cfg.loads
              for p in cfg.milp_policies if name in cfg.milp_loads]
    factor = dict(cfg.loads)[cfg.ablation_load]
    cells += [Cell("ablations", cfg.setup, cfg.ablation_load, factor, p)
              for p in (REFERENCE, *cfg.ablations)]
    cells += [Cell("rho", cfg.setup, cfg.ablation_load, factor, REFERENCE, rho)
              for rho in cfg.rho_sweep]
    cells += [Cell("seeds", cfg.setup, name, f, p, seed=seed) for seed in cfg.grid_seeds[1:]
              for name, f in cfg.loads for p in cfg.policies]
    cells += [Cell("departures", cfg.setup, name, f, p,
                   seed=None if seed == cfg.seed else seed)
              for seed in cfg.grid_seeds for name, f in cfg.loads for p in cfg.departures]
    return cells


def full_cells(cfg: ReproConfig, best_baseline: str | None) -> list[Cell]:
    if cfg.full_setup is None:
        return []
    pols = list(cfg.full_policies)
    if cfg.full_best_baseline and best_baseline and best_baseline not in pols:
        pols.append(best_baseline)
    return [Cell("full", cfg.full_setup, "medium", 1.0, p) for p in pols]


def pick_best_baseline(by_policy: dict[str, RunOutput]) -> str | None:
    """The baseline (either family) with the lowest mean LP JQT, ties by the lower eviction rate."""
    cands = [(o.summary.get("lp_jqt_mean", float("inf")), o.summary.get("lp_eviction_rate", 1.0), p)
             for p, o in by_policy.items() if p in (*BASELINES, *SQA_BASELINES)]
    return min(cands)[2] if cands else None


def spec_for(cfg: ReproConfig, cell: Cell) -> RunSpec:
    forecaster = cfg.full_forecaster if cell.group == "full" and cfg.full_forecaster else \
        cfg.sweep_forecaster if cell.group == "rho" else cfg.forecaster
    seed = cfg.seed if cell.seed is None else cell.seed
    kw: dict[str, Any] = {"policy": cell.policy, "lp_load": cell.factor, "seed": seed,
                          "drain_days": cfg.drain_days}
    if cfg.window is not None and cell.setup == cfg.setup:
        kw["window"] = tuple(cfg.window)
    params: dict[str, Any] = {}
    if cell.rho is not None:
        params["rho"] = cell.rho
    if cfg.lift_quota_after_window:
        params["quota_after_window"] = False
    if params:
        kw["params"] = params
    spec = RunSpec.from_setup(cell.setup, **kw)
    spec.policy_options = options_for(cell.policy, {"forecaster": forecaster})
    return spec


# ---- persistence ------------------------------------------------------------------------------
def _normal(obj: Any) -> Any:
    """JSON round trip, so that tuples and lists compare equal."""
    return json.loads(json.dumps(obj, default=str))


def load_run(folder: Path, spec: RunSpec | None = None) -> RunOutput | None:
    """A run written by `RunOutput.write`; None if absent, incomplete or made from another spec."""
    summary_path = folder / "summary.json"
    if not summary_path.exists():
        return None
    try:
        doc = json.loads(summary_path.read_text())
        if spec is not None and _normal(doc["spec"]) != _normal(asdict(spec)):
            return None
        tables = {name: pd.read_csv(folder / f"{name}.csv")
                  for name in ("per_class", "per_pool", "timeseries", "jobs", "quota_log")}
    except (OSError, ValueError, KeyError, pd.errors.EmptyDataError):
        return None
    raw = doc["spec"]
    for key in ("window", "pools"):
        if raw.get(key) is not None:
            raw[key] = tuple(raw[key])
    summary = {k: (float("nan") if v is None else v) for k, v in doc["summary"].items()}
    out = RunOutput(RunSpec(**raw), summary, tables["per_class"].set_index("cls"),
                    tables["per_pool"].set_index("pool"), tables["timeseries"], tables["jobs"],
                    tables["quota_log"], float(doc.get("wall_s", 0.0)), int(doc.get("events", 0)))
    # runs written before evictions (or the quota feedback) were recorded have none
    for attr, name in (("evictions", "evictions.csv"), ("feedback", "quota_feedback.csv")):
        if (folder / name).exists():
            try:
                setattr(out, attr, pd.read_csv(folder / name))
            except (OSError, ValueError, pd.errors.EmptyDataError):
                return None
    return out


# ---- running ----------------------------------------------------------------------------------
def _is_gfs(policy: str) -> bool:
    return issubclass(POLICIES[policy_name(policy)][0], GFSPolicy)


def run_cells(cells: list[Cell], cfg: ReproConfig, res: ReproResults, say: Progress,
              progress_bars: bool, fresh: bool, counter: list[int], total: int) -> None:
    """Run (or load) every cell; traces are prepared once per (setup, load, seed)."""
    prepared: dict[tuple[str, str, int], tuple[Trace, float, float]] = {}
    done: dict[str, RunOutput] = {}
    for cell in cells:
        counter[0] += 1
        tag = f"[{counter[0]}/{total}] {cell.group:<9} {cell.setup} · {cell.load} · {cell.label}"
        spec = spec_for(cfg, cell)
        folder = res.out / "runs" / cell.setup / cell.load / cell.label
        out = done.get(cell.key)
        if out is None and not fresh:
            out = load_run(folder, spec)
            if out is not None:
                res.reused.add(cell.key)
                trace_path = folder / QUOTA_TRACE
                if trace_path.exists():
                    res.quota_traces[cell.key] = pd.read_csv(trace_path)
                say(f"{tag}: reused {folder}")
        elif out is not None:
            say(f"{tag}: same run as {cell.key} above")
        if out is None:
            pk = (cell.setup, cell.load, spec.seed)
            if pk not in prepared:
                prepared.clear()       # one prepared trace in memory at a time
                t0 = time.perf_counter()
                prepared[pk] = prepare_trace(spec)
                seed_tag = "" if cell.seed is None else f" seed {cell.seed}"
                res.timings[f"prepare {cell.setup}/{cell.load}{seed_tag}"] = \
                    time.perf_counter() - t0
            trace = prepared[pk]
            tracer = QuotaTracer(start=trace[1], end=trace[2]) if _is_gfs(cell.policy) else None
            say(f"{tag} …")
            # no stale table may outlive an interrupted re-run next to a fresh summary.json
            for old in (*folder.glob("*.csv"), folder / "summary.json"):
                old.unlink(missing_ok=True)
            out = run(spec, progress=progress_bars, trace=trace, on_round=tracer,
                      desc=f"{cell.label} @ {cell.load}")
            table = tracer.table() if tracer is not None else None

            def fill(tmp: Path, out: RunOutput = out, table: pd.DataFrame | None = table) -> None:
                out.write(tmp)
                if table is not None:
                    write_csv(tmp / QUOTA_TRACE, table)

            write_folder(folder, fill)    # the run's folder appears whole or not at all
            if table is not None:
                res.quota_traces[cell.key] = table
            s = out.summary
            say(f"{tag}: {out.wall_s:,.1f} s · LP evict {100 * s['lp_eviction_rate']:.2f} % · "
                f"LP JQT {s['lp_jqt_mean']:,.0f} s · HP JQT {s['hp_jqt_mean']:,.0f} s · "
                f"alloc {100 * s['allocation_rate']:.1f} %")
        done[cell.key] = out
        res.run_dirs[cell.key] = folder
        res.runs.setdefault(cell.group, {}).setdefault(cell.load, {})[cell.label] = out
        res.timings[f"run {cell.key}"] = out.wall_s


def reproduce(cfg: ReproConfig, out: Path, say: Progress = print, progress_bars: bool = False,
              fresh: bool = False) -> ReproResults:
    """Run the plan of the module doc into ``out``; see `report.write_report` for the report."""
    cfg.validate()
    t_start = time.perf_counter()
    res = ReproResults(cfg, out)
    out.mkdir(parents=True, exist_ok=True)
    cells = grid_cells(cfg)
    n_full = len(cfg.full_policies) + int(cfg.full_best_baseline) if cfg.full_setup else 0
    total = len(cells) + n_full
    counter = [0]
    t0 = time.perf_counter()
    run_cells(cells, cfg, res, say, progress_bars, fresh, counter, total)
    res.timings["grid + ablations"] = time.perf_counter() - t0
    medium = cfg.ablation_load
    res.best_baseline = pick_best_baseline(res.group("grid").get(medium, {}))
    if cfg.full_setup:
        t0 = time.perf_counter()
        run_cells(full_cells(cfg, res.best_baseline), cfg, res, say, progress_bars, fresh,
                  counter, total)
        res.timings["full replay"] = time.perf_counter() - t0
    if cfg.instances:

        folder = Path(cfg.instances)
        files = instance_files(folder, cfg.instance_include)
        say(f"greedy vs MILP on {len(files)} instance files of {folder} "
            f"(time limit {cfg.milp_time_limit:g} s) …")
        t0 = time.perf_counter()
        res.gaps = solve_instances(files, cfg.milp_time_limit, progress=progress_bars)
        res.timings["instances"] = time.perf_counter() - t0
    res.timings["total"] = time.perf_counter() - t_start
    return res
