"""SpinningBodies (one-DOF): reproduction of Basilisk's hinged panels as a special case, conservation,
energy balance with dampers, closed forms on a heavy hub, locked axes, vectorization, the final-state
gradient, validation, Basilisk's spinning bodies. (jit, vmap, the drift's gradients w.r.t. k, c and
mass, mass-property rates, refused states and commands, units: the generic suite,
`tests/effectors/test_generic.py`.)"""

import equinox as eqx
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
    assert_split_equal,
    drift,
    jit_drift,
    random_hub_state,
    tracked_run,
    vec_drift,
)
from tests.helpers import hub_from_spec, load_reference, simulate_spec


# A hinged panel is the spinning body with sHat = sHat2, r_ScS = -d sHat1 and diagonal inertia
# (Vaz Carneiro, Allard & Schaub 2023): the spinner reproduces Basilisk's panel run at round-off.
REL_TOL_RV = 1e-9
ABS_TOL_ANGLES = 1e-9
# Conservation over 10 s at h = 2.5 ms (axis frequencies <= 1.4 rad/s, hub spin 0.17 rad/s).
REL_TOL_CONSERVED = 1e-12
# Energy balance with dampers (W integrated in the same RK4 state), relative to W(T).
REL_TOL_DISSIPATION = 1e-9
# Heavy hub (1e12 kg, 1e12 kg m^2): axis decoupled up to ~1e-10, RK4 phase error ~1e-15 per step.
REL_TOL_ANALYTIC = 1e-8
# Same physics through a different summation order / a different but equivalent formula.
TOL_ROUNDOFF = 1e-13
# Two one-body effectors vs one two-body effector: only the summation order differs.
TOL_VECTORIZED = 1e-14
# Central differences with relative step 1e-4: truncation ~1e-8, round-off ~1e-12.
REL_TOL_GRAD = 1e-6
FD_REL_STEP = 1e-4

DEG = np.pi / 180.0

# Spinner 1: the body of Basilisk's `test_spinningBodyOneDOFStateEffector.py`; spinner 2: another axis.
SPINNERS = dict(
    mass=np.array([50.0, 20.0]),
    ISPntSc_S=np.array(
        [np.diag([50.0, 30.0, 40.0]), [[5.0, 0.5, 0.0], [0.5, 8.0, -0.3], [0.0, -0.3, 6.0]]]
    ),
    dcm_S0B=np.array([[[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]], np.eye(3)]),
    sHat_S=np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0]]),
    r_SB_B=np.array([[0.5, -1.5, -0.5], [0.0, 1.0, 0.5]]),
    r_ScS_S=np.array([[1.0, 0.0, -1.0], [0.0, 0.3, 0.2]]),
)


def spinners(**overrides):
    kw = dict(
        k=np.array([100.0, 40.0]),
        theta0=np.array([5.0, -10.0]) * DEG,
        thetaDot0=np.array([-1.0, 2.0]) * DEG,
        name="spinners",
    )
    kw.update(overrides)
    args = {key: kw.pop(key) if key in kw else value for key, value in SPINNERS.items()}
    return fx.SpinningBodies(**args, **kw)


def axis_inertia(i):
    """sHat^T [I_S] sHat about the joint, by the parallel-axis theorem in S components."""
    s = SPINNERS["sHat_S"][i]
    r = SPINNERS["r_ScS_S"][i]
    m = SPINNERS["mass"][i]
    r_perp = r - (r @ s) * s
    return s @ SPINNERS["ISPntSc_S"][i] @ s + m * r_perp @ r_perp


# --------------------------------------------------------------------------------------------------
# Basilisk's hinged panels, modelled as spinning bodies


def spinner_panels(spec, **kw):
    """The hinged panels of `spec` as spinning bodies: sHat = sHat2 (the hinge axis), the CoM at
    r_ScS = -d sHat1 from the hinge (`kw`: the other arguments)."""
    P = spec["effectors"][0]["panels"]
    g = lambda key: np.array([p[key] for p in P])
    d = g("d_m")
    return fx.SpinningBodies(g("mass_kg"), g("IPntS_S_kgm2"), g("dcm_HB"), [0.0, 1.0, 0.0],
                             r_SB_B=g("r_HB_B_m"), r_ScS_S=np.stack([-d, 0 * d, 0 * d], axis=-1),
                             k=g("k_Nm_per_rad"), name="panels", **kw)  # fmt: skip


def test_reproduces_basilisk_hinged_panels():
    spec, ref = load_reference("hinged_panels_undamped")
    P = spec["effectors"][0]["panels"]
    body = spinner_panels(
        spec,
        theta0=[p["theta0_rad"] for p in P],
        thetaDot0=[p["thetaDot0_radps"] for p in P],
    )
    sc = fx.Spacecraft(hub_from_spec(spec), state_effectors=(body,))
    sol = simulate_spec(sc, spec)
    panels = {
        ("panels", key): np.stack([ref[f"panel{i + 1}_{key}"] for i in range(2)], axis=-1)
        for key in ["theta", "thetaDot"]
    }
    assert_basilisk_run(sol, ref, panels, REL_TOL_RV, ABS_TOL_ANGLES)


# --------------------------------------------------------------------------------------------------
# One compiled scenario (2 spinners + point-mass gravity + dissipated-work state), many parameter sets


DT = 0.0025  # [s]
T_END = 10.0  # [s]
SAMPLE_DT = 0.5  # [s]


def tracked_scenario(
    *,
    c=(0.0, 0.0),
    k=(100.0, 40.0),
    theta0=(5.0 * DEG, -10.0 * DEG),
    thetaDot0=(-1.0 * DEG, 2.0 * DEG),
    thetaRef=(0.0, 0.0),
    motor_torque=(0.0, 0.0),
    **hub,
):
    """`SPINNERS` (`k` a traced leaf) on `tracked_run`'s hub and orbit."""
    body = spinners(
        c=np.asarray(c),
        theta0=theta0,
        thetaDot0=thetaDot0,
        thetaRef=thetaRef,
        motor_torque=motor_torque,
    )
    body = eqx.tree_at(lambda b: b.k, body, jnp.asarray(k, dtype=float))
    return body, tracked_run(body, dt=DT, t_end=T_END, sample_dt=SAMPLE_DT, **hub)


@pytest.mark.parametrize(
    "mu, thetaRef",
    [(0.0, (0.0, 0.0)), (MU_EARTH, (0.0, 0.0)), (MU_EARTH, (20.0 * DEG, -5.0 * DEG))],
    ids=["free_space", "orbit", "orbit_thetaRef"],
)
def test_conservation_undamped(mu, thetaRef):
    _, sol = tracked_scenario(mu=mu, thetaRef=thetaRef)
    out = sol.outputs
    assert_conserved(out, REL_TOL_CONSERVED)
    assert np.ptp(np.asarray(out["spinners"]["theta"]), axis=0).min() > 0.05


def test_motor_torque_conserves_momentum_not_energy():
    """A motor torque is internal: angular momenta are conserved, rotational energy is not."""
    _, sol = tracked_scenario(motor_torque=(1.0, -0.5))
    out = sol.outputs
    assert vec_drift(out["totRotAngMomPntC_N"]) <= REL_TOL_CONSERVED
    assert drift(out["totOrbEnergy"]) <= REL_TOL_CONSERVED
    assert drift(out["totRotEnergy"]) > 1e-3


@pytest.mark.parametrize("mu", [0.0, MU_EARTH], ids=["free_space", "orbit"])
def test_damped_energy_balance(mu):
    _, sol = tracked_scenario(mu=mu, c=(50.0, 10.0), thetaRef=(20.0 * DEG, 0.0))
    assert_damped_energy_balance(sol.outputs, 0.05, REL_TOL_DISSIPATION, REL_TOL_CONSERVED)


HEAVY = HEAVY_HUB


def test_axis_frequency_heavy_hub():
    """theta(t) = theta0 cos(w t) + thetaDot0 sin(w t) / w with w = sqrt(k / sHat^T [I_S] sHat)."""
    k = np.array([100.0, 40.0])
    theta0, thetaDot0 = np.array([0.05, -0.03]), np.array([0.0, 0.02])
    _, sol = tracked_scenario(k=k, theta0=theta0, thetaDot0=thetaDot0, **HEAVY)
    wn = np.sqrt(k / np.array([axis_inertia(0), axis_inertia(1)]))
    t = np.asarray(sol.ts)[:, None]
    expected = theta0 * np.cos(wn * t) + thetaDot0 / wn * np.sin(wn * t)
    amp = np.sqrt(theta0**2 + (thetaDot0 / wn) ** 2)
    err = np.abs(np.asarray(sol.outputs["spinners"]["theta"]) - expected).max(axis=0)
    assert np.all(err <= REL_TOL_ANALYTIC * amp), err / amp


def test_free_axis_motor_torque_heavy_hub():
    u = np.array([0.5, -0.2])
    _, sol = tracked_scenario(
        k=(0.0, 0.0), motor_torque=u, theta0=(0.0, 0.0), thetaDot0=(0.0, 0.0), **HEAVY
    )
    J = np.array([axis_inertia(0), axis_inertia(1)])
    t = np.asarray(sol.ts)[:, None]
    expected = u * t**2 / (2 * J)
    err = np.abs(np.asarray(sol.outputs["spinners"]["theta"]) - expected).max()
    assert err <= REL_TOL_ANALYTIC * np.abs(expected).max()


# --------------------------------------------------------------------------------------------------
# Locked axes: rigid mass


def _merged_hub(hub, body, theta):
    """Hub + rigidly attached bodies at angles `theta`, from the parallel-axis theorem (numpy)."""
    m_tot = float(hub.mass)
    first = float(hub.mass) * np.asarray(hub.r_BcB_B)
    parts = []
    for i in range(len(theta)):
        e = SPINNERS["sHat_S"][i]
        th = theta[i]
        E = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
        dcm_SS0 = np.cos(th) * np.eye(3) + (1 - np.cos(th)) * np.outer(e, e) - np.sin(th) * E
        dcm_BS = (dcm_SS0 @ SPINNERS["dcm_S0B"][i]).T
        r = SPINNERS["r_SB_B"][i] + dcm_BS @ SPINNERS["r_ScS_S"][i]
        m = SPINNERS["mass"][i]
        parts.append((m, r, dcm_BS @ SPINNERS["ISPntSc_S"][i] @ dcm_BS.T))
        m_tot += m
        first = first + m * r
    c = first / m_tot
    skew2 = lambda v: v @ v * np.eye(3) - np.outer(v, v)
    I_C = np.asarray(hub.IHubPntBc_B) + float(hub.mass) * skew2(np.asarray(hub.r_BcB_B) - c)
    for m, r, I in parts:
        I_C = I_C + I + m * skew2(r - c)
    return fx.Hub(m_tot, I_C, c)


def test_locked_bodies_act_as_rigid_mass():
    spec, _ = load_reference("hinged_panels_undamped")
    hub = hub_from_spec(spec)
    rng = np.random.default_rng(7)
    body = spinners(locked=True, c=np.array([5.0, 2.0]), motor_torque=np.array([1.0, 2.0]))
    sc = fx.Spacecraft(hub, state_effectors=(body,))
    for _ in range(2):
        theta = rng.normal(0, 0.5, 2)
        state = random_hub_state(rng)
        # The stored rate of a locked body is ignored.
        y = sc.init_state(
            **state,
            effector_states={"spinners": {"theta": theta, "thetaDot": np.array([3.0, -1.0])}},
        )
        rigid = fx.Spacecraft(_merged_hub(hub, body, theta))
        y_rigid = rigid.init_state(**state)
        d, d_rigid = jit_drift(sc, 0.0, y), jit_drift(rigid, 0.0, y_rigid)
        for key in d["hub"]:
            np.testing.assert_allclose(
                d["hub"][key], d_rigid["hub"][key], rtol=0, atol=TOL_ROUNDOFF * 10, err_msg=key
            )
        np.testing.assert_array_equal(d["spinners"]["theta"], 0.0)
        np.testing.assert_array_equal(d["spinners"]["thetaDot"], 0.0)
        em = sc.energy_momentum(0.0, y, None)
        em_rigid = rigid.energy_momentum(0.0, y_rigid, None)
        # Locked: the spring energy 0.5 k theta^2 is a constant offset.
        E_spring = 0.5 * float(body.k @ theta**2)
        np.testing.assert_allclose(
            float(em["totRotEnergy"]) - E_spring, float(em_rigid["totRotEnergy"]), rtol=TOL_ROUNDOFF
        )
        np.testing.assert_allclose(
            em["totRotAngMomPntC_N"], em_rigid["totRotAngMomPntC_N"], rtol=TOL_ROUNDOFF, atol=1e-13
        )


def test_partially_locked():
    """Locking one body leaves the other free: its derivative is that of a spacecraft whose hub
    carries the locked body rigidly."""
    spec, _ = load_reference("hinged_panels_undamped")
    hub = hub_from_spec(spec)
    theta = np.array([0.3, -0.2])
    thetaDot = np.array([0.1, 0.05])
    state = dict(omega_BN_B=[0.05, -0.1, 0.08], sigma_BN=[0.1, 0.2, -0.1])
    both = spinners(locked=(True, False))
    sc = fx.Spacecraft(hub, state_effectors=(both,))
    d = jit_drift(
        sc,
        0.0,
        sc.init_state(
            **state, effector_states={"spinners": {"theta": theta, "thetaDot": thetaDot}}
        ),
    )
    # Reference: body 0 merged into the hub, body 1 a free one-body effector.
    merged = _merged_hub(hub, both, np.array([theta[0]]))
    free = fx.SpinningBodies(
        **{key: value[1] for key, value in SPINNERS.items()}, k=40.0, name="spinners"
    )
    sc_ref = fx.Spacecraft(merged, state_effectors=(free,))
    # Same composite CoM and attitude rates: give the same CoM state.
    y_ref = sc_ref.init_state(
        **state, effector_states={"spinners": {"theta": theta[1:], "thetaDot": thetaDot[1:]}}
    )
    d_ref = jit_drift(sc_ref, 0.0, y_ref)
    np.testing.assert_allclose(
        d["hub"]["omega_BN_B"], d_ref["hub"]["omega_BN_B"], rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(
        d["spinners"]["thetaDot"][1], d_ref["spinners"]["thetaDot"][0], rtol=1e-12
    )
    assert float(d["spinners"]["thetaDot"][0]) == 0.0 and float(d["spinners"]["theta"][0]) == 0.0


# --------------------------------------------------------------------------------------------------
# Vectorization, gradients


def test_two_effectors_equal_one_vectorized():
    spec, _ = load_reference("hinged_panels_undamped")
    hub = hub_from_spec(spec)
    both = spinners(c=np.array([3.0, 7.0]), motor_torque=np.array([0.1, -0.2]))
    split = tuple(
        fx.SpinningBodies(
            **{key: value[i] for key, value in SPINNERS.items()},
            k=both.k[i],
            c=both.c[i],
            motor_torque=both.motor_torque[i],
            name=f"b{i}",
        )
        for i in range(2)
    )
    sc1 = fx.Spacecraft(hub, state_effectors=(both,))
    sc2 = fx.Spacecraft(hub, state_effectors=split)
    rng = np.random.default_rng(5)
    for _ in range(3):
        theta, thetaDot = rng.normal(0, 0.5, 2), rng.normal(0, 0.2, 2)
        state = random_hub_state(rng)
        y1 = sc1.init_state(
            **state, effector_states={"spinners": {"theta": theta, "thetaDot": thetaDot}}
        )
        y2 = sc2.init_state(
            **state,
            effector_states={
                f"b{i}": {"theta": theta[i : i + 1], "thetaDot": thetaDot[i : i + 1]}
                for i in range(2)
            },
        )
        d = jit_drift(sc1, 0.0, y1), jit_drift(sc2, 0.0, y2)
        assert_split_equal(d, ["b0", "b1"], "spinners", ["theta", "thetaDot"], TOL_VECTORIZED)


@pytest.mark.slow
def test_gradients_match_finite_differences():
    """jax.grad of a final-state scalar w.r.t. k, c and mass vs central differences."""
    body0, _ = tracked_scenario(c=(5.0, 2.0))

    def final_scalar(params):
        body = eqx.tree_at(lambda p: (p.k, p.c, p.mass), body0, params)
        ys = tracked_run(body, dt=DT, t_end=T_END, sample_dt=SAMPLE_DT).ys["sc"]
        return (
            ys["spinners"]["theta"][-1, 0]
            - 0.7 * ys["spinners"]["thetaDot"][-1, 1]
            + 3.0 * ys["hub"]["omega_BN_B"][-1, 1]
        )

    p0 = (body0.k, body0.c, body0.mass)
    assert_grad_matches_fd(final_scalar, p0, FD_REL_STEP, REL_TOL_GRAD, ("k", "c", "mass"))


# --------------------------------------------------------------------------------------------------
# Validation


@pytest.mark.parametrize(
    "arg, value",
    [
        ("mass", [50.0, -1.0]),
        ("mass", [50.0, np.nan]),
        ("ISPntSc_S", np.diag([1.0, 1.0, 0.0])),
        ("ISPntSc_S", np.array([[1.0, 0.2, 0], [0.0, 1.0, 0], [0, 0, 1.0]])),
        ("dcm_S0B", np.diag([1.0, -1.0, 1.0])),
        ("dcm_S0B", np.ones((2, 3))),
        ("sHat_S", [0.0, 2.0, 0.0]),
        ("sHat_S", np.zeros((3, 3))),
        ("r_SB_B", [0.0, 1.0]),
        ("r_ScS_S", [np.inf, 0.0, 0.0]),
        ("k", -1.0),
        ("c", [-1.0, 1.0]),
        ("theta0", [0.0, 0.0, 0.0]),
        ("locked", (True,)),
        ("locked", "yes"),
        ("motor_torque", np.zeros(3)),
    ],
)
def test_validation_errors(arg, value):
    with pytest.raises(ValueError, match=arg):
        spinners(**{arg: value})


def test_zero_mass_is_a_pure_inertia():
    """mass = 0 is allowed (a balanced rotor): no mass, its inertia only."""
    body = spinners(mass=np.array([0.0, 20.0]))
    mp = body.mass_props(body.init_state())
    assert float(mp.mass) == 20.0


# --------------------------------------------------------------------------------------------------
# Basilisk spinningBodyOneDOFStateEffector (tests/data/spinning_bodies, generated by
# benchmarks/make_branching_references.py): two bodies with full inertia, CoM off the axis, spring,
# damper, motor torque and reference angle, on an orbit.


def spinners_from_reference(spec, **kw):
    S = spec["spinners"]
    return fx.SpinningBodies(
        S["mass_kg"],
        S["ISPntSc_S_kgm2"],
        S["dcm_S0B"],
        S["sHat_S"],
        r_SB_B=S["r_SB_B_m"],
        r_ScS_S=S["r_ScS_S_m"],
        k=S["k_Nm_per_rad"],
        c=S["c_Nms_per_rad"],
        theta0=S["theta0_rad"],
        thetaDot0=S["thetaDot0_radps"],
        motor_torque=S["motor_torque_Nm"],
        thetaRef=S["thetaRef_rad"],
        **kw,
    )


def run_spinner_reference(case, **kw):
    """Our run of one case of `spinning_bodies` and the Basilisk arrays of that case."""
    spec, ref = load_reference("spinning_bodies")
    h, ic, tm = spec["hub"], spec["initial_conditions"], spec["time"]
    hub = fx.Hub(h["mHub_kg"], h["IHubPntBc_B_kgm2"], h["r_BcB_B_m"])
    gravity = (fx.PointMassGravity(spec["gravity"]["mu_m3ps2"], central=True, name="earth"),)
    sc = fx.Spacecraft(hub, state_effectors=(spinners_from_reference(spec, **kw),), gravity=gravity)
    y0 = sc.init_state(ic["r_CN_N_m"], ic["v_CN_N_mps"], ic["sigma_BN"], ic["omega_BN_B_radps"])
    sol = js.simulate(sc, y0, tm["duration_s"], dt=tm["step_s"], sample_dt=tm["sample_interval_s"])
    return sol, {k.split("/")[1]: ref[k] for k in ref.files if k.startswith(case + "/")}


def check_spinner_reference(sol, ref):
    np.testing.assert_allclose(np.asarray(sol.ts), ref["t"], rtol=0, atol=1e-12)
    states = {("spinners", key): ref[key] for key in ["theta", "thetaDot"]}
    assert_basilisk_run(sol, ref, states, REL_TOL_RV, ABS_TOL_ANGLES)


def test_basilisk_spinning_bodies_reference():
    sol, ref = run_spinner_reference("plain")
    check_spinner_reference(sol, ref)
    assert np.ptp(ref["theta"], axis=0).min() > 0.1  # the bodies really turn
