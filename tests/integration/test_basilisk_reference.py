"""Hub-level Basilisk 2.12.1 scenarios (tests/data, see its README) reproduced with RK4 at the spec step."""

import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from tests.helpers import gravity_from_spec, hub_from_spec, initial_state, load_reference


# Acceptance bounds of the issue: positions/velocities relative 1e-9, attitude/rates absolute 1e-9.
# Basilisk runs the same RK4 in float64, so agreement is at round-off; these bounds leave room for
# the different (but equivalent) order of floating-point operations over up to 60,000 steps.
REL_TOL_RV = 1e-9
ABS_TOL_ATT = 1e-9
# Orbital energy/momentum of the logged quantities vs Basilisk's own log: round-off level.
REL_TOL_ENERGY = 1e-11

CASES = ["pointmass_orbit", "rigid_tumble", "gravity_gradient", "ext_force_torque"]


def build(name):
    spec, ref = load_reference(name)
    gravity = gravity_from_spec(spec)
    dyn = []
    for eff in spec["effectors"]:
        if eff["type"] == "GravityGradientEffector":
            dyn.append(fx.GravityGradient(gravity))
        elif eff["type"] == "extForceTorque":
            dyn.append(
                fx.ExtForceTorque(
                    eff["extForce_N_N"], eff["extForce_B_N"], eff["extTorquePntB_B_Nm"]
                )
            )
        else:
            raise AssertionError(eff["type"])
    sc = fx.Spacecraft(hub_from_spec(spec), gravity=gravity, dynamic_effectors=dyn)
    return spec, ref, sc


def vector_rel_err(a, b):
    """Per-sample ||a - b|| / ||b||; samples where the reference is exactly 0 use the absolute error."""
    num = np.linalg.norm(np.asarray(a) - np.asarray(b), axis=-1)
    den = np.linalg.norm(np.asarray(b), axis=-1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), num)


@pytest.fixture(scope="module", params=CASES)
def case(request):
    spec, ref, sc = build(request.param)
    t = spec["time"]
    sol = js.simulate(
        sc,
        initial_state(sc, spec),
        t["duration_s"],
        dt=t["step_s"],
        sample_dt=t["sample_interval_s"],
    )
    return request.param, spec, ref, sol


def test_positions_velocities(case):
    name, _, ref, sol = case
    for key in ["r_BN_N", "v_BN_N", "r_CN_N", "v_CN_N"]:
        err = vector_rel_err(sol.outputs[key], ref[key])
        assert err.max() <= REL_TOL_RV, f"{name} {key}: max relative error {err.max():.3e}"


def test_attitude_rates(case):
    name, _, ref, sol = case
    for key in ["sigma_BN", "omega_BN_B"]:
        err = np.abs(np.asarray(sol.outputs[key]) - ref[key]).max()
        assert err <= ABS_TOL_ATT, f"{name} {key}: max absolute error {err:.3e}"


def test_mrp_switch_count(case):
    name, _, ref, sol = case
    np.testing.assert_array_equal(np.asarray(sol.counts["mrp_switches"]), ref["MRPSwitchCount"])
    assert np.all(np.linalg.norm(sol.ys["hub"]["sigma_BN"], axis=-1) <= 1.0)


def test_logged_energy_momentum(case):
    name, _, ref, sol = case
    for key in ["totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"]:
        a, b = np.asarray(sol.outputs[key]), ref[key]
        # A reference that is identically zero (ext_force_torque: r parallel to v) is compared on the
        # scale of the quantity's magnitude m |r| |v| instead.
        m = float(ref["massSC"][0])
        rv = (
            np.linalg.norm(ref["r_CN_N"], axis=-1).max()
            * np.linalg.norm(ref["v_CN_N"], axis=-1).max()
        )
        scale = np.abs(b).max() if np.abs(b).max() > 0 else m * rv
        err = np.abs(a - b).max() / scale
        assert err <= REL_TOL_ENERGY, f"{name} {key}: max error / scale {err:.3e}"


def test_mass_properties(case):
    name, _, ref, sol = case
    np.testing.assert_allclose(sol.outputs["massSC"], ref["massSC"], rtol=1e-15)
    np.testing.assert_allclose(sol.outputs["c_B"], ref["c_B"], atol=1e-15)
    np.testing.assert_allclose(sol.outputs["ISC_PntB_B"], ref["ISC_PntB_B"], rtol=1e-14, atol=1e-12)


def test_initial_b_from_c(case):
    """Initial conditions are given for the composite CoM; B(0) is derived as Basilisk does."""
    name, spec, ref, sol = case
    ic = spec["initial_conditions"]
    np.testing.assert_allclose(sol.outputs["r_CN_N"][0], ic["r_CN_N_m"], rtol=1e-15, atol=1e-12)
    np.testing.assert_allclose(sol.outputs["v_CN_N"][0], ic["v_CN_N_mps"], rtol=1e-15, atol=1e-12)
    np.testing.assert_allclose(sol.outputs["r_BN_N"][0], ref["r_BN_N"][0], rtol=1e-15, atol=1e-12)


# Conservation with RK4 at the spec step (issue bound; Basilisk's own tests accept 1e-10).
CONSERVATION_REL_TOL = 1e-12


CONSERVED = {
    # Point-mass orbit: the orbit's invariants. (The attitude quantities of this case carry RK4
    # truncation error at its 1 s step, 1.9e-8 even in Basilisk, so they are not invariants here.)
    "pointmass_orbit": ["totOrbEnergy", "totOrbAngMomPntN_N"],
    # Torque-free tumble with B != C: rotational energy and momentum about C.
    "rigid_tumble": ["totRotEnergy", "totRotAngMomPntC_N"],
}


def test_conservation(case):
    name, _, _, sol = case
    if name not in CONSERVED:
        pytest.skip("no conserved quantity in this scenario")
    for key in CONSERVED[name]:
        v = np.asarray(sol.outputs[key])
        drift = np.abs(v - v[0]).max() / np.abs(v[0]).max()
        assert drift <= CONSERVATION_REL_TOL, f"{name} {key}: relative drift {drift:.3e}"


def test_rigid_tumble_com_moves_straight():
    spec, ref, sc = build("rigid_tumble")
    sol = js.simulate(sc, initial_state(sc, spec), 10.0, dt=0.01, sample_dt=0.1)
    ic = spec["initial_conditions"]
    expected = jnp.asarray(ic["r_CN_N_m"]) + sol.ts[:, None] * jnp.asarray(ic["v_CN_N_mps"])
    np.testing.assert_allclose(sol.outputs["r_CN_N"], expected, rtol=0, atol=1e-11)


@pytest.mark.parametrize("name", ["rigid_tumble", "ext_force_torque"])
def test_clocked_run_agrees_with_basilisk(name):
    """A flight-software clock that changes nothing leaves the run on Basilisk's reference: the
    step map (MRP switch) runs after every step on the clocked path too (on main before the
    engine-core rework, `rigid_tumble` under a 1 Hz no-op clock reached |sigma| = 5.2)."""
    spec, ref, sc = build(name)
    t = spec["time"]
    noop = js.DiscreteModel("noop", js.Clock(1.0), lambda t, y, z, a: (z, {}))
    sol = js.simulate(
        sc, initial_state(sc, spec), t["duration_s"], dt=t["step_s"],
        sample_dt=t["sample_interval_s"], clocks=[noop],
    )  # fmt: skip
    for key in ["sigma_BN", "omega_BN_B"]:
        err = np.abs(np.asarray(sol.outputs[key]) - ref[key]).max()
        assert err <= ABS_TOL_ATT, f"{name} {key}: max absolute error {err:.3e}"
    np.testing.assert_array_equal(np.asarray(sol.counts["mrp_switches"]), ref["MRPSwitchCount"])
