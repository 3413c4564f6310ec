r"""Thruster burns commanded by on-time messages in real Basilisk (`bsk` 2.12.1): the cross-validation
reference of `effectors.Thrusters` (on-time commands) and `effectors.ThrusterStateEffector`
(`tests/effectors/test_thrusters.py`, `tests/effectors/test_thruster_state_effector.py`).

Scenario (`SCENARIO`, SI units): a rigid hub (centre of mass at $B$), no gravity unless `mu` is
set; a set of thrusters (Basilisk `thrusterDynamicEffector`, or `thrusterStateEffector` with
`state=True`); a flight-software module on its own task that writes a `THRArrayOnTimeCmdMsg` at
the times of `commands` (a list of `(t, [on-time per thruster])`, times on the FSW task grid).

**Task ordering.** One process, two tasks; the dynamics task (thruster module first, then the
spacecraft) has the higher priority, so at a time $t_k$ where both are due:

1. the thruster module reads the command message if it was rewritten since its last read (written
   at $t_{k-1}$ or earlier): the firing starts at the time the message was *written*;
2. the spacecraft integrates $[t_{k-1}, t_k]$;
3. the FSW task writes the command of $t_k$ (if any), read at the next dynamics tick.

So a command written at $t_c$ acts from the first stage of the step that starts at $t_c$, as a
discrete model's held output written at a clock tick does in jaxsim.

Usage:

```python
from tests.reference import basilisk_thrusters as bth
out = bth.run()                                   # dict of float64 arrays (see `run`)
out = bth.run(state=True, commands=[(0.0, [2.0, 0.0])])
```
"""

from __future__ import annotations

import numpy as np

from tests.reference.basilisk_scenarios import point_mass_earth, rk4_spacecraft


_NS = 1e-9  # Basilisk's recorded time stamps are integer nanoseconds

SCENARIO = {
    "mass": 500.0,
    "I_B": [[100.0, 2.0, -1.0], [2.0, 120.0, 1.5], [-1.0, 1.5, 80.0]],
    "r_CN_N0": [7.0e6, 1.0e5, -2.0e5],  # [m]
    "v_CN_N0": [10.0, 7.5e3, 5.0],  # [m/s]
    "sigma_BN0": [0.1, -0.2, 0.3],
    "omega_BN_B0": [0.01, -0.02, 0.015],  # [rad/s]
    "mu": 0.0,  # [m^3/s^2]; 0: no gravity
    # Thrusters: location [m], direction [-] (normalised here), max thrust [N], Isp [s].
    "r_TB_B": [[0.0, 0.0, -1.0], [0.5, 0.2, 0.1], [-0.3, 0.6, 0.0]],
    "tHat_B": [[0.0, 0.0, 1.0], [0.0, 0.6, 0.8], [1.0, 0.0, 0.0]],
    "max_thrust": [2.0, 1.5, 0.8],
    "Isp": [220.0, 70.0, 150.0],
    "min_on_time": [0.0, 0.0, 0.0],  # [s]
    "cutoff_frequency": [10.0, 5.0, 2.0],  # [rad/s] (state effector only)
    "update_only": True,  # Basilisk's default: no mass-depletion force/torque terms
    "area_nozzle": [0.0, 0.0, 0.0],  # [m^2]
    "swirl_torque": [0.0, 0.0, 0.0],  # [N m]
    "state": False,  # thrusterStateEffector instead of thrusterDynamicEffector
    # thrusterStateEffector only: also sample its integrated thrust factors (the `kappaState`
    # state, not the reported factor of the last stage) by running to each sample time in turn.
    "kappa_state": False,
    # (write time [s], on-time per thruster [s]); an on-time of 0 stops a firing.
    "commands": [(0.0, [2.0, 0.0, 0.0]), (1.0, [0.0, 1.25, 0.0]), (3.0, [1.5, 0.0, 2.0])],
    # None, or a fuel tank fed by the thruster set (Basilisk `fuelTank`, added to the dynamics task
    # after the spacecraft so that its message reports the mass at the step end): `model` (a
    # `basilisk_fuel_tank.MODELS` name), `prop_mass_init` [kg], `radius` [m], optional `length` [m],
    # `r_TcT_T` [m], `r_TB_B` [m], `update_only`.
    "tank": None,
    "fsw_dt": 0.5,
    "dyn_dt": 0.25,
    "duration": 8.0,
    "sample_dt": 0.25,
}


def tHat_B(scenario=None) -> np.ndarray:
    """The thrust directions, normalised (as the jaxsim side receives them)."""
    d = np.asarray((scenario or SCENARIO)["tHat_B"], dtype=float)
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def run(**overrides) -> dict:
    """Build and run the scenario with `overrides` of `SCENARIO` entries.

    Returns float64 arrays sampled every `sample_dt` from t = 0 to `duration`: `t` [s], `r_BN_N`,
    `v_BN_N` [m, m/s], `sigma_BN`, `omega_BN_B` [rad/s], `massSC` [kg], `thrust_factor` (n,) and
    `thrust_force_B` (n, 3) [N] from the thrusters' output messages, and `mDot_total` [kg/s]
    (the effector's last computed total mass flow, read after the run); with `kappa_state`, also
    `kappa` (n,) (the integrated thrust factors at the sample times); with a `tank`, also
    `fuelMass` [kg] and `fuelMassDot` [kg/s] (its `fuelTankOutMsg`).
    """
    from Basilisk.architecture import messaging, sysModel
    from Basilisk.simulation import thrusterDynamicEffector, thrusterStateEffector
    from Basilisk.utilities import SimulationBaseClass, macros

    s = dict(SCENARIO)
    unknown = set(overrides) - set(s)
    if unknown:
        raise ValueError(f"basilisk_thrusters.run: unknown scenario entries {sorted(unknown)!r}.")
    s.update(overrides)
    keep = []

    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("proc")
    proc.addTask(sim.CreateNewTask("dynTask", macros.sec2nano(s["dyn_dt"])), 200)
    proc.addTask(sim.CreateNewTask("fswTask", macros.sec2nano(s["fsw_dt"])), 100)

    sc = rk4_spacecraft(
        keep,
        "thrSat",
        s["mass"],
        s["I_B"],
        r_CN_N=s["r_CN_N0"],
        v_CN_N=s["v_CN_N0"],
        sigma_BN=s["sigma_BN0"],
        omega_BN_B=s["omega_BN_B0"],
    )
    if s["mu"]:
        point_mass_earth(keep, sc, s["mu"])

    mod = thrusterStateEffector if s["state"] else thrusterDynamicEffector
    thr = mod.ThrusterStateEffector() if s["state"] else mod.ThrusterDynamicEffector()
    thr.ModelTag = "thrusters"
    d = tHat_B(s)
    n = len(d)
    for i in range(n):
        cfg = mod.THRSimConfig()
        cfg.thrLoc_B = [[float(x)] for x in s["r_TB_B"][i]]
        cfg.thrDir_B = [[float(x)] for x in d[i]]
        cfg.MaxThrust = float(s["max_thrust"][i])
        cfg.steadyIsp = float(s["Isp"][i])
        cfg.MinOnTime = float(s["min_on_time"][i])
        cfg.cutoffFrequency = float(s["cutoff_frequency"][i])
        cfg.updateOnly = bool(s["update_only"])
        cfg.areaNozzle = float(s["area_nozzle"][i])
        cfg.MaxSwirlTorque = float(s["swirl_torque"][i])
        thr.addThruster(cfg)
        keep.append(cfg)

    cmd_msg = messaging.THRArrayOnTimeCmdMsg()
    thr.cmdsInMsg.subscribeTo(cmd_msg)
    if s["state"]:
        sc.addStateEffector(thr)
    else:
        sc.addDynamicEffector(thr)
    sim.AddModelToTask("dynTask", thr)
    sim.AddModelToTask("dynTask", sc)
    tank = None
    if s["tank"] is not None:
        from Basilisk.simulation import fuelTank

        tk = s["tank"]
        tank = fuelTank.FuelTank()
        tank.ModelTag = "tank"
        model = getattr(fuelTank, "FuelTankModel" + tk["model"])()
        model.propMassInit = float(tk["prop_mass_init"])
        model.r_TcT_TInit = [[float(x)] for x in tk.get("r_TcT_T", [0.0, 0.0, 0.0])]
        model.radiusTankInit = float(tk["radius"])
        if "length" in tk:
            model.lengthTank = float(tk["length"])
        tank.setTankModel(model)
        tank.setR_TB_B([[float(x)] for x in tk.get("r_TB_B", [0.0, 0.0, 0.0])])
        tank.setUpdateOnly(bool(tk.get("update_only", True)))
        sc.addStateEffector(tank)
        tank.addThrusterSet(thr)
        sim.AddModelToTask("dynTask", tank)
        keep += [model, tank]

    table = {int(round(float(t) / _NS)): [float(x) for x in T] for t, T in s["commands"]}

    class OnTimeFSW(sysModel.SysModel):
        """Writes the scheduled on-time command at its write time (nothing otherwise)."""

        def UpdateState(self, CurrentSimNanos):
            T = table.get(int(CurrentSimNanos))
            if T is not None:
                payload = messaging.THRArrayOnTimeCmdMsgPayload()
                payload.OnTimeRequest = T + [0.0] * (len(payload.OnTimeRequest) - len(T))
                cmd_msg.write(payload, CurrentSimNanos, self.moduleID)

    fsw = OnTimeFSW()
    fsw.ModelTag = "onTimeFSW"
    sim.AddModelToTask("fswTask", fsw)
    keep += [fsw, cmd_msg]

    ns = macros.sec2nano(s["sample_dt"])
    rec = {"state": sc.scStateOutMsg.recorder(ns), "mass": sc.scMassOutMsg.recorder(ns)}
    thr_rec = [m.recorder(ns) for m in thr.thrusterOutMsgs]
    if tank is not None:
        rec["tank"] = tank.fuelTankOutMsg.recorder(ns)
    for r in list(rec.values()) + thr_rec:
        sim.AddModelToTask("dynTask", r)

    sim.InitializeSimulation()
    kappa = []
    if s["kappa_state"]:
        if not s["state"]:
            raise ValueError("basilisk_thrusters.run: `kappa_state` needs `state=True`.")
        n_samples = int(round(s["duration"] / s["sample_dt"]))
        for k in range(n_samples + 1):
            if k:
                sim.ConfigureStopTime(k * ns)
                sim.ExecuteSimulation()
            kappa.append(np.asarray(thr.kappaState.getState(), dtype=float).reshape(-1))
    else:
        sim.ConfigureStopTime(macros.sec2nano(s["duration"]))
        sim.ExecuteSimulation()

    f = lambda a: np.asarray(a, dtype=float)
    st = rec["state"]
    out = {"t": f(st.times()) * _NS}
    for k in ("r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B"):
        out[k] = f(getattr(st, k))
    out["massSC"] = f(rec["mass"].massSC)
    out["thrust_factor"] = np.stack([f(r.thrustFactor) for r in thr_rec], axis=1)
    out["thrust_force_B"] = np.stack([f(r.thrustForce_B) for r in thr_rec], axis=1)
    out["mDot_total"] = float(thr.mDotTotal)
    if kappa:
        out["kappa"] = np.stack(kappa)
    if tank is not None:
        out["fuelMass"] = f(rec["tank"].fuelMass)
        out["fuelMassDot"] = f(rec["tank"].fuelMassDot)
    return out
