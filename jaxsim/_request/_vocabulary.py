"""diffrax's spellings of `simulate`'s arguments: translated where jaxsim means the same, refused
by name (with jaxsim's spelling) where it does not.

A diffrax user writes `diffeqsolve(..., dt0=..., saveat=SaveAt(...),
stepsize_controller=PIDController(...), progress_meter=...)`. `simulate` takes these keywords and
rewrites them into its own arguments before anything else runs, so that every driver (fixed step,
adaptive, clocks/events, SDE) sees one request:

- `dt0` [s]: diffrax's initial step, the step itself under `ConstantStepSize`: jaxsim's `dt` (the
  step of fixed-step solvers, the initial step guess of adaptive ones).
- `saveat=SaveAt(t0=..., ts=..., steps=..., t1=...)`: the sample times `ts`, in diffrax's order
  (t0, then `ts` or every `steps`-th step of a fixed-step run, then t1). jaxsim ends a run at its
  last sample, so the samples must end at `t1`. Dense output, `fn`, several `subs`, and saving
  solver or controller state are refused (jaxsim has `ts`/`sample_dt`, `outputs` and `stats`).
- `stepsize_controller`: `PIDController(rtol, atol, pcoeff=..., icoeff=..., dtmax=...)` is
  `rtol`, `atol` (and `dtmax`) with the controller's proportional and integral gains (default
  `pcoeff=0`, `icoeff=1`: the I controller; e.g. `pcoeff=0.2, icoeff=0.4` a PI controller, same
  semantics on jaxsim's adaptive core and in diffrax); `ConstantStepSize()` is a fixed-step run
  with `dt`. Other settings (`dtmin`, factors, norms, `ClipStepSizeController`,
  `StepTo`) have no jaxsim equivalent and are refused by name.
- `progress_meter`: `NoProgressMeter()` is `progress=False`; `TqdmProgressMeter()` and
  `TextProgressMeter()` are `progress=True` (jaxsim picks the display).

Giving an argument in both spellings (`dt` and `dt0`, `ts` and `saveat`, ...) is an error.

**Reference:** diffrax 0.7 documentation, `diffeqsolve`, `SaveAt`, `PIDController`
(https://docs.kidger.site/diffrax/api/diffeqsolve/).
"""

import dataclasses

import diffrax as dfx
import jax
import numpy as np

from .._solvers._ode import AbstractSolver


def _refuse(message: str):
    raise ValueError(f"simulate: {message}")


def _both(diffrax_name: str, jaxsim_name: str):
    _refuse(
        f"`{diffrax_name}` (diffrax's spelling) and `{jaxsim_name}` (jaxsim's) were both given; "
        f"pass one of them."
    )


def _fixed_step(solver, dt) -> bool:
    """Whether `solver` runs on jaxsim's fixed grid (a fixed-step jaxsim solver, or a diffrax
    solver given a step `dt`)."""
    if isinstance(solver, AbstractSolver):
        return not bool(solver.adaptive)
    return dt is not None


def _concrete(name, value):
    try:
        return np.asarray(value, dtype=float)
    except jax.errors.TracerArrayConversionError as err:
        raise ValueError(
            f"simulate: `{name}` must be concrete (it fixes the output shape); got a traced value."
        ) from err


def _controller(ctrl, solver, dt, update):
    if isinstance(ctrl, dfx.ConstantStepSize):
        if dt is None:
            _refuse(
                "`stepsize_controller=ConstantStepSize()` steps at `dt0`; give the step as "
                "`dt` [s] (or `dt0`)."
            )
        if isinstance(solver, AbstractSolver) and solver.adaptive:
            _refuse(
                f"`stepsize_controller=ConstantStepSize()`: jaxsim's {type(solver).__name__} is "
                "adaptive. For fixed steps use `solver=js.RK4()` (or `js.RK2()`, `js.Euler()`) "
                f"with `dt`, or diffrax's own `solver=diffrax.{type(solver).__name__}()` with `dt`."
            )
        return
    if isinstance(ctrl, dfx.PIDController):
        reference = dfx.PIDController(rtol=ctrl.rtol, atol=ctrl.atol)
        unsupported = []
        for field in dataclasses.fields(dfx.PIDController):
            if field.name in ("rtol", "atol", "dtmax", "pcoeff", "icoeff", "dcoeff"):
                continue
            mine, default = getattr(ctrl, field.name), getattr(reference, field.name)
            same = mine is default
            if not same:
                try:
                    same = bool(np.all(np.asarray(mine) == np.asarray(default)))
                except (TypeError, ValueError, jax.errors.TracerArrayConversionError):
                    same = False
            if not same:
                unsupported.append(f"{field.name}={mine!r}")
        if unsupported:
            _refuse(
                f"`stepsize_controller=PIDController(...)`: {', '.join(unsupported)} has no "
                "jaxsim equivalent. jaxsim's adaptive driver uses diffrax's PI controller; "
                "set its tolerances with `rtol`, `atol`, its largest step with `dtmax` [s] and "
                "its gains with `pcoeff`, `icoeff`, `dcoeff`."
            )
        update["stepsize_controller"] = ctrl  # its gains, checked with the request's arguments
        update["rtol"], update["atol"] = ctrl.rtol, ctrl.atol
        if ctrl.dtmax is not None:
            update["dtmax"] = ctrl.dtmax
        return
    if isinstance(ctrl, dfx.ClipStepSizeController):
        _refuse(
            "`stepsize_controller=ClipStepSizeController(...)` has no jaxsim equivalent: give a "
            "`PIDController` (or `rtol`, `atol`), and the times where the dynamics jump as "
            "`discontinuities=(t_1, t_2, ...)` [s] (each starts a new solve)."
        )
    name = type(ctrl).__name__
    hint = " (jaxsim steps on a uniform grid: `dt` [s])" if name == "StepTo" else ""
    _refuse(
        f"`stepsize_controller={name}(...)` has no jaxsim equivalent{hint}. jaxsim takes "
        "`dt` [s] for fixed steps, and `rtol`, `atol` (and `dtmax`) for adaptive ones."
    )


def _samples(saveat, t0, t1, dt, solver):
    """jaxsim's `ts` for diffrax's `SaveAt`."""
    for name in ("dense", "solver_state", "controller_state", "made_jump"):
        if getattr(saveat, name):
            hint = (
                "jaxsim has no dense output: give every time you need in `SaveAt(ts=...)` "
                "(or `ts`, `sample_dt`)"
                if name == "dense"
                else "jaxsim returns the step counts in `Solution.stats` and nothing of the "
                "solver's internal state"
            )
            _refuse(f"`saveat=SaveAt({name}=True)` has no jaxsim equivalent: {hint}.")
    sub = saveat.subs
    if not isinstance(sub, dfx.SubSaveAt):
        _refuse(
            "`saveat=SaveAt(subs=...)` with several `SubSaveAt`s has no jaxsim equivalent: "
            "jaxsim saves one set of sample times (`ts`); run once per set, or save their union."
        )
    if sub.fn is not dfx.SubSaveAt(t1=True).fn:
        _refuse(
            "`saveat=SaveAt(fn=...)` has no jaxsim equivalent: jaxsim saves the state "
            "(`Solution.ys`) and the model's outputs (`Solution.outputs`); apply `fn` to them."
        )
    t0 = float(_concrete("t0", t0))
    parts = [np.array([t0])] if sub.t0 else []
    if sub.ts is not None:
        parts.append(np.atleast_1d(_concrete("saveat.ts", sub.ts)))
    every = int(sub.steps)
    if every:
        if sub.ts is not None:
            _refuse(
                "`saveat=SaveAt(ts=..., steps=...)` saves out of time order; jaxsim's samples "
                "`ts` are non-decreasing: give one of them."
            )
        if not _fixed_step(solver, dt):
            _refuse(
                f"`saveat=SaveAt(steps=...)`: jaxsim saves adaptive runs ({type(solver).__name__})"
                " at given times only: pass `SaveAt(ts=...)`, or `ts` / `sample_dt` [s]."
            )
        if dt is None or t1 is None:
            _refuse("`saveat=SaveAt(steps=...)` needs the step `dt` [s] (or `dt0`) and `t1` [s].")
        dt, t1_ = float(_concrete("dt", dt)), float(_concrete("t1", t1))
        n = (t1_ - t0) / dt
        k = round(n)
        if k < 1 or abs(n - k) > 1e-9 * max(1.0, n) or k % every:
            _refuse(
                f"`saveat=SaveAt(steps={sub.steps!r})`: the horizon t1 - t0 = {t1_ - t0} s must "
                f"be a whole number of steps dt={dt} s (a multiple of {every}); or give "
                "`sample_dt` [s]."
            )
        parts.append(t0 + dt * np.arange(every, k + 1, every))
    if sub.t1:
        if t1 is None:
            _refuse("`saveat=SaveAt(t1=True)` needs `t1` [s].")
        parts.append(np.array([float(_concrete("t1", t1))]))
    if not parts:
        _refuse("`saveat=SaveAt()` saves nothing; give `t0`, `t1`, `ts` or `steps`.")
    ts = np.concatenate(parts)
    if t1 is not None and not np.isclose(ts[-1], float(_concrete("t1", t1)), rtol=1e-12, atol=0):
        _refuse(
            f"`saveat`: jaxsim ends a run at its last sample, here {ts[-1]} s before t1={t1} s. "
            "Save t1 as well (`SaveAt(ts=..., t1=True)`), or end the run at the last sample "
            "(`t1=ts[-1]`)."
        )
    return ts


def _progress(meter):
    if isinstance(meter, dfx.NoProgressMeter):
        return False
    if isinstance(meter, dfx.TqdmProgressMeter | dfx.TextProgressMeter):
        return True
    _refuse(
        f"`progress_meter={type(meter).__name__}(...)` has no jaxsim equivalent: pass "
        "`progress=True` (a bar), or a callable `progress(t, t1)` [s] that receives each report."
    )


def from_diffrax(
    *, solver, t0, t1, dt, ts, sample_dt, rtol, atol, dtmax, progress, max_steps,
    dt0=None, saveat=None, stepsize_controller=None, progress_meter=None,
) -> dict:  # fmt: skip
    """jaxsim's arguments for diffrax's spellings (module docstring): a dict of the arguments of
    `simulate` to replace. Raises a ValueError naming jaxsim's spelling for what has none."""
    update = {}
    if max_steps is None:
        _refuse(
            "`max_steps=None` (diffrax's unbounded loop) has no jaxsim equivalent: jaxsim's "
            "adaptive solves need a step budget, e.g. `max_steps=10**6`."
        )
    if dt0 is not None:
        if dt is not None:
            _both("dt0", "dt")
        dt = update["dt"] = dt0
    if stepsize_controller is not None:
        if isinstance(stepsize_controller, dfx.PIDController):
            if rtol is not None or atol is not None:
                _both("stepsize_controller=PIDController(rtol, atol)", "rtol`/`atol")
            if dtmax is not None and stepsize_controller.dtmax is not None:
                _both("PIDController(dtmax=...)", "dtmax")
        _controller(stepsize_controller, solver, dt, update)
    if saveat is not None:
        if ts is not None or sample_dt is not None:
            _both("saveat", "ts`/`sample_dt")
        update["ts"] = _samples(saveat, t0, t1, dt, solver)
    if progress_meter is not None:
        if progress is not False:
            _both("progress_meter", "progress")
        update["progress"] = _progress(progress_meter)
    return update


def controller_gains(stepsize_controller, default) -> tuple:
    """The step-size controller's gains as `simulate`'s request takes them (`default` without a
    `PIDController`): `(pcoeff, icoeff, dcoeff)`, checked by the request (`check_gains`)."""
    if stepsize_controller is None:
        return default
    c = stepsize_controller
    return (c.pcoeff, c.icoeff, c.dcoeff)
