r"""Physical validity checked in the program, and failed runs that cannot be differentiated.

A model changed after construction (`eqx.tree_at`, a Monte Carlo dispersion, `vmap` over its
parameters) bypasses the checks of its `__init__`. A dynamic object may expose
`validity(y0) -> {name: bool array}` (True where physical; a `Spacecraft` names its checks
`"<effector>.<quantity>"`, e.g. `"hub.mass"`). `simulate` reads it once per run:

- concrete checks that fail are refused at the call, naming the quantities
  (`jaxsim._request._grid.check_physical`);
- traced ones (`jit`, `vmap`, `grad`, Monte Carlo members) fail the run with
  `RESULTS.invalid_model`: with `throw=True` the program raises, its message naming the first
  failing check (`invalid_message`); with `throw=False` `Solution.result` is `invalid_model`
  (states and outputs NaN), `model.validity(y0)` names the failing checks.

Any failed run (`Solution.ok` False) traced for differentiation has NaN derivatives: its samples
carry their values unchanged, but their tangents (and so `jax.grad`, `jax.jvp` through them) are
multiplied by NaN, so that a gradient through a failed solve is never a finite number (a diffrax
solve stopped by `max_steps`, or a run that left its physical range, would otherwise give a
finite, meaningless one, e.g. 0.0). A loss that masks failed members (`jnp.where(sol.ok, x, 0)`)
therefore has a NaN gradient too: drop failed members before differentiating.
"""

import copy

import equinox as eqx
import jax
import jax.numpy as jnp

from .._model._arguments import _validity
from .._model._spans import span_checks
from .._model._validation import is_concrete
from ._codes import RESULTS


def invalid_message(name: str) -> str:
    """The in-program error of a model whose check `name` fails (`throw=True`)."""
    return (
        f"simulate: invalid_model: {name} is out of its physical range (e.g. a mass or inertia "
        "<= 0, an inertia not positive definite or violating the triangle inequality, a fuel load "
        "outside [0, max], a negative stiffness, damping, friction or radius); the model was "
        "changed after construction (eqx.tree_at, a dispersion, vmap)."
    )


def _checks(model, y0) -> dict:

    return _validity(model, y0)


class InProgram:
    """The traced physical checks of one run: `guard` (before the driver, `throw=True`) and
    `finish` (after it, on its `Solution`)."""

    def __init__(self, model, y0, t0=None, t1=None):
        # Nothing traced (a top-level call): the checks were made at the call, skip them here.
        leaves = jax.tree_util.tree_leaves((model, y0, t0, t1))
        if all(is_concrete(x) for x in leaves):
            self.names = ()
            return
        traced = {k: v for k, v in _checks(model, y0).items() if not is_concrete(v)}
        messages = [invalid_message(n) for n in traced]
        # Time spans of the model's inputs (`jaxsim._model._spans`: an ephemeris' records) over the
        # run's times, where traced (concrete ones were refused at the call).
        if t0 is not None:
            for i, (ok, message) in enumerate(span_checks(model, t0, t1)):
                if not is_concrete(ok):
                    traced[f"time span {i}"] = ok
                    messages.append(message.replace("simulate: ", "simulate: invalid_model: ", 1))
        self.names = tuple(traced)
        self.messages = messages
        if traced:
            flags = jnp.stack([jnp.all(jnp.asarray(v)) for v in traced.values()])
            self.valid = jnp.all(flags)
            self.first = jnp.argmin(flags).astype(jnp.int32)

    def guard(self, y0, throw: bool):
        """`y0`, raising in the program (message naming the first failing check) when invalid."""
        if not (throw and self.names):
            return y0
        return eqx.branched_error_if(y0, ~self.valid, self.first, self.messages)

    def finish(self, sol):
        """`sol` with `invalid_model` where the checks fail (states and outputs NaN there) and
        NaN tangents where the run failed."""
        if self.names:
            sol = copy.copy(sol)
            result = RESULTS.where(self.valid, sol.result, RESULTS.invalid_model)
            object.__setattr__(sol, "result", result)
            for field in ("ys", "outputs"):
                value = getattr(sol, field)
                if value is not None:
                    object.__setattr__(sol, field, _nan_where(~self.valid, value))
        return nan_tangents(sol)


def _nan_where(bad, tree):
    def one(x):
        x = jnp.asarray(x)
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            return x
        # NaN added (not selected): the NaN tangents of `nan_tangents` still reach the inputs.
        return x + jnp.where(bad, jnp.nan, 0.0).astype(x.dtype)

    return jax.tree_util.tree_map(one, tree)


@jax.custom_jvp
def _keep_value_nan_tangent(x, ok):
    return x


@_keep_value_nan_tangent.defjvp
def _jvp(primals, tangents):
    x, ok = primals
    tx, _ = tangents
    return x, tx * jnp.where(ok, 1.0, jnp.nan).astype(tx.dtype)


def nan_tangents(sol):
    """`sol` whose inexact samples (`ys`, `outputs`, `t_final`) keep their values and get NaN
    tangents where the run failed; unchanged when its result is concrete (nothing is traced)."""
    value = getattr(sol.result, "_value", sol.result)
    if is_concrete(value):
        return sol
    ok = sol.result == RESULTS.successful

    def one(x):
        if not isinstance(x, jax.Array) or not jnp.issubdtype(x.dtype, jnp.inexact):
            return x
        return _keep_value_nan_tangent(x, ok)

    sol = copy.copy(sol)
    for field in ("ys", "outputs", "t_final"):
        value = getattr(sol, field, None)
        if value is not None:
            object.__setattr__(sol, field, jax.tree_util.tree_map(one, value))
    return sol
