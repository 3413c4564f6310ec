"""Gradient tuning of a pointing loop's gains over a Monte Carlo (issue 43 item 6, the test): the
reaction-wheel loop `RWAttitudeFSW` (MRP feedback + wheel map on a 0.5 s clock) under dispersed
inertias and initial attitudes, the loss the mean over the members of the integrated squared
pointing error plus a control-effort penalty; its gradient in (log K, log P) through the vmapped
closed loops checked against central differences, then gradient descent against random search with
the same number of loss evaluations.
"""

import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js


I_NOM = np.diag([15.0, 12.0, 10.0])  # [kg m^2] the inertia the FSW assumes
GS = np.eye(3)
JS = np.array([0.05, 0.05, 0.05])  # [kg m^2]
SIGMA_RN = np.zeros(3)
HORIZON = 20.0  # [s]
DT = 0.25  # [s] RK4 step
FSW_DT = 0.5  # [s]
N_MEMBERS = 8
EFFORT_WEIGHT = 1e-2  # [1/(N m)^2] weight of the mean squared wheel torque
# Central differences of the smooth Monte Carlo loss (step 1e-4 in log gain): truncation ~1e-8,
# measured agreement ~1e-7 relative.
TOL_FD_REL = 1e-5


def _members(seed=0):
    """Dispersed true inertias (+-20 % principal, small products) and initial attitudes."""
    rng = np.random.default_rng(seed)
    I = np.stack([np.diag(np.diag(I_NOM) * rng.uniform(0.8, 1.2, 3)) for _ in range(N_MEMBERS)])
    off = rng.uniform(-0.3, 0.3, (N_MEMBERS, 3))
    I[:, 0, 1] = I[:, 1, 0] = off[:, 0]
    I[:, 0, 2] = I[:, 2, 0] = off[:, 1]
    I[:, 1, 2] = I[:, 2, 1] = off[:, 2]
    sigma0 = rng.uniform(-0.3, 0.3, (N_MEMBERS, 3))
    return jnp.asarray(I), jnp.asarray(sigma0)


def _member_loss(log_gains, I_true, sigma0):
    K, P = jnp.exp(log_gains[0]), jnp.exp(log_gains[1])
    hub = fx.Hub(100.0, I_NOM)
    hub = eqx.tree_at(lambda h: h.IHubPntBc_B, hub, I_true)
    sc = fx.Spacecraft(hub, state_effectors=[fx.ReactionWheels(GS, JS, name="rw")])
    ctrl = fx.MRPFeedback(1.0, 1.0, I_NOM, gsHat_B=GS, Js=JS)
    ctrl = eqx.tree_at(lambda c: (c.K, c.P), ctrl, (K, P))
    fsw = fx.RWAttitudeFSW(js.Clock(FSW_DT), ctrl, fx.RWMotorTorque(GS), SIGMA_RN)
    y0 = sc.init_state(jnp.zeros(3), jnp.zeros(3), sigma0, jnp.zeros(3))
    sol = js.simulate(sc, y0, HORIZON, dt=DT, solver=js.RK4(), clocks=[fsw], outputs=False)
    held = sol.clock_logs["fsw"]["held"]
    err = jnp.sum(held["fsw"]["sigma_BR"] ** 2, -1)  # at every tick
    u = jnp.sum(held["rw"]["motor_torque"] ** 2, -1)
    return FSW_DT * jnp.sum(err) + EFFORT_WEIGHT * jnp.mean(u)


@jax.jit
def loss(log_gains):
    I, sigma0 = _members()
    return jnp.mean(jax.vmap(_member_loss, in_axes=(None, 0, 0))(log_gains, I, sigma0))


loss_and_grad = jax.jit(jax.value_and_grad(loss))


def test_gradient_over_the_monte_carlo_matches_central_differences():
    x0 = jnp.log(jnp.array([0.5, 3.0]))
    value, grad = loss_and_grad(x0)
    fd = np.zeros(2)
    for i in range(2):
        h = 1e-4
        e = jnp.zeros(2).at[i].set(h)
        fd[i] = (float(loss(x0 + e)) - float(loss(x0 - e))) / (2 * h)
    assert float(value) > 0 and np.all(np.abs(fd) > 1e-4)
    np.testing.assert_allclose(np.asarray(grad), fd, rtol=TOL_FD_REL)


@pytest.mark.slow
def test_gradient_descent_beats_random_search_of_the_same_budget():
    budget = 15  # loss evaluations each (a gradient step costs one value-and-gradient)
    x = jnp.log(jnp.array([0.5, 3.0]))
    l0 = float(loss(x))
    t0 = time.perf_counter()
    lr, best_gd = 0.3, l0
    for _ in range(budget):
        v, g = loss_and_grad(x)
        assert np.isfinite(float(v))
        best_gd = min(best_gd, float(v))
        x = x - lr * g / (jnp.linalg.norm(g) + 1e-12)  # normalised steps of 0.3 in log gain
    best_gd = min(best_gd, float(loss(x)))
    t_gd = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    trials = rng.uniform(np.log([0.1, 0.5]), np.log([20.0, 60.0]), (budget, 2))
    values = np.array([float(loss(jnp.asarray(p))) for p in trials])
    # A draw whose loop goes unstable (a member's run fails: NaN) counts as a failed trial.
    best_rs = float(np.min(np.where(np.isfinite(values), values, np.inf)))
    t_rs = time.perf_counter() - t0
    print(f"loss: start {l0:.4g}, gradient descent {best_gd:.4g} ({t_gd:.1f} s), "
          f"random search {best_rs:.4g} ({t_rs:.1f} s); gains {np.exp(np.asarray(x))}")  # fmt: skip
    assert best_gd < 0.5 * l0
    assert best_gd < best_rs
