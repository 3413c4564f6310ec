"""Reaction wheels: Basilisk reference, conservation, closed forms, limits, friction, gradients.

Oracles: the stored Basilisk run `reaction_wheels` (balanced wheels, constant torques), Basilisk's
integrated-test regression truths (R1-R3: the balanced, simple-jitter and fully-coupled cases of
`test_reactionWheelStateEffector_integrated.py`), angular-momentum and energy
conservation (with the motor work integrated as a state), the momentum-exchange closed form (R4),
hand-evaluated command limits (R5), the friction formula and an independent scalar wheel ODE (R6),
central finite differences for `jax.grad`, and vectorized-vs-separate effector equality.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from tests.helpers import hub_from_spec, initial_state, load_reference


# ---------------------------------------------------------------------------------------------------
# Tolerances (each with its reason)

# Basilisk reference (same RK4, same step): the difference is summation-order round-off, amplified
# over the run; measured ~6e-15. r_BN_N / v_BN_N are ~0.1 m / ~1e-2 m/s and cross zero, so the
# relative test is on the norm scale: max_t |x - x_ref| / max_t |x_ref|.
REF_REL_TOL = 1e-9
REF_ABS_TOL = 1e-9  # sigma_BN, omega_BN_B, wheel speeds (measured <= 4e-13 on Omega ~50 rad/s)
# Fast-test horizon: the first MRP switch of the reference is at t = 39.5 s.
REF_HORIZON_S = 40.0
# Internal motor torques conserve H exactly; RK4 at h = 0.01 s leaves only round-off (Basilisk: 5e-15).
H_DRIFT_TOL = 1e-12
# E(t) - E(0) = motor work: both sides integrated by the same RK4 step as one augmented ODE, whose
# invariant E - W is polynomial in the states; the residual is RK4 truncation of that invariant,
# relative to the energy change (~100 J): measured 6.5e-14.
WORK_REL_TOL = 1e-12
# Torque-free balanced wheels conserve E exactly up to RK4 truncation (small for this slow tumble).
E_DRIFT_TOL = 1e-12
# Fully-coupled jitter (Jt != Jg): RK4 truncation at h = 1.25e-4 s over 0.5 s is ~1e-13 (measured
# 16x per halving from h = 2 ms); 1e-12 leaves a margin of ~10.
FC_DRIFT_TOL = 1e-12
FC_STEP_S = 1.25e-4
# 4th-order convergence: halving h must divide the drift by 2^4 = 16; accept 12..20 (asymptotic range).
CONV_RATIO_RANGE = (12.0, 20.0)
# Basilisk's Jt == Jg-only formulas leak ~6e-8 in E_rot, independent of the step.
BASILISK_FORM_MIN_DRIFT = 1e-9
# Closed-form momentum exchange (R4, Basilisk's tolerance): omega and Omega are linear in t (RK4 exact);
# the yaw MRP carries the RK4 error of tan(psi/4), measured 3.6e-10 at h = 0.1 s.
BOE_REL_TOL = 1e-8
# Command limits (R5) are exact arithmetic.
LIMIT_ABS_TOL = 1e-10
# Antisymmetric wheel pair: the torques on the hub cancel up to round-off (FMA contraction leaves
# ~1e-20 rad/s, measured), against a natural scale Js * 15 / I ~ 1 rad/s without the partner wheel.
HUB_REST_ABS_TOL = 1e-15
# Logged friction vs the formula (R6): identical arithmetic up to round-off.
FRICTION_TOL = 1e-10
# Independent scalar wheel ODE (hub at rest) vs the coupled simulation: same RK4, same mode logic.
WHEEL_ODE_REL_TOL = 1e-10
# Basilisk regression truths R1-R3 are printed with 9 significant digits (Basilisk's test uses 1e-7).
TRUTH_REL_TOL = 1e-8
# R1/R3 invariants (Basilisk's tolerance 1e-10; measured ~1e-14).
TRUTH_INVARIANT_TOL = 1e-10
# jax.grad vs central differences with a relative step 1e-5: truncation ~1e-10, round-off ~1e-11.
GRAD_REL_TOL = 1e-6
FD_REL_STEP = 1e-5
# Two effectors vs one vectorized effector: only the order of three-term sums differs.
SPLIT_REL_TOL = 1e-14
# An unset limit/friction group vs the same group present but disabled by value: the same arithmetic
# on the states (the disabled terms add exact zeros), up to a different fusion of the compiled step.
UNSET_GROUP_REL_TOL = 1e-14

RPM = 2.0 * np.pi / 60.0  # [rad/s per rpm]


# ---------------------------------------------------------------------------------------------------
# Basilisk reference `reaction_wheels`


def _ref_wheels(spec, **kw):
    w = spec["effectors"][0]["wheels"]
    return dict(
        gsHat_B=[x["gsHat_B"] for x in w],
        Js=[x["Js_kgm2"] for x in w],
        Omega=[x["Omega0_radps"] for x in w],
        rWB_B=[x["rWB_B_m"] for x in w],
        w2Hat0_B=[x["w2Hat0_B"] for x in w],
        w3Hat0_B=[x["w3Hat0_B"] for x in w],
        motor_torque=spec["effectors"][0]["motor_torques_Nm"],
        **kw,
    )


@pytest.fixture(scope="module")
def reference():
    return load_reference("reaction_wheels")


def _ref_run(spec, effectors, t1, sample_dt):
    sc = fx.Spacecraft(hub_from_spec(spec), state_effectors=effectors)
    y0 = initial_state(sc, spec)
    dt = spec["time"]["step_s"]
    return sc, js.simulate(sc, y0, t1, dt=dt, sample_dt=sample_dt)


@pytest.fixture(scope="module")
def ref_run(reference):
    spec, _ = reference
    rw = fx.ReactionWheels(**_ref_wheels(spec, track_work=True, name="rw"))
    return _ref_run(spec, (rw,), REF_HORIZON_S, spec["time"]["sample_interval_s"])


def _check_reference(sol, ref, n, get_Omega):
    o = sol.outputs
    for key in ("r_BN_N", "v_BN_N"):
        err = np.max(np.abs(np.asarray(o[key]) - ref[key][:n])) / np.max(np.abs(ref[key][:n]))
        assert err <= REF_REL_TOL, f"{key}: norm-scale relative error {err:.3e}"
    for key in ("sigma_BN", "omega_BN_B"):
        np.testing.assert_allclose(o[key], ref[key][:n], rtol=0, atol=REF_ABS_TOL, err_msg=key)
    np.testing.assert_allclose(get_Omega(o), ref["rw_Omega"][:n], rtol=0, atol=REF_ABS_TOL)
    np.testing.assert_array_equal(sol.counts["mrp_switches"], ref["MRPSwitchCount"][:n])


def test_basilisk_reference_prefix(reference, ref_run):
    _, ref = reference
    _, sol = ref_run
    n = sol.ts.shape[0]
    np.testing.assert_allclose(sol.ts, ref["t"][:n], rtol=0, atol=1e-12)
    _check_reference(sol, ref, n, lambda o: o["rw"]["Omega"])
    assert int(sol.counts["mrp_switches"][-1]) == 1  # the prefix includes the switch at 39.5 s
    # Energies/momenta as Basilisk logs them (absolute on ~300 J / ~80 kg m^2/s scales).
    np.testing.assert_allclose(
        sol.outputs["totRotEnergy"], ref["totRotEnergy"][:n], rtol=1e-12, atol=0
    )
    np.testing.assert_allclose(
        sol.outputs["totRotAngMomPntC_N"], ref["totRotAngMomPntC_N"][:n], rtol=0, atol=1e-11
    )


def test_basilisk_reference_full(reference):
    spec, ref = reference
    rw = fx.ReactionWheels(**_ref_wheels(spec, name="rw"))
    _, sol = _ref_run(spec, (rw,), spec["time"]["duration_s"], spec["time"]["sample_interval_s"])
    _check_reference(sol, ref, ref["t"].shape[0], lambda o: o["rw"]["Omega"])


# ---------------------------------------------------------------------------------------------------
# Conservation (balanced wheels)


def _drift(series):
    x = np.asarray(series)
    return np.max(np.linalg.norm((x - x[0]).reshape(len(x), -1), axis=1)) / np.linalg.norm(x[0])


def test_balanced_momentum_and_motor_work(ref_run):
    _, sol = ref_run
    o = sol.outputs
    assert _drift(o["totRotAngMomPntC_N"]) <= H_DRIFT_TOL
    dE = np.asarray(o["totRotEnergy"]) - float(o["totRotEnergy"][0])
    W = np.sum(np.asarray(sol.ys["rw"]["motor_work"]), axis=1)
    assert np.max(np.abs(dE)) > 10.0  # the torques do real work (~100 J in 40 s)
    err = np.max(np.abs(dE - W)) / np.max(np.abs(dE))
    assert err <= WORK_REL_TOL, f"energy change vs motor work: {err:.3e}"
    np.testing.assert_array_equal(sol.ys["rw"]["friction_work"], 0.0)
    # Logged power is u_s * Omega and is the rate of the work state (same sample values).
    np.testing.assert_allclose(
        o["rw"]["power"], o["rw"]["u_s"] * o["rw"]["Omega"], rtol=1e-15, atol=0
    )


def test_balanced_torque_free(reference, ref_run):
    spec, _ = reference
    sc, _ = ref_run
    sc = eqx.tree_at(lambda s: s.state_effectors[0].motor_torque, sc, jnp.zeros(3))
    y0 = initial_state(sc, spec)
    sol = js.simulate(
        sc,
        y0,
        REF_HORIZON_S,
        dt=spec["time"]["step_s"],
        sample_dt=spec["time"]["sample_interval_s"],
    )
    o = sol.outputs
    assert _drift(o["totRotAngMomPntC_N"]) <= H_DRIFT_TOL
    assert _drift(o["totRotEnergy"]) <= E_DRIFT_TOL
    np.testing.assert_array_equal(sol.ys["rw"]["motor_work"], 0.0)


# ---------------------------------------------------------------------------------------------------
# Several instances vs one vectorized effector


def test_two_effectors_equal_one_vectorized(reference, ref_run):
    spec, _ = reference
    _, sol1 = ref_run
    kw = _ref_wheels(spec, track_work=True)
    sub = lambda sl, name: fx.ReactionWheels(
        **{k: (np.asarray(v)[sl] if k != "track_work" else v) for k, v in kw.items()}, name=name
    )
    _, sol2 = _ref_run(spec, (sub(slice(0, 1), "rwA"), sub(slice(1, 3), "rwB")), REF_HORIZON_S, 0.1)
    o1, o2 = sol1.outputs, sol2.outputs
    for key in ("r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B", "totRotEnergy"):
        scale = np.max(np.abs(np.asarray(o1[key])))
        np.testing.assert_allclose(
            o2[key], o1[key], rtol=0, atol=SPLIT_REL_TOL * scale, err_msg=key
        )
    Omega2 = np.concatenate([o2["rwA"]["Omega"], o2["rwB"]["Omega"]], axis=1)
    scale = np.max(np.abs(np.asarray(o1["rw"]["Omega"])))
    np.testing.assert_allclose(Omega2, o1["rw"]["Omega"], rtol=0, atol=SPLIT_REL_TOL * scale)


# ---------------------------------------------------------------------------------------------------
# Fully-coupled jitter with Jt != Jg


def _fc_spacecraft(coupled_form="general"):
    rw = fx.ReactionWheels(
        np.eye(3),
        0.159155,
        model="jitter_fully_coupled",
        mass=12.0,
        U_s=4.8e-2,
        U_d=1.54e-2,
        Jt=0.09,
        Jg=0.07,
        rWB_B=0.1 * np.eye(3),
        Omega=[100.0, -80.0, 60.0],
        theta=[0.1, 0.2, 0.3],
        coupled_form=coupled_form,
        name="rw",
    )
    hub = fx.Hub(750.0, np.diag([900.0, 800.0, 600.0]), [-0.0002, 0.0001, 0.1])
    return fx.Spacecraft(hub, state_effectors=(rw,))


@eqx.filter_jit
def _rk4_drifts(sc, y0, h, n):
    """Relative E_rot and |H_rot| drift after `n` RK4 steps of size `h` (both traced: one compile
    serves the whole convergence study; same `RK4.step` and step map as `simulate`)."""
    solver = js.RK4()

    def body(i, y):
        y = solver.step(sc.drift, i * h, y, h, None)
        return sc.step_map((i + 1) * h, y)[0]

    y = jax.lax.fori_loop(0, n, body, y0)
    e0, e1 = sc.energy_momentum(0.0, y0, None), sc.energy_momentum(n * h, y, None)
    dE = jnp.abs(e1["totRotEnergy"] - e0["totRotEnergy"]) / jnp.abs(e0["totRotEnergy"])
    H0, H1 = e0["totRotAngMomPntC_N"], e1["totRotAngMomPntC_N"]
    dH = jnp.linalg.norm(H1 - H0) / jnp.linalg.norm(H0)
    return dE, dH


FC_HORIZON_S = 0.5


def _fc_drifts(sc, h):
    y0 = sc.init_state(omega_BN_B=[0.08, 0.01, 0.0])
    n = int(round(FC_HORIZON_S / h))
    dE, dH = _rk4_drifts(sc, y0, jnp.asarray(h), jnp.asarray(n))
    return float(dE), float(dH)


def test_fully_coupled_general_conserves_and_converges():
    sc = _fc_spacecraft()
    dE, dH = _fc_drifts(sc, FC_STEP_S)
    assert dE <= FC_DRIFT_TOL, f"E_rot drift {dE:.3e}"
    assert dH <= FC_DRIFT_TOL, f"H_rot drift {dH:.3e}"
    coarse, fine = _fc_drifts(sc, 2e-3), _fc_drifts(sc, 1e-3)
    lo, hi = CONV_RATIO_RANGE
    for name, c, f in zip(("E", "H"), coarse, fine):
        assert lo <= c / f <= hi, f"{name} drift ratio {c / f:.2f} (4th order: 16)"


def test_fully_coupled_basilisk_form_drifts_for_unequal_transverse_inertia():
    sc = _fc_spacecraft("basilisk")
    dE1, dH1 = _fc_drifts(sc, 1e-3)
    dE2, _ = _fc_drifts(sc, 5e-4)
    assert dE1 > BASILISK_FORM_MIN_DRIFT and dH1 > BASILISK_FORM_MIN_DRIFT
    assert abs(dE1 - dE2) < 0.05 * dE1  # a modelling error, not a step-size error


def test_fully_coupled_forms_agree_for_equal_transverse_inertia():
    """For Jt == Jg the general form is Basilisk's: contributions agree to round-off."""
    kw = dict(
        model="jitter_fully_coupled", mass=12.0, U_s=4.8e-2, U_d=1.54e-2, rWB_B=0.1 * np.eye(3)
    )
    kw.update(Omega=[100.0, -80.0, 60.0], theta=[0.1, 0.2, 0.3], name="rw")
    hub = fx.Hub(750.0, np.diag([900.0, 800.0, 600.0]))
    scs = [
        fx.Spacecraft(
            hub, state_effectors=(fx.ReactionWheels(np.eye(3), 0.159155, coupled_form=f, **kw),)
        )
        for f in ("general", "basilisk")
    ]
    y0 = scs[0].init_state(omega_BN_B=[0.08, 0.01, 0.0])
    d = [eqx.filter_jit(sc.drift)(0.0, y0, None) for sc in scs]
    for a, b in zip(jax.tree_util.tree_leaves(d[0]), jax.tree_util.tree_leaves(d[1])):
        np.testing.assert_allclose(a, b, rtol=1e-15, atol=1e-18)


# ---------------------------------------------------------------------------------------------------
# Basilisk integrated-test regression truths (`test_reactionWheelStateEffector_integrated.py`):
# HR16 wheels x1e4 imbalance, commands (0.2, 0.1, -0.5) N m (the last saturates at u_max = 0.2)
# for the first half, 0 after.

MU_EARTH = 3.986004415e14  # [m^3/s^2]
R_CN_N0 = [-4020338.690396649, 7490566.741852513, 5248299.211589362]  # [m]
V_CN_N0 = [-5199.77710904224, -3436.681645356935, 1041.576797498721]  # [m/s]
TRUTHS = {
    "balanced": (
        1e-4,
        1.0,
        (-4.02553766e6, 7.48712857e6, 5.24933964e6),
        (1.99853994e-2, 2.45647716e-3, 8.45356279e-6),
    ),
    "jitter_simple": (
        1e-4,
        1.0,
        (-4.02553766e6, 7.48712857e6, 5.24933964e6),
        (1.98964221e-2, 2.24474932e-3, -5.66618270e-5),
    ),
    "jitter_fully_coupled": (
        1e-5,
        0.1,
        (-4.02085866e6, 7.49022306e6, 5.24840326e6),
        (1.98708924e-3, 2.26086385e-4, -1.60335529e-5),
    ),
}


def _truth_run(model):
    h, T, _, _ = TRUTHS[model]
    rw = fx.ReactionWheels(
        np.eye(3),
        100.0 / (6000.0 * RPM),
        model=model,
        mass=12.0,
        U_s=4.8e-2,
        U_d=1.54e-2,
        rWB_B=0.1 * np.eye(3),
        Omega=np.array([500.0, 200.0, -150.0]) * RPM,
        u_max=0.2,
        Omega_max=6000.0 * RPM,
        name="rw",
    )
    hub = fx.Hub(750.0, np.diag([900.0, 800.0, 600.0]), [-0.0002, 0.0001, 0.1])
    sc = fx.Spacecraft(
        hub, state_effectors=(rw,), gravity=(fx.PointMassGravity(MU_EARTH, name="earth"),)
    )
    y0 = sc.init_state(R_CN_N0, V_CN_N0, omega_BN_B=[0.08, 0.01, 0.0])
    # Basilisk's Python sets the command before each half: zero-order hold over [0, T/2] and [T/2, T].
    # The dynamics are time invariant, so the second half restarts at t0 = 0 (one compile for both).
    args1 = {"rw": {"motor_torque": jnp.array([0.2, 0.1, -0.5])}}
    s1 = js.simulate(sc, y0, T / 2, dt=h, args=args1)
    y1 = jax.tree_util.tree_map(lambda a: a[-1], s1.ys)
    s2 = js.simulate(sc, y1, T / 2, dt=h, args={"rw": {"motor_torque": jnp.zeros(3)}})
    return s1, s2


def _check_truth(model, s1, s2, conservative):
    _, _, r_truth, sigma_truth = TRUTHS[model]
    np.testing.assert_allclose(s2.outputs["r_BN_N"][-1], r_truth, rtol=TRUTH_REL_TOL)
    np.testing.assert_allclose(s2.outputs["sigma_BN"][-1], sigma_truth, rtol=TRUTH_REL_TOL)
    np.testing.assert_allclose(s1.outputs["rw"]["u_s"][-1], [0.2, 0.1, -0.2], rtol=0, atol=0)
    if conservative:
        o1, o2 = s1.outputs, s2.outputs
        for key in ("totOrbEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
            a, b = np.asarray(o1[key][0]), np.asarray(o2[key][-1])
            assert np.max(np.abs(b - a)) <= TRUTH_INVARIANT_TOL * np.max(np.abs(a)), key
        E = np.asarray(o2["totRotEnergy"])
        assert abs(E[-1] - E[0]) <= TRUTH_INVARIANT_TOL * abs(E[0])  # torque-free half


def test_basilisk_integrated_truth_jitter_simple():
    # The only oracle of the (non-conservative) simple-jitter model.
    s1, s2 = _truth_run("jitter_simple")
    _check_truth("jitter_simple", s1, s2, conservative=False)


def test_basilisk_integrated_truth_balanced():
    s1, s2 = _truth_run("balanced")
    _check_truth("balanced", s1, s2, conservative=True)


def test_basilisk_integrated_truth_fully_coupled():
    s1, s2 = _truth_run("jitter_fully_coupled")
    _check_truth("jitter_fully_coupled", s1, s2, conservative=True)


# ---------------------------------------------------------------------------------------------------
# R4: momentum exchange closed form

BOE_JS = 0.159155  # [kg m^2]
BOE_I1 = 2.0  # [kg m^2] hub yaw inertia without the wheel
BOE_OMEGA0 = 100.0 * RPM  # [rad/s]
BOE_W0 = 0.35  # [rad/s]
BOE_U = 0.2  # [N m]
BOE_DT = 0.1  # [s]


@pytest.fixture(scope="module")
def boe_model():
    rw = fx.ReactionWheels([0.0, 0.0, 1.0], BOE_JS, Omega=BOE_OMEGA0, name="rw")
    hub = fx.Hub(5.0, np.diag([2.0, 2.0, BOE_I1 + BOE_JS]))
    return fx.Spacecraft(hub, state_effectors=(rw,))


@pytest.fixture(scope="module")
def boe_limited():
    """`boe_model` with the command-limit group present (disabled by value): its limits are arrays
    that `eqx.tree_at` can set."""
    rw = fx.ReactionWheels(
        [0.0, 0.0, 1.0], BOE_JS, Omega=BOE_OMEGA0, Omega_max=-1.0, P_max=-1.0, name="rw"
    )
    hub = fx.Hub(5.0, np.diag([2.0, 2.0, BOE_I1 + BOE_JS]))
    return fx.Spacecraft(hub, state_effectors=(rw,))


def _two_phase(sc, u1, T1=5.0, T2=5.0):
    """Torque 0 on [0, T1], then `u1` for T2 s (second phase restarted at t0 = 0: time invariant)."""
    y0 = sc.init_state(omega_BN_B=[0.0, 0.0, BOE_W0])
    s1 = js.simulate(
        sc, y0, T1, dt=BOE_DT, sample_dt=1.0, args={"rw": {"motor_torque": jnp.zeros(1)}}
    )
    y1 = jax.tree_util.tree_map(lambda a: a[-1], s1.ys)
    args2 = {"rw": {"motor_torque": jnp.array([u1])}}
    s2 = js.simulate(sc, y1, T2, dt=BOE_DT, sample_dt=1.0, args=args2)
    return s1, s2


def test_momentum_exchange_closed_form(boe_model):
    s1, s2 = _two_phase(boe_model, BOE_U)
    t = np.concatenate([np.asarray(s1.ts), 5.0 + np.asarray(s2.ts)])
    omega3 = np.concatenate([s1.outputs["omega_BN_B"][:, 2], s2.outputs["omega_BN_B"][:, 2]])
    sigma3 = np.concatenate([s1.outputs["sigma_BN"][:, 2], s2.outputs["sigma_BN"][:, 2]])
    Omega = np.concatenate([s1.outputs["rw"]["Omega"][:, 0], s2.outputs["rw"]["Omega"][:, 0]])
    tau = np.maximum(t - 5.0, 0.0)
    omega3_boe = BOE_W0 - BOE_U / BOE_I1 * tau
    psi_boe = BOE_W0 * t - BOE_U / (2.0 * BOE_I1) * tau**2
    Omega_boe = BOE_OMEGA0 + (BOE_I1 + BOE_JS) * BOE_U / (BOE_I1 * BOE_JS) * tau
    check = np.isin(np.round(t, 9), [2.0, 4.0, 6.0, 8.0, 10.0])
    assert check.sum() == 5
    np.testing.assert_allclose(omega3[check], omega3_boe[check], rtol=BOE_REL_TOL)
    np.testing.assert_allclose(Omega[check], Omega_boe[check], rtol=BOE_REL_TOL)
    # Yaw from the (possibly switched) MRP: compare modulo 2 pi (a shadow switch adds -2 pi).
    psi = 4.0 * np.arctan(sigma3)
    dpsi = np.angle(np.exp(1j * (psi - psi_boe)))
    np.testing.assert_array_less(np.abs(dpsi[check]), BOE_REL_TOL * np.abs(psi_boe[check]))


# ---------------------------------------------------------------------------------------------------
# Gradient


def test_grad_wrt_Js_matches_central_differences(boe_model):
    # Small model (R4 hub and wheel) with an off-axis tumble so that wheel and hub couple in 3-D;
    # same horizon/sampling as `_two_phase`, so the finite differences reuse its compiled solve.
    y0 = boe_model.init_state(omega_BN_B=[0.05, -0.02, BOE_W0])
    weights = jnp.array([1.0, 2.0, 3.0])
    args = {"rw": {"motor_torque": jnp.array([BOE_U])}}

    def final_scalar(Js):
        model = eqx.tree_at(lambda s: s.state_effectors[0].Js, boe_model, Js)
        sol = js.simulate(model, y0, 5.0, dt=BOE_DT, sample_dt=1.0, args=args)
        hub = sol.ys["hub"]
        return (
            jnp.dot(weights, hub["omega_BN_B"][-1])
            + jnp.sum(hub["sigma_BN"][-1])
            + 1e-2 * sol.ys["rw"]["Omega"][-1, 0]
        )

    Js = boe_model.state_effectors[0].Js
    grad = float(jax.grad(final_scalar)(Js)[0])
    d = FD_REL_STEP * float(Js[0])
    fd = (float(final_scalar(Js + d)) - float(final_scalar(Js - d))) / (2 * d)
    assert abs(fd) > 1e-3  # a non-trivial dependence
    np.testing.assert_allclose(grad, fd, rtol=GRAD_REL_TOL, atol=0)


# ---------------------------------------------------------------------------------------------------
# R5: command limits


def test_command_limits_single_call():
    # Each column exercises one rule; expected values computed by hand from Basilisk's rules
    # (clip to u_max, deadband u_min, power limit P_max, speed limit Omega_max, in that order).
    u = np.array([0.5, -0.5, 0.005, 0.15, -0.15, 0.1, -0.1, 0.1, 0.3])
    Om = np.array([1.0, 1.0, 1.0, 10.0, 10.0, 100.0, 100.0, -100.0, 100.0])
    expected = np.array([0.2, -0.2, 0.0, 0.1, -0.1, 0.0, -0.01, 0.01, 0.0])
    rw = fx.ReactionWheels(
        np.tile([0.0, 0.0, 1.0], (9, 1)), 0.1, u_max=0.2, u_min=0.01, P_max=1.0, Omega_max=100.0
    )
    limit = eqx.filter_jit(lambda e, u, Om: e.limit_torque(u, Om))  # one compile, not op by op
    np.testing.assert_allclose(limit(rw, u, Om), expected, rtol=0, atol=LIMIT_ABS_TOL)
    # Disabled limits (None, negative, zero) leave the command untouched.
    for lim in (None, -1.0, 0.0):
        off = fx.ReactionWheels(
            np.tile([0.0, 0.0, 1.0], (9, 1)), 0.1, u_max=lim, P_max=lim, Omega_max=lim, u_min=lim
        )
        np.testing.assert_array_equal(limit(off, u, Om), u)
    # Per-wheel limits: only the second wheel is clipped.
    two = fx.ReactionWheels(np.eye(3)[:2], 0.1, u_max=[-1.0, 0.1])
    np.testing.assert_allclose(two.limit_torque(np.array([0.5, 0.5]), np.zeros(2)), [0.5, 0.1])


def test_unset_limit_and_friction_groups_are_not_computed(boe_model, boe_limited):
    rw = boe_model.state_effectors[0]
    # Unset groups hold no leaves: nothing to evaluate, nothing a sweep could silently miss.
    assert rw.u_max is None and rw.P_max is None and rw.fCoulomb is None and rw.betaStatic is None
    assert boe_limited.state_effectors[0].Omega_max is not None
    zero_friction = eqx.tree_at(
        lambda s: s.state_effectors[0],
        boe_limited,
        fx.ReactionWheels(
            [0.0, 0.0, 1.0], BOE_JS, Omega=BOE_OMEGA0, Omega_max=-1.0, fCoulomb=0.0, name="rw"
        ),
    )
    # u Omega stays below no limit, friction coefficients are zero: the three models agree.
    _, ref = _two_phase(boe_model, BOE_U)
    for other in (boe_limited, zero_friction):
        _, s2 = _two_phase(other, BOE_U)
        for key in ("Omega", "u_s"):
            np.testing.assert_allclose(
                s2.outputs["rw"][key], ref.outputs["rw"][key], rtol=UNSET_GROUP_REL_TOL, atol=0
            )
        np.testing.assert_allclose(
            s2.ys["hub"]["omega_BN_B"], ref.ys["hub"]["omega_BN_B"], rtol=UNSET_GROUP_REL_TOL
        )
    # A friction coefficient set at construction is a leaf: replacing it changes the run.
    damped = eqx.tree_at(lambda s: s.state_effectors[0].cViscous, zero_friction, jnp.array([1e-3]))
    _, s3 = _two_phase(damped, BOE_U)
    assert float(s3.outputs["rw"]["Omega"][-1, 0]) < float(ref.outputs["rw"]["Omega"][-1, 0])


def test_speed_limit_stops_the_wheel(boe_limited):
    Omega_max = 12.0  # [rad/s] reached ~0.7 s after the torque starts
    sc = eqx.tree_at(lambda s: s.state_effectors[0].Omega_max, boe_limited, jnp.array([Omega_max]))
    s1, s2 = _two_phase(sc, BOE_U)
    Omega = np.asarray(s2.outputs["rw"]["Omega"][:, 0])
    Omega_dot = (BOE_I1 + BOE_JS) * BOE_U / (BOE_I1 * BOE_JS)
    # The torque is zeroed at the first stage with Omega >= Omega_max: overshoot below one step's gain.
    assert Omega_max <= Omega[-1] <= Omega_max + BOE_DT * Omega_dot
    assert np.all(np.diff(Omega[2:]) == 0.0)  # held after the limit
    np.testing.assert_array_equal(s2.outputs["rw"]["u_s"][2:], 0.0)
    np.testing.assert_array_equal(s2.outputs["rw"]["u_cmd"][2:], BOE_U)
    # Momentum is still exchanged exactly: H_rot conserved.
    H = np.asarray(s2.outputs["totRotAngMomPntC_N"])
    assert np.max(np.abs(H - H[0])) <= H_DRIFT_TOL * np.linalg.norm(H[0])


def test_power_limit_in_simulation(boe_limited):
    P_max = 0.5  # [W] binds at once: u Omega = 2.1 W
    sc = eqx.tree_at(lambda s: s.state_effectors[0].P_max, boe_limited, jnp.array([P_max]))
    _, s2 = _two_phase(sc, BOE_U)
    o = s2.outputs["rw"]
    np.testing.assert_allclose(np.abs(o["power"][:, 0]), P_max, rtol=1e-14)
    # Constant power: Js Omega dOmega/dt (1 + Js/I1) = P  =>  Omega^2 grows linearly in time.
    Om2 = np.asarray(o["Omega"][:, 0]) ** 2
    rate = 2 * P_max * (BOE_I1 + BOE_JS) / (BOE_I1 * BOE_JS)
    np.testing.assert_allclose(np.diff(Om2), rate * 1.0, rtol=1e-8)


# ---------------------------------------------------------------------------------------------------
# Signals and args


def test_command_sources():
    sig = js.PiecewiseConstant([1.0], [[0.1, 0.2], [0.3, 0.4]])
    rw = fx.ReactionWheels(np.eye(3)[:2], 0.1, motor_torque=sig, name="w")
    np.testing.assert_allclose(rw.command(0.5, None), [0.1, 0.2])
    np.testing.assert_allclose(rw.command(1.0, None), [0.1, 0.2])  # left limit
    np.testing.assert_allclose(rw.command(1.5, None), [0.3, 0.4])
    args = {"w": {"motor_torque": jnp.array([1.0, -1.0])}, "other": {"motor_torque": 5.0}}
    np.testing.assert_allclose(rw.command(1.5, args), [1.3, -0.6])
    assert rw.breakpoints() == (1.0,)
    fn = fx.ReactionWheels(np.eye(3)[:2], 0.1, motor_torque=lambda t: 0.01 * t)
    np.testing.assert_allclose(fn.command(2.0, None), [0.02, 0.02])
    const = fx.ReactionWheels(np.eye(3)[:2], 0.1, motor_torque=[0.5, 0.6])
    np.testing.assert_allclose(const.command(3.0, {"reaction_wheels": {}}), [0.5, 0.6])


# ---------------------------------------------------------------------------------------------------
# R6: friction


FRIC = dict(fCoulomb=0.03, fStatic=0.06, betaStatic=0.15, cViscous=0.001, omegaLimitCycle=0.001)
FRIC_JS = 0.159155  # [kg m^2] (limit-cycle slope 30/Js = 189 1/s: RK4 at h = 0.01 s is stable)
FRIC_DT = 0.01  # [s]
FRIC_T = 100.0  # [s]


def _friction_np(Om, mode, p=FRIC):
    """Independent numpy evaluation of Basilisk's wheel friction (Coulomb/viscous or Stribeck, with
    limit-cycle smoothing)."""
    tc, ts, b, cv, wlc = (
        p[k] for k in ("fCoulomb", "fStatic", "betaStatic", "cViscous", "omegaLimitCycle")
    )

    def f(w):
        x = w / (np.sqrt(2.0) * b)
        fs = (
            np.sqrt(2.0 * np.e) * (ts - tc) * x * np.exp(-(x**2))
            + tc * np.tanh(10.0 * w / b)
            + cv * w
        )
        fc = tc * np.sign(w) + cv * w
        return np.where(mode > 0.5, fs, fc)

    return -np.where(np.abs(Om) < wlc, f(wlc) / wlc * Om, f(Om))


def _wheel_ode_np(Om0, u, n_steps, p=FRIC):
    """Scalar wheel ODE Js dOmega/dt = u + tau_f (hub at rest), RK4 + the once-per-step mode map."""
    Om = float(Om0)
    mode = float(abs(Om) < 0.1 * p["omegaLimitCycle"])
    out = [Om]
    rhs = lambda w: (u + float(_friction_np(np.array(w), np.array(mode)))) / FRIC_JS
    h = FRIC_DT
    for _ in range(n_steps):
        k1 = rhs(Om)
        k2 = rhs(Om + 0.5 * h * k1)
        k3 = rhs(Om + 0.5 * h * k2)
        k4 = rhs(Om + h * k3)
        new = Om + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        near = abs(new) < 0.1 * p["omegaLimitCycle"]
        not_back = abs(np.sign(new) - np.sign(new - Om)) <= 1.0
        mode = float((near or mode > 0.5) and not_back)
        Om = new
        out.append(Om)
    return np.array(out)


@pytest.fixture(scope="module")
def friction_model():
    g = np.ones(3) / np.sqrt(3.0)
    r = np.array([0.5, -0.5, 0.5])
    rw = fx.ReactionWheels(np.stack([g, g]), FRIC_JS, rWB_B=np.stack([r, -r]), name="rw", **FRIC)
    hub = fx.Hub(5.0, np.diag([2.0, 2.0, 2.0 + FRIC_JS]))
    return fx.Spacecraft(hub, state_effectors=(rw,))


@pytest.mark.parametrize(
    "Omega0, u",
    [((15.0, -15.0), (0.0, 0.0)), ((0.0, 0.0), (0.1, -0.1))],
    ids=["spin_down", "spin_up"],
)
def test_friction_formula_and_symmetric_hub_at_rest(friction_model, Omega0, u):
    sc = friction_model
    rw = sc.state_effectors[0]
    y0 = sc.init_state(effector_states={"rw": rw.init_state(Omega=jnp.array(Omega0))})
    sol = js.simulate(
        sc, y0, FRIC_T, dt=FRIC_DT, sample_dt=1.0, args={"rw": {"motor_torque": jnp.array(u)}}
    )
    o = sol.outputs
    np.testing.assert_array_less(np.abs(o["omega_BN_B"]), HUB_REST_ABS_TOL)
    np.testing.assert_array_less(np.abs(o["sigma_BN"]), HUB_REST_ABS_TOL)
    Om, mode = np.asarray(o["rw"]["Omega"]), np.asarray(o["rw"]["stribeck"])
    np.testing.assert_allclose(
        o["rw"]["friction_torque"], _friction_np(Om, mode), rtol=FRICTION_TOL, atol=1e-300
    )
    # Antisymmetric pair: equal and opposite speeds (up to the same round-off).
    np.testing.assert_allclose(Om[:, 0], -Om[:, 1], rtol=0, atol=HUB_REST_ABS_TOL)
    # The decoupled wheel follows the independent scalar ODE (same RK4 and mode rule).
    ref = _wheel_ode_np(Omega0[0], u[0], int(FRIC_T / FRIC_DT))[:: int(1.0 / FRIC_DT)]
    np.testing.assert_allclose(Om[:, 0], ref, rtol=WHEEL_ODE_REL_TOL, atol=1e-12)
    if u[0] == 0.0:
        # Coulomb mode while moving (at exact rest the entry rule may switch it on: no effect).
        moving = np.abs(Om[:, 0]) >= 0.1 * FRIC["omegaLimitCycle"]
        assert np.all(mode[moving] == 0.0) and abs(Om[-1, 0]) < FRIC["omegaLimitCycle"]  # stopped
    else:
        assert np.all(mode == 1.0) and Om[-1, 0] > 10.0  # broke away in Stribeck mode


def test_friction_pieces():
    rw = fx.ReactionWheels([0.0, 0.0, 1.0], 0.1, **FRIC)
    fric = eqx.filter_jit(lambda e, w, m: e.friction_torque(w, m))  # one compile, not op by op
    wlc = FRIC["omegaLimitCycle"]
    # Continuity at the limit-cycle boundary, both modes.
    for mode in (0.0, 1.0):
        inside = fric(rw, jnp.array([wlc * (1 - 1e-12)]), jnp.array([mode]))
        outside = fric(rw, jnp.array([wlc * (1 + 1e-12)]), jnp.array([mode]))
        np.testing.assert_allclose(inside, outside, rtol=1e-9)
    # Stribeck bump peaks at betaStatic with height fStatic - fCoulomb (+ tanh and viscous parts).
    w = jnp.linspace(0.01, 1.0, 2001)
    f = -fric(rw, w, jnp.ones_like(w))
    assert abs(float(w[jnp.argmax(f)]) - FRIC["betaStatic"]) < 0.02
    # Zero friction by default.
    plain = fx.ReactionWheels([0.0, 0.0, 1.0], 0.1)
    np.testing.assert_array_equal(plain.friction_torque(jnp.array([-3.0, 0.0, 2.0])), 0.0)
    assert not plain.stribeck and "stribeck" not in plain.init_state()
    # Gradient at rest: the sign model has zero slope, the smooth tanh model -fCoulomb / width.
    sgn = fx.ReactionWheels([0.0, 0.0, 1.0], 0.1, fCoulomb=0.03, omegaLimitCycle=0.0)
    smooth = fx.ReactionWheels(
        [0.0, 0.0, 1.0], 0.1, fCoulomb=0.03, omegaLimitCycle=0.0, coulomb_width=0.01
    )
    slope = lambda e: float(jax.grad(lambda x: e.friction_torque(x[None])[0])(0.0))
    assert slope(sgn) == 0.0
    np.testing.assert_allclose(slope(smooth), -0.03 / 0.01, rtol=1e-14)
    np.testing.assert_allclose(
        smooth.friction_torque(jnp.array([1.0])), -0.03 * np.tanh(100.0), rtol=1e-14
    )


# ---------------------------------------------------------------------------------------------------
# States, outputs, structure


def test_states_and_step_map():
    rw = fx.ReactionWheels(np.eye(3), 0.1, model="jitter_simple", Omega=[1.0, 2.0, 3.0], theta=0.5)
    x = rw.init_state()
    assert set(x) == {"Omega", "theta"}
    np.testing.assert_array_equal(x["theta"], 0.5)
    np.testing.assert_array_equal(rw.init_state(Omega=[4.0, 5.0, 6.0])["Omega"], [4.0, 5.0, 6.0])
    y, counts = rw.step_map(0.0, x)
    assert y is x and counts == {}
    # Default transverse axes (Basilisk factory) form right-handed triads.
    g, w2, w3 = rw.gsHat_B, rw.w2Hat0_B, rw.w3Hat0_B
    np.testing.assert_allclose(np.cross(g, w2), w3, atol=1e-15)
    np.testing.assert_allclose(w2, [[0, 0, 1], [0, 0, -1], [0, 1, 0]], atol=1e-15)
    # Stribeck mode map: enters at rest, stays while speeding up, leaves when moving back.
    s = fx.ReactionWheels(np.eye(3)[:2], 0.1, **FRIC)
    x = s.init_state(Omega=[0.0, 1.0])
    np.testing.assert_array_equal(x["stribeck"], [1.0, 0.0])
    x1, _ = s.step_map(0.0, dict(x, Omega=jnp.array([0.01, 0.5])))
    np.testing.assert_array_equal(x1["stribeck"], [1.0, 0.0])
    x2, _ = s.step_map(0.0, dict(x1, Omega=jnp.array([0.005, 0.4])))
    np.testing.assert_array_equal(x2["stribeck"], [0.0, 0.0])
    np.testing.assert_array_equal(x2["Omega_prev"], [0.005, 0.4])


def test_fully_coupled_mass_properties_and_outputs():
    rw = fx.ReactionWheels(
        [0.0, 0.0, 1.0],
        0.2,
        model="jitter_fully_coupled",
        mass=2.0,
        U_s=0.02,
        U_d=0.0,
        Jt=0.1,
        Jg=0.1,
        rWB_B=[0.0, 0.0, 0.3],
        Omega=10.0,
        theta=0.0,
    )
    x = rw.init_state()
    mp = rw.mass_props(x)
    d = 0.02 / 2.0
    w2 = np.asarray(rw.w2Hat0_B[0])
    np.testing.assert_allclose(mp.mass, 2.0)
    np.testing.assert_allclose(
        mp.first_moment, 2.0 * (np.array([0.0, 0.0, 0.3]) + d * w2), atol=1e-15
    )
    # Inertia about B = rotor inertia about Wc + parallel-axis term.
    r = np.array([0.0, 0.0, 0.3]) + d * w2
    I_expected = np.diag([0.1, 0.1, 0.2]) + 2.0 * (r @ r * np.eye(3) - np.outer(r, r))
    np.testing.assert_allclose(mp.inertia_B, I_expected, atol=1e-15)
    # Body-frame rate of the CoM: d Omega w3.
    np.testing.assert_allclose(
        mp.first_moment_prime, 2.0 * d * 10.0 * np.asarray(rw.w3Hat0_B[0]), atol=1e-15
    )


# ---------------------------------------------------------------------------------------------------
# Validation

G3 = np.eye(3)
FC = dict(model="jitter_fully_coupled", mass=1.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(gsHat_B=[[1.0, 1.0, 0.0]]), "gsHat_B"),
        (dict(gsHat_B=[[1.0, 0.0]]), "gsHat_B"),
        (dict(gsHat_B=[[np.nan, 0.0, 0.0]]), "gsHat_B"),
        (dict(Js=0.0), "Js"),
        (dict(Js=[0.1, 0.1]), "Js"),
        (dict(Js=np.inf), "Js"),
        (dict(Jt=-0.1, **FC), "Jt"),
        (dict(Jg=0.0, **FC), "Jg"),
        (dict(model="jitter_fully_coupled"), "mass"),
        (dict(mass=-1.0, model="jitter_fully_coupled"), "mass"),
        (dict(mass=[1.0, 1.0], **{"model": "jitter_fully_coupled"}), "mass"),
        (dict(U_d=1.0, **FC), "U_d"),
        (dict(U_s=np.nan, **FC), "U_s"),
        (
            dict(w2Hat0_B=[[1, 0, 0], [1, 0, 0], [1, 0, 0]], w3Hat0_B=G3, model="jitter_simple"),
            "w2Hat0_B",
        ),
        (
            dict(
                w2Hat0_B=[[0, 1, 0], [0, 0, 1], [1, 0, 0]],
                w3Hat0_B=-np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0]]),
                model="jitter_simple",
            ),
            "w3Hat0_B",
        ),
        (dict(w2Hat0_B=[[0, 1, 0], [0, 0, 1], [1, 0, 0]], model="jitter_simple"), "w3Hat0_B"),
        (
            dict(
                w2Hat0_B=[[0, 2, 0], [0, 0, 1], [1, 0, 0]],
                w3Hat0_B=[[0, 0, 1], [1, 0, 0], [0, 1, 0]],
            ),
            "w2Hat0_B",
        ),
        (dict(rWB_B=[0.0, 0.0, 0.1]), "rWB_B"),
        (dict(rWB_B=np.full((3, 3), np.inf)), "rWB_B"),
        (dict(Omega=[1.0, np.nan, 0.0]), "Omega"),
        (dict(theta=0.3), "theta"),
        (dict(theta=[0.0, 0.0], model="jitter_simple"), "theta"),
        (dict(motor_torque=[0.1, 0.2]), "motor_torque"),
        (dict(motor_torque=lambda t: jnp.zeros(2)), "motor_torque"),
        (dict(motor_torque=lambda t: undefined_name), "motor_torque"),  # noqa: F821
        (dict(u_max=np.nan), "u_max"),
        (dict(u_max=0.1, u_min=0.2), "u_min"),
        (dict(P_max=[1.0, 1.0]), "P_max"),
        (dict(Omega_max=np.inf), "Omega_max"),
        (dict(fCoulomb=-0.1), "fCoulomb"),
        (dict(fStatic=-0.1), "fStatic"),
        (dict(cViscous=-1e-3), "cViscous"),
        (dict(betaStatic=np.nan), "betaStatic"),
        (dict(omegaLimitCycle=-1e-4), "omegaLimitCycle"),
        (dict(coulomb_width=-0.01), "coulomb_width"),
        (dict(model="gyro"), "model"),
        (dict(coupled_form="exact"), "coupled_form"),
        (dict(name=""), "name"),
    ],
)
def test_validation(kwargs, match):
    kw = dict(gsHat_B=G3, Js=0.1)
    kw.update(kwargs)
    with pytest.raises(ValueError, match=match):
        fx.ReactionWheels(**kw)


def test_validation_states_and_names():
    rw = fx.ReactionWheels(G3, 0.1, name="rw")
    with pytest.raises(ValueError, match="theta"):
        rw.init_state(theta=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="Omega"):
        rw.init_state(Omega=[1.0, 2.0])
    with pytest.raises(ValueError, match="unique"):
        fx.Spacecraft(
            fx.Hub(1.0, np.eye(3)), state_effectors=(rw, fx.ReactionWheels(G3, 0.1, name="rw"))
        )
