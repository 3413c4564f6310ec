"""The request's scalar settings: times, tolerances, step-size controller gains, the solver and the key; the initial state."""

import dataclasses

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np

from .._model._arguments import match_tree
from .._model._dynamic_object import (
    AbstractDynamicObject,
    state_shapes,
)
from .._model._validation import _fmt, is_concrete
from .._solvers._ode import AbstractSolver
from ._horizon import check_horizon


# Relative tolerance for "this time lies on the step grid": well above float64 round-off of
# t/dt for horizons up to 1e9 steps, far below any meaningful step fraction.
GRID_RTOL = 1e-9


# --------------------------------------------------------------------------------------------------
# Times, tolerances, solver, key


def _scalar(name: str, value, unit: str):
    """Concrete `value` as a float64 numpy array, or None when traced or absent."""
    if value is None or not is_concrete(value):
        return None
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"simulate: `{name}` [{unit}] must be a real number; got {value!r}."
        ) from err


def _shown(arr) -> str:
    return repr(float(arr.reshape(-1)[0])) if arr.size == 1 else _fmt(arr)


# A fixed-step run needing more steps than this is refused up front (at ~10 us per step it would
# run for hours): the usual cause is a `dt` in the wrong unit.
MAX_FIXED_STEPS = 10**9


def _scalar_shape(name: str, value, unit: str) -> None:
    """`value` (concrete or traced) must be a scalar: a vector `t1` or `rtol` is refused by name."""
    if value is None or isinstance(value, int | float):
        return
    shape = getattr(value, "shape", None)
    if shape is None:
        try:
            shape = np.shape(value)
        except (TypeError, ValueError):
            return
    if tuple(shape) not in ((),):
        raise ValueError(
            f"simulate: `{name}` [{unit}] must be a scalar; got an array of shape {tuple(shape)}."
        )


def check_times(t0, t1, ts, dt, sample_dt) -> None:
    """`t0`, `t1` (`check_horizon`: the checks `shoot` and `simulate_phases` share), `dt`,
    `sample_dt` scalars and, with every entry of `ts`, finite (when given and concrete); a
    fixed-step horizon of more than `MAX_FIXED_STEPS` steps is refused."""
    check_horizon(t0, t1)
    for name, value in (("dt", dt), ("sample_dt", sample_dt)):
        _scalar_shape(name, value, "s")
        arr = _scalar(name, value, "s")
        if arr is not None and not np.all(np.isfinite(arr)):
            raise ValueError(f"simulate: `{name}` [s] must be finite; got {_shown(arr)}.")
    times = [_scalar(n, v, "s") for n, v in (("t0", t0), ("t1", t1), ("dt", dt))]
    if all(a is not None for a in times) and float(times[2]) > 0:
        n = abs(float(times[1]) - float(times[0])) / float(times[2])
        if n > MAX_FIXED_STEPS:
            raise ValueError(
                f"simulate: the run would take {n:.3g} steps of `dt`={float(times[2])!r} s over "
                f"[{float(times[0])!r}, {float(times[1])!r}] s (more than {MAX_FIXED_STEPS:.0e}: "
                "hours of run time); check the unit of `dt` or split the run."
            )
    if ts is not None and is_concrete(ts):
        try:
            arr = np.asarray(ts, dtype=float)
        except (TypeError, ValueError) as err:
            raise TypeError(f"simulate: `ts` [s] must be an array of times; got {ts!r}.") from err
        if not np.all(np.isfinite(arr)):
            bad = arr[~np.isfinite(arr)] if arr.ndim else arr
            raise ValueError(
                f"simulate: `ts` [s] must hold finite times; got non-finite {_fmt(bad)}."
            )


def check_tolerances(rtol, atol) -> None:
    """`rtol` [-] and `atol` [state units]: finite, >= 0 and not both 0 (when given, concrete)."""
    values = {}
    for name, value, unit in (("rtol", rtol, "-"), ("atol", atol, "state units")):
        _scalar_shape(name, value, unit)
        arr = _scalar(name, value, unit)
        if arr is None:
            continue
        if not np.all(np.isfinite(arr) & (arr >= 0)):
            raise ValueError(
                f"simulate: `{name}` [{unit}] must be finite and >= 0; got {_shown(arr)}."
            )
        values[name] = float(arr.reshape(-1)[0]) if arr.size == 1 else None
    if values.get("rtol") == 0.0 and values.get("atol") == 0.0:
        raise ValueError(
            "simulate: `rtol` [-] and `atol` [state units] must not both be 0 (no step would "
            "ever be accepted); got rtol=0.0, atol=0.0."
        )


def check_gains(pcoeff, icoeff, dcoeff=0.0) -> tuple:
    """`PIDController(pcoeff, icoeff, dcoeff)` [-]: concrete finite scalars, `pcoeff >= 0`,
    `icoeff > 0`, `dcoeff >= 0`; returned as Python floats (static: part of the compiled program),
    `(pcoeff, icoeff)` without a D term (the PI controller's form, bit for bit), else all three."""
    gains = []
    for name, value, ok, rule in (
        ("pcoeff", pcoeff, lambda x: x >= 0, ">= 0"),
        ("icoeff", icoeff, lambda x: x > 0, "> 0"),
        ("dcoeff", dcoeff, lambda x: x >= 0, ">= 0"),
    ):
        try:
            x = float(np.asarray(value, dtype=float).item())
        except (
            TypeError, ValueError, jax.errors.ConcretizationTypeError,
            jax.errors.TracerArrayConversionError,
        ) as err:  # fmt: skip
            raise ValueError(
                f"simulate: `PIDController({name}=...)` [-] must be a concrete scalar (it is part "
                f"of the compiled program); got {value!r}."
            ) from err
        if not (np.isfinite(x) and ok(x)):
            raise ValueError(
                f"simulate: `PIDController({name}=...)` [-] must be finite and {rule}; got {x!r}."
            )
        gains.append(x)
    return tuple(gains[:2]) if gains[2] == 0 else tuple(gains)


@dataclasses.dataclass(frozen=True)
class Controller:
    """The step-size controller of an adaptive request, converted once (`build_request`):
    `rtol`, `atol` as float64 arrays (arguments of the compiled programs, so a sweep over
    tolerances compiles once; a Python float would be a constant of the program) and `gains`,
    the checked `(pcoeff, icoeff)` as static Python floats (they shape the program: the default
    `(0, 1)` is the square-root fast path)."""

    rtol: np.ndarray
    atol: np.ndarray
    gains: tuple

    @classmethod
    def of(cls, rtol, atol, gains) -> "Controller":
        def array(x):
            return np.asarray(float(x), dtype=np.float64)

        return cls(array(rtol), array(atol), tuple(gains))


def check_solver(solver) -> None:
    """A jaxsim or diffrax solver *instance* (a class gets "pass `js.RK4()`")."""
    if isinstance(solver, type) and issubclass(solver, AbstractSolver | dfx.AbstractSolver):
        where = "js" if issubclass(solver, AbstractSolver) else "diffrax"
        raise TypeError(
            f"simulate: `solver` must be a solver instance; got the class {solver.__name__}: "
            f"pass `{where}.{solver.__name__}()`."
        )
    if not isinstance(solver, AbstractSolver | dfx.AbstractSolver):
        raise TypeError(
            "simulate: `solver` must be a jaxsim solver (`js.RK4()`, `js.Tsit5()`, "
            "`js.EulerMaruyama()`, ...) or a diffrax solver instance; got "
            f"{type(solver).__name__} ({_short(solver)})."
        )


def _short(value, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def check_key(key):
    """`key` as given (a `jax.random.key` or a raw `PRNGKey`), or an int seed as a key.

    A traced integer scalar (a seed under `vmap`) is converted too. Anything else is refused.
    """
    if key is None:
        return None
    if isinstance(key, bool) or isinstance(key, np.bool_):
        raise TypeError(
            f"simulate: `key` must be a jax.random key (`jax.random.key(seed)`) or an int seed; "
            f"got {key!r}."
        )
    if isinstance(key, int | np.integer):
        try:
            return jax.random.key(int(key))
        except (OverflowError, ValueError, TypeError) as err:
            raise ValueError(
                f"simulate: `key` as an int seed must fit in 64 bits; got {int(key)}."
            ) from err
    dtype = getattr(key, "dtype", None)
    shape = np.shape(key)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        if shape != ():
            raise ValueError(
                f"simulate: `key` must be a single key (shape ()); got a key array of shape "
                f"{shape}: `jax.vmap` over the keys for an ensemble."
            )
        return key
    if dtype is not None and np.dtype(dtype) == np.uint32 and len(shape) == 1:
        return key  # a raw key of `jax.random.PRNGKey` (legacy format)
    if dtype is not None and jnp.issubdtype(dtype, jnp.integer) and shape == ():
        return jax.random.key(key)  # a seed array, e.g. traced under vmap
    what = f"array of shape {shape} and dtype {dtype}" if dtype is not None else _short(key)
    raise TypeError(
        "simulate: `key` must be a jax.random key (`jax.random.key(seed)` or "
        f"`jax.random.PRNGKey(seed)`) or an int seed; got {type(key).__name__}: {what}."
    )


# --------------------------------------------------------------------------------------------------
# Initial state


def check_y0(model: AbstractDynamicObject, y0, key=None):
    """`y0` against `model.init_state()`: its structure, then every leaf's shape and dtype."""
    expected = state_shapes(model, y0, key=key)
    return match_tree("simulate", "y0", y0, expected, f"`{type(model).__name__}.init_state()`")
