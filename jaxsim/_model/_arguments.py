r"""Normalizations of `simulate`'s arguments, used by its request (`jaxsim._request._build`, where every
argument is checked) and by `jaxsim.jit` (documented in `simulate`):

- `y0`: integer and other-float leaves are cast to the dtype of `model.init_state()`'s leaf (a
  float32 or an int initial state runs in float64); Python numbers become arrays.
- numbers to arrays (`model_as_traced`, `args_as_traced`): Python floats in the model's
  (non-static) fields and in `args`, and lists of numbers in `args`, become arrays, so that `jit`
  traces them instead of treating them as compile-time constants: a sweep over a parameter set
  with `eqx.tree_at(..., 3.0)` then compiles once. Static fields (`eqx.field(static=True)`:
  names, counts, flags), bools and Python ints in `args` are left as they are; a Python int in a
  model's field becomes a float64 array where the class holding it, or the nearest enclosing
  object that declares it, sets `ints_are_parameters = True` (the effectors library's classes
  and jaxsim's signals: a non-static field there is always a parameter), and stays as it is
  otherwise (a user's own module, where an int may encode structure).
"""

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._dynamic_object import System
from ._validation import _fmt, is_concrete


def _number(x) -> bool:
    return isinstance(x, float | int | complex) and not isinstance(x, bool)


def _numeric_list(x) -> bool:
    # A (nested) list of Python numbers, e.g. a command vector given as [0.1, 0.0, 0.0].
    if not isinstance(x, list) or not x:
        return False
    return all(_number(e) or _numeric_list(e) for e in x)


def _float_leaf_to_array(x):
    if isinstance(x, float):
        return jnp.asarray(x, dtype=float)
    if isinstance(x, complex):
        return jnp.asarray(x, dtype=complex)
    return x


def _ints_are_parameters(root, path) -> bool:
    """Whether a Python int at `path` of `root` is a parameter (made a float64 array): the nearest
    object holding it (its own holder first, then outwards to `root`) whose class declares
    `ints_are_parameters` (`AbstractDynamicObject.ints_are_parameters`) decides; none: kept."""
    holders, obj = [root], root
    for k in path[:-1]:
        if isinstance(k, jtu.GetAttrKey):
            obj = getattr(obj, k.name)
        elif isinstance(k, jtu.DictKey):
            obj = obj[k.key]
        elif isinstance(k, jtu.SequenceKey):
            obj = obj[k.idx]
        else:
            break
        holders.append(obj)
    for holder in reversed(holders):
        flag = getattr(type(holder), "ints_are_parameters", None)
        if flag is not None:
            return bool(flag)
    return False


# The last model found to hold no Python numbers: `simulate` converts its model, then its jitted
# runner (`jaxsim.jit`) sees the same object again and skips the second pass over the leaves.
_LAST_CLEAN = [None]


def model_as_traced(model):
    """`model` with its Python number leaves (non-static fields only) as arrays.

    Floats (and complex numbers) anywhere become float64 (complex128) arrays. Python ints become
    float64 arrays where their holder declares `ints_are_parameters` (`_ints_are_parameters`: an
    int there is a parameter given as, e.g., `500` instead of `500.0`); elsewhere an int stays
    static (it may be a shape). Bools stay. Unchanged (the same object) when there is nothing to
    convert.
    """
    if model is _LAST_CLEAN[0]:
        return model
    leaves, treedef = jtu.tree_flatten(model)
    ints = any(isinstance(x, int) and not isinstance(x, bool) for x in leaves)
    if not ints and not any(isinstance(x, float | complex) for x in leaves):
        _LAST_CLEAN[0] = model
        return model
    if ints:
        with_path = jtu.tree_leaves_with_path(model)
        leaves = [
            jnp.asarray(x, dtype=float)
            if isinstance(x, int) and not isinstance(x, bool) and _ints_are_parameters(model, path)
            else x
            for path, x in with_path
        ]
    return jtu.tree_unflatten(treedef, [_float_leaf_to_array(x) for x in leaves])


def args_as_traced(args):
    """`args` with Python floats as float64 arrays and lists of numbers as arrays (ints kept)."""
    if args is None:
        return None

    def convert(x):
        if _numeric_list(x):
            arr = np.asarray(x)
            if arr.dtype.kind not in "iufc":  # ragged or mixed: leave it to the user's code
                return x
            return jnp.asarray(arr)
        return _float_leaf_to_array(x)

    leaves, treedef = jtu.tree_flatten(args, is_leaf=_numeric_list)
    if not any(isinstance(x, float | complex) or _numeric_list(x) for x in leaves):
        return args
    return jtu.tree_unflatten(treedef, [convert(x) for x in leaves])


# --------------------------------------------------------------------------------------------------
# State leaves against a reference (`simulate`'s `y0`, `jaxsim.validation.match_tree`)


def _kind(dtype) -> str:
    try:
        dtype = np.dtype(dtype)
    except TypeError:  # an extended dtype (a key): never cast
        return "x"
    if dtype == np.bool_:
        return "b"
    return dtype.kind  # i, u, f, c, ...


def match_tree(where: str, arg: str, value, expected, owner: str):
    """`value` checked leaf by leaf against `expected` (a tree of `jax.ShapeDtypeStruct`).

    Shapes must be equal. Dtypes: a leaf of another numeric kind that the expected dtype holds
    without losing its meaning (bool/int to float, float32 to float64, real to complex, int width)
    is cast; anything else (a float for an integer leaf, complex for real) is a `TypeError`.
    The structure must already match. `owner` names the reference, e.g. "`Spacecraft.init_state()`".

    **Returns:** `value` with cast leaves (Python numbers become arrays).
    """
    leaves, treedef = jtu.tree_flatten(value)
    exp_leaves = treedef.flatten_up_to(expected)
    out, changed = [], False
    for i, (leaf, exp) in enumerate(zip(leaves, exp_leaves)):
        python_number = isinstance(leaf, bool | int | float | complex)
        shape = tuple(leaf.shape if hasattr(leaf, "shape") else np.shape(leaf))
        if shape != tuple(exp.shape):
            raise ValueError(
                f"{where}: {_leaf_name(arg, value, i)} must have shape {tuple(exp.shape)} as in "
                f"{owner}; got shape {shape}" + (f" ({_fmt(leaf)})." if is_concrete(leaf) else ".")
            )
        dtype = leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
        want = exp.dtype
        if dtype == want and not python_number:
            out.append(leaf)
            continue
        have, need = _kind(dtype), _kind(want)
        if need not in _CASTABLE or have not in _CASTABLE[need]:
            raise TypeError(
                f"{where}: {_leaf_name(arg, value, i)} must have dtype {want} as in {owner}; got "
                f"{dtype}, which cannot be cast without changing its meaning."
            )
        out.append(jnp.asarray(leaf, dtype=want))
        changed = True
    return jtu.tree_unflatten(treedef, out) if changed else value


# Leaf kinds (numpy's `dtype.kind`, "b" for bool) that a state leaf of a kind holds without a change
# of meaning: bool and integers to float, float32 to float64, real to complex, a wider integer.
_CASTABLE = {"f": "biuf", "c": "biufc", "i": "biu", "u": "bu", "b": "b"}


def _leaf_name(arg: str, value, index: int) -> str:
    path = jtu.tree_flatten_with_path(value)[0][index][0]
    return f"`{arg}{jtu.keystr(path)}`"


# The last `_validity` result of a traced `(model, y0)`, by their identity, read once more: a
# `simulate` call reads the checks twice (refused at the call where concrete,
# `jaxsim._request._grid.check_physical`; kept in the program where traced, `jaxsim._result._validity`), and
# under `jax.grad` each evaluation is linearized op by op (15 % of the `combined` spacecraft's
# gradient trace).
_last_validity: list = [None]


def _validity(model, y0):
    """`{name: bool array}` of a model's physical checks (`model.validity(y0)`, an optional
    protocol of dynamic objects), a `System`'s objects' under their names."""
    last, _last_validity[0] = _last_validity[0], None
    if last is not None and last[0] is model and last[1] is y0:
        return dict(last[2])
    if all(is_concrete(x) for x in jtu.tree_leaves((model, y0))):
        return _validity_of(model, y0, "")
    # Traced: the checks are booleans, never differentiated; with the traced inputs' gradients
    # stopped, `jax.grad` stages their operations without linearizing them.
    stopped = jtu.tree_map(
        lambda x: x if is_concrete(x) else jax.lax.stop_gradient(x), (model, y0)
    )  # fmt: skip
    out = _validity_of(*stopped, "")
    _last_validity[0] = (model, y0, out)  # traced: immutable within this trace
    return dict(out)


def _validity_of(model, y0, prefix):
    out = {}
    if isinstance(model, System):
        for obj in model.objects:
            sub = y0.get(obj.name) if isinstance(y0, Mapping) else None
            out.update(_validity_of(obj, sub, f"{prefix}{obj.name}."))
        return out
    validity = getattr(model, "validity", None)
    if callable(validity):
        for k, v in validity(y0).items():
            out[prefix + k] = v
    return out
    validity = getattr(model, "validity", None)
    if callable(validity):
        for k, v in validity(y0).items():
            out[prefix + k] = v
    return out
