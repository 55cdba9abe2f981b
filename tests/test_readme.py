"""Every command of the README's and docs/'s shell blocks, run as written or with small settings.

The commands are read from the documents themselves (their fenced ``bash`` blocks: README.md and
docs/*.md), so a command added to them is run here without editing this file. A command runs unchanged unless a rule below
rewrites it (each rule says why), and only the commands of `EXEMPT` are not run (each with its
reason); `test_every_readme_command_is_accounted_for` fails on a command that no rule explains
and lists which rules matched nothing (a README edit made them stale). Commands run in-process
(`gfs_opt.cli.main`) in a scratch folder that holds the repository's ``instances/`` and
``examples/``, with ``GFS_DATA_DIR`` pointing nowhere: the README must work from a clone alone.

`data fetch` cannot reach its upstream here (no internet): it runs against a local HTTP server
on 127.0.0.1 that serves a stand-in job file, with the pinned hash replaced by the stand-in's.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from standins import write_alibaba_standin, write_chronus_standin
from test_data_fetch import GOOD, PAYLOAD, serve
from test_fuzz_cli import alarm

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
#: every document whose ```bash blocks are run: the README first (its first command is the main job)
DOCUMENTS = [README, *sorted((REPO / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Rule:
    pattern: str        # regex searched in the command
    old: str            # regex replaced …
    new: str            # … by this (may be appended: old = "$")
    why: str


# Commands not run, and why (matched by regex against the command).
EXEMPT: dict[str, str] = {
    r"^pip install": "installs the package: .ci/run's first step runs exactly this",
    r"^python -m pytest": "the test suite itself, which this test is part of (its data-dependent "
                          "modules run from a copy without data folder in test_fresh_clone.py)",
    r"--address auto": "joins a running Ray cluster (needs a Ray head node)",
    r"--address ray://": "connects to a Ray Client server on a remote head node",
    r"^gfs-opt slurm ": "drives a live Slurm (root, Debian packages, minutes of wall time): "
                        "tests/test_slurm_live.py, marked slurm and run by .ci/run's slurm step, "
                        "covers bring-up, quota, preemption, a short replay and teardown",
    r"^python benchmarks/bench_slurm_pools\.py": "a benchmark of ≈ 70 min on a live Slurm (root): "
                                                "BENCHMARKS.md records its figures",
    r"^gfs-opt sweep examples/sweep-rho\.toml": "90 paper-a100 cells (about 40 minutes on 2 "
        "cores); tests/test_drain_scoring.py reads, checks and draws a small ρ sweep and notebook "
        "03 runs a reduced grid",
    r"^python -m gfs_opt\.experiments\.rho_dial": "reads the sweep of the command before it; "
        "tests/test_drain_scoring.py runs the same reader on a small sweep",
    r"^gfs-opt data fetch (chronus|alibaba-openb|philly)": "downloads from the upstream "
        "repositories (needs the internet); tests/test_data_fetch.py fetches every dataset from a "
        "local mirror against its pinned sizes and hashes",
}

# Small settings: (which command, what is replaced, by what, why). Applied in this order.
QUICK: list[Rule] = [
    Rule(r"^gfs-opt trace synth .*--scale 1\b", r"--scale 1\b", "--scale 0.02",
         "full scale writes ≈ 466k jobs (tens of seconds); 2 % exercises the same code"),
    Rule(r"^gfs-opt trace stats synthetic", r"stats synthetic", "stats small",
         "the full-scale synthetic trace takes ~30 s to generate; `small` is the same generator"),
    Rule(r"^gfs-opt (simulate|compare) .*(paper-a100)", r"$",
         " --window 2024-08-01 2024-08-02 --replay-from 2024-08-01",
         "paper-a100 scores a month after four weeks of warm-up; one day keeps the code path"),
    Rule(r"^gfs-opt instance dump .*--setup paper-a100", r"--setup paper-a100", "--setup small",
         "paper-a100 replays four weeks of warm-up before its first scored round"),
    Rule(r"^gfs-opt compare --setup paper-a100(?!.*--loads)", r"$", " --loads medium",
         "the setup's default runs three loads; one is enough to exercise the command"),
    Rule(r"^gfs-opt (simulate|compare|instance dump) (?!.*--forecaster)", r"$",
         " --forecaster week-peak",
         "Prophet refits dominate GFS run time; the forecaster is a parameter, tested elsewhere"),
    Rule(r"^gfs-opt (simulate|compare|sweep|reproduce)", r"$", " --no-progress",
         "progress bars go to stderr; they would only clutter the test log"),
    Rule(r"^gfs-opt solve .*--method both", r"$", " --time-limit 2",
         "the default 10 s MILP budget only waits longer for the same answer"),
    Rule(r"^gfs-opt forecast backtest", r"$", " --weeks 0.5 --max-series 1 --no-progress",
         "eight weeks × six pools of daily Prophet refits take minutes"),
    Rule(r"^gfs-opt forecast backtest .*--eval-end 2024-09-01", r"--eval-end 2024-09-01",
         "--eval-end 2024-08-04", "three days of daily refits and hourly updates run every step "
         "of the protocol; a month only repeats them"),
    Rule(r"\$GFS_DATA_DIR/chronus-philly-slo/trace_job_Philly_MIX1\.csv",
         r"\$GFS_DATA_DIR/chronus-philly-slo/trace_job_Philly_MIX1\.csv", "trace_job_standin.csv",
         "the Chronus trace is an optional input in $GFS_DATA_DIR (never in the repository); a "
         "stand-in in its format (`write_chronus_standin`) goes through the same loader"),
    Rule(r"--trace ref-toy\b", r"--trace ref-toy\b", "--trace ref-toy-standin",
         "ref-toy is read from $GFS_DATA_DIR (never in the repository); a stand-in folder in its "
         "schema and shape (`write_alibaba_standin`) goes through the same loader"),
    Rule(r"^gfs-opt sweep examples/sweep-paper-a100\.toml(?!.*--dry-run)",
         r"examples/sweep-paper-a100\.toml", "examples/sweep-small.toml",
         "45 month-long simulations; the small example runs the same engines in seconds"),
    Rule(r"^gfs-opt reproduce (?!--quick)", r"^gfs-opt reproduce", "gfs-opt reproduce --quick",
         "the full reproduction takes ≈ 4 min; --quick runs every stage at small settings"),
]

# Commands that run only with `-m slow` (they start a local Ray, or take a minute or more).
SLOW: dict[str, str] = {
    r"--engine ray": "starts a local Ray cluster (≈ 20 s, ~1 GB)",
    r"^gfs-opt reproduce": "every stage of the reproduction, ≈ 1 min even at --quick settings",
    r"^gfs-opt compare --setup paper-a100": "paper-a100 replays, 4–14 s each (a minute together)",
}


def run_cli(*argv: str, limit_s: int = 600) -> tuple[int, str, str]:
    import contextlib
    import io

    from gfs_opt.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), alarm(limit_s):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def readme_commands(text: str | None = None) -> list[str]:
    """Every command line of the documents' ```bash blocks (continuations joined, `&&` split);
    ``text``: one document's text instead."""
    if text is None:
        return [c for doc in DOCUMENTS for c in readme_commands(doc.read_text(encoding="utf-8"))]
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if not line or line.startswith("#"):
                continue
            commands += [part.strip() for part in line.split("&&") if part.strip()]
    return commands


def main_job(text: str | None = None) -> str:
    """The README's main job: the first gfs-opt command of its first ```bash block."""
    text = README.read_text(encoding="utf-8") if text is None else text
    return next(c for c in readme_commands(text) if c.startswith("gfs-opt"))


MAIN_JOB_WHY = ("the main job: test_fresh_clone.py runs it from a copy of the repository with no "
                "data folder (quick variant by default, exactly as written with -m slow)")


def exemption(cmd: str) -> str | None:
    if cmd == main_job():
        return MAIN_JOB_WHY
    return next((why for pat, why in EXEMPT.items() if re.search(pat, cmd)), None)


def quick(cmd: str) -> tuple[str, list[Rule]]:
    used = []
    for rule in QUICK:
        if re.search(rule.pattern, cmd):
            cmd = re.sub(rule.old, rule.new, cmd, count=1)
            used.append(rule)
    return cmd, used


COMMANDS = readme_commands()
RUN = [c for c in COMMANDS if exemption(c) is None]


def test_every_readme_command_is_accounted_for() -> None:
    assert len(COMMANDS) >= 20, COMMANDS
    for cmd in COMMANDS:
        assert exemption(cmd) or cmd.startswith("gfs-opt"), f"no rule runs or exempts: {cmd}"
    stale = [r.pattern for r in QUICK if not any(re.search(r.pattern, c) for c in RUN)]
    stale += [p for p in EXEMPT if not any(re.search(p, c) for c in COMMANDS)]
    assert not stale, f"rules that match no README command (README changed?): {stale}"
    # the main job and the test command are among them
    assert main_job().startswith("gfs-opt compare")
    assert "python -m pytest -q" in COMMANDS


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder like a fresh clone's root (instances/, examples/), no data folder reachable."""
    for name in ("instances", "examples"):
        (tmp_path / name).symlink_to(REPO / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GFS_DATA_DIR", str(tmp_path / "no-data-here"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    write_chronus_standin(tmp_path / "trace_job_standin.csv")
    write_alibaba_standin(tmp_path / "ref-toy-standin")
    with serve() as (_state, url):
        import gfs_opt.fetch as fetch_mod
        import gfs_opt.traces.verify as verify_mod

        ds = fetch_mod.DATASETS["alibaba-v2026"]
        remote = dataclasses.replace(ds.files[0], url=url, sha256=GOOD, size=len(PAYLOAD))
        monkeypatch.setitem(fetch_mod.DATASETS, "alibaba-v2026",
                            dataclasses.replace(ds, files=(remote,)))
        monkeypatch.setattr(verify_mod, "JOB_FILE_SHA256", GOOD)
        yield tmp_path


def _params() -> list[object]:
    out = []
    for i, cmd in enumerate(RUN):
        slow = next((why for pat, why in SLOW.items() if re.search(pat, cmd)), None)
        marks = [pytest.mark.slow] if slow else []
        out.append(pytest.param(cmd, id=f"{i:02d}-{cmd[8:48]}", marks=marks))
    return out


# commands whose exit status is not 0 by design, and why
EXPECTED_EXIT = {
    # the stand-in job file served instead of the real one is scored against the real trace's
    # calibration targets (it runs on the real cluster) and misses them
    "gfs-opt trace stats data/alibaba-v2026": 1,
}


@pytest.mark.parametrize("cmd", _params())
def test_readme_command_runs(cmd: str, scratch: Path) -> None:
    if "data/alibaba-v2026" in cmd and "data fetch" not in cmd:
        assert run_cli("data", "fetch", "alibaba-v2026", "--dest", "data/alibaba-v2026",
                       "--no-progress")[0] == 0
    argv, _rules = quick(cmd)
    parts = shlex.split(argv)
    expanded: list[str] = []
    for p in parts[1:]:                   # the shell would expand globs
        p = p.replace("/tmp/", f"{scratch}/tmp/")
        expanded += sorted(str(x) for x in Path().glob(p)) if "*" in p else [p]
    code, _out, err = run_cli(*expanded)
    assert "Traceback" not in err, err[-3000:]
    assert code == EXPECTED_EXIT.get(cmd, 0), (argv, code, err[-3000:])
