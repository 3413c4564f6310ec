"""The spacecraft drift's derivative programs hold no padded copies, gathers or scatters.

Reverse mode transposes an indexed component (`x[..., 0]`, `M[:3, :3]`) into a zero-padded copy
of the whole array, and an indexed update (`.at[i].set`) into a scatter/gather pair; on the CPU
each is a kernel of its own, and a scatter keeps XLA from compiling a small step loop as one
function. The drift takes components with `jnp.unstack`/`jnp.split` instead, whose transposes are
concatenations. These tests read the traced programs (no compilation): the primitives must not
appear at all, so no tolerance is involved.
"""

import collections

import equinox as eqx
import jax
import jax.extend as jex
import jax.numpy as jnp
import pytest

import effectors as fx
import jaxsim as js  # noqa: F401  (float64)
from effectors.astro import EARTH
from effectors.scenarios import combined
from jaxsim.kinematics import cross3, inv3, tilde


# Primitives that cost a kernel each in the derivative programs (see the module docstring).
_INDEXED = ("pad", "gather", "scatter", "scatter-add", "dynamic_update_slice")


def _primitives(fn, *args) -> collections.Counter:
    """How often each primitive occurs in the program of `fn(*args)`, nested programs included."""
    counts = collections.Counter()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] += 1
            for value in eqn.params.values():
                if isinstance(value, jex.core.ClosedJaxpr):
                    walk(value.jaxpr)
                elif isinstance(value, jex.core.Jaxpr):
                    walk(value)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return counts


def _indexed(counts) -> dict:
    return {name: counts[name] for name in _INDEXED if counts[name]}


def test_combined_drift_derivatives_have_no_indexed_ops():
    sc, y0, _ = combined()
    params, static = eqx.partition(sc, eqx.is_inexact_array)

    def drift(p, y):
        return eqx.combine(p, static).drift(0.0, y, None)

    def vjp(p, y):
        out, back = jax.vjp(drift, p, y)
        return back(out)

    def jvp(p, y):
        return jax.jvp(drift, (p, y), (p, y))

    for fn in (drift, vjp, jvp):
        assert _indexed(_primitives(fn, params, y0)) == {}, fn.__name__


@pytest.mark.parametrize("fn", [cross3, tilde, inv3], ids=lambda f: f.__name__)
def test_kinematics_gradients_have_no_indexed_ops(fn):
    x = jnp.arange(9.0).reshape(3, 3) + 4.0 * jnp.eye(3)
    args = (x[0], x[1]) if fn is cross3 else (x[0],) if fn is tilde else (x,)
    grad = jax.grad(lambda *a: jnp.sum(fn(*a) ** 2), argnums=tuple(range(len(args))))
    assert _indexed(_primitives(grad, *args)) == {}


def test_spherical_harmonics_have_no_scatter_or_gather():
    body = fx.SphericalHarmonicGravity.from_body(EARTH, degree=4)
    x = jnp.array([7.0e6, 1.0e5, 2.0e6])

    def vjp(x):
        out, back = jax.vjp(lambda x: body.field(0.0, x), x)
        return back(out)

    counts = _primitives(vjp, x)
    assert {k: counts[k] for k in ("gather", "scatter", "scatter-add") if counts[k]} == {}
