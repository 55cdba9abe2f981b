"""Where a GFS replay's CPU goes, part by part, against YARN-CS's whole replay (the `small`
target: what is left of `gfs-milp` / YARN-CS once the exact step costs what the greedy does).

    python benchmarks/gfs_costs.py small gfs-milp
    python benchmarks/gfs_costs.py small gfs --repeat 5
    python benchmarks/gfs_costs.py a100 gfs-milp --forecaster ets

Cases are `bench_sim.py`'s. Both policies replay the case in this one process: a first run pays
the one-time costs (imports, Prophet's first preprocessing), then the least of ``--repeat``
timed runs is shown (process time, so the shared machine's other work is not counted). Each
part's time is exclusive: a timed call inside another is counted to the inner part only. The
parts: the forecasters' daily refits and hourly predictions (both forecasters of a GFS quota:
HP demand and whole-node demand), the rest of each quota refresh (η, the rule, reserves, the
log), the HP and LP steps, applying each decision, and the rest of the event loop and the
run's tables. ``bench_sim.py`` runs each case in a fresh process instead, so its CPU adds the
trace's preparation (≈ 0.35 s for `small`) and the one-time costs to both policies.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sim import spec_for

#: where a part's method is looked up on the replayed policy's own class (its steps may be
#: overridden anywhere in its hierarchy)
POLICY = "policy"
#: (part, class path or `POLICY`, method) timed exclusively
PARTS = (
    ("forecast refits", "gfs_opt.forecast.provider:ForecastProvider", "refit"),
    ("forecast predictions", "gfs_opt.forecast.provider:ForecastProvider", "_predict"),
    ("forecast conditioning", "gfs_opt.forecast.provider:ForecastProvider", "_condition"),
    ("quota refresh (rest)", "gfs_opt.quota.spot_quota:SpotQuota", "refresh"),
    ("HP step", POLICY, "hp_step"),
    ("LP step", POLICY, "lp_step"),
    ("settled checks", POLICY, "settled"),
    ("apply decisions", "gfs_opt.sim.engine:Simulator", "_apply"),
)


class Timers:
    """Exclusive process-time totals per part: a part's clock stops while a nested one runs."""

    def __init__(self) -> None:
        self.total: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[Any]] = []

    def wrap(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            now = time.process_time()
            if self._stack:
                outer = self._stack[-1]
                self.total[outer[0]] += now - outer[1]
            self._stack.append([part, now])
            try:
                return fn(*args, **kwargs)
            finally:
                end = time.process_time()
                self.total[part] += end - self._stack.pop()[1]
                self.calls[part] += 1
                if self._stack:
                    self._stack[-1][1] = end
        return timed


def _cls(where: str, policy_cls: type) -> type:
    if where == POLICY:
        return policy_cls
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


def install(timers: Timers, policy_cls: type) -> None:
    """Wrap every part's method (set on the class it is looked up on)."""
    for part, where, name in PARTS:
        cls = _cls(where, policy_cls)
        setattr(cls, name, timers.wrap(part, getattr(cls, name)))


def measure(case: str, policy: str, forecaster: str | None,
            repeat: int) -> tuple[float, float, Timers]:
    """(least CPU of ``repeat`` runs after a first one, that run's wall time and part timers)."""
    from gfs_opt.experiments import runner
    from gfs_opt.policies import make_policy, options_for

    spec = spec_for(case, policy, forecaster)
    prepared = runner.prepare_trace(spec)
    policy_cls = type(make_policy(policy, **options_for(policy, spec.policy_options)))
    # each wrapped class's own attribute before wrapping (None: inherited, to be deleted again)
    own = {(c, name): c.__dict__.get(name)
           for c, name in {(_cls(where, policy_cls), name) for _p, where, name in PARTS}}

    def restore() -> None:
        for (c, name), fn in own.items():
            if fn is not None:
                setattr(c, name, fn)
            elif name in c.__dict__:
                delattr(c, name)

    runner.run(spec, trace=prepared)
    best: tuple[float, float, Timers] | None = None
    try:
        for _ in range(repeat):
            restore()
            timers = Timers()
            install(timers, policy_cls)
            t0, w0 = time.process_time(), time.perf_counter()
            runner.run(spec, trace=prepared)
            cpu, wall = time.process_time() - t0, time.perf_counter() - w0
            if best is None or cpu < best[0]:
                best = (cpu, wall, timers)
    finally:
        restore()
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("policy")
    ap.add_argument("--forecaster", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    base, base_wall, _ = measure(a.case, "yarn-cs", None, a.repeat)
    cpu, wall, timers = measure(a.case, a.policy, a.forecaster, a.repeat)
    print(f"{a.case}: YARN-CS replay {base:.3f} s CPU ({base_wall:.3f} s wall); {a.policy} "
          f"{cpu:.3f} s CPU ({wall:.3f} s wall): {cpu / base:.2f}x in process, least CPU of "
          f"{a.repeat} after a first run")
    print(f"{'part':<24}{'CPU s':>8}{'share':>8}{'calls':>9}")
    timed = sum(timers.total.values())
    for part, _w, _n in PARTS:
        if timers.calls.get(part):
            print(f"{part:<24}{timers.total[part]:>8.3f}{timers.total[part] / cpu:>8.1%}"
                  f"{timers.calls[part]:>9,}")
    print(f"{'rest (loop, tables)':<24}{cpu - timed:>8.3f}{(cpu - timed) / cpu:>8.1%}")


if __name__ == "__main__":
    main()
