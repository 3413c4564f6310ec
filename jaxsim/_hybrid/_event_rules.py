"""Event rules of the hybrid driver: condition values, crossings reported in the wrong order,
simultaneous firings, resets in declaration order, restart signs and level-triggered stops
(the rules themselves are stated in `jaxsim/_events.py`)."""

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


def cond_values(run, t, y, args_m, lo, hi):
    """Each condition's value, rate along the trajectory (0 for booleans) and kind (static)."""
    if not run.n_ev:
        return jnp.zeros((0,)), jnp.zeros((0,)), ()
    vals, rates, kinds = [], [], []
    f = run.model.drift(inside(t, lo, hi), y, args_m)
    for ev in run.events:

        def c_of(tt, yy, ev=ev):
            return as_float_cond(ev.cond(tt, yy, args_m))[0]

        c, cdot = jax.jvp(c_of, (t, y), (jnp.ones_like(t), f))
        is_bool = jnp.issubdtype(jax.eval_shape(ev.cond, t, y, args_m).dtype, jnp.bool_)
        vals.append(c)
        rates.append(jnp.where(is_bool, 0.0, cdot))
        kinds.append(is_bool)
    return jnp.stack(vals), jax.lax.stop_gradient(jnp.stack(rates)), tuple(kinds)


def level_holds(run, vals, rates):
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
            out.append((vals[i] > 0) | ((vals[i] == 0) & (rates[i] > 0)))
        else:
            out.append((vals[i] < 0) | ((vals[i] == 0) & (rates[i] < 0)))
    return jnp.stack(out) if out else jnp.zeros((0,), bool)


def _crossings(run, c, t_a, t_b, t_e, y_e, args_m, mask):
    """`(conflict, simultaneous)` after the solver stopped at `t_e` for the events in `mask`.

    `conflict`: another condition crossed earlier in the same step (diffrax reports the first in
    declaration order, not the earliest): the segment is solved again up to `t_e` without the
    reported ones. `simultaneous`: every event that fires at `t_e` (crossing within `event_tol`).
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
        c_a, r_a, _ = cond_values(run, t_e, yb, args_m, lo_n, jnp.maximum(lo_n, next_down(t_b)))
        # On the surface (within event_tol of it in time), the sign of where the condition is
        # heading; a reset that moved the state off the surface keeps the sign of c.
        on_surface = (c_a == 0) | (jnp.abs(c_a) <= jnp.abs(r_a) * run.num["event_tol"])
        s = jnp.where(on_surface & (r_a != 0), jnp.sign(r_a), sign(c_a))
        return jax.lax.stop_gradient(s), level_holds(run, c_a, r_a) & ~simul

    new_sign, holds = jax.lax.cond(
        accept, restart, lambda _: (c.arming.sign, jnp.zeros((n_ev,), bool)), None
    )
    # Level-triggered stop after the resets: logged as firings at t_e (post-reset state).
    level = accept & ~terminal & jnp.any(holds)
    rank_l = jnp.cumsum(holds.astype(int)) - 1
    for i in range(n_ev):
        row = jnp.where(level & holds[i], nev + n_new + rank_l[i], cfg.max_events)
        log = log.write(row, t_e, i, yb, yb, zb, zb)
    n_new = n_new + jnp.where(level, jnp.sum(holds.astype(int)), 0)
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
    )
