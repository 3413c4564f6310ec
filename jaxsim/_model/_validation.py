"""Construction-time validation helpers.

Every check raises ``ValueError`` with the form
``"<Class>: `<arg>` <expected> [unit]; got <value>."`` so that the message names the class, the
argument, its unit and the offending value. Value checks run only on concrete arrays: when a model is
built inside a traced function (e.g. `jax.grad` of a function that constructs it) the values are
tracers and only the shape checks apply. Use `eqx.tree_at` to change parameters of a validated model.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np


def is_concrete(x) -> bool:
    """True when `x` holds concrete values (not a tracer)."""
    return not isinstance(x, jax.core.Tracer)


def _fmt(value) -> str:
    if isinstance(value, jax.core.Tracer):
        return "<traced value>"
    arr = np.asarray(value)
    if arr.size > 12:
        return f"array of shape {arr.shape}"
    return np.array2string(arr, precision=10, separator=", ").replace("\n", "")


def _unit(unit: str) -> str:
    return f" [{unit}]" if unit else ""


def fail(cls: str, arg: str, expected: str, unit: str, value) -> None:
    """Raise the standard `ValueError`."""
    raise ValueError(f"{cls}: `{arg}` {expected}{_unit(unit)}; got {_fmt(value)}.")


def as_array(
    cls: str,
    arg: str,
    value,
    unit: str,
    shape: Sequence[int | None] | None = None,
    *,
    required: bool = True,
):
    """Convert to a float64 array, check it is present, finite and of the given shape.

    `shape` entries of `None` match any length.
    """
    if value is None:
        if required:
            raise ValueError(f"{cls}: `{arg}`{_unit(unit)} is required; got None.")
        return None
    try:
        arr = jnp.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{cls}: `{arg}` must be numeric{_unit(unit)}; got {value!r}.") from err
    if shape is not None:
        ok = arr.ndim == len(shape) and all(s is None or s == n for s, n in zip(shape, arr.shape))
        if not ok:
            want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ")"
            if len(shape) == 1:
                want = want[:-1] + ",)"
            raise ValueError(
                f"{cls}: `{arg}` must have shape {want}{_unit(unit)}; "
                f"got shape {tuple(arr.shape)} (value {_fmt(arr)})."
            )
    # Checks use numpy on concrete values: jnp ops inside a `jit` trace return tracers even on
    # constants, and a model may be built inside a traced function.
    if is_concrete(arr) and not np.all(np.isfinite(np.asarray(arr))):
        fail(cls, arg, "must be finite", unit, arr)
    return arr


def check_positive(cls: str, arg: str, arr, unit: str, *, allow_zero: bool = False):
    if arr is None or not is_concrete(arr):
        return arr
    a = np.asarray(arr)
    bad = np.any(a < 0) if allow_zero else np.any(a <= 0)
    if bool(bad):
        fail(cls, arg, "must be >= 0" if allow_zero else "must be > 0", unit, arr)
    return arr


def check_nonnegative(cls: str, arg: str, arr, unit: str):
    return check_positive(cls, arg, arr, unit, allow_zero=True)


def check_unit_vectors(cls: str, arg: str, arr, tol: float = 1e-9):
    """Rows (or the single vector) must have unit norm to `tol`."""
    if arr is None or not is_concrete(arr):
        return arr
    norms = np.linalg.norm(np.asarray(arr), axis=-1)
    if bool(np.any(np.abs(norms - 1.0) > tol)):
        fail(cls, arg, f"must be unit vector(s) (norm 1 to {tol:g}; norms {_fmt(norms)})", "-", arr)
    return arr


def check_inertia(cls: str, arg: str, arr, *, allow_singular: bool = False):
    """Symmetric and positive definite (semi-definite if `allow_singular`), kg m^2."""
    if arr is None or not is_concrete(arr):
        return arr
    mats = np.asarray(arr).reshape(-1, 3, 3)
    for m in mats:
        scale = max(np.max(np.abs(m)), 1e-300)
        if np.max(np.abs(m - m.T)) > 1e-12 * scale:
            fail(cls, arg, "must be symmetric", "kg m^2", arr)
        eig = np.linalg.eigvalsh(m)
        if allow_singular:
            if np.min(eig) < -1e-12 * scale:
                fail(cls, arg, "must be positive semi-definite", "kg m^2", arr)
        elif np.min(eig) <= 0:
            fail(cls, arg, f"must be positive definite (eigenvalues {_fmt(eig)})", "kg m^2", arr)
    return arr


def check_orthonormal(cls: str, arg: str, arr, tol: float = 1e-9):
    """Proper orthonormal 3x3 matrix (a DCM)."""
    if arr is None or not is_concrete(arr):
        return arr
    mats = np.asarray(arr).reshape(-1, 3, 3)
    for m in mats:
        if np.max(np.abs(m @ m.T - np.eye(3))) > tol or np.linalg.det(m) < 0:
            fail(cls, arg, f"must be a proper orthonormal DCM (to {tol:g})", "-", arr)
    return arr


def check_name(cls: str, arg: str, name) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls}: `{arg}` must be a non-empty string; got {name!r}.")
    return name


def check_unique_names(cls: str, arg: str, names: Sequence[str]) -> None:
    seen = set()
    dup = [n for n in names if n in seen or seen.add(n)]
    if dup:
        raise ValueError(
            f"{cls}: `{arg}` must have unique names; got duplicate name(s) "
            f"{sorted(set(dup))!r} in {list(names)!r}."
        )
