"""Benchmark: derivatives of the fixed-step path on the `combined` spacecraft, and their floors.

The run: `effectors.scenarios.combined()` (hub + 3 wheels + 2 damped panels + gravity + gravity
gradient + torque), classical RK4 at 0.1 s, final state only (`outputs=False`), over issue 27's
horizon (600 s, 6,000 steps). The scalar is the sum of the final attitude and rate. Measured,
alternating the programs round by round in one process:

- forward, `jax.grad` (reverse mode, all 153 spacecraft parameters): the default
  (`checkpoint=True`; with XLA's loops compiled whole, a run whose stage inputs fit in
  `jaxsim._cores._fixed_grid.STORE_BYTES` stores them all, as this one does), the same past that budget
  (`STORE_BYTES` set to 0 while tracing: checkpointed sub-blocks) and `checkpoint=False`;
  `jax.jvp` with one tangent, and `jax.jacfwd` of the final rate w.r.t. 3 parameters (3 tangents);
  wall time (fastest call of a round) and the process CPU time of the same calls (on a loaded
  machine the CPU time is the steadier figure);
- the floors that bound them: 4 evaluations per step of the spacecraft drift in a `lax.scan`, of
  its JVP, of its VJP w.r.t. the state only and w.r.t. state and parameters (each with the drift's
  forward pass), and one VJP of one whole RK4 step per step (`jaxsim._solvers._ode` stage loop, as the
  backward pass uses it);
- the first gradient in a fresh process (import, model, trace, compile, run), in a subprocess.

Ratios are medians over rounds of the per-round ratio to the forward run. Both configurations are
measured: XLA's small-loop hoisting on (jaxsim's default) in this process, off
(`JAXSIM_SMALL_LOOPS=0`) in a child process.

Run: `python -m benchmarks.bench_fixed_adjoint [--quick] [--horizon S]` (writes
`benchmarks/results/fixed_adjoint.json`, `.md`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm


NAME = "fixed_adjoint"
TITLE = "Fixed-step derivatives of the `combined` spacecraft (RK4 0.1 s): costs and floors"
HORIZON = 600.0  # [s]
DT = 0.1  # [s]

# The first gradient in a fresh process (no persistent compilation cache).
_COLD = r"""
import time
t0 = time.perf_counter()
import equinox as eqx, jax, jax.numpy as jnp
import jaxsim as js
from effectors.scenarios import combined
sc, y0, _ = combined()
params, static = eqx.partition(sc, eqx.is_inexact_array)
def scalar(p):
    sol = js.simulate(eqx.combine(p, static), y0, {t1}, dt={dt}, outputs=False)
    hub = sol.ys["hub"]
    return jnp.sum(hub["sigma_BN"][-1]) + jnp.sum(hub["omega_BN_B"][-1])
grad = js.jit(jax.grad(scalar))
t1 = time.perf_counter()
jax.block_until_ready(grad(params))
t2 = time.perf_counter()
print("RESULT", t2 - t0, t2 - t1)
"""


def _programs(t1):
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import jax.tree_util as jtu

    import jaxsim as js
    from effectors.scenarios import combined
    from jaxsim._cores import _fixed_grid

    sc, y0, _ = combined()
    params, static = eqx.partition(sc, eqx.is_inexact_array)

    def final(p, checkpoint=True):
        sol = js.simulate(
            eqx.combine(p, static), y0, t1, dt=DT, outputs=False, checkpoint=checkpoint
        )
        return sol.ys["hub"]

    def scalar(p, checkpoint=True):
        hub = final(p, checkpoint)
        return jnp.sum(hub["sigma_BN"][-1]) + jnp.sum(hub["omega_BN_B"][-1])

    def blocked(p):
        # Traced with no stored-stage budget: the checkpointed sub-blocks of a longer run.
        budget, _fixed_grid.STORE_BYTES = _fixed_grid.STORE_BYTES, 0
        try:
            return scalar(p)
        finally:
            _fixed_grid.STORE_BYTES = budget

    tangent = jtu.tree_map(lambda x: 1e-3 * jnp.ones_like(x), params)

    def three(q):
        # Hub mass, first panel's stiffness and first wheel's Js as inputs (3 tangents).
        model = eqx.combine(params, static)
        k, js_ = _arrays_of_three(model)[1:]
        new = (q[0], k.at[0].set(q[1]), js_.at[0].set(q[2]))
        model = eqx.tree_at(_arrays_of_three, model, new)
        sol = js.simulate(model, y0, t1, dt=DT, outputs=False)
        return sol.ys["hub"]["omega_BN_B"][-1]

    hub_mass, k, js_ = _arrays_of_three(eqx.combine(params, static))
    q0 = jnp.stack([hub_mass, k[0], js_[0]])
    return params, {
        "forward": (js.jit(scalar), params),
        "reverse (jax.grad)": (js.jit(jax.grad(scalar)), params),
        "reverse, past the store budget": (js.jit(jax.grad(blocked)), params),
        "reverse, checkpoint=False": (js.jit(jax.grad(lambda p: scalar(p, False))), params),
        "jvp, 1 tangent": (js.jit(lambda p: jax.jvp(scalar, (p,), (tangent,))), params),
        "jacfwd, 3 parameters": (js.jit(jax.jacfwd(three)), q0),
    }


def _arrays_of_three(model):
    return model.hub.mass, model.state_effectors[1].k, model.state_effectors[0].Js


def _floors(n_steps):
    """Drift, drift JVP and drift VJP in a scan of `4 n_steps` evaluations; one RK4 step's VJP in
    a scan of `n_steps` (its forward pass included), as the backward pass computes it."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import jax.tree_util as jtu

    import jaxsim as js
    from effectors.scenarios import combined
    from jaxsim._cores._fixed_grid import chunked_drift
    from jaxsim._model._layout import StateLayout

    sc, y0, _ = combined()
    layout = StateLayout.of(y0)
    v0 = layout.flatten(y0)
    params, static = eqx.partition(sc, eqx.is_inexact_array)
    evals = 4 * n_steps
    solver = js.RK4()

    def drift(p, t, v):
        model = eqx.combine(p, static)
        return layout.flatten(model.drift(t, layout.unflatten(v), None))

    def step(p, v, n):
        model = eqx.combine(p, static)
        f = chunked_drift(model, None)
        t = n * DT
        y1, _ = model.step_map(t + DT, solver.step(f, t, layout.unflatten(v), DT, None))
        return layout.flatten(y1)

    tangent = jtu.tree_map(jnp.ones_like, params)
    zeros = jtu.tree_map(jnp.zeros_like, params)

    @js.jit
    def drifts(p):
        def body(c, _):
            n, v = c
            return (n + 1, v + 1e-3 * drift(p, n * DT, v)), None

        return jax.lax.scan(body, (0, v0), None, length=evals)[0][1]

    @js.jit
    def drift_jvps(p):
        def body(c, _):
            n, v, w = c
            d, dd = jax.jvp(lambda q, x: drift(q, n * DT, x), (p, v), (tangent, w))
            return (n + 1, v + 1e-3 * d, w + 1e-3 * dd), None

        return jax.lax.scan(body, (0, v0, jnp.ones_like(v0)), None, length=evals)[0]

    @js.jit
    def drift_state_vjps(p):
        def body(c, _):
            n, g = c
            _, back = jax.vjp(lambda x: drift(p, n * DT, x), v0)
            return (n + 1, g + 1e-3 * back(g)[0]), None

        return jax.lax.scan(body, (0, jnp.ones_like(v0)), None, length=evals)[0]

    @js.jit
    def drift_vjps(p):
        def body(c, _):
            n, g, gp = c
            _, back = jax.vjp(lambda q, x: drift(q, n * DT, x), p, v0)
            dp, dv = back(g)
            return (n + 1, g + 1e-3 * dv, jtu.tree_map(jnp.add, gp, dp)), None

        return jax.lax.scan(body, (0, jnp.ones_like(v0), zeros), None, length=evals)[0]

    @js.jit
    def step_vjps(p):
        def body(c, _):
            n, g, gp = c
            _, back = jax.vjp(lambda q, x: step(q, x, n), p, v0)
            dp, dv = back(g)
            return (n + 1, dv, jtu.tree_map(jnp.add, gp, dp)), None

        return jax.lax.scan(body, (0, jnp.ones_like(v0), zeros), None, length=n_steps)[0]

    return {
        f"drift x {evals}": (drifts, params),
        f"drift JVP x {evals}": (drift_jvps, params),
        f"drift VJP (state) x {evals}": (drift_state_vjps, params),
        f"drift VJP x {evals}": (drift_vjps, params),
        f"RK4 step VJP x {n_steps}": (step_vjps, params),
    }


def _time(fn, arg, calls):
    import jax

    wall, cpu = [], []
    for _ in range(calls):
        w, c = time.perf_counter(), time.process_time()
        jax.block_until_ready(fn(arg))
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return min(wall), min(cpu)


def _cold(t1):
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    code = _COLD.format(t1=t1, dt=DT)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, check=True
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    total, first = (float(x) for x in line.split()[1:])
    return {"process_s": total, "first_call_s": first}


def _measure(quick: bool, horizon: float) -> dict:
    """Every program of this process (its XLA configuration), alternated round by round."""
    import jax

    from jaxsim._compilation._jit import loops_hoisted

    rounds, calls = (3, 3) if quick else (5, 5)
    n_steps = int(round(horizon / DT))
    load0 = os.getloadavg()[0]
    _, programs = _programs(horizon)
    programs.update(_floors(n_steps))
    compile_s = {}
    for name, (fn, arg) in programs.items():
        t0 = time.perf_counter()
        jax.block_until_ready(fn(arg))
        compile_s[name] = time.perf_counter() - t0
        print(f"{name}: first call {compile_s[name]:.2f} s", flush=True)
    times = {name: [] for name in programs}
    for _ in range(rounds):
        for name, (fn, arg) in programs.items():
            times[name].append(_time(fn, arg, calls))
    fwd = np.array(times["forward"])
    drift = np.array(times[f"drift x {4 * n_steps}"])
    rows = []
    for name in programs:
        t = np.array(times[name])
        base = drift if name.startswith("drift") else fwd
        rows.append(
            {
                "program": name,
                "first_call_s": compile_s[name],
                "wall_ms": float(t[:, 0].min() * 1e3),
                "cpu_ms": float(t[:, 1].min() * 1e3),
                "wall_over_base": float(np.median(t[:, 0] / base[:, 0])),
                "cpu_over_base": float(np.median(t[:, 1] / base[:, 1])),
                "base": "drift x 4n" if name.startswith("drift") else "forward",
            }
        )
    cold = [_cold(horizon) for _ in range(1 if quick else 2)]
    return {
        "loops_hoisted": loops_hoisted(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "load_before": load0,
        "load_after": os.getloadavg()[0],
        "n_steps": n_steps,
        "rounds": rounds,
        "calls_per_round": calls,
        "rows": rows,
        "cold_first_gradient": cold,
    }


def _child(quick: bool, horizon: float) -> dict:
    """`_measure` in a child process with XLA's small-loop hoisting off (`JAXSIM_SMALL_LOOPS=0`)."""
    import json

    env = {
        k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")
    }
    env["JAXSIM_SMALL_LOOPS"] = "0"
    cmd = [sys.executable, "-m", "benchmarks.bench_fixed_adjoint", "--child", "--horizon"]
    cmd += [str(horizon)] + (["--quick"] if quick else [])
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root, check=True)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("JSON "))
    return json.loads(line[5:])


def run(quick: bool = False, horizon: float = HORIZON) -> dict:
    configs = [_measure(quick, horizon), _child(quick, horizon)]
    return {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "horizon_s": horizon,
        "dt_s": DT,
        "configs": configs,
    }


def to_markdown(data: dict) -> str:
    env = data["environment"]
    f = cm.fmt
    md = [f"## {data['title']}", ""]
    for c in data["configs"]:
        hoisting = "on (jaxsim's default)" if c["loops_hoisted"] else "off (`JAXSIM_SMALL_LOOPS=0`)"
        md.append(f"### XLA small-loop hoisting {hoisting}")
        md.append("")
        md.append(
            f"jax {env['jax']} ({env['jax_backend']}), {env['cpu_count']} CPUs, 1-min load "
            f"{c['load_before']:.1f} before / {c['load_after']:.1f} after, {env['time']}; "
            f"{c['n_steps']} steps ({data['horizon_s']:.0f} s at {data['dt_s']} s), final state "
            f"only. {c['rounds']} alternated rounds of {c['calls_per_round']} calls: times are "
            "the fastest call, ratios the median per round (wall: elapsed; CPU: the process's CPU "
            "time, steadier on a loaded machine)."
        )
        md += [
            "",
            "| program | first call [s] | wall [ms] | CPU [ms] | wall / base | CPU / base | base |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in c["rows"]:
            md.append(
                f"| {r['program']} | {f(r['first_call_s'])} | {f(r['wall_ms'])} | "
                f"{f(r['cpu_ms'])} | {f(r['wall_over_base'])} | {f(r['cpu_over_base'])} | "
                f"{r['base']} |"
            )
        cold = c["cold_first_gradient"]
        md += [
            "",
            "First gradient in a fresh process (import + model + trace + compile + run) / its "
            "first call alone [s]: "
            + ", ".join(f"{f(x['process_s'])} / {f(x['first_call_s'])}" for x in cold),
            "",
        ]
    return "\n".join(md)


def main(argv=None) -> int:
    # XLA's small-loop hoisting is opt-in (docs/engine.md): the main rows measure it, the opted-out
    # rows run in a child process with JAXSIM_SMALL_LOOPS=0 (jaxsim is imported after this).
    os.environ.setdefault("JAXSIM_SMALL_LOOPS", "1")
    if argv is None:
        argv = sys.argv[1:]
    if "--child" in argv:
        import argparse
        import json

        parser = argparse.ArgumentParser()
        parser.add_argument("--child", action="store_true")
        parser.add_argument("--quick", action="store_true")
        parser.add_argument("--horizon", type=float, default=HORIZON)
        a = parser.parse_args(argv)
        print("JSON " + json.dumps(_measure(a.quick, a.horizon)), flush=True)
        return 0
    return cm.main(
        NAME,
        TITLE,
        lambda a: run(quick=a.quick, horizon=a.horizon),
        to_markdown,
        argv,
        quick="fewer rounds",
        options=(("--horizon", {"type": float, "default": HORIZON, "help": "run length [s]"}),),
    )


if __name__ == "__main__":
    raise SystemExit(main())
