r"""Checks of `simulate`'s arguments at the call, before anything is traced.

Each check raises `ValueError` (a bad value) or `TypeError` (a wrong kind of object) whose message
starts with "simulate:" and names the argument, its unit and the value. Values are only checked when
they are concrete: under a user's `jit`/`vmap`/`grad` the traced ones keep their shape and dtype
checks only.

What the checks also normalize (documented in `simulate`):

- `key`: an int seed becomes `jax.random.key(seed)`.
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

import diffrax as dfx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._dynamic_object import (
    AbstractDynamicObject,
    ArrayCommand,
    System,
    state_shapes,
    structure_key,
)
from ._solvers import AbstractSolver
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
    """`t0`, `t1`, `dt`, `sample_dt` scalars and, with every entry of `ts`, finite (when given
    and concrete); a fixed-step horizon of more than `MAX_FIXED_STEPS` steps is refused."""
    for name, value in (("t0", t0), ("t1", t1), ("dt", dt), ("sample_dt", sample_dt)):
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


def check_y0(model: AbstractDynamicObject, y0, key=None):
    """`y0` against `model.init_state()`: its structure, then every leaf's shape and dtype."""
    expected = state_shapes(model, y0, key=key)
    return match_tree("simulate", "y0", y0, expected, f"`{type(model).__name__}.init_state()`")


# --------------------------------------------------------------------------------------------------
# Commands in `args`


def _normalized(spec) -> dict:
    # `{address: {key: shape or None}}`; a sequence of keys stands for unknown shapes; an
    # `ArrayCommand` is an address read as one array.
    out = {}
    for address, keys in spec.items():
        if isinstance(keys, ArrayCommand):
            out[address] = ArrayCommand(None if keys.shape is None else tuple(keys.shape))
        elif isinstance(keys, Mapping):
            out[address] = {k: None if s is None else tuple(s) for k, s in keys.items()}
        else:
            out[address] = dict.fromkeys(keys)
    return out


def _check_entry(where: str, label: str, address, entry, keys: dict, what: str) -> None:
    """One address of `args` (or of held outputs) against the keys the model reads there.

    `where` starts the message ("simulate: " and, for held outputs, who writes them)."""
    name = f"{label}[{address!r}]"
    if isinstance(keys, ArrayCommand):
        _check_array_entry(where, name, entry, keys.shape, what)
        return
    if not isinstance(entry, Mapping):
        raise ValueError(
            f"{where}`{name}` must be a dict of commands {{key: array}} for {what}; got "
            f"{type(entry).__name__}. Valid keys: {sorted(keys)!r}."
        )
    unknown = [k for k in entry if k not in keys]
    if unknown:
        raise ValueError(
            f"{where}`{name}` has unknown command key(s) {sorted(map(str, unknown))!r} (they "
            f"would be ignored); {what} reads {sorted(keys)!r}."
        )
    for k, value in entry.items():
        _check_shape(where, f"{name}[{k!r}]", value, keys[k], what)


def _check_array_entry(where: str, name: str, entry, want, what: str) -> None:
    """An address read as one array (`ArrayCommand`): not a dict, and broadcasting to `want`."""
    if want is not None and isinstance(entry, Mapping):
        raise ValueError(
            f"{where}`{name}` must be an array of shape {tuple(want)} for {what}; got a dict "
            f"with keys {sorted(map(str, entry))!r}."
        )
    _check_shape(where, name, entry, want, what)


def _check_shape(where: str, name: str, value, want, what: str) -> None:
    """`value`'s shape broadcasts to `want` (None: any shape), else a ValueError naming `name`."""
    if want is None:
        return
    shape = tuple(np.shape(value))
    try:
        ok = np.broadcast_shapes(shape, want) == tuple(want)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{where}`{name}` must have shape {tuple(want)} (or one that broadcasts to it) for "
            f"{what}; got shape {shape}."
        )


def _effector_word(address, keys=None) -> str:
    if isinstance(keys, ArrayCommand):
        return f"the command {address!r}"
    return f"effector {address!r}"


def check_commands(model, args, *, others_read_args: bool, key=None) -> None:
    """Commands in `args` against what `model` declares it reads (`command_spec()`).

    An address the model declares: unknown keys and wrong shapes are errors. An unknown top-level
    key is an error only when the model reads nothing else (`reads_only_commands`) and nothing
    else reads `args` (`others_read_args`: discrete models or events are given). A `System` routes
    `args[name]` to its object `name`, as `System.drift` does.
    """
    _check_commands(model, args, "args", others_read_args, key)


def _check_commands(model, args, label: str, others_read_args: bool, key=None) -> None:
    if not isinstance(args, Mapping):
        if isinstance(args, list | tuple) and _spec(model, key)[0] is not None:
            raise TypeError(
                f"simulate: `{label}` must be a dict of commands keyed by effector name (the "
                f"model reads `{label}[name][command]`); got a {type(args).__name__}, which "
                "no effector would read."
            )
        return
    if isinstance(model, System):
        names = {o.name for o in model.objects}
        for o in model.objects:
            if o.name in args:
                _check_commands(o, args[o.name], f"{label}[{o.name!r}]", others_read_args)
        shared = [o for o in model.objects if o.name not in args]
        if not shared:
            unknown = [k for k in args if k not in names]
            if unknown and model.reads_only_commands and not others_read_args:
                raise ValueError(
                    f"simulate: `{label}` has unknown key(s) {sorted(map(str, unknown))!r} (they "
                    f"would be ignored); System {model.name!r} routes {sorted(names)!r}."
                )
            return
        rest = {k: v for k, v in args.items() if k not in names}
        _check_flat(System(shared, name=model.name), rest, label, others_read_args, names)
        return
    _check_flat(model, args, label, others_read_args, set(), key)


# `(normalized command spec, reads_only_commands)` per model structure (`structure_key`): the spec
# depends on names and unit counts only, and walking the effectors costs about 0.1 ms per call.
_SPECS: dict = {}


def _spec(model, key=None):
    key = structure_key(model) if key is None else key
    if key is not None and key in _SPECS:
        return _SPECS[key]
    spec = model.command_spec()
    entry = (None if spec is None else _normalized(spec), bool(model.reads_only_commands))
    if key is not None:
        if len(_SPECS) >= 256:
            _SPECS.clear()
        _SPECS[key] = entry
    return entry


def _check_flat(model, args, label, others_read_args, routed, key=None) -> None:
    spec, reads_only = _spec(model, key)
    if spec is None:
        return
    for address, entry in args.items():
        if address in spec:
            _check_entry(
                "simulate: ",
                label,
                address,
                entry,
                spec[address],
                _effector_word(address, spec[address]),
            )
    unknown = [k for k in args if k not in spec and k not in routed]
    if unknown and reads_only and not others_read_args:
        raise ValueError(
            f"simulate: `{label}` has unknown address(es) {sorted(map(str, unknown))!r} (they "
            f"would be ignored); `model` {type(model).__name__} {model.name!r} reads commands "
            f"at {sorted(spec)!r} only."
        )


def _merged(args, held):
    out = {} if not isinstance(args, Mapping) else dict(args)
    for h in held.values():
        if isinstance(h, Mapping):
            out.update(h)
    return out


def _held_shapes(models, t0, y0, args) -> dict:
    """`{model name: held outputs as ShapeDtypeStructs}` of the discrete models (`eval_shape` of
    `update`; a model whose outputs cannot be inferred this way is left out)."""
    held = {}
    for _ in range(len(models) + 1):
        missing = [m for m in models if m.name not in held]
        if not missing:
            break
        for m in missing:

            def probe(y, a, m=m):
                return m.update(jnp.asarray(t0, dtype=float), y, m.init_state(), a)[1]

            try:
                held[m.name] = jax.eval_shape(probe, y0, _merged(args, held))
            except Exception:  # noqa: BLE001 - not inferable here; the hybrid driver reports it
                continue
    return held


def check_held_commands(model, clocks, t0, y0, args, key=None) -> None:
    """Held outputs of discrete models (flight software) that address the model's effectors.

    An address that the model declares is checked as `args` is (unknown keys, shapes). An address a
    discrete model declares as a command for the model's effectors (`command_addresses`, e.g.
    `RWAttitudeFSW`'s `wheels`) must exist in the model when the model reads commands only.
    """
    from ._clocks import AbstractDiscreteModel

    models = tuple(m for m in clocks if isinstance(m, AbstractDiscreteModel))
    if not models:
        return
    spec, reads_only = _spec(model, key)
    if spec is None:
        return
    for m in models:
        declared = tuple(getattr(m, "command_addresses", ()))
        missing = [a for a in declared if a not in spec]
        if missing and reads_only:
            raise ValueError(
                f"simulate: discrete model {m.name!r} writes commands to "
                f"{', '.join(f'`args[{x!r}]`' for x in missing)}, but `model` "
                f"{type(model).__name__} {model.name!r} has no such effector (they would be "
                f"ignored); it reads commands at {sorted(spec)!r}."
            )
    held = _held_shapes(models, t0, y0, args)
    names = {m.name for m in models}
    for m in models:
        h = held.get(m.name)
        if not isinstance(h, Mapping):
            continue
        for address, entry in h.items():
            if address in spec and address not in names:
                _check_entry(
                    f"simulate: held output of discrete model {m.name!r}: ",
                    "args",
                    address,
                    entry,
                    spec[address],
                    _effector_word(address, spec[address]),
                )


# --------------------------------------------------------------------------------------------------
# All of them


def _validity(model, y0, prefix=""):
    """`{name: bool array}` of a model's physical checks (`model.validity(y0)`, an optional
    protocol of dynamic objects), a `System`'s objects' under their names."""
    out = {}
    if isinstance(model, System):
        for obj in model.objects:
            sub = y0.get(obj.name) if isinstance(y0, Mapping) else None
            out.update(_validity(obj, sub, f"{prefix}{obj.name}."))
        return out
    validity = getattr(model, "validity", None)
    if callable(validity):
        for k, v in validity(y0).items():
            out[prefix + k] = v
    return out


def check_physical(model, y0) -> None:
    """A concrete model whose physical checks fail (e.g. a hub mass set to a negative value with
    `eqx.tree_at`, a fuel load above the tank's maximum in `y0`) is refused, naming the quantities.

    Traced values are left to the model: they fail the run in the program (e.g. `Spacecraft`
    makes its derivative NaN: `nonfinite_state`)."""
    checks = _validity(model, y0)
    bad = [k for k, v in checks.items() if is_concrete(v) and not bool(np.all(np.asarray(v)))]
    if bad:
        raise ValueError(
            f"simulate: the model is not physical: {', '.join(bad)} out of range (mass and "
            "inertias must be positive, inertias positive definite with principal moments "
            "satisfying I1 + I2 >= I3, fuel within [0, max_fuel_mass]); was it changed after "
            "construction (eqx.tree_at, a dispersion)?"
        )


# Clock ticks are listed on the host and each is a segment boundary of the run: more than this
# many is refused up front (a period in the wrong unit listed ticks for minutes).
MAX_CLOCK_TICKS = 10**7


def check_clock_ticks(clocks, t0, t1) -> None:
    """Periodic clocks (`Clock`, the `clock` of a discrete model) over `[t0, t1]`: at most
    `MAX_CLOCK_TICKS` ticks, else a `ValueError` with the estimate (concrete times only)."""
    a, b = _scalar("t0", t0, "s"), _scalar("t1", t1, "s")
    if a is None or b is None or not clocks:
        return
    for c in clocks:
        clock = getattr(c, "clock", c)
        period = getattr(clock, "period", None)
        if period is None:
            continue
        try:
            p = float(period)
        except (TypeError, ValueError):
            continue
        if p > 0 and abs(float(b) - float(a)) / p > MAX_CLOCK_TICKS:
            n = abs(float(b) - float(a)) / p
            name = getattr(c, "name", type(c).__name__)
            raise ValueError(
                f"simulate: clock of {name!r} (period {p!r} s) would tick {n:.3g} times over "
                f"[{float(a)!r}, {float(b)!r}] s (more than {MAX_CLOCK_TICKS:.0e}, each a segment "
                "boundary); check the unit of its period."
            )


def check_events_arg(events) -> None:
    """`events` is a sequence of events: a single `Event` is refused with the fix."""
    from ._events import Event

    if isinstance(events, Event):
        raise TypeError(
            "simulate: `events` must be a sequence of Event (e.g. `events=[event]`); got a single "
            "Event."
        )


def check_call(
    model,
    y0,
    *,
    t0,
    t1,
    ts,
    dt,
    sample_dt,
    solver,
    rtol,
    atol,
    args,
    key,
    clocks=(),
    events=(),
):
    """Every call-time check of `simulate`, in argument order.

    **Returns:** `(model, y0, args, key)` normalized: Python floats in the model and `args` (and
    lists of numbers in `args`) as arrays, `y0` leaves cast to the state's dtypes, an int seed as a
    key.
    """
    check_events_arg(events)
    model = model_as_traced(model)
    key_ = structure_key(model)
    y0 = check_y0(model, y0, key_)
    check_physical(model, y0)
    check_times(t0, t1, ts, dt, sample_dt)
    check_clock_ticks(clocks, t0, t1)
    check_solver(solver)
    type(model).check_solver(model, solver, dt)  # no bound-method module (see `simulate`)
    check_tolerances(rtol, atol)
    key = check_key(key)
    check_commands(model, args, others_read_args=bool(clocks) or bool(events), key=key_)
    args = args_as_traced(args)
    if clocks:
        check_held_commands(model, clocks, t0, y0, args, key_)
    return model, y0, args, key
