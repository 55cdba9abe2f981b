"""Sweep engine benchmark: the same grid on each engine; wall time, parallel efficiency, and
whether the result tables are identical.

    python benchmarks/bench_sweep.py                                   # examples/sweep-small.toml
    python benchmarks/bench_sweep.py --spec examples/sweep-paper-a100.toml --engines local,ray
    python benchmarks/bench_sweep.py --engines local --workers 1,2     # scaling on this machine

Efficiency = Σ cell time / (wall × workers): 1.0 means the workers were busy all the time (no
start-up, scheduling or result-writing overhead). Each run writes into a fresh temporary folder.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent


def one(spec_path: Path, engine_name: str, workers: int, out: Path) -> dict:
    from gfs_opt.experiments.sweep.engines import make_engine
    from gfs_opt.experiments.sweep.run import run_sweep
    from gfs_opt.experiments.sweep.spec import expand, load_spec_file

    spec, text = load_spec_file(spec_path)
    cells = expand(spec, spec_path.resolve().parent)
    engine = make_engine(engine_name, workers=workers)
    t0 = time.perf_counter()
    res = run_sweep(cells, out, engine, spec_text=text, memory_gb=spec.memory_gb,
                    progress=False, echo=lambda _s: None)
    wall = time.perf_counter() - t0
    timings = pd.read_csv(out / "timings.csv")
    busy = float(timings["cell_s"].sum())
    return {"engine": engine_name, "workers": workers, "cells": res.cells, "failed": res.failed,
            "wall_s": wall, "cell_s_sum": busy, "cell_s_max": float(timings["cell_s"].max()),
            "efficiency": busy / (wall * workers), "out": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, default=REPO / "examples" / "sweep-small.toml")
    ap.add_argument("--engines", default="local,ray")
    ap.add_argument("--workers", default="2", help="comma-separated worker counts")
    args = ap.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    counts = [int(w) for w in args.workers.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        for engine in engines:
            for w in counts:
                if engine == "ray":
                    try:
                        import ray  # noqa: F401
                    except ImportError:
                        print("ray not installed: skipping --engine ray", file=sys.stderr)
                        continue
                rows.append(one(args.spec, engine, w, Path(tmp) / f"{engine}-{w}"))
                r = rows[-1]
                print(f"{r['engine']:<6} workers {r['workers']}: {r['cells']} cells "
                      f"({r['failed']} failed) in {r['wall_s']:.1f} s; Σ cell {r['cell_s_sum']:.1f} s, "
                      f"slowest cell {r['cell_s_max']:.1f} s, efficiency {r['efficiency']:.2f}",
                      flush=True)
        if not rows:
            return
        ref = rows[0]
        ref_table = pd.read_parquet(ref["out"] / "results.parquet")
        print(f"\nspec {args.spec.name}; ratios vs {ref['engine']} with {ref['workers']} worker(s):")
        for r in rows:
            same = ref_table.equals(pd.read_parquet(r["out"] / "results.parquet"))
            print(f"  {r['engine']:<6} ×{r['workers']}: wall {r['wall_s'] / ref['wall_s']:.2f}×, "
                  f"speed-up {ref['wall_s'] / r['wall_s']:.2f}×, tables identical: {same}")


if __name__ == "__main__":
    main()
