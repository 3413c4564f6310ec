"""Fuel-tank scenarios in real Basilisk (`bsk` 2.12.1): a hub, fuel tanks (`fuelTank`, every tank
model), thruster sets that drain them (`thrusterDynamicEffector`), an optional point-mass Earth.

Basilisk is an optional cross-validation dependency (`pip install jaxsim-spacecraft[crossval]`); import this
module freely and check `basilisk_scenarios.available()` before running anything. The jaxsim side
of the same scenarios is `jaxsim_scenario(spec)`, so that a test or a notebook builds both from one
spec dict:

```python
spec = {
    "hub": {"mass": 750.0, "IHubPntBc_B": [[900, 0, 0], [0, 800, 0], [0, 0, 600]], "r_BcB_B": [0, 0, 0]},
    "initial": {"r_CN_N": [7e6, 0, 0], "v_CN_N": [0, 7.5e3, 0], "sigma_BN": [0.1, 0.2, -0.3],
                "omega_BN_B": [0.001, -0.01, 0.03]},
    "mu": 3.986004415e14,            # or None: no gravity
    "thrusters": [{"name": "thr", "r_TB_B": [[1, 0, 0]], "tHat_B": [[0, 1, 0]],
                   "max_thrust": [10.0], "Isp": [200.0]}],
    "tanks": [{"name": "tank", "model": "ConstantVolume", "prop_mass_init": 40.0, "radius": 0.5,
               "r_TcT_T": [0, 0, 0], "r_TB_B": [0.1, 0, 0], "dcm_TB": None,
               "update_only": False, "leak_rate": 0.0, "thrusters": ["thr"]}],
    "step": 0.1, "duration": 10.0, "sample_dt": 1.0,
}
out = run(spec)                      # Basilisk samples (numpy)
sc, y0, args = jaxsim_scenario(spec) # the same scenario in jaxsim
```

Conventions that make both sides the same model:

- every thruster fires at full thrust for the whole run. Basilisk: an on-time command longer than
  the run, and the thruster set is added to the task *before* the spacecraft, so that it has read
  its command and fired once (in the spacecraft's zero-length integration at t = 0) before the
  first step: the tank drains from the first RK stage on (a tank reads its thrusters' flow from
  their previous firing evaluation). jaxsim: the throttle command `args[name]["throttle"] = 1`.
  At initialization neither sees a firing thruster (Basilisk's `Reset` runs before any command;
  jaxsim's `init_state` gets no `args`), so both place $B$ with the same $\\mathbf c'$;
- the tanks are added to the task *after* the spacecraft, so that their `fuelTankOutMsg` reports
  the mass at the end of each step (added before it, the message lags one step).

`run` returns the samples under jaxsim's output names: `t`, `r_BN_N`, `v_BN_N`, `r_CN_N`, `v_CN_N`,
`sigma_BN`, `omega_BN_B`, `massSC`, `c_B`, `ISC_PntB_B`, `totOrbEnergy`, `totRotEnergy`,
`totOrbAngMomPntN_N`, `totRotAngMomPntC_N`, and per tank `<name>_fuelMass`, `<name>_fuelMassDot`.
"""

from __future__ import annotations

import numpy as np

from tests.reference.basilisk_scenarios import _col, _mat, point_mass_earth, rk4_spacecraft


# Basilisk's recorded time stamps are integer nanoseconds.
_NS = 1e-9
# Basilisk tank model classes by the spec's `model` name, with the jaxsim class names.
MODELS = ("ConstantVolume", "ConstantDensity", "Emptying", "UniformBurn", "CentrifugalBurn")
# On-time command [s] longer than any run: the thrusters fire throughout.
_ON_TIME = 1.0e6


def run(spec: dict) -> dict:
    """Build and run the spec in Basilisk (RK4 at `spec["step"]`); the sampled outputs."""
    from Basilisk.architecture import messaging
    from Basilisk.simulation import fuelTank, thrusterDynamicEffector
    from Basilisk.utilities import SimulationBaseClass, macros

    keep = []  # Python references that must outlive the run
    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("dynProcess")
    proc.addTask(sim.CreateNewTask("dynTask", macros.sec2nano(spec["step"])))

    hub, ic = spec["hub"], spec["initial"]
    sc = rk4_spacecraft(
        keep,
        "spacecraft",
        hub["mass"],
        hub["IHubPntBc_B"],
        r_BcB_B=hub.get("r_BcB_B", [0.0, 0.0, 0.0]),
        r_CN_N=ic["r_CN_N"],
        v_CN_N=ic["v_CN_N"],
        sigma_BN=ic["sigma_BN"],
        omega_BN_B=ic["omega_BN_B"],
    )
    if spec.get("mu") is not None:
        point_mass_earth(keep, sc, spec["mu"])

    thruster_sets = {}
    for ts in spec.get("thrusters", []):
        eff = thrusterDynamicEffector.ThrusterDynamicEffector()
        eff.ModelTag = ts["name"]
        r, d = np.asarray(ts["r_TB_B"], float), np.asarray(ts["tHat_B"], float)
        for i in range(r.shape[0]):
            cfg = thrusterDynamicEffector.THRSimConfig()
            cfg.thrLoc_B = _col(r[i])
            cfg.thrDir_B = _col(d[i])
            cfg.MaxThrust = float(ts["max_thrust"][i])
            cfg.steadyIsp = float(ts["Isp"][i])
            # Exhaust momentum terms only with `depletion_loads` (Basilisk `updateOnly = False`).
            cfg.updateOnly = not ts.get("depletion_loads", False)
            cfg.areaNozzle = float(ts.get("area_nozzle", 0.0))
            eff.addThruster(cfg)
            keep.append(cfg)
        payload = messaging.THRArrayOnTimeCmdMsgPayload()
        payload.OnTimeRequest = [_ON_TIME] * r.shape[0]
        msg = messaging.THRArrayOnTimeCmdMsg().write(payload)
        eff.cmdsInMsg.subscribeTo(msg)
        keep += [payload, msg]
        sc.addDynamicEffector(eff)
        thruster_sets[ts["name"]] = eff

    tanks = []
    for tk in spec.get("tanks", []):
        tank = fuelTank.FuelTank()
        tank.ModelTag = tk["name"]
        model = getattr(fuelTank, "FuelTankModel" + tk["model"])()
        model.propMassInit = float(tk["prop_mass_init"])
        model.r_TcT_TInit = _col(tk.get("r_TcT_T", [0.0, 0.0, 0.0]))
        model.radiusTankInit = float(tk["radius"])
        if "length" in tk:
            model.lengthTank = float(tk["length"])
        tank.setTankModel(model)
        tank.setR_TB_B(_col(tk.get("r_TB_B", [0.0, 0.0, 0.0])))
        if tk.get("dcm_TB") is not None:
            tank.setDcm_TB(_mat(tk["dcm_TB"]))
        tank.setUpdateOnly(bool(tk.get("update_only", True)))
        tank.setFuelLeakRate(float(tk.get("leak_rate", 0.0)))
        sc.addStateEffector(tank)
        for name in tk.get("thrusters", []):
            tank.addThrusterSet(thruster_sets[name])
        tanks.append((tk["name"], tank))
        keep.append(model)

    # Task order: thrusters (read their command first), spacecraft, tanks (report after the step).
    for eff in thruster_sets.values():
        sim.AddModelToTask("dynTask", eff)
    sim.AddModelToTask("dynTask", sc)
    for _, tank in tanks:
        sim.AddModelToTask("dynTask", tank)

    ns = macros.sec2nano(spec["sample_dt"])
    rec = {"state": sc.scStateOutMsg.recorder(ns), "mass": sc.scMassOutMsg.recorder(ns)}
    rec["energy"] = sc.logger(
        ["totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"], ns
    )
    for name, tank in tanks:
        rec[name] = tank.fuelTankOutMsg.recorder(ns)
    for r in rec.values():
        sim.AddModelToTask("dynTask", r)

    sim.InitializeSimulation()
    sim.ConfigureStopTime(macros.sec2nano(spec["duration"]))
    sim.ExecuteSimulation()

    f = lambda a: np.asarray(a, dtype=float)
    st, ms, en = rec["state"], rec["mass"], rec["energy"]
    out = {"t": f(st.times()) * _NS}
    for k in ("r_BN_N", "v_BN_N", "r_CN_N", "v_CN_N", "sigma_BN", "omega_BN_B"):
        out[k] = f(getattr(st, k))
    out["massSC"] = f(ms.massSC)
    out["c_B"] = f(ms.c_B)
    out["ISC_PntB_B"] = f(ms.ISC_PntB_B).reshape(-1, 3, 3)
    for k in ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
        out[k] = f(getattr(en, k))
    for name, _ in tanks:
        out[f"{name}_fuelMass"] = f(rec[name].fuelMass)
        out[f"{name}_fuelMassDot"] = f(rec[name].fuelMassDot)
    return out


def tank_model(tk: dict):
    """The jaxsim tank model of a spec tank entry."""
    import effectors as fx

    cls = {
        "ConstantVolume": fx.ConstantVolumeTank,
        "ConstantDensity": fx.ConstantDensityTank,
        "Emptying": fx.EmptyingTank,
        "UniformBurn": fx.UniformBurnTank,
        "CentrifugalBurn": fx.CentrifugalBurnTank,
    }[tk["model"]]
    kw = {"r_TcT_T": tk.get("r_TcT_T")}
    if "length" in tk:
        return cls(tk["prop_mass_init"], tk["radius"], tk["length"], **kw)
    return cls(tk["prop_mass_init"], tk["radius"], **kw)


def jaxsim_scenario(spec: dict):
    """The spec in jaxsim: `(spacecraft, y0, args)`; run it with
    `jaxsim.simulate(sc, y0, spec["duration"], dt=spec["step"], sample_dt=spec["sample_dt"],
    args=args)`."""
    import effectors as fx

    hub, ic = spec["hub"], spec["initial"]
    thrusters = [
        fx.Thrusters(
            ts["r_TB_B"],
            ts["tHat_B"],
            ts["max_thrust"],
            ts["Isp"],
            area_nozzle=ts.get("area_nozzle", 0.0),
            depletion_loads=ts.get("depletion_loads", False),
            name=ts["name"],
        )
        for ts in spec.get("thrusters", [])
    ]
    tanks = [
        fx.FuelTank(
            tank_model(tk),
            r_TB_B=tk.get("r_TB_B"),
            dcm_TB=tk.get("dcm_TB"),
            thrusters=tuple(tk.get("thrusters", ())),
            leak_rate=tk.get("leak_rate", 0.0),
            update_only=bool(tk.get("update_only", True)),
            name=tk["name"],
        )
        for tk in spec.get("tanks", [])
    ]
    gravity = () if spec.get("mu") is None else (fx.PointMassGravity(spec["mu"]),)
    sc = fx.Spacecraft(
        fx.Hub(hub["mass"], hub["IHubPntBc_B"], hub.get("r_BcB_B")),
        state_effectors=tanks,
        dynamic_effectors=thrusters,
        gravity=gravity,
    )
    y0 = sc.init_state(ic["r_CN_N"], ic["v_CN_N"], ic["sigma_BN"], ic["omega_BN_B"])
    args = {ts["name"]: {"throttle": 1.0} for ts in spec.get("thrusters", [])}
    return sc, y0, args


def _rot1(angle):
    c, s = np.cos(angle), np.sin(angle)
    return [[1.0, 0.0, 0.0], [0.0, c, s], [0.0, -s, c]]


def _rot3(angle):
    c, s = np.cos(angle), np.sin(angle)
    return [[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]]


_HUB = {
    "mass": 750.0,
    "IHubPntBc_B": [[900.0, 10.0, -5.0], [10.0, 800.0, 3.0], [-5.0, 3.0, 600.0]],
    "r_BcB_B": [0.02, -0.01, 0.05],
}


def _tanks(update_only, leak):
    """One tank of each model, offset and rotated differently; `update_only`, `leak` per tank."""
    shapes = [
        ("cv", "ConstantVolume", {"radius": 0.5}, [0.3, -0.2, 0.4], _rot1(0.4)),
        ("cd", "ConstantDensity", {"radius": 0.45}, [-0.4, 0.3, 0.1], _rot3(-0.7)),
        ("em", "Emptying", {"radius": 0.55}, [0.1, 0.5, -0.3], _rot1(1.1)),
        ("ub", "UniformBurn", {"radius": 0.3, "length": 1.2}, [-0.2, -0.4, 0.6], _rot3(0.3)),
        ("cb", "CentrifugalBurn", {"radius": 0.35, "length": 0.9}, [0.5, 0.1, -0.5], _rot1(-0.5)),
    ]
    out = []
    for i, (name, model, geo, r_TB_B, dcm) in enumerate(shapes):
        tk = {
            "name": name,
            "model": model,
            "prop_mass_init": 40.0 + 5.0 * i,
            "r_TcT_T": [0.05 * (i - 2), -0.02 * i, 0.1],
            "r_TB_B": r_TB_B,
            "dcm_TB": dcm,
            "update_only": update_only[i],
            "leak_rate": leak[i],
            "thrusters": [],
        }
        tk.update(geo)
        out.append(tk)
    return out


def scenarios() -> dict:
    """Named specs of the cross-validation tests (`tests/effectors/test_fuel_tank.py`).

    - `five_tanks_orbit`: a LEO spacecraft with one tank of each model (mixed `update_only`, two
      with leaks), two thruster sets: `main` feeds the constant-volume and emptying tanks (each
      drains its full flow, Basilisk's rule), `rcs` (with its exhaust loads) feeds the
      uniform-burn tank; 20 s at 0.1 s.
    - `leak_spin`: no gravity, a fast tumble and large leaks from every model with the depletion
      torque on (`update_only=False`), so that the mass-depletion terms dominate; 10 s at 0.1 s.
    """
    orbit = {
        "hub": _HUB,
        "initial": {
            "r_CN_N": [-4020338.690396649, 7490566.741852513, 5248299.211589362],
            "v_CN_N": [-5199.77710904224, -3436.681645356935, 1041.576797498721],
            "sigma_BN": [0.1, 0.2, -0.3],
            "omega_BN_B": [0.001, -0.01, 0.03],
        },
        "mu": 3.986004415e14,
        "thrusters": [
            {
                "name": "main",
                "r_TB_B": [[1.0, 0.2, -0.1], [-0.5, 0.3, 0.8]],
                "tHat_B": [[0.0, 1.0, 0.0], [0.6, 0.0, 0.8]],
                "max_thrust": [10.0, 5.0],
                "Isp": [200.0, 220.0],
            },
            {
                "name": "rcs",
                "r_TB_B": [[0.0, 1.2, 0.3]],
                "tHat_B": [[0.0, 0.0, -1.0]],
                "max_thrust": [1.0],
                "Isp": [150.0],
                "depletion_loads": True,  # exhaust force and torque (Basilisk updateOnly=False)
                "area_nozzle": 0.01,
            },
        ],
        "tanks": _tanks([False, True, False, True, False], [0.0, 0.02, 0.0, 0.0, 0.01]),
        "step": 0.1,
        "duration": 20.0,
        "sample_dt": 1.0,
    }
    orbit["tanks"][0]["thrusters"] = ["main"]
    orbit["tanks"][2]["thrusters"] = ["main"]
    orbit["tanks"][3]["thrusters"] = ["rcs"]
    spin = {
        "hub": _HUB,
        "initial": {
            "r_CN_N": [10.0, 20.0, 30.0],
            "v_CN_N": [1.0, 2.0, 3.0],
            "sigma_BN": [0.1, 0.2, -0.3],
            "omega_BN_B": [0.1, -0.2, 0.3],
        },
        "mu": None,
        "thrusters": [],
        "tanks": _tanks([False] * 5, [1.0, 0.8, 1.2, 0.5, 0.9]),
        "step": 0.1,
        "duration": 10.0,
        "sample_dt": 0.5,
    }
    return {"five_tanks_orbit": orbit, "leak_spin": spin}
