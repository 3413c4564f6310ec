r"""Crossing detection inside every step: the check grid of the clocked driver's events.

diffrax compares an event condition at consecutive step ends only, so two crossings within one
step (a ball that bounces and lands again inside a step, a condition faster than the dynamics)
are not seen. `EventGuardSolver` wraps the segment solver and, after every step, checks each
condition on the step's dense output with a grid that adapts to the condition itself. It needs no
extra evaluation of the model's drift (the dense output of the step is already there) and never
rejects or shortens a step (the step-size control is the solver's own).

**The check grid.** On the step $[t_0, t_1]$ the grid starts as $\{t_0, t_m, t_1\}$ (the midpoint)
and every interval $[a, b]$ with midpoint $m$ is halved until, for each condition and each half
$[p, q]$ of width $h$, with the values $c$ and time derivatives $\dot c$ (along the dense output)
at $a$, $m$, $b$ and the curvature bound $M = \sigma \max(|\dot c_m - \dot c_a|,
|\dot c_b - \dot c_m|) / h$ ($\sigma = 2$):

- no sign change and *certified empty*: the quadratic bounds from both ends stay on the same side,
  $\pm c_p \pm \dot c_p h/2 - M h^2/8 > 0$ and $\pm c_q \mp \dot c_q h/2 - M h^2/8 > 0$ (the
  condition cannot reach zero inside if $|\ddot c| \le M$); or
- a sign change and *certified single*: $\dot c_p \dot c_q > 0$ and $\min(|\dot c_p|, |\dot c_q|)
  > M h / 2$ (the condition is monotone inside, one crossing); or
- the half is shorter than `event_tol` (times closer than that are not separated).

Boolean conditions ($\pm 1$, no rate) are certified by their values at the grid points. At the
step's end $t_1$ the values are those of the step's own end state (the state the next step, or
the next segment after a boundary, starts from), not of the dense output, which differs by
round-off: a crossing on a step end is then on the same side of zero for both steps. The first
half that holds a crossing in an event's direction is the bracket of the root finder, so the
crossing located is the earliest one in the step (at most one event per bracket, unless the
bracket is shorter than `event_tol`). At a grid point where a condition is exactly zero its side
is where it is heading: the sign of $\dot c$, or where $\dot c = 0$ as well, the sign of the change
of $\dot c$ across the point (a tangency stays on its side: it does not fire).

**What can still be missed:** a pair of crossings in a half where $|\ddot c|$ exceeds $M$, the
curvature estimated from the rates at three points (a condition that varies faster than those
three samples show, e.g. an oscillation whose period aliases the grid); crossings closer together
than `event_tol`; a boolean condition that switches twice between two grid points; and whatever
the dense output itself gets wrong (it is as accurate as the solver's interpolant). A step whose
grid needs more than `MAX_CHECKS` intervals fails with `event_location_failed` (bound the step with
`dtmax`). A non-finite condition value at a grid point fails the run with
`RESULTS.event_condition_nonfinite`.

**Reference:** Esposito, Kumar & Pappas, *Accurate event detection for simulating hybrid systems*
(HSCC 2001) (step bounds from a Taylor model of the event function); Shampine & Thompson, *Event
location for ordinary differential equations*, Comput. Math. Appl. 39 (2000).
"""

from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from .._solvers._ode import AbstractDelegatingSolver


# Safety factor on the curvature estimated from the rates at three grid points.
SIGMA = 2.0
# Most grid intervals examined in one step before the check gives up (event_location_failed).
MAX_CHECKS = 512
# The result a step with a finding returns, so that diffrax ends the solve after it (an "okay"
# code such as `event_occurred` would be replaced by the step-size controller's). diffrax's solvers
# and controllers never return it; the segment solve reads it with `GuardInfo.status` != NONE.
STOP = dfx.RESULTS.internal_error
# Guard status codes (the segment solve maps them to result codes).
NONE, CROSSING, NONFINITE, UNRESOLVED = 0, 1, 2, 3


def _sign(x):
    return jnp.where(x > 0, 1.0, jnp.where(x < 0, -1.0, 0.0))


def side(c, cdot, fallback):
    """The side of a condition at a point: sign of `c`, else where it heads (sign of `cdot`), else
    `fallback` (the sign of the change of the rate across the point, or a carried side)."""
    return jnp.where(c != 0, _sign(c), jnp.where(cdot != 0, _sign(cdot), fallback))


def fires(old, new, direction):
    """Whether a move from side `old` to side `new` (each -1, 0 or +1) fires in `direction`."""
    if direction is None:
        return old != new
    if direction:
        return (old <= 0) & (new > 0)
    return (old > 0) & (new <= 0)


class GuardInfo(eqx.Module):
    """What the check of the last step found (the solver state's second part)."""

    status: jax.Array  # NONE, CROSSING, NONFINITE or UNRESOLVED
    index: jax.Array  # the event whose crossing is bracketed
    lo: jax.Array  # bracket [lo, hi] of the crossing (NONFINITE: lo = the point)
    hi: jax.Array
    c_lo: jax.Array  # the condition at the bracket ends (a start for the root finder)
    c_hi: jax.Array
    side_end: jax.Array  # each condition's side at the end of the last step
    c_end: jax.Array  # each condition's value and rate there (reused by the next step)
    cd_end: jax.Array
    t0: jax.Array  # the step and its dense output (for the root finder)
    t1: jax.Array
    dense: Any
    y1: Any  # the step's end state (the state at an event located on the step's end)


class EventGuardSolver(AbstractDelegatingSolver):
    """A diffrax solver wrapper that checks the events on each step's dense output (see module).

    A step whose check grid finds a crossing (or a non-finite condition) returns `STOP`, so the
    solve ends after it; the bracket and the step's dense output are in
    the solver state (`GuardInfo`), and the segment solve locates the crossing in it.
    """

    solver: dfx.AbstractSolver
    events: tuple = eqx.field(static=True)
    unpack: Any = eqx.field(static=True)
    w_min: Any  # event_tol [s] (dynamic)

    def init(self, terms, t0, t1, y0, args):
        inner = self.solver.init(terms, t0, t1, y0, args)
        shapes = eqx.filter_eval_shape(
            self.solver.step, terms, t0, t1, y0, args, inner, jnp.asarray(False)
        )
        dense = jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes[2])
        n = len(self.events)
        t = jnp.asarray(t0, jnp.result_type(float))
        z = jnp.zeros((), t.dtype)
        i0 = jnp.zeros((), jnp.int32)
        zn = jnp.zeros((n,))
        # t1 = NaN: the first step of a solve evaluates its start (no previous step to reuse).
        # The side before the start: a restart's sign after an event, else the side the
        # conditions had at the end of the previous segment (0: none; `Arming.left`).
        side0 = jnp.where(args.override, args.sign, args.left).astype(t.dtype)
        info = GuardInfo(i0 + NONE, i0, t, t, z, z, side0, zn, zn, t, t + jnp.nan, dense, y0)
        return inner, info

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        inner, info = solver_state
        y1, y_error, dense, inner, result = self.solver.step(
            terms, t0, t1, y0, args, inner, made_jump
        )
        # The previous step ended here, in the same (unmapped) coordinates: reuse its end values
        # (a step map that changed the state, e.g. an MRP switch, evaluates them again).
        reuse = t0 == info.t1
        if isinstance(dense, dict) and "y1" in dense:
            for u, v in zip(jtu.tree_leaves(y0), jtu.tree_leaves(info.dense["y1"])):
                reuse = reuse & jnp.all(u == v)
        else:
            reuse = jnp.asarray(False)
        found = check_step(
            self.events,
            self.unpack,
            self.interpolation_cls,
            *jax.lax.stop_gradient(
                (t0, t1, y1, dense, args, info.side_end, self.w_min, reuse, info.c_end, info.cd_end)
            ),  # fmt: skip
        )
        t0f, t1f = jnp.asarray(t0, float), jnp.asarray(t1, float)
        found = eqx.tree_at(lambda f: (f.t0, f.t1, f.dense, f.y1), found, (t0f, t1f, dense, y1))
        ok = result == dfx.RESULTS.successful
        found = eqx.tree_at(lambda f: f.status, found, jnp.where(ok, found.status, NONE))
        result = dfx.RESULTS.where(ok & (found.status != NONE), STOP, result)
        return y1, y_error, dense, (inner, found), result


def check_step(
    events, unpack, interpolation_cls, t0, t1, y1, dense, args, side_prev, w_min, reuse, c_prev,
    cd_prev,
):  # fmt: skip
    """The check grid on one step (see the module docstring): a `GuardInfo` (dense output unset).

    At the step's end the conditions are evaluated on the step's own end state `y1` (the state
    the next step, or the next segment after a tick, starts from), not on the dense output there:
    the two differ by round-off, and a crossing on a step end must be on the same side of zero
    on both sides of it (else a crossing on a clock tick is seen by neither segment).
    """
    n = len(events)
    t0, t1 = jnp.asarray(t0, float), jnp.asarray(t1, float)
    interp = interpolation_cls(t0=t0, t1=t1, **dense)
    a_user = args.model_args()
    dirs = [ev.diffrax_direction for ev in events]
    is_bool = jnp.asarray(
        [
            jnp.issubdtype(
                jax.eval_shape(
                    lambda ev=ev: ev.cond(t0, unpack(interp.evaluate(t0)), a_user)
                ).dtype,
                jnp.bool_,
            )
            for ev in events
        ]
    )
    disabled = args.disabled

    def values(t):
        def c_of(tt):
            y = unpack(interp.evaluate(tt))
            out = []
            for ev in events:
                c = jnp.asarray(ev.cond(tt, y, a_user))
                out.append(jnp.where(c, 1.0, -1.0) if c.dtype == bool else c.astype(float))
            return jnp.stack(out)

        c, cd = jax.jvp(c_of, (t,), (jnp.ones_like(t),))
        c = jnp.where(disabled, 1.0, c)
        cd = jnp.where(disabled | is_bool, 0.0, cd)
        return c, cd

    def finite(c, cd):
        return jnp.all(jnp.isfinite(c) & jnp.isfinite(cd))

    def end_values():
        # The conditions and their rates on the end state itself, moving with the dense output's
        # velocity there.
        _, ydot = jax.jvp(interp.evaluate, (t1,), (jnp.ones_like(t1),))

        def c_of(tt, yy):
            out = []
            for ev in events:
                c = jnp.asarray(ev.cond(tt, unpack(yy), a_user))
                out.append(jnp.where(c, 1.0, -1.0) if c.dtype == bool else c.astype(float))
            return jnp.stack(out)

        c, cd = jax.jvp(c_of, (t1, y1), (jnp.ones_like(t1), ydot))
        return jnp.where(disabled, 1.0, c), jnp.where(disabled | is_bool, 0.0, cd)

    c_t1, cd_t1 = end_values()

    # The start of a step that continues the previous one (same time, same unmapped state) is the
    # previous step's end: its values are reused (the first step of a segment evaluates them).
    c_a, cd_a = jax.lax.cond(reuse, lambda: (c_prev, cd_prev), lambda: values(t0))
    override = (t0 == args.t_start) & args.override
    s_a = jnp.where(override, args.sign, side(c_a, cd_a, side_prev))
    tiny = jnp.maximum(w_min, 16 * jnp.abs(jnp.nextafter(t1, jnp.inf) - t1))

    def fire_vec(s_p, s_q):
        return jnp.stack([fires(s_p[i], s_q[i], dirs[i]) for i in range(n)]) & ~disabled

    def body(st):
        a, w, c_a, cd_a, s_a, it = st["a"], st["w"], st["c"], st["cd"], st["s"], st["it"]
        b = jnp.where(a + w >= t1 - tiny, t1, a + w)
        m = 0.5 * (a + b)
        h = 0.5 * (b - a)
        (c_m, c_b), (cd_m, cd_b) = jax.vmap(values)(jnp.stack([m, b]))
        c_b, cd_b = jnp.where(b == t1, c_t1, c_b), jnp.where(b == t1, cd_t1, cd_b)
        s_m = side(c_m, cd_m, _sign(cd_b - cd_a))
        s_b = side(c_b, cd_b, _sign(cd_b - cd_m))
        M = SIGMA * jnp.maximum(jnp.abs(cd_m - cd_a), jnp.abs(cd_b - cd_m)) / jnp.maximum(h, 1e-300)
        small = h <= tiny

        def clean(c_p, cd_p, s_p, c_q, cd_q, s_q):
            same = s_p == s_q
            empty = (
                same
                & (s_p != 0)
                & (s_p * (c_p + cd_p * h / 2) - M * h * h / 8 > 0)
                & (s_q * (c_q - cd_q * h / 2) - M * h * h / 8 > 0)
            )
            single = ~same & (
                is_bool
                | ((cd_p * cd_q > 0) & (jnp.minimum(jnp.abs(cd_p), jnp.abs(cd_q)) > M * h / 2))
            )
            return disabled | empty | single | (same & is_bool)

        ok1 = clean(c_a, cd_a, s_a, c_m, cd_m, s_m)
        ok2 = clean(c_m, cd_m, s_m, c_b, cd_b, s_b)
        f1, f2 = fire_vec(s_a, s_m), fire_vec(s_m, s_b)
        n1, n2 = jnp.sum(f1), jnp.sum(f2)
        # A non-finite value is isolated by halving (a crossing before it is still found); the
        # check fails at the last finite point once the interval is shorter than event_tol.
        nonfinite = ~(finite(c_m, cd_m) & finite(c_b, cd_b))
        bad = nonfinite & small
        resolved = ~nonfinite & (small | (jnp.all(ok1 & ok2) & (n1 <= 1) & ((n1 >= 1) | (n2 <= 1))))
        hit1, hit2 = resolved & (n1 > 0), resolved & (n1 == 0) & (n2 > 0)
        idx = jnp.where(hit1, jnp.argmax(f1), jnp.argmax(f2))
        status = jnp.where(bad, NONFINITE, jnp.where(hit1 | hit2, CROSSING, st["status"]))
        lo = jnp.where(bad, a, jnp.where(hit1, a, m))
        hi = jnp.where(bad, a, jnp.where(hit1, m, b))
        c_lo = jnp.where(hit1, c_a[idx], c_m[idx])
        c_hi = jnp.where(hit1, c_m[idx], c_b[idx])
        advance = resolved & ~hit1 & ~hit2 & ~bad
        new = {
            "a": jnp.where(advance, b, a),
            "w": jnp.where(advance, 2 * w, 0.5 * w),
            "c": jnp.where(advance, c_b, c_a),
            "cd": jnp.where(advance, cd_b, cd_a),
            "s": jnp.where(advance, s_b, s_a),
            "it": it + 1,
            "status": status,
            "index": jnp.where(status == CROSSING, idx, st["index"]),
            "lo": jnp.where(status != NONE, lo, st["lo"]),
            "hi": jnp.where(status != NONE, hi, st["hi"]),
            "c_lo": c_lo,
            "c_hi": c_hi,
            "done": advance & (b >= t1),
        }
        return jtu.tree_map(lambda u, v: jnp.asarray(u, v.dtype), new, st)

    def cond(st):
        return (st["status"] == NONE) & ~st["done"] & (st["it"] < MAX_CHECKS)

    z = jnp.zeros((), t0.dtype)
    i0 = jnp.zeros((), jnp.int32)
    st0 = {
        "a": t0,
        "w": t1 - t0,
        "c": c_a,
        "cd": cd_a,
        "s": s_a,
        "it": i0,
        "status": jnp.where(finite(c_a, cd_a), NONE, NONFINITE).astype(jnp.int32),
        "index": i0,
        "lo": t0,
        "hi": t0,
        "c_lo": z,
        "c_hi": z,
        "done": jnp.asarray(t1 <= t0),
    }
    st0 = jtu.tree_map(lambda u: jnp.asarray(u, jnp.result_type(u)), st0)
    # The first interval outside the loop: most steps are certified by it (no loop iteration).
    st1 = jtu.tree_map(lambda u, v: jnp.where(cond(st0), u, v), body(st0), st0)
    st = jax.lax.while_loop(cond, body, st1)
    unresolved = (st["status"] == NONE) & ~st["done"]
    status = jnp.where(unresolved, UNRESOLVED, st["status"])
    lo = jnp.where(unresolved, st["a"], st["lo"])
    return GuardInfo(
        status, st["index"], lo, jnp.where(unresolved, st["a"], st["hi"]), st["c_lo"],
        st["c_hi"], st["s"], st["c"], st["cd"], t0, t1, dense, y1,
    )  # fmt: skip
