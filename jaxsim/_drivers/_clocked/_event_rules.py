"""Event rules of the clocked driver: condition values, crossings reported in the wrong order,
simultaneous firings, resets in declaration order, restart signs and level-triggered stops
(the rules themselves are stated in `jaxsim/_events/_event.py`)."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ._carry import EventLogBuffer, where
from ._segments import inside, next_down, next_up


def sign(x):
    return jnp.where(x > 0, 1.0, -1.0)


def as_float_cond(c):
    """`(value, is_bool)`: a boolean condition is +1 (True) / -1 (False)."""
    c = jnp.asarray(c)
    if jnp.issubdtype(c.dtype, jnp.bool_):
        return jnp.where(c, 1.0, -1.0), True
    return c.astype(float), False


def triggered(old, new, direction):
    if direction is None:
        return jnp.sign(old) != jnp.sign(new)
    if direction:
        return (jnp.sign(old) <= 0) & (jnp.sign(new) > 0)
    return (jnp.sign(old) > 0) & (jnp.sign(new) <= 0)


# Time step [s] (relative to max(1, |t|)) of the finite difference of the condition's rate that
# gives its second derivative where the rate vanishes (only its sign and size matter there).
ACCEL_STEP = 1e-6
# Relative agreement of successive ratios of the intervals between firings of one event that
# counts as a geometric (Zeno) sequence (an exact bouncing ball agrees to ~1e-10).
ZENO_RATIO_RTOL = 1e-4


def cond_values(run, t, y, args_m, lo, hi, accel=False):
    """Each condition's value, rate along the trajectory (0 for booleans) and kind (static); with
    `accel`, also its second time derivative along the trajectory where its rate vanishes (a
    finite difference of the rate over `ACCEL_STEP`, 0 elsewhere) and whether that took one more
    drift evaluation."""
    if not run.n_ev:
        out = jnp.zeros((0,)), jnp.zeros((0,)), ()
        return out + (jnp.zeros((0,)), jnp.asarray(False)) if accel else out
    kinds = tuple(
        bool(jnp.issubdtype(jax.eval_shape(ev.cond, t, y, args_m).dtype, jnp.bool_))
        for ev in run.events
    )
    is_bool = jnp.asarray(kinds)

    def c_all(tt, yy):
        return jnp.stack([as_float_cond(ev.cond(tt, yy, args_m))[0] for ev in run.events])

    def with_rate(tt, yy):
        f = run.model.drift(inside(tt, lo, hi), yy, args_m)
        c, cdot = jax.jvp(c_all, (tt, yy), (jnp.ones_like(tt), f))
        return c, jnp.where(is_bool, 0.0, cdot), f

    c, cdot, f = with_rate(t, y)
    out = c, jax.lax.stop_gradient(cdot), kinds
    if not accel:
        return out
    ts, ys, fs = jax.lax.stop_gradient((t, y, f))
    need = jnp.any((out[1] == 0) & ~is_bool)  # only where a rate vanishes (rare)

    def second(_):
        dt = ACCEL_STEP * jnp.maximum(1.0, jnp.abs(ts))
        _, cdot2, _ = with_rate(ts + dt, jax.tree_util.tree_map(lambda u, v: u + dt * v, ys, fs))
        return (cdot2 - out[1]) / dt

    acc = jax.lax.cond(need, second, lambda _: jnp.zeros_like(out[1]), None)
    return out + (jax.lax.stop_gradient(acc), need)


def heading(rates, accels):
    """Where a condition at zero is heading: the sign of its rate, else of its second derivative
    (0 when both vanish)."""
    sgn = lambda x: jnp.where(x > 0, 1.0, jnp.where(x < 0, -1.0, 0.0))
    return jnp.where(rates != 0, sgn(rates), sgn(accels))


def into_firing_side(run, heads):
    """Whether each condition heading `heads` (+-1) moves into the side its event fires into
    (rising: up, falling: down, both: either)."""
    out = []
    for i, ev in enumerate(run.events):
        d = ev.diffrax_direction
        out.append(heads[i] != 0 if d is None else (heads[i] > 0 if d else heads[i] < 0))
    return jnp.stack(out) if out else jnp.zeros((0,), bool)


def level_holds(run, vals, heads):
    """Terminal events already on the side they fire into (level-triggered stops).

    Rising: c > 0, or c == 0 heading up; falling: c < 0, or c == 0 heading down (a boolean
    condition: True / False). Events with direction "both" are edge-triggered only.
    """
    out = []
    for i, ev in enumerate(run.events):
        d = ev.diffrax_direction
        if not ev.terminal or d is None:
            out.append(jnp.asarray(False))
        elif d:
            out.append((vals[i] > 0) | ((vals[i] == 0) & (heads[i] > 0)))
        else:
            out.append((vals[i] < 0) | ((vals[i] == 0) & (heads[i] < 0)))
    return jnp.stack(out) if out else jnp.zeros((0,), bool)


def geometric_accumulation(run, log, count, fired, t1):
    r"""`(zeno, t_z)`: a fired event whose last four firing times have intervals shrinking by a
    constant ratio r < 1 (within `ZENO_RATIO_RTOL`) with the accumulation time
    $t_z = t_4 + \Delta_3 r / (1 - r)$ (the geometric series' sum, Aitken's extrapolation) not after
    `t1`: the run cannot reach `t1` without infinitely many firings."""
    n = log.t.shape[0]
    rows = jnp.arange(n)
    zeno, t_z = jnp.asarray(False), jnp.asarray(jnp.inf)
    for i in range(run.n_ev):
        valid = (rows < count) & (log.index == i)
        rank = jnp.cumsum(valid[::-1])[::-1]  # valid rows at or after each row
        tk = [jnp.sum(jnp.where(valid & (rank == j), log.t, 0.0)) for j in (4, 3, 2, 1)]
        d1, d2, d3 = tk[1] - tk[0], tk[2] - tk[1], tk[3] - tk[2]
        ok = (jnp.sum(valid) >= 4) & (d1 > 0) & (d2 > 0) & (d3 > 0)
        r1 = d2 / jnp.where(ok, d1, 1.0)
        r2 = d3 / jnp.where(ok, d2, 1.0)
        geo = ok & (r2 < 1) & (jnp.abs(r2 - r1) <= ZENO_RATIO_RTOL * r1)
        tz = tk[3] + d3 * r2 / jnp.where(geo, 1.0 - r2, 1.0)
        hit = fired[i] & geo & (tz <= t1)
        zeno = zeno | hit
        t_z = jnp.where(hit, jnp.minimum(t_z, tz), t_z)
    return zeno, jax.lax.stop_gradient(t_z)


def _crossings(run, c, t_a, t_b, t_e, y_e, args_m, mask):
    """`(conflict, simultaneous)` after the solver stopped at `t_e` for the events in `mask`.

    `conflict`: another condition crossed earlier in the same step (two crossings in one bracket
    of the check grid, shorter than `event_tol`): the segment is solved again up to `t_e` without
    the reported ones. `simultaneous`: every event that fires at `t_e` (crossing within `event_tol`).
    """
    n_ev, arming = run.n_ev, c.arming
    c_e, r_e, kinds = cond_values(run, t_e, y_e, args_m, next_up(t_a), next_down(t_b))
    c_s = []
    for i, ev in enumerate(run.events):
        v = as_float_cond(ev.cond(t_a, c.y, args_m))[0]
        v = jnp.where(arming.disabled[i], 1.0, v)
        c_s.append(jnp.where(arming.override[i], arming.sign[i], v))
    c_s = jnp.stack(c_s)
    dirs = [ev.diffrax_direction for ev in run.events]
    crossed = jnp.stack([triggered(c_s[i], c_e[i], dirs[i]) for i in range(n_ev)])
    crossed = crossed & ~arming.disabled
    is_bool = jnp.asarray(kinds)
    delta = jnp.where(is_bool, 0.0, c_e / jnp.where(r_e == 0, jnp.inf, r_e))
    near = jnp.abs(delta) <= run.num["event_tol"]
    moving = []
    for i in range(n_ev):
        d = dirs[i]
        armed = jnp.asarray(True) if d is None else ((c_s[i] <= 0) if d else (c_s[i] > 0))
        mv = (r_e[i] != 0) if d is None else ((r_e[i] > 0) if d else (r_e[i] < 0))
        moving.append(armed & mv)
    moving = jnp.stack(moving) & ~arming.disabled
    conflict = jnp.any(crossed & ~mask & ~near)
    simul = mask | (crossed & near) | (near & moving & ~is_bool)
    return conflict, simul


class EventOutcome(eqx.Module):
    """What the event rules decided at the end of one segment."""

    accept: jax.Array  # the reported events fire here (no earlier crossing)
    conflict: jax.Array  # an earlier crossing: solve the segment again up to t_e
    fired: jax.Array  # which events fired (simultaneous ones included)
    y: Any  # state after the resets
    z: Any  # discrete states after the resets
    num_new: jax.Array  # firings logged (level stops included)
    stop: jax.Array  # a terminal event fired, or a terminal condition holds after the resets
    over: jax.Array  # more firings than max_events
    sign: jax.Array  # restart signs of the conditions
    log: EventLogBuffer
    zeno: jax.Array  # firings accumulate (the run fails with RESULTS.zeno)
    t_zeno: jax.Array  # the accumulation time


def handle(run, c, t_a, t_b, seg, args_m, reported):
    """Apply the event rules to a segment that stopped on the events in `seg.mask`."""
    n_ev, cfg = run.n_ev, run.cfg
    t_e, y_e, mask = seg.t, seg.y, seg.mask
    conflict, simul = jax.lax.cond(
        reported,
        lambda _: _crossings(run, c, t_a, t_b, t_e, y_e, args_m, mask),
        lambda _: (jnp.asarray(False), jnp.zeros((n_ev,), bool)),
        None,
    )
    accept = reported & ~conflict
    simul = simul & accept
    nev = c.tally.num_events
    log = c.event_log
    # Resets in declaration order, each on the state left by the previous one.
    yb, zb = y_e, c.z
    rank = jnp.cumsum(simul.astype(int)) - 1
    n_new = jnp.sum(simul.astype(int))
    terminal = jnp.asarray(False)
    for i, ev in enumerate(run.events):
        row = jnp.where(simul[i], nev + rank[i], cfg.max_events)
        y_before, z_before = yb, zb
        if ev.reset is not None:
            yn, zn = ev.reset(t_e, yb, zb, args_m)
            yb = where(simul[i], yn, yb)
            zb = where(simul[i], zn, zb)
        log = log.write(row, t_e, i, y_before, yb, z_before, zb)
        if ev.terminal:
            terminal = terminal | simul[i]

    def restart(_):
        lo_n = next_up(t_e)
        c_a, r_a, _, a_a, _ = cond_values(
            run, t_e, yb, args_m, lo_n, jnp.maximum(lo_n, next_down(t_b)), accel=True
        )
        tol = run.num["event_tol"]
        head = heading(r_a, a_a)
        # On the surface (within event_tol of it in time), the sign of where the condition is
        # heading; a reset that moved the state off the surface keeps the sign of c.
        on_surface = (c_a == 0) | (
            jnp.abs(c_a) <= jnp.abs(r_a) * tol + 0.5 * jnp.abs(a_a) * tol * tol
        )
        s = jnp.where(on_surface & (head != 0), head, sign(c_a))
        # At rest on the surface: a fired event with a reset whose condition has no rate and
        # accelerates into its firing side; the reset cannot move it off the surface: firings
        # accumulate at t_e (Zeno).
        resets = jnp.asarray([ev.reset is not None for ev in run.events])
        at_rest = (
            simul
            & resets
            & on_surface
            & (r_a == 0)
            & into_firing_side(run, heading(jnp.zeros_like(a_a), a_a))
        )
        return jax.lax.stop_gradient(s), level_holds(run, c_a, head) & ~simul, jnp.any(at_rest)

    new_sign, holds, at_rest = jax.lax.cond(
        accept,
        restart,
        lambda _: (c.arming.sign, jnp.zeros((n_ev,), bool), jnp.asarray(False)),
        None,
    )
    # Level-triggered stop after the resets: logged as firings at t_e (post-reset state).
    level = accept & ~terminal & jnp.any(holds)
    rank_l = jnp.cumsum(holds.astype(int)) - 1
    for i in range(n_ev):
        row = jnp.where(level & holds[i], nev + n_new + rank_l[i], cfg.max_events)
        log = log.write(row, t_e, i, yb, yb, zb, zb)
    n_new = n_new + jnp.where(level, jnp.sum(holds.astype(int)), 0)
    # Zeno: at rest on a surface (accumulation at t_e), or firing times of one event shrinking
    # geometrically towards a time before t1 (accumulation there).
    geo, t_geo = geometric_accumulation(run, log, nev + n_new, simul, run.cfg.t1)
    zeno = accept & ~terminal & ~level & (at_rest | geo)
    t_zeno = jnp.where(at_rest, t_e, t_geo)
    return EventOutcome(
        accept=accept,
        conflict=conflict,
        fired=simul,
        y=yb,
        z=zb,
        num_new=jnp.where(accept, n_new, 0),
        stop=accept & (terminal | level),
        over=accept & (nev + n_new > cfg.max_events),
        sign=new_sign,
        log=log,
        zeno=zeno,
        t_zeno=jax.lax.stop_gradient(t_zeno),
    )
