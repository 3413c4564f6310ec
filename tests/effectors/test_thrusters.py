"""Thrusters: closed-form loads, burn delta-v, and the gradient with respect to a traced burn start."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors._actuators._thrusters import G0


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
    """Final axial velocity and position for a burn from a traced `T_on` to T_OFF (clocked, RK4)."""
    sc = eqx.tree_at(
        lambda s: s.dynamic_effectors[0].throttle.times, BASE, jnp.stack([T_on, T_OFF])
    )
    sol = js.simulate(
        sc, Y0, T1, dt=0.5, solver=js.RK4(), ts=np.array([0.0, T1]), discontinuities=[sc],
    )  # fmt: skip
    return sol.ys["hub"]["v_BN_N"][-1, 2], sol.ys["hub"]["r_BN_N"][-1, 2]


def test_gradient_wrt_traced_burn_start():
    T_on = 10.3  # off the step grid: the clocked driver splits the step at the traced edge
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


# --------------------------------------------------------------------------------------------------
# On-time commands (Basilisk `thrusterDynamicEffector`): live Basilisk, momentum = impulse, edges.
# --------------------------------------------------------------------------------------------------

# Same equations, same RK4, same step and the same stages on/off: float64 round-off of two
# operation orders over 32 steps (measured <= 3e-15 relative); 1e-9 is the project's Basilisk bar.
BSK_RTOL = 1e-9
# Impulse with every edge a segment boundary: RK4 is exact for piecewise-constant thrust, so
# momentum change equals sum F T to round-off of the summed steps.
IMPULSE_RTOL = 1e-12

# Window ends on a step end with no command after it (thruster 1 at 2.25 s, thruster 0 at 4.5 s:
# the next step's first stage still fires), on a half step (thruster 2 at 2.125 s: stages 1-3),
# inside a first half (thruster 1 at 0.3 s: stage 1 only), a request below the minimum while not
# firing (thruster 0 at 6.0 s: dropped) and while firing (thruster 0 at 6.0 s, window [5.5, 6.5]:
# kept), a zero request ending a firing (thruster 0 at 1.0 s).
EDGE_COMMANDS = [
    (0.0, [2.0, 0.3, 0.0]),
    (1.0, [0.0, 1.25, 1.125]),
    (3.0, [1.5, 0.0, 2.07]),
    (5.5, [1.0, 0.2, 0.0]),
    (6.0, [0.1, 0.1, 0.1]),
]
MIN_ON = [0.2, 0.5, 0.0]


def _bsk_spacecraft(throttle, S, name="thrusters", **kw):
    from tests.reference import basilisk_thrusters as bth

    thr = fx.Thrusters(
        S["r_TB_B"], bth.tHat_B(S), S["max_thrust"], S["Isp"], throttle=throttle, name=name, **kw
    )
    sc = fx.Spacecraft(fx.Hub(S["mass"], S["I_B"]), dynamic_effectors=(thr,))
    y0 = sc.init_state(S["r_CN_N0"], S["v_CN_N0"], S["sigma_BN0"], S["omega_BN_B0"])
    return sc, y0


def _compare(sol, ref, label):
    from tests.helpers import rel_err

    for key in ("r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B"):
        a = np.asarray(sol.ys["hub"][key])
        err = rel_err(a, ref[key]).max()
        assert err <= BSK_RTOL, f"{label} {key}: max rel {err:.3g}"


@pytest.mark.crossval
def test_on_time_schedule_matches_basilisk():
    """`OnTimeSchedule` on the plain RK4 path vs live `thrusterDynamicEffector` (edges, MinOnTime)."""
    pytest.importorskip("Basilisk")
    from tests.reference import basilisk_thrusters as bth

    S = dict(bth.SCENARIO, commands=EDGE_COMMANDS, min_on_time=MIN_ON)
    ref = bth.run(**S)
    times = [c[0] for c in EDGE_COMMANDS]
    sched = fx.OnTimeSchedule(times, [c[1] for c in EDGE_COMMANDS], min_on_time=MIN_ON)
    np.testing.assert_array_equal(sched.effective()[4], [0.1, 0.0, 0.1])  # the MinOnTime rule
    sc, y0 = _bsk_spacecraft(sched, S)
    sol = js.simulate(sc, y0, S["duration"], dt=S["dyn_dt"], solver=js.RK4(), sample_dt=0.25)
    _compare(sol, ref, "schedule")
    # The test can fail: the same run with every window end one step earlier differs by far more.
    shifted = fx.OnTimeSchedule(
        times, np.maximum(np.array([c[1] for c in EDGE_COMMANDS]) - 0.25, 0.0), MIN_ON
    )
    sc2, _ = _bsk_spacecraft(shifted, S)
    sol2 = js.simulate(sc2, y0, S["duration"], dt=S["dyn_dt"], solver=js.RK4(), sample_dt=0.25)
    dv_ref = ref["v_BN_N"] - ref["v_BN_N"][0]
    dv2 = np.asarray(sol2.ys["hub"]["v_BN_N"]) - ref["v_BN_N"][0]
    assert np.abs(dv2 - dv_ref).max() > 1e-2 * np.abs(dv_ref).max()


@pytest.mark.crossval
def test_depletion_loads_and_swirl_match_basilisk():
    """Exhaust force/torque (`updateOnly = False`) and swirl torque on a spinning hub vs Basilisk;
    the same run without the exhaust terms is 1e-4 off in omega (the test can fail)."""
    pytest.importorskip("Basilisk")
    from tests.reference import basilisk_thrusters as bth

    extra = {"area_nozzle": [0.01, 0.02, 0.005], "swirl_torque": [0.01, -0.02, 0.005]}
    S = dict(bth.SCENARIO, commands=EDGE_COMMANDS, min_on_time=MIN_ON, update_only=False, **extra)
    S["omega_BN_B0"] = [0.3, -0.2, 0.25]
    ref = bth.run(**S)
    sched = fx.OnTimeSchedule(
        [c[0] for c in EDGE_COMMANDS], [c[1] for c in EDGE_COMMANDS], min_on_time=MIN_ON
    )
    runs = {}
    for dep in (True, False):
        sc, y0 = _bsk_spacecraft(sched, S, depletion_loads=dep, **extra)
        runs[dep] = js.simulate(
            sc, y0, S["duration"], dt=S["dyn_dt"], solver=js.RK4(), sample_dt=0.25
        )
    _compare(runs[True], ref, "depletion")
    w = np.asarray(runs[False].ys["hub"]["omega_BN_B"])
    assert np.abs(w - ref["omega_BN_B"]).max() > 1e3 * BSK_RTOL


@pytest.mark.crossval
def test_on_time_fsw_matches_basilisk():
    """Flight software on a clock (`OnTimeFSW`, held outputs) vs the same Basilisk run."""
    pytest.importorskip("Basilisk")
    from tests.reference import basilisk_thrusters as bth

    S = dict(bth.SCENARIO, commands=EDGE_COMMANDS, min_on_time=MIN_ON)
    ref = bth.run(**S)
    times = jnp.asarray([c[0] for c in EDGE_COMMANDS])
    table = jnp.asarray([c[1] for c in EDGE_COMMANDS])

    def request(t, y, args):
        return table[jnp.argmin(jnp.abs(times - t))]

    fsw = fx.OnTimeFSW(
        js.Schedule([c[0] for c in EDGE_COMMANDS[1:]]), request, 3, min_on_time=MIN_ON
    )
    sc, y0 = _bsk_spacecraft(None, S)
    sol = js.simulate(
        sc, y0, S["duration"], dt=S["dyn_dt"], solver=js.RK4(), sample_dt=0.25, clocks=[fsw]
    )
    _compare(sol, ref, "fsw")
    # Burns over at the end: the last held command (6.0 s) has expired.
    np.testing.assert_array_equal(np.asarray(sol.outputs["thrusters"]["throttle"])[-1], np.zeros(3))


def test_on_time_momentum_equals_impulse():
    """No gravity, no torque: m (v1 - v0) = sum_i F_i T_i with every edge a segment boundary,
    windows ending off the step grid and a MinOnTime drop."""
    times = [0.3, 2.0]
    on = [[1.5, 0.55], [0.05, 3.1]]  # thruster 0's 0.05 s is below its minimum and it is not firing
    sched = fx.OnTimeSchedule(times, on, min_on_time=[0.1, 0.0])
    sc = spacecraft(sched, **AXIAL)
    y = rest_state(sc)
    sol = js.simulate(
        sc, y, 6.0, dt=0.5, solver=js.RK4(), ts=np.array([0.0, 6.0]), discontinuities=[sc]
    )
    T_eff = np.array([[1.5, 0.55], [0.0, 3.1]])
    # Thruster 0 fires [0.3, 1.8] (not firing at 2.0: its short request is dropped), thruster 1
    # [0.3, 0.85] and [2.0, 5.1].
    impulse = F_MAX[0] * 1.5 + F_MAX[1] * (0.55 + 3.1)
    np.testing.assert_array_equal(np.asarray(sched.effective()), T_eff)
    v = np.asarray(sol.ys["hub"]["v_BN_N"][-1])
    np.testing.assert_allclose(M * v, [0.0, 0.0, impulse], rtol=IMPULSE_RTOL, atol=1e-12)


def test_on_time_validation():
    with pytest.raises(ValueError, match="OnTimeSchedule.*times"):
        fx.OnTimeSchedule([1.0, 0.5], [[1.0], [1.0]])
    with pytest.raises(ValueError, match="OnTimeSchedule.*on_times"):
        fx.OnTimeSchedule([1.0], [[-1.0]])
    with pytest.raises(ValueError, match="OnTimeSchedule.*on_times"):
        fx.OnTimeSchedule([1.0, 2.0], [[1.0, 1.0, 1.0]])
    with pytest.raises(ValueError, match="OnTimeSchedule.*min_on_time"):
        fx.OnTimeSchedule([1.0], [[1.0, 1.0]], min_on_time=[0.1, -0.1])
    with pytest.raises(ValueError, match="Thrusters.*throttle.*OnTimeSchedule"):
        fx.Thrusters(R_TB, T_HAT, F_MAX, ISP, throttle=fx.OnTimeSchedule([1.0], [[1.0, 1.0]]))
    with pytest.raises(ValueError, match="Thrusters.*area_nozzle"):
        fx.Thrusters(R_TB, T_HAT, F_MAX, ISP, area_nozzle=-1.0)
    with pytest.raises(ValueError, match="OnTimeFSW.*clock"):
        fx.OnTimeFSW(0.5, lambda t, y, a: 0.0, 3)
    with pytest.raises(ValueError, match="OnTimeFSW.*min_on_time"):
        fx.OnTimeFSW(js.Clock(0.5), lambda t, y, a: 0.0, 3, min_on_time=[0.1, 0.2])


# Gradient of the final state w.r.t. burn start, on-time and Isp: the on-time edges are segment
# boundaries of the clocked driver (traced breakpoints of `OnTimeSchedule`), so the RK4 solution is
# smooth in them. Central differences: truncation ~(eps/scale)^2 and a round-off-level jump of
# ~1e-11 rad/s in the final rate (measured; its FD error grows as 1/eps: 2e-4 relative at 1e-5 s)
# balance at these steps, where the measured gap is <= 1e-6 relative; 5e-6 leaves margin.
GRAD_FD_RTOL = 5e-6
FD_EPS_T = 3e-3  # [s]
FD_EPS_ISP = 0.1  # [s]
W0 = np.array([0.2, -0.1, 0.15])  # [rad/s]: the exhaust torque (depletion loads) depends on Isp


def _final_state(p):
    """Final (v, omega) for a burn at traced start p[0], on-time p[1], thruster-0 Isp p[2]."""
    sched = fx.OnTimeSchedule(p[0][None], jnp.stack([p[1], 0.6 * p[1]])[None, :])
    th = fx.Thrusters(R_TB[1:], T_HAT[1:], F_MAX[1:], jnp.stack([p[2], ISP[2]]), throttle=sched,
                      area_nozzle=[0.02, 0.01], depletion_loads=True, name="thr")  # fmt: skip
    sc = fx.Spacecraft(fx.Hub(M, I_HUB), dynamic_effectors=(th,))
    z = np.zeros(3)
    y0 = sc.init_state(z, z, z, W0)
    sol = js.simulate(
        sc, y0, 4.0, dt=0.5, solver=js.RK4(), ts=np.array([0.0, 4.0]), discontinuities=[sc]
    )
    return jnp.concatenate([sol.ys["hub"]["v_BN_N"][-1], sol.ys["hub"]["omega_BN_B"][-1]])


@pytest.mark.slow  # ~40 s on 2 shared cores: the jacobian compiles the clocked driver
def test_gradient_wrt_burn_start_on_time_isp():
    p = jnp.asarray([0.8, 1.7, 220.0])  # start and end off the step grid
    f = jax.jit(_final_state)
    jac = np.asarray(jax.jit(jax.jacrev(_final_state))(p))
    for j, eps in enumerate((FD_EPS_T, FD_EPS_T, FD_EPS_ISP)):
        dp = jnp.zeros(3).at[j].set(eps)
        fd = (np.asarray(f(p + dp)) - np.asarray(f(p - dp))) / (2 * eps)
        scale = np.abs(fd).max()
        assert scale > 0
        np.testing.assert_allclose(jac[:, j], fd, rtol=0, atol=GRAD_FD_RTOL * scale)


# On-time commands at h = 0.01 s, where stage times are not exact in binary: (write time [s],
# on-times [s]) with window ends on step ends (1.5, 3.2, 5.51), half steps (0.875, 2.015, 5.505) and
# inside steps (0.6225, 2.6233, 3.51).
FINE_DT = 0.01  # [s]
FINE_COMMANDS = [
    (0.37, [1.13, 0.505, 0.2525]),
    (2.0, [1.2, 0.015, 0.6233]),
    (3.5, [2.01, 2.005, 0.01]),
]
# Delta-v relative to the largest component: 600 RK4 steps of round-off; one stage more or less of
# one thruster (h/6 of its acceleration) is 1e-4 of it.
FINE_DV_RTOL = 1e-11
# The hub states at h = 0.01 s relative to the largest magnitude of each series: round-off of two
# operation orders over 600 steps (measured <= 1.3e-14).
FINE_STATE_RTOL = 1e-12


@pytest.mark.crossval
def test_on_time_schedule_matches_basilisk_at_fine_step():
    """`OnTimeSchedule` at h = 0.01 s vs live Basilisk: windows ending on step ends, half steps and
    inside steps fire at the same stages (Basilisk's floating-point end test with its tolerance)."""
    pytest.importorskip("Basilisk")
    from tests.reference import basilisk_thrusters as bth

    S = dict(
        bth.SCENARIO,
        commands=FINE_COMMANDS,
        v_CN_N0=[0.0, 0.0, 0.0],  # at rest: delta-v is not a difference of large velocities
        dyn_dt=FINE_DT,
        fsw_dt=FINE_DT,
        duration=6.0,
        sample_dt=0.5,
    )
    ref = bth.run(**S)
    sched = fx.OnTimeSchedule([c[0] for c in FINE_COMMANDS], [c[1] for c in FINE_COMMANDS])
    sc, y0 = _bsk_spacecraft(sched, S)
    sol = js.simulate(sc, y0, S["duration"], dt=FINE_DT, solver=js.RK4(), sample_dt=0.5)
    dv_ref = ref["v_BN_N"] - ref["v_BN_N"][0]
    dv = np.asarray(sol.ys["hub"]["v_BN_N"]) - ref["v_BN_N"][0]
    err = np.abs(dv - dv_ref).max() / np.abs(dv_ref).max()
    assert err <= FINE_DV_RTOL, f"delta-v max rel {err:.3g}"
    # The flight-software path (held on-time outputs) fires at the same stages.
    times = jnp.asarray([c[0] for c in FINE_COMMANDS])
    table = jnp.asarray([c[1] for c in FINE_COMMANDS])
    fsw = fx.OnTimeFSW(
        js.Schedule([c[0] for c in FINE_COMMANDS]),
        lambda t, y, args: table[jnp.argmin(jnp.abs(times - t))],
        3,
        tick_at_t0=False,
    )
    sc2, _ = _bsk_spacecraft(None, S)
    sol2 = js.simulate(
        sc2, y0, S["duration"], dt=FINE_DT, solver=js.RK4(), sample_dt=0.5, clocks=[fsw]
    )
    dv2 = np.asarray(sol2.ys["hub"]["v_BN_N"]) - ref["v_BN_N"][0]
    err2 = np.abs(dv2 - dv_ref).max() / np.abs(dv_ref).max()
    assert err2 <= FINE_DV_RTOL, f"fsw delta-v max rel {err2:.3g}"
    # Both paths, every hub state, relative to the largest magnitude of its series.
    for label, s in (("schedule", sol), ("fsw", sol2)):
        for key in ("r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B"):
            e = np.abs(np.asarray(s.ys["hub"][key]) - ref[key]).max() / np.abs(ref[key]).max()
            assert e <= FINE_STATE_RTOL, f"{label} {key}: max rel {e:.3g}"
