r"""Benchmark (issue #27): every row of the issue's table in one run, side by side with heyoka and
Basilisk.

Problem 1: the J2 LEO of `bench_orbit_adaptive` (Earth point mass + J2, 500 km x 0.001 at 51.6
deg, one day), `atol = rtol` in m and m/s, Dopri8. Problem 2: the `combined` spacecraft
(`effectors.scenarios.combined`, RK4 0.1 s, 600 s as in the issue). Compared in one process,
alternated round by round (each figure the minimum over the rounds of the minimum of a few calls;
ratios are the median of the per-round ratios, so that a load spike on the shared machine hits
both sides of a ratio):

- `lean`: public `simulate(..., solver=Dopri8())` with default options, jaxsim's adaptive core
  (`jaxsim._cores._adaptive`); the figure includes `simulate`'s per-call work in Python (request,
  checks, dispatch);
- `lean jit`: the same call inside `jaxsim.jit` (the compiled program alone, as heyoka's
  `propagate_until` is the integration alone);
- `lean looped`: `Dopri8(unrolled=False)` (the stages in a `fori_loop`);
- `diffrax`: `simulate(..., solver=Dopri8().to_diffrax())` (the pair in `diffrax.diffeqsolve`);
- `floor`: a hand-written minimal Dopri8 `lax.while_loop` on the same drift with the same tableau
  and I controller and nothing else (no samples, breakpoints, counters or stats): the least one
  adaptive step costs on XLA:CPU;
- heyoka's Taylor integrator on the same equations (tolerance sweep), interpolated log-log to the
  final-position error of the jaxsim run ("equal final error"); reference: heyoka in extended
  precision (`numpy.longdouble`).

Rows (`--only` names them):

- `forward`: J2 day at rtol 1e-12 (time, steps, error, / heyoka at equal error);
- `forward_opted_out`: `forward` again in a child process with `JAXSIM_SMALL_LOOPS=0` (see
  `OPT_OUT`). jaxsim compiles its own programs with XLA's small-while-loop hoisting (a loop whose
  iteration accesses fewer bytes than a threshold is compiled into one function instead of one
  runtime call per kernel; set per program, `jaxsim.small_loops()`, `docs/engine.md`), so every
  other row runs with it in a default process; this row measures the same programs kernel by
  kernel (XLA's own default, and jaxsim's default before issue 46). Run the whole benchmark with
  `XLA_FLAGS=--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000` for the
  former process-wide opt-in ("flagged": every program of the process hoisted);
- `stm`, `stm_opted_out` (the latter in a child process with `JAXSIM_SMALL_LOOPS=0`): 6x6 state
  transition matrix, `jax.jacfwd` (`adjoint=diffrax.ForwardMode()`) and
  `adjoint=js.ForwardSensitivity()` vs heyoka's variational equations (`var_ode_sys`, order 1) at
  the same tolerance; accuracy: max |STM - STM_ref| / max |STM_ref| against heyoka's variational
  run at tolerance 1e-15;
- `gradient50`: gradient of |r(T)|^2 / R^2 w.r.t. 50 parameters (48 piecewise-constant along-track
  thrust accelerations over 30-minute windows, mu, J2; the window edges are breakpoints): reverse
  mode (`jax.grad`, default adjoint) and forward mode (`jax.jacfwd`, 50 tangents), lean vs diffrax,
  and `jax.grad` with `adjoint=js.ForwardSensitivity()`; errors against the
  `ForwardSensitivity` gradient at rtol 1e-14 (the reference: heyoka is not run for this row,
  its piecewise thrust would need one integrator per window); `gradient50_opted_out`: the same
  in a child process with `JAXSIM_SMALL_LOOPS=0`;
- `combined`: the spacecraft's final-state forward run (`jaxsim.jit` of a scalar of the final
  state), its reverse gradient w.r.t. every inexact array of the model, one forward-mode tangent
  (`jax.jvp` along a fixed random direction) and Basilisk's `ExecuteSimulation()` of the same run
  (`tests.reference.basilisk_scenarios`, no recorders); `combined_opted_out`: the same in a child
  process with `JAXSIM_SMALL_LOOPS=0`;
- `compile`: the first call (trace + compile) of each program in a fresh process, then on a
  restart with `jaxsim.enable_cache()` (JAX's persistent cache; each in its own subprocess, the
  cache in a temporary folder): the first public `simulate` of one J2 orbit (`lean orbit`, Dopri8,
  rtol 1e-12), the J2 1 h Dopri8 forward run and its gradient programs (default
  adjoint, with the default `throw=True` and with `throw=False`; `ForwardSensitivity`), and the
  `combined` reverse gradient (its cold figure is the issue's "first gradient, cold"); a case
  ending in `OPT_OUT_SUFFIX` runs with `JAXSIM_SMALL_LOOPS=0`.

Run: `python -m benchmarks.bench_lean [--rounds N] [--quick] [--only ROW ...] [--out DIR]` (writes
`benchmarks/results/lean.json`, `.md`; `--out` another folder). heyoka and Basilisk are optional
(`pip install 'jaxsim-spacecraft[bench]'`); without them their columns are empty.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import (
    _common as cm,  # noqa: E402
    bench_orbit_adaptive as orbit,  # noqa: E402
)


NAME = "lean"
TITLE = "Lean stepping core (issue #27): every row of the issue's table, side by side"

RTOL = 1e-12
T1 = orbit.T1
STM_TIGHT = 1e-13  # the STM row's second tolerance (rtol = atol)
HEYOKA_TOLS = (1e-10, 1e-12, 1e-13, 1e-14, 1e-15, 2.220446049250313e-16)
HEYOKA_TOLS_QUICK = (1e-10, 1e-14)
N_WINDOWS = 48  # thrust windows of the 50-parameter gradient (+ mu, J2)
THRUST = 1e-6  # [m/s^2] along-track acceleration per window, nominal
COMBINED_T1 = 600.0  # [s] the issue's `combined` horizon (RK4 0.1 s)
COMBINED_T1_QUICK = 20.0
# The `*_opted_out` rows and compile cases: XLA's small-while-loop hoisting, which jaxsim sets in
# its own programs, left at XLA's default (each loop body runs kernel by kernel).
OPT_OUT = "JAXSIM_SMALL_LOOPS=0"
OPT_OUT_SUFFIX = f" ({OPT_OUT})"
# The issue's targets (figure: (bound, which side)).
TARGETS = {
    "forward_over_heyoka": 3.0,
    "stm_over_heyoka": 2.0,
    "grad50_over_heyoka_ms": 2.17 * 2,  # <= 2x heyoka's 2.17 ms (the issue's measurement)
    "grad50_over_forward": 5.0,
    "grad50_error": 1e-7,
    "compile_cold_s": 3.0,
    "first_orbit_s": 1.5,  # issue 46: the first one-orbit `simulate` of a fresh process
    "compile_restart_s": 0.5,
    "combined_grad_over_forward": 4.0,
    "combined_first_grad_s": 3.0,
    "combined_over_bsk": 0.08,
    "combined_jvp_over_forward": 2.5,
}


_INNER = 3  # calls per timing (min taken)


class Timed(float):
    """A case's own measurement [s] (returned by a case that times only part of its call)."""


def _best(fn, inner=None):
    """Minimum wall time [s] of `inner` calls of `fn` (blocking on its JAX result; a `Timed`
    result is the call's own figure)."""
    import jax

    best = float("inf")
    for _ in range(inner or _INNER):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        wall = time.perf_counter() - t0
        best = min(best, float(out) if isinstance(out, Timed) else wall)
    return best


def _alternate(cases: dict, rounds: int) -> dict:
    """`{name: min time}` and per-round times, the cases called in turn each round."""
    times = {k: [] for k in cases}
    for _ in range(rounds):
        for k, fn in cases.items():
            times[k].append(_best(fn))
    return {k: min(v) for k, v in times.items()}, times


def _ratio(times, a, b):
    return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))


# --------------------------------------------------------------------------------------- models
def thrust_model():
    """Point mass + J2 + piecewise-constant along-track thrust (`N_WINDOWS` windows over the day):
    50 parameters (`mu`, `j2`, `thrust`)."""
    import equinox as eqx
    import jax.numpy as jnp

    import jaxsim as js

    edges = tuple(float(x) for x in np.linspace(0.0, T1, N_WINDOWS + 1)[1:-1])

    class ThrustJ2(js.AbstractDynamicObject):
        mu: object
        j2: object
        thrust: object  # (N_WINDOWS,) [m/s^2]
        name: str = eqx.field(static=True, default="point")

        def init_state(self, r_BN_N=(0.0, 0.0, 0.0), v_BN_N=(0.0, 0.0, 0.0)):
            f = lambda x: jnp.asarray(x, dtype=float)  # noqa: E731
            return {"r_BN_N": f(r_BN_N), "v_BN_N": f(v_BN_N)}

        def drift(self, t, y, args):
            r, v = y["r_BN_N"], y["v_BN_N"]
            r2 = r @ r
            k = 1.5 * self.j2 * orbit.R_EARTH**2 / r2
            zr = 5.0 * r[2] ** 2 / r2
            g = -self.mu / (r2 * jnp.sqrt(r2))
            a = g * r * (1.0 + k * jnp.stack([1.0 - zr, 1.0 - zr, 3.0 - zr]))
            i = jnp.clip(jnp.searchsorted(jnp.asarray(edges), t, side="right"), 0, N_WINDOWS - 1)
            a = a + self.thrust[i] * v / jnp.sqrt(v @ v)
            return {"r_BN_N": v, "v_BN_N": a}

        def breakpoints(self):
            return edges

    return ThrustJ2


def floor_program(rtol=RTOL):
    """The floor: Dopri8 with the same tableau and I controller as jaxsim's (accepted when the RMS
    error < 1, factor 0.9 eps^(-1/8) clipped to [1, 10] after an accepted and [0.2, 0.9] after a
    rejected step, last step clipped to T1) on the closed-form J2 drift of the flat state, in one
    `lax.while_loop` with nothing else. Returns `(jitted fn(x0, h0) -> (t, h, x, f, steps), x0)`."""
    import jax
    import jax.numpy as jnp

    import jaxsim as js
    from jaxsim._cores import _adaptive as ac

    pair = ac.pair_of(type(js.Dopri8())._unrolled_cls)
    s = pair.stages
    a = np.zeros((s, s))
    for i, row in enumerate(pair.a):
        a[i, : len(row)] = row
    b, e = np.asarray(pair.b), np.asarray(pair.e)  # the drift is autonomous: no nodes

    def f(x):
        r, v = x[:3], x[3:]
        r2 = r @ r
        k = 1.5 * orbit.J2 * orbit.R_EARTH**2 / r2
        zr = 5.0 * r[2] ** 2 / r2
        g = -orbit.MU / (r2 * jnp.sqrt(r2))
        return jnp.concatenate([v, g * r * (1.0 + k * jnp.stack([1.0 - zr, 1.0 - zr, 3.0 - zr]))])

    def comb(base, w, ks):
        terms = [wj * kj for wj, kj in zip(w, ks, strict=False) if wj != 0.0]
        return base + sum(terms[1:], terms[0])

    def body(carry):
        t, h, x, fx, n = carry
        h = jnp.minimum(h, T1 - t)
        ks = [fx]
        for i in range(1, s):
            ks.append(f(x + h * comb(0.0, a[i, :i], ks)))
        x1 = x + h * comb(0.0, b, ks)
        err = h * comb(0.0, e, ks)
        eps = jnp.sqrt(jnp.mean((err / (rtol + rtol * jnp.maximum(jnp.abs(x), jnp.abs(x1)))) ** 2))
        keep = eps < 1
        lo, hi = jnp.where(keep, 1.0, 0.2), jnp.where(keep, 10.0, 0.9)
        factor = jnp.clip(0.9 * eps ** (-1.0 / pair.order), lo, hi)
        f_next = ks[-1] if pair.fsal else f(x1)
        return (jnp.where(keep, t + h, t), h * factor, jnp.where(keep, x1, x),
                jnp.where(keep, f_next, fx), n + 1)  # fmt: skip

    def run(x0, h0):
        return jax.lax.while_loop(lambda cr: cr[0] < T1, body, (0.0, h0, x0, f(x0), 0))

    r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
    return js.jit(run), jnp.asarray(np.concatenate([r0, v0]))


# ---------------------------------------------------------------------------------------- rows
def heyoka_forward(tols=HEYOKA_TOLS):
    """heyoka integrators over the tolerance sweep: `(reference r, {tol: timed call}, errors)`."""
    if not orbit.heyoka_available():
        return None, {}, {}
    import heyoka as hy

    r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
    x0 = np.concatenate([r0, v0])
    ref = orbit._heyoka_case(x0, np.finfo(np.longdouble).eps, 1, fp_type=np.longdouble)
    r_ref = np.asarray(ref["r_final"], dtype=float)
    calls, errors = {}, {}
    for tol in tols:
        ta = hy.taylor_adaptive(orbit._heyoka_system(), x0, tol=tol)

        def call(ta=ta):
            ta.time = 0.0
            ta.state[:] = x0
            ta.propagate_until(T1)
            return np.zeros(())

        call()
        errors[tol] = float(np.linalg.norm(ta.state[:3] - r_ref))
        calls[tol] = call
    return r_ref, calls, errors


def forward_row(rounds: int, quick: bool = False) -> dict:
    import jax

    import jaxsim as js

    hy_ref, hy_calls, hy_errors = heyoka_forward(HEYOKA_TOLS_QUICK if quick else HEYOKA_TOLS)
    point, _ = orbit.point_models()
    r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
    y0 = point.init_state(r0, v0)

    def sim(solver):
        return lambda y: js.simulate(point, y, T1, solver=solver, rtol=RTOL, atol=RTOL,
                                     outputs=False)  # fmt: skip

    solvers = {"lean": js.Dopri8(), "lean looped": js.Dopri8(unrolled=False),
               "diffrax": js.Dopri8().to_diffrax()}  # fmt: skip
    if quick:
        solvers.pop("lean looped")
    cases, out = {}, {}
    for name, solver in solvers.items():
        fn = sim(solver)
        t0 = time.perf_counter()
        sol = fn(y0)
        first = time.perf_counter() - t0
        r = np.asarray(sol.ys["r_BN_N"][-1])
        out[name] = {
            "first_call_s": first,
            "num_steps": int(sol.stats["num_steps"]),
            "num_rejected": int(sol.stats["num_rejected_steps"]),
            "error_m": float(np.linalg.norm(r - hy_ref)) if hy_ref is not None else None,
        }
        cases[name] = lambda f=fn: f(y0).ys
    jitted = js.jit(lambda y: sim(js.Dopri8())(y).ys["r_BN_N"])
    jitted(y0)
    cases["lean jit"] = lambda: jitted(y0)
    out["lean jit"] = dict(out["lean"])
    # Whether XLA compiled the step loop into one function (small-loop hoisting, opt-in).
    hlo = jax.jit(lambda y: sim(js.Dopri8())(y).ys, compiler_options=js.compiler_options())
    out["lean jit"]["small_loop_hoisted"] = "xla_cpu_small_call" in (
        hlo.lower(y0).compile().as_text()
    )
    # Verner's 9(8) pair in `jaxsim.jit` (its own error: compared with heyoka at that error).
    v9 = js.Verner9()
    sol = sim(v9)(y0)
    out["verner9 jit"] = {
        "num_steps": int(sol.stats["num_steps"]),
        "num_rejected": int(sol.stats["num_rejected_steps"]),
        "error_m": float(np.linalg.norm(np.asarray(sol.ys["r_BN_N"][-1]) - hy_ref))
        if hy_ref is not None else None,
    }  # fmt: skip
    v9_jitted = js.jit(lambda y: sim(v9)(y).ys["r_BN_N"])
    v9_jitted(y0)
    cases["verner9 jit"] = lambda: v9_jitted(y0)
    floor, x0 = floor_program()
    fl = floor(x0, 10.0)
    out["floor"] = {
        "num_steps": int(fl[4]),
        "error_m": float(np.linalg.norm(np.asarray(fl[2][:3]) - hy_ref)) if hy_ref is not None
        else None,
    }  # fmt: skip
    cases["floor"] = lambda: floor(x0, 10.0)
    for tol, ta_fn in hy_calls.items():
        cases[f"heyoka {tol:.0e}"] = ta_fn
    best, times = _alternate(cases, rounds)
    paths = [*solvers, "lean jit", "verner9 jit", "floor"]
    for name in paths:
        out[name]["run_s"] = best[name]
        out[name]["us_per_step"] = best[name] / out[name]["num_steps"] * 1e6
    out["paths"] = paths
    out["lean_over_diffrax"] = _ratio(times, "lean", "diffrax")
    out["lean_over_jit"] = _ratio(times, "lean", "lean jit")
    out["jit_over_floor"] = _ratio(times, "lean jit", "floor")
    out["simulate_call_overhead_s"] = best["lean"] - best["lean jit"]
    if "lean looped" in solvers:
        out["looped_over_unrolled"] = _ratio(times, "lean looped", "lean")
    if hy_calls:
        tols = list(hy_calls)
        err_pts = [max(hy_errors[t], 1e-12) for t in tols]
        out["heyoka"] = {
            f"{t:.0e}": {"run_s": best[f"heyoka {t:.0e}"], "error_m": hy_errors[t]} for t in tols
        }
        err = out["lean"]["error_m"]
        per_round = [
            orbit.interp_loglog(err_pts, [times[f"heyoka {t:.0e}"][k] for t in tols], err)
            for k in range(rounds)
        ]
        eq = orbit.interp_loglog(err_pts, [best[f"heyoka {t:.0e}"] for t in tols], err)
        out["heyoka_at_equal_error_s"] = eq
        if eq and all(per_round):
            for name in paths:
                # heyoka at this path's own final error (the Dopri8 paths agree to ~1 %).
                own = [
                    orbit.interp_loglog(
                        err_pts, [times[f"heyoka {t:.0e}"][k] for t in tols], out[name]["error_m"]
                    )
                    for k in range(rounds)
                ]
                if all(own):
                    out[name]["over_heyoka"] = statistics.median(
                        x / h for x, h in zip(times[name], own, strict=True)
                    )
    return out


def stm_row(rounds: int, quick: bool = False) -> dict:
    import diffrax as dfx
    import jax
    import jax.numpy as jnp

    import jaxsim as js

    point, _ = orbit.point_models()
    r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
    x0 = jnp.asarray(np.concatenate([r0, v0]))

    def stm_fn(solver, adjoint=None, rtol=RTOL):
        def final(x):
            y0 = point.init_state(x[:3], x[3:])
            sol = js.simulate(
                point, y0, T1, solver=solver, rtol=rtol, atol=rtol, outputs=False,
                adjoint=adjoint or dfx.ForwardMode(),
            )  # fmt: skip
            return jnp.concatenate([sol.ys["r_BN_N"][-1], sol.ys["v_BN_N"][-1]])

        return js.jit(jax.jacfwd(final))

    cases, out = {}, {}
    fwd = js.jit(
        lambda x: js.simulate(
            point, point.init_state(x[:3], x[3:]), T1, solver=js.Dopri8(), rtol=RTOL, atol=RTOL,
            outputs=False,
        ).ys["r_BN_N"]
    )  # fmt: skip
    paths = [
        ("lean", js.Dopri8(), None, RTOL),
        ("lean sensitivity", js.Dopri8(), js.ForwardSensitivity(), RTOL),
        ("diffrax", js.Dopri8().to_diffrax(), None, RTOL),
        (f"lean {STM_TIGHT:.0e}", js.Dopri8(), None, STM_TIGHT),
        (f"lean sensitivity {STM_TIGHT:.0e}", js.Dopri8(), js.ForwardSensitivity(), STM_TIGHT),
    ]
    if quick:
        paths = paths[:2]
    out["paths"] = [p[0] for p in paths]
    for name, solver, adjoint, rtol in paths:
        g = stm_fn(solver, adjoint, rtol)
        t0 = time.perf_counter()
        stm = np.asarray(g(x0))
        out[name] = {"first_call_s": time.perf_counter() - t0, "stm": stm}
        cases[name] = lambda g=g: g(x0)
    fwd(x0)
    cases["lean forward"] = lambda: fwd(x0)
    if orbit.heyoka_available():
        import heyoka as hy

        vsys = hy.var_ode_sys(orbit._heyoka_system(), hy.var_args.vars, order=1)
        xs = np.asarray(x0)
        tas = {}
        for tol in (RTOL, 1e-15):
            t0 = time.perf_counter()
            ta = hy.taylor_adaptive(vsys, xs, tol=tol)
            compile_s = time.perf_counter() - t0

            def call(ta=ta):
                ta.time = 0.0
                ta.state[:6] = xs
                ta.state[6:] = np.eye(6).ravel()
                ta.propagate_until(T1)
                return np.zeros(())

            call()
            tas[tol] = (ta, compile_s)
            cases[f"heyoka {tol:.0e}"] = call
        ref = np.asarray(tas[1e-15][0].state[6:]).reshape(6, 6)
        out["heyoka"] = {
            "compile_s": tas[RTOL][1],
            "error": float(np.max(np.abs(np.asarray(tas[RTOL][0].state[6:]).reshape(6, 6) - ref))
                           / np.max(np.abs(ref))),
        }  # fmt: skip
        for name, *_ in paths:
            out[name]["error"] = float(np.max(np.abs(out[name]["stm"] - ref)) / np.max(np.abs(ref)))
    best, times = _alternate(cases, rounds)
    for name, *_ in paths:
        out[name]["run_s"] = best[name]
        out[name].pop("stm")
        if "heyoka" in out:
            out[name]["over_heyoka"] = _ratio(times, name, f"heyoka {RTOL:.0e}")
    out["lean_forward_s"] = best["lean forward"]
    out["lean_stm_over_forward"] = _ratio(times, "lean", "lean forward")
    out["sensitivity_over_forward"] = _ratio(times, "lean sensitivity", "lean forward")
    out["sensitivity_over_jacfwd"] = _ratio(times, "lean sensitivity", "lean")
    if "diffrax" in cases:
        out["lean_over_diffrax"] = _ratio(times, "lean", "diffrax")
    if "heyoka" in out:
        out["heyoka"]["run_s"] = best[f"heyoka {RTOL:.0e}"]
        out["lean_over_heyoka"] = out["lean"]["over_heyoka"]
        out["sensitivity_over_heyoka"] = out["lean sensitivity"]["over_heyoka"]
    return out


def gradient_row(rounds: int, quick: bool = False) -> dict:
    import diffrax as dfx
    import jax
    import jax.numpy as jnp

    import jaxsim as js

    cls = thrust_model()
    r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
    p0 = jnp.concatenate([jnp.array([orbit.MU, orbit.J2]), jnp.full(N_WINDOWS, THRUST)])

    def loss(p, solver, forward=False, adjoint=None, rtol=RTOL):
        m = cls(p[0], p[1], p[2:])
        sol = js.simulate(
            m, m.init_state(r0, v0), T1, solver=solver, rtol=rtol, atol=rtol, outputs=False,
            adjoint=adjoint or (dfx.ForwardMode() if forward else None),
        )  # fmt: skip
        r = sol.ys["r_BN_N"][-1]
        return r @ r / orbit.R_EARTH**2

    # Reference gradient: sensitivities in the step control at rtol 1e-14; the error figures are
    # relative to its largest element.
    sens = js.ForwardSensitivity()
    g_ref = np.asarray(jax.grad(lambda p: loss(p, js.Dopri8(), adjoint=sens, rtol=1e-14))(p0))

    cases, out = {}, {}
    solvers = (("lean", js.Dopri8()),) if quick else (
        ("lean", js.Dopri8()), ("diffrax", js.Dopri8().to_diffrax()))  # fmt: skip
    for name, solver in solvers:
        fns = {
            "forward": js.jit(lambda p, s=solver: loss(p, s)),
            "reverse": js.jit(jax.grad(lambda p, s=solver: loss(p, s))),
            "jacfwd": js.jit(jax.jacfwd(lambda p, s=solver: loss(p, s, True))),
        }
        out[name] = {}
        for kind, fn in fns.items():
            t0 = time.perf_counter()
            val = np.asarray(fn(p0))
            out[name][f"{kind}_first_call_s"] = time.perf_counter() - t0
            out[name][f"{kind}_value"] = val
            cases[f"{name} {kind}"] = lambda fn=fn: fn(p0)
    g = js.jit(jax.grad(lambda p: loss(p, js.Dopri8(), adjoint=sens)))
    t0 = time.perf_counter()
    g_sens = np.asarray(g(p0))
    out["lean sensitivity"] = {
        "reverse_first_call_s": time.perf_counter() - t0,
        "error_vs_ref": float(np.max(np.abs(g_sens - g_ref)) / np.max(np.abs(g_ref))),
    }
    cases["lean sensitivity reverse"] = lambda: g(p0)
    for name, _ in solvers:
        out[name]["error_vs_ref"] = float(
            np.max(np.abs(out[name]["reverse_value"] - g_ref)) / np.max(np.abs(g_ref))
        )
    best, times = _alternate(cases, rounds)
    out["lean sensitivity"]["reverse_s"] = best["lean sensitivity reverse"]
    out["lean sensitivity"]["over_forward"] = _ratio(
        times, "lean sensitivity reverse", "lean forward"
    )
    for name, _ in solvers:
        for kind in ("forward", "reverse", "jacfwd"):
            out[name][f"{kind}_s"] = best[f"{name} {kind}"]
        out[name]["reverse_over_forward"] = _ratio(times, f"{name} reverse", f"{name} forward")
        out[name]["jacfwd_over_forward"] = _ratio(times, f"{name} jacfwd", f"{name} forward")
    g_l = out["lean"]["reverse_value"]
    if "diffrax" in out:
        g_d = out["diffrax"]["reverse_value"]
        out["lean_vs_diffrax_grad_rel"] = float(np.max(np.abs(g_l - g_d)) / np.max(np.abs(g_d)))
    fwd_l = out["lean"]["jacfwd_value"]
    out["lean_reverse_vs_forward_rel"] = float(np.max(np.abs(g_l - fwd_l)) / np.max(np.abs(fwd_l)))
    out["paths"] = [name for name, _ in solvers]
    for name, _ in solvers:
        for kind in ("forward", "reverse", "jacfwd"):
            out[name].pop(f"{kind}_value")
    return out


def combined_row(rounds: int, quick: bool = False) -> dict:
    """The `combined` spacecraft: forward, reverse gradient, one forward-mode tangent, Basilisk."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import jaxsim as js
    from effectors.scenarios import combined
    from tests.reference import basilisk_scenarios as bs

    spec = bs.load_spec("combined")
    dt = spec["time"]["step_s"]
    t1 = COMBINED_T1_QUICK if quick else COMBINED_T1
    n = int(round(t1 / dt))
    sc, y0, _ = combined()
    params, static = eqx.partition(sc, eqx.is_inexact_array)

    def scalar(p):
        sol = js.simulate(eqx.combine(p, static), y0, t1, dt=dt, outputs=False)
        hub = sol.ys["hub"]
        return jnp.sum(hub["sigma_BN"][-1]) + jnp.sum(hub["omega_BN_B"][-1])

    leaves = jax.tree_util.tree_leaves(params)
    keys = jax.random.split(jax.random.PRNGKey(0), len(leaves))
    direction = jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(params),
        [jax.random.normal(k, jnp.shape(x), jnp.result_type(x)) for k, x in zip(keys, leaves)],
    )
    fns = {
        "forward": js.jit(scalar),
        "reverse": js.jit(jax.grad(scalar)),
        "jvp": js.jit(lambda p, v: jax.jvp(scalar, (p,), (v,))[1]),
    }
    args = {"forward": (params,), "reverse": (params,), "jvp": (params, direction)}
    out = {"horizon_s": t1, "num_steps": n, "n_parameters": int(sum(np.size(x) for x in leaves))}
    cases = {}
    for kind, fn in fns.items():
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args[kind]))
        out[f"{kind}_first_call_s"] = time.perf_counter() - t0
        cases[kind] = lambda fn=fn, a=args[kind]: fn(*a)
    cases["simulate"] = lambda: js.simulate(sc, y0, t1, dt=dt, outputs=False).ys
    cases["simulate"]()
    if bs.available():

        def basilisk():
            return Timed(bs.BasiliskScenario(spec, duration=t1, record=False).run())

        cases["basilisk"] = basilisk
        out["basilisk"] = bs.version()
    best, times = _alternate(cases, rounds)
    for kind in cases:
        out[f"{kind}_s"] = best[kind]
        out[f"{kind}_us_per_step"] = best[kind] / n * 1e6
    out["reverse_over_forward"] = _ratio(times, "reverse", "forward")
    out["jvp_over_forward"] = _ratio(times, "jvp", "forward")
    if "basilisk" in cases:
        out["forward_over_basilisk"] = _ratio(times, "forward", "basilisk")
        out["simulate_over_basilisk"] = _ratio(times, "simulate", "basilisk")
    return out


_COMPILE_SCRIPT = r"""
import json, sys, time
t_start = time.perf_counter()
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, sys.argv[3])
import jaxsim as js
js.enable_cache(sys.argv[2])
from benchmarks import bench_orbit_adaptive as orbit
case = sys.argv[1]
t_import = time.perf_counter() - t_start
name, _, kind = case.partition(":")
if name == "combined":
    import equinox as eqx
    from effectors.scenarios import combined
    sc, y0, _ = combined()
    params, static = eqx.partition(sc, eqx.is_inexact_array)
    def scalar(p):
        sol = js.simulate(eqx.combine(p, static), y0, float(sys.argv[4]), dt=0.1, outputs=False)
        hub = sol.ys["hub"]
        return jnp.sum(hub["sigma_BN"][-1]) + jnp.sum(hub["omega_BN_B"][-1])
    fn, arg = js.jit(jax.grad(scalar)), params
else:
    point, _ = orbit.point_models()
    r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
    throw = not name.endswith(" throw=False")
    name = name.removesuffix(" throw=False")
    t1 = 3600.0
    if name.endswith(" orbit"):  # one Keplerian period of the orbit (about 5677 s)
        name, t1 = name.removesuffix(" orbit"), float(2 * np.pi * np.sqrt(orbit.ELEMENTS[0] ** 3 / orbit.MU))
    solver = {"lean": js.Dopri8(), "lean looped": js.Dopri8(unrolled=False),
              "diffrax": js.Dopri8().to_diffrax()}[name.removesuffix(" sensitivity")]
    adjoint = js.ForwardSensitivity() if name.endswith(" sensitivity") else None
    def sim(scale):
        return js.simulate(point, point.init_state(r0 * scale, v0), t1, solver=solver,
                           rtol=1e-12, atol=1e-12, outputs=False, adjoint=adjoint, throw=throw)
    if kind == "grad":
        def loss(scale):
            r = sim(scale).ys["r_BN_N"][-1]
            return r @ r
        fn, arg = js.jit(jax.grad(loss)), jnp.asarray(1.0)
    else:
        fn, arg = (lambda scale: sim(scale).ys), 1.0
t0 = time.perf_counter()
trace = None
if kind == "grad":  # trace and lower first (the call then compiles, or loads, the lowering)
    fn.lower(arg)
    trace = time.perf_counter() - t0
jax.block_until_ready(fn(arg))
first = time.perf_counter() - t0
print(json.dumps({"first_call_s": first, "trace_lower_s": trace, "import_s": t_import}))
"""


COMPILE_CASES = (
    "lean orbit", f"lean orbit{OPT_OUT_SUFFIX}", "lean", "lean looped", "diffrax", "lean:grad", "lean throw=False:grad", "lean looped:grad",
    "diffrax:grad", "lean sensitivity:grad", "lean looped sensitivity:grad", "combined:grad",
    f"lean:grad{OPT_OUT_SUFFIX}", f"combined:grad{OPT_OUT_SUFFIX}",
)  # fmt: skip
COMPILE_CASES_QUICK = ("lean", "lean throw=False:grad")


def compile_rows(cases=COMPILE_CASES, stored=None, quick=False) -> dict:
    """First call (trace + compile) of each program in a fresh process, then on a restart
    (`cases` measured, merged into the `stored` rows)."""
    out = dict(stored or {})
    root = str(Path(__file__).resolve().parents[1])
    horizon = str(COMBINED_T1_QUICK if quick else COMBINED_T1)
    for case in cases:
        opted_out = case.endswith(OPT_OUT_SUFFIX)
        env = _opted_out_env() if opted_out else None
        with tempfile.TemporaryDirectory() as tmp:
            runs = []
            for _ in range(2):  # cold, then restart with the persistent cache warm
                proc = subprocess.run(
                    [sys.executable, "-c", _COMPILE_SCRIPT, case.removesuffix(OPT_OUT_SUFFIX),
                     tmp, root, horizon], capture_output=True, text=True, check=True, env=env,
                )  # fmt: skip
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        out[case] = {
            "cold_s": runs[0]["first_call_s"],
            "restart_s": runs[1]["first_call_s"],
            "restart_trace_lower_s": runs[1]["trace_lower_s"],
        }
    return out


def _opted_out_env() -> dict:
    """This process's environment with `JAXSIM_SMALL_LOOPS=0` and no small-loop threshold of its
    own in `XLA_FLAGS` (which would win over the opt-out)."""
    flags = re.sub(r",?xla_cpu_small_while_loop_byte_threshold=\d+", "",
                   os.environ.get("XLA_FLAGS", ""))  # fmt: skip
    flags = re.sub(r"--xla_backend_extra_options=(?:,|(?=\s|$))", "--xla_backend_extra_options=",
                   flags)  # fmt: skip
    flags = re.sub(r"--xla_backend_extra_options=(?=\s|$)", "", flags).strip()
    key, _, value = OPT_OUT.partition("=")
    return dict(os.environ, XLA_FLAGS=flags, **{key: value})


def opted_out_row(row: str, rounds: int, quick: bool = False) -> dict:
    """`row` (`forward`, `stm`, `gradient50` or `combined`) in a child process with
    `JAXSIM_SMALL_LOOPS=0`."""
    root = str(Path(__file__).resolve().parents[1])
    cmd = [sys.executable, "-m", "benchmarks.bench_lean", "--child", row, "--rounds",
           str(rounds), "--inner", str(_INNER)] + (["--quick"] if quick else [])  # fmt: skip
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=_opted_out_env(), cwd=root, check=True
    )
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["opted_out"] = OPT_OUT
    return row


ROWS = ("forward", "forward_opted_out", "stm", "stm_opted_out", "gradient50",
        "gradient50_opted_out", "combined", "combined_opted_out", "compile")  # fmt: skip


def run(
    rounds: int = 5, only=None, inner: int = 3, compile_cases=None, quick: bool = False,
    out_dir=None, commit=None,
) -> dict:  # fmt: skip
    """All rows (or the rows named in `only`, merged into the stored results)."""
    import jaxsim as js  # first: its import sets XLA_FLAGS before JAX creates its backend

    global _INNER
    _INNER = inner
    results = Path(out_dir) if out_dir else cm.RESULTS
    data = {"environment": cm.environment(), "rtol": RTOL, "rounds": rounds, "inner": inner,
            "quick": quick, "commit": commit, "small_loops": js.small_loops()._asdict()}  # fmt: skip
    if only:
        stored = results / f"{NAME}.json"
        if stored.exists():
            data = {**json.loads(stored.read_text()), **data}
    if orbit.heyoka_available():
        data["heyoka_version"] = orbit._heyoka_version()
    default_compile = COMPILE_CASES_QUICK if quick else COMPILE_CASES
    few = max(2, rounds // 2) if not quick else 1  # rounds of the slower rows
    row_rounds = {"stm": few, "stm_opted_out": few, "gradient50": few,
                  "gradient50_opted_out": few}  # fmt: skip
    rows = {
        "forward": lambda: forward_row(rounds, quick),
        "forward_opted_out": lambda: opted_out_row("forward", rounds, quick),
        "stm": lambda: stm_row(few, quick),
        "stm_opted_out": lambda: opted_out_row("stm", few, quick),
        "gradient50": lambda: gradient_row(few, quick),
        "gradient50_opted_out": lambda: opted_out_row("gradient50", few, quick),
        "combined": lambda: combined_row(rounds, quick),
        "combined_opted_out": lambda: opted_out_row("combined", rounds, quick),
        "compile": lambda: compile_rows(
            compile_cases or default_compile, data.get("compile") if compile_cases else None,
            quick,
        ),
    }  # fmt: skip
    for key, fn in rows.items():
        if only and key not in only:
            continue
        t0 = time.perf_counter()
        try:
            data[key] = fn()
            data.pop(f"{key}_error", None)  # an earlier run's failure of this row
            data[f"{key}_timing"] = {
                "rounds": row_rounds.get(key, rounds), "calls_per_timing": inner,
                "wall_s": time.perf_counter() - t0,
                "load_1m": os.getloadavg()[0],
            }  # fmt: skip
        except Exception as err:  # noqa: BLE001 - a failed row is recorded, the others still run
            data[f"{key}_error"] = f"{type(err).__name__}: {err}"
        _write(results, data)  # partial results after each row
    return data


def _write(results: Path, data: dict) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{NAME}.json").write_text(json.dumps(data, indent=1, default=cm._json_default))
    (results / f"{NAME}.md").write_text(to_markdown(data).rstrip() + "\n")


def issue_table(data: dict) -> list[dict]:
    """The issue's table: one row per figure, its measured value, anchor and target."""
    rows = []

    def add(figure, value, anchor, target, met):
        rows.append({"figure": figure, "jaxsim": value, "anchor": anchor, "target": target,
                     "met": None if met is None else bool(met)})  # fmt: skip

    f = cm.fmt
    fw = data.get("forward")
    if fw and "lean" in fw:
        oh = fw["lean"].get("over_heyoka")
        ohj = fw["lean jit"].get("over_heyoka")
        hy = fw.get("heyoka_at_equal_error_s")
        add("J2 day forward, equal final error (`simulate` / in `jaxsim.jit`)",
            f"{f(fw['lean']['run_s'] * 1e3)} / {f(fw['lean jit']['run_s'] * 1e3)} ms "
            f"({f(oh)}x / {f(ohj)}x)", f"heyoka {f(hy * 1e3 if hy else None)} ms", "<= 3x heyoka",
            ohj is not None and ohj <= TARGETS["forward_over_heyoka"])  # fmt: skip
        v9 = fw.get("verner9 jit")
        if v9 and "run_s" in v9:
            add("... `Verner9` (Verner's 9(8) pair) in `jaxsim.jit`, at its own final error",
                f"{f(v9['run_s'] * 1e3)} ms ({f(v9.get('over_heyoka'))}x), {v9['num_steps']} "
                f"steps, error {f(v9['error_m'])} m", "heyoka at that error", "<= 3x heyoka",
                v9.get("over_heyoka") is not None
                and v9["over_heyoka"] <= TARGETS["forward_over_heyoka"])  # fmt: skip
        fl = fw.get("floor", {})
        add(
            "... floor: minimal Dopri8 `lax.while_loop`",
            f"{f(fl.get('run_s', 0) * 1e3)} ms "
            f"({f(fl.get('over_heyoka'))}x, {f(fl.get('us_per_step'))} us/step)",
            "",
            "",
            None,
        )
        sl = data.get("forward_opted_out")
        if sl and "lean jit" in sl:
            add(f"... opted out of small-loop hoisting (`{OPT_OUT}`, `forward_opted_out`)",
                f"{f(sl['lean jit']['run_s'] * 1e3)} ms in `jaxsim.jit` "
                f"({f(sl['lean jit'].get('over_heyoka'))}x), `simulate` "
                f"{f(sl['lean']['run_s'] * 1e3)} ms, floor {f(sl['floor']['run_s'] * 1e3)} ms",
                f"heyoka {f((sl.get('heyoka_at_equal_error_s') or 0) * 1e3)} ms", "", None)  # fmt: skip
    st = data.get("stm")
    if st and "lean" in st:
        tight = f"lean {STM_TIGHT:.0e}"
        best = min((p for p in st.get("paths", []) if st[p].get("over_heyoka")),
                   key=lambda p: st[p]["run_s"], default=None)  # fmt: skip
        hy = st.get("heyoka", {})
        add(
            "6x6 STM (jacfwd / ForwardSensitivity, rtol 1e-12)",
            f"{f(st['lean']['run_s'] * 1e3)} / {f(st['lean sensitivity']['run_s'] * 1e3)} ms "
            f"({f(st['lean'].get('over_heyoka'))}x / "
            f"{f(st['lean sensitivity'].get('over_heyoka'))}x), error "
            f"{f(st['lean'].get('error'))} / {f(st['lean sensitivity'].get('error'))}",
            f"heyoka {f(hy.get('run_s', 0) * 1e3)} ms, error {f(hy.get('error'))}",
            "<= 2x heyoka",
            best is not None and st[best]["over_heyoka"] <= TARGETS["stm_over_heyoka"],
        )
        if tight in st:
            add(
                f"... at rtol {STM_TIGHT:.0e} (jacfwd)",
                f"{f(st[tight]['run_s'] * 1e3)} ms, error {f(st[tight].get('error'))}",
                "",
                "",
                None,
            )
        sl = data.get("stm_opted_out")
        if sl and "lean" in sl:
            add(f"... opted out of small-loop hoisting (`{OPT_OUT}`, `stm_opted_out`)",
                f"{f(sl['lean']['run_s'] * 1e3)} / {f(sl['lean sensitivity']['run_s'] * 1e3)} ms "
                f"({f(sl['lean'].get('over_heyoka'))}x / "
                f"{f(sl['lean sensitivity'].get('over_heyoka'))}x)",
                f"heyoka {f(sl.get('heyoka', {}).get('run_s', 0) * 1e3)} ms", "", None)  # fmt: skip
    gr = data.get("gradient50")
    if gr and "lean" in gr:
        ls = gr["lean sensitivity"]
        add(
            "gradient w.r.t. 50 parameters, reverse (default adjoint) / heyoka",
            f"{f(gr['lean']['reverse_s'] * 1e3)} ms",
            "heyoka 2.17 ms (the issue's figure, not run here)",
            "<= 2x heyoka",
            gr["lean"]["reverse_s"] * 1e3 <= TARGETS["grad50_over_heyoka_ms"],
        )
        add(
            "... / forward",
            f"{f(gr['lean']['reverse_over_forward'])}x",
            "",
            "<= 5x forward",
            gr["lean"]["reverse_over_forward"] <= TARGETS["grad50_over_forward"],
        )
        add(
            "... jacfwd (50 tangents) / ForwardSensitivity",
            f"{f(gr['lean']['jacfwd_s'] * 1e3)} ms ({f(gr['lean']['jacfwd_over_forward'])}x) / "
            f"{f(ls['reverse_s'] * 1e3)} ms ({f(ls['over_forward'])}x)",
            "",
            "",
            None,
        )
        add(
            "that gradient's error (vs ForwardSensitivity at rtol 1e-14)",
            f"reverse {f(gr['lean']['error_vs_ref'])}, ForwardSensitivity {f(ls['error_vs_ref'])}",
            "heyoka 9.2e-9 (issue)",
            "<= 1e-7 (opt-in)",
            ls["error_vs_ref"] <= TARGETS["grad50_error"],
        )
    go = data.get("gradient50_opted_out")
    if go and "lean" in go:
        add(f"... opted out of small-loop hoisting (`{OPT_OUT}`, `gradient50_opted_out`)",
            f"reverse {f(go['lean']['reverse_s'] * 1e3)} ms, "
            f"{f(go['lean']['reverse_over_forward'])}x forward "
            f"({f(go['lean']['forward_s'] * 1e3)} ms), error {f(go['lean'].get('error_vs_ref'))}",
            "", "", None)  # fmt: skip
    cp = data.get("compile", {})
    for case in ("lean orbit", f"lean orbit{OPT_OUT_SUFFIX}"):
        if case in cp:
            add(f"first one-orbit `simulate` (J2, Dopri8, rtol 1e-12, `{case}`), cold",
                f"{f(cp[case]['cold_s'])} s", "", "<= 1.5 s" if case == "lean orbit" else "",
                cp[case]["cold_s"] <= TARGETS["first_orbit_s"] if case == "lean orbit" else None)  # fmt: skip
    for case in ("lean:grad", "lean throw=False:grad"):
        if case in cp:
            r = cp[case]
            add(f"Dopri8 gradient program compile (`{case}`), cold / restart",
                f"{f(r['cold_s'])} / {f(r['restart_s'])} s (restart trace+lower "
                f"{f(r.get('restart_trace_lower_s'))} s)", "heyoka 3.4-5.7 s, restart 0.06 s",
                "<= 3 s, restart <= 0.5 s",
                r["cold_s"] <= TARGETS["compile_cold_s"]
                and r["restart_s"] <= TARGETS["compile_restart_s"])  # fmt: skip
    cb = data.get("combined")
    if cb:
        add(
            f"`combined` reverse gradient / forward ({cb['n_parameters']} parameters)",
            f"{f(cb['reverse_over_forward'])}x",
            "cheap-gradient bound 3-5x",
            "<= 4x",
            cb["reverse_over_forward"] <= TARGETS["combined_grad_over_forward"],
        )
        if "combined:grad" in cp:
            r = cp["combined:grad"]
            add(
                "`combined` first gradient, cold (fresh process) / restart",
                f"{f(r['cold_s'])} / {f(r['restart_s'])} s",
                "",
                "<= 3 s",
                r["cold_s"] <= TARGETS["combined_first_grad_s"],
            )
        if f"combined:grad{OPT_OUT_SUFFIX}" in cp:
            r = cp[f"combined:grad{OPT_OUT_SUFFIX}"]
            add(
                f"... opted out of small-loop hoisting (`{OPT_OUT}`)",
                f"{f(r['cold_s'])} / {f(r['restart_s'])} s",
                "",
                "",
                None,
            )
        if "forward_over_basilisk" in cb:
            add(
                "`combined` per step / Basilisk (in `jaxsim.jit` / `simulate`)",
                f"{f(cb['forward_over_basilisk'])} / {f(cb['simulate_over_basilisk'])} "
                f"({f(cb['forward_us_per_step'])} vs {f(cb['basilisk_us_per_step'])} us/step)",
                "plain C ~0.05",
                "<= 0.08",
                cb["forward_over_basilisk"] <= TARGETS["combined_over_bsk"],
            )
        cs = data.get("combined_opted_out")
        if cs and "forward_over_basilisk" in cs:
            add(
                f"... opted out of small-loop hoisting (`{OPT_OUT}`, `combined_opted_out`)",
                f"{f(cs['forward_over_basilisk'])} ({f(cs['forward_us_per_step'])} vs "
                f"{f(cs['basilisk_us_per_step'])} us/step); gradient "
                f"{f(cs['reverse_over_forward'])}x ({f(cs['reverse_s'] * 1e3)} ms, first call "
                f"{f(cs.get('reverse_first_call_s'))} s), one tangent "
                f"{f(cs['jvp_over_forward'])}x forward",
                "",
                "",
                None,
            )
        add(
            "forward mode on the RK4 path, one tangent / forward",
            f"{f(cb['jvp_over_forward'])}x",
            "2x on the adaptive path",
            "<= 2.5x",
            cb["jvp_over_forward"] <= TARGETS["combined_jvp_over_forward"],
        )
    return rows


def to_markdown(data: dict) -> str:
    f = cm.fmt
    env = data["environment"]
    loops = data.get("small_loops", {})
    lines = [
        f"# {TITLE}",
        "",
        f"Machine: {env.get('cpu_count', '?')} CPUs, 1-min load {f(env.get('loadavg_1m'))} at "
        f"{env.get('time')}; jax {env.get('jax')}, heyoka {data.get('heyoka_version', '-')}, "
        f"Basilisk {env.get('bsk') or '-'}; code at commit {data.get('commit') or '-'}. rtol = atol = {data['rtol']:g}, {data['rounds']} "
        f"alternated rounds (min of {data.get('inner', 3)} calls each; ratios: median per round)"
        + (" **quick run (smoke test)**" if data.get("quick") else "")
        + ".",
        "",
        f"XLA small-loop hoisting (`jaxsim.small_loops()`, jaxsim's programs by default): threshold "
        f"{loops.get('threshold')} bytes, in effect: {loops.get('effective')} "
        f"({loops.get('reason', '-')}). The `*_opted_out` rows and compile cases run with "
        f"`{OPT_OUT}`.",
        "",
        "## Issue 27's table",
        "",
        "| figure | jaxsim | anchor | target | met |",
        "|---|---|---|---|---|",
    ]
    for r in issue_table(data):
        met = {None: "", True: "yes", False: "no"}[r["met"]]
        lines.append(f"| {r['figure']} | {r['jaxsim']} | {r['anchor']} | {r['target']} | {met} |")
    lines.append("")
    for key in ("forward", "forward_opted_out"):
        if key not in data:
            continue
        fw = data[key]
        title = "J2 LEO, one day, Dopri8, forward"
        if key == "forward_opted_out":
            title += f" (child process, `{OPT_OUT}`: no small-loop hoisting)"
        lines += [f"## {title}", "",
                  "| path | run [ms] | us / step | steps | rejected | error [m] | / heyoka at equal "
                  "error |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for name in fw.get("paths", ()):
            r = fw[name]
            lines.append(
                f"| {name} | {f(r['run_s'] * 1e3)} | {f(r.get('us_per_step'))} | "
                f"{r['num_steps']} | {r.get('num_rejected', '-')} | {f(r.get('error_m'))} | "
                f"{f(r.get('over_heyoka'))} |"
            )
        lines += [
            "",
            f"heyoka at the lean run's error: {f((fw.get('heyoka_at_equal_error_s') or 0) * 1e3)}"
            f" ms. `simulate` / in `jaxsim.jit`: {f(fw.get('lean_over_jit'))} (the call's work in "
            f"Python: {f(fw.get('simulate_call_overhead_s', 0) * 1e3)} ms); in `jaxsim.jit` / "
            f"floor: {f(fw.get('jit_over_floor'))}; lean / diffrax: "
            f"{f(fw.get('lean_over_diffrax'))}; looped / unrolled stages: "
            f"{f(fw.get('looped_over_unrolled'))}; loop compiled as one function (small-loop "
            f"hoisting): {fw.get('lean jit', {}).get('small_loop_hoisted')}.",
            "",
        ]
    for key in ("stm", "stm_opted_out"):
        if key not in data:
            continue
        s = data[key]
        title = "6x6 state transition matrix"
        if key == "stm_opted_out":
            title += f" (child process, `{OPT_OUT}`: no small-loop hoisting)"
        lines += [f"## {title}", "",
                  "`lean`, `diffrax`: `jax.jacfwd` with `adjoint=diffrax.ForwardMode()` (the "
                  "derivative of the state-controlled discretisation); `lean sensitivity`: "
                  "`adjoint=js.ForwardSensitivity()` (sensitivities in the step control). rtol = "
                  "atol = 1e-12 unless the path names another.", "",
                  "| path | run [ms] | / heyoka 1e-12 | rel. error vs heyoka var. 1e-15 |",
                  "|---|---|---|---|"]  # fmt: skip
        for name in [*s.get("paths", []), "heyoka"]:
            if name in s:
                lines.append(
                    f"| {name} | {f(s[name]['run_s'] * 1e3)} | {f(s[name].get('over_heyoka'))} | "
                    f"{f(s[name].get('error'))} |"
                )
        lines += [
            "",
            f"lean STM / lean forward: {f(s['lean_stm_over_forward'])}; lean / diffrax: "
            f"{f(s.get('lean_over_diffrax'))}. lean sensitivity / lean forward: "
            f"{f(s.get('sensitivity_over_forward'))}; / lean jacfwd: "
            f"{f(s.get('sensitivity_over_jacfwd'))}.",
            "",
        ]
    # Why the diffrax gradient can be wrong with hoisting on (not said of the opted-out table).
    _REPLAY_NOTE = (
        " The diffrax row's gradient (diffrax's checkpointing adjoint) recomputes the steps and "
        "decides them again; with small-loop hoisting on, the recomputation can round, and so "
        "decide, differently and the gradient is then wrong (`jaxsim.ReplayedDecisionsWarning`, "
        "`docs/engine.md`); jaxsim's own adjoint records its steps."
    )
    for key in ("gradient50", "gradient50_opted_out"):
        if key not in data:
            continue
        g = data[key]
        flag = (
            f" (child process, `{OPT_OUT}`: no small-loop hoisting)" if "opted_out" in key else ""
        )
        lines += [f"## Gradient w.r.t. 50 parameters (48 thrust windows, mu, J2){flag}", "",
                  "| path | forward [ms] | reverse [ms] | reverse / forward | jacfwd [ms] | "
                  "jacfwd / forward | reverse error |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for name in g.get("paths", ("lean", "diffrax")):
            r = g[name]
            lines.append(
                f"| {name} | {f(r['forward_s'] * 1e3)} | {f(r['reverse_s'] * 1e3)} | "
                f"{f(r['reverse_over_forward'])} | {f(r['jacfwd_s'] * 1e3)} | "
                f"{f(r['jacfwd_over_forward'])} | {f(r.get('error_vs_ref'))} |"
            )
        ls = g["lean sensitivity"]
        lines += [
            "",
            f"`adjoint=js.ForwardSensitivity()` (`jax.grad`; 50 sensitivities in the step "
            f"control): {f(ls['reverse_s'] * 1e3)} ms, {f(ls['over_forward'])} x forward, error "
            f"{f(ls['error_vs_ref'])}. Errors: max |g - g_ref| / max |g_ref|, g_ref the "
            "`ForwardSensitivity` gradient at rtol 1e-14. lean vs diffrax gradient: "
            f"{f(g.get('lean_vs_diffrax_grad_rel'))}; lean reverse vs lean forward mode: "
            f"{f(g['lean_reverse_vs_forward_rel'])}." + ("" if flag else _REPLAY_NOTE),
            "",
        ]
    for key in ("combined", "combined_opted_out"):
        if key not in data:
            continue
        c = data[key]
        flag = f" (child process, `{OPT_OUT}`: no small-loop hoisting)" if "opted_out" in c else ""
        lines += [
            f"## `combined` spacecraft, RK4 0.1 s, {f(c['horizon_s'])} s "
            f"({c['num_steps']} steps), {c['n_parameters']} parameters{flag}",
            "",
            "| program | first call [s] | run [ms] | us / step |",
            "|---|---|---|---|",
        ]
        for kind in ("forward", "reverse", "jvp", "simulate", "basilisk"):
            if f"{kind}_s" in c:
                lines.append(
                    f"| {kind} | {f(c.get(f'{kind}_first_call_s'))} | "
                    f"{f(c[f'{kind}_s'] * 1e3)} | {f(c[f'{kind}_us_per_step'])} |"
                )
        lines += [
            "",
            "`forward`, `reverse`, `jvp`: `jaxsim.jit` of a final-state scalar, its "
            "`jax.grad` and one `jax.jvp` tangent; `simulate`: the public call; "
            "`basilisk`: `ExecuteSimulation()` of the same run without recorders.",
            "",
        ]
    c = data.get("compile", {})
    if c:
        lines += ["## First call in a fresh process (trace + compile)", "",
                  "J2 1 h Dopri8 (`:grad`: `jax.grad` in `jaxsim.jit`), `combined` 600 s RK4. "
                  "Restart: a second process with `jaxsim.enable_cache()` on the same folder.", "",
                  "| program | cold [s] | restart [s] | restart: trace + lower [s] |",
                  "|---|---|---|---|"]  # fmt: skip
        for name, r in c.items():
            lines.append(
                f"| {name} | {f(r['cold_s'])} | {f(r['restart_s'])} | "
                f"{f(r.get('restart_trace_lower_s'))} |"
            )
        lines.append("")
    timing = [
        f"- {k[: -len('_timing')]}: {v['rounds']} rounds, min of {v['calls_per_timing']} calls, "
        f"{f(v.get('wall_s'))} s, load at its end {f(v.get('load_1m'))}"
        for k, v in data.items()
        if k.endswith("_timing")
    ]
    if timing:
        lines += ["Timing per row (rows may come from separate runs, `--only`):", *timing]
    errors = [f"- {k}: {v}" for k, v in data.items() if k.endswith("_error")]
    if errors:
        lines += ["", "Rows that failed:", *errors]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    # jaxsim hoists its own programs' small loops by default (docs/engine.md): the main rows run in
    # this process as a user's would, the opted-out rows in a child process with JAXSIM_SMALL_LOOPS=0.
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inner", type=int, default=3, help="calls per timing (min taken)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 round, short runs")
    parser.add_argument("--only", nargs="*", help=f"rows to rerun, of {ROWS}")
    parser.add_argument("--out", help="results folder (default benchmarks/results)")
    parser.add_argument(
        "--compile-cases", nargs="*", help=f"compile programs to rerun, of {COMPILE_CASES}"
    )
    parser.add_argument("--commit", help="the measured code's commit, recorded in the results")
    parser.add_argument(
        "--child", choices=("forward", "stm", "gradient50", "combined"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.inner = 1, 1
    if args.child:  # `*_opted_out`: the row as JSON on stdout
        global _INNER
        _INNER = args.inner
        fn = {"forward": forward_row, "stm": stm_row, "gradient50": gradient_row,
              "combined": combined_row}[args.child]  # fmt: skip
        print(json.dumps(fn(args.rounds, args.quick), default=cm._json_default))
        return 0
    data = run(args.rounds, args.only, args.inner, args.compile_cases, args.quick, args.out,
               args.commit)  # fmt: skip
    print(to_markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
