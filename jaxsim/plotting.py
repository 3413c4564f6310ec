r"""Quick-look plots of simulation results (matplotlib, an optional dependency).

Every function takes a `Solution` from `jaxsim.simulate` (or the dict of `jaxsim.results.to_numpy`)
and returns the `matplotlib.figure.Figure` it drew (created with `pyplot`, so notebooks show it;
close it with `plt.close(fig)` in scripts). matplotlib is imported only when a function is called:
`import jaxsim` never imports it. Install with `pip install 'jaxsim[notebooks]'` or
`pip install matplotlib`.

```python
from jaxsim import plotting

fig = plotting.plot_orbit(sol)
fig = plotting.plot_attitude(sol)
fig = plotting.plot_energy_drift(sol, keys=("totOrbEnergy", "totOrbAngMomPntN_N"))
fig = plotting.plot_wheel_speeds(sol, name="rw")
fig = plotting.plot_dispersion(ts, omega_samples, labels=["x", "y", "z"])   # (batch, n, 3)
```

Time axes are in seconds unless `time_unit` (`"s"`, `"min"`, `"h"`) says otherwise.
"""

import numpy as np


__all__ = [
    "plot_attitude",
    "plot_dispersion",
    "plot_energy_drift",
    "plot_orbit",
    "plot_wheel_speeds",
    "relative_drift",
]

_TIME_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}
_DEFAULT_DRIFT_KEYS = ("totOrbEnergy", "totOrbAngMomPntN_N", "totRotEnergy", "totRotAngMomPntC_N")
_XYZ = ("x", "y", "z")


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError(
            "jaxsim.plotting needs matplotlib, which is not installed; install it with "
            "`pip install 'jaxsim[notebooks]'` or `pip install matplotlib`."
        ) from err
    return plt


def _field(sol, name):
    value = sol.get(name) if isinstance(sol, dict) else getattr(sol, name, None)
    if value is None:
        raise ValueError(f"jaxsim.plotting: the solution has no `{name}`.")
    return value


def _times(sol, time_unit):
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


def _hub_quantity(sol, key):
    """`outputs[key]`, else the hub state `ys["hub"][key]`."""
    outputs = sol.get("outputs") if isinstance(sol, dict) else getattr(sol, "outputs", None)
    if isinstance(outputs, dict) and key in outputs:
        return np.asarray(outputs[key], dtype=float)
    ys = _field(sol, "ys")
    if isinstance(ys, dict) and isinstance(ys.get("hub"), dict) and key in ys["hub"]:
        return np.asarray(ys["hub"][key], dtype=float)
    raise ValueError(
        f"jaxsim.plotting: `{key}` is neither in `sol.outputs` nor in `sol.ys['hub']` (is the "
        "model a Spacecraft?)."
    )


def plot_orbit(sol, *, key: str = "r_CN_N", time_unit: str = "min"):
    """Orbit of the spacecraft: the three projections of the position onto the $\\mathcal N$ axes
    planes (x-y, x-z, y-z) and the radius against time.

    **Arguments:**

    - `sol`: one run of a `Spacecraft` (position read from `sol.outputs[key]`, else the hub state).
    - `key`: which position, `"r_CN_N"` (composite CoM, default) or `"r_BN_N"` (body origin) [m].
    - `time_unit`: unit of the time axis.

    **Returns:** a Figure with 4 axes; the projections are in km, equal aspect.
    """
    plt = _pyplot()
    t, t_label = _times(sol, time_unit)
    r_km = _hub_quantity(sol, key) / 1e3
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8), constrained_layout=True)
    for ax, (i, j) in zip(axes[:3], [(0, 1), (0, 2), (1, 2)]):
        ax.plot(r_km[:, i], r_km[:, j])
        ax.plot(r_km[:1, i], r_km[:1, j], "o", color="k", label="t0")
        ax.set(xlabel=f"{_XYZ[i]} [km]", ylabel=f"{_XYZ[j]} [km]", aspect="equal")
        ax.set_title(f"{key} ({_XYZ[i]}-{_XYZ[j]})")
    axes[0].legend(loc="best")
    axes[3].plot(t, np.linalg.norm(r_km, axis=-1))
    axes[3].set(xlabel=t_label, ylabel="|r| [km]", title=f"|{key}|")
    return fig


def plot_attitude(sol, *, time_unit: str = "min"):
    """Attitude MRPs `sigma_BN` [-] and body rates `omega_BN_B` [rad/s] against time.

    **Arguments:** `sol`: one run of a `Spacecraft`; `time_unit`: unit of the time axis.

    **Returns:** a Figure with 2 axes (3 lines each: x, y, z components; the MRP shadow-set
    switches show as jumps of `sigma_BN`).
    """
    plt = _pyplot()
    t, t_label = _times(sol, time_unit)
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True, constrained_layout=True)
    for ax, key, unit in zip(axes, ("sigma_BN", "omega_BN_B"), ("-", "rad/s")):
        value = _hub_quantity(sol, key)
        for i in range(value.shape[-1]):
            ax.plot(t, value[:, i], label=f"{key}[{i}]")
        ax.set(ylabel=f"{key} [{unit}]")
        ax.legend(loc="best", ncols=3)
        ax.grid(alpha=0.3)
    axes[-1].set(xlabel=t_label)
    return fig


def plot_energy_drift(sol, keys=_DEFAULT_DRIFT_KEYS, *, log: bool = True, time_unit: str = "min"):
    """Relative drift of energies and momenta from their initial values.

    For a scalar $x$ the curve is $|x(t) - x(0)| / |x(0)|$; for a vector $\\|x(t) - x(0)\\| /
    \\|x(0)\\|$ (the absolute change where the initial value is 0).

    **Arguments:**

    - `sol`: one run with these outputs (a `Spacecraft` logs `totOrbEnergy`, `totRotEnergy`,
      `totOrbAngMomPntN_N`, `totRotAngMomPntC_N`, as Basilisk does).
    - `keys`: output names to plot (missing ones raise `ValueError`).
    - `log`: logarithmic y axis (exact zeros, e.g. at $t = 0$, are not drawn there).
    - `time_unit`: unit of the time axis.

    **Returns:** a Figure with 1 axis, one line per key.
    """
    plt = _pyplot()
    t, t_label = _times(sol, time_unit)
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
    ax.set(xlabel=t_label, ylabel="relative drift", title="drift from the initial value")
    ax.legend(loc="best")
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


def plot_wheel_speeds(sol, name: str = "rw", *, rpm: bool = False, time_unit: str = "min"):
    """Reaction-wheel speeds `Omega` of the state effector `name` against time.

    **Arguments:**

    - `sol`: one run of a `Spacecraft` with a `ReactionWheels` effector (state `sol.ys[name]["Omega"]`
      [rad/s], shape `(n, num_wheels)`).
    - `name`: the effector's name.
    - `rpm`: plot in revolutions per minute instead of rad/s.
    - `time_unit`: unit of the time axis.

    **Returns:** a Figure with 1 axis, one line per wheel.
    """
    plt = _pyplot()
    t, t_label = _times(sol, time_unit)
    ys = _field(sol, "ys")
    if not isinstance(ys, dict) or name not in ys or "Omega" not in ys[name]:
        have = sorted(ys) if isinstance(ys, dict) else type(ys).__name__
        raise ValueError(
            f"plot_wheel_speeds: no wheel state `ys[{name!r}]['Omega']`; state entries are {have}."
        )
    omega = np.asarray(ys[name]["Omega"], dtype=float).reshape(len(t), -1)
    if rpm:
        omega = omega * 60.0 / (2.0 * np.pi)
    fig, ax = plt.subplots(figsize=(8, 4.5), constrained_layout=True)
    for i in range(omega.shape[1]):
        ax.plot(t, omega[:, i], label=f"{name}[{i}]")
    ax.set(xlabel=t_label, ylabel="Omega [rpm]" if rpm else "Omega [rad/s]",
           title=f"wheel speeds ({name})")  # fmt: skip
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    return fig


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
    plt = _pyplot()
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
    axes[0, 0].legend(loc="best", fontsize="small")
    axes[-1, 0].set_xlabel(f"t [{time_unit}]")
    if title:
        axes[0, 0].set_title(f"{title} (batch of {x.shape[0]})")
    return fig
