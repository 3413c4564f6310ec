"""HingedRigidBodies: Basilisk reference, conservation, energy balance with dampers, closed forms,
free hinge and zero load, vectorization, the final-state gradient, validation. (jit, vmap, the
drift's gradients w.r.t. k, c and mass, mass-property rates, refused states and commands, units:
the generic suite, `tests/effectors/test_generic.py`.)"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from tests.effectors._support import (
    HEAVY_HUB,
    MU_EARTH,
    assert_basilisk_run,
    assert_conserved,
    assert_damped_energy_balance,
    assert_grad_matches_fd,
    assert_logged,
    tracked_run,
)
from tests.helpers import hub_from_spec, load_reference, simulate_spec


# Basilisk runs the same RK4 in float64: agreement is at round-off. Positions/velocities: relative
# error scaled by the largest reference norm of the run (v_BN_N components cross zero, so a per-
# component relative error is meaningless there); attitude, rates and angles: absolute.
REL_TOL_RV = 1e-9
ABS_TOL_ANGLES = 1e-9
# Logged mass properties and energies vs Basilisk's log: same formulas, round-off only.
REL_TOL_LOGGED = 1e-11
# Conservation over 10 s at h = 2.5 ms: the RK4 energy error scales as h^4 (Basilisk's own run at
# h = 10 ms drifts 8.8e-10 in 100 s); 1e-12 bounds it with a margin of ~5.
REL_TOL_CONSERVED = 1e-12
# Energy balance with dampers: E(t) + W(t) = E(0), W integrated in the same RK4 state, so the
# residual is the RK4 error (~1e-13 of E); relative to the dissipated energy W(T) (~E/5 here).
REL_TOL_DISSIPATION = 1e-9
# Heavy hub (1e12 kg, 1e12 kg m^2): the panel equation decouples up to m_p d^2 / I_hub ~ 1e-10; the
# RK4 phase error at omega h = 2.6e-3 is ~1e-15 per step. Tolerance on theta relative to amplitude.
REL_TOL_ANALYTIC = 1e-8
# Two one-panel effectors vs one two-panel effector: only the summation order differs.
TOL_VECTORIZED = 1e-14
# Central differences with relative step 1e-4: truncation ~1e-8, round-off ~1e-12.
REL_TOL_GRAD = 1e-6
FD_REL_STEP = 1e-4

# Panel velocity output vs central differences of the position output at the 0.1 s samples.
FD_VELOCITY_TOL = 5e-3


def panels_from_spec(spec, **overrides):
    P = spec["effectors"][0]["panels"]
    g = lambda key: np.array([p[key] for p in P])
    kw = dict(
        c=g("c_Nms_per_rad"),
        theta0=g("theta0_rad"),
        thetaDot0=g("thetaDot0_radps"),
        thetaRef=g("thetaRef_rad"),
        thetaDotRef=g("thetaDotRef_radps"),
        motor_torque=g("motor_torque_Nm"),
        name="panels",
    )
    kw.update(overrides)
    return fx.HingedRigidBodies(
        g("mass_kg"),
        g("IPntS_S_kgm2"),
        g("d_m"),
        g("k_Nm_per_rad"),
        g("r_HB_B_m"),
        g("dcm_HB"),
        **kw,
    )


# --------------------------------------------------------------------------------------------------
# Basilisk reference (hinged_panels_undamped)


def _reference_run(duration):
    spec, ref = load_reference("hinged_panels_undamped")
    sc = fx.Spacecraft(hub_from_spec(spec), state_effectors=(panels_from_spec(spec),))
    sol = simulate_spec(sc, spec, duration)
    n = len(sol.ts)
    return spec, {k: ref[k][:n] for k in ref.files}, sol


def _check_reference(spec, ref, sol):
    out = sol.outputs
    np.testing.assert_allclose(np.asarray(sol.ts), ref["t"], rtol=0, atol=1e-12)
    panels = {
        ("panels", key): np.stack([ref[f"panel{i + 1}_{key}"] for i in range(2)], axis=-1)
        for key in ["theta", "thetaDot"]
    }
    assert_basilisk_run(sol, ref, panels, REL_TOL_RV, ABS_TOL_ANGLES)
    for key in ["r_CN_N", "v_CN_N"]:
        # C stays at the origin: compare absolutely against the scale of B's motion.
        err = np.abs(np.asarray(out[key]) - ref[key]).max() / np.abs(ref["r_BN_N"]).max()
        assert err <= REL_TOL_RV, f"{key}: error {err:.3e} of the r_BN_N scale"
    assert_logged(out, ref, REL_TOL_LOGGED)


@pytest.fixture(scope="module")
def reference_run():
    # The full 100 s run (10,000 RK4 steps) costs well under a second once compiled: the compile,
    # not the horizon, dominates, so no prefix is needed.
    return _reference_run(100.0)


def test_basilisk_reference(reference_run):
    spec, ref, sol = reference_run
    _check_reference(spec, ref, sol)
    assert int(sol.counts["mrp_switches"][-1]) == spec["basilisk_checks"]["final_MRPSwitchCount"]


def test_panel_frame_outputs(reference_run):
    """At t = 0 the panel CoM lies at d along the spec's panel direction from the hinge, [SB] = [HB]
    rotated by theta about hHat2, and omega_SN = omega_BN + thetaDot sHat2."""
    spec, ref, sol = reference_run
    P = spec["effectors"][0]["panels"]
    out = sol.outputs["panels"]
    dcm_BN = np.asarray(js.kinematics.mrp_to_dcm(ref["sigma_BN"][0]))
    omega = ref["omega_BN_B"][0]
    for i, p in enumerate(P):
        r_SB_B = dcm_BN @ (np.asarray(out["r_SN_N"][0, i]) - ref["r_BN_N"][0])
        expected = np.asarray(p["r_HB_B_m"]) + p["d_m"] * np.asarray(
            p["panel_direction_at_theta0_B"]
        )
        np.testing.assert_allclose(r_SB_B, expected, atol=1e-12)
        dcm_SN = np.asarray(js.kinematics.mrp_to_dcm(out["sigma_SN"][0, i]))
        th = p["theta0_rad"]
        M2 = np.array([[np.cos(th), 0, -np.sin(th)], [0, 1, 0], [np.sin(th), 0, np.cos(th)]])
        np.testing.assert_allclose(dcm_SN, M2 @ np.asarray(p["dcm_HB"]) @ dcm_BN, atol=1e-12)
        sHat2 = np.asarray(p["dcm_HB"])[1]
        w_SN_S = dcm_SN @ dcm_BN.T @ (omega + p["thetaDot0_radps"] * sHat2)
        np.testing.assert_allclose(np.asarray(out["omega_SN_S"][0, i]), w_SN_S, atol=1e-14)
    # v_SN_N is the true inertial velocity (not Basilisk's mixed-frame sum): central differences of
    # r_SN_N at the 0.1 s samples agree to (omega dt)^2 / 6 ~ 2e-3 of the velocity scale.
    r = np.asarray(out["r_SN_N"])
    v = np.asarray(out["v_SN_N"])
    dt = float(sol.ts[1] - sol.ts[0])
    fd = (r[2:] - r[:-2]) / (2 * dt)
    np.testing.assert_allclose(v[1:-1], fd, rtol=0, atol=FD_VELOCITY_TOL * np.abs(v).max())


# --------------------------------------------------------------------------------------------------
# One compiled scenario (2 panels + point-mass gravity + dissipated-work state), many parameter sets


DT = 0.0025  # [s]
T_END = 10.0  # [s]
SAMPLE_DT = 0.5  # [s]


def tracked_scenario(
    *,
    c=(0.0, 0.0),
    k=(300.0, 300.0),
    theta0=(0.0872664626, -0.0523598776),
    thetaDot0=(0.01, -0.02),
    motor_torque=(0.0, 0.0),
    omega0=(0.05, -0.04, 0.06),
    **hub,
):
    """The spec's panels (`k` a traced leaf) on `tracked_run`'s hub and orbit."""
    spec, _ = load_reference("hinged_panels_undamped")
    panels = panels_from_spec(
        spec, c=np.asarray(c), theta0=theta0, thetaDot0=thetaDot0, motor_torque=motor_torque
    )
    panels = eqx.tree_at(lambda p: p.k, panels, jnp.asarray(k, dtype=float))
    sol = tracked_run(panels, dt=DT, t_end=T_END, sample_dt=SAMPLE_DT, omega0=omega0, **hub)
    return panels, sol


@pytest.mark.parametrize("mu", [0.0, MU_EARTH], ids=["free_space", "orbit"])
def test_conservation_undamped(mu):
    _, sol = tracked_scenario(mu=mu)
    out = sol.outputs
    assert_conserved(out, REL_TOL_CONSERVED)
    assert np.all(np.asarray(out["W"]) == 0.0)
    # The panels really move and exchange energy with the hub.
    assert np.ptp(np.asarray(out["panels"]["theta"]), axis=0).min() > 0.05


@pytest.mark.parametrize("mu", [0.0, MU_EARTH], ids=["free_space", "orbit"])
def test_damped_energy_balance(mu):
    _, sol = tracked_scenario(mu=mu, c=(20.0, 35.0))
    # A substantial part (> 10 %) of the energy is dissipated; orbital energy and the angular
    # momentum stay conserved (the dampers are internal).
    assert_damped_energy_balance(sol.outputs, 0.1, REL_TOL_DISSIPATION, REL_TOL_CONSERVED)
    assert np.all(np.diff(np.asarray(sol.outputs["totRotEnergy"])) < 0)


HEAVY = dict(HEAVY_HUB, thetaDot0=(0.0, 0.0))


def test_small_oscillation_frequency_heavy_hub():
    """theta(t) = theta0 cos(sqrt(k / (I_s2 + m d^2)) t) on a hub that does not move."""
    k = np.array([300.0, 120.0])
    theta0 = np.array([0.05, -0.03])
    panels, sol = tracked_scenario(k=k, theta0=theta0, **HEAVY)
    J = panels.IPntS_S[:, 1, 1] + panels.mass * panels.d**2
    wn = np.sqrt(k / np.asarray(J))
    t = np.asarray(sol.ts)[:, None]
    expected = theta0 * np.cos(wn * t)
    err = np.abs(np.asarray(sol.outputs["panels"]["theta"]) - expected).max(axis=0)
    assert np.all(err <= REL_TOL_ANALYTIC * np.abs(theta0)), err / np.abs(theta0)


def test_free_hinge_motor_torque_heavy_hub():
    """k = c = 0 (free hinge) with a constant motor torque: theta = u t^2 / (2 J)."""
    u = np.array([0.5, -0.2])
    panels, sol = tracked_scenario(k=(0.0, 0.0), motor_torque=u, **{**HEAVY, "theta0": (0.0, 0.0)})
    J = np.asarray(panels.IPntS_S[:, 1, 1] + panels.mass * panels.d**2)
    t = np.asarray(sol.ts)[:, None]
    expected = u * t**2 / (2 * J)
    err = np.abs(np.asarray(sol.outputs["panels"]["theta"]) - expected).max()
    assert err <= REL_TOL_ANALYTIC * np.abs(expected).max()
    np.testing.assert_allclose(sol.outputs["panels"]["hinge_torque"], np.broadcast_to(u, (21, 2)))


def test_zero_load_stays_at_rest():
    """Free hinge, no motor, panels and hub at rest, no gravity: nothing moves, exactly."""
    _, sol = tracked_scenario(k=(0.0, 0.0), **{**HEAVY, "hub_mass": 750.0, "theta0": (0.0, 0.0)})
    ys = sol.ys["sc"]
    assert np.all(np.asarray(ys["panels"]["theta"]) == 0.0)
    assert np.all(np.asarray(ys["panels"]["thetaDot"]) == 0.0)
    assert np.all(np.asarray(ys["hub"]["omega_BN_B"]) == 0.0)
    assert np.all(np.asarray(ys["hub"]["v_BN_N"]) == 0.0)


# --------------------------------------------------------------------------------------------------
# Vectorization, gradients


def _rk4_run(sc, y0, n_steps, dt):
    solver = js.RK4()

    @jax.jit
    def run(y):
        body = lambda i, y: solver.step(sc.drift, i * dt, y, dt, None)
        return jax.lax.fori_loop(0, n_steps, body, y)

    return run(y0)


def test_two_effectors_equal_one_vectorized():
    spec, _ = load_reference("hinged_panels_undamped")
    hub = hub_from_spec(spec)
    both = panels_from_spec(spec, c=np.array([3.0, 7.0]), motor_torque=np.array([0.1, -0.2]))
    split = [
        fx.HingedRigidBodies(
            both.mass[i],
            both.IPntS_S[i],
            both.d[i],
            both.k[i],
            both.r_HB_B[i],
            both.dcm_HB[i],
            c=both.c[i],
            theta0=both.theta0[i],
            thetaDot0=both.thetaDot0[i],
            motor_torque=both.motor_torque[i],
            name=f"p{i}",
        )
        for i in range(2)
    ]
    sc1 = fx.Spacecraft(hub, state_effectors=(both,))
    sc2 = fx.Spacecraft(hub, state_effectors=tuple(split))
    omega0 = [0.05, -0.04, 0.06]
    y1 = _rk4_run(sc1, sc1.init_state(None, None, None, omega0), 200, 0.01)
    y2 = _rk4_run(sc2, sc2.init_state(None, None, None, omega0), 200, 0.01)
    for key in ["r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B"]:
        a, b = np.asarray(y1["hub"][key]), np.asarray(y2["hub"][key])
        assert np.abs(a - b).max() <= TOL_VECTORIZED * max(np.abs(b).max(), 1.0), key
    for i in range(2):
        for key in ["theta", "thetaDot"]:
            a, b = float(y1["panels"][key][i]), float(y2[f"p{i}"][key][0])
            assert abs(a - b) <= TOL_VECTORIZED, (key, i, a - b)


def test_gradients_match_finite_differences():
    """jax.grad of a final-state scalar w.r.t. k, c and mass vs central differences: 6-12 s on the
    shared 2-core machine since the helper compiles with jaxsim.jit (14-28 s before), so it runs
    by default."""
    spec, _ = load_reference("hinged_panels_undamped")
    base = panels_from_spec(spec, c=np.array([5.0, 8.0]))
    hub = hub_from_spec(spec)
    omega0 = [0.05, -0.04, 0.06]

    def final_scalar(params):
        k, c, m = params
        panels = eqx.tree_at(lambda p: (p.k, p.c, p.mass), base, (k, c, m))
        sc = fx.Spacecraft(hub, state_effectors=(panels,))
        y0 = sc.init_state(None, None, None, omega0)
        sol = js.simulate(sc, y0, 2.0, dt=0.01, outputs=False)
        y = sol.ys
        return (
            y["panels"]["theta"][-1, 0]
            - 0.7 * y["panels"]["thetaDot"][-1, 1]
            + 3.0 * y["hub"]["omega_BN_B"][-1, 1]
        )

    p0 = (base.k, base.c, base.mass)
    assert_grad_matches_fd(final_scalar, p0, FD_REL_STEP, REL_TOL_GRAD, ("k", "c", "mass"))


# --------------------------------------------------------------------------------------------------
# Validation


GOOD = dict(
    mass=[100.0, 100.0],
    IPntS_S=np.diag([100.0, 50.0, 50.0]),
    d=1.5,
    k=300.0,
    r_HB_B=[[0.5, 0, 1], [-0.5, 0, 1]],
    dcm_HB=np.eye(3),
)


def build(**kw):
    args = {**GOOD, **kw}
    extra = {k: args.pop(k) for k in list(args) if k not in GOOD}
    return fx.HingedRigidBodies(**args, **extra)


@pytest.mark.parametrize(
    "arg, value",
    [
        ("mass", [100.0, 0.0]),
        ("mass", [100.0, -1.0]),
        ("mass", [100.0, np.nan]),
        ("mass", [[100.0]]),
        ("IPntS_S", np.diag([100.0, -50.0, 50.0])),
        ("IPntS_S", np.array([[100.0, 1.0, 0], [1.0, 50.0, 0], [0, 0, 50.0]])),
        ("IPntS_S", np.array([[100.0, 1.0, 0], [0.0, 50.0, 0], [0, 0, 50.0]])),
        ("IPntS_S", np.ones((3, 3, 3))),
        ("d", -1.0),
        ("d", [1.0, 2.0, 3.0]),
        ("k", -300.0),
        ("k", np.inf),
        ("c", -1.0),
        ("r_HB_B", [0.5, 0.0]),
        ("dcm_HB", 2 * np.eye(3)),
        ("dcm_HB", np.diag([1.0, 1.0, -1.0])),
        ("theta0", [0.0, np.nan]),
        ("thetaDot0", np.zeros(3)),
        ("motor_torque", [1.0, 2.0, 3.0]),
        ("name", ""),
    ],
)
def test_validation_errors(arg, value):
    with pytest.raises(ValueError, match=arg):
        build(**{arg: value})


def test_attached_validation_errors():
    ext = fx.ExtForceTorque(force_B=[1.0, 0, 0], name="thruster")
    with pytest.raises(ValueError, match="attached"):
        build(attached={2: ext})
    with pytest.raises(ValueError, match="attached"):
        build(attached={0: "not an effector"})
    with pytest.raises(ValueError, match="attached"):
        build(attached={0: ext, 1: fx.ExtForceTorque(name="thruster")})
    with pytest.raises(ValueError, match="attached"):
        build(attached={0: (ext, 3)})


def test_broadcast_and_init_state():
    p = build()
    assert p.num_panels == 2
    assert p.IPntS_S.shape == (2, 3, 3) and p.d.shape == (2,) and p.dcm_HB.shape == (2, 3, 3)
    x = p.init_state(theta=[0.1, 0.2])
    np.testing.assert_array_equal(x["theta"], [0.1, 0.2])
    np.testing.assert_array_equal(x["thetaDot"], [0.0, 0.0])
    with pytest.raises(ValueError, match="theta"):
        p.init_state(theta=[0.1, 0.2, 0.3])
