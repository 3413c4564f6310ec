"""The optional extras fit together: `notebooks` brings a Jupyter front end, and no extra lets pip
pick a version that Basilisk (the `crossval` extra) would downgrade, so extras installed one after
another never uninstall each other's packages."""

import tomllib
from importlib.metadata import PackageNotFoundError, requires
from pathlib import Path

import pytest


packaging = pytest.importorskip("packaging")
from packaging.requirements import Requirement
from packaging.version import Version


PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def extras() -> dict[str, list[Requirement]]:
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return {
        name: [Requirement(r) for r in reqs]
        for name, reqs in data["project"]["optional-dependencies"].items()
    }


def upper_bound(specifier) -> Version | None:
    """The smallest version bound `specifier` sets from above (`<=`, `<`, `==`); None if none."""
    bounds = [Version(s.version) for s in specifier if s.operator in ("<=", "<", "==")]
    return min(bounds) if bounds else None


def test_upper_bound():
    assert upper_bound(Requirement("a>=1,<=3.10.9").specifier) == Version("3.10.9")
    assert upper_bound(Requirement("a>=1").specifier) is None


def test_notebooks_extra_has_a_jupyter_front_end():
    names = {r.name.lower() for r in extras()["notebooks"]}
    assert names & {"jupyterlab", "notebook"}, names


def test_extras_stay_within_basilisk_pins():
    """Every package that another extra lists and Basilisk 2.12.1 bounds from above is bounded
    there at or below Basilisk's bound (else pip installs a newer one, which `crossval` then
    downgrades). The packages that enter through matplotlib and xarray (pillow, pandas) are listed
    for this reason."""
    try:
        bsk = [Requirement(r) for r in requires("bsk") or ()]
    except PackageNotFoundError:
        pytest.skip("needs Basilisk (pip install 'jaxsim-spacecraft[crossval]')")
    bsk_bounds = {
        r.name.lower(): upper_bound(r.specifier)
        for r in bsk
        if (r.marker is None or r.marker.evaluate({"extra": ""})) and upper_bound(r.specifier)
    }
    assert {"matplotlib", "pillow", "pandas"} <= set(bsk_bounds)
    problems = []
    for extra, reqs in extras().items():
        if extra == "crossval":
            continue
        for r in reqs:
            bound = bsk_bounds.get(r.name.lower())
            if bound is not None and (upper_bound(r.specifier) or Version("9999")) > bound:
                problems.append(f"[{extra}] {r} (Basilisk: <= {bound})")
    assert not problems, problems
