"""Print pip constraints that pin every core dependency to its declared floor (`name==floor`).

`.ci/run` installs the package with these constraints in a second environment and runs
`.ci/smoke.py`, so the floors in `pyproject.toml` are checked rather than assumed. Every core
dependency must have a `>=` floor (else this exits with an error naming it).
"""

import pathlib
import re
import sys
import tomllib


PYPROJECT = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"
_FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*>=\s*([^,;\s]+)")


def floors() -> dict[str, str]:
    deps = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["dependencies"]
    out, missing = {}, []
    for dep in deps:
        m = _FLOOR.match(dep)
        if m is None:
            missing.append(dep)
        else:
            out[m.group(1)] = m.group(2)
    if missing:
        sys.exit(f".ci/lowest.py: dependencies without a '>=' floor in pyproject.toml: {missing}")
    return out


if __name__ == "__main__":
    print("\n".join(f"{name}=={version}" for name, version in floors().items()))
