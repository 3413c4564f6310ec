r"""The request of `simulate`: every argument checked once, in one place, before any driver runs.

`build_request` is the only function that checks `simulate`'s arguments. It returns a frozen
`Request`: the model, initial state, times, solver kind and driver, noise, clocks, events and
discontinuities, normalized (Python numbers as arrays, an int seed as a key, `y0` cast to the
state's dtypes, the samples as a concrete array, the steps per sample interval of the fixed grid,
the initial held outputs of the discrete models). The drivers receive the request and check
nothing; the same bad argument is therefore refused with the same message on every path (plain
fixed-step, adaptive, clocked, segmented, SDE).

Each check raises `ValueError` (a bad value) or `TypeError` (a wrong kind of object) whose message
starts with "simulate:" and names the argument, its unit and the value. Values are checked when
they are concrete: under a user's `jit`/`vmap`/`grad` the traced ones keep their shape and dtype
checks only (times: `t0`, `t1`, `ts` may be traced where the driver takes them as run-time inputs,
`jaxsim._simulate`'s free-time path).

**Commands** (`args`, and the held outputs of discrete models) are checked alike on every path:
an address that a model declares (`command_spec()`) is checked key by key and shape by shape; a
top-level key that nothing reads is refused when the model reads only commands
(`reads_only_commands`). What discrete models and events read is found by running their
functions once on abstract values (`jax.eval_shape`) with an `args` that records the keys read.
"""

import dataclasses
import types
from typing import Any

import numpy as np

from .._cores._adaptive import DEFAULT_GAINS, check_adjoint
from .._drivers import _free_time
from .._drivers._progress import check_progress
from .._model._arguments import args_as_traced, model_as_traced
from .._model._dynamic_object import (
    AbstractDynamicObject,
    structure_key,
)
from .._model._spans import check_time_spans
from .._model._validation import is_concrete
from .._route import SolverKind, route, solver_kind
from ._clocked import _check_clocked, check_entries
from ._commands import (
    args_readers,
    check_commands,
    check_held_commands,
    check_held_units,
    untag_args,
)
from ._grid import (
    check_clock_ticks,
    check_max_steps,
    check_physical,
    check_step,
    grid_segments,
    sample_times,
)
from ._sde import _check_sde
from ._settings import (
    Controller,
    _scalar,
    _scalar_shape,
    _short,
    check_gains,
    check_key,
    check_solver,
    check_times,
    check_tolerances,
    check_y0,
)
from ._solver_checks import check_combinations, check_supported_solver


# --------------------------------------------------------------------------------------------------
# The request


@dataclasses.dataclass(frozen=True, eq=False)
class Request:
    """One call of `simulate`, checked and normalized (`build_request`).

    The fields are `simulate`'s arguments, normalized (`model` and `args` with Python numbers as
    arrays, `y0` cast to the state's dtypes, `key` a key, `t0`/`t1` floats and `ts` a concrete
    array unless the times are free), plus what the checks computed: `kind` (the solver's kind and
    the driver: "fixed", "adaptive", "sde" or "clocked"), `seg` (steps of `dt` per sample interval
    on the fixed grid), `noise_dim`, `horizon` for free times (`jaxsim._drivers._free_time.plan`), and for
    segmented runs the tick `plan`, the discontinuity
    times `disc`, the discrete models' initial held outputs `held0` and `grid` (whether the
    fixed-grid stepper runs the segments).
    """

    model: Any
    y0: Any
    t0: Any
    t1: Any
    ts: Any
    dt: Any
    sample_dt: Any
    solver: Any
    kind: SolverKind
    args: Any
    key: Any
    rtol: Any
    atol: Any
    max_steps: int
    outputs: bool
    checkpoint: bool
    throw: bool
    adjoint: Any
    progress: Any
    dW: Any = None
    dZ: Any = None
    brownian: Any = "increments"
    clocks: tuple = ()
    events: tuple = ()
    discontinuities: tuple = ()
    max_events: Any = None
    event_tol: float = 1e-9
    dtmax: Any = None
    root_finder: Any = None
    controller: Any = None  # adaptive requests: `Controller` (tolerances as arrays, the gains)
    free: bool = False
    seg: tuple | None = None
    noise_dim: int = 0
    plan: Any = None
    disc: tuple = ()
    held0: Any = None
    grid: bool = False
    horizon: Any = None

    def replace(self, **changes) -> "Request":
        """This request with `changes` (e.g. the initial state guarded by in-program checks)."""
        return dataclasses.replace(self, **changes)


def check_initial_state(model, y0, t0, args) -> None:
    """A model's own check of a concrete initial state (the optional protocol
    `check_initial_state(t0, y0, args)`, e.g. a spacecraft starting inside a body): a ValueError
    naming the quantity, before anything is compiled."""
    hook = getattr(model, "check_initial_state", None)
    if callable(hook) and is_concrete(t0):
        hook(t0, y0, args)


def check_initial_step(solver_name: str, dt) -> None:
    """An adaptive solver's initial step `dt` (diffrax's `dt0`) [s]: a finite scalar > 0 where
    concrete (0 or a negative step never advances: the solve ran out of `max_steps`)."""
    if isinstance(dt, bool) or not is_concrete(dt):
        return
    v = np.asarray(dt)
    if v.shape != () or v.dtype.kind not in "iuf" or not np.isfinite(v) or float(v) <= 0.0:
        raise ValueError(
            f"simulate: `dt` (diffrax's `dt0`) [s], the initial step of adaptive solver "
            f"{solver_name}, must be a finite number > 0, or None (chosen from `rtol`/`atol`); "
            f"got {_short(dt)}."
        )


def build_request(
    model,
    y0,
    t1=None,
    *,
    t0=0.0,
    dt=None,
    solver,
    ts=None,
    sample_dt=None,
    args=None,
    rtol=None,
    atol=None,
    max_steps=4096 * 64,
    outputs=True,
    checkpoint=True,
    throw=True,
    key=None,
    dW=None,
    dZ=None,
    brownian="increments",
    clocks=(),
    events=(),
    discontinuities=(),
    max_events=None,
    event_tol=1e-9,
    dtmax=None,
    root_finder=None,
    adjoint=None,
    progress=False,
    num_steps=None,
    num_samples=None,
    gains=DEFAULT_GAINS,
) -> Request:
    """Every check of `simulate`'s arguments, once, in argument order; the checked `Request`.

    Free times (traced `t0`/`t1`/`ts`, or `num_steps`: `jaxsim._drivers._free_time`): the times are
    run-time inputs; their concrete values are checked here and the free-time planner's
    `horizon` (checked times, steps and samples) is in the request (`free`, `horizon`; `seg`
    None). `num_steps` gives a step as `dt` does (for the solver's kind: a diffrax solver then
    runs fixed-step); `num_samples` uniform samples in `[t0, t1]` stand for `ts`. `gains`: the
    step-size controller's `(pcoeff, icoeff)` (`stepsize_controller=PIDController(...)`).
    """

    if not isinstance(model, AbstractDynamicObject):
        raise ValueError(
            f"simulate: `model` must be an AbstractDynamicObject; got {type(model).__name__}."
        )
    free = _free_time.requested(t0, t1, ts, num_steps)
    if not free and num_samples is not None:
        if ts is not None or sample_dt is not None:
            raise ValueError("simulate: give one of `ts`, `sample_dt`, `num_samples`.")
        ts = _free_time.uniform_samples(t0, t1, num_samples)
    check_entries(clocks, events)
    clocks, events = tuple(clocks), tuple(events)
    discontinuities = tuple(discontinuities)
    model = model_as_traced(model)
    skey = structure_key(model)
    args = untag_args(model, args, skey)  # `Quantity` commands: units compared, values kept
    y0 = check_y0(model, y0, skey)
    check_physical(model, y0)
    check_initial_state(model, y0, t0, args)
    check_times(t0, t1, ts, dt, sample_dt)
    check_time_spans(model, t0, t1)  # an ephemeris' records (`jaxsim._model._spans`)
    check_clock_ticks(clocks, t0, t1)
    check_solver(solver)
    type(model).check_solver(model, solver, dt)  # no bound-method module (see `simulate`)
    check_tolerances(rtol, atol)
    gains = check_gains(*gains)
    key = check_key(key)
    max_steps = check_max_steps(max_steps)
    if event_tol is None:
        raise ValueError("simulate: `event_tol` [s] must be >= 0; got None.")
    _scalar_shape("event_tol", event_tol, "s")
    event_tol_ = _scalar("event_tol", event_tol, "s")  # None: traced, left as given
    if event_tol_ is not None and not float(event_tol_) >= 0:
        raise ValueError(f"simulate: `event_tol` [s] must be >= 0; got {event_tol}.")
    progress = check_progress("simulate", progress)
    if not free:
        t0, t1, ts = sample_times(t0, t1, ts, sample_dt)
    step = dt if num_steps is None else num_steps
    kind = solver_kind(solver, dt=step, key=key, dW=dW)
    check_combinations(
        kind, clocks=clocks, events=events, discontinuities=discontinuities, dtmax=dtmax,
        max_events=max_events, root_finder=root_finder,
    )  # fmt: skip
    check_supported_solver(solver, kind)
    r = dict(
        model=model, y0=y0, t0=t0, t1=t1, ts=ts, dt=dt, sample_dt=sample_dt, solver=solver,
        kind=kind, args=args, key=key, rtol=rtol, atol=atol, max_steps=max_steps,
        outputs=bool(outputs), checkpoint=bool(checkpoint), throw=bool(throw), adjoint=adjoint,
        progress=progress, dW=dW, dZ=dZ, brownian=brownian, clocks=clocks, events=events,
        discontinuities=discontinuities, max_events=max_events, event_tol=event_tol if event_tol_ is None else float(event_tol_),
        dtmax=dtmax, root_finder=root_finder, free=bool(free),
    )  # fmt: skip
    # The one routing decision (`jaxsim._route.route`): the driver and the core of this request
    # (routed on its fields; the request itself is built once, below).
    driver, core = route(types.SimpleNamespace(**r))
    r["kind"] = kind = dataclasses.replace(kind, driver=driver, core=core)
    check_adjoint(adjoint, kind, y0)
    name = kind.name
    if kind.driver == "sde":
        if not free:  # a free-time SDE request is refused by the free-time planner
            r.update(_check_sde(r, kind))
    else:
        # The same tolerance rules on every deterministic path (plain, clocked, segmented).
        if kind.adaptive and (rtol is None or atol is None):
            raise ValueError(
                f"simulate: adaptive solver {name} needs `rtol` and `atol`; "
                f"got rtol={rtol}, atol={atol}."
            )
        if not kind.adaptive and (rtol is not None or atol is not None):
            raise ValueError(
                f"simulate: `rtol`/`atol` apply to adaptive solvers only; {name} is "
                f"fixed-step (got rtol={rtol}, atol={atol}). Choose Tsit5/Dopri5/Dopri8 or "
                "drop them."
            )
        if not kind.adaptive and not free:
            r["dt"] = check_step(name, dt)
            if kind.driver == "fixed":
                r["seg"] = grid_segments(ts, t0, t1, r["dt"])
        if kind.adaptive and dt is not None:
            check_initial_step(name, dt)
        if kind.driver == "clocked" and not free:
            r.update(_check_clocked(r, kind))
    if kind.adaptive and rtol is not None and atol is not None:
        r["controller"] = Controller.of(rtol, atol, gains)
    if free:
        horizon = _free_time.plan(
            t0, t1, ts, sample_dt=sample_dt, num_samples=num_samples, dt=dt, num_steps=num_steps,
            adaptive=kind.adaptive, solver_name=kind.name, stochastic=kind.driver == "sde",
            clocks=clocks, events=events, discontinuities=discontinuities, dtmax=dtmax,
        )  # fmt: skip
        if progress is not False and _free_time.traced(t0, t1, ts):
            raise ValueError(
                "simulate: `progress` reports need concrete `t0`/`t1` [s] (the display's scale); "
                "got traced times. Drop `progress` inside `jit`/`grad`/`vmap`."
            )
        r.update(horizon=horizon, t0=horizon.t0, t1=horizon.t1)
    readers = args_readers(clocks, events, t0, y0, args, r.get("held0") or {})
    check_commands(model, args, readers=readers, key=skey)
    r["args"] = args_as_traced(args)
    if r.get("held0"):
        check_held_commands(model, clocks, r["held0"], readers, skey)
        check_held_units(model, clocks, r["held0"], skey)
    return Request(**r)
