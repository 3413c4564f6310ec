"""Generate `tests/data/spinning_bodies.{json,npz}` with Basilisk (needs `pip install 'jaxsim-spacecraft[crossval]'`).

Scenario: hub (750 kg, diag(900, 800, 600), r_BcB_B = (0, 0, 1)) on the common orbit of
Basilisk's integrated tests (CoM initial conditions `R0`, `V0`, as in `test_spacecraft.py` and
`test_spinningBodyOneDOFStateEffector.py`) with point-mass Earth gravity, two
`spinningBodyOneDOFStateEffector`s (full inertia, CoM off the axis, spring, damper, motor torque,
reference angle), RK4 at 10 ms for 10 s.
Cases:

- `plain`: as above;
- `attached`: an `extForceTorque` attached to spinner 0 (`addDynamicEffector`), `extForce_B` and
  `extTorquePntB_B` read by Basilisk in the spinner frame S, the force through the joint point S;
- `panel_torque`: the two hinged panels of `hinged_panels_undamped` (k = 300, c = 0) with an
  `extForceTorque` torque (no force) attached to panel 1: a couple, whose effect does not depend on the
  application point (Basilisk's `hingedRigidBodyStateEffector` takes an attached force's moment on the
  hub at the hinge, and the force itself exerts no hinge torque).

    python benchmarks/make_branching_references.py
"""

import json
from pathlib import Path

import numpy as np


DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
MU = 3.986004415e14
R0 = [-4020338.690396649, 7490566.741852513, 5248299.211589362]
V0 = [-5199.77710904224, -3436.681645356935, 1041.576797498721]
DEG = np.pi / 180.0
HUB = {
    "mHub_kg": 750.0,
    "IHubPntBc_B_kgm2": np.diag([900.0, 800.0, 600.0]).tolist(),
    "r_BcB_B_m": [0.0, 0.0, 1.0],
}
SPINNERS = {
    "mass_kg": [50.0, 20.0],
    "ISPntSc_S_kgm2": [
        np.diag([50.0, 30.0, 40.0]).tolist(),
        [[5.0, 0.5, 0.0], [0.5, 8.0, -0.3], [0.0, -0.3, 6.0]],
    ],
    "dcm_S0B": [[[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]], np.eye(3).tolist()],
    "sHat_S": [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0]],
    "r_SB_B_m": [[0.5, -1.5, -0.5], [0.0, 1.0, 0.5]],
    "r_ScS_S_m": [[1.0, 0.0, -1.0], [0.0, 0.3, 0.2]],
    "k_Nm_per_rad": [100.0, 40.0],
    "c_Nms_per_rad": [5.0, 2.0],
    "theta0_rad": [5 * DEG, -10 * DEG],
    "thetaDot0_radps": [-1 * DEG, 2 * DEG],
    "motor_torque_Nm": [0.3, -0.1],
    "thetaRef_rad": [20 * DEG, 0.0],
}
ATTACHED = {"unit": 0, "extForce_B_N": [-0.4, 0.1, 0.25], "extTorquePntB_B_Nm": [0.02, -0.03, 0.06]}
PANEL_TORQUE = {"unit": 0, "extTorquePntB_B_Nm": [0.05, 0.1, -0.02]}
TIME = {"step_s": 0.01, "duration_s": 10.0, "sample_interval_s": 0.5}
OMEGA0 = [0.1, -0.1, 0.1]


def _col(v):
    return [[float(x)] for x in v]


def run(case):
    from Basilisk.architecture import messaging
    from Basilisk.simulation import (
        extForceTorque,
        hingedRigidBodyStateEffector,
        spacecraft,
        spinningBodyOneDOFStateEffector,
        svIntegrators,
    )
    from Basilisk.utilities import SimulationBaseClass, macros, simIncludeGravBody

    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("p")
    proc.addTask(sim.CreateNewTask("t", macros.sec2nano(TIME["step_s"])))
    sc = spacecraft.Spacecraft()
    sc.hub.mHub = HUB["mHub_kg"]
    sc.hub.IHubPntBc_B = HUB["IHubPntBc_B_kgm2"]
    sc.hub.r_BcB_B = _col(HUB["r_BcB_B_m"])
    sc.hub.r_CN_NInit = _col(R0)
    sc.hub.v_CN_NInit = _col(V0)
    sc.hub.sigma_BNInit = _col([0, 0, 0])
    sc.hub.omega_BN_BInit = _col(OMEGA0)
    integ = svIntegrators.svIntegratorRK4(sc)
    sc.setIntegrator(integ)
    keep = [integ]
    if case != "panel_torque":
        fac = simIncludeGravBody.gravBodyFactory()
        earth = fac.createEarth()
        earth.mu = MU
        earth.isCentralBody = True
        fac.addBodiesTo(sc)
        keep += [fac, earth]
    bodies = []
    if case == "panel_torque":
        spec = json.loads((DATA / "hinged_panels_undamped.json").read_text())
        for i, p in enumerate(spec["effectors"][0]["panels"]):
            hp = hingedRigidBodyStateEffector.HingedRigidBodyStateEffector()
            hp.ModelTag = p["name"]
            hp.mass, hp.d, hp.k, hp.c = (
                p["mass_kg"],
                p["d_m"],
                p["k_Nm_per_rad"],
                p["c_Nms_per_rad"],
            )
            hp.IPntS_S = p["IPntS_S_kgm2"]
            hp.r_HB_B = _col(p["r_HB_B_m"])
            hp.dcm_HB = p["dcm_HB"]
            hp.thetaInit, hp.thetaDotInit = p["theta0_rad"], p["thetaDot0_radps"]
            if i == PANEL_TORQUE["unit"]:
                ext = extForceTorque.ExtForceTorque()
                ext.ModelTag = "ext"
                ext.extTorquePntB_B = _col(PANEL_TORQUE["extTorquePntB_B_Nm"])
                hp.addDynamicEffector(ext)
                sim.AddModelToTask("t", ext)
                keep.append(ext)
            sc.addStateEffector(hp)
            sim.AddModelToTask("t", hp)
            bodies.append((hp, hp.hingedRigidBodyOutMsg))
    else:
        S = SPINNERS
        for i in range(2):
            sb = spinningBodyOneDOFStateEffector.SpinningBodyOneDOFStateEffector()
            sb.ModelTag = f"sb{i}"
            sb.mass = S["mass_kg"][i]
            sb.IPntSc_S = S["ISPntSc_S_kgm2"][i]
            sb.dcm_S0B = S["dcm_S0B"][i]
            sb.sHat_S = _col(S["sHat_S"][i])
            sb.r_SB_B = _col(S["r_SB_B_m"][i])
            sb.r_ScS_S = _col(S["r_ScS_S_m"][i])
            sb.k, sb.c = S["k_Nm_per_rad"][i], S["c_Nms_per_rad"][i]
            sb.thetaInit, sb.thetaDotInit = S["theta0_rad"][i], S["thetaDot0_radps"][i]
            pl = messaging.ArrayMotorTorqueMsgPayload()
            pl.motorTorque = [S["motor_torque_Nm"][i]]
            msg = messaging.ArrayMotorTorqueMsg().write(pl)
            sb.motorTorqueInMsg.subscribeTo(msg)
            rp = messaging.HingedRigidBodyMsgPayload()
            rp.theta, rp.thetaDot = S["thetaRef_rad"][i], 0.0
            rmsg = messaging.HingedRigidBodyMsg().write(rp)
            sb.spinningBodyRefInMsg.subscribeTo(rmsg)
            keep += [pl, msg, rp, rmsg]
            if case == "attached" and i == ATTACHED["unit"]:
                ext = extForceTorque.ExtForceTorque()
                ext.ModelTag = "ext"
                ext.extForce_B = _col(ATTACHED["extForce_B_N"])
                ext.extTorquePntB_B = _col(ATTACHED["extTorquePntB_B_Nm"])
                sb.addDynamicEffector(ext)
                sim.AddModelToTask("t", ext)
                keep.append(ext)
            sc.addStateEffector(sb)
            sim.AddModelToTask("t", sb)
            bodies.append((sb, sb.spinningBodyOutMsg))
    sim.AddModelToTask("t", sc)
    ns = macros.sec2nano(TIME["sample_interval_s"])
    rec = sc.scStateOutMsg.recorder(ns)
    sim.AddModelToTask("t", rec)
    recs = [m.recorder(ns) for _, m in bodies]
    for r in recs:
        sim.AddModelToTask("t", r)
    sim.InitializeSimulation()
    sim.ConfigureStopTime(macros.sec2nano(TIME["duration_s"]))
    sim.ExecuteSimulation()
    out = {
        "t": np.asarray(rec.times()) * 1e-9,
        "r_BN_N": np.asarray(rec.r_BN_N),
        "v_BN_N": np.asarray(rec.v_BN_N),
        "sigma_BN": np.asarray(rec.sigma_BN),
        "omega_BN_B": np.asarray(rec.omega_BN_B),
        "MRPSwitchCount": np.asarray(rec.MRPSwitchCount),
        "theta": np.stack([np.asarray(r.theta) for r in recs], axis=-1),
        "thetaDot": np.stack([np.asarray(r.thetaDot) for r in recs], axis=-1),
    }
    return out


def main():
    import Basilisk

    arrays = {}
    for case in ["plain", "attached", "panel_torque"]:
        for key, value in run(case).items():
            arrays[f"{case}/{key}"] = value
    np.savez(DATA / "spinning_bodies.npz", **arrays)
    spec = {
        "name": "spinning_bodies",
        "description": __doc__,
        "basilisk_version": getattr(Basilisk, "__version__", "2.12.1"),
        "time": TIME,
        "integrator": "RK4 (classical, fixed step)",
        "gravity": {
            "model": "point mass",
            "mu_m3ps2": MU,
            "central": True,
            "except_case": "panel_torque",
        },
        "hub": HUB,
        "initial_conditions": {
            "r_CN_N_m": R0,
            "v_CN_N_mps": V0,
            "sigma_BN": [0, 0, 0],
            "omega_BN_B_radps": OMEGA0,
            "panel_torque_case": "same hub initial conditions, no gravity; panel states from hinged_panels_undamped",
        },
        "spinners": SPINNERS,
        "attached": ATTACHED,
        "panel_torque": PANEL_TORQUE,
        "npz_keys": sorted(arrays),
    }
    (DATA / "spinning_bodies.json").write_text(json.dumps(spec, indent=1))


if __name__ == "__main__":
    main()
