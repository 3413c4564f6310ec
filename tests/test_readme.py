"""The README's Python code runs as written: every ```python block, top to bottom, in one namespace.

Marker convention: a block whose first line is the comment `# readme: skip` is not executed (use it
for code that needs hardware or packages the test run does not have; no block carries it today).
Each block should also run on its own when pasted into a fresh notebook (imports and inputs
repeated where used): `test_readme_blocks_self_contained` checks that no block reads a name it does
not define or import itself (a static check: executing every block twice would double the run time).
"""

import ast
import builtins
import re
from pathlib import Path

import pytest


README = Path(__file__).resolve().parents[1] / "README.md"
SKIP_MARKER = "# readme: skip"
_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python fenced blocks of `text`, in order."""
    return [m.group(1) for m in _BLOCK.finditer(text)]


def runnable_blocks() -> list[tuple[int, str]]:
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    return [(i, b) for i, b in enumerate(blocks) if not b.lstrip().startswith(SKIP_MARKER)]


def free_names(code: str) -> set[str]:
    """Names that `code` reads but never binds (assignment, import, def, class, argument, except,
    comprehension target) and that are not builtins: what a fresh namespace would lack."""
    bound, loaded = set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound - set(dir(builtins))


def _run(code: str, namespace: dict, label: str) -> None:
    exec(compile(code, label, "exec"), namespace)


@pytest.fixture(autouse=True)
def _agg_backend():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_block_extraction():
    text = "a\n```python\nx = 1\n```\n```bash\nls\n```\n```python\n# readme: skip\ny\n```\n"
    assert python_blocks(text) == ["x = 1\n", "# readme: skip\ny\n"]


def test_free_names():
    assert free_names("y = np.eye(3)\nprint(x, y)") == {"np", "x"}
    code = (
        "import numpy as np\nfrom a import b as c\ndef f(u):\n    return [v for v in u]\nc(f(np))"
    )
    assert free_names(code) == set()


def test_readme_has_python_blocks():
    assert len(runnable_blocks()) >= 3


def test_readme_blocks_run_in_order():
    namespace = {"__name__": "__readme__"}
    for i, code in runnable_blocks():
        _run(code, namespace, f"README.md python block {i}")


def test_readme_blocks_self_contained():
    """Each block on its own (as pasted into a fresh notebook) reads no name of an earlier block."""
    missing = {i: sorted(free_names(code)) for i, code in runnable_blocks()}
    assert not {i: names for i, names in missing.items() if names}, (
        f"README python blocks (0-based) read names they do not define or import: {missing}"
    )
