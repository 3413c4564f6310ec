r"""Per-unit parameters and commanded inputs of vectorized state effectors (N units in one effector).

A per-unit parameter of tail shape `tail` (e.g. `()`, `(3,)`, `(3, 3)`) is given either for every unit,
shape `(n, *tail)`, or once, shape `tail`, and then broadcast to all units. A commanded input (motor
torque, reference angle) is a constant of that kind, or a signal of time (`jaxsim.PiecewiseConstant`
or any callable `t -> array`) whose value is broadcast to `(n,)`.
"""

import jax.numpy as jnp
import numpy as np

from jaxsim.signals import AbstractSignal, evaluate
from jaxsim.validation import as_array


def unit_count(cls: str, arg: str, value) -> int:
    """Number of units, from the leading axis of `value` (a scalar means one unit)."""
    if value is None:
        raise ValueError(f"{cls}: `{arg}` is required; got None.")
    shape = np.shape(value)
    if len(shape) > 1:
        raise ValueError(f"{cls}: `{arg}` must have shape (n,) or (); got shape {shape}.")
    n = 1 if len(shape) == 0 else int(shape[0])
    if n < 1:
        raise ValueError(f"{cls}: `{arg}` must describe at least one unit; got shape {shape}.")
    return n


def per_unit(cls: str, arg: str, value, unit: str, n: int, tail=(), default=None):
    """A `(n, *tail)` float array from `value` of shape `(n, *tail)` or `tail` (broadcast)."""
    if value is None:
        if default is None:
            raise ValueError(f"{cls}: `{arg}` [{unit}] is required; got None.")
        value = default
    arr = as_array(cls, arg, value, unit)
    tail = tuple(tail)
    if arr.shape == tail:
        return jnp.broadcast_to(arr, (n,) + tail)
    if arr.shape != (n,) + tail:
        full = ", ".join(str(s) for s in (n,) + tail)
        one = "(" + ", ".join(str(s) for s in tail) + ("," if len(tail) == 1 else "") + ")"
        raise ValueError(
            f"{cls}: `{arg}` must have shape ({full}) or {one} (one value for all {n} units) "
            f"[{unit}]; got shape {tuple(arr.shape)}."
        )
    return arr


def is_signal(value) -> bool:
    return isinstance(value, AbstractSignal) or callable(value)


def unit_input(cls: str, arg: str, value, unit: str, n: int):
    """A commanded per-unit input: a signal is kept as is, a constant becomes an `(n,)` array."""
    if is_signal(value):
        return value
    return per_unit(cls, arg, value, unit, n, (), default=0.0)


def input_at(value, t, n: int):
    """Value of a per-unit input at time `t`, shape `(n,)`."""
    return jnp.broadcast_to(jnp.asarray(evaluate(value, t), dtype=float), (n,))


def command(args, name: str, key: str, default=None):
    """`args[name][key]` when present, else `default`: the one place where effectors read their
    commands (the user's `args`, or on a clocked run the view with the flight software's held
    outputs at their addresses, `jaxsim`'s `with_held`). `simulate` has checked the keys, shapes
    and tagged units against `init_commands()` and `units()["args"]`."""
    if isinstance(args, dict):
        sub = args.get(name)
        if isinstance(sub, dict):
            return sub.get(key, default)
    return default


def check_flags(cls: str, arg: str, value, n: int) -> tuple:
    """A static tuple of `n` Python bools from a bool or a sequence of bools."""
    if value is None:
        return (False,) * n
    if isinstance(value, bool | np.bool_):
        return (bool(value),) * n
    flags = tuple(value)
    if len(flags) != n or not all(isinstance(f, bool | np.bool_) for f in flags):
        raise ValueError(
            f"{cls}: `{arg}` must be a bool or a sequence of {n} bools (static flags); got {value!r}."
        )
    return tuple(bool(f) for f in flags)
