"""Every notebook in notebooks/ runs top to bottom.

Notebooks are stored as jupytext percent-format ``.py`` files (readable diffs, no outputs in
git). Each is converted in memory with jupytext and executed with nbclient in a kernel of the
interpreter running the tests (``kernel_name="python3"`` resolves to ipykernel's native
spec, whose ``python`` jupyter_client replaces by ``sys.executable``). A notebook's own
``assert`` statements are its checks: a failing cell fails the test with the cell's
traceback. Each cell has a time limit, and each notebook a budget (notebooks/README.md).
"""

import sys
import time
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
CELL_TIMEOUT_S = 120
NOTEBOOK_BUDGET_S = 90  # CI runs on 2 cores; notebooks are written to take well under 30 s


def _notebooks():
    return sorted(p for p in NOTEBOOK_DIR.glob("*.py") if "format_name: percent" in p.read_text()[:2000])


NOTEBOOKS = _notebooks()


def test_notebooks_are_stored_as_percent_scripts():
    # paired .ipynb files (notebooks/jupytext.toml) are git-ignored; only the .py are the notebooks
    assert NOTEBOOKS, "no jupytext percent notebooks found in notebooks/"
    for path in NOTEBOOK_DIR.glob("*.py"):
        assert path in NOTEBOOKS, f"{path.name} lacks a jupytext percent header"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path):
    nb = jupytext.read(path)
    # a last cell that reports the kernel's interpreter: it must be the one running the tests
    nb.cells.append(nbformat.v4.new_code_cell("import sys\nprint(sys.executable)"))
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        extra_arguments=["--log-level=ERROR"],
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, with the traceback, if a cell fails
    elapsed = time.perf_counter() - start
    assert nb.cells[-1].outputs[0]["text"].strip() == sys.executable
    assert elapsed < NOTEBOOK_BUDGET_S, f"{path.name} took {elapsed:.0f} s (budget {NOTEBOOK_BUDGET_S} s)"
