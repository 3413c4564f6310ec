r"""Scheduled, time-dependent inputs (commands) evaluated inside the drift.

A signal is a pure function of time. At a discontinuity $t_i$ a signal takes its **left limit**:
the value on $(t_{i-1}, t_i]$ is $v_{i-1}$. Hence a fixed-step RK stage at the end of a step that ends
on $t_i$ still sees the value held over that step (Basilisk's zero-order hold: a command set at $t_k$
acts on $[t_k, t_{k+1}]$), and an adaptive solver gets $t_i$ as a `jump_ts` breakpoint.
"""

import equinox as eqx
import jax.numpy as jnp

from ._validation import as_array


class AbstractSignal(eqx.Module):
    """A time-dependent input `u(t)`; subclasses implement `__call__` and `breakpoints`."""

    def __call__(self, t):
        raise NotImplementedError

    def breakpoints(self) -> tuple:
        return ()


class PiecewiseConstant(AbstractSignal):
    r"""Held values: $u(t) = v_0$ for $t \le t_1$, $v_i$ for $t_i < t \le t_{i+1}$, $v_n$ after $t_n$.

    **Arguments:**

    - `times`: switch times $t_1 < \dots < t_n$ [s], shape `(n,)`.
    - `values`: the values, shape `(n + 1, ...)`.
    """

    times: jnp.ndarray
    values: jnp.ndarray

    def __init__(self, times, values):
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
        if times.shape[0] > 1 and bool(jnp.any(jnp.diff(times) <= 0)):
            raise ValueError(f"PiecewiseConstant: `times` [s] must be increasing; got {times}.")
        self.times = times
        self.values = values

    def __call__(self, t):
        i = jnp.searchsorted(self.times, t, side="left")
        return self.values[i]

    def breakpoints(self):
        return tuple(float(x) for x in self.times)


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
