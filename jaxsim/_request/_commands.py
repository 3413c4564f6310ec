"""The commands in `args`: their keys, shapes and dtypes against the model's declaration, their units (`Quantity` values, the declared units of flight-software outputs), and the held outputs of discrete models and what they and the events read (abstract runs of their functions, kept per input structure)."""

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._model._clocks import with_held
from .._model._dynamic_object import (
    ArrayCommand,
    System,
    structure_key,
)
from .._model._quantity import is_quantity, parse_unit
from ._settings import _short


# --------------------------------------------------------------------------------------------------
# Commands in `args`


def _normalized(spec) -> dict:
    # `{address: {key: shape or None}}`; a sequence of keys stands for unknown shapes; an
    # `ArrayCommand` is an address read as one array.
    out = {}
    for address, keys in spec.items():
        if isinstance(keys, ArrayCommand):
            out[address] = ArrayCommand(
                None if keys.shape is None else tuple(keys.shape), keys.exact
            )
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
        _check_array_entry(where, name, entry, keys.shape, what, keys.exact)
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


def _check_array_entry(where: str, name: str, entry, want, what: str, exact=False) -> None:
    """An address read as one array (`ArrayCommand`): not a dict, and broadcasting to `want`
    (with `exact`: of shape `want`)."""
    if want is not None and isinstance(entry, Mapping):
        raise ValueError(
            f"{where}`{name}` must be an array of shape {tuple(want)} for {what}; got a dict "
            f"with keys {sorted(map(str, entry))!r}."
        )
    _check_shape(where, name, entry, want, what)
    if exact and want is not None and tuple(np.shape(entry)) != tuple(want):
        raise ValueError(
            f"{where}`{name}` must have shape {tuple(want)} for {what} (one row per element: "
            f"not broadcast); got shape {tuple(np.shape(entry))}."
        )


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
    if not ok or (0 in tuple(want) and shape != tuple(want)):
        if 0 in tuple(want):  # nothing reads it: a value here would be dropped silently
            raise ValueError(
                f"{where}`{name}` must have shape {tuple(want)} for {what} (it has no entries: "
                f"nothing reads it); got shape {shape}."
            )
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


def _check_held_structure(m, got, want) -> None:
    """The held outputs an update returns keep the structure and shapes of the initial ones
    (`held0` / `init_outputs`): they are a fixed-size part of the run's state."""
    want = jax.eval_shape(lambda: want)
    same = jtu.tree_structure(got) == jtu.tree_structure(want) and all(
        np.shape(a) == np.shape(b) for a, b in zip(jtu.tree_leaves(got), jtu.tree_leaves(want))
    )
    if not same:
        raise ValueError(
            f"simulate: the update of discrete model {m.name!r} returned held outputs of "
            f"structure {_describe(got)}; expected that of its initial held outputs (`held0` / "
            f"`init_outputs`): {_describe(want)} (the same addresses and shapes at every tick)."
        )


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
            if m.name in held:
                _check_held_structure(m, out[1], held[m.name])
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
