"""`gfs-opt forecast …`: backtest demand forecasters, export hourly-max demand series."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gfs_opt.commands import args as cargs
from gfs_opt.fileio import check_out_dir, check_out_file, write_csv, writing

if TYPE_CHECKING:
    import pandas as pd


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("forecast", help="HP demand forecasting (GDE): backtests and series")
    fsub = p.add_subparsers(dest="forecast_command", metavar="ACTION")
    fsub.required = True

    b = fsub.add_parser("backtest", help="rolling-origin backtest of forecasters (daily refit, "
                                         "hourly update: the simulator's protocol)")
    b.add_argument("--data", required=True,
                   help="'alibaba-hourly' (real per-GPU-model demand, shipped), a long CSV "
                        "(ds,series,y or --time-col/--series-col/--value-col), a wide CSV (a "
                        "time column and one column per series), or any trace source accepted "
                        "by `gfs-opt trace stats`")
    _column_flags(b)
    b.add_argument("--models", default="prophet,week-peak,seasonal-naive,ets",
                   help="comma-separated: prophet, week-peak, seasonal-naive, ets, auto")
    b.add_argument("--horizon", type=cargs.number(1, 168, integer=True), default=4,
                   help="hours per quota horizon, 1..168 (default 4)")
    b.add_argument("--quantile", type=cargs.number(0, 1, lo_open=True, hi_open=True), default=0.9,
                   help="quantile scored, in (0, 1) (default 0.9)")
    b.add_argument("--weeks", type=cargs.number(0, 520, lo_open=True), default=8,
                   help="evaluation weeks at the end (default 8; ignored with --eval-start)")
    b.add_argument("--eval-start", default=None,
                   help="first evaluated hour, e.g. 2024-08-01 (default: --weeks before the end)")
    b.add_argument("--eval-end", default=None,
                   help="end of the evaluation window, exclusive (default: end of the data)")
    b.add_argument("--refit", type=_refit, default="daily",
                   help="'daily', 'hourly' or hours between refits")
    b.add_argument("--update", choices=["hourly", "none"], default="hourly",
                   help="between refits: 'hourly' = condition on each completed hour and forecast "
                        "from it (default, as the simulator's provider); 'none' = slice the "
                        "path forecast at the refit")
    b.add_argument("--min-active", type=cargs.number(0, 1), default=0.5,
                   help="calibration report: a series is scored if it was seen before the window "
                        "and is non-zero in at least this share of its window hours (default 0.5)")
    b.add_argument("--series", default=None, help="comma-separated series to keep (default all)")
    b.add_argument("--max-series", type=cargs.number(1, integer=True), default=None,
                   help="keep only the N series with the largest mean demand")
    b.add_argument("--seed", type=cargs.seed, default=0)
    b.add_argument("--out", type=Path, default=Path("results/forecast-backtest"),
                   help="folder for metrics.csv, summary.csv, bands.png "
                        "(default results/forecast-backtest)")
    b.add_argument("--save-forecasts", action="store_true", help="also write forecasts.csv.gz")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.set_defaults(handler=_backtest)

    s = fsub.add_parser("series", help="write the hourly-max HP demand series (ds,series,y) as CSV")
    s.add_argument("--data", required=True, help="same sources as `forecast backtest --data`")
    _column_flags(s)
    s.add_argument("--seed", type=cargs.seed, default=0)
    s.add_argument("--out", type=Path, required=True, help="CSV file to write")
    s.set_defaults(handler=_series)


def _refit(text: str) -> str:
    from gfs_opt.errors import GfsError
    from gfs_opt.forecast.backtest import refit_hours

    try:
        refit_hours(text)
    except GfsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _column_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-col", default=None, metavar="NAME",
                   help="CSV data: the time column (default ds, or hour/time/timestamp/date)")
    p.add_argument("--series-col", default=None, metavar="NAME",
                   help="long CSV data: the series-name column (default series)")
    p.add_argument("--value-col", default=None, metavar="NAME",
                   help="long CSV data: the value column (default y)")


def _columns(args: argparse.Namespace) -> dict[str, str | None]:
    return {"time_col": args.time_col, "series_col": args.series_col, "value_col": args.value_col}


def _select(df: pd.DataFrame, series: str | None, max_series: int | None) -> pd.DataFrame:
    from gfs_opt.errors import GfsError

    if series:
        wanted = [x for x in series.split(",") if x]
        unknown = sorted(set(wanted) - set(df["series"].unique()))
        if unknown:
            raise GfsError(f"unknown series {unknown}; the data has {df['series'].nunique()} series")
        df = df[df["series"].isin(wanted)]
    if max_series is not None:
        top = df.groupby("series")["y"].mean().sort_values(ascending=False).index[:max_series]
        df = df[df["series"].isin(top)]
    return df


def _backtest(args: argparse.Namespace) -> int:
    import pandas as pd

    from gfs_opt.forecast.backtest import calibration_report, eligible_series, run_backtest
    from gfs_opt.forecast.plot import plot_bands
    from gfs_opt.forecast.sources import load_history

    check_out_dir(args.out)
    df, description = load_history(args.data, seed=args.seed, columns=_columns(args))
    df = _select(df, args.series, args.max_series)
    print(description)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    result = run_backtest(df, models, horizon=args.horizon, quantile=args.quantile,
                          weeks=args.weeks, refit=args.refit, seed=args.seed,
                          progress=not args.no_progress and sys.stderr.isatty(),
                          update=args.update, start=args.eval_start, end=args.eval_end)
    summary = result.summary()
    n_series = int(result.metrics["series"].nunique())
    f = result.forecasts
    window = f"{f['ds'].min():%Y-%m-%d %H:%M} to {f['ds'].max():%Y-%m-%d %H:%M}"
    print(f"\nrolling backtest: {window}, refit {args.refit}, update {args.update}, horizon "
          f"{args.horizon} h, quantile {args.quantile:g} (pinball/coverage at q{args.quantile:g}, "
          f"width = q{min(args.quantile, 1 - args.quantile):g}–q{max(args.quantile, 1 - args.quantile):g})")
    print(summary.to_string(index=False, float_format=lambda v: f"{v:,.3f}"))
    if n_series <= 12:
        for metric in ("pinball", "coverage"):
            table = result.metrics.pivot(index="series", columns="model", values=metric)
            print(f"\n{metric} per series")
            print(table.to_string(float_format=lambda v: f"{v:,.3f}"))
    eligible = eligible_series(df, f["origin"].min(), f["ds"].max() + pd.Timedelta(hours=1),
                               args.min_active)
    eligible = eligible[eligible.index.isin(result.metrics["series"])]
    report = calibration_report(result.lead_metrics, eligible)
    print(f"\ncalibration per step h: series with q{args.quantile:g} coverage in [0.85, 0.95] "
          f"(tie-aware: [P(y<q), P(y≤q)] meets the band); eligible {int(eligible.sum())} of "
          f"{len(eligible)} series (seen before the window, non-zero in ≥ {args.min_active:g} of "
          f"its hours)")
    print(report.pivot(index="h", columns="model", values="share").to_string(
        float_format=lambda v: f"{v:.3f}"))
    with writing(args.out):
        args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "metrics.csv", result.metrics)
    write_csv(args.out / "lead_metrics.csv", result.lead_metrics.assign(
        eligible=result.lead_metrics["series"].map(eligible)))
    write_csv(args.out / "calibration.csv", report)
    write_csv(args.out / "summary.csv", summary)
    if args.save_forecasts:
        write_csv(args.out / "forecasts.csv.gz", result.forecasts)
    png = plot_bands(result.forecasts, args.out / "bands.png", args.quantile)
    print(f"\nwrote {args.out / 'metrics.csv'}, {args.out / 'lead_metrics.csv'}, "
          f"{args.out / 'calibration.csv'}, {args.out / 'summary.csv'}, {png}")
    return 0


def _series(args: argparse.Namespace) -> int:
    from gfs_opt.forecast.sources import load_history

    check_out_file(args.out)
    df, description = load_history(args.data, seed=args.seed, columns=_columns(args))
    write_csv(args.out, df)
    print(f"{description}; wrote {len(df):,} rows to {args.out}")
    return 0
