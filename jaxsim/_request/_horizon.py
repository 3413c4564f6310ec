"""The concrete-time checks of every run: `simulate`, `jaxsim.optimize.shoot`, `jaxsim.phases`."""

import numpy as np

from .._model._validation import is_concrete


def _value(caller: str, name: str, value):
    """Concrete `value` [s] as a float, None when absent or traced; a non-scalar or a value that
    is not a real number is refused."""
    if value is None:
        return None
    shape = np.shape(value) if not hasattr(value, "shape") else tuple(value.shape)
    if shape != ():
        raise ValueError(
            f"{caller}: `{name}` [s] must be a scalar; got an array of shape {tuple(shape)}."
        )
    if not is_concrete(value):
        return None
    try:
        return float(np.asarray(value, dtype=float))
    except (TypeError, ValueError) as err:
        raise TypeError(f"{caller}: `{name}` [s] must be a real number; got {value!r}.") from err


def check_horizon(t0, t1, caller: str = "simulate") -> None:
    """`t0`, `t1` [s]: scalars, finite, and `t1 > t0` where both are concrete (traced ones are
    checked in the run: `RESULTS.invalid_times`). `None` is skipped (`t1` when `ts` gives it)."""
    values = {}
    for name, value in (("t0", t0), ("t1", t1)):
        v = _value(caller, name, value)
        if v is not None and not np.isfinite(v):
            raise ValueError(f"{caller}: `{name}` [s] must be finite; got {v!r}.")
        values[name] = v
    a, b = values["t0"], values["t1"]
    if a is not None and b is not None and not b > a:
        raise ValueError(f"{caller}: `t1` [s] must be > t0={a}; got {b}.")
