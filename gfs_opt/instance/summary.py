"""Per-pool summary of a `Round` (what `gfs-opt instance show` prints)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gfs_opt.model import MILLI, Round

COLUMNS = ("pool", "nodes", "gpus", "used", "used_hp", "used_lp", "running_hp", "running_lp",
           "pending_hp", "pending_lp", "pending_gpus")
_HEADERS = ("pool", "nodes", "GPUs", "used", "HP used", "LP used", "run HP", "run LP",
            "pend HP", "pend LP", "pend GPUs")


def summarise(rnd: Round) -> list[dict[str, Any]]:
    """One row per pool plus a final 'total' row; GPU amounts in GPUs (floats)."""
    st = rnd.state
    rows: dict[str, dict[str, Any]] = {}
    for p, pool in enumerate(st.pools):
        a, b = st.pool_slice(p)
        rows[pool] = {"pool": pool, "nodes": b - a, "gpus": int(st.node_gpus[a:b].sum()),
                      "used": st.pool_used[p] / MILLI, "used_hp": st.pool_hp[p] / MILLI,
                      "used_lp": st.pool_lp[p] / MILLI, "running_hp": 0, "running_lp": 0,
                      "pending_hp": 0, "pending_lp": 0, "pending_gpus": 0.0}
    for rj in rnd.running.values():
        rows[rj.job.pool]["running_hp" if rj.job.is_hp else "running_lp"] += 1
    for key, ids in (("pending_hp", rnd.pending_hp), ("pending_lp", rnd.pending_lp)):
        for jid in ids:
            job = rnd.jobs[jid]
            rows[job.pool][key] += 1
            rows[job.pool]["pending_gpus"] += job.demand / MILLI
    out = list(rows.values())
    total: dict[str, Any] = {"pool": "total"}
    for col in COLUMNS[1:]:
        total[col] = sum(r[col] for r in out)
    return [*out, total]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return f"{value:,}" if isinstance(value, int) else str(value)


def format_summary(rows: list[dict[str, Any]], title: str = "",
                   meta: Mapping[str, Any] | None = None) -> str:
    table = [list(_HEADERS)] + [[_cell(r[c]) for c in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = [title] if title else []
    for line in table:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(line, widths, strict=True))))
    for key, value in (meta or {}).items():
        lines.append(f"meta.{key}: {str(value)[:100]}")
    return "\n".join(lines)
