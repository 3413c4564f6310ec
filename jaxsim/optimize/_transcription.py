r"""Transcription of a run into an optimization problem: free initial and final times, a running
cost as a quadrature state, single and multiple shooting, phase linkage.

**Free times.** Each shooting segment is a free-time run of `simulate` (traced `t0`/`t1`,
`num_steps=m`: $m$ fixed steps of $(t_1 - t_0)/m$; guide "Free final time and phases"), so the
horizon may be a decision variable, one compiled program serves every horizon, and the node
states are differentiable with respect to $t_0$ and $t_1$. Held inputs (`PiecewiseConstant`,
`SwitchingTimes`) read the physical step. Reference: Betts, *Practical Methods for Optimal
Control and Estimation Using Nonlinear Programming*, 2nd ed. (SIAM, 2010), sec. 4.1 (free final
time).

**Running cost.** $\int_{t_0}^{t_1} L(t, y)\,dt$ as an extra state $q$ with $\dot q = L$
(`RunningCost`), integrated by the same solver as the dynamics (Betts, sec. 4.2: the Bolza
problem rewritten as a Mayer problem).

**Shooting** (`shoot`). The horizon is cut into $K$ segments of $m$ steps each. Single shooting
chains them (`lax.scan`: one compiled segment); multiple shooting starts segment $k$ from a node
state $s_k$ (decision variables) and returns the defects $y_k(\tau = 1) - s_{k+1}$ as equality
constraints (Bock & Plitt, "A multiple shooting algorithm for direct solution of optimal control
problems", IFAC 1984); its segments run side by side (`vmap`). The states at the $K + 1$ segment
edges are the nodes where path constraints are imposed.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, PyTree

from .._model._dynamic_object import AbstractDynamicObject
from .._request._horizon import check_horizon
from .._simulate import simulate
from .._solvers._ode import RK4, AbstractSolver


class RunningCost(AbstractDynamicObject):
    r"""`model` with the quadrature state $q$, $\dot q = L(t, y, \text{args})$ (module docstring).

    **Arguments:** `model` (its state a dict, as a `Spacecraft`'s or a `System`'s), `integrand`
    `L(t, y, args) -> ()` (y: the model's own state), `key` (the entry of $q$ in the state,
    default `"running_cost"`; must not be a key of the model's state).

    The state is the model's dict plus `key`; `init_state(...)` starts $q$ at 0. A control that
    the integrand reads (e.g. the torque signal inside the model) should be read the way the
    model reads it (the same signal object, evaluated at `t`), so that the cost integrates the
    input the dynamics see.
    """

    model: AbstractDynamicObject
    integrand: object
    key: str

    def __init__(
        self,
        model: AbstractDynamicObject,
        integrand: Callable[[ArrayLike, PyTree, PyTree], ArrayLike],
        key: str = "running_cost",
    ) -> None:
        if not isinstance(model, AbstractDynamicObject):
            raise ValueError(
                f"RunningCost: `model` must be an AbstractDynamicObject; got {type(model)}."
            )
        if not callable(integrand):
            raise ValueError(f"RunningCost: `integrand` must be callable; got {integrand!r}.")
        self.model = model
        self.integrand = integrand
        self.key = str(key)

    @property
    def name(self) -> str:
        return self.model.name

    def _inner(self, y):
        if not isinstance(y, dict) or self.key not in y:
            raise ValueError(
                f"RunningCost: the state must be a dict with the entry `{self.key}` (build it "
                "with RunningCost.init_state)."
            )
        return {k: v for k, v in y.items() if k != self.key}

    def init_state(self, *args, **kwargs):
        y = self.model.init_state(*args, **kwargs)
        if not isinstance(y, dict) or self.key in y:
            raise ValueError(
                f"RunningCost: the model's state must be a dict without the key `{self.key}`."
            )
        return {**y, self.key: jnp.zeros(())}

    def drift(self, t, y, args):
        inner = self._inner(y)
        f = self.model.drift(t, inner, args)
        rate = self.integrand(t, inner, args)
        if jnp.shape(rate) != () or not jnp.issubdtype(jnp.result_type(rate), jnp.number):
            raise ValueError(
                f"RunningCost: `integrand` must return a real scalar (the cost rate L(t, y, args) "
                f"of `{self.key}`); got shape {jnp.shape(rate)}, dtype {jnp.result_type(rate)}."
            )
        if jnp.issubdtype(jnp.result_type(rate), jnp.complexfloating):
            raise ValueError(
                f"RunningCost: `integrand` must return a real scalar; got {jnp.result_type(rate)}."
            )
        return {**f, self.key: jnp.asarray(rate, dtype=float)}

    def step_map(self, t, y):
        inner, counts = self.model.step_map(t, self._inner(y))
        return {**inner, self.key: y[self.key]}, counts

    def outputs(self, t, y, args):
        return self.model.outputs(t, self._inner(y), args)

    def energy_momentum(self, t, y, args):
        return self.model.energy_momentum(t, self._inner(y), args)

    def derived(self, t, y, args):
        return self.model.derived(t, self._inner(y), args)

    def breakpoints(self):
        return self.model.breakpoints()

    def command_spec(self):
        return self.model.command_spec()

    @property
    def reads_only_commands(self) -> bool:
        return self.model.reads_only_commands


class Shot(NamedTuple):
    """What `shoot` returns.

    - `ts`: physical times of the $K + 1$ nodes (segment edges) [s].
    - `ys`: the states there (the model's state pytree, leading axis $K + 1$): node 0 is `y0`,
      node $K$ the end of the last segment; for multiple shooting nodes 1..K-1 are the decision
      variables `nodes` (equal to the segment ends once the defects vanish).
    - `defects`: flat vector of $y_k(\\text{end}) - s_{k+1}$ (multiple shooting; empty for
      single shooting): equality constraints.
    """

    ts: Array
    ys: PyTree
    defects: Array


def _check_count(name, value):
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise ValueError(f"shoot: `{name}` must be a positive integer; got {value!r}.")
    return int(value)


def shoot(
    model: AbstractDynamicObject,
    y0: PyTree,
    t1: ArrayLike,
    *,
    t0: ArrayLike = 0.0,
    num_segments: int = 1,
    steps_per_segment: int,
    nodes: PyTree | None = None,
    args: PyTree = None,
    segment_args: PyTree | None = None,
    solver: object | None = None,
) -> Shot:
    r"""Run `model` from `y0` over $[t_0, t_1]$ in `num_segments` segments of `steps_per_segment`
    fixed steps each (module docstring), returning the states at the segment edges.

    **Arguments:**

    - `t0`, `t1`: the horizon [s]; may be traced (free initial and final time: each segment is a
      free-time `simulate(..., num_steps=steps_per_segment)`, so the compiled program does not
      depend on them).
    - `nodes`: None (single shooting) or the states at the starts of segments 1..K-1, a pytree
      like `y0` with a leading axis of `num_segments - 1` (multiple shooting; decision variables).
    - `args`: passed to the model's drift; `solver`: a fixed-step solver (default `jaxsim.RK4()`;
      an adaptive one is refused: the segments take `steps_per_segment` fixed steps).
    - `segment_args`: per-segment data instead of `args`, a pytree whose leaves have a leading axis
      of `num_segments`: segment $k$'s drift gets the slice $k$ (e.g. the control held over the
      segment, `{"thrust": u}` with `u` of shape `(K,)`). A drift step then reads one segment's
      values, where a `PiecewiseConstant` over the whole horizon weighs all $K$ of them at every
      stage: the cost of a step, and of its derivatives, does not grow with $K$ (the Hessian of
      a $K$-interval problem: $O(K^2)$ instead of $O(K^3)$).

    Concrete `t0`, `t1` are checked as `simulate` checks them (finite scalars, `t1 > t0`); traced
    ones out of order give NaN states (each segment's run fails with `invalid_times`).

    Returns a `Shot` (`ts`, `ys` with leading axis $K + 1$, `defects`).
    """
    K = _check_count("num_segments", num_segments)
    m = _check_count("steps_per_segment", steps_per_segment)
    # simulate's concrete-time checks (the segments' own times are traced: checked in the run).
    check_horizon(t0, t1, caller="shoot")
    solver = RK4() if solver is None else solver
    # jaxsim's adaptive pairs are adaptive by class (diffrax's run at the given steps; anything
    # else is named by simulate's solver check).
    if isinstance(solver, AbstractSolver) and solver.adaptive:
        raise ValueError(
            f"shoot: `solver` must be a fixed-step solver (each segment takes `steps_per_segment` "
            f"steps of (t1 - t0) / (num_segments * steps_per_segment)); got {type(solver).__name__}"
            ", an adaptive solver. Use js.RK4(), js.RK2() or js.Euler() (or a diffrax solver "
            "run at fixed steps), or simulate/phases for adaptive steps."
        )
    if segment_args is not None:
        if args is not None:
            raise ValueError(
                "shoot: give `args` (every segment) or `segment_args` (one slice per segment), "
                "not both; put shared data in every slice of `segment_args`."
            )
        leaves = jax.tree_util.tree_flatten_with_path(segment_args)[0]
        for path, leaf in leaves:
            if jnp.ndim(leaf) < 1 or jnp.shape(leaf)[0] != K:
                raise ValueError(
                    f"shoot: every leaf of `segment_args` must have a leading axis of "
                    f"num_segments = {K}; leaf {jax.tree_util.keystr(path) or '(the array)'} has "
                    f"shape {jnp.shape(leaf)}."
                )
    t0 = jnp.asarray(t0, dtype=float)
    h = (jnp.asarray(t1, dtype=float) - t0) / K
    y0 = jax.tree.map(lambda v: jnp.asarray(v, dtype=float), y0)
    edges = t0 + h * jnp.arange(K + 1)

    def segment(k, y_start, args_k):
        # simulate's free-time run: traced t0/t1, m steps of (t1 - t0)/m (guide "Free final
        # time and phases"); held inputs read the physical step, one program for every horizon.
        t_start = t0 + h * k
        sol = simulate(
            model, y_start, t_start + h, t0=t_start, num_steps=m, solver=solver, args=args_k,
            outputs=False, throw=False,
        )  # fmt: skip
        return jax.tree.map(lambda v: v[-1], sol.ys)

    # One slice of `segment_args` per segment (scanned or vmapped with k), or `args` for all.
    per_segment = (jnp.arange(K),) if segment_args is None else (jnp.arange(K), segment_args)

    def segment_of(y_start, ks):
        return segment(ks[0], y_start, args if segment_args is None else ks[1])

    if nodes is None:

        def body(y, ks):
            y_next = segment_of(y, ks)
            return y_next, y_next

        _, ends = jax.lax.scan(body, y0, per_segment)
        ys = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), y0, ends)
        return Shot(edges, ys, jnp.zeros((0,)))

    want = jax.tree.structure(y0)
    if jax.tree.structure(nodes) != want:
        raise ValueError(
            "shoot: `nodes` must have the structure of `y0` (one stacked state per interior "
            f"node); got {jax.tree.structure(nodes)}, expected {want}."
        )
    for v, n in zip(jax.tree.leaves(y0), jax.tree.leaves(nodes), strict=True):
        if jnp.shape(n) != (K - 1,) + jnp.shape(v):
            raise ValueError(
                f"shoot: every leaf of `nodes` must have shape (num_segments - 1,) + its y0 shape "
                f"= {(K - 1,) + jnp.shape(v)}; got {jnp.shape(n)}."
            )
    starts = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), y0, nodes)
    ends = jax.vmap(segment_of)(starts, per_segment)
    defects = jax.tree.map(lambda e, s: (e[:-1] - s).ravel(), ends, nodes)
    defects = jnp.concatenate([jnp.zeros((0,))] + jax.tree.leaves(defects))
    last = jax.tree.map(lambda e: e[-1:], ends)
    ys = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), starts, last)
    return Shot(edges, ys, defects)


def interior_nodes(shot: Shot) -> PyTree:
    """The states at nodes 1..K-1 of a (single-shooting) `Shot`: an initial guess of `nodes` for
    multiple shooting."""
    return jax.tree.map(lambda v: v[1:-1], shot.ys)


def linkage(
    y_end: PyTree, y_start: PyTree, jump: Callable[[PyTree], PyTree] | None = None
) -> Array:
    r"""Phase linkage constraint $\phi(y_a(t_{end})) - y_b(t_{start})$ as a flat vector (= 0):
    state continuity between two phases (`jump` None) or a jump $\phi$ (e.g. an impulsive
    $\Delta v$, a mass drop at staging) given as `jump(y_end) -> y`."""
    y = y_end if jump is None else jump(y_end)
    name = "y_end" if jump is None else "jump(y_end)"
    if jax.tree.structure(y) != jax.tree.structure(y_start):
        raise ValueError(
            f"linkage: `{name}` and `y_start` must have the same pytree structure; got "
            f"{jax.tree.structure(y)} and {jax.tree.structure(y_start)}."
        )
    for (path, a), b in zip(
        jax.tree_util.tree_flatten_with_path(y)[0], jax.tree.leaves(y_start), strict=True
    ):
        if jnp.shape(a) != jnp.shape(b):
            raise ValueError(
                f"linkage: `{name}` and `y_start` must have the same shape at every leaf (no "
                f"broadcasting); leaf {jax.tree_util.keystr(path) or '(the array itself)'} has "
                f"shapes {jnp.shape(a)} and {jnp.shape(b)}."
            )
    diff = jax.tree.map(lambda a, b: jnp.ravel(jnp.asarray(a) - jnp.asarray(b)), y, y_start)
    return jnp.concatenate([jnp.zeros((0,))] + jax.tree.leaves(diff))
