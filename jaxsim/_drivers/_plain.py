"""The plain driver (`run_plain`): one jitted program per run without clocks, events,
discontinuities or noise, on the core the route chose (`req.kind.core`): the fixed grid
(`_run_fixed`: jaxsim's fixed-step solvers, or a diffrax solver stepped on the grid), the lean
adaptive core (`jaxsim._cores._adaptive.run`: jaxsim's adaptive pairs) or the diffrax core
(`_run_adaptive`: a diffrax solver instance). Free times (`req.free`) run here too, their times
run-time inputs (`jaxsim._drivers._free_time`). Each program ends in the one result tail,
`jaxsim._result._solution.finish`.
"""

import dataclasses

import diffrax as dfx
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._compilation._jit import jit as jaxsim_jit, replay_safe
from .._cores import _adaptive as _adaptive_core
from .._cores._adaptive import DEFAULT_GAINS
from .._cores._diffrax import DiffraxSegments, _stages, pid_controller
from .._cores._fixed_grid import chunked_drift, scan_grid, stages_remat
from .._model._signals import concrete_breakpoints
from .._result._solution import check_finite, finish, make_stats, solve_outcome
from .._solvers._ode import AbstractFixedStepSolver
from . import _free_time


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


@jaxsim_jit
def _run_fixed(model, y0, args, solver, ts, config: _FixedConfig, progress=None, times=None):
    # `times`: `(t0, dt)` as run-time inputs (free times, `jaxsim._drivers._free_time`), else the
    # config's constants.
    t0, dt = (config.t0, config.dt) if times is None else times
    drift = chunked_drift(model, args)
    advance = lambda n, t, y, extra, inputs: solver.step(drift, t, y, dt, None)
    ys, counts = scan_grid(
        model, y0, config.seg, dt, t0, config.checkpoint, advance, progress=progress,
        stages_remat=stages_remat(solver),
    )  # fmt: skip
    ys, result, t_final = check_finite(ts, ys, config.throw, "fixed-step")
    n_steps = int(np.sum(config.seg))
    stats = make_stats(n_steps, n_steps * solver.num_stages, jtu.tree_map(lambda c: c[-1], counts))
    return finish(
        model, args, ts, ys, stats, result, t_final, outputs=config.outputs, counts=counts
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
    gains=DEFAULT_GAINS,
):
    core = DiffraxSegments(model, y0, dsolver, adjoint)
    controller = pid_controller(
        rtol, atol, gains, jump_ts=None if not jump_ts else jnp.asarray(jump_ts)
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
    return finish(model, args, ts, ys, stats, result, t_final, outputs=outputs)


def run_plain(req, *, throw: bool, progress=None):
    """The `Solution` of a plain request (driver "adaptive" or "fixed", concrete or free times) on
    the core of its route. `throw` is the in-program check (False when `simulate` checks on the
    host); `progress` the reporter of the run's bar (or None)."""
    model, y0, args, solver, kind = req.model, req.y0, req.args, req.solver, req.kind
    if req.free:
        h = req.horizon
        t0, t1, ts, endpoints_only = h.t0, h.t1, h.ts, h.endpoints_only
    else:
        t0, t1, ts = req.t0, req.t1, np.asarray(req.ts)
        endpoints_only = bool(len(ts) == 2 and ts[0] == t0 and ts[-1] == t1)
    if kind.adaptive:
        ctrl = req.controller
        dt0 = None if req.dt is None else float(req.dt)
        jump_ts = concrete_breakpoints(model)  # adaptive solves stop at the model's breakpoints
        numbers = (
            ctrl.rtol,
            ctrl.atol,
            int(req.max_steps),
            bool(req.outputs),
            bool(throw),
            jump_ts,
        )
        if kind.core == "lean":
            sol = _adaptive_core.run(
                model, y0, args, solver, t0, t1, ts, dt0, *numbers,
                _adaptive_core.loop_kind(req.adjoint), endpoints_only, progress, gains=ctrl.gains,
            )  # fmt: skip
        else:
            # Methods called through the class: an equinox module builds a bound-method module on
            # each attribute access (about 40 us each, per call of `simulate`).
            dsolver = type(solver).to_diffrax(solver) if kind.native else solver
            sol = _run_adaptive(
                model, y0, args, dsolver, t0, t1, ts, dt0, *numbers, req.adjoint,
                endpoints_only, progress, gains=ctrl.gains,
            )  # fmt: skip
    else:
        if not kind.native:
            solver = _DiffraxFixed(solver)
        free = req.free
        config = _FixedConfig(
            t0=None if free else t0, dt=None if free else req.dt,
            seg=req.horizon.seg if free else req.seg, outputs=bool(req.outputs),
            checkpoint=bool(req.checkpoint), throw=bool(throw),
        )  # fmt: skip
        times = (t0, req.horizon.dt) if free else None
        sol = _run_fixed(model, y0, args, solver, ts, config, progress, times)
    return _free_time.finish(sol, req.horizon, throw) if req.free else sol


def replay_safe_request(req):
    """`req`, its `y0` marked so that the program is compiled without small-loop hoisting where
    the route runs an adaptive plain or clocked request in diffrax's loop and it is differentiated
    with a checkpointing adjoint (`jaxsim._compilation._jit.replay_safe`)."""
    kind = req.kind
    if kind.adaptive and kind.core == "diffrax" and kind.driver != "sde":
        if req.free:
            h = req.horizon
            y0 = replay_safe(req.adjoint, req.y0, req.model, req.args, h.t0, h.t1, h.ts)
        else:
            y0 = replay_safe(req.adjoint, req.y0, req.model, req.args, req.t0, req.t1)
        return req.replace(y0=y0)
    return req
