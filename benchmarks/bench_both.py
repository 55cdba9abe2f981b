"""Does GFS win both at once? The grid of GFS against both baseline families, cached cell by cell.

    python benchmarks/bench_both.py run [--grid targets|ablations|chronus|seeds|ptsorder|all] [--workers N] [--refresh P,Q]
    python benchmarks/bench_both.py table [targets|allowance|ablations|chronus|seeds|all]

A cell is one replay (setup or trace, policy, LP load, seed, forecaster, capacity and time
scale); its summary goes to ``results/bench-both/<key>.json`` (gitignored) and is never re-run,
so the grid can be stopped and resumed. Each cell records the fingerprint of the package's
source it ran on (`code_fingerprint`); ``table`` names the policies whose cells came from other
code, and ``run --refresh P,Q`` re-runs those of policies P and Q (after a change to them; the
key is the cell alone, so the baselines' cells stay). ``table`` reads the cells and prints, per load and
forecaster, every policy's LP eviction rate and LP JQT as a mean with a 95 % interval over seeds,
the family means and the targets of the issue, each marked met or missed. A baseline without a
quota does not read the forecast: it runs once per seed and is shown under both forecasters.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from code_fingerprint import code_fingerprint

from gfs_opt.experiments.runner import RunSpec, run
from gfs_opt.experiments.setups import LOADS
from gfs_opt.fileio import json_safe
from gfs_opt.paths import data_dir
from gfs_opt.policies import family, options_for

OUT = Path(__file__).resolve().parent.parent / "results" / "bench-both"
NONE = ("yarn-cs", "lyra", "fgd")           # the preemptive no-quota baselines
SQA = ("yarn-cs+sqa", "lyra+sqa", "fgd+sqa")
TARGET_POLICIES = ("gfs", "gfs-milp", *NONE, "chronus", *SQA)
ABLATIONS = ("gfs", "gfs-no-shape", "gfs-no-gang-victims", "gfs-no-beside", "gfs-no-attributable-eta",
             "gfs-no-wait")
#: the η frontier: (policy, fixed η) — η = 1 of the +sqa family is in the targets grid
FRONTIER = (("gfs-static-eta", 0.5), ("gfs-static-eta", 1.0), ("gfs-static-eta", 2.0),
            ("yarn-cs+sqa", 0.5), ("yarn-cs+sqa", 2.0))
CHRONUS = "chronus-philly-slo/trace_job_Philly_MIX1.csv"
CODE = code_fingerprint()
#: policies whose cells ``table`` read from other code than CODE (or from before fingerprints)
STALE: set[str] = set()


@dataclass(frozen=True)
class Cell:
    policy: str
    load: float
    seed: int
    forecaster: str
    setup: str = "paper-a100"
    trace: str | None = None          # a trace path under $GFS_DATA_DIR instead of a setup
    capacity_scale: float = 1.0
    time_scale: float = 1.0
    opts: tuple[tuple[str, float | str], ...] = ()   # extra policy options, e.g. (("quota_eta", 2),)

    def key(self) -> str:
        fc = self.forecaster if family(self.policy) != "none" or self.policy.startswith(
            "gfs") else "-"
        fields = {**asdict(self), "forecaster": fc}
        if not self.opts:            # keys of cells without options stay as they were
            del fields["opts"]
        raw = json.dumps(fields, sort_keys=True)
        return hashlib.sha1(raw.encode()).hexdigest()[:16]

    def spec(self) -> RunSpec:
        extra = {k: {"off": False, "on": True}.get(v, v) if isinstance(v, str) else v
                 for k, v in self.opts}
        opts = {**options_for(self.policy, {"forecaster": self.forecaster}), **extra}
        if self.trace is not None:
            return RunSpec(trace=str(data_dir() / self.trace), policy=self.policy,
                           policy_options=opts, lp_load=self.load, seed=self.seed,
                           capacity_scale=self.capacity_scale, time_scale=self.time_scale)
        return RunSpec.from_setup(self.setup, policy=self.policy, policy_options=opts,
                                  lp_load=self.load, seed=self.seed)


def grid(name: str, seeds: Iterable[int] = (0, 1, 2)) -> list[Cell]:
    cells: list[Cell] = []
    if name in ("targets", "all"):
        # ETS at every load; Prophet (the default forecaster, ≈ 3× the CPU) at medium load
        cells += [Cell(p, f, s, "ets") for f in LOADS.values() for s in seeds
                  for p in TARGET_POLICIES]
        cells += [Cell(p, 1.0, s, "prophet") for s in seeds for p in TARGET_POLICIES]
    if name in ("prophet", "all"):   # Prophet at low and high load too
        cells += [Cell(p, f, s, "prophet") for f in (LOADS["low"], LOADS["high"])
                  for s in seeds for p in ("gfs", "gfs-milp", *SQA)]
    if name in ("frontier", "all"):
        cells += [Cell(p, 1.0, s, "ets", opts=(("quota_eta", eta),) if eta != 1.0 else ())
                  for s in seeds for p, eta in FRONTIER]
        cells += [Cell(p, 1.0, s, "ets") for s in seeds for p in ("gfs", "gfs-no-attributable-eta")]
    if name in ("ablations", "all"):
        cells += [Cell(p, 1.0, s, "ets") for s in range(3) for p in ABLATIONS]
    if name in ("chronus", "all"):
        cells += [Cell(p, load, s, "ets", trace=CHRONUS, capacity_scale=1.0, time_scale=24.0)
                  for load in (2.0, 4.0) for s in seeds
                  for p in ("gfs", *NONE, *SQA, "gfs-static-eta", "gfs-no-attributable-eta")]
    if name in ("mechanisms", "all"):   # GFS before the issue, and each mechanism off, elsewhere
        before = (("departures", "wait+aged-order"),)
        for kw in ({"trace": CHRONUS, "time_scale": 24.0, "load": 2.0},
                   {"trace": CHRONUS, "time_scale": 24.0, "load": 4.0},
                   {"seed": 3}, {"seed": 4}):
            load = float(kw.pop("load", 1.0))   # type: ignore[arg-type]
            seed = int(kw.pop("seed", 0))       # type: ignore[call-overload]
            cells += [Cell(p, load, seed, "ets", opts=o, **kw)   # type: ignore[arg-type]
                      for p, o in (("gfs", before), ("gfs-no-shape", ()),
                                   ("gfs-no-gang-victims", ()), ("gfs-static-eta", ()))]
    if name in ("qmilp", "all"):   # the admission MILP (with its shape rows) against the rule
        cells += [Cell("gfs-milp", 1.0, s, "ets", opts=(("quota_method", "milp"),))
                  for s in seeds]
    if name in ("ptsorder", "all"):   # GFS without aging (PTS's LP order alone), the allowance cells
        cells += [Cell("gfs-no-aged-order", f, s, "ets") for f in LOADS.values() for s in seeds]
        cells += [Cell("gfs-no-aged-order", 1.0, s, "prophet") for s in seeds]
        cells += [Cell("gfs-no-aged-order", 1.0, s, "ets") for s in (3, 4)]
        cells += [Cell("gfs-no-aged-order", load, s, "ets", trace=CHRONUS, capacity_scale=1.0,
                       time_scale=24.0) for load in (2.0, 4.0) for s in seeds]
    if name in ("seeds", "all"):   # the synthetic trace drawn with other seeds
        cells += [Cell(p, 1.0, s, "ets") for s in (3, 4)
                  for p in ("gfs", *NONE, *SQA)]
    seen: dict[str, Cell] = {}
    for c in cells:
        seen.setdefault(c.key(), c)
    return list(seen.values())


def _run_cell(cell: Cell) -> tuple[Cell, dict]:
    out = run(cell.spec())
    keep = {k: v for k, v in out.summary.items() if k != "solver_reports"}
    return cell, json_safe(keep)


def _cached_code(cell: Cell) -> str | None:
    """The fingerprint a cached cell ran on ("" before fingerprints were kept), None if absent."""
    f = OUT / f"{cell.key()}.json"
    return json.loads(f.read_text()).get("code", "") if f.exists() else None


def cmd_run(name: str, workers: int, refresh: frozenset[str] = frozenset()) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    todo = [c for c in grid(name) if (code := _cached_code(c)) is None
            or (c.policy in refresh and code != CODE)]
    print(f"{len(todo)} cells to run", flush=True)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futs = [pool.submit(_run_cell, c) for c in todo]
        for i, fut in enumerate(as_completed(futs), 1):
            cell, summary = fut.result()
            (OUT / f"{cell.key()}.json").write_text(json.dumps(
                {"cell": asdict(cell), "code": CODE, "summary": summary}, allow_nan=True))
            print(f"[{i}/{len(todo)}] {cell.policy} load {cell.load:g} seed {cell.seed} "
                  f"{cell.forecaster} {cell.trace or cell.setup}: LP evict "
                  f"{summary['lp_eviction_rate']:.2%}, LP JQT {summary['lp_jqt_mean']:,.0f} s",
                  flush=True)


# ---- tables ------------------------------------------------------------------------------
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306}


def interval(xs: list[float]) -> tuple[float, float]:
    """Mean and half-width of a 95 % Student-t interval (nan half-width for one value)."""
    a = np.asarray(xs, dtype=float)
    if len(a) < 2:
        return float(a.mean()) if len(a) else math.nan, math.nan
    return float(a.mean()), T975.get(len(a) - 1, 1.96) * float(a.std(ddof=1)) / math.sqrt(len(a))


def _load(cell: Cell) -> dict | None:
    f = OUT / f"{cell.key()}.json"
    if not f.exists():
        return None
    got = json.loads(f.read_text())
    if got.get("code") != CODE:
        STALE.add(cell.policy)
    return got["summary"]


def _values(policy: str, load: float, fc: str, seeds: Iterable[int], metric: str,
            **kw: object) -> list[float]:
    out = []
    for s in seeds:
        got = _load(Cell(policy, load, s, fc, **kw))   # type: ignore[arg-type]
        if got is not None:
            out.append(float(got[metric]))
    return out


def _fmt(xs: list[float], pct: bool) -> str:
    m, h = interval(xs)
    if not xs:
        return "—"
    if pct:
        return f"{m:.2%}" + ("" if math.isnan(h) else f" ± {h:.2%}")
    return f"{m:,.0f}" + ("" if math.isnan(h) else f" ± {h:,.0f}")


def table_targets(seeds: tuple[int, ...] = (0, 1, 2)) -> None:
    names = {v: k for k, v in LOADS.items()}
    for fc in ("ets", "prophet"):
        print(f"\n### paper-a100, forecaster {fc}, seeds {','.join(map(str, seeds))} "
              "(mean ± 95 % half-width)\n")
        print("| policy | " + " | ".join(f"{names[f]} LP evict | {names[f]} LP JQT s"
                                         for f in LOADS.values()) + " |")
        print("|---|" + "---:|" * (2 * len(LOADS)))
        for p in TARGET_POLICIES:
            row = []
            for f in LOADS.values():
                row.append(_fmt(_values(p, f, fc, seeds, "lp_eviction_rate"), True))
                row.append(_fmt(_values(p, f, fc, seeds, "lp_jqt_mean"), False))
            print(f"| {p} | " + " | ".join(row) + " |")
        print()
        for load, f in LOADS.items():
            _targets(load, f, fc, seeds)


def _mean(policy: str, f: float, fc: str, seeds: Iterable[int], metric: str) -> float:
    xs = _values(policy, f, fc, seeds, metric)
    return float(np.mean(xs)) if xs else math.nan


def _targets(load: str, f: float, fc: str, seeds: tuple[int, ...]) -> None:
    ev = {p: _mean(p, f, fc, seeds, "lp_eviction_rate") for p in TARGET_POLICIES}
    jqt = {p: _mean(p, f, fc, seeds, "lp_jqt_mean") for p in TARGET_POLICIES}
    never = _values("gfs", f, fc, seeds, "lp_never_started")
    frag = _values("gfs", f, fc, seeds, "lp_fragmentation_share") if _load(
        Cell("gfs", f, seeds[0], fc)) and "lp_fragmentation_share" in (
        _load(Cell("gfs", f, seeds[0], fc)) or {}) else []
    none_ev, none_jqt = np.mean([ev[p] for p in NONE]), np.mean([jqt[p] for p in NONE])
    sqa_jqt = np.mean([jqt[p] for p in SQA])
    g = ev["gfs"]
    # per-seed paired difference GFS − family mean, with its interval: "inside the noise"?
    diffs = []
    for s in seeds:
        a = _values("gfs", f, fc, [s], "lp_eviction_rate")
        b = [_values(p, f, fc, [s], "lp_eviction_rate") for p in NONE]
        if a and all(b):
            diffs.append(a[0] - float(np.mean([x[0] for x in b])))
    dm, dh = interval(diffs)
    checks = [
        (f"evict ≤ each +sqa ({', '.join(f'{ev[p]:.2%}' for p in SQA)})",
         all(g <= ev[p] for p in SQA)),
        (f"evict ≤ −33 % vs no-quota mean {none_ev:.2%}: {g / none_ev - 1:+.1%} "
         f"(paired diff {dm:+.2%} ± {dh:.2%})", g <= 0.67 * none_ev),
        (f"LP JQT ≤ −44 % vs +sqa mean {sqa_jqt:,.0f} s: {jqt['gfs'] / sqa_jqt - 1:+.1%}",
         jqt["gfs"] <= 0.56 * sqa_jqt),
        (f"LP JQT ≤ 1.5× no-quota mean {none_jqt:,.0f} s: {jqt['gfs'] / none_jqt:.2f}×",
         jqt["gfs"] <= 1.5 * none_jqt),
        (f"LP never started {sum(never):g}", sum(never) == 0),
        (f"gfs-milp evict {ev['gfs-milp']:.2%} ≤ gfs {g:.2%}", ev["gfs-milp"] <= g),
    ]
    if load == "medium":
        checks.append((f"medium evict {g:.2%} ≤ 1.21 %", g <= 0.0121))
    if frag:
        checks.append((f"fragmentation share {np.mean(frag):.0%} < 20 %", np.mean(frag) < 0.2))
    print(f"- **{load}, {fc}**: chronus {ev['chronus']:.2%} / {jqt['chronus']:,.0f} s. " + "; ".join(
        f"{'met' if ok else 'MISSED'}: {text}" for text, ok in checks))


def table_allowance() -> None:
    """The allowance target on every trace we have where the quota binds: GFS LP JQT ≤ the `+sqa`
    mean, and LP eviction ≤ the `+sqa` mean + 5 % (relative), means over the seeds present."""
    cases: list[tuple[str, dict[str, object], float, tuple[int, ...], str]] = [
        (f"Chronus MIX1 ×24, LP load {load:g}",
         {"trace": CHRONUS, "capacity_scale": 1.0, "time_scale": 24.0}, load, (0, 1, 2), "ets")
        for load in (2.0, 4.0)]
    cases += [(f"paper-a100 {name}", {}, f, (0, 1, 2), "ets") for name, f in LOADS.items()]
    cases += [("paper-a100 seeds 3–4, medium", {}, 1.0, (3, 4), "ets")]
    print("\n### The allowance: GFS LP JQT ≤ +sqa mean and LP evict ≤ +sqa mean + 5 %\n")
    print("| trace | policy | seeds | GFS LP evict | +sqa mean evict (+5 %) | GFS LP JQT s | "
          "+sqa mean JQT s | JQT | evict |")
    print("|---|---|---|---:|---:|---:|---:|---|---|")
    for (name, kw, load, seeds, fc), pol in ((c, p) for c in cases for p in ("gfs", "gfs-no-aged-order")):
        g_ev = _values(pol, load, fc, seeds, "lp_eviction_rate", **kw)
        g_jqt = _values(pol, load, fc, seeds, "lp_jqt_mean", **kw)
        s_ev = [x for p in SQA for x in _values(p, load, fc, seeds, "lp_eviction_rate", **kw)]
        s_jqt = [x for p in SQA for x in _values(p, load, fc, seeds, "lp_jqt_mean", **kw)]
        if not (g_ev and s_ev):
            continue
        ev_cap, jqt_cap = 1.05 * float(np.mean(s_ev)), float(np.mean(s_jqt))
        print(f"| {name} | {pol} | {len(g_ev)} | {_fmt(g_ev, True)} | {np.mean(s_ev):.2%} ({ev_cap:.2%}) "
              f"| {_fmt(g_jqt, False)} | {jqt_cap:,.0f} | "
              f"{'met' if np.mean(g_jqt) <= jqt_cap else 'MISSED'} | "
              f"{'met' if np.mean(g_ev) <= ev_cap else 'MISSED'} |")


def table_rows(cells: list[Cell], title: str) -> None:
    """One row per (trace, load) group and policy: mean ± interval over the seeds present."""
    print(f"\n### {title}\n")
    print("| trace | load | policy | seeds | LP evict | LP JQT s | HP JQT s |")
    print("|---|---:|---|---:|---:|---:|---:|")
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        name = c.policy + "".join(f" {k}={v}" for k, v in c.opts)
        groups.setdefault((c.trace or c.setup, c.capacity_scale, c.time_scale, c.load,
                           name), []).append(c)
    for (tr, cap, ts, load, pol), cs in groups.items():
        got = [x for x in (_load(c) for c in cs) if x is not None]
        if not got:
            continue
        label = tr if cap == 1 and ts == 1 else f"{tr} cap×{cap:g} time×{ts:g}"
        print(f"| {label} | {load:g} | {pol} | {len(got)} | "
              f"{_fmt([x['lp_eviction_rate'] for x in got], True)} | "
              f"{_fmt([x['lp_jqt_mean'] for x in got], False)} | "
              f"{_fmt([x['hp_jqt_mean'] for x in got], False)} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--grid", default="targets",
                   choices=["targets", "prophet", "frontier", "ablations", "chronus", "seeds",
                            "qmilp", "mechanisms", "ptsorder", "all"])
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--refresh", default="", metavar="P,Q",
                   help="re-run these policies' cells that ran on other code")
    t = sub.add_parser("table")
    t.add_argument("which", nargs="?", default="all",
                   choices=["targets", "allowance", "frontier", "ablations", "chronus", "seeds",
                            "qmilp", "mechanisms", "all"])
    args = ap.parse_args(argv)
    if args.cmd == "run":
        cmd_run(args.grid, args.workers,
                frozenset(p for p in args.refresh.split(",") if p))
        return 0
    if args.which in ("targets", "all"):
        table_targets()
    if args.which in ("allowance", "all"):
        table_allowance()
    for name, title in (("frontier", "η frontier, paper-a100 medium, ETS (quota_eta = fixed η)"),
                        ("ablations", "Ablations, paper-a100 medium, ETS"),
                        ("chronus", "Chronus MIX1 ×24, ETS"),
                        ("seeds", "paper-a100 drawn with other seeds (3, 4), medium, ETS"),
                        ("qmilp", "gfs-milp with the admission MILP (quota_method=milp), medium, "
                                  "ETS"),
                        ("mechanisms", "GFS before the both-families work (every mechanism off) and one "
                                       "mechanism off at a time, beyond paper-a100 seeds 0–2")):
        if args.which in (name, "all"):
            table_rows(grid(name), title)
    if STALE:
        print(f"\nnote: cells of {', '.join(sorted(STALE))} ran on other code than this "
              f"checkout's ({CODE}); a policy whose behaviour changed since needs `run --refresh`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
