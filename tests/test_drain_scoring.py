"""Windows scored under the quota apart from the drain, the class draw, and the ρ dial's reading.

A window is *drain* when it starts after the scored window with the quota lifted
(`Params.quota_after_window` off); the split is made on time and parameters alone, so a policy
without a quota replays the same simulation either way and only the split differs — which is what
these tests hold the counts to.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tiny_trace import write_tiny_trace

from gfs_opt.cli import main
from gfs_opt.commands.sim_cmd import drain_line
from gfs_opt.experiments.compare import format_table, table
from gfs_opt.experiments.rho_dial import checks, dial_table, format_dial, load_dial, plot_dial
from gfs_opt.experiments.runner import RunSpec, prepare_trace, run
from gfs_opt.model import Params
from gfs_opt.sim.metrics import per_guarantee_class

#: a scored window that ends while the tiny trace's LP jobs still run and wait (seconds)
WINDOW = (0.0, 28_000.0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, object]:
    folder = write_tiny_trace(tmp_path_factory.mktemp("tiny") / "t")
    base = RunSpec(trace=str(folder), policy="yarn-cs", window=WINDOW, drain_days=1.0)
    trace = prepare_trace(base)
    return {kept: run(RunSpec(**{**base.__dict__, "params": {"quota_after_window": kept}}),
                      trace=trace) for kept in (True, False)}


def test_the_quota_is_kept_through_the_drain_by_default() -> None:
    assert Params().quota_after_window is True


def test_kept_quota_has_no_drain(runs: dict) -> None:
    s = runs[True].summary
    assert s["lp_windows_failed_drain"] == s["lp_windows_ok_drain"] == 0
    assert s["lp_eviction_rate_all"] == s["lp_eviction_rate"]
    assert s["lp_evictions_drain"] == 0
    assert drain_line(s) is None


def test_lifted_drain_splits_the_same_windows(runs: dict) -> None:
    kept, lifted = runs[True].summary, runs[False].summary
    # yarn-cs holds no quota: the same simulation, split differently
    assert runs[True].jobs.drop(columns=["windows_ok_drain", "windows_failed_drain"]).equals(
        runs[False].jobs.drop(columns=["windows_ok_drain", "windows_failed_drain"]))
    assert lifted["lp_windows_ok_drain"] + lifted["lp_windows_failed_drain"] > 0
    for k in ("ok", "failed"):
        assert lifted[f"lp_windows_{k}"] + lifted[f"lp_windows_{k}_drain"] == kept[f"lp_windows_{k}"]
    assert lifted["lp_eviction_rate_all"] == pytest.approx(kept["lp_eviction_rate"])
    line = drain_line(lifted)
    assert line is not None and "drain" in line


def test_every_table_carries_the_split(runs: dict) -> None:
    out = runs[False]
    s, jobs, pools, cls = out.summary, out.jobs, out.per_pool, out.per_class
    lp = jobs[jobs["cls"] == "LP"]
    for k in ("ok", "failed"):
        total = int(lp[f"windows_{k}"].sum())
        drain = int(lp[f"windows_{k}_drain"].sum())
        assert drain == s[f"lp_windows_{k}_drain"] == int(pools[f"lp_windows_{k}_drain"].sum())
        assert total - drain == s[f"lp_windows_{k}"] == int(pools[f"lp_windows_{k}"].sum())
        assert cls.loc["LP", f"windows_{k}"] == total - drain
        assert cls.loc["LP", f"windows_{k}_drain"] == drain
    ev = out.evictions
    assert int((ev["in_eval"] & ev["drain"]).sum()) == s["lp_evictions_drain"]
    by_class = per_guarantee_class(jobs)
    assert int(by_class["windows_failed"].sum()) == s["lp_windows_failed"]


def test_compare_table_shows_the_drain_only_where_there_is_one(runs: dict) -> None:
    for kept, shown in ((True, False), (False, True)):
        df = table({"medium": {"yarn-cs": runs[kept]}}, reference="gfs")
        text = format_table(df, reference="gfs")
        assert ("drain" in text.splitlines()[1]) is shown
        assert {"lp_eviction_rate_drain", "lp_windows_failed_drain"} <= set(df.columns)


def test_cli_switch_lifts_the_quota(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_tiny_trace(tmp_path / "tiny")
    args = ["simulate", "--trace", str(folder), "--policy", "yarn-cs", "--window", "0", "28000",
            "--json", "--no-progress"]
    assert main([*args, "--lift-quota-after-window"]) == 0
    s = json.loads(capsys.readouterr().out)
    s = s.get("summary", s)
    assert s["lp_windows_ok_drain"] + s["lp_windows_failed_drain"] > 0
    assert main([*args, "--lift-quota-after-window", "--keep-quota-after-window"]) == 2
    assert "not allowed with" in capsys.readouterr().err


def test_several_classes_are_drawn_even_with_the_default_among_them(tmp_path: Path) -> None:
    folder = write_tiny_trace(tmp_path / "tiny")
    trace, _lo, _hi = prepare_trace(RunSpec(trace=str(folder),
                                            params={"guarantee_classes": [1, 2, 4]}))
    lp = trace.jobs[trace.jobs["cls"] == "LP"]
    assert set(lp["guarantee_h"]) == {1.0, 2.0, 4.0}
    hp = trace.jobs[trace.jobs["cls"] == "HP"]
    assert set(hp["guarantee_h"]) == {1.0}
    plain, _lo, _hi = prepare_trace(RunSpec(trace=str(folder)))
    assert set(plain.jobs.loc[plain.jobs["cls"] == "LP", "guarantee_h"]) == {1.0}


def _fake_sweep(root: Path) -> Path:
    """A sweep folder with cells of two policies × three ρ × two seeds and made-up outcomes."""
    for pol, base_fail in (("gfs", 1), ("yarn-cs+sqa", 3)):
        for i, rho in enumerate((0.5, 0.9, 0.99)):
            for seed in (0, 1):
                cid = f"{pol}-{rho}-{seed}"
                d = root / "cells" / cid
                d.mkdir(parents=True)
                failed = base_fail * (3 - i) + seed           # fewer evictions as ρ rises
                jqt = 100.0 * (i + 1) + seed                  # longer queues as ρ rises
                jobs = pd.DataFrame({
                    "cls": ["LP", "LP", "HP"], "guarantee_h": [1.0, 4.0, 1.0],
                    "windows_ok": [100 - failed, 50, 0], "windows_failed": [failed, 0, 0],
                    "windows_ok_drain": [0, 0, 0], "windows_failed_drain": [0, 0, 0]})
                jobs.to_csv(d / "jobs.csv", index=False)
                rec = {"id": cid, "status": "ok",
                       "params": {"policy": pol, "rho": rho, "seed": seed},
                       "metrics": {"lp_eviction_rate": failed / 150, "lp_jqt_mean": jqt,
                                   "lp_never_started": 0}}
                (d / "cell.json").write_text(json.dumps(rec))
    return root


def test_rho_dial_reads_checks_and_draws_a_sweep(tmp_path: Path) -> None:
    dial = dial_table(load_dial(_fake_sweep(tmp_path / "sweep")))
    assert list(dial["policy"].unique()) == ["gfs", "yarn-cs+sqa"]
    gfs = dial[dial["policy"] == "gfs"].set_index("rho")
    assert gfs.loc[0.5, "success_4h_mean"] == 1.0
    assert gfs.loc[0.99, "success_1h_mean"] == pytest.approx(1 - 1.5 / 100)
    found = checks(dial)
    assert len(found) == 5 and all(c.holds for c in found if c.what.startswith("LP JQT"))
    # at ρ = 0.99 GFS's 1 h class succeeds on 98.5 %: the promise is missed there
    promise = next(c for c in found if c.policy == "gfs" and c.what.startswith("realised"))
    assert not promise.holds and promise.misses[0].startswith("ρ=0.99 1h")
    text = format_dial(dial, found)
    assert "success 4h %" in text and "gfs: realised window success" in text
    assert plot_dial(dial, tmp_path / "dial.png").stat().st_size > 0
