"""The main job: propagate the `combined` benchmark spacecraft for one orbit and plot it.

Run `jaxsim-demo` (or `python -m effectors.demo`). Prints the final state, energy and momentum
drift, compile and run times, and writes `jaxsim_demo.png` (override with `--out`). The figure
needs matplotlib (the `plot` extra); without it the demo prints the run, says how to get the
figure, and exits 0. The arguments are defined in `_jaxsim_cli.demo_parser`, which `jaxsim-demo`
parses before JAX is imported.
"""

import argparse
import sys
import time

import jax
import numpy as np


def _drift(x):
    x = np.asarray(x)
    scale = np.abs(x[0]).max()
    return np.abs(x - x[0]).max() / scale if scale > 0 else np.abs(x - x[0]).max()


DRIFT_KEYS = ("totOrbEnergy", "totOrbAngMomPntN_N", "totRotEnergy", "totRotAngMomPntC_N")


def demo_figure(sol, *, wheels: str = "rw"):
    """The demo's figure of one `Spacecraft` run (matplotlib needed), 2 x 3 panels, each with a
    legend and units: the orbit in 3D around the Earth [km]; the attitude `sigma_BN` [-] and the
    body rates `omega_BN_B` [mrad/s] (x, y, z); the wheel speeds [rad/s] (wheel 1, 2, ...; an empty
    panel for a spacecraft without the `wheels` effector); the radius change [km]; the relative
    drift of Basilisk's four totals (log scale). Returns the Figure."""
    import matplotlib.pyplot as plt

    from effectors import plotting

    out = sol.outputs
    t, t_label = plotting.time_axis(sol, "min")
    fig = plt.figure(figsize=(16, 8.5), constrained_layout=True)
    ax_orbit = fig.add_subplot(2, 3, 1, projection="3d")
    r_km = np.asarray(out["r_CN_N"]) / 1e3
    plotting.draw_orbit_3d(ax_orbit, r_km, body_radius_km=plotting.EARTH_RADIUS / 1e3)
    ax_orbit.set_title("orbit r_CN_N (N frame)")
    axes = [fig.add_subplot(2, 3, i) for i in range(2, 7)]
    for ax, key, scale, unit in [(axes[0], "sigma_BN", 1.0, "-"),
                                 (axes[1], "omega_BN_B", 1e3, "mrad/s")]:  # fmt: skip
        value = np.asarray(out[key]) * scale
        for i, label in enumerate(plotting.component_labels(value.shape[-1])):
            ax.plot(t, value[:, i], label=label)
        ax.set(title=f"{key}", ylabel=f"{key} [{unit}]")
        ax.legend(loc="best", ncols=3)
        ax.grid(alpha=0.3)
    if isinstance(sol.ys, dict) and wheels in sol.ys:
        plotting.draw_wheel_speeds(axes[2], t, np.asarray(sol.ys[wheels]["Omega"]))
        axes[2].set_title(f"wheel speeds ({wheels})")
    else:
        axes[2].set_axis_off()
    radius = np.linalg.norm(np.asarray(out["r_CN_N"]), axis=-1)
    axes[3].plot(t, (radius - radius[0]) / 1e3, label="|r_CN_N| - |r_CN_N(t0)|")
    axes[3].set(title=f"radius change (|r_CN_N(t0)| = {radius[0] / 1e3:.3f} km)",
                ylabel="radius change [km]")  # fmt: skip
    axes[3].legend(loc="best")
    axes[3].grid(alpha=0.3)
    for key in DRIFT_KEYS:
        axes[4].plot(t, plotting.relative_drift(out[key]), label=key)
    axes[4].set_yscale("log")
    axes[4].set(title="conservation drift |x(t) - x(0)| / |x(0)|", ylabel="relative drift [-]")
    axes[4].legend(loc="best", fontsize="small")
    axes[4].grid(alpha=0.3, which="both")
    for ax in axes:
        ax.set_xlabel(t_label)
    plotting.no_offset(*axes)
    return fig


PLOT_HINT = "pip install 'jaxsim-spacecraft[plot]'"  # the extra that brings matplotlib


def main(argv: list[str] | None = None) -> int:
    """`python -m effectors.demo [--out PNG] [--orbits N] [--hub-only] [--no-plot]`."""
    from _jaxsim_cli import demo_parser

    return run(demo_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the demo for parsed arguments (`_jaxsim_cli.demo_parser`); returns the exit status 0.
    Without matplotlib the figure is skipped with a note naming the `plot` extra."""
    plot = not args.no_plot
    overwrite = bool(getattr(args, "overwrite", False))
    if plot:
        from pathlib import Path

        from jaxsim.results import refuse_existing

        try:
            refuse_existing(Path(args.out), overwrite, "jaxsim-demo", "--overwrite")
        except FileExistsError as err:
            print(err, file=sys.stderr)
            return 2
        try:
            import matplotlib
        except ImportError:
            plot = False
            print(f"note: matplotlib is not installed, so no figure will be written ({PLOT_HINT})")

    import jaxsim as js
    from effectors.scenarios import combined

    sc, y0, p = combined(state_effectors=not args.hub_only)
    dt, sample = p["step_s"], p["sample_interval_s"]
    t1 = round(args.orbits * p["duration_s"] / sample) * sample
    print(
        f"jaxsim-spacecraft {js.__version__} on {jax.devices()[0].platform}, "
        f"float64={jax.config.jax_enable_x64}"
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
    for key in DRIFT_KEYS:
        print(f"  {key:19s} {_drift(out[key]):.3e}")
    print("  (rotational quantities change through the gravity-gradient and external torques,")
    print("   the motor work and the panel dampers; the orbital ones are invariants here)")

    if not plot:
        if not args.no_plot:
            print(f"figure skipped: matplotlib is not installed ({PLOT_HINT}, then run again)")
        return 0
    matplotlib.use("Agg")
    fig = demo_figure(sol)
    from jaxsim.results import replace_safely

    with replace_safely(
        args.out, overwrite=overwrite, where="jaxsim-demo", flag="--overwrite"
    ) as tmp:
        fig.savefig(tmp, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
