r"""Direct collocation: Hermite-Simpson transcription of any model's drift, the local error of a
solved mesh, mesh refinement and the warm start on the refined mesh.

**Transcription** (`collocate`). The horizon $[t_0, t_1]$ is cut into $K$ intervals at mesh
fractions $0 = \tau_0 < \dots < \tau_K = 1$ ($t_k = t_0 + \tau_k (t_1 - t_0)$, $h_k = t_{k+1} - t_k$).
The node states $s_1, \dots, s_K$ are decision variables ($s_0 = y_0$). On each interval the state is
the cubic through $s_k$, $s_{k+1}$ with slopes $f_k = f(t_k, s_k)$, $f_{k+1} = f(t_{k+1}, s_{k+1})$;
its midpoint value and the Simpson defect are (Hargraves & Paris, "Direct trajectory optimization
using nonlinear programming and collocation", J. Guidance 10(4), 1987; Betts, *Practical Methods
for Optimal Control and Estimation Using Nonlinear Programming*, 2nd ed., SIAM 2010, sec. 4.5,
"compressed" Hermite-Simpson):

$$y_{c,k} = \tfrac12 (s_k + s_{k+1}) + \tfrac{h_k}{8} (f_k - f_{k+1}), \qquad
\zeta_k = s_{k+1} - s_k - \tfrac{h_k}{6} \big(f_k + 4 f(t_k + \tfrac{h_k}{2}, y_{c,k}) + f_{k+1}\big).$$

$\zeta = 0$ are the equality constraints (a fourth-order method: local error $O(h^5)$). The drift
is the model's own (`model.drift(t, y, args)`: a spacecraft with all its effectors, a
`RunningCost`, a `System`), evaluated side by side for all intervals (`vmap`: three evaluations
per interval, one program whatever $K$). Each interval is declared as the step of the held
inputs (`PiecewiseConstant`, `SwitchingTimes`: the fixed-step rule of `jaxsim.signals`), so a
held control switching at the nodes gives each interval its own value at both ends, as `shoot`
does; continuous controls (`PiecewiseLinear`, `CubicSpline`) are read at the node and midpoint
times. Path constraints go on the node and midpoint states (`Collocated.ys`, `ys_mid`); `t0`,
`t1` may be decision variables (free final time); phases are one `collocate` per phase joined
by `linkage`. A model's step map (the MRP shadow-set switch) is not applied: the nodes are free
variables and any MRP set is a valid node.

**Local error and mesh refinement** (`mesh_errors`, `refine_mesh`, `resample`). The error of a
solved mesh on interval $k$ is the difference between $s_{k+1}$ and an accurate integration
from $s_k$ over the interval (32 RK4 substeps by default), scaled per state component
by $1 + \max_k |s_k|$ (Betts sec. 4.7.4 uses the same scaling on an integral of the residual).
An interval whose error exceeds the tolerance is split into
$\lceil (e_k / \mathrm{tol})^{1/5} \rceil$ equal parts (at most `max_split`): the local error of
a fourth-order method scales as $h^5$. `resample` evaluates the solved cubics on a new mesh: the
initial guess of the refined problem.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, PyTree

from .._model._dynamic_object import AbstractDynamicObject
from .._model._step_context import step_interval
from .._request._horizon import check_horizon
from .._simulate import simulate
from .._solvers._ode import RK4


_CALLER = "collocate"

# Order of the local error of Hermite-Simpson collocation (a fourth-order method): e ~ h^5.
_LOCAL_ORDER = 5


class Collocated(NamedTuple):
    """What `collocate` returns (leading axes: $K + 1$ nodes, $K$ intervals).

    - `ts`: node times [s], shape `(K + 1,)`; `ys`: node states (node 0 is `y0`, nodes 1..K the
      decision variables `nodes`).
    - `ts_mid`, `ys_mid`: interval midpoint times [s] and the interpolating cubics' values there.
    - `defects`: the flat Hermite-Simpson defects $\\zeta_k$ (interval-major): equality
      constraints.
    - `slopes`: `(start, end)`, the drift at each interval's start and end, leading axis $K$
      (the cubics' end slopes; `resample` reads them).
    """

    ts: Array
    ys: PyTree
    ts_mid: Array
    ys_mid: PyTree
    defects: Array
    slopes: tuple


def check_mesh(mesh, caller: str = _CALLER) -> np.ndarray:
    """Mesh fractions: a concrete 1-D array increasing strictly from 0 to 1 (at least 2 entries)."""
    if isinstance(mesh, jax.core.Tracer):
        raise ValueError(
            f"{caller}: `mesh` (fractions of the horizon, -) fixes the program's shapes and must "
            "be concrete; got a traced array. Trace the horizon (`t0`, `t1`) instead."
        )
    m = np.asarray(mesh, dtype=float)
    if m.ndim != 1 or m.size < 2:
        raise ValueError(
            f"{caller}: `mesh` (fractions of the horizon, -) must be a 1-D array of at least 2 "
            f"entries; got shape {m.shape}."
        )
    if not (np.all(np.isfinite(m)) and m[0] == 0.0 and m[-1] == 1.0 and np.all(np.diff(m) > 0)):
        raise ValueError(
            f"{caller}: `mesh` (fractions of the horizon, -) must increase strictly from 0.0 to "
            f"1.0; got {np.array2string(m, threshold=8)}."
        )
    return m


def _stacked(fn, model, ts, ys, t_lo, t_hi, args):
    """`model`'s drift at `(ts[k], ys[k])` for every k, each inside the held step `[t_lo[k], t_hi[k]]`."""

    def one(t, y, a, b):
        with step_interval(a, b):
            return fn(model, t, y, args)

    return jax.vmap(one)(ts, ys, t_lo, t_hi)


def _drift(model, t, y, args):
    # Through the class: an equinox module builds a bound-method module on each attribute access.
    return type(model).drift(model, t, y, args)


def _check_nodes(y0, nodes, K=None):
    want = jax.tree.structure(y0)
    if jax.tree.structure(nodes) != want:
        raise ValueError(
            f"{_CALLER}: `nodes` must have the structure of `y0` (one stacked state per node "
            f"1..K); got {jax.tree.structure(nodes)}, expected {want}."
        )
    counts = {jnp.shape(n)[0] if jnp.ndim(n) else None for n in jax.tree.leaves(nodes)}
    if K is None and len(counts) == 1:
        K = counts.pop()
    for (path, v), n in zip(
        jax.tree_util.tree_flatten_with_path(y0)[0], jax.tree.leaves(nodes), strict=True
    ):
        if K is None or jnp.shape(n) != (K,) + jnp.shape(v):
            raise ValueError(
                f"{_CALLER}: every leaf of `nodes` must have shape (K,) + its y0 shape, K the "
                f"number of intervals; leaf {jax.tree_util.keystr(path) or '(the array)'} has "
                f"shape {jnp.shape(n)} for y0 shape {jnp.shape(v)}"
                + (f" (K = {K} from the mesh)." if K is not None else ".")
            )
    return K


def collocate(
    model: AbstractDynamicObject,
    y0: PyTree,
    nodes: PyTree,
    t1: ArrayLike,
    *,
    t0: ArrayLike = 0.0,
    mesh: ArrayLike | None = None,
    args: PyTree = None,
) -> Collocated:
    r"""Hermite-Simpson collocation of `model` on $[t_0, t_1]$ (module docstring).

    **Arguments:**

    - `model`: any `AbstractDynamicObject` (its `drift(t, y, args)` is the dynamics).
    - `y0`: the state at $t_0$ (node 0; a decision variable too if you pass one).
    - `nodes`: the states at nodes $1..K$, a pytree like `y0` with a leading axis $K$ (decision
      variables; `resample` or a `shoot` gives an initial guess).
    - `t1`, `t0`: the horizon [s]; may be traced (free initial and final time).
    - `mesh`: the node times as fractions of the horizon, concrete, increasing from 0 to 1,
      $K + 1$ entries; None: $K$ equal intervals.
    - `args`: passed to the drift.

    Returns a `Collocated` (node and midpoint states, defects, slopes). Concrete `t0`, `t1` are
    checked as `simulate` checks them.
    """
    if not isinstance(model, AbstractDynamicObject):
        raise ValueError(
            f"{_CALLER}: `model` must be an AbstractDynamicObject; got {type(model).__name__}."
        )
    check_horizon(t0, t1, caller=_CALLER)
    y0 = jax.tree.map(lambda v: jnp.asarray(v, dtype=float), y0)
    if mesh is not None:
        tau = check_mesh(mesh)
        K = _check_nodes(y0, nodes, tau.size - 1)
    else:
        K = _check_nodes(y0, nodes)
        tau = np.linspace(0.0, 1.0, K + 1)
    nodes = jax.tree.map(lambda v: jnp.asarray(v, dtype=float), nodes)
    t0 = jnp.asarray(t0, dtype=float)
    span = jnp.asarray(t1, dtype=float) - t0
    ts = t0 + span * jnp.asarray(tau)
    ys = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), y0, nodes)
    t_lo, t_hi = ts[:-1], ts[1:]
    h = t_hi - t_lo
    start = jax.tree.map(lambda v: v[:-1], ys)
    end = jax.tree.map(lambda v: v[1:], ys)
    f_start = _stacked(_drift, model, t_lo, start, t_lo, t_hi, args)
    f_end = _stacked(_drift, model, t_hi, end, t_lo, t_hi, args)

    def scale(v, w):  # h_k * w, broadcast over a leaf's trailing axes
        return jnp.reshape(h * w, h.shape + (1,) * (jnp.ndim(v) - 1)) * v

    ys_mid = jax.tree.map(
        lambda a, b, fa, fb: 0.5 * (a + b) + scale(fa - fb, 0.125), start, end, f_start, f_end
    )
    ts_mid = t_lo + 0.5 * h
    f_mid = _stacked(_drift, model, ts_mid, ys_mid, t_lo, t_hi, args)
    zeta = jax.tree.map(
        lambda a, b, fa, fc, fb: b - a - scale(fa + 4.0 * fc + fb, 1.0 / 6.0),
        start, end, f_start, f_mid, f_end,
    )  # fmt: skip
    flat = [jnp.reshape(z, (K, -1)) for z in jax.tree.leaves(zeta)]
    defects = jnp.concatenate([jnp.zeros((K, 0))] + flat, axis=1).ravel()
    return Collocated(ts, ys, ts_mid, ys_mid, defects, (f_start, f_end))


def _component_scale(ys):
    # 1 + max over nodes of |y| per component (Betts' scaling of the local error).
    return jax.tree.map(lambda v: 1.0 + jnp.max(jnp.abs(v), axis=0), ys)


def mesh_errors(
    model: AbstractDynamicObject,
    col: Collocated,
    *,
    args: PyTree = None,
    substeps: int = 32,
    solver=None,
) -> Array:
    r"""The local error of each interval of a collocated (solved) trajectory, shape `(K,)`: the
    largest scaled difference between $s_{k+1}$ and a run from $s_k$ over the interval (module
    docstring). The run takes `substeps` fixed steps of `solver` (default `jaxsim.RK4()`): a
    fourth-order step's local error scales as $h^5$, so `substeps` = 32 steps are about
    $32^{-4} \approx 10^{-6}$ of one step over the interval, far below the collocation error
    they measure; held inputs read each substep's held value, as in a run. A failed run gives an
    infinite error for its interval."""
    if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
        raise ValueError(f"mesh_errors: `substeps` must be an int >= 1; got {substeps!r}.")
    solver = RK4() if solver is None else solver
    ts = col.ts
    K = ts.shape[0] - 1
    start = jax.tree.map(lambda v: v[:-1], col.ys)
    end = jax.tree.map(lambda v: v[1:], col.ys)

    def one(t_a, t_b, y):
        sol = simulate(
            model, y, t_b, t0=t_a, num_steps=substeps, solver=solver, args=args, outputs=False,
            throw=False,
        )  # fmt: skip
        return jax.tree.map(lambda v: v[-1], sol.ys), sol.ok

    y_run, ok = jax.vmap(one)(ts[:-1], ts[1:], start)
    scales = _component_scale(col.ys)
    diffs = jax.tree.map(
        lambda a, b, s: jnp.reshape(jnp.abs(a - b) / s, (K, -1)), y_run, end, scales
    )
    err = jnp.max(jnp.concatenate([jnp.zeros((K, 1))] + jax.tree.leaves(diffs), axis=1), axis=1)
    return jnp.where(ok, err, jnp.inf)


def refine_mesh(
    mesh: ArrayLike, errors: ArrayLike, tol: float, *, max_split: int = 4
) -> np.ndarray:
    r"""A refined mesh (fractions): every interval whose error (`mesh_errors`) exceeds `tol` split
    into $\min(\text{max\_split}, \lceil (e_k/\mathrm{tol})^{1/5} \rceil)$ equal parts (at least
    2); the others kept. Returns `mesh` itself (as an array) when every error is within `tol`."""
    m = check_mesh(mesh, "refine_mesh")
    e = np.asarray(errors, dtype=float)
    if e.shape != (m.size - 1,):
        raise ValueError(
            f"refine_mesh: `errors` must have one entry per interval, shape ({m.size - 1},); got "
            f"shape {e.shape}."
        )
    if not (isinstance(tol, int | float) and math.isfinite(tol) and tol > 0):
        raise ValueError(f"refine_mesh: `tol` (scaled error, -) must be a number > 0; got {tol!r}.")
    if isinstance(max_split, bool) or not isinstance(max_split, int) or max_split < 2:
        raise ValueError(f"refine_mesh: `max_split` must be an int >= 2; got {max_split!r}.")
    out = [0.0]
    for k in range(m.size - 1):
        n = 1
        if not e[k] <= tol:  # NaN and inf split as much as allowed
            ratio = e[k] / tol if np.isfinite(e[k]) else np.inf
            n = max_split if not np.isfinite(ratio) else int(np.ceil(ratio ** (1 / _LOCAL_ORDER)))
            n = min(max(n, 2), max_split)
        out.extend(m[k] + (m[k + 1] - m[k]) * np.arange(1, n + 1) / n)
    out = np.asarray(out)
    out[-1] = 1.0
    return out


def resample(col: Collocated, mesh: ArrayLike) -> PyTree:
    """The solved trajectory's states at the nodes 1..K' of another `mesh` (fractions of the same
    horizon): each interval's Hermite cubic (node states and end slopes) evaluated there. The
    `nodes` initial guess of the problem on the refined mesh."""
    tau = jnp.asarray(check_mesh(mesh, "resample"))
    ts = col.ts
    t_new = ts[0] + (ts[-1] - ts[0]) * tau[1:]
    K = ts.shape[0] - 1
    k = jnp.clip(jnp.searchsorted(ts, t_new, side="right") - 1, 0, K - 1)
    h = (ts[1:] - ts[:-1])[k]
    s = (t_new - ts[k]) / h
    # Cubic Hermite basis on [0, 1].
    h00 = 2 * s**3 - 3 * s**2 + 1
    h10 = s**3 - 2 * s**2 + s
    h01 = -2 * s**3 + 3 * s**2
    h11 = s**3 - s**2
    f_start, f_end = col.slopes

    def cubic(y, fa, fb):
        shape = k.shape + (1,) * (jnp.ndim(y) - 1)
        w = lambda c: jnp.reshape(c, shape)  # noqa: E731
        return w(h00) * y[k] + w(h10 * h) * fa[k] + w(h01) * y[k + 1] + w(h11 * h) * fb[k]

    return jax.tree.map(cubic, col.ys, f_start, f_end)
