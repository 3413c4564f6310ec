"""Derivative modes of `jaxsim.optimize.Problem` on functions differentiable in reverse mode only
(issue 42 item 7): a run with an adaptive phase (`jaxsim.phases`: its default adjoint is reverse
mode only) and a nested `custom_vjp`.

Oracles: a minimum-time double integrator through an adaptive phase (bang-bang over 1 m at
|a| <= 1 m/s^2: two phases of 1 s), central differences of the gradient of the Lagrangian (its
exact Hessian), and sin(x) = (0.25, 0.25, 0.5) for the reverse-only least-squares case.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim import optimize as jo
from jaxsim.phases import Phase, simulate_phases


# Central differences of the gradient: truncation FD_STEP^2 |g'''| ~ 1e-10, round-off
# 1e-16 |g| / FD_STEP ~ 1e-11; relative to the Hessian's largest entry.
FD_STEP, FD_RTOL = 1e-5, 1e-6
# Minimum time through an adaptive phase: Tsit5 at rtol = atol = 1e-10 on a polynomial state,
# and the solvers' constraint tolerance 1e-6 (also the reverse-only case's optimum).
MIN_TIME_TOL = 1e-6

# trust-constr's barrier for the bounds stops with the accelerations just inside |a| <= 1:
# the durations 3e-5 above the bang-bang ones (measured).
BARRIER_TOL = 1e-4


def central_hessian(p, z, w, args=None):
    """Central differences of the gradient of w . F (from the problem's reverse-mode Jacobian)."""

    def gradient(v):
        return np.asarray(p.evaluate(jnp.asarray(v), args)[1]).T @ w

    columns = [
        (gradient(z + FD_STEP * e) - gradient(z - FD_STEP * e)) / (2 * FD_STEP)
        for e in np.eye(z.size)
    ]
    return np.stack(columns, axis=1)


class Cart(js.AbstractDynamicObject):
    """x'' = args["a"]: position and velocity under the phase's acceleration [m/s^2]."""

    name: str = eqx.field(static=True, default="cart")

    def init_state(self):
        return {"x": jnp.zeros(2)}

    def drift(self, t, y, args):
        return {"x": jnp.stack([y["x"][1], args["a"]])}


CART = Cart()
ADAPTIVE = {"solver": js.Tsit5(), "rtol": 1e-10, "atol": 1e-10}


def min_time(x, a):
    # Rest to rest over 1 m in two phases (the second adaptive), |acceleration| <= 1 m/s^2:
    # bang-bang, d1 = d2 = 1 s.
    phases = [
        Phase(CART, x["d"][0], num_steps=10, args={"a": x["a"][0]}),
        Phase(CART, x["d"][1], args={"a": x["a"][1]}, **ADAPTIVE),
    ]
    end = simulate_phases(phases, CART.init_state(), outputs=False).y_final["x"]
    return jnp.sum(x["d"]), end - jnp.array([1.0, 0.0]), None


X0 = {"d": jnp.array([1.2, 0.9]), "a": jnp.array([0.8, -0.9])}
BOUNDS = {"lower": {"d": 0.1, "a": -1.0}, "upper": {"d": 5.0, "a": 1.0}}


def test_jacobian_auto_on_an_adaptive_phase_takes_reverse_mode():
    p = jo.Problem.combined(min_time, X0, **BOUNDS)  # "auto": forward mode by size (3 rows x 4)
    assert p.jacobian_mode == "fwd"
    res = jo.solve_scipy(p, "SLSQP", tol=1e-12)
    assert p.jacobian_mode == "rev"
    assert res.status_name == "converged", res.message
    np.testing.assert_allclose(res.x["d"], [1.0, 1.0], atol=MIN_TIME_TOL)
    fwd = jo.Problem.combined(min_time, X0, jacobian="fwd", **BOUNDS)
    with pytest.raises(ValueError, match="jacobian='rev'"):
        fwd.evaluate(jnp.asarray(fwd.z0), None)


def test_exact_hessian_through_an_adaptive_phase():
    # Forward over reverse mode goes through the adaptive phase's reverse-mode-only adjoint (the
    # forward mode differentiates its backward pass), so the exact Hessian is available there.
    p = jo.Problem.combined(min_time, X0, **BOUNDS)
    w = np.array([1.0, 0.4, -0.7])
    _, _, H = p.hessian(jnp.asarray(p.z0), None, jnp.asarray(w))
    fd = central_hessian(p, p.z0, w)
    np.testing.assert_allclose(H, fd, rtol=0, atol=FD_RTOL * np.abs(fd).max())
    res = jo.solve_scipy(p, "trust-constr", max_iter=300)
    assert res.status_name == "converged", res.message
    assert res.hessian_evaluations > 0
    np.testing.assert_allclose(res.x["d"], [1.0, 1.0], atol=BARRIER_TOL)
    if jo.cyipopt_available():
        res = jo.solve_ipopt(p)  # hessian="auto": exact
        assert res.status_name == "converged", res.message
        assert res.hessian_evaluations > 0
        np.testing.assert_allclose(res.x["d"], [1.0, 1.0], atol=MIN_TIME_TOL)


# A function differentiable in reverse mode only, also for its second derivatives: a custom_vjp
# whose forward rule calls another custom_vjp (forward mode over reverse mode meets it).
@jax.custom_vjp
def _sine(x):
    return jnp.sin(x)


_sine.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (jnp.cos(x) * g,))


@jax.custom_vjp
def reverse_only(x):
    return _sine(x)


reverse_only.defvjp(lambda x: (_sine(x), x), lambda x, g: (jnp.cos(x) * g,))


def test_reverse_only_functions_fall_back_by_name():
    def functions(x, a):
        s = reverse_only(x)
        return jnp.sum((s - 0.5) ** 2), s[:2] - 0.25, None  # 3 rows x 3 variables: "fwd"

    x0 = jnp.array([0.1, 0.2, 0.3])
    p = jo.Problem.combined(functions, x0)
    assert p.jacobian_mode == "fwd"
    with pytest.raises(ValueError, match="hessian='bfgs'"):
        jo.solve_scipy(p, "trust-constr", hessian="exact")
    assert p.jacobian_mode == "rev"
    res = jo.solve_scipy(p, "trust-constr")  # "auto": BFGS
    assert res.status_name == "converged", res.message
    assert res.hessian_evaluations == 0
    np.testing.assert_allclose(np.sin(res.x), [0.25, 0.25, 0.5], atol=MIN_TIME_TOL)
    if jo.cyipopt_available():
        with pytest.raises(ValueError, match="hessian='limited-memory'"):
            jo.solve_ipopt(p, hessian="exact")
        res = jo.solve_ipopt(p)
        assert res.status_name == "converged", res.message
        assert res.hessian_evaluations == 0
        np.testing.assert_allclose(np.sin(res.x), [0.25, 0.25, 0.5], atol=MIN_TIME_TOL)
    with pytest.raises(ValueError, match="jacobian='rev'"):
        jo.Problem.combined(functions, x0, jacobian="fwd").evaluate(jnp.asarray(x0), None)
