"""`jaxsim-demo` (`_jaxsim_cli.demo`): `--help` and bad options answer before JAX is imported; after
a plain install (no matplotlib) the demo prints its run, skips the figure with a note naming the
`plot` extra, and exits 0; with matplotlib it writes the figure."""

import json
import subprocess
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
SHORT = ["--hub-only", "--orbits", "0.01"]  # 60 s of the hub-only `combined` model: a small program
HEAVY = ("jax", "jaxsim", "effectors", "numpy")  # modules `--help` must not import


def _python(code: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter in the repository root (so `_jaxsim_cli` is importable
    from the checkout as from an install)."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


_PROBE = """
import json, sys, time
start = time.perf_counter()
import _jaxsim_cli
try:
    _jaxsim_cli.demo({argv!r})
    status = None
except SystemExit as exit:
    status = exit.code
print(json.dumps({{"status": status, "seconds": time.perf_counter() - start,
                  "loaded": sorted(m for m in {heavy!r} if m in sys.modules)}}))
"""


@pytest.mark.parametrize("argv, status", [(["--help"], 0), (["--no-such-option"], 2)])
def test_help_and_bad_options_answer_before_jax_loads(argv, status):
    proc = _python(_PROBE.format(argv=argv, heavy=HEAVY), timeout=60)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["status"] == status, proc.stderr
    assert result["loaded"] == [], f"{argv} imported {result['loaded']}"
    if status == 0:
        assert "usage: jaxsim-demo" in proc.stdout and "--no-plot" in proc.stdout
        assert "jaxsim-spacecraft[plot]" in proc.stdout
    else:
        assert "unrecognized arguments: --no-such-option" in proc.stderr


def test_demo_without_matplotlib_skips_the_figure_and_exits_0(tmp_path):
    """matplotlib made unimportable (`sys.modules['matplotlib'] = None`), as after a plain
    `pip install .`: the run is printed, the figure skipped with the extra named, status 0."""
    out = tmp_path / "demo.png"
    argv = [*SHORT, "--out", str(out)]
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        f"import _jaxsim_cli; raise SystemExit(_jaxsim_cli.demo({argv!r}))\n"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "note: matplotlib is not installed" in proc.stdout
    assert (
        "figure skipped" in proc.stdout and "pip install 'jaxsim-spacecraft[plot]'" in proc.stdout
    )
    assert "final state (t = 60 s):" in proc.stdout and "relative drift" in proc.stdout
    assert not out.exists()


def test_demo_writes_the_figure_with_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    from effectors.demo import main

    out = tmp_path / "demo.png"
    assert main([*SHORT, "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([*SHORT, "--no-plot", "--out", str(tmp_path / "none.png")]) == 0
    assert not (tmp_path / "none.png").exists()
