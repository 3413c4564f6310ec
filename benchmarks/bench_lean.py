r"""Benchmark (issue #27): jaxsim's own adaptive core vs the diffrax path vs heyoka, side by side.

Problem: the J2 LEO of `bench_orbit_adaptive` (Earth point mass + J2, 500 km x 0.001 at 51.6 deg,
one day), `atol = rtol` in m and m/s, Dopri8. Compared in one process, alternated round by round
(each figure the minimum over the rounds of the minimum of a few calls; ratios are the median of
the per-round ratios, so that a load spike on the shared machine hits both sides of a ratio):

- `lean`: `simulate(..., solver=Dopri8())`, jaxsim's adaptive core (`jaxsim._adaptive_core`),
  stages written out (`unrolled=True`, the default for Dopri8);
- `lean looped`: the same with `Dopri8(unrolled=False)` (the stages in a `fori_loop`);
- `diffrax`: `simulate(..., solver=Dopri8().to_diffrax())`, the pair run in `diffrax.diffeqsolve`
  (the path every adaptive run took before);
- heyoka's Taylor integrator on the same equations (tolerance sweep), interpolated log-log to the
  final-position error of the jaxsim run ("equal final error"); reference: heyoka in extended
  precision (`numpy.longdouble`).

Rows:

1. forward run at rtol 1e-12 (time, steps, error);
2. 6x6 state transition matrix: `jax.jacfwd` of the final state w.r.t. the initial state
   (`adjoint=diffrax.ForwardMode()`, and `adjoint=js.ForwardSensitivity()`: the sensitivities
   integrated in the step control) vs heyoka's variational equations (`var_ode_sys`, order 1) at
   the same tolerance; accuracy: max |STM - STM_ref| / max |STM_ref| against heyoka's variational
   run at tolerance 1e-15;
3. gradient of |r(T)|^2 w.r.t. 50 parameters (48 piecewise-constant along-track thrust
   accelerations over 30-minute windows, mu, J2; the window edges are breakpoints): reverse mode
   (`jax.grad`) and forward mode (`jax.jacfwd`, 50 tangents) over the forward run, lean vs
   diffrax, and `jax.grad` with `adjoint=js.ForwardSensitivity()`; errors against the
   sensitivity mode at rtol 1e-14 (heyoka not run for this row);
4. compile time of the Dopri8 forward program and of its gradient programs (default adjoint;
   `ForwardSensitivity`) (d|r(T)|^2 / d s, s a scale of the initial position) in a
   fresh process, then on a restart served by JAX's persistent compilation cache and jaxsim's
   program cache (each in its own subprocess; the caches in a temporary folder).

Run: `python -m benchmarks.bench_lean [--rounds N]` (writes `benchmarks/results/lean.json`, `.md`).
heyoka is optional (`pip install 'jaxsim-spacecraft[bench]'`); without it those columns are empty.
"""

from __future__ import annotations

import argparse
import json
import os
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
TITLE = "Lean adaptive core (issue #27): jaxsim core vs diffrax path vs heyoka"

RTOL = 1e-12
T1 = orbit.T1
STM_TIGHT = 1e-13  # the STM row's second tolerance (rtol = atol)
HEYOKA_TOLS = (1e-10, 1e-12, 1e-13, 1e-14, 1e-15, 2.220446049250313e-16)
N_WINDOWS = 48  # thrust windows of the 50-parameter gradient (+ mu, J2)
THRUST = 1e-6  # [m/s^2] along-track acceleration per window, nominal


_INNER = 3  # calls per timing (min taken)


def _best(fn, inner=None):
    """Minimum wall time [s] of `inner` calls of `fn` (blocking on its JAX result)."""
    import jax

    best = float("inf")
    for _ in range(inner or _INNER):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


def _alternate(cases: dict, rounds: int) -> dict:
    """`{name: min time}` and per-round ratios, the cases called in turn each round."""
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


# ---------------------------------------------------------------------------------------- rows
def forward_row(rounds: int, hy_ref, hy_cases) -> dict:
    import jaxsim as js

    point, _ = orbit.point_models()
    r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
    y0 = point.init_state(r0, v0)
    solvers = {
        "lean": js.Dopri8(),
        "lean looped": js.Dopri8(unrolled=False),
        "diffrax": js.Dopri8().to_diffrax(),
    }
    cases, out = {}, {}
    for name, solver in solvers.items():
        fn = lambda s=solver: js.simulate(
            point, y0, T1, solver=s, rtol=RTOL, atol=RTOL, outputs=False
        )
        t0 = time.perf_counter()
        sol = fn()
        first = time.perf_counter() - t0
        r = np.asarray(sol.ys["r_BN_N"][-1])
        out[name] = {
            "first_call_s": first,
            "num_steps": int(sol.stats["num_steps"]),
            "num_rejected": int(sol.stats["num_rejected_steps"]),
            "error_m": float(np.linalg.norm(r - hy_ref)) if hy_ref is not None else None,
        }
        cases[name] = lambda f=fn: f().ys
    for tol, ta_fn in hy_cases.items():
        cases[f"heyoka {tol:.0e}"] = ta_fn
    best, times = _alternate(cases, rounds)
    for name in solvers:
        out[name]["run_s"] = best[name]
    out["heyoka"] = {f"{tol:.0e}": {"run_s": best[f"heyoka {tol:.0e}"]} for tol in hy_cases}
    out["lean_over_diffrax"] = _ratio(times, "lean", "diffrax")
    out["looped_over_unrolled"] = _ratio(times, "lean looped", "lean")
    return out, times


def heyoka_forward(repeats_inner=3):
    """heyoka integrators over the tolerance sweep: `(reference r, {tol: timed call}, errors)`."""
    if not orbit.heyoka_available():
        return None, {}, {}
    import heyoka as hy

    r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
    x0 = np.concatenate([r0, v0])
    ref = orbit._heyoka_case(x0, np.finfo(np.longdouble).eps, 1, fp_type=np.longdouble)
    r_ref = np.asarray(ref["r_final"], dtype=float)
    calls, errors = {}, {}
    for tol in HEYOKA_TOLS:
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


def stm_row(rounds: int) -> dict:
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
    # The tighter tolerance: the accuracy of heyoka's variational run at 1e-12 (the issue's
    # "equal accuracy" row).
    paths = (
        ("lean", js.Dopri8(), None, RTOL),
        ("lean sensitivity", js.Dopri8(), js.ForwardSensitivity(), RTOL),
        ("diffrax", js.Dopri8().to_diffrax(), None, RTOL),
        (f"lean {STM_TIGHT:.0e}", js.Dopri8(), None, STM_TIGHT),
        (f"lean sensitivity {STM_TIGHT:.0e}", js.Dopri8(), js.ForwardSensitivity(), STM_TIGHT),
    )
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
    out["lean_forward_s"] = best["lean forward"]
    out["lean_stm_over_forward"] = _ratio(times, "lean", "lean forward")
    out["lean_over_diffrax"] = _ratio(times, "lean", "diffrax")
    out["sensitivity_over_forward"] = _ratio(times, "lean sensitivity", "lean forward")
    out["sensitivity_over_jacfwd"] = _ratio(times, "lean sensitivity", "lean")
    if "heyoka" in out:
        out["heyoka"]["run_s"] = best[f"heyoka {RTOL:.0e}"]
        out["lean_over_heyoka"] = _ratio(times, "lean", f"heyoka {RTOL:.0e}")
        out["sensitivity_over_heyoka"] = _ratio(times, "lean sensitivity", f"heyoka {RTOL:.0e}")
    return out


def gradient_row(rounds: int) -> dict:
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

    # Reference gradient: sensitivities in the step control at rtol 1e-14 (no long-double
    # reference for this row); the error figures are relative to its largest element.
    sens = js.ForwardSensitivity()
    g_ref = np.asarray(jax.grad(lambda p: loss(p, js.Dopri8(), adjoint=sens, rtol=1e-14))(p0))

    cases, out = {}, {}
    for name, solver in (("lean", js.Dopri8()), ("diffrax", js.Dopri8().to_diffrax())):
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
    for name in ("lean", "diffrax"):
        out[name]["error_vs_ref"] = float(
            np.max(np.abs(out[name]["reverse_value"] - g_ref)) / np.max(np.abs(g_ref))
        )
    best, times = _alternate(cases, rounds)
    out["lean sensitivity"]["reverse_s"] = best["lean sensitivity reverse"]
    out["lean sensitivity"]["over_forward"] = _ratio(
        times, "lean sensitivity reverse", "lean forward"
    )
    for name in ("lean", "diffrax"):
        for kind in ("forward", "reverse", "jacfwd"):
            out[name][f"{kind}_s"] = best[f"{name} {kind}"]
        out[name]["reverse_over_forward"] = _ratio(times, f"{name} reverse", f"{name} forward")
        out[name]["jacfwd_over_forward"] = _ratio(times, f"{name} jacfwd", f"{name} forward")
    g_l, g_d = out["lean"]["reverse_value"], out["diffrax"]["reverse_value"]
    out["lean_vs_diffrax_grad_rel"] = float(np.max(np.abs(g_l - g_d)) / np.max(np.abs(g_d)))
    fwd_l = out["lean"]["jacfwd_value"]
    out["lean_reverse_vs_forward_rel"] = float(np.max(np.abs(g_l - fwd_l)) / np.max(np.abs(fwd_l)))
    for name in ("lean", "diffrax"):
        for kind in ("forward", "reverse", "jacfwd"):
            out[name].pop(f"{kind}_value")
    return out


_COMPILE_SCRIPT = r"""
import json, sys, time
t_start = time.perf_counter()
import jax, jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[2])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
sys.path.insert(0, sys.argv[3])
import jaxsim as js
from benchmarks import bench_orbit_adaptive as orbit
case = sys.argv[1]
point, _ = orbit.point_models()
r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
name = case.split(":")[0]
solver = {"lean": js.Dopri8(), "lean looped": js.Dopri8(unrolled=False),
          "diffrax": js.Dopri8().to_diffrax()}[name.removesuffix(" sensitivity")]
adjoint = js.ForwardSensitivity() if name.endswith(" sensitivity") else None
t_import = time.perf_counter() - t_start
if case.endswith(":grad"):
    def loss(scale):
        sol = js.simulate(point, point.init_state(r0 * scale, v0), 3600.0, solver=solver,
                          rtol=1e-12, atol=1e-12, outputs=False, adjoint=adjoint)
        r = sol.ys["r_BN_N"][-1]
        return r @ r
    fn = js.jit(jax.grad(loss))
    t0 = time.perf_counter(); jax.block_until_ready(fn(jnp.asarray(1.0)))
else:
    t0 = time.perf_counter()
    jax.block_until_ready(js.simulate(point, point.init_state(r0, v0), 3600.0, solver=solver,
                                      rtol=1e-12, atol=1e-12, outputs=False).ys)
print(json.dumps({"first_call_s": time.perf_counter() - t0, "import_s": t_import}))
"""


COMPILE_CASES = (
    "lean", "lean looped", "diffrax", "lean:grad", "lean looped:grad", "diffrax:grad",
    "lean sensitivity:grad", "lean looped sensitivity:grad",
)  # fmt: skip


def compile_rows(cases=COMPILE_CASES, stored=None) -> dict:
    """First call (trace + compile) of each program in a fresh process, then on a restart
    (`cases` measured, merged into the `stored` rows)."""
    out = dict(stored or {})
    root = str(Path(__file__).resolve().parents[1])
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, JAXSIM_CACHE_DIR=str(Path(tmp) / "jaxsim"))
            runs = []
            for _ in range(2):  # cold, then restart with both caches warm
                proc = subprocess.run(
                    [sys.executable, "-c", _COMPILE_SCRIPT, case, str(Path(tmp) / "jax"), root],
                    capture_output=True, text=True, env=env, check=True,
                )  # fmt: skip
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        out[case] = {"cold_s": runs[0]["first_call_s"], "restart_s": runs[1]["first_call_s"]}
    return out


def run(
    rounds: int = 5, compile_only: bool = False, only=None, inner: int = 3, compile_cases=None
) -> dict:
    """All rows (or the rows named in `only`, merged into the stored results)."""
    global _INNER
    _INNER = inner
    data = {"environment": cm.environment(), "rtol": RTOL, "rounds": rounds, "inner": inner}
    if only:
        stored = cm.RESULTS / f"{NAME}.json"
        if stored.exists():
            data = {**json.loads(stored.read_text()), **data}
    if orbit.heyoka_available():
        data["heyoka_version"] = orbit._heyoka_version()
    need_heyoka = not compile_only and (not only or "forward" in only)
    r_ref, hy_calls, hy_errors = heyoka_forward() if need_heyoka else (None, {}, {})

    def forward():
        fwd, _ = forward_row(rounds, r_ref, hy_calls)
        if hy_calls:
            tols = list(hy_calls)
            err_pts = [max(hy_errors[t], 1e-12) for t in tols]
            time_pts = [fwd["heyoka"][f"{t:.0e}"]["run_s"] for t in tols]
            for t in tols:
                fwd["heyoka"][f"{t:.0e}"]["error_m"] = hy_errors[t]
            err = fwd["lean"]["error_m"]
            fwd["heyoka_at_equal_error_s"] = orbit.interp_loglog(err_pts, time_pts, err)
            if fwd["heyoka_at_equal_error_s"]:
                for name in ("lean", "lean looped", "diffrax"):
                    fwd[name]["over_heyoka"] = fwd[name]["run_s"] / fwd["heyoka_at_equal_error_s"]
        return fwd

    rows = {
        "compile": lambda: compile_rows(
            compile_cases or COMPILE_CASES, data.get("compile") if compile_cases else None
        )
    }
    if not compile_only:
        rows = {
            "forward": forward,
            "stm": lambda: stm_row(rounds),
            "gradient50": lambda: gradient_row(max(2, rounds // 2)),
            **rows,
        }
    for key, fn in rows.items():
        if only and key not in only:
            continue
        try:
            data[key] = fn()
            data.pop(f"{key}_error", None)  # an earlier run's failure of this row
            data[f"{key}_timing"] = {"rounds": rounds, "calls_per_timing": inner}
        except Exception as err:  # noqa: BLE001 - a failed row is recorded, the others still run
            data[f"{key}_error"] = f"{type(err).__name__}: {err}"
        cm.write_results(NAME, data, to_markdown(data))  # partial results after each row
    return data


def to_markdown(data: dict) -> str:
    f = cm.fmt
    env = data["environment"]
    lines = [
        f"# {TITLE}",
        "",
        f"Machine: {env.get('cpu_count', '?')} CPUs, load {env.get('loadavg_1m', '?')}; "
        f"heyoka {data.get('heyoka_version', 'not installed')}. rtol = atol = {data['rtol']:g}, "
        f"{data['rounds']} alternated rounds (min of {data.get('inner', 3)} calls each; ratios: "
        "median per round).",
        "",
    ]
    if "forward" in data:
        fw = data["forward"]
        lines += ["## J2 LEO, one day, Dopri8, forward", "",
                  "| path | run [ms] | steps | rejected | error [m] | / heyoka at equal error |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for name in ("lean", "lean looped", "diffrax"):
            r = fw[name]
            lines.append(
                f"| {name} | {f(r['run_s'] * 1e3)} | {r['num_steps']} | {r['num_rejected']} | "
                f"{f(r['error_m'])} | {f(r.get('over_heyoka'))} |"
            )
        lines += [
            "",
            f"heyoka at the lean run's error: {f((fw.get('heyoka_at_equal_error_s') or 0) * 1e3)} "
            f"ms. lean / diffrax (median per round): {f(fw['lean_over_diffrax'])}; looped / "
            f"unrolled stages: {f(fw['looped_over_unrolled'])}.",
            "",
        ]
    if "stm" in data:
        s = data["stm"]
        lines += ["## 6x6 state transition matrix (jacfwd)", "",
                  "`lean`, `diffrax`: `adjoint=diffrax.ForwardMode()` (the derivative of the "
                  "state-controlled discretisation); `lean sensitivity`: "
                  "`adjoint=js.ForwardSensitivity()` (sensitivities in the step control). rtol = atol = "
                  "1e-12 unless the path names another.", "",
                  "| path | run [ms] | rel. error vs heyoka var. 1e-15 |", "|---|---|---|"]  # fmt: skip
        for name in [*s.get("paths", ["lean", "diffrax"]), "heyoka"]:
            if name in s:
                lines.append(
                    f"| {name} | {f(s[name]['run_s'] * 1e3)} | {f(s[name].get('error'))} |"
                )
        lines += [
            "",
            f"lean STM / lean forward: {f(s['lean_stm_over_forward'])}; lean / diffrax: "
            f"{f(s['lean_over_diffrax'])}; lean / heyoka (same tolerance): "
            f"{f(s.get('lean_over_heyoka'))}. lean sensitivity / lean forward: "
            f"{f(s.get('sensitivity_over_forward'))}; / lean jacfwd: "
            f"{f(s.get('sensitivity_over_jacfwd'))}; / heyoka (same tolerance): "
            f"{f(s.get('sensitivity_over_heyoka'))}.",
            "",
        ]
    if "gradient50" in data:
        g = data["gradient50"]
        lines += ["## Gradient w.r.t. 50 parameters (48 thrust windows, mu, J2)", "",
                  "| path | forward [ms] | reverse [ms] | reverse / forward | jacfwd [ms] | "
                  "jacfwd / forward |", "|---|---|---|---|---|---|"]  # fmt: skip
        for name in ("lean", "diffrax"):
            r = g[name]
            lines.append(
                f"| {name} | {f(r['forward_s'] * 1e3)} | {f(r['reverse_s'] * 1e3)} | "
                f"{f(r['reverse_over_forward'])} | {f(r['jacfwd_s'] * 1e3)} | "
                f"{f(r['jacfwd_over_forward'])} |"
            )
        if "lean sensitivity" in g:
            ls = g["lean sensitivity"]
            lines += [
                "",
                f"`adjoint=js.ForwardSensitivity()` (`jax.grad`; 50 sensitivities in the step "
                f"control): {f(ls['reverse_s'] * 1e3)} ms, {f(ls['over_forward'])} x forward. "
                "Gradient error vs the same mode at rtol 1e-14 (max rel): sensitivity "
                f"{f(ls['error_vs_ref'])}, lean reverse {f(g['lean'].get('error_vs_ref'))}, "
                f"diffrax reverse {f(g['diffrax'].get('error_vs_ref'))}.",
            ]
        lines += [
            "",
            f"lean vs diffrax gradient (max rel): {f(g['lean_vs_diffrax_grad_rel'])}; lean reverse "
            f"vs lean forward mode: {f(g['lean_reverse_vs_forward_rel'])}.",
            "",
        ]
    c = data.get("compile", {})
    lines += ["## First call in a fresh process (trace + compile), J2 1 h, Dopri8", "",
              "| program | cold [s] | restart (persistent caches) [s] |", "|---|---|---|"]  # fmt: skip
    for name, r in c.items():
        lines.append(f"| {name} | {f(r['cold_s'])} | {f(r['restart_s'])} |")
    timing = [
        f"- {k[: -len('_timing')]}: {v['rounds']} rounds, min of {v['calls_per_timing']} calls"
        for k, v in data.items()
        if k.endswith("_timing") and k != "compile_timing"
    ]
    if timing:
        lines += ["", "Timing per row (rows may come from separate runs, `--only`):", *timing]
    errors = [f"- {k}: {v}" for k, v in data.items() if k.endswith("_error")]
    if errors:
        lines += ["", "Rows that failed:", *errors]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--inner", type=int, default=3, help="calls per timing (min taken)")
    parser.add_argument("--only", nargs="*", help="rows to rerun: forward stm gradient50 compile")
    parser.add_argument(
        "--compile-cases", nargs="*", help=f"compile programs to rerun, of {COMPILE_CASES}"
    )
    args = parser.parse_args(argv)
    data = run(args.rounds, args.compile_only, args.only, args.inner, args.compile_cases)
    md = to_markdown(data)
    cm.write_results(NAME, data, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
