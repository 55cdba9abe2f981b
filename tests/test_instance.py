"""Instance files: round trip, rejection of damaged files, CLI behaviour, schema and docs in sync."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import rounds

from gfs_opt import cli
from gfs_opt.errors import InputError
from gfs_opt.instance import (
    dumps_round,
    load_instance,
    load_round,
    round_from_dict,
    round_to_dict,
    save_round,
    validate_dict,
    validate_file,
)
from gfs_opt.instance.schema import JobIn, ParamsIn, PoolIn, json_schema, json_schema_text
from gfs_opt.model import Job, Params, PoolStatus, Round

REPO = Path(__file__).resolve().parent.parent
SCHEMA_FILE = REPO / "gfs_opt" / "schemas" / "instance.schema.json"
DOC_FILE = REPO / "docs" / "instance-format.md"

STATE_ARRAYS = ("node_pool", "node_gpus", "node_first_gpu", "gpu_node", "gpu_used", "gpu_hp",
                "node_free", "node_hp_gpus", "node_lp_gpus", "pool_capacity", "pool_used",
                "pool_hp", "pool_lp")

# A hand-written file whose nodes are NOT grouped by pool: H800 comes first.
TINY: dict[str, Any] = {
    "format": "gfs-opt-instance", "version": 1, "time": 7200.0,
    "nodes": [{"name": "h800-0", "pool": "H800", "gpus": 8},
              {"name": "a10-0", "pool": "A10", "gpus": 1},
              {"name": "a10-1", "pool": "A10", "gpus": 4}],
    "jobs": [
        {"id": 1, "org": "a", "pool": "H800", "class": "HP", "gpus_per_worker": 4, "workers": 1,
         "submit": 0.0, "duration": 86400.0},
        {"id": 2, "org": "b", "pool": "A10", "class": "LP", "gpus_per_worker": 0.5, "workers": 2,
         "submit": 3000.0, "duration": 5400.0},
        {"id": 3, "org": "b", "pool": "H800", "class": "LP", "gpus_per_worker": 8, "workers": 1,
         "submit": 7000.0, "duration": 3600.0},
    ],
    "running": [
        {"job": 1, "start": 0.0, "last_ckpt": 0.0, "window_start": 0.0, "placement": [[0, [0, 1, 2, 3]]]},
        {"job": 2, "start": 3600.0, "last_ckpt": 3600.0, "window_start": 3600.0,
         "placement": [[1, [0]], [2, [3]]]},
    ],
    "pending_lp": [3],
    "node_evictions_1h": [5, 6, 7],
}


def _tiny() -> dict[str, Any]:
    return copy.deepcopy(TINY)


def assert_same_round(a: Round, b: Round) -> None:
    assert round_to_dict(a) == round_to_dict(b)
    assert a.state.pools == b.state.pools
    assert a.state.node_names == b.state.node_names
    for name in STATE_ARRAYS:
        np.testing.assert_array_equal(getattr(a.state, name), getattr(b.state, name), err_msg=name)
    assert a.state.alloc == b.state.alloc
    assert b.state.check() == []
    for name in ("node_evictions_1h", "node_evictions_1d"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_array_equal(x, y)


# ---- round trip --------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(rounds(max_nodes=6, max_jobs=10))
def test_any_valid_round_survives_save_and_load(rnd: Round) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.json"
        save_round(rnd, path, meta={"source": "hypothesis"})
        first = path.read_bytes()
        inst = load_instance(path)
        assert inst.meta == {"source": "hypothesis"}
        assert_same_round(rnd, inst.round)
        save_round(inst.round, path, meta=inst.meta)
        assert path.read_bytes() == first  # byte-stable
        assert [p.name for p in Path(tmp).iterdir()] == ["r.json"]  # no temp file left behind


@settings(max_examples=30, deadline=None)
@given(rounds(max_nodes=4, max_jobs=6))
def test_dict_round_trip_without_files(rnd: Round) -> None:
    doc = round_to_dict(rnd)
    assert validate_dict(doc) == []
    assert_same_round(rnd, round_from_dict(doc))


def test_nodes_in_any_order_are_remapped_consistently(tmp_path: Path) -> None:
    rnd = round_from_dict(_tiny())
    st_ = rnd.state
    assert st_.node_names == ["a10-0", "a10-1", "h800-0"]  # grouped by pool, sorted
    assert rnd.running[1].placement == ((2, (0, 1, 2, 3)),)
    assert rnd.running[2].placement == ((0, (0,)), (1, (3,)))
    assert st_.gpu_used.tolist() == [500, 0, 0, 0, 500] + [1000] * 4 + [0] * 4
    assert rnd.node_evictions_1h.tolist() == [6, 7, 5]
    # saving writes the canonical order; reading it back gives the same round and bytes
    path = save_round(rnd, tmp_path / "t.json")
    doc = json.loads(path.read_text())
    assert [n["name"] for n in doc["nodes"]] == ["a10-0", "a10-1", "h800-0"]
    assert doc["running"][0]["placement"] == [[2, [0, 1, 2, 3]]]
    assert doc["node_evictions_1h"] == [6, 7, 5]
    again = load_round(path)
    assert_same_round(rnd, again)
    assert dumps_round(again) == path.read_text()


def test_gpu_units_in_file_are_milli_inside() -> None:
    doc = _tiny()
    doc["jobs"][1]["gpus_per_worker"] = 0.3333
    doc["quotas"] = [{"pool": "A10", "class_h": 2.0, "gpus": 2.25}]
    rnd = round_from_dict(doc)
    assert rnd.jobs[2].g == 333 and rnd.jobs[1].g == 4000
    assert rnd.quotas == {("A10", 2.0): 2250}
    out = round_to_dict(rnd)
    assert out["jobs"][1]["gpus_per_worker"] == 0.333
    assert out["jobs"][0]["gpus_per_worker"] == 4 and isinstance(out["jobs"][0]["gpus_per_worker"], int)


def test_defaults_fill_optional_fields() -> None:
    rnd = round_from_dict(_tiny())
    assert rnd.params == Params()
    assert rnd.pools == {} and rnd.forecasts == {} and rnd.quotas == {}
    assert rnd.jobs[2].guarantee_h == 1.0 and rnd.jobs[2].cpu == 0.0
    assert rnd.running[1].evictions == 0 and rnd.node_evictions_1d is None


# ---- rejection ---------------------------------------------------------------------------------
REQUIRED = {
    "": ["format", "version", "time", "nodes", "jobs"],
    "nodes": ["name", "pool", "gpus"],
    "jobs": ["id", "org", "pool", "class", "gpus_per_worker", "workers", "submit", "duration"],
    "running": ["job", "start", "last_ckpt", "window_start", "placement"],
    "quotas": ["pool", "class_h", "gpus"],
}

Mutation = Callable[[dict[str, Any], st.DataObject], "str | bytes | dict[str, Any]"]


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every location in the document except the root and the free-form meta."""
    out: list[tuple] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        if prefix == () and key == "meta":
            continue
        out.append((*prefix, key))
        out.extend(_paths(child, (*prefix, key)))
    return out


def _set(doc: dict[str, Any], path: tuple, value: Any) -> None:
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _get(doc: dict[str, Any], path: tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def m_delete_field(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    choices = [("", f) for f in REQUIRED[""]]
    for section in ("nodes", "jobs", "running", "quotas"):
        choices += [(f"{section}.{i}", f) for i in range(len(doc[section])) for f in REQUIRED[section]]
    where, name = data.draw(st.sampled_from(choices))
    target = doc
    if where:
        section, i = where.split(".")
        target = doc[section][int(i)]
    del target[name]
    return doc


def m_object_for_value(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    _set(doc, data.draw(st.sampled_from(_paths(doc))), {"bogus": True})
    return doc


def m_string_for_number(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    paths = [p for p in _paths(doc) if not isinstance(_get(doc, p), str | dict | list)]
    path = data.draw(st.sampled_from(paths))
    _set(doc, path, str(_get(doc, path)))
    return doc


def m_truncate(doc: dict[str, Any], data: st.DataObject) -> str:
    text = json.dumps(doc)
    return text[: data.draw(st.integers(0, len(text) - 1))]


def m_binary_byte(doc: dict[str, Any], data: st.DataObject) -> bytes:
    raw = json.dumps(doc, ensure_ascii=False).encode()
    at = data.draw(st.integers(0, len(raw)))
    return raw[:at] + b"\xff" + raw[at:]


def _add_full_node_jobs(doc: dict[str, Any], count: int) -> list[int]:
    node = doc["nodes"][0]
    base = max([j["id"] for j in doc["jobs"]], default=0) + 1
    ids = list(range(base, base + count))
    for jid in ids:
        doc["jobs"].append({"id": jid, "org": "x", "pool": node["pool"], "class": "HP",
                            "gpus_per_worker": node["gpus"], "workers": 1, "submit": 0.0, "duration": 1.0})
        doc["running"].append({"job": jid, "start": 0.0, "last_ckpt": 0.0, "window_start": 0.0,
                               "placement": [[0, list(range(node["gpus"]))]]})
    return ids


def m_over_allocate(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    _add_full_node_jobs(doc, 2)
    return doc


def m_duplicate_id(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    options = ["node"] + (["job"] if doc["jobs"] else []) + (["queue"] if doc["pending_lp"] else [])
    kind = data.draw(st.sampled_from(options))
    if kind == "node":
        doc["nodes"].append(dict(data.draw(st.sampled_from(doc["nodes"]))))
    elif kind == "job":
        doc["jobs"].append(dict(data.draw(st.sampled_from(doc["jobs"]))))
    else:
        doc["pending_lp"].append(data.draw(st.sampled_from(doc["pending_lp"])))
    return doc


def m_unknown_pool(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    bad = "NO-SUCH-POOL"
    kind = data.draw(st.sampled_from(["job", "status", "forecast", "quota"]))
    if kind == "job" and doc["jobs"]:
        data.draw(st.sampled_from(doc["jobs"]))["pool"] = bad
    elif kind == "status":
        doc["pools"][bad] = {}
    elif kind == "forecast":
        doc["forecasts"][bad] = {"mean": [1.0], "std": [0.0]}
    else:
        doc["quotas"].append({"pool": bad, "class_h": 1.0, "gpus": 1})
    return doc


def m_version(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    doc["version"] = data.draw(st.sampled_from([0, 2, 99, "1", 1.0, True, None, [1]]))
    return doc


def m_format(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    doc["format"] = data.draw(st.sampled_from(["gfs-opt-instanc", "", 1, None, "GFS-OPT-INSTANCE"]))
    return doc


def m_unknown_field(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    targets = [doc, doc["params"], *doc["nodes"], *doc["jobs"], *doc["running"]]
    data.draw(st.sampled_from(targets))["bogus_field"] = 1
    return doc


def m_running_and_pending(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    if doc["running"]:
        jid = data.draw(st.sampled_from(doc["running"]))["job"]
    else:
        jid = _add_full_node_jobs(doc, 1)[0]
    doc[data.draw(st.sampled_from(["pending_hp", "pending_lp"]))].append(jid)
    return doc


def m_pending_not_in_jobs(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    missing = max([j["id"] for j in doc["jobs"]], default=0) + 1
    doc[data.draw(st.sampled_from(["pending_hp", "pending_lp"]))].append(missing)
    return doc


def m_wrong_worker_count(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    if not doc["running"]:
        _add_full_node_jobs(doc, 1)
    rj = data.draw(st.sampled_from(doc["running"]))
    if len(rj["placement"]) > 1 and data.draw(st.booleans()):
        rj["placement"].pop()
    else:
        rj["placement"].append(rj["placement"][0])
    return doc


def m_forecast_length(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    pool = doc["nodes"][0]["pool"]
    f = doc["forecasts"].setdefault(pool, {"mean": [1.0, 2.0], "std": [0.0, 1.0]})
    if f.get("samples") and data.draw(st.booleans()):
        f["samples"][0].append(3.0)
    else:
        f["std"].append(1.0)
    return doc


def m_bad_request(doc: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    if not doc["jobs"]:
        _add_full_node_jobs(doc, 1)
    job = data.draw(st.sampled_from(doc["jobs"]))
    largest = max(n["gpus"] for n in doc["nodes"] if n["pool"] == job["pool"])
    field, value = data.draw(st.sampled_from([
        ("gpus_per_worker", largest + 1), ("gpus_per_worker", -0.5), ("gpus_per_worker", 0),
        ("gpus_per_worker", 1.5), ("workers", 0), ("submit", -1.0)]))
    job[field] = value
    return doc


# each mutation with the words that the intended check must produce
MUTATIONS: list[tuple[Mutation, str]] = [
    (m_delete_field, r"missing"),
    (m_object_for_value, r"must be|unknown field|unknown pool|not supported|is not \"gfs"),
    (m_string_for_number, r"must be|not supported|is not \"gfs"),
    (m_truncate, r"not valid JSON|empty file"),
    (m_binary_byte, r"not UTF-8"),
    (m_over_allocate, r"over-allocated"),
    (m_duplicate_id, r"duplicate (job id|node name)|already queued"),
    (m_unknown_pool, r"unknown pool \"NO-SUCH-POOL\""),
    (m_version, r"^version: "),
    (m_format, r"^format: "),
    (m_unknown_field, r"bogus_field: unknown field"),
    (m_running_and_pending, r"both pending and running"),
    (m_pending_not_in_jobs, r"pending_(hp|lp)\[\d+\]: job \d+ is not in jobs"),
    (m_wrong_worker_count, r"workers placed"),
    (m_forecast_length, r"mean has \d+ hours?"),
    (m_bad_request, r"gpus_per_worker|workers|submit"),
]


def _write(path: Path, content: str | bytes | dict[str, Any]) -> None:
    if isinstance(content, dict):
        content = json.dumps(content, ensure_ascii=False)
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_nodes=4, max_jobs=6), st.sampled_from(MUTATIONS), st.data())
def test_any_mutated_file_is_rejected(rnd: Round, mutation: tuple[Mutation, str],
                                      data: st.DataObject) -> None:
    mutate, expected = mutation
    doc = round_to_dict(rnd, meta={"note": "mutated"})
    content = mutate(copy.deepcopy(doc), data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bad.json"
        _write(path, content)
        problems = validate_file(path)
        assert problems, f"{mutate.__name__} was not detected"
        assert any(re.search(expected, line) for line in problems), (mutate.__name__, problems)
        assert all(line and "\n" not in line for line in problems)
        rc, out, err = run_cli("instance", "validate", str(path))
        assert rc == 2
        assert "Traceback" not in out + err
        assert out.splitlines() == [f"{path}: {line}" for line in problems]
        with pytest.raises(InputError, match=re.escape(str(path))):
            load_round(path)


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: d["jobs"][1].update(workers=0), "jobs[1].workers: must be ≥ 1 (got 0)"),
    (lambda d: d["jobs"][1].update(workers="2"), "jobs[1].workers: must be an integer (got \"2\")"),
    (lambda d: d["jobs"][1].update({"class": "MP"}), "jobs[1].class: must be 'HP' or 'LP'"),
    (lambda d: d["jobs"][0].pop("org"), "jobs[0].org: missing required field"),
    (lambda d: d["running"][0].update(placment=1), "running[0].placment: unknown field"),
    (lambda d: d.update(version=2), "version: 2 is not supported"),
    (lambda d: d.update(format="x"), "format: \"x\" is not \"gfs-opt-instance\""),
    (lambda d: d["jobs"][2].update(pool="B200"), "jobs[2].pool: unknown pool \"B200\""),
    (lambda d: d["jobs"][2].update(gpus_per_worker=16), "largest node of pool \"H800\" has 8"),
    (lambda d: d["jobs"][2].update(gpus_per_worker=2.5), "must be a whole number of GPUs"),
    (lambda d: d["jobs"].append(dict(d["jobs"][0])), "jobs[3].id: duplicate job id 1 (also jobs[0])"),
    (lambda d: d["nodes"].append(dict(d["nodes"][1])), "nodes[3].name: duplicate node name \"a10-0\""),
    (lambda d: d["running"][1].update(placement=[[1, [0]]]), "1 workers placed, job 2 has 2"),
    (lambda d: d["running"][1]["placement"][1].__setitem__(0, 0), "is in pool \"H800\", job 2 needs \"A10\""),
    (lambda d: d["running"][1]["placement"][1].__setitem__(1, [4]), "has no GPU 4 (it has 4)"),
    (lambda d: d["running"].append({"job": 3, "start": 7100.0, "last_ckpt": 7100.0, "window_start": 7100.0,
                                    "placement": [[0, list(range(8))]]}),
     "running[2].placement: GPU 0 of node 0 (\"h800-0\") over-allocated: 1000 + 1000 > 1000 milli-GPU with jobs [1]"),
    (lambda d: d.setdefault("pending_hp", []).append(1), "pending_hp[0]: job 1 is both pending and running"),
    (lambda d: d.setdefault("pending_hp", []).append(3), "pending_hp[0]: job 3 is LP, it cannot wait in the HP queue"),
    (lambda d: d["pending_lp"].append(42), "pending_lp[1]: job 42 is not in jobs"),
    (lambda d: d.update(queued_since={"x": 1.0}), "queued_since.x (key): must be an integer"),
    (lambda d: d.update(forecasts={"A10": {"mean": [1.0, 2.0], "std": [1.0]}}),
     "forecasts.A10.std: has 1 hour, mean has 2 hours"),
    (lambda d: d.update(node_evictions_1h=[1]), "node_evictions_1h: has 1 entries, the file has 3 nodes"),
    (lambda d: d["running"][0].update(start=9999.0), "running[0].start: 9999 is after the round time 7200"),
])
def test_problem_messages(edit: Callable[[dict[str, Any]], Any], expected: str) -> None:
    doc = _tiny()
    edit(doc)
    problems = validate_dict(doc)
    assert any(expected in line for line in problems), problems


def test_fractional_workers_may_share_a_gpu_up_to_one() -> None:
    doc = _tiny()
    doc["running"][1]["placement"] = [[1, [0]], [1, [0]]]  # 0.5 + 0.5 on a10-0
    rnd = round_from_dict(doc)
    assert rnd.state.gpu_used[0] == 1000
    doc["jobs"][1]["gpus_per_worker"] = 0.6
    assert any("GPU 0 of node 1 (\"a10-0\") over-allocated: 0 + 1200 > 1000" in line
               for line in validate_dict(doc))


def test_damaged_files_give_one_line_each(tmp_path: Path) -> None:
    cases = {
        "empty.json": b"", "blank.json": b"  \n", "binary.json": bytes(range(256)),
        "dup.json": b'{"format": "gfs-opt-instance", "format": 1}',
        "nan.json": b'{"format": "gfs-opt-instance", "version": 1, "time": NaN}',
        "array.json": b"[1, 2]", "deep.json": b"[" * 100_000,
    }
    expected = {"empty.json": "empty file", "blank.json": "empty file", "binary.json": "not UTF-8",
                "dup.json": "duplicate key \"format\"", "nan.json": "NaN is not allowed",
                "array.json": "top level must be a JSON object", "deep.json": "levels deep; an instance file nests at most"}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        problems = validate_file(tmp_path / name)
        assert len(problems) == 1 and expected[name] in problems[0], (name, problems)
    assert validate_file(tmp_path) == ["cannot read: is a directory"]
    assert validate_file(tmp_path / "missing.json") == ["cannot read: no such file"]


def test_load_round_raises_input_error_naming_the_file(tmp_path: Path) -> None:
    doc = _tiny()
    for job in doc["jobs"]:
        job["workers"] = 0
    path = tmp_path / "bad.json"
    _write(path, doc)
    with pytest.raises(InputError) as info:
        load_round(path)
    message = str(info.value)
    assert message.startswith(f"{path}: jobs[0].workers: must be ≥ 1")
    assert "(+" not in message  # three problems: all quoted
    doc["jobs"][0]["org"] = 5
    _write(path, doc)
    with pytest.raises(InputError, match=r"\(\+1 more; run 'gfs-opt instance validate' for all\)"):
        load_round(path)


def test_save_refuses_an_inconsistent_round(tmp_path: Path) -> None:
    rnd = round_from_dict(_tiny())
    rnd.pending_hp.append(3)  # an LP job in the HP queue
    with pytest.raises(ValueError, match="pending_hp"):
        save_round(rnd, tmp_path / "x.json")
    assert list(tmp_path.iterdir()) == []


# ---- CLI ---------------------------------------------------------------------------------------
def test_cli_validate_and_show(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    _write(good, _tiny())
    assert run_cli("instance", "validate", str(good)) == (0, f"{good}: ok\n", "")
    rc, out, err = run_cli("instance", "show", str(good))
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[1].split() == ["pool", "nodes", "GPUs", "used", "HP", "used", "LP", "used", "run", "HP",
                                "run", "LP", "pend", "HP", "pend", "LP", "pend", "GPUs"]
    assert lines[2].split() == ["A10", "2", "5", "1", "0", "1", "0", "1", "0", "0", "0"]
    assert lines[3].split() == ["H800", "1", "8", "4", "4", "0", "1", "0", "0", "1", "8"]
    assert lines[4].split() == ["total", "3", "13", "5", "4", "1", "1", "1", "0", "1", "8"]
    rc, out, err = run_cli("instance", "schema")
    assert rc == 0 and json.loads(out) == json_schema()


def test_cli_subprocess_never_prints_a_traceback(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    _write(good, _tiny())
    (tmp_path / "bin.json").write_bytes(bytes(range(256)))
    (tmp_path / "empty.json").write_bytes(b"")
    files = [str(good), str(tmp_path / "bin.json"), str(tmp_path / "empty.json"), str(tmp_path),
             str(tmp_path / "missing.json")]
    cmd = [sys.executable, "-m", "gfs_opt.cli", "instance"]
    res = subprocess.run([*cmd, "validate", *files], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert "Traceback" not in res.stdout + res.stderr
    assert res.stdout.splitlines()[0] == f"{good}: ok"
    assert len(res.stdout.splitlines()) == 5
    assert "4 of 5 files invalid" in res.stderr
    res = subprocess.run([*cmd, "show", str(tmp_path / "bin.json")], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().count("\n") == 0 and "not UTF-8" in res.stderr


# ---- schema, docs and model stay in sync -------------------------------------------------------
def test_committed_schema_matches_the_models() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == json_schema_text(), \
        "regenerate with: gfs-opt instance schema > gfs_opt/schemas/instance.schema.json"


def test_schema_models_cover_every_model_field() -> None:
    assert set(ParamsIn.model_fields) == {f.name for f in dataclasses.fields(Params)}
    assert set(PoolIn.model_fields) == {f.name for f in dataclasses.fields(PoolStatus)}
    assert set(JobIn.model_fields) - {"gpus_per_worker"} == {f.name for f in dataclasses.fields(Job)} - {"g"}


@settings(max_examples=15, deadline=None)
@given(rounds(max_nodes=4, max_jobs=6))
def test_saved_files_satisfy_the_json_schema(rnd: Round) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema())
    doc = json.loads(dumps_round(rnd, meta={"k": [1, 2]}))
    assert list(validator.iter_errors(doc)) == []
    doc["nodes"][0]["gpus"] = "8"
    assert list(validator.iter_errors(doc)) != []


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_docs_example_is_valid() -> None:
    text = DOC_FILE.read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/instance-format.md has no ```json example"
    doc = json.loads(blocks[0])
    assert validate_dict(doc) == []
    rnd = round_from_dict(doc)
    assert rnd.running and rnd.pending_hp and rnd.pending_lp
    # every top-level field of the format is documented
    for name in json_schema()["properties"]:
        assert f"`{name}`" in text, name
