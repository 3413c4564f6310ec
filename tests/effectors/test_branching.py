"""Dynamic effectors attached to hinged panels and spinning bodies (seed 002 "attachment to a state
effector"): equivalence with direct loads, momentum and energy balances, panel vs spinner paths,
locked bodies as rigid mass, a trajectory with an inertial force."""

import jax
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from tests.effectors._support import jit_drift
from tests.effectors.test_hinged_rigid_bodies import panels_from_spec
from tests.effectors.test_spinning_body import spinner_panels
from tests.helpers import hub_from_spec, load_reference


# One derivative evaluation compared with an equivalent computation: only round-off differs.
TOL_EQUIVALENT = 1e-13
# d/dt (momentum, energy) by forward-mode AD along the drift vs the applied loads: round-off of
# quantities of size ~10-100 with cancellations.
TOL_BALANCE = 1e-12
# Linear momentum under a constant inertial force is linear in t: RK4 integrates it exactly.
TOL_MOMENTUM_TRAJECTORY = 1e-12
# Basilisk references (same RK4 in float64): relative (norm-scaled) on r, v; absolute on angles/rates.
TOL_REFERENCE = 1e-9

F_S0 = np.array([0.3, -0.2, 0.5])  # [N] force on panel 0, S components, through its CoM
TAU_S0 = np.array([0.05, 0.1, -0.02])  # [N m] torque on panel 0 about its CoM, S components
F_N1 = np.array([0.1, 0.2, -0.1])  # [N] force on panel 1, N components
F_SPIN = np.array([-0.4, 0.1, 0.25])  # [N] force on spinner 0 through its joint, S components
TAU_SPIN = np.array([0.02, -0.03, 0.06])  # [N m] torque on spinner 0 about its joint, S comps


def M2(th):
    return np.array([[np.cos(th), 0, -np.sin(th)], [0, 1, 0], [np.sin(th), 0, np.cos(th)]])


def rodrigues(e, th):
    E = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
    return np.cos(th) * np.eye(3) + (1 - np.cos(th)) * np.outer(e, e) - np.sin(th) * E


def spec_panels(**overrides):
    """The undamped reference's panels (no damper, reference or motor) at rest at theta = 0."""
    spec, _ = load_reference("hinged_panels_undamped")
    return panels_from_spec(spec, **{"theta0": 0.0, "thetaDot0": 0.0, **overrides})


SPIN = dict(
    mass=50.0,
    ISPntSc_S=np.diag([50.0, 30.0, 40.0]),
    dcm_S0B=np.array([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]]),
    sHat_S=np.array([0.0, -1.0, 0.0]),
    r_SB_B=np.array([0.5, -1.5, -0.5]),
    r_ScS_S=np.array([1.0, 0.0, -1.0]),
    k=100.0,
)


def attached_panels(**kw):
    return spec_panels(
        attached={
            0: fx.ExtForceTorque(force_B=F_S0, torque_B=TAU_S0, name="panel_thruster"),
            1: fx.ExtForceTorque(force_N=F_N1, name="panel_push"),
        },
        **kw,
    )


def attached_spinner(**kw):
    child = fx.ExtForceTorque(force_B=F_SPIN, torque_B=TAU_SPIN, name="spinner_thruster")
    return fx.SpinningBodies(**SPIN, attached={0: child}, name="spinner", **kw)


THETA = np.array([0.2, -0.3])  # [rad]
THETA_DOT = np.array([0.1, -0.05])  # [rad/s]
SPIN_THETA, SPIN_THETA_DOT = 0.4, -0.2
HUB_STATE = dict(
    r_CN_N=[1.0, -2.0, 0.5],
    v_CN_N=[1.0, 2.0, 3.0],
    sigma_BN=[0.1, 0.2, -0.1],
    omega_BN_B=[0.05, -0.1, 0.08],
)


def state(sc):
    eff = {}
    for e in sc.state_effectors:
        if e.name == "panels":
            eff["panels"] = {"theta": THETA, "thetaDot": THETA_DOT}
        else:
            eff[e.name] = {"theta": np.array([SPIN_THETA]), "thetaDot": np.array([SPIN_THETA_DOT])}
    return sc.init_state(**HUB_STATE, effector_states=eff)


def _drift(sc, y):
    return jit_drift(sc, 0.0, y)


def _assert_drift_close(d1, d2, tol=TOL_EQUIVALENT):
    for name in d1:
        for key in d1[name]:
            a, b = np.asarray(d1[name][key]), np.asarray(d2[name][key])
            scale = max(np.abs(b).max(), 1e-3)
            assert np.abs(a - b).max() <= tol * scale, (name, key, np.abs(a - b).max())


# --------------------------------------------------------------------------------------------------
# Geometry computed independently (numpy, from the physics notes)


def panel_geometry(panels, i, theta):
    dcm_SB = M2(theta) @ np.asarray(panels.dcm_HB[i])
    s1, s2, s3 = dcm_SB
    r_SB = np.asarray(panels.r_HB_B[i]) - float(panels.d[i]) * s1
    return dcm_SB, s1, s2, s3, r_SB


def spinner_geometry(theta):
    dcm_SB = rodrigues(SPIN["sHat_S"], theta) @ SPIN["dcm_S0B"]
    return dcm_SB, dcm_SB.T @ SPIN["sHat_S"]


# --------------------------------------------------------------------------------------------------
# 1. A load on a panel = the same load on the rigid assembly at that point + a hinge torque


def test_panel_load_equals_direct_hub_load_plus_hinge_torque():
    hub = hub_from_spec(load_reference("hinged_panels_undamped")[0])
    sc_att = fx.Spacecraft(hub, state_effectors=(attached_panels(),))
    y = state(sc_att)
    dcm_BN = np.asarray(js.kinematics.mrp_to_dcm(HUB_STATE["sigma_BN"]))
    panels = sc_att.state_effectors[0]
    F_B_tot, M_B_tot, u = np.zeros(3), np.zeros(3), np.zeros(2)
    for i, (F_B, tau_B) in enumerate(
        [
            (
                panel_geometry(panels, 0, THETA[0])[0].T @ F_S0,
                panel_geometry(panels, 0, THETA[0])[0].T @ TAU_S0,
            ),
            (dcm_BN @ F_N1, np.zeros(3)),
        ]
    ):
        _, s1, s2, _, r_SB = panel_geometry(panels, i, THETA[i])
        F_B_tot += F_B
        M_B_tot += tau_B + np.cross(r_SB, F_B)
        # Hinge torque of the load about H: lever arm r_S/H = -d s1.
        u[i] = s2 @ (tau_B + np.cross(r_SB - np.asarray(panels.r_HB_B[i]), F_B))
    sc_dir = fx.Spacecraft(
        hub,
        state_effectors=(spec_panels(motor_torque=u),),
        dynamic_effectors=(fx.ExtForceTorque(force_B=F_B_tot, torque_B=M_B_tot, name="direct"),),
    )
    _assert_drift_close(_drift(sc_att, y), _drift(sc_dir, state(sc_dir)))
    # The panel's outputs report the same loads.
    out = sc_att.outputs(0.0, y, None)["panels"]
    np.testing.assert_allclose(out["attached_force_S"][0], F_S0, atol=1e-15)
    np.testing.assert_allclose(out["attached_torque_S"][0], TAU_S0, atol=1e-15)
    np.testing.assert_allclose(out["attached_hinge_torque"], u, rtol=1e-14, atol=1e-15)
    assert set(out["attached"]) == {"panel_thruster", "panel_push"}


def test_spinner_load_equals_direct_hub_load_plus_axis_torque():
    hub = hub_from_spec(load_reference("hinged_panels_undamped")[0])
    sc_att = fx.Spacecraft(hub, state_effectors=(attached_spinner(),))
    dcm_SB, s = spinner_geometry(SPIN_THETA)
    F_B, tau_B = dcm_SB.T @ F_SPIN, dcm_SB.T @ TAU_SPIN
    sc_dir = fx.Spacecraft(
        hub,
        state_effectors=(fx.SpinningBodies(**SPIN, motor_torque=s @ tau_B, name="spinner"),),
        dynamic_effectors=(
            fx.ExtForceTorque(
                force_B=F_B, torque_B=tau_B + np.cross(SPIN["r_SB_B"], F_B), name="direct"
            ),
        ),
    )
    _assert_drift_close(_drift(sc_att, state(sc_att)), _drift(sc_dir, state(sc_dir)))


# --------------------------------------------------------------------------------------------------
# 2. Momentum and energy balances of the whole spacecraft


def test_momentum_and_energy_rates_equal_applied_loads():
    """dP/dt = sum F, dH_C/dt = sum (r_P - r_C) x F + tau, dE/dt = sum F.v_P + tau.omega_body, with
    time derivatives by forward-mode AD along the drift (no gravity, no damping, no motor)."""
    hub = hub_from_spec(load_reference("hinged_panels_undamped")[0])
    sc = fx.Spacecraft(hub, state_effectors=(attached_panels(), attached_spinner()))
    y = state(sc)
    dy = _drift(sc, y)

    def quantities(y):
        out = sc.outputs(0.0, y, None)
        em = sc.energy_momentum(0.0, y, None)
        P = out["massSC"] * out["v_CN_N"]
        return P, em["totRotAngMomPntC_N"], em["totOrbEnergy"] + em["totRotEnergy"], out["r_CN_N"]

    (P, H, E, r_C), (Pdot, Hdot, Edot, _) = jax.jvp(quantities, (y,), (dy,))
    dcm_BN = np.asarray(js.kinematics.mrp_to_dcm(HUB_STATE["sigma_BN"]))
    dcm_NB = dcm_BN.T
    omega = np.asarray(HUB_STATE["omega_BN_B"])
    r_B, v_B = np.asarray(y["hub"]["r_BN_N"]), np.asarray(y["hub"]["v_BN_N"])
    panels = sc.state_effectors[0]
    loads = []  # (F_N, tau_N, r_PN_N, v_PN_N, omega_body_N)
    for i, (F_S, tau_S) in enumerate([(F_S0, TAU_S0), (None, np.zeros(3))]):
        dcm_SB, s1, s2, s3, r_SB = panel_geometry(panels, i, THETA[i])
        F_N = F_N1 if F_S is None else dcm_NB @ dcm_SB.T @ F_S
        rDot_SB = float(panels.d[i]) * THETA_DOT[i] * s3 + np.cross(omega, r_SB)
        loads.append(
            (
                F_N,
                dcm_NB @ dcm_SB.T @ tau_S,
                r_B + dcm_NB @ r_SB,
                v_B + dcm_NB @ rDot_SB,
                dcm_NB @ (omega + THETA_DOT[i] * s2),
            )
        )
    dcm_SB, s = spinner_geometry(SPIN_THETA)
    r_J = SPIN["r_SB_B"]
    loads.append(
        (
            dcm_NB @ dcm_SB.T @ F_SPIN,
            dcm_NB @ dcm_SB.T @ TAU_SPIN,
            r_B + dcm_NB @ r_J,
            v_B + dcm_NB @ np.cross(omega, r_J),
            dcm_NB @ (omega + SPIN_THETA_DOT * s),
        )
    )
    F = sum(ld[0] for ld in loads)
    M_C = sum(ld[1] + np.cross(ld[2] - np.asarray(r_C), ld[0]) for ld in loads)
    power = sum(ld[0] @ ld[3] + ld[1] @ ld[4] for ld in loads)
    np.testing.assert_allclose(Pdot, F, rtol=0, atol=TOL_BALANCE * np.abs(F).max())
    np.testing.assert_allclose(Hdot, M_C, rtol=0, atol=TOL_BALANCE * max(np.abs(H).max(), 1.0))
    assert abs(float(Edot) - power) <= TOL_BALANCE * max(abs(float(E)), 1.0), (float(Edot), power)
    # The loads do work through the joint motion: the check is not blind to the joint torques.
    assert (
        abs(
            loads[0][0]
            @ (float(panels.d[0]) * THETA_DOT[0] * dcm_NB @ panel_geometry(panels, 0, THETA[0])[3])
        )
        > 1e-3
    )


# --------------------------------------------------------------------------------------------------
# 3. Panel and spinner attachment paths agree (different reference points, same physics)


def test_panel_and_spinner_as_panel_agree():
    """A hinged panel with a load at its CoM = the same panel as a spinning body (sHat = sHat2,
    r_ScS = -d sHat1) with the load moved to the joint (F, tau + r_S/H x F)."""
    spec, _ = load_reference("hinged_panels_undamped")
    hub = hub_from_spec(spec)
    # (A force given in N components is not a constant in S, so only the S-frame load is moved.)
    panels = spec_panels(
        attached={0: fx.ExtForceTorque(force_B=F_S0, torque_B=TAU_S0, name="panel_thruster")}
    )
    # In S components the CoM is at (-d, 0, 0) from the hinge: moment of the CoM force about H.
    r_ScS_S = np.array([-spec["effectors"][0]["panels"][0]["d_m"], 0.0, 0.0])
    children = {
        0: fx.ExtForceTorque(
            force_B=F_S0, torque_B=TAU_S0 + np.cross(r_ScS_S, F_S0), name="panel_thruster"
        ),
    }
    sc1 = fx.Spacecraft(hub, state_effectors=(panels,))
    sc2 = fx.Spacecraft(hub, state_effectors=(spinner_panels(spec, attached=children),))
    y1 = state(sc1)
    y2 = sc2.init_state(
        **HUB_STATE, effector_states={"panels": {"theta": THETA, "thetaDot": THETA_DOT}}
    )
    _assert_drift_close(_drift(sc1, y1), _drift(sc2, y2))


# --------------------------------------------------------------------------------------------------
# 4. A locked spinner with an attached load: Newton-Euler for the rigid spacecraft


def test_locked_spinner_load_moves_rigid_spacecraft():
    hub = hub_from_spec(load_reference("hinged_panels_undamped")[0])
    sc = fx.Spacecraft(hub, state_effectors=(attached_spinner(locked=True),))
    y = state(sc)
    dy = _drift(sc, y)
    ctx = sc.context(0.0, y, None)
    omega = np.asarray(HUB_STATE["omega_BN_B"])
    omegaDot = np.asarray(dy["hub"]["omega_BN_B"])
    dcm_BN = np.asarray(ctx.dcm_BN)
    c = np.asarray(ctx.c_B)
    a_B = dcm_BN @ np.asarray(dy["hub"]["v_BN_N"])
    a_C = a_B + np.cross(omegaDot, c) + np.cross(omega, np.cross(omega, c))
    dcm_SB, _ = spinner_geometry(SPIN_THETA)
    F_B, tau_B = dcm_SB.T @ F_SPIN, dcm_SB.T @ TAU_SPIN
    m = float(ctx.m_sc)
    IC = np.asarray(ctx.IC_B)
    np.testing.assert_allclose(m * a_C, F_B, rtol=0, atol=TOL_BALANCE * m * np.abs(a_C).max())
    M_C = tau_B + np.cross(SPIN["r_SB_B"] - c, F_B)
    euler = IC @ omegaDot + np.cross(omega, IC @ omega)
    np.testing.assert_allclose(euler, M_C, rtol=0, atol=TOL_BALANCE * np.abs(IC @ omega).max())
    assert float(dy["spinner"]["thetaDot"][0]) == 0.0


# --------------------------------------------------------------------------------------------------
# 5. Trajectory: a constant inertial force on a flexing panel


def test_trajectory_linear_momentum_under_attached_inertial_force():
    hub = hub_from_spec(load_reference("hinged_panels_undamped")[0])
    child = fx.ExtForceTorque(force_N=F_N1, torque_B=TAU_S0, name="push")
    panels = spec_panels(theta0=[0.1, -0.05], thetaDot0=[0.02, 0.0], attached={1: child})
    sc = fx.Spacecraft(hub, state_effectors=(panels,))
    y0 = sc.init_state(**HUB_STATE)
    sol = js.simulate(sc, y0, 5.0, dt=0.01, sample_dt=0.5)
    out = sol.outputs
    P = np.asarray(out["massSC"])[:, None] * np.asarray(out["v_CN_N"])
    t = np.asarray(sol.ts)[:, None]
    expected = P[0] + F_N1 * t
    np.testing.assert_allclose(P, expected, rtol=0, atol=TOL_MOMENTUM_TRAJECTORY * np.abs(P).max())
    # The child's outputs are recorded with the panel's, its torque drives the panel.
    np.testing.assert_allclose(
        out["panels"]["attached"]["push"]["force_N"], np.broadcast_to(F_N1, (11, 3))
    )
    assert np.ptp(np.asarray(out["panels"]["theta"][:, 1])) > 1e-3


def test_breakpoints_of_children_are_collected():
    sig = js.PiecewiseConstant([1.0, 2.5], np.zeros((3, 3)))
    child = fx.ExtForceTorque(force_B=sig, name="pulsed")
    panels = spec_panels(attached={0: child})
    sc = fx.Spacecraft(
        hub_from_spec(load_reference("hinged_panels_undamped")[0]), state_effectors=(panels,)
    )
    assert sorted(sc.breakpoints()) == [1.0, 2.5]


@pytest.mark.parametrize("bad", [{-1: None}, [(0,)], 5])
def test_bad_attachment_specs(bad):
    with pytest.raises(ValueError, match="attached"):
        fx.SpinningBodies(**SPIN, attached=bad)


# --------------------------------------------------------------------------------------------------
# 6. Basilisk references with attached effectors (tests/data/spinning_bodies)


def test_basilisk_spinner_with_attached_force_torque():
    """Basilisk's spinning body takes attached loads in S components with the force through the joint
    point S: the same convention as ours, so the runs agree at round-off."""
    from tests.effectors.test_spinning_body import check_spinner_reference, run_spinner_reference

    spec, _ = load_reference("spinning_bodies")
    a = spec["attached"]
    child = fx.ExtForceTorque(
        force_B=a["extForce_B_N"], torque_B=a["extTorquePntB_B_Nm"], name="ext"
    )
    sol, ref = run_spinner_reference("attached", attached={a["unit"]: child})
    check_spinner_reference(sol, ref)
    _, plain = load_reference("spinning_bodies")
    # The attached load changes the motion well above the tolerance.
    assert np.abs(plain["plain/omega_BN_B"] - ref["omega_BN_B"]).max() > 1e-4


def test_basilisk_panel_with_attached_torque():
    """A couple attached to a Basilisk hinged panel (no force, so the application point, where the
    conventions differ, does not matter): our panel agrees at round-off."""
    spec, data = load_reference("spinning_bodies")
    p = spec["panel_torque"]
    ic, tm = spec["initial_conditions"], spec["time"]
    hspec, _ = load_reference("hinged_panels_undamped")
    child = fx.ExtForceTorque(torque_B=p["extTorquePntB_B_Nm"], name="ext")
    panels = spec_panels(
        theta0=[q["theta0_rad"] for q in hspec["effectors"][0]["panels"]],
        thetaDot0=[q["thetaDot0_radps"] for q in hspec["effectors"][0]["panels"]],
        attached={p["unit"]: child},
    )
    sc = fx.Spacecraft(hub_from_spec(hspec), state_effectors=(panels,))
    y0 = sc.init_state(ic["r_CN_N_m"], ic["v_CN_N_mps"], ic["sigma_BN"], ic["omega_BN_B_radps"])
    sol = js.simulate(sc, y0, tm["duration_s"], dt=tm["step_s"], sample_dt=tm["sample_interval_s"])
    ref = {k.split("/")[1]: data[k] for k in data.files if k.startswith("panel_torque/")}
    out = sol.outputs
    for key in ["r_BN_N", "v_BN_N"]:
        err = np.linalg.norm(np.asarray(out[key]) - ref[key], axis=-1).max()
        assert err <= TOL_REFERENCE * np.linalg.norm(ref[key], axis=-1).max(), key
    for key in ["sigma_BN", "omega_BN_B"]:
        assert np.abs(np.asarray(out[key]) - ref[key]).max() <= TOL_REFERENCE, key
    for key in ["theta", "thetaDot"]:
        assert np.abs(np.asarray(out["panels"][key]) - ref[key]).max() <= TOL_REFERENCE, key


# --------------------------------------------------------------------------------------------------
# A force on a panel locked by a very stiff hinge spring acts like the same force applied directly
# at that point of the rigid assembly. The hinge is critically damped so that the elastic transient
# (amplitude ~ load / k, rate ~ sqrt(k)) dies out; the residual is then the static deflection,
# O(load / k): it must be small and fall by ~10x when k grows 10x.
STIFF_K = (1.0e5, 1.0e6)  # [N m/rad] hinge stiffness of the "locked" panels
STIFF_DT, STIFF_STEPS = 1.0e-3, 1000  # [s] RK4 resolves sqrt(k / I_hinge) <= 60 rad/s
STIFF_REL_TOL = 1e-5  # residual / change of hub v, omega at k = 1e6 (measured 4.3e-7)
STIFF_I_HINGE = 50.0 + 100.0 * 1.5**2  # [kg m^2] panel inertia about its hinge, I_yy + m d^2


def _stiff_run(k, attached):
    spec, _ = load_reference("hinged_panels_undamped")
    P = spec["effectors"][0]["panels"]
    g = lambda key: np.array([p[key] for p in P])
    child = fx.ExtForceTorque(force_B=F_S0, torque_B=TAU_S0, name="panel_thruster")
    panels = fx.HingedRigidBodies(
        g("mass_kg"),
        g("IPntS_S_kgm2"),
        g("d_m"),
        np.array([k, k]),
        g("r_HB_B_m"),
        g("dcm_HB"),
        c=2.0 * np.sqrt(k * STIFF_I_HINGE),
        attached={0: child} if attached else None,
        name="panels",
    )
    dyn = ()
    if not attached:
        dcm_SB = np.asarray(panels.dcm_HB[0])  # theta = 0
        F_B = dcm_SB.T @ F_S0
        r_SB = np.asarray(panels.r_HB_B[0]) - float(panels.d[0]) * dcm_SB[0]
        dyn = (fx.ExtForceTorque(force_B=F_B, torque_B=np.cross(r_SB, F_B) + dcm_SB.T @ TAU_S0),)
    sc = fx.Spacecraft(hub_from_spec(spec), state_effectors=(panels,), dynamic_effectors=dyn)
    y0 = sc.init_state(effector_states={"panels": {"theta": np.zeros(2), "thetaDot": np.zeros(2)}})
    sol = js.simulate(sc, y0, STIFF_DT * STIFF_STEPS, dt=STIFF_DT, outputs=False)
    return sol.ys["hub"]


def test_panel_force_equals_direct_force_on_stiff_panel():
    residuals = []
    for k in STIFF_K:
        a, b = _stiff_run(k, True), _stiff_run(k, False)
        res = []
        for key in ["v_BN_N", "omega_BN_B"]:
            change = np.abs(np.asarray(b[key][-1]) - np.asarray(b[key][0])).max()
            res.append(np.abs(np.asarray(a[key][-1]) - np.asarray(b[key][-1])).max() / change)
        residuals.append(max(res))
    assert residuals[1] <= STIFF_REL_TOL, residuals
    assert residuals[1] <= residuals[0] / 5.0, residuals  # O(1/k) convergence to the rigid result
