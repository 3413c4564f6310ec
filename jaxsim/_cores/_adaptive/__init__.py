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
on the J2 orbit, a Kepler e = 0.7 orbit and the spacecraft (`tests/engine/cores/test_adaptive_core.py`), and
with PI gains (0.2, 0.4) for Tsit5, Dopri5 and Dopri8 (`tests/engine/cores/test_pi_control.py`).

**Dense output** for samples `ts`: the pair's own interpolant (diffrax's interpolation classes:
Tsitouras's for Tsit5, Shampine's for Dopri5, the 7th-order one of Dopri8; Verner's 8th-order
one for Verner9, whose 4 extra stages are evaluated only in a step that holds a sample), evaluated
inside the step that contains each sample; samples do not cut steps. Events and clocks stay on
diffrax (`jaxsim._drivers._clocked`).

**Stages.** `unrolled=True` on the solver writes the stages out at trace
time (the drift traced once per stage: the fastest step for small drifts); `unrolled=False`
evaluates them in a `lax.fori_loop` over the tableau's rows (the drift traced once: small
programs, fast compiles); `unrolled=None` (the default of `Dopri8` and `Verner9`) chooses from
the drift's size at trace time (`jaxsim._solvers._ode.UNROLL_MAX_EQUATIONS`), and so does the
discrete adjoint's step VJP (`_staged_step_vjp`: looped stages take one drift VJP per stage in a
loop).

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

The core in parts: `_controller` (step-size control), `_stages` (the pair's stages), `_loop` (the step
loop, `integrate`), `_sensitivities` (forward sensitivities), `_record` and `_adjoint` (reverse
mode, `DiscreteAdjoint`), `_driver` (`run`); this package re-exports their names.
"""

from ._adjoint import (
    _dense as _dense,
    _slice as _slice,
    _staged_backward as _staged_backward,
    _staged_step_vjp as _staged_step_vjp,
    _step_states as _step_states,
    integrate_adjoint as integrate_adjoint,
)
from ._controller import (
    _END_ULPS as _END_ULPS,
    _PROGRESS_EVERY as _PROGRESS_EVERY,
    DEFAULT_GAINS as DEFAULT_GAINS,
    FACTOR_MAX as FACTOR_MAX,
    FACTOR_MIN as FACTOR_MIN,
    SAFETY as SAFETY,
    _neg_root as _neg_root,
    _next_after as _next_after,
    _prev_before as _prev_before,
    _rms as _rms,
    _ulps_before as _ulps_before,
    initial_step as initial_step,
)
from ._driver import (
    _MAX_STEPS_MESSAGE as _MAX_STEPS_MESSAGE,
    _identity_step_map as _identity_step_map,
    _one_inexact_dtype as _one_inexact_dtype,
    run as run,
    supports as supports,
)
from ._loop import _State as _State, integrate as integrate
from ._record import (
    _DENSE_BYTES as _DENSE_BYTES,
    _MAX_CHUNK as _MAX_CHUNK,
    _SMALL_BYTES as _SMALL_BYTES,
    RECORD_BYTES as RECORD_BYTES,
    DiscreteAdjoint as DiscreteAdjoint,
    _Chunk as _Chunk,
    _chunk_size as _chunk_size,
    _dense_steps as _dense_steps,
    _Record as _Record,
    _record_every as _record_every,
    _recorded_loop as _recorded_loop,
)
from ._sensitivities import (
    ForwardSensitivity as ForwardSensitivity,
    _is_zero as _is_zero,
    check_adjoint as check_adjoint,
    integrate_sensitive as integrate_sensitive,
    loop_kind as loop_kind,
)
from ._stages import (
    Pair as Pair,
    _combine as _combine,
    _dense_a as _dense_a,
    _stage_time as _stage_time,
    _stages_unrolled as _stages_unrolled,
    dense_stages as dense_stages,
    pair_of as pair_of,
    step_looped as step_looped,
    step_unrolled as step_unrolled,
)
