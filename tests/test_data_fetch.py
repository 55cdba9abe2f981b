"""`gfs-opt data fetch` against a local HTTP server on 127.0.0.1 (no internet needed).

The server serves a stand-in job file (`standins.alibaba_standin_jobs`: the Alibaba v2026 schema,
pools that the shipped node file has) with HTTP Range support, and can be told to break a response off half-way
or to ignore Range requests.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from standins import alibaba_standin_jobs
from test_fuzz_cli import run_cli

from gfs_opt.paths import alibaba_dir

PAYLOAD = alibaba_standin_jobs(2_800, 1_200).encode()   # > 2 download chunks
GOOD = hashlib.sha256(PAYLOAD).hexdigest()


class Server:
    def __init__(self) -> None:
        self.cut_after: int | None = None      # break the next response off after this many bytes
        self.ignore_range = False
        self.status = 200
        self.ranges: list[str | None] = []


@contextlib.contextmanager
def serve() -> Iterator[tuple[Server, str]]:
    state = Server()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            header = self.headers.get("Range")
            state.ranges.append(header)
            if state.status != 200:
                self.send_error(state.status)
                return
            start = 0
            if header and not state.ignore_range:
                start = int(header.removeprefix("bytes=").split("-")[0])
                if start >= len(PAYLOAD):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(PAYLOAD)}")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}")
            else:
                self.send_response(200)
            body = PAYLOAD[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if state.cut_after is not None:
                body, state.cut_after = body[:state.cut_after], None
                self.wfile.write(body)
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.timeout = 5
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{httpd.server_address[1]}/job_info_df.csv"
    finally:
        httpd.shutdown()
        httpd.server_close()


def fetch_cli(dest: Path, url: str, sha: str = GOOD) -> tuple[int, str, str]:
    return run_cli("data", "fetch", "alibaba-v2026", "--dest", str(dest), "--url", url,
                   "--sha256", sha, "--no-progress")


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gfs-opt: error: "), err
    return lines[0]


def test_good_hash_writes_a_usable_trace_folder(tmp_path: Path) -> None:
    dest = tmp_path / "alibaba"
    with serve() as (_state, url):
        code, out, err = fetch_cli(dest, url)
    assert code == 0, err
    assert (dest / "job_info_df.csv").read_bytes() == PAYLOAD
    assert (dest / "node_info_df.csv").read_bytes() == (alibaba_dir() / "node_info_df.csv").read_bytes()
    assert (dest / "job_info_df.csv").stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in dest.iterdir()) == ["job_info_df.csv", "node_info_df.csv"]
    assert f"--trace {dest}" in out
    from gfs_opt.traces.load import load_trace

    trace = load_trace(dest)
    assert len(trace.nodes) == 4278 and len(trace.jobs) == PAYLOAD.count(b"\n") - 1
    # run again: verified in place, nothing downloaded
    with serve() as (state, url):
        code, out, err = fetch_cli(dest, url)
    assert code == 0 and "already present" in out and state.ranges == []


def test_wrong_hash_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "alibaba"
    with serve() as (_state, url):
        code, _out, err = fetch_cli(dest, url, sha="0" * 64)
    line = one_line_error(code, err)
    assert "sha256 mismatch" in line and "0" * 64 in line and GOOD in line
    assert list(dest.iterdir()) == []


def test_interrupted_download_resumes_with_range(tmp_path: Path) -> None:
    dest = tmp_path / "alibaba"
    with serve() as (state, url):
        state.cut_after = 50_000
        code, _out, err = fetch_cli(dest, url)
        line = one_line_error(code, err)
        assert "broke off" in line and "resume" in line
        part = dest / ".job_info_df.csv.part"
        assert part.stat().st_size == 50_000 and not (dest / "job_info_df.csv").exists()
        code, out, err = fetch_cli(dest, url)
        assert code == 0, err
        assert state.ranges[-1] == "bytes=50000-"
    assert "resumed after 50,000 bytes" in out
    assert (dest / "job_info_df.csv").read_bytes() == PAYLOAD and not part.exists()


def test_server_ignoring_range_restarts_cleanly(tmp_path: Path) -> None:
    dest = tmp_path / "alibaba"
    dest.mkdir()
    (dest / ".job_info_df.csv.part").write_bytes(b"garbage that is not the file's start")
    with serve() as (state, url):
        state.ignore_range = True
        code, _out, err = fetch_cli(dest, url)
    assert code == 0, err
    assert (dest / "job_info_df.csv").read_bytes() == PAYLOAD


def test_corrupt_part_file_fails_the_hash_and_is_removed(tmp_path: Path) -> None:
    dest = tmp_path / "alibaba"
    dest.mkdir()
    (dest / ".job_info_df.csv.part").write_bytes(b"X" * 1000)   # wrong bytes, resumed after
    with serve() as (_state, url):
        code, _out, err = fetch_cli(dest, url)
        assert "sha256 mismatch" in one_line_error(code, err)
        assert list(dest.iterdir()) == []
        code, _out, err = fetch_cli(dest, url)          # and the next try starts clean
    assert code == 0, err


@pytest.mark.parametrize("problem", ["404", "refused", "bad-url", "bad-sha", "dest-is-file",
                                     "existing-other-file", "unknown-dataset"])
def test_fetch_errors_are_one_line(tmp_path: Path, problem: str) -> None:
    dest = tmp_path / "alibaba"
    with serve() as (state, url):
        sha = GOOD
        if problem == "404":
            state.status = 404
        elif problem == "refused":
            url = "http://127.0.0.1:9/job_info_df.csv"
        elif problem == "bad-url":
            url = "ftp://127.0.0.1/x.csv"
        elif problem == "bad-sha":
            sha = "xyz"
        elif problem == "dest-is-file":
            dest.write_text("x")
        elif problem == "existing-other-file":
            dest.mkdir()
            (dest / "job_info_df.csv").write_text("mine")
        if problem == "unknown-dataset":
            code, _out, err = run_cli("data", "fetch", "nope", "--dest", str(dest))
        else:
            code, _out, err = fetch_cli(dest, url, sha)
    assert "Traceback" not in err
    if problem == "unknown-dataset":     # argparse's own choice check
        assert code == 2 and "alibaba-v2026" in err
        return
    line = one_line_error(code, err)
    flag = {"bad-url": "--url", "bad-sha": "--sha256", "dest-is-file": "--dest"}.get(problem)
    assert flag is None or flag in line
    if problem == "existing-other-file":
        assert (dest / "job_info_df.csv").read_text() == "mine" and "expected" in line
    elif problem != "dest-is-file":
        assert not dest.exists() or not any(p.name.startswith(".job") for p in dest.iterdir())


def test_ctrl_c_keeps_the_part_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gfs_opt.fetch as fetch_mod

    real_open = fetch_mod._open

    class Stop:
        def __init__(self, resp: object) -> None:
            self.resp, self.calls = resp, 0

        def __getattr__(self, name: str) -> object:
            return getattr(self.resp, name)

        def __enter__(self) -> Stop:
            return self

        def __exit__(self, *exc: object) -> None:
            self.resp.close()  # type: ignore[attr-defined]

        def read(self, n: int) -> bytes:
            self.calls += 1
            if self.calls > 1:
                raise KeyboardInterrupt
            return self.resp.read(n)  # type: ignore[attr-defined]

    monkeypatch.setattr(fetch_mod, "_open", lambda url, offset: Stop(real_open(url, offset)))
    dest = tmp_path / "alibaba"
    with serve() as (_state, url):
        code, _out, err = fetch_cli(dest, url)
    assert code == 130 and "interrupted" in err and "resume" in err and "Traceback" not in err
    assert (dest / ".job_info_df.csv.part").stat().st_size == fetch_mod.CHUNK


# ---- the catalogue: every optional trace, several files each, file:// mirrors, git history ----

def _fake_dataset(monkeypatch: pytest.MonkeyPatch, files: dict[str, bytes]) -> None:
    import gfs_opt.fetch as fetch_mod

    remotes = tuple(fetch_mod.Remote(name, f"https://example.invalid/{name}",
                                     hashlib.sha256(body).hexdigest(), len(body))
                    for name, body in files.items())
    monkeypatch.setitem(fetch_mod.DATASETS, "fake", fetch_mod.Dataset(
        "fake", remotes, source="here", licence="none", about="a test dataset"))


def test_a_dataset_of_several_files_from_a_file_mirror(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"a.csv": b"x,y\n1,2\n", "b b.json": b'{"k": 1}\n'}
    _fake_dataset(monkeypatch, files)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, body in files.items():
        (mirror / name).write_bytes(body)
    monkeypatch.setenv("GFS_DATA_DIR", str(tmp_path / "data"))
    code, out, err = run_cli("data", "fetch", "fake", "--url", mirror.as_uri() + "/",
                             "--no-progress")
    assert code == 0, err
    dest = tmp_path / "data" / "fake"                # the default: the data folder
    for name, body in files.items():
        assert (dest / name).read_bytes() == body and f"wrote {dest / name}" in out
    assert f"--trace {dest}" in out
    (mirror / "a.csv").write_bytes(b"tampered\n")       # a present file is verified, not fetched
    code, out, err = run_cli("data", "fetch", "fake", "--url", mirror.as_uri() + "/")
    assert code == 0 and out.count("already present") == 2
    code, _out, err = run_cli("data", "fetch", "fake", "--sha256", GOOD)
    assert "--sha256" in one_line_error(code, err)


def test_a_tampered_mirror_file_fails_its_pinned_hash(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dataset(monkeypatch, {"a.csv": b"x,y\n1,2\n"})
    (tmp_path / "a.csv").write_bytes(b"x,y\n1,3\n")
    code, _out, err = run_cli("data", "fetch", "fake", "--dest", str(tmp_path / "out"), "--url",
                              tmp_path.as_uri() + "/")
    assert "sha256 mismatch" in one_line_error(code, err)
    assert list((tmp_path / "out").iterdir()) == []


def _catalogue_in_data_folder() -> list[str]:
    from gfs_opt.fetch import DATASETS, default_dest

    return [n for n, ds in DATASETS.items()
            if all((default_dest(n) / f.file_name).is_file() for f in ds.files)]


def test_the_catalogue_pins_what_the_data_folder_holds(tmp_path: Path) -> None:
    """Each dataset of the data folder, fetched from it as a file:// mirror, passes its pinned
    sizes and hashes: the catalogue describes the files the tests and benchmarks read."""
    from gfs_opt.fetch import DATASETS, default_dest, fetch, fetch_hint

    have = _catalogue_in_data_folder()
    if not have:
        pytest.skip("no dataset in the data folder: " + fetch_hint("chronus-philly-slo"))
    for name in have:
        src = default_dest(name)
        res = fetch(name, tmp_path / name, url=src.as_uri() + "/", progress=False)
        for remote, got in zip(DATASETS[name].files, res.files, strict=True):
            assert got.path.stat().st_size == remote.size
            assert got.path.read_bytes() == (src / remote.file_name).read_bytes()


def test_every_optional_trace_the_tests_read_is_in_the_catalogue() -> None:
    from gfs_opt.fetch import DATASETS

    assert {"ref-toy", "chronus-philly-slo", "alibaba-openb-gpu-v2023", "philly-2017",
            "alibaba-v2026"} <= set(DATASETS)
    names = {f.file_name for ds in DATASETS.values() for f in ds.files}
    assert {"trace_job_Philly_MIX1.csv", "openb_pod_list_gpuspec33.csv",
            "openb_pod_list_default.csv", "job_info_df.csv", "node_info_df.csv"} <= names
    for ds in DATASETS.values():
        assert ds.source and ds.licence and ds.about
        for f in ds.files:
            assert len(f.sha256) == 64 and f.size > 0
            assert f.url is not None or ds.git is not None, (ds.name, f.file_name)


def test_ref_toy_comes_from_the_repository_history(tmp_path: Path) -> None:
    import subprocess

    from gfs_opt.fetch import REF_TOY_COMMIT, fetch
    from gfs_opt.paths import REPO_ROOT
    from gfs_opt.traces.load import load_trace

    known = subprocess.run(["git", "-C", str(REPO_ROOT), "cat-file", "-e", REF_TOY_COMMIT],
                           capture_output=True, check=False)
    if known.returncode != 0:
        pytest.skip("not a git clone with its history (ref-toy is read from it)")
    res = fetch("ref-toy", tmp_path / "ref-toy", progress=False)
    assert [f.path.name for f in res.files] == ["job_info_df.csv", "node_info_df.csv"]
    trace = load_trace(tmp_path / "ref-toy")
    assert len(trace.jobs) == 3601 and len(trace.nodes) == 24


def test_data_list_names_every_dataset_and_the_data_folder(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from gfs_opt.fetch import DATASETS

    monkeypatch.setenv("GFS_DATA_DIR", str(tmp_path))
    code, out, err = run_cli("data", "list")
    assert code == 0, err
    assert f"data folder: {tmp_path}" in out
    for ds in DATASETS.values():
        assert f"{ds.name}  (" in out and f"not in {tmp_path / ds.name}" in out
        assert all(f.sha256 in out for f in ds.files)
