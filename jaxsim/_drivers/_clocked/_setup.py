"""Entry of the clocked driver: the static configuration of a checked request (clocks, events and
discontinuities were checked, the tick plan and initial held outputs computed, by
`jaxsim._request._build.build_request`)."""

import dataclasses

import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ..._cores._adaptive import DEFAULT_GAINS
from ..._events._roots import default_root_finder
from ..._model._clocks import with_held
from ..._result._solution import Solution
from ._driver import Static, run_clocked
from ._grid import make_grid_plan, run_grid


@dataclasses.dataclass(frozen=True)
class _Config:
    t0: float
    t1: float
    adaptive: bool
    has_dt: bool
    has_dtmax: bool
    gains: tuple  # the step-size controller's (pcoeff, icoeff), Python floats
    max_steps: int
    max_events: int
    outputs: bool
    throw: bool
    window: int
    n_iter: int
    has_y: bool
    stages: int
    fsal: bool
    checkpoint: bool = True


def _solver_info(dsolver):
    tab = getattr(dsolver, "tableau", None)
    if tab is None:
        return 1, False
    return len(tab.b_sol), bool(tab.fsal)


def simulate_clocked(req, *, throw, progress=None) -> Solution:
    """Run a segmented request (`jaxsim._request._build.Request`, driver "clocked"): on the fixed-grid
    stepper when `req.grid`, else the clocked driver with the diffrax form of the solver. `throw`:
    in-program checks (False when `simulate` checks the result on the host)."""
    dsolver = req.solver.to_diffrax() if req.kind.native else req.solver
    model, y0, args, t0, t1 = req.model, req.y0, req.args, req.t0, req.t1
    models, events, plan, disc = req.clocks, req.events, req.plan, req.disc
    max_events, held0 = req.max_events, req.held0
    disc_arr = jnp.stack(disc) if disc else jnp.zeros((0,))
    ts_np = np.asarray(req.ts, dtype=float)
    # Window: most samples in one static interval (t_{k-1}, t_k] (segments are sub-intervals).
    edges = np.concatenate([[t0], np.asarray(plan.times)])
    counts = np.diff(np.searchsorted(ts_np, edges, side="right"))
    window = max(int(counts.max()) if counts.size else 1, 1)
    n_iter = len(plan.times) + len(disc) + (2 * max_events + 1 if events else 0)
    stages, fsal = _solver_info(dsolver)
    root_finder = req.root_finder
    if events:
        root_finder = default_root_finder(events, t0, y0, with_held(args, held0), root_finder)
    config = _Config(
        t0=float(t0),
        t1=float(t1),
        adaptive=bool(req.kind.adaptive),
        has_dt=req.dt is not None,
        has_dtmax=req.dtmax is not None,
        gains=req.controller.gains if req.controller is not None else DEFAULT_GAINS,
        max_steps=req.max_steps,
        max_events=max_events,
        outputs=req.outputs,
        throw=bool(throw),
        window=window,
        n_iter=int(n_iter),
        has_y=len(jtu.tree_leaves(y0)) > 0,
        stages=stages,
        fsal=fsal,
        checkpoint=req.checkpoint,
    )
    static = Static(plan, config, req.adjoint, progress)
    if req.grid:
        # Fixed steps, every tick and sample on the grid, no events: the fixed-grid stepper.
        disc_t = [float(d) for d in disc]
        gplan = make_grid_plan(plan, len(models), float(t0), float(t1), req.dt, ts_np, disc_t)
        return run_grid(
            model, models, y0, args, held0, jnp.asarray(ts_np), req.solver, gplan, static
        )
    return run_clocked(
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
        static,
        _numbers(req.dt, req.controller, req.dtmax, req.event_tol),
    )


def _numbers(dt, controller, dtmax, event_tol):
    """Dynamic scalars (changing them does not recompile); the tolerances from the request's
    `Controller` (None for fixed steps: unused, 1.0)."""

    def f(x):
        return jnp.asarray(1.0 if x is None else float(x))

    return {
        "dt": f(dt),
        "rtol": f(None if controller is None else controller.rtol),
        "atol": f(None if controller is None else controller.atol),
        "dtmax": f(dtmax),
        "event_tol": f(event_tol),
    }
