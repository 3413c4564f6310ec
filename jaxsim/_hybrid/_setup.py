"""Entry of the hybrid driver: checks of the clocks, events and discontinuities, the tick plan,
and the static configuration of the run."""

import dataclasses

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._clocks import AbstractDiscreteModel, plan_ticks
from .._dynamic_object import AbstractDynamicObject
from .._events import Event
from .._signals import AbstractSignal
from .._validation import check_unique_names
from ._driver import HybridSolution, Static, merge_args, run_hybrid
from ._grid import make_grid_plan, run_grid
from ._roots import default_root_finder
from ._segments import on_grid


@dataclasses.dataclass(frozen=True)
class _Config:
    t0: float
    t1: float
    adaptive: bool
    has_dt: bool
    has_dtmax: bool
    max_steps: int
    max_events: int
    outputs: bool
    throw: bool
    window: int
    n_iter: int
    has_y: bool
    stages: int
    fsal: bool


def collect_discontinuities(model, discontinuities, t0, t1) -> tuple:
    """Discontinuity times (scalars, possibly traced): the model's breakpoints plus `discontinuities`.

    An entry may be a signal, a time or 1-D array of times [s], or the model itself (its
    breakpoints are always boundaries; naming it asks for the segment loop, e.g. so that a traced
    burn start splits a fixed step and is differentiable).
    """
    items = list(model.breakpoints())
    for d in discontinuities:
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
            arr = jnp.atleast_1d(jnp.asarray(d, dtype=float))
            if arr.ndim != 1:
                raise ValueError(
                    "simulate: `discontinuities` entries must be signals, the model, scalars or "
                    f"1-D arrays of times [s]; got shape {arr.shape}."
                )
            items.extend(arr[i] for i in range(arr.shape[0]))
    return tuple(jnp.asarray(x, dtype=float) for x in items)


def _solver_info(dsolver):
    tab = getattr(dsolver, "tableau", None)
    if tab is None:
        return 1, False
    return len(tab.b_sol), bool(tab.fsal)


def _check_held_keys(models, held0, user_args):
    seen = {}
    for m in models:
        h = held0[m.name]
        if not isinstance(h, dict):
            raise ValueError(
                f"simulate: discrete model {m.name!r} must return its held outputs as a dict "
                f"{{address: value}} (merged into args); got {type(h).__name__}."
            )
        for key in h:
            if key in seen:
                raise ValueError(
                    f"simulate: held-output address {key!r} is written by both {seen[key]!r} and "
                    f"{m.name!r}; each top-level key of args must have one writer."
                )
            if isinstance(user_args, dict) and key in user_args:
                raise ValueError(
                    f"simulate: held-output address {key!r} of {m.name!r} collides with a key of "
                    "`args`; rename one of them."
                )
            seen[key] = m.name


def _initial_held(models, y0, args, t0):
    """Held outputs before the first tick: `init_outputs` or zeros shaped like `update`'s output."""
    held = {}
    for m in models:
        h = m.init_outputs(y0, args)
        if h is not None:
            held[m.name] = jtu.tree_map(jnp.asarray, h)
    for _ in range(len(models) + 1):
        missing = [m for m in models if m.name not in held]
        if not missing:
            break
        for m in missing:
            known = merge_args(args, held)

            def probe(m=m, known=known):
                return m.update(jnp.asarray(t0), y0, m.init_state(), known)[1]

            try:
                shape = jax.eval_shape(probe)
            except (KeyError, TypeError, IndexError):
                continue
            held[m.name] = jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shape)
    missing = [m.name for m in models if m.name not in held]
    if missing:
        raise ValueError(
            f"simulate: cannot infer the held outputs of discrete model(s) {missing!r} before their "
            "first tick (their update reads outputs of models not yet known); give `held0=` / "
            "`init_outputs`."
        )
    return {m.name: held[m.name] for m in models}


def simulate_hybrid(
    model,
    y0,
    *,
    t0,
    t1,
    ts,
    solver,
    dsolver,
    adaptive,
    dt,
    rtol,
    atol,
    args,
    clocks=(),
    events=(),
    discontinuities=(),
    max_events=None,
    max_steps=4096,
    dtmax=None,
    event_tol=1e-9,
    root_finder=None,
    outputs=True,
    throw=True,
    adjoint=None,
    progress=None,
) -> HybridSolution:
    """Entry point used by `simulate` (arguments already validated there, `ts` concrete)."""
    models = tuple(clocks)
    for i, m in enumerate(models):
        if not isinstance(m, AbstractDiscreteModel):
            raise ValueError(
                f"simulate: `clocks[{i}]` must be a discrete model (jaxsim.DiscreteModel or an "
                f"AbstractDiscreteModel); got {type(m).__name__}."
            )
    check_unique_names("simulate", "clocks", [m.name for m in models])
    events = tuple(events)
    for i, e in enumerate(events):
        if not isinstance(e, Event):
            raise ValueError(
                f"simulate: `events[{i}]` must be a jaxsim.Event; got {type(e).__name__}."
            )
    if max_events is None:
        max_events = 16 if events else 0
    max_events = int(max_events)
    if events and max_events < 1:
        raise ValueError(f"simulate: `max_events` must be >= 1 with events; got {max_events}.")
    if models and args is not None and not isinstance(args, dict):
        raise ValueError(
            "simulate: with discrete models `args` must be a dict (held outputs are merged into "
            f"it) or None; got {type(args).__name__}."
        )
    if not adaptive:
        if dt is None:
            raise ValueError("simulate: fixed-step solver needs `dt` [s]; got None.")
        if not float(dt) > 0:
            raise ValueError(f"simulate: `dt` [s] must be > 0; got {dt}.")
    event_tol = float(event_tol)
    if not event_tol >= 0:
        raise ValueError(f"simulate: `event_tol` [s] must be >= 0; got {event_tol}.")

    plan = plan_ticks(models, t0, t1)
    disc = collect_discontinuities(model, discontinuities, t0, t1)
    disc_arr = jnp.stack(disc) if disc else jnp.zeros((0,))
    ts_np = np.asarray(ts, dtype=float)
    # Window: most samples in one static interval (t_{k-1}, t_k] (segments are sub-intervals).
    edges = np.concatenate([[t0], np.asarray(plan.times)])
    counts = np.diff(np.searchsorted(ts_np, edges, side="right"))
    window = max(int(counts.max()) if counts.size else 1, 1)
    n_iter = len(plan.times) + len(disc) + (2 * max_events + 1 if events else 0)
    stages, fsal = _solver_info(dsolver)
    has_y = len(jtu.tree_leaves(y0)) > 0
    grid = on_grid(solver, adaptive, dt, events, disc, t0, plan.times, ts_np)
    if events and not has_y:
        raise ValueError("simulate: `events` need continuous states; the model has none.")

    held0 = _initial_held(models, y0, args, t0)
    _check_held_keys(models, held0, args)
    _check_resets(events, y0, {m.name: m.init_state() for m in models}, merge_args(args, held0), t0)
    if events:
        root_finder = default_root_finder(events, t0, y0, merge_args(args, held0), root_finder)
    config = _Config(
        t0=float(t0),
        t1=float(t1),
        adaptive=bool(adaptive),
        has_dt=dt is not None,
        has_dtmax=dtmax is not None,
        max_steps=int(max_steps),
        max_events=max_events,
        outputs=bool(outputs),
        throw=bool(throw),
        window=window,
        n_iter=int(n_iter),
        has_y=has_y,
        stages=stages,
        fsal=fsal,
    )
    if grid:
        # Fixed steps, every tick and sample on the grid, no events: the fixed-grid stepper.
        disc_t = [float(d) for d in disc]
        gplan = make_grid_plan(plan, len(models), float(t0), float(t1), float(dt), ts_np, disc_t)
        static = Static(plan, config, adjoint, progress)
        return run_grid(model, models, y0, args, held0, jnp.asarray(ts_np), solver, gplan, static)
    return run_hybrid(
        model,
        models,
        events,
        y0,
        args,
        held0,
        disc_arr,
        jnp.asarray(ts_np),
        dsolver,
        root_finder,
        Static(plan, config, adjoint, progress),
        _numbers(dt, rtol, atol, dtmax, event_tol),
    )


def _check_resets(events, y0, z0, args, t0):
    """Each reset must return `(y, z)` shaped like the state and the discrete states."""
    want_y = jax.eval_shape(lambda: y0)
    want_z = jax.eval_shape(lambda: z0)

    def describe(tree):
        return jtu.tree_map(lambda u: f"{u.dtype}{list(u.shape)}", tree)

    for i, ev in enumerate(events):
        if ev.reset is None:
            continue
        where = f"simulate: the reset of `events[{i}]` ({ev.name!r})"
        out = jax.eval_shape(ev.reset, jnp.asarray(t0, float), y0, z0, args)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError(
                f"{where} must return a pair `(y, z)` (the new continuous state and the discrete "
                f"states `{{model_name: z}}`, e.g. `return y_new, z`); got {type(out).__name__} "
                f"{describe(out) if not isinstance(out, tuple) else len(out)}."
            )
        for part, got, want in (("y", out[0], want_y), ("z", out[1], want_z)):
            same = jtu.tree_structure(got) == jtu.tree_structure(want) and all(
                a.shape == b.shape for a, b in zip(jtu.tree_leaves(got), jtu.tree_leaves(want))
            )
            if not same:
                raise ValueError(
                    f"{where} returned a `{part}` of structure {describe(got)}; expected the "
                    f"structure of the {'state y0' if part == 'y' else 'discrete states z'}: "
                    f"{describe(want)}."
                )


def _numbers(dt, rtol, atol, dtmax, event_tol):
    """Dynamic scalars (changing them does not recompile)."""

    def f(x):
        return jnp.asarray(1.0 if x is None else float(x))

    return {
        "dt": f(dt),
        "rtol": f(rtol),
        "atol": f(atol),
        "dtmax": f(dtmax),
        "event_tol": f(event_tol),
    }
