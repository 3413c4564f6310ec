"""Build and run real Basilisk (`bsk` 2.12.1) scenarios from the spec files in `tests/data/*.json`.

Basilisk is an optional cross-validation dependency (`pip install jaxsim-spacecraft[crossval]`), never a runtime
requirement of jaxsim: import this module freely, and check `available()` before building anything.

Every spec in `tests/data` fully describes a scenario (hub, gravity, effectors, initial conditions, step,
duration, sample interval; `tests/data/README.md`). `BasiliskScenario(spec)` turns one into a Basilisk
simulation (one process, one task at the spec step, the spacecraft integrated with classical RK4), and
`outputs()` returns the sampled results as a dict of float64 numpy arrays with the same keys as the
reference `.npz` files: `t`, `r_BN_N`, `v_BN_N`, `r_CN_N`, `v_CN_N`, `sigma_BN`, `omega_BN_B`,
`MRPSwitchCount`, `massSC`, `c_B`, `ISC_PntB_B`, `t_energy`, `totOrbEnergy`, `totRotEnergy`,
`totOrbAngMomPntN_N`, `totRotAngMomPntC_N`, and per effector `rw_Omega`, `<panel>_theta`,
`<panel>_thetaDot`, `ggTorque_B_msg`.

Supported effector types (the `type` field of a spec effector): `reactionWheelStateEffector`
(balanced wheels, constant motor torques written once to an `ArrayMotorTorqueMsg`),
`hingedRigidBodyStateEffector`, `GravityGradientEffector`, `extForceTorque`; plus an optional
point-mass `gravity` block (Earth, central, at the origin).

Usage:

```python
from tests.reference import basilisk_scenarios as bs
spec = bs.load_spec("gravity_gradient")
out, wall_s = bs.run_spec(spec)                     # sampled outputs + ExecuteSimulation wall time
t = bs.time_spec(spec, repeats=3)                   # timings with and without recorders
short = bs.run_spec(spec, duration=600.0)[0]        # same model, shorter horizon
```
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np


DATA = Path(__file__).resolve().parents[2] / "tests" / "data"

# Basilisk's recorded time stamps are integer nanoseconds; converted as Basilisk's NANO2SEC (as in the
# reference npz files, e.g. 240.00000000000003 s).
_NS = 1e-9


def available() -> bool:
    """Whether Basilisk (`bsk`) can be imported."""
    try:
        import Basilisk  # noqa: F401
    except ImportError:
        return False
    return True


def version() -> str | None:
    """Installed `bsk` version, or None when absent."""
    if not available():
        return None
    from importlib.metadata import PackageNotFoundError, version as _v

    try:
        return _v("bsk")
    except PackageNotFoundError:
        return "unknown"


def load_spec(name: str) -> dict:
    """The spec dict `tests/data/<name>.json`."""
    return json.loads((DATA / f"{name}.json").read_text())


def _col(v) -> list:
    """A 3-vector as Basilisk's column-list form `[[x], [y], [z]]`."""
    return [[float(x)] for x in np.asarray(v, dtype=float).reshape(3)]


def _mat(m) -> list:
    return [[float(x) for x in row] for row in np.asarray(m, dtype=float).reshape(3, 3)]


_ZERO3 = (0.0, 0.0, 0.0)


def rk4_spacecraft(
    keep: list,
    tag: str,
    mass,
    I_B,
    *,
    r_BcB_B=_ZERO3,
    r_CN_N=_ZERO3,
    v_CN_N=_ZERO3,
    sigma_BN=_ZERO3,
    omega_BN_B=_ZERO3,
):
    """A Basilisk `spacecraft.Spacecraft` hub (mass [kg], inertia about its CoM [kg m^2], CoM
    offset, initial state of the composite CoM) integrated by RK4; the integrator is appended to
    `keep` (Python references that must outlive the run)."""
    from Basilisk.simulation import spacecraft, svIntegrators

    sc = spacecraft.Spacecraft()
    sc.ModelTag = tag
    sc.hub.mHub = float(mass)
    sc.hub.IHubPntBc_B = _mat(I_B)
    sc.hub.r_BcB_B = _col(r_BcB_B)
    sc.hub.r_CN_NInit = _col(r_CN_N)
    sc.hub.v_CN_NInit = _col(v_CN_N)
    sc.hub.sigma_BNInit = _col(sigma_BN)
    sc.hub.omega_BN_BInit = _col(omega_BN_B)
    integrator = svIntegrators.svIntegratorRK4(sc)
    sc.setIntegrator(integrator)
    keep.append(integrator)
    return sc


def point_mass_earth(keep: list, sc, mu):
    """Basilisk's Earth as the central point-mass gravity body of `sc` with `mu` [m^3/s^2]; the
    factory and the body are appended to `keep`. Returns the body."""
    from Basilisk.utilities import simIncludeGravBody

    factory = simIncludeGravBody.gravBodyFactory()
    earth = factory.createEarth()
    earth.mu = float(mu)
    earth.isCentralBody = True
    factory.addBodiesTo(sc)
    keep += [factory, earth]
    return earth


class BasiliskScenario:
    """One Basilisk simulation built from a spec dict.

    **Arguments:**

    - `spec`: a spec dict (see `load_spec`).
    - `step`, `duration`, `sample_dt`: overrides of the spec's `time.step_s`, `time.duration_s`,
      `time.sample_interval_s` [s].
    - `record`: add message recorders (state, mass, wheel speeds, panel angles, GG torque) at the sample
      interval; without them only the final state can be read (`final_state()`), for bare timings.
    - `energy`: with `record`, also log the spacecraft's energy and momentum (Python variable logger).

    Holds Python references to every Basilisk object (modules, messages, gravity factory) so that
    none is garbage-collected while the simulation runs.
    """

    def __init__(
        self,
        spec: dict,
        *,
        step: float | None = None,
        duration: float | None = None,
        sample_dt: float | None = None,
        record: bool = True,
        energy: bool = True,
    ):
        from Basilisk.architecture import messaging
        from Basilisk.simulation import (
            GravityGradientEffector,
            extForceTorque,
            hingedRigidBodyStateEffector,
            reactionWheelStateEffector,
        )
        from Basilisk.utilities import SimulationBaseClass, macros

        tm = spec["time"]
        self.step = float(tm["step_s"] if step is None else step)
        self.duration = float(tm["duration_s"] if duration is None else duration)
        self.sample_dt = float(tm["sample_interval_s"] if sample_dt is None else sample_dt)
        self.n_steps = int(round(self.duration / self.step))
        self.record = bool(record)
        self.energy = bool(energy) and self.record
        self._keep = []  # Python references that must outlive the run

        sim = SimulationBaseClass.SimBaseClass()
        proc = sim.CreateNewProcess("dynProcess")
        step_ns = macros.sec2nano(self.step)
        proc.addTask(sim.CreateNewTask("dynTask", step_ns))
        self.sim = sim
        self._stop_ns = macros.sec2nano(self.duration)
        self._sample_ns = macros.sec2nano(self.sample_dt)

        hub, ic = spec["hub"], spec["initial_conditions"]
        sc = rk4_spacecraft(
            self._keep,
            spec.get("name", "spacecraft"),
            hub["mHub_kg"],
            hub["IHubPntBc_B_kgm2"],
            r_BcB_B=hub["r_BcB_B_m"],
            r_CN_N=ic["r_CN_N_m"],
            v_CN_N=ic["v_CN_N_mps"],
            sigma_BN=ic["sigma_BN"],
            omega_BN_B=ic["omega_BN_B_radps"],
        )
        self.sc = sc

        earth = None
        grav = spec.get("gravity")
        if grav:
            if grav.get("model") != "point mass":
                raise NotImplementedError(f"gravity model {grav.get('model')!r}")
            earth = point_mass_earth(self._keep, sc, grav["mu_m3ps2"])

        # Models in the task order of the specs: state effectors, spacecraft, dynamic effectors.
        state_models, dynamic_models = [], []
        self.rw = None
        self.panels = []
        self.gg = None
        for eff in spec.get("effectors", []):
            kind = eff["type"]
            if kind == "reactionWheelStateEffector":
                rw = reactionWheelStateEffector.ReactionWheelStateEffector()
                rw.ModelTag = "rwEffector"
                for w in eff["wheels"]:
                    if w["model"] != "BalancedWheels":
                        raise NotImplementedError(f"RW model {w['model']!r}")
                    cfg = reactionWheelStateEffector.RWConfigPayload()
                    cfg.RWModel = messaging.BalancedWheels
                    cfg.gsHat_B = _col(w["gsHat_B"])
                    cfg.w2Hat0_B = _col(w["w2Hat0_B"])
                    cfg.w3Hat0_B = _col(w["w3Hat0_B"])
                    cfg.rWB_B = _col(w["rWB_B_m"])
                    cfg.Js = float(w["Js_kgm2"])
                    cfg.Jt = float(w["Jt_kgm2"])
                    cfg.Jg = float(w["Jg_kgm2"])
                    cfg.mass = float(w["mass_kg"])
                    cfg.Omega = float(w["Omega0_radps"])
                    cfg.theta = float(w["theta0_rad"])
                    cfg.U_s = float(w["U_s_kgm"])
                    cfg.U_d = float(w["U_d_kgm2"])
                    # No friction, no saturation (the spec's "none" settings).
                    cfg.fCoulomb = 0.0
                    cfg.fStatic = 0.0
                    cfg.cViscous = 0.0
                    cfg.betaStatic = -1.0
                    cfg.u_max = -1.0
                    cfg.u_min = 0.0
                    cfg.Omega_max = -1.0
                    cfg.P_max = -1.0
                    cfg.label = str(w["name"])[:5]
                    rw.addReactionWheel(cfg)
                    self._keep.append(cfg)
                torques = [float(u) for u in eff["motor_torques_Nm"]]
                payload = messaging.ArrayMotorTorqueMsgPayload()
                payload.motorTorque = torques + [0.0] * (len(payload.motorTorque) - len(torques))
                cmd = messaging.ArrayMotorTorqueMsg().write(payload)
                rw.rwMotorCmdInMsg.subscribeTo(cmd)
                self._keep += [payload, cmd]
                sc.addStateEffector(rw)
                state_models.append(rw)
                self.rw = rw
                self.n_rw = len(torques)
            elif kind == "hingedRigidBodyStateEffector":
                for p in eff["panels"]:
                    hp = hingedRigidBodyStateEffector.HingedRigidBodyStateEffector()
                    hp.ModelTag = p["name"]
                    hp.mass = float(p["mass_kg"])
                    hp.IPntS_S = _mat(p["IPntS_S_kgm2"])
                    hp.d = float(p["d_m"])
                    hp.k = float(p["k_Nm_per_rad"])
                    hp.c = float(p["c_Nms_per_rad"])
                    hp.r_HB_B = _col(p["r_HB_B_m"])
                    hp.dcm_HB = _mat(p["dcm_HB"])
                    hp.thetaInit = float(p["theta0_rad"])
                    hp.thetaDotInit = float(p["thetaDot0_radps"])
                    hp.thetaRef = float(p.get("thetaRef_rad", 0.0))
                    hp.thetaDotRef = float(p.get("thetaDotRef_radps", 0.0))
                    if float(p.get("motor_torque_Nm", 0.0)) != 0.0:
                        payload = messaging.ArrayMotorTorqueMsgPayload()
                        payload.motorTorque = [float(p["motor_torque_Nm"])]
                        cmd = messaging.ArrayMotorTorqueMsg().write(payload)
                        hp.motorTorqueInMsg.subscribeTo(cmd)
                        self._keep += [payload, cmd]
                    sc.addStateEffector(hp)
                    state_models.append(hp)
                    self.panels.append((p["name"], hp))
            elif kind == "GravityGradientEffector":
                if earth is None:
                    raise ValueError("GravityGradientEffector needs a `gravity` block in the spec")
                gg = GravityGradientEffector.GravityGradientEffector()
                gg.ModelTag = "ggEffector"
                gg.addPlanetName(earth.planetName)
                sc.addDynamicEffector(gg)
                dynamic_models.append(gg)
                self.gg = gg
            elif kind == "extForceTorque":
                ext = extForceTorque.ExtForceTorque()
                ext.ModelTag = "extForceTorque"
                ext.extTorquePntB_B = _col(eff.get("extTorquePntB_B_Nm", [0, 0, 0]))
                ext.extForce_N = _col(eff.get("extForce_N_N", [0, 0, 0]))
                ext.extForce_B = _col(eff.get("extForce_B_N", [0, 0, 0]))
                sc.addDynamicEffector(ext)
                dynamic_models.append(ext)
            else:
                raise NotImplementedError(f"effector type {kind!r}")

        for m in state_models:
            sim.AddModelToTask("dynTask", m)
        sim.AddModelToTask("dynTask", sc)
        for m in dynamic_models:
            sim.AddModelToTask("dynTask", m)

        self._rec = {}
        if self.record:
            ns = self._sample_ns
            self._rec["state"] = sc.scStateOutMsg.recorder(ns)
            self._rec["mass"] = sc.scMassOutMsg.recorder(ns)
            if self.rw is not None:
                self._rec["rw"] = self.rw.rwSpeedOutMsg.recorder(ns)
            for name, hp in self.panels:
                self._rec[name] = hp.hingedRigidBodyOutMsg.recorder(ns)
            if self.gg is not None:
                self._rec["gg"] = self.gg.gravityGradientOutMsg.recorder(ns)
            if self.energy:
                self._rec["energy"] = sc.logger(
                    ["totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"],
                    ns,
                )
            for r in self._rec.values():
                sim.AddModelToTask("dynTask", r)
        self.execute_s = None

    def run(self) -> float:
        """Initialize and execute the simulation; returns the `ExecuteSimulation()` wall time [s]."""
        self.sim.InitializeSimulation()
        self.sim.ConfigureStopTime(self._stop_ns)
        t0 = time.perf_counter()
        self.sim.ExecuteSimulation()
        self.execute_s = time.perf_counter() - t0
        return self.execute_s

    def final_state(self) -> dict:
        """The spacecraft state message after the run (works without recorders)."""
        s = self.sc.scStateOutMsg.read()
        out = {
            k: np.asarray(getattr(s, k), dtype=float)
            for k in ("r_BN_N", "v_BN_N", "r_CN_N", "v_CN_N", "sigma_BN", "omega_BN_B")
        }
        out["MRPSwitchCount"] = np.asarray(float(s.MRPSwitchCount))
        return out

    def outputs(self) -> dict:
        """Sampled outputs (float64 numpy arrays) under the reference `.npz` keys."""
        if not self.record:
            raise ValueError("BasiliskScenario: built with record=False; use final_state().")
        if self.execute_s is None:
            raise ValueError("BasiliskScenario: call run() first.")
        f = lambda a: np.asarray(a, dtype=float)
        st, ms = self._rec["state"], self._rec["mass"]
        out = {"t": f(st.times()) * _NS}
        for k in ("r_BN_N", "v_BN_N", "r_CN_N", "v_CN_N", "sigma_BN", "omega_BN_B"):
            out[k] = f(getattr(st, k))
        out["MRPSwitchCount"] = f(st.MRPSwitchCount)
        out["massSC"] = f(ms.massSC)
        out["c_B"] = f(ms.c_B)
        out["ISC_PntB_B"] = f(ms.ISC_PntB_B).reshape(-1, 3, 3)
        if "energy" in self._rec:
            en = self._rec["energy"]
            out["t_energy"] = f(en.times()) * _NS
            for k in ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N"):
                out[k] = f(getattr(en, k))
        if "rw" in self._rec:
            out["rw_Omega"] = f(self._rec["rw"].wheelSpeeds)[:, : self.n_rw]
        for name, _ in self.panels:
            out[f"{name}_theta"] = f(self._rec[name].theta)
            out[f"{name}_thetaDot"] = f(self._rec[name].thetaDot)
        if "gg" in self._rec:
            out["ggTorque_B_msg"] = f(self._rec["gg"].gravityGradientTorque_B)
        return out


def run_spec(spec: dict, **overrides) -> tuple[dict, float]:
    """Build, run and sample a spec: `(outputs, ExecuteSimulation wall time [s])`.

    `overrides`: `step`, `duration`, `sample_dt`, `energy` (see `BasiliskScenario`).
    """
    sc = BasiliskScenario(spec, record=True, **overrides)
    wall = sc.run()
    return sc.outputs(), wall


def time_spec(spec: dict, *, repeats: int = 3, **overrides) -> dict:
    """Wall time of `ExecuteSimulation()` with and without recorders (best of `repeats` fresh builds).

    Returns `{"n_steps", "step_s", "duration_s", "with_recorders_s", "without_recorders_s",
    "us_per_step_with_recorders", "us_per_step_without_recorders", "repeats", "bsk_version"}`.
    "With recorders" includes every message recorder at the sample interval and the Python energy logger.
    """
    best = {}
    n_steps = step = duration = None
    for record in (False, True):
        walls = []
        for _ in range(repeats):
            sc = BasiliskScenario(spec, record=record, **overrides)
            walls.append(sc.run())
            n_steps, step, duration = sc.n_steps, sc.step, sc.duration
            del sc
        best[record] = min(walls)
    return {
        "n_steps": n_steps,
        "step_s": step,
        "duration_s": duration,
        "without_recorders_s": best[False],
        "with_recorders_s": best[True],
        "us_per_step_without_recorders": best[False] / n_steps * 1e6,
        "us_per_step_with_recorders": best[True] / n_steps * 1e6,
        "repeats": repeats,
        "bsk_version": version(),
    }


def compare(out: dict, ref, keys=None) -> dict:
    """Max abs and max relative (per component, `|a-b|/|b|`) differences per shared key."""
    keys = keys or [k for k in out if k in ref]
    res = {}
    for k in keys:
        a = np.asarray(out[k], dtype=float)
        b = np.asarray(ref[k], dtype=float)
        if a.shape != b.shape:
            res[k] = {"shape": (a.shape, b.shape)}
            continue
        d = np.abs(a - b)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(b != 0, d / np.abs(b), np.where(d == 0, 0.0, np.inf))
        res[k] = {"max_abs": float(d.max()) if d.size else 0.0, "max_rel": float(rel.max())}
    return res


if __name__ == "__main__":
    # Self-check: rebuild every reference scenario this module supports and compare to its npz.
    if not available():
        raise SystemExit(
            "Basilisk (bsk) is not installed: pip install 'jaxsim-spacecraft[crossval]'"
        )
    for name in (
        "pointmass_orbit",
        "rigid_tumble",
        "gravity_gradient",
        "ext_force_torque",
        "reaction_wheels",
        "hinged_panels_undamped",
    ):
        spec = load_spec(name)
        out, wall = run_spec(spec)
        ref = np.load(DATA / f"{name}.npz")
        cmp = compare(out, ref)
        worst = max((v["max_abs"] for v in cmp.values() if "max_abs" in v), default=float("nan"))
        bad = {k: v for k, v in cmp.items() if v.get("max_abs", 1.0) != 0.0}
        print(f"{name}: {len(cmp)} keys, ExecuteSimulation {wall:.3f} s, max abs diff {worst:.3g}")
        for k, v in bad.items():
            print(f"    {k}: {v}")
