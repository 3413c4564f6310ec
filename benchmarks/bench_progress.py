"""Cost of the switchable progress reports (`jaxsim._progress`) in a top-level program.

One process, one model (a hub on a point-mass orbit, jaxsim's classes: its programs are stored, so
they carry the reports behind a run-time switch). Each case runs the same request as two programs:
`hooked` (what `simulate(..., progress=False)` runs now) and `bare` (the reports left out, as
before: `jaxsim._program_cache.keyable_structure` patched to refuse); warm calls alternate between
the two and the medians are compared. Also counts the compiles when switching progress on.

Run: `python -m benchmarks.bench_progress` (prints a Markdown table).
"""

import logging
import statistics
import time

import jax
import numpy as np

import effectors as fx
import jaxsim as js
from jaxsim import _program_cache


def main(reps: int = 21):
    compiles = []

    class Catch(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith("Compiling"):
                compiles.append(record.getMessage())

    logging.getLogger("jax").addHandler(Catch())
    mu, r = 3.986004415e14, 6878.137e3
    earth = fx.PointMassGravity(mu)
    hub = fx.Spacecraft(fx.Hub(750.0, np.diag([900.0, 800, 600])), gravity=[earth])
    y0 = hub.init_state([r, 0, 0], [0, np.sqrt(mu / r), 0], [0.1, 0.2, -0.3], [1e-3, -0.01, 0.03])
    cases = {
        "RK4, 10 steps (dispatch)": (10.0, dict(dt=1.0)),
        "RK4, 6000 steps, 60 samples": (600.0, dict(dt=0.1, sample_dt=10.0)),
        "Dopri8 (jaxsim core), 1 orbit": (5677.0, dict(solver=js.Dopri8(), rtol=1e-10, atol=1e-6)),
        "Dopri8 (diffrax), 1 orbit": (
            5677.0, dict(solver=js.Dopri8().to_diffrax(), rtol=1e-10, atol=1e-6)),
    }  # fmt: skip
    keyable = _program_cache.keyable_structure
    print("| case | bare [ms] | hooked (progress off) [ms] | ratio | compiles off -> on |")
    print("|---|---|---|---|---|")
    for name, (t1, kw) in cases.items():
        run = lambda: jax.block_until_ready(js.simulate(hub, y0, t1, **kw).ys)  # noqa: E731
        times = {"bare": [], "hooked": []}
        for variant in ("bare", "hooked"):  # compile both
            _program_cache.keyable_structure = (lambda t: False) if variant == "bare" else keyable
            run()
        for _ in range(reps):
            for variant in ("bare", "hooked"):
                _program_cache.keyable_structure = (
                    (lambda t: False) if variant == "bare" else keyable
                )
                start = time.perf_counter()
                run()
                times[variant].append(time.perf_counter() - start)
        _program_cache.keyable_structure = keyable
        jax.config.update("jax_log_compiles", True)
        n0 = len(compiles)
        js.simulate(hub, y0, t1, progress=lambda t, t1: None, **kw)
        jax.effects_barrier()
        jax.config.update("jax_log_compiles", False)
        bare, hooked = (1e3 * statistics.median(times[k]) for k in ("bare", "hooked"))
        print(f"| {name} | {bare:.3f} | {hooked:.3f} | {hooked / bare:.3f} | "
              f"{len(compiles) - n0} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
