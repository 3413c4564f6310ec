r"""Results as plain data: `to_numpy(sol)` (nested dicts of numpy arrays) and `to_xarray(sol)`.

Both accept a `Solution` from `jaxsim.simulate`, including a batched one (from `jax.vmap` over
`simulate`: every array then has a leading member axis, `ts` has shape `(batch, n)`), or a dict
with the same fields (e.g. the output of `to_numpy`, or one loaded back from disk).

```python
from jaxsim.results import to_numpy, to_xarray

res = to_numpy(sol)                  # {"ts", "ys", "outputs", "counts", "stats"}
np.savez("run.npz", **flatten(res))  # flat "outputs.r_CN_N"-style keys
ds = to_xarray(sol)                  # needs xarray (the `notebooks` extra)
ds["r_CN_N"].sel(time=600.0)
```
"""

from typing import Any

import jax
import numpy as np


__all__ = ["flatten", "to_numpy", "to_xarray"]

_FIELDS = ("ts", "ys", "outputs", "counts", "stats")

# Units of the Basilisk-named outputs (matched on the last path component), for xarray attrs.
_UNITS = {
    "r_BN_N": "m",
    "r_CN_N": "m",
    "v_BN_N": "m/s",
    "v_CN_N": "m/s",
    "sigma_BN": "-",
    "omega_BN_B": "rad/s",
    "massSC": "kg",
    "c_B": "m",
    "ISC_PntB_B": "kg m^2",
    "g_N": "m/s^2",
    "totOrbEnergy": "J",
    "totRotEnergy": "J",
    "totOrbAngMomPntN_N": "kg m^2/s",
    "totRotAngMomPntC_N": "kg m^2/s",
    "torque_B": "N m",
    "force_B": "N",
    "force_N": "N",
    "Omega": "rad/s",
    "theta": "rad",
    "thetaDot": "rad/s",
    "mrp_switches": "count",
}


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


def to_xarray(sol, *, member_dim: str = "member"):
    """A `Solution` as an `xarray.Dataset` indexed by sample time.

    **Arguments:**

    - `sol`: a `Solution` (or `to_numpy` dict). A batched solution (`ts` of shape `(batch, n)`,
      all members sampled at the same times) gets a leading dimension `member_dim`.
    - `member_dim`: name of the batch dimension.

    **Returns:** a Dataset with coordinate `time` [s] and one variable per leaf: outputs under their
    own names (`"r_CN_N"`, nested effector outputs as `"gravity_gradient.torque_B"`), states as
    `"ys.<path>"` (`"ys.hub.sigma_BN"`, or `"ys"` for an array state), step-map counters as
    `"counts.<path>"`. Trailing (per-sample) axes are named `"<variable>_<i>"`; known Basilisk
    quantities carry `attrs["units"]`. Final `stats` become Dataset attributes when scalar.

    **Raises:** `ImportError` when xarray is missing (install `jaxsim[notebooks]`).
    """
    try:
        import xarray as xr
    except ImportError as err:
        raise ImportError(
            "to_xarray needs xarray, which is not installed; install it with "
            "`pip install 'jaxsim[notebooks]'` (the `notebooks` extra) or `pip install xarray`."
        ) from err

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

    leaves = [(path, a) for path, a in _paths(res["outputs"], "")]
    leaves += _paths(res["ys"], "ys")
    leaves += _paths(res["counts"], "counts")
    data_vars = {}
    for path, a in leaves:
        a = np.asarray(a)
        if a.shape[: len(lead)] != ts.shape:
            raise ValueError(
                f"to_xarray: `{path}` has shape {a.shape}, which does not start with the sample "
                f"shape {ts.shape}."
            )
        dims = lead + tuple(f"{path}_{i}" for i in range(a.ndim - len(lead)))
        unit = _UNITS.get(path.rsplit(".", 1)[-1])
        data_vars[path] = xr.Variable(dims, a, attrs={"units": unit} if unit else {})
    attrs = {}
    for key, value in res["stats"].items():
        value = np.asarray(value) if not isinstance(value, dict) else None
        if value is not None and value.ndim == 0:
            attrs[key] = value.item()
    coords = {"time": xr.Variable(("time",), time, attrs={"units": "s"})}
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)
