"""The optimization examples (`examples/`, top-level demos): convergence, truth recovery, gradients vs central
finite differences, and construction errors. Short versions of the notebook-05 problems; one
compiled solve per example (module-scope fixtures)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import inertia, slew, transfer


# Central finite differences of a smooth (RK4-discretised) map along a unit-variance random
# direction: relative truncation error ~ (eps / parameter scale)^2 ~ 1e-7 at eps = 1e-5 for the
# smallest parameter scale (rates ~0.03 rad/s); round-off ~ 1e-16 |r| / eps ~ 1e-11 relative.
FD_EPS = 1e-5
FD_RTOL = 1e-6

# Slew: Gauss-Newton on the 6 terminal residuals converges quadratically; at convergence the
# residual is round-off (1e-16 level); 1e-10 leaves six decades of margin.
SLEW_TERMINAL_TOL = 1e-10  # [-] and [rad/s]
# Eigenaxis bang-bang is exact for zero total momentum (module docstring of slew), up to the
# RK4 truncation error of the MRP kinematics (dt = 0.5 s, rates ~0.05 rad/s: ~1e-10).
BANG_BANG_TOL = 1e-7
# Minimum-norm Gauss-Newton steps from zero torque give (nearly) the minimum-effort profile;
# for a rest-to-rest double integrator the minimum of the integral of u^2 (a linear ramp,
# 12 I^2 theta^2 / T^3) is 3/4 of the bang-bang value (16 I^2 theta^2 / T^3); allow up to 0.9
# (hold over N = 10 intervals, nonlinear kinematics).
SLEW_EFFORT_RATIO = 0.9

# Transfer: the target comes from a reference burn, so the residual vanishes at the truth; LM
# stops at |step| < rtol |p| + atol, leaving sub-millimetre misses. Named bounds far below the
# 1 m acceptance level.
TRANSFER_MISS_TOL = 1e-3  # [m]
TRANSFER_VEL_TOL = 1e-6  # [m/s]
TRANSFER_BURN_TOL = 1e-5  # [s] and [rad]: recovered reference burn
# Phase model vs clocked driver (slow test): see the comment there.
CLOCKED_POS_TOL = 1e-3  # [m]
CLOCKED_VEL_TOL = 1e-6  # [m/s]

# Inertia: the estimate minus the truth, divided by its Cramer-Rao standard error, is ~N(0, 1)
# per entry; 5 sigma bounds a fixed-seed draw with false-alarm probability ~6e-7 per entry.
INERTIA_SIGMA_BOUND = 5.0
# chi-square of the fit with m residuals and 12 parameters: mean m - 12, std sqrt(2 (m - 12)).
CHI2_SIGMAS = 5.0


def central_fd(f, x, v, eps=FD_EPS):
    return (np.asarray(f(x + eps * v)) - np.asarray(f(x - eps * v))) / (2 * eps)


def check_directional_derivative(jacobian, residuals, params, problem, key):
    """J v, with J the Jacobian the solver used at its solution, against central differences of
    the residual there (relative to the largest component of J v)."""
    v = jax.random.normal(key, params.shape)
    jv = np.asarray(jacobian) @ np.asarray(v).ravel()
    fd = central_fd(lambda p: residuals(p, problem), params, v)
    scale = np.max(np.abs(fd))
    np.testing.assert_allclose(jv, fd, rtol=0, atol=FD_RTOL * scale, err_msg="J v vs central FD")
    return float(np.max(np.abs(jv - fd)) / scale)


# --------------------------------------------------------------------------------------------------
# Slew


@pytest.fixture(scope="module")
def slew_run():
    # u_max well above the torques needed: tanh nearly linear, so minimum-norm steps in p are
    # minimum-effort steps in u.
    problem = slew.make_problem(T=20.0, num_intervals=10, dt=0.5, u_max=0.3)
    params, info = slew.solve(problem)
    return problem, params, info


def test_slew_converges_rest_to_rest(slew_run):
    problem, params, info = slew_run
    assert info.result == "successful", info
    assert info.sigma_BR_norm < SLEW_TERMINAL_TOL, info
    assert info.omega_norm < SLEW_TERMINAL_TOL, info
    # Independent check of the reported errors: rerun the optimised profile.
    sigma_BR, omega = slew.terminal_errors(problem, slew.torques(problem, params))
    assert float(jnp.linalg.norm(sigma_BR)) < SLEW_TERMINAL_TOL
    assert float(jnp.linalg.norm(omega)) < SLEW_TERMINAL_TOL
    assert info.u_peak < float(problem.u_max)


def test_slew_beats_eigenaxis_bang_bang(slew_run):
    problem, params, info = slew_run
    u_bb = slew.eigenaxis_bang_bang(problem)
    sigma_BR, omega = slew.terminal_errors(problem, u_bb)
    assert float(jnp.linalg.norm(sigma_BR)) < BANG_BANG_TOL
    assert float(jnp.linalg.norm(omega)) < BANG_BANG_TOL
    assert info.effort < SLEW_EFFORT_RATIO * float(slew.effort(problem, u_bb))


def test_slew_gradient_vs_finite_differences(slew_run):
    problem, params, info = slew_run
    check_directional_derivative(
        info.jacobian, slew.residuals, params, problem, jax.random.PRNGKey(1)
    )


def test_slew_validation():
    with pytest.raises(ValueError, match="dt"):
        slew.make_problem(T=20.0, num_intervals=10, dt=0.3)
    with pytest.raises(ValueError, match="num_intervals"):
        slew.make_problem(num_intervals=0)
    with pytest.raises(ValueError, match="u_max"):
        slew.make_problem(u_max=0.0)
    with pytest.raises(ValueError, match="effort_weight"):
        slew.make_problem(effort_weight=-1.0)
    with pytest.raises(ValueError, match="sigma_RN"):
        slew.make_problem(sigma_RN=[0.1, 0.2])


# --------------------------------------------------------------------------------------------------
# Transfer

TRUE_BURN = (300.0, 120.0, 0.5 * np.pi + 0.4, 0.04)  # [s], [s], [rad], [rad]
GUESS_OFFSET = np.array([-40.0, -25.0, 0.1, -0.04])


@pytest.fixture(scope="module")
def transfer_run():
    problem = transfer.make_problem(true_burn=TRUE_BURN, t_f=1200.0, dt=10.0)
    p0 = transfer.burn_to_params(problem, np.array(TRUE_BURN) + GUESS_OFFSET)
    params, info = transfer.solve(problem, p0)
    return problem, p0, params, info


def test_transfer_reaches_target(transfer_run):
    problem, p0, params, info = transfer_run
    assert info.result == "successful", info
    assert info.position_miss < TRANSFER_MISS_TOL, info
    assert info.velocity_miss < TRANSFER_VEL_TOL, info
    np.testing.assert_allclose(info.burn, TRUE_BURN, rtol=0, atol=TRANSFER_BURN_TOL)
    # The initial guess misses by hundreds of metres: the solve did the work.
    assert np.linalg.norm(np.asarray(transfer.residuals(p0, problem))[:3]) > 1e2


def test_transfer_gradient_vs_finite_differences(transfer_run):
    problem, _, params, info = transfer_run
    check_directional_derivative(
        info.jacobian, transfer.residuals, params, problem, jax.random.PRNGKey(2)
    )


def test_transfer_validation():
    with pytest.raises(ValueError, match="true_burn"):
        transfer.make_problem(true_burn=(300.0, 1000.0, 0.0, 0.0), t_f=1200.0)
    with pytest.raises(ValueError, match="dt"):
        transfer.make_problem(dt=0.0)


@pytest.mark.slow
def test_transfer_phase_model_matches_clocked_driver():
    """The phase time transformation integrates the same physics as the clocked driver with
    the burn edges as segment boundaries (both RK4, 10 s steps, edges on both grids)."""
    import effectors as fx
    import jaxsim as js

    problem = transfer.make_problem(true_burn=TRUE_BURN, t_f=1200.0, dt=10.0)
    params = transfer.burn_to_params(problem, np.array(TRUE_BURN))
    r_phase, v_phase = transfer.final_state(problem, params)
    t_on, dur, alpha, beta = TRUE_BURN
    sc = transfer.model(problem, params).spacecraft
    thr = sc.dynamic_effectors[0]
    burn = js.PiecewiseTable([t_on, t_on + dur], [0.0, 1.0, 0.0])
    thr = fx.Thrusters(thr.r_TB_B, thr.tHat_B, thr.max_thrust, thr.Isp, burn, name=thr.name)
    sc = fx.Spacecraft(sc.hub, dynamic_effectors=(thr,), gravity=sc.gravity)
    sol = js.simulate(
        sc, problem.y0, 1200.0, dt=10.0, ts=np.array([0.0, 1200.0]), discontinuities=[sc]
    )
    # Same steps and stage times up to the clocked driver's 1e-12 relative step inflation
    # (7.7 km/s x 1e-12 x 1200 s ~ 1e-5 m): bounds two decades above.
    np.testing.assert_allclose(sol.ys["hub"]["r_BN_N"][-1], r_phase, rtol=0, atol=CLOCKED_POS_TOL)
    np.testing.assert_allclose(sol.ys["hub"]["v_BN_N"][-1], v_phase, rtol=0, atol=CLOCKED_VEL_TOL)


# --------------------------------------------------------------------------------------------------
# Inertia

INERTIA_NOISE = 1e-4  # [-] MRP noise per axis (about 0.02 deg)


@pytest.fixture(scope="module")
def inertia_run():
    problem = inertia.make_problem(noise=INERTIA_NOISE, T=40.0, key=jax.random.PRNGKey(0))
    params, info = inertia.solve(problem)
    return problem, params, info


def test_inertia_estimate_within_noise_bound(inertia_run):
    problem, params, info = inertia_run
    assert info.result == "successful", info
    assert info.max_normalised_error < INERTIA_SIGMA_BOUND, info
    m = info.num_residuals - 12
    assert abs(info.chi2 - m) < CHI2_SIGMAS * np.sqrt(2 * m), info
    # The bound is tight: standard errors well below the inertia (informative data).
    assert np.all(info.std < 1e-2 * np.abs(np.diag(inertia.I_TRUE)).min())


def test_inertia_gradient_vs_finite_differences(inertia_run):
    problem, params, info = inertia_run
    check_directional_derivative(
        info.jacobian, inertia.residuals, params, problem, jax.random.PRNGKey(3)
    )


def test_inertia_validation(inertia_run):
    with pytest.raises(ValueError, match="noise"):
        inertia.make_problem(noise=0.0)
    with pytest.raises(ValueError, match="torque_time"):
        inertia.make_problem(torque_time=0.3)
    with pytest.raises(ValueError, match="I_B"):
        inertia.make_problem(I_B=np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(ValueError, match="windows"):
        inertia.solve(inertia_run[0], windows=(5.0, 4.0, 40.0))
