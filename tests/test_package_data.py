"""The package data: what the code reads is shipped, declared in pyproject, and accounted for in
its NOTICE (sha256 per file), and it stays small with no real trace in it."""

from __future__ import annotations

import fnmatch
import hashlib
import tomllib
from pathlib import Path

from gfs_opt.paths import PACKAGE_DATA, alibaba_dir, calibration_targets_path

REPO = Path(__file__).resolve().parent.parent
FILES = sorted(p for p in PACKAGE_DATA.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
#: every file of the package that is not code (data, schemas, templates, markers)
NON_CODE = sorted(p for p in PACKAGE_DATA.parent.rglob("*") if p.is_file()
                  and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts)


def _rel(p: Path) -> str:
    return p.relative_to(PACKAGE_DATA.parent).as_posix()


def test_every_shipped_file_is_declared_as_package_data() -> None:
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["gfs_opt"]
    undeclared = [_rel(p) for p in NON_CODE
                  if not any(fnmatch.fnmatch(_rel(p), g.replace("**/", "*")) for g in globs)]
    assert not undeclared, undeclared
    for g in globs:   # and no glob is left over from files that are gone
        assert any(fnmatch.fnmatch(_rel(p), g.replace("**/", "*")) for p in NON_CODE), g


def test_notice_pins_every_data_file() -> None:
    notice = (PACKAGE_DATA / "NOTICE").read_text()
    for p in FILES:
        if p.name in ("NOTICE", "LICENSE.MIT.txt"):
            continue
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        assert digest in notice, f"{_rel(p)}: sha256 {digest} not in NOTICE"
        assert p.name.split(".")[0] in notice, _rel(p)
    for word in ("Source:", "Terms:", "alibaba/clusterdata", "3a727e58ba52e3dcb598814e2e1f9f7f3b4821f4"):
        assert word in notice


def test_small_and_no_real_trace() -> None:
    assert sum(p.stat().st_size for p in FILES) < 1_000_000
    # no trace of any kind: job files stay in $GFS_DATA_DIR or wherever --trace points
    assert not [p for p in FILES if p.name == "job_info_df.csv"
                or p.name.startswith(("openb_pod_list", "trace_job_"))]


def test_what_the_code_reads_is_there() -> None:
    from gfs_opt.forecast.sources import alibaba_hourly_path
    from gfs_opt.traces.synth_inputs import load_aggregates

    assert calibration_targets_path().is_file() and alibaba_hourly_path().is_file()
    assert (alibaba_dir() / "node_info_df.csv").is_file()
    load_aggregates.cache_clear()
    agg = load_aggregates()
    assert len(agg.nodes) == 4278 and len(agg.orgs) == 84
