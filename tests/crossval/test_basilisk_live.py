"""Live cross-validation against real Basilisk (`bsk` 2.12.1, the `crossval` extra).

Skipped when Basilisk is not importable. Each scenario is built in Basilisk from a spec dict
(`tests/reference/basilisk_scenarios.py`) and in jaxsim as
`Spacecraft(hub, gravity=(PointMassGravity(mu),), dynamic_effectors=(GravityGradient(earth), ...))`,
integrated with RK4 at the same step, and the samples are compared:

- `gravity_gradient`: the reference scenario (non-diagonal inertia, LEO, GG torque), first 600 s;
- `gg_ext_ft_offset`: the same plus a hub CoM offset (gravity at C, GG about C) and constant external
  loads (inertial force, body force, body torque through `extForceTorque`), first 600 s.
"""

import copy

import numpy as np
import pytest


pytest.importorskip("Basilisk")

import effectors as fx
import jaxsim as js
from tests.helpers import rel_err
from tests.reference import basilisk_scenarios as bs


pytestmark = pytest.mark.crossval

# Same equations, same RK4, same step: differences are float64 round-off of two operation orders
# amplified over 600 steps of an orbit (measured <= 5e-13 relative on r/v); 1e-9 is the bar the
# project sets for Basilisk agreement.
TOL_REL_RV = 1e-9
# MRPs and rates are O(1) and O(1e-3): round-off differences stay below 2e-13 / 3e-15 (measured).
TOL_ABS_ATT = 1e-9
# Energies/momenta are sums of large terms (orbital ~2e10 J): relative to the largest magnitude of
# the series, round-off level (measured <= 1e-13).
TOL_REL_ENERGY = 1e-11
# Sample times: Basilisk's ns -> s conversion rounds once.
TOL_TIME = 1e-15
HORIZON = 600.0  # [s]: 600 RK4 steps at 1 s, 61 samples; Basilisk runs it in ~0.05 s.

EXT = {"force_N": [0.5, -0.3, 0.2], "force_B": [-0.1, 0.25, 0.05], "torque_B": [2e-3, -1e-3, 5e-4]}
R_BCB_B = [0.05, -0.03, 0.1]  # [m] hub CoM offset for the second scenario


def _specs():
    gg = bs.load_spec("gravity_gradient")
    ext = copy.deepcopy(gg)
    ext["name"] = "gg_ext_ft_offset"
    ext["hub"]["r_BcB_B_m"] = R_BCB_B
    ext["effectors"].append(
        {
            "type": "extForceTorque",
            "extForce_N_N": EXT["force_N"],
            "extForce_B_N": EXT["force_B"],
            "extTorquePntB_B_Nm": EXT["torque_B"],
        }
    )
    return {"gravity_gradient": gg, "gg_ext_ft_offset": ext}


SPECS = _specs()


def _jaxsim_run(spec):
    h, ic = spec["hub"], spec["initial_conditions"]
    earth = fx.PointMassGravity(spec["gravity"]["mu_m3ps2"])
    dyn = [fx.GravityGradient(earth)]
    for e in spec["effectors"]:
        if e["type"] == "extForceTorque":
            dyn.append(
                fx.ExtForceTorque(e["extForce_N_N"], e["extForce_B_N"], e["extTorquePntB_B_Nm"])
            )
    sc = fx.Spacecraft(
        fx.Hub(h["mHub_kg"], h["IHubPntBc_B_kgm2"], h["r_BcB_B_m"]),
        gravity=(earth,),
        dynamic_effectors=tuple(dyn),
    )
    y0 = sc.init_state(ic["r_CN_N_m"], ic["v_CN_N_mps"], ic["sigma_BN"], ic["omega_BN_B_radps"])
    tm = spec["time"]
    return js.simulate(sc, y0, HORIZON, dt=tm["step_s"], sample_dt=tm["sample_interval_s"])


@pytest.fixture(scope="module", params=list(SPECS))
def pair(request):
    spec = SPECS[request.param]
    out, _ = bs.run_spec(spec, duration=HORIZON)
    sol = _jaxsim_run(spec)
    return request.param, out, sol


def test_sample_times_match(pair):
    # Basilisk stamps are integer ns times 1e-9 (e.g. 240.00000000000003): one rounding.
    _, out, sol = pair
    np.testing.assert_allclose(np.asarray(sol.ts), out["t"], rtol=TOL_TIME, atol=0.0)


@pytest.mark.parametrize("key", ["r_BN_N", "v_BN_N", "r_CN_N", "v_CN_N"])
def test_position_velocity(pair, key):
    name, out, sol = pair
    err = rel_err(sol.outputs[key], out[key]).max()
    assert err <= TOL_REL_RV, f"{name} {key}: max rel {err:.3g}"


@pytest.mark.parametrize("key", ["sigma_BN", "omega_BN_B"])
def test_attitude(pair, key):
    name, out, sol = pair
    err = np.abs(np.asarray(sol.outputs[key]) - out[key]).max()
    assert err <= TOL_ABS_ATT, f"{name} {key}: max abs {err:.3g}"


def test_mrp_switches(pair):
    _, out, sol = pair
    np.testing.assert_array_equal(np.asarray(sol.counts["mrp_switches"]), out["MRPSwitchCount"])


@pytest.mark.parametrize(
    "key", ["totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"]
)
def test_energy_momentum(pair, key):
    name, out, sol = pair
    a, b = np.asarray(sol.outputs[key]), out[key]
    err = np.abs(a - b).max() / np.abs(b).max()
    assert err <= TOL_REL_ENERGY, f"{name} {key}: max rel {err:.3g}"


def test_mass_properties(pair):
    _, out, sol = pair
    np.testing.assert_allclose(np.asarray(sol.outputs["c_B"]), out["c_B"], rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(sol.outputs["massSC"]), out["massSC"], rtol=1e-15)
    np.testing.assert_allclose(
        np.asarray(sol.outputs["ISC_PntB_B"]), out["ISC_PntB_B"], rtol=1e-14, atol=1e-12
    )


def test_loads_change_the_motion():
    """The second scenario differs from the first by more than the tolerance (the test can fail)."""
    a, _ = bs.run_spec(SPECS["gravity_gradient"], duration=HORIZON)
    b, _ = bs.run_spec(SPECS["gg_ext_ft_offset"], duration=HORIZON)
    assert rel_err(b["v_BN_N"], a["v_BN_N"]).max() > 1e3 * TOL_REL_RV
    assert np.abs(b["omega_BN_B"] - a["omega_BN_B"]).max() > 1e3 * TOL_ABS_ATT


# The builder must reproduce the stored Basilisk references (same bsk version, same inputs): measured
# bit for bit; 1e-12 relative to each key's largest magnitude leaves room only for a different CPU's
# floating-point paths.
TOL_REBUILD = 1e-12


def _assert_reproduces(out, ref):
    for key in ref.files:
        a, b = np.asarray(out[key], dtype=float), np.asarray(ref[key], dtype=float)
        assert a.shape == b.shape, key
        scale = max(np.abs(b).max(), 1e-300)
        assert np.abs(a - b).max() <= TOL_REBUILD * scale, key


@pytest.mark.parametrize(
    "name", ["gravity_gradient", "ext_force_torque", "reaction_wheels", "hinged_panels_undamped"]
)
def test_builder_reproduces_reference(name):
    """The Basilisk builder behind `combined_bsk.npz` rebuilds the stored references from their specs."""
    ref = np.load(bs.DATA / f"{name}.npz")
    out, _ = bs.run_spec(bs.load_spec(name))
    _assert_reproduces(out, ref)


def test_combined_reference_reproducible():
    """A fresh Basilisk run of `combined.json` reproduces `combined_bsk.npz` (58300 steps, ~5 s)."""
    ref = np.load(bs.DATA / "combined_bsk.npz")
    out, _ = bs.run_spec(bs.load_spec("combined"))
    _assert_reproduces(out, ref)
