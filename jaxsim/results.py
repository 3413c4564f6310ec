r"""Results as plain data: `to_numpy(sol)` (nested dicts of numpy arrays) and `to_xarray(sol)`.

Both accept a `Solution` from `jaxsim.simulate`, including a batched one (from `jax.vmap` over
`simulate`: every array then has a leading member axis, `ts` has shape `(batch, n)`), or a dict
with the same fields (e.g. the output of `to_numpy`, or one loaded back from disk).

```python
from jaxsim.results import to_numpy, to_xarray

res = to_numpy(sol)                  # {"ts", "ys", "outputs", "counts", "stats"}
np.savez("run.npz", **flatten(res))  # flat "outputs.r_CN_N"-style keys
ds = to_xarray(sol, model=sc)        # needs xarray (the `notebooks` extra)
ds["r_CN_N"].sel(time=600.0, component="z"), ds["r_CN_N"].attrs["units"]
ds.to_netcdf("run.nc")               # needs a netCDF engine (scipy: netCDF3)
```

Units come from the model (`model_units(model)`: its `output_units()` and `state_units()`, a
`System` nesting its objects' by name); the engine holds no table of quantity names.
"""

import re
from typing import Any

import jax
import numpy as np

from ._dynamic_object import AbstractDynamicObject, System


__all__ = ["flatten", "model_units", "to_numpy", "to_xarray"]

_FIELDS = ("ts", "ys", "outputs", "counts", "stats")
_UNIT_FIELDS = ("outputs", "ys", "counts")
_COUNT_UNIT = "count"  # step-map counters (e.g. shadow-set switches) are integer counts


def model_units(model) -> dict:
    """A model's units, `{"outputs": ..., "ys": ..., "counts": ...}`, keyed like a `Solution`'s.

    `outputs` is `model.output_units()` and `ys` is `model.state_units()` (see
    `AbstractDynamicObject`); a `System` nests its objects' under their names, as its state and
    outputs do. `counts` (step-map counters) are counts.
    """
    if isinstance(model, System):
        parts = {o.name: model_units(o) for o in model.objects}
        return {kind: {name: u[kind] for name, u in parts.items()} for kind in _UNIT_FIELDS}
    if not isinstance(model, AbstractDynamicObject):
        raise TypeError(
            f"model_units: `model` must be an AbstractDynamicObject; got {type(model).__name__}."
        )
    return {"outputs": model.output_units(), "ys": model.state_units(), "counts": _COUNT_UNIT}


def _unit_at(units, path):
    """The unit string at a dotted `path` of a nested units dict (None when unknown)."""
    for part in path.split(".") if path else ():
        if isinstance(units, str):
            break
        if not isinstance(units, dict) or part not in units:
            return None
        units = units[part]
    return units if isinstance(units, str) else None


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


_XYZ = ("x", "y", "z")
# Dimensions of frame components: a vector's (x, y, z), a matrix's rows and columns.
_VECTOR_DIMS = ("component", "row", "column")
# Basilisk's frame-suffix names end in the frame of their components: `r_CN_N`, `omega_BN_B`,
# `torque_B`, `ISC_PntB_B`, `sigma_BN` (an attitude parameter set of B relative to N).
_FRAME_SUFFIX = re.compile(r"_[A-Z][A-Za-z]*$")


def _trailing_dims(path: str, shape: tuple) -> tuple:
    """Dimension names of a leaf's per-sample axes. A frame-suffixed name (`_FRAME_SUFFIX`, e.g.
    `r_CN_N`) with a last axis of 3 gets `component` (x, y, z), a 3 x 3 one `row` and `column`;
    any other axis `i` is `"<path>_<i>"` (e.g. the wheels of `ys.rw.Omega`)."""
    dims = [f"{path}_{i}" for i in range(len(shape))]
    if _FRAME_SUFFIX.search(path.rsplit(".", 1)[-1]):
        if shape[-2:] == (3, 3):
            dims[-2:] = ["row", "column"]
        elif shape[-1:] == (3,):
            dims[-1] = "component"
    return tuple(dims)


def to_xarray(sol, *, member_dim: str = "member", model=None, units=None):
    """A `Solution` as an `xarray.Dataset` indexed by sample time.

    **Arguments:**

    - `sol`: a `Solution` (or `to_numpy` dict). A batched solution (`ts` of shape `(batch, n)`,
      all members sampled at the same times) gets a leading dimension `member_dim`.
    - `member_dim`: name of the batch dimension.
    - `model`: the model that was simulated; its units (`model_units(model)`) become the
      variables' `attrs["units"]`. None: counters carry `"count"`, other variables no units.
    - `units`: instead of `model`, a dict `{"outputs": ..., "ys": ..., "counts": ...}` of nested
      units keyed like the solution's fields.

    **Returns:** a Dataset with coordinate `time` [s] and one variable per leaf: outputs under their
    own names (`"r_CN_N"`, nested effector outputs as `"gravity_gradient.torque_B"`), states as
    `"ys.<path>"` (`"ys.hub.sigma_BN"`, or `"ys"` for an array state), step-map counters as
    `"counts.<path>"`. The frame components of vectors and matrices named by Basilisk's frame-suffix
    convention (`r_CN_N`, `omega_BN_B`, `gravity_gradient.torque_B`, `sigma_BN`) lie along
    dimension `component` (coordinate `["x", "y", "z"]`), or `row` and `column` for a 3 x 3 matrix
    (`ISC_PntB_B`); other per-sample axes are named `"<variable>_<i>"` (`ys.rw.Omega_0`: the
    wheels). Variables whose unit the model gives carry `attrs["units"]`; `time` is in s. Final
    `stats` become Dataset attributes when scalar. `ds.to_netcdf(path)` writes the Dataset (with
    scipy installed, as netCDF3; see the `notebooks` extra).

    **Raises:** `ImportError` when xarray is missing (install `jaxsim[notebooks]`).
    """
    try:
        import xarray as xr
    except ImportError as err:
        raise ImportError(
            "to_xarray needs xarray, which is not installed; install it with "
            "`pip install 'jaxsim[notebooks]'` (the `notebooks` extra) or `pip install xarray`."
        ) from err

    if model is not None and units is not None:
        raise ValueError("to_xarray: give either `model` or `units`, not both.")
    if model is not None:
        units = model_units(model)
    elif units is None:
        units = {"counts": _COUNT_UNIT}
    elif not isinstance(units, dict):
        raise TypeError(f"to_xarray: `units` must be a dict; got {type(units).__name__}.")
    res = to_numpy(sol)
    ts = res["ts"]
    if ts.ndim == 1:
        lead, time = ("time",), ts
    elif ts.ndim == 2:
        if not np.array_equal(ts, np.broadcast_to(ts[:1], ts.shape)):
            raise ValueError(
                "to_xarray: the members of a batched solution must share their sample times; "
                f"got `ts` of shape {ts.shape} with differing rows."
            )
        lead, time = (member_dim, "time"), ts[0]
    else:
        raise ValueError(f"to_xarray: `ts` must have 1 or 2 dimensions; got shape {ts.shape}.")

    leaves = [
        (path, a, _unit_at(units.get("outputs"), path)) for path, a in _paths(res["outputs"], "")
    ]
    for name in ("ys", "counts"):
        leaves += [(path, a, _unit_at(units.get(name), path[len(name) + 1 :]))
                   for path, a in _paths(res[name], name)]  # fmt: skip
    data_vars = {}
    for path, a, unit in leaves:
        a = np.asarray(a)
        if a.shape[: len(lead)] != ts.shape:
            raise ValueError(
                f"to_xarray: `{path}` has shape {a.shape}, which does not start with the sample "
                f"shape {ts.shape}."
            )
        dims = lead + _trailing_dims(path, a.shape[len(lead) :])
        data_vars[path] = xr.Variable(dims, a, attrs={"units": unit} if unit else {})
    attrs = {}
    for key, value in res["stats"].items():
        value = np.asarray(value) if not isinstance(value, dict) else None
        if value is not None and value.ndim == 0:
            attrs[key] = value.item()
    coords = {"time": xr.Variable(("time",), time, attrs={"units": "s"})}
    used = {d for v in data_vars.values() for d in v.dims}
    coords.update({d: xr.Variable((d,), list(_XYZ)) for d in _VECTOR_DIMS if d in used})
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)
