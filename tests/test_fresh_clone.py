"""The README's main job and test command work from the repository alone: no data folder.

A copy of the package, tests and example files goes to a temporary folder, ``GFS_DATA_DIR`` is
unset and the per-user data folder points at an empty place (``XDG_DATA_HOME``), and the commands
run there as separate processes. The default suite runs the quick variants (the main job with the previous-week-peak
forecaster and one seed; the data-dependent test modules); ``-m slow`` runs the main job exactly
as written.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_readme import main_job

REPO = Path(__file__).resolve().parent.parent
DATA_TESTS = ["tests/test_loaders.py", "tests/test_forecast_series.py", "tests/test_stats.py",
              "tests/test_sim_cli.py"]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fresh") / "gfs_opt-clone"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")
    for name in ("gfs_opt", "tests", "instances", "examples"):
        shutil.copytree(REPO / name, root / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, root / name)
    return root


def _env(clone: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GFS_DATA_DIR", "PYTHONPATH") and not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(clone)      # the copy, not the repository or an editable install
    env["MPLBACKEND"] = "Agg"
    # the per-user data folder (platformdirs) of a machine with no trace fetched
    env["XDG_DATA_HOME"] = str(clone.parent / "no-user-data")
    return env


def _run(clone: Path, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=clone, env=_env(clone), text=True,
                          capture_output=True, timeout=timeout, check=False)


def test_the_copy_imports_its_own_package(clone: Path) -> None:
    res = _run(clone, ["-c", "import gfs_opt, gfs_opt.paths as p; print(gfs_opt.__file__); "
                             "print(p.data_dir().exists())"], 60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [str(clone / "gfs_opt" / "__init__.py"), "False"]


def test_the_data_folder_defaults_to_a_per_user_folder(clone: Path) -> None:
    res = _run(clone, ["-c", "import gfs_opt.paths as p; print(p.data_dir())"], 60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(clone.parent / "no-user-data" / "gfs-opt")


def _main_job(clone: Path, extra: list[str]) -> str:
    argv = shlex.split(main_job())[1:]          # read from the README: `gfs-opt compare …`
    res = _run(clone, ["-m", "gfs_opt.cli", *argv, *extra], 900)
    assert res.returncode == 0, res.stderr[-3000:]
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    assert out is None or (clone / out / "compare.csv").is_file()
    policies = (argv[argv.index("--policies") + 1].split(",") if "--policies" in argv
                else ["gfs", "yarn-cs", "chronus", "lyra", "fgd"])
    for policy in policies:                      # one table row per policy
        assert f" {policy} " in f" {res.stdout} ", (policy, res.stdout)
    return res.stdout


def test_main_job_quick_variant_without_data_folder(clone: Path) -> None:
    # one seed: the other two repeat the same code on another draw (tests/test_seed_intervals.py
    # runs the seed tables)
    _main_job(clone, ["--forecaster", "week-peak", "--seeds", "0", "--no-progress"])


@pytest.mark.slow
def test_main_job_as_written_without_data_folder(clone: Path) -> None:
    out = _main_job(clone, [])
    # the README shows what it prints: every line of its excerpt is a line of the output
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = readme.split("## What the main job prints", 1)[1].split("```text\n", 1)[1]
    shown = shown.split("```", 1)[0]
    printed = {ln.rstrip() for ln in out.splitlines()}
    missing = [ln for ln in shown.splitlines() if ln.strip() and ln.rstrip() not in printed]
    assert not missing, missing


def test_data_dependent_tests_pass_without_data_folder(clone: Path) -> None:
    res = _run(clone, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                       "-o", "addopts=", "-m", "not slow and not benchmark", "-rs",
                       "-k", "ref_toy or alibaba or real or dispatch or openb or chronus",
                       *DATA_TESTS],
               900)
    assert res.returncode == 0, res.stdout[-3000:]
    skips = [ln for ln in res.stdout.splitlines() if ln.startswith("SKIPPED")]
    # only the optional traces that are not shipped may be missing, and they say how to get them
    assert all("gfs-opt data fetch" in ln and "$GFS_DATA_DIR" in ln for ln in skips), skips
    assert " passed" in res.stdout.splitlines()[-1]
