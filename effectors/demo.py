"""The main job: propagate the `combined` benchmark spacecraft for one orbit and plot it.

Run `python -m effectors.demo` (or the `jaxsim-demo` script). Prints the final state, energy and
momentum drift, compile and run times, and writes `jaxsim_demo.png` (override with `--out`).
"""

import argparse
import time

import jax
import numpy as np


def _drift(x):
    x = np.asarray(x)
    scale = np.abs(x[0]).max()
    return np.abs(x - x[0]).max() / scale if scale > 0 else np.abs(x - x[0]).max()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="jaxsim_demo.png", help="PNG file to write")
    parser.add_argument("--orbits", type=float, default=1.0, help="number of orbits (5830 s each)")
    parser.add_argument("--hub-only", action="store_true", help="leave out wheels and panels")
    args = parser.parse_args(argv)

    import jaxsim as js
    from effectors.scenarios import combined

    sc, y0, p = combined(state_effectors=not args.hub_only)
    dt, sample = p["step_s"], p["sample_interval_s"]
    t1 = round(args.orbits * p["duration_s"] / sample) * sample
    print(
        f"jaxsim {js.__version__} on {jax.devices()[0].platform}, float64={jax.config.jax_enable_x64}"
    )
    names = [e.name for e in sc.state_effectors + sc.dynamic_effectors]
    print(f"spacecraft 'combined': hub + {names} + point-mass Earth; RK4 at {dt} s, {t1:.0f} s")

    start = time.perf_counter()
    sol = js.simulate(sc, y0, t1, dt=dt, sample_dt=sample)
    jax.block_until_ready(sol.ys)
    first = time.perf_counter() - start
    start = time.perf_counter()
    sol = js.simulate(sc, y0, t1, dt=dt, sample_dt=sample)
    jax.block_until_ready(sol.ys)
    run = time.perf_counter() - start
    n = sol.stats["num_steps"]

    out = sol.outputs
    print(
        f"steps: {n}, samples: {len(sol.ts)}, MRP switches: {int(sol.counts['mrp_switches'][-1])}"
    )
    print(
        f"compile + first run: {first:.2f} s; run: {run * 1e3:.1f} ms ({run / n * 1e6:.2f} us/step)"
    )
    print(f"final state (t = {float(sol.ts[-1]):.0f} s):")
    for key in ["r_CN_N", "v_CN_N", "sigma_BN", "omega_BN_B"]:
        print(f"  {key:11s} = {np.array2string(np.asarray(out[key][-1]), precision=9)}")
    for e in sc.state_effectors:
        for key, val in sol.ys[e.name].items():
            print(f"  {e.name}.{key} = {np.array2string(np.asarray(val[-1]), precision=9)}")
    print("relative drift over the run (max |x - x0| / |x0|):")
    for key in ["totOrbEnergy", "totOrbAngMomPntN_N", "totRotEnergy", "totRotAngMomPntC_N"]:
        print(f"  {key:19s} {_drift(out[key]):.3e}")
    print("  (rotational quantities change through the gravity-gradient and external torques,")
    print("   the motor work and the panel dampers; the orbital ones are invariants here)")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(sol.ts) / 60.0
    fig, ax = plt.subplots(2, 2, figsize=(11, 7), constrained_layout=True)
    r = np.asarray(out["r_CN_N"]) / 1e3
    ax[0, 0].plot(r[:, 0], r[:, 1])
    ax[0, 0].set(title="orbit (N frame)", xlabel="x [km]", ylabel="y [km]", aspect="equal")
    ax[0, 1].plot(t, np.asarray(out["sigma_BN"]))
    ax[0, 1].set(title="attitude MRP sigma_BN", xlabel="t [min]")
    ax[1, 0].plot(t, np.asarray(out["omega_BN_B"]) * 1e3)
    ax[1, 0].set(title="body rates omega_BN_B", xlabel="t [min]", ylabel="[mrad/s]")
    if "rw" in sol.ys:
        ax[1, 1].plot(t, np.asarray(sol.ys["rw"]["Omega"]))
        ax[1, 1].set(title="wheel speeds", xlabel="t [min]", ylabel="[rad/s]")
    else:
        E = np.asarray(out["totOrbEnergy"])
        ax[1, 1].plot(t, (E - E[0]) / abs(E[0]))
        ax[1, 1].set(title="orbital energy drift", xlabel="t [min]", ylabel="relative")
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
