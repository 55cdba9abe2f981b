"""The one trace type every loader returns (pandas-backed)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.model import ClusterState, Job, JobClass

ALIBABA_ORIGIN = pd.Timestamp("2024-03-01 00:00:00")


def check_time(x: object) -> None:
    """The rule every window and replay start follows (command line and sweep spec alike): a date
    (YYYY-MM-DD[ HH:MM]) or a finite number of seconds ≥ 0 since the trace's origin. Raises
    ValueError saying which and showing the value as given."""
    text = x.strip() if isinstance(x, str) else str(x)      # as given: 1e400, not inf
    text = text if len(text) <= 40 else text[:37] + "..."
    quoted = repr(text) if isinstance(x, str) else text
    if isinstance(x, bool) or not isinstance(x, str | int | float):
        raise ValueError(f"{quoted} is neither a date (YYYY-MM-DD) nor seconds")
    if isinstance(x, str):
        try:
            x = float(x)
        except ValueError:
            try:
                pd.Timestamp(x)
            except (ValueError, TypeError, OverflowError):
                raise ValueError(f"{quoted} is neither a date (YYYY-MM-DD) nor seconds") from None
            return
    if not np.isfinite(x) or x < 0:
        raise ValueError(f"time {text} must be finite seconds ≥ 0 (since the trace's origin)")


def parse_time(value: str | float | None, origin: pd.Timestamp = ALIBABA_ORIGIN,
               what: str = "time") -> float | None:
    """A date (YYYY-MM-DD[ HH:MM]) or seconds since the trace origin → seconds."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return float((pd.Timestamp(text) - origin).total_seconds())
    except (ValueError, TypeError):
        raise GfsError(f"{what} {value!r}: expected a date YYYY-MM-DD or a number of seconds"
                       ) from None

NODE_COLUMNS = ["node_name", "pool", "gpus", "cpus"]
JOB_COLUMNS = ["job_id", "name", "org", "pool", "cls", "g", "workers", "submit", "duration",
               "cpu", "guarantee_h", "resident"]


@dataclass
class Trace:
    """Nodes and jobs in gfs_opt's units.

    ``nodes``: node_name, pool, gpus (int), cpus. ``jobs``: job_id (int, unique), name, org (str),
    pool, cls ("HP"/"LP"), g (per-worker milli-GPU), workers, submit and duration (seconds since
    ``origin``), cpu, guarantee_h (LP guarantee class, hours), resident (HP already running at t=0).
    """

    nodes: pd.DataFrame
    jobs: pd.DataFrame
    origin: pd.Timestamp = ALIBABA_ORIGIN
    name: str = "trace"
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        missing = [c for c in NODE_COLUMNS if c not in self.nodes.columns]
        missing += [c for c in JOB_COLUMNS if c not in self.jobs.columns]
        if missing:
            raise ValueError(f"trace frames lack columns {missing}")

    @property
    def pools(self) -> list[str]:
        return sorted(self.nodes["pool"].unique())

    def cluster_state(self) -> ClusterState:
        return ClusterState.from_nodes(
            zip(self.nodes["pool"], self.nodes["gpus"].astype(int), self.nodes["node_name"].astype(str),
                strict=True))

    def iter_jobs(self) -> list[Job]:
        """Materialise `Job` objects in submit order (ties by job id)."""
        df = self.jobs.sort_values(["submit", "job_id"], kind="stable")
        cls_map = {"HP": JobClass.HP, "LP": JobClass.LP}
        # columns as Python lists first: iterating pandas' string columns element by element
        # costs ~5 µs a value (2 s for the full trace)
        cols = [df[c].tolist() for c in ("job_id", "org", "pool", "cls", "g", "workers", "submit",
                                         "duration", "guarantee_h", "cpu")]
        return [
            Job(int(i), str(o), str(p), cls_map[c], int(g), int(w), float(s), float(d), float(gh), float(cpu))
            for i, o, p, c, g, w, s, d, gh, cpu in zip(*cols, strict=True)
        ]

    def select(self, pools: list[str] | None = None, lp_window: tuple[float, float] | None = None,
               lp_load: float = 1.0, seed: int = 0) -> Trace:
        """Restrict to pools, keep LP jobs only inside ``lp_window`` and scale LP arrivals.

        LP load scaling (documented choice, the paper does not say how): a factor x < 1 keeps each
        LP job with probability x; x > 1 keeps every job and adds ⌊x⌋−1 copies plus one more with
        probability frac(x), each copy's submit time jittered uniformly within ±30 min so that the
        burst shape is kept but copies do not arrive in lock step. Seeded, hence deterministic.
        """
        nodes, jobs = self.nodes, self.jobs
        notes = list(self.notes)
        if pools:
            unknown = sorted(set(pools) - set(nodes["pool"]))
            if unknown:
                raise ValueError(f"unknown pool(s) {unknown}; this trace has {self.pools}")
            nodes = nodes[nodes["pool"].isin(pools)]
            jobs = jobs[jobs["pool"].isin(pools)]
        if lp_window is not None:
            lo, hi = lp_window
            lp = jobs["cls"] == "LP"
            jobs = jobs[~lp | ((jobs["submit"] >= lo) & (jobs["submit"] < hi))]
        if lp_load != 1.0:
            jobs = scale_lp(jobs, lp_load, seed, lp_window)
            notes.append(f"LP arrivals scaled ×{lp_load} (seed {seed})")
        return Trace(nodes.reset_index(drop=True), jobs.reset_index(drop=True), self.origin, self.name, notes)

    def scale_capacity(self, factor: float) -> Trace:
        """Resize every pool to ``round(factor × nodes)`` nodes (at least one), to create or relieve
        contention: traces sized to their peak demand (Chronus's) never make a quota bind.

        Shrinking keeps nodes spread evenly over each pool's list (sorted by GPUs, then name), so
        the mix of node sizes is kept; growing adds copies named ``<node>~<k>``. Deterministic.
        """
        if not np.isfinite(factor) or factor <= 0:
            raise ValueError(f"capacity scale must be a positive number, got {factor}")
        if factor == 1.0:
            return self
        parts = []
        for _pool, nodes in self.nodes.groupby("pool", sort=True):
            nodes = nodes.sort_values(["gpus", "node_name"], kind="stable")
            n, want = len(nodes), max(1, round(factor * len(nodes)))
            if want <= n:
                idx = np.unique(np.floor(np.arange(want) * n / want).astype(int))
                parts.append(nodes.iloc[idx])
                continue
            copies = [nodes]
            for k in range(1, -(-want // n)):
                extra = nodes.copy()
                extra["node_name"] = extra["node_name"].astype(str) + f"~{k}"
                copies.append(extra)
            parts.append(pd.concat(copies).iloc[:want])
        nodes = pd.concat(parts, ignore_index=True)
        note = (f"capacity scaled ×{factor:g}: {len(self.nodes):,} → {len(nodes):,} nodes, "
                f"{int(self.nodes['gpus'].sum()):,} → {int(nodes['gpus'].sum()):,} GPUs")
        return Trace(nodes, self.jobs, self.origin, self.name, [*self.notes, note])

    def stretch_time(self, factor: float) -> Trace:
        """Multiply submit times and durations by ``factor``: a time-compressed trace (Chronus's
        spans ~5.6 h) stretched to days gives an hourly demand forecaster something to learn."""
        if not np.isfinite(factor) or factor <= 0:
            raise ValueError(f"time scale must be a positive number, got {factor}")
        if factor == 1.0:
            return self
        jobs = self.jobs.copy()
        jobs["submit"] = jobs["submit"] * factor
        jobs["duration"] = jobs["duration"] * factor
        return Trace(self.nodes, jobs, self.origin, self.name,
                     [*self.notes, f"submit times and durations stretched ×{factor:g}"])

    def replay_from(self, t0: float) -> Trace:
        """Start the replay at ``t0``: jobs that ended before are dropped; HP jobs still running
        at ``t0`` become residents submitted at ``t0`` with their remaining duration (we assume
        they were running, as the trace's own t = 0 residents are); earlier LP jobs are dropped.
        """
        if t0 <= 0:
            return self
        j = self.jobs
        end = j["submit"] + j["duration"]
        keep_future = j["submit"] >= t0
        carried = (j["cls"] == "HP") & (j["submit"] < t0) & (end > t0)
        c = j[carried].copy()
        c["duration"] = (c["submit"] + c["duration"]) - t0
        c["submit"] = float(t0)
        c["resident"] = True
        jobs = pd.concat([c, j[keep_future]], ignore_index=True)
        notes = [*self.notes, f"replay from t={t0:.0f} s: {len(c)} HP jobs carried in as residents"]
        return Trace(self.nodes, jobs, self.origin, self.name, notes)


def scale_lp(jobs: pd.DataFrame, factor: float, seed: int,
             window: tuple[float, float] | None = None) -> pd.DataFrame:
    if factor < 0:
        raise ValueError("LP load factor must be ≥ 0")
    rng = np.random.default_rng(seed)
    hp = jobs[jobs["cls"] != "LP"]
    lp = jobs[jobs["cls"] == "LP"]
    whole, frac = int(np.floor(factor)), factor - np.floor(factor)
    parts = []
    if whole >= 1:
        parts.append(lp)
    keep = rng.random(len(lp)) < frac
    extra = [lp[keep]] if frac > 0 else []
    copies = [lp] * max(0, whole - 1) + extra
    if whole == 0:
        parts = extra
        copies = []
    next_id = int(jobs["job_id"].max()) + 1 if len(jobs) else 0
    for c in copies:
        c = c.copy()
        jitter = rng.uniform(-1800, 1800, len(c))
        s = c["submit"].to_numpy() + jitter
        lo, hi = window if window is not None else (0.0, np.inf)
        c["submit"] = np.clip(s, max(lo, 0.0), hi - 1 if np.isfinite(hi) else np.inf).round()
        c["job_id"] = np.arange(next_id, next_id + len(c))
        c["name"] = c["name"].astype(str) + "-x"
        next_id += len(c)
        parts.append(c)
    return pd.concat([hp, *parts], ignore_index=True)
