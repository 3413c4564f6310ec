"""Smoke test for the lowest allowed dependency versions (`.ci/run`, "lowest" step).

Imports both packages and runs a few tiny simulations against closed forms: a circular Kepler orbit
(fixed-step RK4 and adaptive Tsit5), a torque-free hub with spinning reaction wheels (angular
momentum conserved), an event (a falling ball's impact time, found by the optimistix root
finder), `jax.vmap` over initial conditions and `jax.grad` against central differences. It runs in well under a minute; it is not a substitute for the test suite, which runs
with the versions the lock-step CI installs.
"""

import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import effectors as fx
import jaxsim as js


MU = 3.986004415e14  # Earth's gravitational parameter [m^3/s^2]
R0 = 6878.137e3  # 500 km circular orbit radius [m]
KEPLER_RTOL = 1e-9  # RK4 at 1 s steps and Tsit5 at rtol 1e-12 over 600 s: far below 1e-9 relative
MOMENTUM_RTOL = 1e-12  # torque-free hub + wheels: |H| conserved to round-off over 60 s of RK4
GRAD_RTOL = 1e-5  # central differences (step 1e-3 m/s) against reverse mode
EVENT_ATOL = 1e-9  # [s] event time located by root finding on Tsit5's interpolant (rtol 1e-12)


def circular_orbit():
    earth = fx.PointMassGravity(MU)
    sc = fx.Spacecraft(fx.Hub(mass=100.0, IHubPntBc_B=np.diag([10.0, 12.0, 8.0])), gravity=[earth])
    v0 = np.sqrt(MU / R0)
    return sc, sc.init_state([R0, 0.0, 0.0], [0.0, v0, 0.0]), v0


def check_kepler():
    sc, y0, v0 = circular_orbit()
    n = v0 / R0  # mean motion [rad/s]
    t1 = 600.0  # [s]
    exact = R0 * np.array([np.cos(n * t1), np.sin(n * t1), 0.0])
    for label, kwargs in [("RK4", {"dt": 1.0}),
                          ("Tsit5", {"solver": js.Tsit5(), "rtol": 1e-12, "atol": 1e-6})]:  # fmt: skip
        sol = js.simulate(sc, y0, t1, **kwargs)
        err = np.linalg.norm(np.asarray(sol.ys["hub"]["r_BN_N"][-1]) - exact) / R0
        print(f"kepler {label}: relative position error {err:.2e}")
        assert err < KEPLER_RTOL, (label, err)


def check_wheels():
    sc = fx.Spacecraft(
        fx.Hub(mass=750.0, IHubPntBc_B=np.diag([900.0, 800.0, 600.0])),
        state_effectors=[
            fx.ReactionWheels(gsHat_B=np.eye(3), Js=[0.1] * 3, Omega=[50.0, -30.0, 20.0])
        ],
    )
    y0 = sc.init_state(omega_BN_B=[0.01, -0.02, 0.03])
    sol = js.simulate(sc, y0, 60.0, dt=0.1, sample_dt=60.0)
    H = np.linalg.norm(np.asarray(sol.outputs["totRotAngMomPntC_N"]), axis=-1)
    drift = abs(H[-1] - H[0]) / H[0]
    print(f"wheels: relative angular momentum drift {drift:.2e}")
    assert drift < MOMENTUM_RTOL, drift


class Ball(js.AbstractDynamicObject):
    """A ball dropped from rest: h(t) = h0 - g t^2 / 2."""

    name: str = eqx.field(static=True, default="ball")

    def init_state(self, h0=10.0):
        return {"h": jnp.asarray(h0), "v": jnp.asarray(0.0)}  # height [m], velocity [m/s]

    def drift(self, t, y, args):
        return {"h": y["v"], "v": jnp.asarray(-9.81)}


def check_event():
    ball = Ball()
    impact = js.Event(lambda t, y, args: y["h"], direction="falling", name="impact")
    sol = js.simulate(
        ball, ball.init_state(), 2.0, solver=js.Tsit5(), rtol=1e-12, atol=1e-12,
        events=(impact,), max_events=2, ts=np.linspace(0.0, 2.0, 5),
    )  # fmt: skip
    t_hit, exact = float(sol.events.t[0]), np.sqrt(2 * 10.0 / 9.81)
    print(f"event: impact at {t_hit:.12f} s, exact {exact:.12f} s")
    assert int(sol.events.count) >= 1 and abs(t_hit - exact) < EVENT_ATOL, (sol.events, exact)


def check_transformations():
    sc, y0, v0 = circular_orbit()

    def final_radius(v):
        y = sc.init_state([R0, 0.0, 0.0], [0.0, v, 0.0])
        return jnp.linalg.norm(js.simulate(sc, y, 60.0, dt=1.0).ys["hub"]["r_BN_N"][-1])

    batch = jax.vmap(final_radius)(jnp.array([v0, v0 + 1.0]))
    one = final_radius(v0 + 1.0)
    assert np.allclose(batch[1], one, rtol=1e-14, atol=0.0), (batch, one)
    grad = jax.grad(final_radius)(v0)
    h = 1e-3  # [m/s]
    fd = (final_radius(v0 + h) - final_radius(v0 - h)) / (2 * h)
    print(f"grad: reverse mode {float(grad):.9e}, central difference {float(fd):.9e}")
    assert abs(grad - fd) <= GRAD_RTOL * abs(fd), (grad, fd)


if __name__ == "__main__":
    import diffrax
    import jaxtyping

    print(
        f"python {sys.version.split()[0]}, jaxsim {js.__version__}: jax {jax.__version__}, "
        f"jaxlib {jax.lib.__version__ if hasattr(jax.lib, '__version__') else '?'}, "
        f"diffrax {diffrax.__version__}, equinox {eqx.__version__}, numpy {np.__version__}, "
        f"jaxtyping {jaxtyping.__version__ if hasattr(jaxtyping, '__version__') else '?'}"
    )
    check_kepler()
    check_wheels()
    check_event()
    check_transformations()
    print("smoke test passed")
