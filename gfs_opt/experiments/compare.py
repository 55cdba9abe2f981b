"""Policy comparison: the paper's table (LP eviction, LP JQT/JCT, HP JQT, allocation) and plots."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from gfs_opt.experiments.feedback_plot import plot_feedback
from gfs_opt.experiments.runner import RunOutput, RunSpec, prepare_trace, run
from gfs_opt.experiments.sweep.engines import ignore_sigint, terminate_pool, worker_context
from gfs_opt.fileio import atomic_write, writing
from gfs_opt.interrupts import held
from gfs_opt.model import Params
from gfs_opt.policies import family, options_for
from gfs_opt.traces.base import Trace

#: summary keys of the comparison table (all "lower is better" except the allocation rate)
TABLE_COLUMNS = {
    "lp_eviction_rate": "LP evict %",
    # the windows that started in the drain, with the quota lifted (`gfs_opt.sim.metrics`)
    "lp_eviction_rate_drain": "LP evict % drain",
    "lp_jqt_mean": "LP JQT s (all)",
    "lp_jqt_started_mean": "LP JQT s (started)",
    "lp_never_started": "LP never started",
    "lp_jct_mean": "LP JCT s",
    "hp_jqt_mean": "HP JQT s",
    "allocation_rate": "alloc %",
    # evictions of scored LP jobs by cause (`gfs_opt.sim.causes`)
    "lp_evictions": "LP evictions",
    "lp_evictions_fragmentation": "LP evict frag",
    "lp_fragmentation_share": "frag share %",
    # HP queueing by cause (`gfs_opt.sim.hp_delay`): the policy's choice, the capacity it lacked
    "hp_jqt_p99": "HP JQT p99 s",
    "hp_delay_choice_mean": "HP choice s",
    "hp_delay_choice_p99": "HP choice p99 s",
    "hp_delay_capacity_mean": "HP capacity s",
    "hp_delay_capacity_p99": "HP capacity p99 s",
    "hp_share_delayed_by_choice": "HP delayed by choice %",
}
#: GFS's relative change is reported on these
RELATIVE = ("lp_eviction_rate", "lp_jqt_mean")
#: how a table with a drain says what its two eviction columns count
DRAIN_NOTE = ("LP evict counts the guarantee windows that started under the quota; drain those "
              "that started after the scored window, with the quota lifted (the authors' drain).")
FAMILY_LABEL = {"none": "no-quota baselines", "sqa": "+sqa baselines (shared quota, static η)"}


#: what `compare_seeds` reports as each run finishes: (load, policy, seed, output)
SeedCallback = Callable[[str, str, int, RunOutput], None]
#: results by seed → load → policy
SeedResults = dict[int, dict[str, dict[str, RunOutput]]]


def compare(base: RunSpec, policies: Sequence[str], loads: dict[str, float],
            progress: bool = False,
            on_result: Callable[[str, str, RunOutput], None] | None = None,
            workers: int = 1) -> dict[str, dict[str, RunOutput]]:
    """Run every policy at every load on identical traces; results[load][policy].

    ``on_result(load, policy, output)`` is called as each run finishes (e.g. to write it out, so
    an interrupted comparison keeps what it finished). ``workers`` > 1 runs that many
    simulations at once in worker processes (each run is deterministic on its own, so the
    results do not depend on it); the progress bar then counts finished runs."""
    def hook(load: str, pol: str, _seed: int, out: RunOutput) -> None:
        if on_result is not None:
            on_result(load, pol, out)

    return compare_seeds(base, policies, loads, [base.seed], progress, hook, workers)[base.seed]


def compare_seeds(base: RunSpec, policies: Sequence[str], loads: dict[str, float],
                  seeds: Sequence[int], progress: bool = False,
                  on_result: SeedCallback | None = None, workers: int = 1) -> SeedResults:
    """`compare` once per seed: results[seed][load][policy]. The seed is the run's
    (`RunSpec.seed`): it draws the synthetic trace of a built-in setup, the LP subsample or
    copies of a load ≠ ×1 and the guarantee classes, so each seed is an independent replay of a
    synthetic setup; all policies of one (seed, load) share its trace."""
    multi = len(seeds) > 1
    plan = [(load, pol, seed, replace(base, lp_load=factor, policy=pol, seed=seed,
                                      policy_options=options_for(pol, base.policy_options)))
            for seed in seeds for load, factor in loads.items() for pol in policies]
    got: dict[tuple[int, str, str], RunOutput] = {}

    def finished(load: str, pol: str, seed: int, out: RunOutput) -> None:
        got[(seed, load, pol)] = out
        if on_result is not None:
            on_result(load, pol, seed, out)

    if workers <= 1 or len(plan) <= 1:
        prepared: dict[tuple[str, int], tuple[Trace, float, float]] = {}
        for load, pol, seed, spec in plan:
            if (load, seed) not in prepared:     # one trace in memory at a time
                prepared = {(load, seed): prepare_trace(spec)}
            desc = f"{pol} @ {load}" + (f" seed {seed}" if multi else "")
            finished(load, pol, seed, run(spec, progress=progress, trace=prepared[(load, seed)],
                                          desc=desc))
    else:
        _run_parallel(plan, min(workers, len(plan)), progress, finished)
    return {seed: {load: {pol: got[(seed, load, pol)] for pol in policies} for load in loads}
            for seed in seeds}


def _run_parallel(plan: list[tuple[str, str, int, RunSpec]], workers: int, progress: bool,
                  finished: SeedCallback) -> None:
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=worker_context(),
                               initializer=ignore_sigint)
    bar = tqdm(total=len(plan), unit="run", desc=f"compare ({workers} workers)",
               disable=not progress, dynamic_ncols=True)
    try:
        prepared: dict[tuple[str, int], tuple[Trace, float, float]] = {}
        futures = {}
        for load, pol, seed, spec in plan:
            if (load, seed) not in prepared:   # once per (load, seed), as one after another
                prepared[(load, seed)] = prepare_trace(spec)      # (pickled: cheap)
            with held():   # a worker started half-way would outlive us (see `held`)
                futures[pool.submit(run, spec, trace=prepared[(load, seed)])] = (load, pol, seed)
        for fut in as_completed(futures):
            load, pol, seed = futures[fut]
            finished(load, pol, seed, fut.result())
            bar.update(1)
            bar.set_postfix_str(f"last: {pol} @ {load}", refresh=False)
    except BaseException:
        terminate_pool(pool)     # Ctrl-C or a failed run: stop the others now, not at their end
        raise
    finally:
        bar.close()
        pool.shutdown(wait=True, cancel_futures=True)


def _rel(ref: float, base: float) -> float:
    return (ref - base) / base if base and not (np.isnan(ref) or np.isnan(base)) else np.nan


def table(results: dict[str, dict[str, RunOutput]], reference: str = "gfs") -> pd.DataFrame:
    """One row per (load, policy) with its family and seed; relative change of the reference vs each row's
    policy (``gfs_vs_<metric>``, negative = the reference is lower)."""
    rows = []
    for load, by_pol in results.items():
        ref = by_pol.get(reference)
        for pol, out in by_pol.items():
            s = out.summary
            row: dict[str, object] = {"load": load, "policy": pol, "family": family(pol),
                                      "seed": out.spec.seed}
            for key in TABLE_COLUMNS:
                row[key] = s.get(key, np.nan)
            for key in ("lp_windows_failed", "lp_windows_ok", "lp_windows_failed_drain",
                        "lp_windows_ok_drain"):
                row[key] = s.get(key, 0)
            row["lp_unfinished"] = s.get("lp_unfinished", 0)
            row["hp_evictions"] = s.get("hp_evictions", 0)
            row["wall_s"] = out.wall_s
            if ref is not None and pol != reference:
                for key in RELATIVE:
                    row[f"gfs_vs_{key}"] = _rel(ref.summary.get(key, np.nan), s.get(key, np.nan))
            rows.append(row)
    return pd.DataFrame(rows)


def family_groups(df: pd.DataFrame, reference: str = "gfs", by: str = "load"
                  ) -> Iterator[tuple[object, pd.DataFrame, str, pd.DataFrame]]:
    """(group, the reference's rows, family, the family's rows) per ``by`` group and baseline
    family present beside the reference (families "none" then "sqa")."""
    for group, sub in df.groupby(by, sort=False):
        ref = sub[sub["policy"] == reference]
        if ref.empty:
            continue
        for fam in ("none", "sqa"):
            base = sub[(sub["policy"].map(family) == fam) & (sub["policy"] != reference)]
            if not base.empty:
                yield group, ref, fam, base


def family_summary(df: pd.DataFrame, reference: str = "gfs", by: str = "load") -> pd.DataFrame:
    """Per ``by`` group and baseline family: the reference's relative change vs the family's
    mean (the way the paper states its result) and the mean of its per-baseline changes."""
    rows = []
    for group, ref, fam, base in family_groups(df, reference, by):
        row = {by: group, "family": fam, "baselines": ",".join(base["policy"])}
        for key in RELATIVE:
            r = float(ref[key].iloc[0])
            row[f"vs_mean_{key}"] = _rel(r, float(base[key].mean()))
            changes = [c for c in (_rel(r, b) for b in base[key]) if not np.isnan(c)]
            row[f"mean_change_{key}"] = float(np.mean(changes)) if changes else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def format_family_summary(fam: pd.DataFrame, reference: str = "gfs", by: str = "load") -> list[str]:
    return [f"{r[by]}: {reference} vs mean of {FAMILY_LABEL[r['family']]}: "
            f"LP evict {_pct(r['vs_mean_lp_eviction_rate'])}, "
            f"LP JQT {_pct(r['vs_mean_lp_jqt_mean'])}" for _, r in fam.iterrows()]


def format_table(df: pd.DataFrame, reference: str = "gfs") -> str:
    """Readable table like the paper's, with the reference's relative change vs each baseline and
    vs each baseline family's mean."""
    drain = bool((df.get("lp_windows_failed_drain", pd.Series(dtype=float)).fillna(0)
                  + df.get("lp_windows_ok_drain", pd.Series(dtype=float)).fillna(0)).sum())
    dh = (f"{'LP evict':>9}", f"{'drain':>9}") if drain else ("", "")
    lines = [f"{'load':<7}{'policy':<13}{'LP evict':>9}{dh[0]}{'HP choice s':>14}{'LP JQT s':>11}"
             f"{'LP JQT s':>11}{'LP never':>9}{'HP JQT s':>14}{'alloc':>8}   {reference} vs policy",
             f"{'':<7}{'':<13}{'':>9}{dh[1]}{'mean / p99':>14}{'(all)':>11}{'(started)':>11}"
             f"{'started':>9}{'mean / p99':>14}{'':>8}   evict / LP JQT (all)"]
    lines.append("-" * max(len(x) for x in lines))
    for _, r in df.iterrows():
        rel = ""
        if r["policy"] != reference and not pd.isna(r.get("gfs_vs_lp_jqt_mean", np.nan)):
            rel = f"{_pct(r['gfs_vs_lp_eviction_rate'])} / {_pct(r['gfs_vs_lp_jqt_mean'])}"
        dcell = f"{100 * r.get('lp_eviction_rate_drain', np.nan):>8.2f}%" if drain else ""
        choice = _mean_p99(r.get("hp_delay_choice_mean"), r.get("hp_delay_choice_p99"))
        hp = _mean_p99(r.get("hp_jqt_mean"), r.get("hp_jqt_p99"))
        lines.append(f"{r['load']:<7}{r['policy']:<13}{100 * r['lp_eviction_rate']:>8.2f}%"
                     f"{dcell}{choice:>14}{r['lp_jqt_mean']:>11.0f}"
                     f"{r['lp_jqt_started_mean']:>11.0f}"
                     f"{int(r['lp_never_started']):>9d}{hp:>14}"
                     f"{100 * r['allocation_rate']:>7.1f}%   {rel}")
    lines += ["", *format_causes(df)]
    fam = family_summary(df, reference)
    if len(fam):
        lines += ["", *format_family_summary(fam, reference)]
    lines += ["", "Lower is better for every column but alloc (higher is better); a negative "
              f"change means {reference} is lower.",
              *([DRAIN_NOTE] if drain else []),
              "LP JQT (all) counts a job that never started with its wait until the replay ended "
              "(a lower bound); (started) averages the jobs that started.",
              HP_CHOICE_NOTE]
    return "\n".join(lines)


#: what the HP choice column means (both printed tables say it)
HP_CHOICE_NOTE = ("HP choice: the time HP gangs waited while their pool had room for them by "
                  "evicting LP work (the policy's choice, not a lack of capacity).")


def _mean_p99(mean: float | None, p99: float | None) -> str:
    if mean is None or p99 is None or pd.isna(mean) or pd.isna(p99):
        return "n/a"
    return f"{mean:.0f} / {p99:.0f}"


def format_causes(df: pd.DataFrame) -> list[str]:
    """LP evictions by cause per row of `table`: how many, how many of them fragmentation (the
    pool had room, no node could host the HP gang) and their share."""
    lines = ["LP evictions by cause (fragmentation: the pool had enough free GPUs, no node "
             "could host the HP gang)"]
    for _, r in df.iterrows():
        n = r.get("lp_evictions", np.nan)
        if pd.isna(n):
            continue
        lines.append(f"  {r['load']:<7}{r['policy']:<13}{int(n):>7d} evictions, "
                     f"{int(r['lp_evictions_fragmentation']):>6d} fragmentation "
                     f"({100 * r['lp_fragmentation_share']:.0f} %)")
    return lines if len(lines) > 1 else []


def _pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:+.1f}%"


def plot(results: dict[str, dict[str, RunOutput]], out: Path,
         feedback: bool = True) -> list[Path]:
    """CDF of LP JQT, allocation over time, eviction rate by pool (one PNG each, per load), and
    with ``feedback`` per policy with a spot quota its η, quota and eviction rate over time
    (`feedback_plot`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with writing(out):
        out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for load, by_pol in results.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for pol, o in by_pol.items():
            jqt = np.sort(o.jobs.loc[o.jobs["cls"] == "LP", "jqt"].dropna().to_numpy())
            if len(jqt):
                ax.step(np.maximum(jqt, 1.0), np.arange(1, len(jqt) + 1) / len(jqt), label=pol,
                        where="post")
        ax.set_xscale("log")
        ax.set_xlabel("LP queueing time (s)")
        ax.set_ylabel("CDF")
        ax.set_title(f"LP JQT, {load} load")
        ax.legend(loc="lower right")   # a fixed place: "best" scans every point (slow, warns)
        written.append(_save(fig, out / f"lp_jqt_cdf_{load}.png"))

        fig, ax = plt.subplots(figsize=(7, 4))
        for pol, o in by_pol.items():
            ts = o.timeseries
            if len(ts):
                g = ts.groupby("t")[["allocated", "capacity"]].sum()
                hours = (g.index - g.index.min()) / 3600.0
                rate = (g["allocated"] / g["capacity"]).rolling(60, min_periods=1).mean()
                ax.plot(hours, 100 * rate, label=pol, lw=1)
        ax.set_xlabel("hours into the window")
        ax.set_ylabel("GPU allocation % (1 h mean)")
        ax.set_title(f"Allocation over time, {load} load")
        ax.legend(loc="lower left", fontsize=7)
        written.append(_save(fig, out / f"allocation_{load}.png"))

        fig, ax = plt.subplots(figsize=(7, 4))
        pols = list(by_pol)
        pools = list(next(iter(by_pol.values())).per_pool.index)
        width = 0.8 / max(1, len(pols))
        for i, pol in enumerate(pols):
            rates = by_pol[pol].per_pool["lp_eviction_rate"].reindex(pools).fillna(0)
            ax.bar(np.arange(len(pools)) + i * width, 100 * rates.to_numpy(), width, label=pol)
        ax.set_xticks(np.arange(len(pools)) + 0.4 - width / 2, pools, rotation=15)
        ax.set_ylabel("LP eviction rate %")
        ax.set_title(f"Eviction rate by pool, {load} load")
        ax.legend(loc="upper right", fontsize=7)
        written.append(_save(fig, out / f"eviction_by_pool_{load}.png"))

        # why each quota moved (policies with a spot quota only)
        for pol, o in by_pol.items():
            if feedback and o.feedback is not None and len(o.feedback):
                fig = plot_feedback(o.feedback, float(o.summary["window"][0]),
                                    f"{pol}, {load} load: η, quota and eviction rate",
                                    Params(**o.spec.params))
                written.append(_save(fig, out / f"quota_feedback_{load}_{pol}.png"))
    return written


def _save(fig: object, path: Path) -> Path:
    import matplotlib.pyplot as plt

    try:
        fig.tight_layout()  # type: ignore[attr-defined]
        atomic_write(path, lambda tmp: fig.savefig(  # type: ignore[attr-defined]
            tmp, dpi=110, format="png"))
    finally:
        plt.close(fig)  # type: ignore[arg-type]
    return path
