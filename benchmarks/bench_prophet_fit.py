"""Cost of one Prophet fit: Prophet's own path, the shared plumbing, the in-process MAP.

    python benchmarks/bench_prophet_fit.py [--series 8] [--days 2]

Fits ``series`` tenant-like series (4 weeks of hourly data, daily + weekly pattern) on the same
window, then again one day later (a warm-started refit, as the simulator's daily refit does),
with ``ProphetForecaster(shared_fit=False)`` (plain ``Prophet.fit``), with the shared plumbing
and Stan (`gfs_opt.forecast.prophet_fit`, ``solver="stan"``) and with the default, the shared
plumbing and the in-process MAP (`gfs_opt.forecast.prophet_map`). Prints CPU per fit split into
this process and its children (Stan runs as a child process), checks that the two Stan paths
fitted bit-identical parameters and compares the MAP's objective with Stan's.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np


def cpu() -> tuple[float, float]:
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime, b.ru_utime + b.ru_stime


def main() -> None:
    from gfs_opt.forecast.prophet_model import ProphetForecaster, _ts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=8)
    ap.add_argument("--days", type=int, default=2)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    n = 28 * 24
    h = np.arange(n + 24 * a.days)
    series = [np.maximum(0.0, 50 * rng.random() + 20 * np.sin(2 * np.pi * h / 24 + rng.random())
                         + 10 * np.sin(2 * np.pi * h / 168) + rng.normal(0, 5, len(h)))
              for _ in range(a.series)]
    os.environ.setdefault("GFS_FIT_CACHE", "off")      # measure fits, not cache hits
    variants = {"plain Prophet.fit (Stan)": {"shared_fit": False},
                "shared plumbing, Stan": {"solver": "stan"},
                "shared plumbing, MAP (default)": {}}
    params: dict[str, list[dict[str, np.ndarray]]] = {}
    for name, options in variants.items():
        f = ProphetForecaster(**options)
        f._fit_prophet("warm-up", _ts(0), series[0][:n])   # imports, first backend
        (s0, c0), w0 = cpu(), time.perf_counter()
        out = []
        for day in range(a.days):
            f._before_fit({})
            for i, y in enumerate(series):
                m = f._fit_prophet(f"s{i}", _ts(24 * day), y[24 * day:24 * day + n])
                out.append({k: np.asarray(v) for k, v in m.params.items()})
        (s1, c1), fits = cpu(), a.days * a.series
        print(f"{name:<31} per fit: CPU {1e3 * (s1 - s0 + c1 - c0) / fits:6.1f} ms "
              f"(this process {1e3 * (s1 - s0) / fits:6.1f} ms, Stan child "
              f"{1e3 * (c1 - c0) / fits:5.1f} ms), wall {1e3 * (time.perf_counter() - w0) / fits:6.1f} ms")
        params[name] = out
    plain, stan, ours = params.values()
    same = all(np.array_equal(p[k], q[k]) for p, q in zip(plain, stan, strict=True) for k in p)
    print(f"Stan paths: fitted parameters bit-identical: {same}")
    # Prophet's lp__ is the log posterior at the optimum (the MAP's is −f at its own optimum)
    gain = [float(q["lp__"].ravel()[0] - p["lp__"].ravel()[0]) for p, q in zip(stan, ours,
                                                                            strict=True)]
    print(f"MAP log posterior minus Stan's over {len(gain)} fits: min {min(gain):+.4f}, "
          f"median {float(np.median(gain)):+.4f}, max {max(gain):+.4f} (≥ 0: the MAP is higher)")


if __name__ == "__main__":
    main()
