r"""Ready-made spacecraft: the `combined` benchmark model of the Basilisk cross-validation set.

`combined()` builds the hub (CoM offset) + 3 balanced reaction wheels with constant motor torques +
2 damped hinged panels + Earth point-mass gravity + gravity-gradient torque + constant external torque,
with the initial conditions of `tests/data/combined.json` (Basilisk 2.12.1 run: RK4 at 0.1 s, one
orbit of 5830 s, 10 s samples). Parameters can be overridden, e.g. for Monte Carlo dispersions.
"""

import numpy as np

from ._forces._ext_force_torque import ExtForceTorque
from ._forces._gravity import PointMassGravity
from ._forces._gravity_gradient import GravityGradient
from ._spacecraft._assembly import Spacecraft
from ._spacecraft._hub import Hub


MU_EARTH = 398600441500000.0  # [m^3/s^2]

COMBINED = {
    "step_s": 0.1,
    "duration_s": 5830.0,
    "sample_interval_s": 10.0,
    "mHub_kg": 750.0,
    "IHubPntBc_B": np.diag([900.0, 800.0, 600.0]),
    "r_BcB_B": np.array([0.0, 0.0, 0.2]),
    "r_CN_N": np.array([-658805.429941012, 5957915.462263647, 2879534.467583258]),
    "v_CN_N": np.array([-7471.15850730751, -1784.6975614902449, 1983.3196889273406]),
    "sigma_BN": np.array([0.1, 0.2, -0.1]),
    "omega_BN_B": np.array([0.001, -0.002, 0.0015]),
    "rw_gsHat_B": np.eye(3),
    "rw_Js": np.array([0.1, 0.1, 0.1]),
    "rw_Omega": np.array([50.0, -30.0, 20.0]),
    "rw_motor_torque": np.array([0.001, -0.0005, 0.0008]),
    "panel_mass": np.array([100.0, 100.0]),
    "panel_IPntS_S": np.array([np.diag([100.0, 50.0, 50.0])] * 2),
    "panel_d": np.array([1.5, 1.5]),
    "panel_k": np.array([300.0, 300.0]),
    "panel_c": np.array([30.0, 30.0]),
    "panel_r_HB_B": np.array([[0.5, 0.0, 1.0], [-0.5, 0.0, 1.0]]),
    "panel_dcm_HB": np.array([np.diag([-1.0, -1.0, 1.0]), np.eye(3)]),
    "panel_theta0": np.array([0.08726646259971647, -0.05235987755982989]),
    "panel_thetaDot0": np.array([0.01, -0.02]),
    "ext_torque_B": np.array([0.0001, -0.0002, 5e-05]),
}


def combined(state_effectors: bool = True, **overrides):
    """The `combined` benchmark spacecraft and its initial state.

    **Arguments:**

    - `state_effectors`: include the reaction wheels and hinged panels (when `False`: hub, gravity,
      gravity gradient and external torque only).
    - `overrides`: replace entries of `COMBINED` (same keys, same units).

    **Returns:** `(spacecraft, y0, config)`.
    """
    p = dict(COMBINED)
    unknown = set(overrides) - set(p)
    if unknown:
        raise ValueError(f"combined: unknown parameter(s) {sorted(unknown)}; known: {sorted(p)}.")
    p.update(overrides)
    earth = PointMassGravity(MU_EARTH, name="earth")
    dyn = [GravityGradient(earth), ExtForceTorque(torque_B=p["ext_torque_B"], name="ext_torque")]
    states = []
    if state_effectors:
        from ._actuators._reaction_wheels import ReactionWheels
        from ._bodies._hinged_rigid_bodies import HingedRigidBodies

        states.append(
            ReactionWheels(
                p["rw_gsHat_B"],
                p["rw_Js"],
                Omega=p["rw_Omega"],
                motor_torque=p["rw_motor_torque"],
                name="rw",
            )
        )
        states.append(
            HingedRigidBodies(
                p["panel_mass"],
                p["panel_IPntS_S"],
                p["panel_d"],
                p["panel_k"],
                p["panel_r_HB_B"],
                p["panel_dcm_HB"],
                c=p["panel_c"],
                theta0=p["panel_theta0"],
                thetaDot0=p["panel_thetaDot0"],
                name="panels",
            )
        )
    sc = Spacecraft(
        Hub(p["mHub_kg"], p["IHubPntBc_B"], p["r_BcB_B"]),
        state_effectors=states,
        dynamic_effectors=dyn,
        gravity=(earth,),
        name="combined",
    )
    y0 = sc.init_state(p["r_CN_N"], p["v_CN_N"], p["sigma_BN"], p["omega_BN_B"])
    return sc, y0, p
