"""The state-effector contract (`docs/writing_an_effector.md`): one pass per derivative evaluation,
mass properties that see the time, the commands and the states, and clear refusals."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js


# The two-method and the one-pass forms evaluate the same expressions: identical bits.
SAME_BITS = 0.0


def _hub():
    return fx.Hub(mass=50.0, IHubPntBc_B=np.diag([5.0, 6.0, 7.0]))


class _Ballast(fx.AbstractStateEffector):
    """A point mass at r_B whose mass is commanded through args[name]["mass"] (reads the
    MassContext's args and time): tests that mass properties see the commands."""

    r_B: jnp.ndarray
    name: str = eqx.field(static=True)
    commands = {"mass": ()}

    def __init__(self, r_B, name="ballast"):
        self.r_B = jnp.asarray(r_B, dtype=float)
        self.name = name

    def init_state(self):
        return jnp.zeros(())

    def mass_props(self, x, ctx):
        m = ctx.args[self.name]["mass"] if ctx.args is not None else jnp.zeros(())
        rt = js.kinematics.tilde(self.r_B)
        z3 = jnp.zeros(3)
        return fx.MassProps(m, jnp.zeros(()), m * self.r_B, z3, -m * (rt @ rt), jnp.zeros((3, 3)))

    def back_substitution(self, x, ctx):
        return fx.BackSub.zeros()

    def derivative(self, x, ctx, rDDot_BN_B, omegaDot_BN_B):
        return jnp.zeros(())


def test_mass_props_see_the_commands():
    sc = fx.Spacecraft(_hub(), state_effectors=[_Ballast([1.0, 0.0, 0.0])])
    y = sc.init_state()
    ctx = sc.context(0.0, y, {"ballast": {"mass": jnp.asarray(10.0)}})
    assert float(ctx.m_sc) == 60.0
    np.testing.assert_allclose(ctx.c_B, [10.0 / 60.0, 0.0, 0.0], rtol=1e-15)


def test_one_pass_equals_two_methods():
    # The library effectors implement `contribute`; their `back_substitution` / `derivative`
    # methods are its two halves, and the spacecraft's drift uses the one pass.
    panels = fx.HingedRigidBodies(
        mass=[10.0, 10.0],
        IPntS_S=np.tile(np.diag([2.0, 1.0, 2.0]), (2, 1, 1)),
        d=[1.0, 1.0],
        k=[5.0, 5.0],
        c=[0.5, 0.5],
        r_HB_B=[[0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]],
        dcm_HB=np.stack([np.eye(3), np.diag([-1.0, -1.0, 1.0])]),
        theta0=[0.1, -0.05],
        name="panels",
    )
    wheels = fx.ReactionWheels(np.eye(3), 0.05, Omega=[10.0, -5.0, 3.0], name="rw")
    sc = fx.Spacecraft(_hub(), state_effectors=[panels, wheels])
    y = sc.init_state(omega_BN_B=[0.01, 0.02, -0.03])
    ctx = sc.context(0.0, y, None)
    rDDot, omegaDot = jnp.array([0.1, -0.2, 0.3]), jnp.array([0.01, 0.02, 0.03])
    for e in (panels, wheels):
        part = e.contribute(y[e.name], ctx)
        two = (e.back_substitution(y[e.name], ctx), e.derivative(y[e.name], ctx, rDDot, omegaDot))
        one = (part.back_sub, part.derivative(rDDot, omegaDot))
        for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(two)):
            np.testing.assert_array_equal(np.abs(np.asarray(a) - np.asarray(b)) <= SAME_BITS, True)
    # The drift calls each effector's derivative closure once with the solved accelerations.
    dy = sc.drift(0.0, y, None)
    rDDot_B, omega_dot = sc.hub_accelerations(ctx, y)
    np.testing.assert_array_equal(
        dy["panels"]["thetaDot"],
        panels.derivative(y["panels"], ctx, rDDot_B, omega_dot)["thetaDot"],
    )


def test_incomplete_and_former_effectors_are_refused():
    class NoDerivative(fx.AbstractStateEffector):
        name: str = eqx.field(static=True, default="x")

        def init_state(self):
            return jnp.zeros(())

        def back_substitution(self, x, ctx):
            return fx.BackSub.zeros()

    with pytest.raises(TypeError, match=r"NoDerivative: .*`derivative` is missing"):
        fx.Spacecraft(_hub(), state_effectors=[NoDerivative()])

    class OldMass(NoDerivative):
        def derivative(self, x, ctx, rDDot_BN_B, omegaDot_BN_B):
            return jnp.zeros(())

        def mass_props(self, t, x):
            return fx.MassProps.zeros()

    with pytest.raises(TypeError, match=r"OldMass.mass_props: .*mass_props\(self, x, ctx\)"):
        fx.Spacecraft(_hub(), state_effectors=[OldMass()])
