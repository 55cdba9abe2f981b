"""Greedy vs exact on instance files: one row per instance with both answers, gaps and times.

Gaps are the greedy's shortfall, ≥ 0 when the MILP is at least as good (`solve_round.RoundResult`):
``quota_gap`` = (V* − V_greedy)/V* of the admission value, ``placed_gap`` = (P* − P_greedy)/P* of
HP value placed, ``cost_excess`` = (C_greedy − C*)/C* of eviction cost when both place the same HP
value. A greedy answer the checker rejects (e.g. it evicts under ``hard_guarantee``) has no gap
and is counted in ``greedy_infeasible``.

Both answer the paper's question, every HP gang placed now: the greedy is the published GFS's PTS
(`PTS_POLICY`, `gfs-opt solve`'s default). gfs_opt's `gfs` may first hold HP gangs back for LP window
boundaries, and most gangs of these rounds have just arrived, so under `gfs` both answers would
mostly be "wait" and the gaps would measure nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from gfs_opt.errors import GfsError
from gfs_opt.instance import load_round
from gfs_opt.instance.solve_round import solve_round
from gfs_opt.solve import SolverOptions

#: the greedy policy of the comparison: the published GFS, whose HP gangs evict at once
PTS_POLICY = "gfs-paper"


def instance_files(folder: Path, include: Sequence[str] | None = None) -> list[Path]:
    """Instance files in ``folder`` (``*.json``), optionally only names starting with a prefix."""
    files = sorted(folder.glob("*.json"))
    if include:
        files = [f for f in files if f.name.startswith(tuple(include))]
    if not files:
        raise GfsError(f"no instance files in {folder}")
    return files


def _seconds(*outcomes: object) -> float:
    return float(sum(getattr(o, "time_s", 0.0) or 0.0 for o in outcomes if o is not None))


def solve_instances(files: Iterable[Path], time_limit: float = 10.0, solver: str = "scip",
                    progress: bool = False) -> pd.DataFrame:
    """Both solvers on every file, both steps; see the module doc for the columns' meaning."""
    opts = SolverOptions(solver=solver, time_limit=time_limit)
    rows = []
    files = list(files)
    for path in tqdm(files, desc="greedy vs MILP", unit="instance", disable=not progress):
        rnd = load_round(path)
        res = solve_round(rnd, "both", "all", opts, policy=PTS_POLICY)
        row: dict[str, object] = {
            "instance": path.stem, "nodes": rnd.state.n_nodes, "gpus": rnd.state.n_gpus,
            "running": len(rnd.running), "pending_hp": len(rnd.pending_hp),
            "pending_lp": len(rnd.pending_lp)}
        qg, qm = res.quota_greedy, res.quota_milp
        if qg is not None and qm is not None and len(rnd.pending_lp):
            row.update({"quota_greedy_value": qg.value, "quota_milp_value": qm.value,
                        "quota_gap": res.quota_gap(), "quota_status": qm.report.status,
                        "quota_greedy_s": qg.time_s, "quota_milp_s": qm.report.time_s})
        pg, pm = res.preempt_greedy, res.preempt_milp
        if pg is not None and pm is not None and len(rnd.pending_hp):
            row.update({
                "placed_greedy": pg.score.placed, "placed_milp": pm.score.placed,
                "cost_greedy": pg.score.eviction_cost, "cost_milp": pm.score.eviction_cost,
                "placed_gap": res.placed_gap(), "cost_excess": res.cost_excess(),
                "greedy_infeasible": bool(pg.problems), "preempt_status": _status(pm),
                "preempt_greedy_s": pg.time_s, "preempt_milp_s": _seconds(pm.phase1, pm.phase2)})
        rows.append(row)
    return pd.DataFrame(rows)


def _status(res: object) -> str:
    reports = getattr(getattr(res, "decision", None), "reports", None) or []
    for rep in reports:
        if rep.step == "preemption" and rep.method == "milp":
            return f"{rep.status}{' (fallback)' if rep.fallback else ''}"
    p1 = getattr(res, "phase1", None)
    return p1.status if p1 is not None else "n/a"


def summarize_gaps(df: pd.DataFrame) -> dict[str, float]:
    """Headline numbers of a `solve_instances` table."""
    out: dict[str, float] = {"instances": float(len(df))}
    for col in ("placed_gap", "cost_excess", "quota_gap"):
        if col in df:
            s = pd.to_numeric(df[col], errors="coerce").dropna()
            out[f"{col}_n"] = float(len(s))
            out[f"{col}_mean"] = float(s.mean()) if len(s) else float("nan")
            out[f"{col}_max"] = float(s.max()) if len(s) else float("nan")
            out[f"{col}_zero_share"] = float((s.abs() < 1e-9).mean()) if len(s) else float("nan")
    if "greedy_infeasible" in df:
        out["greedy_infeasible"] = float(df["greedy_infeasible"].fillna(False).astype(bool).sum())
    for col in ("preempt_greedy_s", "preempt_milp_s", "quota_greedy_s", "quota_milp_s"):
        if col in df:
            out[f"{col}_total"] = float(pd.to_numeric(df[col], errors="coerce").sum())
    return out
