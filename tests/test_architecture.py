"""Layering of the code base: the engine (`jaxsim/`) knows no spacecraft, and the physics library
(`effectors/`) uses only the engine's public API.

(a) No module under `jaxsim/` imports `effectors`: checked statically (every `import` statement
    in every `jaxsim/**/*.py`, including those inside functions) and dynamically (importing every
    `jaxsim` submodule in a fresh interpreter leaves `effectors` out of `sys.modules`).
(b) No file under `effectors/` imports a private `jaxsim._xxx` module.
(c) The engine's modules import in one direction: no import circle (function-level imports
    count; an internal module importing a name from the package `__init__` is a circle).
(d) One `Solution`, built in one place: only `jaxsim/_result/_solution.py` constructs it (`finish`).
(e) The run's stages are folders that import only the stages after them in the flow (`STAGES`):
    entrance -> request -> route -> drivers -> events -> cores -> solvers -> result ->
    compilation -> model. Function-level imports count; the one exception climbs to the public
    `jaxsim.results` module for `to_xarray`, locally and with its reason written beside it.
(f) Function-local imports of jaxsim's own modules inside `jaxsim/`: at most `MAX_LOCAL_IMPORTS`,
    each with a comment saying why.
"""

import ast
import json
import pathlib
import subprocess
import sys

import pytest


ROOT = pathlib.Path(__file__).resolve().parents[1]
ENGINE = ROOT / "jaxsim"
PHYSICS = ROOT / "effectors"


def _imports(path: pathlib.Path):
    """`[(line, absolute module name)]` of every import statement in a file (relative imports
    resolved against the file's package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    if path.name == "__init__.py":
        package = path.relative_to(ROOT).parts[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ((node.module,) if node.module else ()))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # `from jaxsim import _validation` imports a private submodule too
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def _files(folder: pathlib.Path):
    files = sorted(folder.rglob("*.py"))
    assert files, f"no Python files under {folder}"
    return files


def _engine_imports_of_effectors(files):
    return [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in files
        for line, module in _imports(path)
        if module == "effectors" or module.startswith("effectors.")
    ]


def _private_engine_imports(files):
    return [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in files
        for line, module in _imports(path)
        if any(part.startswith("_") for part in module.split(".")[1:2])
        and module.split(".")[0] == "jaxsim"
    ]


def test_engine_source_does_not_import_effectors():
    offenders = _engine_imports_of_effectors(_files(ENGINE))
    assert not offenders, "the engine imports the physics library:\n" + "\n".join(offenders)


def test_engine_import_does_not_load_effectors():
    """Import every `jaxsim` submodule (optional-dependency modules included) in a fresh process."""
    code = (
        "import importlib, json, pkgutil, sys\n"
        "import jaxsim\n"
        "names = sorted(m.name for m in pkgutil.walk_packages(jaxsim.__path__, 'jaxsim.'))\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps({'modules': names, 'effectors': sorted(\n"
        "    m for m in sys.modules if m == 'effectors' or m.startswith('effectors.'))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    # The walk saw the engine's modules, including the public re-export modules.
    assert {"jaxsim.animation", "jaxsim.plotting", "jaxsim.results", "jaxsim.validation"} <= set(
        report["modules"]
    ), report["modules"]
    assert report["effectors"] == [], report


def test_physics_library_uses_only_the_public_engine_api():
    offenders = _private_engine_imports(_files(PHYSICS))
    assert not offenders, "effectors imports private engine modules:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    "source, engine_offends, physics_offends",
    [
        ("import effectors\n", True, False),
        ("def f():\n    from effectors.scenarios import combined\n", True, False),
        ("from effectors import Spacecraft\n", True, False),
        ("from jaxsim._model._validation import fail\n", False, True),
        ("from jaxsim import _signals\n", False, True),
        ("import jaxsim._model._kinematics as k\n", False, True),
        ("from jaxsim.validation import fail\nimport jaxsim\n", False, False),
    ],
)
def test_checks_catch_a_reintroduced_import(tmp_path, monkeypatch, source, engine_offends,
                                            physics_offends):  # fmt: skip
    """The static checks flag each forbidden form (so the tests above can fail)."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    for pkg in ("jaxsim", "effectors"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "bad.py").write_text(source, encoding="utf-8")
    assert bool(_engine_imports_of_effectors([tmp_path / "jaxsim" / "bad.py"])) == engine_offends
    assert bool(_private_engine_imports([tmp_path / "effectors" / "bad.py"])) == physics_offends


# ----------------------------------------------------------------------------------------------
# (c) The engine's modules import in one direction (no import circle), and (d) one Solution.
# ----------------------------------------------------------------------------------------------


def _module_of(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(folder: pathlib.Path, root: pathlib.Path) -> dict:
    """`{module: {modules of the package it imports}}` (function-level imports too). `from pkg
    import name` is an edge to `pkg.name` when that is a module, else to `pkg`: an internal module
    taking a name from the package `__init__` closes a circle through everything it re-exports."""
    modules = {_module_of(p, root): p for p in _files(folder)}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets += [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
        edges = set()
        for module in targets:
            while module and module not in modules:
                module = module.rpartition(".")[0]
            if module and module != name:
                edges.add(module)
        graph[name] = edges
    return graph


def _circles(graph: dict) -> list:
    """The strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_engine_has_no_import_circle():
    circles = _circles(_import_graph(ENGINE, ROOT))
    assert not circles, "import circles in jaxsim/:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_circle_check_catches_a_climb_back(tmp_path):
    """A driver importing a name back from the entrance, or a module importing from the package
    `__init__`, is a circle (so the test above can fail)."""
    pkg = tmp_path / "jaxsim"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from ._simulate import simulate\n", encoding="utf-8")
    (pkg / "_simulate.py").write_text("from ._sde import run\n", encoding="utf-8")
    (pkg / "_sde.py").write_text(
        "def run():\n    from ._simulate import helper\n", encoding="utf-8"
    )
    (pkg / "_schema.py").write_text("from . import __version__\n", encoding="utf-8")
    circles = _circles(_import_graph(pkg, tmp_path))
    assert circles == [["jaxsim._sde", "jaxsim._simulate"]]
    (pkg / "_simulate.py").write_text("from ._sde import run\nfrom . import _schema\n", "utf-8")
    (pkg / "__init__.py").write_text("from ._simulate import simulate\nfrom . import _schema\n")
    circles = _circles(_import_graph(pkg, tmp_path))
    assert any({"jaxsim", "jaxsim._schema"} <= set(c) for c in circles), circles


def _constructs_solution(path: pathlib.Path) -> list:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None))
        in ("Solution", "HybridSolution")
    ]


def test_one_solution_built_in_one_place():
    """Every driver program ends in `jaxsim._result._solution.finish`: no other engine module builds a
    `Solution` itself (one class, one result tail)."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _files(ENGINE)
        if path.name != "_solution.py"
        for line in _constructs_solution(path)
    ]
    assert not offenders, "Solution built outside jaxsim/_result/_solution.py:\n" + "\n".join(
        offenders
    )


# The run's stages in the order of the flow: a module of a stage may import its own stage and
# the stages after it, never one before it (`docs/engine.md`, "The flow").
STAGES = (
    ("jaxsim._simulate", "jaxsim._phases"),
    ("jaxsim._request",),
    ("jaxsim._route",),
    ("jaxsim._drivers",),
    ("jaxsim._events",),
    ("jaxsim._cores",),
    ("jaxsim._solvers",),
    ("jaxsim._result",),
    ("jaxsim._compilation",),
    ("jaxsim._model",),
    ("jaxsim._version",),
)
# (importer, imported) pairs allowed to climb: the public results module builds on the result
# stage, and a Solution's `to_xarray` delegates to it (a local import, commented in place).
CLIMBS = {("jaxsim._result._solution", "jaxsim.results")}
MAX_LOCAL_IMPORTS = 5


def _stage(module: str):
    for rank, prefixes in enumerate(STAGES):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def _climbs(graph: dict) -> list:
    found = []
    for importer, targets in graph.items():
        rank = _stage(importer)
        if rank is None:
            continue
        for target in targets:
            other = _stage(target)
            above = other is None and target != "jaxsim" or other is not None and other < rank
            if target == "jaxsim" or (above and (importer, target) not in CLIMBS):
                found.append(f"{importer} -> {target}")
    return sorted(found)


def test_stages_import_only_later_stages():
    climbs = _climbs(_import_graph(ENGINE, ROOT))
    assert not climbs, "a stage imports an earlier stage or a public module:\n" + "\n".join(climbs)


def test_stage_check_catches_a_climb(tmp_path):
    """The order check fails on a core importing a driver and on a stage importing the package."""
    pkg = tmp_path / "jaxsim"
    (pkg / "_cores").mkdir(parents=True)
    (pkg / "_drivers").mkdir()
    for folder in (pkg, pkg / "_cores", pkg / "_drivers"):
        (folder / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "_drivers" / "_plain.py").write_text("from .._cores import _fixed_grid\n", "utf-8")
    (pkg / "_cores" / "_fixed_grid.py").write_text("x = 1\n", encoding="utf-8")
    assert _climbs(_import_graph(pkg, tmp_path)) == []
    (pkg / "_cores" / "_fixed_grid.py").write_text("from .._drivers import _plain\n", "utf-8")
    assert _climbs(_import_graph(pkg, tmp_path)) == [
        "jaxsim._cores._fixed_grid -> jaxsim._drivers._plain"
    ]
    (pkg / "_cores" / "_fixed_grid.py").write_text("def f():\n    from .. import x\n", "utf-8")
    assert _climbs(_import_graph(pkg, tmp_path)) == ["jaxsim._cores._fixed_grid -> jaxsim"]


def _local_imports(path: pathlib.Path) -> list:
    """`[(line, has a comment on the lines just above)]` of the function-level imports of jaxsim's
    own modules in a file."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found = []
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                own = (
                    isinstance(node, ast.ImportFrom)
                    and (node.level or (node.module or "").startswith("jaxsim"))
                ) or (
                    isinstance(node, ast.Import)
                    and any(a.name.startswith("jaxsim") for a in node.names)
                )
                if own:
                    above = lines[node.lineno - 2].strip()
                    found.append((node.lineno, above.startswith("#")))
    return found


def test_few_local_imports_each_explained():
    found = [(p, line, why) for p in _files(ENGINE) for line, why in _local_imports(p)]
    where = [f"{p.relative_to(ROOT)}:{line}" for p, line, _ in found]
    assert len(found) <= MAX_LOCAL_IMPORTS, (
        "function-local imports of jaxsim modules:\n" + "\n".join(where)
    )
    unexplained = [f"{p.relative_to(ROOT)}:{line}" for p, line, why in found if not why]
    assert not unexplained, "a local import without a comment saying why:\n" + "\n".join(
        unexplained
    )
