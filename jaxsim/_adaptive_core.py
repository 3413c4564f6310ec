r"""jaxsim's own adaptive core: embedded Runge-Kutta pairs in one loop over the flat state.

`simulate` with jaxsim's `Tsit5()`, `Dopri5()` or `Dopri8()` runs here (a diffrax solver instance,
e.g. `js.Dopri8().to_diffrax()` or `diffrax.Dopri8()`, still runs in `diffrax.diffeqsolve`, the
cross-check path). One loop iteration is one attempted step on the flat state vector
(`jaxsim._layout`): the stages, the error norm, the step-size controller, the step map and the
samples, with no pytree machinery between steps.

**Semantics: diffrax's, step for step.** The controller is an integral (I) controller with the
defaults of `diffrax.PIDController` (Söderlind's PID family with $k_I = 1$, $k_P = k_D = 0$):

- error $\epsilon = \mathrm{RMS}_i\big(e_i / (a_{tol} + r_{tol} \max(|y_{0,i}|, |y_{1,i}|))\big)$
  over the flat state ($e$ the embedded difference; a NaN in $e$ counts as $\infty$, a NaN in
  $y_1$ leaves $y_0$ in the scale);
- the step is accepted when $\epsilon < 1$; the next step is $h\,\min(f_{max}, \max(1, 0.9\,
  \epsilon^{-1/q}))$ after an accepted step and $h\,\min(0.9, \max(f_{min}, 0.9\,\epsilon^{-1/q}))$
  after a rejected one ($q$ the pair's order, $f_{min} = 0.2$, $f_{max} = 10$): an accepted step
  never shrinks the next one;
- a rejected step is retried from the same point; `num_steps` counts attempts, `num_rejected_steps`
  the rejected ones (as diffrax's `num_steps`, `num_rejected_steps`);
- the initial step, without `dt`, is Hairer, Nørsett & Wanner's heuristic (Solving ODEs I,
  II.4): $d_0 = \|y_0\|$, $d_1 = \|f_0\|$, $h_0 = 0.01 d_0/d_1$ (or $10^{-6}$ when either is below
  $10^{-5}$), $d_2 = \|f(t_0 + h_0, y_0 + h_0 f_0) - f_0\| / h_0$,
  $h = \min(100 h_0, (0.01/\max(d_1, d_2))^{1/q})$, norms scaled by $a_{tol} + r_{tol}|y_0|$;
- a step proposed within 100 ulp of `t1` is stretched to `t1` (a rejected one halves the rest);
- breakpoints (`jump_ts`): a step ends just before a breakpoint and the next starts just after it
  (two ulps), and the first-same-as-last stage is recomputed there and after a step map that
  changed the state (the MRP shadow switch).

The same rules as diffrax's controller give the same steps: measured step counts equal diffrax's
on the J2 orbit, a Kepler e = 0.7 orbit and the spacecraft (`tests/test_adaptive_core.py`).

**Dense output** for samples `ts`: the pair's own interpolant (diffrax's interpolation classes:
Tsitouras's for Tsit5, Shampine's for Dopri5, the 7th-order one of Dopri8), evaluated inside the
step that contains each sample; samples do not cut steps. Events and clocks stay on diffrax
(`jaxsim._clocked`).

**Stages.** `unrolled=True` on the solver (default for `Dopri8`) writes the stages out at trace
time (the drift traced once per stage: the fastest step for small drifts); `unrolled=False`
evaluates them in a `lax.fori_loop` over the tableau's rows (the drift traced once: small
programs, fast compiles).

**Differentiation.** The step loop is an `equinox.internal.while_loop`: `kind="checkpointed"`
(reverse mode by recursive checkpointing of the loop states, bounded by `max_steps`: the same
scheme as diffrax's default `RecursiveCheckpointAdjoint`) by default, a plain `lax.while_loop`
(forward mode: `jax.jvp`, `jax.jacfwd`) with `adjoint=diffrax.ForwardMode()`. The step size and
the accept/reject decision are not differentiated (as in diffrax). With
`adjoint=jaxsim.ForwardSensitivity()` a differentiated run integrates the sensitivities with the
state, their error estimates in the step control (`ForwardSensitivity`,
`integrate_sensitive`): the derivative of the solution to the tolerance rather than that of the
state's discretisation.
"""

import dataclasses
import functools

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._compile import jit as jaxsim_jit
from ._results import RESULTS


# diffrax.PIDController's defaults (an I controller): safety factor and the limits of one change.
SAFETY = 0.9
FACTOR_MIN = 0.2
FACTOR_MAX = 10.0
# A step ending within this many ulps of t1 is stretched to t1 (diffrax's rule).
_END_ULPS = 100
# Progress reports every this many attempted steps (one host call per step would dominate the
# run time of a small drift).
_PROGRESS_EVERY = 64


@dataclasses.dataclass(frozen=True)
class Pair:
    """An explicit embedded pair: rows `a` (row 0 empty), weights `b`, error weights `e`
    (`b - b_hat`), nodes `c`, order `order` (the controller's exponent is `1/order`), first-same-
    as-last `fsal`, `ssal` (y1 is the last stage's argument), and its dense output class."""

    name: str
    a: tuple
    b: tuple
    e: tuple
    c: tuple
    order: int
    fsal: bool
    ssal: bool
    interpolation: object

    @property
    def stages(self) -> int:
        return len(self.b)

    @property
    def rhs_per_step(self) -> int:
        """Drift evaluations per attempted step (FSAL pairs reuse the last stage)."""
        return self.stages - 1 if self.fsal else self.stages


@functools.cache
def pair_of(unrolled_cls) -> Pair:
    """The `Pair` of one of jaxsim's `AbstractUnrolledERK` classes (their tableaus)."""
    a, b, e, c = unrolled_cls._coeffs
    tab = unrolled_cls.tableau
    return Pair(
        unrolled_cls.__name__.removeprefix("Unrolled"), a, b, e, c, int(unrolled_cls._order),
        bool(tab.fsal), bool(tab.ssal), unrolled_cls.interpolation_cls,
    )  # fmt: skip


def _combine(base, coeffs, ks):
    """`base + sum_j coeffs[j] ks[j]` over the nonzero coefficients (None: no base term)."""
    out = base
    for cj, kj in zip(coeffs, ks):
        if cj == 0.0:
            continue
        out = cj * kj if out is None else out + cj * kj
    return out


def _stage_time(t0, t1, h, ci):
    # c = 1 evaluates exactly at t1 (as diffrax does).
    return t1 if ci == 1.0 else t0 + ci * h


def step_unrolled(pair: Pair, f, t0, t1, y0, f0):
    """One step from `(t0, y0)` to `t1` with `f0 = f(t0, y0)`: `(y1, error, k, f_last)`, `k` the
    stages times the step (shape `(s, n)`, what the interpolants take). Stages written out."""
    a, b, e, c = pair.a, pair.b, pair.e, pair.c
    h = (t1 - t0).astype(y0.dtype)
    ks = [h * f0]
    fi, yi = f0, y0
    for i in range(1, pair.stages):
        yi = _combine(y0, a[i], ks)
        fi = f(_stage_time(t0, t1, t1 - t0, c[i]), yi)
        ks.append(h * fi)
    y1 = yi if pair.ssal else _combine(y0, b, ks)
    err = _combine(None, e, ks)
    err = jnp.zeros_like(y0) if err is None else err
    return y1, err, jnp.stack(ks), fi


def step_looped(pair: Pair, f, t0, t1, y0, f0):
    """`step_unrolled` with the stages in a `lax.fori_loop` over the tableau's rows (the drift
    traced once). Stage i combines the stages with the dense row `a[i]` (zeros past i)."""
    s = pair.stages
    amat = np.zeros((s, s))
    for i, row in enumerate(pair.a):
        amat[i, : len(row)] = row
    cvec = np.asarray(pair.c, dtype=float)
    h = (t1 - t0).astype(y0.dtype)
    k0 = jnp.zeros((s,) + y0.shape, y0.dtype).at[0].set(h * f0)

    def stage(i, carry):
        ks, _ = carry
        yi = y0 + jnp.asarray(amat)[i] @ ks
        ci = jnp.asarray(cvec)[i]
        ti = jnp.where(ci == 1.0, t1, t0 + ci * (t1 - t0))
        fi = f(ti, yi)
        return ks.at[i].set(h * fi), fi

    ks, f_last = jax.lax.fori_loop(1, s, stage, (k0, f0))
    y1 = y0 + jnp.asarray(pair.b) @ ks
    err = jnp.asarray(pair.e) @ ks
    return y1, err, ks, f_last


def _rms(x):
    return jnp.sqrt(jnp.mean(x * x))


def initial_step(f, t0, y0, f0, order, rtol, atol):
    """Hairer-Nørsett-Wanner's starting step (module docstring); two drift evaluations."""
    scale = atol + jnp.abs(y0) * rtol
    d0 = _rms(y0 / scale)
    d1 = _rms(f0 / scale)
    small = (d0 < 1e-5) | (d1 < 1e-5)
    h0 = jnp.where(small, 1e-6, 0.01 * d0 / jnp.where(small, 1.0, d1))
    f1 = f(t0 + h0, y0 + h0 * f0)
    d2 = _rms((f1 - f0) / scale) / h0
    max_d = jnp.maximum(d1, d2)
    h1 = jnp.where(max_d <= 1e-15, jnp.maximum(1e-6, h0 * 1e-3), (0.01 / max_d) ** (1.0 / order))
    return jax.lax.stop_gradient(jnp.minimum(100 * h0, h1))


# The next float up / down, differentiated as the identity (a traced `t0`/`t1` reaches the step
# times through them; JAX has no derivative rule for `nextafter`).
@jax.custom_jvp
def _next_after(x):
    return jnp.nextafter(x, jnp.inf)


@jax.custom_jvp
def _prev_before(x):
    return jnp.nextafter(x, -jnp.inf)


_next_after.defjvp(lambda primals, tangents: (_next_after(*primals), tangents[0]))
_prev_before.defjvp(lambda primals, tangents: (_prev_before(*primals), tangents[0]))


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
):
    """Integrate `y' = f(t, y)` (flat `y0`) from `t0` to `t1`, sampling at `ts` (sorted, within
    [t0, t1]; may be traced).

    `step_map(t, y) -> (y, counts)` runs after every accepted step (`counts` an integer pytree,
    accumulated from `counts0`). `endpoints_only`: `ts == [t0, t1]`, saved without interpolation.
    `loop`: `"checkpointed"` (reverse-mode differentiable) or `"lax"` (forward mode).
    `progress(t)`: called with the time reached every `_PROGRESS_EVERY` attempted steps and at
    the end (a `jaxsim._progress.Reporter`), or None.
    `blocks`: `y0` is `blocks` equal blocks (the state, then its sensitivities: `jaxsim.
    ForwardSensitivity`); the error norm is the largest of the blocks' RMS norms and the initial
    step is that of the first block (1: the RMS norm over the whole vector).

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
    step = step_unrolled if unrolled else step_looped
    # Without a step map (None: the identity) the state never jumps between steps, so without
    # breakpoints the first stage of a step is always the last one's (no per-step cond).
    identity_map = step_map is None
    if identity_map:
        counts0 = {} if counts0 is None else counts0
        zero_counts = jtu.tree_map(jnp.zeros_like, counts0)
        step_map = lambda t, y: (y, zero_counts)  # noqa: E731
    t1_floor = t1
    for _ in range(_END_ULPS):
        t1_floor = _prev_before(t1_floor)
    jumps = np.sort(np.asarray(jump_ts, dtype=float)) if len(jump_ts) else None
    inv_order = 1.0 / pair.order

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
    tnext = t0 + dt_first
    if jumps is not None:  # diffrax clips the first step at a breakpoint too
        jt = jnp.asarray(jumps)
        idx = jnp.searchsorted(jt, t0, side="right")
        nxt = jnp.where(idx >= len(jumps), jnp.inf, jt[jnp.minimum(idx, len(jumps) - 1)])
        tnext = jnp.minimum(tnext, _prev_before(nxt))
    tnext = jnp.minimum(tnext, t1)

    # The sample buffer is written, never read, inside the loop (an `equinox.internal.while_loop`
    # buffer); with `endpoints_only` the final state is the loop's last state.
    n_save = 0 if endpoints_only else n_ts
    ys0 = jnp.zeros((n_save,) + y0.shape, y0.dtype)
    zero = jnp.asarray(0, jnp.int64)
    state = _State(
        tprev=t0, tnext=tnext, y=y0, f_last=f0, redo=jnp.asarray(False), num_steps=zero,
        num_accepted=zero, counts=counts0, save_index=zero, ys=ys0,
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

        # Error norm and the controller (diffrax.PIDController with its defaults).
        err = jnp.where(jnp.isnan(err), jnp.inf, err)
        y1_scale = jnp.where(jnp.any(jnp.isnan(y1)), y, y1)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y1_scale))
        if blocks == 1:
            eps = _rms(err / scale)
        else:  # CVODES's rule: the largest of the state's and each sensitivity's norms
            eps = jnp.max(jnp.sqrt(jnp.mean(jnp.reshape(err / scale, (blocks, -1)) ** 2, 1)))
        eps = jax.lax.stop_gradient(eps)
        keep = eps < 1
        inv = 1.0 / eps
        fmin = jnp.where(keep, 1.0, FACTOR_MIN)
        fmax = jnp.where(keep, FACTOR_MAX, SAFETY)
        factor = jax.lax.stop_gradient(jnp.clip(SAFETY * inv**inv_order, fmin, fmax))
        h_new = (tn - tp) * factor.astype(tdtype)
        t_start = jnp.where(keep, tn, tp)
        t_end = t_start + h_new
        t_start, t_end, made_jump = clip_jump(t_start, t_end)
        t_start = jnp.minimum(t_start, t1)
        halfway = t_start + 0.5 * (t1 - t_start)
        t_end = jnp.where(t_end > t1_floor, jnp.where(keep, t1, halfway), t_end)

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
        return _State(
            tprev=t_start, tnext=t_end, y=y_new, f_last=f_new, redo=redo_new,
            num_steps=s.num_steps + 1, num_accepted=s.num_accepted + keep.astype(jnp.int64),
            counts=counts, save_index=save_index, ys=ys,
        )  # fmt: skip

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
    }


class ForwardSensitivity(eqx.Module):
    r"""`simulate(..., adjoint=ForwardSensitivity())`: derivatives by forward sensitivities
    integrated with the state under the same step-size control (jaxsim's adaptive pairs
    `Tsit5`, `Dopri5`, `Dopri8` on a state of one floating dtype, without clocks or events).

    Under `jax.jvp`, `jax.jacfwd`, `jax.grad` or `jax.jacrev` of a run, the state $y$ is
    integrated together with its sensitivities $S_j = \partial y / \partial q_j$ to every
    differentiated input $q_j$ (each element of `y0`, of the model's and `args`' arrays that
    carry a tangent, and `t0`), $\dot S_j = \partial_y f\, S_j + \partial_{q_j} f$ (the
    variational equations, as in Hindmarsh et al., "SUNDIALS", ACM TOMS 31(3) 2005, CVODES'
    simultaneous corrector, and heyoka's `var_ode_sys`). The local error estimate of each
    sensitivity enters the step control: the error norm is the largest of the state's and each
    sensitivity's weighted RMS norms, all with the run's `rtol` and `atol` (CVODES's
    `errconS = True`). The derivative is then that of the solution to the tolerance, not that of
    one discretisation: it does not inherit the truncation error of a step sequence tuned to the
    state alone. The derivative w.r.t. a sample time is the drift there.

    Cost: one run with `1 + m` blocks of the state (m the number of differentiated input
    elements), whatever the transformation: `jacfwd` and `grad` cost the same, and a `jvp` with
    one tangent costs all m sensitivities. The differentiated run's steps differ from the plain
    run's (the sensitivities' errors are controlled too); a run that is not differentiated is the
    plain run. The step sizes are not differentiated (they depend on the tolerance only).
    """


def loop_kind(adjoint) -> str | None:
    """The step loop for diffrax's `adjoint` choice: `"checkpointed"` (None: reverse mode as
    diffrax's default `RecursiveCheckpointAdjoint`), `"lax"` (`ForwardMode`), `"sensitivity"`
    (`ForwardSensitivity`), or None (another adjoint, e.g. `BacksolveAdjoint`: that run stays on
    diffrax)."""
    if adjoint is None or type(adjoint) is dfx.RecursiveCheckpointAdjoint:
        return "checkpointed"
    if isinstance(adjoint, dfx.ForwardMode):
        return "lax"
    if isinstance(adjoint, ForwardSensitivity):
        return "sensitivity"
    return None


def check_adjoint(adjoint, kind, y0) -> None:
    """Refuse `ForwardSensitivity` on a request this core does not run (`kind`: the request's
    `jaxsim._route.SolverKind`)."""
    from ._layout import StateLayout

    if not isinstance(adjoint, ForwardSensitivity):
        return
    if kind.driver != "adaptive" or not kind.native:
        what = f"{kind.name} on the {kind.driver} driver"
    elif StateLayout.of(y0) is None:
        what = "a state whose leaves mix dtypes"
    else:
        return
    raise ValueError(
        "simulate: `adjoint=ForwardSensitivity()` integrates sensitivities on jaxsim's adaptive "
        "pairs (Tsit5, Dopri5, Dopri8) without clocks, events, discontinuities or noise, on a "
        f"state of one floating dtype; got {what}. Use `adjoint=diffrax.ForwardMode()` (forward "
        "mode) or the default adjoint (reverse mode) for this run."
    )


def _is_zero(tangent) -> bool:
    return isinstance(tangent, jax.custom_derivatives.SymbolicZero) or (
        jnp.result_type(tangent) == jax.dtypes.float0
    )


def integrate_sensitive(f, step_map, theta, y0, t0, t1, ts, rtol, atol, **kw):
    """`integrate` of `y' = f(theta, t, y)`, differentiable by forward sensitivities
    (`ForwardSensitivity`) w.r.t. `theta` (a pytree of arrays), `y0`, `t0` and `ts`.

    `step_map(theta, t, y) -> (y, counts)`; `kw`: `integrate`'s other keywords (static). Not
    differentiated, it is `integrate` with the plain step loop."""

    def plain(theta, y0, t0, t1, ts, rtol, atol):
        out = integrate(
            lambda t, y: f(theta, t, y), y0, t0, t1, ts, rtol=rtol, atol=atol,
            step_map=lambda t, y: step_map(theta, t, y), loop="lax", **kw,
        )  # fmt: skip
        return out

    solve = jax.custom_jvp(plain)

    def jvp(primals, tangents):
        theta, y0, t0, t1, ts, rtol, atol = primals
        d_theta, d_y0, d_t0, _, d_ts, _, _ = tangents
        n = y0.shape[0]
        leaves, treedef = jtu.tree_flatten(theta)
        d_leaves = treedef.flatten_up_to(d_theta)
        active = [
            i for i, (x, d) in enumerate(zip(leaves, d_leaves, strict=True))
            if not _is_zero(d) and jnp.issubdtype(jnp.result_type(x), jnp.inexact)
        ]  # fmt: skip
        dtype = y0.dtype
        p = (jnp.concatenate([jnp.ravel(leaves[i]).astype(dtype) for i in active])
             if active else jnp.zeros((0,), dtype))  # fmt: skip
        sizes = [leaves[i].size for i in active]

        def with_p(q):
            new, off = list(leaves), 0
            for i, k in zip(active, sizes, strict=True):
                new[i] = jnp.reshape(q[off : off + k], leaves[i].shape).astype(leaves[i].dtype)
                off += k
            return jtu.tree_unflatten(treedef, new)

        # Columns of the sensitivity: y0's elements, the parameters', then t0.
        n_p = p.shape[0]
        cols_y0 = 0 if _is_zero(d_y0) else n
        has_t0 = not _is_zero(d_t0)
        m = cols_y0 + n_p + int(has_t0)
        if m == 0:
            out = plain(*primals)
        else:
            dp = jnp.zeros((m, n_p), dtype).at[cols_y0 : cols_y0 + n_p].set(jnp.eye(n_p))
            s0 = jnp.zeros((m, n), dtype)
            if cols_y0:
                s0 = s0.at[:n].set(jnp.eye(n, dtype=dtype))
            if has_t0:
                s0 = s0.at[-1].set(-f(theta, t0, y0))

            def f_aug(t, v):
                y, s = v[:n], jnp.reshape(v[n:], (m, n))
                fy, lin = jax.linearize(lambda q, x: f(with_p(q), t, x), p, y)
                return jnp.concatenate([fy, jnp.ravel(jax.vmap(lin)(dp, s))])

            def map_aug(t, v):
                y, s = v[:n], jnp.reshape(v[n:], (m, n))
                ym, lin, counts = jax.linearize(
                    lambda q, x: step_map(with_p(q), t, x), p, y, has_aux=True
                )
                return jnp.concatenate([ym, jnp.ravel(jax.vmap(lin)(dp, s))]), counts

            out = integrate(
                f_aug, jnp.concatenate([y0, jnp.ravel(s0)]), t0, t1, ts, rtol=rtol, atol=atol,
                step_map=map_aug, loop="lax", blocks=1 + m, **kw,
            )  # fmt: skip
            ys_all = out["ys"]
            out = dict(out, ys=ys_all[:, :n])
        ys = out["ys"]
        # The tangent: the sensitivities times the inputs' tangents, plus the drift at moved
        # sample times.
        d_ys = jnp.zeros_like(ys)
        if m:
            w = []
            if cols_y0:
                w.append(d_y0.astype(dtype))
            w += [jnp.ravel(d_leaves[i]).astype(dtype) for i in active]
            if has_t0:
                w.append(jnp.reshape(d_t0, (1,)).astype(dtype))
            sens = jnp.reshape(ys_all[:, n:], (ys.shape[0], m, n))
            d_ys = jnp.einsum("kmn,m->kn", sens, jnp.concatenate(w))
        if not _is_zero(d_ts):
            f_ts = jax.vmap(lambda t, y: f(theta, t, y))(ts, ys)
            d_ys = d_ys + f_ts * d_ts.astype(dtype)[:, None]
        d_out = jtu.tree_map(
            lambda x: np.zeros(jnp.shape(x), jax.dtypes.float0)
            if not jnp.issubdtype(jnp.result_type(x), jnp.inexact) else jnp.zeros_like(x),
            out,
        )  # fmt: skip
        d_out["ys"] = d_ys
        return out, d_out

    solve.defjvp(jvp, symbolic_zeros=True)
    return solve(theta, y0, t0, t1, ts, rtol, atol)


def supports(solver, y0, adjoint) -> bool:
    """Whether `simulate`'s plain adaptive request runs here: a jaxsim pair, a state with a flat
    layout (one floating dtype) and an adjoint this core implements (None or `ForwardMode`)."""
    from ._solvers import AbstractAdaptiveSolver

    return (
        isinstance(solver, AbstractAdaptiveSolver)
        and loop_kind(adjoint) is not None
        and _one_inexact_dtype(y0)
    )


def _one_inexact_dtype(tree) -> bool:
    """`StateLayout.of(tree) is not None` (the leaves share one floating dtype) without building
    the layout: checked at every call, it costs ~2 us instead of ~100 us."""
    dtypes = {
        x.dtype if isinstance(x, jax.Array) else jnp.result_type(x) for x in jtu.tree_leaves(tree)
    }
    return len(dtypes) == 1 and jnp.issubdtype(next(iter(dtypes)), jnp.inexact)


def _identity_step_map(model) -> bool:
    """Whether `model.step_map` is the default identity (of every object of a `System`): the
    loop then needs no jump test and no first-stage recomputation after a step."""
    from ._dynamic_object import AbstractDynamicObject, System

    if isinstance(model, System):
        return all(_identity_step_map(o) for o in model.objects)
    return type(model).step_map is AbstractDynamicObject.step_map


@jaxsim_jit
def run(
    model, y0, args, solver, t0, t1, ts, dt0, rtol, atol, max_steps, outputs, throw, jump_ts,
    loop, endpoints_only, progress=None,
):  # fmt: skip
    """`simulate`'s adaptive run on this core (the counterpart of `jaxsim._plain._run_adaptive`,
    on the diffrax core)."""
    from ._layout import StateLayout
    from ._solution import finish, make_stats, zeros_counts

    layout = StateLayout.of(y0)
    pack, unpack = layout.flatten, layout.unflatten
    pair = pair_of(type(solver)._unrolled_cls)

    def f(t, v):
        return pack(model.drift(t, unpack(v), args))

    def step_map(t, v):
        y, counts = model.step_map(t, unpack(v))
        return pack(y), counts

    common = dict(
        pair=pair, dt0=dt0, max_steps=max_steps, jump_ts=jump_ts,
        counts0=zeros_counts(model, y0), endpoints_only=endpoints_only,
        unrolled=solver.unrolled, progress=progress,
    )  # fmt: skip
    if loop == "sensitivity":
        # The model's and args' arrays are the inputs the sensitivities may be taken to.
        theta, static = eqx.partition((model, args), eqx.is_array)

        def f_theta(th, t, v):
            m, a = eqx.combine(th, static)
            return pack(m.drift(t, unpack(v), a))

        def map_theta(th, t, v):
            m, _ = eqx.combine(th, static)
            y, counts = m.step_map(t, unpack(v))
            return pack(y), counts

        tdtype = jnp.result_type(float)
        out = integrate_sensitive(
            f_theta, map_theta, theta, pack(y0), jnp.asarray(t0, tdtype),
            jnp.asarray(t1, tdtype), jnp.asarray(ts, tdtype), jnp.asarray(rtol),
            jnp.asarray(atol), **common,
        )  # fmt: skip
    else:
        out = integrate(
            f, pack(y0), t0, t1, ts, rtol=rtol, atol=atol,
            step_map=None if _identity_step_map(model) else step_map, loop=loop, **common,
        )  # fmt: skip
    ys = jax.vmap(lambda t, v: model.step_map(t, unpack(v))[0])(ts, out["ys"])
    result, t_final = out["result"], out["t_final"]
    if throw:
        ys = eqx.error_if(ys, result != RESULTS.successful, _MAX_STEPS_MESSAGE)
    stats = make_stats(
        out["num_accepted_steps"], out["num_steps"] * pair.rhs_per_step, out["counts"],
        num_rejected_steps=out["num_rejected_steps"],
    )  # fmt: skip
    return finish(model, args, ts, ys, stats, result, t_final, outputs=outputs)


_MAX_STEPS_MESSAGE = RESULTS[RESULTS.max_steps_reached]
