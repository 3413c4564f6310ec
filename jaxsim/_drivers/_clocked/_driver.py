"""The clocked driver on segments: one `lax.scan` iteration per segment (see the package
docstring)."""

from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ..._compilation._jit import jit as jaxsim_jit
from ..._cores._diffrax import DiffraxSegments
from ..._events._event import EventLog
from ..._events._guard import EventGuardSolver
from ..._model._clocks import with_held
from ..._result._codes import RESULTS
from ..._result._host_checks import CLOCKED_CAUSES, SEGMENT_FAILED, clocked_message
from ..._result._solution import finish, make_stats
from . import _event_rules as rules, _segments as segments
from ._carry import (
    Arming,
    Carry,
    EventLogBuffer,
    Samples,
    SegmentInputs,
    Status,
    Tally,
    nan_rows,
    set_rows,
    where,
)


class Static(eqx.Module):
    plan: Any = eqx.field(static=True)
    config: Any = eqx.field(static=True)
    adjoint: Any = eqx.field(static=True, default=None)
    progress: Any = (
        None  # a `jaxsim._drivers._progress.Reporter` (its token is an argument) or None
    )


def tick(models, args, t_k, y, z, held, due):
    """Clock updates due at `t_k` (`due[i]` for model i): Jacobi models from the pre-tick values,
    then sequential ones in declaration order, each seeing the outputs updated before it."""
    args_pre = with_held(args, held)
    z_new, held_new = dict(z), dict(held)
    for i, md in enumerate(models):
        if not md.sequential:
            zi, hi = md.update(t_k, y, z[md.name], args_pre)
            z_new[md.name] = where(due[i], zi, z[md.name])
            held_new[md.name] = where(due[i], hi, held[md.name])
    for i, md in enumerate(models):
        if md.sequential:
            zi, hi = md.update(t_k, y, z_new[md.name], with_held(args, held_new))
            z_new[md.name] = where(due[i], zi, z_new[md.name])
            held_new[md.name] = where(due[i], hi, held_new[md.name])
    return z_new, held_new


class _Run:
    """What every segment of one run shares (built inside the trace; not a pytree)."""

    def __init__(self, model, models, events, y0, args, ts, dsolver, root_finder, static, num):
        self.model, self.models, self.events, self.args = model, models, events, args
        self.cfg, self.plan, self.adjoint, self.num = (
            static.config,
            static.plan,
            static.adjoint,
            num,
        )
        self.ts, self.n_s, self.window = ts, ts.shape[0], self.cfg.window
        self.n_ev = len(events)
        self.t0 = jnp.asarray(self.cfg.t0)

        self.dsolver = dsolver
        self.controller = (
            segments.CarryPID(segments.pid(num, self.cfg))
            if self.cfg.adaptive
            else dfx.ConstantStepSize()
        )

        # Terms, solver and events on the flat state of `y0` (`jaxsim._model._layout`): the segment
        # solves carry one vector between steps and stages; the pytree is rebuilt for the model.
        def drift(t, y, a):
            # One ulp inside the segment: sources with an edge at a boundary are seen at their
            # left limit before it and their right limit after it.
            return model.drift(segments.inside(t, a.lo, a.hi), y, a.model_args())

        # The diffrax core: flat state, the model's step map (MRP shadow-set switch, wheel
        # friction modes) after every accepted step, as in the plain drivers.
        self.core = DiffraxSegments(model, y0, self.dsolver, self.adjoint, drift=drift)
        self.counts0, self.term = self.core.counts0, self.core.terms
        self.pack, self.unpack = self.core.pack, self.core.unpack
        self.root_finder = root_finder
        if self.n_ev:
            # Events are checked on each step's dense output (`_guard`): the solve stops after a
            # step with a crossing, located in its bracket by `_segments`.
            self.core.solver = EventGuardSolver(
                self.core.solver, tuple(events), self.unpack, num["event_tol"]
            )

    def tick(self, t_k, y, z, held, due):
        return tick(self.models, self.args, t_k, y, z, held, due)


def _boundaries(plan, nm, disc, cfg):
    """Sorted boundaries (static ticks and t1, possibly traced discontinuity times), which clock
    ticks each is (`ids`: row of the due/number tables; the last row: none)."""
    nb = len(plan.times)
    due_tab = jnp.asarray(
        np.vstack([np.asarray(plan.due, bool).reshape(nb, nm), np.zeros((1, nm), bool)])
    )
    num_tab = jnp.asarray(
        np.vstack(
            [
                np.asarray(plan.tick_number, np.int64).reshape(nb, nm),
                np.asarray(plan.n_ticks, np.int64).reshape(1, nm),
            ]
        )
    )
    B = jnp.asarray(plan.times)
    ids = jnp.arange(nb)
    if disc.shape[0]:
        B = jnp.concatenate([B, jnp.clip(disc, cfg.t0, cfg.t1)])
        ids = jnp.concatenate([ids, jnp.full(disc.shape, nb)])
        order = jnp.argsort(B, stable=True)
        B, ids = B[order], ids[order]
    return B, ids, due_tab, num_tab


def _initial_step(run, y0, held0, B):
    """`(dt_proposed, controller_state, rhs)` before the first segment."""
    cfg, num = run.cfg, run.num
    if not cfg.adaptive:
        return num["dt"], None, 0
    pid = segments.pid(num, cfg)
    a0 = SegmentInputs(
        args=run.args,
        held=held0,
        lo=segments.next_up(run.t0),
        hi=segments.next_down(B[0]),
        t_start=run.t0,
        override=jnp.zeros((run.n_ev,), bool),
        sign=jnp.ones((run.n_ev,)),
        disabled=jnp.zeros((run.n_ev,), bool),
        left=jnp.zeros((run.n_ev,)),
    )
    d = run.dsolver
    if not cfg.has_dt and cfg.has_y:
        v0 = run.pack(y0)
        tn, pstate = pid.init(run.term, run.t0, cfg.t1, v0, None, a0, d.func, d.order(run.term))
        dtp0, rhs = jax.lax.stop_gradient(tn - run.t0), 2
    else:
        dtp0, rhs = num["dt"], 0
        _, pstate = pid.init(run.term, run.t0, cfg.t1, run.pack(y0), dtp0, a0, d.func, None)
    return dtp0, jtu.tree_map(jnp.asarray, (pstate, dtp0)), rhs


def _initial_carry(run, y0, z0, held0, B):
    cfg, n_ev, n_s, ts = run.cfg, run.n_ev, run.n_s, run.ts
    args0 = with_held(run.args, held0)
    dtp0, cstate0, rhs0 = _initial_step(run, y0, held0, B)
    at0 = ts == run.t0

    def first_rows(val, n=n_s):
        return jtu.tree_map(
            lambda b, v: jnp.where(at0.reshape((-1,) + (1,) * v.ndim), v[None], b),
            nan_rows(val, n),
            val,
        )

    samples = Samples(first_rows(y0), first_rows(z0), first_rows(held0))
    clock_log = {
        md.name: {
            "z": nan_rows(z0[md.name], run.plan.n_ticks[i]),
            "held": nan_rows(held0[md.name], run.plan.n_ticks[i]),
        }
        for i, md in enumerate(run.models)
    }
    log = EventLogBuffer.empty(max(cfg.max_events, 0), y0, z0)
    override, sign0 = jnp.zeros((n_ev,), bool), jnp.ones((n_ev,))
    level0 = jnp.zeros((0,), bool)
    if n_ev:
        # A condition exactly zero at t0 heading into its firing side fires at t0 (as scipy's
        # solve_ivp, bdsim's solver, does); heading away, it takes the sign it heads to.
        c00, r00, _, a00, used = rules.cond_values(
            run, run.t0, y0, args0, segments.next_up(run.t0), segments.next_down(B[0]),
            accel=True,
        )  # fmt: skip
        head = rules.heading(r00, a00)
        override = (c00 == 0) & (head != 0)
        into = rules.into_firing_side(run, head)
        sign0 = jax.lax.stop_gradient(jnp.where(override, jnp.where(into, -head, head), 1.0))
        rhs0 = rhs0 + 1 + used.astype(int)
        # A terminal condition that already holds at t0 ends the run at once (logged at t0).
        level0 = rules.level_holds(run, c00, head)
        rows0 = jnp.where(level0, jnp.cumsum(level0.astype(int)) - 1, cfg.max_events)
        log = log.write(rows0, run.t0, jnp.arange(n_ev), y0, y0, z0, z0)
    n_level = jnp.sum(level0.astype(int))
    return Carry(
        t=run.t0,
        y=y0,
        z=z0,
        held=held0,
        k=jnp.asarray(0),
        dt_proposed=dtp0,
        controller_state=cstate0,
        arming=Arming(
            override, sign0, jnp.zeros((n_ev,), bool), jnp.asarray(jnp.inf), jnp.zeros((n_ev,))
        ),
        status=Status(n_level > 0, n_level > 0, n_level > cfg.max_events, RESULTS.successful),
        tally=Tally.zero(run.counts0, num_rhs=rhs0, num_events=n_level),
        samples=samples,
        clock_log=clock_log,
        event_log=log,
    )


@jaxsim_jit
def run_clocked(
    model, models, events, y0, args, held0, disc, ts, dsolver, root_finder, static, num
):
    models = tuple(md.prepare() for md in models)  # parameter-only work, once per run
    run = _Run(model, models, events, y0, args, ts, dsolver, root_finder, static, num)
    cfg, plan, n_ev, n_s, m = run.cfg, run.plan, run.n_ev, run.n_s, run.window
    B, ids, due_tab, num_tab = _boundaries(plan, len(models), disc, cfg)
    n_total = B.shape[0]
    z0 = {md.name: md.init_state() for md in models}

    def body(c, _):
        done = c.status.done
        kk = jnp.minimum(c.k, n_total - 1)
        t_a = c.t
        t_b = jnp.where(done, t_a, jnp.minimum(B[kk], c.arming.cap))
        args_m = with_held(args, c.held)
        seg = jax.lax.cond(
            done,
            lambda _: segments.skip(run, c),
            lambda _: segments.solve_diffrax(run, t_a, t_b, c),
            None,
        )
        # A failed segment (max steps, non-finite state, event not located) ends the run: at the
        # last finite state for a non-finite one, else where the solver got to.
        failed = (seg.result != RESULTS.successful) & ~done
        bad_state = failed & (seg.result == RESULTS.nonfinite_state)
        t_e, y_e = seg.t, seg.y
        if static.progress is not None:
            static.progress(t_e)

        # Samples in (t_a, t_e]: left limits (pre-tick z and held, pre-reset y).
        valid = (seg.window < n_s) & (seg.window_t > t_a) & (seg.window_t <= t_e) & ~done
        idx = jnp.where(valid, seg.window, n_s)
        samples = c.samples.put(idx, m, seg.ys, c.z, c.held)

        reported = jnp.any(seg.mask & ~failed) & ~done
        if n_ev:
            ev = rules.handle(run, c, t_a, t_b, seg, args_m, reported)
        else:
            f = jnp.asarray(False)
            ev = rules.EventOutcome(
                f, f, c.arming.override, y_e, c.z, jnp.asarray(0), f, f, c.arming.sign,
                c.event_log, f, t_e,
            )  # fmt: skip

        # No event: the segment reached t_b (a boundary, or the cap of a re-solve).
        reached = ~done & ~reported & ~failed
        at_boundary = reached & (t_b == B[kk]) & (c.arming.cap >= B[kk])
        bid = ids[kk]
        due = due_tab[bid] & at_boundary
        z_t, held_t = run.tick(t_b, y_e, c.z, c.held, due)
        rows = num_tab[bid]
        clock_log = {}
        for i, md in enumerate(models):
            r = jnp.where(due[i], rows[i], plan.n_ticks[i])
            clock_log[md.name] = {
                "z": set_rows(c.clock_log[md.name]["z"], r, z_t[md.name]),
                "held": set_rows(c.clock_log[md.name]["held"], r, held_t[md.name]),
            }

        # Step-map counts of the segment, unless it is solved again (a conflict re-solve).
        used = ev.accept | reached | failed
        tally = Tally(
            c.tally.num_steps + seg.num_steps,
            c.tally.num_rejected_steps + seg.num_rejected_steps,
            c.tally.num_rhs + seg.num_rhs,
            c.tally.num_segments + jnp.where(done, 0, 1),
            c.tally.num_events + ev.num_new,
            jtu.tree_map(
                lambda a, b: a + jnp.where(used, b, 0).astype(a.dtype), c.tally.counts, seg.counts
            ),
        )
        moved = ev.accept | reached | (failed & ~bad_state)
        new_k = c.k + at_boundary.astype(c.k.dtype)
        # A segment of zero length (an event on a boundary, then the boundary itself) keeps the
        # arming of its start: the restart signs hold until time moves on.
        passed = reached & (t_e > t_a)
        arming = Arming(
            override=jnp.where(ev.accept, ev.fired, jnp.where(passed, False, c.arming.override)),
            sign=jnp.where(ev.accept, ev.sign, c.arming.sign),
            disabled=jnp.where(
                ev.conflict,
                c.arming.disabled | seg.mask,
                jnp.where(ev.accept | reached, False, c.arming.disabled),
            ),
            cap=jnp.where(ev.conflict, t_e, jnp.where(ev.accept | reached, jnp.inf, c.arming.cap)),
            # The sides at a boundary carry into the next segment (not those of conditions held
            # constant for a re-solve); a re-solve starts from the same point with the same ones.
            left=jnp.where(
                passed,
                jnp.where(c.arming.disabled, 0.0, seg.side_end),
                jnp.where(ev.accept, 0.0, c.arming.left),
            ),
        )
        stopped = c.status.stopped | ev.stop
        overflow = c.status.overflow | ev.over
        result = RESULTS.where(c.status.result == RESULTS.successful, seg.result, c.status.result)
        # Zeno: the run fails at the accumulation time (t_final), after logging the firings.
        result = RESULTS.where(ev.zeno & (result == RESULTS.successful), RESULTS.zeno, result)
        status = Status(
            done | (new_k >= n_total) | stopped | ev.over | failed | ev.zeno,
            stopped,
            overflow,
            result,
        )
        new = Carry(
            t=jnp.where(ev.zeno, ev.t_zeno, jnp.where(moved, t_e, t_a)),
            y=where(ev.accept, ev.y, where(reached | (failed & ~bad_state), y_e, c.y)),
            z=where(ev.accept, ev.z, where(at_boundary, z_t, c.z)),
            held=where(at_boundary, held_t, c.held),
            k=new_k,
            dt_proposed=seg.dt_proposed,
            controller_state=seg.controller_state,
            arming=arming,
            status=status,
            tally=tally,
            samples=samples,
            clock_log=clock_log,
            event_log=ev.log,
        )
        return new, None

    c0 = _initial_carry(run, y0, z0, held0, B)
    c, _ = jax.lax.scan(body, c0, None, length=cfg.n_iter)
    return _assemble(run, c, n_total)


def _assemble(run, c, n_total):
    """The `Solution` (`jaxsim._result._solution.finish`: samples after the end NaN, derived outputs
    with the held outputs in the arguments), the result code, errors with `throw`."""
    cfg, ts, model = run.cfg, run.ts, run.model
    finished = (c.k >= n_total) | c.status.stopped
    failed = c.status.result != RESULTS.successful
    too_many = ~failed & (c.status.overflow | ~finished)
    result = RESULTS.where(too_many, RESULTS.too_many_events, c.status.result)
    t_final = c.t
    # Samples after the end (a terminal event or a failure) are NaN; samples are in each step's
    # starting coordinates (dense output): bring them to the canonical form of the step map.
    by = jax.vmap(lambda t, y: model.step_map(t, y)[0])(ts, c.samples.y)
    if cfg.throw:  # in the program (under a user's trace); else on the host: `_host_checks`
        for cause in CLOCKED_CAUSES:
            by, t_final = eqx.error_if((by, t_final), result == cause, clocked_message(cause))
        by, t_final = eqx.error_if((by, t_final), result != RESULTS.successful, SEGMENT_FAILED)
    tally = c.tally
    stats = make_stats(
        tally.num_steps,
        tally.num_rhs,
        tally.counts,
        num_rejected_steps=tally.num_rejected_steps,
        num_segments=tally.num_segments,
        num_events=tally.num_events,
    )
    logs = {
        md.name: {
            "t": jnp.asarray(run.plan.model_times[i]),
            "z": c.clock_log[md.name]["z"],
            "held": c.clock_log[md.name]["held"],
        }
        for i, md in enumerate(run.models)
    }
    ev_log = None
    if run.n_ev:
        b = c.event_log
        ev_log = EventLog(
            t=b.t,
            index=b.index,
            y_before=b.y_before,
            y_after=b.y_after,
            z_before=b.z_before,
            z_after=b.z_after,
            count=tally.num_events,
            names=tuple(ev.name for ev in run.events),
        )
    return finish(
        model, run.args, ts, by, stats, result, t_final, outputs=cfg.outputs, zs=c.samples.z,
        held=c.samples.held, clock_logs=logs, events=ev_log,
        derive_args=lambda h: with_held(run.args, h),
    )  # fmt: skip
