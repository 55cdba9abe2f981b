"""The larger live replay: 16 nodes × 8 GPUs in two pools (GPU types), GFS and plain
QOS preemption, sim vs real with and without the simulator's Slurm model.

Default: ref-toy's two pools (A100-SXM4-80GB and A10, 8 nodes each), 2024-03-11 00:00–24:00
(647 jobs: 208 HP incl. 11 carried in, 439 LP) at ×48 → 30 min of submissions per policy plus
≤ 3.75 min drain, ≈ 70 min wall for both policies. Needs root and a free machine (one Slurm
cluster at a time); it stays a benchmark, not a CI test.

    python benchmarks/bench_slurm_pools.py --out results/two-pool-16x8
    python benchmarks/bench_slurm_pools.py --out DIR --real DIR   # simulations again only

The table lands in OUT/compare.md (and .csv); the real runs in OUT/<policy>/real.
"""

from __future__ import annotations

import argparse
import sys
import time

from gfs_opt.cli import main


def run(argv: list[str]) -> None:
    t = time.perf_counter()
    print("$ gfs-opt " + " ".join(argv), flush=True)
    code = main(argv)
    print(f"  ({time.perf_counter() - t:.1f} s)", flush=True)
    if code:
        sys.exit(code)


def cli() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--trace", default="ref-toy")
    p.add_argument("--pools", default="A100-SXM4-80GB:8,A10:8", help="NAME:NODES,… (trace pools)")
    p.add_argument("--gpus", default="8")
    p.add_argument("--window", nargs=2, default=["2024-03-11", "2024-03-12"])
    p.add_argument("--speedup", default="48")
    p.add_argument("--drain", default="10800", help="trace seconds after the slice end")
    p.add_argument("--policies", default="gfs,slurm-qos")
    p.add_argument("--real", default=None, help="earlier compare --out: simulate only")
    p.add_argument("--keep", action="store_true", help="leave the cluster up afterwards")
    a = p.parse_args()
    compare = ["slurm", "compare", "--trace", a.trace, "--window", *a.window, "--speedup",
               a.speedup, "--drain", a.drain, "--policies", a.policies, "--out", a.out]
    if a.real:
        # the earlier real runs record the cluster; no Slurm needed
        run([*compare, "--real", a.real])
        return
    run(["slurm", "up", "--pools", a.pools, "--gpus", a.gpus, "--speedup", a.speedup])
    try:
        run(compare)
    finally:
        if not a.keep:
            run(["slurm", "down"])


if __name__ == "__main__":
    cli()
