r"""The request of `simulate`: every argument checked once, in one place, before any driver runs.

`build_request` is the only function that checks `simulate`'s arguments. It returns a frozen
`Request`: the model, initial state, times, solver kind and driver, noise, clocks, events and
discontinuities, normalized (Python numbers as arrays, an int seed as a key, `y0` cast to the
state's dtypes, the samples as a concrete array, the steps per sample interval of the fixed grid,
the initial held outputs of the discrete models). The drivers receive the request and check
nothing; the same bad argument is therefore refused with the same message on every path (plain
fixed-step, adaptive, clocked, segmented, SDE).

Each check raises `ValueError` (a bad value) or `TypeError` (a wrong kind of object) whose message
starts with "simulate:" and names the argument, its unit and the value. Values are checked when
they are concrete: under a user's `jit`/`vmap`/`grad` the traced ones keep their shape and dtype
checks only (times: `t0`, `t1`, `ts` may be traced where the driver takes them as run-time inputs,
`jaxsim._simulate`'s free-time path).

**Commands** (`args`, and the held outputs of discrete models) are checked alike on every path:
an address that a model declares (`command_spec()`) is checked key by key and shape by shape; a
top-level key that nothing reads is refused when the model reads only commands
(`reads_only_commands`). What discrete models and events read is found by running their
functions once on abstract values (`jax.eval_shape`) with an `args` that records the keys read.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.extend as jex
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._cores._adaptive import DEFAULT_GAINS
from .._events._event import Event
from .._model._arguments import _validity, args_as_traced, match_tree, model_as_traced
from .._model._clocks import AbstractDiscreteModel, plan_ticks, with_held
from .._model._dynamic_object import (
    AbstractDynamicObject,
    ArrayCommand,
    System,
    state_shapes,
    structure_key,
)
from .._model._quantity import is_quantity, parse_unit
from .._model._signals import AbstractSignal
from .._model._validation import _fmt, check_unique_names, is_concrete
from .._route import _DIFFRAX_SDE_ONLY, SolverKind, route, solver_kind
from .._solvers._ode import AbstractFixedStepSolver, AbstractSolver


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


def check_gains(pcoeff, icoeff) -> tuple[float, float]:
    """`PIDController(pcoeff, icoeff)` [-]: concrete finite scalars, `pcoeff >= 0`, `icoeff > 0`;
    returned as Python floats (static: part of the compiled program)."""
    gains = []
    for name, value, ok, rule in (
        ("pcoeff", pcoeff, lambda x: x >= 0, ">= 0"),
        ("icoeff", icoeff, lambda x: x > 0, "> 0"),
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
    return tuple(gains)


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


def _dtype_of(value) -> np.dtype:
    """The dtype of an array, or of what `np.asarray` makes of `value` (object when it cannot)."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return dtype
    try:
        return np.asarray(value).dtype
    except (TypeError, ValueError):
        return np.dtype(object)


def _check_shape(where: str, name: str, value, want, what: str) -> None:
    """`value` is numbers (an array, a number, a list of numbers), else a TypeError naming `name`;
    its shape broadcasts to `want` (None: any shape), else a ValueError."""
    dtype = _dtype_of(value)
    if _kind(dtype) not in "biuf":
        raise TypeError(
            f"{where}`{name}` must be a number or an array of numbers for {what}; got "
            f"{type(value).__name__} {_short(value)}."
        )
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


def _kind(dtype) -> str:
    try:
        dtype = np.dtype(dtype)
    except TypeError:  # an extended dtype (a key)
        return "x"
    return "b" if dtype == np.bool_ else dtype.kind


def _effector_word(address, keys=None) -> str:
    if isinstance(keys, ArrayCommand):
        return f"the command {address!r}"
    return f"effector {address!r}"


# `readers` of `args` (the top-level keys that discrete models and events read) when one of them
# reads `args` as a whole (iterates it, or could not be probed): every key counts as read.
EVERY_KEY = frozenset({object()})


def _read(readers, key) -> bool:
    return readers is EVERY_KEY or key in readers


def check_commands(model, args, *, readers=frozenset(), key=None) -> None:
    """Commands in `args` against what `model` declares it reads (`command_spec()`).

    An address the model declares: unknown keys and wrong shapes are errors. An unknown top-level
    key is an error when the model reads nothing else (`reads_only_commands`) and no discrete model
    or event reads it (`readers`: the keys they read, `EVERY_KEY` when one reads them all). A
    `System` routes `args[name]` to its object `name`, as `System.drift` does.
    """
    _check_commands(model, args, "args", readers, key)


def _check_commands(model, args, label: str, readers, key=None) -> None:
    if not isinstance(args, Mapping):
        if args is not None and _spec(model, key)[0] is not None:
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
                _check_commands(o, args[o.name], f"{label}[{o.name!r}]", frozenset())
        shared = [o for o in model.objects if o.name not in args]
        if not shared:
            unknown = [k for k in args if k not in names and not _read(readers, k)]
            if unknown and model.reads_only_commands:
                raise ValueError(
                    f"simulate: `{label}` has unknown key(s) {sorted(map(str, unknown))!r} (they "
                    f"would be ignored); System {model.name!r} routes {sorted(names)!r}."
                )
            return
        rest = {k: v for k, v in args.items() if k not in names}
        _check_flat(System(shared, name=model.name), rest, label, readers, names)
        return
    _check_flat(model, args, label, readers, set(), key)


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


def _check_flat(model, args, label, readers, routed, key=None) -> None:
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
    unknown = [k for k in args if k not in spec and k not in routed and not _read(readers, k)]
    if unknown and reads_only:
        raise ValueError(
            f"simulate: `{label}` has unknown address(es) {sorted(map(str, unknown))!r} (they "
            f"would be ignored); `model` {type(model).__name__} {model.name!r} reads commands "
            f"at {sorted(spec)!r} only."
        )


# --------------------------------------------------------------------------------------------------
# Units of commands: `Quantity` values in `args`, the declared units of flight-software outputs


def _command_units(model, key=None):
    """The units the model declares for its commands (`units()["args"]`: `{address: {key:
    unit}}`, or a unit string for an address read as one array); `{}` when it declares none.
    Kept per model structure (`_probed`): a spacecraft's `units()` traces its outputs (about
    20 ms), read only when a unit is to be compared."""
    key = structure_key(model) if key is None else key

    def read():
        units = type(model).units(model)
        return units.get("args", {}) if isinstance(units, Mapping) else {}

    return _probed(None if key is None else ("command units", key), read)


def _path(label: str, path: tuple) -> str:
    return label + "".join(f"[{k!r}]" for k in path)


def _unit_pairs(value, declared, path=()):
    """`(path, value, declared unit)` for each leaf of `value` where `declared` (a unit tree keyed
    like `value`, a string standing for a whole subtree) gives a unit."""
    if isinstance(declared, str):
        yield path, value, declared
    elif isinstance(declared, Mapping) and isinstance(value, Mapping):
        for k, v in value.items():
            if k in declared:
                yield from _unit_pairs(v, declared[k], path + (k,))


def untag_args(model, args, key=None):
    """`args` with every `Quantity` replaced by its value, after comparing its unit with the one
    the model declares for that command (`units()["args"]`); a different unit is a ValueError
    naming the argument and both units. A `Quantity` where the model declares no unit is passed
    on unchecked. Plain values carry no unit and are read in the declared one."""
    if args is None or not any(is_quantity(x) for x in jtu.tree_leaves(args, is_leaf=is_quantity)):
        return args
    declared = _command_units(model, key)
    for path, value, unit in _unit_pairs(args, declared):
        tagged = [
            (p, q)
            for p, q in jtu.tree_leaves_with_path(value, is_leaf=is_quantity)
            if is_quantity(q)
        ]
        for sub, q in tagged:
            if parse_unit(q.unit) != parse_unit(unit, f"{type(model).__name__}.units()"):
                where = _path("args", path) + jtu.keystr(sub)
                raise ValueError(
                    f"simulate: `{where}` is given in {q.unit!r}, but `model` "
                    f"{type(model).__name__} {model.name!r} reads it in {unit!r}; units are "
                    f"not converted: give the value in {unit!r} (a plain array is read in it)."
                )
    return jtu.tree_map(lambda x: x.value if is_quantity(x) else x, args, is_leaf=is_quantity)


def check_held_units(model, models, held0, key=None) -> None:
    """The units a discrete model declares for its held outputs (`units()["held"]`) against
    those the model declares for the commands they feed (`units()["args"]`): a different unit
    is a ValueError naming the discrete model, the output and both units. Outputs or commands
    without a declared unit are not compared."""
    # `type(m).units(m)`: no bound-method module (equinox builds one per access, ~0.2 ms).
    written = {m.name: (type(m).units(m) or {}).get("held") for m in models}
    if not any(written.values()):
        return
    declared = _command_units(model, key)
    for m in models:
        units = written[m.name]
        h = held0.get(m.name)
        if not units or not isinstance(h, Mapping):
            continue
        for path, _, want in _unit_pairs(h, declared):
            node = units
            for k in path:
                node = node.get(k) if isinstance(node, Mapping) else node
            if not isinstance(node, str):
                continue
            where = f"{type(m).__name__}.units()['held']"
            if parse_unit(node, where) != parse_unit(want, f"{type(model).__name__}.units()"):
                raise ValueError(
                    f"simulate: discrete model {m.name!r} writes `{_path('args', path)}` in "
                    f"{node!r} ({where}), but `model` {type(model).__name__} {model.name!r} "
                    f"reads it in {want!r}; units are not converted."
                )


def _describe(tree):
    return jtu.tree_map(lambda u: f"{u.dtype}{list(u.shape)}", tree)


def _check_update_output(m, out) -> None:
    """`update` returns `(z_next, held_outputs)`: a pair, `held_outputs` a dict."""
    if not (isinstance(out, tuple | list) and len(out) == 2):
        got = (
            f"a {type(out).__name__} of length {len(out)}"
            if isinstance(out, tuple | list)
            else (f"{type(out).__name__} {_describe(out)}")
        )
        raise ValueError(
            f"simulate: the update of discrete model {m.name!r} must return a pair `(z_next, "
            f"held_outputs)` (its next discrete state and a dict {{address: value}} merged into "
            f"args, e.g. `return z, {{}}`); got {got}."
        )
    if not isinstance(out[1], Mapping):
        raise ValueError(
            f"simulate: discrete model {m.name!r} must return its held outputs as a dict "
            f"{{address: value}} (merged into args); got {type(out[1]).__name__}."
        )
    want = jax.eval_shape(m.init_state)
    got = out[0]
    same = jtu.tree_structure(got) == jtu.tree_structure(want) and all(
        a.shape == b.shape for a, b in zip(jtu.tree_leaves(got), jtu.tree_leaves(want))
    )
    if not same:
        raise ValueError(
            f"simulate: the update of discrete model {m.name!r} returned a next discrete state of "
            f"structure {_describe(got)}; expected that of its `init_state()`: {_describe(want)}."
        )


# Abstract runs of the discrete models' and events' functions (the held outputs' shapes, the keys
# of `args` they read) depend only on the structure of their inputs: the tree structures (static
# fields and functions included), the shapes and dtypes of the arrays and the values of the other
# leaves. They are kept per structure, so a repeated call of `simulate` does not trace them again.
_PROBES: dict = {}
# Bound on the kept probe results (one entry per structure: a few hundred bytes each).
_MAX_PROBES = 256


def _probe_key(tag: str, *trees) -> tuple | None:
    """A hashable key of `trees` for `_probed`: structure, array shapes and dtypes, other leaves by
    value; None when a leaf or a static field cannot be hashed (then nothing is kept)."""
    leaves, treedef = jtu.tree_flatten(trees)
    parts = tuple(
        ("array", np.shape(x), np.dtype(x.dtype).str)
        if isinstance(x, jax.Array | np.ndarray | np.generic)
        else x
        for x in leaves
    )
    key = (tag, treedef, parts)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _probed(key: tuple | None, run):
    """`run()` once per `key` (its result kept; exceptions are not kept)."""
    if key is not None and key in _PROBES:
        return _PROBES[key]
    out = run()
    if key is not None:
        if len(_PROBES) >= _MAX_PROBES:
            _PROBES.clear()
        _PROBES[key] = out
    return out


def initial_held(models, y0, args, t0) -> dict:
    """Held outputs before the first tick (`init_outputs`, or zeros shaped like `update`'s
    outputs), each model's `update` checked to return `(z_next, dict)` of the right structure."""
    held = {}
    for m in models:
        h = m.init_outputs(y0, args)
        if h is not None:
            held[m.name] = jtu.tree_map(jnp.asarray, h)
    checked = set()
    for _ in range(len(models) + 1):
        missing = [m for m in models if m.name not in checked]
        if not missing:
            break
        for m in missing:
            known = with_held(args, held)

            def probe(m=m, known=known):
                # As the drivers tick: the model's parameter-only work done (`prepare`).
                return m.prepare().update(jnp.asarray(t0, dtype=float), y0, m.init_state(), known)

            key = _probe_key("update", m, y0, known)
            try:
                out = _probed(key, lambda probe=probe: jax.eval_shape(probe))
            except (KeyError, TypeError, IndexError):
                continue  # reads outputs of models not known yet
            _check_update_output(m, out)
            checked.add(m.name)
            if m.name not in held:
                held[m.name] = jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), dict(out[1]))
    missing = [m.name for m in models if m.name not in held]
    if missing:
        raise ValueError(
            f"simulate: cannot infer the held outputs of discrete model(s) {missing!r} before their "
            "first tick (their update reads outputs of models not yet known); give `held0=` / "
            "`init_outputs`."
        )
    return {m.name: held[m.name] for m in models}


def check_held_keys(models, held0, user_args) -> None:
    """Each held-output address has one writer and does not shadow a key of `args`."""
    seen = {}
    for m in models:
        h = held0[m.name]
        if not isinstance(h, Mapping):
            raise ValueError(
                f"simulate: discrete model {m.name!r} must return its held outputs as a dict "
                f"{{address: value}} (merged into args); got {type(h).__name__}."
            )
        for key in h:
            if key in seen:
                raise ValueError(
                    f"simulate: held-output address {key!r} is written by both {seen[key]!r} and "
                    f"{m.name!r}; each top-level key of args must have one writer."
                )
            if isinstance(user_args, Mapping) and key in user_args:
                raise ValueError(
                    f"simulate: held-output address {key!r} of {m.name!r} collides with a key of "
                    "`args`; rename one of them."
                )
            seen[key] = m.name


class _Recording(dict):
    """`args` that records the top-level keys read (all of them when iterated)."""

    def __init__(self, data, seen: set):
        super().__init__(data)
        self._seen = seen

    def __getitem__(self, k):
        self._seen.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self._seen.add(k)
        return super().get(k, default)

    def __contains__(self, k):
        self._seen.add(k)
        return super().__contains__(k)

    def _all(self):
        self._seen.add(EVERY_KEY)

    def __iter__(self):
        self._all()
        return super().__iter__()

    def keys(self):
        self._all()
        return super().keys()

    def items(self):
        self._all()
        return super().items()

    def values(self):
        self._all()
        return super().values()


def args_readers(models, events, t0, y0, args, held0):
    """The top-level keys of `args` (and of held outputs) that the discrete models' `update` and
    `init_outputs` and the events' `cond` and `reset` read, found by running them once on abstract
    values; `EVERY_KEY` when one of them reads `args` as a whole or cannot be run this way."""
    if not models and not events:
        return frozenset()
    key = _probe_key("readers", tuple(models), tuple(events), y0, args, held0)
    return _probed(key, lambda: _args_readers(models, events, t0, y0, args, held0))


def _args_readers(models, events, t0, y0, args, held0):
    seen: set = set()
    full = with_held(args, held0)
    z0 = {m.name: m.init_state() for m in models}
    t = jnp.asarray(t0, dtype=float)
    calls = []
    for m in models:
        calls.append(lambda a, m=m: m.prepare().update(t, y0, m.init_state(), a))
        calls.append(lambda a, m=m: m.init_outputs(y0, a))
    for e in events:
        calls.append(lambda a, e=e: e.cond(t, y0, a))
        if e.reset is not None:
            calls.append(lambda a, e=e: e.reset(t, y0, z0, a))
    for call in calls:
        try:
            jax.eval_shape(lambda: call(_Recording(full, seen)))
        except Exception:  # noqa: BLE001 - not probed: count every key as read
            return EVERY_KEY
        if EVERY_KEY in seen:
            return EVERY_KEY
    return frozenset(seen)


def check_held_commands(model, models, held0, readers, key=None) -> None:
    """Held outputs of discrete models (flight software) that address the model's effectors.

    An address that the model declares is checked as `args` is (unknown keys, shapes). An address a
    discrete model declares as a command for the model's effectors (its `command_addresses`, e.g.
    `RWAttitudeFSW`'s `wheels`) must exist in the model when the model reads commands only; so must
    any other held address that no discrete model or event reads and that is not a discrete
    model's own name (its diagnostics, e.g. `RWAttitudeFSW`'s attitude errors).
    """
    if not models:
        return
    spec, reads_only = _spec(model, key)
    if spec is None:
        return
    names = {m.name for m in models}
    # A `System` routes `args[name]` to its object `name` (`System.drift`): held outputs there are
    # checked against that object's commands.
    objects = {o.name: o for o in model.objects} if isinstance(model, System) else {}
    for m in models:
        declared = tuple(m.command_addresses)
        missing = [a for a in declared if a not in spec]
        if missing and reads_only:
            raise ValueError(
                f"simulate: discrete model {m.name!r} writes commands to "
                f"{', '.join(f'`args[{x!r}]`' for x in missing)}, but `model` "
                f"{type(model).__name__} {model.name!r} has no such effector (they would be "
                f"ignored); it reads commands at {sorted(spec)!r}."
            )
    for m in models:
        h = held0.get(m.name)
        if not isinstance(h, Mapping):
            continue
        for address in h:
            if address in objects and address not in spec:
                _check_commands(objects[address], h[address], f"args[{address!r}]", frozenset())
        unread = [
            a
            for a in h
            if a not in spec and a not in names and a not in objects and not _read(readers, a)
        ]
        if unread and reads_only:
            raise ValueError(
                f"simulate: discrete model {m.name!r} writes held output(s) at "
                f"{', '.join(f'`args[{x!r}]`' for x in sorted(map(str, unread)))}, which no "
                f"effector of `model` {type(model).__name__} {model.name!r}, discrete model or "
                f"event reads (they would be ignored); the model reads commands at "
                f"{sorted(spec)!r}."
            )
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
# Physical checks, clock ticks


def check_physical(model, y0) -> None:
    """A concrete model whose physical checks fail (e.g. a hub mass set to a negative value with
    `eqx.tree_at`, a fuel load above the tank's maximum in `y0`) is refused, naming the quantities.

    Traced values are checked in the program: they fail the run as `invalid_model`."""
    checks = _validity(model, y0)
    bad = [k for k, v in checks.items() if is_concrete(v) and not bool(np.all(np.asarray(v)))]
    if bad:
        raise ValueError(
            f"simulate: the model is not physical: {', '.join(bad)} out of range (the ranges are "
            f"those of `{type(model).__name__}.validity(y0)`, e.g. masses and inertias positive, "
            "fuel within [0, max]); was it changed after construction (eqx.tree_at, a "
            "dispersion)?"
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


# --------------------------------------------------------------------------------------------------
# Sample times and the step grid


def concrete(name, value):
    """`value` as a float64 numpy array, or a ValueError saying it must be concrete."""
    try:
        return np.asarray(value, dtype=float)
    except jax.errors.TracerArrayConversionError as err:
        raise ValueError(
            f"simulate: `{name}` must be concrete (a Python float or numpy array), since it fixes "
            "the step grid and the output shape; got a traced value. Pass it outside `jit`/`grad`."
        ) from err


def sample_times(t0, t1, ts, sample_dt):
    """`(t0, t1, ts)` as floats and a concrete array: `ts`, `[t0, t1]` or a uniform grid of
    `sample_dt`; `ts` non-decreasing from `t0` to `t1`, `sample_dt` dividing the horizon."""
    if ts is not None and sample_dt is not None:
        raise ValueError("simulate: give either `ts` or `sample_dt`, not both.")
    if t1 is None and ts is None:
        raise ValueError("simulate: `t1` [s] is required when `ts` is not given; got None.")
    t0 = float(concrete("t0", t0))
    if ts is not None:
        ts = np.atleast_1d(concrete("ts", ts))
        if ts.ndim != 1 or ts.size == 0:
            raise ValueError(
                f"simulate: `ts` [s] must be a non-empty 1-D array; got shape {ts.shape}."
            )
        if np.any(np.diff(ts) < 0):
            raise ValueError(f"simulate: `ts` [s] must be non-decreasing; got {ts}.")
        if ts[0] < t0:
            raise ValueError(
                f"simulate: `ts` [s] must start at or after t0={t0}; got ts[0]={ts[0]}."
            )
        if t1 is not None and not np.isclose(float(t1), ts[-1], rtol=1e-12, atol=0.0):
            raise ValueError(
                f"simulate: `ts[-1]` must equal `t1` [s] (integration ends at the last sample); "
                f"got ts[-1]={ts[-1]} and t1={t1}."
            )
        return t0, float(ts[-1]), ts
    t1 = float(concrete("t1", t1))
    if not t1 > t0:
        raise ValueError(f"simulate: `t1` [s] must be > t0={t0}; got {t1}.")
    if sample_dt is None:
        return t0, t1, np.array([t0, t1])
    sample_dt = float(concrete("sample_dt", sample_dt))
    if not sample_dt > 0:
        raise ValueError(f"simulate: `sample_dt` [s] must be > 0; got {sample_dt}.")
    n = (t1 - t0) / sample_dt
    if abs(n - round(n)) > GRID_RTOL * max(1.0, n):
        raise ValueError(
            f"simulate: `sample_dt` [s] must divide the horizon t1 - t0 = {t1 - t0}; got {sample_dt} "
            f"({n:.6g} intervals)."
        )
    return t0, t1, t0 + sample_dt * np.arange(round(n) + 1)


def check_step(solver_name: str, dt, what: str = "fixed-step solver") -> float:
    """The fixed step `dt` [s]: given, concrete, > 0."""
    if dt is None:
        raise ValueError(f"simulate: {what} {solver_name} needs `dt` [s]; got None.")
    dt = float(concrete("dt", dt))
    if not dt > 0:
        raise ValueError(f"simulate: `dt` [s] must be > 0; got {dt}.")
    return dt


def grid_segments(ts, t0, t1, dt) -> tuple:
    """Steps of `dt` per sample interval (the first from `t0` to `ts[0]`); every sample on the
    grid `t0 + k dt`, else a ValueError naming the off-grid times."""
    idx = (ts - t0) / dt
    off = np.abs(idx - np.round(idx)) > GRID_RTOL * np.maximum(1.0, idx)
    if np.any(off):
        raise ValueError(
            f"simulate: with fixed step `dt`={dt} s every sample time must be t0 + k*dt (exact "
            f"sampling); got off-grid time(s) {ts[off][:5]} (the horizon t1 - t0 = {t1 - t0} s "
            f"must also be a multiple of dt)."
        )
    idx = np.round(idx).astype(np.int64)
    return tuple(int(s) for s in np.diff(np.concatenate([[0], idx])))


def on_grid(solver, adaptive, dt, events, disc, t0, boundaries, ts) -> bool:
    """Whether a segmented run can use the fixed-grid stepper (`jaxsim._drivers._clocked._grid`).

    A jaxsim fixed-step solver, no events (they need dense output), and every clock tick, sample
    time and discontinuity time concrete and on the global grid `t0 + k dt` (a traced or off-grid
    switch time splits a step: `diffeqsolve` segments).
    """
    if adaptive or events or not isinstance(solver, AbstractFixedStepSolver):
        return False
    try:
        switch = np.asarray([float(d) for d in disc], dtype=float)
    except (TypeError, jax.errors.ConcretizationTypeError):
        return False  # traced discontinuity times
    dt = float(dt)
    edges = np.concatenate([[t0], np.asarray(boundaries, dtype=float)])
    for times in (edges, np.asarray(ts, dtype=float), switch):
        k = (times - t0) / dt
        if np.any(np.abs(k - np.round(k)) > GRID_RTOL * np.maximum(1.0, np.abs(k))):
            return False
    return True


def check_max_steps(max_steps) -> int:
    """`max_steps`: an int >= 1 (the step budget of each `diffeqsolve`)."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer):
        raise TypeError(
            f"simulate: `max_steps` must be an int >= 1 (the step budget of each adaptive or "
            f"segment solve); got {type(max_steps).__name__} {_short(max_steps)}."
        )
    if int(max_steps) < 1:
        raise ValueError(
            f"simulate: `max_steps` must be an int >= 1 (the step budget of each adaptive or "
            f"segment solve); got {int(max_steps)}."
        )
    return int(max_steps)


def check_budget(t0, t1, step, what: str, max_steps: int, segments: int) -> None:
    """A run that needs at least `(t1 - t0) / step` steps (`what` names the step) over at most
    `segments` solves of `max_steps` each is refused up front with the estimate."""
    if step is None:
        return
    need = abs(float(t1) - float(t0)) / float(step)
    budget = max_steps * max(int(segments), 1)
    if need > budget:
        raise ValueError(
            f"simulate: the run needs at least {need:.3g} steps ((t1 - t0) / {what}) but "
            f"`max_steps`={max_steps} per solve allows {budget:.3g} over its {max(segments, 1)} "
            "solve(s): it would fail with max_steps_reached. Raise `max_steps` or the step."
        )


# --------------------------------------------------------------------------------------------------
# Solvers


def check_combinations(
    kind, *, clocks, events, discontinuities, dtmax, max_events, root_finder
) -> None:
    """What no driver supports, refused by name: `dtmax` not a positive finite scalar,
    `max_events`/`root_finder` without events, an SDE with clocks, events, discontinuities or
    `dtmax`, `dtmax` with a fixed-step solver."""
    if dtmax is not None:
        if np.ndim(dtmax) != 0:
            raise ValueError(
                f"simulate: `dtmax` [s] must be a scalar; got shape {np.shape(dtmax)}."
            )
        d = _scalar("dtmax", dtmax, "s")
        if d is not None and not (np.isfinite(d) and d > 0):
            raise ValueError(f"simulate: `dtmax` [s] must be finite and > 0; got {float(d)!r}.")
    if not events:
        for name, value in (("max_events", max_events), ("root_finder", root_finder)):
            if value is not None:
                raise ValueError(
                    f"simulate: `{name}` applies to runs with `events`; got {name}={value!r} "
                    "without events. Give `events=` or drop it."
                )
    segmented = {
        "clocks": bool(clocks),
        "events": bool(events),
        "discontinuities": bool(discontinuities),
        "dtmax": dtmax is not None,
    }
    given = [name for name, on in segmented.items() if on]
    if kind.stochastic:
        if given:
            raise ValueError(
                f"simulate: the stochastic (SDE) drivers do not support {', '.join(given)} yet; "
                f"got an SDE request (solver {kind.name}, key or dW given) with "
                f"{', '.join(f'`{g}`' for g in given)}. Run the SDE without them, or the "
                "deterministic model with them; nothing is dropped silently."
            )
        return
    if dtmax is not None and not kind.adaptive:
        raise ValueError(
            f"simulate: `dtmax` [s] bounds the steps of adaptive solvers; {kind.name} is "
            f"fixed-step (got dtmax={dtmax}): its step is `dt`. To split the steps at the "
            "model's (possibly traced) breakpoints, pass `discontinuities=[model]`."
        )


def check_supported_solver(solver, kind: SolverKind) -> None:
    """diffrax solvers that the drivers cannot run are refused by name: implicit ones (a root
    finder per step) and those taking several terms (`SemiImplicitEuler`, IMEX schemes) on an ODE
    request."""
    if kind.native or not isinstance(solver, dfx.AbstractSolver):
        return
    name = type(solver).__name__
    implicit = isinstance(solver, dfx.AbstractImplicitSolver)
    split = not kind.stochastic and solver.term_structure is not dfx.AbstractTerm
    if implicit or split:
        why = "an implicit solver" if implicit else "a solver of split (several-term) systems"
        raise TypeError(
            f"simulate: `solver` diffrax.{name}() is {why}, which jaxsim's drivers do not run. "
            "Supported: jaxsim's Euler, RK2, RK4 (fixed step), Tsit5, Dopri5, Dopri8 (adaptive) "
            "and SDE solvers, or an explicit diffrax solver of one term (e.g. diffrax.Tsit5(), "
            "diffrax.Heun(), diffrax.Bosh3())."
        )


# --------------------------------------------------------------------------------------------------
# SDE requests


# diffrax solvers that are valid for SDEs (given MultiTerm(drift, diffusion)): the SDE-only
# schemes the router knows, and those that also solve ODEs.
_DIFFRAX_SDE = (dfx.Euler, dfx.Heun, dfx.ReversibleHeun, *_DIFFRAX_SDE_ONLY)
# Relative tolerance of the commutativity check L^j g_k == L^k g_j at y0 (Milstein): round-off only.
_COMMUTE_RTOL = 1e-9


def diffusion_depends_on_state(model, t, y, args) -> bool:
    """True when the jaxpr of `model.diffusion(t, ., args)` has an output that depends on `y`.

    A static data-flow analysis (no evaluation): exact through nested `jit` calls, conservative
    elsewhere (any primitive with a state-dependent input counts as state-dependent).
    """
    closed = jax.make_jaxpr(lambda yy: model.diffusion(t, yy, args))(y)
    return any(_jaxpr_deps(closed.jaxpr, [True] * len(closed.jaxpr.invars)))


def _jaxpr_deps(jaxpr, in_deps):
    dep = dict(zip(jaxpr.invars, in_deps))

    def isdep(a):
        return not isinstance(a, jex.core.Literal) and dep.get(a, False)

    for eqn in jaxpr.eqns:
        ins = [isdep(a) for a in eqn.invars]
        outs = None
        if any(ins):
            for p in eqn.params.values():
                sub = p.jaxpr if isinstance(p, jex.core.ClosedJaxpr) else p
                if (
                    isinstance(sub, jex.core.Jaxpr)
                    and len(sub.invars) == len(ins)
                    and len(sub.outvars) == len(eqn.outvars)
                ):
                    outs = _jaxpr_deps(sub, ins)
                    break
            if outs is None:
                outs = [True] * len(eqn.outvars)
        else:
            outs = [False] * len(eqn.outvars)
        for v, d in zip(eqn.outvars, outs):
            dep[v] = d
    return [isdep(v) for v in jaxpr.outvars]


def _concrete_tree(tree) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jtu.tree_leaves(tree))


def _check_commutative(model, t, y, args, sname):
    """Milstein's product formula needs L^j g_k = L^k g_j; check it at y0 when everything is concrete."""
    from .._solvers._sde import milstein_jvps

    if not (_concrete_tree(eqx.filter(model, eqx.is_array)) and _concrete_tree(y)):
        return
    _, Lg = milstein_jvps(model.diffusion, t, y, args)
    for L in jtu.tree_leaves(Lg):
        L = np.asarray(L)
        LT = np.swapaxes(L, 0, -1)
        scale = max(float(np.max(np.abs(L))), 1e-300)
        if np.max(np.abs(L - LT)) > _COMMUTE_RTOL * scale:
            raise ValueError(
                f"simulate: `solver` {sname} needs commutative noise (L^j g_k = L^k g_j), but the "
                f"diffusion of {type(model).__name__} is not commutative at y0 (max mismatch "
                f"{np.max(np.abs(L - LT)):.3g}); use EulerMaruyama or Heun."
            )


def _check_diffusion_shape(model, t0, y0, args, m: int) -> None:
    """`diffusion(t, y, args)` has the structure of the state, each leaf `leaf.shape + (m,)`."""
    got = jax.eval_shape(lambda: model.diffusion(jnp.asarray(t0, dtype=float), y0, args))
    want = jtu.tree_map(lambda x: jax.ShapeDtypeStruct(tuple(jnp.shape(x)) + (m,), float), y0)
    same = jtu.tree_structure(got) == jtu.tree_structure(want) and all(
        tuple(a.shape) == tuple(b.shape)
        for a, b in zip(jtu.tree_leaves(got), jtu.tree_leaves(want))
    )
    if not same:
        raise ValueError(
            f"simulate: `{type(model).__name__}.diffusion(t, y, args)` must return the structure "
            f"of the state with each leaf of shape leaf.shape + (noise_dim,) = "
            f"{jtu.tree_map(lambda s: tuple(s.shape), want)}; got "
            f"{jtu.tree_map(lambda s: tuple(s.shape), got)}."
        )


def _increments(name, arr, n_steps, m):
    """Prescribed Wiener increments: shape `(n_steps, m)`, real numbers (cast to float64)."""
    if arr is None:
        return None
    dtype = _dtype_of(arr)
    if _kind(dtype) not in "iuf":
        raise TypeError(
            f"simulate: `{name}` [sqrt(s)] must hold real numbers (Wiener increments, cast to "
            f"float64); got dtype {dtype}."
        )
    shape = tuple(jnp.shape(arr))
    if shape != (n_steps, m):
        raise ValueError(
            f"simulate: `{name}` must have shape (n_steps, noise_dim) = ({n_steps}, {m}) "
            f"[sqrt(s)]; got shape {shape}."
        )
    return jnp.asarray(arr, dtype=float)


def _check_sde(r: dict, kind: SolverKind) -> dict:
    """The checks of an SDE request; returns the fields it sets (`dt`, `seg`, `dW`, `dZ`)."""
    from .._solvers._sde import AbstractSDESolver, ShARK

    model, solver, t0, t1 = r["model"], r["solver"], r["t0"], r["t1"]
    y0, args, key, dW, dZ, brownian = r["y0"], r["args"], r["key"], r["dW"], r["dZ"], r["brownian"]
    rtol, atol, dt = r["rtol"], r["atol"], r["dt"]
    sname = type(solver).__name__
    m = int(model.noise_dim)
    if m == 0:
        raise ValueError(
            f"simulate: SDE request (solver {sname}, key or dW given) but `model` "
            f"{type(model).__name__} has no diffusion (noise_dim == 0); use an ODE solver and no key."
        )
    is_jaxsim_sde = isinstance(solver, AbstractSDESolver | ShARK)
    is_diffrax = isinstance(solver, dfx.AbstractSolver)
    if not is_jaxsim_sde and not (is_diffrax and isinstance(solver, _DIFFRAX_SDE)):
        raise ValueError(
            f"simulate: `solver` {sname} is an ODE solver but `model` {type(model).__name__} is an "
            f"SDE (noise_dim = {m}) and a key/dW was given; use EulerMaruyama, Heun, Milstein, SRA1 "
            f"(fixed step) or ShARK (adaptive, additive noise), or drop the key to integrate the drift only."
        )
    if key is not None and dW is not None:
        raise ValueError("simulate: give either `key` or prescribed increments `dW`, not both.")
    if key is None and dW is None:
        raise ValueError(
            f"simulate: SDE solver {sname} needs a random `key` (jax.random.key(seed)) or "
            "prescribed Wiener increments `dW`; got neither."
        )
    if dZ is not None and dW is None:
        raise ValueError("simulate: `dZ` is used only together with prescribed `dW`.")
    if not (brownian in ("increments", "tree") or isinstance(brownian, dfx.AbstractBrownianPath)):
        raise ValueError(
            "simulate: `brownian` must be 'increments', 'tree' or a diffrax.AbstractBrownianPath; "
            f"got {brownian!r}."
        )
    _check_diffusion_shape(model, t0, y0, args, m)
    noise_kind = getattr(solver, "noise", "general")
    if is_diffrax and isinstance(solver, dfx.SRA1 | dfx.ShARK | dfx.SEA | dfx.SPaRK):
        noise_kind = "additive"
    if noise_kind == "additive" and diffusion_depends_on_state(model, t0, y0, args):
        raise ValueError(
            f"simulate: `solver` {sname} requires additive noise (diffusion independent of the "
            f"state), but {type(model).__name__}.diffusion depends on `y`; use EulerMaruyama, "
            "Milstein (commutative noise) or Heun (Stratonovich)."
        )
    if noise_kind == "commutative" and m > 1:
        _check_commutative(model, t0, y0, args, sname)
    out = {"noise_dim": m}
    if is_diffrax or kind.adaptive:
        if dW is not None:
            raise ValueError(
                f"simulate: prescribed `dW` works with jaxsim's fixed-step SDE solvers only; got {sname}."
            )
        if kind.adaptive:
            if rtol is None or atol is None:
                raise ValueError(
                    f"simulate: adaptive SDE solver {sname} needs `rtol` and `atol`; "
                    f"got rtol={rtol}, atol={atol}."
                )
        else:
            out["dt"] = check_step(sname, dt, "fixed-step SDE solver")
            check_budget(t0, t1, out["dt"], "`dt`", r["max_steps"], 1)
        return out
    if rtol is not None or atol is not None:
        raise ValueError(
            f"simulate: `rtol`/`atol` apply to adaptive solvers only; {sname} is fixed-step "
            f"(got rtol={rtol}, atol={atol})."
        )
    dt = out["dt"] = check_step(sname, dt, "fixed-step SDE solver")
    out["seg"] = seg = grid_segments(r["ts"], t0, t1, dt)
    if dW is not None:
        n_steps = int(sum(seg))
        out["dW"] = _increments("dW", dW, n_steps, m)
        if solver.uses_dZ:
            if dZ is None:
                raise ValueError(
                    f"simulate: {sname} needs the second Gaussian `dZ` (shape ({n_steps}, {m})) "
                    "together with prescribed `dW`."
                )
            out["dZ"] = _increments("dZ", dZ, n_steps, m)
        else:
            out["dZ"] = None
    return out


# --------------------------------------------------------------------------------------------------
# Clocks, events and discontinuities


def check_discontinuities(model, discontinuities, t0, t1) -> tuple:
    """Discontinuity times (scalars, possibly traced): the model's breakpoints plus `discontinuities`.

    An entry may be a signal, a time or 1-D array of times [s], or the model itself (its
    breakpoints are always boundaries; naming it asks for the clocked driver, e.g. so that a traced
    burn start splits a fixed step and is differentiable). Concrete times must be finite.
    """
    items = list(model.breakpoints())
    for i, d in enumerate(discontinuities):
        if d is model:
            continue
        if isinstance(d, AbstractDynamicObject):
            items.extend(d.breakpoints())
        elif isinstance(d, AbstractSignal):
            try:
                items.extend(d.breakpoints(t0, t1))
            except TypeError:
                items.extend(d.breakpoints())
        else:
            try:
                arr = jnp.atleast_1d(jnp.asarray(d, dtype=float))
            except (TypeError, ValueError) as err:
                raise TypeError(
                    "simulate: `discontinuities` entries must be signals, the model, scalars or "
                    f"1-D arrays of times [s]; got {type(d).__name__} {_short(d)}."
                ) from err
            if arr.ndim != 1:
                raise ValueError(
                    "simulate: `discontinuities` entries must be signals, the model, scalars or "
                    f"1-D arrays of times [s]; got shape {arr.shape}."
                )
            if is_concrete(arr) and not np.all(np.isfinite(np.asarray(arr))):
                raise ValueError(
                    f"simulate: `discontinuities[{i}]` [s] must hold finite times; got "
                    f"{_fmt(np.asarray(arr))}."
                )
            items.extend(arr[i] for i in range(arr.shape[0]))
    times = tuple(jnp.asarray(x, dtype=float) for x in items)
    for x in times:
        if is_concrete(x) and not np.isfinite(float(x)):
            raise ValueError(
                f"simulate: a discontinuity time (a breakpoint of the model or of a signal in "
                f"`discontinuities`) [s] must be finite; got {float(x)!r}."
            )
    return times


def check_entries(clocks, events) -> None:
    """`clocks` are discrete models with unique names, `events` a sequence of `Event`."""

    if isinstance(events, Event):
        raise TypeError(
            "simulate: `events` must be a sequence of Event (e.g. `events=[event]`); got a single "
            "Event."
        )
    if isinstance(clocks, AbstractDiscreteModel):
        raise TypeError(
            "simulate: `clocks` must be a sequence of discrete models (e.g. `clocks=[fsw]`); got "
            "a single " + type(clocks).__name__ + "."
        )
    for i, m in enumerate(clocks):
        if not isinstance(m, AbstractDiscreteModel):
            raise ValueError(
                f"simulate: `clocks[{i}]` must be a discrete model (jaxsim.DiscreteModel or an "
                f"AbstractDiscreteModel); got {type(m).__name__}."
            )
    check_unique_names("simulate", "clocks", [m.name for m in clocks])
    for i, e in enumerate(events):
        if not isinstance(e, Event):
            raise ValueError(
                f"simulate: `events[{i}]` must be a jaxsim.Event; got {type(e).__name__}."
            )
        if not callable(e.cond):
            raise ValueError(
                f"simulate: `events[{i}].cond` must be callable (t, y, args) -> scalar; got "
                f"{_short(e.cond)}."
            )


def check_resets(events, y0, z0, args, t0) -> None:
    """Each reset must return `(y, z)` shaped like the state and the discrete states."""
    want_y = jax.eval_shape(lambda: y0)
    want_z = jax.eval_shape(lambda: z0)
    for i, ev in enumerate(events):
        if ev.reset is None:
            continue
        where = f"simulate: the reset of `events[{i}]` ({ev.name!r})"
        out = jax.eval_shape(ev.reset, jnp.asarray(t0, float), y0, z0, args)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError(
                f"{where} must return a pair `(y, z)` (the new continuous state and the discrete "
                f"states `{{model_name: z}}`, e.g. `return y_new, z`); got {type(out).__name__} "
                f"{_describe(out) if not isinstance(out, tuple) else len(out)}."
            )
        for part, got, want in (("y", out[0], want_y), ("z", out[1], want_z)):
            same = jtu.tree_structure(got) == jtu.tree_structure(want) and all(
                a.shape == b.shape for a, b in zip(jtu.tree_leaves(got), jtu.tree_leaves(want))
            )
            if not same:
                raise ValueError(
                    f"{where} returned a `{part}` of structure {_describe(got)}; expected the "
                    f"structure of the {'state y0' if part == 'y' else 'discrete states z'}: "
                    f"{_describe(want)}."
                )


def _check_clocked(r: dict, kind: SolverKind) -> dict:
    """The checks of a segmented request (clocks, events, discontinuities, `dtmax`); returns the
    fields it sets: the tick plan, discontinuity times, initial held outputs, grid decision."""
    model, y0, args, t0, t1 = r["model"], r["y0"], r["args"], r["t0"], r["t1"]
    clocks, events = r["clocks"], r["events"]
    max_events = r["max_events"]
    max_events = (16 if events else 0) if max_events is None else max_events
    if isinstance(max_events, bool) or not isinstance(max_events, int | np.integer):
        raise TypeError(f"simulate: `max_events` must be an int; got {_short(max_events)}.")
    max_events = int(max_events)
    if events and max_events < 1:
        raise ValueError(f"simulate: `max_events` must be >= 1 with events; got {max_events}.")
    if clocks and args is not None and not isinstance(args, Mapping):
        raise ValueError(
            "simulate: with discrete models `args` must be a dict (held outputs are merged into "
            f"it) or None; got {type(args).__name__}."
        )
    if events and not jtu.tree_leaves(y0):
        raise ValueError("simulate: `events` need continuous states; the model has none.")
    plan = plan_ticks(clocks, t0, t1)
    disc = check_discontinuities(model, r["discontinuities"], t0, t1)
    held0 = initial_held(clocks, y0, args, t0)
    check_held_keys(clocks, held0, args)
    check_resets(events, y0, {m.name: m.init_state() for m in clocks}, with_held(args, held0), t0)
    grid = on_grid(r["solver"], kind.adaptive, r["dt"], events, disc, t0, plan.times, r["ts"])
    if not grid:
        # Solves between boundaries (diffeqsolve segments), each with `max_steps`.
        segments = len(plan.times) + len(disc) + (2 * max_events + 1 if events else 0)
        step, what = (r["dtmax"], "`dtmax`") if kind.adaptive else (r["dt"], "`dt`")
        check_budget(t0, t1, step, what, r["max_steps"], segments)
    return {"max_events": max_events, "plan": plan, "disc": disc, "held0": held0, "grid": grid}


# --------------------------------------------------------------------------------------------------
# The request


@dataclasses.dataclass(frozen=True, eq=False)
class Request:
    """One call of `simulate`, checked and normalized (`build_request`).

    The fields are `simulate`'s arguments, normalized (`model` and `args` with Python numbers as
    arrays, `y0` cast to the state's dtypes, `key` a key, `t0`/`t1` floats and `ts` a concrete
    array unless the times are free), plus what the checks computed: `kind` (the solver's kind and
    the driver: "fixed", "adaptive", "sde" or "clocked"), `seg` (steps of `dt` per sample interval
    on the fixed grid), `noise_dim`, `horizon` for free times (`jaxsim._drivers._free_time.plan`), and for
    segmented runs the tick `plan`, the discontinuity
    times `disc`, the discrete models' initial held outputs `held0` and `grid` (whether the
    fixed-grid stepper runs the segments).
    """

    model: Any
    y0: Any
    t0: Any
    t1: Any
    ts: Any
    dt: Any
    sample_dt: Any
    solver: Any
    kind: SolverKind
    args: Any
    key: Any
    rtol: Any
    atol: Any
    max_steps: int
    outputs: bool
    checkpoint: bool
    throw: bool
    adjoint: Any
    progress: Any
    dW: Any = None
    dZ: Any = None
    brownian: Any = "increments"
    clocks: tuple = ()
    events: tuple = ()
    discontinuities: tuple = ()
    max_events: Any = None
    event_tol: float = 1e-9
    dtmax: Any = None
    root_finder: Any = None
    gains: tuple = DEFAULT_GAINS
    free: bool = False
    seg: tuple | None = None
    noise_dim: int = 0
    plan: Any = None
    disc: tuple = ()
    held0: Any = None
    grid: bool = False
    horizon: Any = None

    def replace(self, **changes) -> "Request":
        """This request with `changes` (e.g. the initial state guarded by in-program checks)."""
        return dataclasses.replace(self, **changes)


def build_request(
    model,
    y0,
    t1=None,
    *,
    t0=0.0,
    dt=None,
    solver,
    ts=None,
    sample_dt=None,
    args=None,
    rtol=None,
    atol=None,
    max_steps=4096 * 64,
    outputs=True,
    checkpoint=True,
    throw=True,
    key=None,
    dW=None,
    dZ=None,
    brownian="increments",
    clocks=(),
    events=(),
    discontinuities=(),
    max_events=None,
    event_tol=1e-9,
    dtmax=None,
    root_finder=None,
    adjoint=None,
    progress=False,
    num_steps=None,
    num_samples=None,
    gains=DEFAULT_GAINS,
) -> Request:
    """Every check of `simulate`'s arguments, once, in argument order; the checked `Request`.

    Free times (traced `t0`/`t1`/`ts`, or `num_steps`: `jaxsim._drivers._free_time`): the times are
    run-time inputs; their concrete values are checked here and the free-time planner's
    `horizon` (checked times, steps and samples) is in the request (`free`, `horizon`; `seg`
    None). `num_steps` gives a step as `dt` does (for the solver's kind: a diffrax solver then
    runs fixed-step); `num_samples` uniform samples in `[t0, t1]` stand for `ts`. `gains`: the
    step-size controller's `(pcoeff, icoeff)` (`stepsize_controller=PIDController(...)`).
    """
    from .._drivers import _free_time
    from .._drivers._progress import check_progress

    if not isinstance(model, AbstractDynamicObject):
        raise ValueError(
            f"simulate: `model` must be an AbstractDynamicObject; got {type(model).__name__}."
        )
    free = _free_time.requested(t0, t1, ts, num_steps)
    if not free and num_samples is not None:
        if ts is not None or sample_dt is not None:
            raise ValueError("simulate: give one of `ts`, `sample_dt`, `num_samples`.")
        ts = _free_time.uniform_samples(t0, t1, num_samples)
    check_entries(clocks, events)
    clocks, events = tuple(clocks), tuple(events)
    discontinuities = tuple(discontinuities)
    model = model_as_traced(model)
    skey = structure_key(model)
    args = untag_args(model, args, skey)  # `Quantity` commands: units compared, values kept
    y0 = check_y0(model, y0, skey)
    check_physical(model, y0)
    check_times(t0, t1, ts, dt, sample_dt)
    check_clock_ticks(clocks, t0, t1)
    check_solver(solver)
    type(model).check_solver(model, solver, dt)  # no bound-method module (see `simulate`)
    check_tolerances(rtol, atol)
    gains = check_gains(*gains)
    key = check_key(key)
    max_steps = check_max_steps(max_steps)
    if event_tol is None:
        raise ValueError("simulate: `event_tol` [s] must be >= 0; got None.")
    _scalar_shape("event_tol", event_tol, "s")
    event_tol_ = _scalar("event_tol", event_tol, "s")  # None: traced, left as given
    if event_tol_ is not None and not float(event_tol_) >= 0:
        raise ValueError(f"simulate: `event_tol` [s] must be >= 0; got {event_tol}.")
    progress = check_progress("simulate", progress)
    if not free:
        t0, t1, ts = sample_times(t0, t1, ts, sample_dt)
    step = dt if num_steps is None else num_steps
    kind = solver_kind(solver, dt=step, key=key, dW=dW)
    check_combinations(
        kind, clocks=clocks, events=events, discontinuities=discontinuities, dtmax=dtmax,
        max_events=max_events, root_finder=root_finder,
    )  # fmt: skip
    check_supported_solver(solver, kind)
    kind = route(
        solver, dt=step, key=key, dW=dW, clocks=clocks, events=events,
        discontinuities=discontinuities, dtmax=dtmax,
    )  # fmt: skip
    r = dict(
        model=model, y0=y0, t0=t0, t1=t1, ts=ts, dt=dt, sample_dt=sample_dt, solver=solver,
        kind=kind, args=args, key=key, rtol=rtol, atol=atol, max_steps=max_steps,
        outputs=bool(outputs), checkpoint=bool(checkpoint), throw=bool(throw), adjoint=adjoint,
        progress=progress, dW=dW, dZ=dZ, brownian=brownian, clocks=clocks, events=events,
        discontinuities=discontinuities, max_events=max_events, event_tol=event_tol if event_tol_ is None else float(event_tol_),
        dtmax=dtmax, root_finder=root_finder, gains=gains, free=bool(free),
    )  # fmt: skip
    name = kind.name
    if kind.driver == "sde":
        if not free:  # a free-time SDE request is refused by the free-time planner
            r.update(_check_sde(r, kind))
    else:
        # The same tolerance rules on every deterministic path (plain, clocked, segmented).
        if kind.adaptive and (rtol is None or atol is None):
            raise ValueError(
                f"simulate: adaptive solver {name} needs `rtol` and `atol`; "
                f"got rtol={rtol}, atol={atol}."
            )
        if not kind.adaptive and (rtol is not None or atol is not None):
            raise ValueError(
                f"simulate: `rtol`/`atol` apply to adaptive solvers only; {name} is "
                f"fixed-step (got rtol={rtol}, atol={atol}). Choose Tsit5/Dopri5/Dopri8 or "
                "drop them."
            )
        if not kind.adaptive and not free:
            r["dt"] = check_step(name, dt)
            if kind.driver == "fixed":
                r["seg"] = grid_segments(ts, t0, t1, r["dt"])
        if kind.driver == "clocked" and not free:
            r.update(_check_clocked(r, kind))
    if free:
        horizon = _free_time.plan(
            t0, t1, ts, sample_dt=sample_dt, num_samples=num_samples, dt=dt, num_steps=num_steps,
            adaptive=kind.adaptive, solver_name=kind.name, stochastic=kind.driver == "sde",
            clocks=clocks, events=events, discontinuities=discontinuities, dtmax=dtmax,
        )  # fmt: skip
        if progress is not False and _free_time.traced(t0, t1, ts):
            raise ValueError(
                "simulate: `progress` reports need concrete `t0`/`t1` [s] (the display's scale); "
                "got traced times. Drop `progress` inside `jit`/`grad`/`vmap`."
            )
        r.update(horizon=horizon, t0=horizon.t0, t1=horizon.t1)
    readers = args_readers(clocks, events, t0, y0, args, r.get("held0") or {})
    check_commands(model, args, readers=readers, key=skey)
    r["args"] = args_as_traced(args)
    if r.get("held0"):
        check_held_commands(model, clocks, r["held0"], readers, skey)
        check_held_units(model, clocks, r["held0"], skey)
    return Request(**r)
