"""Every notebook is committed without outputs and holds the same cells as its paired percent
script (notebooks/*.py, jupytext); every notebook runs top to bottom with no error and no warning.

Running them is not part of the default suite (minutes of CPU): `.ci/run` runs each in a step of
its own, `python -m pytest -m notebooks -k NAME tests/test_notebooks.py`, with the notebooks' own
settings; `GFS_NOTEBOOK_QUICK=1` selects their small settings (about a minute in all)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from gfs_opt.paths import REPO_ROOT

NB_DIR = REPO_ROOT / "notebooks"
NOTEBOOKS = sorted(p.name for p in NB_DIR.glob("*.ipynb"))
BUDGET_S = 90.0   # per notebook in quick mode (target ≈ 60 s; slack for a shared machine)


def test_the_five_notebooks_exist() -> None:
    assert NOTEBOOKS == ["01_quickstart.ipynb", "02_forecasting.ipynb", "03_spot_quota.ipynb",
                         "04_preemption_exact_vs_greedy.ipynb", "05_reproduce_paper.ipynb"]


def _cells(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_and_its_script_hold_the_same_cells_and_no_outputs(name: str) -> None:
    import jupytext

    nb = nbformat.read(NB_DIR / name, as_version=4)
    script = jupytext.read(NB_DIR / name.replace(".ipynb", ".py"))
    assert _cells(nb) == _cells(script), (
        f"{name} and its .py differ: edit one, then `jupytext --sync notebooks/{name}`")
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{name} has outputs: clear them (Jupyter: Clear All Outputs) before committing")


QUICK = os.environ.get("GFS_NOTEBOOK_QUICK") == "1"
BUDGET_S = 120.0 if QUICK else 1200.0      # per notebook (a shared 2-core machine)


@pytest.mark.notebooks
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from jupyter_client.manager import KernelManager

    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NB_DIR / name, as_version=4)
    # a kernel on local sockets (TCP without keys makes the kernel warn), shut down by us (a
    # kernel manager handed to the client is not the client's to stop)
    km = KernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "kernel"))
    client = NotebookClient(nb, km=km, timeout=BUDGET_S, kernel_name="python3",
                            resources={"metadata": {"path": str(NB_DIR)}})
    log = tmp_path / "kernel.log"          # what the kernel process itself prints
    t0 = time.perf_counter()
    with log.open("w") as fh:
        try:
            client.execute(env={**os.environ}, stdout=fh, stderr=fh)
        finally:
            if km.has_kernel:
                km.shutdown_kernel(now=False)
    elapsed = time.perf_counter() - t0
    assert "warning" not in log.read_text().lower(), log.read_text()[-2000:]
    print(f"{name}: {elapsed:.0f} s ({'quick' if QUICK else 'full'} settings)")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    # no warning of any kind (a widget-less tqdm, a deprecation, a solver's complaint)
    stderr = "".join(o.get("text", "") for o in outputs
                     if o.get("output_type") == "stream" and o.get("name") == "stderr")
    assert "warning" not in stderr.lower(), stderr[-2000:]
    # every notebook shows something: a table or a figure in its last code cells
    shown = [o for o in outputs if o.get("output_type") in ("execute_result", "display_data")]
    assert shown, f"{name} displayed nothing"
    assert elapsed < BUDGET_S, f"{name} took {elapsed:.0f} s"
