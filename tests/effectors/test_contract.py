"""The state-effector contract (`docs/writing_an_effector.md`): one pass per derivative evaluation
(`contribute`; the two-method form through the `TwoMethodStateEffector` adapter), mass properties
that see the time, the commands and the states, and clear refusals."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js


# The two-method adapter and its one pass evaluate the same expressions: identical bits.
SAME_BITS = 0.0


def _hub():
    return fx.Hub(mass=50.0, IHubPntBc_B=np.diag([5.0, 6.0, 7.0]))


class _Ballast(fx.TwoMethodStateEffector):
    """A point mass at r_B whose mass is commanded through args[name]["mass"] (reads the
    MassContext's args and time): tests that mass properties see the commands."""

    r_B: jnp.ndarray
    name: str = eqx.field(static=True)

    def init_commands(self):
        return {"mass": jnp.zeros(())}

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


class _Wrapping(eqx.Module):
    """A state effector `inner` under its name, with its states and mass properties: the
    wrappers below change only how its contribution reaches the spacecraft."""

    inner: fx.AbstractStateEffector
    name: str = eqx.field(static=True)

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name

    def init_state(self, **kw):
        return self.inner.init_state(**kw)

    def mass_props(self, x, ctx):
        return self.inner.mass_props(x, ctx)


class _Split(_Wrapping, fx.TwoMethodStateEffector):
    """A library effector's one pass written as the two methods of the adapter."""

    def back_substitution(self, x, ctx):
        return fx.as_contribution(self.inner.contribute(x, ctx)).back_sub

    def derivative(self, x, ctx, rDDot_BN_B, omegaDot_BN_B):
        part = fx.as_contribution(self.inner.contribute(x, ctx))
        return part.derivative(rDDot_BN_B, omegaDot_BN_B)


def test_one_pass_equals_two_methods():
    # The adapter's `contribute` is its two methods; a library effector's one pass, split into
    # the two methods, gives the same terms; the spacecraft's drift uses the one pass.
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
    for e in (_Split(panels), _Split(wheels)):
        part = fx.as_contribution(e.contribute(y[e.name], ctx))
        two = (e.back_substitution(y[e.name], ctx), e.derivative(y[e.name], ctx, rDDot, omegaDot))
        one = (part.back_sub, part.derivative(rDDot, omegaDot))
        for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(two)):
            np.testing.assert_array_equal(np.abs(np.asarray(a) - np.asarray(b)) <= SAME_BITS, True)
    # The drift calls each effector's derivative closure once with the solved accelerations.
    dy = sc.drift(0.0, y, None)
    rDDot_B, omega_dot = sc.hub_accelerations(ctx, y)
    np.testing.assert_array_equal(
        dy["panels"]["thetaDot"],
        fx.as_contribution(panels.contribute(y["panels"], ctx)).derivative(rDDot_B, omega_dot)[
            "thetaDot"
        ],
    )


def test_incomplete_effectors_are_refused():
    class NoContribute(fx.AbstractStateEffector):
        name: str = eqx.field(static=True, default="x")

        def init_state(self):
            return jnp.zeros(())

    with pytest.raises(TypeError, match=r"NoContribute.*contribute"):
        NoContribute()

    class NoDerivative(fx.TwoMethodStateEffector):
        name: str = eqx.field(static=True, default="x")

        def init_state(self):
            return jnp.zeros(())

        def back_substitution(self, x, ctx):
            return fx.BackSub.zeros()

    with pytest.raises(TypeError, match=r"NoDerivative.*derivative"):
        NoDerivative()


class _Unstacked(_Wrapping, fx.AbstractStateEffector):
    """An effector's `contribute` turned into a plain `Contribution` (summed matrices, derivative
    from the hub accelerations): the spacecraft then cannot stack its joint rows."""

    def contribute(self, x, ctx):
        return fx.as_contribution(self.inner.contribute(x, ctx))


# Stacked and per-effector assembly sum the same terms in another order: round-off only.
STACKED_RTOL = 1e-12


def test_stacked_joint_rows_equal_per_effector_sums():
    # Every 1-DOF kind, several units each, plus a state effector without joint rows: the
    # stacked block (one product over all rows) gives the per-effector sums' drift.
    panels = fx.HingedRigidBodies(
        mass=[10.0, 8.0],
        IPntS_S=np.tile(np.diag([2.0, 1.0, 2.0]), (2, 1, 1)),
        d=[1.0, 0.8],
        k=[5.0, 4.0],
        c=[0.5, 0.2],
        r_HB_B=[[0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]],
        dcm_HB=np.stack([np.eye(3), np.diag([-1.0, -1.0, 1.0])]),
        theta0=[0.1, -0.05],
        thetaDot0=[0.02, 0.01],
        name="panels",
    )
    wheels = fx.ReactionWheels(np.eye(3), 0.05, Omega=[10.0, -5.0, 3.0], name="rw")
    jitter = fx.ReactionWheels(
        [[0.0, 0.6, 0.8]],
        0.03,
        Omega=[40.0],
        model="jitter_fully_coupled",
        mass=2.0,
        U_s=1e-5,
        U_d=1e-6,
        rWB_B=[[0.1, 0.2, -0.1]],
        name="jit",
    )
    spinners = fx.SpinningBodies(
        mass=[3.0],
        ISPntSc_S=[np.diag([0.2, 0.3, 0.4])],
        dcm_S0B=[np.eye(3)],
        sHat_S=[[0.0, 0.0, 1.0]],
        r_SB_B=[[0.0, 0.5, 0.2]],
        thetaDot0=[0.3],
        k=[1.0],
        name="spin",
    )
    smd = fx.SpringMassDampers(
        mass=[1.5, 2.5],
        k=[20.0, 30.0],
        c=[0.3, 0.1],
        pHat_B=[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
        r_PB_B=[[0.2, 0.1, 0.0], [0.0, -0.3, 0.1]],
        rho0=[0.05, -0.02],
        name="smd",
    )
    ballast = _Ballast([0.3, -0.2, 0.1])
    effs = [panels, wheels, ballast, jitter, spinners, smd]
    stacked = fx.Spacecraft(_hub(), state_effectors=effs)
    plain = fx.Spacecraft(_hub(), state_effectors=[_Unstacked(e) for e in effs])
    y = stacked.init_state(omega_BN_B=[0.01, 0.02, -0.03], v_CN_N=[1.0, 2.0, 3.0])
    args = {"ballast": {"mass": jnp.asarray(4.0)}}
    one = jax.tree_util.tree_leaves(stacked.drift(0.5, y, args))
    two = jax.tree_util.tree_leaves(plain.drift(0.5, y, args))
    assert len(one) == len(two)
    for a, b in zip(one, two):
        scale = max(float(jnp.max(jnp.abs(b))), 1e-300)
        np.testing.assert_allclose(a, b, rtol=0, atol=STACKED_RTOL * scale)
    # Each effector's rows sum to the BackSub it would give alone.
    ctx = stacked.context(0.5, y, args)
    for e in (panels, wheels, jitter, spinners, smd):
        part = e.contribute(y[e.name], ctx)
        assert isinstance(part, fx.JointContribution)
        assert part.rows.num_rows == jax.tree_util.tree_leaves(y[e.name])[0].shape[0]


def test_one_derived_pass_equals_outputs_and_energy():
    # `derived` (what the drivers record at the samples) shares each effector's kinematics
    # between its outputs and its energy/momentum: the same numbers as the two separate calls.
    panels = fx.HingedRigidBodies(
        mass=[10.0],
        IPntS_S=[np.diag([2.0, 1.0, 2.0])],
        d=[1.0],
        k=[5.0],
        r_HB_B=[[0.5, 0.0, 0.0]],
        dcm_HB=[np.eye(3)],
        theta0=[0.1],
        thetaDot0=[0.02],
        name="panels",
    )
    smd = fx.SpringMassDampers(
        mass=[1.5],
        k=[20.0],
        c=[0.1],
        pHat_B=[[1.0, 0.0, 0.0]],
        r_PB_B=[[0.2, 0.1, 0.0]],
        rho0=[0.05],
        name="smd",
    )
    sc = fx.Spacecraft(_hub(), state_effectors=[panels, smd])
    y = sc.init_state(omega_BN_B=[0.01, 0.02, -0.03])
    one = sc.derived(0.0, y, None)
    two = js.dynamic_object.merge_derived(
        sc.outputs(0.0, y, None), sc.energy_momentum(0.0, y, None)
    )
    assert jax.tree_util.tree_structure(one) == jax.tree_util.tree_structure(two)
    for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(two)):
        np.testing.assert_array_equal(np.abs(np.asarray(a) - np.asarray(b)) <= SAME_BITS, True)
    for e in (panels, smd):
        o, em = e.derived(y[e.name], sc.context(0.0, y, None))
        assert set(o) == set(one[e.name])
        assert em.E.shape == ()
