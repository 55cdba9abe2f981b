"""`gfs-opt solve INSTANCE`: the greedy and/or exact answer for one scheduling round.

Prints spot quotas, admitted LP jobs, HP placements and victims, and each step's solve report;
``--method both`` adds the greedy's gap to the MILP objective and bound. ``--export`` writes the
model(s) as LP/MPS text for any other solver instead of solving.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from gfs_opt.commands import args as cargs
from gfs_opt.errors import GfsError
from gfs_opt.fileio import check_out_file

#: pending jobs beyond which the exact MILPs are refused: their models alone take longer to build
#: than any sensible time limit (100,000 pending LP jobs: 43 s and 0.9 GB with --time-limit 5)
MAX_MILP_PENDING = 10_000
# the choices of `gfs_opt.instance.solve_round` (METHODS, STEPS) and `gfs_opt.solve` (SOLVERS,
# EXPORT_FORMATS), spelled out: importing those modules here would load OR-Tools and every policy
# for any `gfs-opt` command (tests/test_milp_cli.py checks they agree)
METHODS = ("greedy", "milp", "both")
STEPS = ("all", "quota", "preemption")
SOLVERS = ("scip", "highs", "cpsat")
EXPORT_FORMATS = ("lp", "mps")
PRESOLVE = ("fast", "default", "off")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="solve one instance file: greedy, exact MILP, or both side by side")
    p.add_argument("instance", type=Path, metavar="INSTANCE", help="instance file (JSON)")
    p.add_argument("--method", choices=METHODS, default="both")
    p.add_argument("--policy", default="gfs-paper",
                   help=cargs.LazyHelp(lambda: "whose greedy steps answer — the passes the "
                                       "simulator runs for that policy: one of "
                                       f"{_greedy_names()}; {cargs.POLICY_OPTIONS_HELP} "
                                       "(default gfs-paper, the published GFS: every HP gang "
                                       "placed now; the MILPs are GFS's exact steps; gfs says "
                                       "which gangs it would hold back for LP window boundaries "
                                       "and what the paper's step evicts for them)"))
    p.add_argument("--step", choices=STEPS, default="all",
                   help="spot quota / LP admission, HP preemption, or both (default)")
    p.add_argument("--time-limit", type=cargs.number(0, 86_400, lo_open=True), default=10.0,
                   metavar="S",
                   help="seconds for the whole command (default 10): the MILP steps get what "
                        "loading and the greedy steps leave; on time-out the greedy answer is kept")
    p.add_argument("--solver", choices=list(SOLVERS), default="scip")
    p.add_argument("--certifier", choices=[*SOLVERS, "none"], default="cpsat",
                   help="preemption: back-end that may prove the greedy's answer optimal before "
                        "the phase-2 solve (default cpsat; none: always solve)")
    p.add_argument("--presolve", choices=PRESOLVE, default="fast",
                   help="SCIP's presolve: fast (default; no exhaustive probing), default (SCIP's "
                        "own setting) or off; other back-ends keep theirs")
    p.add_argument("--gap", type=cargs.number(0, 1, hi_open=True), default=1e-4,
                   help="relative optimality gap in [0, 1) (default 1e-4)")
    p.add_argument("--candidates", type=cargs.number(0, 1_000_000, integer=True), default=None,
                   metavar="K",
                   help="preemption: top-K candidate nodes per job type (0 = all; default: automatic)")
    p.add_argument("--hard-guarantee", action="store_true",
                   help="never evict an LP job inside its guarantee window (overrides the file)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument("--limit", type=cargs.number(0, 1_000_000, integer=True), default=20,
                   metavar="N",
                   help="text mode: show at most N placements / ids per list (default 20)")
    p.add_argument("--export", choices=EXPORT_FORMATS, default=None,
                   help="write the model(s) to --out instead of solving, as minimisations of "
                        "the negated objective (a solver's optimum is minus the MILP's)")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="export target (default: INSTANCE's name with the format's extension, "
                        "in the current folder): the preemption model (--step preemption or all) "
                        "or the quota model (--step quota); with --step all the quota model also "
                        "goes to FILE-stem.quota.EXT beside it")
    p.set_defaults(handler=_solve)


def _greedy_names() -> str:
    from gfs_opt.instance.solve_round import greedy_policy_names

    return ", ".join(greedy_policy_names())


def _solve(args: argparse.Namespace) -> int:
    import time

    from gfs_opt.instance import load_instance
    from gfs_opt.instance.solve_round import greedy_policy, solve_round
    from gfs_opt.preempt.milp import PreemptOptions
    from gfs_opt.solve import SolverOptions

    t_start = time.perf_counter()
    if args.export and args.out is None:   # beside the caller, named after the instance
        args.out = Path(f"{args.instance.stem}.{args.export}")
    if args.export:
        check_out_file(args.out)
    solver = SolverOptions(solver=args.solver, time_limit=args.time_limit, rel_gap=args.gap,
                           certifier=None if args.certifier == "none" else args.certifier,
                           presolve=args.presolve)
    greedy_policy(args.policy)        # an unknown policy fails before the file is read
    if args.method != "greedy" or args.export:
        _refuse_huge_raw(args)
    inst = load_instance(args.instance)
    rnd = inst.round
    if args.method != "greedy" or args.export:
        _refuse_huge(args, len(rnd.pending_lp), len(rnd.pending_hp))
    if args.hard_guarantee:   # on the round itself, so the checker judges the greedy by it too
        rnd = dataclasses.replace(rnd, params=dataclasses.replace(rnd.params, hard_guarantee=True))
    popts = PreemptOptions(candidates=args.candidates)
    if args.export:
        return _export(rnd, args, popts)
    res = solve_round(rnd, args.method, args.step, solver, popts,
                      deadline=t_start + args.time_limit, policy=args.policy)
    if args.json:
        from gfs_opt.fileio import json_safe

        doc = {"instance": str(args.instance), "time": rnd.time, **res.as_dict()}
        json.dump(json_safe(doc), sys.stdout, indent=2, ensure_ascii=False, allow_nan=False)
        sys.stdout.write("\n")
    else:
        print(format_result(res, rnd, str(args.instance), args.limit))
    failed = [r for r in _milp_reports(res) if r.status == "error"]
    if failed:
        why = failed[0].message or "solver error"
        print(f"gfs-opt: error: the {failed[0].step} MILP failed ({why}); the greedy answer is "
              f"shown instead", file=sys.stderr)
        return 1
    return 0


def _milp_reports(res: Any) -> list[Any]:
    out = []
    if res.quota_milp is not None:
        out.append(res.quota_milp.report)
    if res.preempt_milp is not None:
        out += [r for r in res.preempt_milp.decision.reports if r.method == "milp"]
    return out


def _refuse(args: argparse.Namespace, what: str, n: int) -> None:
    raise GfsError(f"{args.instance}: {n:,} pending {what} jobs; the exact MILPs are limited to "
                   f"{MAX_MILP_PENDING:,} (their models take minutes to build): use --method "
                   f"greedy, or cut a smaller round")


def _refuse_huge(args: argparse.Namespace, n_lp: int, n_hp: int) -> None:
    if args.step in ("all", "quota") and n_lp > MAX_MILP_PENDING:
        _refuse(args, "LP", n_lp)
    if args.step in ("all", "preemption") and n_hp > MAX_MILP_PENDING:
        _refuse(args, "HP", n_hp)


def _refuse_huge_raw(args: argparse.Namespace) -> None:
    """Refuse before the (slow) full validation when a large file's raw lists are already too
    long; small files skip this and are checked after loading."""
    try:
        big = args.instance.stat().st_size > 5_000_000
    except OSError:
        return                      # load_instance reports the file problem
    if not big:
        return
    try:
        doc = json.loads(args.instance.read_bytes())
    except (OSError, ValueError, RecursionError):
        return
    if isinstance(doc, dict):
        lp, hp = doc.get("pending_lp"), doc.get("pending_hp")
        _refuse_huge(args, len(lp) if isinstance(lp, list) else 0,
                     len(hp) if isinstance(hp, list) else 0)


#: what each exported file holds, printed beside its name
EXPORT_WHAT = {
    "preemption": "the HP preemption MILP, objective P − λ·C (P in milli-GPU, C in GPU·s, "
                  "λ = 1/(1 + Σ c_j))",
    "quota": "the spot-quota / LP-admission MILP, objective the admitted value",
}


def _export(rnd: Any, args: argparse.Namespace, popts: Any) -> int:
    from gfs_opt.preempt.milp import export_preemption
    from gfs_opt.quota.milp import export_quota

    out: Path = args.out
    targets: list[tuple[Path, str, str]] = []
    if args.step in ("all", "preemption"):
        targets.append((out, "preemption", export_preemption(rnd, args.export, popts)))
    if args.step in ("all", "quota"):
        qpath = out if args.step == "quota" else out.with_name(f"{out.stem}.quota{out.suffix}")
        targets.append((qpath, "quota", export_quota(rnd, args.export)))
    for path, step, text in targets:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise GfsError(f"{path}: cannot write ({exc.strerror or exc})") from None
        print(f"wrote {path}: {EXPORT_WHAT[step]}")
    print("written as the minimisation of the negated objective (every LP/MPS reader minimises "
          "by default): another solver's optimum is minus the MILP's")
    return 0


# ---- text output ---------------------------------------------------------------------------
def _ids(ids: list[int], limit: int) -> str:
    shown = ", ".join(str(j) for j in ids[:limit])
    more = len(ids) - limit
    return (shown + (f", … (+{more})" if more > 0 else "")) or "—"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f} %"


def _num(x: float | None, fmt: str = ",.1f") -> str:
    return "—" if x is None else format(x, fmt)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                             enumerate(zip(r, widths, strict=True))) for r in rows]


def format_result(res: Any, rnd: Any, title: str, limit: int = 20) -> str:
    from gfs_opt.model import MILLI

    lines = [f"{title}  (time {rnd.time:g} s; {rnd.state.n_nodes} nodes, {rnd.state.n_gpus} GPUs; "
             f"pending {len(rnd.pending_hp)} HP / {len(rnd.pending_lp)} LP; running {len(rnd.running)})",
             f"policy {res.policy}"]
    qg, qm = res.quota_greedy, res.quota_milp
    if qg or qm:
        lines.append("")
        lines.append("spot quota / LP admission")
        keys = sorted(set((qg.quotas if qg else {}) | (qm.quotas if qm else {})))
        rows = [["pool", "class h", *(["rule quota (GPUs)"] if qg else []),
                 *(["MILP quota (GPUs)"] if qm else [])]]
        for key in keys:
            rows.append([key[0], f"{key[1]:g}",
                         *([_num(qg.quotas[key] / MILLI, ",.3f") if key in qg.quotas else "—"] if qg else []),
                         *([_num(qm.quotas[key] / MILLI, ",.3f") if key in qm.quotas else "—"] if qm else [])])
        lines += _table(rows) if keys else ["  no spot quota: LP jobs start wherever they fit"]
        for name, adm, val, extra in (
                [("greedy", qg.admitted, qg.value,
                  "" if qg.feasible else "  (breaks the scenario chance constraint)")] if qg else []) + (
                [("MILP", qm.admitted, qm.value, "")] if qm else []):
            gpus = sum(rnd.jobs[j].demand for j in adm) / MILLI
            lines.append(f"  admitted ({name}): {len(adm)} jobs, {gpus:g} GPUs, value {val:,.2f}{extra}")
            lines.append(f"    ids: {_ids(adm, limit)}")
        if qm:
            lines.append(f"  report: {_report(qm.report)}")
        if res.quota_gap() is not None:
            lines.append(f"  greedy gap to MILP value: {_pct(res.quota_gap())}")
    pg, pm = res.preempt_greedy, res.preempt_milp
    if pg or pm:
        lines.append("")
        lines.append("HP placement / preemption")
        # P in milli-GPU, as in instance files (meta.optimum) and the exported models' objective
        rows = [["method", "HP placed", "GPUs", "P (milli-GPU)", "C (GPU·s)", "victims",
                 "time s", "status"]]
        if pg:
            s = pg.score
            rows.append(["greedy", str(len(pg.decision.placements)), f"{s.placed_gpus:g}",
                         f"{s.placed:,.0f}", f"{s.eviction_cost:,.1f}", str(s.victims),
                         f"{pg.time_s:.3f}", "ok" if not pg.problems else "INFEASIBLE"])
        if pm:
            s = pm.score
            rep = pm.decision.reports[-1]
            rows.append(["MILP", str(len(pm.decision.placements)), f"{s.placed_gpus:g}",
                         f"{s.placed:,.0f}", f"{s.eviction_cost:,.1f}", str(s.victims),
                         f"{rep.time_s:.3f}", rep.status + (" (fallback)" if rep.fallback else "")])
        lines += _table(rows)
        if pm:
            lines.append(f"  report: {_report(pm.decision.reports[-1], scale=MILLI)}")
        if res.placed_gap() is not None:
            lines.append(f"  greedy gap: P {_pct(res.placed_gap())} below MILP "
                         f"({_pct(res.placed_gap(True))} below bound); eviction cost "
                         + ("n/a (different HP sets)" if res.cost_excess() is None
                            else f"{_pct(res.cost_excess())} above MILP"))
        if pg and pg.problems:
            lines.append(f"  greedy answer infeasible (no gap): {'; '.join(pg.problems[:3])}")
        for name, dec in ([("greedy", pg.decision)] if pg else []) + ([("MILP", pm.decision)] if pm else []):
            lines.append(f"  {name} placements:")
            items = sorted(dec.placements.items())
            for jid, pl in items[:limit]:
                job = rnd.jobs[jid]
                where = " ".join(f"{rnd.state.node_names[n]}:{','.join(map(str, g))}" for n, g in pl)
                lines.append(f"    {jid:>8}  {job.g / MILLI:g}×{job.workers}  {where}")
            if len(items) > limit:
                lines.append(f"    … (+{len(items) - limit})")
            lines.append(f"  {name} victims: {_ids(sorted(dec.victims), limit)}")
            if dec.requeue:   # taken at a window boundary: no window broken, no work lost
                lines.append(f"  {name} re-queued at a window boundary: "
                             f"{_ids(sorted(dec.requeue), limit)}")
        held = res.held_back
        if held is not None:
            lines.append(f"  held back by {res.policy}: {_ids(held.gangs, limit)}; the paper's step "
                         f"would place {_ids(held.paper_placed, limit)} now, evicting "
                         f"{_ids(sorted(held.paper.decision.victims), limit)}")
    if res.notes:
        lines.append("")
        lines += [f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def _report(r: Any, scale: float | None = None) -> str:
    """One solve report; ``scale``: the preemption step, whose report counts P in GPUs, is shown
    in milli-GPU like its table."""
    if scale is None:
        values = [f"objective {_num(r.objective, ',.3f')}", f"bound {_num(r.bound, ',.3f')}"]
    else:
        def milli(x: float | None) -> str:
            return _num(None if x is None else x * scale, ",.0f")
        values = [f"P {milli(r.objective)} milli-GPU", f"bound {milli(r.bound)}"]
    parts = [f"{r.method} {r.status}", *values, f"gap {_pct(r.gap)}", f"{r.time_s:.3f} s",
             r.solver]
    if r.fallback:
        parts.append("FALLBACK to greedy")
    if r.message:
        parts.append(r.message)
    return " | ".join(parts)
