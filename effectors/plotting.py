r"""Quick-look plots of spacecraft runs: orbit, attitude, wheel speeds, Basilisk's energy totals.

These are the spacecraft layouts (formerly in `jaxsim.plotting`, which is now model-agnostic); they
are built on the engine's generic plots, which this module re-exports (`plot_series`,
`plot_trajectory`, `plot_dispersion`, `relative_drift`, `series`, `time_axis`), so one import serves
a spacecraft notebook. matplotlib is imported only when a function is called.

```python
from effectors import plotting

fig = plotting.plot_orbit(sol)                       # r_CN_N projections [km] and radius
fig = plotting.plot_attitude(sol)                    # sigma_BN [-] and omega_BN_B [rad/s]
fig = plotting.plot_energy_drift(sol)                # the four totals Basilisk logs
fig = plotting.plot_wheel_speeds(sol, name="rw")
fig = plotting.plot_dispersion(ts, omega_samples, labels=["x", "y", "z"])   # (batch, n, 3)
```

Each quantity is read from `sol.outputs`, else from the hub state `sol.ys["hub"]` (a run with
`outputs=False`). Time axes are in minutes unless `time_unit` (`"s"`, `"min"`, `"h"`) says otherwise.
"""

import numpy as np

from jaxsim.plotting import (
    plot_dispersion as plot_dispersion,
    plot_energy_drift as _plot_drift,
    plot_series as plot_series,
    plot_trajectory as plot_trajectory,
    pyplot,
    relative_drift as relative_drift,
    series as series,
    time_axis,
)

from ._spacecraft import _HUB_KEY, _HUB_STATE_UNITS, _OUTPUT_UNITS


__all__ = [
    "BASILISK_TOTALS",
    "plot_attitude",
    "plot_dispersion",
    "plot_energy_drift",
    "plot_orbit",
    "plot_series",
    "plot_trajectory",
    "plot_wheel_speeds",
    "relative_drift",
    "series",
]

BASILISK_TOTALS = ("totOrbEnergy", "totOrbAngMomPntN_N", "totRotEnergy", "totRotAngMomPntC_N")
# Labels of hub quantities read from the outputs or, without outputs, from the hub state.
_HUB_UNITS = {**_OUTPUT_UNITS, _HUB_KEY: _HUB_STATE_UNITS}


def _hub_key(sol, key):
    """`key` when `sol.outputs` has it, else `"hub.<key>"` (the hub state)."""
    outputs = sol.get("outputs") if isinstance(sol, dict) else getattr(sol, "outputs", None)
    if isinstance(outputs, dict) and key in outputs:
        return key
    ys = sol.get("ys") if isinstance(sol, dict) else getattr(sol, "ys", None)
    if isinstance(ys, dict) and isinstance(ys.get(_HUB_KEY), dict) and key in ys[_HUB_KEY]:
        return f"{_HUB_KEY}.{key}"
    raise ValueError(
        f"effectors.plotting: `{key}` is neither in `sol.outputs` nor in `sol.ys['hub']` (is the "
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
    time_axis(sol, time_unit)  # one run and a known unit, checked before the data
    return plot_trajectory(sol, _hub_key(sol, key), scale=1e-3, unit="km", time_unit=time_unit)


def plot_attitude(sol, *, time_unit: str = "min"):
    """Attitude MRPs `sigma_BN` [-] and body rates `omega_BN_B` [rad/s] against time.

    **Arguments:** `sol`: one run of a `Spacecraft`; `time_unit`: unit of the time axis.

    **Returns:** a Figure with 2 axes (3 lines each: x, y, z components; the MRP shadow-set
    switches show as jumps of `sigma_BN`).
    """
    time_axis(sol, time_unit)
    keys = [_hub_key(sol, key) for key in ("sigma_BN", "omega_BN_B")]
    return plot_series(sol, keys, units=_HUB_UNITS, time_unit=time_unit)


def plot_energy_drift(sol, keys=BASILISK_TOTALS, *, log: bool = True, time_unit: str = "min"):
    """Relative drift of energies and momenta from their initial values
    (`jaxsim.plotting.plot_energy_drift`), by default of the four totals a `Spacecraft` logs as
    Basilisk does: `totOrbEnergy`, `totOrbAngMomPntN_N`, `totRotEnergy`, `totRotAngMomPntC_N`.

    **Returns:** a Figure with 1 axis, one line per key.
    """
    return _plot_drift(sol, keys, log=log, time_unit=time_unit)


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
    plt = pyplot()
    t, t_label = time_axis(sol, time_unit)
    ys = sol.get("ys") if isinstance(sol, dict) else getattr(sol, "ys", None)
    if not isinstance(ys, dict) or not isinstance(ys.get(name), dict) or "Omega" not in ys[name]:
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
