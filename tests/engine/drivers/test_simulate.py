"""Engine behaviour: synchronized objects, solvers, jit/vmap/grad, failure reporting, bad settings."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js


MU = 3.986004415e14
R0 = np.array([-4020338.690396649, 7490566.741852513, 5248299.211589362])
V0 = np.array([-5199.77710904224, -3436.681645356935, 1041.576797498721])
I_HUB = np.array([[500.0, 5.0, -3.0], [5.0, 200.0, 2.0], [-3.0, 2.0, 300.0]])


def make_sc(name="sc", mass=100.0, inertia=I_HUB, offset=(0.02, -0.01, 0.03)):
    earth = fx.PointMassGravity(MU)
    return fx.Spacecraft(
        fx.Hub(mass, inertia, offset),
        gravity=(earth,),
        dynamic_effectors=(
            fx.GravityGradient(earth),
            fx.ExtForceTorque(force_B=[20.0, -10.0, 5.0], torque_B=[1e-3, 0.0, -2e-3]),
        ),
        name=name,
    )


# Same arithmetic in both runs; only XLA's fusion of the combined graph differs (round-off).
SYNC_TOL = 1e-14


def test_two_spacecraft_together_equal_each_alone():
    a = make_sc("a")
    b = make_sc("b", mass=50.0, inertia=np.diag([30.0, 40.0, 50.0]), offset=(0.0, 0.0, 0.1))
    ya = a.init_state(R0, V0, [0.1, 0.2, -0.3], [0.05, -0.04, 0.07])
    yb = b.init_state(-R0, V0, [0.3, -0.2, 0.1], [-0.2, 0.1, 0.3])
    system = js.System([a, b])
    kw = dict(dt=0.1, sample_dt=1.0, outputs=False)
    both = js.simulate(system, system.init_state({"a": ya, "b": yb}), 60.0, **kw)
    alone_a = js.simulate(a, ya, 60.0, **kw)
    alone_b = js.simulate(b, yb, 60.0, **kw)
    for name, alone in [("a", alone_a), ("b", alone_b)]:
        for key in ["r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B"]:
            x, ref = np.asarray(both.ys[name]["hub"][key]), np.asarray(alone.ys["hub"][key])
            err = np.abs(x - ref).max() / np.abs(ref).max()
            assert err <= SYNC_TOL, f"{name}.{key}: {err:.2e}"
        np.testing.assert_array_equal(
            both.counts[name]["mrp_switches"], alone.counts["mrp_switches"]
        )


def test_derived_equals_outputs_merged_with_energy():
    """`derived` (one hub context, what `simulate` records) equals the two separate passes, bitwise,
    for a spacecraft with effectors and for a System of two."""
    from effectors.scenarios import combined
    from jaxsim._model._dynamic_object import merge_derived

    sc, y0, _ = combined()
    system = js.System([sc, make_sc("b")])
    yb = make_sc("b").init_state(-R0, V0, [0.3, -0.2, 0.1], [-0.2, 0.1, 0.3])
    for model, y in ((sc, y0), (system, system.init_state({sc.name: y0, "b": yb}))):
        got = jax.jit(lambda t, y: model.derived(t, y, None))(12.5, y)
        ref = jax.jit(
            lambda t, y: merge_derived(model.outputs(t, y, None), model.energy_momentum(t, y, None))
        )(12.5, y)
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(ref)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
            np.testing.assert_array_equal(a, b)
    assert "totRotEnergy" in got[sc.name] and "r_BN_N" in got[sc.name]


def test_duplicate_names_rejected():
    with pytest.raises(ValueError, match="objects"):
        js.System([make_sc("x"), make_sc("x")])
    with pytest.raises(ValueError, match="effectors"):
        fx.Spacecraft(
            fx.Hub(1.0, np.eye(3)),
            dynamic_effectors=(fx.ExtForceTorque(name="e"), fx.ExtForceTorque(name="e")),
        )
    with pytest.raises(ValueError, match="effectors"):
        fx.Spacecraft(fx.Hub(1.0, np.eye(3)), dynamic_effectors=(fx.ExtForceTorque(name="hub"),))
    earth = fx.PointMassGravity(MU)
    with pytest.raises(ValueError, match="gravity"):
        fx.Spacecraft(fx.Hub(1.0, np.eye(3)), gravity=(earth, earth))


def final_scalar(mass, inertia, r0, omega0):
    sc = make_sc(mass=mass, inertia=inertia)
    y0 = sc.init_state(r0, V0, [0.1, 0.2, -0.3], omega0)
    sol = js.simulate(sc, y0, 20.0, dt=0.5, outputs=False)
    hub = sol.ys["hub"]
    w = jnp.array([1.0, -2.0, 0.5])
    # Two scalars: a position one (mass acts through F/m) and an attitude one (inertia, rates).
    pos = jnp.sum(hub["r_BN_N"][-1] * w)
    att = jnp.sum(hub["sigma_BN"][-1] * w) + jnp.sum(hub["omega_BN_B"][-1] * w)
    return jnp.stack([pos, att])


# Central differences: truncation O(h^2) and round-off O(eps |f| / h), with steps chosen per argument
# so that both stay below ~1e-7 relative (|f| ~ 1e7 m is dominated by the orbit), inside 1e-6.
FD_REL_TOL = 1e-6


def central_difference(f, x, rel_step=1e-6):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        h = rel_step * max(abs(x[idx]), 1.0)
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        g[idx] = (f(xp) - f(xm)) / (2 * h)
    return g


@pytest.fixture(scope="module")
def grads():
    args = (100.0, I_HUB, R0, np.array([0.05, -0.04, 0.07]))
    f = jax.jit(final_scalar)
    g = jax.jit(jax.jacrev(final_scalar, argnums=(0, 1, 2, 3)))(*args)
    return f, args, g


def test_grad_mass(grads):
    f, args, g = grads
    fd = central_difference(lambda m: float(f(m, *args[1:])[0]), args[0], 1e-4)
    np.testing.assert_allclose(g[0][0], fd, rtol=FD_REL_TOL)


def test_grad_inertia(grads):
    f, args, g = grads

    # Perturb the symmetric inertia symmetrically: the derivative along (E_ij + E_ji) is g_ij + g_ji.
    def f_sym(p):
        return float(f(args[0], jnp.asarray(p), args[2], args[3])[1])

    for i, j in [(0, 0), (1, 1), (0, 1), (1, 2)]:
        E = np.zeros((3, 3))
        E[i, j] = E[j, i] = 1.0
        h = 1e-2
        fd = (f_sym(args[1] + h * E) - f_sym(args[1] - h * E)) / (2 * h)
        ad = float(np.sum(np.asarray(g[1][1]) * E))
        assert ad == pytest.approx(fd, rel=FD_REL_TOL), (i, j)


def test_grad_initial_state(grads):
    f, args, g = grads
    fd_r = central_difference(lambda r: float(f(args[0], args[1], r, args[3])[0]), args[2], 1e-7)
    np.testing.assert_allclose(g[2][0], fd_r, rtol=FD_REL_TOL)
    fd_w = central_difference(lambda w: float(f(*args[:3], w)[1]), args[3])
    np.testing.assert_allclose(g[3][1], fd_w, rtol=FD_REL_TOL)


def test_jit_and_vmap_over_initial_conditions():
    sc = make_sc()
    omegas = jnp.array([[0.05, -0.04, 0.07], [0.0, 0.01, 0.0], [-0.1, 0.2, 0.05]])

    def run(omega):
        y0 = sc.init_state(R0, V0, [0.1, 0.2, -0.3], omega)
        return js.simulate(sc, y0, 10.0, dt=0.5).ys["hub"]["omega_BN_B"][-1]

    batched = jax.jit(jax.vmap(run))(omegas)
    for k in range(3):
        np.testing.assert_allclose(batched[k], run(omegas[k]), rtol=1e-14, atol=1e-16)


# Same scheme through diffrax's stage loop and through the unrolled driver: round-off only.
DIFFRAX_SAME_SCHEME_TOL = 1e-12


def test_fixed_step_solvers_match_diffrax():
    sc = fx.Spacecraft(fx.Hub(100.0, I_HUB, [0.02, -0.01, 0.03]))
    y0 = sc.init_state(R0, V0, [0.1, 0.2, -0.3], [0.05, -0.04, 0.07])
    for solver in [js.Euler(), js.RK2(), js.RK4()]:
        ours = js.simulate(sc, y0, 5.0, dt=0.5, solver=solver, outputs=False)
        ref = dfx.diffeqsolve(
            dfx.ODETerm(sc.drift),
            solver.to_diffrax(),
            0.0,
            5.0,
            0.5,
            y0,
            stepsize_controller=dfx.ConstantStepSize(),
        )
        for key in ["r_BN_N", "omega_BN_B"]:
            a, b = ours.ys["hub"][key][-1], ref.ys["hub"][key][-1]
            np.testing.assert_allclose(a, b, rtol=DIFFRAX_SAME_SCHEME_TOL)
    # A raw diffrax solver runs in the fixed-step driver when `dt` is given.
    raw = js.simulate(sc, y0, 5.0, dt=0.5, solver=dfx.Heun(), outputs=False)
    ours = js.simulate(sc, y0, 5.0, dt=0.5, solver=js.RK2(), outputs=False)
    np.testing.assert_allclose(raw.ys["hub"]["r_BN_N"], ours.ys["hub"]["r_BN_N"], rtol=1e-13)


# Tsit5 at rtol=atol=1e-10 vs RK4 at 0.1 s over 100 s: both ~1e-10 accurate.
ADAPTIVE_VS_FIXED_TOL = 1e-8


def test_adaptive_matches_fixed_and_switches_mrp():
    sc = fx.Spacecraft(fx.Hub(10.0, np.diag([1.0, 2.0, 3.0])))
    y0 = sc.init_state(sigma_BN=[0.2, 0.1, 0.0], omega_BN_B=[0.5, -0.3, 0.4])
    ts = np.linspace(0.0, 100.0, 11)
    fixed = js.simulate(sc, y0, ts=ts, dt=0.01)
    adapt = js.simulate(sc, y0, ts=ts, solver=js.Tsit5(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        adapt.outputs["omega_BN_B"], fixed.outputs["omega_BN_B"], atol=ADAPTIVE_VS_FIXED_TOL
    )
    # Shadow sets may differ only where |sigma| is near 1; compare attitudes through DCMs.
    from jaxsim.kinematics import mrp_to_dcm

    np.testing.assert_allclose(
        mrp_to_dcm(adapt.ys["hub"]["sigma_BN"]),
        mrp_to_dcm(fixed.ys["hub"]["sigma_BN"]),
        atol=ADAPTIVE_VS_FIXED_TOL,
    )
    assert np.all(np.linalg.norm(adapt.ys["hub"]["sigma_BN"], axis=-1) <= 1.0)
    assert int(adapt.stats["counts"]["mrp_switches"]) >= 1
    assert int(fixed.counts["mrp_switches"][-1]) >= 1


class Exploding(js.AbstractDynamicObject):
    """dy/dt = y^2 from y0 = 1 blows up at t = 1."""

    name: str = eqx.field(static=True, default="boom")

    def init_state(self):
        return jnp.ones(())

    def drift(self, t, y, args):
        return y * y


# Where a Tsit5 run at rtol = atol = 1e-6 stalls on dy/dt = y^2 (exact blow-up at t = 1) [s].
BLOWUP_T_TOL = 1e-3


def test_failed_solve_raises_or_reports():
    model = Exploding()
    with pytest.raises(Exception, match="non-finite"):
        jax.block_until_ready(js.simulate(model, model.init_state(), 3.0, dt=0.5).ys)
    sol = js.simulate(model, model.init_state(), 3.0, dt=0.5, throw=False)
    assert sol.result == js.RESULTS.nonfinite_state and not sol.ok
    assert float(sol.t_final) < 3.0 and np.isnan(np.asarray(sol.ys)[-1])
    sol = js.simulate(
        model,
        model.init_state(),
        3.0,
        solver=js.Tsit5(),
        rtol=1e-6,
        atol=1e-6,
        max_steps=200,
        throw=False,
    )
    assert sol.result == js.RESULTS.max_steps_reached and "max_steps" in sol.message
    # The solver stalls at the blow-up (t = 1, to its tolerance): t_final is where it got to.
    assert abs(float(sol.t_final) - 1.0) < BLOWUP_T_TOL


def test_bad_solver_settings():
    sc = make_sc()
    y0 = sc.init_state(R0, V0)
    with pytest.raises(ValueError, match="rtol"):
        js.simulate(sc, y0, 10.0, solver=js.Dopri5())
    with pytest.raises(ValueError, match="dt"):
        js.simulate(sc, y0, 10.0, solver=js.RK4())
    with pytest.raises(ValueError, match="sample time"):
        js.simulate(sc, y0, 10.0, dt=0.3)
    with pytest.raises(ValueError, match="sample time"):
        js.simulate(sc, y0, ts=[0.0, 0.25, 1.0], dt=0.1)
    with pytest.raises(ValueError, match="sample_dt"):
        js.simulate(sc, y0, 10.0, dt=0.1, sample_dt=3.0)
    with pytest.raises(ValueError, match="SDE"):
        js.simulate(sc, y0, 10.0, solver=dfx.SRA1(), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="rtol"):
        js.simulate(sc, y0, 10.0, dt=0.1, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="y0"):
        js.simulate(sc, {"hub": y0["hub"]["r_BN_N"]}, 10.0, dt=0.1)
    with pytest.raises(ValueError, match="t1"):
        js.simulate(sc, y0, dt=0.1)


def test_sample_times_on_grid_nonuniform():
    """Non-uniform sample times on the step grid give the same states as a uniform run."""
    sc = make_sc()
    y0 = sc.init_state(R0, V0, [0.1, 0.2, -0.3], [0.05, -0.04, 0.07])
    uni = js.simulate(sc, y0, 6.0, dt=0.5, sample_dt=0.5, outputs=False)
    sub = js.simulate(sc, y0, ts=[0.0, 1.0, 1.5, 4.0, 6.0], dt=0.5, outputs=False)
    idx = np.array([0, 2, 3, 8, 12])
    np.testing.assert_allclose(sub.ys["hub"]["r_BN_N"], uni.ys["hub"]["r_BN_N"][idx], rtol=1e-15)


# The same floating-point operations in the same order: the flat stage loop and the pytree stage
# loop (bitwise equal over 5,830 steps when measured; a few ulps allowed for compiler contraction).
SAME_ARITHMETIC_RTOL = 4 * np.finfo(np.float64).eps
# Straight-line stages are compiled as one program: XLA fuses the right-hand side differently, and
# the panel accelerations' cancellation turns 1-ulp input differences into ~5 ulps of the result.
STRAIGHT_LINE_RTOL = 1e-14


def test_stage_loop_equals_straight_line_stages():
    # The chain-RK stage loop carries the state as one flat vector; it must be the arithmetic of
    # the pytree stage loop and, to round-off, of the straight-line stages (combined spacecraft).
    from effectors.scenarios import combined
    from jaxsim._solvers._ode import _chain_step_tree

    sc, y0, _ = combined()
    # Straight-line stages only for RK2 (compiling four straight-line RHS copies is slow).
    for solver, straight in ((js.RK2(), True), (js.RK4(), False)):  # (Euler: no stage loop)
        loop = js.jit(lambda y, s=solver: s.step(sc.drift, 0.0, y, 0.1, None))(y0)
        a_next = np.array([row[-1] for row in solver.a[1:]] + [0.0])
        coef = tuple(jnp.asarray(x) for x in (0.1 * a_next, 0.1 * np.asarray(solver.b), solver.c))
        tree = js.jit(lambda y: _chain_step_tree(sc.drift, coef, 0.0, y, 0.1, None))(y0)
        for a, b in zip(jax.tree.leaves(loop), jax.tree.leaves(tree)):
            scale = float(np.max(np.abs(b)))
            np.testing.assert_allclose(a, b, rtol=0, atol=SAME_ARITHMETIC_RTOL * scale)
        if straight:
            line = js.jit(lambda y, s=solver: s.unrolled_step(sc.drift, 0.0, y, 0.1, None))(y0)
            for a, c in zip(jax.tree.leaves(loop), jax.tree.leaves(line)):
                scale = float(np.max(np.abs(c)))
                np.testing.assert_allclose(a, c, rtol=0, atol=STRAIGHT_LINE_RTOL * scale)


class MixedDtypes(js.AbstractDynamicObject):
    """x' = -x in float64 and float32 leaves (the stage loop then runs on the pytree)."""

    name: str = eqx.field(static=True, default="mixed")

    def init_state(self):
        return {"a": jnp.ones(2), "b": jnp.ones(3, jnp.float32)}

    def drift(self, t, y, args):
        return jax.tree.map(lambda x: -x, y)


class WrongDerivative(Exploding):
    def drift(self, t, y, args):
        return {"y": -y}


# RK4 at 0.01 s (or Dopri8 at 1e-9) over 1 s on x' = -x: error < 1e-10; float32 round-off ~1e-7.
RK4_DECAY_TOL_F64 = 1e-10
RK4_DECAY_TOL_F32 = 1e-6


def test_stage_loop_mixed_dtypes_and_structure_errors():
    model = MixedDtypes()
    sol = js.simulate(model, model.init_state(), 1.0, dt=0.01, outputs=False)
    assert sol.ys["b"].dtype == jnp.float32 and sol.ys["a"].dtype == jnp.float64
    np.testing.assert_allclose(sol.ys["a"][-1], np.exp(-1.0), rtol=RK4_DECAY_TOL_F64)
    np.testing.assert_allclose(sol.ys["b"][-1], np.exp(-1.0), rtol=RK4_DECAY_TOL_F32)
    # Adaptive Dopri8 with unrolled stages: the stage combinations then also run on the pytree.
    ada = js.simulate(model, model.init_state(), 1.0, solver=js.Dopri8(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ada.ys["a"][-1], np.exp(-1.0), rtol=RK4_DECAY_TOL_F64)
    np.testing.assert_allclose(ada.ys["b"][-1], np.exp(-1.0), rtol=RK4_DECAY_TOL_F32)
    bad = WrongDerivative()
    with pytest.raises(ValueError, match="derivative must have the structure of the state"):
        js.simulate(bad, bad.init_state(), 1.0, dt=0.1, outputs=False)


def test_state_structure_check_is_cached_per_model_structure():
    # The check caches init_state()'s structure per model structure; a wrong y0 must still fail
    # after a successful call, and models of different structure must not share an entry.
    one = make_sc()
    two = fx.Spacecraft(
        fx.Hub(100.0, I_HUB),
        state_effectors=(fx.ReactionWheels([[1.0, 0.0, 0.0]], [0.1], name="rw"),),
    )
    y1 = one.init_state(R0, V0)
    js.simulate(one, y1, 1.0, dt=0.5, outputs=False)
    with pytest.raises(ValueError, match="must have the structure"):
        js.simulate(two, y1, 1.0, dt=0.5, outputs=False)
    with pytest.raises(ValueError, match="must have the structure"):
        js.simulate(one, {"hub": y1["hub"], "extra": jnp.zeros(1)}, 1.0, dt=0.5, outputs=False)


# Tsit5 at rtol = atol = 1e-12 over 20 s of the rigid body: both runs take the same steps; the
# sample at t1 is the last step's state or its dense output evaluated at the step end (round-off).
ENDPOINT_SAVE_TOL = 1e-12


def test_adaptive_endpoint_samples_equal_dense_samples():
    sc = fx.Spacecraft(fx.Hub(10.0, np.diag([1.0, 2.0, 3.0])))
    y0 = sc.init_state(sigma_BN=[0.2, 0.1, 0.0], omega_BN_B=[0.5, -0.3, 0.4])
    kw = dict(solver=js.Tsit5(), rtol=1e-12, atol=1e-12)
    ends = js.simulate(sc, y0, 20.0, **kw)  # samples [t0, t1]: saved as step-end states
    dense = js.simulate(sc, y0, ts=np.array([0.0, 10.0, 20.0]), **kw)  # through dense output
    assert int(ends.stats["num_steps"]) == int(dense.stats["num_steps"])
    for key in ("sigma_BN", "omega_BN_B"):
        np.testing.assert_allclose(
            ends.ys["hub"][key], dense.ys["hub"][key][::2], atol=ENDPOINT_SAVE_TOL
        )
    np.testing.assert_allclose(
        ends.outputs["totRotAngMomPntC_N"],
        dense.outputs["totRotAngMomPntC_N"][::2],
        atol=ENDPOINT_SAVE_TOL,
    )
