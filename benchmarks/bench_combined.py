"""Benchmark: the full `combined` spacecraft, jaxsim vs Basilisk, side by side in one process.

Model (`effectors.scenarios.combined`, spec `tests/data/combined.json`): hub with CoM offset + 3
balanced reaction wheels with constant motor torques + 2 damped hinged panels + Earth point mass +
gravity gradient + constant external torque; classical RK4 at 0.1 s for one orbit (58,300 steps),
10 s samples with derived outputs and energies (Basilisk: recorders + energy logger), and a
final-state-only mode (Basilisk: no recorders).

Measured: jaxsim per-step run time (fastest repeated call of `jaxsim.simulate`), its first-call compile
time, the compile and run time of the reverse-mode gradient of a final-state scalar w.r.t. every
spacecraft parameter, and Basilisk's `ExecuteSimulation()` time for the same run; ratios jaxsim /
Basilisk (< 1: jaxsim faster). Also the agreement of the two runs' samples.

Run: `python -m benchmarks.bench_combined [--quick]` (writes `benchmarks/results/combined.json`, `.md`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm
from tests.reference import basilisk_scenarios as bs  # noqa: E402


NAME = "combined"
TITLE = (
    "Full `combined` spacecraft (hub + 3 RW + 2 damped panels + gravity + GG + torque), RK4 0.1 s"
)


def _grad_fn(sc, y0, t1, dt):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import jaxsim as js

    params, static = eqx.partition(sc, eqx.is_inexact_array)

    def scalar(p):
        model = eqx.combine(p, static)
        sol = js.simulate(model, y0, t1, dt=dt, outputs=False)
        hub = sol.ys["hub"]
        return jnp.sum(hub["sigma_BN"][-1]) + jnp.sum(hub["omega_BN_B"][-1])

    return js.jit(jax.grad(scalar)), params


def run(quick: bool = False) -> dict:
    import jaxsim as js
    from effectors.scenarios import combined

    spec = bs.load_spec("combined")
    t = spec["time"]
    dt, sample = t["step_s"], t["sample_interval_s"]
    t1 = 600.0 if quick else t["duration_s"]
    n = int(round(t1 / dt))
    sc, y0, _ = combined()
    have_bsk = bs.available()
    rows, accuracy = [], {}
    modes = (
        ("samples+outputs", dict(sample_dt=sample), True),
        ("final state", dict(outputs=False), False),
    )
    for mode, kw, record in modes:
        tj = cm.time_jax(lambda: js.simulate(sc, y0, t1, dt=dt, **kw), repeats=3)
        row = {
            "mode": mode,
            "n_steps": n,
            "jaxsim_compile_s": tj["compile_s"],
            "jaxsim_run_s": tj["run_s"],
            "jaxsim_us_per_step": tj["run_s"] / n * 1e6,
        }
        if have_bsk:
            walls = []
            for _ in range(1 if n > 10_000 else 3):
                scen = bs.BasiliskScenario(spec, duration=t1, record=record)
                walls.append(scen.run())
            row["bsk_run_s"] = min(walls)
            row["bsk_us_per_step"] = min(walls) / n * 1e6
            row["ratio_jaxsim_over_bsk"] = tj["run_s"] / min(walls)
            if record:
                out, sol = scen.outputs(), tj["result"]
                for k in ("r_BN_N", "v_BN_N"):
                    a, b = np.asarray(sol.outputs[k]), out[k]
                    accuracy[f"max_normrel_{k}"] = float(
                        np.max(np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1))
                    )
                for k in ("sigma_BN", "omega_BN_B"):
                    accuracy[f"max_abs_{k}"] = float(
                        np.max(np.abs(np.asarray(sol.outputs[k]) - out[k]))
                    )
                accuracy["max_abs_rw_Omega"] = float(
                    np.max(np.abs(np.asarray(sol.ys["rw"]["Omega"]) - out["rw_Omega"]))
                )
        rows.append(row)
        print(
            f"{mode:16s} jaxsim {row['jaxsim_us_per_step']:.2f} us/step (compile {row['jaxsim_compile_s']:.1f} s)"
            + (
                f"  Basilisk {row['bsk_us_per_step']:.2f} us/step  ratio {row['ratio_jaxsim_over_bsk']:.3f}"
                if have_bsk
                else "  Basilisk: skipped"
            ),
            flush=True,
        )
    grad, params = _grad_fn(sc, y0, t1, dt)
    tg = cm.time_jax(grad, params, repeats=2)
    fwd = rows[1]["jaxsim_run_s"]
    grad_row = {
        "gradient_compile_s": tg["compile_s"],
        "gradient_run_s": tg["run_s"],
        "gradient_over_forward": tg["run_s"] / fwd,
        "n_parameters": int(
            sum(np.size(x) for x in __import__("jax").tree_util.tree_leaves(params))
        ),
    }
    print(
        f"reverse gradient: compile {tg['compile_s']:.1f} s, run {tg['run_s']:.2f} s "
        f"({grad_row['gradient_over_forward']:.1f}x forward), {grad_row['n_parameters']} parameters"
    )
    return {
        "name": NAME,
        "title": TITLE,
        "environment": cm.environment(),
        "basilisk": bs.version() if have_bsk else None,
        "note": None if have_bsk else "Basilisk (bsk) not importable: Basilisk columns skipped",
        "duration_s": t1,
        "rows": rows,
        "gradient": grad_row,
        "accuracy_vs_basilisk": accuracy,
    }


def to_markdown(data: dict) -> str:
    env = data["environment"]
    cols = [
        ("mode", "mode"),
        ("n_steps", "steps"),
        ("jaxsim_us_per_step", "jaxsim [us/step]"),
        ("jaxsim_compile_s", "jaxsim compile [s]"),
        ("bsk_us_per_step", "Basilisk [us/step]"),
        ("ratio_jaxsim_over_bsk", "jaxsim/Basilisk"),
    ]
    md = [f"## {data['title']}", ""]
    md.append(
        f"jax {env['jax']} ({env['jax_backend']}, x64={env['x64']}), Basilisk "
        f"{data['basilisk'] or 'not installed'}, {env['cpu_count']} CPUs, "
        f"1-min load {env.get('loadavg_1m', float('nan')):.1f} at {env['time']}; "
        f"horizon {data['duration_s']:.0f} s."
    )
    if data["note"]:
        md += ["", f"**Note:** {data['note']}."]
    md += ["", cm.markdown_table(data["rows"], cols), ""]
    g = data["gradient"]
    md.append(
        f"Reverse-mode gradient w.r.t. all {g['n_parameters']} spacecraft parameters: compile "
        f"{cm.fmt(g['gradient_compile_s'])} s, run {cm.fmt(g['gradient_run_s'])} s "
        f"({cm.fmt(g['gradient_over_forward'])} x the final-state forward run)."
    )
    if data["accuracy_vs_basilisk"]:
        md += [
            "",
            "Agreement with the live Basilisk run: "
            + ", ".join(f"{a} {cm.fmt(b)}" for a, b in data["accuracy_vs_basilisk"].items()),
        ]
    return "\n".join(md)


def main(argv=None) -> int:
    return cm.main(
        NAME,
        TITLE,
        lambda a: run(quick=a.quick),
        to_markdown,
        argv,
        quick="600 s instead of one orbit",
    )


if __name__ == "__main__":
    raise SystemExit(main())
