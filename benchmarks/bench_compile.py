r"""Benchmark (issue #27, deliverable 2): compile time of simulation programs, cold and on a restart.

Every figure is the first call of one program in a fresh Python process (each case its own
subprocess, after `import jaxsim` and building the model), split with JAX's staged API
(`jax.jit(f, compiler_options=jaxsim.compiler_options())`: `.trace` (Python tracing of the model
and the integrator, including `jax.grad`'s transformations), `.lower` (to StableHLO), `.compile`
(XLA), then the first run); `hlo_lines` is the lowered module's size. The processes run in the
configuration `import jaxsim` sets up (XLA's small-while-loop hoisting on unless
`JAXSIM_SMALL_LOOPS=0` is in the environment; recorded with each row).

Rows (`--only` names them):

- `compile_stages`: the J2 orbit of `bench_orbit_adaptive` (point mass + J2, 1 h, rtol = atol =
  1e-12) with each of jaxsim's adaptive pairs (Tsit5 and Dopri5: 7 stages, Dopri8: 13, Verner9:
  16), stages written out (`unrolled=True`) or evaluated by one drift in a `lax.fori_loop`
  (`unrolled=False`), forward run (`ys`) and gradient (`jax.grad` of |r(T)|^2 w.r.t. a scale of
  r0, default adjoint); `throw=False` (no host callback). Does compile time grow with the number
  of stages?
- `restart`: the issue's compile rows. The J2 1 h Dopri8 gradient program in `jaxsim.jit` with
  `throw=True` (the default) and `throw=False`, and the `combined` spacecraft's first reverse
  gradient (RK4 0.1 s, 600 s; `bench_lean`'s `combined` program), each cold and then in a second
  process with `jaxsim.enable_cache()` on the same (temporary) folder. `trace_lower_s` is
  `jaxsim.jit(...).lower(...)`; `first_call_s` includes it, the XLA compile (or the cache load)
  and the first run, as the issue's figure.

Run: `python -m benchmarks.bench_compile [--only ROW ...] [--repeats N]` (each figure the
fastest of N fresh processes, default 3: about 10 minutes on 2 idle cores;
absolute times scale with the machine's load, which is recorded); writes
`benchmarks/results/compile.json` and `.md` (`--markdown-only`: the `.md` again from the `.json`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import environment, fmt, main as common_main, markdown_table


ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"cold_s": 3.0, "restart_s": 0.5}  # issue 27's compile rows
J2_T1 = 3600.0
COMBINED_T1 = 600.0
STAGE_SOLVERS = ("Tsit5", "Dopri5", "Dopri8", "Verner9")
ROWS = ("compile_stages", "restart")


def _j2_program(solver_name: str, unrolled: bool, kind: str, throw: bool):
    """`(fn, arg)`: the J2 1 h run (`kind` `"forward"`: its samples; `"grad"`: d|r(T)|^2/d scale)."""
    import jax
    import jax.numpy as jnp

    import jaxsim as js
    from benchmarks import bench_orbit_adaptive as orbit

    point, _ = orbit.point_models()
    r0, v0 = orbit.kepler_to_rv(*orbit.ELEMENTS)
    solver = getattr(js, solver_name)(unrolled=unrolled)

    def sim(scale):
        return js.simulate(point, point.init_state(r0 * scale, v0), J2_T1, solver=solver,
                           rtol=1e-12, atol=1e-12, outputs=False, throw=throw)  # fmt: skip

    if kind == "grad":

        def loss(scale):
            r = sim(scale).ys["r_BN_N"][-1]
            return r @ r

        return jax.grad(loss), jnp.asarray(1.0)
    return (lambda scale: sim(scale).ys), jnp.asarray(1.0)


def _combined_program():
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import jaxsim as js
    from effectors.scenarios import combined

    sc, y0, _ = combined()
    params, static = eqx.partition(sc, eqx.is_inexact_array)

    def scalar(p):
        sol = js.simulate(eqx.combine(p, static), y0, COMBINED_T1, dt=0.1, outputs=False)
        hub = sol.ys["hub"]
        return jnp.sum(hub["sigma_BN"][-1]) + jnp.sum(hub["omega_BN_B"][-1])

    return jax.grad(scalar), params


def child(spec: dict) -> dict:
    """One fresh process: the first call of one program (`spec`), split into its phases."""
    import time

    import jax

    import jaxsim as js

    if spec.get("cache"):
        js.enable_cache(spec["cache"])
    if spec["program"] == "combined":
        fn, arg = _combined_program()
    else:
        fn, arg = _j2_program(spec["solver"], spec["unrolled"], spec["kind"], spec["throw"])
    out = {"small_loops": js.small_loops().effective}
    if spec["mode"] == "split":
        jitted = jax.jit(fn, compiler_options=js.compiler_options())
        t0 = time.perf_counter()
        traced = jitted.trace(arg)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        compiled = lowered.compile()
        t3 = time.perf_counter()
        jax.block_until_ready(compiled(arg))
        t4 = time.perf_counter()
        out.update(trace_s=t1 - t0, lower_s=t2 - t1, xla_s=t3 - t2, run_s=t4 - t3,
                   first_call_s=t4 - t0, hlo_lines=lowered.as_text().count("\n"))  # fmt: skip
    else:  # as a user calls it: `jaxsim.jit` (its options, and the cache when on)
        jitted = js.jit(fn)
        t0 = time.perf_counter()
        jitted.lower(arg)
        t1 = time.perf_counter()
        jax.block_until_ready(jitted(arg))
        out.update(trace_lower_s=t1 - t0, first_call_s=time.perf_counter() - t0)
    return out


def _run_child(spec: dict) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench_compile", "--child", json.dumps(spec)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXSIM_CACHE")}
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _best_child(spec: dict, repeats: int) -> dict:
    """The fastest of `repeats` fresh processes running `spec` (the least disturbed by load)."""
    return min((_run_child(spec) for _ in range(repeats)), key=lambda r: r["first_call_s"])


def stages_row(repeats: int) -> list[dict]:
    """Cold first calls of the J2 programs by pair, stages written out or looped, forward/grad."""
    import jaxsim as js
    from jaxsim._cores import _adaptive as core

    rows = []
    for name in STAGE_SOLVERS:
        stages = core.pair_of(getattr(js, name)._unrolled_cls).stages
        for unrolled in (True, False):
            for kind in ("forward", "grad"):
                spec = dict(program="j2", solver=name, unrolled=unrolled, kind=kind,
                            throw=False, mode="split")  # fmt: skip
                r = _best_child(spec, repeats)
                r.update(pair=name, stages=stages, unrolled=unrolled, program=kind)
                rows.append(r)
                print(f"{name} unrolled={unrolled} {kind}: {r['first_call_s']:.2f} s", flush=True)
    return rows


def restart_row(repeats: int) -> list[dict]:
    """The issue's compile rows: cold, then restart with the persistent cache on (each the
    fastest of `repeats` pairs of processes, each pair on a fresh cache folder)."""
    cases = [
        ("J2 1 h Dopri8 gradient, throw=True", dict(program="j2", solver="Dopri8",
                                                    unrolled=True, kind="grad", throw=True)),
        ("J2 1 h Dopri8 gradient, throw=False", dict(program="j2", solver="Dopri8",
                                                     unrolled=True, kind="grad", throw=False)),
        ("combined first reverse gradient", dict(program="combined")),
    ]  # fmt: skip
    rows = []
    for name, spec in cases:
        colds, warms = [], []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory(prefix="jaxsim-compile-") as tmp:
                colds.append(_run_child(dict(spec, mode="user", cache=tmp)))
                warms.append(_run_child(dict(spec, mode="user", cache=tmp)))
        cold = min(colds, key=lambda r: r["first_call_s"])
        warm = min(warms, key=lambda r: r["first_call_s"])
        rows.append({
            "case": name, "small_loops": cold["small_loops"], "cold_s": cold["first_call_s"],
            "cold_trace_lower_s": cold["trace_lower_s"], "restart_s": warm["first_call_s"],
            "restart_trace_lower_s": warm["trace_lower_s"],
        })  # fmt: skip
        print(f"{name}: cold {cold['first_call_s']:.2f} s, restart {warm['first_call_s']:.2f} s",
              flush=True)  # fmt: skip
    return rows


def run(args) -> dict:
    only = args.only or ROWS
    data = {"name": "compile", "title": "Compile time of simulation programs (issue 27)",
            "environment": environment()}  # fmt: skip
    if "compile_stages" in only:
        data["compile_stages"] = stages_row(args.repeats)
    if "restart" in only:
        data["restart"] = restart_row(args.repeats)
    data["repeats"] = args.repeats
    data["environment_end"] = environment()
    previous = Path(args.keep) if args.keep else None
    if previous is not None and previous.exists():  # rows not rerun are kept
        old = json.loads(previous.read_text())
        for row in ROWS:
            if row not in data and row in old:
                data[row] = old[row]
    return data


def to_markdown(data: dict) -> str:
    env, end = data["environment"], data.get("environment_end", {})
    lines = [
        "## Compile time of simulation programs (issue 27)",
        "",
        f"First call of each program in a fresh process (the fastest of {data.get('repeats', 1)});"
        f" load average {fmt(env.get('loadavg_1m'))}"
        f" at the start, {fmt(end.get('loadavg_1m'))} at the end, on {env.get('cpu_count')} "
        "cores (absolute times scale with the load).",
    ]
    if "compile_stages" in data:
        rows = data["compile_stages"]
        lines += [
            "",
            "### Compile time vs number of stages (`compile_stages`)",
            "",
            "J2 orbit 1 h, rtol 1e-12, `throw=False`; `grad`: `jax.grad` with the default "
            "adjoint (`DiscreteAdjoint`). Small-loop hoisting: "
            f"{sorted({r['small_loops'] for r in rows})}.",
            "",
            markdown_table(
                rows,
                [
                    ("pair", "pair"),
                    ("stages", "stages"),
                    ("unrolled", "unrolled"),
                    ("program", "program"),
                    ("trace_s", "trace [s]"),
                    ("lower_s", "lower [s]"),
                    ("xla_s", "XLA [s]"),
                    ("run_s", "first run [s]"),
                    ("first_call_s", "first call [s]"),
                    ("hlo_lines", "HLO lines"),
                ],
            ),  # fmt: skip
        ]
        lines += ["", _stages_summary(rows)]
    if "restart" in data:
        rows = data["restart"]
        for r in rows:
            r["met"] = r["cold_s"] <= TARGETS["cold_s"] and (
                "combined" in r["case"] or r["restart_s"] <= TARGETS["restart_s"]
            )  # fmt: skip
        lines += [
            "",
            "### Cold and restart (`restart`)",
            "",
            "`jaxsim.jit` of the program, first call in a fresh process (`cold`), then in a "
            "second process with `jaxsim.enable_cache()` on the same folder (`restart`); "
            "trace + lower: `jaxsim.jit(...).lower(...)`, part of the first call. Targets: cold "
            f"<= {TARGETS['cold_s']:g} s, restart <= {TARGETS['restart_s']:g} s (the J2 gradient).",
            "",
            markdown_table(
                rows,
                [
                    ("case", "program"),
                    ("small_loops", "hoisting"),
                    ("cold_s", "cold [s]"),
                    ("cold_trace_lower_s", "cold: trace + lower [s]"),
                    ("restart_s", "restart [s]"),
                    ("restart_trace_lower_s", "restart: trace + lower [s]"),
                    ("met", "target met"),
                ],
            ),  # fmt: skip
        ]
    return "\n".join(lines) + "\n"


def _stages_summary(rows) -> str:
    """Dopri8 against Dopri5 (13 vs 7 stages, `Pair.stages` counting the FSAL row): first call
    and HLO size, stages written out and looped."""

    def pick(pair, unrolled, program):
        for r in rows:
            if (r["pair"], r["unrolled"], r["program"]) == (pair, unrolled, program):
                return r
        return None

    parts = []
    for program in ("forward", "grad"):
        for unrolled in (True, False):
            a, b = pick("Dopri5", unrolled, program), pick("Dopri8", unrolled, program)
            if a and b:
                what = "written out" if unrolled else "looped"
                parts.append(
                    f"{program}, stages {what}: first call x{b['first_call_s'] / a['first_call_s']:.2f}"
                    f", HLO x{b['hlo_lines'] / a['hlo_lines']:.2f}"
                )  # fmt: skip
    if not parts:
        return ""
    return "Dopri8 (13 stages) / Dopri5 (7): " + "; ".join(parts) + "."


if __name__ == "__main__":
    # XLA's small-loop hoisting is opt-in (docs/engine.md): measured here with it on, unless the
    # caller set JAXSIM_SMALL_LOOPS (its children inherit it).
    os.environ.setdefault("JAXSIM_SMALL_LOOPS", "1")
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        sys.exit(0)
    if sys.argv[1:] == ["--markdown-only"]:  # compile.md again from compile.json
        from benchmarks._common import RESULTS, write_results

        data = json.loads((RESULTS / "compile.json").read_text())
        write_results("compile", data, to_markdown(data))
        sys.exit(0)
    sys.exit(
        common_main(
            "compile",
            "Compile time of simulation programs (issue 27)",
            run,
            to_markdown,
            options=(
                ("--only", dict(nargs="*", choices=ROWS, help="rows to run (default: all)")),
                (
                    "--repeats",
                    dict(type=int, default=3, help="fresh processes per figure, the fastest kept"),
                ),
                (
                    "--keep",
                    dict(
                        default=str(ROOT / "benchmarks" / "results" / "compile.json"),
                        help="earlier results whose rows not rerun are kept",
                    ),
                ),
            ),
        )  # fmt: skip
    )
