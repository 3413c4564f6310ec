r"""`simulate`: propagate a dynamic object and sample its states and derived outputs.

Two drivers, one semantics:

- **fixed step** (`Euler`, `RK2`, `RK4`): a nested `lax.scan` (outer over sample intervals, inner over
  steps), time computed from an integer step index (no drift, as Basilisk's integer-nanosecond
  clock), the object's `step_map` applied after every step. Reverse-mode memory is bounded by
  checkpointing (`checkpoint=True`, the default): the backward pass stores the states at the sample
  times and at the boundaries of sub-blocks of about 20 steps (the steps whose stacked inputs stay
  small buffers on the CPU runtime; `_checkpoint_levels`), and recomputes one sub-block, then one
  step, at a time. An interval of more than 1024 sub-blocks groups them into blocks of about
  sqrt(count), so memory grows as sqrt(steps), at the price of one more forward pass.
- **adaptive** (`Tsit5`, `Dopri5`, `Dopri8`, or any diffrax solver): `diffrax.diffeqsolve` with a PID
  controller (`rtol`, `atol`), the object's breakpoints as `jump_ts`, outputs at `SaveAt(ts=...)`
  points (dense output; they do not cut steps), and the step map applied after every accepted step.
  With the default samples `[t0, t1]` the saved states are the step-end states themselves
  (`SaveAt(t0=True, t1=True)`, no interpolation in the step loop).
"""

import copy
import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jaxtyping import ArrayLike, Float, PRNGKeyArray, PyTree

from . import _adaptive_core, _free_time, _results
from ._cache import for_jaxsim_programs
from ._clocks import AbstractDiscreteModel
from ._compile import jit as jaxsim_jit
from ._dynamic_object import AbstractDynamicObject
from ._events import Event
from ._host_checks import nonfinite_message, on_host, raise_if_failed
from ._layout import StateLayout
from ._request import GRID_RTOL, build_request
from ._results import RESULTS
from ._signals import concrete_breakpoints
from ._solvers import (
    RK4,
    AbstractFixedStepSolver,
    AbstractSolver,
    StepMappedSolver,
    for_adjoint,
)
from ._step_context import step_interval
from ._validity import InProgram


# The step-grid tolerance of the request's checks (also used by the segment driver).
_GRID_RTOL = GRID_RTOL


class Solution(eqx.Module):
    """What `simulate` returns, on every path (fixed step, adaptive, SDE, hybrid).

    **Fields:**

    - `ts`: sample times [s], shape `(n,)`.
    - `ys`: the state pytree with a leading axis of length `n` (rows after `t_final` are NaN).
    - `outputs`: derived outputs of the object at `ts` (e.g. `r_CN_N`, energies), leading axis `n`;
      None with `outputs=False`.
    - `counts`: cumulative step-map counters at `ts` (e.g. MRP switches since `t0`) where the
      driver steps on the sample grid (fixed-step runs without events); None elsewhere. The
      totals are always in `stats["counts"]`.
    - `stats`: the same keys on every path: `num_steps` (accepted steps), `num_rejected_steps`,
      `num_rhs` (drift evaluations), `num_segments` (solves between boundaries; 1 without
      clocks, discontinuities or events), `num_events` (event firings), `counts` (step-map totals,
      e.g. `{"mrp_switches": ...}` per object).
    - `result`: a `jaxsim.RESULTS` item: `successful`, or the cause of a failure (with
      `throw=False`): `max_steps_reached`, `nonfinite_state`, `too_many_events`,
      `event_location_failed`, or another diffrax code. `ok` and `message` read it.
    - `t_final`: the time the run ended [s]: `t1`, a terminal event's time, or where it failed.
    - `info`: static: what `to_xarray` needs of the run (units, per-effector dimensions, event
      names, solver settings), attached by `simulate`; None on a
      hand-made Solution.
    """

    ts: jax.Array
    ys: Any
    outputs: Any
    counts: Any
    stats: dict
    result: Any
    t_final: Any = None
    info: Any = eqx.field(static=True, default=None)

    def to_xarray(self, **kwargs):
        """`jaxsim.results.to_xarray(self, **kwargs)`: this run (or `vmap`-batched runs) as an
        `xarray.Dataset` of the one schema (see `jaxsim.results`); no model needed."""
        from .results import to_xarray

        return to_xarray(self, **kwargs)

    @property
    def ok(self):
        """Whether the run succeeded (a boolean array: one per member under `vmap`)."""
        return _results.promote(self.result) == RESULTS.successful

    @property
    def message(self) -> str:
        """The failure's message ("" on success); concrete results only (not under `jit`)."""
        return _results.message(self.result)


# diffrax's spellings of `simulate`'s arguments (`jaxsim._vocabulary`), and the arguments of
# `simulate` they may replace.
_DIFFRAX_KEYS = ("dt0", "saveat", "stepsize_controller", "progress_meter")
_TRANSLATED = ("dt", "ts", "rtol", "atol", "dtmax", "progress")


# JAX's error for a `jvp` of a `custom_vjp` function (a reverse-mode adjoint).
_FORWARD_MODE_ERROR = "can't apply forward-mode autodiff (jvp) to a custom_vjp function"


def _with_info(run):
    """`simulate` taking diffrax's spellings (translated into jaxsim's arguments before anything
    else, so that every driver and the run's metadata see jaxsim's) and returning its `Solution`
    with `info` (the run's schema metadata) attached."""
    defaults = {
        name: p.default
        for name, p in inspect.signature(run).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    solver_default = defaults["solver"]

    @functools.wraps(run)
    def simulate(model, y0, t1=None, **kwargs):
        if any(k in kwargs for k in _DIFFRAX_KEYS) or kwargs.get("max_steps", 1) is None:
            from ._vocabulary import from_diffrax

            get = lambda k: kwargs.get(k, defaults[k])  # noqa: E731
            update = from_diffrax(
                solver=get("solver"), t0=get("t0"), t1=t1, dt=get("dt"), ts=get("ts"),
                sample_dt=get("sample_dt"), rtol=get("rtol"), atol=get("atol"),
                dtmax=get("dtmax"), progress=get("progress"), max_steps=get("max_steps"),
                dt0=get("dt0"), saveat=get("saveat"),
                stepsize_controller=get("stepsize_controller"),
                progress_meter=get("progress_meter"),
            )  # fmt: skip
            kwargs = {k: v for k, v in kwargs.items() if k not in _DIFFRAX_KEYS}
            kwargs.update((k, update[k]) for k in _TRANSLATED if k in update)
        # The argument checks' small eager programs are jaxsim's too: with the persistent cache
        # on (`jaxsim.enable_cache`) they are stored whatever their compile time.
        try:
            with for_jaxsim_programs():
                sol = run(model, y0, t1, **kwargs)
        except TypeError as err:
            if _FORWARD_MODE_ERROR not in str(err):
                raise
            raise TypeError(
                "simulate: forward-mode differentiation (`jax.jvp`, `jax.jacfwd`, `jax.hessian`) "
                "through an adaptive or segmented solve needs `adjoint=diffrax.ForwardMode()`; "
                "the default adjoint (None: diffrax's RecursiveCheckpointAdjoint) is reverse mode "
                "only (`jax.grad`, `jax.jacrev`)."
            ) from err
        if not isinstance(sol, Solution) or sol.info is not None:
            return sol
        from ._schema import run_info

        ts = kwargs.get("ts")
        end = t1 if t1 is not None or ts is None else ts[-1]  # `ts` may be traced
        info = run_info(
            model, solver=kwargs.get("solver", solver_default), dt=kwargs.get("dt"),
            rtol=kwargs.get("rtol"), atol=kwargs.get("atol"), t0=kwargs.get("t0", 0.0), t1=end,
            events=kwargs.get("events", ()),
        )  # fmt: skip
        # A shallow copy with the static field set (`dataclasses.replace` re-runs the
        # constructor: about 5x the time).
        sol = copy.copy(sol)
        object.__setattr__(sol, "info", info)
        return sol

    return simulate


def make_stats(
    num_steps, num_rhs, counts, *, num_rejected_steps=0, num_segments=1, num_events=0, **extra
) -> dict:
    """`Solution.stats` with the keys every path reports (as int64 arrays), plus `extra`."""

    def as_int(x):
        return jnp.asarray(x).astype(jnp.int64)

    return {
        "num_steps": as_int(num_steps),
        "num_rejected_steps": as_int(num_rejected_steps),
        "num_rhs": as_int(num_rhs),
        "num_segments": as_int(num_segments),
        "num_events": as_int(num_events),
        "counts": counts,
        **extra,
    }


@_with_info
def simulate(
    model: AbstractDynamicObject,
    y0: PyTree[ArrayLike],
    t1: float | None = None,
    *,
    t0: float = 0.0,
    dt: float | None = None,
    solver: AbstractSolver | dfx.AbstractSolver = RK4(),
    ts: Float[ArrayLike, " n"] | None = None,
    sample_dt: float | None = None,
    args: PyTree | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int = 4096 * 64,
    outputs: bool = True,
    checkpoint: bool = True,
    throw: bool = True,
    key: PRNGKeyArray | int | None = None,
    dW: Float[ArrayLike, "steps noise"] | None = None,
    dZ: Float[ArrayLike, "steps noise"] | None = None,
    brownian: str | dfx.AbstractBrownianPath = "increments",
    clocks: Sequence[AbstractDiscreteModel] = (),
    events: Sequence[Event] = (),
    discontinuities: Sequence[Any] = (),
    max_events: int | None = None,
    event_tol: float = 1e-9,
    dtmax: float | None = None,
    root_finder: Any = None,
    adjoint: dfx.AbstractAdjoint | None = None,
    progress: bool | Callable[[float, float], None] = False,
    dt0: float | None = None,
    saveat: dfx.SaveAt | None = None,
    stepsize_controller: dfx.AbstractStepSizeController | None = None,
    progress_meter: dfx.AbstractProgressMeter | None = None,
    num_steps: int | None = None,
    num_samples: int | None = None,
) -> Solution:
    r"""Propagate `model` from `y0` at `t0` to `t1` and sample it at `ts`.

    **Arguments:**

    - `model`: an `AbstractDynamicObject` (a spacecraft, a `System` of several, a user model).
    - `y0`: initial state, with the structure of `model.init_state()` and its leaves' shapes;
      integer or other-float leaves are cast to the state's dtype (float64).
    - `t1`: final time [s]; optional when `ts` is given (then `t1 = ts[-1]`).
    - `t0`: initial time [s].
    - `dt`: step [s] for fixed-step solvers; initial step guess for adaptive ones (optional).
    - `solver`: `RK4()` (default), `RK2()`, `Euler()`, `Tsit5()`, `Dopri5()`, `Dopri8()`, or a diffrax solver.
    - `ts` / `sample_dt`: sample times [s] (default `[t0, t1]`) or a uniform sample interval [s].
      With a fixed-step solver every sample must lie on the step grid `t0 + k dt`.
    - `num_steps`: fixed-step solvers: the number of steps, in place of `dt` (the step is then
      `(t1 - t0) / num_steps`); the times are run-time inputs, so one compiled program serves
      every horizon, and `t0`/`t1` may be traced (a free final time, guide "Free final time and
      phases").
    - `num_samples`: `num_samples` samples uniform in `[t0, t1]` (in place of `ts`/`sample_dt`;
      they scale with the horizon). With `num_steps`, `num_samples - 1` must divide it.
    - `args`: passed to every `drift` call (e.g. commands held by flight software). Commands
      for a spacecraft's effectors, `args[effector name][key]`, are checked against what the
      effectors read (`model.command_spec()`). Python floats and lists of numbers in `args`, and
      Python floats in the model's fields, are traced as arrays: changing them does not recompile.
    - `rtol`, `atol`: tolerances, required by adaptive solvers.
    - `max_steps`: step budget of adaptive solves.
    - `outputs`: compute the model's derived outputs and energy/momentum at the samples.
    - `checkpoint`: fixed-step only; checkpoint each sample interval for reverse-mode memory.
    - `throw`: raise on a failed solve or non-finite state; with `False` the failure is reported in
      `Solution.result` (use this under `vmap` for Monte Carlo).
    - `key`, `dW`, `dZ`, `brownian`: stochastic dynamics (`model.noise_dim > 0`; the notebook
      "Stochastic dynamics"): a `jax.random` key, or an int seed used as `jax.random.key(seed)`
      (`brownian="increments"`: per-step draws keyed by the step index; `"tree"` or a
      `diffrax.VirtualBrownianTree`: a Brownian tree), or prescribed Wiener increments `dW` (and
      `dZ` for `SRA1`), shape `(n_steps, noise_dim)`. Given an SDE solver (`EulerMaruyama`,
      `Heun`, `Milstein`, `SRA1`, `ShARK`) or a key, `simulate` solves the SDE; without them a
      noisy model integrates its drift only.
    - `clocks`, `events`, `discontinuities`, `max_events`, `event_tol`, `dtmax`, `root_finder`:
      hybrid simulation (discrete models on clocks, zero-crossing events, scheduled
      discontinuities as segment boundaries, output frames as dense-output points); giving any of
      the first three (or `dtmax`, adaptive solvers only) runs the hybrid driver and returns a
      `HybridSolution` (guide "Events, clocks and discontinuities"). `discontinuities` takes
      signals, times [s], or the model itself (its breakpoints become boundaries: a traced burn
      start then splits a fixed step). Requests no driver supports are refused by name: e.g. an
      SDE with clocks or events, `max_events` without events, `dtmax` with a fixed-step solver.
    - `adjoint`: how `diffrax.diffeqsolve` (adaptive and hybrid runs) is differentiated: `None`
      (diffrax's default `RecursiveCheckpointAdjoint`, reverse mode: `jax.grad`, `jax.jacrev`) or
      `diffrax.ForwardMode()` (forward mode: `jax.jvp`, `jax.jacfwd`, cheaper for a few
      parameters). The fixed-step driver is a plain `lax.scan` and supports both modes as is; there
      `adjoint` is ignored.
    - `progress`: `True` shows a `tqdm.auto` bar (the `progress` extra): "compiling", then the
      simulated time reached and simulated seconds per second; a callable `progress(t, t1)` [s]
      receives each report instead. Reports come after each sample interval and checkpoint block
      (fixed steps), each segment (clocks, events) or each step (plain diffrax solves). A
      top-level call that jaxsim's program cache can store (jaxsim's and the effectors library's
      classes) runs one compiled program for `False` (default) and `True`: the reports sit behind
      a run-time switch. Elsewhere (your own model classes, or inside your own `jit`) `False` adds
      nothing to the program, so switching it on compiles once more.
    - `dt0`, `saveat`, `stepsize_controller`, `progress_meter`: diffrax's spellings, accepted
      where they mean what jaxsim's arguments mean and translated into them (`dt0` is `dt`;
      `SaveAt(t0, ts, steps, t1)` gives `ts`; `PIDController(rtol, atol, dtmax)` gives `rtol`,
      `atol`, `dtmax`; `ConstantStepSize()` a fixed step `dt`; a tqdm or text meter is
      `progress=True`), otherwise refused with a message giving jaxsim's spelling.

    `dt`, `sample_dt` and the number of samples fix the shape of the computation and must be
    concrete. `t0`, `t1` and `ts` may be traced (under `jit`, `grad`, `vmap`) on the plain
    adaptive and fixed-step paths (`num_steps`); clocks, events, discontinuities and SDE solvers
    need them concrete (refused by name otherwise).
    """
    # diffrax's spellings (`dt0`, `saveat`, `stepsize_controller`, `progress_meter`) were
    # translated into jaxsim's arguments by `_with_info` before this body runs.
    from ._progress import guarded, reporter

    free = _free_time.requested(t0, t1, ts, num_steps)
    if not free and num_samples is not None:
        if ts is not None or sample_dt is not None:
            raise ValueError("simulate: give one of `ts`, `sample_dt`, `num_samples`.")
        ts = _free_time.uniform_samples(t0, t1, num_samples)
    # Every argument is checked here, once (`jaxsim._request`); the drivers check nothing.
    req = build_request(
        model, y0, t1, t0=t0, dt=dt, solver=solver, ts=ts, sample_dt=sample_dt, args=args,
        rtol=rtol, atol=atol, max_steps=max_steps, outputs=outputs, checkpoint=checkpoint,
        throw=throw, key=key, dW=dW, dZ=dZ, brownian=brownian, clocks=clocks, events=events,
        discontinuities=discontinuities, max_events=max_events, event_tol=event_tol,
        dtmax=dtmax, root_finder=root_finder, adjoint=adjoint, progress=progress, free=free,
        num_steps=num_steps,
    )  # fmt: skip
    model, y0, args, key, kind = req.model, req.y0, req.args, req.key, req.kind
    t0, t1, ts, dt, progress = req.t0, req.t1, req.ts, req.dt, req.progress
    # The progress display (its "compiling" status) opens right before a driver runs.
    start = lambda: reporter(progress, t0, t1)  # noqa: E731
    # A top-level call checks `throw` on the host after the run: the program then has no host
    # callbacks and is cacheable (`jaxsim._host_checks`).
    host = on_host(throw)
    throw = bool(throw) and not host
    # Traced physical checks (`jaxsim._validity`): an error in the program with `throw`, else
    # `RESULTS.invalid_model`; every driver's Solution goes through `checks.finish`.
    checks = InProgram(model, y0)
    y0 = checks.guard(y0, throw)

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
        t0, t1 = horizon.t0, horizon.t1
        return _simulate_free(
            model, y0, args, solver, kind, horizon, dt=dt, rtol=rtol, atol=atol,
            max_steps=max_steps, outputs=outputs, checkpoint=checkpoint, throw=throw, host=host,
            adjoint=adjoint, start=start, finish=checks.finish,
        )  # fmt: skip
    if kind.driver == "sde":
        from ._sde import simulate_sde

        rep = start()
        sol = guarded(rep, simulate_sde, req.replace(y0=y0), throw=throw, progress=rep)
        path = "diffrax" if kind.adaptive or isinstance(solver, dfx.AbstractSolver) else "SDE"
        return guarded(rep, raise_if_failed, sol, path) if host else checks.finish(sol)
    is_jaxsim, adaptive = kind.native, kind.adaptive
    if kind.driver == "hybrid":
        from ._hybrid import simulate_hybrid

        rep = start()
        dsolver = solver.to_diffrax() if is_jaxsim else solver
        sol = guarded(rep, simulate_hybrid,
            req.replace(y0=y0), dsolver=dsolver, throw=throw, progress=rep,
        )  # fmt: skip
        return guarded(rep, raise_if_failed, sol, "hybrid") if host else checks.finish(sol)
    if adaptive and is_jaxsim and _adaptive_core.supports(solver, y0, adjoint):
        # jaxsim's pairs run on jaxsim's own adaptive core (diffrax's step control, one loop over
        # the flat state); a diffrax solver instance (e.g. `solver.to_diffrax()`) runs in diffrax.
        rep = start()
        sol = guarded(rep, _adaptive_core.run,
            model, y0, args, solver, t0, t1, np.asarray(ts), None if dt is None else float(dt),
            _tolerance(rtol), _tolerance(atol), int(max_steps), bool(outputs), bool(throw),
            concrete_breakpoints(model),
            _adaptive_core.loop_kind(adjoint), bool(len(ts) == 2 and ts[0] == t0 and ts[-1] == t1),
            rep,
        )  # fmt: skip
        return guarded(rep, raise_if_failed, sol, "diffrax") if host else checks.finish(sol)
    if adaptive:
        # Methods called through the class: an equinox module builds a bound-method module on
        # each attribute access (about 40 us each, per call of `simulate`).
        dsolver = type(solver).to_diffrax(solver) if is_jaxsim else solver
        rep = start()
        sol = guarded(
            rep,
            _run_adaptive,
            model,
            y0,
            args,
            dsolver,
            t0,
            t1,
            np.asarray(ts),
            None if dt is None else float(dt),
            _tolerance(rtol),
            _tolerance(atol),
            int(max_steps),
            bool(outputs),
            bool(throw),
            concrete_breakpoints(model),
            adjoint,
            bool(len(ts) == 2 and ts[0] == t0 and ts[-1] == t1),
            rep,
        )
        return guarded(rep, raise_if_failed, sol, "diffrax") if host else checks.finish(sol)
    if not is_jaxsim:
        solver = _DiffraxFixed(solver)
    config = _FixedConfig(
        t0=t0,
        dt=dt,
        seg=req.seg,
        outputs=bool(outputs),
        checkpoint=bool(checkpoint),
        throw=bool(throw),
    )
    rep = start()
    sol = guarded(rep, _run_fixed, model, y0, args, solver, np.asarray(ts), config, rep)
    return guarded(rep, raise_if_failed, sol, "fixed-step") if host else checks.finish(sol)


def _tolerance(x) -> np.ndarray:
    """`rtol`/`atol` as a float64 array: an argument of the compiled program (traced), so a sweep
    over tolerances compiles once (a Python float would be a constant of the program)."""
    return np.asarray(float(x), dtype=np.float64)


def _simulate_free(
    model, y0, args, solver, kind, horizon, *, dt, rtol, atol, max_steps, outputs, checkpoint,
    throw, host, adjoint, start, finish,
):  # fmt: skip
    """`simulate` with free times (`jaxsim._free_time`): the horizon's times are run-time inputs
    of the adaptive and fixed-step drivers (traced, or concrete arrays: one program per shape)."""
    from ._progress import guarded

    t0, t1, ts = horizon.t0, horizon.t1, horizon.ts
    if kind.adaptive:
        dt0 = None if dt is None else float(dt)
        numbers = (_tolerance(rtol), _tolerance(atol), int(max_steps), bool(outputs), bool(throw))
        jump_ts = concrete_breakpoints(model)
        rep = start()
        if kind.native and _adaptive_core.supports(solver, y0, adjoint):
            sol = guarded(rep, _adaptive_core.run,
                model, y0, args, solver, t0, t1, ts, dt0, *numbers, jump_ts,
                _adaptive_core.loop_kind(adjoint), horizon.endpoints_only, rep,
            )  # fmt: skip
        else:
            dsolver = type(solver).to_diffrax(solver) if kind.native else solver
            sol = guarded(rep, _run_adaptive,
                model, y0, args, dsolver, t0, t1, ts, dt0, *numbers, jump_ts, adjoint,
                horizon.endpoints_only, rep,
            )  # fmt: skip
        path = "diffrax"
    else:
        if not kind.native:
            solver = _DiffraxFixed(solver)
        config = _FixedConfig(
            t0=None, dt=None, seg=horizon.seg, outputs=bool(outputs),
            checkpoint=bool(checkpoint), throw=bool(throw),
        )  # fmt: skip
        rep = start()
        sol = guarded(rep, _run_fixed, model, y0, args, solver, ts, config, rep, (t0, horizon.dt))
        path = "fixed-step"
    sol = _free_time.finish(sol, horizon, throw)
    return guarded(rep, raise_if_failed, sol, path) if host else finish(sol)


class _DiffraxFixed(AbstractFixedStepSolver):
    """Run a diffrax solver in the fixed-step driver (one `solver.step` per step)."""

    solver: dfx.AbstractSolver
    a = ((),)
    b = (1.0,)
    c = (0.0,)
    order = 0

    @property
    def num_stages(self):
        return 1

    def step(self, f, t, y, h, args):
        term = dfx.ODETerm(f)
        state = self.solver.init(term, t, t + h, y, args)
        y1, _, _, _, _ = self.solver.step(term, t, t + h, y, args, state, False)
        return y1

    def to_diffrax(self):
        return self.solver


@dataclasses.dataclass(frozen=True)
class _FixedConfig:
    t0: float | None  # None: given to `_run_fixed` as run-time `times` (free times)
    dt: float | None
    seg: tuple
    outputs: bool
    checkpoint: bool
    throw: bool


def _zeros_counts(model, y0):
    _, counts = jax.eval_shape(lambda y: model.step_map(0.0, y), y0)
    return jtu.tree_map(lambda s: jnp.zeros(s.shape, jnp.int32), counts)


def _all_finite(tree):
    ok = jnp.asarray(True)
    for leaf in jtu.tree_leaves(tree):
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(leaf))
    return ok


def _derived(model, ts, ys, args):
    return jax.vmap(model.derived, in_axes=(0, 0, None))(ts, ys, args)


# Sample intervals of at least this many steps (or with more steps than a sub-block holds, see
# `_checkpoint_levels`) are checkpointed in blocks; shorter ones as a whole.
_MIN_BLOCKED_STEPS = 64


def _checkpoint_blocks(length: int):
    """`(number, size)` of the checkpoint blocks of an interval of `length` steps, or None.

    The size is a divisor of `length` within a factor 2 of sqrt(length) when there is one (no
    padding); otherwise ceil(sqrt(length)), the last block padded with masked steps.
    """
    if length < _MIN_BLOCKED_STEPS:
        return None
    root = int(np.sqrt(length))
    divisors = [k for k in range(max(root // 2, 1), 2 * root + 1) if length % k == 0]
    size = min(divisors, key=lambda k: abs(k - root)) if divisors else root + 1
    return -(-length // size), size


# XLA's CPU runtime runs a loop body's kernels one after the other only if every buffer they touch
# holds at most this many bytes (`ThunkExecutor`'s `execute_sequential_buffer_threshold`, not
# configurable); a body touching a larger one runs them through a thread pool, which for hundreds of
# tiny kernels costs more than the kernels. Reverse mode stacks the rematerialized steps' inputs
# over a checkpoint block, so blocks are cut into sub-blocks whose stacks stay below it.
_SMALL_BUFFER_BYTES = 512
# Up to this many sub-blocks per sample interval are checkpointed in one level (their boundary
# states stored, memory O(steps / sub-block)); more are grouped into blocks of about sqrt(count).
_MAX_FLAT_SUBBLOCKS = 1024


def _checkpoint_levels(length: int, cap: int):
    """`(blocks, sub_blocks, steps)` of the checkpointing of an interval of `length` steps, or None.

    `steps` per sub-block is at most `cap` (the steps whose stacked residuals stay small), chosen in
    [cap/2, cap] for the least padding; `sub_blocks` per block is 1 (two levels: the interval's
    sub-blocks are the blocks) unless there are more than `_MAX_FLAT_SUBBLOCKS` of them, then about
    sqrt of their count (`_checkpoint_blocks`). The padded steps (< one sub-block, plus whole
    sub-blocks of a padded block) are masked. None: the interval is checkpointed whole.
    """
    cap = max(int(cap), 1)
    if length < _MIN_BLOCKED_STEPS and length <= cap:
        return None
    if length <= cap:
        return 1, 1, length
    waste = lambda k: -(-length // k) * k - length
    sub = min(range(max(cap // 2, 1), cap + 1), key=lambda k: (waste(k), -k))
    count = -(-length // sub)
    if count <= _MAX_FLAT_SUBBLOCKS:
        return count, 1, sub
    num, per = _checkpoint_blocks(count)
    return num, per, sub


def _residual_cap(*trees) -> int:
    """Steps whose stacked per-step residuals (a copy of each leaf of `trees`, the per-step state
    and inputs, and the step index) stay within `_SMALL_BUFFER_BYTES` each."""
    sizes = [8]
    for leaf in jtu.tree_leaves(trees):
        sizes.append(max(int(np.prod(jnp.shape(leaf))), 1) * jnp.result_type(leaf).itemsize)
    return max(_SMALL_BUFFER_BYTES // max(sizes), 1)


def scan_grid(
    model,
    y0,
    seg,
    dt,
    t0,
    checkpoint,
    advance,
    per_segment=None,
    *,
    aux0=None,
    before_step=None,
    sampled=None,
    progress=None,
):
    """The fixed-grid stepper: the fixed-step driver's loop, shared by the ODE, SDE and clocked
    (`jaxsim._hybrid._grid`) paths.

    Runs `seg[k]` steps of size `dt` between consecutive samples (nested `lax.scan`: outer over sample
    intervals, inner over steps; time from the integer step index), applying `model.step_map` after
    every step and accumulating its counters. `advance(n, t, y, extra) -> y1` takes one step from
    step index `n` at time `t`; `per_segment(n0, length)` optionally precomputes per-step `extra`
    inputs of a whole interval (stacked along the first axis). With `checkpoint`, reverse mode
    stores the states at the samples and at sub-block boundaries only (`_checkpoint_levels`:
    sub-blocks of at most `_residual_cap` steps, grouped into blocks of about sqrt(count) when an
    interval has more than `_MAX_FLAT_SUBBLOCKS`), each recomputed once in the backward pass, so
    its memory grows as O(samples + steps / sub-block) states, per interval at most 1024 sub-block
    boundaries or O(sqrt(steps)).

    Discrete state besides `y` (the clocks' states, held outputs and logs) travels in `aux`:
    `before_step(n, t, y, aux) -> (aux, inputs)` runs at the start of each step, outside the
    rematerialized step, and `inputs` reach `advance(n, t, y, extra, inputs)`; `sampled(aux)` is
    what of `aux` is recorded at the samples (left limits: before the next step's `before_step`).
    `progress` (a `jaxsim._progress.Reporter`) receives the time reached after each sample interval
    and checkpoint block.

    **Returns:** `(ys, counts)` at the samples; with `aux0`, `(ys, counts, aux at the samples,
    final aux)`.
    """
    seg = np.asarray(seg)
    length = int(seg.max()) if seg.size else 0
    uniform = bool(np.all(seg[1:] == length)) and seg[0] in (0, length)
    counts0 = _zeros_counts(model, y0)
    # With checkpointing, each step is also rematerialized: the backward pass recomputes a step's
    # stages from its input state instead of stacking every intermediate of every step of a block
    # (one stacked buffer, and a dynamic-slice kernel, per intermediate). Combined spacecraft, 6,000
    # steps: gradient compile 19.4 -> 13.6 s and run 4.8 -> 3.3 s. (Inside a scan, CSE cannot merge
    # the recomputation with the forward pass, so `prevent_cse` is not needed.)
    step = jax.checkpoint(advance, prevent_cse=False) if checkpoint else advance

    # The state is carried as one flat vector between steps (`jaxsim._layout`); the pytree is
    # rebuilt (static slices) for the step itself.
    layout = StateLayout.of(y0)
    pack = (lambda y: y) if layout is None else layout.flatten
    unpack = (lambda v: v) if layout is None else layout.unflatten

    def one_step(carry, xs):
        active, extra = xs
        n, v, counts, aux = carry
        t = t0 + n * dt
        y = unpack(v)
        aux1, inputs = (aux, None) if before_step is None else before_step(n, t, y, aux)
        # Held inputs keep one value over the step's stages; the intervals tile the horizon
        # exactly (a step ends where the next begins), so a switch time on a node is in one step.
        with step_interval(t, t0 + (n + 1) * dt):
            y1 = step(n, t, y, extra, inputs)
        y1, c = model.step_map(t + dt, y1)
        y1 = pack(y1)
        counts1 = jtu.tree_map(lambda a, b: a + b.astype(a.dtype), counts, c)
        if active is not None:
            y1 = jtu.tree_map(lambda a, b: jnp.where(active, a, b), y1, v)
            counts1 = jtu.tree_map(lambda a, b: jnp.where(active, a, b), counts1, counts)
            aux1 = jtu.tree_map(lambda a, b: jnp.where(active, a, b), aux1, aux)
            n1 = n + active.astype(n.dtype)
        else:
            n1 = n + 1
        return (n1, y1, counts1, aux1), None

    def steps(carry, active, extra, n):
        if active is None:
            return jax.lax.scan(lambda c, e: one_step(c, (None, e)), carry, extra, length=n)[0]
        return jax.lax.scan(one_step, carry, (active, extra))[0]

    def levels_of(extra):
        if not checkpoint:
            return None
        per_step = jtu.tree_map(lambda e: e[0], extra)
        return _checkpoint_levels(length, _residual_cap(y0, per_step))

    def segment(carry, seg_len):
        extra = None if per_segment is None else per_segment(carry[0], length)
        levels = levels_of(extra)
        if levels is None:
            active = None if uniform else jnp.arange(length) < seg_len
            whole = lambda c, a, e: steps(c, a, e, length)
            carry = (jax.checkpoint(whole) if checkpoint else whole)(carry, active, extra)
            if progress is not None:
                progress(t0 + carry[0] * dt)
        else:
            # Checkpointing in blocks of sub-blocks of steps: the backward pass stores one carry per
            # block, then one per sub-block of the block being differentiated, then the inputs of
            # the steps of one sub-block (few enough that their stacks stay small buffers), and
            # recomputes each step's stages from its input (memory O(n/size + size) states).
            num, per, size = levels
            total = num * per * size
            pad = total - length
            active = None
            if pad or not uniform:
                active = (jnp.arange(total) < seg_len).reshape(num, per, size)
            extra = jtu.tree_map(
                lambda e: jnp.pad(e, [(0, pad)] + [(0, 0)] * (e.ndim - 1)).reshape(
                    (num, per, size) + e.shape[1:]
                ),
                extra,
            )

            def sub_block(c, xs):
                return steps(c, xs[0], xs[1], size), None

            def block_steps(c, xs):
                if per == 1:
                    c = steps(c, _first(xs[0]), _first(xs[1]), size)
                else:
                    c, _ = jax.lax.scan(jax.checkpoint(sub_block), c, xs, length=per)
                if progress is not None:
                    progress(t0 + c[0] * dt)
                return c, None

            block = jax.checkpoint(block_steps)
            carry, _ = jax.lax.scan(block, carry, (active, extra), length=num)
        return carry, (carry[1], carry[2], pick(carry[3]))

    pick = (lambda aux: None) if sampled is None else sampled
    carry0 = (jnp.asarray(0, jnp.int64), pack(y0), counts0, aux0)
    seg_arr = jnp.asarray(seg)
    if uniform and seg[0] == 0:
        # The first sample is t0 itself; the remaining intervals all have `length` steps.
        first = (pack(y0), counts0, pick(aux0))
        last, out = jax.lax.scan(segment, carry0, seg_arr[1:])
        out = jtu.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, out)
    else:
        last, out = jax.lax.scan(segment, carry0, seg_arr)
    ys, counts, aux_at = out
    ys = ys if layout is None else jax.vmap(unpack)(ys)
    if aux0 is None:
        return ys, counts
    return ys, counts, aux_at, last[3]


def _first(tree):
    """The leaves' first entries along the leading axis (None stays None)."""
    return jtu.tree_map(lambda x: x[0], tree)


def check_finite(ts, ys, throw: bool, what: str):
    """`(ys, result, t_final)` of a run sampled at `ts`, checked for non-finite states.

    A NaN/inf state gives `RESULTS.nonfinite_state`, `t_final` = the last sample time whose state
    (and every earlier one) is finite, and NaN rows from there on; with `throw` it raises at run
    time instead.
    """
    finite = jax.vmap(_all_finite)(ys)
    good = jnp.cumprod(finite.astype(jnp.int32)).astype(bool)  # finite up to and including i
    ok = good[-1]
    result = RESULTS.where(ok, RESULTS.successful, RESULTS.nonfinite_state)
    n_good = jnp.sum(good.astype(jnp.int32))
    t_final = jnp.where(ok, ts[-1], ts[jnp.maximum(n_good - 1, 0)])
    ys = mark_after(ts, ys, jnp.where(n_good == 0, -jnp.inf, t_final))
    if throw:
        ys = eqx.error_if(ys, ~ok, nonfinite_message(what))
    return ys, result, t_final


def mark_after(ts, tree, t_final):
    """`tree` (leading axis: samples at `ts`) with the floating rows after `t_final` set to NaN."""
    after = ts > t_final

    def one(b):
        if not jnp.issubdtype(b.dtype, jnp.inexact):
            return b
        return jnp.where(after.reshape((-1,) + (1,) * (b.ndim - 1)), jnp.nan, b)

    return jtu.tree_map(one, tree)


def chunked_drift(model, args):
    """`drift(t, y, _)`: `model.drift(t, y, args)` reading the floating arrays of the model and of
    `args` from a few flat vectors of at most `_SMALL_BUFFER_BYTES` each, sliced inside every call.

    The step loops then close over these few vectors instead of every parameter array, so reverse
    mode carries and accumulates a few cotangent vectors through the loops instead of one per
    array (each a copy kernel per iteration on the CPU runtime); the chunks stay small buffers, so
    the loop bodies still run their kernels in sequence. Forward values are unchanged (the slices
    are exact). With arrays of mixed dtypes, or fewer than two, `model.drift` is used as is.
    """
    dyn, static = eqx.partition((model, args), eqx.is_inexact_array)
    leaves, treedef = jtu.tree_flatten(dyn)
    dtypes = {jnp.result_type(x) for x in leaves}
    if len(leaves) < 2 or len(dtypes) != 1:
        return lambda t, y, _: model.drift(t, y, args)
    limit = max(_SMALL_BUFFER_BYTES // next(iter(dtypes)).itemsize, 1)
    shapes = [jnp.shape(x) for x in leaves]
    groups, current, filled = [], [], 0
    for i, shape in enumerate(shapes):
        size = int(np.prod(shape))
        if current and filled + size > limit:
            groups.append(current)
            current, filled = [], 0
        current.append(i)
        filled += size
    groups.append(current)
    chunks = [jnp.concatenate([jnp.ravel(leaves[i]) for i in g]) for g in groups]

    def drift(t, y, _):
        parts = [None] * len(shapes)
        for g, chunk in zip(groups, chunks, strict=True):
            offset = 0
            for i in g:
                size = int(np.prod(shapes[i]))
                parts[i] = jnp.reshape(chunk[offset : offset + size], shapes[i])
                offset += size
        m, a = eqx.combine(jtu.tree_unflatten(treedef, parts), static)
        return m.drift(t, y, a)

    return drift


@jaxsim_jit
def _run_fixed(model, y0, args, solver, ts, config: _FixedConfig, progress=None, times=None):
    # `times`: `(t0, dt)` as run-time inputs (free times, `jaxsim._free_time`), else the
    # config's constants.
    t0, dt = (config.t0, config.dt) if times is None else times
    drift = chunked_drift(model, args)
    advance = lambda n, t, y, extra, inputs: solver.step(drift, t, y, dt, None)
    ys, counts = scan_grid(
        model, y0, config.seg, dt, t0, config.checkpoint, advance, progress=progress
    )
    ys, result, t_final = check_finite(ts, ys, config.throw, "fixed-step")
    n_steps = int(np.sum(config.seg))
    stats = make_stats(n_steps, n_steps * solver.num_stages, jtu.tree_map(lambda c: c[-1], counts))
    derived = _derived(model, ts, ys, args) if config.outputs else None
    return Solution(
        ts=ts, ys=ys, outputs=derived, counts=counts, stats=stats, result=result, t_final=t_final
    )


@jaxsim_jit
def _run_adaptive(
    model,
    y0,
    args,
    dsolver,
    t0,
    t1,
    ts,
    dt0,
    rtol,
    atol,
    max_steps,
    outputs,
    throw,
    jump_ts,
    adjoint=None,
    endpoints_only=False,
    progress=None,
):
    core = DiffraxSegments(model, y0, dsolver, adjoint)
    controller = dfx.PIDController(
        rtol=rtol, atol=atol, jump_ts=None if not jump_ts else jnp.asarray(jump_ts)
    )
    sol = core.solve(
        t0,
        t1,
        dt0,
        y0,
        args,
        # Samples at t0 and t1 only (the default): the step-end states themselves. Saving through
        # `ts` would interpolate inside every step's bookkeeping; on a J2 point mass with Dopri8
        # that is a third of the step (5.9 -> 3.8 us per step).
        saveat=dfx.SaveAt(t0=True, t1=True, solver_state=True)
        if endpoints_only
        else dfx.SaveAt(ts=ts, solver_state=True),
        stepsize_controller=controller,
        max_steps=max_steps,
        throw=throw,
        progress=progress,
    )
    ys = core.states(ts, sol.ys)
    stats = make_stats(
        sol.stats["num_accepted_steps"],
        sol.stats["num_steps"] * _stages(dsolver),
        sol.solver_state[1],
        num_rejected_steps=sol.stats["num_rejected_steps"],
    )
    result, t_final = solve_outcome(sol, ts)
    ys = mark_after(ts, ys, t_final)
    derived = _derived(model, ts, ys, args) if outputs else None
    return Solution(
        ts=ts, ys=ys, outputs=derived, counts=None, stats=stats, result=result, t_final=t_final
    )


class DiffraxSegments:
    """The diffrax core: `diffeqsolve` on the model's flat state with its step map after every step.

    Built once per run (inside the trace) and used by every diffrax path: plain adaptive runs, SDEs
    with diffrax solvers, and the segments of the hybrid driver. The terms see the pytree state
    (`drift(t, y, args)`, `diffusion(t, y, args)`); the solver carries one flat vector between
    steps and stages (`jaxsim._layout`); `StepMappedSolver` applies the model's `step_map` after
    each accepted step and counts its switches (`solver_state[1]`: totals, `[2]`: last step's).
    """

    def __init__(self, model, y0, dsolver, adjoint=None, *, drift=None, diffusion=None, path=None):
        self.model, self.adjoint = model, adjoint
        layout = StateLayout.of(y0)
        if layout is None:
            self.pack, self.unpack = (lambda y: y), (lambda v: v)
        else:
            self.pack, self.unpack = layout.flatten, layout.unflatten
        self.counts0 = _zeros_counts(model, y0)
        term = dfx.ODETerm(self.flat_drift(model.drift if drift is None else drift))
        if diffusion is not None:
            m = model.noise_dim

            def g(t, v, a):
                gs = diffusion(t, self.unpack(v), a)
                leaves = [jnp.reshape(x, (-1, m)) for x in jtu.tree_leaves(gs)]
                return jnp.concatenate(leaves, axis=0)

            term = dfx.MultiTerm(term, dfx.ControlTerm(g, path))
        self.terms = term
        if dsolver is not None:
            inner = for_adjoint(dsolver, adjoint)
            self.solver = StepMappedSolver(inner, self.step_map, self.counts0)

    def flat_drift(self, drift):
        pack, unpack = self.pack, self.unpack
        return lambda t, v, a: pack(drift(t, unpack(v), a))

    def step_map(self, t, v):
        y, counts = self.model.step_map(t, self.unpack(v))
        return self.pack(y), counts

    def solve(self, t0, t1, dt0, y0, args, *, progress=None, **kwargs):
        """`diffeqsolve` from the pytree `y0`; `sol.ys` stay flat (see `states`). `progress`: a
        `jaxsim._progress.Reporter` fed by diffrax's progress meter, or None."""
        if self.adjoint is not None:
            kwargs["adjoint"] = self.adjoint
        if progress is not None:
            kwargs["progress_meter"] = progress.meter()
        return dfx.diffeqsolve(self.terms, self.solver, t0, t1, dt0, self.pack(y0), args, **kwargs)

    def states(self, ts, vs):
        """Saved flat states as pytrees in the step map's canonical form (dense output is in
        each step's starting coordinates)."""
        return jax.vmap(lambda t, v: self.model.step_map(t, self.unpack(v))[0])(ts, vs)


def solve_outcome(sol, ts):
    """`(result, t_final)` of a `diffeqsolve` sampled at `ts` (with `throw=False` it may have failed).

    diffrax fills the samples after a failure with its last state; `t_final` is then the last time
    it reached (from its step-size controller's state, or the last sample before the failure).
    """
    result = _results.promote(sol.result)
    ok = result == RESULTS.successful
    # Samples diffrax could not reach are +inf in `sol.ts` (it pads them); the last finite one is
    # where the run stopped, to the sample resolution.
    reached = jnp.isfinite(sol.ts) & (sol.ts <= ts[-1])
    last = jnp.max(jnp.where(reached, sol.ts, ts[0]))
    return result, jnp.where(ok, ts[-1], last)


def _stages(dsolver) -> int:
    tab = getattr(dsolver, "tableau", None)
    if tab is None:
        return 1
    # FSAL schemes reuse the last stage of the previous step.
    n = len(tab.b_sol)
    return n - 1 if tab.fsal else n
