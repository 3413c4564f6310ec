"""The plain drivers: one jitted program per run without clocks, events, discontinuities or
noise, on the fixed grid (`_run_fixed`: jaxsim's fixed-step solvers, or a diffrax solver stepped
on the grid) or on the diffrax core (`_run_adaptive`: a diffrax solver instance; jaxsim's adaptive
pairs run on the lean core, `jaxsim._cores._adaptive.run`). Each ends in the one result tail,
`jaxsim._result._solution.finish`.
"""

import dataclasses

import diffrax as dfx
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._compilation._jit import jit as jaxsim_jit
from .._cores._adaptive import DEFAULT_GAINS
from .._cores._diffrax import DiffraxSegments, _stages
from .._cores._fixed_grid import chunked_drift, scan_grid, stages_remat
from .._result._solution import check_finite, finish, make_stats, solve_outcome
from .._solvers._ode import AbstractFixedStepSolver


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
    controller = dfx.PIDController(
        rtol=rtol, atol=atol, pcoeff=gains[0], icoeff=gains[1],
        jump_ts=None if not jump_ts else jnp.asarray(jump_ts),
    )  # fmt: skip
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
