"""The generic effector suite: every effector of the library (and the guide's `Slider`) under the
same checks (`tests/effectors/generic.py`): jit, vmap, gradients against central differences,
conservation where the configuration is conservative, mass-property rates against autodiff,
refused states and commands, declared units. A new effector gets all of them from one `REGISTRY`
entry; `test_registry_covers_every_effector` fails until it has one.

Per-effector test files keep what is specific: Basilisk and analytic references, damped energy
balances, validation messages, special modes.
"""

import inspect
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from tests.effectors import generic as g
from tests.effectors.test_hinged_rigid_bodies import panels_from_spec
from tests.effectors.test_reaction_wheels import _ref_wheels
from tests.effectors.test_spring_mass_damper import particles_from_spec
from tests.helpers import hub_from_spec
from tests.integration.test_basilisk_reference import build as hub_case


HUB = dict(mass=100.0, IHubPntBc_B=np.diag([10.0, 12.0, 14.0]), r_BcB_B=[0.01, -0.02, 0.03])
W0 = [0.02, -0.01, 0.03]  # [rad/s] initial body rate
R_ORBIT = fx.astro.EARTH.radius_equatorial + 400e3  # [m]
# Loads linear in the parameter (drag, SRP, gravity gradient): central differences are exact up to
# round-off, which a large step keeps below the loads' tiny share of the drift (gravity's ~9 m/s^2).
LINEAR_FD_STEP = 1e-2


def _spacecraft(state=(), dynamic=(), gravity=(), **ic):
    sc = fx.Spacecraft(fx.Hub(**HUB), state_effectors=state, dynamic_effectors=dynamic,
                       gravity=gravity)  # fmt: skip
    return sc, sc.init_state(omega_BN_B=W0, **ic)


def _orbit(state=(), dynamic=()):
    earth = fx.PointMassGravity(fx.astro.EARTH)
    r = R_ORBIT
    sc = fx.Spacecraft(fx.Hub(**HUB), state_effectors=state, dynamic_effectors=dynamic,
                       gravity=[earth])  # fmt: skip
    v = np.sqrt(fx.astro.EARTH.mu / r)
    return sc, sc.init_state([r, 0.0, 0.0], [0.0, v, 0.0], [0.1, 0.2, -0.3], W0)


def wheels(**kw):
    return fx.ReactionWheels(np.eye(3), [0.05, 0.06, 0.07], Omega=[10.0, -5.0, 3.0], **kw)


def panels(**kw):
    return fx.HingedRigidBodies(
        mass=[10.0, 8.0], IPntS_S=np.tile(np.diag([2.0, 1.0, 2.0]), (2, 1, 1)), d=[1.0, 0.8],
        k=[5.0, 4.0], r_HB_B=[[0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]],
        dcm_HB=np.stack([np.eye(3), np.diag([-1.0, -1.0, 1.0])]), theta0=[0.1, -0.05],
        thetaDot0=[0.02, 0.01], **kw,
    )  # fmt: skip


def spinners(**kw):
    return fx.SpinningBodies(
        mass=[3.0, 2.0], ISPntSc_S=[np.diag([0.2, 0.3, 0.4]), np.diag([0.3, 0.3, 0.5])],
        dcm_S0B=[np.eye(3), np.eye(3)], sHat_S=[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]],
        r_SB_B=[[0.0, 0.5, 0.2], [0.3, 0.0, -0.2]], r_ScS_S=[[0.1, 0.0, 0.0], [0.0, 0.1, 0.0]],
        theta0=[0.1, -0.2], thetaDot0=[0.3, -0.1], k=[1.0, 2.0], **kw,
    )  # fmt: skip


def slosh(**kw):
    return fx.SpringMassDampers(**{
        "mass": [1.5, 2.5], "k": [20.0, 30.0], "pHat_B": [[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]],
        "r_PB_B": [[0.2, 0.1, 0.0], [0.0, -0.3, 0.1]], "rho0": [0.05, -0.02],
        "rhoDot0": [0.0, 0.01], **kw,
    })  # fmt: skip


def thrusters(name="thr"):
    return fx.Thrusters([[0.0, 0.0, -1.0], [0.1, 0.0, -1.0]], [[0.0, 0.0, 1.0], [0.0, 0.6, 0.8]],
                        max_thrust=[2.0, 1.0], Isp=[220.0, 200.0], throttle=[0.5, 0.8], name=name)  # fmt: skip


def tank():
    model = fx.ConstantVolumeTank(prop_mass_init=20.0, radius=0.4, r_TcT_T=[0.0, 0.0, 0.1])
    return fx.FuelTank(model, r_TB_B=[0.1, 0.0, -0.2], thrusters="thr", name="tank")


def _with(effector_from_spec):
    """`spec -> Spacecraft`: the reference's hub with one state effector built from the spec."""
    return lambda spec: fx.Spacecraft(
        hub_from_spec(spec), state_effectors=[effector_from_spec(spec)]
    )


BSK_WHEELS = ("reaction_wheels", _with(lambda spec: fx.ReactionWheels(**_ref_wheels(spec))))
BSK_PANELS = ("hinged_panels_undamped", _with(panels_from_spec))
BSK_SLOSH = ("spring_mass_damper", _with(particles_from_spec))
BSK_EXT = ("ext_force_torque", lambda spec: hub_case("ext_force_torque")[2])
BSK_GG = ("gravity_gradient", lambda spec: hub_case("gravity_gradient")[2])


def _guide_slider():
    """The `Slider` class of docs/writing_an_effector.md (its python block, run as written)."""
    guide = Path(__file__).resolve().parents[2] / "docs" / "writing_an_effector.md"
    blocks = re.findall(r"^```python[ \t]*\n(.*?)^```", guide.read_text(), re.M | re.S)
    namespace = {"__name__": "guide"}
    exec(next(b for b in blocks if "class Slider(" in b), namespace)
    return namespace["Slider"]


def _slider():
    slider = _guide_slider()(5.0, 40.0, [0.0, 0.6, 0.8], [0.5, 0.0, 0.2], name="slosh")
    x0 = {"rho": jnp.asarray(0.05), "rhoDot": jnp.asarray(0.01)}
    sc = fx.Spacecraft(fx.Hub(**HUB), state_effectors=[slider])
    return sc, sc.init_state(omega_BN_B=W0, effector_states={"slosh": x0})


def _k_c_mass(effector):
    """Spring, damper and masses of a 1-DOF effector: the gradient check takes each element."""
    return effector.k, effector.c, effector.mass


E = g.Entry
REGISTRY = [
    E("wheels_balanced", "rw", lambda: _spacecraft([wheels()]), lambda s: s.state_effectors[0].Js,
      conservative=True, reference=BSK_WHEELS),
    E("wheels_jitter_simple", "rw",
      lambda: _spacecraft([wheels(model="jitter_simple", U_s=1e-4, U_d=1e-5)]),
      lambda s: s.state_effectors[0].U_s),
    E("wheels_fully_coupled", "rw",
      lambda: _spacecraft([wheels(model="jitter_fully_coupled", mass=2.0, U_s=1e-4, U_d=1e-5,
                                  rWB_B=[[0.1, 0.2, -0.1]] * 3)]),
      lambda s: s.state_effectors[0].U_d, conservative=True),
    E("wheels_limits_friction", "rw",
      lambda: _spacecraft([wheels(motor_torque=[0.01, -0.02, 0.03], u_max=0.02, P_max=5.0,
                                  fCoulomb=1e-3, cViscous=1e-4, coulomb_width=0.1,
                                  track_work=True)]),
      lambda s: s.state_effectors[0].cViscous),
    E("panels", "panels", lambda: _spacecraft([panels()]), lambda s: s.state_effectors[0].k,
      conservative=True, reference=BSK_PANELS),
    E("panels_driven", "panels",
      lambda: _spacecraft([panels(c=[0.5, 0.2], thetaRef=[0.02, 0.0], motor_torque=[0.1, 0.0])]),
      lambda s: _k_c_mass(s.state_effectors[0])),
    E("spinners", "spinners", lambda: _spacecraft([spinners()]),
      lambda s: s.state_effectors[0].k, conservative=True),
    E("spinners_driven", "spinners",
      lambda: _spacecraft([spinners(c=[0.5, 0.2], thetaRef=[0.02, 0.0], motor_torque=[0.1, 0.0])]),
      lambda s: _k_c_mass(s.state_effectors[0])),
    E("spinners_locked", "spinners", lambda: _spacecraft([spinners(locked=[False, True])]),
      lambda s: s.state_effectors[0].mass),
    E("slosh", "slosh", lambda: _spacecraft([slosh()]), lambda s: s.state_effectors[0].k,
      conservative=True, reference=BSK_SLOSH),
    E("slosh_damped_orbit", "slosh", lambda: _orbit([slosh(c=[0.3, 0.1], rhoDot0=[0.02, 0.01])]),
      lambda s: _k_c_mass(s.state_effectors[0])),
    E("fuel_tank", "tank", lambda: _spacecraft([tank()], [thrusters()]),
      lambda s: s.dynamic_effectors[0].max_thrust, mass_rates=False),
    E("thruster_state", "thr",
      lambda: _spacecraft([fx.ThrusterStateEffector([[0.0, 0.0, -1.0]], [[0.0, 0.0, 1.0]], [2.0],
                                                    [220.0], [10.0], kappa0=0.5, name="thr")]),
      lambda s: s.state_effectors[0].max_thrust),
    E("thrusters", "thr", lambda: _spacecraft(dynamic=[thrusters()]),
      lambda s: s.dynamic_effectors[0].max_thrust),
    E("ext_force_torque", "ext",
      lambda: _spacecraft(dynamic=[fx.ExtForceTorque(force_B=[0.1, 0.0, 0.2],
                                                     torque_B=[1e-3, -2e-3, 5e-4], name="ext")]),
      lambda s: s.dynamic_effectors[0].torque_B, reference=BSK_EXT),
    E("gravity_gradient", "gg",
      lambda: _orbit(dynamic=[fx.GravityGradient(fx.PointMassGravity(fx.astro.EARTH), name="gg")]),
      lambda s: s.dynamic_effectors[0].bodies[0].mu, fd_step=LINEAR_FD_STEP, reference=BSK_GG),
    E("drag", "drag",
      lambda: _orbit(dynamic=[fx.Drag(fx.ExponentialAtmosphere(1e-11, 6e4, R_ORBIT), 2.2,
                                      1.5, [0.1, 0.0, 0.0], name="drag")]),
      lambda s: s.dynamic_effectors[0].area, fd_step=LINEAR_FD_STEP),
    E("srp", "srp",
      lambda: _orbit(dynamic=[fx.CannonballSRP(2.0, [1.496e11, 0.0, 0.0], name="srp")]),
      lambda s: s.dynamic_effectors[0].area, fd_step=LINEAR_FD_STEP),
    E("mean_reverting_noise", "noise",
      lambda: _spacecraft([fx.MeanRevertingNoise(2.0, 0.1, [1e-3, -2e-3, 5e-4], name="noise")],
                          [fx.StochasticTorque("noise", name="torque")]),
      lambda s: s.state_effectors[0].tau),
    E("stochastic_torque", "torque",
      lambda: _spacecraft([fx.MeanRevertingNoise(2.0, 0.1, [1e-3, -2e-3, 5e-4], name="noise")],
                          [fx.StochasticTorque("noise", scale=2.0, name="torque")]),
      lambda s: s.dynamic_effectors[0].scale),
    E("geometric_brownian_motion", "gbm",
      lambda: _spacecraft([fx.GeometricBrownianMotion(0.5, 2.0, 0.1, 0.01, name="gbm")]),
      lambda s: s.state_effectors[0].tau),
    E("guide_slider", "slosh", _slider, lambda s: s.state_effectors[0].k, conservative=True),
]  # fmt: skip


def _applies(check, entry) -> bool:
    if check is g.check_conservation:
        return entry.conservative
    if check is g.check_basilisk:
        return entry.reference is not None
    if check is g.check_mass_rates:  # a state, and rates that are its mass properties' rates
        return entry.mass_rates and entry.effector in entry.build()[1]
    return True


CHECKS = (
    g.check_jit,  # jit equals eager
    g.check_vmap,  # vmap equals a loop
    g.check_gradient,  # finite, equal to central differences
    g.check_conservation,  # energy and momentum (conservative entries)
    g.check_mass_rates,  # mass-property rates equal autodiff
    g.check_state_refused,  # a misspelt state key
    g.check_commands_declared,  # init_commands() and their units
    g.check_commands_refused,  # a misspelt command or a wrong shape
    g.check_units,  # every state leaf and output has a unit
    g.check_basilisk,  # a Basilisk reference run, where one exists
)
# The Basilisk cases compile a reference run each (10-30 s on a loaded 2-core machine); the
# per-effector files check the same references in the default run.
CASES = [
    pytest.param(
        c,
        e,
        id=f"{c.__name__[len('check_') :]}-{e.name}",
        marks=[pytest.mark.slow] if c is g.check_basilisk else [],
    )
    for e in REGISTRY
    for c in CHECKS
    if _applies(c, e)
]


@pytest.mark.parametrize("check, entry", CASES)
def test_generic(check, entry):
    check(entry)


def test_registry_covers_every_effector():
    exported = {
        obj
        for obj in vars(fx).values()
        if inspect.isclass(obj)
        and issubclass(obj, fx.AbstractEffector)
        and not inspect.isabstract(obj)
        and not obj.__name__.startswith("Abstract")
    }
    exported -= {fx.TwoMethodStateEffector}
    covered = set()
    for entry in REGISTRY:
        sc, _ = entry.build()
        covered |= {
            type(e) for e in fx._spacecraft._assembly._all_effectors(sc) if e.name == entry.effector
        }
    missing = sorted(c.__name__ for c in exported - covered)
    assert not missing, f"effectors without a generic-suite entry: {missing}"
