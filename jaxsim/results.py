r"""Results as plain data: `to_numpy(sol)` (nested dicts of numpy arrays) and `to_xarray(sol)`.

Both accept a `Solution` from `jaxsim.simulate`, including a batched one (from `jax.vmap` over
`simulate`: every array then has a leading member axis, `ts` has shape `(batch, n)`), or a dict
with the same fields (e.g. the output of `to_numpy`, or one loaded back from disk).

```python
from jaxsim.results import to_numpy, to_xarray

res = to_numpy(sol)                  # {"ts", "ys", "outputs", "counts", "stats"}
np.savez("run.npz", **flatten(res))  # flat "outputs.r_CN_N"-style keys
ds = sol.to_xarray()                 # needs xarray (the `notebooks` extra); = to_xarray(sol)
ds["r_CN_N"].sel(time=600.0, xyz="z"), ds["r_CN_N"].attrs["units"], ds["rw.Omega"].sel(wheel=0)
ds.to_netcdf("run.nc")               # needs a netCDF engine (scipy: netCDF3)
to_zarr(sol, "run.zarr")             # Zarr 3, no warnings (needs zarr)
to_xarray(batch_result)              # a montecarlo.BatchResult: the same names, plus `member`
```

Runs, batches and campaigns share one schema (names, dimensions, coordinates, units and
attributes; `to_xarray` lists them under **Returns**). Units come from the model
(`model_units(model)`: its `units()`, a `System` nesting its objects' by name), checked against
the run and recorded on the `Solution` by `simulate` (`Solution.info`); the engine holds no
table of quantity names.
"""

from typing import Any

import jax
import numpy as np

from ._result import _schema
from ._result._files import (
    check_flag,
    refuse_existing as refuse_existing,
    replace_safely as replace_safely,
)
from ._result._schema import RunInfo, epoch_text as epoch_text, model_units as model_units


__all__ = [
    "epoch_text",
    "flatten",
    "model_units",
    "refuse_existing",
    "replace_safely",
    "to_numpy",
    "to_xarray",
    "to_zarr",
]

_FIELDS = ("ts", "ys", "outputs", "counts", "stats")


def _field(sol, name):
    if isinstance(sol, dict):
        return sol.get(name)
    return getattr(sol, name, None)


def _numpy_tree(tree):
    if tree is None:
        return {}
    return jax.tree.map(np.asarray, tree)


def to_numpy(sol) -> dict[str, Any]:
    """A `Solution` as nested dicts of numpy arrays (on the host, detached from JAX).

    **Arguments:**

    - `sol`: a `Solution` (batched or not), or a dict with its fields.

    **Returns:** `{"ts": ndarray, "ys": ..., "outputs": {...}, "counts": {...}, "stats": {...}}` with
    the structure of the solution's fields; `ys` is a dict for a `Spacecraft`/`System` and an array
    for a model whose state is an array. Missing fields (`counts` of the adaptive driver, `outputs`
    with `outputs=False`) become empty dicts. `sol.result` is dropped (see `sol.result` itself).
    """
    if not isinstance(sol, dict) and not hasattr(sol, "ts"):
        raise TypeError(
            f"to_numpy: expected a jaxsim Solution or a dict; got {type(sol).__name__}."
        )
    out = {"ts": np.asarray(_field(sol, "ts"))}
    for name in _FIELDS[1:]:
        value = _field(sol, name)
        out[name] = _numpy_tree(value) if name != "ys" else jax.tree.map(np.asarray, value)
    return out


def _paths(tree, prefix: str):
    """`[(dotted.path, leaf)]` of a nested dict (a bare leaf gets `prefix` itself)."""
    if isinstance(tree, dict):
        items = []
        for key in tree:
            path = f"{prefix}.{key}" if prefix else str(key)
            items.extend(_paths(tree[key], path))
        return items
    return [(prefix, tree)]


def flatten(res: dict) -> dict[str, np.ndarray]:
    """Flat `{"ys.hub.sigma_BN": array, "outputs.r_CN_N": array, ...}` view of `to_numpy(sol)`
    (e.g. for `numpy.savez`)."""
    flat = {}
    for name in _FIELDS:
        if name in res and res[name] is not None:
            flat.update(_paths(res[name], name))
    return flat


def _is_batch_result(obj) -> bool:
    return all(hasattr(obj, k) for k in ("members", "ok", "params", "outputs", "n_total"))


def _info_of(sol, model, units) -> RunInfo | None:
    """The run's `RunInfo`: the Solution's own, with `model`'s or `units`' units when given."""
    info = _field(sol, "info")
    if model is not None and units is not None:
        raise ValueError("to_xarray: give either `model` or `units`, not both.")
    if units is not None and not isinstance(units, dict):
        raise TypeError(f"to_xarray: `units` must be a dict; got {type(units).__name__}.")
    if model is None and units is None:
        return info
    base = info if info is not None else RunInfo()
    if model is not None:
        fresh = _schema.run_info(model)
        return RunInfo(fresh.units, fresh.elements, base.events, base.attrs or fresh.attrs)
    flat = [(p, u) for p, u in _paths(units, "") if isinstance(u, str)]
    flat = [("counts" if p == "counts" else p, u) for p, u in flat]
    if not any(p == "counts" for p, _ in flat):
        flat.append(("counts", _schema.COUNT_UNIT))
    return RunInfo(tuple(flat), base.elements, base.events, base.attrs)


def _solution_fields(sol) -> dict:
    """A Solution's (or a dict's) fields as numpy, as the schema reads them."""
    d = to_numpy(sol)
    t_final = _field(sol, "t_final")
    if t_final is not None:
        d["t_final"] = np.asarray(t_final)
    result = _field(sol, "result")
    if result is not None:
        d["result"] = np.asarray(getattr(result, "_value", result))
    events = _field(sol, "events")
    if events is not None:
        d["events"] = {k: np.asarray(getattr(events, k, None) if not isinstance(events, dict)
                                     else events.get(k)) for k in ("t", "index", "count")}  # fmt: skip
    return d


def to_xarray(obj, *, member_dim: str = "member", model=None, units=None, epoch=None):
    """A run, a batch of runs or a `montecarlo.BatchResult` as an `xarray.Dataset` of the one
    schema of runs, batches and campaigns (described under **Returns**).

    **Arguments:**

    - `obj`: a `Solution` (also `Solution.to_xarray()`), a batched one (from `jax.vmap` over
      `simulate`: `ts` of shape `(batch, n)`, all members sampled at the same times; leading
      dimension `member_dim`), a `to_numpy` dict, or a `montecarlo.BatchResult` (dimension
      `member`, coordinate: the member indices; variables `ok`, `result`, `params.<name>` and
      the member outputs).
    - `member_dim`: name of the batch dimension of a `vmap`-batched Solution.
    - `model`: the model that was simulated, to take units and element dimensions from it
      instead of from `Solution.info` (a hand-made Solution has none); `units`: instead, a
      dict `{"outputs": ..., "ys": ..., "counts": ...}` of nested units.
    - `epoch`: the calendar date of $t = 0$ (a `datetime.datetime` or an ISO 8601 string),
      recorded as the attribute `epoch`.

    **Returns:** a Dataset with coordinate `time` [s] and one variable per leaf: outputs under
    their own names (`"r_CN_N"`, `"rw.Omega"`), states as `"ys.<path>"` (`"ys.hub.sigma_BN"`),
    counters as `"counts.<path>"`, statistics as `"stats.<key>"`, `t_final`, `result`, events
    as `event.time`, `event.kind`, `event.index` (dimension `event`). Frame vectors lie along
    `xyz` (`x`, `y`, `z`), MRP sets along `mrp` (`s1`, `s2`, `s3`), 3 x 3 matrices along `row`
    and `column`; an effector's units along its shared dimension (`wheel`, `panel`, ...;
    coordinate `0 .. n-1`). Variables carry `units`; the Dataset the run's settings (`solver`,
    `dt`, `rtol`, `atol`, `t0`, `t1`), `jaxsim_version`, `schema` and `epoch` when given.
    `ds.to_netcdf(path)` (with scipy: netCDF3) and `to_zarr(ds, path)` write it.

    **Raises:** `ImportError` when xarray is missing (install `jaxsim-spacecraft[notebooks]`).
    """
    where = "to_xarray"
    _schema.require_xarray(where)
    if _is_batch_result(obj):
        if model is not None or units is not None:
            raise ValueError("to_xarray: `model` and `units` apply to Solutions, not BatchResults.")
        return _batch_dataset(obj, epoch)
    if not isinstance(obj, dict) and not hasattr(obj, "ts"):
        raise TypeError(
            f"to_xarray: expected a jaxsim Solution, a dict or a montecarlo.BatchResult; got "
            f"{type(obj).__name__}."
        )
    info = _info_of(obj, model, units)
    d = _solution_fields(obj)
    ts = d["ts"]
    if ts.ndim not in (1, 2):
        raise ValueError(f"to_xarray: `ts` must have 1 or 2 dimensions; got shape {ts.shape}.")
    lead = ts.ndim - 1
    time = _schema._time_rows(ts, lead, where)
    cols = _schema.solution_columns(d, info, "", lead)
    for name, a, dims, _ in cols:
        timed = dims[:1] == ["time"] and (a.ndim <= lead or a.shape[lead] != ts.shape[-1])
        if a.shape[:lead] != ts.shape[:lead] or timed:
            raise ValueError(
                f"to_xarray: `{name}` has shape {a.shape}, which does not start with the sample "
                f"shape {ts.shape}."
            )
    lead_dims = (member_dim,) if lead else ()
    return _schema.build(
        cols, lead_dims, time=time, attrs=_schema.run_attrs(info, epoch), where=where
    )


def _batch_dataset(res, epoch):
    """The Dataset of a `montecarlo.BatchResult` (see `to_xarray`)."""
    where = "to_xarray"
    infos = dict(getattr(res, "schema", ()) or ())
    outputs = jax.tree.map(np.asarray, res.outputs) if res.outputs is not None else {}
    cols, time, found = [], None, []

    def walk(tree, path):
        if _schema.is_solution_dict(tree) or path in infos:
            found.append(path)
            return
        if isinstance(tree, dict):
            for k, v in tree.items():
                walk(v, f"{path}/{k}" if path else k)

    walk(outputs, "")
    for path in found:
        tree = outputs
        for part in path.split("/") if path else ():
            tree = tree[part]
        d = dict(tree)
        ts = np.asarray(d.pop("ts"))
        rows = _schema._time_rows(ts, 1, where)
        if time is not None and not np.array_equal(rows, time, equal_nan=True):
            raise ValueError(f"{where}: the Solutions in the outputs differ in their sample times.")
        time = rows
        cols += _schema.solution_columns(d, infos.get(path), path.replace("/", "."), 1)
    solution_paths = set(found)

    def others(tree, path):
        if any(path == p or path.startswith(p + "/") for p in solution_paths if p) or (
            path == "" and "" in solution_paths
        ):
            return
        if isinstance(tree, dict):
            for k, v in tree.items():
                others(v, f"{path}/{k}" if path else k)
            return
        name = path.replace("/", ".") or "value"
        a = np.asarray(tree)
        cols.append((name, a, _schema.trailing_dims(name, a.shape[1:], None), {}))

    others(outputs, "")
    param_units = {k.replace("/", "."): u for k, u in getattr(res, "units", ()) or ()}
    for path, a in _paths(jax.tree.map(np.asarray, res.params or {}), "params"):
        a, unit = np.asarray(a), param_units.get(path)
        attrs = {"units": unit} if unit else {}
        cols.append((path, a, _schema.param_dims(path, a.shape[1:], unit), attrs))
    cols.append(("ok", np.asarray(res.ok), [], {}))
    cols.append(("result", np.asarray(res.result, np.int32), [], {"units": _schema.CODE_UNIT}))
    members = np.asarray(res.members)
    xr = _schema.require_xarray(where)
    coords = {"member": xr.Variable(("member",), members)}
    info = next(iter(infos.values()), None)
    attrs = _schema.run_attrs(info, epoch)
    attrs.update({"n_total": int(res.n_total), "complete": int(bool(res.complete))})
    return _schema.build(cols, ("member",), time=time, coords=coords, attrs=attrs, where=where)


def to_zarr(obj, path, *, overwrite: bool = False, **kwargs):
    """Write a run, a batch or a Dataset (`to_xarray(obj)` unless it is one) to a Zarr 3 store
    at `path`, without consolidated metadata (not part of the Zarr 3 specification); string
    labels are variable-length UTF-8 strings, which Zarr 3 specifies. Needs zarr (the `campaign`
    extra). Returns the Dataset written.

    The store is written under a temporary name next to `path` and moved into place when
    complete: an existing `path` is refused (`FileExistsError`, nothing written) unless
    `overwrite=True`, and a failed write leaves it as it was. `kwargs` go to
    `xarray.Dataset.to_zarr`; with `mode="a"` or `"r+"` (changing an existing store, as asked)
    the store is written in place."""
    xr = _schema.require_xarray("to_zarr")
    check_flag("to_zarr", "overwrite", overwrite)
    ds = obj if isinstance(obj, xr.Dataset) else to_xarray(obj)
    kwargs = {"consolidated": False, "zarr_format": 3, **kwargs}
    if kwargs.get("mode", "w") not in ("w", "w-"):
        ds.to_zarr(path, **kwargs)
        return ds
    with replace_safely(path, overwrite=overwrite, where="to_zarr") as tmp:
        ds.to_zarr(tmp, **{**kwargs, "mode": "w-"})
    return ds
