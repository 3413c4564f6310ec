r"""Benchmark (issue 41): Dopri8's stages written out or looped, by the size of the drift.

`Dopri8(unrolled=None)` (the default) writes the stages out for a drift of at most
`jaxsim._solvers._ode.UNROLL_MAX_EQUATIONS` jaxpr equations and loops them for a larger one. This
measures the rule's inputs: for models from a closed-form J2 point to the environment guide's
"run with all of it", the drift's equation count (`jaxsim._solvers._ode.drift_equations`), and the
first call (trace + compile + run) and warm call of a 6 h LEO run at rtol = atol = 1e-10 (10 min
samples, `throw=False`) with the stages written out and looped, each model in a fresh process.

Run: `python -m benchmarks.bench_stage_rule [--only WORD ...]` (about 5 minutes on 2 idle cores); writes
`benchmarks/results/stage_rule.json` and `.md`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

T1 = 6 * 3600.0  # [s]
MODELS = {
    "J2 point (closed form)": ("point", {}),
    "J2 point (Pines)": ("pines", {}),
    "spacecraft, point-mass Earth": (
        "leo",
        dict(degree=0, third_bodies=False, srp=False, drag=False),
    ),
    "spacecraft, zonal J2..J6": ("leo", dict(degree=6, third_bodies=False, srp=False, drag=False)),
    "spacecraft, point mass + Sun + Moon (DE421)": ("leo", dict(degree=0, srp=False, drag=False)),
    "combined (wheels, panels, thrusters, ...)": ("combined", {}),
    "spacecraft, all of it": ("leo", {}),
}


def _model(kind, kw):
    import jax.numpy as jnp

    if kind in ("point", "pines"):
        from benchmarks import bench_orbit_adaptive as orbit

        point, pines = orbit.point_models()
        m = point if kind == "point" else pines
        r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
        return m, m.init_state(jnp.asarray(r0), jnp.asarray(v0))
    if kind == "combined":
        from effectors.scenarios import combined

        sc, y0, _ = combined()
        return sc, y0
    from benchmarks.bench_compile_models import leo_model

    return leo_model(**kw)


def child(spec: dict) -> dict:
    import jax
    import jax.numpy as jnp

    import jaxsim as js
    from jaxsim._model._layout import StateLayout
    from jaxsim._solvers._ode import drift_equations

    model, y0 = _model(spec["kind"], spec["kw"])
    layout = StateLayout.of(y0)

    def f(t, v):
        return layout.flatten(model.drift(t, layout.unflatten(v), None))

    out = {"equations": drift_equations(f, jnp.asarray(0.0), layout.flatten(y0))}
    for unrolled in (True, False):
        solver = js.Dopri8(unrolled=unrolled)

        def run(y):
            sol = js.simulate(model, y, T1, solver=solver, rtol=1e-10, atol=1e-10,
                              sample_dt=600.0, throw=False, outputs=False)  # fmt: skip
            return sol.ys, sol.stats["num_steps"]

        jitted = jax.jit(run, compiler_options=js.compiler_options())
        t0 = time.perf_counter()
        jax.block_until_ready(jitted(y0))
        first = time.perf_counter() - t0
        warm = []
        for _ in range(3):
            t0 = time.perf_counter()
            _, steps = jax.block_until_ready(jitted(y0))
            warm.append(time.perf_counter() - t0)
        key = "unrolled" if unrolled else "looped"
        out[f"{key}_first_s"], out[f"{key}_warm_s"] = first, min(warm)
        out[f"{key}_steps"] = int(steps)
    return out


def run(args) -> dict:
    from benchmarks._common import environment

    rows = []
    previous = {}
    path = ROOT / "benchmarks" / "results" / "stage_rule.json"
    if args.only and path.exists():  # rows not rerun are kept
        previous = {r["model"]: r for r in json.loads(path.read_text())["rows"]}
    for label, (kind, kw) in MODELS.items():
        if args.only and not any(word in label for word in args.only):
            if label in previous:
                rows.append(previous[label])
            continue
        cmd = [sys.executable, "-m", "benchmarks.bench_stage_rule", "--child",
               json.dumps({"kind": kind, "kw": kw})]  # fmt: skip
        load = os.getloadavg()[0]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True)
        row = {"model": label, "load": load, **json.loads(proc.stdout.strip().splitlines()[-1])}
        row["warm_ratio"] = row["looped_warm_s"] / row["unrolled_warm_s"]
        row["first_ratio"] = row["looped_first_s"] / row["unrolled_first_s"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    from jaxsim._solvers._ode import UNROLL_MAX_EQUATIONS

    return {"name": "stage_rule", "environment": environment(), "rows": rows,
            "unroll_max_equations": UNROLL_MAX_EQUATIONS}  # fmt: skip


def to_markdown(data: dict) -> str:
    lines = [
        "## Dopri8: stages written out or looped, by the drift's size (issue 41)",
        "",
        f"LEO 6 h, rtol = atol = 1e-10, `throw=False`, each model in a fresh process; load "
        f"average at each start given. Rule: written out up to "
        f"{data['unroll_max_equations']} jaxpr equations of the drift, looped above "
        "(`jaxsim._solvers._ode.UNROLL_MAX_EQUATIONS`). Ratios: looped / written out (< 1: looped "
        "faster).",
        "",
        "| model | drift equations | load | first call written out [s] | first call looped [s] "
        "| ratio | warm written out [s] | warm looped [s] | ratio | steps |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in data["rows"]:
        lines.append(
            f"| {r['model']} | {r['equations']} | {r['load']:.2f} | {r['unrolled_first_s']:.2f} "
            f"| {r['looped_first_s']:.2f} | {r['first_ratio']:.2f} | {r['unrolled_warm_s']:.4f} "
            f"| {r['looped_warm_s']:.4f} | {r['warm_ratio']:.2f} | {r['unrolled_steps']} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        sys.exit(0)
    from benchmarks._common import main as common_main

    sys.exit(
        common_main(
            "stage_rule",
            "Dopri8: stages written out or looped, by the drift's size (issue 41)",
            run,
            to_markdown,
            options=(
                (
                    "--only",
                    dict(nargs="*", help="models whose label contains a word (default: all)"),
                ),
            ),
        )
    )
