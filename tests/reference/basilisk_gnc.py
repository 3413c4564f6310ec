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
    - `outputs`: `{output message attribute: (field, ...)}` read after each tick.
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
            data = getattr(mod, m).read()
            for f in fields:
                out[f"{m}.{f}"].append(np.asarray(getattr(data, f), dtype=float))
    return {k: np.asarray(v) for k, v in out.items()}
