"""Phases (`jaxsim.phases`): durations, per-phase models/inputs/solvers, state jumps, one program.

Oracles: closed forms of piecewise-constant accelerations (a double integrator with two phases,
a two-stage rocket with a stage separation and an impulsive burn), whose states every RK scheme of
order >= 2 integrates exactly (polynomials of degree 2 in t), with their exact derivatives with
respect to the durations; central differences of a nonlinear two-phase run; XLA's compile log
over several durations.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim.phases import Phase, simulate_phases


# Closed forms integrated exactly (quadratic states): round-off of a few dozen steps.
EXACT_TOL = 1e-12
# Central differences: truncation FD_EPS^2 |y'''| ~ 1e-10, round-off 1e-16 / FD_EPS.
FD_EPS, FD_RTOL = 1e-5, 1e-8
ADAPTIVE = {"solver": js.Tsit5(), "rtol": 1e-12, "atol": 1e-12}
DURATIONS = ((1.0, 2.0), (1.5, 0.5), (0.7, 1.3), (2.0, 2.0), (0.3, 3.0))


class Cart(js.AbstractDynamicObject):
    """x'' = args["a"]: position and velocity under the phase's acceleration [m/s^2]."""

    name: str = eqx.field(static=True, default="cart")

    def init_state(self):
        return {"x": jnp.zeros(2)}

    def drift(self, t, y, args):
        return {"x": jnp.stack([y["x"][1], args["a"]])}


class Stage(js.AbstractDynamicObject):
    """A rocket stage: v' = F / m at a constant mass m within the phase (thrust F [N])."""

    F: float
    name: str = eqx.field(static=True, default="rocket")

    def init_state(self):
        return {"v": jnp.zeros(()), "m": jnp.ones(())}

    def drift(self, t, y, args):
        return {"v": self.F / y["m"], "m": jnp.zeros(())}


class Separation(eqx.Module):
    """The jump between the stages: drop `dm` [kg] and add an impulsive `dv` [m/s]."""

    dm: jax.Array
    dv: jax.Array

    def __call__(self, y):
        return {"v": y["v"] + self.dv, "m": y["m"] - self.dm}


class Forced(js.AbstractDynamicObject):
    """x'' = -w^2 x + sin t (non-autonomous)."""

    w: float = 1.3
    name: str = eqx.field(static=True, default="osc")

    def init_state(self):
        return {"x": jnp.array([1.0, 0.0])}

    def drift(self, t, y, args):
        x = y["x"]
        return {"x": jnp.array([x[1], -(self.w**2) * x[0] + jnp.sin(t)])}


CART = Cart()
A1, A2 = 1.0, -2.0  # accelerations of the two phases [m/s^2]


def cart_phases(d1, d2, second=None):
    second = {"num_steps": 20} if second is None else second
    return [
        Phase(CART, d1, num_steps=20, args={"a": A1}),
        Phase(CART, d2, args={"a": A2}, **second),
    ]


def cart_final(d, second=None):
    sol = simulate_phases(cart_phases(d[0], d[1], second), CART.init_state(), outputs=False)
    return sol.y_final["x"]


def cart_exact(d1, d2):
    v1 = A1 * d1
    x = 0.5 * A1 * d1**2 + v1 * d2 + 0.5 * A2 * d2**2
    jac = [[A1 * (d1 + d2), v1 + A2 * d2], [A1, A2]]
    return np.array([x, v1 + A2 * d2]), np.array(jac)


@pytest.mark.parametrize("second", [None, ADAPTIVE], ids=["RK4-RK4", "RK4-Tsit5"])
def test_two_phase_double_integrator_and_duration_derivatives(second):
    d = jnp.array([1.2, 0.8])
    value, jac = cart_exact(1.2, 0.8)
    np.testing.assert_allclose(jax.jit(lambda d: cart_final(d, second))(d), value, atol=EXACT_TOL)
    got = jax.jit(jax.jacrev(lambda d: cart_final(d, second)))(d)
    np.testing.assert_allclose(got, jac, rtol=0, atol=EXACT_TOL)


def test_durations_under_vmap():
    d = jnp.asarray(DURATIONS)
    got = jax.jit(jax.vmap(cart_final))(d)
    np.testing.assert_allclose(got, [cart_exact(*x)[0] for x in DURATIONS], atol=EXACT_TOL)


def test_phase_samples_and_boundaries():
    phases = [
        Phase(CART, 1.0, num_steps=20, num_samples=5, args={"a": A1}),
        Phase(CART, 2.0, num_steps=20, num_samples=3, args={"a": A2}),
    ]
    sol = simulate_phases(phases, CART.init_state(), t0=0.5)
    np.testing.assert_allclose(sol.boundaries, [0.5, 1.5, 3.5], rtol=0, atol=1e-15)
    np.testing.assert_allclose(sol.solutions[0].ts, np.linspace(0.5, 1.5, 5), atol=1e-15)
    np.testing.assert_allclose(sol.solutions[1].ts, np.linspace(1.5, 3.5, 3), atol=1e-15)
    # The second phase starts from the first one's final state (continuity).
    np.testing.assert_array_equal(sol.solutions[1].ys["x"][0], sol.solutions[0].ys["x"][-1])
    np.testing.assert_allclose(sol.y_final["x"], cart_exact(1.0, 2.0)[0], atol=EXACT_TOL)
    assert bool(sol.ok)


def test_staging_jump_and_per_phase_parameters():
    # Stage 1: F1 on m0 for d1; separation: drop dm, add dv; stage 2: F2 on m0 - dm for d2.
    F1, F2, m0 = 3.0, 5.0, 4.0

    def v_final(d1, d2, dm, dv):
        phases = [
            Phase(Stage(F1), d1, num_steps=10),
            Phase(Stage(F2), d2, solver=js.Tsit5(), rtol=1e-12, atol=1e-12,
                  jump=Separation(dm, dv)),
        ]  # fmt: skip
        y0 = {"v": jnp.zeros(()), "m": jnp.asarray(m0)}
        return simulate_phases(phases, y0, outputs=False).y_final["v"]

    x = (2.0, 1.5, 1.5, 0.25)
    exact = F1 / m0 * x[0] + x[3] + F2 / (m0 - x[2]) * x[1]
    np.testing.assert_allclose(jax.jit(v_final)(*x), exact, rtol=0, atol=EXACT_TOL)
    grads = jax.jit(jax.grad(v_final, argnums=(0, 1, 2, 3)))(*x)
    want = [F1 / m0, F2 / (m0 - x[2]), F2 * x[1] / (m0 - x[2]) ** 2, 1.0]
    np.testing.assert_allclose(grads, want, rtol=0, atol=EXACT_TOL)


@pytest.mark.parametrize("second", [{"num_steps": 200}, ADAPTIVE], ids=["RK4", "Tsit5"])
def test_duration_gradients_match_central_differences(second):
    model = Forced()

    def final(d):
        phases = [
            Phase(model, d[0], num_steps=200),
            Phase(eqx.tree_at(lambda m: m.w, model, 0.7), d[1], **second),
        ]
        return simulate_phases(phases, model.init_state(), outputs=False).y_final["x"]

    d = jnp.array([1.1, 0.9])
    jac = jax.jit(jax.jacrev(final))(d)
    f = jax.jit(final)
    for i in range(2):
        e = jnp.zeros(2).at[i].set(FD_EPS)
        central = (f(d + e) - f(d - e)) / (2 * FD_EPS)
        np.testing.assert_allclose(jac[:, i], central, rtol=FD_RTOL)


def test_changing_durations_compiles_once(compilations):
    for d1, d2 in DURATIONS:
        y = cart_final((d1, d2))
        np.testing.assert_allclose(y, cart_exact(d1, d2)[0], atol=EXACT_TOL)
    assert compilations.count("jit(_run_phases)") == 1, compilations


def test_bad_phases_are_refused():
    with pytest.raises(ValueError, match="duration"):
        Phase(CART, -1.0, num_steps=10)
    with pytest.raises(ValueError, match="at least one"):
        simulate_phases([], CART.init_state())
    with pytest.raises(TypeError, match="phases\\[0\\]"):
        simulate_phases([CART], CART.init_state())
    with pytest.raises(ValueError, match="num_steps"):
        simulate_phases([Phase(CART, 1.0, args={"a": 1.0})], CART.init_state())


def test_traced_negative_duration_fails_the_run():
    @jax.jit
    def run(d):
        phases = [Phase(CART, d, num_steps=10, args={"a": A1})]
        return simulate_phases(phases, CART.init_state(), throw=False)

    sol = run(-1.0)
    assert sol.result == js.RESULTS.invalid_times
    assert np.all(np.isnan(sol.y_final["x"]))
    assert bool(run(1.0).ok)
