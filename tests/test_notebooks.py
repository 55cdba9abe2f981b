"""Every notebook runs top to bottom (small settings: GFS_NOTEBOOK_QUICK=1), is committed without
outputs, and holds the same cells as its paired percent script (notebooks/*.py, jupytext)."""

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


# the two slowest notebooks (≈ 25 s of CPU each even in quick mode) run with -m slow
SLOW_NOTEBOOKS = {"03_spot_quota.ipynb", "05_reproduce_paper.ipynb"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW_NOTEBOOKS
                                               else []) for n in NOTEBOOKS])
def test_notebook_runs(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GFS_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    nb = nbformat.read(NB_DIR / name, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NB_DIR)}})
    t0 = time.perf_counter()
    client.execute(env={**os.environ})
    elapsed = time.perf_counter() - t0
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    # every notebook shows something: a table or a figure in its last code cells
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             if o.get("output_type") in ("execute_result", "display_data")]
    assert shown, f"{name} displayed nothing"
    assert elapsed < BUDGET_S, f"{name} took {elapsed:.0f} s in quick mode"
