r"""`simulate`, the entrance of the run layer: build the request, run its driver, raise.

`simulate` translates diffrax's spellings (`_with_info`), has every argument checked once into a
frozen request (`jaxsim._request._build.build_request`, which also routes it: `jaxsim._route.route`
gives the driver and the core, the one routing decision), runs the request's driver (every driver
takes the request) and leaves through one exit, where a failed top-level run raises. The stages
it reaches, each importing only the ones after it (`tests/test_architecture.py`):

- `jaxsim._request` (the checked `Request`) and `jaxsim._route` (driver and core);
- `jaxsim._drivers`: plain (`_plain.run_plain`: concrete or free times, on the fixed grid, the
  lean adaptive core or the diffrax core), SDE (`_sde`), clocked (`_clocked`: clocks, events,
  discontinuities, `dtmax`);
- `jaxsim._events` (event types, crossing guard, root finders);
- `jaxsim._cores`: the fixed-grid stepper, the lean adaptive core, the diffrax core;
- `jaxsim._solvers`, `jaxsim._result` (`Solution` and `finish`, the one result tail of every
  driver program), `jaxsim._compilation` and `jaxsim._model`.
"""

import copy
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import diffrax as dfx
from jaxtyping import ArrayLike, Float, PRNGKeyArray, PyTree

from ._compilation._cache import for_jaxsim_programs
from ._drivers._clocked import simulate_clocked
from ._drivers._plain import replay_safe_request, run_plain
from ._drivers._progress import guarded, reporter
from ._drivers._sde import simulate_sde
from ._events._event import Event
from ._model._clocks import AbstractDiscreteModel
from ._model._dynamic_object import AbstractDynamicObject
from ._model._spans import checked as spans_checked
from ._request._build import DEFAULT_GAINS, build_request
from ._request._vocabulary import controller_gains, from_diffrax
from ._result._host_checks import on_host, raise_if_failed
from ._result._schema import run_info
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
    else, so that every driver and the run's metadata see jaxsim's; the body attaches the
    `Solution`'s `info` from the checked request)."""
    defaults = {
        name: p.default
        for name, p in inspect.signature(run).parameters.items()
        if p.default is not inspect.Parameter.empty
    }

    @functools.wraps(run)
    def simulate(model, y0, t1=None, **kwargs):
        if any(k in kwargs for k in _DIFFRAX_KEYS) or kwargs.get("max_steps", 1) is None:
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
    user_model = model
    # Every argument is checked here, once (`jaxsim._request._build`); the drivers check nothing.
    req = build_request(
        model, y0, t1, t0=t0, dt=dt, solver=solver, ts=ts, sample_dt=sample_dt, args=args,
        rtol=rtol, atol=atol, max_steps=max_steps, outputs=outputs, checkpoint=checkpoint,
        throw=throw, key=key, dW=dW, dZ=dZ, brownian=brownian, clocks=clocks, events=events,
        discontinuities=discontinuities, max_events=max_events, event_tol=event_tol,
        dtmax=dtmax, root_finder=root_finder, adjoint=adjoint, progress=progress,
        num_steps=num_steps, num_samples=num_samples,
        # A `PIDController` with other gains than the I controller's (`jaxsim._request._vocabulary`).
        gains=controller_gains(stepsize_controller, DEFAULT_GAINS),
    )  # fmt: skip
    model, y0, t0, t1, progress = req.model, req.y0, req.t0, req.t1, req.progress
    # The progress display (its "compiling" status) opens right before a driver runs.
    start = lambda: reporter(progress, t0, t1)  # noqa: E731
    # A top-level call checks `throw` on the host after the run: the program then has no host
    # callbacks and is cacheable (`jaxsim._result._host_checks`).
    host = on_host(throw)
    throw = bool(throw) and not host
    # Traced physical checks (`jaxsim._result._validity`): an error in the program with `throw`, else
    # `RESULTS.invalid_model`; every driver's Solution goes through `checks.finish`.
    checks = InProgram(model, y0, t0, t1)
    y0 = checks.guard(y0, throw)
    req = req.replace(y0=y0)
    req = replay_safe_request(req)  # a gradient that replays steps: compiled unhoisted
    rep = start()
    # Time spans (an ephemeris' records) were checked at the call: the programs skip theirs.
    with spans_checked():
        sol = guarded(rep, _DRIVERS[req.kind.driver], req, throw=throw, progress=rep)
    # The one exit: a failed top-level run raises here, on the host, with the message of the
    # path's in-program check (`jaxsim._result._host_checks`); otherwise (under a user's trace, or
    # `throw=False`) `checks.finish` reports the traced physical checks (`jaxsim._result._validity`).
    if host:
        sol = guarded(rep, raise_if_failed, sol, req.kind.failure_path)
    else:
        sol = checks.finish(sol)
    # The run's metadata last (its unit checks trace after the result tail, as they always did).
    return _with_run_info(sol, user_model, req)


# Each driver takes the checked request (`req.kind.driver`, decided by `jaxsim._route.route`).
_DRIVERS = {
    "fixed": run_plain,
    "adaptive": run_plain,
    "sde": simulate_sde,
    "clocked": simulate_clocked,
}


def _with_run_info(sol, model, req):
    """`sol` with its `info` (the run's schema metadata, `jaxsim._result._schema.run_info`) from
    the checked request; `model` is the user's (its parameters as given)."""
    if not isinstance(sol, Solution) or sol.info is not None:
        return sol
    if req.free:
        t0, t1, dt = req.horizon.t0, req.horizon.t1, req.horizon.dt
    else:
        t0, t1, dt = req.t0, req.t1, req.dt
    info = run_info(
        model, solver=req.solver, dt=dt, rtol=req.rtol, atol=req.atol, t0=t0, t1=t1,
        events=req.events, sol=sol,
    )  # fmt: skip
    # A shallow copy with the static field set (`dataclasses.replace` re-runs the constructor:
    # about 5x the time).
    sol = copy.copy(sol)
    object.__setattr__(sol, "info", info)
    return sol
