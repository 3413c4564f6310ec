"""The optional extras fit together: `notebooks` brings a Jupyter front end, and no extra lets pip
pick a version that Basilisk (the `crossval` extra) would downgrade, so extras installed one after
another never uninstall each other's packages."""

import re
import shlex
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


README = PYPROJECT.parent / "README.md"
_BASH = re.compile(r"^```bash[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def readme_installs() -> list[list[Requirement]]:
    """The requirements each of the README's first two commands (the demo, then the tests)
    installs: the arguments of its `pip install`, with `-e ".[a,b]"` / `".[a,b]"` expanded to the
    extras' requirements from pyproject.toml and bare names taken as unbounded requirements."""
    blocks = _BASH.findall(README.read_text(encoding="utf-8"))[:2]
    table = extras()
    installs = []
    for block in blocks:
        words = shlex.split(block.split("pip install", 1)[1].split("&&", 1)[0])
        reqs = []
        for word in words:
            if word.startswith("-"):
                continue
            if word.startswith("."):
                names = (
                    word[word.index("[") + 1 : word.index("]")].split(",") if "[" in word else []
                )
                reqs += [r for name in names for r in table[name.strip()]]
            else:
                reqs.append(Requirement(word))
        installs.append(reqs)
    return installs


def test_readme_demo_then_test_command_downgrades_nothing():
    """Running the README's demo command, then its test command in the same environment, changes
    no version the first one installed: every package the demo command installs (and every
    dependency of those that the test command bounds from above) is bounded there at or below
    the test command's bound. The former demo command's bare `matplotlib` failed this: pip
    installed the newest matplotlib, which the test extra's `<=3.10.9` then downgraded."""
    demo, tests = readme_installs()
    assert any(r.name == "matplotlib" for r in demo), "the demo command must install matplotlib"
    test_bounds = {}
    for r in tests:
        bound = upper_bound(r.specifier)
        if bound is not None:
            name = r.name.lower()
            test_bounds[name] = min(bound, test_bounds.get(name, bound))
    demo_bounds = {r.name.lower(): upper_bound(r.specifier) for r in demo}
    pulled = set(demo_bounds)
    for r in demo:  # first-level dependencies of what the demo installs (where installed here)
        try:
            pulled |= {
                Requirement(d).name.lower() for d in requires(r.name) or () if "extra" not in d
            }
        except PackageNotFoundError:
            pass
    problems = [
        f"{name}: demo command allows {demo_bounds.get(name) or 'any version'}, "
        f"test command needs <= {bound}"
        for name, bound in test_bounds.items()
        if name in pulled and (demo_bounds.get(name) or Version("9999")) > bound
    ]
    assert not problems, problems
