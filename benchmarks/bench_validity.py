"""Benchmark: the cost of the physical-validity checks (issue #33) on the `combined` run.

Model and settings of `bench_combined` (`effectors.scenarios.combined`, RK4 at 0.1 s, 10 s samples
with outputs), over `--horizon` seconds. Three ways of calling, each with the checks on and off
(off: `jaxsim._model._arguments.check_physical` a no-op and `jaxsim._simulate.InProgram` checking nothing,
i.e. no call-time check, no in-program check and no NaN tangents of failed runs):

- `top level`: `js.simulate(sc, y0, ...)` (concrete model: the call-time check only);
- `traced model`: `eqx.filter_jit(run)(sc, y0)` (the model's arrays traced: the in-program check,
  `invalid_model` and the NaN tangents are in the program);
- `gradient`: reverse-mode gradient of a final-state scalar w.r.t. every inexact parameter.

The two variants are compiled apart, then called alternately (`--repeats` pairs, one process);
the medians and the median of the per-pair ratios (on / off) are reported.

Run: `python -m benchmarks.bench_validity [--horizon 600] [--repeats 11]`.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script


@contextlib.contextmanager
def checks_off():
    """The validity checks switched off (restored on exit)."""
    from jaxsim import _simulate
    from jaxsim._model import _arguments as _checks

    class _Nothing:
        def __init__(self, model, y0):
            pass

        def guard(self, y0, throw):
            return y0

        def finish(self, sol):
            return sol

    saved = _checks.check_physical, _simulate.InProgram
    _checks.check_physical = lambda model, y0: None
    _simulate.InProgram = _Nothing
    try:
        yield
    finally:
        _checks.check_physical, _simulate.InProgram = saved


def _block(x):
    import jax

    jax.tree_util.tree_map(lambda a: a.block_until_ready(), x)
    return x


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=float, default=600.0, help="[s] simulated time")
    parser.add_argument("--repeats", type=int, default=11, help="alternating pairs")
    a = parser.parse_args(argv)

    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import jaxsim as js
    from effectors.scenarios import combined

    sc, y0, _ = combined()
    dt, sample, t1 = 0.1, 10.0, a.horizon
    params, static = eqx.partition(sc, eqx.is_inexact_array)

    def top():
        return js.simulate(sc, y0, t1, dt=dt, sample_dt=sample)

    def traced(model, y):
        return js.simulate(model, y, t1, dt=dt, sample_dt=sample, throw=False)

    def scalar(p):
        sol = js.simulate(eqx.combine(p, static), y0, t1, dt=dt, outputs=False)
        hub = sol.ys["hub"]
        return jnp.sum(hub["sigma_BN"][-1]) + jnp.sum(hub["omega_BN_B"][-1])

    cases = {}
    # Each variant traced (and compiled) under its own setting; the top-level call reads the
    # setting at every call, so it is switched around each call.
    jit_on, grad_on = eqx.filter_jit(traced), jax.jit(jax.grad(scalar))
    _block(jit_on(sc, y0)), _block(grad_on(params))
    with checks_off():
        jit_off, grad_off = eqx.filter_jit(lambda m, y: traced(m, y)), jax.jit(jax.grad(scalar))
        _block(jit_off(sc, y0)), _block(grad_off(params))
        _block(top())
    _block(top())
    cases["top level"] = (top, top, True)
    cases["traced model"] = (lambda: jit_on(sc, y0), lambda: jit_off(sc, y0), False)
    cases["gradient"] = (lambda: grad_on(params), lambda: grad_off(params), False)

    n_steps = int(round(t1 / dt))
    print(f"combined, RK4 dt={dt} s, {n_steps} steps, {a.repeats} alternating pairs")
    for name, (on, off, switch) in cases.items():
        t_on, t_off = [], []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            _block(on())
            t_on.append(time.perf_counter() - t0)
            with checks_off() if switch else contextlib.nullcontext():
                t0 = time.perf_counter()
                _block(off())
                t_off.append(time.perf_counter() - t0)
        ratio = statistics.median(x / y for x, y in zip(t_on, t_off))
        print(
            f"{name:13s} on {statistics.median(t_on) * 1e3:9.2f} ms  off "
            f"{statistics.median(t_off) * 1e3:9.2f} ms  median ratio on/off {ratio:.4f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
