"""GDE forecasting benchmark: per-lead calibration (daily fit + hourly update) and provider cost.

    python benchmarks/bench_forecast.py [--only calibration,cost] [--datasets alibaba,tenants]
        [--models prophet,ets,week-peak,seasonal-naive] [--ablations] [--cost-days 4]
        [--before] [--baseline-rev 3fc4f72] [--refit-days 2,4] [--json FILE]

Calibration (GFS-SPEC §2.1; target: ≥ 75 % of series in band at each lead). Protocol = `ForecastProvider`'s: daily fit at 00:00,
hourly update with the hour just ended, forecast h = 1..4 from it; scored over August 2024 (the
window the simulator scores), quantile 0.9. Datasets: ``alibaba`` = the real per-GPU-model hourly
demand (6 pools); ``tenants`` = the (pool, org) HP series of the full-scale synthetic trace
(`series_from_trace` on ``synthetic``, 117 series). Per model: coverage per lead, the share of
eligible series whose 0.9-quantile coverage lies in [0.85, 0.95] at each lead (target ≥ 75 %),
tie-aware and plain (see `gfs_opt.forecast.backtest.calibration_report`), pinball and MAE. The
eligibility rule is fixed in advance (`eligible_series`: seen before Aug 1, non-zero in ≥ 50 % of
the August hours). On ``alibaba`` the old protocol (the path fitted at 00:00, sliced) is scored too.
``--ablations`` (alibaba only) adds Prophet without the residual update, with 2 hold-out
calibration days, refitted every 3 days, and ETS with α scored on leads 1..24 (the old default).
The tenant series also get ``--tenant-extra`` (default ``auto``: Prophet only where a tenant has
two weeks of ≥ 25 % activity, ETS elsewhere).

Cost. The provider as the simulator drives it — hourly ``observe`` of the hour just ended, daily
``refit`` at 00:00 from Jul 31 (one day before the window, as `GFSPolicy`), twelve
``pool_forecasts`` per hour (300 s refreshes) — on the tenants of ``synthetic`` (117 series,
March–August replay) and ``paper-a100`` (36 A100 tenants, replay from Jul 4), with the default
Prophet forecaster (plus ETS, Prophet refitted every 3 days and ``auto``). The baseline is the old
daily-path provider of ``--baseline-rev`` (git archive of that revision, run in a subprocess with
the same driver in the same run). CPU = getrusage self + children (Stan runs as a child process).

``--before`` scores the same August window with the old code of ``--baseline-rev`` too (its
own backtest = the daily path and the old models, in a subprocess; Prophet only on alibaba).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

DAY = 86_400
EVAL_START = 13_219_200  # 2024-08-01 00:00, seconds since 2024-03-01
WINDOW = ("2024-08-01", "2024-09-01")
REPO = Path(__file__).resolve().parent.parent
def data_dir() -> Path:
    from gfs_opt.paths import data_dir as shared

    return shared()


REPLAY_FROM = {"synthetic": 0, "paper-a100": 10_800_000}   # paper-a100 replays from 2024-07-04


def cpu_s() -> float:
    """CPU seconds of this process and its waited-for children (user + system)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


# ---- calibration -----------------------------------------------------------------------------
def dataset(name: str) -> pd.DataFrame:
    if name == "alibaba":
        from gfs_opt.forecast.sources import load_alibaba_hourly

        return load_alibaba_hourly()
    from gfs_opt.forecast.series import series_from_trace
    from gfs_opt.traces.load import load_trace

    return series_from_trace(load_trace("synthetic"))


def model_set(names: list[str], ablations: bool, refit: tuple[int, ...] = ()) -> dict[str, object]:
    from gfs_opt.forecast import make_forecaster

    levels = (0.1, 0.9)
    out: dict[str, object] = {n: make_forecaster(n, quantiles=levels) for n in names if n}
    for k in refit:
        out[f"prophet-refit{k}"] = make_forecaster("prophet", quantiles=levels, refit_days=k)
    if ablations:
        out["prophet-no-residual"] = make_forecaster("prophet", quantiles=levels, residual="none")
        out["prophet-holdout2"] = make_forecaster("prophet", quantiles=levels, calibration_days=2)
        out["prophet-refit3"] = make_forecaster("prophet", quantiles=levels, refit_days=3)
        out["ets-score24"] = make_forecaster("ets", quantiles=levels, score_leads=24)
    return out


def calibration(name: str, models: list[str], ablations: bool, path_too: bool,
                before: str | None = None, refit: tuple[int, ...] = ()) -> dict[str, object]:
    from gfs_opt.forecast.backtest import calibration_report, eligible_series, run_backtest

    df = dataset(name)
    df = df[df["ds"] < pd.Timestamp(WINDOW[1])]
    eligible = eligible_series(df, *WINDOW)
    print(f"\n== calibration: {name} — {df['series'].nunique()} series, August 2024, daily fit + "
          f"hourly update, H = 4, q0.9 ==")
    print(f"eligible series (seen before Aug 1, non-zero in ≥ 50 % of August hours): "
          f"{int(eligible.sum())} of {len(eligible)} ({int((~eligible).sum())} not scored)")
    out: dict[str, object] = {"series": len(eligible), "eligible": int(eligible.sum())}
    protocols = ["hourly", "none"] if path_too else ["hourly"]
    for update in protocols:
        t0, c0 = time.perf_counter(), cpu_s()
        res = run_backtest(df, model_set(models, ablations, refit), horizon=4, quantile=0.9,  # type: ignore[arg-type]
                           start=WINDOW[0], end=WINDOW[1], update=update,
                           progress=sys.stderr.isatty())
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
        rep = calibration_report(res.lead_metrics, eligible)
        rest = calibration_report(res.lead_metrics, ~eligible)
        lm = res.lead_metrics[res.lead_metrics["series"].map(eligible)]
        cov = lm.pivot_table(index="model", columns="h", values="coverage", aggfunc="mean")
        share = rep.pivot(index="model", columns="h", values="share")
        plain = rep.pivot(index="model", columns="h", values="share_plain")
        summ = res.summary().set_index("model")
        label = "daily fit + hourly update" if update == "hourly" else "daily path (old protocol)"
        print(f"\n-- {label}: backtest wall {wall:,.0f} s, CPU {cpu:,.0f} s --")
        print("mean 0.9-quantile coverage of eligible series, per lead h:")
        print(cov.to_string(float_format=lambda v: f"{v:.3f}"))
        print("share of eligible series in [0.85, 0.95] per lead (tie-aware; target ≥ 0.75):")
        print(share.to_string(float_format=lambda v: f"{v:.3f}"))
        print("same, plain coverage P(y ≤ q) only:")
        print(plain.to_string(float_format=lambda v: f"{v:.3f}"))
        if (~eligible).any():
            print("not eligible, tie-aware share in band per lead:")
            print(rest.pivot(index="model", columns="h", values="share").to_string(
                float_format=lambda v: f"{v:.3f}"))
        print("accuracy (all series): MAE, pinball q0.9, seconds per fit / update / predict")
        print(summ[["mae", "pinball", "coverage", "fit_s", "update_s", "predict_s"]].to_string(
            float_format=lambda v: f"{v:.4g}"))
        pools = pool_coverage(res.forecasts)
        if not pools.empty:
            print("pool level, as the quota sees it (μ_p = Σ μ, σ_p² = Σ σ², bound μ_p + z·σ_p): "
                  "coverage per pool and lead")
            print(pools.to_string(float_format=lambda v: f"{v:.3f}"))
        for model in share.index:
            worst = float(share.loc[model, ["1", "2", "3", "4"]].min())
            print(f"  {model}: min share over leads {worst:.3f} → target "
                  f"{'MET' if worst >= 0.75 else 'MISSED'}")
        if update == "hourly" and before:
            out["before"] = before_run(name, df, eligible, before, models)
        out[update] = {"coverage": cov.to_dict(), "share": share.to_dict(),
                       "share_plain": plain.to_dict(), "summary": summ.reset_index().to_dict(
                           orient="records"), "wall_s": wall, "cpu_s": cpu}
    return out


def pool_coverage(forecasts: pd.DataFrame, rho: float = 0.9) -> pd.DataFrame:
    """Coverage of the pool bound μ_p + Φ⁻¹(ρ)·σ_p from tenant forecasts aggregated as
    `pool_forecasts(method="independent")` does, per model × pool × h (tenant series only)."""
    from scipy.stats import norm

    f = forecasts[forecasts["series"].str.contains("|", regex=False)]
    if f.empty:
        return pd.DataFrame()
    f = f.assign(pool=f["series"].str.split("|").str[0], var=f["std"] ** 2)
    g = f.groupby(["model", "pool", "origin", "h"], sort=False).agg(
        mu=("mean", "sum"), var=("var", "sum"), y=("y", "sum")).reset_index()
    g["covered"] = g["y"] <= g["mu"] + norm.ppf(rho) * np.sqrt(g["var"]) + 1e-6
    return g.pivot_table(index=["model", "pool"], columns="h", values="covered", aggfunc="mean")


def before_run(name: str, df: pd.DataFrame, eligible: pd.Series, rev: str,
               models: list[str]) -> dict[str, object]:
    """The same window scored by the old code of ``rev`` (daily path, old models), run from a
    `git archive` in a subprocess; Prophet is left out on the tenants (≈ 40 min there)."""
    from gfs_opt.forecast.backtest import calibration_report, lead_metrics

    names = [m for m in models if not (name == "tenants" and m == "prophet")]
    with tempfile.TemporaryDirectory() as tmp:
        tree = extract(rev, Path(tmp))
        hist, out = Path(tmp) / "hist.parquet", Path(tmp) / "fc.parquet"
        df.to_parquet(hist)
        t0, c0 = time.perf_counter(), cpu_s()
        env = dict(os.environ, PYTHONPATH=str(tree), GFS_DATA_DIR=str(data_dir()))
        res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--backtest-worker",
                              str(hist), ",".join(names), str(out)], env=env, capture_output=True,
                             text=True, check=False)
        if res.returncode != 0:
            raise SystemExit(f"old-code backtest failed:\n{res.stderr[-2000:]}")
        f = pd.read_parquet(out)
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    lm = lead_metrics(f, 0.9)
    share = calibration_report(lm, eligible).pivot(index="model", columns="h", values="share")
    cov = lm[lm["series"].map(eligible)].pivot_table(index="model", columns="h",
                                                     values="coverage", aggfunc="mean")
    err = (f["y"] - f["mean"]).abs().groupby([f["model"], f["series"]]).mean()
    err = err.groupby(level=0).mean()   # mean over series, as `BacktestResult.summary`
    q = f["hi"].to_numpy()
    pin = pd.Series(np.maximum(0.9 * (f["y"] - q), -0.1 * (f["y"] - q)), index=f.index)
    pin = pin.groupby([f["model"], f["series"]]).mean().groupby(level=0).mean()
    print(f"\n-- before: code of {rev} (daily path, old models), same window; wall {wall:,.0f} s, "
          f"CPU (children) {cpu:,.0f} s --")
    print("share of eligible series in [0.85, 0.95] per lead (tie-aware):")
    print(share.to_string(float_format=lambda v: f"{v:.3f}"))
    print("mean coverage of eligible series per lead:")
    print(cov.to_string(float_format=lambda v: f"{v:.3f}"))
    print("MAE and pinball q0.9 (means over series):")
    print(pd.DataFrame({"mae": err, "pinball": pin}).to_string(float_format=lambda v: f"{v:.4g}"))
    return {"share": share.to_dict(), "coverage": cov.to_dict(), "mae": err.to_dict(),
            "pinball": pin.to_dict()}


def backtest_worker(hist: str, models: str, out: str) -> None:
    """Old tree: its own run_backtest over August (weeks = 744/168 puts the start on Aug 1)."""
    from gfs_opt.forecast.backtest import run_backtest

    res = run_backtest(pd.read_parquet(hist), models.split(","), horizon=4, quantile=0.9,
                       weeks=744 / 168, refit="daily")
    f = res.forecasts
    assert f["origin"].min() == pd.Timestamp(WINDOW[0]), f["origin"].min()
    f.to_parquet(out)


def extract(rev: str, where: Path) -> Path:
    """``gfs_opt`` of git revision ``rev`` unpacked under ``where``; returns the tree root."""
    tree = where / "old"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "gfs_opt"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


# ---- cost ------------------------------------------------------------------------------------
def cost_worker(setup: str, model: str, days: int, params: dict[str, object]) -> dict[str, object]:
    """Drive a provider like the simulator; only the public API (runs on old trees too)."""
    from gfs_opt.forecast import ForecastProvider
    from gfs_opt.forecast.series import series_from_trace
    from gfs_opt.traces.load import load_trace

    df = series_from_trace(load_trace(setup))
    trace_start = pd.Timestamp("2024-03-01")
    wide = df.pivot(index="ds", columns="series", values="y")
    wide = wide.reindex(pd.date_range(trace_start, wide.index.max(), freq="h"))
    keys = [tuple(s.split("|", 1)) for s in wide.columns]
    values = wide.to_numpy()
    forecaster: object = model
    params = {k: v for k, v in params.items() if k != "_"}   # "_": new tree only, defaults
    if params:
        from gfs_opt.forecast import make_forecaster

        forecaster = make_forecaster(model, quantiles=(0.9,), **params)
    p = ForecastProvider(forecaster, horizon_h=4, rho=0.9, refit_from=EVAL_START - DAY)  # type: ignore[arg-type]

    def observe(hour: int) -> None:
        row = values[hour]
        p.observe(hour * 3600.0, {k: float(v) for k, v in zip(keys, row, strict=True)
                                  if not np.isnan(v)})

    first = (EVAL_START - DAY) // 3600
    for hour in range(REPLAY_FROM[setup] // 3600, first):
        observe(hour)
    refits, hourly, cached = [], [], []
    for hour in range(first, first + 24 * days):
        if hour > first:
            observe(hour - 1)   # the hour that just ended, as the simulator reports it
        t = hour * 3600.0
        if hour % 24 == 0:
            w0, c0 = time.perf_counter(), cpu_s()
            p.refit(t)
            refits.append((time.perf_counter() - w0, cpu_s() - c0))
        for k in range(12):
            w0, c0 = time.perf_counter(), cpu_s()
            fc = p.pool_forecasts(t + 300 * k)
            (hourly if k == 0 else cached).append((time.perf_counter() - w0, cpu_s() - c0))
        assert fc, "no pool forecast"
    r, h, c = np.array(refits), np.array(hourly), np.array(cached)
    return {"setup": setup, "model": model, "params": params, "series": int(wide.shape[1]),
            "refit_first_wall": float(r[0, 0]), "refit_first_cpu": float(r[0, 1]),
            "refit_wall": float(r[1:, 0].mean()), "refit_cpu": float(r[1:, 1].mean()),
            "hour_wall": float(h[:, 0].mean()), "hour_cpu": float(h[:, 1].mean()),
            "hour_wall_max": float(h[:, 0].max()), "cached_ms": float(c[:, 0].mean() * 1e3),
            "day_wall": float(r[1:, 0].mean() + 24 * h[:, 0].mean()),
            "day_cpu": float(r[1:, 1].mean() + 24 * h[:, 1].mean())}


def run_worker(tree: Path, setup: str, model: str, days: int,
               params: dict[str, object]) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(tree), GFS_DATA_DIR=str(data_dir()))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cost-worker", setup, model,
           str(days), json.dumps(params)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"cost worker failed ({tree}, {setup}, {model}):\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def cost(days: int, baseline_rev: str) -> list[dict[str, object]]:
    print(f"\n== provider cost: {days} simulated days from Jul 31 (refit at 00:00, 12 refreshes "
          f"per hour); new provider vs the daily-path provider of {baseline_rev} ==")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        old = extract(baseline_rev, Path(tmp))
        runs = [("synthetic", "prophet", {}), ("paper-a100", "prophet", {}),
                ("synthetic", "ets", {}), ("paper-a100", "ets", {}),
                ("synthetic", "prophet", {"refit_days": 3}), ("synthetic", "auto", {"_": 0})]
        for setup, model, params in runs:
            new = run_worker(REPO, setup, model, days, params)
            base = run_worker(old, setup, model, days, {}) if not params else None
            out.append({"new": new, "old": base})
            shown = {k: v for k, v in params.items() if k != "_"}
            tag = model + (f" {shown}" if shown else "")
            print(f"\n{setup} ({new['series']} tenant series), {tag}:")
            rows = [("new", new)] + ([("old daily path", base)] if base else [])
            for label, r in rows:
                print(f"  {label:15s} first refit {r['refit_first_wall']:6.1f} s wall / "
                      f"{r['refit_first_cpu']:6.1f} s CPU; steady refit {r['refit_wall']:6.1f} s "
                      f"wall / {r['refit_cpu']:6.1f} s CPU; hourly update+predict "
                      f"{r['hour_wall'] * 1e3:7.1f} ms wall / {r['hour_cpu'] * 1e3:7.1f} ms CPU "
                      f"(max {r['hour_wall_max'] * 1e3:.0f} ms); cached refresh "
                      f"{r['cached_ms']:.3f} ms; per day {r['day_wall']:6.1f} s wall / "
                      f"{r['day_cpu']:6.1f} s CPU")
            if base:
                print(f"  ratio new/old per simulated day: wall {new['day_wall'] / base['day_wall']:.2f}, "
                      f"CPU {new['day_cpu'] / base['day_cpu']:.2f}")
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--cost-worker":
        # an archived old tree sits outside the checkout: the parent passes its data folder
        setup, model, days, params = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        print(json.dumps(cost_worker(setup, model, days, json.loads(params))))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--backtest-worker":
        backtest_worker(*sys.argv[2:5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="calibration,cost")
    ap.add_argument("--datasets", default="alibaba,tenants")
    ap.add_argument("--models", default="prophet,ets,week-peak,seasonal-naive")
    ap.add_argument("--ablations", action="store_true",
                    help="alibaba only: Prophet without residual update / with 2 hold-out days / "
                         "refitted every 3 days, ETS with α scored on leads 1..24")
    ap.add_argument("--tenant-extra", default="auto",
                    help="extra models for the tenant series (default auto: Prophet only for "
                         "tenants with 2 weeks of ≥ 25 %% activity)")
    ap.add_argument("--before", action="store_true",
                    help="also score the same window with the old code of --baseline-rev")
    ap.add_argument("--refit-days", default="",
                    help="comma-separated k: add Prophet refitted every k days (e.g. 2,4); the "
                         "old-protocol pass is then skipped")
    ap.add_argument("--cost-days", type=int, default=4)
    ap.add_argument("--baseline-rev", default="3fc4f72",
                    help="git revision with the old daily-path provider (default: the branch base)")
    ap.add_argument("--json", type=Path, default=None, help="write the numbers as JSON")
    args = ap.parse_args()
    print(f"cores visible: {os.cpu_count()}")
    parts = set(args.only.split(","))
    out: dict[str, object] = {}
    models = [m for m in args.models.split(",") if m]
    refit = tuple(int(k) for k in args.refit_days.split(",") if k)
    if "calibration" in parts:
        for name in args.datasets.split(","):
            # ablations and the old protocol on the 6 pools only: Prophet on 117 tenant series
            # costs ≈ 30 min per variant on 2 shared cores
            small = name == "alibaba"
            out[name] = calibration(name, models + ([] if small else args.tenant_extra.split(",")),
                                    args.ablations and small, path_too=small and not refit,
                                    before=args.baseline_rev if args.before else None,
                                    refit=refit)
    if "cost" in parts:
        out["cost"] = cost(args.cost_days, args.baseline_rev)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
