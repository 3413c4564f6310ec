"""Recompiles: sweeps over tolerances, and the memory held over many recompiles.

1. **Tolerance sweeps** (issue 33 item 7: "200 calls, 200 compiles"): a spacecraft on a point-mass
   orbit, one adaptive run per `rtol`/`atol` value, on jaxsim's adaptive core (`Dopri8`) and on
   diffrax (`Dopri8().to_diffrax()`); the compiles are counted from JAX's `jax_log_compiles` log.
2. **Memory over recompiles**: a spacecraft wrapped in a user's model whose drift is scaled by a
   function field rebuilt each call (a lambda closing over another float: a new constant of the
   program, so every call compiles; `jaxsim.RecompileWarning` says so at the third). The process's
   resident memory (RSS) is sampled every `--every` compiles, with jaxsim's bound on the programs
   held per function (`jaxsim._compilation._jit.MAX_PROGRAMS`) and with the bound switched off (JAX's own
   caches then keep every program, as before the bound), each in a fresh process; and after
   `jax.clear_caches()`.

Run: `python -m benchmarks.bench_recompile [--compiles 200]` (about 5 minutes on 2 loaded cores);
writes `benchmarks/results/recompile.json` and `.md`.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path


if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import environment, markdown_table, write_results


MU = 3.986004415e14  # Earth's gravitational parameter [m^3/s^2]
R = 6878.137e3  # orbit radius [m]
TOLERANCES = (1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11)


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _spacecraft():
    import numpy as np

    import effectors as fx

    earth = fx.PointMassGravity(MU)
    wheels = fx.ReactionWheels(np.eye(3), [0.1] * 3, Omega=[50.0, -30.0, 20.0], name="rw")
    sc = fx.Spacecraft(
        fx.Hub(750.0, np.diag([900.0, 800.0, 600.0])), state_effectors=[wheels], gravity=[earth]
    )
    y0 = sc.init_state([R, 0, 0], [0, np.sqrt(MU / R), 0], [0.1, 0.2, -0.3], [1e-3, -0.01, 0.03])
    return sc, y0


class _Compiles(logging.Handler):
    def __init__(self):
        super().__init__()
        self.n = 0

    def emit(self, record):
        if record.getMessage().startswith("Compiling"):
            self.n += 1


def sweep() -> list[dict]:
    """Compiles of a tolerance sweep, per adaptive path."""
    import jax

    import jaxsim as js

    sc, y0 = _spacecraft()
    counter = _Compiles()
    logging.getLogger("jax").addHandler(counter)
    rows = []
    for name, solver in (("jaxsim core", js.Dopri8()), ("diffrax", js.Dopri8().to_diffrax())):
        run = lambda tol: js.simulate(sc, y0, 600.0, solver=solver, rtol=tol, atol=tol * 1e3)  # noqa: E731
        jax.block_until_ready(run(1e-5).ys)  # the first compile
        jax.config.update("jax_log_compiles", True)
        n0 = counter.n
        for tol in TOLERANCES:
            jax.block_until_ready(run(tol).ys)
        jax.config.update("jax_log_compiles", False)
        rows.append({"path": name, "calls": len(TOLERANCES), "compiles": counter.n - n0})
    return rows


def memory_child(compiles: int, every: int, bounded: bool) -> dict:
    """One fresh process: RSS while every call compiles a new program."""
    import equinox as eqx
    import jax

    import jaxsim as js
    from jaxsim._compilation import _jit as _compile
    from jaxsim._drivers._plain import _run_fixed

    if not bounded:
        _compile.MAX_PROGRAMS = 10**9
    warnings.simplefilter("ignore", js.RecompileWarning)
    sc, y0 = _spacecraft()

    class Scaled(js.AbstractDynamicObject):
        """A user's model: the spacecraft's drift times `gain(t)` (a function field)."""

        inner: object
        gain: Callable
        name: str = eqx.field(static=True, default="scaled")

        def init_state(self):
            return y0

        def drift(self, t, y, args):
            return jax.tree.map(lambda v: v * self.gain(t), self.inner.drift(t, y, args))

    def call(k):
        model = Scaled(sc, lambda t: 1.0 + 1e-6 * k)
        sol = js.simulate(model, y0, 10.0, dt=1.0, outputs=False)
        return jax.block_until_ready(sol.ys)

    call(0)
    gc.collect()
    rss0, samples, t0 = _rss_mib(), [], time.perf_counter()
    for k in range(1, compiles + 1):
        call(k)
        if k % every == 0:
            gc.collect()
            samples.append((k, _rss_mib() - rss0))
    held = _run_fixed._pick()._cached._cache_size()
    jax.clear_caches()
    gc.collect()
    return {
        "samples": samples,
        "growth_mib": samples[-1][1],
        "programs_held": held,
        "after_clear_caches_mib": _rss_mib() - rss0,
        "seconds_per_compile": (time.perf_counter() - t0) / compiles,
    }


def memory(compiles: int, every: int) -> list[dict]:
    rows = []
    for bounded in (True, False):
        cmd = [sys.executable, "-m", "benchmarks.bench_recompile", "--child",
               json.dumps({"compiles": compiles, "every": every, "bounded": bounded})]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parents[1])  # fmt: skip
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r.update(bound="MAX_PROGRAMS (32)" if bounded else "off (JAX's caches only)",
                 compiles=compiles)  # fmt: skip
        rows.append(r)
        print(f"bound {r['bound']}: +{r['growth_mib']:.0f} MiB after {compiles} compiles, "
              f"{r['programs_held']} held", flush=True)  # fmt: skip
    return rows


def markdown(data: dict) -> str:
    sweep_md = markdown_table(
        data["sweep"], [("path", "adaptive path"), ("calls", "calls"), ("compiles", "compiles")]
    )
    mem_md = markdown_table(
        data["memory"],
        [
            ("bound", "bound on programs held"),
            ("compiles", "compiles"),
            ("growth_mib", "RSS growth [MiB]"),
            ("programs_held", "programs held at the end"),
            ("after_clear_caches_mib", "RSS growth after jax.clear_caches() [MiB]"),
            ("seconds_per_compile", "s per call (compile + run)"),
        ],  # fmt: skip
    )
    traces = "\n".join(
        f"- {r['bound']}: " + ", ".join(f"{k}: {m:.0f}" for k, m in r["samples"])
        for r in data["memory"]
    )
    load = data["environment"].get("loadavg_1m")
    return (
        "## Recompiles: tolerance sweeps and memory\n\n"
        f"CPU load average at the end: {load if load is None else round(load, 1)} on "
        f"{data['environment'].get('cpu_count')} cores.\n\n"
        "Tolerance sweep (hub + 3 wheels on a point-mass orbit, 600 s, one call per tolerance "
        "after a first compile): tolerances are arguments of the program, so the sweep compiles "
        "nothing more.\n\n" + sweep_md + "\n\n"
        "Memory while every call compiles a new program (a user's model whose function field is "
        "a lambda built again each call; RK4, 10 steps), RSS growth from the first call:\n\n"
        + mem_md
        + "\n\nRSS growth [MiB] by compiles:\n\n"
        + traces
        + "\n\nWithout the bound every compile keeps its program (JAX's caches hold up to 8192 "
        "executables per process): RSS grows linearly. With it, RSS levels off once the first "
        "`MAX_PROGRAMS` programs are held; what still grows slowly is not held by jaxsim (JAX's "
        "own caches of traces, bounded by JAX at 2048 entries, are the likely holder; "
        "`jax.clear_caches()` empties them). "
        "`jax.clear_caches()` drops every program and trace, but the process's RSS does not "
        "shrink much: the allocator keeps the freed pages for later use.\n"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compiles", type=int, default=200)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        opts = json.loads(args.child)
        print(json.dumps(memory_child(opts["compiles"], opts["every"], opts["bounded"])))
        return
    data = {"name": "recompile", "title": "Recompiles: tolerance sweeps and memory"}
    data["sweep"] = sweep()
    print(data["sweep"], flush=True)
    data["memory"] = memory(args.compiles, args.every)
    data["environment"] = environment()
    data["rows"] = data["sweep"] + data["memory"]
    pj, pm = write_results("recompile", data, markdown(data))
    print(f"wrote {pj} and {pm}")


if __name__ == "__main__":
    main()
