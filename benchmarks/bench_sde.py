"""Stochastic-drag ensemble benchmark: 10,000 spacecraft paths in one `jax.vmap`.

Model (after Basilisk's `scenarioStochasticDragSpacecraft`): 100 kg hub in a circular 250 km orbit,
Earth point mass, cannonball drag (Cd 2.2, A 10 m^2) in an exponential atmosphere whose density is
multiplied by (1 + delta), delta an Ornstein-Uhlenbeck state (tau 108 s, sigma 0.15). SRA1 and
Euler-Maruyama, dt = 1 s, 600 steps. Prints and writes `benchmarks/results/sde.json` with throughput
in path-steps per second (compile time reported apart).

If Basilisk (`bsk`) is importable, the same model is run in Basilisk for a few seeds (one
simulation per path, as Basilisk has no batch mode) and its time per path-step is reported;
otherwise the per-path-step figure of `tests/data/stochastic_ou.json` `basilisk_run` (a different,
scalar-OU model) is recorded and labelled as such.

Run: `python benchmarks/bench_sde.py [--paths N] [--basilisk-paths M]`.
"""

import argparse
import json
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

import effectors as fx
import jaxsim as js


ROOT = Path(__file__).resolve().parents[1]
MU = 3.986004418e14  # [m^3/s^2]
R_E = 6371e3  # [m]
ALT = 250e3  # [m]
RHO0, H_SCALE = 1.217, 8500.0  # [kg/m^3], [m]
CD, AREA, MASS = 2.2, 10.0, 100.0  # [-], [m^2], [kg]
TAU, SIGMA = 108.0, 0.15  # [s], [-]
DT, N_STEPS = 1.0, 600  # [s], [-]


def build():
    noise = fx.MeanRevertingNoise(tau=TAU, sigma=SIGMA, name="rho_noise")
    drag = fx.Drag(fx.ExponentialAtmosphere(RHO0, H_SCALE, R_E), CD, AREA,
                   density_correction="rho_noise")  # fmt: skip
    sc = fx.Spacecraft(fx.Hub(MASS, jnp.diag(jnp.array([10.0, 12.0, 8.0]))),
                       state_effectors=(noise,), dynamic_effectors=(drag,),
                       gravity=(fx.PointMassGravity(MU, name="earth"),))  # fmt: skip
    r = R_E + ALT
    y0 = sc.init_state([r, 0.0, 0.0], [0.0, np.sqrt(MU / r), 0.0])
    return sc, y0


def bench_jaxsim(n_paths, solver):
    sc, y0 = build()

    def one(key):
        sol = js.simulate(sc, y0, N_STEPS * DT, dt=DT, sample_dt=60.0, solver=solver, key=key,
                          outputs=False)  # fmt: skip
        return sol.ys["hub"]["r_BN_N"], sol.ys["rho_noise"]

    run = js.jit(jax.vmap(one))
    keys = jr.split(jr.key(0), n_paths)
    t = time.perf_counter()
    compiled = run.lower(keys).compile()
    t_compile = time.perf_counter() - t
    jax.block_until_ready(compiled(keys))  # warm-up
    t = time.perf_counter()
    r, delta = jax.block_until_ready(compiled(keys))
    t_run = time.perf_counter() - t
    r_end = np.linalg.norm(np.asarray(r[:, -1]), axis=1)
    return {
        "solver": type(solver).__name__,
        "n_paths": n_paths,
        "n_steps": N_STEPS,
        "compile_s": t_compile,
        "run_s": t_run,
        "path_steps_per_s": n_paths * N_STEPS / t_run,
        "us_per_path_step": 1e6 * t_run / (n_paths * N_STEPS),
        "radius_end_mean_m": float(r_end.mean()),
        "radius_end_std_m": float(r_end.std()),
        "delta_end_std": float(np.asarray(delta[:, -1, 0]).std()),
    }


def bench_basilisk(n_paths):
    """The same model in Basilisk, one simulation per path; returns None when bsk is missing."""
    try:
        from Basilisk.simulation import (
            dragDynamicEffector,
            exponentialAtmosphere,
            meanRevertingNoiseStateEffector,
            spacecraft,
            svIntegrators,
        )
        from Basilisk.utilities import SimulationBaseClass, macros, simIncludeGravBody
    except ImportError:
        return None
    import Basilisk

    walls = []
    r_end = []
    for seed in range(n_paths):
        sim = SimulationBaseClass.SimBaseClass()
        proc = sim.CreateNewProcess("proc")
        proc.addTask(sim.CreateNewTask("task", macros.sec2nano(DT)))
        sc = spacecraft.Spacecraft()
        sc.ModelTag = "sc"
        sc.hub.mHub = MASS
        sc.hub.IHubPntBc_B = [[10.0, 0, 0], [0, 12.0, 0], [0, 0, 8.0]]
        r = R_E + ALT
        sc.hub.r_CN_NInit = [[r], [0.0], [0.0]]
        sc.hub.v_CN_NInit = [[0.0], [np.sqrt(MU / r)], [0.0]]
        grav = simIncludeGravBody.gravBodyFactory()
        earth = grav.createEarth()
        earth.isCentralBody = True
        earth.mu = MU
        grav.addBodiesTo(sc)
        atmo = exponentialAtmosphere.ExponentialAtmosphere()
        atmo.ModelTag = "atmo"
        atmo.baseDensity = RHO0
        atmo.scaleHeight = H_SCALE
        atmo.planetRadius = R_E
        atmo.addSpacecraftToModel(sc.scStateOutMsg)
        noise = meanRevertingNoiseStateEffector.MeanRevertingNoiseStateEffector()
        noise.ModelTag = "rho_noise"
        noise.setStationaryStd(SIGMA)
        noise.setTimeConstant(TAU)
        sc.addStateEffector(noise)
        drag = dragDynamicEffector.DragDynamicEffector()
        drag.ModelTag = "drag"
        drag.coreParams.projectedArea = AREA
        drag.coreParams.dragCoeff = CD
        drag.atmoDensInMsg.subscribeTo(atmo.envOutMsgs[0])
        drag.densityCorrectionStateName = noise.getStateName()
        sc.addDynamicEffector(drag)
        integ = svIntegrators.svStochasticIntegratorSRA1(sc)
        integ.setRNGSeed(seed)
        sc.setIntegrator(integ)
        sim.AddModelToTask("task", atmo)
        sim.AddModelToTask("task", drag)
        sim.AddModelToTask("task", sc)
        sim.InitializeSimulation()
        sim.ConfigureStopTime(macros.sec2nano(N_STEPS * DT))
        t = time.perf_counter()
        sim.ExecuteSimulation()
        walls.append(time.perf_counter() - t)
        r_end.append(np.linalg.norm(sc.scStateOutMsg.read().r_BN_N))
    total = float(np.sum(walls))
    return {
        "version": getattr(Basilisk, "__version__", "unknown"),
        "integrator": "svStochasticIntegratorSRA1",
        "n_paths_timed": n_paths,
        "n_steps": N_STEPS,
        "execute_wall_s_total": total,
        "us_per_path_step": 1e6 * total / (n_paths * N_STEPS),
        "path_steps_per_s": n_paths * N_STEPS / total,
        "radius_end_mean_m": float(np.mean(r_end)),
        "note": "one Basilisk simulation per path (ExecuteSimulation time only); "
        "the 10,000-path figure is extrapolated linearly",
    }


def basilisk_reference_figure():
    spec = json.loads((ROOT / "tests" / "data" / "stochastic_ou.json").read_text())
    n_paths, n_steps = spec["ensemble"]["n_paths"], spec["time"]["n_steps"]
    return {
        "source": "tests/data/stochastic_ou.json basilisk_run (scalar OU states in an inert spacecraft, "
        "NOT the drag model of this benchmark)",
        "us_per_path_step": {
            k: 1e6 * v / (n_paths * n_steps)
            for k, v in spec["basilisk_run"]["execute_wall_s"].items()
        },
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--paths", type=int, default=10_000)
    ap.add_argument("--basilisk-paths", type=int, default=20)
    a = ap.parse_args()
    results = {
        "model": "100 kg hub, circular 250 km orbit, Earth point mass, cannonball drag, "
        "exponential atmosphere x (1 + OU delta), tau 108 s, sigma 0.15",
        "dt_s": DT,
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0]),
        "platform": platform.platform(),
        "jaxsim": [bench_jaxsim(a.paths, s) for s in (js.SRA1(), js.EulerMaruyama())],
    }
    try:
        bsk = bench_basilisk(a.basilisk_paths)
    except Exception as err:  # a Basilisk API mismatch must not lose the jaxsim figures
        bsk = {"error": f"{type(err).__name__}: {err}"}
    results["basilisk"] = bsk if bsk is not None else {"not_installed": True}
    results["basilisk_reference_figure"] = basilisk_reference_figure()
    for r in results["jaxsim"]:
        print(f"jaxsim {r['solver']:>13}: {r['n_paths']} paths x {r['n_steps']} steps in "
              f"{r['run_s']:.3f} s ({r['path_steps_per_s']:.3g} path-steps/s, "
              f"{r['us_per_path_step']:.3f} us/path-step; compile {r['compile_s']:.1f} s)")  # fmt: skip
    if "us_per_path_step" in results["basilisk"]:
        b = results["basilisk"]
        print(f"Basilisk SRA1: {b['us_per_path_step']:.2f} us/path-step over {b['n_paths_timed']} "
              f"paths ({b['path_steps_per_s']:.3g} path-steps/s)")  # fmt: skip
    else:
        print("Basilisk:", results["basilisk"])
    print("Basilisk reference figure (stochastic_ou, other model):",
          results["basilisk_reference_figure"]["us_per_path_step"], "us/path-step")  # fmt: skip
    out = ROOT / "benchmarks" / "results" / "sde.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print("wrote", out)


if __name__ == "__main__":
    main()
