"""Compare `trace_stats` with ``calibration_targets.json``: one row per check.

Tolerances from the targets file's ``tolerances``:
  jobs_total — relative (``jobs_total_rel``); monthly HP jobs/day and Spot totals — relative
  (``monthly_rel``); every share — absolute (``share_abs``); duration quantiles — in log10
  (``duration_quantile_log10``); hourly Fano factor — a minimum (``fano_factor_min``);
  hour-of-day peak-to-trough — a range.

Tolerances this module adds for targets listed without one:
  * inter-arrival quantiles: log10, same width as the duration quantiles;
  * residents at t = 0, hourly arrival mean, node count and GPUs (total and per model), span:
    relative, same width as ``jobs_total_rel``; node checks also allow one 8-GPU node of slack;
  * hourly arrival variance: log10 0.15;
  * organisations: ± 8 (≈ 10 %); orgs with ≥ 1,000 jobs: ± 3; worker_num_max: log10 0.3 (×2);
  * requested-GPUs / capacity per hour: mean and median ± 0.10 absolute, max relative 25 %.
Count-like targets (a number of jobs) also allow three Poisson standard deviations, which only
matters for small counts (e.g. the 60 Spot jobs of March at reduced scale).

``scale``: for a trace generated at ``scale < 1`` the extensive targets are scaled (jobs, nodes,
monthly counts, hourly mean; hourly variance and the Fano minimum as binomial thinning changes
them; inter-arrival gaps stretch by 1/scale). Targets with no honest scaled value (number of
organisations, orgs with ≥ 1,000 jobs, largest gang, peak hourly pressure) are reported with
``ok = None``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import pandas as pd

from gfs_opt.errors import GfsError
from gfs_opt.paths import alibaba_dir, calibration_targets_path

NODE_SLACK_GPUS = 8
Row = dict


def _get(d: dict, path: str):
    cur = d
    for part in path.split("/"):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _row(name: str, target, actual, tolerance: str, test: Callable[[float, float], bool] | None) -> Row:
    ok: bool | None
    if test is None:
        ok = None
    elif actual is None or target is None or (isinstance(actual, float) and math.isnan(actual)):
        ok = False
    else:
        ok = bool(test(float(target), float(actual)))
    return {"name": name, "target": target, "actual": actual, "tolerance": tolerance, "ok": ok}


def _rel(r: float, count_like: bool = False, slack: float = 0.0):
    def test(t: float, a: float) -> bool:
        allowed = r * abs(t) + slack
        if count_like:
            allowed = max(allowed, 3 * math.sqrt(max(t, 1.0)))
        return abs(a - t) <= allowed

    text = f"±{r:.0%} rel" + (" (or 3σ Poisson)" if count_like else "")
    return text + (f" + {slack:g}" if slack else ""), test


def _abs(x: float):
    return f"±{x:g} abs", lambda t, a: abs(a - t) <= x


def _log10(x: float):
    return f"±{x:g} log10", lambda t, a: a > 0 and t > 0 and abs(math.log10(a / t)) <= x


@lru_cache(maxsize=1)
def _real_nodes() -> dict[str, tuple[str, int]]:
    """node_name → (gpu model, GPUs) of the real v2026 node file (shipped)."""
    nodes = pd.read_csv(alibaba_dir() / "node_info_df.csv")
    return {str(n): (str(m), int(g)) for n, m, g in
            zip(nodes["node_name"], nodes["gpu_model"], nodes["gpu_capacity_num"], strict=True)}


def calibration_scale(trace: object) -> float | None:
    """The scale at which ``trace`` can be scored against the targets, or None.

    The targets describe the real v2026 trace on its whole cluster, so only traces on that
    cluster are comparable: the real job file or a full-scale synthetic trace (scale 1), or a
    synthetic trace on a stratified sample of its nodes with every GPU model present (`trace
    synth --scale s`: scale = share of the nodes kept). Other clusters (subsets of the GPU models
    such as `small` or `paper-a100`, other traces) are not scored.
    """
    real = _real_nodes()
    nodes = trace.nodes  # type: ignore[attr-defined]
    mine = {str(n): (str(p), int(g)) for n, p, g in
            zip(nodes["node_name"], nodes["pool"], nodes["gpus"], strict=True)}
    if not mine or any(real.get(n) != v for n, v in mine.items()):
        return None
    if {m for m, _ in mine.values()} != {m for m, _ in real.values()}:
        return None
    return len(mine) / len(real)


def calibration_report(stats: dict, targets_path: Path | str | None = None,
                       scale: float = 1.0) -> list[Row]:
    """One row per check: {name, target, actual, tolerance, ok}; [] when there are no targets."""
    path = Path(targets_path) if targets_path is not None else calibration_targets_path()
    if not path.exists():
        return []
    try:
        t = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise GfsError(f"{path}: cannot read calibration targets ({exc})") from None
    tol = t.get("tolerances", {})
    rel_jobs = tol.get("jobs_total_rel", 0.05)
    share = tol.get("share_abs", 0.03)
    qlog = tol.get("duration_quantile_log10", 0.15)
    monthly_rel = tol.get("monthly_rel", 0.25)
    s = float(scale)
    full = s == 1.0
    rows: list[Row] = []

    def add(name: str, target, tol_test, key: str | None = None, target_scale: float = 1.0) -> None:
        text, test = tol_test
        tgt = target if target is None or target_scale == 1 else target * target_scale
        rows.append(_row(name, tgt, _get(stats, key or name), text, test))

    def add_na(name: str, target) -> None:
        if full:
            return
        rows.append(_row(name, target, _get(stats, name), "n/a at this scale", None))

    add("jobs_total", t.get("jobs_total"), _rel(rel_jobs, True), target_scale=s)
    add("span_seconds", t.get("span_seconds"), _rel(rel_jobs))
    if full:
        add("organizations", t.get("organizations"), ("±8", lambda a, b: abs(a - b) <= 8))
    else:
        add_na("organizations", t.get("organizations"))
    for group in ("job_type_share", "gpu_seconds_share"):
        for k, v in t.get(group, {}).items():
            add(f"{group}/{k}", v, _abs(share))
    add("resident_hp_jobs_at_t0", t.get("resident_hp_jobs_at_t0"), _rel(rel_jobs, True), target_scale=s)
    for k, v in t.get("gpu_model_job_share", {}).items():
        add(f"gpu_model_job_share/{k}", v, _abs(share))
    counts = t.get("gpu_request_per_worker_counts", {})
    total = sum(counts.values())
    for k, v in counts.items():
        add(f"gpu_request_per_worker_share/{k}", v / total, _abs(share))
    add("share_jobs_below_one_gpu", t.get("share_jobs_below_one_gpu"), _abs(share))
    for k, v in t.get("worker_num_share", {}).items():
        add(f"worker_num_share/{k}", v, _abs(share))
    if full:
        add("worker_num_max", t.get("worker_num_max"), _log10(0.3))
    else:
        add_na("worker_num_max", t.get("worker_num_max"))
    for k, v in t.get("duration_quantiles_all", {}).items():
        add(f"duration_quantiles_all/{k}", v, _log10(qlog))
    for c, qs in t.get("duration_quantiles_by_type", {}).items():
        for k, v in qs.items():
            add(f"duration_quantiles_by_type/{c}/{k}", v, _log10(qlog))
    for k, v in t.get("duration_bucket_job_share", {}).items():
        add(f"duration_bucket_job_share/{k}", v, _abs(share))
    for k, v in t.get("inter_arrival_quantiles", {}).items():
        add(f"inter_arrival_quantiles/{k}", v, _log10(qlog), target_scale=1 / s)
    hourly = t.get("hourly_arrivals", {})
    if "mean" in hourly:
        add("hourly_arrivals/mean", hourly["mean"], _rel(rel_jobs), target_scale=s)
    if "variance" in hourly and "mean" in hourly:
        thinned = s * s * hourly["variance"] + s * (1 - s) * hourly["mean"]
        add("hourly_arrivals/variance", thinned, _log10(0.15))
    if "fano_factor_min" in tol:
        fmin = s * tol["fano_factor_min"] + (1 - s)
        add("hourly_arrivals/fano_factor", hourly.get("fano_factor"),
            (f"≥ {fmin:g}", lambda _t, a, m=fmin: a >= m))
    if "hour_of_day_peak_to_trough" in t:
        lo, hi = tol.get("hour_of_day_peak_to_trough_range", [1.5, 3.0])
        add("hour_of_day_peak_to_trough", t["hour_of_day_peak_to_trough"],
            (f"in [{lo:g}, {hi:g}]", lambda _t, a: lo <= a <= hi))
    for k, v in t.get("org_top_shares_of_jobs", {}).items():
        add(f"org_top_shares_of_jobs/{k}", v, _abs(share))
    if full:
        add("orgs_with_at_least_1000_jobs", t.get("orgs_with_at_least_1000_jobs"),
            ("±3", lambda a, b: abs(a - b) <= 3))
    else:
        add_na("orgs_with_at_least_1000_jobs", t.get("orgs_with_at_least_1000_jobs"))
    for kind, vals in t.get("monthly", {}).items():
        for m, v in vals.items():
            count_like = kind == "Spot_jobs_total"
            add(f"monthly/{kind}/{m}", v, _rel(monthly_rel, count_like), target_scale=s)
    for k, v in t.get("requested_gpus_over_capacity_hourly", {}).items():
        name = f"requested_gpus_over_capacity_hourly/{k}"
        if k == "max" and not full:
            add_na(name, v)  # one big gang moves a small cluster's peak a lot
        else:
            add(name, v, _rel(0.25) if k == "max" else _abs(0.10))
    nodes = t.get("nodes", {})
    slack = NODE_SLACK_GPUS
    if "count" in nodes:
        add("nodes/count", nodes["count"], _rel(rel_jobs, slack=1), target_scale=s)
    if "gpus" in nodes:
        add("nodes/gpus", nodes["gpus"], _rel(rel_jobs, slack=slack), target_scale=s)
    for k, v in nodes.get("by_model_gpus", {}).items():
        add(f"nodes/by_model_gpus/{k}", v, _rel(rel_jobs, slack=slack), target_scale=s)
    return rows


def _fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.4g}"
    return str(v)


def format_report(stats: dict, report: list[Row]) -> str:
    """A readable summary of ``stats`` and an aligned target-vs-actual table of ``report``."""
    nodes = stats.get("nodes", {})
    press = stats.get("requested_gpus_over_capacity_hourly", {})
    lines = [
        f"jobs {_fmt(stats.get('jobs_total'))}  ·  nodes {_fmt(nodes.get('count'))}  ·  "
        f"GPUs {_fmt(nodes.get('gpus'))}  ·  orgs {_fmt(stats.get('organizations'))}  ·  "
        f"span {(stats.get('span_seconds') or 0) / 86400:.1f} days",
    ]
    by_pool = press.get("by_pool", {})
    if by_pool:
        lines.append("requested GPUs / capacity per hour, by pool (mean / median / max):")
        width = max(len(p) for p in by_pool)
        for p, v in by_pool.items():
            lines.append(f"  {p:<{width}}  {_fmt(v['mean'])} / {_fmt(v['median'])} / {_fmt(v['max'])}")
    if not report:
        lines.append("no calibration targets found (calibration_targets.json missing): "
                     "statistics only")
        return "\n".join(lines)
    cells = [(r["name"], _fmt(r["target"]), _fmt(r["actual"]), r["tolerance"],
              {True: "ok", False: "FAIL", None: "-"}[r["ok"]]) for r in report]
    header = ("check", "target", "actual", "tolerance", "")
    widths = [max(len(c[i]) for c in [*cells, header]) for i in range(5)]
    lines.append("")
    lines.append("  ".join(h.ljust(wd) for h, wd in zip(header, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * wd for wd in widths))
    for c in cells:
        lines.append(f"{c[0]:<{widths[0]}}  {c[1]:>{widths[1]}}  {c[2]:>{widths[2]}}  "
                     f"{c[3]:<{widths[3]}}  {c[4]}")
    failed = sum(r["ok"] is False for r in report)
    checked = sum(r["ok"] is not None for r in report)
    lines.append(f"{checked - failed}/{checked} checks within tolerance"
                 + (f"; {failed} FAILED" if failed else ""))
    return "\n".join(lines)
