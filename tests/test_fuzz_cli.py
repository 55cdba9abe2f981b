"""Fuzzing the whole CLI with malformed inputs: mutated instance files, mutated trace folders
(Alibaba v2026 CSV schema) and mutated sweep specs.

Whatever the damage, a command must end with exit 0 (the input is still valid) or with exit 2
and exactly one line ``gfs-opt: error: …`` on stderr: never a traceback, another exit code, or a
hang (every call runs under an alarm). Commands run in-process through `gfs_opt.cli.main`; a
few cases also run as real subprocesses.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sweep import write_spec, write_tiny_trace

from gfs_opt.cli import main

REPO = Path(__file__).resolve().parent.parent
INSTANCES = sorted((REPO / "instances").glob("tiny-0*.json"))
FUZZ = settings(max_examples=100, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CALL_LIMIT_S = 30


class Hang(Exception):
    pass


@contextlib.contextmanager
def alarm(seconds: int) -> Iterator[None]:
    def fire(signum: int, frame: object) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), alarm(CALL_LIMIT_S):
        try:
            code = main(list(argv))
        except SystemExit as exc:     # argparse
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, err: str, what: str) -> None:
    assert "Traceback" not in err, (what, err)
    assert code in (0, 2), (what, code, err)
    if code == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("gfs-opt: error: "), (what, err)


# ---- generic mutations -------------------------------------------------------------------------
ODD_NUMBERS = [0, 1, 2, 3, 0.5, 0.001, 7200, 7200.5, 1e6, 1e12, -1, 2**31, 2**63]
WEIRD_VALUES = [None, True, False, 0, -1, 1.5, -0.5, 10**12, 1e308, float("nan"), float("inf"),
                "", "x", "1", "HP", [], [1], {}, {"a": 1}]


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON document (dict keys and list indices)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_json(draw: st.DrawFn, doc: Any) -> bytes:
    """1–3 structural edits of a JSON document, sometimes followed by byte damage."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        key = path[-1]
        op = draw(st.sampled_from(["renumber", "renumber", "replace", "delete", "duplicate",
                                   "wrap"]))
        if op == "renumber":    # keeps the type: often still a valid, but odd, round
            if isinstance(parent[key], int | float) and not isinstance(parent[key], bool):
                parent[key] = draw(st.sampled_from(ODD_NUMBERS))
        elif op == "replace":
            # a copy: a later edit inside a shared [1] or {"a": 1} would change WEIRD_VALUES for
            # every later example (hypothesis then reports inconsistent data generation)
            parent[key] = copy.deepcopy(draw(st.sampled_from(WEIRD_VALUES)))
        elif op == "delete":
            del parent[key]
        elif op == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        else:
            parent[key] = [parent[key]]
    data = json.dumps(doc).encode()
    return draw(byte_damage(data))


@st.composite
def byte_damage(draw: st.DrawFn, data: bytes) -> bytes:
    op = draw(st.sampled_from(["none", "none", "truncate", "flip", "insert"]))
    if op == "none" or not data:
        return data
    pos = draw(st.integers(0, len(data) - 1))
    if op == "truncate":
        return data[:pos]
    if op == "flip":
        return data[:pos] + bytes([data[pos] ^ draw(st.integers(1, 255))]) + data[pos + 1:]
    return data[:pos] + draw(st.binary(min_size=1, max_size=4)) + data[pos:]


# ---- instance files ------------------------------------------------------------------------------
@pytest.mark.skipif(not INSTANCES, reason="no instance files in instances/")
@FUZZ
@given(st.sampled_from(INSTANCES).flatmap(
    lambda p: st.tuples(st.just(p), mutated_json(json.loads(p.read_text())))),
    st.sampled_from([("solve", "FILE", "--method", "greedy", "--json"),
                     ("solve", "FILE", "--method", "both", "--time-limit", "0.2"),
                     ("instance", "show", "FILE")]))
def test_mutated_instance_files(tmp_path_factory: pytest.TempPathFactory,
                                case: tuple[Path, bytes], command: tuple[str, ...]) -> None:
    _src, content = case
    path = tmp_path_factory.mktemp("inst") / "round.json"
    path.write_bytes(content)
    code, _out, err = run_cli(*(str(path) if a == "FILE" else a for a in command))
    assert_clean(code, err, f"{command} on {content[:300]!r}")


# ---- trace folders -------------------------------------------------------------------------------
TOKENS = ["", " ", "nan", "NaN", "inf", "-inf", "-1", "0", "0.5", "1e308", "1e9", "2.5", "abc",
          "99999999999999999999999", "true", '"', "'", "1,2", "HP", "Spot", "A100", "\x00", "é"]


@st.composite
def mutated_csv(draw: st.DrawFn, text: str) -> bytes:
    lines = text.splitlines()
    header, rows = lines[0].split(","), [ln.split(",") for ln in lines[1:]]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["cell", "cell", "cell", "drop_col", "rename", "dup_row",
                                   "no_rows", "extra_col", "short_row"]))
        if op == "cell" and rows:
            r = draw(st.integers(0, len(rows) - 1))
            c = draw(st.integers(0, len(header) - 1))
            if c < len(rows[r]):
                rows[r][c] = draw(st.sampled_from(TOKENS))
        elif op == "drop_col" and len(header) > 1:
            c = draw(st.integers(0, len(header) - 1))
            header.pop(c)
            rows = [row[:c] + row[c + 1:] for row in rows]
        elif op == "rename":
            c = draw(st.integers(0, len(header) - 1))
            header[c] = draw(st.sampled_from(["", "x", header[0], header[c].upper()]))
        elif op == "dup_row" and rows:
            rows.append(list(draw(st.sampled_from(rows))))
        elif op == "no_rows":
            rows = []
        elif op == "extra_col":
            header.append("extra")
            rows = [[*row, "1"] for row in rows]
        elif op == "short_row" and rows:
            rows[draw(st.integers(0, len(rows) - 1))].pop()
    data = "\n".join(",".join(x) for x in [header, *rows]).encode("utf-8", "surrogatepass")
    return draw(byte_damage(data))


@pytest.fixture(scope="module")
def clean_trace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = write_tiny_trace(tmp_path_factory.mktemp("trace") / "t", n=6)
    return {name: (folder / name).read_text() for name in ("node_info_df.csv", "job_info_df.csv")}


@FUZZ
@given(st.sampled_from(["node_info_df.csv", "job_info_df.csv"]), st.data())
def test_mutated_trace_folders(tmp_path_factory: pytest.TempPathFactory,
                               clean_trace: dict[str, str], target: str,
                               data: st.DataObject) -> None:
    folder = tmp_path_factory.mktemp("tr")
    for name, text in clean_trace.items():
        content = data.draw(mutated_csv(text)) if name == target else text.encode()
        (folder / name).write_bytes(content)
    code, _out, err = run_cli("simulate", "--trace", str(folder), "--policy", "gfs",
                              "--forecaster", "week-peak", "--window", "2024-03-01",
                              "2024-03-02", "--check-invariants", "--no-progress")
    assert_clean(code, err, f"{target}: {(folder / target).read_bytes()[:400]!r}")


# ---- sweep specs ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("spec")
    write_spec(root)
    return root


SPEC_TOKENS = ['"gfs"', '"nope"', "[]", "[1, 2]", '["a", 1]', "-1", "0", "1e400", "nan", "true",
               "{}", '{ x = 1 }', "2024-03-01", '"2024-13-45"', '"../nowhere"', "[[1], [2, 4]]",
               "[", '"', "= =", ""]


@st.composite
def mutated_spec(draw: st.DrawFn, text: str) -> bytes:
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["value", "value", "delete", "duplicate", "key"]))
        if op == "value" and "=" in lines[i]:
            lines[i] = lines[i].split("=")[0] + "= " + draw(st.sampled_from(SPEC_TOKENS))
        elif op == "delete":
            lines.pop(i)
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "key":
            lines.insert(i, draw(st.sampled_from(
                ["bogus = 1", "[params]", "rho = [0.5, 2]", "[options]", "lease_s = 60",
                 "seeds = [0, 0]", "imports = [\"os\"]", "check_invariants = 1",
                 "params = 3", "[[policies]]", "guarantee_classes = [[]]"])))
        if not lines:
            lines = [""]
    return draw(byte_damage("\n".join(lines).encode()))


@FUZZ
@given(st.data(), st.sampled_from(["toml", "yaml"]))
def test_mutated_sweep_specs(spec_dir: Path, data: st.DataObject, fmt: str) -> None:
    import tomllib

    import yaml

    text = (spec_dir / "tiny.toml").read_text()
    if fmt == "yaml":   # the same spec as YAML, mutated as a document
        doc = tomllib.loads(text)
        content = data.draw(mutated_json(doc)).decode("utf-8", "replace")
        with contextlib.suppress(ValueError):  # damaged JSON is damaged YAML too: keep it
            content = yaml.safe_dump(json.loads(content))
        path = spec_dir / "fuzz.yaml"
        path.write_text(content)
    else:
        path = spec_dir / "fuzz.toml"
        path.write_bytes(data.draw(mutated_spec(text)))
    code, _out, err = run_cli("sweep", str(path), "--dry-run")
    assert_clean(code, err, path.read_bytes()[:400])


# ---- found by fuzzing, kept as regressions -------------------------------------------------------
@pytest.mark.parametrize(("target", "old", "new"), [
    ("node_info_df.csv", "A100,8,128,b0", "A100,1000000000,128,b0"),   # absurd node size
    ("job_info_df.csv", "lp0,0,A100,4,2.0,1,", "lp0,0,A100,4,2.0,1000000000,"),  # absurd gang
    ("job_info_df.csv", "lp0,0,A100,4,2.0,1,1000,", "lp0,0,A100,4,2.0,1,1e308,"),  # far future
])
def test_absurd_sizes_are_input_errors(tmp_path: Path, target: str, old: str, new: str) -> None:
    folder = write_tiny_trace(tmp_path / "t", n=6)
    text = (folder / target).read_text()
    assert old in text
    (folder / target).write_text(text.replace(old, new))
    code, _out, err = run_cli("simulate", "--trace", str(folder), "--policy", "yarn-cs",
                              "--window", "2024-03-01", "2024-03-02", "--no-progress")
    assert_clean(code, err, new)


# ---- real subprocesses ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["instance", "trace", "spec"])
def test_subprocess_malformed_input_is_one_line(tmp_path: Path, kind: str) -> None:
    if kind == "instance":
        path = tmp_path / "bad.json"
        path.write_text('{"format": "gfs-opt-instance", "version": 1, "nodes": [')
        argv = ["solve", str(path)]
    elif kind == "trace":
        folder = write_tiny_trace(tmp_path / "t", n=4)
        (folder / "job_info_df.csv").write_text("job_name,organization\nx,1\n")
        argv = ["simulate", "--trace", str(folder), "--no-progress"]
    else:
        path = tmp_path / "bad.yaml"
        path.write_text("setup: small\npolicies: [gfs, yarn-cs]\nseeds: [0, one]\n")
        argv = ["sweep", str(path)]
    res = subprocess.run([sys.executable, "-m", "gfs_opt.cli", *argv], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("gfs-opt: error: "), res.stderr
    assert "Traceback" not in res.stderr
