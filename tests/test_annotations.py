"""Type annotations on the public API: every parameter of every public constructor and of every
public function (the names exported by `jaxsim`, `jaxsim.montecarlo`, `effectors` and
`effectors.astro`) is annotated, and public functions state their return type. Both packages ship
`py.typed`, so type checkers read these annotations.

A new public class or function without annotations fails here with its name and the parameters
to annotate (the style of `STYLE.md` 3.3: jaxtyping shapes such as `Float[ArrayLike, " n"]`,
`ArrayLike`, `float`, `str | None`).
"""

import importlib
import inspect
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = ["jaxsim", "jaxsim.montecarlo", "effectors", "effectors.astro"]
EMPTY = inspect.Parameter.empty


def _public(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
    for name in names:
        obj = getattr(module, name)
        if inspect.ismodule(obj) or not callable(obj):
            continue
        if getattr(obj, "__module__", "").split(".")[0] not in ("jaxsim", "effectors"):
            continue  # re-exported from elsewhere
        yield name, obj


def _signature(obj):
    """(parameters to check, whether a return annotation is required) of a public callable."""
    if inspect.isclass(obj):
        if issubclass(obj, BaseException) or obj.__init__ is object.__init__:
            return None
        try:
            sig = inspect.signature(obj.__init__)
        except (TypeError, ValueError):
            return None
        return list(sig.parameters.values())[1:], None  # drop `self`
    sig = inspect.signature(obj)
    return list(sig.parameters.values()), sig.return_annotation


def unannotated() -> dict[str, list[str]]:
    """`{"module.Name": [parameters without annotation, "return"]}` over the public API."""
    missing = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name, obj in _public(module):
            found = _signature(obj)
            if found is None:
                continue
            params, ret = found
            names = [p.name for p in params if p.annotation is EMPTY]
            if ret is EMPTY:
                names.append("return")
            if names:
                label = f"{module_name}.{name}" + (".__init__" if inspect.isclass(obj) else "")
                missing[label] = names
    return missing


def test_public_constructors_and_functions_are_annotated():
    missing = unannotated()
    count = sum(len(v) for v in missing.values())
    lines = [f"  {label}: {', '.join(names)}" for label, names in sorted(missing.items())]
    assert not missing, (
        f"{count} unannotated parameters/returns in {len(missing)} public callables "
        "(annotate them: STYLE.md 3.3):\n" + "\n".join(lines)
    )


def test_simulate_is_fully_annotated():
    import jaxsim as js

    sig = inspect.signature(js.simulate)
    assert sig.return_annotation is not EMPTY
    assert all(p.annotation is not EMPTY for p in sig.parameters.values())


@pytest.mark.parametrize("package", ["jaxsim", "effectors"])
def test_py_typed_marker(package):
    assert (ROOT / package / "py.typed").is_file()
