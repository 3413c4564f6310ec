r"""Animation of a spacecraft (hub box, body axes, hinged panels, spinning wheels) from saved frames.

The spacecraft describes its own drawing here: `spacecraft_frames` reads the hub, panel and wheel
geometry from the `Spacecraft` and the angles from the saved samples, and `spacecraft_scene` turns
that geometry into the engine's generic drawable primitives (`jaxsim.animation.Polygons`,
`Polyline`, `Ray`), which `jaxsim.animation.animate_scene` draws and `save_animation` writes. (These
functions were `jaxsim.animation.*` before the engine stopped knowing about spacecraft.)

The animation is built **after** the run, purely from the samples `simulate` saved (`sol.ts`,
`sol.outputs["sigma_BN"]`, the panels' `theta`, the wheels' `Omega` or `theta`): nothing is called
inside the integrator, so recording an animation never slows it down or changes its step grid.
(bdsim, by contrast, schedules animation frames as events in its integrator's queue, which restarts
the integrator at every frame; here the frame rate is set by `sample_dt` / `ts` of the run and by
`every` / `max_frames`.) matplotlib is imported only when a drawing function is called:
`import effectors` never imports it.

```python
from effectors import animation

sol = js.simulate(sc, y0, 200.0, dt=0.1, sample_dt=1.0)
anim = animation.animate_spacecraft(sol, sc, max_frames=100, fps=20, nadir=True)
animation.save_animation(anim, "spacecraft.gif")     # PillowWriter; ".mp4" uses ffmpeg
geom = animation.spacecraft_frames(sol, sc)           # the vertices drawn, as numpy arrays
```

Geometry (the panel and wheel frames of `HingedRigidBodies` and `ReactionWheels`, i.e. of Basilisk's
`hingedRigidBodyStateEffector` and `reactionWheelStateEffector`): every position is relative
to the body origin $B$ (the scene follows the spacecraft; its orbit is not drawn) and expressed in
$\mathcal N$ components, $\mathbf r_N = [BN]^T\mathbf r_B$ with $[BN]$ from $\boldsymbol\sigma_{B/N}$ (or in
$\mathcal B$ components with `frame="B"`).

- Hub: a box with edges along $\hat{\mathbf b}_{1,2,3}$, centred on the hub CoM $\mathbf r_{B_c/B}$.
- Panel $i$: the rectangle in the $\hat{\mathbf s}_1$-$\hat{\mathbf s}_2$ plane of its frame $[SB] = M_2(\theta)[HB]$,
  from the hinge line through $H$ (along the hinge axis $\hat{\mathbf s}_2 = \hat{\mathbf h}_2$) out to a distance
  $L$ along $-\hat{\mathbf s}_1$ (where the panel CoM lies, $\mathbf r_{S/B} = \mathbf r_{H/B} - d\hat{\mathbf s}_1$):
  corners $\mathbf r_{H/B} \pm \tfrac w2\hat{\mathbf s}_2$ and $\mathbf r_{H/B} - L\hat{\mathbf s}_1 \pm \tfrac w2\hat{\mathbf s}_2$,
  with $\hat{\mathbf s}_1 = \cos\theta\,\hat{\mathbf h}_1 - \sin\theta\,\hat{\mathbf h}_3$.
- Wheel $j$: a circle of radius $R$ about $\mathbf r_{W/B}$ in the plane normal to $\hat{\mathbf g}_s$, and a spoke
  from the centre to $\mathbf r_{W/B} + R\,\hat{\mathbf w}_2(\theta)$, $\hat{\mathbf w}_2(\theta) = \cos\theta\,\hat{\mathbf w}_{2,0} +
  \sin\theta\,\hat{\mathbf w}_{3,0}$ (rotation by the wheel angle $\theta$ about $+\hat{\mathbf g}_s$).

**Assumptions and limitations:** the wheel angle is the wheel's `theta` output when it has one (jitter
models); otherwise (balanced wheels, which carry no angle state) it is the configured initial `theta`
plus the trapezoidal integral of the saved speeds `Omega` over the saved frames, which is exact for
a speed that is piecewise linear between frames and a drawing aid only. A wheel that turns by more
than half a turn between frames aliases (the spoke appears to turn slowly, or backwards): sample
more densely or slow the drawn spin with `spin_scale`. Only `HingedRigidBodies` and `ReactionWheels`
are drawn (other effectors, e.g. slosh masses or spinning bodies, are not). Writing `.mp4` needs the
`ffmpeg` program; `.gif` needs Pillow (a matplotlib dependency).

**Reference:** H. Schaub, J. L. Junkins, *Analytical Mechanics of Space Systems*, 4th ed., AIAA 2018,
§3.5 (MRPs and the DCM); C. Allard, H. Schaub, S. Piggott, J. Spacecraft and Rockets 55(5), 2018
(hinged-panel frames).
"""

import numpy as np

from jaxsim.animation import Polygons, Polyline, Ray, animate_scene, save_animation

from ._actuators._reaction_wheels import ReactionWheels
from ._bodies._hinged_rigid_bodies import HingedRigidBodies
from ._spacecraft._assembly import Spacecraft


__all__ = [
    "HUB_FACES",
    "animate_spacecraft",
    "save_animation",
    "spacecraft_frames",
    "spacecraft_geometry",
    "spacecraft_scene",
    "wheel_angles",
]

# Corner indices of the 6 faces of the hub box returned by `spacecraft_geometry` (corner k has
# coordinates (+-a/2, +-b/2, +-c/2) with bit 2 of k the x sign, bit 1 the y sign, bit 0 the z sign).
HUB_FACES = ((0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5))
_FRAMES = ("N", "B")
_TIME_UNITS = {"s": 1.0, "min": 60.0, "h": 3600.0}
_RIM_POINTS = 33  # points on each wheel circle (closed: first == last)
_TRIAD_TOL = 1e-6  # wheel triads are drawn, not integrated: a loose check of orthonormality


# --------------------------------------------------------------------------------------------------
# Validation helpers (the package's error form: "<where>: `<arg>` <expected> [unit]; got <value>.")


def _fail(where, arg, expected, unit, value):
    unit = f" [{unit}]" if unit else ""
    # `value` is shown as is when a str (callers pass repr() of user-given strings)
    arr = None if isinstance(value, str) else np.asarray(value)
    if arr is not None and arr.dtype != object and arr.size > 12:
        shown = f"array of shape {arr.shape}"
    else:
        shown = value if isinstance(value, str) else str(value)
    raise ValueError(f"{where}: `{arg}` {expected}{unit}; got {shown}.")


def _array(where, arg, value, unit, shape):
    """Float array of the given shape (None entries match any length), finite."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        _fail(where, arg, "must be a numeric array", unit, value)
    ok = arr.ndim == len(shape) and all(s is None or s == n for s, n in zip(shape, arr.shape))
    if not ok:
        want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ")"
        _fail(where, arg, f"must have shape {want}", unit, f"shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        _fail(where, arg, "must be finite", unit, arr)
    return arr


def _mrp_to_dcm(sigma):
    r"""$[BN]$ from MRPs, numpy, shape `(n, 3, 3)` (same formula as `jaxsim.kinematics.mrp_to_dcm`)."""
    s = np.asarray(sigma, dtype=float)
    s2 = np.sum(s * s, axis=-1)[:, None, None]
    st = np.zeros(s.shape[:-1] + (3, 3))
    st[..., 0, 1], st[..., 0, 2], st[..., 1, 2] = -s[..., 2], s[..., 1], -s[..., 0]
    st[..., 1, 0], st[..., 2, 0], st[..., 2, 1] = s[..., 2], -s[..., 1], s[..., 0]
    return np.eye(3) + (8.0 * st @ st - 4.0 * (1.0 - s2) * st) / (1.0 + s2) ** 2


# --------------------------------------------------------------------------------------------------
# Pure geometry


def spacecraft_geometry(
    sigma_BN,
    *,
    hub_size=(1.0, 1.0, 1.0),
    r_BcB_B=(0.0, 0.0, 0.0),
    panel_theta=None,
    r_HB_B=None,
    dcm_HB=None,
    panel_size=None,
    wheel_theta=None,
    gsHat_B=None,
    w2Hat0_B=None,
    w3Hat0_B=None,
    rWB_B=None,
    wheel_radius=0.1,
    frame: str = "N",
) -> dict:
    r"""Vertices of the hub box, body axes, panels and wheels at each frame (pure numpy).

    **Arguments** ($n$ frames, $p$ panels, $w$ wheels; vectors in $\mathcal B$ components):

    - `sigma_BN`: attitude MRPs $\boldsymbol\sigma_{B/N}$ [-], shape `(n, 3)` (or `(3,)`: one frame).
    - `hub_size`: box edge lengths along $\hat b_1, \hat b_2, \hat b_3$ [m], `(3,)`, > 0.
    - `r_BcB_B`: box centre (hub CoM) relative to $B$ [m], `(3,)`.
    - `panel_theta`: hinge angles $\theta$ [rad], `(n, p)`; with `r_HB_B` [m] `(p, 3)`, `dcm_HB` [-]
      `(p, 3, 3)` (rows $\hat h_i$), and `panel_size` `(p, 2)` = (length $L$ along $-\hat s_1$, width $w$
      along $\hat s_2$) [m], > 0. `None`: no panels.
    - `wheel_theta`: wheel angles [rad], `(n, w)`; with `gsHat_B`, `w2Hat0_B`, `w3Hat0_B` [-] `(w, 3)`
      (the wheel triads at $\theta = 0$), `rWB_B` [m] `(w, 3)` and `wheel_radius` [m] (scalar or
      `(w,)`, > 0). `None`: no wheels.
    - `frame`: `"N"` (default): components in $\mathcal N$; `"B"`: in $\mathcal B$ (the body stays still).

    **Returns:** a dict of numpy arrays, positions relative to $B$ [m] in the chosen frame:
    `dcm_BN` `(n, 3, 3)`; `axes` `(n, 3, 3)` (row $k$: $\hat{\mathbf b}_k$); `hub` `(n, 8, 3)` box corners
    (faces: `HUB_FACES`); `panels` `(n, p, 4, 3)` corners in the order $H + \frac w2\hat s_2$,
    $H - \frac w2\hat s_2$, $H - L\hat s_1 - \frac w2\hat s_2$, $H - L\hat s_1 + \frac w2\hat s_2$;
    `wheel_center` `(n, w, 3)`, `wheel_rim` `(n, w, 33, 3)` (closed circle), `wheel_spoke`
    `(n, w, 2, 3)` (centre, tip).
    """
    where = "spacecraft_geometry"
    if frame not in _FRAMES:
        _fail(where, "frame", f"must be one of {_FRAMES}", "", repr(frame))
    sigma = np.asarray(sigma_BN, dtype=float)
    if sigma.shape == (3,):
        sigma = sigma[None]
    sigma = _array(where, "sigma_BN", sigma, "-", (None, 3))
    n = sigma.shape[0]
    if n == 0:
        _fail(where, "sigma_BN", "must hold at least one frame", "-", "shape (0, 3)")
    size = _array(where, "hub_size", hub_size, "m", (3,))
    if np.any(size <= 0):
        _fail(where, "hub_size", "must be > 0", "m", size)
    r_Bc = _array(where, "r_BcB_B", r_BcB_B, "m", (3,))
    dcm_BN = _mrp_to_dcm(sigma)
    out_rot = dcm_BN if frame == "N" else np.broadcast_to(np.eye(3), dcm_BN.shape)

    def to_frame(v_B):  # (n, ..., 3) in B components -> (n, ..., 3) in the output frame
        v_B = np.asarray(v_B)
        flat = v_B.reshape(n, -1, 3)
        return np.einsum("nji,nkj->nki", out_rot, flat).reshape(v_B.shape)

    signs = np.array([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)]) * 2.0 - 1.0
    corners_B = r_Bc + 0.5 * signs * size
    geom = {
        "dcm_BN": dcm_BN,
        "axes": to_frame(np.broadcast_to(np.eye(3), (n, 3, 3))),
        "hub": to_frame(np.broadcast_to(corners_B, (n, 8, 3))),
    }

    if panel_theta is not None:
        theta = _array(where, "panel_theta", panel_theta, "rad", (n, None))
        p = theta.shape[1]
        r_H = _array(where, "r_HB_B", r_HB_B, "m", (p, 3))
        H = _array(where, "dcm_HB", dcm_HB, "-", (p, 3, 3))
        ps = _array(where, "panel_size", panel_size, "m", (p, 2))
        if np.any(ps <= 0):
            _fail(where, "panel_size", "must be > 0", "m", ps)
        h1, h2, h3 = H[:, 0], H[:, 1], H[:, 2]
        c, s = np.cos(theta)[..., None], np.sin(theta)[..., None]
        s1 = c * h1 - s * h3  # (n, p, 3)
        s2 = np.broadcast_to(h2, s1.shape)
        L, w = ps[:, 0, None], ps[:, 1, None]
        half = 0.5 * w * s2
        far = r_H - L * s1
        quad = np.stack([r_H + half, r_H - half, far - half, far + half], axis=-2)
        geom["panels"] = to_frame(quad)
    if wheel_theta is not None:
        theta = _array(where, "wheel_theta", wheel_theta, "rad", (n, None))
        m = theta.shape[1]
        g = _array(where, "gsHat_B", gsHat_B, "-", (m, 3))
        w2 = _array(where, "w2Hat0_B", w2Hat0_B, "-", (m, 3))
        w3 = _array(where, "w3Hat0_B", w3Hat0_B, "-", (m, 3))
        r_W = _array(where, "rWB_B", rWB_B, "m", (m, 3))
        R = np.broadcast_to(np.asarray(wheel_radius, dtype=float), (m,))
        if not np.all(np.isfinite(R)) or np.any(R <= 0):
            _fail(where, "wheel_radius", "must be finite and > 0", "m", R)
        triad_err = np.max(np.abs(np.cross(g, w2) - w3)) + np.max(np.abs(np.sum(g * w2, -1)))
        if triad_err > _TRIAD_TOL or np.max(np.abs(np.linalg.norm(g, axis=-1) - 1.0)) > _TRIAD_TOL:
            _fail(where, "w3Hat0_B", "must complete a right-handed orthonormal triad "
                  "(gsHat_B, w2Hat0_B, w3Hat0_B)", "-", f"error {triad_err:.3g}")  # fmt: skip
        phi = np.linspace(0.0, 2.0 * np.pi, _RIM_POINTS)
        rim = r_W[:, None] + R[:, None, None] * (
            np.cos(phi)[None, :, None] * w2[:, None] + np.sin(phi)[None, :, None] * w3[:, None]
        )
        c, s = np.cos(theta)[..., None], np.sin(theta)[..., None]
        tip = r_W + R[:, None] * (c * w2 + s * w3)  # (n, m, 3)
        geom["wheel_center"] = to_frame(np.broadcast_to(r_W, (n, m, 3)))
        geom["wheel_rim"] = to_frame(np.broadcast_to(rim, (n,) + rim.shape))
        geom["wheel_spoke"] = to_frame(np.stack([np.broadcast_to(r_W, tip.shape), tip], axis=-2))
    return geom


# --------------------------------------------------------------------------------------------------
# From a Solution and its Spacecraft


def _get(container, key):
    if isinstance(container, dict):
        return container.get(key)
    return getattr(container, key, None)


def _spacecraft_outputs(where, sol, spacecraft):
    """`(ts, outputs, ys)` of one run; a spacecraft inside a `System` is looked up by its name."""
    ts, outputs, ys = _get(sol, "ts"), _get(sol, "outputs"), _get(sol, "ys")
    if ts is None or (outputs is None and ys is None):
        _fail(where, "sol", "must be a Solution (or a dict) with `ts` and `outputs`", "",
              type(sol).__name__)  # fmt: skip
    ts = np.asarray(ts, dtype=float)
    if ts.ndim != 1:
        _fail(where, "sol", "must be one run (`ts` 1-D; select a member of a batch first)", "s",
              f"`ts` of shape {ts.shape}")  # fmt: skip
    if ts.shape[0] == 0:
        _fail(where, "sol", "must hold at least one saved frame", "s", "`ts` of shape (0,)")
    name = getattr(spacecraft, "name", None)
    outputs = outputs if isinstance(outputs, dict) else {}
    ys = ys if isinstance(ys, dict) else {}
    if "sigma_BN" not in outputs and isinstance(outputs.get(name), dict):
        outputs = outputs[name]
        ys = ys.get(name, {}) if isinstance(ys.get(name), dict) else {}
    return ts, outputs, ys


def _select(where, arg, spacecraft, names, kind):
    """The state effectors of type `kind` named by `names` (None: all of that type)."""
    effs = getattr(spacecraft, "state_effectors", ())
    if names is None:
        return [e for e in effs if isinstance(e, kind)]
    if isinstance(names, str):
        names = (names,)
    by_name = {e.name: e for e in effs}
    chosen = []
    for nm in names:
        if nm not in by_name:
            _fail(where, arg, f"must name state effectors of the spacecraft ({sorted(by_name)})",
                  "", repr(nm))  # fmt: skip
        if not isinstance(by_name[nm], kind):
            _fail(where, arg, f"must name {kind.__name__} effectors; {nm!r} is a "
                  f"{type(by_name[nm]).__name__}", "", repr(nm))  # fmt: skip
        chosen.append(by_name[nm])
    return chosen


def _effector_series(where, arg, outputs, ys, name, key, n):
    sub = outputs.get(name)
    value = sub.get(key) if isinstance(sub, dict) else None
    if value is None and isinstance(ys.get(name), dict):
        value = ys[name].get(key)
    if value is None:
        return None
    arr = np.asarray(value, dtype=float)
    return arr.reshape(n, -1)


def wheel_angles(ts, Omega, theta0=0.0):
    r"""Wheel angles from saved speeds: $\theta_k = \theta_0 + \sum_{j<k}\tfrac12(\Omega_j + \Omega_{j+1})(t_{j+1} - t_j)$.

    **Arguments:** `ts` [s] `(n,)`; `Omega` [rad/s] `(n, w)`; `theta0` [rad] scalar or `(w,)`.
    **Returns:** `(n, w)` [rad] (exact for speeds piecewise linear between the samples).
    """
    ts = np.asarray(ts, dtype=float)
    Omega = np.asarray(Omega, dtype=float).reshape(ts.shape[0], -1)
    inc = 0.5 * (Omega[1:] + Omega[:-1]) * np.diff(ts)[:, None]
    cum = np.concatenate([np.zeros((1, Omega.shape[1])), np.cumsum(inc, axis=0)])
    return np.asarray(theta0, dtype=float) + cum


def _default_hub_size(hub):
    """Edges of the uniform box with the hub's mass and principal inertia diagonal; else a cube."""
    m = float(np.asarray(hub.mass))
    I = np.diag(np.asarray(hub.IHubPntBc_B, dtype=float))
    sq = 6.0 * (np.sum(I) - 2.0 * I) / m  # a^2 = 6 (I_yy + I_zz - I_xx) / m, cyclic
    if np.all(sq > 0) and np.all(np.isfinite(sq)):
        return np.sqrt(sq)
    return np.full(3, np.sqrt(6.0 * np.mean(I) / m))  # cube with I = m a^2 / 6


def _frame_indices(where, n, every, max_frames):
    if not isinstance(every, (int, np.integer)) or isinstance(every, bool) or every < 1:
        _fail(where, "every", "must be an integer >= 1", "", every)
    idx = np.arange(0, n, int(every))
    if max_frames is not None:
        ok = isinstance(max_frames, (int, np.integer)) and not isinstance(max_frames, bool)
        if not ok or max_frames < 1:
            _fail(where, "max_frames", "must be an integer >= 1 or None", "", max_frames)
        if idx.size > max_frames:
            idx = idx[
                np.unique(np.round(np.linspace(0, idx.size - 1, int(max_frames))).astype(int))
            ]
    return idx


def spacecraft_frames(
    sol,
    spacecraft,
    *,
    panels=None,
    wheels=None,
    every: int = 1,
    max_frames=None,
    hub_size=None,
    panel_size=None,
    wheel_radius=None,
    spin_scale: float = 1.0,
    directions=None,
    nadir: bool = False,
    frame: str = "N",
) -> dict:
    r"""The geometry of `spacecraft_geometry` at the saved frames of a run (what `animate_spacecraft` draws).

    **Arguments:**

    - `sol`: one run of `spacecraft` from `jaxsim.simulate` (a `Solution`, or a dict with `ts` and
      `outputs`, e.g. `jaxsim.results.to_numpy(sol)`); the attitude is `outputs["sigma_BN"]`, the panel
      angles `outputs[<panels>]["theta"]`, the wheel angles `outputs[<wheels>]["theta"]` or, without
      it, `wheel_angles` of `outputs[<wheels>]["Omega"]` (see the module docstring). A spacecraft
      inside a `System` is found under `outputs[spacecraft.name]`.
    - `spacecraft`: the `effectors.Spacecraft` that was simulated (hub, panel and wheel geometry).
    - `panels`, `wheels`: name(s) of the `HingedRigidBodies` / `ReactionWheels` state effectors to
      draw; `None` (default): all of them; `()`: none.
    - `every`: keep every `every`-th saved frame; `max_frames`: then at most this many, evenly spread.
    - `hub_size`: box edges [m] `(3,)`; default: the uniform box with the hub's mass and the diagonal
      of `IHubPntBc_B` ($a^2 = 6(I_{yy}+I_{zz}-I_{xx})/m$, cyclic; a cube if that has no solution).
    - `panel_size`: `(length, width)` [m] for all panels, or `(p, 2)`; default length $2d$ (the CoM at
      mid-length) and width $d$ (panels with $d = 0$ use half the largest hub edge).
    - `wheel_radius`: [m], scalar or `(w,)`; default 15 % of the smallest hub edge.
    - `spin_scale`: factor on the drawn wheel angles (e.g. 0.01 to slow fast wheels down on screen).
    - `directions`: inertial reference directions `{label: vector}`, each `(3,)` or `(n, 3)` in
      $\mathcal N$ components (e.g. the Sun direction), normalized here.
    - `nadir`: add the nadir direction $-\mathbf r_{B/N}/|\mathbf r_{B/N}|$ from `outputs["r_BN_N"]`.
    - `frame`: `"N"` (default) or `"B"` components (see `spacecraft_geometry`).

    **Returns:** the dict of `spacecraft_geometry` at the kept frames, plus `ts` `(k,)` [s],
    `index` `(k,)` (positions in `sol.ts`), `panel_theta` `(k, p)`, `wheel_theta` `(k, w)` [rad] (the
    drawn angles, including `spin_scale`), `directions` `{label: (k, 3)}` unit vectors in `frame`, and
    `hub_size`.
    """
    where = "spacecraft_frames"
    if not isinstance(spacecraft, Spacecraft):
        _fail(where, "spacecraft", "must be an effectors.Spacecraft", "", type(spacecraft).__name__)
    if frame not in _FRAMES:
        _fail(where, "frame", f"must be one of {_FRAMES}", "", repr(frame))
    ts, outputs, ys = _spacecraft_outputs(where, sol, spacecraft)
    n = ts.shape[0]
    sigma = outputs.get("sigma_BN")
    if sigma is None:
        sigma = ys.get("hub", {}).get("sigma_BN") if isinstance(ys.get("hub"), dict) else None
    if sigma is None:
        _fail(where, "sol", "must hold `outputs['sigma_BN']` (or `ys['hub']['sigma_BN']`)", "",
              str(sorted(outputs)))  # fmt: skip
    sigma = np.asarray(sigma, dtype=float).reshape(n, 3)
    idx = _frame_indices(where, n, every, max_frames)
    if not np.isfinite(spin_scale):
        _fail(where, "spin_scale", "must be finite", "-", spin_scale)

    hub = spacecraft.hub
    if hub_size is None:
        size = _default_hub_size(hub)
    else:
        size = _array(where, "hub_size", hub_size, "m", (3,))
        if np.any(size <= 0):
            _fail(where, "hub_size", "must be > 0", "m", size)
    kw = {"hub_size": size, "r_BcB_B": np.asarray(hub.r_BcB_B, dtype=float), "frame": frame}

    panel_effs = _select(where, "panels", spacecraft, panels, HingedRigidBodies)
    panel_theta = np.zeros((idx.size, 0))
    if panel_effs:
        thetas, r_H, H, d = [], [], [], []
        for e in panel_effs:
            th = _effector_series(where, "panels", outputs, ys, e.name, "theta", n)
            if th is None:
                _fail(where, "sol", f"must hold the panel angles `outputs[{e.name!r}]['theta']`",
                      "rad", str(sorted(outputs)))  # fmt: skip
            thetas.append(th)
            r_H.append(np.asarray(e.r_HB_B, dtype=float))
            H.append(np.asarray(e.dcm_HB, dtype=float))
            d.append(np.asarray(e.d, dtype=float))
        panel_theta = np.concatenate(thetas, axis=1)[idx]
        d = np.concatenate(d)
        p = d.size
        if panel_size is None:
            length = np.where(d > 0, 2.0 * d, 0.5 * np.max(size))
            ps = np.stack([length, np.where(d > 0, d, 0.5 * length)], axis=-1)
        else:
            ps = np.asarray(panel_size, dtype=float)
            ps = np.broadcast_to(ps, (p, 2)) if ps.shape == (2,) else ps
            ps = _array(where, "panel_size", ps, "m", (p, 2))
            if np.any(ps <= 0):
                _fail(where, "panel_size", "must be > 0", "m", ps)
        kw.update(panel_theta=panel_theta, r_HB_B=np.concatenate(r_H), dcm_HB=np.concatenate(H),
                  panel_size=ps)  # fmt: skip

    wheel_effs = _select(where, "wheels", spacecraft, wheels, ReactionWheels)
    wheel_theta = np.zeros((idx.size, 0))
    if wheel_effs:
        thetas, g, w2, w3, r_W = [], [], [], [], []
        for e in wheel_effs:
            th = _effector_series(where, "wheels", outputs, ys, e.name, "theta", n)
            if th is None:
                Om = _effector_series(where, "wheels", outputs, ys, e.name, "Omega", n)
                if Om is None:
                    _fail(where, "sol", f"must hold the wheel speeds `outputs[{e.name!r}]['Omega']`",
                          "rad/s", str(sorted(outputs)))  # fmt: skip
                th = wheel_angles(ts, Om, np.asarray(e.theta, dtype=float))
            thetas.append(th)
            g.append(np.asarray(e.gsHat_B, dtype=float))
            w2.append(np.asarray(e.w2Hat0_B, dtype=float))
            w3.append(np.asarray(e.w3Hat0_B, dtype=float))
            r_W.append(np.asarray(e.rWB_B, dtype=float))
        wheel_theta = float(spin_scale) * np.concatenate(thetas, axis=1)[idx]
        m = wheel_theta.shape[1]
        if wheel_radius is None:
            radius = np.full(m, 0.15 * np.min(size))
        else:
            radius = np.broadcast_to(np.asarray(wheel_radius, dtype=float), (m,))
            if not np.all(np.isfinite(radius)) or np.any(radius <= 0):
                _fail(where, "wheel_radius", "must be finite and > 0", "m", wheel_radius)
        kw.update(wheel_theta=wheel_theta, gsHat_B=np.concatenate(g), w2Hat0_B=np.concatenate(w2),
                  w3Hat0_B=np.concatenate(w3), rWB_B=np.concatenate(r_W), wheel_radius=radius)  # fmt: skip

    geom = spacecraft_geometry(sigma[idx], **kw)
    dirs = {}
    vectors = dict(directions or {})
    if not isinstance(directions, (dict, type(None))):
        _fail(where, "directions", "must be a dict {label: vector}", "-", type(directions).__name__)
    if nadir:
        r = outputs.get("r_BN_N")
        if r is None:
            _fail(
                where,
                "nadir",
                "needs `outputs['r_BN_N']` in the solution",
                "m",
                str(sorted(outputs)),
            )
        vectors.setdefault("nadir", -np.asarray(r, dtype=float).reshape(n, 3))
    for label, vec in vectors.items():
        v = np.asarray(vec, dtype=float)
        if v.shape == (3,):
            v = np.broadcast_to(v, (n, 3))
        if v.shape != (n, 3) or not np.all(np.isfinite(v)):
            _fail(where, "directions", f"entry {label!r} must be finite with shape (3,) or ({n}, 3)",
                  "-", f"shape {np.shape(vec)}")  # fmt: skip
        norm = np.linalg.norm(v, axis=-1, keepdims=True)
        if np.any(norm == 0):
            _fail(where, "directions", f"entry {label!r} must be non-zero", "-", vec)
        u = (v / norm)[idx]
        dirs[label] = u if frame == "N" else np.einsum("nij,nj->ni", geom["dcm_BN"], u)
    geom.update(ts=ts[idx], index=idx, panel_theta=panel_theta, wheel_theta=wheel_theta,
                directions=dirs, hub_size=size)  # fmt: skip
    return geom


# --------------------------------------------------------------------------------------------------
# Drawing and export


_AXIS_COLORS = ("tab:red", "tab:green", "tab:blue")
_AXIS_LENGTH = 0.8  # body axes, as a fraction of the scene extent
_DIRECTION_LENGTH = 1.0  # reference directions, as a fraction of the scene extent


def spacecraft_scene(geom: dict) -> list:
    """The engine's drawable primitives for the geometry of `spacecraft_frames`.

    **Arguments:** `geom`: the dict of `spacecraft_frames` (or of `spacecraft_geometry`, without
    `directions`).

    **Returns:** a list for `jaxsim.animation.animate_scene`, in drawing order: the hub box
    (`Polygons`, grey, the 6 faces of `HUB_FACES`), the panels (`Polygons`, blue; none when there
    are no panels), the body axes $\\hat b_{1,2,3}$ (`Ray`s at 0.8 of the extent, red, green, blue,
    labelled `b1`..`b3`), each wheel's rim and spoke (`Polyline`s, orange), and the reference
    directions (dashed `Ray`s at the full extent, labelled).
    """
    items = [Polygons(geom["hub"][:, np.asarray(HUB_FACES)], facecolor="0.6", edgecolor="0.25",
                      alpha=0.35)]  # fmt: skip
    if "panels" in geom and geom["panels"].shape[1]:
        items.append(Polygons(geom["panels"], facecolor="tab:blue", edgecolor="navy", alpha=0.75))
    for k, color in enumerate(_AXIS_COLORS):
        items.append(Ray(geom["axes"][:, k], length=_AXIS_LENGTH, label=f"b{k + 1}",
                         label_at=1.08, color=color, lw=2.0))  # fmt: skip
    for j in range(geom["wheel_center"].shape[1] if "wheel_center" in geom else 0):
        items.append(Polyline(geom["wheel_rim"][:, j], color="tab:orange", lw=1.2))
        items.append(Polyline(geom["wheel_spoke"][:, j], color="tab:orange", lw=2.0))
    for j, (label, u) in enumerate(geom.get("directions", {}).items()):
        items.append(Ray(u, length=_DIRECTION_LENGTH, label=label, label_at=1.05,
                         color=f"C{(j + 4) % 10}", lw=1.5, ls="--"))  # fmt: skip
    return items


def animate_spacecraft(
    sol,
    spacecraft,
    *,
    panels=None,
    wheels=None,
    every: int = 1,
    max_frames=None,
    fps: float = 20.0,
    hub_size=None,
    panel_size=None,
    wheel_radius=None,
    spin_scale: float = 1.0,
    directions=None,
    nadir: bool = False,
    frame: str = "N",
    time_unit: str = "s",
    figsize=(6.0, 6.0),
    elev: float = 25.0,
    azim: float = -60.0,
    title=None,
):
    r"""A 3-D matplotlib animation of the spacecraft from the saved frames of a run.

    Drawn at each kept frame: the hub box (grey), the body axes $\hat b_{1,2,3}$ (red, green, blue),
    each hinged panel as a flat rectangle (blue) rotated by its hinge angle about its hinge axis at its
    hinge point, each reaction wheel as a circle on its spin axis with a spoke showing its spin angle
    (orange), the optional inertial reference directions (dashed, labelled) and the time. The run is
    not touched: the frames are the samples `simulate` saved (so no integrator slow-down); choose
    their density with `sample_dt` / `ts` of the run and thin them with `every` / `max_frames`.
    The drawing is `jaxsim.animation.animate_scene` of `spacecraft_scene(spacecraft_frames(...))`.

    **Arguments:** `sol`, `spacecraft`, `panels`, `wheels`, `every`, `max_frames`, `hub_size`,
    `panel_size`, `wheel_radius`, `spin_scale`, `directions`, `nadir`, `frame`: as in
    `spacecraft_frames`; `fps`: frames per second of playback [1/s], > 0; `time_unit`: `"s"`,
    `"min"` or `"h"` for the time label; `figsize` [in]; `elev`, `azim`: view angles [deg];
    `title`: figure title (default: the spacecraft's name).

    **Returns:** a `matplotlib.animation.FuncAnimation` (show it in a notebook with
    `IPython.display.HTML(anim.to_jshtml())`, or write it with `save_animation`). Extra attributes:
    `anim.fig` (the Figure; `plt.close(anim.fig)` to avoid a duplicate static image in notebooks),
    `anim.fps`, and `anim.geometry` (the dict of `spacecraft_frames` that is drawn).
    """
    where = "animate_spacecraft"
    if not (
        isinstance(fps, (int, float, np.integer, np.floating)) and np.isfinite(fps) and fps > 0
    ):
        _fail(where, "fps", "must be a finite number > 0", "1/s", fps)
    if time_unit not in _TIME_UNITS:
        _fail(where, "time_unit", f"must be one of {sorted(_TIME_UNITS)}", "", repr(time_unit))
    geom = spacecraft_frames(
        sol, spacecraft, panels=panels, wheels=wheels, every=every, max_frames=max_frames,
        hub_size=hub_size, panel_size=panel_size, wheel_radius=wheel_radius,
        spin_scale=spin_scale, directions=directions, nadir=nadir, frame=frame,
    )  # fmt: skip
    anim = animate_scene(
        geom["ts"],
        spacecraft_scene(geom),
        fps=fps,
        time_unit=time_unit,
        axis_labels=tuple(f"{c}_{frame} [m]" for c in "xyz"),
        figsize=figsize,
        elev=elev,
        azim=azim,
        title=title if title is not None else getattr(spacecraft, "name", ""),
    )
    anim.geometry = geom
    return anim
