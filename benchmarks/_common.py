"""Shared helpers of the benchmark scripts: timing of jitted JAX calls, environment, result files.

Convention for every `benchmarks/bench_<name>.py` (so that `run_all.py` can merge them): running the
module (`python -m benchmarks.bench_<name>`) writes `benchmarks/results/<name>.json` (a dict with at
least `name`, `title`, `environment`, `rows`: a list of flat dicts) and `benchmarks/results/<name>.md`
(a Markdown section), via `write_results`.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def time_jax(fn, *args, repeats: int = 5, **kwargs) -> dict:
    """Time `fn(*args, **kwargs)` (anything returning JAX arrays), blocking on the result.

    The first call includes tracing and XLA compilation; the following `repeats` calls reuse the
    compiled executable. `compile_s` is the first call minus the fastest repeated call.

    **Returns:** `{"first_call_s", "run_s" (min), "run_median_s", "compile_s", "repeats"}` and the
    last result under `"result"`.
    """
    import jax

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args, **kwargs))
        runs.append(time.perf_counter() - t0)
    return {
        "first_call_s": first,
        "run_s": min(runs),
        "run_median_s": statistics.median(runs),
        "compile_s": max(first - min(runs), 0.0),
        "repeats": repeats,
        "result": out,
    }


def environment() -> dict:
    """Versions and machine facts recorded with every result (CPU load matters on shared machines)."""
    import jax

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
        "x64": bool(jax.config.jax_enable_x64),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    try:
        env["loadavg_1m"] = os.getloadavg()[0]
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("jaxsim", "diffrax", "equinox", "bsk"):
        try:
            env[pkg] = version(pkg)
        except PackageNotFoundError:
            env[pkg] = None
    return env


def fmt(x, digits: int = 3) -> str:
    """Compact number for Markdown tables ('-' for None)."""
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, bool | int):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def markdown_table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A Markdown table from `rows` with `columns = [(key, header), ...]`."""
    lines = [
        "| " + " | ".join(h for _, h in columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(k)) for k, _ in columns) + " |")
    return "\n".join(lines)


def write_results(name: str, data: dict, markdown: str) -> tuple[Path, Path]:
    """Write `results/<name>.json` and `results/<name>.md`; returns their paths."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    pj, pm = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    pj.write_text(json.dumps(data, indent=1, default=_json_default) + "\n")
    pm.write_text(markdown.rstrip() + "\n")
    return pj, pm


def _json_default(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist()
    except ImportError:
        pass
    return str(x)


def main(name, title, run, to_markdown, argv=None, *, options=(), quick=None) -> int:
    """The benchmark scripts' one `main`: parse the command line (`--quick` with help `quick`
    when given, then `options`: `(flags, add_argument keywords)` pairs), time `run(args)` (the
    data dict), write `results/<name>.json` and `.md` (`to_markdown(data)`) and say where."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description=title)
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)
    for flags, kwargs in options:
        parser.add_argument(*((flags,) if isinstance(flags, str) else flags), **kwargs)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    data = run(args)
    data["wall_s"] = time.perf_counter() - t0
    pj, pm = write_results(name, data, to_markdown(data))
    print(f"wrote {pj} and {pm} ({data['wall_s']:.0f} s)")
    return 0
