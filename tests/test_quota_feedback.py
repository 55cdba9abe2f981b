"""The quota feedback log (issue 40): η, the evidence it moved on and the quota it gave, at every
refresh of a replay, its table and file, and the diagnostic plot."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gfs_opt.experiments.feedback_plot import feedback_over_time, plot_feedback
from gfs_opt.experiments.reproduce.plan import load_run
from gfs_opt.experiments.runner import RunOutput, RunSpec, run
from gfs_opt.model import Params
from gfs_opt.quota.ledger import EtaLedger
from gfs_opt.quota.rule import demand_bound
from gfs_opt.sim.recorder import FEEDBACK_COLUMNS


@pytest.fixture(scope="module")
def gfs_small() -> RunOutput:
    return run(RunSpec.from_setup("small", policy="gfs", policy_options={"forecaster": "ets"},
                                  lp_load=2.0))


def test_feedback_rows_agree_with_the_quota_rule(gfs_small: RunOutput) -> None:
    fb, p = gfs_small.feedback, Params()
    assert fb is not None and len(fb) > 0
    assert list(fb.columns) == [*FEEDBACK_COLUMNS, "er", "er_attributable", "er_band"]
    assert fb["eta"].between(p.eta_min, p.eta_max).all()
    assert (fb["failed_quota"] <= fb["failed"]).all() and (fb["failed"] <= fb["windows"]).all()
    assert (fb["eta_failed_quota"] <= fb["eta_windows"]).all()
    assert (fb["band_failed"] <= fb["band_windows"] + 1e-9).all() and (fb["band_failed"] >= 0).all()
    # one row per pool and refresh, every 300 s
    assert not fb.duplicated(["t", "pool"]).any()
    assert set(np.diff(np.sort(fb["t"].unique()))) == {p.quota_refresh_s}
    # the quota of the shortest class is at most what the plan leaves free of HP, F_0 = C − ⌊U_0⌋
    planned = fb.dropna(subset=["plan_gpus"])
    assert len(planned) > 0
    c = planned["pool"].map(gfs_small.per_pool["gpus"])
    free0 = c - np.clip(np.floor(planned["plan_gpus"]), 0, c)
    assert (planned["quota_gpus"] <= free0 + 1e-9).all()
    assert (fb["quota_longest_gpus"] <= fb["quota_gpus"]).all()
    # η moves at most once an hour (the feedback's pace), and it did move in this replay
    for _pool, rows in fb.groupby("pool"):
        moves = rows["t"][rows["eta"].diff().fillna(0) != 0].to_numpy()
        assert np.all(np.diff(moves) >= 3600.0)
    assert fb.groupby("pool")["eta"].nunique().max() > 1
    # the rates are the counts' ratios, NaN where no window ended
    ok = fb["windows"] > 0
    assert np.allclose(fb.loc[ok, "er"], fb.loc[ok, "failed"] / fb.loc[ok, "windows"])
    assert fb.loc[~ok, "er"].isna().all()


def test_feedback_plans_are_read_afresh_when_the_forecast_or_eta_moves(
        gfs_small: RunOutput, monkeypatch: pytest.MonkeyPatch) -> None:
    """`EtaLedger.plan_gpus` keeps a pool's plan while its forecast and η stay: the log is the
    one a replay that computes U_0 at every refresh writes."""
    def afresh(self: EtaLedger, pool: str) -> float:
        fc = self.forecasts.get(pool)
        if fc is None or len(fc.mean) == 0:
            return math.nan
        return float(demand_bound(fc, self.params.rho, self.eta.get(pool, 1.0))[0])

    monkeypatch.setattr(EtaLedger, "plan_gpus", afresh)
    again = run(gfs_small.spec)
    assert gfs_small.feedback is not None and again.feedback is not None
    assert gfs_small.feedback["plan_gpus"].notna().sum() > 0
    pd.testing.assert_frame_equal(again.feedback, gfs_small.feedback, check_exact=True)


def test_feedback_is_written_reloaded_and_plotted(gfs_small: RunOutput, tmp_path: Path) -> None:
    gfs_small.write(tmp_path)
    back = load_run(tmp_path)
    assert back is not None and back.feedback is not None
    pd.testing.assert_frame_equal(back.feedback, gfs_small.feedback, check_dtype=False)
    start = float(gfs_small.summary["window"][0])
    sums = feedback_over_time(gfs_small.feedback, start)
    assert len(sums) == gfs_small.feedback["t"].nunique()
    assert sums["hours"].min() < 0 <= sums["hours"].max()    # the day before the window too
    png = tmp_path / "fb.png"
    plot_feedback(gfs_small.feedback, start, "gfs").savefig(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_policies_without_a_quota_log_no_feedback() -> None:
    out = run(RunSpec.from_setup("small", policy="yarn-cs"))
    assert out.feedback is not None and out.feedback.empty
    assert feedback_over_time(out.feedback, 0.0).empty


def test_static_eta_baseline_logs_a_constant_eta() -> None:
    out = run(RunSpec.from_setup("small", policy="yarn-cs+sqa",
                                 policy_options={"forecaster": "ets"}))
    assert out.feedback is not None and len(out.feedback) > 0
    assert (out.feedback["eta"] == 1.0).all()
    assert not math.isnan(out.feedback["quota_gpus"].iloc[-1])
