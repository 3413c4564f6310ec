r"""The one data schema of a run, a batch and a campaign (xarray Datasets, Zarr and netCDF files).

`jaxsim.results.to_xarray` (a `Solution`, a `jax.vmap`-batched one, a `montecarlo.BatchResult`)
and `jaxsim.montecarlo.open_campaign` (a campaign store) give Datasets of this schema:

**Variables** (dotted names, one per leaf):

- outputs under their own names: `r_CN_N`, `omega_BN_B`, `rw.Omega` (effector outputs nest under
  the effector's name, a `System`'s under the object's name: `craft.rw.Omega`);
- states as `ys.<path>` (`ys.hub.sigma_BN`, `ys.rw.Omega`), step-map counters as
  `counts.<path>`, solver statistics as `stats.<key>` (`stats.num_steps`,
  `stats.counts.mrp_switches`), `t_final` [s] and `result` (the `jaxsim.RESULTS` code, 0:
  successful);
- events (runs with `events=`): `event.time` [s], `event.kind` (the event's name, "" for an
  unused row) and `event.index` (its position in `events=`, -1 unused) along dimension `event`,
  and `event.count`;
- batches and campaigns add `ok` and the parameters `params.<path>` per member; a `Solution`
  that is not the whole member output is prefixed by its key (`sol.r_CN_N`), other outputs are
  named by their dotted keys.

**Dimensions and coordinates:** `time` [s] (the sample times) and `member` (member index) lead;
then per-element dimensions shared by an effector's entries (`wheel`, `panel`, `body`,
`thruster`, ...: the effector's `ELEMENT_DIM`, or its name; qualified as `<effector>.<dim>` when
two effectors of the model declare the same one), coordinate `0 .. n-1`; then component
dimensions from Basilisk's frame-suffix names: `xyz` (`x`, `y`, `z`) for a vector (`r_CN_N`,
`torque_B`), `mrp` (`s1`, `s2`, `s3`) for an MRP set (`sigma_BN`), `row` and `column` (`x`,
`y`, `z`) for a 3 x 3 matrix (`ISC_PntB_B`). Any other axis is `<variable>_<i>`.

**Attributes:** `units` on every variable whose model declares it (the model's `units()`,
checked against the run by `simulate`; counters `count`, times `s`, codes `-`); on the Dataset the run's settings
(`solver`, `dt`, `rtol`, `atol`, `t0`, `t1`, `model`), `jaxsim_version`, `schema` (this schema's
version) and `epoch` (an ISO 8601 date of $t = 0$) when given. Strings are variable-length
(Zarr 3 and netCDF write them without warnings).

A `Solution` carries what the schema needs (`Solution.info`, a static `RunInfo`: units, element
dimensions, event names, run settings), so `sol.to_xarray()` needs no model.
"""

import dataclasses
import json
import re
import weakref
from collections import OrderedDict
from typing import Any

import jax
import numpy as np

from .._model._dynamic_object import UNIT_KINDS, AbstractDynamicObject, ArrayCommand, System
from .._version import __version__


SCHEMA = "jaxsim.schema/1"
# Labels of the component dimensions.
COMPONENTS = {
    "xyz": ("x", "y", "z"),
    "mrp": ("s1", "s2", "s3"),
    "row": ("x", "y", "z"),
    "column": ("x", "y", "z"),
}
COUNT_UNIT = "count"  # step-map counters and solver statistics are integer counts
CODE_UNIT = "-"  # result codes, event indices
# Basilisk's frame-suffix names end in the frame of their components: `r_CN_N`, `omega_BN_B`,
# `torque_B`, `ISC_PntB_B`, `sigma_BN` (an attitude parameter set of B relative to N).
_FRAME_SUFFIX = re.compile(r"_[A-Z][A-Za-z]*$")
_CACHE_SIZE = 64  # run descriptions kept per model structure


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """What the schema needs of a run, held by `Solution.info` (static, hashable).

    - `units`: `((path, unit), ...)`, paths `outputs.<key>...`, `ys.<key>...`, `counts`.
    - `elements`: `((prefix, dim), ...)`: leaves at or under the output/state path `prefix`
      (`"rw"`) have their first non-component axis along dimension `dim` (`"wheel"`).
    - `events`: the names of the run's events (positions in `events=`).
    - `attrs`: `((key, value), ...)` run settings (solver, dt, tolerances, times, model).
    """

    units: tuple = ()
    elements: tuple = ()
    events: tuple = ()
    attrs: tuple = ()

    def unit(self, path: str) -> str | None:
        """The unit at a dotted path (`outputs.rw.Omega`), or of a unit declared for a prefix."""
        table = dict(self.units)
        parts = path.split(".")
        for i in range(len(parts), 0, -1):
            unit = table.get(".".join(parts[:i]))
            if unit is not None:
                return unit
        return None

    def element(self, path: str) -> str | None:
        """The element dimension of an output/state path (`rw.Omega` -> `wheel`)."""
        best = None
        for prefix, dim in self.elements:
            if path == prefix or path.startswith(prefix + "."):
                if best is None or len(prefix) > len(best[0]):
                    best = (prefix, dim)
        return None if best is None else best[1]

    def to_json(self) -> dict:
        """A JSON-serializable dict (campaign store attributes)."""
        return {
            "units": dict(self.units),
            "elements": dict(self.elements),
            "events": list(self.events),
            "attrs": dict(self.attrs),
        }

    @classmethod
    def from_json(cls, data: dict) -> "RunInfo":
        return cls(
            units=tuple(data.get("units", {}).items()),
            elements=tuple(data.get("elements", {}).items()),
            events=tuple(data.get("events", ())),
            attrs=tuple(data.get("attrs", {}).items()),
        )


def _flat(tree, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(tree, dict):
        out = []
        for key, value in tree.items():
            out.extend(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return [(prefix, tree)]


def declared_units(model) -> dict | None:
    """`model.units()`, None where undeclared, its form checked: a dict whose keys are among
    `"ys"`, `"outputs"`, `"args"`, each a unit string or a nested dict of unit strings."""

    if not isinstance(model, AbstractDynamicObject):
        raise TypeError(
            f"model_units: `model` must be an AbstractDynamicObject; got {type(model).__name__}."
        )
    units = model.units()
    if units is None:
        return None
    where = f"{type(model).__name__}.units()"
    if not isinstance(units, dict) or set(units) - set(UNIT_KINDS):
        got = sorted(map(str, units)) if isinstance(units, dict) else type(units).__name__
        raise TypeError(
            f"{where} must return None or a dict with keys among {list(UNIT_KINDS)} (state, "
            f"outputs, commands); got {got}."
        )
    for kind, part in units.items():
        for path, unit in _flat(part, kind):
            if not isinstance(unit, str):
                raise TypeError(
                    f"{where}: the unit of `{path}` must be a string (or a dict of them); got "
                    f"{unit!r}."
                )
    return units


def model_units(model) -> dict:
    """`{"outputs": ..., "ys": ..., "counts": ...}` of a model: its `units()` (a `System`'s nest
    its objects' by name; empty where the model declares none) and the counters' unit."""
    units = declared_units(model) or {}
    return {"outputs": units.get("outputs", {}), "ys": units.get("ys", {}), "counts": COUNT_UNIT}


def _leaf_paths(tree) -> list[str]:
    """Dotted paths of the array leaves of a run's tree (`""` for a bare array)."""

    def key(k):
        if isinstance(k, jax.tree_util.DictKey):
            return str(k.key)
        if isinstance(k, jax.tree_util.SequenceKey):
            return str(k.idx)
        if isinstance(k, jax.tree_util.GetAttrKey):
            return k.name
        return str(k)

    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [".".join(key(k) for k in path) for path, _ in leaves]


def _command_paths(spec: dict) -> list[str]:
    """Dotted paths of the commands of a `command_spec()` (`address.key`, or `address` for an
    address read as one array)."""

    out = []
    for address, keys in spec.items():
        if isinstance(keys, ArrayCommand):
            out.append(str(address))
        else:
            out.extend(f"{address}.{k}" for k in keys)
    return out


def _shown(paths: list[str], kind: str, limit: int = 12) -> str:
    names = [f"{kind}.{p}" if p else kind for p in paths]
    return repr(names[:limit])[:-1] + (", ...]" if len(names) > limit else "]")


def _check_part(where: str, kind: str, units, leaves: list[str], what: str) -> None:
    """Every leaf of a run's `kind` has a unit (at its path or a prefix), every unit names a
    leaf or a subtree of leaves."""
    named = [p for p, _ in _flat(units, "")]

    def under(leaf, p):  # `leaf` is `p` or inside the subtree `p` ("" the whole part)
        return p == "" or leaf == p or leaf.startswith(p + ".")

    missing = [leaf for leaf in leaves if not any(under(leaf, p) for p in named)]
    if missing:
        raise ValueError(
            f"simulate: `{where}` gives no unit for {what} {_shown(missing, kind)}; its "
            f"`{kind}` units name {_shown(named, kind)}. Add the missing entries to "
            f"`units()[{kind!r}]` (use '-' for a dimensionless quantity)."
        )
    unknown = [p for p in named if not any(under(leaf, p) for leaf in leaves)]
    if unknown:
        raise ValueError(
            f"simulate: `{where}` names {_shown(unknown, kind)}, which the run does not have; its "
            f"{what} are {_shown(leaves, kind)}. Remove or rename those entries of "
            f"`units()[{kind!r}]`."
        )


def check_units(model, ys, outputs, units=None) -> None:
    """Refuse (ValueError, naming the class and the entry) a declared `units()` that does not fit
    a run of `model`: a state leaf of `ys`, an output leaf of `outputs` (None: not recorded, not
    checked) or a command of `command_spec()` without a unit, or a unit naming an entry that the
    run does not have. A `System` checks each of its objects against its part; an object that
    declares no units (`units()` None) is not checked. `units`: `declared_units(model)` when
    already read."""

    if isinstance(model, System):
        for o in model.objects:
            sub_ys = ys.get(o.name) if isinstance(ys, dict) else None
            sub_out = outputs.get(o.name, {}) if isinstance(outputs, dict) else None
            check_units(o, sub_ys, sub_out)
        return
    units = declared_units(model) if units is None else units
    if units is None:
        return
    where = f"{type(model).__name__}.units()"
    _check_part(where, "ys", units.get("ys", {}), _leaf_paths(ys), "state leaves")
    if outputs is not None:
        _check_part(where, "outputs", units.get("outputs", {}), _leaf_paths(outputs), "outputs")
    spec = model.command_spec()
    if spec is not None:
        _check_part(where, "args", units.get("args", {}), _command_paths(spec), "commands")


def model_elements(model) -> dict:
    """`{path prefix: element dimension}` of a model (a `System` nests by name), with a dimension
    declared by several prefixes qualified by its prefix (`rw1.wheel`, `rw2.wheel`)."""

    def collect(m, prefix):
        if isinstance(m, System):
            out = {}
            for o in m.objects:
                out.update(collect(o, f"{prefix}{o.name}."))
            return out
        dims = m.element_dims() or {}
        return {f"{prefix}{k}": v for k, v in dims.items()}

    found = collect(model, "")
    uses: dict = {}
    for dim in found.values():
        uses[dim] = uses.get(dim, 0) + 1
    return {p: (d if uses[d] == 1 else f"{p}.{d}") for p, d in found.items()}


_INFOS: "OrderedDict[Any, tuple]" = OrderedDict()
_BY_ID: dict = {}  # id(model) -> (weak reference, part): repeated runs of one model object


def _model_part(model, ys=None, outputs=None, checked=False) -> tuple:
    """`(units, elements)` of a model, cached by its pytree structure (names and static
    configuration; not the parameter values, which units and dimensions do not depend on).
    `checked`: the units are first checked against a run's `ys` and `outputs` (`check_units`),
    whose tree structures join the key."""
    runs = (
        (jax.tree_util.tree_structure(ys), jax.tree_util.tree_structure(outputs))
        if checked
        else None
    )
    seen = _BY_ID.get(id(model))
    if seen is not None and seen[0]() is model and seen[1] == runs:  # the same model again
        return seen[2]
    part = _model_part_by_structure(model, runs, ys, outputs)
    try:
        _BY_ID[id(model)] = (weakref.ref(model), runs, part)
        if len(_BY_ID) > _CACHE_SIZE:
            _BY_ID.pop(next(iter(_BY_ID)))
    except TypeError:  # not weak-referenceable
        pass
    return part


def _model_part_by_structure(model, runs, ys, outputs) -> tuple:
    try:
        key = (type(model), jax.tree_util.tree_structure(model), runs)
        hash(key)
    except TypeError:  # an unhashable static field
        key = None
    if key is not None and key in _INFOS:
        _INFOS.move_to_end(key)
        return _INFOS[key]
    declared = declared_units(model)
    if runs is not None:
        check_units(model, ys, outputs, declared)
    units = declared or {}
    flat = []
    for kind in ("outputs", "ys"):
        flat += [(p, u) for p, u in _flat(units.get(kind, {}), kind) if isinstance(u, str)]
    flat.append(("counts", COUNT_UNIT))
    part = (tuple(flat), tuple(model_elements(model).items()))
    if key is not None:
        _INFOS[key] = part
        if len(_INFOS) > _CACHE_SIZE:
            _INFOS.popitem(last=False)
    return part


def run_info(
    model, *, solver=None, dt=None, rtol=None, atol=None, t0=None, t1=None, events=(),
    sol=None,
):  # fmt: skip
    """The `RunInfo` of a run of `model` (what `simulate` attaches to its `Solution`); with the
    run's `sol`, the model's units are first checked against its states and outputs
    (`check_units`)."""
    if sol is None:
        units, elements = _model_part(model)
    else:
        units, elements = _model_part(model, sol.ys, sol.outputs, checked=True)
    attrs = {"model": type(model).__name__, "jaxsim_version": __version__, "schema": SCHEMA}
    if getattr(model, "name", None) is not None and isinstance(model.name, str):
        attrs["model_name"] = model.name
    if solver is not None:
        attrs["solver"] = type(solver).__name__
    for key, value in (("dt", dt), ("rtol", rtol), ("atol", atol), ("t0", t0), ("t1", t1)):
        try:
            if value is not None:
                attrs[key] = float(value)
        except (TypeError, jax.errors.ConcretizationTypeError):
            pass  # a traced value: not a run setting that can be recorded
    names = tuple(str(getattr(e, "name", None) or f"event_{i}") for i, e in enumerate(events))
    return RunInfo(units=units, elements=elements, events=names, attrs=tuple(attrs.items()))


# ----------------------------------------------------------------------------------------------
# Dimensions
# ----------------------------------------------------------------------------------------------


def trailing_dims(name: str, shape: tuple, element: str | None) -> list[str]:
    """Dimension names of a leaf's per-sample axes (see the module docstring)."""
    leaf = name.rsplit(".", 1)[-1]
    dims: list = [None] * len(shape)
    if _FRAME_SUFFIX.search(leaf):
        if tuple(shape[-2:]) == (3, 3):
            dims[-2:] = ["row", "column"]
        elif tuple(shape[-1:]) == (3,):
            dims[-1] = "mrp" if leaf.startswith("sigma_") else "xyz"
    rest = [i for i, d in enumerate(dims) if d is None]
    if rest and element is not None:
        dims[rest.pop(0)] = element
    for j, i in enumerate(rest):
        dims[i] = f"{name}_{j}"
    return dims


# Units of an inertia tensor: a parameter of trailing shape (3, 3) in one of them is a matrix in a
# frame (e.g. `mc.PrincipalInertia`'s draws), labelled `row`/`column` as the outputs' tensors.
_INERTIA_UNITS = ("kg m^2", "kg*m^2", "kg m2", "kg.m^2")


def param_dims(name: str, shape: tuple, unit: str | None) -> list[str]:
    """Dimension names of a parameter's axes: `trailing_dims`, and `row`/`column` for a (3, 3)
    tensor in an inertia unit (its name need not carry a frame suffix)."""
    dims = trailing_dims(name, shape, None)
    if unit in _INERTIA_UNITS and tuple(shape[-2:]) == (3, 3):
        dims[-2:] = ["row", "column"]
    return dims


# ----------------------------------------------------------------------------------------------
# Columns: (name, array, dims after the leading ones, attrs)
# ----------------------------------------------------------------------------------------------


def is_solution_dict(tree) -> bool:
    """Whether a normalized output dict is a `Solution`'s fields."""
    return isinstance(tree, dict) and "ts" in tree and ("ys" in tree or "stats" in tree)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def solution_columns(d: dict, info: RunInfo | None, prefix: str, lead: int) -> list:
    """Columns of a `Solution`'s fields `d` (numpy leaves with `lead` leading axes; `ts`
    excluded: it is the `time` coordinate)."""
    info = RunInfo(units=(("counts", COUNT_UNIT),)) if info is None else info
    cols = []

    def add(name, a, unit, element, timed=False):
        a = np.asarray(a)
        skip = lead + int(timed)
        dims = ["time"] * int(timed) + trailing_dims(name, a.shape[skip:], element)
        cols.append((name, a, dims, {"units": unit} if unit else {}))

    def timed(name, a, unit, element):
        add(name, a, unit, element, timed=True)

    for path, a in _flat(d.get("outputs") or {}, ""):
        timed(_join(prefix, path), a, info.unit(f"outputs.{path}"), info.element(path))
    ys = d.get("ys")
    if ys is not None:
        for path, a in _flat(ys, "ys"):
            timed(_join(prefix, path), a, info.unit(path), info.element(path[3:]))
    for path, a in _flat(d.get("counts") or {}, "counts"):
        timed(_join(prefix, path), a, COUNT_UNIT, None)
    for path, a in _flat(d.get("stats") or {}, "stats"):
        a = np.asarray(a)
        unit = COUNT_UNIT if a.dtype.kind in "iub" else None
        add(_join(prefix, path), a, unit, None)
    if d.get("t_final") is not None:
        add(_join(prefix, "t_final"), d["t_final"], "s", None)
    if d.get("result") is not None:
        add(_join(prefix, "result"), np.asarray(d["result"], np.int32), CODE_UNIT, None)
    events = d.get("events")
    if isinstance(events, dict) and "t" in events:
        t, index = np.asarray(events["t"]), np.asarray(events["index"]).astype(np.int32)
        names = np.asarray(list(info.events) + [""], dtype=object)
        kind = names[np.where((index >= 0) & (index < len(info.events)), index, -1)]
        for name, a, unit in (("time", t, "s"), ("index", index, CODE_UNIT), ("kind", kind, None)):
            cols.append(
                (_join(prefix, f"event.{name}"), a, ["event"], {"units": unit} if unit else {})
            )
        if "count" in events:
            add(_join(prefix, "event.count"), events["count"], COUNT_UNIT, None)
        # The states before and after each firing (batches and campaigns carry them).
        for key in events:
            if key not in ("t", "index", "count"):
                for path, a in _flat(events[key], f"event.{key}"):
                    name, a = _join(prefix, path), np.asarray(a)
                    dims = ["event", *trailing_dims(name, a.shape[lead + 1 :], None)]
                    cols.append((name, a, dims, {}))
    # Further fields (a clocked run's `zs`, `held`, `clock_logs` in batches and campaigns).
    for key in d:
        if key not in _HANDLED:
            for path, a in _flat(d[key], key):
                name, a = _join(prefix, path), np.asarray(a)
                cols.append((name, a, trailing_dims(name, a.shape[lead:], None), {}))
    return cols


_HANDLED = ("ts", "outputs", "ys", "counts", "stats", "t_final", "result", "events")


def _time_rows(ts: np.ndarray, lead: int, where: str) -> np.ndarray:
    """The common sample times of `ts` (shape `(members..., n)`)."""
    if ts.ndim != lead + 1:
        raise ValueError(f"{where}: `ts` must have {lead + 1} dimension(s); got shape {ts.shape}.")
    rows = ts.reshape(-1, ts.shape[-1])
    finite = np.all(np.isfinite(rows), axis=-1)
    if finite.any():  # members that raised at run time have NaN times
        rows = rows[finite]
    if rows.shape[0] > 1 and not np.array_equal(
        rows, np.broadcast_to(rows[:1], rows.shape), equal_nan=True
    ):
        raise ValueError(
            f"{where}: the members of a batch must share their sample times; got `ts` of shape "
            f"{ts.shape} with differing rows."
        )
    return rows[0] if rows.shape[0] else np.zeros(ts.shape[-1])


def build(cols: list, lead_dims: tuple, *, time=None, coords=None, attrs=None, where: str):
    """An `xarray.Dataset` from columns, with the schema's coordinates."""
    xr = require_xarray(where)
    sizes: dict = {}
    data_vars = {}
    for name, a, dims, var_attrs in cols:
        dims = [*lead_dims, *dims]
        if len(dims) != a.ndim:
            raise ValueError(f"{where}: `{name}` has shape {a.shape}; expected dims {dims}.")
        # An element dimension whose length disagrees with an earlier use stays anonymous.
        for i, (dim, n) in enumerate(zip(dims, a.shape, strict=True)):
            if sizes.setdefault(dim, n) != n:
                dims[i] = f"{name}_{i - len(lead_dims)}"
                sizes[dims[i]] = n
        data_vars[name] = xr.Variable(tuple(dims), a, attrs=var_attrs)
    all_coords = dict(coords or {})
    if time is not None:
        all_coords["time"] = xr.Variable(("time",), np.asarray(time), attrs={"units": "s"})
    for dim, n in sizes.items():
        if dim in COMPONENTS and n == len(COMPONENTS[dim]):
            all_coords[dim] = xr.Variable((dim,), np.asarray(COMPONENTS[dim], dtype=object))
        elif dim in element_dims_of(cols) and dim not in all_coords:
            all_coords[dim] = xr.Variable((dim,), np.arange(n))
    return xr.Dataset(data_vars, coords=all_coords, attrs=dict(attrs or {}))


def element_dims_of(cols) -> set:
    """Dimensions that are neither components, leading, nor anonymous (`<variable>_<i>`)."""
    out = set()
    for name, _, dims, _ in cols:
        for d in dims:
            if d not in COMPONENTS and d not in ("time", "event") and not d.startswith(name + "_"):
                out.add(d)
    return out


def run_attrs(info: RunInfo | None, epoch=None) -> dict:
    """Dataset attributes of a run: its settings, the version, the schema, the epoch."""
    attrs = {"jaxsim_version": __version__, "schema": SCHEMA}
    if info is not None:
        attrs.update(dict(info.attrs))
    if epoch is not None:
        attrs["epoch"] = epoch_text(epoch)
    return attrs


def epoch_text(epoch) -> str:
    """An epoch (a `datetime.datetime`/`date` or an ISO 8601 string) as ISO 8601 text."""
    import datetime as _dt

    if isinstance(epoch, _dt.date):
        return epoch.isoformat()
    if isinstance(epoch, str):
        try:
            _dt.datetime.fromisoformat(epoch)
        except ValueError:
            raise ValueError(
                f"`epoch` must be an ISO 8601 date (e.g. '2026-01-01T00:00:00+00:00'); got "
                f"{epoch!r}."
            ) from None
        return epoch
    raise TypeError(
        f"`epoch` must be a datetime.datetime or an ISO 8601 string; got {type(epoch).__name__}."
    )


def require_xarray(where: str):
    try:
        import xarray as xr
    except ImportError as err:
        raise ImportError(
            f"{where} needs xarray, which is not installed; install it with "
            "`pip install 'jaxsim-spacecraft[notebooks]'` (the `notebooks` extra) or `pip install xarray`."
        ) from err
    return xr


def json_attrs(attrs: dict) -> dict:
    """Attributes as JSON-compatible values (Zarr attributes)."""
    return json.loads(json.dumps(attrs, default=str))


# ----------------------------------------------------------------------------------------------
# Campaign stores: one array per `/`-joined path of a member's parameters and outputs
# ----------------------------------------------------------------------------------------------

_FIELD_PREFIX = {"ys": "ys", "counts": "counts", "stats": "stats"}


def store_entry(path: str, shape: tuple, infos: dict, n_time: int | None):
    """`(name, dims, unit)` of a campaign array (its `/`-joined `path`, its shape without the
    member axis), named and dimensioned as `jaxsim.results.to_xarray` names a `BatchResult`'s
    column; `dims` without `member`. `infos`: `{solution path in the outputs: RunInfo}`."""
    parts = path.split("/")
    if parts[0] != "outputs":
        name = ".".join(parts)
        return name, trailing_dims(name, shape, None), None
    rest = parts[1:]
    sol = None
    for sp in sorted(infos, key=len, reverse=True):
        sp_parts = sp.split("/") if sp else []
        if rest[: len(sp_parts)] == sp_parts and len(rest) > len(sp_parts):
            sol = sp_parts
            break
    if sol is None:
        name = ".".join(rest) or "value"
        return name, trailing_dims(name, shape, None), None
    info = infos["/".join(sol)]
    prefix, (field, *key) = ".".join(sol), rest[len(sol) :]
    dotted = ".".join(key)
    timed = n_time is not None and len(shape) >= 1 and shape[0] == n_time
    if field == "ts":
        return _join(prefix, "ts"), ["time"], "s"
    if field in ("outputs", "ys", "counts") and timed:
        if field == "outputs":
            name, unit, element = dotted, info.unit(f"outputs.{dotted}"), info.element(dotted)
        elif field == "ys":
            name = f"ys.{dotted}" if dotted else "ys"
            unit, element = info.unit(name), info.element(dotted)
        else:
            name, unit, element = f"counts.{dotted}", COUNT_UNIT, None
        name = _join(prefix, name)
        return name, ["time", *trailing_dims(name, shape[1:], element)], unit
    if field == "stats":
        name = _join(prefix, f"stats.{dotted}")
        return name, trailing_dims(name, shape, None), COUNT_UNIT
    if field == "t_final":
        return _join(prefix, "t_final"), [], "s"
    if field == "events" and key and key[0] in ("t", "index", "count"):
        label = {"t": "time", "index": "index", "count": "count"}[key[0]]
        unit = {"t": "s", "index": CODE_UNIT, "count": COUNT_UNIT}[key[0]]
        dims = [] if key[0] == "count" else ["event"]
        return _join(prefix, f"event.{label}"), dims, unit
    if field == "events" and key:
        name = _join(prefix, f"event.{dotted}")
        return name, ["event", *trailing_dims(name, shape[1:], None)], None
    name = _join(prefix, ".".join(rest[len(sol) :]))
    return name, trailing_dims(name, shape, None), None


def store_layout(structure: dict, infos: dict, n_time: int | None) -> dict:
    """`{path: (name, dims, unit)}` of a campaign's arrays (`structure`: `{path: (shape, _)}`),
    an element dimension whose length disagrees with an earlier use left anonymous."""
    sizes: dict = {"member": None}
    out = {}
    for path in sorted(structure):
        shape = tuple(structure[path][0])
        name, dims, unit = store_entry(path, shape, infos, n_time)
        for i, (dim, n) in enumerate(zip(dims, shape, strict=True)):
            if sizes.setdefault(dim, n) != n:
                dims[i] = f"{name}_{i}"
                sizes[dims[i]] = n
        out[path] = (name, dims, unit)
    return out


def label_coords(ds, xr, elements=()):
    """`ds` with the labels of its component dimensions and the indices of its element
    dimensions (`elements`)."""
    coords = {}
    for dim, n in ds.sizes.items():
        if dim in ds.coords:
            continue
        if dim in COMPONENTS and n == len(COMPONENTS[dim]):
            coords[dim] = xr.Variable((dim,), np.asarray(COMPONENTS[dim], dtype=object))
        elif dim in elements:
            coords[dim] = xr.Variable((dim,), np.arange(n))
    return ds.assign_coords(coords)
