"""Gradient benchmark (issue #4 item 3): derivatives of the full `combined` spacecraft run.

Modes, all of a final-state scalar (sum of final sigma_BN and omega_BN_B) or the final-state vector
(sigma_BN, omega_BN_B: 6 outputs), RK4 at 0.1 s:

- forward run (no outputs), the time unit of every ratio;
- reverse mode (`jax.grad`) w.r.t. every inexact array of the spacecraft (183 parameters), with
  the default checkpointing (`checkpoint=True`: sqrt blocks) and without (`checkpoint=False`);
- forward mode (`jax.jacfwd`) of the 6 final-state outputs w.r.t. 3 parameters (hub mass, first
  panel stiffness, first wheel Js) and one `jax.jvp` direction.

Times are measured on a shorter horizon (`--horizon`, default 600 s = 6,000 steps; the cost per
step does not depend on it). Memory is XLA's temporary-buffer size of the compiled program
(`memory_analysis().temp_size_in_bytes`, exact and load-independent) for the full one-orbit run
(58,300 steps); this needs a compile per mode but no run.

Usage: `python -m benchmarks.bench_gradient [--horizon S] [--quick]`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks import _common as cm


NAME = "gradient"
TITLE = "Gradients of the full `combined` spacecraft run (RK4 0.1 s): cost ratios and memory"
ORBIT_S = 5830.0  # [s] the combined scenario's horizon (one orbit)
DT = 0.1  # [s]


def _functions(horizon):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import jaxsim as js
    from effectors.scenarios import combined

    sc, y0, _ = combined()
    params, static = eqx.partition(sc, eqx.is_inexact_array)

    def final(p, t1, checkpoint=True):
        sol = js.simulate(
            eqx.combine(p, static), y0, t1, dt=DT, outputs=False, checkpoint=checkpoint
        )
        hub = sol.ys["hub"]
        return jnp.concatenate([hub["sigma_BN"][-1], hub["omega_BN_B"][-1]])

    def scalar(p, t1, checkpoint=True):
        return jnp.sum(final(p, t1, checkpoint))

    def three(q, t1):
        """The final-state vector as a function of (hub mass, panel k[0], wheel Js[0])."""
        p = eqx.tree_at(
            lambda s: (s.hub.mass, s.state_effectors[1].k, s.state_effectors[0].Js),
            params,
            (
                q[0],
                params.state_effectors[1].k.at[0].set(q[1]),
                params.state_effectors[0].Js.at[0].set(q[2]),
            ),
        )
        return final(p, t1)

    q0 = jnp.asarray(
        [
            float(params.hub.mass),
            float(params.state_effectors[1].k[0]),
            float(params.state_effectors[0].Js[0]),
        ]
    )
    n_params = int(sum(np.size(x) for x in jax.tree_util.tree_leaves(params)))
    fns = {
        "forward": (js.jit(lambda p: scalar(p, horizon)), params),
        "reverse (checkpoint)": (js.jit(jax.grad(lambda p: scalar(p, horizon))), params),
        "reverse (no checkpoint)": (
            js.jit(jax.grad(lambda p: scalar(p, horizon, False))),
            params,
        ),
        "jacfwd, 3 parameters": (js.jit(jax.jacfwd(lambda q: three(q, horizon))), q0),
        "jvp, 1 direction": (
            js.jit(lambda q: jax.jvp(lambda x: three(x, horizon), (q,), (jnp.ones(3),))),
            q0,
        ),
    }
    orbit = {
        "forward": (js.jit(lambda p: scalar(p, ORBIT_S)), params),
        "reverse (checkpoint)": (js.jit(jax.grad(lambda p: scalar(p, ORBIT_S))), params),
        "reverse (no checkpoint)": (
            js.jit(jax.grad(lambda p: scalar(p, ORBIT_S, False))),
            params,
        ),
        "jacfwd, 3 parameters": (js.jit(jax.jacfwd(lambda q: three(q, ORBIT_S))), q0),
    }
    return fns, orbit, n_params


def run(horizon: float = 600.0, memory: bool = True) -> dict:
    fns, orbit, n_params = _functions(horizon)
    rows = []
    fwd_s = None
    for mode, (fn, arg) in fns.items():
        t = cm.time_jax(fn, arg, repeats=2 if "reverse" in mode else 3)
        if mode == "forward":
            fwd_s = t["run_s"]
        rows.append(
            {
                "mode": mode,
                "compile_s": t["compile_s"],
                "run_s": t["run_s"],
                "over_forward": t["run_s"] / fwd_s,
            }
        )
        print(f"{mode:24s} compile {t['compile_s']:6.1f} s  run {t['run_s']:.3f} s  "
              f"({t['run_s'] / fwd_s:.1f}x forward)", flush=True)  # fmt: skip
    if memory:
        for row in rows:
            pair = orbit.get(row["mode"])
            if pair is None:
                continue
            t0 = time.perf_counter()
            compiled = pair[0].lower(pair[1]).compile()
            compiled = getattr(compiled, "compiled", compiled)  # equinox wraps jax.stages.Compiled
            row["orbit_temp_MiB"] = compiled.memory_analysis().temp_size_in_bytes / 2**20
            print(f"{row['mode']:24s} one-orbit temp memory {row['orbit_temp_MiB']:.1f} MiB "
                  f"(compile {time.perf_counter() - t0:.1f} s)", flush=True)  # fmt: skip
    return {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "horizon_s": horizon,
        "n_steps": int(round(horizon / DT)),
        "orbit_steps": int(round(ORBIT_S / DT)),
        "n_parameters": n_params,
        "rows": rows,
    }


def to_markdown(data: dict) -> str:
    env = data["environment"]
    cols = [
        ("mode", "mode"),
        ("compile_s", "compile [s]"),
        ("run_s", f"run, {data['n_steps']} steps [s]"),
        ("over_forward", "x forward"),
        ("orbit_temp_MiB", f"temp memory, {data['orbit_steps']} steps [MiB]"),
    ]
    return "\n".join(
        [
            f"## {data['title']}",
            "",
            f"jax {env['jax']} ({env['jax_backend']}, x64={env['x64']}), {env['cpu_count']} CPUs, "
            f"1-min load {env.get('loadavg_1m', float('nan')):.1f} at {env['time']}. Reverse mode "
            f"w.r.t. all {data['n_parameters']} spacecraft parameters; forward mode w.r.t. hub "
            "mass, first panel stiffness and first wheel Js (6 final-state outputs).",
            "",
            cm.markdown_table(data["rows"], cols),
            "",
            "Run times on the stated horizon (cost per step is horizon-independent); memory is "
            "XLA's temporary-buffer size of the compiled one-orbit program (no run needed).",
        ]
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizon", type=float, default=600.0, help="timed horizon [s]")
    ap.add_argument("--quick", action="store_true", help="60 s horizon, no one-orbit memory")
    a = ap.parse_args(argv)
    data = run(60.0 if a.quick else a.horizon, memory=not a.quick)
    md = to_markdown(data)
    cm.write_results(NAME, data, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
