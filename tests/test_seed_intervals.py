"""Comparisons over seeds (issue 37): the t interval, one-seed behaviour, the "inside the noise"
decision, and `compare --seeds` writing one row per (load, policy, seed)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from tiny_trace import write_tiny_trace

from gfs_opt.cli import main
from gfs_opt.experiments.runner import RunOutput, RunSpec
from gfs_opt.experiments.seed_stats import Interval, inside_noise, t_interval, t_quantile
from gfs_opt.experiments.seed_tables import (
    family_seed_summary,
    format_family_seed_summary,
    identical_seeds,
    seed_summary,
)


# ---- the interval ---------------------------------------------------------------------------
def test_t_interval_known_values() -> None:
    assert t_quantile(2) == pytest.approx(4.302653, abs=1e-6)
    assert t_quantile(1) == pytest.approx(12.706205, abs=1e-6)
    iv = t_interval([1.0, 2.0, 3.0])              # s = 1
    assert iv.mean == pytest.approx(2.0)
    assert iv.half == pytest.approx(4.302653 / math.sqrt(3), abs=1e-6)   # ≈ 2.484
    assert (iv.lo, iv.hi) == pytest.approx((2 - 2.484138, 2 + 2.484138), abs=1e-6)
    assert iv.n == 3 and iv.has_interval


def test_t_interval_drops_nan_and_one_value_has_none() -> None:
    iv = t_interval([5.0, float("nan")])
    assert iv.n == 1 and iv.mean == 5.0 and math.isnan(iv.half) and not iv.has_interval
    assert iv.contains(5.0) is None and iv.overlaps(Interval(5.0, 1.0, 3)) is None
    assert inside_noise([0.2]) is None
    empty = t_interval([])
    assert empty.n == 0 and math.isnan(empty.mean)
    same = t_interval([0.3, 0.3, 0.3])            # no spread: a zero-width interval
    assert same.half == 0.0 and same.contains(0.3) is True and same.contains(0.0) is False


def test_inside_the_noise_both_ways() -> None:
    # consistent per-seed differences: mean −0.30, s = 0.05, half = 4.303·0.05/√3 ≈ 0.124
    assert inside_noise([-0.30, -0.25, -0.35]) is False
    # one seed the other way: mean −0.067, s ≈ 0.25, half ≈ 0.63 → contains 0
    assert inside_noise([-0.30, 0.20, -0.10]) is True
    a, b = Interval(1.0, 0.5, 3), Interval(2.0, 0.4, 3)
    assert a.overlaps(b) is False and b.overlaps(a) is False
    assert a.overlaps(Interval(1.8, 0.4, 3)) is True


# ---- the tables over seeds -----------------------------------------------------------------
def frame(gfs_evict: list[float]) -> pd.DataFrame:
    """Three seeds; no-quota baselines evict 2 %, 3 %, 4 % (seed 0, 1, 2) on both baselines."""
    rows = []
    for seed, (g, b) in enumerate(zip(gfs_evict, (0.02, 0.03, 0.04), strict=True)):
        rows += [{"load": "medium", "policy": "gfs", "seed": seed, "lp_eviction_rate": g,
                  "lp_jqt_mean": 100.0 + seed},
                 {"load": "medium", "policy": "yarn-cs", "seed": seed,
                  "lp_eviction_rate": b, "lp_jqt_mean": 200.0},
                 {"load": "medium", "policy": "lyra", "seed": seed,
                  "lp_eviction_rate": b, "lp_jqt_mean": 200.0}]
    return pd.DataFrame(rows)


def test_family_difference_is_paired_by_seed() -> None:
    # GFS evicts half of the family each seed: −50 % every time, even though GFS's own interval
    # (1–2 %) and the family's (2–4 %) overlap once seed-to-seed spread is counted
    fam = family_seed_summary(frame([0.01, 0.015, 0.02])).set_index("family")
    r = fam.loc["none"]
    assert r["seeds"] == 3 and r["baselines"] == "yarn-cs,lyra"
    assert r["vs_mean_lp_eviction_rate"] == pytest.approx(-0.5)
    assert r["vs_mean_lp_eviction_rate_ci95"] == pytest.approx(0.0, abs=1e-12)
    assert bool(r["noise_lp_eviction_rate"]) is False
    assert bool(r["overlap_lp_eviction_rate"]) is True
    assert r["family_lp_eviction_rate_mean"] == pytest.approx(0.03)
    assert r["gfs_lp_eviction_rate_ci95"] == pytest.approx(t_quantile(2) * 0.005 / math.sqrt(3))
    lines = format_family_seed_summary(fam.reset_index())
    assert "paired over 3 seeds: LP evict -50.0% ± 0.0% (outside the noise)" in lines[0]
    assert "the intervals overlap" in lines[1]
    assert "sqa" not in fam.index                   # no +sqa baseline in the frame


def test_family_difference_inside_the_noise() -> None:
    # −50 %, +50 %, −25 %: the paired interval contains 0
    fam = family_seed_summary(frame([0.01, 0.045, 0.03])).set_index("family")
    assert bool(fam.loc["none", "noise_lp_eviction_rate"]) is True
    line = format_family_seed_summary(fam.reset_index())[0]
    assert "LP evict -8.3% ±" in line and "(inside the noise)" in line


def test_one_seed_has_no_interval() -> None:
    df = frame([0.01, 0.015, 0.02])
    one = df[df["seed"] == 0]
    summ = seed_summary(one).set_index("policy")
    assert summ.loc["gfs", "seeds"] == 1
    assert summ.loc["gfs", "lp_eviction_rate_mean"] == pytest.approx(0.01)
    assert math.isnan(summ.loc["gfs", "lp_eviction_rate_ci95"])
    fam = family_seed_summary(one)
    assert fam.loc[0, "noise_lp_eviction_rate"] is None
    assert "(no interval)" in format_family_seed_summary(fam)[0]
    assert identical_seeds(df) == []
    same = pd.concat([one.assign(seed=0), one.assign(seed=1)])
    assert identical_seeds(same) == ["medium"]


# ---- the command --------------------------------------------------------------------------
def test_compare_seeds_writes_a_row_per_seed(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_tiny_trace(tmp_path / "tiny")
    out_dir = tmp_path / "cmp"
    code = main(["compare", "--trace", str(trace), "--policies", "gfs,yarn-cs",
                 "--forecaster", "week-peak", "--window", "2024-03-01", "2024-03-03",
                 "--loads", "0.5,medium", "--seeds", "0,1", "--workers", "1",
                 "--out", str(out_dir), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "2 seeds (0, 1): each cell is the mean over seeds ± the half-width" in out
    assert "gfs vs mean of no-quota baselines, paired over 2 seeds" in out
    df = pd.read_csv(out_dir / "compare.csv")
    assert sorted(zip(df["load"], df["policy"], df["seed"], strict=True)) == [
        (ld, p, s) for ld in ("0.5", "medium") for p in ("gfs", "yarn-cs") for s in (0, 1)]
    # load ×0.5 keeps a different LP subsample per seed; a real trace at ×1 draws nothing
    lp = df.set_index(["load", "policy", "seed"])["lp_jqt_mean"]
    assert lp[("0.5", "yarn-cs", 0)] != lp[("0.5", "yarn-cs", 1)]
    assert "every seed gave the same numbers at load medium" in err
    assert "at load 0.5" not in err
    summ = pd.read_csv(out_dir / "compare_seeds.csv")
    assert len(summ) == 4 and (summ["seeds"] == 2).all()
    assert {"lp_eviction_rate_mean", "lp_eviction_rate_ci95", "lp_eviction_rate_lo",
            "lp_eviction_rate_hi"} <= set(summ.columns)
    assert (out_dir / "compare_families.csv").is_file()
    assert (out_dir / "medium" / "yarn-cs" / "seed1" / "summary.json").is_file()


def test_compare_one_seed_says_no_interval(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_tiny_trace(tmp_path / "tiny", n=10)
    code = main(["compare", "--trace", str(trace), "--policies", "yarn-cs,lyra", "--window",
                 "2024-03-01", "2024-03-02", "--seed", "3", "--workers", "1", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "1 seed (3): no interval" in out and "±" not in out


@pytest.mark.parametrize(("value", "fragment"), [("0,0", "lists a seed twice"),
                                                 ("x", "'x' is not a whole number"),
                                                 (",", "names no seed"),
                                                 ("-1", "out of range")])
def test_compare_bad_seeds(value: str, fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compare", "--seeds", value, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and "--seeds" in err and fragment in err


# ---- the reproduction over seeds ------------------------------------------------------------
def test_reproduce_plan_runs_the_grid_once_per_further_seed(tmp_path: Path) -> None:
    from gfs_opt.errors import GfsError
    from gfs_opt.experiments.reproduce.plan import ReproConfig, grid_cells, spec_for

    cfg = ReproConfig(seeds=(0, 1, 2))
    cells = grid_cells(cfg)
    extra = [c for c in cells if c.group == "seeds"]
    assert len(extra) == 2 * len(cfg.loads) * len(cfg.policies)     # GFS-MILP: first seed only
    assert {c.policy for c in extra} == set(cfg.policies)
    one = next(c for c in extra if c.policy == "lyra+sqa" and c.seed == 2 and c.load == "high")
    assert one.label == "lyra+sqa-seed2" and one.key == "paper-a100/high/lyra+sqa-seed2"
    assert spec_for(cfg, one).seed == 2 and spec_for(cfg, one).lp_load == 2.0
    # the departures group runs at every seed (its effects are paired by seed); the rest at seed 0
    assert all(spec_for(cfg, c).seed == 0 for c in cells if c.group not in ("seeds", "departures"))
    assert {spec_for(cfg, c).seed for c in cells if c.group == "departures"} == {0, 1, 2}
    assert not [c for c in grid_cells(ReproConfig(seeds=())) if c.group == "seeds"]
    with pytest.raises(GfsError, match="starting with seed 0"):
        ReproConfig(seeds=(1, 2)).validate()


def _fake_run(policy: str, seed: int, evict: float, jqt: float) -> RunOutput:
    empty = pd.DataFrame()
    summary = {"lp_eviction_rate": evict, "lp_jqt_mean": jqt, "lp_jqt_started_mean": jqt,
               "lp_never_started": 0, "lp_jct_mean": jqt, "hp_jqt_mean": 10.0,
               "allocation_rate": 0.8}
    return RunOutput(RunSpec(policy=policy, seed=seed), summary, empty, empty, empty, empty,
                     empty, 1.0, 1)


def test_reproduce_report_shows_the_grid_over_seeds(tmp_path: Path) -> None:
    from gfs_opt.experiments.reproduce.plan import ReproConfig, ReproResults
    from gfs_opt.experiments.reproduce.report import _seed_grid

    cfg = ReproConfig(setup="small", loads=(("medium", 1.0),), policies=("gfs", "yarn-cs"),
                      seeds=(0, 1, 2))
    res = ReproResults(cfg, tmp_path)
    evicts = {0: (0.01, 0.02), 1: (0.015, 0.03), 2: (0.02, 0.04)}
    for seed, (g, b) in evicts.items():
        group, suffix = ("grid", "") if seed == 0 else ("seeds", f"-seed{seed}")
        runs = res.runs.setdefault(group, {}).setdefault("medium", {})
        runs[f"gfs{suffix}"] = _fake_run("gfs", seed, g, 100.0)
        runs[f"yarn-cs{suffix}"] = _fake_run("yarn-cs", seed, b, 50.0)
    assert sorted(res.grid_by_seed()) == [0, 1, 2]
    assert res.grid_by_seed()[2]["medium"]["yarn-cs"].summary["lp_eviction_rate"] == 0.04
    sec = _seed_grid(res)
    assert sec is not None and sec["n"] == 3 and sec["list"] == "0, 1, 2"
    # GFS evicts 1.5 % ± 4.303·0.5/√3 = 1.24 points
    assert "| medium | gfs | 1.50 ± 1.24 |" in sec["table"]
    assert any("LP evict -50.0% ± 0.0% (outside the noise)" in ln for ln in sec["families"])
    res.runs.pop("seeds")
    assert _seed_grid(res) is None


def test_reproduce_grid_means_average_over_seeds_and_keep_first_seed_only_runs(
        tmp_path: Path) -> None:
    from gfs_opt.experiments.reproduce.plan import ReproConfig, ReproResults

    cfg = ReproConfig(setup="small", loads=(("medium", 1.0),), policies=("gfs",), seeds=(0, 1))
    res = ReproResults(cfg, tmp_path)
    res.runs["grid"] = {"medium": {"gfs": _fake_run("gfs", 0, 0.01, 100.0),
                                   "gfs-milp": _fake_run("gfs-milp", 0, 0.005, 80.0)}}
    res.runs["seeds"] = {"medium": {"gfs-seed1": _fake_run("gfs", 1, 0.03, 300.0)}}
    means = res.grid_means()["medium"]
    assert means["gfs"]["lp_eviction_rate"] == pytest.approx(0.02)
    assert means["gfs"]["lp_jqt_mean"] == pytest.approx(200.0)
    # a policy run on the first seed only (GFS-MILP) is reported as that run
    assert means["gfs-milp"]["lp_eviction_rate"] == 0.005
