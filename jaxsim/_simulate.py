r"""`simulate`, the entrance of the run layer: build the request, route it, run it, raise.

`simulate` translates diffrax's spellings (`_with_info`), has every argument checked once into
a frozen request (`jaxsim._request._build.build_request`), runs the request's driver (`_run`, or
`_run_free` for free times) and leaves through one exit, where a failed top-level run raises.
The rooms it reaches, each importing only the ones after it:

- drivers: plain (`jaxsim._drivers._plain`: the fixed grid, or a diffrax solver instance), SDE
  (`jaxsim._drivers._sde`), clocked (`jaxsim._drivers._clocked`: clocks, events, discontinuities, `dtmax`);
  jaxsim's adaptive pairs on the lean adaptive core (`jaxsim._cores._adaptive.run`);
- cores: the fixed-grid stepper (`jaxsim._cores._fixed_grid`), the diffrax core
  (`jaxsim._cores._diffrax`), the lean adaptive core (`jaxsim._cores._adaptive`);
- the solution (`jaxsim._result._solution`: `Solution` and `finish`, the one result tail of every
  driver program), the flat state layout (`jaxsim._model._layout`) and the solvers (`jaxsim._solvers._ode`).
"""

import copy
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import diffrax as dfx
import numpy as np
from jaxtyping import ArrayLike, Float, PRNGKeyArray, PyTree

from ._compilation._cache import for_jaxsim_programs
from ._compilation._jit import warn_if_replayed
from ._cores import _adaptive as _adaptive_core
from ._drivers import _free_time
from ._drivers._plain import _DiffraxFixed, _FixedConfig, _run_adaptive, _run_fixed
from ._events._event import Event
from ._model._clocks import AbstractDiscreteModel
from ._model._dynamic_object import AbstractDynamicObject
from ._model._signals import concrete_breakpoints
from ._request._build import DEFAULT_GAINS, build_request
from ._result._host_checks import on_host, raise_if_failed
from ._result._solution import Solution
from ._result._validity import InProgram
from ._solvers._ode import RK4, AbstractSolver


# diffrax's spellings of `simulate`'s arguments (`jaxsim._request._vocabulary`), and the arguments of
# `simulate` they may replace.
_DIFFRAX_KEYS = ("dt0", "saveat", "stepsize_controller", "progress_meter")
_TRANSLATED = ("dt", "ts", "rtol", "atol", "dtmax", "progress", "stepsize_controller")


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
            from ._request._vocabulary import from_diffrax

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
                "through an adaptive or segmented solve needs `adjoint=diffrax.ForwardMode()` "
                "(or `adjoint=jaxsim.ForwardSensitivity()` on jaxsim's adaptive pairs); the "
                "default adjoint (None: `jaxsim.DiscreteAdjoint` on jaxsim's adaptive pairs, "
                "diffrax's RecursiveCheckpointAdjoint elsewhere) is reverse mode only "
                "(`jax.grad`, `jax.jacrev`)."
            ) from err
        if not isinstance(sol, Solution) or sol.info is not None:
            return sol
        from ._result._schema import run_info

        ts = kwargs.get("ts")
        end = t1 if t1 is not None or ts is None else ts[-1]  # `ts` may be traced
        dt = kwargs.get("dt")
        if dt is None and kwargs.get("num_steps") is not None and end is not None:
            # The step of a `num_steps` run (recorded when the times are concrete).
            dt = (end - kwargs.get("t0", 0.0)) / kwargs["num_steps"]
        info = run_info(
            model, solver=kwargs.get("solver", solver_default), dt=dt,
            rtol=kwargs.get("rtol"), atol=kwargs.get("atol"), t0=kwargs.get("t0", 0.0), t1=end,
            events=kwargs.get("events", ()), sol=sol,
        )  # fmt: skip
        # A shallow copy with the static field set (`dataclasses.replace` re-runs the
        # constructor: about 5x the time).
        sol = copy.copy(sol)
        object.__setattr__(sol, "info", info)
        return sol

    return simulate


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
      discrete models on clocks, zero-crossing events, scheduled discontinuities as segment
      boundaries, output frames as dense-output points; giving any of the first three (or
      `dtmax`, adaptive solvers only) runs the clocked driver, whose `Solution` also holds `zs`,
      `held`, `clock_logs` and `events` (guide "Events, clocks and discontinuities").
      `discontinuities` takes signals, times [s], or the model itself (its breakpoints become
      boundaries: a traced burn start then splits a fixed step). Requests no driver supports are
      refused by name: e.g. an SDE with clocks or events, `max_events` without events, `dtmax`
      with a fixed-step solver.
    - `adjoint`: how adaptive and clocked runs are differentiated: `None` (reverse mode: `jax.grad`,
      `jax.jacrev`; on jaxsim's adaptive pairs `jaxsim.DiscreteAdjoint()`, the discrete adjoint of
      the accepted steps, elsewhere diffrax's `RecursiveCheckpointAdjoint`; pass
      `diffrax.RecursiveCheckpointAdjoint()` for diffrax's scheme on jaxsim's pairs too) or
      `diffrax.ForwardMode()` (forward mode: `jax.jvp`, `jax.jacfwd`, cheaper for a few
      parameters). The fixed-step driver is a plain `lax.scan` and supports both modes as is; there
      `adjoint` is ignored. `jaxsim.ForwardSensitivity()` (jaxsim's adaptive pairs, plain runs):
      the sensitivities are integrated with the state and their errors control the steps, so the
      derivative is accurate to the tolerance (every mode: `jvp`, `jacfwd`, `grad`).
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
      `atol`, `dtmax`, and its `pcoeff`, `icoeff` set the controller's gains on every adaptive
      path; `ConstantStepSize()` a fixed step `dt`; a tqdm or text meter is
      `progress=True`), otherwise refused with a message giving jaxsim's spelling.

    `dt`, `sample_dt` and the number of samples fix the shape of the computation and must be
    concrete. `t0`, `t1` and `ts` may be traced (under `jit`, `grad`, `vmap`) on the plain
    adaptive and fixed-step paths (`num_steps`); clocks, events, discontinuities and SDE solvers
    need them concrete (refused by name otherwise).
    """
    # diffrax's spellings (`dt0`, `saveat`, `stepsize_controller`, `progress_meter`) were
    # translated into jaxsim's arguments by `_with_info` before this body runs.
    from ._drivers._progress import guarded, reporter

    # Every argument is checked here, once (`jaxsim._request._build`); the drivers check nothing.
    req = build_request(
        model, y0, t1, t0=t0, dt=dt, solver=solver, ts=ts, sample_dt=sample_dt, args=args,
        rtol=rtol, atol=atol, max_steps=max_steps, outputs=outputs, checkpoint=checkpoint,
        throw=throw, key=key, dW=dW, dZ=dZ, brownian=brownian, clocks=clocks, events=events,
        discontinuities=discontinuities, max_events=max_events, event_tol=event_tol,
        dtmax=dtmax, root_finder=root_finder, adjoint=adjoint, progress=progress,
        num_steps=num_steps, num_samples=num_samples,
        # A `PIDController` with other gains than the I controller's (`jaxsim._request._vocabulary`).
        gains=(DEFAULT_GAINS if stepsize_controller is None
               else (stepsize_controller.pcoeff, stepsize_controller.icoeff)),
    )  # fmt: skip
    model, y0, args, key, kind = req.model, req.y0, req.args, req.key, req.kind
    t0, t1, ts, dt, progress = req.t0, req.t1, req.ts, req.dt, req.progress
    _adaptive_core.check_adjoint(req.adjoint, kind, y0)
    # The progress display (its "compiling" status) opens right before a driver runs.
    start = lambda: reporter(progress, t0, t1)  # noqa: E731
    # A top-level call checks `throw` on the host after the run: the program then has no host
    # callbacks and is cacheable (`jaxsim._result._host_checks`).
    host = on_host(throw)
    throw = bool(throw) and not host
    # Traced physical checks (`jaxsim._result._validity`): an error in the program with `throw`, else
    # `RESULTS.invalid_model`; every driver's Solution goes through `checks.finish`.
    checks = InProgram(model, y0)
    y0 = checks.guard(y0, throw)

    if req.free:
        rep, sol, path = _run_free(
            model, y0, args, solver, kind, req.horizon, dt=dt, rtol=rtol, atol=atol,
            max_steps=max_steps, outputs=outputs, checkpoint=checkpoint, throw=throw,
            adjoint=adjoint, start=start, gains=req.gains,
        )  # fmt: skip
    else:
        rep, sol, path = _run(req.replace(y0=y0), throw, start)
    # The one exit: a failed top-level run raises here, on the host, with the message of the
    # path's in-program check (`jaxsim._result._host_checks`); otherwise (under a user's trace, or
    # `throw=False`) `checks.finish` reports the traced physical checks (`jaxsim._result._validity`).
    return guarded(rep, raise_if_failed, sol, path) if host else checks.finish(sol)


def _run(req, throw: bool, start) -> tuple:
    """`(progress reporter, Solution, path)`: the request run by its driver (`req.kind.driver`):
    SDE, clocked, or plain (lean adaptive core, diffrax core, fixed grid). `throw` is the
    in-program check (False when `simulate` checks on the host); `path` names the driver whose
    message a failure raises (`jaxsim._result._host_checks.raise_if_failed`)."""
    from ._drivers._progress import guarded

    model, y0, args, kind, solver = req.model, req.y0, req.args, req.kind, req.solver
    t0, t1, ts, dt, adjoint = req.t0, req.t1, req.ts, req.dt, req.adjoint
    if kind.driver == "sde":
        from ._drivers._sde import simulate_sde

        rep = start()
        sol = guarded(rep, simulate_sde, req, throw=throw, progress=rep)
        path = "diffrax" if kind.adaptive or isinstance(solver, dfx.AbstractSolver) else "SDE"
        return rep, sol, path
    is_jaxsim, adaptive = kind.native, kind.adaptive
    # jaxsim's pairs on the lean core; any other adaptive run (clocked segments included) is
    # diffrax's loop, whose checkpointing adjoints re-decide the steps in the backward pass.
    own_core = (adaptive and is_jaxsim and kind.driver != "clocked"
                and _adaptive_core.supports(solver, y0, adjoint))  # fmt: skip
    if adaptive and not own_core:
        warn_if_replayed(adjoint, model, y0, args, t0, t1)
    if kind.driver == "clocked":
        from ._drivers._clocked import simulate_clocked

        rep = start()
        dsolver = solver.to_diffrax() if is_jaxsim else solver
        sol = guarded(rep, simulate_clocked, req, dsolver=dsolver, throw=throw, progress=rep)
        return rep, sol, "clocked"
    if adaptive:
        endpoints_only = bool(len(ts) == 2 and ts[0] == t0 and ts[-1] == t1)
        numbers = (_tolerance(req.rtol), _tolerance(req.atol), int(req.max_steps),
                   bool(req.outputs), bool(throw), concrete_breakpoints(model))  # fmt: skip
        dt0 = None if dt is None else float(dt)
    if own_core:
        # jaxsim's pairs run on jaxsim's own adaptive core (diffrax's step control, one loop over
        # the flat state); a diffrax solver instance (e.g. `solver.to_diffrax()`) runs in diffrax.
        rep = start()
        sol = guarded(rep, _adaptive_core.run,
            model, y0, args, solver, t0, t1, np.asarray(ts), dt0, *numbers,
            _adaptive_core.loop_kind(adjoint), endpoints_only, rep, gains=req.gains,
        )  # fmt: skip
        return rep, sol, "diffrax"
    if adaptive:
        # Methods called through the class: an equinox module builds a bound-method module on
        # each attribute access (about 40 us each, per call of `simulate`).
        dsolver = type(solver).to_diffrax(solver) if is_jaxsim else solver
        rep = start()
        sol = guarded(rep, _run_adaptive,
            model, y0, args, dsolver, t0, t1, np.asarray(ts), dt0, *numbers, adjoint,
            endpoints_only, rep, gains=req.gains,
        )  # fmt: skip
        return rep, sol, "diffrax"
    if not is_jaxsim:
        solver = _DiffraxFixed(solver)
    config = _FixedConfig(
        t0=t0, dt=dt, seg=req.seg, outputs=bool(req.outputs), checkpoint=bool(req.checkpoint),
        throw=bool(throw),
    )  # fmt: skip
    rep = start()
    sol = guarded(rep, _run_fixed, model, y0, args, solver, np.asarray(ts), config, rep)
    return rep, sol, "fixed-step"


def _tolerance(x) -> np.ndarray:
    """`rtol`/`atol` as a float64 array: an argument of the compiled program (traced), so a sweep
    over tolerances compiles once (a Python float would be a constant of the program)."""
    return np.asarray(float(x), dtype=np.float64)


def _run_free(
    model, y0, args, solver, kind, horizon, *, dt, rtol, atol, max_steps, outputs, checkpoint,
    throw, adjoint, start, gains=DEFAULT_GAINS,
):  # fmt: skip
    """`(progress reporter, Solution, path)` of a run with free times (`jaxsim._drivers._free_time`): the
    horizon's times are run-time inputs of the adaptive and fixed-step drivers (traced, or
    concrete arrays: one program per shape)."""
    from ._drivers._progress import guarded

    t0, t1, ts = horizon.t0, horizon.t1, horizon.ts
    if kind.adaptive:
        dt0 = None if dt is None else float(dt)
        numbers = (_tolerance(rtol), _tolerance(atol), int(max_steps), bool(outputs), bool(throw))
        jump_ts = concrete_breakpoints(model)
        rep = start()
        if kind.native and _adaptive_core.supports(solver, y0, adjoint):
            sol = guarded(rep, _adaptive_core.run,
                model, y0, args, solver, t0, t1, ts, dt0, *numbers, jump_ts,
                _adaptive_core.loop_kind(adjoint), horizon.endpoints_only, rep, gains=gains,
            )  # fmt: skip
        else:
            warn_if_replayed(adjoint, model, y0, args, t0, t1, ts)
            dsolver = type(solver).to_diffrax(solver) if kind.native else solver
            sol = guarded(rep, _run_adaptive,
                model, y0, args, dsolver, t0, t1, ts, dt0, *numbers, jump_ts, adjoint,
                horizon.endpoints_only, rep, gains=gains,
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
    return rep, _free_time.finish(sol, horizon, throw), path
