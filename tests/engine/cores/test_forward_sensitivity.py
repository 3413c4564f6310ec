"""Forward sensitivities under the step control (`simulate(..., adjoint=js.ForwardSensitivity())`,
`jaxsim._cores._adaptive.integrate_sensitive`).

Oracles: the analytic two-body solution (Lagrange's f and g functions with Kepler's equation in
eccentric-anomaly differences, Vallado, "Fundamentals of Astrodynamics and Applications", 4th ed.,
sec. 2.3), differentiated by JAX: its Jacobian is the analytic state transition matrix (and the
analytic derivative w.r.t. mu) to round-off; central finite differences of the forward run.
"""

import math

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js


# A fraction (about a third) of a Kepler orbit with e = 0.7 (a = 1, mu = 1: period 2 pi).
T = 2.0
RTOL = 1e-12
# STM with sensitivities in the step control at rtol 1e-12: 4.9e-14 relative measured (Dopri8).
STM_REL_TOL = 1e-12
# The same STM at rtol 1e-8: sensitivities in the control measured 3.3e-10, the derivative of
# the state-controlled discretisation (ForwardMode) 9.0e-9: at least this factor better.
CONTROL_GAIN = 10.0
LOOSE_RTOL = 1e-8
# Central differences of the forward run (step FD_STEP): truncation error ~FD_STEP^2 (2.4e-6
# relative measured at a step of 1e-4 from periapsis at r = 0.3) plus the run's rtol-level noise
# / FD_STEP (~1e-7).
FD_STEP = 1e-5
FD_REL_TOL = 1e-6
# d r(T) / d mu vs the analytic derivative: measured 2e-13 relative.
MU_REL_TOL = 1e-11


class Kepler(js.AbstractDynamicObject):
    mu: jax.Array
    name: str = eqx.field(static=True, default="kepler")

    def init_state(self, r=(0.3, 0.0, 0.0), v=(0.0, 0.0, 0.0)):
        return {"r": jnp.asarray(r, float), "v": jnp.asarray(v, float)}

    def drift(self, t, y, args):
        r = y["r"]
        r2 = r @ r
        return {"r": y["v"], "v": -self.mu * r / (r2 * jnp.sqrt(r2))}


def periapsis(e=0.7):
    """Periapsis state of an orbit with a = 1 (mu = 1), eccentricity e, inclined 0.3 rad."""
    rp, vp = 1.0 - e, math.sqrt((1.0 + e) / (1.0 - e))
    ci, si = math.cos(0.3), math.sin(0.3)
    return jnp.array([rp, 0.0, 0.0, 0.0, vp * ci, vp * si])


def kepler_analytic(x0, t, mu):
    """State at `t` from `x0 = (r0, v0)` (elliptic): f and g functions, Kepler's equation in the
    eccentric-anomaly change by Newton's method (converged to round-off well before 40 steps)."""
    r0, v0 = x0[:3], x0[3:]
    r0n = jnp.sqrt(r0 @ r0)
    a = 1.0 / (2.0 / r0n - (v0 @ v0) / mu)
    sig = (r0 @ v0) / jnp.sqrt(mu)
    m = jnp.sqrt(mu / a**3) * t
    de = m
    for _ in range(40):
        g = de - (1 - r0n / a) * jnp.sin(de) + sig / jnp.sqrt(a) * (1 - jnp.cos(de)) - m
        dg = 1 - (1 - r0n / a) * jnp.cos(de) + sig / jnp.sqrt(a) * jnp.sin(de)
        de = de - g / dg
    f = 1 - a / r0n * (1 - jnp.cos(de))
    gg = t - jnp.sqrt(a**3 / mu) * (de - jnp.sin(de))
    r = f * r0 + gg * v0
    rn = jnp.sqrt(r @ r)
    fd = -jnp.sqrt(mu * a) / (rn * r0n) * jnp.sin(de)
    gd = 1 - a / rn * (1 - jnp.cos(de))
    return jnp.concatenate([r, fd * r0 + gd * v0])


def final_state(x, mu=1.0, adjoint=None, rtol=RTOL):
    model = Kepler(jnp.asarray(mu))
    sol = js.simulate(
        model, model.init_state(x[:3], x[3:]), T, solver=js.Dopri8(), rtol=rtol, atol=rtol,
        outputs=False, adjoint=adjoint,
    )  # fmt: skip
    return jnp.concatenate([sol.ys["r"][-1], sol.ys["v"][-1]])


def rel_err(a, ref):
    return float(np.max(np.abs(np.asarray(a) - ref)) / np.max(np.abs(ref)))


def test_stm_matches_the_analytic_one_and_central_differences():
    x0 = periapsis()
    ref = np.asarray(jax.jacfwd(kepler_analytic)(x0, T, 1.0))
    # Not under the user's jit: tolerances must be concrete; they are arguments of jaxsim's one
    # compiled program.
    sens = lambda x, tol: jax.jacfwd(  # noqa: E731
        lambda x: final_state(x, adjoint=js.ForwardSensitivity(), rtol=tol)
    )(x)
    stm = sens(x0, RTOL)
    assert rel_err(stm, ref) <= STM_REL_TOL
    # The sensitivities' errors steer the steps: at a loose tolerance the STM is far more
    # accurate than the derivative of the state-controlled discretisation.
    loose = rel_err(sens(x0, LOOSE_RTOL), ref)
    plain = jax.jacfwd(lambda x: final_state(x, adjoint=dfx.ForwardMode(), rtol=LOOSE_RTOL))
    assert loose * CONTROL_GAIN <= rel_err(plain(x0), ref), loose
    # Central differences of the forward run (one vmapped program).
    run = jax.jit(jax.vmap(final_state))
    steps = FD_STEP * jnp.eye(6)
    fd = (run(x0 + steps) - run(x0 - steps)).T / (2 * FD_STEP)
    assert rel_err(stm, np.asarray(fd)) <= FD_REL_TOL, rel_err(stm, np.asarray(fd))


def test_grad_wrt_model_parameter_and_state():
    # Reverse mode over the sensitivity run: d |r(T)|^2 / d (mu, x0) against the analytic one.
    x0 = periapsis()

    def loss(mu, x, fn):
        r = fn(x, mu)[:3]
        return r @ r

    exact = jax.grad(lambda mu, x: loss(mu, x, lambda x, mu: kepler_analytic(x, T, mu)), (0, 1))
    g_mu, g_x = exact(1.0, x0)
    sens = lambda x, mu: final_state(x, mu, adjoint=js.ForwardSensitivity())  # noqa: E731
    s_mu, s_x = jax.jit(jax.grad(lambda mu, x: loss(mu, x, sens), (0, 1)))(jnp.asarray(1.0), x0)
    assert abs(float(s_mu) - float(g_mu)) <= MU_REL_TOL * abs(float(g_mu))
    assert rel_err(s_x, np.asarray(g_x)) <= MU_REL_TOL
    # Not differentiated, the mode is the plain run.
    np.testing.assert_array_equal(np.asarray(sens(x0, 1.0)), np.asarray(final_state(x0)))


def test_refused_where_it_does_not_run():
    model = Kepler(jnp.asarray(1.0))
    with pytest.raises(ValueError, match="ForwardSensitivity.*RK4 on the fixed driver"):
        js.simulate(
            model, model.init_state(), 1.0, dt=0.1, solver=js.RK4(),
            adjoint=js.ForwardSensitivity(),
        )  # fmt: skip
