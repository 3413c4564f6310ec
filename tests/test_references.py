"""Every citation in the product can be followed by a user.

The derivation notes the developers worked from are not shipped with jaxsim, so a code comment,
docstring, test, benchmark, guide or notebook must cite the paper, the book or the Basilisk module
documentation (or state the fact itself) instead of pointing at one of those notes. This test scans the
repository's `.py`, `.md`, `.ipynb` and `.toml` files and fails, listing file and line, on:

- a path into the notes folder, `physics/<name>.md`;
- a path that leaves the repository for the developers' shared folder (`SHARED` below, reached as
  `../` + `SHARED` or `/work/` + `SHARED`);
- a bare reference to one of the notes by its file name (a name of `NOTE_NAMES` followed by `.md`),
  unless the repository itself holds a file of that name.
"""

import os
import pathlib
import re

import pytest


ROOT = pathlib.Path(__file__).resolve().parents[1]
SUFFIXES = {".py", ".md", ".ipynb", ".toml"}
EXCLUDED_DIRS = {".venv", "build", "site", ".git"}

# The notes' file names (the notes are not part of the product).
NOTE_NAMES = (
    "dynamic_effectors",
    "frames_and_notation",
    "hinged_rigid_body",
    "hub_bsm",
    "reaction_wheels",
    "spinning_body_1dof",
    "spring_mass_damper",
    "stochastic",
    "verification",
)
# Patterns are assembled from pieces so that this file does not match itself.
SHARED = "sha" + "red"
PATTERNS = (
    re.compile(r"physics" + r"/[A-Za-z0-9_\-]+\.md"),
    re.compile(r"\.\./" + SHARED + r"\b"),
    re.compile(r"/work/" + SHARED + r"\b"),
)
BARE_NOTE = re.compile(r"(?<![\w/.\-])(" + "|".join(NOTE_NAMES) + r")\.md\b")


def _product_files(root: pathlib.Path):
    for folder, dirs, files in os.walk(root):
        # Prune excluded folders (at any depth) and caches without descending into them.
        dirs[:] = sorted(d for d in dirs if d not in EXCLUDED_DIRS and d != "__pycache__")
        for name in sorted(files):
            path = pathlib.Path(folder) / name
            if path.suffix in SUFFIXES and path.is_file():
                yield path


def dangling_references(root: pathlib.Path = ROOT):
    """`["path:line: match", ...]` for every reference into the unshipped notes under `root`."""
    shipped = {p.name for p in _product_files(root)}
    found = []
    for path in _product_files(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            hits = [m.group(0) for pattern in PATTERNS for m in pattern.finditer(line)]
            hits += [m.group(0) for m in BARE_NOTE.finditer(line) if m.group(0) not in shipped]
            found += [f"{path.relative_to(root)}:{lineno}: {hit}" for hit in hits]
    return found


def test_no_reference_to_unshipped_notes():
    found = dangling_references()
    assert not found, (
        "references to files users do not get (cite the paper / Basilisk module documentation, "
        "or state the fact inline):\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    "line, caught",
    [
        ("# see `physics/" + "hub_bsm" + ".md` §3.1", True),
        ("# see " + "physics/" + "verification" + ".md", True),
        ("open('../" + SHARED + "/notes/x.txt')", True),
        ("path = '/work/" + SHARED + "/notes'", True),
        ("# truths of verification" + ".md R1-R3", True),
        ("# (`reaction_wheels" + ".md` §2)", True),
        ('"cell": "see frames_and_notation' + '.md"', True),
        ("# see docs/conventions.md and docs/variable_mass.md", False),
        ("# Basilisk `reactionWheelStateEffector` documentation", False),
        ("# a shared/ folder, /shared/runs/mc1", False),
    ],
)
def test_scan_catches_a_reintroduced_reference(tmp_path, line, caught):
    sub = tmp_path / "pkg"
    sub.mkdir()
    (sub / "mod.py").write_text(f"x = 1\n{line}\n", encoding="utf-8")
    # Excluded folders are not scanned.
    for skipped in (".venv", "site"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "mod.py").write_text(f"{line}\n", encoding="utf-8")
    found = dangling_references(tmp_path)
    if caught:
        assert len(found) == 1 and found[0].startswith("pkg/mod.py:2: "), found
    else:
        assert found == []
