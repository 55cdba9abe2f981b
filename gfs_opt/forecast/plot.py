"""PNG of backtest forecast bands against actuals (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gfs_opt.fileio import atomic_write, writing


def plot_bands(forecasts: pd.DataFrame, path: Path, quantile: float, series: list[str] | None = None,
               max_series: int = 4, days: int = 7) -> Path:
    """Actuals and each model's h=1 mean and [q_{1−τ}, q_τ] band over the last ``days`` days."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f = forecasts[forecasts["h"] == 1]
    if series is None:
        series = list(f.groupby("series")["y"].mean().sort_values(ascending=False).index[:max_series])
    end = f["ds"].max()
    f = f[f["ds"] > end - pd.Timedelta(days=days)]
    fig, axes = plt.subplots(len(series), 1, figsize=(11, 2.6 * len(series)), sharex=True,
                             squeeze=False)
    lo_q = min(quantile, 1 - quantile)
    for ax, s in zip(axes[:, 0], series, strict=True):
        g = f[f["series"] == s]
        truth = g.drop_duplicates("ds").sort_values("ds")
        for model, gm in g.groupby("model", sort=False):
            gm = gm.sort_values("ds")
            line = ax.plot(gm["ds"], gm["mean"], lw=1, label=f"{model} mean")[0]
            ax.fill_between(gm["ds"], gm["lo"], gm["hi"], color=line.get_color(), alpha=0.18,
                            label=f"{model} q{lo_q:g}–q{1 - lo_q:g}")
        ax.plot(truth["ds"], truth["y"], color="black", lw=1.2, label="actual")
        ax.set_title(str(s), fontsize=9)
        ax.set_ylabel("HP GPUs")
    axes[0, 0].legend(fontsize=7, ncol=3, loc="upper left")
    fig.tight_layout()
    path = Path(path)
    try:
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    finally:
        plt.close(fig)
    return path
