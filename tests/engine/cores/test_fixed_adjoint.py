"""Derivatives of the fixed-step path (RK4 on the fixed-grid driver) agree with each other and with
finite differences: reverse mode (checkpointed, the default, and not), forward mode, batched and
unbatched, jitted and not.

The run: the `combined` spacecraft without its state effectors (hub with centre-of-mass offset,
point-mass gravity, gravity gradient, external torque; the MRP switch in the step map) for 13.4 s
at 0.1 s, sampled every 6.7 s: two intervals of 67 steps, which the checkpointed driver cuts into
four sub-blocks of 17 steps, the last padded with a masked step
(`jaxsim._cores._fixed_grid._checkpoint_levels`); the batched case samples the start and end only. With
XLA's loops compiled whole (jaxsim's programs, by default) a run this short stores every step's stage inputs
instead (`jaxsim._cores._fixed_grid.STORE_BYTES`); the blocked path is checked with that budget set to 0,
and the step-rematerializing path of runs without hoisting with `loops_hoisted` patched off. The
differentiated scalar weighs every state component at every sample, so the samples' cotangents
enter the backward pass; the parameters are every floating array of the spacecraft (mass, inertia,
offsets, gravitational parameter, torque).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import pytest

import jaxsim as js
from effectors.scenarios import combined
from jaxsim._cores import _fixed_grid


T1, DT, SAMPLE_DT = 13.4, 0.1, 6.7  # [s]
# Two derivatives of the same discretisation (another association of the same sums): round-off.
ROUNDOFF_RTOL = 1e-10
# Central differences along one direction, relative step 1e-3 on every parameter. The scalar is
# ~1e6 (it weighs the position) against a derivative of ~1e2, so round-off grows fast below that
# step (measured relative error: 2.2e-8 at 1e-3, 3.7e-8 at 1e-4, 1.4e-6 at 1e-5).
FD_REL_STEP = 1e-3
FD_RTOL = 2e-7
# The stored path is `checkpoint=False`'s loop (with `progress`, its blocks' loops and padding
# would add ~10 %: 95,560 vs 85,888 bytes measured).
STORED_OVER_PLAIN = 1.25


def _setup():
    sc, y0, _ = combined(state_effectors=False)
    params, static = eqx.partition(sc, eqx.is_inexact_array)
    return params, static, y0


PARAMS, STATIC, Y0 = _setup()
# Fixed weights on the sampled states, and a fixed direction in parameter space (relative).
_RNG = np.random.default_rng(27)
WEIGHTS = jtu.tree_map(lambda x: jnp.asarray(_RNG.normal(size=(3,) + np.shape(x))), Y0)
DIRECTION = jtu.tree_map(lambda x: jnp.asarray(_RNG.normal(size=np.shape(x))) * x, PARAMS)


def _states(params, sample_dt=SAMPLE_DT, checkpoint=True):
    sol = js.simulate(
        eqx.combine(params, STATIC), Y0, T1, dt=DT, sample_dt=sample_dt, outputs=False,
        checkpoint=checkpoint,
    )  # fmt: skip
    return sol.ys


def _scalar(params, **kw):
    ys = _states(params, **kw)
    terms = jtu.tree_map(lambda y, w: jnp.sum(y * w[: y.shape[0]]), ys, WEIGHTS)
    return sum(jtu.tree_leaves(terms))


def _dot(a, b):
    return sum(jnp.vdot(x, y) for x, y in zip(jtu.tree_leaves(a), jtu.tree_leaves(b), strict=True))


def _flat(tree):
    return np.concatenate([np.ravel(x) for x in jtu.tree_leaves(tree)])


def _assert_same(a, b):
    # Entries that cancel to ~0 carry the round-off of the gradient's largest terms.
    a, b = _flat(a), _flat(b)
    np.testing.assert_allclose(a, b, rtol=ROUNDOFF_RTOL, atol=ROUNDOFF_RTOL * np.max(np.abs(b)))


@pytest.fixture(scope="module")
def reverse():
    return js.jit(jax.grad(_scalar))(PARAMS)


def _with(patches, make):
    # The driver reads these at trace time: a fresh trace (new function, caches cleared) each.
    with pytest.MonkeyPatch.context() as mp:
        for name, value in patches.items():
            mp.setattr(_fixed_grid, name, value)
        jax.clear_caches()
        out = make()
    jax.clear_caches()
    return out


def _gradient_with(**patches):
    return _with(patches, lambda: js.jit(jax.grad(lambda p: _scalar(p)))(PARAMS))


def _temp_bytes(checkpoint=True, **patches):
    grad = jax.grad(lambda p: _scalar(p, checkpoint=checkpoint))
    compiled = _with(patches, lambda: js.jit(grad).lower(PARAMS).compile().compiled)
    return compiled.memory_analysis().temp_size_in_bytes


@pytest.mark.parametrize(
    "patches",
    [{"STORE_BYTES": 0}, {"loops_hoisted": lambda: False}],
    ids=["blocked", "not-hoisted"],
)
def test_checkpointed_gradient_equals_plain(reverse, patches):
    """The default (every stage input stored with hoisting on; checkpointed sub-blocks, padded,
    otherwise) and `checkpoint=False` differentiate the same steps."""
    plain = js.jit(jax.grad(lambda p: _scalar(p, checkpoint=False)))(PARAMS)
    _assert_same(reverse, plain)
    _assert_same(_gradient_with(**patches), plain)


@pytest.mark.slow  # three gradient programs compiled
@pytest.mark.skipif(not js.small_loops().effective, reason="the budget applies to hoisted loops")
def test_store_budget_chooses_memory():
    """Within `STORE_BYTES` every stage input is stored (about as `checkpoint=False`); past it the
    run is checkpointed in blocks and its reverse-mode temporaries shrink."""
    stored, blocked = _temp_bytes(), _temp_bytes(STORE_BYTES=0)
    plain = _temp_bytes(checkpoint=False)
    assert plain <= stored <= STORED_OVER_PLAIN * plain
    assert blocked < stored


def test_gradient_matches_central_differences(reverse):
    f = js.jit(_scalar)
    h = FD_REL_STEP
    plus = jtu.tree_map(lambda p, d: p + h * d, PARAMS, DIRECTION)
    minus = jtu.tree_map(lambda p, d: p - h * d, PARAMS, DIRECTION)
    fd = (f(plus) - f(minus)) / (2 * h)
    np.testing.assert_allclose(_dot(reverse, DIRECTION), fd, rtol=FD_RTOL)


def test_forward_and_reverse_mode_are_transposes():
    """<v, J u> from one `jax.jvp` equals <J^T v, u> from one `jax.vjp`, for J the Jacobian of
    every sampled state (three samples) w.r.t. every parameter."""
    _, ju = js.jit(lambda p, u: jax.jvp(_states, (p,), (u,)))(PARAMS, DIRECTION)
    (jt_v,) = js.jit(lambda p, v: jax.vjp(_states, p)[1](v))(PARAMS, WEIGHTS)
    np.testing.assert_allclose(_dot(WEIGHTS, ju), _dot(jt_v, DIRECTION), rtol=ROUNDOFF_RTOL)


def test_vmapped_gradient_equals_loop():
    scales = jnp.array([0.9, 1.0, 1.2])
    batch = jtu.tree_map(lambda x: x * scales.reshape((3,) + (1,) * jnp.ndim(x)), PARAMS)
    grad = jax.grad(lambda p: _scalar(p, sample_dt=None))
    batched = js.jit(jax.vmap(grad))(batch)
    for i in range(3):
        one = js.jit(grad)(jtu.tree_map(lambda x, i=i: x[i], batch))
        _assert_same(jtu.tree_map(lambda x, i=i: x[i], batched), one)


def test_jitted_gradient_equals_eager(reverse):
    eager = jax.grad(_scalar)(PARAMS)
    _assert_same(eager, reverse)
