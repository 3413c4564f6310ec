"""Segment solvers of the clocked driver: one solve from a segment start to its end (a boundary, a
re-solve cap, or an event) through `diffrax.diffeqsolve` (whether a run uses the fixed-grid stepper
`jaxsim._drivers._clocked._grid` instead is decided by the request: `jaxsim._request._grid.on_grid`)."""

from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import optimistix as optx

from ..._cores._diffrax import pid_controller
from ..._events import _guard as guard
from ..._events._roots import locate
from ..._result._codes import RESULTS, promote
from ..._result._solution import all_finite
from ._carry import SegmentInputs


class SegmentResult(eqx.Module):
    """What one segment solve gives the driver.

    `y`, `t`: state and time where it ended; `mask`: events reported by the solver there; `window`,
    `window_t`: indices and times of the samples that may fall in the segment; `ys`: the states at
    those times; `dt_proposed`,
    `controller_state`: the adaptive step-size state to carry on; `num_*`: work done; `counts`:
    step-map counts of the segment; `side_end`: each event condition's side (+-1) at the end of
    the segment's last step (`Arming.left` when the segment reached a boundary); `result`:
    successful or the cause of a failure.
    """

    y: Any
    t: jax.Array
    mask: jax.Array
    window: jax.Array
    window_t: jax.Array
    ys: Any
    dt_proposed: Any
    controller_state: Any
    num_steps: jax.Array
    num_rejected_steps: jax.Array
    num_rhs: jax.Array
    counts: Any
    side_end: jax.Array
    result: Any


class CarryPID(dfx.AbstractAdaptiveStepSizeController):
    """A PID controller that also records its last proposed (unclipped) step in its state."""

    inner: dfx.PIDController

    @property
    def rtol(self):
        return self.inner.rtol

    @property
    def atol(self):
        return self.inner.atol

    @property
    def norm(self):
        return self.inner.norm

    def wrap(self, direction):
        return CarryPID(self.inner.wrap(direction))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        tnext, state = self.inner.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return tnext, (state, jnp.asarray(tnext - t0, dtype=jnp.result_type(float)))

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, state):
        inner_state, _ = state
        keep, nt0, nt1, jump, inner_state, result = self.inner.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, inner_state
        )
        proposal = jax.lax.stop_gradient(nt1 - nt0)
        return keep, nt0, nt1, jump, (inner_state, proposal), result


def inside(t, lo, hi):
    """`t` clipped into [lo, hi] in value, with the derivative of `t` itself."""
    return t + jax.lax.stop_gradient(jnp.clip(t, lo, hi) - t)


def next_up(x):
    """One ulp above `x` in value; derivative of `x` (nextafter has no JAX derivative)."""
    xs = jax.lax.stop_gradient(x)
    return x + (jnp.nextafter(xs, jnp.asarray(jnp.inf, jnp.result_type(xs))) - xs)


def next_down(x):
    xs = jax.lax.stop_gradient(x)
    return x + (jnp.nextafter(xs, jnp.asarray(-jnp.inf, jnp.result_type(xs))) - xs)


def split_step(t_a, t_b, dt):
    """Fixed step for a segment: the segment split into n = ceil(length / dt) equal steps.

    Inflated by 1e-12 (relative) so that the last step lands exactly on `t_b` (diffrax clips it)
    instead of leaving a one-ulp sliver.
    """
    length = t_b - t_a
    n = jnp.maximum(jnp.ceil(length / dt * (1.0 - 1e-10)), 1.0)
    return jnp.where(length > 0, length / n * (1.0 + 1e-12), dt)


def pid(num, cfg):
    return pid_controller(
        num["rtol"], num["atol"], cfg.gains, dtmax=num["dtmax"] if cfg.has_dtmax else None
    )


def _window(run, t_a):
    """Indices and times of the samples after `t_a` that one segment may hold (inf: none)."""
    idx = jnp.searchsorted(run.ts, t_a, side="right") + jnp.arange(run.window)
    t = jnp.where(idx < run.n_s, run.ts[jnp.minimum(idx, run.n_s - 1)], jnp.inf)
    return idx, t


def _rows(tree, window):
    return jtu.tree_map(lambda u: jnp.broadcast_to(u, (window,) + u.shape), tree)


def _zero():
    return jnp.asarray(0, jnp.int64)


def skip(run, c):
    """No solve (the run is over): nothing moves, nothing is sampled."""
    return SegmentResult(
        y=c.y,
        t=c.t,
        mask=jnp.zeros((run.n_ev,), bool),
        window=jnp.full((run.window,), run.n_s),
        window_t=jnp.full((run.window,), jnp.inf),
        ys=_rows(c.y, run.window),
        dt_proposed=c.dt_proposed,
        controller_state=c.controller_state,
        num_steps=_zero(),
        num_rejected_steps=_zero(),
        num_rhs=_zero(),
        counts=run.counts0,
        side_end=c.arming.left,
        result=RESULTS.successful,
    )


def solve_diffrax(run, t_a, t_b, c):
    """`diffeqsolve` over [t_a, t_b] (dense-output samples, events, the step map after each step)."""
    cfg, n_ev = run.cfg, run.n_ev
    win_idx, win_t = _window(run, t_a)
    save_t = jnp.clip(win_t, t_a, t_b)
    if not cfg.has_y:  # no continuous state: the segment only moves time to t_b
        return eqx.tree_at(
            lambda r: (r.t, r.window, r.window_t), skip(run, c), (t_b, win_idx, win_t)
        )
    a = SegmentInputs(
        args=run.args,
        held=c.held,
        lo=next_up(t_a),
        hi=next_down(t_b),
        t_start=t_a,
        override=c.arming.override,
        sign=c.arming.sign,
        disabled=c.arming.disabled,
        left=c.arming.left,
    )
    saveat = dfx.SaveAt(
        subs=[dfx.SubSaveAt(ts=save_t), dfx.SubSaveAt(t1=True)],
        controller_state=cfg.adaptive,
        solver_state=True,
    )
    sol = run.core.solve(
        t_a,
        t_b,
        c.dt_proposed if cfg.adaptive else split_step(t_a, t_b, run.num["dt"]),
        c.y,
        a,
        saveat=saveat,
        stepsize_controller=run.controller,
        max_steps=cfg.max_steps,
        throw=False,
        controller_state=c.controller_state if cfg.adaptive else None,
    )
    t_end = sol.ts[1][0]
    v_end = jtu.tree_map(lambda u: u[0], sol.ys[1])
    at_event = jnp.asarray(False)
    state = sol.solver_state
    mask = jnp.zeros((n_ev,), bool)
    side_end = c.arming.left
    guard_res = RESULTS.successful
    if n_ev:
        # The check grid stopped the solve after a step with a crossing (or a failed check):
        # locate the crossing in its bracket on that step's dense output.
        state, info = state
        # (A solve without a step keeps the side it started with: `EventGuardSolver.init`.)
        side_end = info.side_end
        at_event = (sol.result == guard.STOP) & (info.status != guard.NONE)
        crossing = at_event & (info.status == guard.CROSSING)
        interp = run.core.solver.interpolation_cls(t0=info.t0, t1=info.t1, **info.dense)
        t_root, root_res = jax.lax.cond(
            crossing,
            lambda: locate(run.events, info, interp, run.unpack, a.model_args(), run.root_finder),
            lambda: (info.lo, optx.RESULTS.successful),
        )
        t_end = jnp.where(crossing, t_root, jnp.where(at_event, info.lo, t_end))
        # On the step's end (a crossing on a boundary) the state is the step's own end state,
        # on which the check saw the crossing (the dense output there differs by round-off).
        v_ev = jtu.tree_map(
            lambda a, b: jnp.where(t_end == info.t1, a, b), info.y1, interp.evaluate(t_end)
        )
        v_end = jtu.tree_map(lambda a, b: jnp.where(at_event, a, b), v_ev, v_end)
        mask = (jnp.arange(n_ev) == info.index) & crossing
        guard_res = RESULTS.where(
            crossing & (root_res != optx.RESULTS.successful),
            RESULTS.event_location_failed,
            RESULTS.where(
                at_event & (info.status == guard.NONFINITE),
                RESULTS.event_condition_nonfinite,
                RESULTS.where(
                    at_event & (info.status == guard.UNRESOLVED),
                    RESULTS.event_location_failed,
                    RESULTS.successful,
                ),
            ),
        )
    # At an event the state is interpolated in the last step's starting coordinates: map it,
    # and count the map's switches up to the event instead of those of the whole last step.
    y_end, end_counts = run.model.step_map(t_end, run.unpack(v_end))
    _, seg_counts, last_counts = state
    seg_counts = jtu.tree_map(
        lambda a, b, e: jnp.where(at_event, a - b + e.astype(a.dtype), a),
        seg_counts,
        last_counts,
        end_counts,
    )
    tried = jnp.asarray(sol.stats["num_steps"]).astype(jnp.int64)
    accepted = jnp.asarray(sol.stats["num_accepted_steps"]).astype(jnp.int64)
    rhs = (1 + (cfg.stages - 1) * tried) if cfg.fsal else cfg.stages * tried
    dtp, cst = c.dt_proposed, c.controller_state
    if cfg.adaptive:
        cst = sol.controller_state
        dtp = cst[1]
    ok = (sol.result == dfx.RESULTS.successful) | at_event
    res = promote(dfx.RESULTS.where(ok, dfx.RESULTS.successful, sol.result), events=n_ev > 0)
    res = RESULTS.where(res == RESULTS.successful, guard_res, res)
    res = RESULTS.where(all_finite(y_end), res, RESULTS.nonfinite_state)
    return SegmentResult(
        y_end, t_end, mask, win_idx, win_t, jax.vmap(run.unpack)(sol.ys[0]), dtp, cst, accepted,
        tried - accepted, rhs, seg_counts, side_end, res,
    )  # fmt: skip
