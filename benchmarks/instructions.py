"""Instructions executed by a replay (valgrind's cachegrind): a cost measure the shared machine's
noise does not move, next to `bench_sim.py`'s CPU seconds.

    python benchmarks/instructions.py small yarn-cs,gfs
    python benchmarks/instructions.py small yarn-cs,gfs,gfs-milp --before /tmp/gfs-start

Each case runs `bench_sim.py`'s setup in a fresh interpreter under ``valgrind --tool=cachegrind
--cache-sim=no`` (≈ 25× slower than a plain run: `small` GFS takes about three minutes), with one
BLAS thread and a fixed hash seed. The count of an interpreter that only imports the runner is
subtracted, so a figure covers what `bench_sim.py`'s CPU time covers (loading the trace and
replaying it). Ratios are against yarn-cs counted the same way on the same code. Instructions are
not seconds — numpy-heavy and interpreter-heavy code retire them at different rates — but a
change that removes work shows up here to the percent, where CPU time on this machine varies by
±30 %. Needs ``valgrind`` on the PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = """
import os, sys
sys.path.insert(0, {bench!r})
from bench_sim import spec_for
from gfs_opt.experiments.runner import prepare_trace, run
case, policy = sys.argv[1], sys.argv[2]
if policy != "-":
    spec = spec_for(case, policy, None)
    run(spec, trace=prepare_trace(spec))
"""


def count(case: str, policy: str, code: Path | None) -> int:
    """Instructions of one child (``policy`` "-": imports only)."""
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.setdefault("GFS_FIT_CACHE", "off")
    bench = str((code / "benchmarks") if code is not None else HERE)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(CHILD.format(bench=bench))
        res = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no",
             f"--cachegrind-out-file={tmp}/cg.out", sys.executable, str(script), case, policy],
            capture_output=True, text=True, env=env, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", res.stderr)
    if res.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run failed: {case} {policy} (code {code})\n{res.stderr[-1500:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", help="a bench_sim.py case: toy, small, a100, full@0.25, chronus@0.25…")
    ap.add_argument("policies", help="comma-separated; yarn-cs is added first if missing")
    ap.add_argument("--before", type=Path, default=None, metavar="DIR",
                    help="also count every case on the code in DIR (PYTHONPATH)")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on the PATH (apt install valgrind)")
    policies = ["yarn-cs", *[p for p in a.policies.split(",") if p != "yarn-cs"]]
    codes: list[tuple[str, Path | None]] = [("new", None)]
    if a.before is not None:
        codes.append(("old", a.before))
    rows: dict[str, dict[str, float]] = {p: {} for p in policies}
    for label, code in codes:
        base = count(a.case, "-", code)
        for p in policies:
            rows[p][label] = (count(a.case, p, code) - base) / 1e9
            print(f"  {a.case} {p} ({label}): {rows[p][label]:.3f} G instructions", flush=True)
    print(f"{'policy':<20}{'new G':>9}{'× yarn':>8}" + (f"{'old G':>9}{'× yarn':>8}{'new/old':>9}"
                                                       if a.before is not None else ""))
    for p in policies:
        r = rows[p]
        line = f"{p:<20}{r['new']:>9.3f}{r['new'] / rows['yarn-cs']['new']:>7.2f}x"
        if a.before is not None:
            line += (f"{r['old']:>9.3f}{r['old'] / rows['yarn-cs']['old']:>7.2f}x"
                     f"{r['new'] / r['old']:>8.3f}x")
        print(line)


if __name__ == "__main__":
    main()
