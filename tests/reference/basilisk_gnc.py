r"""Standalone runs of real Basilisk (`bsk` 2.12.1) guidance and sensor modules: the cross-validation
references of `effectors._gnc` (`tests/effectors/gnc/`).

Each run builds one Basilisk process with one task at `dt`, adds the module under test, connects
its input messages to stand-alone messages written from Python, and steps the task one tick at a
time: before the tick at $t_k = k\,\Delta t$ the inputs of tick $k$ are written, then
`ExecuteSimulation` to $t_k$ runs the module's update once, then the output message is read. So a
module sees exactly the inputs written for its tick (what the jaxsim discrete model sees as the
pre-tick state), and the sequence of calls (the first at $t = 0$) is Basilisk's.

Basilisk is an optional dependency: import this module freely, call the runners only when
`Basilisk` is importable.

Usage:

```python
from tests.reference import basilisk_gnc as bg
out = bg.run_module("hillPoint", {}, inputs, outputs={"attRefOutMsg": ("sigma_RN", ...)})
```
"""

from __future__ import annotations

import numpy as np


# (package, module) of each Basilisk module used here.
_MODULES = {
    "inertial3D": "fswAlgorithms",
    "hillPoint": "fswAlgorithms",
    "velocityPoint": "fswAlgorithms",
    "sunSafePoint": "fswAlgorithms",
    "locationPointing": "fswAlgorithms",
    "attTrackingError": "fswAlgorithms",
    "thrFiringSchmitt": "fswAlgorithms",
    "simpleNav": "simulation",
    "starTracker": "simulation",
    "magnetometer": "simulation",
    "magneticFieldCenteredDipole": "simulation",
    "coarseSunSensor": "simulation",
    "imuSensor": "simulation",
}
# Basilisk module class names where they differ from the module name.
_CLASS = {
    "simpleNav": "SimpleNav",
    "starTracker": "StarTracker",
    "magneticFieldCenteredDipole": "MagneticFieldCenteredDipole",
    "coarseSunSensor": "CoarseSunSensor",
    "imuSensor": "ImuSensor",
    "magnetometer": "Magnetometer",
}


def _new_module(name):
    import importlib

    pkg = importlib.import_module(f"Basilisk.{_MODULES[name]}.{name}")
    return getattr(pkg, _CLASS.get(name, name))()


def _set(obj, key, value):
    if isinstance(value, np.ndarray):
        value = value.tolist()
    setattr(obj, key, value)


def run_module(
    name: str,
    config: dict,
    inputs: list[dict],
    outputs: dict,
    *,
    dt: float = 0.5,
    setup=None,
):
    """Run Basilisk module `name` for `len(inputs)` ticks at period `dt` [s] (the first at t = 0).

    - `config`: module attributes to set (`{"sigma_R0N": [...], ...}`).
    - `inputs`: one dict per tick `{input message attribute: (payload type name, {field: value})}`,
      e.g. `{"transNavInMsg": ("NavTransMsgPayload", {"r_BN_N": [...], "v_BN_N": [...]})}`; an
      input absent from a tick keeps its last written value.
    - `outputs`: `{output message attribute: (field, ...)}` read after each tick (an attribute
      may be indexed: `"envOutMsgs[0]"`); the input name `"addSpacecraftToModel"` passes its
      message to that method (environment models).
    - `setup`: optional `setup(module, keep)` called before the run (for configuration that is
      not a plain attribute).

    Returns `{"<msg>.<field>": array (ticks, ...)}` as float64.
    """
    from Basilisk.architecture import messaging
    from Basilisk.utilities import SimulationBaseClass, macros

    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("proc")
    dt_ns = macros.sec2nano(dt)
    proc.addTask(sim.CreateNewTask("task", dt_ns))
    mod = _new_module(name)
    mod.ModelTag = name
    keep = [mod]
    for key, value in config.items():
        _set(mod, key, value)
    if setup is not None:
        setup(mod, keep)
    msgs = {}
    for tick in inputs:
        for attr, (ptype, _) in tick.items():
            if attr not in msgs:
                msg_type = getattr(messaging, ptype.replace("Payload", ""))
                msg = msg_type()
                payload = getattr(messaging, ptype)()
                msg.write(payload)
                if attr == "addSpacecraftToModel":  # environment models take their states so
                    mod.addSpacecraftToModel(msg)
                else:
                    getattr(mod, attr).subscribeTo(msg)
                msgs[attr] = (msg, ptype)
                keep.append(msg)
    sim.AddModelToTask("task", mod)
    sim.InitializeSimulation()
    out = {f"{m}.{f}": [] for m, fields in outputs.items() for f in fields}
    for k, tick in enumerate(inputs):
        for attr, (ptype, fields) in tick.items():
            payload = getattr(messaging, ptype)()
            for f, v in fields.items():
                _set(payload, f, np.asarray(v, float) if not np.isscalar(v) else v)
            msgs[attr][0].write(payload, macros.sec2nano(k * dt))
            keep.append(payload)
        sim.ConfigureStopTime(k * dt_ns)
        sim.ExecuteSimulation()
        for m, fields in outputs.items():
            if m.endswith("]"):  # an indexed output vector, e.g. "envOutMsgs[0]"
                base, idx = m[:-1].split("[")
                data = getattr(mod, base)[int(idx)].read()
            else:
                data = getattr(mod, m).read()
            for f in fields:
                out[f"{m}.{f}"].append(np.asarray(getattr(data, f), dtype=float))
    return {k: np.asarray(v) for k, v in out.items()}


def run_sensor_sim(spec: dict) -> dict:
    """A Basilisk simulation with sensors on their own task: the spacecraft (RK4, point-mass Earth)
    on a dynamics task at `spec["dyn_dt"]` (priority 200), and at `spec["sensor_dt"]` (priority
    100: after the dynamics at a shared time) `starTracker`, `magneticFieldCenteredDipole` ->
    `magnetometer`, one `coarseSunSensor`, `imuSensor` and `simpleNav`, each with recorders.

    `spec` keys: `mass`, `I_B`, `r_CN_N`, `v_CN_N`, `sigma_BN`, `omega_BN_B`, `mu`, `dyn_dt`,
    `sensor_dt`, `duration`, `dcm_CB`, `dipole` (g10, g11, h11, planet_radius), `dcm_SB`,
    `css_nHat_B`, `css_fov`, `r_sun_N`, `dcm_PB`, `gyro_bias`. Returns
    `{"t", "qInrtl2Case", "tam_S", "css", "AngVelPlatform", "DRFramePlatform", "sigma_BN",
    "vehSunPntBdy"}` at each sensor call (t = 0 included).
    """
    from Basilisk.architecture import messaging
    from Basilisk.simulation import (
        coarseSunSensor,
        imuSensor,
        magneticFieldCenteredDipole,
        magnetometer,
        simpleNav,
        starTracker,
    )
    from Basilisk.utilities import SimulationBaseClass, macros

    from tests.reference.basilisk_scenarios import point_mass_earth, rk4_spacecraft

    s = spec
    keep = []
    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("proc")
    proc.addTask(sim.CreateNewTask("dyn", macros.sec2nano(s["dyn_dt"])), 200)
    proc.addTask(sim.CreateNewTask("sens", macros.sec2nano(s["sensor_dt"])), 100)
    sc = rk4_spacecraft(keep, "sc", s["mass"], s["I_B"], r_CN_N=s["r_CN_N"], v_CN_N=s["v_CN_N"],
                        sigma_BN=s["sigma_BN"], omega_BN_B=s["omega_BN_B"])  # fmt: skip
    point_mass_earth(keep, sc, s["mu"])
    sim.AddModelToTask("dyn", sc)
    state = sc.scStateOutMsg

    st = starTracker.StarTracker()
    st.dcm_CB = np.asarray(s["dcm_CB"]).tolist()
    st.scStateInMsg.subscribeTo(state)
    sim.AddModelToTask("sens", st)

    mag = magneticFieldCenteredDipole.MagneticFieldCenteredDipole()
    d = s["dipole"]
    mag.g10, mag.g11, mag.h11, mag.planetRadius = d["g10"], d["g11"], d["h11"], d["planet_radius"]
    mag.addSpacecraftToModel(state)
    sim.AddModelToTask("sens", mag)
    tam = magnetometer.Magnetometer()
    tam.dcm_SB = np.asarray(s["dcm_SB"]).tolist()
    tam.stateInMsg.subscribeTo(state)
    tam.magInMsg.subscribeTo(mag.envOutMsgs[0])
    sim.AddModelToTask("sens", tam)

    sun = messaging.SpicePlanetStateMsg()
    sun_p = messaging.SpicePlanetStateMsgPayload()
    sun_p.PositionVector = list(s["r_sun_N"])
    sun.write(sun_p)
    css = coarseSunSensor.CoarseSunSensor()
    css.nHat_B = list(s["css_nHat_B"])
    css.fov = float(s["css_fov"])
    css.senNoiseStd = 0.0
    css.sunInMsg.subscribeTo(sun)
    css.stateInMsg.subscribeTo(state)
    sim.AddModelToTask("sens", css)

    imu = imuSensor.ImuSensor()
    imu.dcm_PB = np.asarray(s["dcm_PB"]).tolist()
    imu.senRotBias = list(s["gyro_bias"])
    imu.senRotMax = 1e3
    imu.senTransMax = 1e3
    imu.scStateInMsg.subscribeTo(state)
    sim.AddModelToTask("sens", imu)

    nav = simpleNav.SimpleNav()
    nav.scStateInMsg.subscribeTo(state)
    nav.sunStateInMsg.subscribeTo(sun)
    sim.AddModelToTask("sens", nav)

    recs = {
        "st": st.sensorOutMsg.recorder(),
        "tam": tam.tamDataOutMsg.recorder(),
        "css": css.cssDataOutMsg.recorder(),
        "imu": imu.sensorOutMsg.recorder(),
        "nav": nav.attOutMsg.recorder(),
    }
    for r in recs.values():
        sim.AddModelToTask("sens", r)
    keep += [st, mag, tam, sun, sun_p, css, imu, nav]
    sim.InitializeSimulation()
    sim.ConfigureStopTime(macros.sec2nano(s["duration"]))
    sim.ExecuteSimulation()
    f = lambda a: np.asarray(a, dtype=float)  # noqa: E731
    return {
        "t": f(recs["st"].times()) * 1e-9,
        "qInrtl2Case": f(recs["st"].qInrtl2Case),
        "tam_S": f(recs["tam"].tam_S),
        "css": f(recs["css"].OutputData),
        "AngVelPlatform": f(recs["imu"].AngVelPlatform),
        "DRFramePlatform": f(recs["imu"].DRFramePlatform),
        "sigma_BN": f(recs["nav"].sigma_BN),
        "vehSunPntBdy": f(recs["nav"].vehSunPntBdy),
    }
