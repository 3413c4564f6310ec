r"""Closed-loop reaction-wheel slew in real Basilisk (`bsk` 2.12.1): the cross-validation reference of
`effectors._fsw._flight_software` (`tests/effectors/test_flight_software.py`).

Scenario (`SCENARIO`, all SI units): a rigid hub with three balanced reaction wheels, no gravity, no
external loads; flight software `simpleNav -> inertial3D -> attTrackingError -> mrpFeedback ->
rwMotorTorque` on its own task at `fsw_dt`; the spacecraft (RK4) and the wheel effector on a dynamics
task at `dyn_dt`. Basilisk is an optional dependency: import this module freely, call `run()` only
when `Basilisk` is importable.

**Task ordering (what the jaxsim side must reproduce).** One process, two tasks; the dynamics task
has the higher priority, so at a time $t_k$ where both are due it runs first:

1. the wheel effector reads the motor-torque message (written by the FSW at $t_{k-1}$, or never
   written: zeros, at $t = 0$) and holds it for the coming integration step;
2. the spacecraft integrates $[t_{k-1}, t_k]$ (nothing at $t = 0$) and writes its state and the
   wheel speeds at $t_k$;
3. the FSW task then reads the state at $t_k$ and writes the command used over $[t_k, t_{k+1}]$.

So the command of the FSW call at $t_k$ is a function of $y(t_k)$ held over $[t_k, t_{k+1}]$, and the
**first call is at $t = 0$** (its command, from $y_0$, acts over $[0, \Delta t_{fsw}]$).
`mrpFeedback`'s integral uses $\Delta t = 0$ on every call while its stored prior time is 0, i.e. on
the calls at $t=0$ and $t=\Delta t_{fsw}$ (Basilisk's `priorTime == 0` rule).

Usage:

```python
from tests.reference import basilisk_slew as bsl
out = bsl.run()                       # dict of numpy arrays: t, sigma_BN, omega_BN_B, Omega, u_cmd
out = bsl.run(duration=30.0, K=1.0)   # overrides of SCENARIO entries
```
"""

from __future__ import annotations

import time

import numpy as np

from tests.reference.basilisk_scenarios import point_mass_earth, rk4_spacecraft


# Basilisk's recorded time stamps are integer nanoseconds.
_NS = 1e-9

SCENARIO = {
    # Hub inertia about its CoM (B = Bc), wheels included (Basilisk's balanced-wheel convention).
    "I_B": [[15.0, 0.5, -0.3], [0.5, 12.0, 0.2], [-0.3, 0.2, 10.0]],
    "mass": 300.0,
    # Three wheels, non-orthogonal spin axes (normalised in `gsHat_B()`).
    "gs_B": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.3, 0.3, 1.0]],
    "Js": [0.05, 0.05, 0.06],
    "Omega0": [10.0, -20.0, 30.0],  # [rad/s]
    "sigma_BN0": [0.3, -0.2, 0.25],
    "omega_BN_B0": [0.0, 0.0, 0.0],
    "sigma_RN": [-0.1, 0.15, 0.05],  # inertial reference attitude
    # mrpFeedback gains: K [N m], P [N m s], Ki [1/s], integral limit [-].
    "K": 4.0,
    "P": 7.0,
    "Ki": 0.002,
    "integral_limit": 0.05,
    "known_torque_B": [0.0, 0.0, 0.0],
    "control_law_type": 0,
    "fsw_dt": 0.1,
    "dyn_dt": 0.05,
    "duration": 100.0,
    "sample_dt": 1.0,
    # Guidance: "inertial3D" (the constant `sigma_RN`), "hillPoint" or "velocityPoint" (orbit
    # frames about a point-mass Earth of parameter `mu` [m^3/s^2], from `r_CN_N` [m], `v_CN_N` [m/s];
    # `mu` None: no gravity).
    # "sunSafePoint": align body axis `sHat_c_B` with the sun at `r_sun_N` [m] (simpleNav's sun
    # heading), spinning about it at `sun_spin_rate` [rad/s].
    "guidance": "inertial3D",
    "mu": None,
    "r_CN_N": [0.0, 0.0, 0.0],
    "v_CN_N": [0.0, 0.0, 0.0],
    "r_sun_N": [1.40e11, 4.0e10, -3.0e9],
    "sHat_c_B": [0.0, 0.0, 1.0],
    "sun_spin_rate": 0.01,
}


def gsHat_B(scenario=None) -> np.ndarray:
    """The wheels' unit spin axes, `(3, 3)` rows."""
    s = SCENARIO if scenario is None else scenario
    g = np.asarray(s["gs_B"], float)
    return g / np.linalg.norm(g, axis=1, keepdims=True)


def build_jaxsim(scenario=None, *, tick_at_t0=True):
    """`(spacecraft, fsw, y0)`: the same scenario in jaxsim (hub, wheels, `fx.RWAttitudeFSW` on
    its own clock), for `tests/effectors/test_flight_software.py` and `benchmarks/bench_slew.py`."""
    import jax.numpy as jnp

    import effectors as fx
    import jaxsim as js

    s = SCENARIO if scenario is None else scenario
    g = gsHat_B(s)
    hub = fx.Hub(s["mass"], s["I_B"], [0.0, 0.0, 0.0])
    rw = fx.ReactionWheels(g, s["Js"], Omega=s["Omega0"], name="rw")
    gravity = () if s["mu"] is None else (fx.PointMassGravity(s["mu"]),)
    sc = fx.Spacecraft(hub, state_effectors=(rw,), gravity=gravity)
    ctrl = fx.MRPFeedback(
        s["K"],
        s["P"],
        s["I_B"],
        Ki=s["Ki"],
        integral_limit=s["integral_limit"],
        known_torque_B=s["known_torque_B"],
        gsHat_B=g,
        Js=s["Js"],
        control_law_type=s["control_law_type"],
    )
    if s["guidance"] == "inertial3D":
        ref = {"sigma_RN": s["sigma_RN"]}
    elif s["guidance"] == "hillPoint":
        ref = {"guidance": fx.HillPoint(), "tracking": fx.AttTrackingError()}
    elif s["guidance"] == "sunSafePoint":
        ref = {
            "guidance": fx.SunSafePoint(s["sHat_c_B"], sun_axis_spin_rate=s["sun_spin_rate"]),
            "r_sun_N": s["r_sun_N"],
        }
    else:
        ref = {"guidance": fx.VelocityPoint(s["mu"]), "tracking": fx.AttTrackingError()}
    fsw = fx.RWAttitudeFSW(
        js.Clock(s["fsw_dt"]), ctrl, fx.RWMotorTorque(g), **ref, tick_at_t0=tick_at_t0
    )
    y0 = sc.init_state(
        jnp.asarray(s["r_CN_N"], float),
        jnp.asarray(s["v_CN_N"], float),
        jnp.asarray(s["sigma_BN0"]),
        jnp.asarray(s["omega_BN_B0"]),
    )
    return sc, fsw, y0


def run(timing: dict | None = None, **overrides) -> dict:
    """Build and run the scenario (with `overrides` of `SCENARIO` entries).

    Returns float64 arrays sampled every `sample_dt` from t = 0 (inclusive) to `duration`:
    `t` [s], `sigma_BN`, `omega_BN_B` [rad/s], `Omega` (wheel speeds) [rad/s] and `u_cmd` (the
    `rwMotorTorque` output message at the sample time) [N m]. A `timing` dict, if given, receives
    `execute_s`: the wall time [s] of `ExecuteSimulation()` alone (for `benchmarks/bench_slew.py`).
    """
    from Basilisk.architecture import messaging
    from Basilisk.fswAlgorithms import (
        attTrackingError,
        hillPoint,
        inertial3D,
        mrpFeedback,
        rwMotorTorque,
        sunSafePoint,
        velocityPoint,
    )
    from Basilisk.simulation import reactionWheelStateEffector, simpleNav
    from Basilisk.utilities import SimulationBaseClass, macros

    s = dict(SCENARIO)
    unknown = set(overrides) - set(s)
    if unknown:
        raise ValueError(f"basilisk_slew.run: unknown scenario entries {sorted(unknown)!r}.")
    s.update(overrides)
    keep = []

    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("proc")
    # Higher priority runs first at a shared time: dynamics before flight software.
    proc.addTask(sim.CreateNewTask("dynTask", macros.sec2nano(s["dyn_dt"])), 200)
    proc.addTask(sim.CreateNewTask("fswTask", macros.sec2nano(s["fsw_dt"])), 100)

    sc = rk4_spacecraft(
        keep,
        "slewSat",
        s["mass"],
        s["I_B"],
        r_CN_N=s["r_CN_N"],
        v_CN_N=s["v_CN_N"],
        sigma_BN=s["sigma_BN0"],
        omega_BN_B=s["omega_BN_B0"],
    )
    if s["mu"] is not None:
        point_mass_earth(keep, sc, s["mu"])

    g = gsHat_B(s)
    rw = reactionWheelStateEffector.ReactionWheelStateEffector()
    rw.ModelTag = "rw"
    for i in range(len(g)):
        cfg = reactionWheelStateEffector.RWConfigPayload()
        cfg.RWModel = messaging.BalancedWheels
        cfg.gsHat_B = [[float(x)] for x in g[i]]
        cfg.w2Hat0_B = [[0.0], [0.0], [0.0]]
        cfg.w3Hat0_B = [[0.0], [0.0], [0.0]]
        cfg.rWB_B = [[0.0], [0.0], [0.0]]
        cfg.Js = float(s["Js"][i])
        cfg.Jt = 0.5 * float(s["Js"][i])
        cfg.Jg = 0.5 * float(s["Js"][i])
        cfg.mass = 1.0
        cfg.Omega = float(s["Omega0"][i])
        cfg.fCoulomb = 0.0
        cfg.fStatic = 0.0
        cfg.cViscous = 0.0
        cfg.betaStatic = -1.0
        cfg.u_max = -1.0
        cfg.u_min = 0.0
        cfg.Omega_max = -1.0
        cfg.P_max = -1.0
        cfg.label = f"rw{i}"
        rw.addReactionWheel(cfg)
        keep.append(cfg)
    sc.addStateEffector(rw)
    sim.AddModelToTask("dynTask", rw)
    sim.AddModelToTask("dynTask", sc)

    # --- flight software (insertion order = execution order inside the task)
    nav = simpleNav.SimpleNav()
    nav.ModelTag = "nav"
    nav.scStateInMsg.subscribeTo(sc.scStateOutMsg)
    sim.AddModelToTask("fswTask", nav)

    if s["guidance"] == "sunSafePoint":
        sun = messaging.SpicePlanetStateMsg()
        sun_p = messaging.SpicePlanetStateMsgPayload()
        sun_p.PositionVector = [float(x) for x in s["r_sun_N"]]
        sun.write(sun_p)
        nav.sunStateInMsg.subscribeTo(sun)
        keep += [sun, sun_p]
        ref = sunSafePoint.sunSafePoint()
        ref.sHatBdyCmd = [float(x) for x in s["sHat_c_B"]]
        ref.sunAxisSpinRate = float(s["sun_spin_rate"])
        ref.sunDirectionInMsg.subscribeTo(nav.attOutMsg)
        ref.imuInMsg.subscribeTo(nav.attOutMsg)
    elif s["guidance"] == "inertial3D":
        ref = inertial3D.inertial3D()
        ref.sigma_R0N = [float(x) for x in s["sigma_RN"]]
    elif s["guidance"] == "hillPoint":
        ref = hillPoint.hillPoint()
        ref.transNavInMsg.subscribeTo(nav.transOutMsg)
    else:
        ref = velocityPoint.velocityPoint()
        ref.mu = float(s["mu"])
        ref.transNavInMsg.subscribeTo(nav.transOutMsg)
    ref.ModelTag = s["guidance"]
    sim.AddModelToTask("fswTask", ref)

    if s["guidance"] == "sunSafePoint":
        guid_msg = ref.attGuidanceOutMsg
    else:
        err = attTrackingError.attTrackingError()
        err.ModelTag = "attError"
        err.attNavInMsg.subscribeTo(nav.attOutMsg)
        err.attRefInMsg.subscribeTo(ref.attRefOutMsg)
        sim.AddModelToTask("fswTask", err)
        guid_msg = err.attGuidOutMsg

    I_flat = [float(x) for x in np.asarray(s["I_B"], float).reshape(9)]
    veh = messaging.VehicleConfigMsgPayload(ISCPntB_B=I_flat)
    veh_msg = messaging.VehicleConfigMsg().write(veh)
    rw_params = messaging.RWArrayConfigMsgPayload()
    rw_params.GsMatrix_B = [float(x) for x in g.reshape(-1)]
    rw_params.JsList = [float(x) for x in s["Js"]]
    rw_params.uMax = [-1.0] * len(g)
    rw_params.numRW = len(g)
    rw_params_msg = messaging.RWArrayConfigMsg().write(rw_params)
    keep += [veh, veh_msg, rw_params, rw_params_msg]

    ctrl = mrpFeedback.mrpFeedback()
    ctrl.ModelTag = "mrpFeedback"
    ctrl.K = float(s["K"])
    ctrl.P = float(s["P"])
    ctrl.Ki = float(s["Ki"])
    ctrl.integralLimit = float(s["integral_limit"])
    ctrl.knownTorquePntB_B = [float(x) for x in s["known_torque_B"]]
    ctrl.controlLawType = int(s["control_law_type"])
    ctrl.guidInMsg.subscribeTo(guid_msg)
    ctrl.vehConfigInMsg.subscribeTo(veh_msg)
    ctrl.rwParamsInMsg.subscribeTo(rw_params_msg)
    ctrl.rwSpeedsInMsg.subscribeTo(rw.rwSpeedOutMsg)
    sim.AddModelToTask("fswTask", ctrl)

    mt = rwMotorTorque.rwMotorTorque()
    mt.ModelTag = "rwMotorTorque"
    mt.controlAxes_B = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    mt.vehControlInMsg.subscribeTo(ctrl.cmdTorqueOutMsg)
    mt.rwParamsInMsg.subscribeTo(rw_params_msg)
    sim.AddModelToTask("fswTask", mt)
    rw.rwMotorCmdInMsg.subscribeTo(mt.rwMotorTorqueOutMsg)

    ns = macros.sec2nano(s["sample_dt"])
    rec_state = sc.scStateOutMsg.recorder(ns)
    rec_rw = rw.rwSpeedOutMsg.recorder(ns)
    sim.AddModelToTask("dynTask", rec_state)
    sim.AddModelToTask("dynTask", rec_rw)
    # The command is written by the FSW task: record it there (after rwMotorTorque).
    rec_u = mt.rwMotorTorqueOutMsg.recorder(ns)
    sim.AddModelToTask("fswTask", rec_u)

    sim.InitializeSimulation()
    sim.ConfigureStopTime(macros.sec2nano(s["duration"]))
    t_exec = time.perf_counter()
    sim.ExecuteSimulation()
    if timing is not None:
        timing["execute_s"] = time.perf_counter() - t_exec

    f = lambda a: np.asarray(a, dtype=float)
    n = len(g)
    return {
        "t": f(rec_state.times()) * _NS,
        "sigma_BN": f(rec_state.sigma_BN),
        "omega_BN_B": f(rec_state.omega_BN_B),
        "Omega": f(rec_rw.wheelSpeeds)[:, :n],
        "u_cmd": f(rec_u.motorTorque)[:, :n],
    }


if __name__ == "__main__":
    out = run()
    print({k: v.shape for k, v in out.items()})
    print("sigma_BN(end)", out["sigma_BN"][-1], "omega(end)", out["omega_BN_B"][-1])
    print("Omega(end)", out["Omega"][-1])
