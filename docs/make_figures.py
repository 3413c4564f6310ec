"""Draw the figures of the documentation pages into `docs/figures/` (committed, small PNGs).

    python docs/make_figures.py            # every figure (about a minute on 2 CPU cores)
    python docs/make_figures.py demo       # some of them, by name

- `demo.png`: the demo's figure (`python -m effectors.demo`: one orbit of the `combined` benchmark
  spacecraft), on the home page and in "Getting started".
- `getting_started_attitude.png`: what the "Plots and tables" code of "Getting started" draws
  (`effectors.plotting.plot_attitude`).
- `monte_carlo_dispersion.png`: a 256-member `run_batch` of the "Monte Carlo" guide's dispersions
  (rate, mass, inertia), median and percentile bands of the body rate
  (`jaxsim.plotting.plot_dispersion`).
- `gradients_fd_check.png`: a reverse-mode derivative through a 600 s RK4 run against central
  finite differences over step sizes (the "Gradients" guide).

Needs the `notebooks` extra (matplotlib, pillow). Each PNG is reduced to a 256-colour palette
(`execute_notebooks.compress_png`, as the notebooks' figures). This file is excluded from the site.
"""

import base64
import subprocess
import sys
import tempfile
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"
DPI = 100  # the notebooks' inline resolution: legible on the pages, 20-90 kB per figure
MU_EARTH = 3.986004415e14  # [m^3/s^2], as in the guides
R_ORBIT = 6878.137e3  # 500 km circular orbit radius [m], as in the guides


def _write(png: bytes, name: str) -> Path:
    """Write `png` as `docs/figures/<name>.png`, reduced to a palette PNG."""
    sys.path.insert(0, str(ROOT / "docs"))
    from execute_notebooks import compress_png

    path = FIGURES / f"{name}.png"
    encoded = compress_png(base64.b64encode(png).decode("ascii"))
    path.write_bytes(base64.b64decode(encoded))
    return path


def _save(fig, name: str) -> Path:
    """Write matplotlib figure `fig` as `docs/figures/<name>.png` (palette PNG) and close it."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", facecolor="white")
    plt.close(fig)
    return _write(buffer.getvalue(), name)


def demo() -> Path:
    """The demo's own figure, written by `python -m effectors.demo --out ...`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo.png"
        subprocess.run(
            [sys.executable, "-m", "effectors.demo", "--out", str(out)],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        return _write(out.read_bytes(), "demo")


def _guide_spacecraft(wheels: bool = True):
    import numpy as np

    import effectors as fx

    earth = fx.PointMassGravity(MU_EARTH)
    effectors = (
        [fx.ReactionWheels(gsHat_B=np.eye(3), Js=[0.1] * 3, Omega=[50.0, -30.0, 20.0], name="rw")]
        if wheels
        else []
    )
    return fx.Spacecraft(
        fx.Hub(mass=750.0, IHubPntBc_B=np.diag([900.0, 800.0, 600.0])),
        state_effectors=effectors,
        dynamic_effectors=[fx.GravityGradient(earth)],
        gravity=[earth],
    )


def getting_started_attitude() -> Path:
    """The "Plots and tables" run of Getting started: `plot_attitude` of 600 s."""
    import jaxsim as js
    from effectors import plotting

    sc = _guide_spacecraft()
    y0 = sc.init_state([R_ORBIT, 0.0, 0.0], [0.0, 7612.6, 0.0], omega_BN_B=[0.0, 0.0, 0.01])
    sol = js.simulate(sc, y0, 600.0, dt=0.1, sample_dt=10.0)
    return _save(plotting.plot_attitude(sol), "getting_started_attitude")


def monte_carlo_dispersion() -> Path:
    """256 members dispersed as in the Monte Carlo guide's example; body-rate bands."""
    import equinox as eqx
    import jax.random as jr
    import numpy as np

    import jaxsim as js
    from jaxsim import montecarlo as mc, plotting

    sc = _guide_spacecraft()
    omega_nominal = np.array([0.0, 0.0, 0.01])  # [rad/s]
    v0 = np.sqrt(MU_EARTH / R_ORBIT)
    disp = mc.Dispersions(
        {
            "omega_BN_B": mc.Normal(omega_nominal, 5e-4, unit="rad/s"),
            "mass": mc.percent(750.0, 5.0),
            "inertia": mc.PrincipalInertia(np.diag([900.0, 800.0, 600.0]), 0.03),
        }
    )

    def member(p):
        model = eqx.tree_at(
            lambda s: (s.hub.mass, s.hub.IHubPntBc_B), sc, (p["mass"], p["inertia"])
        )
        y0 = model.init_state(
            [R_ORBIT, 0.0, 0.0], [0.0, v0, 0.0], [0.1, 0.2, -0.3], p["omega_BN_B"]
        )
        return js.simulate(model, y0, 600.0, dt=1.0, sample_dt=10.0, throw=False)

    res = mc.run_batch(member, disp, key=jr.key(0), n=256, chunk_size=128)
    assert bool(np.all(res.ok)), "a member failed"
    omega = 1e3 * np.asarray(res.outputs["outputs"]["omega_BN_B"])  # [mrad/s]
    fig = plotting.plot_dispersion(
        np.asarray(res.outputs["ts"])[0],
        omega,
        labels=["x", "y", "z"],
        ylabel="omega_BN_B [mrad/s]",
        title="body rate, rate/mass/inertia dispersed (5e-4 rad/s, 5 %, 3 %)",
        members=8,
    )
    return _save(fig, "monte_carlo_dispersion")


def gradients_fd_check() -> Path:
    """d(final attitude error)/d(hub inertia I_11): reverse mode against central differences."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import matplotlib.pyplot as plt
    import numpy as np

    import jaxsim as js

    sc = _guide_spacecraft()
    v0 = np.sqrt(MU_EARTH / R_ORBIT)
    y0 = sc.init_state([R_ORBIT, 0.0, 0.0], [0.0, v0, 0.0], [0.1, 0.2, -0.3], [0.001, -0.01, 0.03])
    I0 = float(sc.hub.IHubPntBc_B[0, 0])

    @js.jit
    def loss(I11):
        hub = sc.hub.IHubPntBc_B.at[0, 0].set(I11)
        model = eqx.tree_at(lambda s: s.hub.IHubPntBc_B, sc, hub)
        sol = js.simulate(model, y0, 600.0, dt=0.1, outputs=False)
        return jnp.sum(sol.ys["hub"]["sigma_BN"][-1] ** 2)

    grad = float(js.jit(jax.grad(loss))(jnp.asarray(I0)))
    steps = np.logspace(-9, -1, 17) * I0  # [kg m^2]; I_11 - h stays a valid inertia
    fd = np.array([(float(loss(I0 + h)) - float(loss(I0 - h))) / (2 * h) for h in steps])
    error = np.abs(fd - grad) / abs(grad)

    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    ax.loglog(steps / I0, error, "o-", label="central difference vs reverse mode (jax.grad)")
    # Truncation error of a central difference, O(h^2), through the point at h = 1e-3 I_11.
    ref = (steps / I0 >= 1e-5) & (steps / I0 <= 1e-1)
    anchor = np.argmin(np.abs(np.log10(steps / I0) + 3.0))
    ax.loglog(steps[ref] / I0, error[anchor] * (steps[ref] / steps[anchor]) ** 2, "k--", lw=0.8,
              label="slope 2 (truncation error of the difference)")  # fmt: skip
    ax.set_xlabel("finite-difference step h / I_11 [-]")
    ax.set_ylabel("relative difference [-]")
    ax.set_title(f"d|sigma_BN(600 s)|^2 / dI_11 = {grad:.6e} 1/(kg m^2)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _save(fig, "gradients_fd_check")


FIGURE_MAKERS = {
    "demo": demo,
    "getting_started_attitude": getting_started_attitude,
    "monte_carlo_dispersion": monte_carlo_dispersion,
    "gradients_fd_check": gradients_fd_check,
}


def main(argv: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    unknown = sorted(set(argv) - set(FIGURE_MAKERS))
    if unknown:
        raise SystemExit(f"unknown figure(s) {unknown}; known: {sorted(FIGURE_MAKERS)}")
    FIGURES.mkdir(exist_ok=True)
    for name in argv or FIGURE_MAKERS:
        path = FIGURE_MAKERS[name]()
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main(sys.argv[1:])
