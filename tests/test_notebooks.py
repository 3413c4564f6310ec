"""The notebooks of `notebooks/`: each executes without error, and is committed with outputs that a
fresh run reproduces (the docs site renders them as committed).

Execution needs the `notebooks` extra (`nbclient`, `nbformat`, `ipykernel`); skips cleanly without
it. Each notebook runs in a fresh `python3` kernel (the interpreter running pytest: jupyter_client
maps the `python3` kernelspec to `sys.executable`) with the notebooks folder as its working
directory. A fresh run's outputs are compared with the committed ones by structure (which code
cells show figures, how many, and which show text), not byte for byte: numbers and timings vary.
Refresh the committed outputs with `python docs/execute_notebooks.py [name ...]`.
"""

import copy
import importlib.util
import time
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
# Limit per notebook [s]: each notebook is sized to run in < 60 s on a 2-core CPU; the margin
# covers kernel start-up and compilation on a loaded CI machine.
NOTEBOOK_TIMEOUT_S = 300
MISSING = [m for m in ("nbclient", "nbformat", "ipykernel") if importlib.util.find_spec(m) is None]
REFRESH = "run `python docs/execute_notebooks.py {}` and commit the notebook"

pytestmark = [
    pytest.mark.notebooks,
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"notebook execution needs {MISSING} (pip install 'jaxsim-spacecraft[notebooks]')",
    ),
    # Kernel start-up chatter of jupyter_client/ipykernel is not a test failure.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]


def _tool():
    """`docs/execute_notebooks.py` (refreshes the committed outputs) as a module."""
    spec = importlib.util.spec_from_file_location(
        "execute_notebooks", ROOT / "docs" / "execute_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def test_notebooks_found():
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_committed_with_outputs(path):
    """The committed notebook shows results (at least one figure, every code cell run), stays under
    the size limit, and carries no execution metadata, stderr output or full-colour PNG."""
    pytest.importorskip("PIL")
    import nbformat

    tool = _tool()
    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code, f"{path.name} has no code cell"
    not_run = [i for i, cell in enumerate(code) if cell.get("execution_count") is None]
    assert not not_run, f"{path.name}: code cells {not_run} have no outputs; " + REFRESH.format(
        path.stem
    )
    assert sum(images for images, _ in tool.output_signature(nb)) >= 1, (
        f"{path.name} shows no figure; " + REFRESH.format(path.stem)
    )
    size = path.stat().st_size
    assert size <= tool.MAX_NOTEBOOK_BYTES, f"{path.name}: {size} bytes"
    assert tool.normalize(copy.deepcopy(nb)) == nb, (
        f"{path.name} is not normalized; " + REFRESH.format(path.stem)
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
    """A fresh run succeeds and reproduces the committed outputs' structure (figures and text per
    code cell): the committed outputs are not stale."""
    import nbformat
    from nbclient.exceptions import CellExecutionError

    tool = _tool()
    committed = nbformat.read(path, as_version=4)
    nb = copy.deepcopy(committed)
    # A notebook that needs an optional extra lists its modules in metadata["jaxsim"]["requires"].
    needs = [m for m in nb.metadata.get("jaxsim", {}).get("requires", []) if not _importable(m)]
    if needs:
        pytest.skip(
            f"{path.name} needs {needs} "
            "(an optional extra, e.g. pip install 'jaxsim-spacecraft[mujoco]')"
        )
    start = time.perf_counter()
    try:
        tool.execute(nb)
    except CellExecutionError as err:
        pytest.fail(f"{path.name}: a cell failed:\n{err}", pytrace=False)
    elapsed = time.perf_counter() - start
    print(f"{path.name}: executed in {elapsed:.1f} s")
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors, errors
    assert elapsed <= NOTEBOOK_TIMEOUT_S, f"{path.name} took {elapsed:.0f} s"
    fresh, stale = tool.output_signature(nb), tool.output_signature(committed)
    changed = [
        (i, {"committed": s, "fresh": f}) for i, (s, f) in enumerate(zip(stale, fresh)) if s != f
    ]
    assert len(fresh) == len(stale) and not changed, (
        f"{path.name}: committed outputs are stale (code cell: (images, text)): {changed}; "
        + REFRESH.format(path.stem)
    )
