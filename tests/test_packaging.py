"""The distribution around the code: its name, one version string, the licence and citation files,
`py.typed`, checked dependency floors, and install messages that name the distribution.

The distribution is `jaxsim-spacecraft` (PyPI's `jaxsim` is an unrelated robotics engine); the
import packages are `jaxsim` and `effectors`. Building the wheel needs the network (hatchling), so
its contents (LICENSE, both `py.typed`) are checked by the configuration here and by hand in
CONTRIBUTING.md's release steps.
"""

import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]
DIST = "jaxsim-spacecraft"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# An install hint that names the bare `jaxsim` distribution: `jaxsim[extra]` not preceded by a
# name character, `-`, `.` or `/` (so `jaxsim-spacecraft[...]` and paths do not match).
_BARE_EXTRA = re.compile(r"(?<![\w./-])jaxsim\[")
_BARE_INSTALL = re.compile(r"pip install +['\"]?jaxsim(?![\w-])")
# Where users read install hints: the packages, the guides, the notebooks, the tests' skip
# reasons, the benchmark scripts and the top-level documents.
_SCANNED = ["jaxsim", "effectors", "docs", "notebooks", "tests", "benchmarks", ".ci"]
_TOP_LEVEL = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "_jaxsim_cli.py", "pyproject.toml"]
_SUFFIXES = {".py", ".md", ".ipynb", ".toml", ".yml", ".cff"}


def _version_in_init() -> str:
    text = (ROOT / "jaxsim" / "_version.py").read_text(encoding="utf-8")
    found = re.findall(r'^__version__ = "([^"]+)"$', text, flags=re.MULTILINE)
    assert len(found) == 1, f"jaxsim/_version.py must set __version__ once; found {found}"
    return found[0]


def test_distribution_name_and_single_version():
    """pyproject names the distribution and takes its version from `jaxsim.__version__` (hatch's
    dynamic version): the version is written in one place."""
    project = PYPROJECT["project"]
    assert project["name"] == DIST
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "jaxsim/_version.py"
    import jaxsim

    assert jaxsim.__version__ == _version_in_init()


def test_installed_metadata_matches_the_source():
    """The installed distribution (editable or not) carries the same version and the entry point;
    an install from before the rename or the last version change fails here with a hint."""
    try:
        dist = distribution(DIST)
    except PackageNotFoundError:
        pytest.skip(f"{DIST} is not installed (pip install -e .)")
    assert dist.version == _version_in_init(), (
        f"installed {DIST} {dist.version} != source {_version_in_init()}: reinstall (pip install -e .)"
    )
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts == {"jaxsim-demo": "_jaxsim_cli:demo"}, scripts


def test_licence_citation_changelog_and_typing_markers():
    """ISC licence file named by the metadata, a CFF 1.2.0 citation with the current version, a
    changelog with an Unreleased section, and `py.typed` in both import packages inside the wheel's
    file list."""
    project = PYPROJECT["project"]
    assert project["license"] == "ISC" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("ISC License")
    cff = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    assert re.search(r"^cff-version: 1\.2\.0$", cff, flags=re.MULTILINE)
    assert re.search(rf'^version: "{re.escape(_version_in_init())}"$', cff, flags=re.MULTILINE)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog
    assert f"## [{_version_in_init()}]" in changelog
    wheel = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["only-include"]
    for package in ("jaxsim", "effectors"):
        assert package in wheel and (ROOT / package / "py.typed").is_file()
    assert "_jaxsim_cli.py" in wheel  # the console script's module
    assert (ROOT / "CONTRIBUTING.md").is_file()


def test_every_core_dependency_has_a_checked_floor():
    """Each core dependency has a `>=` floor, which `.ci/lowest.py` turns into the pins of CI's
    lowest-versions step; `.ci/run` runs that step and its smoke test."""
    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        import lowest
    finally:
        sys.path.remove(str(ROOT / ".ci"))
    floors = lowest.floors()
    names = {
        re.split(r"[<>=!\[; ]", d, maxsplit=1)[0] for d in PYPROJECT["project"]["dependencies"]
    }
    assert set(floors) == names, (floors, names)
    assert {"jax", "jaxlib", "diffrax", "equinox", "numpy", "jaxtyping"} <= names
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python .ci/lowest.py" in run and "--constraint" in run and ".ci/smoke.py" in run


def test_install_hints_name_the_distribution():
    """No install hint names the bare `jaxsim` distribution (it installs the robotics engine):
    every `jaxsim[extra]` is `jaxsim-spacecraft[extra]`."""
    files = [ROOT / name for name in _TOP_LEVEL]
    for folder in _SCANNED:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in _SUFFIXES and p.is_file()]
    problems = []
    for path in files:
        if "__pycache__" in path.parts or path.name == "test_packaging.py":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        if path == ROOT / "README.md":  # its section on the name quotes the other project's command
            start = lines.index(f"### The name: `{DIST}`")
            end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("#"))
            lines[start:end] = [""] * (end - start)
        for n, line in enumerate(lines, 1):
            if _BARE_EXTRA.search(line) or _BARE_INSTALL.search(line):
                problems.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not problems, f"install hints must name '{DIST}[...]':\n" + "\n".join(problems)


def test_readme_documents_the_name_clash():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"### The name: `{DIST}`" in readme
    assert "pip install jaxsim" in readme and "separate virtual environments" in readme
