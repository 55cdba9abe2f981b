"""`gfs-opt slurm compare`: the same compressed slice on the live cluster and in the simulator.

For each policy — ``gfs`` (the controller on Slurm; simulated as ``gfs-slurm``) and
``slurm-qos`` (Slurm's plain QOS preemption; simulated as ``slurm-qos``) — the real replay and a
simulation on the same plan (same jobs, same N × G nodes, same guarantee classes, same restart
overhead and quota refresh in trace time, same forecaster history) are put side by side in trace
seconds. A relative gap above ``GAP_FLAG`` is flagged; BENCHMARKS.md explains each.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.experiments.runner import RunSpec
from gfs_opt.sim.slurm_model import SlurmModel
from gfs_opt.slurm.bridge import run_simulation
from gfs_opt.slurm.plan import ReplayPlan

GAP_FLAG = 0.25
SIM_POLICY = {"gfs": "gfs-slurm", "slurm-qos": "slurm-qos"}

#: (label, how to read it from a summary + jobs table)
METRICS: list[tuple[str, str]] = [
    ("LP evictions", "lp_evictions"),
    ("failed windows", "lp_windows_failed"),
    ("ok windows", "lp_windows_ok"),
    ("LP eviction rate %", "lp_eviction_rate_pct"),
    ("LP JQT mean (s)", "lp_jqt_mean"),
    ("HP JQT mean (s)", "hp_jqt_mean"),
    ("LP JCT mean (s)", "lp_jct_mean"),
    ("allocation %", "allocation_pct"),
    ("HP evictions", "hp_evictions"),
    ("unfinished LP", "lp_unfinished"),
    ("unfinished HP", "hp_unfinished"),
]


@dataclass
class Side:
    summary: dict[str, Any]
    jobs: pd.DataFrame

    def value(self, key: str) -> float:
        s = self.summary
        if key == "lp_evictions":
            lp = self.jobs[self.jobs["cls"] == "LP"] if len(self.jobs) else self.jobs
            return float(lp["evictions"].sum()) if len(lp) else 0.0
        if key == "lp_eviction_rate_pct":
            return 100.0 * float(s["lp_eviction_rate"])
        if key == "allocation_pct":
            return 100.0 * float(s["allocation_rate"])
        v = s.get(key)
        return math.nan if v is None else float(v)


def real_folder(root: Path, policy: str) -> Path:
    """Where an earlier real run of ``policy`` lives: ``root/<policy>`` (a replay's --out) or
    ``root/<policy>/real`` (a compare's --out)."""
    for cand in (root / policy, root / policy / "real"):
        if (cand / "summary.json").exists():
            return cand
    raise GfsError(f"--real {root}: no {policy}/summary.json or {policy}/real/summary.json")


def load_side(folder: Path) -> Side:
    path = folder / "summary.json"
    if not path.exists():
        raise GfsError(f"{folder}: no summary.json (not a replay or simulation output)")
    summary = json.loads(path.read_text())["summary"]
    jobs = pd.read_csv(folder / "jobs.csv") if (folder / "jobs.csv").exists() else pd.DataFrame()
    return Side(summary, jobs)


def slurm_model(speedup: float, latencies: Path | None = None) -> SlurmModel:
    """The simulator's Slurm scheduling model for a replay at ×``speedup``: the measured
    defaults, or the Slurm-side means of a `gfs-opt slurm measure` output."""
    if latencies is None:
        return SlurmModel(speedup=speedup)
    try:
        m = json.loads(latencies.read_text())
        return SlurmModel(start_latency_wall_s=float(m["start_slurm"]["mean"]),
                          requeue_delay_wall_s=float(m["requeue_slurm"]["mean"]),
                          quota_delay_wall_s=float(m["grptres_slurm"]["mean"]), speedup=speedup)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GfsError(f"--latencies {latencies}: not a `gfs-opt slurm measure` output "
                       f"({exc})") from None


def simulate(plan: ReplayPlan, policy: str, out: Path, classes: tuple[float, ...],
             forecaster: str, refresh_s: float, rho: float, drain_s: float,
             slurm: SlurmModel | None = None) -> Side:
    """Simulate the plan with the model of the live system (`gfs_opt.slurm.bridge`); with
    ``slurm``, Slurm's own scheduling decides the starts (`gfs_opt.sim.slurm_model`)."""
    out.mkdir(parents=True, exist_ok=True)
    history = out / "history.csv"
    plan.history.to_csv(history, index=False)
    sim_policy = SIM_POLICY[policy]
    options: dict[str, Any] = ({"forecaster": forecaster, "history": str(history)}
                               if sim_policy == "gfs-slurm" else {})
    spec = RunSpec(trace=plan.source, policy=sim_policy, policy_options=options,
                   window=(plan.t0, plan.t1), pools=plan.pools,
                   params={"rho": rho, "guarantee_classes": classes, "quota_refresh_s": refresh_s},
                   drain_days=drain_s / 86_400.0)
    res = run_simulation(spec, (plan.trace, plan.t0, plan.t1), slurm=slurm)
    res.write(out)
    return Side(res.summary, res.jobs)


def gap(real: float, sim: float) -> float:
    if math.isnan(real) or math.isnan(sim):
        return math.nan
    if sim == 0:
        return 0.0 if real == 0 else math.inf
    return (real - sim) / abs(sim)


def table(sides: dict[str, tuple[Side, Side]],
          modelled: dict[str, Side] | None = None) -> pd.DataFrame:
    """Real vs simulated per metric and policy; with ``modelled`` (policy → the simulation with
    the Slurm scheduling model) a second pair of columns ``sim+slurm`` and its gap."""
    rows = []
    for label, key in METRICS:
        row: dict[str, Any] = {"metric": label}
        for pol, (real, sim) in sides.items():
            r, s = real.value(key), sim.value(key)
            row[f"{pol} real"] = r
            row[f"{pol} sim"] = s
            row[f"{pol} gap %"] = 100.0 * gap(r, s)
            if modelled and pol in modelled:
                m = modelled[pol].value(key)
                row[f"{pol} sim+slurm"] = m
                row[f"{pol} gap+slurm %"] = 100.0 * gap(r, m)
        rows.append(row)
    return pd.DataFrame(rows)


def format_table(df: pd.DataFrame) -> str:
    def fmt(col: str, v: float) -> str:
        if isinstance(v, str):
            return v
        if math.isnan(v):
            return "–"
        if col.endswith("%") and "gap" in col:
            if math.isinf(v):
                return "+∞ !"
            return f"{v:+.0f}{' !' if abs(v) > 100 * GAP_FLAG else ''}"
        return f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    cols = list(df.columns)
    widths = [max(len(c), *(len(fmt(c, v)) for v in df[c])) for c in cols]
    lines = [" | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)),
             "-|-".join("-" * w for w in widths)]
    for _, r in df.iterrows():
        lines.append(" | ".join(fmt(c, r[c]).ljust(w) if c == "metric" else fmt(c, r[c]).rjust(w)
                                for c, w in zip(cols, widths, strict=True)))
    return "\n".join(lines)


def markdown(df: pd.DataFrame) -> str:
    text = format_table(df).splitlines()
    head, rule, *body = text
    return "\n".join(["| " + head + " |", "|-" + rule.replace("-|-", "-|-") + "-|",
                      *("| " + b + " |" for b in body)])
