r"""Saved setups: a spacecraft (or a `jaxsim.System`) and its `simulate` settings as a declarative
JSON file, validated on load, and run with one command (`python -m effectors.run setup.json`).

A setup file is a JSON object (or a TOML document with the same tables, read with the standard
library's `tomllib`):

```json
{
  "format": "effectors.setup/1",
  "model": {"type": "effectors.Spacecraft",
            "hub": {"type": "effectors.Hub", "mass": 750.0, "IHubPntBc_B": [[900, 0, 0], ...]},
            "state_effectors": [{"type": "effectors.ReactionWheels", "gsHat_B": [...], ...}],
            "name": "spacecraft"},
  "y0": {"hub": {"r_BN_N": [...], "v_BN_N": [...], "sigma_BN": [...], "omega_BN_B": [...]},
         "rw": {"Omega": [...]}},
  "simulate": {"t1": 600.0, "dt": 0.1, "sample_dt": 10.0, "solver": {"type": "jaxsim.RK4"}},
  "epoch": "2026-01-01T00:00:00+00:00"
}
```

Every object is `{"type": "<module>.<Class>", <constructor argument>: <value>, ...}`: the public
classes of `effectors`, `jaxsim` (solvers, clocks, `System`) and `jaxsim.signals` (scheduled
inputs); arrays are nested lists, rationals (clock periods) strings `"p/q"`. `save_setup` reads
each object's constructor arguments back from its fields (arguments that the constructor stores
under another form have an adapter here) and refuses to write a file that does not rebuild the
same model: it rebuilds it and compares the pytrees leaf by leaf. `load_setup` validates the
file (unknown or mistyped keys are named with their expected types) and returns a `Setup`.

Not declarative, hence refused by name: events (Python functions), `MuJoCoScene` (a MuJoCo
model), user-defined classes, and keys of `simulate` that take functions (`progress` callables,
`root_finder`, `adjoint`).
"""

import collections.abc
import dataclasses
import datetime as _dt
import importlib
import inspect
import json
import os
import tomllib
import typing
from fractions import Fraction
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jaxtyping import PyTree

import jaxsim as js
from jaxsim.results import epoch_text, refuse_existing, replace_safely


__all__ = ["Setup", "describe", "load_setup", "save_setup", "build"]

FORMAT = "effectors.setup/1"
# Modules whose public classes a setup may name (nothing else is imported by `load_setup`).
_MODULES = ("effectors", "jaxsim", "jaxsim.signals", "jaxsim.controls")
# `simulate` settings a setup may hold, with their expected JSON types.
_NUMBER = (int, float)
_SETTINGS = {
    "t1": ("a number [s]", _NUMBER),
    "t0": ("a number [s]", _NUMBER),
    "dt": ("a number [s]", _NUMBER),
    "sample_dt": ("a number [s]", _NUMBER),
    "ts": ("a list of numbers [s]", list),
    "rtol": ("a number", _NUMBER),
    "atol": ("a number", _NUMBER),
    "max_steps": ("an integer", int),
    "outputs": ("true or false", bool),
    "checkpoint": ("true or false", bool),
    "throw": ("true or false", bool),
    "solver": ("an object {type: ...}", dict),
    "clocks": ("a list of objects {type: ...}", list),
    "discontinuities": ("a list of numbers [s]", list),
    "max_events": ("an integer", int),
    "event_tol": ("a number", _NUMBER),
    "dtmax": ("a number [s]", _NUMBER),
    "args": ("an object of commands (numbers, lists)", dict),
    "key": ("an integer seed", int),
}
_TOP = {
    "format": "the string " + repr(FORMAT),
    "model": "an object {type: ...}",
    "y0": "an object (the initial state)",
    "simulate": "an object of simulate settings",
    "epoch": "an ISO 8601 date string",
    "description": "a string",
}
_WHERE = "setup"
# Nesting levels a setup may have (a spacecraft with bodies attached to panels needs about 10):
# deeper is refused by name, before Python's recursion limit.
MAX_DEPTH = 64
# Integer settings held as int64 in the program: `{key: (lowest, highest)}`.
_INT_RANGE = {"max_steps": (1, 2**63 - 1), "max_events": (0, 2**63 - 1)}


# ----------------------------------------------------------------------------------------------
# Encoding: objects -> declarative JSON values
# ----------------------------------------------------------------------------------------------


# The public classes of `_MODULES` that a setup never holds, with the reason: saving and loading
# consult this one list (`_declarative_class`), so a hand-edited file cannot name what
# `save_setup` refuses (a MuJoCo scene would make the loader open and parse any file it names).
_NOT_DECLARATIVE = {
    "MuJoCoScene": "a MuJoCo model: `mjcf` is a file path or XML text that MuJoCo reads",
    "NRLMSISE00Atmosphere": "its `epoch` is an `effectors.astro.Epoch` (astropy time scales)",
    "OnTimeFSW": "its `request` is a Python function",
    "DiscreteModel": "its `update` is a Python function",
    "Event": "its `cond` and `reset` are Python functions (events are not held by setups)",
    "StepMappedSolver": "its `step_map` is a Python function",
    **{
        name: "it is a result, not part of a setup"
        for name in ("Solution", "HybridSolution", "EventLog")
    },
    **{
        name: "it is an intermediate value of a step, not part of a setup"
        for name in (
            "BackSub",
            "Contribution",
            "EnergyMomentum",
            "ForceTorque",
            "HubContext",
            "JointContribution",
            "JointRows",
            "MassContext",
            "MassProps",
            "TankProps",
        )
    },  # fmt: skip
}


def _declarative_class(module: str, name: str, where: str):
    """The class `module.name` if a setup may hold it, else a ValueError naming `where`: a public
    concrete `equinox.Module` of `_MODULES` that is not in `_NOT_DECLARATIVE`. The one rule of
    `save_setup` (through `describe`) and `load_setup` (through `build`)."""
    type_name = f"{module}.{name}"
    if module not in _MODULES or name.startswith("_"):
        raise ValueError(
            f"{_WHERE}: `{where}` must name a public class of {', '.join(_MODULES)}; got "
            f"{type_name!r}."
        )
    if name in _NOT_DECLARATIVE:
        raise ValueError(
            f"{_WHERE}: `{where}` {type_name!r} is not declarative ({_NOT_DECLARATIVE[name]}); a "
            "setup file cannot hold it (build it in code)."
        )
    cls = getattr(importlib.import_module(module), name, None)
    if (
        not isinstance(cls, type)
        or not issubclass(cls, eqx.Module)
        or inspect.isabstract(cls)
        or name.startswith("Abstract")
    ):
        raise ValueError(f"{_WHERE}: `{where}` {type_name!r} is not a concrete class of {module}.")
    return cls


def _type_name(obj) -> str:
    cls = type(obj)
    for module in _MODULES:
        mod = importlib.import_module(module)
        if getattr(mod, cls.__name__, None) is cls:
            try:
                _declarative_class(module, cls.__name__, "type")
            except ValueError as err:
                raise TypeError(
                    f"{_WHERE}: {cls.__name__} cannot be saved: {_NOT_DECLARATIVE.get(cls.__name__, err)}."
                ) from None
            return f"{module}.{cls.__name__}"
    raise TypeError(
        f"{_WHERE}: {cls.__module__}.{cls.__name__} is not a public class of "
        f"{', '.join(_MODULES)}; a setup file holds only those (save user classes in code)."
    )


def _attached_pairs(obj):
    return [[int(i), child] for i, child in zip(obj.attached_index, obj.attached, strict=True)]


# Constructor arguments that a class stores under another form: `{class name: {arg: getter}}`.
_ADAPTERS = {
    "HingedRigidBodies": {"attached": _attached_pairs},
    "SpinningBodies": {"attached": _attached_pairs},
    "ThrusterStateEffector": {"commands": lambda obj: obj.commands_schedule},
}


def _arguments(obj) -> dict:
    """The constructor arguments of `obj`, read back from its fields."""
    cls = type(obj)
    name = cls.__name__
    params = inspect.signature(cls.__init__).parameters
    adapters = _ADAPTERS.get(name, {})
    args = {}
    for pname, p in list(params.items())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if pname in adapters:
            args[pname] = adapters[pname](obj)
        elif hasattr(obj, pname):
            args[pname] = getattr(obj, pname)
        elif p.default is p.empty:
            raise TypeError(
                f"{_WHERE}: {name}: the constructor argument `{pname}` is not stored on the "
                "object; it cannot be saved."
            )
    return args


def describe(obj: Any) -> Any:
    """`obj` as a declarative JSON value: objects `{"type": ..., <argument>: ...}`, arrays as
    nested lists, numbers, strings, booleans, None, lists and objects."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, Fraction):
        return str(obj)
    if isinstance(obj, int | float | np.integer | np.floating | np.bool_):
        return obj.item() if hasattr(obj, "item") else obj
    if isinstance(obj, jax.Array | np.ndarray):
        if isinstance(obj, jax.core.Tracer):
            raise TypeError(f"{_WHERE}: a traced value cannot be saved; save outside `jit`.")
        return np.asarray(obj).tolist()
    if isinstance(obj, dict):
        return {str(k): describe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [describe(v) for v in obj]
    if isinstance(obj, eqx.Module):
        out = {"type": _type_name(obj)}
        for key, value in _arguments(obj).items():
            out[key] = describe(value)
        return out
    raise TypeError(
        f"{_WHERE}: a {type(obj).__name__} ({obj!r:.60}) is not declarative (numbers, arrays, "
        "strings, lists, dicts and effectors/jaxsim objects only)."
    )


# ----------------------------------------------------------------------------------------------
# Decoding: declarative JSON values -> objects
# ----------------------------------------------------------------------------------------------


def _resolve(type_name, where: str):
    if not isinstance(type_name, str) or "." not in type_name:
        raise ValueError(
            f"{_WHERE}: `{where}.type` must be a string '<module>.<Class>' (modules "
            f"{', '.join(_MODULES)}); got {type_name!r}."
        )
    module, _, name = type_name.rpartition(".")
    return _declarative_class(module, name, f"{where}.type")


def _check_bool(cls, pname: str, p, value, where: str) -> None:
    """A constructor argument annotated `bool` (or `bool | Sequence[bool]`) takes JSON
    `true`/`false` (or a list of them): a string such as "false" would be truthy."""
    ann = p.annotation
    if ann is bool:
        kinds = (bool,)
    elif set(typing.get_args(ann)) == {bool, collections.abc.Sequence[bool]}:
        kinds = (bool, list)
    else:
        return
    ok = isinstance(value, bool) or (
        list in kinds and isinstance(value, list) and all(isinstance(v, bool) for v in value)
    )
    if not ok:
        expected = "true or false" + (" (or a list of them)" if list in kinds else "")
        raise ValueError(
            f"{_WHERE}: `{where}` ({cls.__name__}.{pname}) must be {expected}; got {value!r:.60}."
        )


def _is_numeric_list(value) -> bool:
    if not isinstance(value, list) or not value:
        return False
    return all(
        (isinstance(v, int | float) and not isinstance(v, bool)) or _is_numeric_list(v)
        for v in value
    )


def _check_depth(value, where: str) -> None:
    """Refuse a value nested deeper than `MAX_DEPTH` levels, naming where (iterative: a deep
    value does not reach Python's recursion limit here)."""
    stack = [(value, where, 0)]
    while stack:
        v, at, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(
                f"{_WHERE}: `{at:.120}...` is nested deeper than {MAX_DEPTH} levels (objects and "
                "lists in objects and lists); a setup is at most that deep."
            )
        if isinstance(v, dict):
            stack.extend((x, f"{at}.{k}" if at else str(k), depth + 1) for k, x in v.items())
        elif isinstance(v, list | tuple):
            stack.extend((x, f"{at}[{i}]", depth + 1) for i, x in enumerate(v))


def build(value: Any, where: str = "model") -> Any:
    """Objects from a declarative value (see `describe`); `where` names it in errors."""
    _check_depth(value, where)
    return _build(value, where)


def _build(value: Any, where: str) -> Any:
    if isinstance(value, dict) and "type" in value:
        cls = _resolve(value["type"], where)
        params = inspect.signature(cls.__init__).parameters
        kwargs = {}
        for key, v in value.items():
            if key == "type":
                continue
            if key not in params:
                allowed = [p for p in list(params)[1:]]
                raise ValueError(
                    f"{_WHERE}: `{where}.{key}` is not an argument of {cls.__name__}; expected "
                    f"one of {allowed}."
                )
            _check_bool(cls, key, params[key], v, f"{where}.{key}")
            kwargs[key] = _build(v, f"{where}.{key}")
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{_WHERE}: `{where}` ({cls.__name__}) could not be built: {err}"
            ) from err
    if isinstance(value, dict):
        return {k: _build(v, f"{where}.{k}") for k, v in value.items()}
    if _is_numeric_list(value):
        try:
            return np.asarray(value, dtype=float if _has_float(value) else int)
        except ValueError:  # ragged: a list of lists
            return [_build(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, list):
        return [_build(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _has_float(value) -> bool:
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    return isinstance(value, float)


def _state(value, where: str):
    """An initial state: nested objects of arrays."""
    if isinstance(value, dict):
        return {k: _state(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return np.asarray(float(value))
    if _is_numeric_list(value):
        return np.asarray(value, dtype=float)
    raise ValueError(
        f"{_WHERE}: `{where}` must be a number, a list of numbers or an object of them (the "
        f"initial state); got {value!r:.60}."
    )


# ----------------------------------------------------------------------------------------------
# Setups
# ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setup:
    """A loaded setup: the model, its initial state and the `simulate` settings.

    - `model`: the spacecraft (or `jaxsim.System`); `y0`: the initial state (`None`: the
      model's `init_state()`); `settings`: keyword arguments of `jaxsim.simulate` (`t1`, `dt`,
      `solver`, ...); `epoch`: an ISO 8601 date of $t = 0$ or None; `description`: the file's
      JSON value (what `run_campaign(..., setup=...)` records).
    """

    model: Any
    y0: Any
    settings: dict
    epoch: str | None = None
    description: dict | None = None

    def run(self, **overrides):
        """`jaxsim.simulate(model, y0, **settings, **overrides)`."""
        y0 = self.model.init_state() if self.y0 is None else self.y0
        return js.simulate(self.model, y0, **{**self.settings, **overrides})

    def to_xarray(self, sol=None):
        """The run's Dataset (`jaxsim.results.to_xarray`) with the setup's epoch."""
        sol = self.run() if sol is None else sol
        return js.results.to_xarray(sol, epoch=self.epoch)


def _check_type(where: str, value, expected: str, types) -> None:
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types))
    if not ok:
        raise ValueError(f"{_WHERE}: `{where}` must be {expected}; got {value!r:.60}.")


def _as_tuple(types) -> tuple:
    return types if isinstance(types, tuple) else (types,)


def validate(data) -> None:
    """Raise a ValueError naming the first key of a setup description with a wrong type."""
    if not isinstance(data, dict):
        raise ValueError(f"{_WHERE}: a setup must be an object; got {type(data).__name__}.")
    _check_depth(data, "")
    for key in data:
        if key not in _TOP:
            raise ValueError(
                f"{_WHERE}: unknown key `{key}`; expected keys {sorted(_TOP)} ({_TOP})."
            )
    if data.get("format", FORMAT) != FORMAT:
        raise ValueError(f"{_WHERE}: `format` must be {FORMAT!r}; got {data['format']!r}.")
    if "model" not in data:
        raise ValueError(f"{_WHERE}: `model` ({_TOP['model']}) is required.")
    _check_type("model", data["model"], _TOP["model"], dict)
    if "type" not in data["model"]:
        raise ValueError(f"{_WHERE}: `model.type` is required ('<module>.<Class>').")
    for key in ("epoch", "description"):
        if key in data:
            _check_type(key, data[key], _TOP[key], str)
    settings = data.get("simulate", {})
    _check_type("simulate", settings, _TOP["simulate"], dict)
    for key, value in settings.items():
        if key not in _SETTINGS:
            raise ValueError(
                f"{_WHERE}: `simulate.{key}` is not a setting a setup can hold; expected one of "
                f"{sorted(_SETTINGS)} (events, progress, root_finder and adjoint take functions)."
            )
        expected, types = _SETTINGS[key]
        _check_type(f"simulate.{key}", value, expected, types)
        if key in _INT_RANGE and not _INT_RANGE[key][0] <= value <= _INT_RANGE[key][1]:
            lo, hi = _INT_RANGE[key]
            raise ValueError(
                f"{_WHERE}: `simulate.{key}` must be an integer in [{lo}, 2**63 - 1] (an int64 "
                f"in the program); got {value:.3g}."
            )
    if "t1" not in settings and "ts" not in settings:
        raise ValueError(f"{_WHERE}: `simulate.t1` (a number [s]) or `simulate.ts` is required.")
    if "epoch" in data:
        _epoch_text(data["epoch"])


def _epoch_text(epoch) -> str:
    """An epoch (a `datetime.datetime`/`date` or an ISO 8601 string) as ISO 8601 text, refused
    with the setup's prefix (`jaxsim.results.epoch_text`)."""
    try:
        return epoch_text(epoch)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{_WHERE}: {err}") from None


def from_description(data: dict) -> Setup:
    """A `Setup` from a (validated) description."""
    validate(data)
    model = build(data["model"], "model")
    y0 = _state(data["y0"], "y0") if "y0" in data else None
    settings = {}
    for key, value in data.get("simulate", {}).items():
        if key in ("solver",):
            settings[key] = build(value, f"simulate.{key}")
        elif key == "clocks":
            settings[key] = tuple(build(v, f"simulate.clocks[{i}]") for i, v in enumerate(value))
        elif key in ("ts", "discontinuities"):
            settings[key] = np.asarray(value, dtype=float)
        elif key == "args":
            settings[key] = build(value, "simulate.args")
        else:
            settings[key] = value
    return Setup(model, y0, settings, data.get("epoch"), data)


def _same(a, b) -> str | None:
    """Why two pytrees differ (structure or a leaf), or None."""
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    if ta != tb:
        return f"structure {ta} != {tb}"
    for i, (x, y) in enumerate(zip(la, lb, strict=True)):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y, equal_nan=True):
            return f"leaf {i}: {x!r:.80} != {y!r:.80}"
    return None


def save_setup(
    path: str | os.PathLike[str],
    model: js.AbstractDynamicObject,
    y0: PyTree | None = None,
    *,
    epoch: _dt.datetime | str | None = None,
    description: str | None = None,
    overwrite: bool = False,
    **settings: Any,
) -> dict:
    """Write `model` (a `Spacecraft` or `jaxsim.System`), its initial state `y0` and the
    `simulate` settings (`t1`, `dt`, `solver`, `sample_dt`, `ts`, `rtol`, `atol`, `clocks`,
    `args`, ...) to the JSON file `path`; `load_setup(path).run()` then runs the same simulation.

    **Arguments:**

    - `path`: the file to write (`.json`).
    - `model`, `y0`: the model and its initial state (None: `model.init_state()` at load).
    - `epoch`: the calendar date of $t = 0$ (a `datetime` or an ISO 8601 string), written to
      the results' attributes by `python -m effectors.run`.
    - `description`: free text.
    - `overwrite`: replace an existing file at `path` (default: refused with a
      `FileExistsError`, nothing written). The file is written under a temporary name and moved
      into place when complete.
    - `settings`: keyword arguments of `jaxsim.simulate` (see `Setup`).

    **Returns:** the description written (a JSON-serializable dict).

    **Raises:** `TypeError` for what is not declarative (events, user classes, MuJoCo scenes),
    `ValueError` when the file would not rebuild the same model (named by class),
    `FileExistsError` when `path` exists and `overwrite` is False.
    """
    refuse_existing(Path(path), overwrite, "save_setup", "`overwrite=True`")
    data: dict = {"format": FORMAT, "model": describe(model)}
    if y0 is not None:
        data["y0"] = describe(y0)
    if settings:
        data["simulate"] = describe(settings)
    if epoch is not None:
        data["epoch"] = _epoch_text(epoch)
    if description is not None:
        data["description"] = str(description)
    data = json.loads(json.dumps(data, allow_nan=False))
    again = from_description(data)
    why = _same(model, again.model)
    if why is not None:
        raise ValueError(
            f"save_setup: the description of {type(model).__name__} does not rebuild the same "
            f"model ({why}); an object changed after construction (e.g. `eqx.tree_at`) cannot "
            "be described by its constructor arguments."
        )
    text = json.dumps(data, indent=1)
    with replace_safely(path, overwrite=overwrite, where="save_setup") as tmp:
        tmp.write_text(text + "\n")
    return data


def load_setup(path: str | os.PathLike[str]) -> Setup:
    """Read and validate a setup file (JSON, or TOML with the same tables) into a `Setup`.

    **Raises:** `ValueError` naming the key (and its expected type) of an invalid file.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ValueError(f"load_setup: cannot read {str(path)!r}: {err}.") from None
    try:
        if path.suffix.lower() == ".toml":
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as err:
        raise ValueError(
            f"load_setup: {str(path)!r} is not valid {path.suffix[1:] or 'JSON'}: {err}."
        ) from None
    except RecursionError:
        raise ValueError(
            f"load_setup: {str(path)!r} is nested too deeply to parse; a setup is nested at most "
            f"{MAX_DEPTH} levels (objects and lists in objects and lists)."
        ) from None
    return from_description(data)


def default_output(path: str | os.PathLike) -> Path:
    """Where `python -m effectors.run` writes the results of `path` by default."""
    return Path(path).with_suffix(".zarr")
