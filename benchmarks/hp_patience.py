"""HP delay against LP eviction: GFS's HP patience and HP placement, measured over seeds.

    python benchmarks/hp_patience.py run GRID [--seeds 0,1,2] [--workers N]
    python benchmarks/hp_patience.py table GRID [--seeds 0,1,2]

Grids (each cell one replay, ETS unless the grid says otherwise):

- ``trade``: `gfs` at several HP patience values (``hp_notice_h``, ``hp_wait_h``) on Chronus
  MIX1 ×24 at LP load 2 and 4 (and four of them on paper-a100 at medium load): the LP
  evictions each saves and the HP delay it costs.
- ``chronus``: `gfs`, `gfs-paper` and both baseline families on Chronus MIX1 ×24, loads 2 and 4.
- ``a100``: the same on paper-a100 at low, medium and high load (``a100-prophet``: Prophet).
- ``seeds``: the same on paper-a100 at medium load, seeds 3 and 4 (another synthetic draw).
- ``placement``: HP placement candidates (`gfs` variants) on paper-a100 at medium load.
- ``custom``: ``--policies 'P;Q' --trace chronus|SETUP --loads 2,4 [--forecaster F]``.

A cell's summary goes to ``results/hp-patience/<key>.json`` (gitignored) and is never re-run.
``table`` prints per (trace, load) and policy: HP JQT mean and p99, HP delay by choice (mean,
p99, share of HP gangs), LP eviction rate and LP JQT, each the mean ± the half-width of its 95 %
interval over the seeds, and the HP JQT of large gangs (≥ 8 GPUs in all).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from gfs_opt.experiments.runner import RunSpec, run
from gfs_opt.experiments.seed_stats import t_interval
from gfs_opt.experiments.setups import LOADS
from gfs_opt.fileio import json_safe
from gfs_opt.paths import data_dir
from gfs_opt.policies import options_for, parse_policy

OUT = Path(__file__).resolve().parent.parent / "results" / "hp-patience"
CHRONUS = "chronus-philly-slo/trace_job_Philly_MIX1.csv"
BASELINES = ("yarn-cs", "lyra", "fgd", "yarn-cs+sqa", "lyra+sqa", "fgd+sqa")
#: HP patience values of the trade table: (notice h, whole-node wait h)
TRADE = ((0.0, 0.0), (1 / 120, 1.0), (1 / 60, 1.0), (1 / 30, 1.0), (5 / 60, 1.0),
         (1 / 60, 0.0))
#: gfs's own (`gfs_opt.policies.departures`)
DEFAULT = (1 / 60, 1.0)
#: the ones also run on paper-a100 (medium load)
TRADE_A100 = ((0.0, 0.0), (1 / 60, 1.0), (5 / 60, 1.0), (1 / 60, 0.0))
#: a gang this large (GPUs in all) makes the HP mean and p99
LARGE_GPUS = 8


@dataclass(frozen=True)
class Cell:
    policy: str                    # a policy string, options included: gfs[hp_notice_h=0.01]
    load: float
    seed: int
    forecaster: str = "ets"
    trace: str = "paper-a100"      # a setup name, or "chronus" (Chronus MIX1, time ×24)

    def key(self) -> str:
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]

    def spec(self) -> RunSpec:
        name, opts = parse_policy(self.policy)
        opts = {**options_for(name, {"forecaster": self.forecaster}), **opts}
        if self.trace == "chronus":
            return RunSpec(trace=str(data_dir() / CHRONUS), policy=name, policy_options=opts,
                           lp_load=self.load, seed=self.seed, time_scale=24.0)
        return RunSpec.from_setup(self.trace, policy=name, policy_options=opts,
                                  lp_load=self.load, seed=self.seed)


def _patience(notice_h: float, wait_h: float) -> str:
    return f"gfs[hp_notice_h={notice_h:.6g},hp_wait_h={wait_h:g}]"


def grid(name: str, seeds: Iterable[int]) -> list[Cell]:
    seeds = list(seeds)
    everyone = ("gfs", "gfs-paper", *BASELINES)
    if name == "trade":   # the default patience is `gfs` itself (its cells are shared)
        return ([Cell(_patience(n, w) if (n, w) != DEFAULT else "gfs", load, s, trace="chronus")
                 for n, w in TRADE for load in (2.0, 4.0) for s in seeds]
                + [Cell(_patience(n, w) if (n, w) != DEFAULT else "gfs", 1.0, s)
                   for n, w in TRADE_A100 for s in seeds])
    if name == "chronus":
        return [Cell(p, load, s, trace="chronus") for p in everyone for load in (2.0, 4.0)
                for s in seeds]
    if name in ("a100", "a100-prophet"):
        fc = "prophet" if name == "a100-prophet" else "ets"
        # medium load first: the cells every target reads
        loads = sorted(LOADS.values(), key=lambda f: (f != 1.0, f))
        return [Cell(p, f, s, fc) for f in loads for s in seeds for p in everyone]
    if name == "seeds":
        return [Cell(p, 1.0, s) for p in everyone for s in (3, 4)]
    if name == "placement":   # medium load
        return [Cell(p, 1.0, s) for p in PLACEMENT for s in seeds]
    raise SystemExit(f"unknown grid {name!r}")


#: HP placement candidates measured against `gfs` (see BENCHMARKS.md): where an evicting HP
#: gang goes (gang-aware victims or PTS's worker by worker), the whole-node reserve, LP beside HP
PLACEMENT: tuple[str, ...] = ("gfs", "gfs-no-gang-victims", "gfs-no-shape", "gfs-no-beside")


def _large(out_jobs: object) -> dict[str, float]:
    import pandas as pd

    jobs = out_jobs if isinstance(out_jobs, pd.DataFrame) else pd.DataFrame()
    hp = jobs[(jobs["cls"] == "HP") & (jobs["gpus_per_worker"] * jobs["workers"] >= LARGE_GPUS)]
    q = hp["jqt"].dropna()
    return {"hp_large_jqt_mean": float(q.mean()) if len(q) else math.nan,
            "hp_large_jqt_p99": float(q.quantile(0.99)) if len(q) else math.nan,
            "hp_large_jobs": len(q)}


def _run_cell(cell: Cell) -> tuple[Cell, dict]:
    out = run(cell.spec())
    keep = {k: v for k, v in out.summary.items() if k != "solver_reports"}
    keep |= _large(out.jobs)
    return cell, json_safe(keep)


def cmd_run(cells: list[Cell], workers: int) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    todo = [c for c in cells if not (OUT / f"{c.key()}.json").exists()]
    print(f"{len(todo)} cells to run", flush=True)

    def save(cell: Cell, summary: dict, i: int) -> None:
        (OUT / f"{cell.key()}.json").write_text(json.dumps(
            {"cell": asdict(cell), "summary": summary}, allow_nan=True))
        print(f"[{i}/{len(todo)}] {cell.policy} {cell.trace} load {cell.load:g} seed "
              f"{cell.seed} {cell.forecaster}: HP JQT {summary['hp_jqt_mean']:.0f} / "
              f"{summary['hp_jqt_p99']:.0f} s, LP evict {summary['lp_eviction_rate']:.2%}",
              flush=True)

    if workers <= 1:
        for i, c in enumerate(todo, 1):
            save(*_run_cell(c), i)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futs = [pool.submit(_run_cell, c) for c in todo]
        for i, fut in enumerate(as_completed(futs), 1):
            save(*fut.result(), i)


#: (summary key, heading, scale, decimals)
COLUMNS = (("hp_jqt_mean", "HP JQT s", 1.0, 0), ("hp_jqt_p99", "HP p99 s", 1.0, 0),
           ("hp_delay_choice_mean", "HP choice s", 1.0, 1),
           ("hp_delay_choice_p99", "choice p99", 1.0, 0),
           ("hp_share_delayed_by_choice", "by choice %", 100.0, 2),
           ("hp_large_jqt_mean", "large HP s", 1.0, 0),
           ("lp_eviction_rate", "LP evict %", 100.0, 2), ("lp_jqt_mean", "LP JQT s", 1.0, 0),
           ("lp_never_started", "never", 1.0, 0))


def _cell(xs: list[float], scale: float, digits: int) -> str:
    if not xs:
        return "—"
    iv = t_interval(xs)
    text = f"{scale * iv.mean:,.{digits}f}"
    return text if math.isnan(iv.half) else f"{text} ± {scale * iv.half:,.{digits}f}"


def cmd_table(cells: list[Cell]) -> None:
    groups: dict[tuple[str, float, str], dict[str, list[dict]]] = {}
    for c in cells:
        f = OUT / f"{c.key()}.json"
        if not f.exists():
            continue
        s = json.loads(f.read_text())["summary"]
        groups.setdefault((c.trace, c.load, c.forecaster), {}).setdefault(c.policy, []).append(s)
    for (trace, load, fc), by_pol in groups.items():
        label = "Chronus MIX1 ×24" if trace == "chronus" else trace
        print(f"\n{label}, LP load {load:g}, {fc} ({max(len(v) for v in by_pol.values())} seeds)")
        width = max(len(p) for p in by_pol) + 2
        cols = [(k, h, sc, d) for k, h, sc, d in COLUMNS]
        rows = [[_cell([float(s[k]) for s in runs if k in s], sc, d) for k, _h, sc, d in cols]
                for runs in by_pol.values()]
        widths = [max(len(h), *(len(r[i]) for r in rows)) + 2 for i, (_k, h, _s, _d) in
                  enumerate(cols)]
        print(f"{'policy':<{width}}" + "".join(f"{h:>{w}}" for (_k, h, _s, _d), w in
                                              zip(cols, widths, strict=True)))
        for pol, row in zip(by_pol, rows, strict=True):
            print(f"{pol:<{width}}" + "".join(f"{c:>{w}}" for c, w in
                                              zip(row, widths, strict=True)))


NONE = ("yarn-cs", "lyra", "fgd")
SQA = ("yarn-cs+sqa", "lyra+sqa", "fgd+sqa")


def cmd_targets(cells: list[Cell]) -> None:
    """The targets per (trace, load): GFS's HP JQT against the lowest baseline's mean and
    gfs-paper's p99 (and ≤ 60 s / 10 s on Chronus); its LP eviction against every +sqa baseline
    and −33 % against the no-quota mean; its LP JQT −44 % against the +sqa mean and ≤ 1.5× the
    no-quota mean; no LP job never started. Means over the seeds every policy has."""
    runs: dict[tuple[str, float, str], dict[str, dict[int, dict]]] = {}
    for c in cells:
        f = OUT / f"{c.key()}.json"
        if f.exists():
            runs.setdefault((c.trace, c.load, c.forecaster), {}).setdefault(c.policy, {})[
                c.seed] = json.loads(f.read_text())["summary"]
    for (trace, load, fc), by_pol in runs.items():
        if "gfs" not in by_pol:
            continue
        seeds = sorted(set.intersection(*(set(v) for v in by_pol.values())))
        if not seeds:
            continue

        def m(pol: str, key: str, by_pol: dict = by_pol, seeds: list[int] = seeds) -> float:
            xs = [float(by_pol[pol][s][key]) for s in seeds]
            return sum(xs) / len(xs)

        have = [p for p in (*NONE, *SQA) if p in by_pol]
        print(f"\n{trace} load {load:g} {fc}, seeds {seeds} (means): targets")
        hp, p99 = m("gfs", "hp_jqt_mean"), m("gfs", "hp_jqt_p99")
        if have and trace != "chronus":
            best = min(have + (["gfs-paper"] if "gfs-paper" in by_pol else []),
                       key=lambda p: m(p, "hp_jqt_mean"))
            print(f"  HP JQT mean {hp:.0f} s ≤ lowest baseline's ({best} {m(best, 'hp_jqt_mean'):.0f}"
                  f" s): {'met' if hp <= m(best, 'hp_jqt_mean') else 'MISSED'}")
        if "gfs-paper" in by_pol and trace != "chronus":
            q = m("gfs-paper", "hp_jqt_p99")
            print(f"  HP JQT p99 {p99:.0f} s ≤ gfs-paper's {q:.0f} s: "
                  f"{'met' if p99 <= q else 'MISSED'}")
        if trace == "chronus":
            print(f"  HP JQT p99 {p99:.0f} s ≤ 60 s: {'met' if p99 <= 60 else 'MISSED'}; mean "
                  f"{hp:.1f} s ≤ 10 s: {'met' if hp <= 10 else 'MISSED'}")
        ev = m("gfs", "lp_eviction_rate")
        sqa = [p for p in SQA if p in by_pol]
        none = [p for p in NONE if p in by_pol]
        if sqa:
            worst = min(sqa, key=lambda p: m(p, "lp_eviction_rate"))
            print(f"  LP evict {ev:.2%} ≤ every +sqa (lowest {worst} "
                  f"{m(worst, 'lp_eviction_rate'):.2%}): "
                  f"{'met' if ev <= m(worst, 'lp_eviction_rate') else 'MISSED'}")
            jq = sum(m(p, "lp_jqt_mean") for p in sqa) / len(sqa)
            rel = m("gfs", "lp_jqt_mean") / jq - 1
            print(f"  LP JQT {m('gfs', 'lp_jqt_mean'):,.0f} s vs +sqa mean {jq:,.0f} s: "
                  f"{rel:+.1%} (≤ −44 %: {'met' if rel <= -0.44 else 'MISSED'})")
        if none:
            nm = sum(m(p, "lp_eviction_rate") for p in none) / len(none)
            print(f"  LP evict vs no-quota mean {nm:.2%}: {ev / nm - 1:+.1%} (≤ −33 %: "
                  f"{'met' if ev / nm - 1 <= -0.33 else 'MISSED'})")
            jn = sum(m(p, "lp_jqt_mean") for p in none) / len(none)
            r = m("gfs", "lp_jqt_mean") / jn
            print(f"  LP JQT {r:.2f}× the no-quota mean (≤ 1.5×: {'met' if r <= 1.5 else 'MISSED'})")
        print(f"  LP never started: {m('gfs', 'lp_never_started'):.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("run", "table"))
    ap.add_argument("grid")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--policies", help="grid 'custom': policy strings joined by ';'")
    ap.add_argument("--trace", default="paper-a100", help="grid 'custom': a setup or chronus")
    ap.add_argument("--loads", default="1", help="grid 'custom': LP loads, e.g. 2,4 or low,high")
    ap.add_argument("--forecaster", default="ets", help="grid 'custom'")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    if a.grid == "custom":
        cells = [Cell(p, float(LOADS.get(f, f)), s, a.forecaster, a.trace) for p in a.policies.split(";")
                 for f in a.loads.split(",") for s in seeds]
    else:
        cells = grid(a.grid, seeds)
    if a.action == "run":
        cmd_run(cells, a.workers)
    cmd_table(cells)
    if a.grid in ("chronus", "a100", "a100-prophet", "seeds"):
        cmd_targets(cells)


if __name__ == "__main__":
    main()
