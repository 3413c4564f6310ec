"""Clocks, events and discontinuities of a request: entries, resets, scheduled discontinuities."""

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._events._event import Event
from .._model._clocks import AbstractDiscreteModel, plan_ticks, with_held
from .._model._dynamic_object import (
    AbstractDynamicObject,
)
from .._model._signals import AbstractSignal
from .._model._validation import _fmt, check_unique_names, is_concrete
from .._route import SolverKind
from ._commands import _describe, check_held_keys, initial_held
from ._grid import check_budget, on_grid
from ._settings import _short


# --------------------------------------------------------------------------------------------------
# Clocks, events and discontinuities


def check_discontinuities(model, discontinuities, t0, t1) -> tuple:
    """Discontinuity times (scalars, possibly traced): the model's breakpoints plus `discontinuities`.

    An entry may be a signal, a time or 1-D array of times [s], or the model itself (its
    breakpoints are always boundaries; naming it asks for the clocked driver, e.g. so that a traced
    burn start splits a fixed step and is differentiable). Concrete times must be finite.
    """
    items = list(model.breakpoints())
    for i, d in enumerate(discontinuities):
        if d is model:
            continue
        if isinstance(d, AbstractDynamicObject):
            items.extend(d.breakpoints())
        elif isinstance(d, AbstractSignal):
            try:
                items.extend(d.breakpoints(t0, t1))
            except TypeError:
                items.extend(d.breakpoints())
        else:
            try:
                arr = jnp.atleast_1d(jnp.asarray(d, dtype=float))
            except (TypeError, ValueError) as err:
                raise TypeError(
                    "simulate: `discontinuities` entries must be signals, the model, scalars or "
                    f"1-D arrays of times [s]; got {type(d).__name__} {_short(d)}."
                ) from err
            if arr.ndim != 1:
                raise ValueError(
                    "simulate: `discontinuities` entries must be signals, the model, scalars or "
                    f"1-D arrays of times [s]; got shape {arr.shape}."
                )
            if is_concrete(arr) and not np.all(np.isfinite(np.asarray(arr))):
                raise ValueError(
                    f"simulate: `discontinuities[{i}]` [s] must hold finite times; got "
                    f"{_fmt(np.asarray(arr))}."
                )
            items.extend(arr[i] for i in range(arr.shape[0]))
    times = tuple(jnp.asarray(x, dtype=float) for x in items)
    for x in times:
        if is_concrete(x) and not np.isfinite(float(x)):
            raise ValueError(
                f"simulate: a discontinuity time (a breakpoint of the model or of a signal in "
                f"`discontinuities`) [s] must be finite; got {float(x)!r}."
            )
    return times


def check_entries(clocks, events) -> None:
    """`clocks` are discrete models with unique names, `events` a sequence of `Event`."""

    if isinstance(events, Event):
        raise TypeError(
            "simulate: `events` must be a sequence of Event (e.g. `events=[event]`); got a single "
            "Event."
        )
    if isinstance(clocks, AbstractDiscreteModel):
        raise TypeError(
            "simulate: `clocks` must be a sequence of discrete models (e.g. `clocks=[fsw]`); got "
            "a single " + type(clocks).__name__ + "."
        )
    for i, m in enumerate(clocks):
        if not isinstance(m, AbstractDiscreteModel):
            raise ValueError(
                f"simulate: `clocks[{i}]` must be a discrete model (jaxsim.DiscreteModel or an "
                f"AbstractDiscreteModel); got {type(m).__name__}."
            )
    check_unique_names("simulate", "clocks", [m.name for m in clocks])
    for i, e in enumerate(events):
        if not isinstance(e, Event):
            raise ValueError(
                f"simulate: `events[{i}]` must be a jaxsim.Event; got {type(e).__name__}."
            )
        if not callable(e.cond):
            raise ValueError(
                f"simulate: `events[{i}].cond` must be callable (t, y, args) -> scalar; got "
                f"{_short(e.cond)}."
            )


def check_conditions(events, y0, args, t0) -> None:
    """Each event condition returns a real scalar (a float, or a bool for a boolean condition)."""
    for i, ev in enumerate(events):
        where = f"simulate: the condition of `events[{i}]` ({ev.name!r}), `cond(t, y, args)`,"
        try:
            out = jax.eval_shape(ev.cond, jnp.asarray(t0, float), y0, args)
        except TypeError as err:
            if "not a valid JAX type" not in str(err):
                raise
            raise ValueError(
                f"{where} must return a real scalar (a float, or a bool); got a value that is "
                f"not an array ({err})."
            ) from None
        if not isinstance(out, jax.ShapeDtypeStruct):
            got = "None" if out is None else f"{type(out).__name__} {_describe(out)}"
            raise ValueError(f"{where} must return a real scalar (a float, or a bool); got {got}.")
        if out.shape != () or np.dtype(out.dtype).kind not in "biuf":
            raise ValueError(
                f"{where} must return a real scalar (a float, or a bool); got an array of shape "
                f"{out.shape} and dtype {out.dtype}."
            )


def check_resets(events, y0, z0, args, t0) -> None:
    """Each reset must return `(y, z)` shaped like the state and the discrete states."""
    want_y = jax.eval_shape(lambda: y0)
    want_z = jax.eval_shape(lambda: z0)
    for i, ev in enumerate(events):
        if ev.reset is None:
            continue
        where = f"simulate: the reset of `events[{i}]` ({ev.name!r})"
        out = jax.eval_shape(ev.reset, jnp.asarray(t0, float), y0, z0, args)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError(
                f"{where} must return a pair `(y, z)` (the new continuous state and the discrete "
                f"states `{{model_name: z}}`, e.g. `return y_new, z`); got {type(out).__name__} "
                f"{_describe(out) if not isinstance(out, tuple) else len(out)}."
            )
        for part, got, want in (("y", out[0], want_y), ("z", out[1], want_z)):
            same = jtu.tree_structure(got) == jtu.tree_structure(want) and all(
                a.shape == b.shape for a, b in zip(jtu.tree_leaves(got), jtu.tree_leaves(want))
            )
            if not same:
                raise ValueError(
                    f"{where} returned a `{part}` of structure {_describe(got)}; expected the "
                    f"structure of the {'state y0' if part == 'y' else 'discrete states z'}: "
                    f"{_describe(want)}."
                )


def _check_clocked(r: dict, kind: SolverKind) -> dict:
    """The checks of a segmented request (clocks, events, discontinuities, `dtmax`); returns the
    fields it sets: the tick plan, discontinuity times, initial held outputs, grid decision."""
    model, y0, args, t0, t1 = r["model"], r["y0"], r["args"], r["t0"], r["t1"]
    clocks, events = r["clocks"], r["events"]
    max_events = r["max_events"]
    max_events = (16 if events else 0) if max_events is None else max_events
    if isinstance(max_events, bool) or not isinstance(max_events, int | np.integer):
        raise TypeError(f"simulate: `max_events` must be an int; got {_short(max_events)}.")
    max_events = int(max_events)
    if events and max_events < 1:
        raise ValueError(f"simulate: `max_events` must be >= 1 with events; got {max_events}.")
    if clocks and args is not None and not isinstance(args, Mapping):
        raise ValueError(
            "simulate: with discrete models `args` must be a dict (held outputs are merged into "
            f"it) or None; got {type(args).__name__}."
        )
    if events and not jtu.tree_leaves(y0):
        raise ValueError("simulate: `events` need continuous states; the model has none.")
    plan = plan_ticks(clocks, t0, t1)
    disc = check_discontinuities(model, r["discontinuities"], t0, t1)
    held0 = initial_held(clocks, y0, args, t0)
    check_held_keys(clocks, held0, args)
    check_conditions(events, y0, with_held(args, held0), t0)
    check_resets(events, y0, {m.name: m.init_state() for m in clocks}, with_held(args, held0), t0)
    grid = on_grid(r["solver"], kind.adaptive, r["dt"], events, disc, t0, plan.times, r["ts"])
    if not grid:
        # Solves between boundaries (diffeqsolve segments), each with `max_steps`.
        segments = len(plan.times) + len(disc) + (2 * max_events + 1 if events else 0)
        step, what = (r["dtmax"], "`dtmax`") if kind.adaptive else (r["dt"], "`dt`")
        check_budget(t0, t1, step, what, r["max_steps"], segments)
    return {"max_events": max_events, "plan": plan, "disc": disc, "held0": held0, "grid": grid}
