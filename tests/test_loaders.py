"""Trace loaders: real files in the data folder, malformed inputs, dispatch, verify CLI, properties."""

from __future__ import annotations

import hashlib
import io
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from standins import needs_ref_toy, write_alibaba_standin

from gfs_opt import cli
from gfs_opt.errors import GfsError, InputError
from gfs_opt.fetch import fetch_hint
from gfs_opt.model import MILLI, gpus_to_milli
from gfs_opt.paths import alibaba_dir, data_dir, ref_toy_dir
from gfs_opt.traces.alibaba import (
    RAW_JOB_COLUMNS,
    load_alibaba,
    load_alibaba_nodes,
    trace_from_frames,
)
from gfs_opt.traces.base import JOB_COLUMNS, NODE_COLUMNS
from gfs_opt.traces.chronus import load_chronus, worker_split
from gfs_opt.traces.load import load_trace
from gfs_opt.traces.openb import load_openb
from gfs_opt.traces.verify import JOB_FILE_SHA256, verify_job_file

DATA = data_dir()
REF_TOY = ref_toy_dir()                              # in the data folder, not shipped
ALIBABA_NODES = alibaba_dir() / "node_info_df.csv"    # shipped as package data
OPENB = DATA / "alibaba-openb-gpu-v2023"
CHRONUS = DATA / "chronus-philly-slo" / "trace_job_Philly_MIX1.csv"
# optional traces ($GFS_DATA_DIR, not shipped): their tests skip with a reason when absent
needs_openb = pytest.mark.skipif(not (OPENB / "openb_pod_list_gpuspec33.csv").is_file(),
                                 reason="openb pod lists " + fetch_hint("alibaba-openb-gpu-v2023"))
needs_chronus = pytest.mark.skipif(not CHRONUS.is_file(),
                                   reason="the Chronus trace " + fetch_hint("chronus-philly-slo"))

NODE_CSV = """gpu_model,gpu_capacity_num,cpu_num,node_name
A10,1,128,n0
A10,1,128,n1
A100-SXM4-80GB,8,128,n2
"""
JOB_CSV = """job_name,organization,gpu_model,cpu_request,gpu_request,worker_num,submit_time,duration,job_type
10,1,A10,4,1,1,0,100,HP
11,1,A10,4,0.5,2,5,100,Spot
12,2,A100-SXM4-80GB,16,8,4,10,3600,HP
13,2,A100-SXM4-80GB,4,0,1,20,60,HP
"""


def write_alibaba(folder: Path, nodes: str = NODE_CSV, jobs: str = JOB_CSV) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "node_info_df.csv").write_text(nodes)
    (folder / "job_info_df.csv").write_text(jobs)
    return folder


def assert_trace_sane(trace) -> None:
    assert list(trace.nodes.columns) == NODE_COLUMNS
    assert list(trace.jobs.columns) == JOB_COLUMNS
    assert trace.jobs["job_id"].is_unique
    assert set(trace.jobs["cls"]) <= {"HP", "LP"}
    assert (trace.jobs["g"] > 0).all() and (trace.jobs["workers"] >= 1).all()
    biggest = trace.nodes.groupby("pool")["gpus"].max()
    need = np.where(trace.jobs["g"] < MILLI, 1, trace.jobs["g"] // MILLI)
    assert (need <= trace.jobs["pool"].map(biggest).to_numpy()).all()
    state = trace.cluster_state()
    assert state.n_gpus == int(trace.nodes["gpus"].sum())
    assert len(trace.iter_jobs()) == len(trace.jobs)


# ---- real files ------------------------------------------------------------------------------
@needs_ref_toy
def test_ref_toy_folder() -> None:
    t0 = time.perf_counter()
    trace = load_alibaba(REF_TOY)
    assert time.perf_counter() - t0 < 5
    assert len(trace.nodes) == 24 and int(trace.nodes["gpus"].sum()) == 16 + 8 * 8
    raw = pd.read_csv(REF_TOY / "job_info_df.csv")
    assert len(raw) == 3602
    # exactly one CPU-only job (job 3601) is dropped
    assert len(trace.jobs) == 3601 and 3601 not in set(trace.jobs["job_id"])
    assert any("dropped 1 CPU-only" in n for n in trace.notes)
    assert (trace.jobs["cls"] == "LP").sum() == (raw["job_type"] == "Spot").sum() == 901
    assert set(trace.jobs["g"]) == {1000, 2000, 4000, 8000}
    assert trace.name == "ref-toy"
    assert_trace_sane(trace)
    via_name = load_trace("ref-toy")
    pd.testing.assert_frame_equal(via_name.jobs, trace.jobs)


def test_real_alibaba_node_file() -> None:
    nodes = load_alibaba_nodes(ALIBABA_NODES)
    targets = json.loads((ALIBABA_NODES.parent / "calibration_targets.json").read_text())["nodes"]
    assert len(nodes) == targets["count"] == 4278
    assert int(nodes["gpus"].sum()) == targets["gpus"] == 10412
    assert nodes.groupby("pool")["gpus"].sum().to_dict() == targets["by_model_gpus"]
    assert int(nodes["gpus"].min()) == 1 and int(nodes["gpus"].max()) == 8


def test_small_job_frame_on_real_nodes() -> None:
    nodes_raw = pd.read_csv(ALIBABA_NODES)
    jobs_raw = pd.DataFrame({
        "job_name": ["a", "b", "c", "d"], "organization": [13, 57, 13, 2],
        "gpu_model": ["A10", "A100-SXM4-80GB", "H800", "GPU-series-1"],
        "cpu_request": [4, 184, 8, 2], "gpu_request": [0.1, 8, 0.0, 1.5],
        "worker_num": [1, 176, 1, 1], "submit_time": [0, 0, 5, 9],
        "duration": [15897599, 342519, 10, 0], "job_type": ["HP", "Spot", "HP", "Spot"],
    })
    trace = trace_from_frames(nodes_raw, jobs_raw)
    jobs = trace.jobs.set_index("name")
    assert list(jobs.index) == ["a", "b", "d"]  # c is CPU-only
    assert list(trace.jobs["job_id"]) == [0, 1, 3]  # names are not ints → running index
    assert jobs.loc["a", "g"] == 100 and jobs.loc["b", "g"] == 8000 and jobs.loc["d", "g"] == 2000
    assert jobs.loc["a", "resident"] and not jobs.loc["b", "resident"]  # Spot is never resident
    assert list(jobs["cls"]) == ["HP", "LP", "LP"] and jobs.loc["a", "org"] == "13"
    assert (jobs["guarantee_h"] == 1.0).all()


@needs_openb
@pytest.mark.parametrize("pods", ["openb_pod_list_default.csv", "openb_pod_list_gpuspec33.csv"])
def test_openb_pod_lists(pods: str) -> None:
    t0 = time.perf_counter()
    trace = load_openb(OPENB / pods)
    assert time.perf_counter() - t0 < 5
    raw = pd.read_csv(OPENB / pods, keep_default_na=False)
    assert len(raw) == 8152
    assert len(trace.jobs) == 7064 and any("1,088 CPU-only" in n for n in trace.notes)
    assert (trace.jobs["cls"] == "LP").sum() == 2948
    assert int(trace.jobs["g"].sum()) == 6_086_800
    assert len(trace.nodes) == 1213 and int(trace.nodes["gpus"].sum()) == 6212
    assert (trace.jobs["org"] == "default").all() and (trace.jobs["workers"] == 1).all()
    assert (trace.jobs["duration"] >= 0).all()
    # gpu_spec is honoured: a constrained pod lands on one of its listed models
    spec = raw.set_index("name")["gpu_spec"].reindex(trace.jobs["name"]).to_numpy()
    for s, pool in zip(spec, trace.jobs["pool"], strict=True):
        if s:
            assert pool in s.split("|")
    assert trace.jobs["pool"].nunique() > 1  # hash assignment spreads unconstrained pods
    assert_trace_sane(trace)


@needs_openb
def test_openb_assignment_is_deterministic_and_first_mode() -> None:
    a = load_openb(OPENB / "openb_pod_list_default.csv")
    b = load_openb(OPENB / "openb_pod_list_gpuspec33.csv")
    again = load_openb(OPENB / "openb_pod_list_default.csv")
    pd.testing.assert_frame_equal(a.jobs, again.jobs)
    spec = pd.read_csv(OPENB / "openb_pod_list_gpuspec33.csv", keep_default_na=False)
    free = set(spec.loc[spec["gpu_spec"] == "", "name"])
    pa, pb = a.jobs.set_index("name")["pool"], b.jobs.set_index("name")["pool"]
    common = sorted(free & set(pa.index))
    assert len(common) > 1000 and (pa[common] == pb[common]).all()
    first = load_openb(OPENB / "openb_pod_list_default.csv", assign="first")
    assert set(first.jobs["pool"]) == {"G2"}  # the largest pool takes every unconstrained pod


@needs_chronus
def test_chronus_trace() -> None:
    t0 = time.perf_counter()
    trace = load_chronus(CHRONUS)
    assert time.perf_counter() - t0 < 5
    raw = pd.read_csv(CHRONUS)
    assert len(raw) == 30940
    assert len(trace.jobs) == 30756 and any("184 CPU-only" in n for n in trace.notes)
    assert (trace.jobs["cls"] == "HP").sum() == 21600
    assert trace.jobs["org"].nunique() == 11
    # splitting keeps the GPU total exact
    assert int((trace.jobs["g"] * trace.jobs["workers"]).sum()) == 42947 * MILLI
    assert int(trace.jobs["g"].max()) == 8000
    assert len(trace.nodes) == math.ceil(1877 / 8) and set(trace.nodes["pool"]) == {"V100"}
    assert_trace_sane(trace)
    small = load_chronus(CHRONUS, nodes=10)
    assert len(small.nodes) == 10 and int(small.nodes["gpus"].sum()) == 80


def test_worker_split() -> None:
    per, workers = worker_split(np.array([0, 1, 3, 8, 12, 16, 20, 32, 11]), 8)
    assert per.tolist() == [0, 1, 3, 8, 6, 8, 5, 8, 1]
    assert workers.tolist() == [0, 1, 1, 1, 2, 2, 4, 4, 11]


def test_load_trace_dispatch(tmp_path: Path) -> None:
    toy = write_alibaba_standin(tmp_path / "toy")
    assert load_trace(toy).name == "toy"
    n_jobs = (toy / "job_info_df.csv").read_text().count("\n") - 1
    assert len(load_trace(toy / "job_info_df.csv").jobs) == n_jobs
    with pytest.raises(InputError, match="no such file"):
        load_trace(tmp_path / "nothing.csv")
    (tmp_path / "other.csv").write_text("a\n1\n")
    with pytest.raises(InputError, match="unrecognised trace file"):
        load_trace(tmp_path / "other.csv")


@needs_ref_toy
def test_load_trace_dispatch_ref_toy() -> None:
    assert load_trace(REF_TOY).name == "ref-toy"
    assert len(load_trace(REF_TOY / "job_info_df.csv").jobs) == 3601


def test_ref_toy_without_data_folder_is_one_line_error(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GFS_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(InputError) as err:
        load_trace("ref-toy")
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / "nowhere" / "ref-toy") in msg
    assert "GFS_DATA_DIR" in msg and "does not ship" in msg
    assert "gfs-opt data fetch ref-toy" in msg


@needs_openb
@needs_chronus
def test_load_trace_dispatch_optional_traces() -> None:
    assert len(load_trace(OPENB / "openb_pod_list_default.csv").jobs) == 7064
    assert len(load_trace(str(CHRONUS)).jobs) == 30756


def test_unknown_source_is_one_line_gfs_error() -> None:
    with pytest.raises(GfsError) as err:
        load_trace("no-such-trace-name-xyz")
    msg = str(err.value)
    assert "\n" not in msg and "no-such-trace-name-xyz" in msg and "openb_pod_list" in msg


# ---- malformed files -----------------------------------------------------------------------
def _jobs_with(row: int, column: str, value: str) -> str:
    """JOB_CSV with one cell replaced (row = CSV row, header = 1)."""
    lines = JOB_CSV.splitlines()
    header = lines[0].split(",")
    cells = lines[row - 1].split(",")
    cells[header.index(column)] = value
    lines[row - 1] = ",".join(cells)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("row", "column", "value", "fragment"), [
    (3, "submit_time", "abc", "non-numeric value 'abc'"),
    (2, "duration", "-5", "negative value -5"),
    (4, "submit_time", "-1", "negative value"),
    (3, "gpu_model", "H100", "unknown GPU model 'H100'"),
    (4, "job_name", "10", "duplicate job_name '10' (first at row 2)"),
    (2, "worker_num", "0", "must be ≥ 1"),
    (3, "worker_num", "1.5", "whole number"),
    (3, "gpu_request", "-1", "negative value"),
    (2, "gpu_request", "2", "largest A10 node has 1"),
    (5, "job_type", "Batch", "unknown job_type 'Batch'"),
    (2, "organization", "", "missing value"),
    (3, "cpu_request", "inf", "non-finite"),
])
def test_malformed_job_file(tmp_path: Path, row: int, column: str, value: str, fragment: str) -> None:
    folder = write_alibaba(tmp_path / "t", jobs=_jobs_with(row, column, value))
    with pytest.raises(InputError) as err:
        load_alibaba(folder)
    msg = str(err.value)
    assert "job_info_df.csv" in msg and f"row {row}," in msg and f"column '{column}'" in msg
    assert fragment in msg
    assert (err.value.row, err.value.column) == (row, column)


def test_missing_column(tmp_path: Path) -> None:
    jobs = "\n".join(",".join(line.split(",")[:-1]) for line in JOB_CSV.splitlines()) + "\n"
    with pytest.raises(InputError) as err:
        load_alibaba(write_alibaba(tmp_path / "t", jobs=jobs))
    assert "job_info_df.csv, row 1, column 'job_type': missing column(s) job_type" in str(err.value)


def test_malformed_node_file_and_structure(tmp_path: Path) -> None:
    bad_nodes = NODE_CSV.replace("A10,1,128,n1", "A10,x,128,n1")
    with pytest.raises(InputError, match=r"node_info_df.csv, row 3, column 'gpu_capacity_num'"):
        load_alibaba(write_alibaba(tmp_path / "a", nodes=bad_nodes))
    dup_nodes = NODE_CSV.replace("n1", "n0")
    with pytest.raises(InputError, match=r"row 3, column 'node_name': duplicate node name"):
        load_alibaba(write_alibaba(tmp_path / "b", nodes=dup_nodes))
    with pytest.raises(InputError, match="not a folder"):
        load_alibaba(tmp_path / "missing")
    (tmp_path / "c").mkdir()
    with pytest.raises(InputError, match=r"c/node_info_df.csv: no such file"):
        load_alibaba(tmp_path / "c")
    empty = write_alibaba(tmp_path / "d", jobs="")
    with pytest.raises(InputError, match="file is empty"):
        load_alibaba(empty)
    ragged = write_alibaba(tmp_path / "e", jobs=JOB_CSV + "14,1,A10\n,1\n1,2,3,4,5,6,7,8,9,10\n")
    with pytest.raises(InputError, match="malformed CSV"):
        load_alibaba(ragged)


def test_cpu_only_job_may_have_any_model(tmp_path: Path) -> None:
    folder = write_alibaba(tmp_path / "t", jobs=_jobs_with(5, "gpu_model", ""))
    trace = load_alibaba(folder)
    assert list(trace.jobs["job_id"]) == [10, 11, 12]
    assert trace.jobs.loc[1, "g"] == 500 and trace.jobs.loc[2, "g"] == 8000


def test_malformed_openb_and_chronus(tmp_path: Path) -> None:
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nx0,1000,1,0,\nx1,64000,1,8,G2\nx2,64000,1,2,T4\n")
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    good = "p0,1000,1,1,500,,LS,Running,0,100,0\np1,1000,1,2,1000,T4,BE,Running,5,50,10\np2,1000,1,0,0,,BE,Running,1,2,1\n"
    pods = tmp_path / "openb_pod_list_t.csv"
    pods.write_text(header + good + "p3,1000,1,1,300,,LS,Pending,7,20,\n")
    trace = load_openb(pods)
    assert len(trace.nodes) == 2 and len(trace.jobs) == 3
    jobs = trace.jobs.set_index("name")
    assert jobs.loc["p1", "pool"] == "T4" and jobs.loc["p1", "g"] == 2000 and jobs.loc["p1", "cls"] == "LP"
    assert jobs.loc["p1", "duration"] == 40 and jobs.loc["p3", "duration"] == 13
    assert jobs.loc["p0", "resident"] and jobs.loc["p0", "g"] == 500
    for line, col, frag in [
        ("p3,1,1,1,300,H100,LS,Running,7,20,7\n", "gpu_spec", "unknown GPU model"),
        ("p3,1,1,4,1000,T4,LS,Running,7,20,7\n", "num_gpu", "no node of T4"),
        ("p3,1,1,1,300,,LS,Running,7,20,5\n", "scheduled_time", "before its creation"),
        ("p3,1,1,1,300,,LS,Running,7,6,7\n", "deletion_time", "before it started"),
        ("p3,1,1,1,0,,LS,Running,7,20,7\n", "gpu_milli", "gpu_milli in 1..1000"),
        ("p0,1,1,1,300,,LS,Running,7,20,7\n", "name", "duplicate pod name"),
    ]:
        pods.write_text(header + good + line)
        with pytest.raises(InputError) as err:
            load_openb(pods)
        assert (err.value.row, err.value.column) == (5, col) and frag in str(err.value)

    head = "job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,expect_time_list,expect_value_list,best_effort,job_type\n"
    ok = "0,u1,1,5,1,m,60,1,1,1,0,strict\n1,u2,16,7,1,m,60,1,1,1,1,best\n"
    chronus = tmp_path / "trace_job_t.csv"
    for line, col, frag in [
        ("2,u1,1,5,1,m,60,1,1,1,0,urgent\n", "job_type", "unknown job_type"),
        ("2,u1,1,5,1,m,60,1,1,1,1,strict\n", "best_effort", "contradicts"),
        ("1,u1,1,5,1,m,60,1,1,1,0,strict\n", "job_id", "duplicate job_id"),
        ("2,u1,1,5,1,m,-60,1,1,1,0,strict\n", "duration", "negative"),
    ]:
        chronus.write_text(head + ok + line)
        with pytest.raises(InputError) as err:
            load_chronus(chronus)
        assert "trace_job_t.csv" in str(err.value) and frag in str(err.value)
        assert (err.value.row, err.value.column) == (4, col)
    chronus.write_text(head + ok)
    trace = load_chronus(chronus)
    assert trace.jobs["workers"].tolist() == [1, 2] and len(trace.nodes) == 3  # peak 17 GPUs

    # soft-SLO jobs (other Chronus mixes) load: HP by default, LP on request, and a note says so
    soft = "2,u3,2,9,1,m,60,1,1,1,0,soft\n"
    chronus.write_text(head + ok + soft)
    trace = load_chronus(chronus)
    assert trace.jobs["cls"].tolist() == ["HP", "LP", "HP"]
    assert any("1 soft-SLO job(s) run as HP" in n for n in trace.notes)
    assert load_chronus(chronus, soft_class="LP").jobs["cls"].tolist() == ["HP", "LP", "LP"]
    with pytest.raises(ValueError, match="soft_class"):
        load_chronus(chronus, soft_class="spot")
    chronus.write_text(head + ok + soft.replace(",0,soft", ",1,soft"))
    with pytest.raises(InputError, match="contradicts"):
        load_chronus(chronus)


# ---- verify CLI -------------------------------------------------------------------------------
@pytest.fixture
def trace_cli(monkeypatch: pytest.MonkeyPatch):
    # only the trace command group: this test must not depend on other groups being present
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["gfs_opt.commands.trace_cmd"])
    return cli.main


def test_verify_cli_mismatch_and_missing(tmp_path: Path, trace_cli, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "job_info_df.csv"
    f.write_bytes(b"job_name\n1\n")
    assert trace_cli(["trace", "verify", str(f)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("MISMATCH") and hashlib.sha256(b"job_name\n1\n").hexdigest() in out

    missing = tmp_path / "absent.csv"
    assert trace_cli(["trace", "verify", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err and "no such file" in err

    monkeypatch.setattr("gfs_opt.traces.verify.JOB_FILE_SHA256", hashlib.sha256(b"job_name\n1\n").hexdigest())
    assert trace_cli(["trace", "verify", str(f)]) == 0
    assert capsys.readouterr().out.startswith("ok")


def test_verify_job_file_digest(tmp_path: Path) -> None:
    f = tmp_path / "x"
    payload = bytes(range(256)) * 5000
    f.write_bytes(payload)
    assert verify_job_file(f) == (False, hashlib.sha256(payload).hexdigest())
    assert verify_job_file(f, hashlib.sha256(payload).hexdigest().upper())[0]
    assert len(JOB_FILE_SHA256) == 64
    with pytest.raises(InputError, match="not a regular file"):
        verify_job_file(tmp_path)


# ---- properties -------------------------------------------------------------------------------
REQUESTS = [0.0, 0.01, 0.1, 0.25, 0.5, 0.999, 1.0, 1.5, 2.0, 4.0, 8.0]

job_rows = st.lists(
    st.tuples(
        st.integers(0, 5),                                   # organization
        st.sampled_from(["A10", "A100-SXM4-80GB"]),
        st.integers(0, 64),                                  # cpu_request
        st.sampled_from(REQUESTS),
        st.integers(1, 300),                                 # worker_num
        st.integers(0, 16_000_000),                          # submit_time
        st.integers(0, 6_000_000),                           # duration
        st.sampled_from(["HP", "Spot"]),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=job_rows, int_names=st.booleans())
def test_random_job_frames_round_trip(rows, int_names: bool) -> None:
    # A10 nodes hold one GPU, so whole requests above 1 only go to the A100 pool
    rows = [r if r[1] != "A10" or r[3] <= 1 else (r[0], "A100-SXM4-80GB", *r[2:]) for r in rows]
    names = [str(1000 + i) if int_names else f"job-{i}" for i in range(len(rows))]
    jobs_raw = pd.DataFrame([(n, *r) for n, r in zip(names, rows, strict=True)], columns=RAW_JOB_COLUMNS)
    nodes_raw = pd.read_csv(io.StringIO(NODE_CSV))
    trace = trace_from_frames(nodes_raw, jobs_raw)
    dropped = sum(r[3] == 0 for r in rows)
    assert len(trace.jobs) + dropped == len(rows)
    noted = sum(int(n.split()[1].replace(",", "")) for n in trace.notes if n.startswith("dropped"))
    assert noted == dropped
    kept = [r for r in rows if r[3] > 0]
    assert trace.jobs["g"].tolist() == [gpus_to_milli(r[3]) for r in kept]
    assert trace.jobs["cls"].tolist() == ["HP" if r[7] == "HP" else "LP" for r in kept]
    assert trace.jobs["resident"].tolist() == [r[7] == "HP" and r[5] == 0 for r in kept]
    if int_names:
        assert trace.jobs["job_id"].tolist() == [1000 + i for i, r in enumerate(rows) if r[3] > 0]
    # the same frame written as CSV loads to the same trace
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        nodes_raw.to_csv(folder / "node_info_df.csv", index=False)
        jobs_raw.to_csv(folder / "job_info_df.csv", index=False)
        if not kept:   # a file with no GPU job is an input error that names the file
            with pytest.raises(InputError, match=r"job_info_df\.csv: (no jobs|every job is CPU-only)"):
                load_alibaba(folder, name="alibaba")
            return
        again = load_alibaba(folder, name="alibaba")
    pd.testing.assert_frame_equal(again.jobs, trace.jobs, check_dtype=False)
    assert again.notes == [n.replace("<memory>", str(folder / "job_info_df.csv")) for n in trace.notes]


@pytest.mark.slow
def test_full_size_job_file_loads_fast(tmp_path: Path) -> None:
    """466,867 rows / ~22 MB like the real job file: the loader must stay well under 5 s."""
    rng = np.random.default_rng(0)
    n = 466_867
    model = rng.choice(["A10", "A100-SXM4-80GB"], n)
    frame = pd.DataFrame({
        "job_name": rng.permutation(n), "organization": rng.integers(0, 84, n), "gpu_model": model,
        "cpu_request": rng.integers(1, 100, n),
        "gpu_request": np.where(model == "A10", rng.choice([0.1, 0.5, 1.0], n), rng.choice([1.0, 2.0, 8.0], n)),
        "worker_num": rng.integers(1, 4, n), "submit_time": np.sort(rng.integers(0, 15_902_470, n)),
        "duration": rng.integers(0, 5_000_000, n), "job_type": rng.choice(["HP", "Spot"], n, p=[0.89, 0.11]),
    })
    folder = write_alibaba(tmp_path / "big")
    frame.to_csv(folder / "job_info_df.csv", index=False)
    t0 = time.perf_counter()
    trace = load_alibaba(folder)
    assert time.perf_counter() - t0 < 5
    assert len(trace.jobs) == n


def test_input_errors_cross_process_boundaries(tmp_path: Path) -> None:
    # an InputError raised in a worker (a sweep, a compare with workers) must reach the parent
    # as itself — before, unpickling it failed and the pool broke with a traceback
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    from gfs_opt.experiments.runner import RunSpec, prepare_trace

    err = InputError(tmp_path / "jobs.csv", "bad value", row=3, column="gpus")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is InputError and str(back) == str(err)
    assert (back.path, back.row, back.column) == (err.path, 3, "gpus")
    spec = RunSpec(trace=str(tmp_path / "missing.csv"), policy="yarn-cs")
    with ProcessPoolExecutor(1) as pool, pytest.raises(InputError, match="no such file"):
        pool.submit(prepare_trace, spec).result()
