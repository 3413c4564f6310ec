"""Dopri8's stages written out or looped from the drift's size (issue 41, deliverable 2).

Oracles: the program `simulate` traces with the default `Dopri8()` is the one traced with the
stages written out (`unrolled=True`) for a small drift and the looped one (`unrolled=False`) for
a spacecraft, equation for equation, and so are the programs of their gradients (the step VJP
follows the same choice); the rule's threshold separates the two drifts' measured sizes.
"""

import jax
import jax.numpy as jnp
import numpy as np

import effectors as fx
import jaxsim as js
from jaxsim._solvers._ode import UNROLL_MAX_EQUATIONS, count_equations, drift_equations
from tests.engine.cores.test_adaptive_core import MU, Kepler


R0 = 7.0e6  # [m]
T1 = 600.0  # [s]


def _kepler():
    model = Kepler(MU)  # nondimensional: a circular orbit of radius 1
    return model, {"r": jnp.array([1.0, 0.0, 0.0]), "v": jnp.array([0.0, 1.0, 0.0])}


def _spacecraft():
    sc = fx.Spacecraft(
        fx.Hub(500.0, np.eye(3) * 100.0), gravity=[fx.PointMassGravity(fx.astro.EARTH)]
    )
    v = np.sqrt(fx.astro.EARTH.mu / R0)
    return sc, sc.init_state([R0, 0.0, 0.0], [0.0, v, 0.0])


def _size(model, y0, solver, grad=False):
    def final(scale):
        sol = js.simulate(model, jax.tree.map(lambda x: x * scale, y0), T1, solver=solver,
                          rtol=1e-9, atol=1e-9, throw=False, outputs=False)  # fmt: skip
        return sum(jnp.sum(x[-1]) for x in jax.tree.leaves(sol.ys))

    fn = jax.grad(final) if grad else final
    return count_equations(jax.make_jaxpr(fn)(jnp.asarray(1.0)).jaxpr)


def _drift_size(model, y0):
    from jaxsim._model._layout import StateLayout

    layout = StateLayout.of(y0)
    f = lambda t, v: layout.flatten(model.drift(t, layout.unflatten(v), None))  # noqa: E731
    return drift_equations(f, jnp.asarray(0.0), layout.flatten(y0))


def test_the_threshold_separates_a_point_model_from_a_spacecraft():
    assert _drift_size(*_kepler()) <= UNROLL_MAX_EQUATIONS < _drift_size(*_spacecraft())


def test_default_stages_follow_the_drift_size():
    for (model, y0), same in ((_kepler(), True), (_spacecraft(), False)):
        default = _size(model, y0, js.Dopri8())
        assert default == _size(model, y0, js.Dopri8(unrolled=same))
        assert default != _size(model, y0, js.Dopri8(unrolled=not same))


def test_the_step_vjp_follows_the_same_choice():
    model, y0 = _spacecraft()
    default = _size(model, y0, js.Dopri8(), grad=True)
    assert default == _size(model, y0, js.Dopri8(unrolled=False), grad=True)
    assert default < _size(model, y0, js.Dopri8(unrolled=True), grad=True)
