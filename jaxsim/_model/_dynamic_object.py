r"""The abstract model with continuous states, and the composition of several into one system.

A `AbstractDynamicObject` is the JAX counterpart of Basilisk's `DynamicObject`: it owns a state
pytree and supplies

- `drift(t, y, args)`: $f(t, y)$ in $dy = f\,dt + \sum_i g_i\,dW_i$, with the structure of `y`;
- `diffusion(t, y, args)` (optional): the $g_i$, each leaf of shape `leaf.shape + (noise_dim,)`;
- `energy_momentum(t, y, args)` (optional): a dict of diagnostic scalars/vectors;
- `outputs(t, y, args)` (optional): derived outputs recorded at sample times;
- `step_map(t, y)` (optional): a map applied by the driver after every completed step (Basilisk's
  `postIntegration`/`modifyStates`, e.g. the MRP shadow-set switch). It returns `(y_new, counts)` with
  `counts` a dict of integer counters that the driver accumulates. It must map a state to an equivalent
  description of the same physical state (the trajectory is continuous through it); solvers with FSAL
  re-evaluate the derivative after a step in which the map changed `y`.
- `units()` (optional): units of the states, outputs and commands (labels and dataset attributes,
  checked against each run);
- `validity(y0)` (optional): `{name: bool array}`, True where the parameters (and `y0`) are
  physical. `simulate` reads it once per run: a concrete `False` is refused at the call, naming
  the check; a traced one (a model changed by `eqx.tree_at`, a dispersion, `vmap`) fails the run
  with `RESULTS.invalid_model` (an error naming the check with `throw=True`).

Everything is pure: no state is mutated, so `jit`, `vmap`, `grad` compose with it.
"""

import abc
from collections.abc import Iterable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from ._validation import check_name, check_unique_names


# The parts of `units()`: the state (a run's `ys`), the recorded outputs, the commands (`args`).
UNIT_KINDS = ("ys", "outputs", "args")


class AbstractDynamicObject(eqx.Module):
    """Base class of models whose continuous states are integrated.

    Subclasses define `name` (a static string, the key of the object's state inside a `System`),
    `init_state` and `drift`; the other hooks have neutral defaults.
    """

    name: eqx.AbstractVar[str]

    ints_are_parameters: ClassVar[bool] = False
    """How `simulate` converts a Python int in this model's non-static fields (and in objects it
    holds that do not declare this flag themselves). `True`: the int is a physical parameter given
    without a decimal point (`mass=500`) and becomes a float64 array, traced like a float. `False`
    (the default, for your own models): it stays a compile-time constant, since it may be a count
    or a shape. Floats always become arrays. The effectors library's classes set `True`; a class
    of yours derived from one of them that keeps a count in a non-static field sets `False` (or
    marks the field `eqx.field(static=True)`)."""

    @abc.abstractmethod
    def init_state(self, *args, **kwargs) -> Any:
        """Return the initial state pytree of this object."""

    @abc.abstractmethod
    def drift(self, t, y, args) -> Any:
        """Return $f(t, y)$, with the structure of `y`."""

    @property
    def noise_dim(self) -> int:
        """Number of independent Wiener processes driving this object (0: deterministic)."""
        return 0

    def diffusion(self, t, y, args) -> Any:
        """Return $g(t, y)$: each leaf shaped `leaf.shape + (noise_dim,)`. Default: no noise."""
        return None

    def energy_momentum(self, t, y, args) -> dict:
        """Energy and momentum diagnostics (dict of arrays). Default: none."""
        return {}

    def outputs(self, t, y, args) -> dict:
        """Derived outputs recorded at sample times (dict of arrays). Default: none."""
        return {}

    def units(self) -> dict | None:
        """Units of what the model records and reads, keyed as a run's results:
        `{"ys": state units, "outputs": output units, "args": command units}`, each keyed like the
        state (`init_state()`), the recorded outputs (`derived`) and the commands
        (`command_spec()`), nested dicts for nested entries; a unit string may stand for a whole
        subtree (`"ys": "m"` for an array state). E.g. `{"ys": {"x": "m", "v": "m/s"},
        "outputs": {"energy": "J"}, "args": {}}`. `jaxsim.results.to_xarray` and
        `jaxsim.plotting` read them for attributes and labels.

        A declared `units()` is checked by `simulate` against the run: a state or output leaf
        without a unit, or a unit naming an entry the run does not have, is refused by name
        (`ValueError`); so are commands declared by `command_spec()` without a unit. Default
        None: undeclared (results carry no units, nothing is checked)."""
        return None

    def element_dims(self) -> dict:
        """Names of per-element dimensions, `{key: dim}`: the entries of `outputs` and of the
        state under `key` (e.g. `"rw"`) have their first axis that is not a frame component
        along the shared dimension `dim` (e.g. `"wheel"`) in `jaxsim.results.to_xarray`.
        Default: none (`{}`)."""
        return {}

    def derived(self, t, y, args) -> dict:
        """`outputs` merged with `energy_momentum` (what `simulate` records at the samples).

        Override it to share work between the two (the spacecraft evaluates its hub context once).
        """
        return merge_derived(self.outputs(t, y, args), self.energy_momentum(t, y, args))

    def step_map(self, t, y) -> tuple[Any, dict]:
        """Map applied after each completed step; returns `(y, counts)`. Default: identity."""
        return y, {}

    def breakpoints(self) -> tuple:
        """Known times of discontinuities in the drift (scheduled sources), for adaptive solvers."""
        return ()

    def check_solver(self, solver, dt) -> None:
        """Refuse (ValueError) a solver, or a step `dt` (None: adaptive), this model cannot run
        under; `simulate` calls it after checking its arguments. Default: any."""

    def init_commands(self) -> dict | None:
        """The commands this object reads from `args`, as zeros of their shapes: `{address: {key:
        zeros}}` (it reads `args[address][key]`, an array that must broadcast to the zeros'
        shape). `simulate` checks user commands and flight-software outputs against it (a
        misspelt address or key, or a wrong shape, is refused by name); their units are those
        of `units()["args"]`, compared with a value tagged `jaxsim.Quantity(u, unit)` and with
        the units a discrete model declares for its outputs. Default None: undeclared (a user
        model may read anything), `args` is not checked."""
        return None

    def command_spec(self) -> dict | None:
        """The commands this object reads from `args`, checked by `simulate` at the call.

        `{address: {key: shape}}`: the object reads `args[address][key]`, an array that must
        broadcast to `shape` (None: any shape); an unknown key under a declared address is an
        error. `{address: ArrayCommand(shape)}`: the object reads `args[address]` itself, an
        array that must broadcast to `shape` (e.g. a MuJoCo scene's `ctrl`). Default: the
        shapes of `init_commands()` (None when that is None: `args` is not checked).
        """
        return command_shapes(self.init_commands())

    @property
    def reads_only_commands(self) -> bool:
        """True when the object reads nothing from `args` but the addresses of `command_spec()`.

        Then `simulate` refuses other top-level keys of `args` unless a discrete model or an event
        given to the run reads them. Default False.
        """
        return False


def command_shapes(commands: dict | None) -> dict | None:
    """`{address: {key: shape}}` of a declaration `{address: {key: zeros}}` (None stays None)."""
    if commands is None:
        return None
    return {a: {k: tuple(jnp.shape(v)) for k, v in keys.items()} for a, keys in commands.items()}


class ArrayCommand(NamedTuple):
    """In a `command_spec`, an address whose value is itself a command array (not a dict of
    them): `args[address]` must be an array that broadcasts to `shape` (None: not checked,
    e.g. where objects of a `System` read the address differently); with `exact`, of `shape`
    itself (rows that belong to different elements, e.g. one wrench per body: one row broadcast
    over all of them is refused)."""

    shape: tuple | None = None
    exact: bool = False


class System(AbstractDynamicObject):
    """Several dynamic objects integrated together in one state with one solver.

    This is Basilisk's synchronized integration (`syncDynamicsIntegration`): one integrator advances
    the concatenated states of all objects, each stage evaluating every object at the same stage time.
    The state is the dict `{obj.name: obj_state}`.

    **Arguments:**

    - `objects`: the dynamic objects, with unique `name`s.
    - `name`: key of this system when it is nested in another `System`.
    """

    objects: tuple[AbstractDynamicObject, ...]
    name: str = eqx.field(static=True)

    def __init__(self, objects: Iterable[AbstractDynamicObject], *, name: str = "system"):
        objects = tuple(objects)
        if not objects:
            raise ValueError("System: `objects` must hold at least one dynamic object; got ().")
        for i, obj in enumerate(objects):
            if not isinstance(obj, AbstractDynamicObject):
                raise ValueError(
                    f"System: `objects[{i}]` must be an AbstractDynamicObject; got {type(obj).__name__}."
                )
        check_unique_names("System", "objects", [o.name for o in objects])
        self.objects = objects
        self.name = check_name("System", "name", name)

    def __getitem__(self, name: str) -> AbstractDynamicObject:
        for obj in self.objects:
            if obj.name == name:
                return obj
        raise KeyError(f"System: no object named {name!r}; have {[o.name for o in self.objects]}.")

    def init_state(self, states: dict | None = None) -> dict:
        """Assemble `{name: state}`; objects absent from `states` use their own `init_state()`."""
        states = {} if states is None else dict(states)
        unknown = set(states) - {o.name for o in self.objects}
        if unknown:
            raise ValueError(
                f"System: `states` has unknown object name(s) {sorted(unknown)!r}; "
                f"objects are {[o.name for o in self.objects]!r}."
            )
        return {
            o.name: states[o.name] if o.name in states else o.init_state() for o in self.objects
        }

    def drift(self, t, y, args):
        return {o.name: o.drift(t, y[o.name], _sub_args(args, o.name)) for o in self.objects}

    @property
    def noise_dim(self) -> int:
        return sum(o.noise_dim for o in self.objects)

    def diffusion(self, t, y, args):
        """Block-diagonal composition: object k's noise occupies its own slice of the noise vector."""
        total = self.noise_dim
        out, offset = {}, 0
        for o in self.objects:
            nk = o.noise_dim
            if nk == 0:
                out[o.name] = jtu.tree_map(
                    lambda leaf: jnp.zeros(jnp.shape(leaf) + (total,), jnp.result_type(leaf)),
                    y[o.name],
                )
            else:
                g = o.diffusion(t, y[o.name], _sub_args(args, o.name))
                lo, hi = offset, total - offset - nk
                out[o.name] = jtu.tree_map(
                    lambda leaf: jnp.pad(leaf, [(0, 0)] * (leaf.ndim - 1) + [(lo, hi)]), g
                )
            offset += nk
        return out

    def energy_momentum(self, t, y, args):
        return {
            o.name: o.energy_momentum(t, y[o.name], _sub_args(args, o.name)) for o in self.objects
        }

    def outputs(self, t, y, args):
        return {o.name: o.outputs(t, y[o.name], _sub_args(args, o.name)) for o in self.objects}

    def derived(self, t, y, args):
        return {o.name: o.derived(t, y[o.name], _sub_args(args, o.name)) for o in self.objects}

    def units(self) -> dict | None:
        """The objects' units nested under their names, as their states, outputs and commands
        (`args[name]`) are; objects that declare none are left out (None when none declares)."""
        parts = {o.name: o.units() for o in self.objects}
        parts = {name: u for name, u in parts.items() if u is not None}
        if not parts:
            return None
        return {
            kind: {name: u[kind] for name, u in parts.items() if kind in u} for kind in UNIT_KINDS
        }

    def step_map(self, t, y):
        new, counts = {}, {}
        for o in self.objects:
            new[o.name], counts[o.name] = o.step_map(t, y[o.name])
        return new, counts

    def breakpoints(self):
        return tuple(b for o in self.objects for b in o.breakpoints())

    def check_solver(self, solver, dt) -> None:
        for o in self.objects:
            o.check_solver(solver, dt)

    def command_spec(self):
        """Union of the objects' command specs (a shape read differently by two objects: None).

        `args[name]` goes to the object `name` alone; the other objects share the top-level `args`.
        """
        specs = [o.command_spec() for o in self.objects]
        if all(s is None for s in specs):
            return None
        merged = {}
        for spec in specs:
            for address, keys in (spec or {}).items():
                if isinstance(keys, ArrayCommand) or isinstance(merged.get(address), ArrayCommand):
                    # Read as an array by one object: the same array for all, else any shape.
                    same = merged.get(address, keys) == keys
                    merged[address] = keys if same else ArrayCommand(None)
                    continue
                keys = keys if isinstance(keys, dict) else dict.fromkeys(keys)
                cur = merged.setdefault(address, {})
                for k, shape in keys.items():
                    cur[k] = shape if cur.get(k, shape) == shape else None
        return merged

    @property
    def reads_only_commands(self) -> bool:
        return all(o.reads_only_commands for o in self.objects)


def _sub_args(args, name):
    """Objects of a `System` receive `args[name]` when `args` is a dict keyed by object name."""
    if isinstance(args, dict) and name in args:
        return args[name]
    return args


# Tree structure of `init_state()`'s output, keyed by the model's tree structure (static fields
# included) and leaf shapes: `jax.eval_shape` traces `init_state` at every call (about 2 ms per
# `simulate` call for a point mass, more than a short run itself).
_STATE_STRUCTURES: dict = {}
_MAX_CACHED_STRUCTURES = 256


def structure_key(obj) -> tuple | None:
    """A hashable key of `obj`'s tree structure (static fields included) and of its leaves' shapes
    and dtypes; None when a static field cannot be hashed (then nothing is cached)."""
    leaves, treedef = jtu.tree_flatten(obj)
    key = (
        treedef,
        tuple((getattr(x, "shape", None), getattr(x, "dtype", type(x))) for x in leaves),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _state_structure(obj: AbstractDynamicObject, key=None):
    """`(treedef, shapes)` of `obj.init_state()`'s output (shapes: a tree of ShapeDtypeStructs);
    `key`: `structure_key(obj)` when already computed."""
    key = structure_key(obj) if key is None else key
    cached = None if key is None else _STATE_STRUCTURES.get(key)
    if cached is None:
        shapes = jax.eval_shape(obj.init_state)
        cached = (jtu.tree_structure(shapes), shapes)
        if key is not None:
            if len(_STATE_STRUCTURES) >= _MAX_CACHED_STRUCTURES:
                _STATE_STRUCTURES.clear()
            _STATE_STRUCTURES[key] = cached
    return cached


def state_shapes(obj: AbstractDynamicObject, y, where: str = "simulate", key=None):
    """`obj.init_state()`'s output as ShapeDtypeStructs, after checking that `y` has its structure
    (`key`: `structure_key(obj)` when already computed)."""
    struct, shapes = _state_structure(obj, key)
    if struct != jtu.tree_structure(y):
        raise ValueError(
            f"{where}: `y0` must have the structure of `{type(obj).__name__}.init_state()`;\n"
            f"expected {eqx.tree_pformat(shapes)}\ngot {eqx.tree_pformat(y)}."
        )
    return shapes


def check_state_structure(obj: AbstractDynamicObject, y, where: str = "simulate") -> None:
    """Raise a clear error when `y` does not match the structure of `obj.init_state()`'s output."""
    state_shapes(obj, y, where)


def merge_derived(outputs: dict, energy: dict) -> dict:
    """`outputs` with the entries of `energy` added; nested dicts merge, `outputs` wins on a clash."""
    if isinstance(outputs, dict) and isinstance(energy, dict):
        keys = list(outputs) + [k for k in energy if k not in outputs]
        return {
            k: merge_derived(outputs[k], energy[k])
            if k in outputs and k in energy
            else outputs.get(k, energy.get(k))
            for k in keys
        }
    return outputs
