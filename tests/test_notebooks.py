"""Execute every notebook in `notebooks/` (fails on any cell error).

Needs the `notebooks` extra (`nbclient`, `nbformat`, `ipykernel`); skips cleanly without it. Each
notebook runs in a fresh `python3` kernel (the interpreter running pytest: jupyter_client maps the
`python3` kernelspec to `sys.executable`) with the notebooks folder as its working directory.
With `JAXSIM_EXECUTED_NOTEBOOKS=<folder>` set, the executed copies are saved there for the docs site.
"""

import importlib.util
import os
import time
from pathlib import Path

import pytest


NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
# Limit per notebook [s] (also the per-cell timeout): each notebook is sized to run in < 60 s on a
# 2-core CPU; the margin covers kernel start-up and compilation on a loaded CI machine.
NOTEBOOK_TIMEOUT_S = 300
# When set, each executed notebook (with its outputs) is written to this folder, where the docs
# build (`mkdocs build`, docs/hooks.py) renders it from.
EXECUTED_ENV = "JAXSIM_EXECUTED_NOTEBOOKS"
MISSING = [m for m in ("nbclient", "nbformat", "ipykernel") if importlib.util.find_spec(m) is None]

pytestmark = [
    pytest.mark.notebooks,
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"notebook execution needs {MISSING} (pip install 'jaxsim[notebooks]')",
    ),
    # Kernel start-up chatter of jupyter_client/ipykernel is not a test failure.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def test_notebooks_found():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    # A notebook that needs an optional extra lists its modules in metadata["jaxsim"]["requires"].
    needs = [m for m in nb.metadata.get("jaxsim", {}).get("requires", []) if not _importable(m)]
    if needs:
        pytest.skip(
            f"{path.name} needs {needs} (an optional extra, e.g. pip install 'jaxsim[mujoco]')"
        )
    client = NotebookClient(
        nb,
        timeout=NOTEBOOK_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
        allow_errors=False,
    )
    start = time.perf_counter()
    try:
        client.execute()
    except CellExecutionError as err:
        pytest.fail(f"{path.name}: a cell failed:\n{err}", pytrace=False)
    elapsed = time.perf_counter() - start
    print(f"{path.name}: executed in {elapsed:.1f} s")
    executed_dir = os.environ.get(EXECUTED_ENV)
    if executed_dir:  # the executed copy, with its outputs, for the docs site (docs/hooks.py)
        Path(executed_dir).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, Path(executed_dir) / path.name)
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors, errors
    assert elapsed <= NOTEBOOK_TIMEOUT_S, f"{path.name} took {elapsed:.0f} s"
