r"""Quick-look plots of spacecraft runs: orbit, attitude, wheel speeds, Basilisk's energy totals.

These are the spacecraft layouts (the engine's `jaxsim.plotting` is model-agnostic); they are
built on the engine's generic plots, which this module re-exports (`plot_series`,
`plot_trajectory`, `plot_dispersion`, `relative_drift`, `series`, `time_axis`), so one import serves
a spacecraft notebook. matplotlib is imported only when a function is called.

```python
from effectors import plotting

fig = plotting.plot_orbit(sol)                       # r_CN_N in 3D around the Earth [km], radius
fig = plotting.plot_attitude(sol)                    # sigma_BN [-] and omega_BN_B [rad/s]
fig = plotting.plot_energy_drift(sol)                # the four totals Basilisk logs
fig = plotting.plot_wheel_speeds(sol, name="rw")
fig = plotting.plot_dispersion(ts, omega_samples, labels=["x", "y", "z"])   # (batch, n, 3)
fig = plotting.plot_ground_track(sol, epoch)         # WGS84 latitude/longitude and height
```

Each quantity is read from `sol.outputs`, else from the hub state `sol.ys["hub"]` (a run with
`outputs=False`). Time axes are in minutes unless `time_unit` (`"s"`, `"min"`, `"h"`) says otherwise.
"""

import numpy as np

from jaxsim.plotting import (
    component_labels as component_labels,
    no_offset as no_offset,
    plot_dispersion as plot_dispersion,
    plot_energy_drift as _plot_drift,
    plot_series as plot_series,
    plot_trajectory as plot_trajectory,
    pyplot,
    relative_drift as relative_drift,
    series as series,
    time_axis,
)

from . import astro
from ._spacecraft._assembly import _HUB_KEY, _HUB_STATE_UNITS, _OUTPUT_UNITS


__all__ = [
    "BASILISK_TOTALS",
    "EARTH_RADIUS",
    "component_labels",
    "draw_ground_track",
    "draw_orbit_3d",
    "draw_wheel_speeds",
    "no_offset",
    "plot_attitude",
    "plot_dispersion",
    "plot_energy_drift",
    "plot_ground_track",
    "plot_orbit",
    "plot_series",
    "plot_trajectory",
    "plot_wheel_speeds",
    "relative_drift",
    "series",
]

BASILISK_TOTALS = ("totOrbEnergy", "totOrbAngMomPntN_N", "totRotEnergy", "totRotAngMomPntC_N")
EARTH_RADIUS = 6378.1363e3  # Earth's equatorial radius [m] (the default central body drawn)
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


def _check_body_radius(body_radius):
    if body_radius is None:
        return None
    value = float(np.asarray(body_radius))
    if not np.isfinite(value) or value <= 0.0:
        raise ValueError(
            f"plot_orbit: `body_radius` must be a positive radius [m] or None; got {body_radius!r}."
        )
    return value


def draw_orbit_3d(ax, r_km, *, body_radius_km=None, label: str = "r_CN_N"):
    r"""Draw a path `r_km` (shape `(n, 3)`, in km, $\mathcal N$ components) on a 3D axis `ax`: the
    path, its start point and, when `body_radius_km` is given, the central body as a sphere;
    labelled `x_N`, `y_N`, `z_N` [km] axes with equal scales, and a legend."""
    if body_radius_km is not None:
        u, v = np.meshgrid(np.linspace(0.0, 2.0 * np.pi, 37), np.linspace(0.0, np.pi, 19))
        R = body_radius_km
        ax.plot_surface(R * np.cos(u) * np.sin(v), R * np.sin(u) * np.sin(v), R * np.cos(v),
                        color="tab:blue", alpha=0.25, linewidth=0, label="Earth")  # fmt: skip
    ax.plot(r_km[:, 0], r_km[:, 1], r_km[:, 2], color="C1", lw=1.5, label=label)
    ax.plot(r_km[:1, 0], r_km[:1, 1], r_km[:1, 2], "o", color="k", label="t0")
    pts = r_km if body_radius_km is None else np.vstack([r_km, [[body_radius_km] * 3],
                                                          [[-body_radius_km] * 3]])  # fmt: skip
    centre = 0.5 * (pts.max(axis=0) + pts.min(axis=0))
    half = 0.5 * float(np.max(pts.max(axis=0) - pts.min(axis=0))) or 1.0
    ax.set(xlim=(centre[0] - half, centre[0] + half), ylim=(centre[1] - half, centre[1] + half),
           zlim=(centre[2] - half, centre[2] + half))  # fmt: skip
    ax.set_box_aspect((1.0, 1.0, 1.0))
    ax.set(xlabel="x_N [km]", ylabel="y_N [km]", zlabel="z_N [km]")
    ax.legend(loc="upper left", fontsize="small")
    no_offset(ax)


def plot_orbit(sol, *, key: str = "r_CN_N", body_radius=EARTH_RADIUS, time_unit: str = "min"):
    r"""Orbit of the spacecraft in 3D around the central body, and its radius change against time.

    **Arguments:**

    - `sol`: one run of a `Spacecraft` (position read from `sol.outputs[key]`, else the hub state).
    - `key`: which position, `"r_CN_N"` (composite CoM, default) or `"r_BN_N"` (body origin) [m],
      relative to the central body.
    - `body_radius`: radius of the central body drawn as a sphere [m] (default: the Earth's
      equatorial radius, `EARTH_RADIUS`); None draws none.
    - `time_unit`: unit of the time axis.

    **Returns:** a Figure with 2 axes: a 3D axis (the path in km with labelled $\mathcal N$ axes,
    the start point, the body; legend) and the radius change $|r(t)| - |r(t_0)|$ in m against
    time (titled with $|r(t_0)|$; plain tick labels, no offset).
    """
    plt = pyplot()
    t, t_label = time_axis(sol, time_unit)  # one run and a known unit, checked before the data
    radius_m = _check_body_radius(body_radius)
    r_km = series(sol, _hub_key(sol, key)) * 1e-3
    if r_km.shape[-1:] != (3,):
        raise ValueError(f"plot_orbit: `{key}` must be a 3-vector; got shape {r_km.shape}.")
    fig = plt.figure(figsize=(12, 5), constrained_layout=True)
    ax3 = fig.add_subplot(1, 2, 1, projection="3d")
    draw_orbit_3d(
        ax3, r_km, body_radius_km=None if radius_m is None else radius_m * 1e-3, label=key
    )
    ax3.set_title(f"{key} ($\\mathcal{{N}}$ frame)")
    ax = fig.add_subplot(1, 2, 2)
    norm = np.linalg.norm(r_km, axis=-1)
    ax.plot(t, (norm - norm[0]) * 1e3, label=f"|{key}| - |{key}(t0)|")
    ax.set(xlabel=t_label, ylabel="radius change [m]",
           title=f"|{key}(t0)| = {norm[0]:.3f} km")  # fmt: skip
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    no_offset(ax)
    return fig


def plot_attitude(sol, *, time_unit: str = "min"):
    """Attitude MRPs `sigma_BN` [-] and body rates `omega_BN_B` [rad/s] against time.

    **Arguments:** `sol`: one run of a `Spacecraft`; `time_unit`: unit of the time axis.

    **Returns:** a Figure with 2 axes (3 lines each, legend `x`, `y`, `z`: the components; the MRP
    shadow-set switches show as jumps of `sigma_BN`).
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

    **Returns:** a Figure with 1 axis, one line per wheel (legend `wheel 1`, `wheel 2`, ...).
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
    draw_wheel_speeds(ax, t, omega, rpm=rpm)
    ax.set(xlabel=t_label, title=f"wheel speeds ({name})")
    return fig


def draw_wheel_speeds(ax, t, omega, *, rpm: bool = False):
    """One line per wheel (`omega`: shape `(n, num_wheels)`, already in the plotted unit), labelled
    `wheel 1`, `wheel 2`, ... (column `i` of the state is wheel `i + 1`), in a legend; y label with
    the unit; plain tick labels."""
    for i in range(omega.shape[1]):
        ax.plot(t, omega[:, i], label=f"wheel {i + 1}")
    ax.set(ylabel="Omega [rpm]" if rpm else "Omega [rad/s]")
    ax.legend(loc="best", ncols=min(omega.shape[1], 4))
    ax.grid(alpha=0.3)
    no_offset(ax)


def _track_segments(lon_deg):
    """Slices of a longitude series between its jumps across the antimeridian (|step| > 180 deg)."""
    cuts = np.flatnonzero(np.abs(np.diff(lon_deg)) > 180.0) + 1
    edges = np.concatenate([[0], cuts, [len(lon_deg)]])
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def draw_ground_track(ax, lat_deg, lon_deg, *, label: str = "ground track"):
    """Draw a ground track (latitude and longitude [deg], shape `(n,)`) on a 2D axis `ax`: one
    line per pass between antimeridian crossings (no line across the map), the start point, the
    axes -180..180 and -90..90 deg with a grid and a legend."""
    lat_deg, lon_deg = np.asarray(lat_deg, dtype=float), np.asarray(lon_deg, dtype=float)
    if lat_deg.shape != lon_deg.shape or lat_deg.ndim != 1:
        raise ValueError(
            "draw_ground_track: `lat_deg` and `lon_deg` must be 1-D of one shape [deg]; got "
            f"{lat_deg.shape} and {lon_deg.shape}."
        )
    for k, seg in enumerate(_track_segments(lon_deg)):
        ax.plot(lon_deg[seg], lat_deg[seg], color="C1", lw=1.2, label=label if k == 0 else None)
    ax.plot(lon_deg[:1], lat_deg[:1], "o", color="k", label="t0")
    ax.set(xlim=(-180.0, 180.0), ylim=(-90.0, 90.0), xlabel="longitude [deg]",
           ylabel="geodetic latitude [deg]")  # fmt: skip
    ax.set_xticks(np.arange(-180, 181, 60))
    ax.set_yticks(np.arange(-90, 91, 30))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")


def plot_ground_track(sol, epoch, *, key: str = "r_CN_N", time_unit: str = "min"):
    r"""Ground track and height of a run around the Earth, on the WGS84 ellipsoid.

    **Arguments:**

    - `sol`: one run of a `Spacecraft` whose $\mathcal N$ frame is the GCRS (positions relative to
      the Earth, e.g. started from `fx.astro.tle_state`).
    - `epoch`: the run's `fx.astro.Epoch` (the run's time `t` counts from it).
    - `key`: `"r_CN_N"` (default) or `"r_BN_N"` [m].
    - `time_unit`: unit of the height plot's time axis.

    The positions go to the ITRS with `fx.astro.gcrs_to_itrs` (velocities are not needed: zeros)
    and to geodetic coordinates with `fx.astro.geodetic`.

    **Returns:** a Figure with 2 axes: the ground track (longitude against geodetic latitude [deg],
    split at the antimeridian, start point) and the height above the ellipsoid [km] against time.
    """
    plt = pyplot()
    t, t_label = time_axis(sol, time_unit)
    r = series(sol, _hub_key(sol, key))
    if r.shape[-1:] != (3,):
        raise ValueError(f"plot_ground_track: `{key}` must be a 3-vector; got shape {r.shape}.")
    ts = np.asarray(sol.get("ts") if isinstance(sol, dict) else sol.ts, dtype=float)
    r_itrs, _ = astro.gcrs_to_itrs(r, np.zeros_like(r), epoch, ts)
    lat, lon, h = (np.asarray(x) for x in astro.geodetic(r_itrs))
    fig, (ax, axh) = plt.subplots(1, 2, figsize=(13, 4.5), constrained_layout=True,
                                  gridspec_kw={"width_ratios": [2, 1]})  # fmt: skip
    draw_ground_track(ax, np.degrees(lat), np.degrees(lon), label=key)
    ax.set_title(f"ground track from {epoch.iso}Z")
    axh.plot(t, h * 1e-3, color="C0")
    axh.set(xlabel=t_label, ylabel="height above WGS84 [km]")
    axh.grid(alpha=0.3)
    no_offset(axh)
    return fig
