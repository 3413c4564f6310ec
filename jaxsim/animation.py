r"""Generic 3-D animation of saved frames: drawable primitives, `animate_scene`, `save_animation`.

The engine knows no spacecraft: a model's library turns its saved samples into the primitives below
(one array row per frame) and the engine draws them. The spacecraft drawing (hub box, body axes,
hinged panels, spinning wheels) is `effectors.animation` (`animate_spacecraft`,
`spacecraft_frames`, `spacecraft_geometry`, `wheel_angles` and `HUB_FACES` moved there), which
builds these primitives from a `Solution` and its `Spacecraft`.

The frames are drawn **after** the run, from the samples `simulate` saved: nothing is called inside
the integrator, so an animation never slows a run down or changes its step grid. matplotlib is
imported only when `animate_scene` or `save_animation` is called: `import jaxsim` never imports it.

```python
from jaxsim import animation

ts = np.linspace(0.0, 10.0, 11)
tip = np.stack([np.cos(ts), np.sin(ts), 0.0 * ts], axis=-1)          # (k, 3) [m]
items = [
    animation.Polyline(np.stack([0.0 * tip, tip], axis=1), color="k"),  # (k, 2, 3): a spinning rod
    animation.Ray(np.broadcast_to([0.0, 0.0, 1.0], (11, 3)), label="z"),
]
anim = animation.animate_scene(ts, items, fps=10)
animation.save_animation(anim, "rod.gif")  # PillowWriter; ".mp4" uses ffmpeg
```

Primitives (positions in one frame of the scene's choice, e.g. $\mathcal N$ components relative to
a body origin; $k$ frames):

- `Polygons(verts)`: filled polygons, `verts` of shape `(k, m, v, 3)` ($m$ polygons of $v$ corners).
- `Polyline(points)`: a line through `(k, v, 3)` points (closed when the last point repeats the first).
- `Ray(directions)`: an arrow from the origin along the unit vectors `(k, 3)`, of length `length`
  times the scene's extent, with an optional `label` at `label_at` times its tip.

The scene's extent (the half-width of the cube drawn) is 1.15 times the largest distance from the
origin of any polygon corner or polyline point (rays do not count), unless `extent` is given.

**Limitations:** writing `.mp4` needs the `ffmpeg` program; `.gif` needs Pillow (a matplotlib
dependency).
"""

import dataclasses
from pathlib import Path

import numpy as np

from ._result._files import check_flag, refuse_existing, replace_safely


__all__ = ["Polygons", "Polyline", "Ray", "animate_scene", "save_animation"]

_TIME_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}
_EXTENT_MARGIN = 1.15  # the drawn cube's half-width over the largest distance of a drawn point


def _fail(where, arg, expected, unit, value):
    """The package's error form: "<where>: `<arg>` <expected> [unit]; got <value>."."""
    unit = f" [{unit}]" if unit else ""
    # `value` is shown as is when a str (callers pass repr() of user-given strings)
    arr = None if isinstance(value, str) else np.asarray(value)
    if arr is not None and arr.dtype != object and arr.size > 12:
        shown = f"array of shape {arr.shape}"
    else:
        shown = value if isinstance(value, str) else str(value)
    raise ValueError(f"{where}: `{arg}` {expected}{unit}; got {shown}.")


def _positive_number(where, arg, value, unit):
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not (ok and np.isfinite(value) and value > 0):
        _fail(where, arg, "must be a finite number > 0", unit, value)
    return float(value)


def _frames(where, arg, value, k, trailing):
    """Float array of shape `(k, *trailing)` (None entries of `trailing` match any length), finite."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        _fail(where, arg, "must be a numeric array", "m", type(value).__name__)
    shape = (k, *trailing)
    ok = arr.ndim == len(shape) and all(s is None or s == n for s, n in zip(shape, arr.shape))
    if not ok:
        want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ")"
        _fail(where, arg, f"must have shape {want} (one row per frame)", "m", f"shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        _fail(where, arg, "must be finite", "m", arr)
    return arr


@dataclasses.dataclass(frozen=True)
class Polygons:
    """Filled polygons over the frames.

    **Fields:** `verts` [m] `(k, m, v, 3)`: at frame $i$, polygon $j$ has the corners
    `verts[i, j]`; `facecolor`, `edgecolor` (matplotlib colours); `alpha` (opacity, 0..1).
    """

    verts: np.ndarray
    facecolor: str = "0.6"
    edgecolor: str = "0.25"
    alpha: float = 0.35


@dataclasses.dataclass(frozen=True)
class Polyline:
    """A line through points over the frames.

    **Fields:** `points` [m] `(k, v, 3)`; `color`; `lw` (line width [pt]); `ls` (line style).
    """

    points: np.ndarray
    color: str = "k"
    lw: float = 1.5
    ls: str = "-"


@dataclasses.dataclass(frozen=True)
class Ray:
    """An arrow from the origin along a unit direction over the frames, sized to the scene.

    **Fields:** `directions` [-] `(k, 3)` (unit vectors); `length`: the arrow's length as a
    fraction of the scene's extent; `label`: text drawn at `label_at` times the arrow's tip (None:
    no text); `color`; `lw` [pt]; `ls`.
    """

    directions: np.ndarray
    length: float = 1.0
    label: str | None = None
    label_at: float = 1.05
    color: str = "k"
    lw: float = 1.5
    ls: str = "-"


def _matplotlib():
    try:
        import matplotlib.animation as manimation
        import matplotlib.pyplot as plt
        from mpl_toolkits.mplot3d.art3d import Poly3DCollection
    except ImportError as err:
        raise ImportError(
            "jaxsim.animation needs matplotlib, which is not installed; install it with "
            "`pip install 'jaxsim-spacecraft[plot]'` or `pip install matplotlib`."
        ) from err
    return plt, manimation, Poly3DCollection


def animate_scene(
    ts,
    items,
    *,
    fps: float = 20.0,
    time_unit: str = "s",
    extent=None,
    axis_labels=("x [m]", "y [m]", "z [m]"),
    figsize=(6.0, 6.0),
    elev: float = 25.0,
    azim: float = -60.0,
    title: str = "",
):
    """A 3-D matplotlib animation of `Polygons`, `Polyline` and `Ray` primitives over saved frames.

    **Arguments:**

    - `ts`: the frame times [s], shape `(k,)`, $k \\ge 1$ (shown as "t = ..." in the corner).
    - `items`: the primitives, drawn in this order; each holds one row per frame.
    - `fps`: frames per second of playback [1/s], > 0.
    - `time_unit`: `"s"`, `"min"` or `"h"` for the time label.
    - `extent`: half-width of the drawn cube [m], > 0 (default: see the module docstring).
    - `axis_labels`: the three axis labels; `figsize` [in]; `elev`, `azim`: view angles [deg];
      `title`: the figure title.

    **Returns:** a `matplotlib.animation.FuncAnimation` (show it in a notebook with
    `IPython.display.HTML(anim.to_jshtml())`, or write it with `save_animation`), with the extra
    attributes `anim.fig` (the Figure; `plt.close(anim.fig)` avoids a duplicate static image in
    notebooks), `anim.fps` and `anim.extent`.
    """
    where = "animate_scene"
    fps = _positive_number(where, "fps", fps, "1/s")
    if time_unit not in _TIME_UNITS:
        _fail(where, "time_unit", f"must be one of {sorted(_TIME_UNITS)}", "", repr(time_unit))
    ts = np.asarray(ts, dtype=float)
    if ts.ndim != 1 or ts.shape[0] == 0 or not np.all(np.isfinite(ts)):
        _fail(where, "ts", "must be a finite 1-D array of at least one frame time", "s",
              f"shape {ts.shape}")  # fmt: skip
    k = ts.shape[0]
    items = list(items)
    data, points = [], []
    for j, item in enumerate(items):
        arg = f"items[{j}]"
        if isinstance(item, Polygons):
            arr = _frames(where, f"{arg}.verts", item.verts, k, (None, None, 3))
            points.append(arr.reshape(k, -1, 3))
        elif isinstance(item, Polyline):
            arr = _frames(where, f"{arg}.points", item.points, k, (None, 3))
            points.append(arr)
        elif isinstance(item, Ray):
            arr = _frames(where, f"{arg}.directions", item.directions, k, (3,))
            _positive_number(where, f"{arg}.length", item.length, "-")
        else:
            _fail(where, arg, "must be a Polygons, Polyline or Ray", "", type(item).__name__)
        data.append(arr)
    if extent is None:
        pts = np.concatenate(points, axis=1) if points else np.zeros((k, 1, 3))
        largest = float(np.max(np.linalg.norm(pts, axis=-1))) if pts.shape[1] else 0.0
        extent = _EXTENT_MARGIN * max(largest, 1e-9)
    else:
        extent = _positive_number(where, "extent", extent, "m")
    if len(axis_labels) != 3:
        _fail(where, "axis_labels", "must hold 3 labels", "", repr(axis_labels))
    plt, manimation, Poly3DCollection = _matplotlib()

    fig = plt.figure(figsize=figsize)
    ax = fig.add_subplot(projection="3d")
    ax.set(xlim=(-extent, extent), ylim=(-extent, extent), zlim=(-extent, extent))
    ax.set_box_aspect((1.0, 1.0, 1.0))
    ax.set_xlabel(axis_labels[0])
    ax.set_ylabel(axis_labels[1])
    ax.set_zlabel(axis_labels[2])
    ax.view_init(elev=elev, azim=azim)
    ax.set_title(title)

    artists = []  # (item, array, artist, text or None)
    for item, arr in zip(items, data):
        if isinstance(item, Polygons):
            art = Poly3DCollection(list(arr[0]), facecolors=item.facecolor,
                                   edgecolors=item.edgecolor, alpha=item.alpha)  # fmt: skip
            ax.add_collection3d(art)
            artists.append((item, arr, art, None))
        else:
            (art,) = ax.plot([], [], [], color=item.color, lw=item.lw, ls=item.ls)
            text = None
            if isinstance(item, Ray) and item.label is not None:
                text = ax.text(0.0, 0.0, 0.0, item.label, color=item.color)
            artists.append((item, arr, art, text))
    time_text = ax.text2D(0.02, 0.95, "", transform=ax.transAxes)
    scale = _TIME_UNITS[time_unit]

    def draw(i):
        drawn = []
        for item, arr, art, text in artists:
            if isinstance(item, Polygons):
                art.set_verts(list(arr[i]))
            elif isinstance(item, Polyline):
                art.set_data_3d(arr[i, :, 0], arr[i, :, 1], arr[i, :, 2])
            else:
                tip = item.length * extent * arr[i]
                art.set_data_3d([0.0, tip[0]], [0.0, tip[1]], [0.0, tip[2]])
                if text is not None:
                    text.set_position_3d(item.label_at * tip)
                    drawn.append(text)
            drawn.append(art)
        time_text.set_text(f"t = {ts[i] / scale:.6g} {time_unit}")
        return [*drawn, time_text]

    draw(0)
    anim = manimation.FuncAnimation(fig, draw, frames=k, interval=1000.0 / fps, blit=False,
                                    repeat=True)  # fmt: skip
    anim.fig = fig
    anim.fps = fps
    anim.extent = extent
    return anim


def save_animation(anim, path, *, fps=None, dpi: float = 100.0, overwrite: bool = False):
    """Write an animation to `.gif` (matplotlib's `PillowWriter`) or `.mp4` (`FFMpegWriter`).

    **Arguments:** `anim`: a `matplotlib.animation.Animation` (e.g. from `animate_scene` or
    `effectors.animation.animate_spacecraft`); `path`: file name ending in `.gif` or `.mp4`; `fps`:
    frames per second (default: `anim.fps`, else 20); `dpi`: resolution [dots per inch];
    `overwrite`: replace an existing file at `path` (default: refused with a `FileExistsError`,
    nothing written). The file is written under a temporary name (same suffix) and moved into
    place when complete: a failed write leaves an earlier file as it was.

    **Returns:** the path written, as a `pathlib.Path`.

    **Raises:** `ValueError` for another suffix; `RuntimeError` naming `ffmpeg` when `.mp4` is asked
    for and the `ffmpeg` program is not installed (e.g. `apt install ffmpeg`, or
    `conda install ffmpeg`).
    """
    where = "save_animation"
    _, manimation, _ = _matplotlib()
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        _fail(where, "path", "must end in '.gif' or '.mp4'", "", repr(str(path)))
    check_flag(where, "overwrite", overwrite)
    refuse_existing(path, overwrite, where, "`overwrite=True`")
    fps = _positive_number(where, "fps", getattr(anim, "fps", 20.0) if fps is None else fps, "1/s")
    if suffix == ".gif":
        writer = manimation.PillowWriter(fps=fps)
    else:
        if not manimation.writers.is_available("ffmpeg"):
            raise RuntimeError(
                f"{where}: writing {path.name!r} (.mp4) needs the `ffmpeg` program, which is not "
                "installed (or not on PATH); install ffmpeg (e.g. `apt install ffmpeg` or "
                "`conda install ffmpeg`) or save a '.gif' instead."
            )
        writer = manimation.FFMpegWriter(fps=fps)
    with replace_safely(path, overwrite=overwrite, where=where) as tmp:
        anim.save(str(tmp), writer=writer, dpi=dpi)
    return path
