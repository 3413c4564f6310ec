r"""Control parameterizations: open-loop inputs $u(t)$ given by a finite set of (traced) parameters.

A control is a signal (`jaxsim.signals.AbstractSignal`): pass it where an effector takes a signal of
time (an external torque, a wheel motor torque, a thruster throttle, a MuJoCo `ctrl`), and
optimize its parameters through `jax.grad` of a run. Four parameterizations:

- `PiecewiseConstant` (`jaxsim.signals`): values held over intervals (zero-order hold).
- `PiecewiseLinear`: linear between knots, continuous.
- `CubicSpline`: the natural cubic spline through the knots, twice continuously differentiable.
- `SwitchingTimes`: a bang-bang input alternating between two levels at (traced) switch times.

Every one is constructible inside `jit`/`grad`/`vmap`: concrete knots and switch times are checked
at construction (increasing, else a `ValueError` naming the class and argument); traced ones are
checked in the run (not increasing: the input is NaN and the run fails with a non-finite state).
Each is differentiable with respect to its values and its times.

The held inputs (`PiecewiseConstant`, `SwitchingTimes`) give every RK stage of a fixed step the
value held over the step (the mean over the step when a switch falls inside it; see
`jaxsim.signals`), and their switch times are breakpoints: adaptive solvers stop there, through
`jump_ts` when concrete and through segment boundaries (`simulate(..., discontinuities=[model])`)
when traced. The continuous ones are evaluated at the stage time itself; `PiecewiseLinear`'s knots
(kinks) are breakpoints, `CubicSpline` has none (its third derivative alone jumps at knots).

The natural cubic spline: de Boor, *A Practical Guide to Splines* (Springer, 1978), ch. IV.
"""

import jax.numpy as jnp
from jaxtyping import ArrayLike, Float

from ._signals import (
    AbstractSignal,
    check_increasing,
    held_value,
    nan_unless_increasing,
    time_points,
)
from ._validation import as_array


def _knots_and_values(cls, knots, values, min_knots):
    knots = as_array(cls, "knots", knots, "s", (None,))
    values = jnp.asarray(values, dtype=float)
    if knots.shape[0] < min_knots:
        raise ValueError(
            f"{cls}: `knots` [s] needs at least {min_knots} times; got {knots.shape[0]}."
        )
    if values.ndim < 1 or values.shape[0] != knots.shape[0]:
        raise ValueError(
            f"{cls}: `values` must have shape (len(knots), ...); got {values.shape} for "
            f"{knots.shape[0]} knots."
        )
    check_increasing(cls, "knots", knots)
    return knots, values


def _interval(knots, t):
    """Index i of the knot interval [t_i, t_{i+1}] holding `t` (clamped to the first and last)."""
    return jnp.clip(jnp.searchsorted(knots, t, side="right") - 1, 0, knots.shape[0] - 2)


class PiecewiseLinear(AbstractSignal):
    r"""Linear interpolation between knots: $u(t) = v_i + (v_{i+1} - v_i)(t - t_i)/(t_{i+1} - t_i)$
    on $[t_i, t_{i+1}]$; $v_0$ before $t_0$, $v_{n-1}$ after $t_{n-1}$.

    **Arguments:**

    - `knots`: times $t_0 < \dots < t_{n-1}$ [s], shape `(n,)`, $n \ge 2$ (may be traced).
    - `values`: the values at the knots, shape `(n, ...)` (any unit; may be traced).

    **Assumptions and limitations:** continuous, with kinks at the knots: `breakpoints()` returns
    the knots (adaptive solvers stop there; traced knots need `discontinuities=[model]`).
    """

    knots: jnp.ndarray
    values: jnp.ndarray

    def __init__(self, knots: Float[ArrayLike, " n"], values: Float[ArrayLike, "n ..."]):
        self.knots, self.values = _knots_and_values("PiecewiseLinear", knots, values, 2)

    def __call__(self, t):
        i = _interval(self.knots, t)
        t0, t1 = self.knots[i], self.knots[i + 1]
        s = jnp.clip((t - t0) / (t1 - t0), 0.0, 1.0)
        s = jnp.reshape(s, s.shape + (1,) * (self.values.ndim - 1))
        u = self.values[i] + s * (self.values[i + 1] - self.values[i])
        return nan_unless_increasing(self.knots, u)

    def breakpoints(self):
        return time_points(self.knots)


class CubicSpline(AbstractSignal):
    r"""The natural cubic spline through $(t_i, v_i)$: cubic on each $[t_i, t_{i+1}]$, $C^2$, with
    zero second derivative at both ends, and extended linearly outside $[t_0, t_{n-1}]$ (so $C^2$
    everywhere).

    With $h_i = t_{i+1} - t_i$ and the second derivatives $M_i$ (natural: $M_0 = M_{n-1} = 0$),
    $h_{i-1} M_{i-1} + 2 (h_{i-1} + h_i) M_i + h_i M_{i+1}
    = 6 [(v_{i+1} - v_i)/h_i - (v_i - v_{i-1})/h_{i-1}]$ (de Boor 1978, ch. IV), solved in the
    program, so values and knots may be traced and are differentiated through.

    **Arguments:**

    - `knots`: times $t_0 < \dots < t_{n-1}$ [s], shape `(n,)`, $n \ge 2$ (may be traced).
    - `values`: the values at the knots, shape `(n, ...)` (any unit; may be traced).

    **Assumptions and limitations:** no breakpoints (only the third derivative jumps at knots),
    so every solver runs it with traced knots as it is.
    """

    knots: jnp.ndarray
    values: jnp.ndarray

    def __init__(self, knots: Float[ArrayLike, " n"], values: Float[ArrayLike, "n ..."]):
        self.knots, self.values = _knots_and_values("CubicSpline", knots, values, 2)

    def _second_derivatives(self):
        n = self.knots.shape[0]
        v = self.values.reshape(n, -1)
        if n == 2:
            return jnp.zeros_like(v)
        h = jnp.diff(self.knots)
        slope = jnp.diff(v, axis=0) / h[:, None]
        rhs = 6.0 * jnp.diff(slope, axis=0)
        # Interior rows i = 1 .. n-2 of the tridiagonal system (M_0 = M_{n-1} = 0).
        main = 2.0 * (h[:-1] + h[1:])
        off = h[1:-1]
        a = jnp.diag(main) + jnp.diag(off, 1) + jnp.diag(off, -1)
        m = jnp.linalg.solve(a, rhs)
        zero = jnp.zeros((1, v.shape[1]))
        return jnp.concatenate([zero, m, zero])

    def __call__(self, t):
        n = self.knots.shape[0]
        v = self.values.reshape(n, -1)
        m = self._second_derivatives()
        i = _interval(self.knots, t)
        t0, t1 = self.knots[i], self.knots[i + 1]
        h = t1 - t0
        # Inside [t_0, t_{n-1}] the cubic; outside, its tangent line at the end (M = 0 there).
        tc = jnp.clip(t, self.knots[0], self.knots[-1])
        a, b = (t1 - tc) / h, (tc - t0) / h
        u = a * v[i] + b * v[i + 1] + ((a**3 - a) * m[i] + (b**3 - b) * m[i + 1]) * h**2 / 6.0
        du = (v[i + 1] - v[i]) / h + h * (
            (3.0 * b**2 - 1.0) * m[i + 1] - (3.0 * a**2 - 1.0) * m[i]
        ) / 6.0
        u = u + (t - tc) * du
        u = u.reshape(self.values.shape[1:])
        return nan_unless_increasing(self.knots, u)


class SwitchingTimes(AbstractSignal):
    r"""A bang-bang input: `levels[0]` up to the first switch time, then `levels[1]`, `levels[0]`,
    ... alternating at each switch (left-continuous, held like `PiecewiseConstant`).

    The switch times are the decision variables: traced, they are differentiable on every solver
    (fixed step: the step holding a switch weighs both levels by their share of the step, the
    exact integral of the input; adaptive: pass `discontinuities=[model]`, segments then end at
    the switch times; without it an adaptive run with traced switch times is refused by name).

    **Arguments:**

    - `times`: switch times $t_1 < \dots < t_n$ [s], shape `(n,)` (may be traced).
    - `levels`: the two levels, shape `(2, ...)` (e.g. `[u_max, -u_max]`; any unit).
    """

    times: jnp.ndarray
    levels: jnp.ndarray

    def __init__(self, times: Float[ArrayLike, " n"], levels: Float[ArrayLike, "2 ..."]):
        self.times = as_array("SwitchingTimes", "times", times, "s", (None,))
        levels = jnp.asarray(levels, dtype=float)
        if levels.ndim < 1 or levels.shape[0] != 2:
            raise ValueError(
                f"SwitchingTimes: `levels` must have shape (2, ...); got {levels.shape}."
            )
        self.levels = levels
        check_increasing("SwitchingTimes", "times", self.times)

    def __call__(self, t):
        n = self.times.shape[0]
        values = self.levels[jnp.arange(n + 1) % 2]
        u = held_value(self.times, values, t)
        return nan_unless_increasing(self.times, u)

    def breakpoints(self):
        return time_points(self.times)
