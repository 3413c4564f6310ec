"""MuJoCoScene: MJCF twins of the Basilisk reference spacecraft (tests/data) against the reference
runs and against the back-substitution `Spacecraft`, convergence with the step, conservation,
MuJoCo's own C engine, gravity on scene bodies, System/clock/event/adaptive integration, jit, vmap,
grad vs central differences, validation. Skipped without the `mujoco` extra."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest


mujoco = pytest.importorskip("mujoco")
pytest.importorskip("mujoco.mjx")

import effectors as fx
import jaxsim as js
from tests.effectors._mjcf import hub_mjcf, panels_mjcf, scene_state, wheels_mjcf
from tests.effectors.test_hinged_rigid_bodies import panels_from_spec
from tests.helpers import hub_from_spec, initial_state, load_reference


# Scene vs Basilisk, same RK4 and step: the two integrate different coordinates (quaternion and
# hub origin vs MRP and back-substitution), so they differ by the RK4 truncation error of each,
# measured at 1.6e-14 m (positions) and 5e-15 (MRPs) over 10 s at 10 ms; bounds with margin.
REF_ABS_TOL_R = 1e-11  # [m], [m/s]
REF_ABS_TOL_ATT = 1e-11  # [-], [rad/s], [rad]
# Logged energies/momenta vs Basilisk's log (same definitions, RK4 error as above).
REF_REL_TOL_LOGGED = 1e-11
# Conservation, torque-free undamped panels, 5 s at 5 ms (RK4 error ~h^4).
REL_TOL_CONSERVED = 1e-10
# Scene vs Spacecraft convergence: the RK4 difference must fall by 2^4 = 16 per halving of the
# step; accept >= 10 (the pre-asymptotic ratio at the coarsest step is lower).
MIN_CONVERGENCE_RATIO = 10.0
# MJX forward dynamics vs MuJoCo's C engine (mj_forward) in float64: round-off.
TOL_VS_C = 1e-10
# qpos rate vs central differences of MuJoCo's C mj_integratePos over +-1e-5 s: remainder
# ~ |qvel|^3 h^2 ~ 1e-11.
TOL_QPOS_RATE = 1e-9
# System, vmap vs separate runs: same operations, round-off.
TOL_SAME = 1e-12
# Adaptive Tsit5 at rtol 1e-10 vs fine RK4.
TOL_ADAPTIVE = 1e-8
# jax.grad vs central differences with a step 1e-5 of the value: truncation ~1e-10 relative.
REL_TOL_GRAD = 1e-6
FD_REL_STEP = 1e-5
# Point-mass orbit: scene (one free body) vs Basilisk over 600 s at 1 s: RK4 error in different
# coordinates (orbit radius 7e6 m), relative to the position norm.
REL_TOL_ORBIT = 1e-9

# Same RK4 states in two engines (translation of a one-body scene): round-off, relative to |r|.
REL_TOL_ROUNDOFF = 1e-13

REF_HORIZON_S = 5.0


def _panels():
    spec, ref = load_reference("hinged_panels_undamped")
    scene = fx.MuJoCoScene(panels_mjcf(spec))
    P = spec["effectors"][0]["panels"]
    y0 = scene_state(
        scene, spec, ref, [p["theta0_rad"] for p in P], [p["thetaDot0_radps"] for p in P]
    )
    return spec, ref, scene, y0


def _wheels():
    spec, ref = load_reference("reaction_wheels")
    scene = fx.MuJoCoScene(wheels_mjcf(spec))
    W = spec["effectors"][0]["wheels"]
    y0 = scene_state(scene, spec, ref, [0.0] * 3, [w["Omega0_radps"] for w in W])
    args = {"ctrl": jnp.asarray(spec["effectors"][0]["motor_torques_Nm"])}
    return spec, ref, scene, y0, args


def _check_hub(sol, ref, n):
    hub = {k: np.asarray(v[:, 0]) for k, v in sol.outputs["bodies"].items()}
    for key, tol in (
        ("r_BN_N", REF_ABS_TOL_R),
        ("v_BN_N", REF_ABS_TOL_R),
        ("sigma_BN", REF_ABS_TOL_ATT),
        ("omega_BN_B", REF_ABS_TOL_ATT),
    ):
        np.testing.assert_allclose(hub[key], ref[key][:n], rtol=0, atol=tol, err_msg=key)
    for key in ("r_CN_N", "v_CN_N"):
        np.testing.assert_allclose(sol.outputs[key], ref[key][:n], rtol=0, atol=REF_ABS_TOL_R)
    for key in ("totRotEnergy", "totRotAngMomPntC_N"):
        scale = np.max(np.abs(ref[key][:n]))
        np.testing.assert_allclose(
            sol.outputs[key], ref[key][:n], rtol=0, atol=REF_REL_TOL_LOGGED * scale, err_msg=key
        )


def _run_ref(scene, y0, spec, t1, args=None):
    t = spec["time"]
    return js.simulate(scene, y0, t1, dt=t["step_s"], sample_dt=t["sample_interval_s"], args=args)


# ---------------------------------------------------------------------------------------------------
# Basilisk reference runs (tests/data)


def test_hinged_panels_vs_basilisk():
    spec, ref, scene, y0 = _panels()
    sol = _run_ref(scene, y0, spec, REF_HORIZON_S)
    n = len(sol.ts)
    _check_hub(sol, ref, n)
    for i in (1, 2):
        s = scene.qpos_slice(f"panel{i}")
        v = scene.qvel_slice(f"panel{i}")
        np.testing.assert_allclose(
            sol.ys["qpos"][:, s][:, 0], ref[f"panel{i}_theta"][:n], atol=REF_ABS_TOL_ATT
        )
        np.testing.assert_allclose(
            sol.ys["qvel"][:, v][:, 0], ref[f"panel{i}_thetaDot"][:n], atol=REF_ABS_TOL_ATT
        )
    np.testing.assert_allclose(sol.outputs["mass"], ref["massSC"][:n], rtol=1e-15)


def test_reaction_wheels_vs_basilisk():
    spec, ref, scene, y0, args = _wheels()
    sol = _run_ref(scene, y0, spec, REF_HORIZON_S, args)
    n = len(sol.ts)
    _check_hub(sol, ref, n)
    np.testing.assert_allclose(
        sol.ys["qvel"][:, 6:9], ref["rw_Omega"][:n], rtol=0, atol=REF_ABS_TOL_ATT * 100
    )


def test_rigid_tumble_vs_basilisk():
    spec, ref = load_reference("rigid_tumble")
    scene = fx.MuJoCoScene(hub_mjcf(spec))
    sol = _run_ref(scene, scene_state(scene, spec, ref), spec, REF_HORIZON_S)
    _check_hub(sol, ref, len(sol.ts))


@pytest.mark.slow
@pytest.mark.parametrize("case", ["panels", "wheels"])
def test_full_reference_horizon(case):
    """The whole 100 s Basilisk runs (10,000 RK4 steps)."""
    if case == "panels":
        spec, ref, scene, y0 = _panels()
        args = None
    else:
        spec, ref, scene, y0, args = _wheels()
    sol = _run_ref(scene, y0, spec, spec["time"]["duration_s"], args)
    _check_hub(sol, ref, len(sol.ts))


def test_pointmass_orbit_vs_basilisk():
    """Gravity from our PointMassGravity applied to the scene's body: Basilisk's LEO orbit."""
    spec, ref = load_reference("pointmass_orbit")
    earth = fx.PointMassGravity(spec["gravity"]["mu_m3ps2"])
    scene = fx.MuJoCoScene(hub_mjcf(spec), gravity=earth)
    y0 = scene_state(scene, spec, ref)
    sol = js.simulate(scene, y0, 600.0, dt=spec["time"]["step_s"], sample_dt=10.0)
    n = len(sol.ts)
    r = np.asarray(sol.outputs["bodies"]["r_BN_N"][:, 0])
    err = np.max(
        np.linalg.norm(r - ref["r_BN_N"][:n], axis=-1) / np.linalg.norm(ref["r_BN_N"][:n], axis=-1)
    )
    assert err < REL_TOL_ORBIT, err
    np.testing.assert_allclose(
        sol.outputs["totOrbEnergy"], ref["totOrbEnergy"][:n], rtol=REL_TOL_ORBIT
    )


def test_spherical_harmonics_on_a_scene_body_equals_spacecraft():
    """J2 gravity on a one-body scene (CoM at the body origin) and on the same hub as a Spacecraft:
    the translational states are the same RK4 states in both, so they agree to round-off."""
    spec, ref = load_reference("pointmass_orbit")
    spec = {**spec, "hub": {**spec["hub"], "r_BcB_B_m": [0.0, 0.0, 0.0]}}
    j2 = fx.SphericalHarmonicGravity.j2(3.986004415e14, 6378136.3, 1.0826e-3, central=True)
    scene = fx.MuJoCoScene(hub_mjcf(spec), gravity=j2)
    sc = fx.Spacecraft(hub_from_spec(spec), gravity=(j2,))
    a = js.simulate(scene, scene_state(scene, spec, ref), 300.0, dt=1.0, sample_dt=30.0)
    b = js.simulate(sc, initial_state(sc, spec), 300.0, dt=1.0, sample_dt=30.0)
    r_a, r_b = a.outputs["bodies"]["r_BN_N"][:, 0], b.outputs["r_BN_N"]
    assert float(np.max(np.linalg.norm(r_a - r_b, axis=-1))) < REL_TOL_ROUNDOFF * np.linalg.norm(
        r_b[0]
    )
    # J2 matters over 300 s (the point-mass orbit differs by far more than round-off).
    assert float(np.max(np.abs(r_b[-1] - ref["r_BN_N"][30]))) > 1.0


def test_applied_force_on_a_scene_body():
    """A constant world force through the CoM of a free body: r = r0 + v0 t + F t^2 / (2 m), which
    RK4 integrates exactly; no rotation."""
    xml = (
        '<mujoco><worldbody><body name="b"><freejoint/>'
        '<inertial pos="0 0 0" mass="4" diaginertia="1 2 3"/></body></worldbody></mujoco>'
    )
    scene = fx.MuJoCoScene(xml)
    F = np.array([0.3, -0.2, 0.1])
    xfrc = np.zeros((scene.nbody, 6))
    xfrc[1, :3] = F
    y0 = scene.init_state(qvel=[1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    sol = js.simulate(scene, y0, 2.0, dt=0.1, sample_dt=1.0, args={"xfrc_applied": xfrc})
    t = np.asarray(sol.ts)[:, None]
    expected = np.array([1.0, 0.0, 0.0]) * t + F * t**2 / 8.0
    np.testing.assert_allclose(sol.outputs["r_CN_N"], expected, rtol=0, atol=1e-13)
    np.testing.assert_allclose(sol.outputs["bodies"]["omega_BN_B"], 0.0, atol=1e-15)


# ---------------------------------------------------------------------------------------------------
# Against the back-substitution Spacecraft: agreement to integration error, shrinking with the step


def _panel_spacecraft(spec):
    return fx.Spacecraft(hub_from_spec(spec), state_effectors=[panels_from_spec(spec)])


@pytest.mark.parametrize(
    "steps", [(0.2, 0.1), pytest.param((0.4, 0.2, 0.1, 0.05), marks=pytest.mark.slow)]
)
def test_scene_vs_spacecraft_converges_with_step(steps):
    """Rates and hinge angles are the same RK4 states in both engines (they agree to round-off at
    any step); the attitude (quaternion vs MRP) and the hub origin differ by RK4 truncation error,
    measured over 20 s: sigma 6.2e-8, 1.7e-9, 5.2e-11, 3.7e-12 and r_BN_N 3.7e-7, 1.7e-8, 8.3e-10,
    4.3e-11 m at h = 0.4, 0.2, 0.1, 0.05 s."""
    spec, ref, scene, y0 = _panels()
    sc = _panel_spacecraft(spec)
    ys0 = initial_state(sc, spec)
    errs = []
    for dt in steps:
        a = js.simulate(scene, y0, 20.0, dt=dt, sample_dt=0.8)
        b = js.simulate(sc, ys0, 20.0, dt=dt, sample_dt=0.8)
        hub = a.outputs["bodies"]
        errs.append(
            [float(np.max(np.abs(hub[k][:, 0] - b.outputs[k]))) for k in ("sigma_BN", "r_BN_N")]
        )
        np.testing.assert_allclose(hub["omega_BN_B"][:, 0], b.outputs["omega_BN_B"], atol=TOL_SAME)
    errs = np.asarray(errs)
    ratios = errs[:-1] / errs[1:]
    assert np.all(ratios >= MIN_CONVERGENCE_RATIO), (errs, ratios)


def test_conservation_torque_free_undamped():
    spec, ref, scene, y0 = _panels()
    sol = js.simulate(scene, y0, 5.0, dt=0.005, sample_dt=0.5)
    E = np.asarray(sol.outputs["totRotEnergy"])
    H = np.asarray(sol.outputs["totRotAngMomPntC_N"])
    assert np.max(np.abs(E - E[0])) / abs(E[0]) < REL_TOL_CONSERVED
    assert np.max(np.linalg.norm(H - H[0], axis=-1)) / np.linalg.norm(H[0]) < REL_TOL_CONSERVED
    # The scene's CoM does not move (no external force, C at rest at t = 0).
    np.testing.assert_allclose(sol.outputs["r_CN_N"], 0.0, atol=REF_ABS_TOL_R)


def test_conservation_in_point_mass_gravity():
    """Panels in orbit: gravity on each body; total energy and momentum about the Earth's centre."""
    spec, ref, scene, y0 = _panels()
    earth = fx.PointMassGravity(3.986004415e14)
    scene = fx.MuJoCoScene(panels_mjcf(spec), gravity=earth)
    qpos = y0["qpos"].at[:3].add(jnp.array([7.0e6, 0.0, 0.0]))
    qvel = y0["qvel"].at[:3].add(jnp.array([0.0, 7.546e3, 0.0]))
    sol = js.simulate(scene, scene.init_state(qpos, qvel), 60.0, dt=0.05, sample_dt=6.0)
    o = sol.outputs
    E = np.asarray(o["totOrbEnergy"] + o["totRotEnergy"])
    H = np.asarray(o["totOrbAngMomPntN_N"] + o["totRotAngMomPntC_N"])
    assert np.max(np.abs(E - E[0])) / abs(E[0]) < REL_TOL_CONSERVED
    assert np.max(np.linalg.norm(H - H[0], axis=-1)) / np.linalg.norm(H[0]) < REL_TOL_CONSERVED


# ---------------------------------------------------------------------------------------------------
# MuJoCo's C engine as the oracle of the drift


def test_drift_matches_mujoco_c():
    spec, ref, scene, y0 = _panels()
    mj = mujoco.MjModel.from_xml_string(panels_mjcf(spec))
    mj.opt.gravity[:] = 0.0
    data = mujoco.MjData(mj)
    rng = np.random.default_rng(0)
    qpos = np.asarray(y0["qpos"]).copy()
    qpos[3:7] = rng.normal(size=4)
    qpos[3:7] /= np.linalg.norm(qpos[3:7])
    qvel = rng.normal(size=mj.nv) * 0.3
    data.qpos[:], data.qvel[:] = qpos, qvel
    mujoco.mj_forward(mj, data)
    y = scene.init_state(qpos, qvel)
    dy = jax.jit(lambda s, y: s.drift(0.0, y, None))(scene, y)  # jit, the scene as a pytree
    np.testing.assert_allclose(dy["qvel"], data.qacc, rtol=0, atol=TOL_VS_C)
    # qpos rate vs MuJoCo's own position integration over a tiny step.
    h = 1e-5
    q_hi, q_lo = qpos.copy(), qpos.copy()
    mujoco.mj_integratePos(mj, q_hi, qvel, h)
    mujoco.mj_integratePos(mj, q_lo, qvel, -h)
    np.testing.assert_allclose((q_hi - q_lo) / (2 * h), dy["qpos"], rtol=0, atol=TOL_QPOS_RATE)
    # Energies: MuJoCo's (kinetic + spring potential) vs our totals with C at rest.
    mj.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
    mujoco.mj_forward(mj, data)
    o = eqx.filter_jit(scene.derived)(0.0, y, None)
    E_ours = float(o["totRotEnergy"] + o["totOrbEnergy"])
    np.testing.assert_allclose(E_ours, data.energy.sum(), rtol=TOL_VS_C)


# ---------------------------------------------------------------------------------------------------
# Solvers, System, clocks, events


def test_adaptive_matches_fine_rk4():
    spec, ref, scene, y0 = _panels()
    a = js.simulate(scene, y0, 2.0, solver=js.Tsit5(), rtol=1e-10, atol=1e-12, sample_dt=0.5)
    b = js.simulate(scene, y0, 2.0, dt=0.005, sample_dt=0.5)
    np.testing.assert_allclose(a.ys["qvel"], b.ys["qvel"], rtol=0, atol=TOL_ADAPTIVE)
    np.testing.assert_allclose(np.linalg.norm(a.ys["qpos"][:, 3:7], axis=-1), 1.0, atol=1e-14)


def test_system_with_spacecraft_and_clocked_motor():
    """One System: a Spacecraft and a wheel scene, one RK4; the scene's motors driven by flight
    software on a clock writing `args["scene"]["ctrl"]`; equals the two objects run alone."""
    spec, ref, scene, y0, args = _wheels()
    sc = _panel_spacecraft(load_reference("hinged_panels_undamped")[0])
    ys0 = initial_state(sc, load_reference("hinged_panels_undamped")[0])
    u = args["ctrl"]
    fsw = js.DiscreteModel(
        "fsw",
        js.Clock(0.1),
        lambda t, y, z, a: (z, {"scene": {"ctrl": u}}),
        held0={"scene": {"ctrl": u}},
    )
    system = js.System([sc, scene])
    both = js.simulate(system, system.init_state({"scene": y0, "spacecraft": ys0}), 1.0, dt=0.01,
                       sample_dt=0.5, clocks=(fsw,))  # fmt: skip
    alone = js.simulate(scene, y0, 1.0, dt=0.01, sample_dt=0.5, args=args)
    sc_alone = js.simulate(sc, ys0, 1.0, dt=0.01, sample_dt=0.5)
    np.testing.assert_allclose(both.ys["scene"]["qvel"], alone.ys["qvel"], rtol=0, atol=TOL_SAME)
    np.testing.assert_allclose(
        both.ys["spacecraft"]["hub"]["omega_BN_B"], sc_alone.ys["hub"]["omega_BN_B"], atol=TOL_SAME
    )
    # The motors are internal: the wheel scene's angular momentum is conserved.
    H = np.asarray(both.outputs["scene"]["totRotAngMomPntC_N"])
    np.testing.assert_allclose(
        H, np.broadcast_to(H[0], H.shape), rtol=0, atol=REF_REL_TOL_LOGGED * np.linalg.norm(H[0])
    )


def test_event_on_hinge_angle():
    """A terminal event when panel 1 first passes theta = 0 (falling)."""
    spec, ref, scene, y0 = _panels()
    s = scene.qpos_slice("panel1").start
    ev = js.Event(lambda t, y, a: y["qpos"][s], direction="falling", terminal=True, name="flat")
    sol = js.simulate(scene, y0, 10.0, solver=js.Tsit5(), rtol=1e-10, atol=1e-12, events=(ev,))
    t_hit = float(sol.t_final)
    fine = js.simulate(scene, y0, t_hit, dt=t_hit / 2000, sample_dt=t_hit)
    assert 0.0 < t_hit < 10.0
    assert abs(float(fine.ys["qpos"][-1, s])) < 1e-8
    # Basilisk's theta changes sign between the neighbouring samples.
    k = int(np.floor(t_hit / 0.1))
    assert ref["panel1_theta"][k] > 0 > ref["panel1_theta"][k + 1]


def test_thruster_at_a_site():
    """A MuJoCo actuator on a site (a thruster along the site z axis, here body x) off the CoM:
    linear acceleration F/m, angular acceleration I^-1 (r x F), from rest at identity attitude."""
    xml = (
        '<mujoco><worldbody><body name="b"><freejoint/>'
        '<inertial pos="0 0 0" mass="10" diaginertia="1 2 3"/>'
        '<site name="nozzle" pos="0.5 0.2 0" zaxis="1 0 0"/></body></worldbody>'
        '<actuator><general name="thr" site="nozzle" gear="0 0 1 0 0 0"/></actuator></mujoco>'
    )
    scene = fx.MuJoCoScene(xml)
    u = 2.0  # [N]
    dy = eqx.filter_jit(scene.drift)(0.0, scene.init_state(), {"ctrl": jnp.array([u])})
    F = np.array([u, 0.0, 0.0])
    tau = np.cross([0.5, 0.2, 0.0], F)
    np.testing.assert_allclose(
        dy["qvel"], np.concatenate([F / 10.0, tau / [1.0, 2.0, 3.0]]), atol=1e-14
    )
    with pytest.raises(ValueError, match="command `ctrl`.*broadcast to shape \\(1,\\)"):
        scene.drift(0.0, scene.init_state(), {"ctrl": jnp.zeros(3)})


def test_commands_checked_at_the_call():
    """`simulate` refuses a misspelt command (it would be ignored), a misshapen one and a dict
    where an array is read, naming the command; inside a System, under the scene's name too."""
    xml = (
        '<mujoco><worldbody><body name="rotor"><joint name="h" type="hinge" axis="0 0 1"/>'
        '<inertial pos="0 0 0" mass="1" diaginertia="1 1 2"/></body></worldbody>'
        '<actuator><motor name="m" joint="h"/></actuator></mujoco>'
    )
    scene = fx.MuJoCoScene(xml, name="arm")
    y0 = scene.init_state()
    run = lambda model, y, args: js.simulate(model, y, 0.1, dt=0.05, args=args)
    with pytest.raises(
        ValueError, match=r"unknown address\(es\) \['ctlr'\].*\['ctrl', 'xfrc_applied'\]"
    ):
        run(scene, y0, {"ctlr": jnp.ones(1)})
    with pytest.raises(
        ValueError, match=r"`args\['ctrl'\]` must have shape \(1,\).*got shape \(3,\)"
    ):
        run(scene, y0, {"ctrl": jnp.ones(3)})
    with pytest.raises(
        ValueError, match=r"`args\['xfrc_applied'\]` must be an array of shape \(2, 6\)"
    ):
        run(scene, y0, {"xfrc_applied": {"force": jnp.ones(3)}})
    system = js.System([scene], name="sys")
    with pytest.raises(ValueError, match=r"`args\['arm'\]` has unknown address\(es\) \['ctlr'\]"):
        run(system, {"arm": y0}, {"arm": {"ctlr": jnp.ones(1)}})
    sol = run(system, {"arm": y0}, {"arm": {"ctrl": jnp.ones(1)}})
    assert float(sol.ys["arm"]["qvel"][-1, 0]) > 0.0


def test_actuator_activation_state():
    """A first-order filtered motor (`dyntype="filter"`, tau = 0.5 s) on a hinge of inertia J: the
    scene carries `act`; act = u (1 - exp(-t/tau)) and the hinge rate integrates act / J."""
    xml = (
        '<mujoco><worldbody><body name="rotor"><joint name="h" type="hinge" axis="0 0 1"/>'
        '<inertial pos="0 0 0" mass="1" diaginertia="1 1 2"/></body></worldbody>'
        '<actuator><general name="m" joint="h" dyntype="filter" dynprm="0.5"/></actuator></mujoco>'
    )
    scene = fx.MuJoCoScene(xml)
    y0 = scene.init_state()
    assert set(y0) == {"qpos", "qvel", "act"}
    sol = js.simulate(scene, y0, 2.0, dt=0.01, sample_dt=0.5, args={"ctrl": jnp.array([1.0])})
    t = np.asarray(sol.ts)
    act = 1.0 - np.exp(-t / 0.5)
    np.testing.assert_allclose(sol.ys["act"][:, 0], act, rtol=0, atol=TOL_ADAPTIVE)
    np.testing.assert_allclose(
        sol.ys["qvel"][:, 0], (t - 0.5 * act) / 2.0, rtol=0, atol=TOL_ADAPTIVE
    )


class _OUNoise(js.AbstractDynamicObject):
    """dx = -x dt + dW: a noisy neighbour for the scene in a System."""

    name: str = eqx.field(static=True, default="noise")

    def init_state(self):
        return jnp.zeros(1)

    def drift(self, t, y, args):
        return -y

    @property
    def noise_dim(self):
        return 1

    def diffusion(self, t, y, args):
        return jnp.ones((1, 1))


def test_sde_solver_with_a_scene_in_a_system():
    """Euler-Maruyama on System([scene, OU noise]): the scene (no noise, no coupling) follows the
    plain Euler solution to round-off; the noise state moves."""
    spec, ref, scene, y0 = _panels()
    system = js.System([scene, _OUNoise()])
    ys0 = system.init_state({"scene": y0})
    sde = js.simulate(system, ys0, 0.5, solver=js.EulerMaruyama(), dt=0.01, sample_dt=0.5,
                      key=jax.random.key(0))  # fmt: skip
    ode = js.simulate(scene, y0, 0.5, solver=js.Euler(), dt=0.01, sample_dt=0.5)
    np.testing.assert_allclose(sde.ys["scene"]["qvel"], ode.ys["qvel"], rtol=0, atol=TOL_SAME)
    assert float(jnp.abs(sde.ys["noise"][-1, 0])) > 0.0


# ---------------------------------------------------------------------------------------------------
# Transformations


def _with(scene, mass, k):
    """The panel scene with panel 1's mass [kg] and hinge stiffness [N m/rad] replaced."""
    b, j = scene.body_id("panel1"), scene.joint_names.index("panel1")
    return eqx.tree_at(
        lambda s: (s.model.body_mass, s.model.jnt_stiffness),
        scene,
        (scene.model.body_mass.at[b].set(mass), scene.model.jnt_stiffness.at[j].set(k)),
    )


def test_vmap_over_dispersed_masses():
    spec, ref, scene, y0 = _panels()
    masses = jnp.array([90.0, 100.0, 110.0])
    run = lambda m: js.simulate(_with(scene, m, 300.0), y0, 1.0, dt=0.01, sample_dt=1.0).ys["qvel"][
        -1
    ]
    batch = jax.vmap(run)(masses)
    for i, m in enumerate(masses):
        np.testing.assert_allclose(batch[i], run(m), rtol=0, atol=TOL_SAME)
    assert float(jnp.max(jnp.abs(batch[0] - batch[2]))) > 1e-6  # the dispersion matters


@pytest.mark.slow
def test_grad_mass_and_stiffness_vs_central_differences():
    spec, ref, scene, y0 = _panels()
    s = scene.qpos_slice("panel1").start

    def loss(mass, k):
        sol = js.simulate(_with(scene, mass, k), y0, 1.0, dt=0.01, sample_dt=1.0)
        return sol.ys["qpos"][-1, s] + sol.ys["qvel"][-1, 3]

    x = (100.0, 300.0)
    g = jax.grad(loss, argnums=(0, 1))(*x)
    for i in range(2):
        h = FD_REL_STEP * x[i]
        hi, lo = list(x), list(x)
        hi[i] += h
        lo[i] -= h
        fd = (loss(*hi) - loss(*lo)) / (2 * h)
        np.testing.assert_allclose(g[i], fd, rtol=REL_TOL_GRAD)


# ---------------------------------------------------------------------------------------------------
# Construction and validation


def test_bad_input():
    spec, _ = load_reference("hinged_panels_undamped")
    with pytest.raises(TypeError, match="MuJoCoScene: `mjcf`"):
        fx.MuJoCoScene(3.0)
    with pytest.raises(ValueError, match="MuJoCoScene: `mjcf`.*not a file"):
        fx.MuJoCoScene("no/such/scene.xml")
    with pytest.raises(ValueError, match="MuJoCoScene: `mjcf` text"):
        fx.MuJoCoScene("<mujoco><worldbody><body></mujoco>")
    with pytest.raises(TypeError, match="MuJoCoScene: `gravity\\[0\\]`"):
        fx.MuJoCoScene(panels_mjcf(spec), gravity=[1.0])
    with pytest.raises(ValueError, match="nv > 0"):
        fx.MuJoCoScene("<mujoco><worldbody><body><geom size='1'/></body></worldbody></mujoco>")
    scene = fx.MuJoCoScene(panels_mjcf(spec))
    with pytest.raises(ValueError, match="no joint named 'x'"):
        scene.qpos_slice("x")
    with pytest.raises(ValueError, match="qpos"):
        scene.init_state(qpos=np.zeros(3))
    with pytest.raises(ValueError, match="na = 0"):
        scene.init_state(act=np.zeros(1))


def test_mjcf_file_and_model_gravity(tmp_path):
    """A file path loads the same model; `model_gravity=True` keeps the uniform MJCF field."""
    xml = (
        '<mujoco><option gravity="0 0 -9.81"/><worldbody><body name="b"><freejoint/>'
        '<inertial pos="0 0 0" mass="2" diaginertia="1 1 1"/></body></worldbody></mujoco>'
    )
    path = tmp_path / "ball.xml"
    path.write_text(xml)
    space = fx.MuJoCoScene(path)
    ground = fx.MuJoCoScene(xml, model_gravity=True)
    y0 = space.init_state()
    np.testing.assert_array_equal(eqx.filter_jit(space.drift)(0.0, y0, None)["qvel"], 0.0)
    sol = js.simulate(ground, y0, 1.0, dt=0.1, sample_dt=1.0)
    np.testing.assert_allclose(sol.ys["qpos"][-1, 2], -0.5 * 9.81, rtol=1e-12)  # RK4 exact
    E = sol.outputs["totOrbEnergy"]
    np.testing.assert_allclose(E, E[0], atol=1e-12)
