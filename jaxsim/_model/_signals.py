r"""Scheduled, time-dependent inputs (commands) evaluated inside the drift.

A signal is a pure function of time. Two conventions at a discontinuity $t_i$:

- `PiecewiseConstant` takes the **left limit** (the value on $(t_{i-1}, t_i]$ is $v_{i-1}$). Inside a
  step $[t_k, t_{k+1}]$ of the fixed-step driver every RK stage reads the value held over the step:
  the mean of the signal over the step, $\sum_i v_i\,|[t_k, t_{k+1}] \cap (t_i, t_{i+1}]| / h$. With
  switch times on the step grid that is the one value held over the step (Basilisk's zero-order
  hold: a command set at $t_k$ acts on $[t_k, t_{k+1}]$, never the next interval's value, also at
  the last stage); a switch inside a step weighs both values by their share of the step, so the
  integral of the input is exact and a (traced) switch time has its derivative. Adaptive solvers
  stop at the switch times (`jump_ts`) or, when they are traced, at segment boundaries
  (`simulate(..., discontinuities=[model])`).
- `Step`, `Ramp`, `PiecewiseTable`, `SquareWave`, `TriangleWave` are **right-continuous** (bdsim's
  convention). Given to `simulate(..., discontinuities=...)` their times become segment boundaries of
  the clocked driver, which evaluates the drift one ulp inside each segment, so both conventions
  give the left limit before an edge and the right limit after it.
"""

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from ._step_context import held_interval
from ._validation import as_array, check_positive, is_concrete


class AbstractSignal(eqx.Module):
    """A time-dependent input `u(t)`; subclasses implement `__call__` and `breakpoints`."""

    # A Python int in a signal's field is a value or a time, never a shape: traced as float64
    # (`jaxsim.AbstractDynamicObject.ints_are_parameters`).
    ints_are_parameters: ClassVar[bool] = True

    def __call__(self, t):
        raise NotImplementedError

    def breakpoints(self) -> tuple:
        return ()


def nan_unless_increasing(times, u):
    """`u`, or NaN when `times` are not increasing (the run then fails with a non-finite state):
    the in-program check of traced times, and of times an optimizer moved after construction."""
    if times.shape[0] < 2:
        return u
    return jnp.where(jnp.all(jnp.diff(times) > 0), u, jnp.nan)


def nan_at_nan_time(t, u):
    """`u`, or NaN where the time `t` is NaN: a held value or a table lookup (`searchsorted`
    places NaN after every time) would otherwise return its last value for a NaN time."""
    nan = jnp.isnan(jnp.asarray(t))
    return jnp.where(jnp.reshape(nan, nan.shape + (1,) * (jnp.ndim(u) - nan.ndim)), jnp.nan, u)


def time_points(times) -> tuple:
    """The entries of a 1-D array of times as a tuple (a signal's `breakpoints()`): NumPy scalars
    when `times` is concrete, so that they stay concrete inside a user's `jit` (indexing a JAX
    array there gives a tracer, and an adaptive run would refuse them as traced `jump_ts`)."""
    if is_concrete(times):
        times = np.asarray(times)
    return tuple(times[i] for i in range(times.shape[0]))


def check_increasing(cls, arg, times) -> None:
    """Refuse concrete non-increasing `times` [s] (traced ones are checked in the run)."""
    if not is_concrete(times):
        return
    if times.shape[0] > 1 and bool(np.any(np.diff(np.asarray(times)) <= 0)):
        raise ValueError(f"{cls}: `{arg}` [s] must be increasing; got {np.asarray(times)}.")


def held_value(times, values, t):
    r"""The value of the left-continuous piecewise-constant input (`times`, `values`) a drift call
    at `t` reads: inside a declared fixed step $[a, b]$ its mean over the step,
    $\sum_i v_i\,(c_{i+1} - c_i) / (b - a)$ with $c_i$ the switch time $t_i$ clipped to $[a, b]$
    ($c_0 = a$, $c_{n+1} = b$); outside a fixed step, the left limit at `t`.

    On the step grid the weights are exactly 1 and 0 (the held value, bit for bit). A switch time
    moves the run through the step that holds it on $[a, b)$: on a grid node, the step starting
    there (the steps tile the horizon exactly), so its derivative is counted once."""
    interval = held_interval()
    if interval is None:
        return nan_at_nan_time(t, values[jnp.searchsorted(times, t, side="left")])
    a, b = interval
    c = jnp.where(times < a, a, jnp.where(times < b, times, b))
    c = jnp.concatenate([jnp.reshape(a, (1,)), c, jnp.reshape(b, (1,))])
    w = jnp.diff(c) / (b - a)
    return nan_at_nan_time(t, jnp.tensordot(w, values, axes=1))


class PiecewiseConstant(AbstractSignal):
    r"""Held values: $u(t) = v_0$ for $t \le t_1$, $v_i$ for $t_i < t \le t_{i+1}$, $v_n$ after $t_n$.

    Every RK stage of a fixed step reads the value held over the step (never the next interval's,
    also at the last stage of a step ending on a switch); a switch inside a step counts with its
    share of the step (the module docstring). Constructible under `jit`/`grad`/`vmap`: concrete
    `times` are checked here, traced ones in the run (not increasing: the input is NaN and the run
    fails with a non-finite state).

    **Arguments:**

    - `times`: switch times $t_1 < \dots < t_n$ [s], shape `(n,)` (may be traced: a traced switch
      time is differentiable; see the guide "Controls").
    - `values`: the values, shape `(n + 1, ...)`.
    """

    times: jnp.ndarray
    values: jnp.ndarray

    def __init__(self, times: Float[ArrayLike, " n"], values: Float[ArrayLike, "n+1 ..."]):
        times = as_array("PiecewiseConstant", "times", times, "s")
        values = jnp.asarray(values, dtype=float)
        if times.ndim != 1:
            raise ValueError(
                f"PiecewiseConstant: `times` [s] must be 1-D; got shape {times.shape}."
            )
        if values.ndim < 1 or values.shape[0] != times.shape[0] + 1:
            raise ValueError(
                "PiecewiseConstant: `values` must have shape (len(times) + 1, ...); got "
                f"{values.shape} for {times.shape[0]} times."
            )
        check_increasing("PiecewiseConstant", "times", times)
        self.times = times
        self.values = values

    def __call__(self, t):
        u = held_value(self.times, self.values, t)
        return nan_unless_increasing(self.times, u)

    def breakpoints(self):
        return time_points(self.times)


def evaluate(signal_or_value, t):
    """Evaluate a signal at `t`, or return a constant as is."""
    if isinstance(signal_or_value, AbstractSignal) or callable(signal_or_value):
        return jnp.asarray(signal_or_value(t))
    return signal_or_value


def breakpoints_of(*items) -> tuple:
    out = []
    for it in items:
        if isinstance(it, AbstractSignal):
            out.extend(it.breakpoints())
    return tuple(out)


# --------------------------------------------------------------------------------------------------
# Sources with discontinuities at known times (bdsim STEP / RAMP / PIECEWISE / WAVEFORM).
#
# These are *right-continuous* at their edges (bdsim's convention: `u(T) = on` for a step): a
# value evaluated exactly at an edge time is the post-edge value. Inside a solve, jaxsim's clocked
# driver (`simulate(..., discontinuities=...)`, see `jaxsim/_drivers/_clocked/`) makes every edge a segment
# boundary and evaluates the drift at times clipped one ulp inside the open segment, so an RK
# stage at the end of the segment before an edge sees the left limit and a stage at the start of
# the segment after sees the right limit, whatever the signal's own convention at the edge.
# --------------------------------------------------------------------------------------------------


def _scalar_time(cls, arg, value):
    """A time [s], kept as a (possibly traced) 0-d array so that it can be differentiated."""
    return as_array(cls, arg, value, "s", ())


class Step(AbstractSignal):
    r"""A step: $u(t) = $ `off` for $t < T$, `on` for $t \ge T$ (right-continuous).

    **Arguments:**

    - `T`: step time [s]; may be a traced value (a differentiable burn start).
    - `off`, `on`: values before and after (scalars or arrays of one shape; any unit).

    **Assumptions and limitations:** `breakpoints()` returns `(T,)`; give the signal (or the model
    holding it) to `simulate(..., discontinuities=...)` so that `T` becomes a segment boundary.
    """

    T: jnp.ndarray
    off: jnp.ndarray
    on: jnp.ndarray

    def __init__(self, T: Float[ArrayLike, ""], off: ArrayLike = 0.0, on: ArrayLike = 1.0):
        self.T = _scalar_time("Step", "T", T)
        self.off = as_array("Step", "off", off, "")
        self.on = as_array("Step", "on", on, "")
        if self.off.shape != self.on.shape:
            raise ValueError(
                f"Step: `on` must have the shape of `off` {self.off.shape}; got {self.on.shape}."
            )

    def __call__(self, t):
        return nan_at_nan_time(t, jnp.where(t >= self.T, self.on, self.off))

    def breakpoints(self, t0=None, t1=None):
        return (self.T,)


class Ramp(AbstractSignal):
    r"""A ramp: $u(t) = \mathrm{off} + \mathrm{slope}\,\max(t - T, 0)$ (continuous, kink at $T$).

    **Arguments:**

    - `T`: ramp start [s] (may be traced).
    - `slope`: rate [unit/s]; `off`: value before `T`.
    """

    T: jnp.ndarray
    slope: jnp.ndarray
    off: jnp.ndarray

    def __init__(self, T: Float[ArrayLike, ""], slope: ArrayLike = 1.0, off: ArrayLike = 0.0):
        self.T = _scalar_time("Ramp", "T", T)
        self.slope = as_array("Ramp", "slope", slope, "1/s")
        self.off = as_array("Ramp", "off", off, "")

    def __call__(self, t):
        return self.off + self.slope * jnp.maximum(t - self.T, 0.0)

    def breakpoints(self, t0=None, t1=None):
        return (self.T,)


class PiecewiseTable(AbstractSignal):
    r"""Right-continuous piecewise-constant table: $u = v_0$ for $t < t_1$, $v_i$ on $[t_i, t_{i+1})$.

    Unlike `PiecewiseConstant` (left-continuous, for the plain fixed-step driver), this follows
    bdsim's PIECEWISE convention; inside the clocked driver both give the same solution.

    **Arguments:**

    - `times`: switch times $t_1 < \dots < t_n$ [s], shape `(n,)` (may be traced).
    - `values`: shape `(n + 1, ...)`.
    """

    times: jnp.ndarray
    values: jnp.ndarray

    def __init__(self, times: Float[ArrayLike, " n"], values: Float[ArrayLike, "n+1 ..."]):
        times = as_array("PiecewiseTable", "times", times, "s", (None,))
        values = jnp.asarray(values, dtype=float)
        if values.ndim < 1 or values.shape[0] != times.shape[0] + 1:
            raise ValueError(
                "PiecewiseTable: `values` must have shape (len(times) + 1, ...); got "
                f"{values.shape} for {times.shape[0]} times."
            )
        if is_concrete(times) and times.shape[0] > 1 and bool(jnp.any(jnp.diff(times) <= 0)):
            raise ValueError(f"PiecewiseTable: `times` [s] must be increasing; got {times}.")
        self.times = times
        self.values = values

    def __call__(self, t):
        i = jnp.searchsorted(self.times, t, side="right")
        return nan_at_nan_time(t, self.values[i])

    def breakpoints(self, t0=None, t1=None):
        return time_points(self.times)


def _periodic_edges(cls, freq, phase, fractions, t0, t1):
    """Edge times (phase + k + f)/freq in [t0, t1] for each fraction f, in float64, sorted."""
    if t0 is None or t1 is None:
        raise ValueError(
            f"{cls}: `breakpoints(t0, t1)` needs the horizon [s] of a periodic signal; "
            f"got t0={t0}, t1={t1}."
        )
    if not (is_concrete(freq) and is_concrete(phase)):
        raise ValueError(
            f"{cls}: `freq` and `phase` must be concrete to enumerate edges (their number fixes "
            "the shape of the run); got traced values."
        )
    f = float(freq)
    p = float(phase)
    k0 = int(np.floor(float(t0) * f - p)) - 1
    k1 = int(np.ceil(float(t1) * f - p)) + 1
    out = []
    for k in range(k0, k1 + 1):
        for frac in fractions:
            te = (p + k + frac) / f
            if float(t0) < te < float(t1):
                out.append(te)
    return tuple(sorted(out))


class SquareWave(AbstractSignal):
    r"""Square wave (bdsim WAVEFORM 'square'): $u = a\,s(t) + o$, $s = +1$ on $[r_k, f_k)$, else $-1$.

    Rising edges $r_k = (\phi + k)/f$, falling edges $f_k = (\phi + d + k)/f$ (phase $\phi$ in
    cycles, duty $d$). The value is decided by comparing $t$ with these same float64 edge times
    (not by a `mod` of $t f - \phi$), so it is exactly right-continuous at the declared edges.

    **Arguments:**

    - `freq` [Hz] > 0; `duty` in (0, 1); `phase` [cycles]; `amplitude`, `offset`.

    **Assumptions and limitations:** `freq`, `duty`, `phase` must be concrete for
    `breakpoints(t0, t1)` (the number of edges fixes the shape of the run).
    """

    freq: jnp.ndarray
    duty: jnp.ndarray
    phase: jnp.ndarray
    amplitude: jnp.ndarray
    offset: jnp.ndarray

    def __init__(
        self,
        freq: Float[ArrayLike, ""],
        duty: Float[ArrayLike, ""] = 0.5,
        phase: Float[ArrayLike, ""] = 0.0,
        amplitude: ArrayLike = 1.0,
        offset: ArrayLike = 0.0,
    ):
        self.freq = check_positive(
            "SquareWave", "freq", as_array("SquareWave", "freq", freq, "Hz", ()), "Hz"
        )
        self.duty = as_array("SquareWave", "duty", duty, "-", ())
        if is_concrete(self.duty) and not 0.0 < float(self.duty) < 1.0:
            raise ValueError(f"SquareWave: `duty` must be in (0, 1) [-]; got {float(self.duty)}.")
        self.phase = as_array("SquareWave", "phase", phase, "cycles", ())
        self.amplitude = as_array("SquareWave", "amplitude", amplitude, "")
        self.offset = as_array("SquareWave", "offset", offset, "")

    def __call__(self, t):
        def edge(k, frac):
            # The same float expression as `_periodic_edges` (k integer-valued).
            return (self.phase + k + frac) / self.freq

        k = jnp.floor(t * self.freq - self.phase)
        # Correct the cycle index so that r_k <= t < r_{k+1} holds with the float edge times.
        k = jnp.where(t < edge(k, 0.0), k - 1, k)
        k = jnp.where(t >= edge(k + 1, 0.0), k + 1, k)
        fall = edge(k, self.duty)
        s = jnp.where(t < fall, 1.0, -1.0)
        return self.amplitude * s + self.offset

    def breakpoints(self, t0=None, t1=None):
        return _periodic_edges("SquareWave", self.freq, self.phase, (0.0, float(self.duty)), t0, t1)


class TriangleWave(AbstractSignal):
    r"""Symmetric triangle wave: $u = a\,s(t) + o$, $s$ rising linearly from $-1$ at $r_k$ to $+1$
    half a period later and back (continuous; kinks at the extremes are breakpoints).

    **Arguments:** `freq` [Hz] > 0, `phase` [cycles], `amplitude`, `offset`.
    """

    freq: jnp.ndarray
    phase: jnp.ndarray
    amplitude: jnp.ndarray
    offset: jnp.ndarray

    def __init__(
        self,
        freq: Float[ArrayLike, ""],
        phase: Float[ArrayLike, ""] = 0.0,
        amplitude: ArrayLike = 1.0,
        offset: ArrayLike = 0.0,
    ):
        self.freq = check_positive(
            "TriangleWave", "freq", as_array("TriangleWave", "freq", freq, "Hz", ()), "Hz"
        )
        self.phase = as_array("TriangleWave", "phase", phase, "cycles", ())
        self.amplitude = as_array("TriangleWave", "amplitude", amplitude, "")
        self.offset = as_array("TriangleWave", "offset", offset, "")

    def __call__(self, t):
        x = t * self.freq - self.phase
        tau = x - jnp.floor(x)
        s = jnp.where(tau < 0.5, 4.0 * tau - 1.0, 3.0 - 4.0 * tau)
        return self.amplitude * s + self.offset

    def breakpoints(self, t0=None, t1=None):
        return _periodic_edges("TriangleWave", self.freq, self.phase, (0.0, 0.5), t0, t1)


def concrete_breakpoints(model) -> tuple:
    """The model's breakpoints as floats, for an adaptive solve that stops at them (`jump_ts`).

    Traced ones (switch times under `jit`/`grad`/`vmap`) are refused by name: `jump_ts` are fixed
    when the program is built, and a solve that does not stop at a switch time would give its
    derivative as zero. The segmented driver makes them (traced) segment boundaries."""
    out = []
    for b in type(model).breakpoints(model):
        if not is_concrete(b):
            raise ValueError(
                f"simulate: the breakpoints of {type(model).__name__} are traced (switch times "
                "of a signal or control under `jit`/`grad`/`vmap`); an adaptive solve stops at "
                "breakpoints given as concrete `jump_ts` only. Pass `discontinuities=[model]`: "
                "the run then ends segments at the traced times (differentiable)."
            )
        out.append(float(b))
    return tuple(out)
