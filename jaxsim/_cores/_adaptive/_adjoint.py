"""Reverse mode through the adaptive core: the backward loop over the recorded steps, each step's VJP stage by stage or through the whole step, the states between recorded ones recomputed."""

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ..._compilation._jit import loops_hoisted
from ..._result._codes import RESULTS
from ..._solvers._ode import stages_unrolled
from ._loop import integrate
from ._record import RECORD_BYTES, _dense_steps, _record_every
from ._stages import _combine, _dense_a, _stage_time, _stages_unrolled, dense_stages, step_looped


def _step_states(pair, unrolled, f, step_map, theta, tp, tn, y, dense=True):
    """One step of the pair from `(tp, y)` to `tn` with `f(theta, t, y)`, its first stage
    evaluated: `y_next` after the step map (None: the identity), with `dense` `(y_next, y1, ks)`,
    `y1` and the stages `ks` what the dense output takes (unrolled stages: a tuple of vectors,
    never one `(s, n)` array, which would exceed `_SMALL_BYTES` sooner)."""
    fth = lambda t, v: f(theta, t, v)  # noqa: E731
    if unrolled:
        ks, yi, _ = _stages_unrolled(pair, fth, tp, tn, y, fth(tp, y))
        y1 = yi if pair.ssal else _combine(y, pair.b, ks)
        ks = tuple(ks)
    else:
        y1, _, ks, _ = step_looped(pair, fth, tp, tn, y, fth(tp, y))
    y_next = y1 if step_map is None else step_map(theta, tn, y1)[0]
    return (y_next, y1, dense_stages(pair, fth, tp, tn, y, ks)) if dense else y_next


def _staged_step_vjp(pair, unrolled: bool) -> bool:
    """Whether `DiscreteAdjoint`'s backward pass takes one step's VJP stage by stage
    (`_staged_backward`: a loop over the stages, one drift VJP each) rather than `jax.vjp` of the
    step with its stages written out: for looped stages (`unrolled=False`), and for unrolled ones
    when XLA compiles loops whole (`jaxsim._compilation._jit.loops_hoisted`: jaxsim's programs);
    never when the pair's dense output takes extra stages (`Verner9`: `jax.vjp` of the step takes
    them with it, the staged loop has only the step's own).

    Measured: looped stages halve the `combined` spacecraft's Tsit5 gradient (docs/gradients.md).
    For Dopri8's unrolled stages on the J2 orbit, the staged loop is 5x slower than the written-out
    step's VJP when each loop iteration is a sequence of runtime calls (no hoisting); with the loops
    hoisted both run in the same time (50-parameter gradient 4.0 vs 4.1 ms best, ratio 0.93-1.03,
    alternated) and the gradient program is 38 % smaller (J2 1 h: 2298 vs 3692 lines of HLO), its
    first call 2.1-2.6x faster (4.3-4.5 vs 9.5-11.6 s at load 5-7; `benchmarks/bench_compile.py`)."""
    if getattr(pair, "dense", ()):
        return False
    return not unrolled or loops_hoisted()


def _staged_backward(pair, fth, th, tp, tn, args, y1bar, ksbar):
    """The cotangents `(thbar, ybar)` of one `step_looped` step (times fixed; `args` the stages'
    arguments) given those of `y1` and of the stages `ks` (None: zeros), stage by stage from the
    last: a loop whose body takes one drift VJP (`fth(th, t, y)`) and keeps the stages as
    separate vectors. On XLA's CPU runtime the written-out step's VJP cost about 3x this loop
    (the `combined` spacecraft, `docs/gradients.md`)."""
    s = pair.stages
    bvec = np.asarray(pair.b, dtype=float)  # y1 = y + b @ ks, as `step_looped` forms it
    h = (tn - tp).astype(y1bar.dtype)
    times = jnp.stack([_stage_time(tp, tn, tn - tp, pair.c[i]) for i in range(s)])
    # The stages as rows of one array, picked and updated by a traced index (one dynamic slice
    # and one product per stage; the zero entries of `a` and `b` add exact zeros).
    amat = jnp.asarray(_dense_a(pair), y1bar.dtype)
    stages = jnp.stack(args)
    kbar = jnp.asarray(bvec, y1bar.dtype)[:, None] * y1bar[None, :]
    if ksbar is not None:
        kbar = kbar + jnp.stack(ksbar)

    def row(xs, i):
        return jax.lax.dynamic_index_in_dim(xs, i, keepdims=False)

    def body(j, carry):
        i = s - 1 - j
        kbar, yb, thb = carry
        _, vjp = jax.vjp(lambda th, v: fth(th, times[i], v), th, row(stages, i))
        thb_i, vb = vjp(h * row(kbar, i))
        kbar = kbar + row(amat, i)[:, None] * vb[None, :]
        return kbar, yb + vb, jtu.tree_map(jnp.add, thb, thb_i)

    _, ybar, thbar = jax.lax.fori_loop(0, s, body, (kbar, y1bar, jtu.tree_map(jnp.zeros_like, th)))
    return thbar, ybar


def _slice(a, start, size):
    """`a[start : start + size]` (traced start), or None for None."""
    return None if a is None else jax.lax.dynamic_slice_in_dim(a, start, size, 0)


def _dense(ct, like):
    """A cotangent as an array (zeros for a symbolic zero)."""
    if isinstance(ct, jax.custom_derivatives.SymbolicZero):
        return jnp.zeros(jnp.shape(like), jnp.result_type(like))
    return ct


def integrate_adjoint(
    f, step_map, theta, y0, t0, t1, ts, rtol, atol, *, record_bytes=None, dense_bytes=None, **kw
):  # fmt: skip
    """`integrate` of `y' = f(theta, t, y)`, reverse-mode differentiable by the discrete adjoint
    of its accepted steps (`DiscreteAdjoint`) w.r.t. `theta` (a pytree of arrays), `y0`, `t0`,
    `t1` and `ts`.

    `step_map(theta, t, y) -> (y, counts)` or None (the identity); `record_bytes`: the budget of
    recorded states (None: `RECORD_BYTES`); `dense_bytes`: that of the first states, all recorded
    (None: `_DENSE_BYTES`); `kw`: `integrate`'s other keywords (static). Not
    differentiated, it is `integrate` with the plain step loop; forward mode is refused (a
    `jax.custom_vjp`)."""
    pair, max_steps = kw["pair"], kw["max_steps"]
    endpoints_only = kw.get("endpoints_only", False)
    unrolled = stages_unrolled(kw.get("unrolled", True), lambda t, v: f(theta, t, v), t0, y0)
    kw["unrolled"] = unrolled
    budget = RECORD_BYTES if record_bytes is None else record_bytes
    tdtype = jnp.result_type(float)
    # The step map's counters and the progress reporter (its token) are inputs of the
    # custom_vjp, not differentiated (arrays of an enclosing trace must not be closed over).
    extra = (kw.pop("counts0", None), kw.pop("progress", None))

    def recorded(theta, y0, t0, t1, ts, rtol, atol, extra, record, tangents):
        m = None if step_map is None else (lambda t, y: step_map(theta, t, y))
        return integrate(
            lambda t, y: f(theta, t, y), y0, t0, t1, ts, rtol=rtol, atol=atol, step_map=m,
            counts0=extra[0], progress=extra[1], loop="lax", record=record,
            record_tangents=tangents, **kw,
        )  # fmt: skip

    def plain(theta, y0, t0, t1, ts, rtol, atol, extra):
        return recorded(theta, y0, t0, t1, ts, rtol, atol, extra, 0, False)

    solve = jax.custom_vjp(plain)
    # What the backward pass needs to know of the inputs (set by `fwd`, static).
    seen = {}

    def fwd(theta, y0, t0, t1, ts, rtol, atol, extra):
        args = (theta, y0, t0, t1, ts, rtol, atol, extra)
        values = jtu.tree_map(lambda p: p.value, args)
        perturbed = jtu.tree_map(lambda p: p.perturbed, args)
        tangents = perturbed[2] or perturbed[3]
        every = _record_every(max_steps, values[1], tangents, budget)
        dense = _dense_steps(max_steps, values[1], tangents, every, budget, dense_bytes)
        seen.update(perturbed=perturbed, every=every, dense=dense)
        out = recorded(*values, (every, dense), tangents)
        rec = out.pop("record")
        ok = out["result"] == RESULTS.successful
        return out, (values[:5], rec, out["num_accepted_steps"], ok)

    def bwd(residuals, ct):
        (theta, y0, t0, t1, ts), rec, n_acc, ok = residuals
        p_theta, p_y0, p_t0, p_t1, p_ts = seen["perturbed"][:5]
        every, dense_steps = seen["every"], seen["dense"]
        n_ts = ts.shape[0]
        ys_like = jnp.zeros((2 if endpoints_only else n_ts,) + y0.shape, y0.dtype)
        ct_ys = _dense(ct["ys"], ys_like)
        ct_tf = _dense(ct["t_final"], t0)

        # The differentiated leaves of theta (inexact, perturbed); the others are constants.
        leaves, treedef = jtu.tree_flatten(theta)
        p_leaves = treedef.flatten_up_to(p_theta)
        active = [
            i for i, (x, p) in enumerate(zip(leaves, p_leaves, strict=True))
            if p and jnp.issubdtype(jnp.result_type(x), jnp.inexact)
        ]  # fmt: skip

        def with_active(vals):
            new = list(leaves)
            for i, v in zip(active, vals, strict=True):
                new[i] = v
            return jtu.tree_unflatten(treedef, new)

        th_active = [leaves[i] for i in active]

        dense = not endpoints_only

        def g(th, tp, tn, y, dense=dense):
            return _step_states(pair, unrolled, f, step_map, with_active(th), tp, tn, y, dense)

        def sample(tp, tn, y, y1, ks, t):
            k = jnp.stack(ks) if isinstance(ks, tuple) else ks
            return pair.interpolation(t0=tp, t1=tn, y0=y, y1=y1, k=k).evaluate(t)

        # The accepted step of each sample (the first one ending at or after it: the forward
        # loop's rule); samples past the last accepted step (a failed run) hold the final state.
        if endpoints_only:
            ybar = ct_ys[1]
            last_sample = jnp.asarray(-1, jnp.int64)
            step_of = None
        else:
            step_of = jnp.searchsorted(rec.tn, ts, side="left")
            reached = step_of < n_acc
            ybar = jnp.sum(jnp.where(reached[:, None], 0.0, ct_ys), axis=0).astype(y0.dtype)
            last_sample = jnp.sum(reached).astype(jnp.int64) - 1
        tbar = jnp.zeros((2,), tdtype)  # d/d(t0, t1)
        tsbar = jnp.zeros_like(ts)
        # The final time: t1 (endpoints) or the last sample's time.
        if endpoints_only:
            tbar = tbar.at[1].add(jnp.where(ok, ct_tf, 0.0))
        else:
            idx = jnp.where(ok, n_ts - 1, jnp.maximum(last_sample, 0))
            tsbar = tsbar.at[idx].add(ct_tf)

        def back_step(c, tp, tn, y, d_tp, d_tn, redo=None, j=None, local=None):
            """The cotangents through accepted step `c["n"]` (times `(tp, tn)`, start state `y`,
            the times' derivatives w.r.t. (t0, t1) `d_tp`, `d_tn` or None). With `redo` (traced):
            where true, only the step's end state, stored as `local[j]` (a block's states
            recomputed: the same step as the backward one, so that the gradient program holds
            one copy of it); returns `(carry, j, local)` then."""
            n = c["n"]
            # The times' cotangents only where t0 or t1 is differentiated.
            times = d_tp is not None
            # The stages' VJP stage by stage (`_staged_backward`, the step map's apart, the drift
            # traced once) or `jax.vjp` of the whole step (differentiated times always):
            # `_staged_step_vjp`.
            staged = not times and _staged_step_vjp(pair, unrolled)
            if staged:
                fth = lambda t, v: f(with_active(c["th"]), t, v)  # noqa: E731
                y1, _, ks, _ = step_looped(pair, fth, tp, tn, y, fth(tp, y))
                stage_args = tuple(y + jnp.asarray(row) @ ks for row in _dense_a(pair))
                if step_map is None:
                    y_next = y1
                else:
                    y_next, vjp_map = jax.vjp(
                        lambda th, v: step_map(with_active(th), tn, v)[0], c["th"], y1
                    )  # fmt: skip
                out = (y_next, y1, ks) if dense else y_next
            elif times:
                out, vjp_step = jax.vjp(g, c["th"], tp, tn, y)
            else:
                out, vjp_step = jax.vjp(lambda th, y: g(th, tp, tn, y), c["th"], y)

            def back():  # the cotangents past the step's forward part
                zero = jnp.zeros((), tdtype)
                ybar_s, tpbar, tnbar = jnp.zeros_like(y), zero, zero
                i, tsb = c["i"], c["tsbar"]
                if dense:
                    _, y1, ks = out
                    y1bar, ksbar = jnp.zeros_like(y1), jtu.tree_map(jnp.zeros_like, ks)

                    def s_cond(sc):
                        i = sc[0]
                        return (i >= 0) & (step_of[jnp.maximum(i, 0)] == n)

                    def s_body(sc):
                        i, yb, y1b, ksb, tpb, tnb, tsb = sc
                        # Differentiated w.r.t. the step's times if needed, the sample's if traced.
                        t_i, ct_i = ts[i], ct_ys[i].astype(y1.dtype)
                        if times:
                            _, vjp_s = jax.vjp(sample, tp, tn, y, y1, ks, t_i)
                            a, b, cy, cy1, cks, cti = vjp_s(ct_i)
                            tpb, tnb = tpb + a, tnb + b
                        elif p_ts:
                            _, vjp_s = jax.vjp(lambda *v: sample(tp, tn, *v), y, y1, ks, t_i)
                            cy, cy1, cks, cti = vjp_s(ct_i)
                        else:
                            _, vjp_s = jax.vjp(lambda *v: sample(tp, tn, *v, t_i), y, y1, ks)
                            (cy, cy1, cks), cti = vjp_s(ct_i), 0.0
                        ksb = jtu.tree_map(jnp.add, ksb, cks)
                        return i - 1, yb + cy, y1b + cy1, ksb, tpb, tnb, tsb.at[i].add(cti)

                    i, ybar_s, y1bar, ksbar, tpbar, tnbar, tsb = jax.lax.while_loop(
                        s_cond, s_body, (i, ybar_s, y1bar, ksbar, tpbar, tnbar, tsb)
                    )
                tb = c["tbar"]
                ct_out = (c["ybar"], y1bar, ksbar) if dense else c["ybar"]
                if staged:
                    if step_map is None:
                        thm, y1b = None, c["ybar"]
                    else:
                        thm, y1b = vjp_map(c["ybar"])
                    thb, yb = _staged_backward(
                        pair, lambda th, t, v: f(with_active(th), t, v), c["th"], tp, tn,
                        stage_args, y1b + y1bar if dense else y1b, ksbar if dense else None,
                    )  # fmt: skip
                    if thm is not None:
                        thb = jtu.tree_map(jnp.add, thb, thm)
                elif times:
                    thb, tpb, tnb, yb = vjp_step(ct_out)
                    tb = tb + (tpb + tpbar) * d_tp + (tnb + tnbar) * d_tn
                else:
                    thb, yb = vjp_step(ct_out)
                return dict(
                    n=n - 1, ybar=yb + ybar_s, th=c["th"],
                    thbar=jtu.tree_map(jnp.add, c["thbar"], thb), tbar=tb, tsbar=tsb, i=i,
                )  # fmt: skip

            if redo is None:
                return back()
            y_end = out[0] if dense else out
            if loops_hoisted():  # the backward part only where needed
                return jax.lax.cond(
                    redo, lambda: (c, j + 1, local.at[j].set(y_end)), lambda: (back(), j, local)
                )  # fmt: skip
            # Each loop iteration a sequence of runtime calls: a `lax.cond` copies the step's
            # residuals into its branch (J2 day, Dopri8: 13.2 ms against 10.8 ms), so the
            # backward part runs in every iteration, its result kept where not `redo`.
            done = back()
            kept = jtu.tree_map(lambda a, b: jnp.where(redo, a, b), c, done)
            stored = local.at[j].set(jnp.where(redo, y_end, local[j]))
            return kept, j + redo.astype(j.dtype), stored

        carry = dict(
            n=n_acc - 1, ybar=ybar, th=th_active, thbar=jtu.tree_map(jnp.zeros_like, th_active),
            tbar=tbar, tsbar=tsbar, i=last_sample,
        )  # fmt: skip

        # Blocks of K steps from the last, each on copies of its records (small buffers). A
        # block's states are the recorded ones in the dense part; past it they are recomputed
        # from the block's first along the recorded times by the block's first iterations
        # (`back_step` with `redo`), then its steps are taken backwards.
        def block(c):
            lo = (c["n"] // every) * every
            tp_b, tn_b, dtp_b, dtn_b = (
                _slice(a, lo, every) for a in (rec.tp, rec.tn, rec.d_tp, rec.d_tn)
            )
            local = _slice(rec.y_dense, lo, every)
            if rec.y is None:  # every state recorded
                return jax.lax.while_loop(
                    lambda c: c["n"] >= lo,
                    lambda c: back_step(
                        c, tp_b[c["n"] - lo], tn_b[c["n"] - lo], local[c["n"] - lo],
                        *(None if a is None else a[c["n"] - lo] for a in (dtp_b, dtn_b)),
                    ),
                    c,
                )  # fmt: skip
            recorded_here = lo < dense_steps
            start = jnp.zeros_like(local).at[0].set(rec.y[lo // every])
            local = jnp.where(recorded_here, local, start)
            # The first state still to recompute (none in the dense part).
            j0 = jnp.where(recorded_here, c["n"] - lo + 1, 1)

            def one(bc):
                c, j, local = bc
                redo = j <= c["n"] - lo
                k = jnp.where(redo, j - 1, c["n"] - lo)
                pick = lambda a: None if a is None else a[k]  # noqa: E731
                return back_step(
                    c, tp_b[k], tn_b[k], local[k], pick(dtp_b), pick(dtn_b), redo, j, local
                )  # fmt: skip

            c, _, _ = jax.lax.while_loop(lambda bc: bc[0]["n"] >= lo, one, (c, j0, local))
            return c

        carry = jax.lax.while_loop(lambda c: c["n"] >= 0, block, carry)
        y0bar = carry["ybar"] + ct_ys[0] if endpoints_only else carry["ybar"]
        # A failed run (max_steps reached) has NaN derivatives, whatever it reached
        # (`jaxsim._result._validity`).
        nan_if_failed = lambda x: x * jnp.where(ok, 1.0, jnp.nan).astype(x.dtype)  # noqa: E731
        thbar = [None] * len(leaves)
        for i, v in zip(active, carry["thbar"], strict=True):
            thbar[i] = nan_if_failed(v)
        thbar = jtu.tree_unflatten(treedef, thbar)
        tb = nan_if_failed(carry["tbar"])
        return (
            thbar, nan_if_failed(y0bar) if p_y0 else None, tb[0] if p_t0 else None,
            tb[1] if p_t1 else None, nan_if_failed(carry["tsbar"]) if p_ts else None, None, None,
            None,
        )  # fmt: skip

    solve.defvjp(fwd, bwd, symbolic_zeros=True)
    tdt = lambda x: jnp.asarray(x, tdtype)  # noqa: E731
    return solve(theta, y0, tdt(t0), tdt(t1), tdt(ts), rtol, atol, extra)
