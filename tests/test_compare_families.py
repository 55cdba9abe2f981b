"""GFS against both baseline families in the tables of `compare` and `sweep` (issue: comparison
design): per-baseline changes, the change against each family's mean, and the labels."""

from __future__ import annotations

import pandas as pd
import pytest

from gfs_opt.experiments.compare import family_summary, format_family_summary
from gfs_opt.experiments.sweep.run import _family_lines


def frame() -> pd.DataFrame:
    rows = [("gfs", 0.010, 1000.0), ("yarn-cs", 0.020, 500.0), ("lyra", 0.010, 1500.0),
            ("yarn-cs+sqa", 0.010, 4000.0), ("fgd+sqa", 0.030, 2000.0)]
    return pd.DataFrame([{"load": "medium", "policy": p, "lp_eviction_rate": e,
                          "lp_jqt_mean": j} for p, e, j in rows])


def test_family_summary_hand_numbers() -> None:
    fam = family_summary(frame()).set_index("family")
    # no-quota mean: evict 0.015, JQT 1000 → GFS −33.3 %, +0 %
    assert fam.loc["none", "vs_mean_lp_eviction_rate"] == pytest.approx(0.010 / 0.015 - 1)
    assert fam.loc["none", "vs_mean_lp_jqt_mean"] == pytest.approx(0.0)
    # mean of the per-baseline changes: (−50 % + 0 %)/2 and (+100 % − 33.3 %)/2
    assert fam.loc["none", "mean_change_lp_eviction_rate"] == pytest.approx(-0.25)
    assert fam.loc["none", "mean_change_lp_jqt_mean"] == pytest.approx((1.0 - 1 / 3) / 2)
    # +sqa mean: evict 0.02, JQT 3000 → −50 %, −66.7 %
    assert fam.loc["sqa", "vs_mean_lp_jqt_mean"] == pytest.approx(1000 / 3000 - 1)
    assert fam.loc["sqa", "baselines"] == "yarn-cs+sqa,fgd+sqa"
    lines = format_family_summary(family_summary(frame()))
    assert lines[0].startswith("medium: gfs vs mean of no-quota baselines: LP evict -33.3%")
    assert "+sqa baselines (shared quota, static η)" in lines[1]


def test_zero_baselines_give_no_change_and_no_warning() -> None:
    df = frame()
    df.loc[df["policy"] == "yarn-cs", "lp_eviction_rate"] = 0.0   # e.g. Chronus-like: no eviction
    fam = family_summary(df).set_index("family")
    assert fam.loc["none", "mean_change_lp_eviction_rate"] == pytest.approx(0.010 / 0.010 - 1)


def test_sweep_summary_prints_the_family_lines() -> None:
    s = frame().rename(columns={"lp_eviction_rate": "lp_eviction_rate_mean",
                                "lp_jqt_mean": "lp_jqt_mean_mean"})
    lines = _family_lines(s, ["load"])
    assert "lower is better" in lines[1]
    assert lines[2].startswith("medium: gfs vs mean of no-quota baselines")
    assert _family_lines(s[s["policy"] != "gfs"], ["load"]) == []
