r"""Benchmark (issue 41): compile time and program size of realistic models, cold and with the cache.

Cases (`--only` names them):

- `leo_week`: the environment guide's "run with all of it" for a week: zonal Earth J2..J6 in the
  rotating frame, Sun and Moon third bodies from DE421, cannonball SRP with the conical shadow of
  the Earth and the Moon, Harris-Priester drag, `Dopri8` at rtol = atol = 1e-10, 7 days, samples
  every 60 s (`js.simulate` at the top level, as a user calls it).
- `combined_grad`: the `combined` spacecraft's first reverse gradient (RK4 0.1 s, 600 s;
  `bench_compile`'s `restart` row).
- `fsw_mc_grad`: value and gradient w.r.t. the PD gains (K, P) of a clocked flight-software
  slew (hub, 3 wheels, `RWAttitudeFSW` at 10 Hz, RK4 0.05 s, 60 s = 1200 steps), the mean over 8
  vmapped inertia dispersions.
- `trajopt_eval`: one evaluation (values + Jacobian) of the Bryson-Ho orbit transfer with 100
  multiple-shooting intervals (2 RK4 steps each, 101 knots): `Problem.evaluate`.
- `mujoco_scene`: the hub + 2 hinged panels MuJoCo scene of `bench_mujoco_scene` (RK4 10 ms, 10 s,
  0.1 s samples with outputs), top-level `js.simulate`.

Each case runs in fresh Python processes (`import jaxsim` and the model built before the clock
starts): (1) cache off: the first call as a user makes it (`first_call_s`: trace, lower, XLA
compile, first run), then the warm call (`warm_s`, fastest of 3), then the program size: the
function traced and lowered again with `jax.jit` (`throw=False` where it applies, the program a
top-level run compiles), `hlo_instructions` the instruction count of its HLO before XLA's
optimisation (what jaxsim hands XLA), `trace_lower_s` that trace + lower; (2) cache on, a fresh
folder: a first process (`cache_first_s`; `cache_files`: files written) and a second
(`cache_second_s`, the restart). `--roots A B ...` runs every case on each source tree (e.g. a
`git archive` of an older commit) in the same session, interleaved, for a before/after on the
same load; the load average is recorded beside each case.

Run: `python -m benchmarks.bench_compile_models [--only CASE ...] [--roots DIR ...] [--label L ...]`
(about 10 minutes per tree on 2 idle cores); writes `benchmarks/results/compile_models.json` and
`.md` (`--markdown-only`: the `.md` again from the `.json`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

CASES = ("leo_week", "combined_grad", "fsw_mc_grad", "trajopt_eval", "mujoco_scene")
# Issue 41's targets (quiet machine, cold process, cache off; restart with the cache).
TARGETS = {"leo_week": 5.0, "combined_grad": 3.0, "fsw_mc_grad": 4.0, "trajopt_eval": 3.0}
TARGET_RESTART_S = 1.0
WEEK = 7 * 86400.0  # [s]
_HLO_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?[%\w.\-]+ = ", re.MULTILINE)


# ----------------------------------------------------------------------------------------------
# The models: each returns `(user, fn, args)`: `user()` the call as a user makes it (returns
# arrays), `fn(*args)` the same program as a pure function for `jax.jit` (program size).


def leo_model(degree=6, third_bodies=True, srp=True, drag=True):
    """`(spacecraft, y0)`: the guide's "run with all of it" for a week (any part may be left
    out: `third_bodies`, `srp`, `drag`; `degree` 0 for a point-mass Earth)."""
    import numpy as np

    import effectors as fx

    epoch = fx.astro.Epoch("2025-03-20T12:00:00Z")
    t0 = epoch.tdb_seconds_past_j2000
    eph = fx.astro.DE421Ephemeris(["sun", "moon"], t0, t0 + WEEK)
    if degree:
        earth = fx.SphericalHarmonicGravity.from_body(
            fx.astro.EARTH, degree=degree, dcm_PN=fx.astro.EarthRotation(epoch), central=True
        )
    else:
        earth = fx.PointMassGravity(fx.astro.EARTH, central=True)
    gravity = [earth]
    if third_bodies:
        gravity += [
            fx.ThirdBodyGravity.from_ephemeris(fx.astro.MOON, eph, epoch),
            fx.ThirdBodyGravity.from_ephemeris(fx.astro.SUN, eph, epoch),
        ]
    effectors = []
    if srp:
        effectors.append(fx.CannonballSRP.from_ephemeris(4.0, eph, epoch, C_R=1.3))
    if drag:
        atmosphere = fx.HarrisPriesterAtmosphere(eph.trajectory("sun", epoch))
        effectors.append(fx.Drag(atmosphere, Cd=2.2, area=4.0))
    sc = fx.Spacecraft(
        fx.Hub(500.0, np.eye(3) * 100.0), dynamic_effectors=effectors, gravity=gravity
    )
    r0 = fx.astro.EARTH.radius_equatorial + 500e3  # [m]
    v0 = np.sqrt(fx.astro.EARTH.mu / r0)
    return sc, sc.init_state([r0, 0.0, 0.0], [0.0, v0 * np.cos(0.9), v0 * np.sin(0.9)])


def _leo_week():
    import jax.numpy as jnp

    import jaxsim as js

    sc, y0 = leo_model()
    kw = dict(solver=js.Dopri8(), rtol=1e-10, atol=1e-10, sample_dt=60.0, max_steps=200_000)

    def user():
        sol = js.simulate(sc, y0, WEEK, **kw)
        return sol.ys["hub"]["r_BN_N"]

    def fn(y):
        return js.simulate(sc, y, WEEK, throw=False, **kw).ys["hub"]["r_BN_N"]

    return user, fn, (jax_tree(y0, jnp),)


def jax_tree(tree, jnp):
    import jax

    return jax.tree_util.tree_map(jnp.asarray, tree)


def _jit_user(fn, args):
    import jaxsim as js

    jitted = js.jit(fn)
    return lambda: jitted(*args)


def _combined_grad():
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import jaxsim as js
    from effectors.scenarios import combined

    sc, y0, _ = combined()
    params, static = eqx.partition(sc, eqx.is_inexact_array)

    def scalar(p):
        sol = js.simulate(eqx.combine(p, static), y0, 600.0, dt=0.1, outputs=False)
        hub = sol.ys["hub"]
        return jnp.sum(hub["sigma_BN"][-1]) + jnp.sum(hub["omega_BN_B"][-1])

    fn = jax.grad(scalar)
    return _jit_user(fn, (params,)), fn, (params,)


def _fsw_mc_grad():
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    import effectors as fx
    import jaxsim as js
    from tests.reference import basilisk_slew as bsl

    scenario = {**bsl.SCENARIO, "Ki": -1.0, "duration": 60.0}
    sc, fsw, y0 = bsl.build_jaxsim(scenario)
    rng = np.random.default_rng(0)
    I0 = np.asarray(scenario["I_B"])
    scales = np.sqrt(1.0 + 0.1 * rng.uniform(-1.0, 1.0, size=(8, 3)))
    inertias = jnp.asarray([np.diag(s) @ I0 @ np.diag(s) for s in scales])
    sigma_RN = jnp.asarray(scenario["sigma_RN"])

    def member(gains, inertia):
        sc_i = eqx.tree_at(lambda s: s.hub.IHubPntBc_B, sc, inertia)
        fsw_i = eqx.tree_at(lambda f: (f.control.K, f.control.P), fsw, (gains[0], gains[1]))
        sol = js.simulate(sc_i, y0, scenario["duration"], dt=scenario["dyn_dt"], solver=js.RK4(),
                          clocks=(fsw_i,), sample_dt=1.0, outputs=False)  # fmt: skip
        err = jax.vmap(lambda s: fx.mrp_subtract(s, sigma_RN))(sol.ys["hub"]["sigma_BN"])
        return jnp.sum(err**2) + jnp.sum(sol.ys["hub"]["omega_BN_B"] ** 2)

    def loss(gains):
        return jnp.mean(jax.vmap(member, in_axes=(None, 0))(gains, inertias))

    fn = jax.value_and_grad(loss)
    gains = jnp.asarray([scenario["K"], scenario["P"]])
    return _jit_user(fn, (gains,)), fn, (gains,)


def _trajopt_eval():
    import jax.numpy as jnp

    from jaxsim import optimize as jo

    problem = jo.problems.orbit_raising(
        num_knots=101, num_segments=100, steps_per_segment=2, multiple_shooting=True
    )
    z, a = jnp.asarray(problem.z0), problem.args
    return (lambda: problem.evaluate(z, a)), problem._evaluate, (z, a)


def _mujoco_scene():
    import jaxsim as js
    from benchmarks import bench_mujoco_scene as ms

    scene, y0 = ms.build()["MuJoCoScene"]
    kw = dict(dt=ms.DT, solver=js.RK4(), sample_dt=ms.SAMPLE_DT)

    def user():
        return js.simulate(scene, y0, ms.T1, **kw).ys

    def fn(y):
        return js.simulate(scene, y, ms.T1, throw=False, **kw).ys

    return user, fn, (y0,)


BUILDERS = {
    "leo_week": _leo_week,
    "combined_grad": _combined_grad,
    "fsw_mc_grad": _fsw_mc_grad,
    "trajopt_eval": _trajopt_eval,
    "mujoco_scene": _mujoco_scene,
}


# ----------------------------------------------------------------------------------------------
# One fresh process


def child(spec: dict) -> dict:
    import jax

    import jaxsim as js

    if spec.get("cache"):
        js.enable_cache(spec["cache"])
    user, fn, args = BUILDERS[spec["case"]]()
    out = {"small_loops": js.small_loops().effective}
    t0 = time.perf_counter()
    jax.block_until_ready(user())
    out["first_call_s"] = time.perf_counter() - t0
    if spec["mode"] == "cache":
        return out
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        jax.block_until_ready(user())
        warm.append(time.perf_counter() - t0)
    out["warm_s"] = min(warm)
    jitted = jax.jit(fn, compiler_options=js.compiler_options())
    t0 = time.perf_counter()
    lowered = jitted.trace(*args).lower()
    out["trace_lower_s"] = time.perf_counter() - t0
    out["hlo_instructions"] = len(_HLO_INSTRUCTION.findall(lowered.as_text(dialect="hlo")))
    return out


def _loadavg() -> float:
    return os.getloadavg()[0]


def _run_child(spec: dict, root: Path) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAXSIM_CACHE")}
    env["PYTHONPATH"] = str(root)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(case: str, root: Path) -> dict:
    row = {"case": case, "load_start": _loadavg()}
    row.update(_run_child({"case": case, "mode": "cold"}, root))
    with tempfile.TemporaryDirectory(prefix="jaxsim-compile-models-") as tmp:
        first = _run_child({"case": case, "mode": "cache", "cache": tmp}, root)
        files = sum(1 for p in Path(tmp).rglob("*") if p.is_file())
        second = _run_child({"case": case, "mode": "cache", "cache": tmp}, root)
    row.update(cache_first_s=first.get("first_call_s"), cache_files=files,
               cache_second_s=second.get("first_call_s"), load_end=_loadavg())  # fmt: skip
    return row


def _git_commit(root: Path) -> str:
    marker = root / "COMMIT"
    if marker.exists():
        return marker.read_text().strip()
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        return out.stdout.strip() + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(args) -> dict:
    from benchmarks._common import environment

    roots = [Path(r).resolve() for r in (args.roots or [str(ROOT)])]
    labels = args.label or [_git_commit(r) for r in roots]
    data = {"name": "compile_models", "title": "Compile time and program size of realistic models (issue 41)",
            "environment": environment(), "trees": dict(zip(labels, map(_git_commit, roots))),
            "rows": []}  # fmt: skip
    for case in args.only or CASES:
        for label, root in zip(labels, roots):
            row = measure(case, root)
            row["tree"] = label
            data["rows"].append(row)
            print(json.dumps(row), flush=True)
    data["environment_end"] = environment()
    return data


def _f(x, digits=2):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def to_markdown(data: dict) -> str:
    env = data["environment"]
    lines = [
        "## Compile time and program size of realistic models (issue 41)",
        "",
        "Each figure the first call in a fresh process (the model built before the clock starts); "
        f"{env.get('cpu_count')} cores shared with other work: the load average (1 min) is given "
        "beside each case, absolute times scale with it. `cold`: cache off; `warm`: the second "
        "call in that process (fastest of 3); `HLO`: instructions of the program before XLA's "
        "optimisation; `cache 1st`/`2nd`: two processes on one fresh `jaxsim.enable_cache` "
        "folder (`files`: what the first wrote). Trees: "
        + ", ".join(f"`{k}` = {v}" for k, v in data.get("trees", {}).items())
        + ".",
        "",
        "| case | tree | hoisting | load | cold [s] | target | warm [s] | trace+lower [s] | HLO "
        "| cache 1st [s] | files | cache 2nd [s] |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in data["rows"]:
        target = TARGETS.get(r["case"])
        if "error" in r:
            lines.append(f"| {r['case']} | {r['tree']} | error: {r['error']} |")
            continue
        lines.append(
            f"| {r['case']} | {r['tree']} | {r.get('small_loops')} | {_f(r['load_start'])} "
            f"| {_f(r.get('first_call_s'))} | {'-' if target is None else f'<= {target:g}'} "
            f"| {_f(r.get('warm_s'), 3)} | {_f(r.get('trace_lower_s'))} "
            f"| {_f(r.get('hlo_instructions'))} | {_f(r.get('cache_first_s'))} "
            f"| {r.get('cache_files')} | {_f(r.get('cache_second_s'))} |"
        )
    lines += [
        "",
        f"Targets (issue 41, quiet machine, cache off): the `target` column; with the cache, the "
        f"second process's first call <= {TARGET_RESTART_S:g} s.",
    ]
    if data.get("notes"):
        lines += ["", data["notes"] + "."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.path.insert(0, os.getcwd())
        print(json.dumps(child(json.loads(sys.argv[2]))))
        sys.exit(0)
    from benchmarks._common import RESULTS, main as common_main, write_results

    if sys.argv[1:] == ["--markdown-only"]:
        data = json.loads((RESULTS / "compile_models.json").read_text())
        write_results("compile_models", data, to_markdown(data))
        sys.exit(0)
    sys.exit(
        common_main(
            "compile_models",
            "Compile time and program size of realistic models (issue 41)",
            run,
            to_markdown,
            options=(
                ("--only", dict(nargs="*", choices=CASES, help="cases to run (default: all)")),
                ("--roots", dict(nargs="*", help="source trees to measure (default: this one)")),
                ("--label", dict(nargs="*", help="a label per root (default: its commit)")),
            ),
        )
    )
