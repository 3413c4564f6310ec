"""The lean adaptive core's driver: which runs it supports, and `run`, one compiled program per request."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from ..._compilation._jit import jit as jaxsim_jit
from ..._model._dynamic_object import AbstractDynamicObject, System
from ..._model._layout import StateLayout
from ..._result._codes import RESULTS
from ..._result._solution import finish, make_stats, zeros_counts
from ..._solvers._ode import AbstractAdaptiveSolver, stages_unrolled
from ._adjoint import integrate_adjoint
from ._controller import DEFAULT_GAINS
from ._loop import integrate
from ._sensitivities import integrate_sensitive, loop_kind
from ._stages import pair_of


def supports(solver, y0, adjoint) -> bool:
    """Whether `simulate`'s plain adaptive request runs here: a jaxsim pair, a state with a flat
    layout (one floating dtype) and an adjoint this core implements (None or `ForwardMode`)."""

    return (
        isinstance(solver, AbstractAdaptiveSolver)
        and loop_kind(adjoint) is not None
        and _one_inexact_dtype(y0)
    )


def _one_inexact_dtype(tree) -> bool:
    """`StateLayout.of(tree) is not None` (the leaves share one floating dtype) without building
    the layout: checked at every call, it costs ~2 us instead of ~100 us."""
    dtypes = {
        x.dtype if isinstance(x, jax.Array) else jnp.result_type(x) for x in jtu.tree_leaves(tree)
    }
    return len(dtypes) == 1 and jnp.issubdtype(next(iter(dtypes)), jnp.inexact)


def _identity_step_map(model) -> bool:
    """Whether `model.step_map` is the default identity (of every object of a `System`): the
    loop then needs no jump test and no first-stage recomputation after a step."""

    if isinstance(model, System):
        return all(_identity_step_map(o) for o in model.objects)
    return type(model).step_map is AbstractDynamicObject.step_map


@jaxsim_jit
def run(
    model, y0, args, solver, t0, t1, ts, dt0, rtol, atol, max_steps, outputs, throw, jump_ts,
    loop, endpoints_only, progress=None, gains=DEFAULT_GAINS,
):  # fmt: skip
    """`simulate`'s adaptive run on this core (the counterpart of `jaxsim._drivers._plain._run_adaptive`,
    on the diffrax core)."""

    layout = StateLayout.of(y0)
    pack, unpack = layout.flatten, layout.unflatten
    pair = pair_of(type(solver)._unrolled_cls)

    def f(t, v):
        return pack(model.drift(t, unpack(v), args))

    def step_map(t, v):
        y, counts = model.step_map(t, unpack(v))
        return pack(y), counts

    common = dict(
        pair=pair, dt0=dt0, max_steps=max_steps, jump_ts=jump_ts,
        counts0=zeros_counts(model, y0), endpoints_only=endpoints_only,
        unrolled=stages_unrolled(solver.unrolled, f, jnp.asarray(t0, float), pack(y0)),
        progress=progress, gains=gains,
    )  # fmt: skip
    if loop in ("sensitivity", "adjoint"):
        # The model's and args' arrays are the inputs the derivatives may be taken to.
        theta, static = eqx.partition((model, args), eqx.is_array)

        def f_theta(th, t, v):
            m, a = eqx.combine(th, static)
            return pack(m.drift(t, unpack(v), a))

        def map_theta(th, t, v):
            m, _ = eqx.combine(th, static)
            y, counts = m.step_map(t, unpack(v))
            return pack(y), counts

        tdtype = jnp.result_type(float)
        if loop == "adjoint":
            solve = integrate_adjoint
            map_theta = None if _identity_step_map(model) else map_theta
        else:
            solve = integrate_sensitive
        out = solve(
            f_theta, map_theta, theta, pack(y0), jnp.asarray(t0, tdtype),
            jnp.asarray(t1, tdtype), jnp.asarray(ts, tdtype), jnp.asarray(rtol),
            jnp.asarray(atol), **common,
        )  # fmt: skip
    else:
        out = integrate(
            f, pack(y0), t0, t1, ts, rtol=rtol, atol=atol,
            step_map=None if _identity_step_map(model) else step_map, loop=loop, **common,
        )  # fmt: skip
    ys = jax.vmap(lambda t, v: model.step_map(t, unpack(v))[0])(ts, out["ys"])
    result, t_final = out["result"], out["t_final"]
    if throw:
        ys = eqx.error_if(ys, result != RESULTS.successful, _MAX_STEPS_MESSAGE)
    stats = make_stats(
        out["num_accepted_steps"], out["num_steps"] * pair.rhs_per_step, out["counts"],
        num_rejected_steps=out["num_rejected_steps"],
    )  # fmt: skip
    return finish(model, args, ts, ys, stats, result, t_final, outputs=outputs)


_MAX_STEPS_MESSAGE = RESULTS[RESULTS.max_steps_reached]
