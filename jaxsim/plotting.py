r"""Quick-look plots of simulation results (matplotlib, an optional dependency); model-agnostic.

Every function takes a `Solution` from `jaxsim.simulate` (or the dict of `jaxsim.results.to_numpy`)
and returns the `matplotlib.figure.Figure` it drew (created with `pyplot`, so notebooks show it;
close it with `plt.close(fig)` in scripts). matplotlib is imported only when a function is called:
`import jaxsim` never imports it. Install with `pip install 'jaxsim-spacecraft[plot]'` or `pip
install matplotlib`.

The engine knows no spacecraft: quantities are named by the caller (a key of `sol.outputs`, or a
dotted path such as `"rw.Omega"` into `sol.outputs`, else into `sol.ys`), and units come from the
model (its `units()`, passed as `units=model`). The spacecraft plots `plot_orbit`,
`plot_attitude`, `plot_wheel_speeds` and `plot_energy_drift` with Basilisk's four totals as default
keys live in `effectors.plotting` (which also re-exports the functions here).

```python
from jaxsim import plotting

fig = plotting.plot_series(sol, ["sigma_BN", "omega_BN_B"], units=sc)   # one axis per key
fig = plotting.plot_trajectory(sol, "r_CN_N", scale=1e-3, unit="km")    # projections and norm
fig = plotting.plot_energy_drift(sol, keys=("totOrbEnergy", "totOrbAngMomPntN_N"))
fig = plotting.plot_dispersion(ts, omega_samples, labels=["x", "y", "z"])   # (batch, n, 3)
```

Time axes are in seconds unless `time_unit` (`"s"`, `"min"`, `"h"`) says otherwise.
"""

import numpy as np

from ._model._dynamic_object import AbstractDynamicObject


__all__ = [
    "component_labels",
    "no_offset",
    "plot_dispersion",
    "plot_energy_drift",
    "plot_series",
    "plot_trajectory",
    "pyplot",
    "relative_drift",
    "series",
    "time_axis",
]

_TIME_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}
_XYZ = ("x", "y", "z")


def pyplot():
    """`matplotlib.pyplot`, or an `ImportError` that says how to install matplotlib."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError(
            "jaxsim.plotting needs matplotlib, which is not installed; install it with "
            "`pip install 'jaxsim-spacecraft[plot]'` or `pip install matplotlib`."
        ) from err
    return plt


def _field(sol, name):
    value = sol.get(name) if isinstance(sol, dict) else getattr(sol, name, None)
    if value is None:
        raise ValueError(f"jaxsim.plotting: the solution has no `{name}`.")
    return value


def time_axis(sol, time_unit: str = "s"):
    """`(t, label)`: the sample times of one run in `time_unit` (`"s"`, `"min"`, `"h"`) and the
    axis label `"t [<unit>]"`; a batch (`ts` not 1-D) raises `ValueError`."""
    if time_unit not in _TIME_UNITS:
        raise ValueError(
            f"jaxsim.plotting: `time_unit` must be one of {sorted(_TIME_UNITS)}; got {time_unit!r}."
        )
    ts = np.asarray(_field(sol, "ts"), dtype=float)
    if ts.ndim != 1:
        raise ValueError(
            "jaxsim.plotting: expected one run (`ts` 1-D); got `ts` of shape "
            f"{ts.shape}; plot a batch with `plot_dispersion`."
        )
    return ts / _TIME_UNITS[time_unit], f"t [{time_unit}]"


def _lookup(tree, key):
    for part in key.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def series(sol, key: str) -> np.ndarray:
    """The saved samples of `key` as a float numpy array (leading axis: the samples).

    `key` is an entry of `sol.outputs` or a dotted path into it (`"rw.Omega"`); when absent there,
    a dotted path into the state `sol.ys` (`"hub.sigma_BN"`). Else `ValueError` listing both.
    """
    outputs = sol.get("outputs") if isinstance(sol, dict) else getattr(sol, "outputs", None)
    value = _lookup(outputs, key)
    if value is None or isinstance(value, dict):
        ys = sol.get("ys") if isinstance(sol, dict) else getattr(sol, "ys", None)
        value = _lookup(ys, key)
    if value is None or isinstance(value, dict):
        have_out = sorted(outputs) if isinstance(outputs, dict) else []
        ys = sol.get("ys") if isinstance(sol, dict) else getattr(sol, "ys", None)
        have_ys = sorted(ys) if isinstance(ys, dict) else []
        raise ValueError(
            f"jaxsim.plotting: `{key}` is neither in `sol.outputs` ({have_out}) nor in `sol.ys` "
            f"({have_ys})."
        )
    return np.asarray(value, dtype=float)


def _unit(units, key):
    """The unit of `key` from a model (its `units()`: the outputs', else the state's, as `series`
    looks the key up) or a nested dict; '' when unknown."""

    if units is None:
        return ""
    if isinstance(units, AbstractDynamicObject):
        declared = units.units() or {}
        unit = _unit_at(declared.get("outputs"), key) or _unit_at(declared.get("ys"), key)
    else:
        unit = _unit_at(units, key)
    return unit or ""


def _unit_at(tree, key):
    """The unit string at dotted `key` of nested units, or at a prefix of it (a unit that stands
    for a subtree); None when absent."""
    for part in key.split("."):
        if isinstance(tree, str):
            return tree
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree if isinstance(tree, str) else None


def component_labels(k: int) -> list[str]:
    """Legend labels of the `k` components of a quantity: `x`, `y`, `z` for a 3-vector (frame
    components), else `[0]`, `[1]`, ..."""
    return list(_XYZ) if k == 3 else [f"[{i}]" for i in range(k)]


def no_offset(*axes) -> None:
    """Plain tick labels on the linear axes of `axes`: no offset such as "1e-8+6.878e3" above the
    axis (matplotlib's default for small changes of a large value); log axes are left alone."""
    for ax in axes:
        for name in ("x", "y", "z"):
            axis = getattr(ax, f"{name}axis", None)
            formatter = axis.get_major_formatter() if axis is not None else None
            if hasattr(formatter, "set_useOffset"):
                formatter.set_useOffset(False)


def plot_series(sol, keys, *, units=None, time_unit: str = "min"):
    """Saved quantities against time: one axis per key, one line per component.

    **Arguments:**

    - `sol`: one run.
    - `keys`: names of the quantities (see `series`), one or several.
    - `units`: the model (its `units()` label the axes) or a dict of units keyed like
      `sol.outputs`; None: no units in the labels.
    - `time_unit`: unit of the time axis.

    **Returns:** a Figure with one axis per key: one line per component, labelled `x`, `y`, `z` for
    a 3-vector (else `[i]`) in a legend; y label `"<key> [<unit>]"`; plain tick labels (no offset).
    """
    plt = pyplot()
    t, t_label = time_axis(sol, time_unit)
    keys = (keys,) if isinstance(keys, str) else tuple(keys)
    values = [series(sol, key).reshape(len(t), -1) for key in keys]
    fig, axes = plt.subplots(len(keys), 1, figsize=(9, 1.0 + 2.5 * len(keys)), sharex=True,
                             squeeze=False, constrained_layout=True)  # fmt: skip
    for ax, key, value in zip(axes[:, 0], keys, values):
        for i, label in enumerate(component_labels(value.shape[-1])):
            ax.plot(t, value[:, i], label=label)
        unit = _unit(units, key)
        ax.set(ylabel=f"{key} [{unit}]" if unit else key)
        ax.legend(loc="best", ncols=3)
        ax.grid(alpha=0.3)
        no_offset(ax)
    axes[-1, 0].set(xlabel=t_label)
    return fig


def plot_trajectory(sol, key: str, *, scale: float = 1.0, unit: str = "", time_unit: str = "min"):
    """A 3-vector's path: its projections onto the x-y, x-z, y-z planes and its norm against time.

    **Arguments:**

    - `sol`: one run; `key`: the quantity (see `series`), shape `(n, 3)`.
    - `scale`: factor applied before plotting (e.g. `1e-3` for m -> km); `unit`: its label.
    - `time_unit`: unit of the time axis.

    **Returns:** a Figure with 4 axes; the projections have equal aspect, labelled axes and mark
    the start (legend); the last axis is the norm. Plain tick labels (no offset).
    """
    plt = pyplot()
    t, t_label = time_axis(sol, time_unit)
    r = series(sol, key) * scale
    if r.shape[-1:] != (3,):
        raise ValueError(f"plot_trajectory: `{key}` must be a 3-vector; got shape {r.shape}.")
    u = f" [{unit}]" if unit else ""
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8), constrained_layout=True)
    for ax, (i, j) in zip(axes[:3], [(0, 1), (0, 2), (1, 2)]):
        ax.plot(r[:, i], r[:, j])
        ax.plot(r[:1, i], r[:1, j], "o", color="k", label="t0")
        ax.set(xlabel=f"{_XYZ[i]}{u}", ylabel=f"{_XYZ[j]}{u}", aspect="equal")
        ax.set_title(f"{key} ({_XYZ[i]}-{_XYZ[j]})")
    axes[0].legend(loc="best")
    axes[3].plot(t, np.linalg.norm(r, axis=-1))
    axes[3].set(xlabel=t_label, ylabel=f"|{key}|{u}", title=f"|{key}|")
    no_offset(*axes)
    return fig


def plot_energy_drift(sol, keys, *, log: bool = True, time_unit: str = "min"):
    """Relative drift of energies and momenta from their initial values.

    For a scalar $x$ the curve is $|x(t) - x(0)| / |x(0)|$; for a vector $\\|x(t) - x(0)\\| /
    \\|x(0)\\|$ (the absolute change where the initial value is 0).

    **Arguments:**

    - `sol`: one run with these outputs.
    - `keys`: output names to plot, e.g. a model's energies and momenta (missing ones raise
      `ValueError`; `effectors.plotting.plot_energy_drift` defaults to Basilisk's four totals).
    - `log`: logarithmic y axis (exact zeros, e.g. at $t = 0$, are not drawn there).
    - `time_unit`: unit of the time axis.

    **Returns:** a Figure with 1 axis, one line per key.
    """
    plt = pyplot()
    t, t_label = time_axis(sol, time_unit)
    outputs = _field(sol, "outputs")
    if isinstance(keys, str):
        keys = (keys,)
    missing = [k for k in keys if k not in outputs]
    if missing:
        raise ValueError(
            f"plot_energy_drift: `keys` {missing} are not in `sol.outputs`; available: "
            f"{sorted(outputs)}."
        )
    fig, ax = plt.subplots(figsize=(8, 4.5), constrained_layout=True)
    positive = False
    for key in keys:
        drift = relative_drift(outputs[key])
        positive |= bool(np.any(drift > 0))
        ax.plot(t, drift, label=key)
    if log and positive:  # an all-zero drift (exactly conserved) stays on a linear axis
        ax.set_yscale("log")
    ax.set(xlabel=t_label, ylabel="relative drift [-]", title="drift from the initial value")
    ax.legend(loc="best")
    no_offset(ax)
    ax.grid(alpha=0.3, which="both")
    return fig


def relative_drift(x):
    """$|x(t) - x(0)| / |x(0)|$ along the leading (time) axis; vectors/matrices use the norm over
    the trailing axes; the absolute change where $x(0) = 0$. Shape `(n,)`."""
    x = np.asarray(x, dtype=float)
    d = (x - x[:1]).reshape(len(x), -1)
    scale = np.linalg.norm(x[:1].reshape(1, -1))
    change = np.linalg.norm(d, axis=-1)
    return change / scale if scale > 0 else change


def plot_dispersion(
    ts,
    samples,
    *,
    percentiles=(5.0, 25.0),
    labels=None,
    ylabel: str = "",
    title: str = "",
    members: int = 0,
    reference=None,
    time_unit: str = "s",
):
    """Percentile bands of a batch of trajectories (e.g. a `jax.vmap` Monte Carlo run).

    For each `p` in `percentiles` the band between the `p`-th and `(100 - p)`-th percentiles over the
    batch is shaded, and the median is drawn as a line.

    **Arguments:**

    - `ts`: sample times [s], shape `(n,)` (or `(batch, n)` with identical rows, as a vmapped
      `Solution.ts`).
    - `samples`: shape `(batch, n)` (one quantity) or `(batch, n, k)` (k components, one axis each).
    - `percentiles`: lower percentiles of the bands, each in `[0, 50)`.
    - `labels`: names of the k components (default `"[i]"`); `ylabel`, `title`: axis texts.
    - `members`: also draw the first `members` trajectories as thin lines.
    - `reference`: optional trajectory drawn dashed (e.g. the nominal run), shape `(n,)` / `(n, k)`.
    - `time_unit`: unit of the time axis.

    **Returns:** a Figure with k axes; each has the median line first, then `members` lines, then
    the reference line (if any), and one shaded band per percentile.
    """
    plt = pyplot()
    if time_unit not in _TIME_UNITS:
        raise ValueError(
            f"plot_dispersion: `time_unit` must be one of {sorted(_TIME_UNITS)}; got {time_unit!r}."
        )
    ts = np.asarray(ts, dtype=float)
    if ts.ndim == 2:
        ts = ts[0]
    x = np.asarray(samples, dtype=float)
    if x.ndim == 2:
        x = x[..., None]
    if x.ndim != 3 or x.shape[1] != ts.shape[0]:
        raise ValueError(
            "plot_dispersion: `samples` must have shape (batch, n) or (batch, n, k) with "
            f"n = len(ts) = {ts.shape[0]}; got {np.shape(samples)}."
        )
    percentiles = tuple(float(p) for p in np.atleast_1d(percentiles))
    if any(not 0.0 <= p < 50.0 for p in percentiles):
        raise ValueError(f"plot_dispersion: `percentiles` must lie in [0, 50); got {percentiles}.")
    k = x.shape[-1]
    labels = [f"[{i}]" for i in range(k)] if labels is None else list(labels)
    if len(labels) != k:
        raise ValueError(f"plot_dispersion: `labels` needs {k} entries; got {len(labels)}.")
    ref = None
    if reference is not None:
        ref = np.asarray(reference, dtype=float).reshape(ts.shape[0], k)
    t = ts / _TIME_UNITS[time_unit]
    fig, axes = plt.subplots(
        k, 1, figsize=(8, 2.2 + 2.0 * k), sharex=True, squeeze=False, constrained_layout=True
    )
    for i, ax in enumerate(axes[:, 0]):
        xi = x[..., i]
        ax.plot(t, np.median(xi, axis=0), color="C0", lw=1.8, label="median")
        for m in range(min(members, xi.shape[0])):
            ax.plot(t, xi[m], color="0.5", lw=0.5, alpha=0.6)
        if ref is not None:
            ax.plot(t, ref[:, i], "k--", lw=1.0, label="reference")
        for j, p in enumerate(sorted(percentiles)):
            lo, hi = np.percentile(xi, [p, 100.0 - p], axis=0)
            ax.fill_between(t, lo, hi, color="C0", alpha=0.15 + 0.15 * j,
                            label=f"{p:g}-{100 - p:g} %", lw=0)  # fmt: skip
        ax.set_ylabel(f"{ylabel} {labels[i]}".strip())
        ax.grid(alpha=0.3)
        no_offset(ax)
    axes[0, 0].legend(loc="best", fontsize="small")
    axes[-1, 0].set_xlabel(f"t [{time_unit}]")
    if title:
        axes[0, 0].set_title(f"{title} (batch of {x.shape[0]})")
    return fig
