"""A trace slice made runnable on the emulated cluster — shared by the real replay and the
simulator, so both see exactly the same jobs on exactly the same nodes.

Steps: load the trace; keep one pool (default: the largest); start the replay at the slice start
(HP jobs still running then are carried in as residents submitted at the start, as
`Trace.replay_from` does); keep the jobs submitted inside the slice; draw guarantee classes where
several are configured; round fractional requests up to one whole GPU (fake GPUs cannot be
shared); drop jobs that cannot fit the emulated cluster at all; replace the nodes by the emulated
ones (N × G, same pool name).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.experiments.runner import assign_guarantee_classes
from gfs_opt.model import MILLI
from gfs_opt.slurm import demo
from gfs_opt.slurm.bridge import hp_history
from gfs_opt.traces.base import Trace, parse_time
from gfs_opt.traces.load import load_trace


@dataclass
class ReplayPlan:
    trace: Trace                     # emulated nodes + the slice's jobs (trace seconds)
    t0: float                        # slice start = replay start (trace seconds)
    t1: float                        # slice end (no submissions from here on)
    pool: str
    source: str
    nodes: int
    gpus: int
    history: pd.DataFrame            # hourly HP usage before t0 (forecaster warm-up)
    notes: list[str] = field(default_factory=list)
    #: (pool, nodes) of a cluster with `--pools` (jobs go to their pool's partition and spot
    #: QOS); empty: the single-pool cluster, every job in partition `gpu`
    pool_nodes: tuple[tuple[str, int], ...] = ()

    @property
    def pools(self) -> tuple[str, ...]:
        return tuple(p for p, _ in self.pool_nodes) if self.pool_nodes else (self.pool,)

    def pool_key(self, pool: str) -> str | None:
        """The pool as the Slurm names take it (`layout.spot_qos`, `partition_of`)."""
        return pool if self.pool_nodes else None

    @property
    def jobs(self) -> pd.DataFrame:
        return self.trace.jobs

    @property
    def accounts(self) -> list[str]:
        """Slurm accounts of the tenants (`build_plan` names tenants by account)."""
        return sorted(self.trace.jobs["org"].astype(str).unique())

    def describe(self) -> str:
        j = self.jobs
        hp = int((j["cls"] == "HP").sum())
        res = int(j["resident"].sum()) if "resident" in j else 0
        where = (f"pool {self.pool}" if not self.pool_nodes else "pools " + " + ".join(
            f"{p} ({n} nodes, {int((j['pool'] == p).sum())} jobs)" for p, n in self.pool_nodes))
        return (f"{self.source} {where}: slice [{self.t0:.0f}, {self.t1:.0f}) s "
                f"({(self.t1 - self.t0) / 3600:.1f} h), {len(j)} jobs ({hp} HP incl. {res} "
                f"carried-in, {len(j) - hp} LP) on {self.nodes} × {self.gpus} GPUs")


def account_of(org: str) -> str:
    """Slurm account of a tenant: ``org-<name>`` with characters Slurm accepts (idempotent)."""
    if str(org).startswith("org-"):
        return str(org)
    clean = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(org)).lower()
    return f"org-{clean or 'none'}"


def build_plan(source: str, window: tuple[str | float, str | float], nodes: int, gpus: int,
               pool: str | None = None, classes: tuple[float, ...] = (1.0,), lp_load: float = 1.0,
               seed: int = 0, max_jobs: int | None = None,
               pools: tuple[tuple[str, int], ...] = ()) -> ReplayPlan:
    """``pools``: (trace pool, emulated nodes) of a cluster with `--pools` — every listed pool
    is kept, on its own nodes (consecutive, as `ClusterSpec.nodes_of` numbers them)."""
    if pools:
        if pool is not None:
            raise GfsError("--pool picks one pool of a single-pool cluster; this cluster has "
                           f"--pools {','.join(p for p, _ in pools)}")
        if sum(n for _, n in pools) != nodes:
            raise GfsError(f"--pools has {sum(n for _, n in pools)} nodes, the cluster {nodes}")
        if source == demo.NAME:
            raise GfsError("the demo trace has one pool: replay a trace with the cluster's pools")

    if source == demo.NAME:
        full = demo.demo_trace(nodes, gpus, seed)
    else:
        full = load_trace(source, seed=seed)
    t0 = parse_time(window[0], full.origin, "--window start")
    t1 = parse_time(window[1], full.origin, "--window end")
    assert t0 is not None and t1 is not None
    if t1 <= t0:
        raise GfsError(f"--window end {window[1]} is not after its start {window[0]}")
    caps = full.nodes.groupby("pool")["gpus"].sum().sort_values(ascending=False)
    unknown = [p for p, _ in pools if p not in caps.index]
    if unknown:
        raise GfsError(f"--pools {unknown}: the trace has pools {', '.join(map(str, caps.index))}")
    names = [p for p, _ in pools]
    if pools:
        pool = names[0]
    elif pool is None:
        pool = str(caps.index[0])
    elif pool not in caps.index:
        raise GfsError(f"--pool {pool!r}: the trace has pools {', '.join(map(str, caps.index))}")
    notes = ([f"pool {pool} ({int(caps[pool])} GPUs in the trace) on {nodes} × {gpus} emulated "
              "GPUs"] if not pools else
             [f"pool {p} ({int(caps[p])} GPUs in the trace) on {n} × {gpus} emulated GPUs"
              for p, n in pools])
    names = names or [pool]
    # tenants are Slurm accounts from here on, in the simulator too, so the forecaster's series
    # ("pool|account") are named alike whether the live controller or the simulator feeds them
    full = Trace(full.nodes, full.jobs.assign(org=full.jobs["org"].map(account_of)), full.origin,
                 full.name, full.notes)
    kept = full.select(pools=names)
    history = pd.concat([hp_history(kept, t0, p) for p in names], ignore_index=True)
    tr = kept.replay_from(t0)
    try:
        tr = tr.select(lp_window=(t0, t1), lp_load=lp_load, seed=seed)
    except ValueError as exc:
        raise GfsError(str(exc)) from None
    jobs = tr.jobs[tr.jobs["submit"] < t1].copy()
    if len(classes) > 1 or classes != (1.0,):
        jobs = assign_guarantee_classes(Trace(tr.nodes, jobs, tr.origin, tr.name), classes,
                                        seed).jobs.copy()
    frac = jobs["g"] < MILLI
    if frac.any():
        notes.append(f"{int(frac.sum())} fractional-GPU request(s) rounded up to 1 GPU")
        jobs.loc[frac, "g"] = MILLI
    pool_size = jobs["pool"].map(dict(pools) if pools else {pool: nodes})
    too_big = (jobs["g"] > gpus * MILLI) | (jobs["g"] * jobs["workers"] > pool_size * gpus * MILLI)
    if too_big.any():
        notes.append(f"{int(too_big.sum())} job(s) larger than the emulated cluster dropped")
        jobs = jobs[~too_big]
    jobs = jobs.sort_values(["submit", "job_id"], kind="stable")
    if max_jobs is not None:
        if max_jobs < 1:
            raise GfsError("--max-jobs must be ≥ 1")
        if len(jobs) > max_jobs:
            notes.append(f"kept the first {max_jobs} of {len(jobs)} jobs")
            jobs = jobs.iloc[:max_jobs]
    if jobs.empty:
        raise GfsError(f"no jobs of pool(s) {', '.join(names)} in the slice "
                       f"[{window[0]}, {window[1]})")
    node_pool = [p for p, n in (pools or ((pool, nodes),)) for _ in range(n)]
    node_frame = pd.DataFrame({"node_name": [f"n{i}" for i in range(1, nodes + 1)],
                               "pool": node_pool, "gpus": gpus, "cpus": 16.0})
    trace = Trace(node_frame, jobs.reset_index(drop=True), full.origin, full.name,
                  [*tr.notes, *notes])
    return ReplayPlan(trace, float(t0), float(t1), pool, source, nodes, gpus, history, notes,
                      tuple(pools))
