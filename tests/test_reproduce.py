"""`gfs-opt reproduce --quick` end to end, resuming, and the numbers behind the report."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gfs_opt.cli import main
from gfs_opt.experiments.reproduce.headline import changes, paper_comparisons
from gfs_opt.experiments.reproduce.paper import PAPER, PaperNumber, verdict
from gfs_opt.experiments.reproduce.plan import (
    ReproConfig,
    grid_cells,
    load_run,
    pick_best_baseline,
    spec_for,
)
from gfs_opt.experiments.runner import RunSpec
from gfs_opt.paths import REPO_ROOT
from gfs_opt.policies.departures import DEPARTURES


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """One quick reproduction shared by the tests below (≈ 15 s)."""
    out = tmp_path_factory.mktemp("repro")
    report = out / "report" / "REPRODUCTION.md"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["reproduce", "--quick", "--out", str(out / "run"), "--report", str(report),
                   "--instances", str(REPO_ROOT / "instances"), "--no-progress"])
    assert rc == 0
    return out / "run", report, buf.getvalue()


@pytest.mark.slow   # the quick reproduction: ≈ 1 min of CPU
def test_quick_writes_report_tables_and_figures(quick_run: tuple[Path, Path, str]) -> None:
    run_dir, report, stdout = quick_run
    text = report.read_text()
    for section in ("## The paper's GFS: its numbers and ours", "## The paper's ablations",
                    "## Greedy vs exact on the instance files", "## Where we differ and why",
                    "## Beyond the paper: gfs_opt's GFS (`gfs`)", "**Each departure's effect**",
                    "## Spot quota and forecast", "Quick mode"):
        assert section in text, section
    # every paper number that the quick plan can measure has a verdict
    table = pd.read_csv(run_dir / "tables" / "paper_vs_ours.csv")
    assert {"gfs_lp_jqt", "gfs_lp_eviction", "lp_eviction_change", "lp_eviction_change_sqa",
            "lp_jqt_change", "lp_jqt_change_noquota", "static_eta_lp_jqt",
            "week_peak_lp_eviction"} <= set(table["key"])
    assert set(table["verdict"]) <= {"match", "exceed", "miss", "n/a", "production"}
    # production observations are shown, never scored
    prod = table[table["key"].isin(["allocation_gain_max", "monthly_value"])]
    assert set(prod["verdict"]) <= {"production", "n/a"}
    assert "production observation" in text
    # figure links resolve relative to the report, which lives elsewhere than the assets
    links = [line.split("](", 1)[1].rstrip(")") for line in text.splitlines()
             if line.startswith("![")]
    assert len(links) >= 5
    for link in links:
        assert (report.parent / link).resolve().exists(), link
    names = {p.stem for p in (run_dir / "figures").glob("*.png")}
    assert {"lp_jqt_cdf_medium", "eviction_by_pool_medium", "allocation_medium",
            "quota_vs_demand_small_medium_gfs-paper", "quota_vs_demand_small_medium_gfs",
            "milp_gap"} <= names
    doc = json.loads((run_dir / "results.json").read_text())
    for pol in ("gfs-paper", "gfs"):
        s = doc["summaries"]["grid"]["medium"][pol]
        assert 0.0 <= s["lp_eviction_rate"] <= 1.0 and s["hp_evictions"] == 0
    assert set(doc["summaries"]["ablations"]["medium"]) == {
        "gfs-paper", "gfs-paper[forecaster=week-peak]", "gfs-paper[static_eta=true]"}
    assert set(doc["summaries"]["departures"]["medium"]) == {"gfs-no-wait"}
    effects = pd.read_csv(run_dir / "tables" / "departures.csv")
    assert list(effects["departure"]) == ["wait"] and effects["seeds"].tolist() == [1]
    # the effect is gfs minus gfs without the departure, on the same trace
    g = doc["summaries"]["grid"]["medium"]["gfs"]["lp_eviction_rate"]
    w = doc["summaries"]["departures"]["medium"]["gfs-no-wait"]["lp_eviction_rate"]
    assert effects["lp_eviction_rate_effect"].iloc[0] == pytest.approx(g - w)
    assert "[13/13]" in stdout and "report:" in stdout   # progress was printed
    trace = pd.read_csv(run_dir / "runs" / "small" / "medium" / "gfs" / "quota_trace.csv")
    assert len(trace) and (trace["fc_lo"] <= trace["fc_hi"] + 1e-9).all()


@pytest.mark.slow   # the quick reproduction: ≈ 1 min of CPU
def test_second_invocation_reuses_every_run(quick_run: tuple[Path, Path, str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, report, _ = quick_run
    before = report.read_text()
    assert main(["reproduce", "--quick", "--out", str(run_dir), "--report", str(report),
                 "--skip-milp", "--no-progress"]) == 0
    out = capsys.readouterr().out
    # 12 distinct runs loaded from disk (both GFS, 4 no-quota and 3 +sqa baselines, 2
    # ablations, 1 departure), gfs-paper at medium shared by the grid and the ablations
    assert out.count(": reused") == 12 and out.count("same run as") == 1
    assert " …" not in out
    after = report.read_text()
    # same measurements, and the instance study is gone because it was skipped
    head = "## The paper's GFS: its numbers and ours"
    headline = before.split("## The paper's simulation")[0].split(head)[1]
    assert headline == after.split("## The paper's simulation")[0].split(head)[1]
    assert "## Greedy vs exact" not in after


@pytest.mark.slow   # the quick reproduction: ≈ 1 min of CPU
def test_load_run_rejects_another_spec(quick_run: tuple[Path, Path, str]) -> None:
    run_dir, _, _ = quick_run
    folder = run_dir / "runs" / "small" / "medium" / "yarn-cs"
    out = load_run(folder)
    assert out is not None and out.summary["policy"] == "yarn-cs"
    assert load_run(folder, out.spec) is not None
    assert load_run(folder, RunSpec(**{**out.spec.__dict__, "seed": 1})) is None
    assert load_run(run_dir / "nowhere") is None


@pytest.mark.parametrize("argv, message", [
    (["--forecaster", "crystal-ball"], "unknown forecaster"),
    (["--loads", "huge"], "unknown load"),
    (["--setup", "nowhere"], "unknown setup"),
    (["--instances", "/nonexistent/dir"], "not a folder"),
])
def test_bad_arguments_are_one_line_errors(argv: list[str], message: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["reproduce", "--quick", "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1


def test_plan_covers_the_paper() -> None:
    cfg = ReproConfig()
    cells = grid_cells(cfg)
    grid = {(c.load, c.policy) for c in cells if c.group == "grid"}
    assert {(ld, p) for ld in ("low", "medium", "high")
            for p in ("gfs-paper", "gfs", "yarn-cs", "chronus", "lyra", "fgd", "lyra+sqa")} <= grid
    assert ("medium", "gfs-milp") in grid
    assert {c.policy for c in cells if c.group == "ablations"} == {
        "gfs-paper", "gfs-paper[forecaster=week-peak]", "gfs-paper[static_eta=true]",
        "gfs-paper[use_history=false]", "gfs-paper[victims=naive]"}
    # each departure dropped from gfs, at every load and seed
    deps = {(c.load, c.policy, c.seed) for c in cells if c.group == "departures"}
    assert len(deps) == 3 * len(DEPARTURES) * 3 and ("high", "gfs-no-wait", 2) in deps
    assert {c.policy for c in cells if c.group == "rho"} == {"gfs-paper"}
    assert cfg.full_setup == "full"
    sweep = [c for c in cells if c.group == "rho"]
    assert len({c.key for c in sweep}) == len(cfg.rho_sweep) >= 3
    spec = spec_for(cfg, sweep[0])
    assert spec.params == {"rho": sweep[0].rho}
    assert spec.policy_options == {"forecaster": cfg.sweep_forecaster}
    # the grid's GFS keeps the default ρ and the configured forecaster
    grid_gfs = next(c for c in cells if c.group == "grid" and c.policy == "gfs")
    assert spec_for(cfg, grid_gfs).params == {}
    assert spec_for(cfg, grid_gfs).policy_options == {"forecaster": cfg.forecaster}
    assert spec_for(cfg, next(c for c in cells if c.policy == "lyra")).policy_options == {}


# ---- the arithmetic of the report -------------------------------------------------------------
def _s(**kw: float) -> dict[str, float]:
    return kw


def test_changes_sign_and_means() -> None:
    grid = {"medium": {"gfs": _s(lp_jqt_mean=50.0), "yarn-cs": _s(lp_jqt_mean=100.0),
                       "lyra": _s(lp_jqt_mean=200.0)},
            "high": {"gfs": _s(lp_jqt_mean=300.0), "yarn-cs": _s(lp_jqt_mean=200.0),
                     "lyra": _s(lp_jqt_mean=300.0)}}
    ch = changes(grid, "lp_jqt_mean", "gfs")
    assert ch.loc["yarn-cs", "medium"] == pytest.approx(-0.5)
    assert ch.loc["lyra", "medium"] == pytest.approx(-0.75)
    assert ch.loc["yarn-cs", "high"] == pytest.approx(0.5)
    assert ch.loc["mean", "medium"] == pytest.approx(-0.625)
    assert ch.loc["mean", "mean"] == pytest.approx((-0.5 - 0.75 + 0.5 + 0.0) / 4)


def test_best_baseline_is_lowest_lp_jqt() -> None:
    class Out:
        def __init__(self, jqt: float, ev: float) -> None:
            self.summary = {"lp_jqt_mean": jqt, "lp_eviction_rate": ev}

    runs = {"gfs": Out(1.0, 0.0), "yarn-cs": Out(50.0, 0.1), "lyra": Out(40.0, 0.3),
            "fgd": Out(40.0, 0.2)}
    assert pick_best_baseline(runs) == "fgd"   # tie on JQT, fewer evictions


def test_paper_comparison_of_a_paper_like_result_matches() -> None:
    """Summaries shaped like the paper's own numbers must be judged 'match' throughout."""
    med = {"gfs-paper": _s(lp_jqt_mean=575.4, lp_eviction_rate=0.0121, hp_jqt_mean=30.0,
                           hp_jct_p99=1000.0, allocation_rate=0.8)}
    for b in ("yarn-cs", "chronus", "lyra", "fgd", "yarn-cs+sqa", "lyra+sqa", "fgd+sqa"):
        med[b] = _s(lp_jqt_mean=575.4 / (1 - 0.441), lp_eviction_rate=0.0121 / (1 - 0.33),
                    hp_jqt_mean=30.0 / (1 - 0.655), hp_jct_p99=1000.0, allocation_rate=0.8)
    abl = {"gfs-paper": med["gfs-paper"],
           "gfs-paper[forecaster=week-peak]": _s(lp_jqt_mean=10_502.4, lp_eviction_rate=0.0808),
           "gfs-paper[static_eta=true]": _s(lp_jqt_mean=2_174.3, lp_eviction_rate=0.0121)}
    comps = paper_comparisons({"grid": {"medium": med}, "ablations": {"medium": abl}})
    by_key = {c.number.key: c for c in comps}
    for key in ("lp_eviction_change", "lp_eviction_change_sqa", "lp_jqt_change",
                "lp_jqt_change_noquota", "gfs_lp_jqt", "gfs_lp_eviction", "hp_jqt_change", "hp_jct_p99_spread", "week_peak_lp_jqt",
                "week_peak_lp_eviction", "static_eta_lp_jqt", "week_peak_jqt_factor"):
        assert by_key[key].verdict.word == "match", (key, by_key[key])
    assert by_key["baseline_lp_jqt"].verdict.word == "match"      # 1,029 s is within 20 %
    # a production observation is shown with our value, not judged
    assert by_key["allocation_gain_max"].verdict.word == "production"


@given(st.floats(min_value=1e-3, max_value=1e6))
def test_verdict_follows_the_direction(value: float) -> None:
    lower = PaperNumber("x", "x", value, "s", "lower", "t")
    higher = PaperNumber("y", "y", value, "s", "higher", "t")
    assert verdict(value, lower).word == "match" == verdict(value, higher).word
    assert verdict(value * 0.5, lower).word == "exceed"
    assert verdict(value * 2.0, lower).word == "miss"
    assert verdict(value * 2.0, higher).word == "exceed"
    assert verdict(value * 0.5, higher).word == "miss"
    assert verdict(math.nan, lower).word == "n/a"


def test_verdict_on_relative_changes_and_ranges() -> None:
    ev = PAPER["lp_eviction_change"]               # −33 %
    assert verdict(-0.35, ev).word == "match"
    assert verdict(-0.60, ev).word == "exceed"
    assert verdict(+0.10, ev).word == "miss"
    assert verdict(-0.20, ev).delta == "+13.0 pp"
    rng = PAPER["baseline_lp_jqt"]                 # a range without a better side
    assert verdict(3000.0, rng).word == "match"
    assert verdict(100.0, rng).word == "miss" == verdict(1e5, rng).word


def test_docs_and_report_share_one_list_of_departures() -> None:
    """docs/departures.md lists the file the report renders (one source)."""
    from gfs_opt.experiments.reproduce.report import departures

    page = (REPO_ROOT / "docs" / "departures.md").read_text(encoding="utf-8")
    section = page.split("## Readings of the paper both share\n\n", 1)[1].split("\n\n", 1)[1].rstrip()
    assert section == departures(), ("docs/departures.md's list differs from "
                                     "gfs_opt/experiments/reproduce/departures.md: edit the file "
                                     "and copy it into the page")
