"""Free final time (issue 28 items 1-2): one compiled program for every horizon, and its cost.

A spacecraft (hub, three reaction wheels with motor torques, an external torque) propagated for
600 RK4 steps over five horizons T (60 to 65 s), in one process:

1. `simulate(..., dt=T / 600)`: the step is a compile-time constant, so each horizon compiles;
2. `simulate(..., num_steps=600)`: the times are run-time inputs, one program for all five;
3. `jaxsim.jit(jax.jacrev(...))` of the final body rate with respect to a traced T (`num_steps`),
   and its error against the drift at T (the exact derivative of the ODE solution);
4. the same with `Tsit5` (rtol = atol = 1e-10) and a traced T;
5. `simulate_phases`: two phases (RK4, then Tsit5) with traced durations, under `jaxsim.jit`.

Per row: the first call (trace + compile + run) and the calls at the other horizons [s].
Run: `python -m benchmarks.bench_free_time` (about a minute on 2 loaded cores); writes
`benchmarks/results/free_time.json` and `.md`.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path


if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import environment, main as bench_main, markdown_table


HORIZONS = (60.0, 61.0, 62.5, 64.0, 65.0)  # [s]
STEPS = 600


def _spacecraft():
    import numpy as np

    import effectors as fx

    wheels = fx.ReactionWheels(
        np.eye(3), [0.1] * 3, Omega=[50.0, -30.0, 20.0], motor_torque=[1e-3, -5e-4, 8e-4],
        name="rw",
    )  # fmt: skip
    sc = fx.Spacecraft(
        fx.Hub(750.0, np.diag([900.0, 800.0, 600.0])),
        state_effectors=[wheels],
        dynamic_effectors=[fx.ExtForceTorque(torque_B=[1e-4, -2e-4, 5e-5])],
    )
    y0 = sc.init_state([7e6, 0, 0], [0, 7.5e3, 0], [0.1, 0.2, -0.3], [1e-3, -0.01, 0.03])
    return sc, y0


def _timed(fn, *args):
    import jax

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0, out


def _row(what: str, times: list, **extra) -> dict:
    return {"case": what, "first_s": times[0], "others_max_s": max(times[1:]), **extra}


def run(args) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxsim as js
    from jaxsim.phases import Phase, simulate_phases

    sc, y0 = _spacecraft()
    rows = []
    with warnings.catch_warnings():  # the dt= sweep recompiles on purpose (RecompileWarning)
        warnings.simplefilter("ignore")
        times = [
            _timed(lambda T: js.simulate(sc, y0, T, dt=T / STEPS, outputs=False).ys, T)[0]
            for T in HORIZONS
        ]
    rows.append(_row("RK4, dt = T/600 (top level)", times))
    times = [
        _timed(lambda T: js.simulate(sc, y0, T, num_steps=STEPS, outputs=False).ys, T)[0]
        for T in HORIZONS
    ]
    rows.append(_row("RK4, num_steps=600 (top level)", times))

    def rate(T, **kw):
        return js.simulate(sc, y0, T, outputs=False, **kw).ys["hub"]["omega_BN_B"][-1]

    def drift_at(T, **kw):
        ys = js.simulate(sc, y0, T, outputs=False, **kw).ys
        final = jax.tree_util.tree_map(lambda a: a[-1], ys)
        return np.asarray(sc.drift(T, final, None)["hub"]["omega_BN_B"])

    for label, kw in (
        ("RK4 num_steps=600", {"num_steps": STEPS}),
        ("Tsit5 rtol=atol=1e-10", {"solver": js.Tsit5(), "rtol": 1e-10, "atol": 1e-10}),
    ):
        grad = js.jit(jax.jacrev(lambda T, kw=kw: rate(T, **kw)))
        out = [_timed(grad, jnp.asarray(T)) for T in HORIZONS]
        drift = drift_at(HORIZONS[-1], **kw)
        err = float(np.max(np.abs(out[-1][1] - drift)) / np.max(np.abs(drift)))
        rows.append(_row(f"jit(jacrev d omega/dT), {label}", [t for t, _ in out], drift_rel=err))

    def phases_final(d):
        phases = [
            Phase(sc, d[0], num_steps=STEPS // 2),
            Phase(sc, d[1], solver=js.Tsit5(), rtol=1e-10, atol=1e-10),
        ]
        return simulate_phases(phases, y0, outputs=False).y_final["hub"]["omega_BN_B"]

    grad = js.jit(jax.jacrev(phases_final))
    times = [_timed(grad, jnp.asarray([T / 2, T / 2]))[0] for T in HORIZONS]
    rows.append(_row("jit(jacrev) of simulate_phases (RK4 + Tsit5)", times))
    return {
        "name": "free_time",
        "title": "Free final time: compiles across horizons",
        "environment": environment(),
        "rows": rows,
    }


def to_markdown(data: dict) -> str:
    cols = [
        ("case", "case"),
        ("first_s", "first call [s]"),
        ("others_max_s", "other 4 horizons, max [s]"),
        ("drift_rel", "d/dT vs drift (rel.)"),
    ]
    env = data["environment"]
    return (
        f"## {data['title']}\n\nSpacecraft (hub, 3 wheels, external torque), 600 RK4 steps, "
        f"horizons {HORIZONS} s; load {env.get('loadavg_1m', float('nan')):.1f} on "
        f"{env['cpu_count']} cores.\n\n" + markdown_table(data["rows"], cols)
    )


def main(argv=None) -> int:
    return bench_main("free_time", "Free final time", run, to_markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
