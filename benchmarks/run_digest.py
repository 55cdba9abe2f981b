"""A digest of one simulation's results, to show a speed change left them alone.

    python benchmarks/run_digest.py small gfs                      # this checkout
    PYTHONPATH=/tmp/gfs-old python benchmarks/run_digest.py small gfs   # older code, same case

Cases are `bench_sim.py`'s (toy, small, a100, full, full@F, chronus[@C], chronus-backlog's
chronus@0.25). The digest hashes the per-job table, the quota log, the time series and the
summary without the fields that measure the machine (wall time, events/s, solver reports, trace
notes). Unlike ``tests/goldens.py`` (ETS, so that no digest depends on Stan) the policy keeps its
default forecaster — Prophet for GFS — or the one given with ``--forecaster``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import cpu_s, spec_for

VOLATILE = {"wall_s", "events_per_s", "cpu_s", "events_per_cpu_s", "solver_reports",
            "trace_notes"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("policy")
    ap.add_argument("--forecaster", default=None)
    a = ap.parse_args()
    import gfs_opt
    from gfs_opt.experiments.runner import prepare_trace, run

    spec = spec_for(a.case, a.policy, a.forecaster)
    c0 = cpu_s()
    out = run(spec, trace=prepare_trace(spec))
    summary = {k: v for k, v in out.summary.items() if k not in VOLATILE}
    digest = hashlib.sha256()
    for part in (out.jobs.to_csv(index=False), out.quotas.to_csv(index=False),
                 out.timeseries.to_csv(index=False),
                 json.dumps(summary, sort_keys=True, default=str)):
        digest.update(part.encode())
    print(f"{a.case} {a.policy} digest {digest.hexdigest()[:16]}  ({cpu_s() - c0:.1f} s CPU, "
          f"code {Path(gfs_opt.__file__).parent})")


if __name__ == "__main__":
    main()
