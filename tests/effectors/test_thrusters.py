"""Thrusters: closed-form loads, burn delta-v, and the gradient with respect to a traced burn start."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors._thrusters import G0


# Loads at one context: the same sums in another order (numpy vs jax).
LOAD_RTOL = 1e-13
# Constant acceleration between burn edges on the step grid: RK4 is exact up to round-off over 80
# steps (relative 1e-13 leaves a decade above the accumulated epsilon).
DV_RTOL = 1e-12
# Traced burn start: the segment solves are exact for piecewise-constant acceleration, so the
# gradient equals the analytic one to round-off; central differences are exact for the quadratic
# position in T_on (truncation zero), so only round-off / FD_EPS remains.
GRAD_RTOL = 1e-9
FD_EPS = 1e-3  # [s]

M = 500.0  # kg
I_HUB = np.diag([100.0, 120.0, 80.0])
R_TB = np.array([[0.0, 0.0, -1.0], [0.0, 0.0, -1.0], [0.5, 0.2, 0.1]])
T_HAT = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.6, 0.8]])
F_MAX = np.array([2.0, 3.0, 1.5])
ISP = np.array([220.0, 230.0, 70.0])


def spacecraft(throttle, r=R_TB, tHat=T_HAT, Fmax=F_MAX, isp=ISP):
    th = fx.Thrusters(r, tHat, Fmax, isp, throttle=throttle, name="thr")
    return fx.Spacecraft(fx.Hub(M, I_HUB), dynamic_effectors=(th,))


def rest_state(sc):
    z = np.zeros(3)
    return sc.init_state(z, z, z, z)


def test_loads_closed_form():
    sig = js.PiecewiseConstant([5.0], [[0.1, 0.2, 0.3], [0.5, 0.5, 0.5]])
    sc = spacecraft(sig)
    y = rest_state(sc)
    cmd = np.array([0.3, 0.9, -0.2])
    ctx = sc.context(jnp.asarray(7.0), y, {"thr": {"throttle": cmd}})
    th = sc.dynamic_effectors[0]
    out = th.outputs(ctx)
    u = np.clip(np.array([0.5, 0.5, 0.5]) + cmd, 0.0, 1.0)  # [0.8, 1.0 (clipped), 0.3]
    F_i = (u * F_MAX)[:, None] * T_HAT
    np.testing.assert_allclose(out["throttle"], u, rtol=LOAD_RTOL)
    np.testing.assert_allclose(out["thrust_B"], F_i, rtol=LOAD_RTOL)
    np.testing.assert_allclose(out["force_B"], F_i.sum(0), rtol=LOAD_RTOL)
    np.testing.assert_allclose(out["torque_B"], np.cross(R_TB, F_i).sum(0), rtol=LOAD_RTOL)
    np.testing.assert_allclose(out["mDot"], u * F_MAX / (ISP * G0), rtol=LOAD_RTOL)
    np.testing.assert_allclose(out["mDot_total"], np.sum(u * F_MAX / (ISP * G0)), rtol=LOAD_RTOL)
    ft = th.force_torque(ctx)
    np.testing.assert_array_equal(ft.force_N, np.zeros(3))
    np.testing.assert_allclose(ft.force_B, F_i.sum(0), rtol=LOAD_RTOL)
    # Before the switch (t = 5 is the left limit) and without a command: the first row.
    out0 = th.outputs(sc.context(jnp.asarray(5.0), y, None))
    np.testing.assert_allclose(out0["throttle"], [0.1, 0.2, 0.3], rtol=LOAD_RTOL)
    # Scalar constant throttle broadcast to all thrusters.
    th2 = fx.Thrusters(R_TB, T_HAT, F_MAX, ISP, throttle=0.25)
    np.testing.assert_allclose(th2.outputs(ctx)["throttle"], np.full(3, 0.25), rtol=0)
    assert th.breakpoints() == (5.0,)
    # A `jaxsim.Step` throttle (scalar, right-continuous) plus the command, clipped.
    th3 = fx.Thrusters(R_TB, T_HAT, F_MAX, ISP, throttle=js.Step(5.0, 0.0, 0.6), name="thr")
    np.testing.assert_allclose(
        th3.outputs(ctx)["throttle"], np.clip(0.6 + cmd, 0.0, 1.0), rtol=LOAD_RTOL
    )


# Two axial thrusters through the z axis of B (no torque, so the hub does not rotate).
AXIAL = dict(r=R_TB[:2], tHat=T_HAT[:2], Fmax=F_MAX[:2], isp=ISP[:2])
F_AXIAL = float(F_MAX[:2].sum())  # N
T_ON, T_OFF, T1 = 10.0, 30.0, 40.0


def test_burn_window_delta_v_fixed_step():
    sc = spacecraft(js.PiecewiseConstant([T_ON, T_OFF], [0.0, 1.0, 0.0]), **AXIAL)
    sol = js.simulate(sc, rest_state(sc), T1, dt=0.5, sample_dt=10.0)
    v = np.asarray(sol.ys["hub"]["v_BN_N"])
    dv = F_AXIAL * (T_OFF - T_ON) / M
    np.testing.assert_allclose(v[-1], [0.0, 0.0, dv], rtol=DV_RTOL, atol=1e-15)
    np.testing.assert_allclose(v[1], np.zeros(3), atol=1e-15)  # t = 10: not yet burning
    np.testing.assert_allclose(v[2, 2], F_AXIAL * 10.0 / M, rtol=DV_RTOL)  # t = 20
    # Reported mass flow at t = 20 (mass is not depleted: massSC stays M).
    np.testing.assert_allclose(
        sol.outputs["thr"]["mDot_total"][2], np.sum(F_MAX[:2] / (ISP[:2] * G0)), rtol=LOAD_RTOL
    )
    np.testing.assert_allclose(sol.outputs["massSC"], M, rtol=0)


BASE = spacecraft(js.PiecewiseTable([T_ON, T_OFF], [0.0, 1.0, 0.0]), **AXIAL)
Y0 = rest_state(BASE)


def final_v_x(T_on):
    """Final axial velocity and position for a burn from a traced `T_on` to T_OFF (hybrid RK4)."""
    sc = eqx.tree_at(
        lambda s: s.dynamic_effectors[0].throttle.times, BASE, jnp.stack([T_on, T_OFF])
    )
    sol = js.simulate(
        sc, Y0, T1, dt=0.5, solver=js.RK4(), ts=np.array([0.0, T1]), discontinuities=[sc],
    )  # fmt: skip
    return sol.ys["hub"]["v_BN_N"][-1, 2], sol.ys["hub"]["r_BN_N"][-1, 2]


def test_gradient_wrt_traced_burn_start():
    T_on = 10.3  # off the step grid: the hybrid driver splits the step at the traced edge
    a = F_AXIAL / M
    v_an = a * (T_OFF - T_on)
    x_an = 0.5 * a * ((T1 - T_on) ** 2 - (T1 - T_OFF) ** 2)
    f = jax.jit(final_v_x)
    v, x = f(T_on)
    np.testing.assert_allclose([v, x], [v_an, x_an], rtol=DV_RTOL)
    jac = jax.jacrev(final_v_x)(jnp.asarray(T_on))
    np.testing.assert_allclose(jac, [-a, -a * (T1 - T_on)], rtol=GRAD_RTOL)
    hi, lo = f(T_on + FD_EPS), f(T_on - FD_EPS)
    fd = [(h - l) / (2 * FD_EPS) for h, l in zip(hi, lo)]
    np.testing.assert_allclose(jac, fd, rtol=GRAD_RTOL)


def test_thrusters_validation():
    with pytest.raises(ValueError, match="r_TB_B"):
        fx.Thrusters(np.zeros(3), T_HAT[:1], [1.0], [200.0])
    with pytest.raises(ValueError, match="tHat_B"):
        fx.Thrusters(R_TB, 2 * T_HAT, F_MAX, ISP)
    with pytest.raises(ValueError, match="tHat_B"):
        fx.Thrusters(R_TB, T_HAT[:2], F_MAX, ISP)
    with pytest.raises(ValueError, match="max_thrust"):
        fx.Thrusters(R_TB, T_HAT, [1.0, 0.0, 1.0], ISP)
    with pytest.raises(ValueError, match="Isp"):
        fx.Thrusters(R_TB, T_HAT, F_MAX, [200.0, -1.0, 200.0])
    with pytest.raises(ValueError, match="Isp"):
        fx.Thrusters(R_TB, T_HAT, F_MAX, [200.0, 200.0])
    with pytest.raises(ValueError, match="throttle"):
        fx.Thrusters(R_TB, T_HAT, F_MAX, ISP, throttle=[0.5, 1.5, 0.0])
    with pytest.raises(ValueError, match="throttle"):
        fx.Thrusters(R_TB, T_HAT, F_MAX, ISP, throttle=[0.5, 0.5])
    with pytest.raises(ValueError, match="name"):
        fx.Thrusters(R_TB, T_HAT, F_MAX, ISP, name="")


def test_mass_flow_protocol_equals_output():
    """`mass_flow(MassContext)` (what a fuel tank calls) equals the `mDot` output at that time."""
    sc = spacecraft(js.PiecewiseConstant([5.0], [[0.1, 0.2, 0.3], [0.5, 0.5, 0.5]]))
    th = sc.dynamic_effectors[0]
    y = rest_state(sc)
    args = {"thr": {"throttle": np.array([0.3, 0.9, -0.2])}}
    for t in (2.0, 7.0):
        mctx = fx.MassContext(jnp.asarray(t), args, y)
        out = th.outputs(sc.context(jnp.asarray(t), y, args))
        np.testing.assert_allclose(th.mass_flow(mctx), out["mDot"], rtol=LOAD_RTOL)
        assert th.mass_flow(mctx).shape == (3,)
        assert bool(jnp.all(th.mass_flow(mctx) >= 0))
