"""The adaptive core's step loop (`integrate`): attempted steps with error control, samples by dense
output, the step map after every accepted step, the loop kinds of forward and reverse mode."""

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ..._result._codes import RESULTS
from ..._solvers._ode import stages_unrolled
from ._controller import (
    _END_ULPS,
    _PROGRESS_EVERY,
    DEFAULT_GAINS,
    FACTOR_MAX,
    FACTOR_MIN,
    SAFETY,
    _neg_root,
    _next_after,
    _prev_before,
    _ulps_before,
    initial_step,
)
from ._record import _Chunk, _recorded_loop
from ._stages import Pair, dense_stages, step_looped, step_unrolled


class _State(eqx.Module):
    tprev: jax.Array
    tnext: jax.Array
    y: jax.Array
    f_last: jax.Array
    redo: jax.Array  # the first stage must be evaluated (first step, breakpoint, state jump)
    num_steps: jax.Array
    num_accepted: jax.Array
    counts: object
    save_index: jax.Array
    ys: jax.Array
    rec: object = None  # `integrate_adjoint`'s record of accepted steps (`_Chunk`), or None
    prev_inv: object = None  # the PI controller's 1/eps of the last accepted step, or None
    prev_prev_inv: object = None  # the PID controller's 1/eps of the one before, or None


def integrate(
    f,
    y0,
    t0,
    t1,
    ts,
    *,
    pair: Pair,
    rtol,
    atol,
    dt0=None,
    max_steps: int,
    jump_ts=(),
    step_map=None,
    counts0=None,
    endpoints_only=False,
    loop="checkpointed",
    unrolled=True,
    progress=None,
    blocks=1,
    record=0,
    record_tangents=False,
    gains=DEFAULT_GAINS,
):
    """Integrate `y' = f(t, y)` (flat `y0`) from `t0` to `t1`, sampling at `ts` (sorted, within
    [t0, t1]; may be traced).

    `step_map(t, y) -> (y, counts)` runs after every accepted step (`counts` an integer pytree,
    accumulated from `counts0`). `endpoints_only`: `ts == [t0, t1]`, saved without interpolation.
    `loop`: `"checkpointed"` (reverse-mode differentiable) or `"lax"` (forward mode).
    `progress(t)`: called with the time reached every `_PROGRESS_EVERY` attempted steps and at
    the end (a `jaxsim._drivers._progress.Reporter`), or None.
    `blocks`: `y0` is `blocks` equal blocks (the state, then its sensitivities: `jaxsim.
    ForwardSensitivity`); the error norm is the largest of the blocks' RMS norms and the initial
    step is that of the first block (1: the RMS norm over the whole vector).
    `record` (`loop="lax"` only; 0: nothing): `(K, D)`: record every accepted step's start and end
    times, the start states of the first D accepted steps and of every K-th (`integrate_adjoint`'s
    forward pass; with `record_tangents` also the derivatives of those times w.r.t. `(t0, t1)`),
    returned under `record` (a `_Record`; K a multiple of `_chunk_size`, D of K).
    `gains`: the controller's `(pcoeff, icoeff)`, Python floats (`diffrax.PIDController`'s; the
    default `(0, 1)` is the I controller; module docstring).

    Returns a dict: `ys` (samples, `(len(ts), n)`, in the coordinates of the step each was
    interpolated in: apply the step map to read them canonically), `counts`, `num_steps`
    (attempts), `num_accepted_steps`, `num_rejected_steps`, `result` (`successful` or
    `max_steps_reached`), `t_final`.
    """
    # Times in the default float (float64), whatever the state's dtype.
    tdtype = jnp.result_type(float)
    ts = jnp.asarray(ts, tdtype)
    n_ts = ts.shape[0]
    t0 = jnp.asarray(t0, tdtype)
    t1 = jnp.asarray(t1, tdtype)
    unrolled = stages_unrolled(unrolled, f, t0, jnp.asarray(y0))
    step = step_unrolled if unrolled else step_looped
    # Without a step map (None: the identity) the state never jumps between steps, so without
    # breakpoints the first stage of a step is always the last one's (no per-step cond).
    identity_map = step_map is None
    if identity_map:
        counts0 = {} if counts0 is None else counts0
        zero_counts = jtu.tree_map(jnp.zeros_like, counts0)
        step_map = lambda t, y: (y, zero_counts)  # noqa: E731
    t1_floor = _ulps_before(t1, _END_ULPS)
    jumps = np.sort(np.asarray(jump_ts, dtype=float)) if len(jump_ts) else None
    inv_order = 1.0 / pair.order
    pcoeff, icoeff, dcoeff = (float(g) for g in (*gains, 0.0)[:3])
    pi_control = (pcoeff, icoeff, dcoeff) != (*DEFAULT_GAINS, 0.0)

    def clip_jump(t_start, t_end):
        """Bump a start sitting just before (or on) a breakpoint past it; end the step just
        before the next breakpoint. Returns `(t_start, t_end, made_jump)`."""
        if jumps is None:
            return t_start, t_end, jnp.asarray(False)
        jt = jnp.asarray(jumps)
        after = _next_after(t_start)
        jump1 = jnp.any(after == jt)
        jump2 = jnp.any(t_start == jt)
        t_start = jnp.where(jump1, _next_after(after), t_start)
        t_start = jnp.where(jump2, after, t_start)
        t_end = jnp.maximum(_next_after(t_start), t_end)
        idx = jnp.searchsorted(jt, t_start, side="right")
        nxt = jnp.where(idx >= len(jumps), jnp.inf, jt[jnp.minimum(idx, len(jumps) - 1)])
        t_end = jnp.minimum(t_end, _prev_before(nxt))
        return t_start, t_end, jump1 | jump2

    f0 = f(t0, y0)
    n_block = y0.shape[0] // blocks
    if dt0 is None:
        if blocks == 1:
            dt_first = initial_step(f, t0, y0, f0, pair.order, rtol, atol)
        else:
            dt_first = initial_step(
                lambda t, y: f(t, jnp.concatenate([y, y0[n_block:]]))[:n_block], t0,
                y0[:n_block], f0[:n_block], pair.order, rtol, atol,
            )  # fmt: skip
        dt_first = dt_first.astype(tdtype)
    else:
        dt_first = jnp.asarray(dt0, tdtype)

    def first_end(t0, t1):
        tnext = t0 + dt_first
        if jumps is not None:  # diffrax clips the first step at a breakpoint too
            jt = jnp.asarray(jumps)
            idx = jnp.searchsorted(jt, t0, side="right")
            nxt = jnp.where(idx >= len(jumps), jnp.inf, jt[jnp.minimum(idx, len(jumps) - 1)])
            tnext = jnp.minimum(tnext, _prev_before(nxt))
        return jnp.minimum(tnext, t1)

    tnext = first_end(t0, t1)

    def advance(tp, tn, keep, factor, t1, t1_floor):
        """The next step's `(t_start, t_end, made_jump)` after the step `(tp, tn)`."""
        h_new = (tn - tp) * factor.astype(tdtype)
        t_start = jnp.where(keep, tn, tp)
        t_end = t_start + h_new
        t_start, t_end, made_jump = clip_jump(t_start, t_end)
        t_start = jnp.minimum(t_start, t1)
        halfway = t_start + 0.5 * (t1 - t_start)
        t_end = jnp.where(t_end > t1_floor, jnp.where(keep, t1, halfway), t_end)
        return t_start, t_end, made_jump

    # The sample buffer is written, never read, inside the loop (an `equinox.internal.while_loop`
    # buffer); with `endpoints_only` the final state is the loop's last state.
    n_save = 0 if endpoints_only else n_ts
    ys0 = jnp.zeros((n_save,) + y0.shape, y0.dtype)
    zero = jnp.asarray(0, jnp.int64)
    state = _State(
        tprev=t0, tnext=tnext, y=y0, f_last=f0, redo=jnp.asarray(False), num_steps=zero,
        num_accepted=zero, counts=counts0, save_index=zero, ys=ys0,
        rec=_Chunk.empty(record_tangents, y0, first_end, t0, t1) if record else None,
        prev_inv=jnp.ones((), y0.dtype) if pcoeff != 0 or dcoeff != 0 else None,
        prev_prev_inv=jnp.ones((), y0.dtype) if dcoeff != 0 else None,
    )  # fmt: skip
    ts_arr = ts

    def cond(s):
        return s.tprev < t1

    def body(s):
        tp, tn, y = s.tprev, s.tnext, s.y
        if pair.fsal and identity_map and jumps is None:
            f_start = s.f_last
        elif pair.fsal:
            redo = eqxi.unvmap_any(s.redo)
            f_start = jax.lax.cond(redo, lambda: f(tp, y), lambda: s.f_last)
        else:
            f_start = f(tp, y)
        y1, err, ks, f_end = step(pair, f, tp, tn, y, f_start)

        # Error norm and the controller (diffrax.PIDController with its defaults), on the sum of
        # squares `ss` = n eps^2 (eps the RMS norm): accepted when ss < n, factor 0.9 eps^(-1/q)
        # = 0.9 n^(1/2q) ss^(-1/2q). The same decisions as on eps, to round-off, with no mean,
        # norm or reciprocal of the norm between the last stage and the next step's size (on the
        # J2 orbit the root is still ~15 % of a Dopri8 step: three square roots and a reciprocal
        # one; the general power took longer).
        err = jnp.where(jnp.isnan(err), jnp.inf, err)
        y1_scale = jnp.where(jnp.any(jnp.isnan(y1)), y, y1)
        inv_scale = 1.0 / (atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y1_scale)))
        if blocks == 1:
            ss = jnp.sum((err * inv_scale) ** 2)
        else:  # CVODES's rule: the largest of the state's and each sensitivity's norms
            ss = jnp.max(jnp.sum(jnp.reshape(err * inv_scale, (blocks, -1)) ** 2, 1))
        ss = jax.lax.stop_gradient(ss)
        keep = ss < n_block
        fmin = jnp.where(keep, 1.0, FACTOR_MIN)
        fmax = jnp.where(keep, FACTOR_MAX, SAFETY)
        prev_inv, prev_prev_inv = s.prev_inv, s.prev_prev_inv
        if not pi_control:
            gain = SAFETY * float(n_block) ** (0.5 * inv_order)
            factor = jnp.clip(gain * _neg_root(ss, 2 * pair.order), fmin, fmax)
        else:
            # diffrax's PIDController with k_P = pcoeff, k_I = icoeff, k_D = dcoeff (module
            # docstring): the factor 0.9 (1/eps)^((p + i + d)/q) (1/eps_prev)^(-(p + 2 d)/q)
            # (1/eps_prev_prev)^(d/q), eps_prev and eps_prev_prev those of the last two accepted
            # steps (1 before them), an eps of 0 or inf stored as 1; a rejected step keeps both.
            inv = 1.0 / jnp.sqrt(ss / n_block)
            factor = SAFETY * inv ** ((pcoeff + icoeff + dcoeff) * inv_order)
            if pcoeff != 0 or dcoeff != 0:
                factor = factor * prev_inv ** (-(pcoeff + 2 * dcoeff) * inv_order)
            if dcoeff != 0:
                factor = factor * prev_prev_inv ** (dcoeff * inv_order)
                prev_prev_inv = jnp.where(keep, prev_inv, prev_prev_inv)
            if pcoeff != 0 or dcoeff != 0:
                inv_kept = jnp.where((inv == 0) | jnp.isinf(inv), 1.0, inv)
                prev_inv = jnp.where(keep, inv_kept.astype(prev_inv.dtype), prev_inv)
            factor = jnp.clip(factor, fmin, fmax)
        factor = jax.lax.stop_gradient(factor)
        t_start, t_end, made_jump = advance(tp, tn, keep, factor, t1, t1_floor)

        # The step map after an accepted step (its counts accumulate only then).
        y1_mapped, step_counts = step_map(tn, y1)
        jumped = False if identity_map else jnp.any(y1_mapped != y1)
        y_new = jnp.where(keep, y1_mapped, y)
        f_new = jnp.where(keep, f_end, s.f_last) if pair.fsal else s.f_last
        redo_new = jnp.where(keep, jumped | made_jump, s.redo)
        counts = (
            s.counts
            if identity_map
            else jtu.tree_map(
                lambda c, d: c + jnp.where(keep, d.astype(c.dtype), 0), s.counts, step_counts
            )
        )

        ys, save_index = s.ys, s.save_index
        if not endpoints_only:
            if pair.dense:  # its extra stages only in a step that holds a sample
                hit = keep & (save_index < n_ts) & (ts_arr[jnp.minimum(save_index, n_ts - 1)] <= tn)
                n_extra = len(pair.dense)
                ks = jax.lax.cond(
                    eqxi.unvmap_any(hit),
                    lambda: dense_stages(pair, f, tp, tn, y, ks),
                    lambda: jnp.concatenate([ks, jnp.zeros((n_extra,) + y.shape, ks.dtype)]),
                )
            interp = pair.interpolation(t0=tp, t1=tn, y0=y, y1=y1, k=ks)

            def save_cond(c):
                i, _ = c
                return keep & (i < n_ts) & (ts_arr[jnp.minimum(i, n_ts - 1)] <= tn)

            def save_body(c):
                i, buf = c
                ti = ts_arr[i]
                return i + 1, buf.at[i].set(interp.evaluate(ti).astype(buf.dtype))

            save_index, ys = eqxi.while_loop(
                save_cond, save_body, (save_index, ys), max_steps=n_ts,
                buffers=lambda c: c[1], kind=loop, checkpoints=n_ts,
            )  # fmt: skip
        if progress is not None:
            jax.lax.cond(
                s.num_steps % _PROGRESS_EVERY == 0, lambda: progress(t_start), lambda: None
            )
        rec = s.rec
        if record:
            times = lambda tp, tn, t1, t1f: advance(tp, tn, keep, factor, t1, t1f)[:2]  # noqa: E731
            rec = rec.add(keep, tp, tn, y, times, t1, t1_floor)
        return _State(
            tprev=t_start, tnext=t_end, y=y_new, f_last=f_new, redo=redo_new,
            num_steps=s.num_steps + 1, num_accepted=s.num_accepted + keep.astype(jnp.int64),
            counts=counts, save_index=save_index, ys=ys, rec=rec, prev_inv=prev_inv,
            prev_prev_inv=prev_prev_inv,
        )  # fmt: skip

    if record:
        final, recorded = _recorded_loop(cond, body, state, max_steps, *record)
    else:
        final = eqxi.while_loop(
            cond, body, state, max_steps=max_steps, buffers=lambda s: s.ys, kind=loop
        )
    ok = final.tprev >= t1
    if progress is not None:
        progress(final.tprev)
    result = RESULTS.where(ok, RESULTS.successful, RESULTS.max_steps_reached)
    ys = final.ys
    if endpoints_only:
        # As diffrax's save at t1: the last state, at the time reached.
        ys = jnp.stack([y0, final.y])
        t_final = jnp.where(ok, t1, final.tprev)
    else:
        # Samples not reached hold the last state (as diffrax pads them); the run's end for
        # `t_final` is the last sample reached.
        reached = jnp.arange(n_ts) < final.save_index
        ys = jnp.where(reached[:, None], ys, final.y)
        last = ts_arr[jnp.maximum(final.save_index - 1, 0)]
        t_final = jnp.where(ok, ts_arr[-1], jnp.where(final.save_index > 0, last, ts_arr[0]))
    return {
        "ys": ys,
        "counts": final.counts,
        "num_steps": final.num_steps,
        "num_accepted_steps": final.num_accepted,
        "num_rejected_steps": final.num_steps - final.num_accepted,
        "result": result,
        "t_final": t_final,
    } | ({"record": recorded} if record else {})
