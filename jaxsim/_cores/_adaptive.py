r"""jaxsim's own adaptive core: embedded Runge-Kutta pairs in one loop over the flat state.

`simulate` with jaxsim's `Tsit5()`, `Dopri5()` or `Dopri8()` runs here (a diffrax solver instance,
e.g. `js.Dopri8().to_diffrax()` or `diffrax.Dopri8()`, still runs in `diffrax.diffeqsolve`, the
cross-check path). One loop iteration is one attempted step on the flat state vector
(`jaxsim._model._layout`): the stages, the error norm, the step-size controller, the step map and the
samples, with no pytree machinery between steps.

**Semantics: diffrax's, step for step.** The controller is `diffrax.PIDController`'s (Söderlind's
PID family, "Digital filters in adaptive time-stepping", ACM TOMS 29(1) 2003) with $k_D = 0$: by
default the integral (I) controller, $k_I = 1$, $k_P = 0$ (below); with
`stepsize_controller=PIDController(..., pcoeff=k_P, icoeff=k_I)` a PI controller, whose factor
$0.9\,\epsilon^{-(k_P + k_I)/q}\,\epsilon_{prev}^{k_P/q}$ ($\epsilon_{prev}$ that of the last
accepted step, 1 before the first; an $\epsilon$ of 0 or $\infty$ is kept as 1) takes the place of
$0.9\,\epsilon^{-1/q}$ in the rules below (`gains`; the default gains take the square-root path
below, bit for bit as without a controller):

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
on the J2 orbit, a Kepler e = 0.7 orbit and the spacecraft (`tests/test_adaptive_core.py`), and
with PI gains (0.2, 0.4) for Tsit5, Dopri5 and Dopri8 (`tests/test_pi_control.py`).

**Dense output** for samples `ts`: the pair's own interpolant (diffrax's interpolation classes:
Tsitouras's for Tsit5, Shampine's for Dopri5, the 7th-order one of Dopri8; Verner's 8th-order
one for Verner9, whose 4 extra stages are evaluated only in a step that holds a sample), evaluated
inside the step that contains each sample; samples do not cut steps. Events and clocks stay on
diffrax (`jaxsim._drivers._clocked`).

**Stages.** `unrolled=True` on the solver (default for `Dopri8`) writes the stages out at trace
time (the drift traced once per stage: the fastest step for small drifts); `unrolled=False`
evaluates them in a `lax.fori_loop` over the tableau's rows (the drift traced once: small
programs, fast compiles).

**Differentiation.** Reverse mode (`jax.grad`, `jax.jacrev`) by default is the discrete adjoint
of the accepted steps (`DiscreteAdjoint`, `integrate_adjoint`: a `jax.custom_vjp` around the
plain loop, which records the accepted steps' times and start states; the backward pass takes the
vector-Jacobian product of one step per accepted step, from the last, and of the dense output for
the samples). `adjoint=diffrax.RecursiveCheckpointAdjoint()` runs the step loop as an
`equinox.internal.while_loop` with `kind="checkpointed"` (recursive checkpointing of every
attempted step's loop state, bounded by `max_steps`: diffrax's scheme); both give the same
derivative, that of the accepted step sequence, to round-off. A plain `lax.while_loop` (forward
mode: `jax.jvp`, `jax.jacfwd`) runs with `adjoint=diffrax.ForwardMode()`. The step size and the
accept/reject decision are not differentiated (as in diffrax). With
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

from .._compilation._jit import jit as jaxsim_jit, loops_hoisted
from .._result._codes import RESULTS


# diffrax.PIDController's defaults (an I controller): safety factor and the limits of one change.
SAFETY = 0.9
FACTOR_MIN = 0.2
FACTOR_MAX = 10.0
# diffrax.PIDController's default `(pcoeff, icoeff)`: the I controller (the fast path).
DEFAULT_GAINS = (0.0, 1.0)
# A step ending within this many ulps of t1 is stretched to t1 (diffrax's rule).
_END_ULPS = 100
# Progress reports every this many attempted steps (one host call per step would dominate the
# run time of a small drift).
_PROGRESS_EVERY = 64


@dataclasses.dataclass(frozen=True)
class Pair:
    """An explicit embedded pair: rows `a` (row 0 empty), weights `b`, error weights `e`
    (`b - b_hat`), nodes `c`, order `order` (the controller's exponent is `1/order`), first-same-
    as-last `fsal`, `ssal` (y1 is the last stage's argument), its dense output class, and the
    extra stages that dense output takes, `dense` (`(c_i, a_i)` each, a_i over every earlier
    stage; () when it takes the step's stages only, `Verner9`'s has four)."""

    name: str
    a: tuple
    b: tuple
    e: tuple
    c: tuple
    order: int
    fsal: bool
    ssal: bool
    interpolation: object
    dense: tuple = ()

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
        tuple(getattr(unrolled_cls, "_dense_rows", ())),
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


def _stages_unrolled(pair: Pair, f, t0, t1, y0, f0):
    """The stages of one step, written out: `(ks, y_last, f_last)`, `ks` a list of the stages
    times the step, `y_last` the last stage's argument and `f_last` its drift."""
    a, c = pair.a, pair.c
    h = (t1 - t0).astype(y0.dtype)
    fs = [f0]
    fi, yi = f0, y0
    for i in range(1, pair.stages):
        # y0 + sum_j (a_ij h) f_j: the newest drift enters through one product and one sum (the
        # scalars a_ij h are ready before it), where a_ij (h f_j) put two products after it.
        yi = y0
        for aij, fj in zip(a[i], fs):
            if aij != 0.0:
                yi = yi + (aij * h) * fj
        fi = f(_stage_time(t0, t1, t1 - t0, c[i]), yi)
        fs.append(fi)
    return [h * fj for fj in fs], yi, fi


def step_unrolled(pair: Pair, f, t0, t1, y0, f0):
    """One step from `(t0, y0)` to `t1` with `f0 = f(t0, y0)`: `(y1, error, k, f_last)`, `k` the
    stages times the step (shape `(s, n)`, what the interpolants take). Stages written out."""
    b, e = pair.b, pair.e
    ks, yi, fi = _stages_unrolled(pair, f, t0, t1, y0, f0)
    y1 = yi if pair.ssal else _combine(y0, b, ks)
    err = _combine(None, e, ks)
    err = jnp.zeros_like(y0) if err is None else err
    return y1, err, jnp.stack(ks), fi


def step_looped(pair: Pair, f, t0, t1, y0, f0):
    """`step_unrolled` with the stages in a `lax.fori_loop` over the tableau's rows (the drift
    traced once). Stage i combines the stages with the dense row `a[i]` (zeros past i)."""
    s = pair.stages
    amat = _dense_a(pair)
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


def dense_stages(pair: Pair, f, t0, t1, y0, ks):
    """The stages `ks` of a step (a tuple of vectors or an `(s, n)` array) with the extra stages
    of the pair's dense output appended (`pair.dense`; the same `ks` when it has none)."""
    if not pair.dense:
        return ks
    stacked = not isinstance(ks, tuple)
    kl = list(ks)
    h = (t1 - t0).astype(y0.dtype)
    for ci, row in pair.dense:
        kl.append(h * f(_stage_time(t0, t1, t1 - t0, ci), _combine(y0, row, kl)))
    return jnp.stack(kl) if stacked else tuple(kl)


def _neg_root(x, m: int):
    """`x ** (-1 / m)`; for m a power of two as square roots (on the CPU the square root takes a
    fraction of the time of the general power, and this sits between a step and the next)."""
    if m & (m - 1) == 0 and m > 1:
        while m > 2:
            x = jnp.sqrt(x)
            m //= 2
        return jax.lax.rsqrt(x)
    return x ** (-1.0 / m)


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


# `n` floats down (`_prev_before` n times) in one custom_jvp: traced once, where n separate ones
# took a fifth of the trace of a Dopri8 gradient program (each custom_jvp is traced with its rule).
@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _ulps_before(x, n: int):
    for _ in range(n):
        x = jnp.nextafter(x, -jnp.inf)
    return x


_ulps_before.defjvp(lambda n, primals, tangents: (_ulps_before(primals[0], n), tangents[0]))


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
    pcoeff, icoeff = (float(g) for g in gains)
    pi_control = (pcoeff, icoeff) != DEFAULT_GAINS

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
        prev_inv=jnp.ones((), y0.dtype) if pi_control and pcoeff != 0 else None,
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
        prev_inv = s.prev_inv
        if not pi_control:
            gain = SAFETY * float(n_block) ** (0.5 * inv_order)
            factor = jnp.clip(gain * _neg_root(ss, 2 * pair.order), fmin, fmax)
        else:
            # diffrax's PIDController with k_P = pcoeff, k_I = icoeff (module docstring): the
            # factor 0.9 (1/eps)^((pcoeff + icoeff)/q) (1/eps_prev)^(-pcoeff/q), eps_prev that
            # of the last accepted step (1 before the first), an eps of 0 or inf stored as 1.
            inv = 1.0 / jnp.sqrt(ss / n_block)
            factor = SAFETY * inv ** ((pcoeff + icoeff) * inv_order)
            if pcoeff != 0:
                factor = factor * prev_inv ** (-pcoeff * inv_order)
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
    """The step loop for diffrax's `adjoint` choice: `"adjoint"` (None or `DiscreteAdjoint`:
    reverse mode by the discrete adjoint of the accepted steps), `"checkpointed"` (diffrax's
    `RecursiveCheckpointAdjoint` given explicitly: reverse mode by recursive checkpointing of
    every attempted step), `"lax"` (`ForwardMode`), `"sensitivity"` (`ForwardSensitivity`), or
    None (another adjoint, e.g. `BacksolveAdjoint`: that run stays on diffrax)."""
    if adjoint is None or isinstance(adjoint, DiscreteAdjoint):
        return "adjoint"
    if type(adjoint) is dfx.RecursiveCheckpointAdjoint:
        return "checkpointed"
    if isinstance(adjoint, dfx.ForwardMode):
        return "lax"
    if isinstance(adjoint, ForwardSensitivity):
        return "sensitivity"
    return None


def check_adjoint(adjoint, kind, y0) -> None:
    """Refuse `ForwardSensitivity` and `DiscreteAdjoint` on a request this core does not run
    (`kind`: the request's `jaxsim._route.SolverKind`)."""
    from .._model._layout import StateLayout

    if isinstance(adjoint, DiscreteAdjoint):
        does = "is the discrete adjoint of"
        instead = "Leave `adjoint` at None (the driver's own reverse mode)"
    elif isinstance(adjoint, ForwardSensitivity):
        does = "integrates sensitivities on"
        instead = (
            "Use `adjoint=diffrax.ForwardMode()` (forward mode) or the default adjoint (reverse "
            "mode)"
        )
    else:
        return
    if kind.driver != "adaptive" or not kind.native:
        what = f"{kind.name} on the {kind.driver} driver"
    elif StateLayout.of(y0) is None:
        what = "a state whose leaves mix dtypes"
    else:
        return
    raise ValueError(
        f"simulate: `adjoint={type(adjoint).__name__}()` {does} jaxsim's adaptive pairs (Tsit5, "
        "Dopri5, Dopri8) without clocks, events, discontinuities or noise, on a state of one "
        f"floating dtype; got {what}. {instead} for this run."
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


# Reverse mode (`DiscreteAdjoint`): the recorded start states of one run's accepted steps past
# the first `_DENSE_BYTES` of them, every K-th, take at most this many bytes; the steps between
# are recomputed in the backward pass. Measured on a 2-core CPU: a loop buffer of 16 MiB costs
# 0.5 ms to fill per call, one of 32 MiB or more 25 ms or more (allocated afresh each call: page
# faults).
RECORD_BYTES = 16 * 2**20
# The start states of the first accepted steps are all recorded within this many bytes (the J2
# orbit's state: 21840 steps): a run of fewer steps recomputes none, and the buffers filled at
# every call grow with `max_steps` by the times (16 bytes a step) and every K-th state only (J2
# day, default `max_steps`, loops hoisted: 6.5 MB instead of 16.8 MB).
_DENSE_BYTES = 2**20
# XLA's CPU runtime runs a loop body's kernels in sequence only if none touches a buffer over 512
# bytes (otherwise through its concurrent executor: 1.8x the time of a Dopri8 step of the J2
# orbit, measured); the step loops of the record keep their buffers within this size, and copy
# them to and from the whole record once per chunk of steps.
_SMALL_BYTES = 512
_MAX_CHUNK = 64


class DiscreteAdjoint(eqx.Module):
    r"""`simulate(..., adjoint=DiscreteAdjoint())`, the default (`adjoint=None`) on jaxsim's
    adaptive pairs (`Tsit5`, `Dopri5`, `Dopri8`): reverse mode (`jax.grad`, `jax.jacrev`) by
    the discrete adjoint of the accepted steps.

    The forward pass is the plain step loop, which also records each accepted step's start and
    end times and start state. The backward pass runs over the accepted steps from the last to the
    first, each time through the vector-Jacobian product of one Runge-Kutta step
    $y_{n+1} = \Phi(\theta, t_n, t_{n+1}, y_n)$ (its stages recomputed from $y_n$; the step map
    after it, e.g. the MRP shadow switch, included), and through that of the pair's dense output
    for the samples inside the step (the adjoint of a Runge-Kutta method: Hager, "Runge-Kutta
    methods in optimal control and the transformed adjoint system", Numer. Math. 87, 2000;
    Sandu, "On the properties of Runge-Kutta discrete adjoints", ICCS 2006). It is the same
    derivative as that of diffrax's `RecursiveCheckpointAdjoint` (the derivative of the accepted
    step sequence with the step sizes and accept/reject decisions held fixed: they are not
    differentiated) to round-off, at a fraction of its cost: each accepted step is
    differentiated once, rejected steps never (figures in `docs/gradients.md`).

    One step's vector-Jacobian product is a reverse loop over the stages with one drift VJP each
    (a small program, the drift's VJP compiled once; about half the time of the alternative on a
    large model such as the `combined` spacecraft) for looped stages (`unrolled=False`, the default
    of `Tsit5` and `Dopri5`), and for unrolled ones (`Dopri8`'s default) when XLA compiles loops as
    one function (`jaxsim.small_loops()`, opt-in: `JAXSIM_SMALL_LOOPS=1`). Otherwise, and for
    derivatives w.r.t. `t0` or `t1`, it is `jax.vjp` of the written-out step (fastest for a cheap
    drift when each loop iteration is a sequence of runtime calls).

    Times: a traced `t0`, `t1` or `ts` is differentiated as in the checkpointed loop: each step's
    times carry their derivatives w.r.t. `t0` and `t1` (a step starts where the last ended, the
    last one ends at `t1`; a breakpoint is fixed), and a sample's time enters its interpolant.

    Memory (under `vmap`, per member): 16 bytes per allowed step (`max_steps`) for the times (48
    when `t0` or `t1` is differentiated); the start states of the first accepted steps within
    `_DENSE_BYTES` (1 MiB: 21840 steps of a 6-element state), and past them every K-th, K a
    multiple of the record's chunk (512 bytes of states, at most 64 steps), the smallest that
    keeps `max_steps / K` states within `RECORD_BYTES` (16 MiB); the K - 1 steps between two
    recorded states are recomputed from the recorded times in the backward pass, in the loop of
    the backward steps (the step's forward part shared: no second copy of the step in the
    gradient program). Where loops are not hoisted (`jaxsim.small_loops()`, opt-in) every state
    is recorded while `max_steps` of them fit in `RECORD_BYTES` (there the recomputing loop's
    per-step bookkeeping costs more than filling the buffers).

    Reverse mode only: forward mode (`jax.jvp`, `jax.jacfwd`) through a run with this adjoint is
    refused; pass `adjoint=diffrax.ForwardMode()` or `ForwardSensitivity()` there.
    `diffrax.RecursiveCheckpointAdjoint()` passed explicitly runs the checkpointed loop
    (diffrax's scheme: every attempted step recomputed and differentiated, memory O(sqrt of
    `max_steps`) states).
    """


def _chunk_size(y0, tangents: bool) -> int:
    """Accepted steps per chunk of the record: its buffers within `_SMALL_BYTES` (one at least)."""
    per_step = max(y0.size * jnp.dtype(y0.dtype).itemsize, 8 * (2 if tangents else 1))
    return max(1, min(_SMALL_BYTES // per_step, _MAX_CHUNK))


def _record_every(max_steps: int, y0, tangents: bool, budget: int) -> int:
    """K: past the dense part (`_dense_steps`) every K-th accepted step's state is recorded, a
    multiple of the chunk size, the smallest that keeps `max_steps / K` states within `budget`
    bytes."""
    size = max_steps * y0.size * jnp.dtype(y0.dtype).itemsize
    every = -(-size // max(int(budget), 1))
    chunk = _chunk_size(y0, tangents)
    return max(1, -(-every // chunk)) * chunk


def _dense_steps(max_steps: int, y0, tangents: bool, every: int, budget: int, dense=None) -> int:
    """D: the first D accepted steps' states are all recorded, a multiple of K (`every`), one
    block at least: as many as fit in `dense` bytes (`_DENSE_BYTES`), all of `max_steps` (rounded
    up to a multiple of K) if they fit or if K is 1. Where XLA does not compile loops whole
    (`loops_hoisted()` false; `dense` not given) also all of them if they fit in `budget`: each
    loop iteration a sequence of runtime calls, the recomputing loop's bookkeeping costs more
    than the buffers' filling (J2 day, Dopri8 gradient: 10.5-11.1 ms against 10.2-10.9 ms,
    alternated)."""
    span = max(_chunk_size(y0, tangents), every)
    total = -(-max_steps // span) * span
    state = y0.size * jnp.dtype(y0.dtype).itemsize
    if every == 1 or (dense is None and not loops_hoisted() and max_steps * state <= budget):
        return total  # (K = 1: a state over 512 bytes, every one within the budget)
    limit = _DENSE_BYTES if dense is None else int(dense)
    return min(max(1, limit // (state * every)) * every, total)


class _Chunk(eqx.Module):
    """The accepted steps of the current chunk (in the step loop; small buffers)."""

    count: jax.Array  # accepted steps recorded in this chunk
    tp: jax.Array  # (B,) start times
    tn: jax.Array  # (B,) end times (inf past `count`)
    y: jax.Array  # (B, n) start states
    d_now: object  # (2, 2) d(tprev, tnext) / d(t0, t1) of the loop's current step, or None
    d_tp: object  # (B, 2) d tp / d(t0, t1), or None
    d_tn: object  # (B, 2) d tn / d(t0, t1), or None

    @staticmethod
    def empty(tangents, y0, first_end, t0, t1):
        tdtype = jnp.result_type(float)
        size = _chunk_size(y0, tangents)
        d_now = d_tp = d_tn = None
        if tangents:
            # tprev = t0; tnext = first_end(t0, t1).
            eye = jnp.eye(2, dtype=tdtype)
            d_next = jax.vmap(lambda d: jax.jvp(first_end, (t0, t1), (d[0], d[1]))[1])(eye)
            d_now = jnp.stack([eye[0], d_next])
            d_tp = d_tn = jnp.zeros((size, 2), tdtype)
        return _Chunk(
            count=jnp.asarray(0, jnp.int64), tp=jnp.zeros((size,), tdtype),
            tn=jnp.full((size,), jnp.inf, tdtype),
            y=jnp.zeros((size,) + y0.shape, y0.dtype), d_now=d_now,
            d_tp=d_tp, d_tn=d_tn,
        )  # fmt: skip

    def add(self, keep, tp, tn, y, times, t1, t1_floor):
        """Record the step `(tp, tn)` from `y` where `keep`; carry the derivatives of the next
        step's times (`times(tp, tn, t1, t1_floor) -> (t_start, t_end)`)."""
        k = self.count

        def put(buf, value):
            return buf.at[k].set(jnp.where(keep, value, buf[k]))

        new = dict(
            count=k + keep.astype(k.dtype), tp=put(self.tp, tp), tn=put(self.tn, tn),
            y=put(self.y, y),
        )  # fmt: skip
        if self.d_now is not None:
            new["d_tp"] = put(self.d_tp, self.d_now[0])
            new["d_tn"] = put(self.d_tn, self.d_now[1])

            def tangent(j):  # the derivatives w.r.t. t0 (j = 0) and t1 (j = 1)
                d1 = jnp.asarray(j, t1.dtype)
                tangents = (self.d_now[0, j], self.d_now[1, j], d1, d1)
                return jnp.stack(jax.jvp(times, (tp, tn, t1, t1_floor), tangents)[1])

            new["d_now"] = jnp.stack([tangent(0), tangent(1)], axis=1)
        return dataclasses.replace(self, **new)


class _Record(eqx.Module):
    """A run's accepted steps (`integrate(..., record=K)`); index k is the k-th accepted step."""

    tp: jax.Array  # (M,) start times (M: max_steps rounded up to a multiple of the chunk and K)
    tn: jax.Array  # (M,) end times (inf past the last accepted step)
    y: object  # (M / K, n) start states of accepted steps 0, K, 2K, ..., or None (D = M)
    y_dense: jax.Array  # (D, n) start states of accepted steps 0 to D - 1
    d_tp: object  # (M, 2) d tp / d(t0, t1), or None
    d_tn: object  # (M, 2) d tn / d(t0, t1), or None


def _recorded_loop(cond, body, state, max_steps: int, every: int, dense: int):
    """The step loop (`body` recording into `state.rec`, a `_Chunk`) in chunks: each chunk of
    accepted steps runs in an inner loop on the chunk's small buffers, then is copied into the
    whole record (the states of the first `dense` steps, and every `every`-th). Returns
    `(final state, _Record)`."""
    chunk0 = state.rec
    size = chunk0.tp.shape[0]
    span = max(size, every)  # K is a multiple of the chunk
    total = -(-max_steps // span) * span
    tdtype = chunk0.tp.dtype
    tangents = chunk0.d_now is not None
    sparse = dense < total
    record = _Record(
        tp=jnp.zeros((total,), tdtype), tn=jnp.full((total,), jnp.inf, tdtype),
        y=jnp.zeros((total // every,) + state.y.shape, state.y.dtype) if sparse else None,
        y_dense=jnp.zeros((dense,) + state.y.shape, state.y.dtype),
        d_tp=jnp.zeros((total, 2), tdtype) if tangents else None,
        d_tn=jnp.zeros((total, 2), tdtype) if tangents else None,
    )  # fmt: skip
    per_state = every // size  # chunks per recorded state
    n_dense = dense // size  # chunks with every state recorded

    def running(s):
        return cond(s) & (s.num_steps < max_steps)

    def chunk_body(carry):
        s, rec, c = carry
        if sparse:
            k = c // per_state
            rec = dataclasses.replace(
                rec, y=rec.y.at[k].set(jnp.where(c % per_state == 0, s.y, rec.y[k]))
            )
        fresh = dataclasses.replace(
            s.rec, count=jnp.zeros_like(s.rec.count), tn=jnp.full_like(s.rec.tn, jnp.inf)
        )
        s = jax.lax.while_loop(
            lambda s: running(s) & (s.rec.count < size), body,
            dataclasses.replace(s, rec=fresh),
        )  # fmt: skip
        off = c * size

        def put(buf, part):
            return jax.lax.dynamic_update_slice_in_dim(buf, part, off, 0)

        new = dict(tp=put(rec.tp, s.rec.tp), tn=put(rec.tn, s.rec.tn))
        if sparse:  # past the dense part the chunk's states are dropped
            at = jnp.minimum(c, n_dense - 1) * size
            old = jax.lax.dynamic_slice_in_dim(rec.y_dense, at, size, 0)
            part = jnp.where(c < n_dense, s.rec.y, old)
            new["y_dense"] = jax.lax.dynamic_update_slice_in_dim(rec.y_dense, part, at, 0)
        else:
            new["y_dense"] = put(rec.y_dense, s.rec.y)
        if tangents:
            new["d_tp"] = put(rec.d_tp, s.rec.d_tp)
            new["d_tn"] = put(rec.d_tn, s.rec.d_tn)
        return s, dataclasses.replace(rec, **new), c + 1

    # Under `vmap` the chunk loop goes on while any member runs (an unbatched predicate): a
    # batched one would select each whole record buffer between old and new values at every
    # chunk (J2 day gradient, 8 members: 1.44 s against 0.37 s). A member that is done takes no
    # step and writes its (empty) chunks past its last accepted step, where nothing is read.
    final, record, _ = jax.lax.while_loop(
        lambda carry: eqxi.unvmap_any(running(carry[0])), chunk_body,
        (state, record, jnp.asarray(0, jnp.int64)),
    )  # fmt: skip
    return final, record


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
    when XLA compiles loops whole (`jaxsim._compilation._jit.loops_hoisted`, opt-in on the CPU);
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


def _dense_a(pair) -> np.ndarray:
    """The tableau's `a` as an `(s, s)` array (zeros past each row)."""
    amat = np.zeros((pair.stages, pair.stages))
    for i, row in enumerate(pair.a):
        amat[i, : len(row)] = row
    return amat


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
    unrolled = kw.get("unrolled", True)
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


def supports(solver, y0, adjoint) -> bool:
    """Whether `simulate`'s plain adaptive request runs here: a jaxsim pair, a state with a flat
    layout (one floating dtype) and an adjoint this core implements (None or `ForwardMode`)."""
    from .._solvers._ode import AbstractAdaptiveSolver

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
    from .._model._dynamic_object import AbstractDynamicObject, System

    if isinstance(model, System):
        return all(_identity_step_map(o) for o in model.objects)
    return type(model).step_map is AbstractDynamicObject.step_map


@jaxsim_jit
def run(
    model, y0, args, solver, t0, t1, ts, dt0, rtol, atol, max_steps, outputs, throw, jump_ts,
    loop, endpoints_only, progress=None, gains=DEFAULT_GAINS,
):  # fmt: skip
    """`simulate`'s adaptive run on this core (the counterpart of `jaxsim._drivers._plain._run_adaptive`,
    on the diffrax core)."""
    from .._model._layout import StateLayout
    from .._result._solution import finish, make_stats, zeros_counts

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
        unrolled=solver.unrolled, progress=progress, gains=gains,
    )  # fmt: skip
    if loop in ("sensitivity", "adjoint"):
        # The model's and args' arrays are the inputs the derivatives may be taken to.
        theta, static = eqx.partition((model, args), eqx.is_array)

        def f_theta(th, t, v):
            m, a = eqx.combine(th, static)
            return pack(m.drift(t, unpack(v), a))

        def map_theta(th, t, v):
            m, _ = eqx.combine(th, static)
            y, counts = m.step_map(t, unpack(v))
            return pack(y), counts

        tdtype = jnp.result_type(float)
        if loop == "adjoint":
            solve = integrate_adjoint
            map_theta = None if _identity_step_map(model) else map_theta
        else:
            solve = integrate_sensitive
        out = solve(
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
