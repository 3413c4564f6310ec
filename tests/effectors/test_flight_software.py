"""Attitude flight software (`effectors._fsw._flight_software`): MRP algebra, the MRP feedback law and the
RW torque map against closed forms, a closed-loop RW slew under the clocked driver (convergence and
angular-momentum conservation), and the same slew against real Basilisk (`mrpFeedback` +
`rwMotorTorque` on a 0.1 s FSW task, `tests/reference/basilisk_slew.py`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim.kinematics import mrp_to_dcm
from tests.reference import basilisk_slew as bsl


# MRP subtraction vs the DCM product [BN][RN]^T: float64 round-off of O(1) expressions.
TOL_MRP = 1e-13
# Closed-form control law / torque map evaluated in numpy vs jax: round-off of O(10) N m sums.
TOL_LAW = 1e-12
# Closed-loop PD slew (K = 4 N m, P = 7 N m s, I ~ 12 kg m^2, near-critical damping with slowest
# time constant ~ 12 s): after 100 s from a ~100 deg error the error MRP is ~1e-7 and the rate
# ~6e-8 rad/s (measured 1.1e-7 / 5.8e-8 in Basilisk); the bars leave a factor ~5.
TOL_CONVERGED_SIGMA = 5e-7
TOL_CONVERGED_OMEGA = 3e-7
# Total rotational angular momentum about C in N (motor torques are internal, so it is constant).
# It is not a linear invariant of the state (it involves [NB](sigma)), so RK4 at 0.05 s leaves a
# truncation drift: measured 2.3e-10 relative over the 100 s slew; the bar leaves a factor ~4.
TOL_MOMENTUM_REL = 1e-9
# jaxsim vs Basilisk, same equations, same RK4 steps, same task ordering: differences are round-off
# (measured 4.2e-16 on sigma_BN, 1.4e-16 rad/s on omega, 1.7e-13 rad/s on wheel speeds of
# ~40 rad/s, 1.4e-15 N m on the commands).
TOL_BSK = 1e-8
# Without the FSW call at t = 0 the first 0.1 s run with zero torque: measured 4.7e-3 off Basilisk in
# sigma_BN (2.2 rad/s in wheel speed); anything above 1e-4 shows the ordering matters.
MIN_NO_T0_TICK_ERR = 1e-4
HORIZON = bsl.SCENARIO["duration"]  # [s] 100 s: 2000 RK4 steps, 1000 FSW ticks


def _build(scenario, *, tick_at_t0=True):
    return bsl.build_jaxsim(scenario, tick_at_t0=tick_at_t0)


def _run(scenario):
    sc, fsw, y0 = _build(scenario)
    return js.simulate(
        sc,
        y0,
        scenario["duration"],
        dt=scenario["dyn_dt"],
        solver=js.RK4(),
        clocks=(fsw,),
        sample_dt=scenario["sample_dt"],
    )


@pytest.fixture(scope="module")
def slew_integral():
    """The Basilisk cross-validation scenario (integral term on and saturating)."""
    return _run(bsl.SCENARIO)


@pytest.fixture(scope="module")
def slew_pd():
    """The same spacecraft with the integral off (Ki < 0): a PD rest-to-rest slew."""
    return _run({**bsl.SCENARIO, "Ki": -1.0})


# --------------------------------------------------------------------------------------------------
# Algebra and laws


def _random_mrps(n, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v * rng.uniform(0.0, scale, size=(n, 1))


def test_mrp_subtract_matches_dcm_product():
    sb = _random_mrps(200, 0)
    sr = _random_mrps(200, 1)
    # Near-singular pairs (sigma_RN ~ shadow of -sigma_BN: denominator ~ 0) take the shadow branch.
    sb[:5] = [
        [0.9, 0.1, 0.0],
        [0.0, 0.95, 0.1],
        [0.5, 0.5, 0.6],
        [1.0, 0.0, 0.0],
        [0.0, 0.0, -0.99],
    ]
    sr[:5] = -sb[:5] * 1.02
    q = jax.vmap(fx.mrp_subtract)(sb, sr)
    assert np.all(np.linalg.norm(q, axis=1) <= 1.0 + 1e-15)
    want = mrp_to_dcm(sb) @ np.swapaxes(np.asarray(mrp_to_dcm(sr)), 1, 2)
    np.testing.assert_allclose(mrp_to_dcm(q), want, atol=TOL_MRP)
    np.testing.assert_allclose(fx.mrp_subtract(sb[7], sb[7]), 0.0, atol=TOL_MRP)


def test_attitude_error_rates():
    sb, sr = np.array([0.1, -0.2, 0.3]), np.array([-0.05, 0.1, 0.0])
    w_B, w_RN_N, dw_RN_N = np.array([0.01, 0.02, -0.03]), np.array([0.0, 1e-3, 2e-3]), np.ones(3)
    e = fx.attitude_error(sb, w_B, sr, w_RN_N, dw_RN_N)
    BN = np.asarray(mrp_to_dcm(sb))
    np.testing.assert_allclose(e["omega_RN_B"], BN @ w_RN_N, atol=TOL_MRP)
    np.testing.assert_allclose(e["omega_BR_B"], w_B - BN @ w_RN_N, atol=TOL_MRP)
    np.testing.assert_allclose(e["domega_RN_B"], BN @ dw_RN_N, atol=TOL_MRP)
    np.testing.assert_allclose(e["sigma_BR"], fx.mrp_subtract(sb, sr), atol=0.0)


def _law_numpy(K, P, Ki, lim, I, L, g, Js, guid, Om, int_prev, dt, law):
    """The documented law (module docstring / Basilisk mrpFeedback doc), written out in numpy."""
    s, dw, wr, dwr = (
        np.asarray(guid[k]) for k in ("sigma_BR", "omega_BR_B", "omega_RN_B", "domega_RN_B")
    )
    w = dw + wr
    if Ki > 0:
        si = int_prev + K * dt * s
        si = np.where(np.abs(si) > lim, np.sign(si) * lim, si)
        z = si + I @ dw
    else:
        si, z = int_prev, np.zeros(3)
    H = I @ w + sum(Js[i] * (g[i] @ w + Om[i]) * g[i] for i in range(len(Js)))
    a = wr + Ki * z if law == 0 else w
    Lr = -K * s - P * dw - P * Ki * z + np.cross(a, H) - I @ (np.cross(w, wr) - dwr) - L
    return si, Lr


@pytest.mark.parametrize("law", [0, 1])
@pytest.mark.parametrize("Ki", [-1.0, 0.01])
def test_mrp_feedback_closed_form_and_integral_rule(law, Ki):
    I = np.array([[15.0, 0.5, -0.3], [0.5, 12.0, 0.2], [-0.3, 0.2, 10.0]])
    g = bsl.gsHat_B()
    Js, Om = np.array([0.05, 0.05, 0.06]), np.array([10.0, -20.0, 30.0])
    K, P, lim, L = 4.0, 7.0, 0.1, np.array([1e-3, -2e-3, 5e-4])
    ctrl = fx.MRPFeedback(K, P, I, Ki=Ki, integral_limit=lim, known_torque_B=L, gsHat_B=g, Js=Js,
                          control_law_type=law)  # fmt: skip
    guid = fx.attitude_error([0.2, -0.1, 0.3], [0.01, -0.02, 0.015], [0.05, 0.0, -0.1],
                             [1e-3, 2e-3, -1e-3], [1e-4, 0.0, 2e-4])  # fmt: skip
    z = ctrl.init_state()
    int_np = np.zeros(3)
    # Calls at t = 0, 0.1, 0.2, 0.3: Basilisk's rule gives dt = 0 for the first two (prior time 0).
    for t, dt in [(0.0, 0.0), (0.1, 0.0), (0.2, 0.1), (0.3, 0.1)]:
        z, Lr = ctrl(t, guid, z, Om)
        int_np, Lr_np = _law_numpy(K, P, Ki, lim, I, L, g, Js, guid, Om, int_np, dt, law)
        np.testing.assert_allclose(z["int_sigma"], int_np, atol=TOL_LAW)
        np.testing.assert_allclose(Lr, Lr_np, atol=TOL_LAW)
        assert float(z["prior_time"]) == t
    if Ki > 0:  # two integrating calls: 2 K dt sigma = (0.145, -0.024, 0.326); the limit clips x, z
        np.testing.assert_allclose(np.abs(np.asarray(z["int_sigma"]))[[0, 2]], lim, rtol=1e-15)
        assert 0.0 < abs(float(z["int_sigma"][1])) < lim
    else:
        assert np.all(np.asarray(z["int_sigma"]) == 0.0)


def test_rw_motor_torque_min_norm():
    # Four-wheel pyramid: 3 control axes -> [Gs] u = -L_r and u is orthogonal to null([Gs]).
    b = np.deg2rad(40.0)
    g4 = np.array([[np.cos(b) * np.cos(a), np.cos(b) * np.sin(a), np.sin(b)]
                   for a in np.deg2rad([45, 135, 225, 315])])  # fmt: skip
    Lr = np.array([0.03, -0.02, 0.05])
    u = np.asarray(fx.RWMotorTorque(g4)(Lr))
    np.testing.assert_allclose(g4.T @ u, -Lr, atol=TOL_LAW)
    null = np.linalg.svd(g4.T)[2][-1]
    assert abs(u @ null) < TOL_LAW
    np.testing.assert_allclose(u, np.linalg.pinv(g4.T) @ (-Lr), atol=TOL_LAW)
    # Two control axes: only their components are met (minimum norm); the third is free.
    C = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    u2 = np.asarray(fx.RWMotorTorque(g4, C)(Lr))
    np.testing.assert_allclose(C @ g4.T @ u2, -C @ Lr, atol=TOL_LAW)
    np.testing.assert_allclose(u2, np.linalg.pinv(C @ g4.T) @ (-C @ Lr), atol=TOL_LAW)
    # Wheel 2 unavailable: zero there, the other three still produce -L_r.
    u3 = np.asarray(fx.RWMotorTorque(g4, available=[1, 0, 1, 1])(Lr))
    assert u3[1] == 0.0
    np.testing.assert_allclose(g4.T @ u3, -Lr, atol=TOL_LAW)
    # Fewer available wheels than control axes: Basilisk commands zero.
    assert np.all(np.asarray(fx.RWMotorTorque(g4, available=[1, 0, 0, 1])(Lr)) == 0.0)
    # The precomputed map (what `RWAttitudeFSW.prepare` ticks with) is the same map, bit for bit.
    for kw in ({}, {"control_axes_B": C}, {"available": [1, 0, 1, 1]}, {"available": [1, 0, 0, 1]}):
        mapping = fx.RWMotorTorque(g4, **kw)
        assert mapping.matrices is None and mapping.precomputed().matrices is not None
        np.testing.assert_array_equal(mapping.precomputed()(Lr), mapping(Lr))


def test_validation():
    I = np.diag([10.0, 11.0, 12.0])
    g = np.eye(3)
    with pytest.raises(ValueError, match="`K`"):
        fx.MRPFeedback(0.0, 1.0, I)
    with pytest.raises(ValueError, match="`P`"):
        fx.MRPFeedback(1.0, -1.0, I)
    with pytest.raises(ValueError, match="integral_limit"):
        fx.MRPFeedback(1.0, 1.0, I, integral_limit=-0.1)
    with pytest.raises(ValueError, match="I_B"):
        fx.MRPFeedback(1.0, 1.0, -I)
    with pytest.raises(ValueError, match="known_torque_B"):
        fx.MRPFeedback(1.0, 1.0, I, known_torque_B=[1.0, 2.0])
    with pytest.raises(ValueError, match="Js"):
        fx.MRPFeedback(1.0, 1.0, I, gsHat_B=g)
    with pytest.raises(ValueError, match="gsHat_B"):
        fx.MRPFeedback(1.0, 1.0, I, gsHat_B=2 * g, Js=[1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="Js"):
        fx.MRPFeedback(1.0, 1.0, I, gsHat_B=g, Js=[1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="control_law_type"):
        fx.MRPFeedback(1.0, 1.0, I, control_law_type=2)
    with pytest.raises(ValueError, match="gsHat_B"):
        fx.RWMotorTorque([[1.0, 1.0, 0.0]])
    with pytest.raises(ValueError, match="control_axes_B"):
        fx.RWMotorTorque(g[:2])
    with pytest.raises(ValueError, match="control_axes_B"):
        fx.RWMotorTorque(g, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="available"):
        fx.RWMotorTorque(g, available=[1.0, 0.5, 1.0])
    ctrl = fx.MRPFeedback(1.0, 1.0, I, gsHat_B=g, Js=[0.1, 0.1, 0.1])
    mt = fx.RWMotorTorque(g)
    with pytest.raises(ValueError, match="clock"):
        fx.RWAttitudeFSW(0.1, ctrl, mt, np.zeros(3))
    with pytest.raises(ValueError, match="control"):
        fx.RWAttitudeFSW(js.Clock(0.1), mt, mt, np.zeros(3))
    with pytest.raises(ValueError, match="mapping"):
        fx.RWAttitudeFSW(js.Clock(0.1), ctrl, ctrl, np.zeros(3))
    with pytest.raises(ValueError, match="mapping"):
        fx.RWAttitudeFSW(js.Clock(0.1), ctrl, fx.RWMotorTorque(np.vstack([g, g[:1]])), np.zeros(3))
    with pytest.raises(ValueError, match="sigma_RN"):
        fx.RWAttitudeFSW(js.Clock(0.1), ctrl, mt, np.zeros(2))
    with pytest.raises(ValueError, match="name"):
        fx.RWAttitudeFSW(js.Clock(0.1), ctrl, mt, np.zeros(3), name="rw")
    with pytest.raises(ValueError, match="spacecraft"):
        fx.AttitudeNavigation(spacecraft="")


# --------------------------------------------------------------------------------------------------
# Closed loop


def test_pd_slew_converges_and_conserves_momentum(slew_pd):
    sol = slew_pd
    sr = jnp.asarray(bsl.SCENARIO["sigma_RN"])
    err = jax.vmap(lambda s: fx.mrp_subtract(s, sr))(sol.outputs["sigma_BN"])
    e0 = float(jnp.linalg.norm(err[0]))
    assert e0 > 0.5  # a large slew (~100 deg)
    assert float(jnp.linalg.norm(err[-1])) < TOL_CONVERGED_SIGMA
    assert float(jnp.max(jnp.abs(sol.outputs["omega_BN_B"][-1]))) < TOL_CONVERGED_OMEGA
    # The wheels absorbed the slew: their speeds changed by O(1-10) rad/s.
    dOmega = np.abs(np.asarray(sol.outputs["rw"]["Omega"][-1]) - bsl.SCENARIO["Omega0"])
    assert dOmega.max() > 1.0
    H = np.asarray(sol.outputs["totRotAngMomPntC_N"])
    drift = np.abs(H - H[0]).max() / np.linalg.norm(H[0])
    assert drift < TOL_MOMENTUM_REL


def test_first_command_is_computed_at_t0(slew_integral):
    """Basilisk's first FSW call is at t = 0: the held command over [0, 0.1] comes from y0."""
    sc, fsw, y0 = _build(bsl.SCENARIO)
    u0 = fsw.update(0.0, y0, fsw.init_state(), None)[1]["rw"]["motor_torque"]
    held = slew_integral.held["fsw"]["rw"]["motor_torque"]
    np.testing.assert_array_equal(held[0], u0)
    assert float(jnp.linalg.norm(u0)) > 0.1
    assert slew_integral.clock_logs["fsw"]["t"][0] == pytest.approx(bsl.SCENARIO["fsw_dt"])
    # Without the t0 call the command over [0, 0.1] is zero (the driver's default held outputs).
    _, fsw_late, _ = _build(bsl.SCENARIO, tick_at_t0=False)
    assert fsw_late.init_outputs(y0, None) is None


@pytest.mark.crossval
def test_slew_matches_basilisk(slew_integral):
    pytest.importorskip("Basilisk")
    ref = bsl.run()
    sol = slew_integral
    np.testing.assert_allclose(np.asarray(sol.ts), ref["t"], atol=1e-12)
    for key, ours in (
        ("sigma_BN", sol.outputs["sigma_BN"]),
        ("omega_BN_B", sol.outputs["omega_BN_B"]),
        ("Omega", sol.outputs["rw"]["Omega"]),
    ):
        np.testing.assert_allclose(np.asarray(ours), ref[key], rtol=0.0, atol=TOL_BSK, err_msg=key)
    # Commands: Basilisk records the FSW output written at each whole second; the clock log holds
    # the post-tick command of every tick (tick j * 0.1 s, j = 1..1000), and t = 0 is held0.
    log = np.asarray(sol.clock_logs["fsw"]["held"]["rw"]["motor_torque"])
    per_s = int(round(bsl.SCENARIO["sample_dt"] / bsl.SCENARIO["fsw_dt"]))
    ours_u = np.vstack(
        [np.asarray(sol.held["fsw"]["rw"]["motor_torque"][0])[None], log[per_s - 1 :: per_s]]
    )
    np.testing.assert_allclose(ours_u, ref["u_cmd"], rtol=0.0, atol=TOL_BSK)
    # The t0 call matters: dropping it (held command 0 over [0, 0.1]) is far outside the bar.
    sc, fsw_late, y0 = _build(bsl.SCENARIO, tick_at_t0=False)
    late = js.simulate(sc, y0, HORIZON, dt=bsl.SCENARIO["dyn_dt"], solver=js.RK4(),
                       clocks=(fsw_late,), sample_dt=bsl.SCENARIO["sample_dt"])  # fmt: skip
    assert np.abs(np.asarray(late.outputs["sigma_BN"]) - ref["sigma_BN"]).max() > MIN_NO_T0_TICK_ERR
