r"""A nonlinear program over pytrees: objective, bounds, equality and inequality constraints.

$$\min_x J(x, a)\quad\text{s.t.}\quad c_{eq}(x, a) = 0,\quad c_{in}(x, a) \le 0,\quad
x_l \le x \le x_u,$$

with $x$ any pytree of arrays (the decision variables) and $a$ any pytree of arrays (`args`: data
that changes between solves without recompiling, e.g. a horizon, a target). The solvers see the
flat vector of $x$ (`jax.flatten_util.ravel_pytree`).

Three compiled programs serve a host solver, each called at most once per point:

- `Problem.forward(z, args)`: the stacked vector $F = [J, c_{eq}, c_{in}]$ (a line search's trial
  points need values only);
- `Problem.evaluate(z, args)`: $F$ and its Jacobian $\partial F/\partial x$, by reverse mode
  (`jax.jacrev`, one backward pass per row) when $F$ has at most a quarter as many rows as $x$ has
  entries (a reverse pass costs several forward-mode columns), else by forward mode
  (`jax.jacfwd`, one tangent per entry, all in one pass);
- `Problem.hessian(z, args, w)`: $F$, $\partial F/\partial x$ and the Hessian of the Lagrangian
  $\nabla^2_{xx} (w^T F)$ ($w = [\sigma, \lambda, \mu]$: the objective's factor and the
  multipliers) in one program, by forward over reverse mode (`jax.jacfwd` of the gradient of
  $w^T F$ and of $F$ together: one reverse pass carrying one tangent per variable; the Jacobian
  comes with it). Its result is symmetric (the mean of it and its transpose: round-off of the
  two mixed-derivative orders).

A model that can be differentiated in reverse mode only (an adaptive phase of
`jaxsim.phases`, whose default adjoint is reverse mode only) has no forward-mode Jacobian and no
Hessian: `jacobian="auto"` then takes reverse mode, and the solvers' `hessian="auto"` falls back
to a quasi-Newton Hessian. Reference: Nocedal & Wright, *Numerical Optimization*, 2nd ed.
(Springer, 2006), ch. 12 (the KKT conditions) and sec. 8.4 (second derivatives by forward over
reverse mode; Griewank & Walther, *Evaluating Derivatives*, 2nd ed., SIAM, 2008, ch. 5).
"""

import time
from collections.abc import Callable

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, PyTree

from .._compilation._jit import jit as _jit
from .._model._validation import is_concrete
from ._result import constraint_violation


_CLS = "Problem"
# Cost of one reverse-mode row relative to one forward-mode column, for jacobian="auto".
_REV_COST = 4


def forward_mode_refused(err: BaseException) -> bool:
    """Whether `err` is JAX's (or `simulate`'s) refusal of forward-mode differentiation through a
    reverse-mode-only computation (a `custom_vjp`: the default adjoint of an adaptive run)."""
    text = str(err)
    return isinstance(err, TypeError) and (
        "forward-mode differentiation" in text or "forward-mode autodiff" in text
    )


def _as_vector(value, what):
    v = jnp.asarray(value, dtype=float)
    return jnp.reshape(v, (-1,)) if v.ndim != 1 else v


def _leaf_name(name: str, path) -> str:
    key = jax.tree_util.keystr(path)
    return f"`{name}` leaf {key}" if key else f"`{name}`"


def decision_vector(caller: str, name: str, x, like=None):
    """The flat float64 vector of the decision variables `x` (a pytree of real arrays): the one
    check of every solver entry (`Problem`, `solve_scipy`, `solve_ipopt`, `solve_jax`).

    Refused, naming `caller`, `name` and the leaf: no leaves; with `like` (the problem's `x0`)
    another pytree structure or another leaf shape (never reinterpreted through a flat vector of
    the same size); leaves that are not real numbers (complex ones are not cast to real: the
    solvers minimize over real variables); non-finite entries when concrete (traced ones, under
    `jit`/`vmap`, fail the solve instead: `status` `failed`)."""
    leaves = jax.tree_util.tree_flatten_with_path(x)[0]
    if not leaves:
        raise ValueError(f"{caller}: `{name}` has no decision variables; got {x!r}.")
    if like is not None:
        got, want = jax.tree.structure(x), jax.tree.structure(like)
        if got != want:
            raise ValueError(
                f"{caller}: `{name}` must have the pytree structure of the problem's `x0`, "
                f"{want}; got {got}."
            )
    for (path, leaf), ref in zip(
        leaves, [None] * len(leaves) if like is None else jax.tree.leaves(like), strict=True
    ):
        where = _leaf_name(name, path)
        try:
            dtype = jnp.result_type(leaf)
        except TypeError:
            raise ValueError(f"{caller}: {where} must be real numbers; got {leaf!r}.") from None
        if jnp.issubdtype(dtype, jnp.complexfloating):
            raise ValueError(
                f"{caller}: {where} must be real; got {dtype} (complex values are not cast to "
                "real: give the real and imaginary parts as two real variables)."
            )
        if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
            raise ValueError(f"{caller}: {where} must be real numbers; got dtype {dtype}.")
        if ref is not None and jnp.shape(leaf) != jnp.shape(ref):
            raise ValueError(
                f"{caller}: {where} must have the shape of the problem's `x0` there, "
                f"{jnp.shape(ref)}; got {jnp.shape(leaf)}."
            )
        if is_concrete(leaf):
            arr = np.asarray(leaf, dtype=float)
            if not np.all(np.isfinite(arr)):
                bad = np.argwhere(~np.isfinite(np.atleast_1d(arr))).ravel().tolist()
                raise ValueError(
                    f"{caller}: {where} must be finite; got {arr.tolist()} (non-finite at {bad})."
                )
    x = jax.tree.map(lambda v: jnp.asarray(v, dtype=float), x)
    return jax.flatten_util.ravel_pytree(x)[0]


def check_number(caller: str, name: str, value, rule: str, unit: str = "-") -> float:
    """A solver option: a concrete real scalar, finite and `rule` (`">= 0"`, `"> 0"`)."""
    try:
        v = float(np.asarray(value, dtype=float).item())
    except (TypeError, ValueError, jax.errors.ConcretizationTypeError) as err:
        raise ValueError(
            f"{caller}: `{name}` [{unit}] must be a real number; got {value!r}."
        ) from err
    ok = v >= 0 if rule == ">= 0" else v > 0
    if isinstance(value, bool) or not (np.isfinite(v) and ok):
        raise ValueError(f"{caller}: `{name}` [{unit}] must be finite and {rule}; got {value!r}.")
    return v


def check_count(caller: str, name: str, value) -> int:
    """An iteration count: a Python/NumPy integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{caller}: `{name}` must be an integer >= 1; got {value!r}.")
    return int(value)


def _real_output(name: str, value):
    """`value` (an output of the user's functions) when real; complex ones are refused."""
    if value is not None and jnp.issubdtype(jnp.result_type(value), jnp.complexfloating):
        raise ValueError(
            f"{_CLS}: `{name}` must return real values; got {jnp.result_type(value)} (a complex "
            "cost or constraint is not cast to real: return its real part, or its modulus, "
            "explicitly)."
        )
    return value


def _flat_bound(name, bound, x0, fill):
    """A bound given as None, a scalar or a pytree shaped like `x0`, as a flat numpy vector."""
    flat0, _ = jax.flatten_util.ravel_pytree(x0)
    if bound is None:
        return np.full(flat0.shape, fill)
    if np.ndim(bound) == 0 and not isinstance(bound, (dict, list, tuple)):
        return np.full(flat0.shape, float(bound))
    try:
        leaves = jax.tree.map(
            lambda b, x: np.broadcast_to(np.asarray(b, float), np.shape(x)), bound, x0
        )
    except (ValueError, TypeError) as err:
        raise ValueError(
            f"{_CLS}: `{name}` must be None, a scalar or a pytree with the structure of `x0` "
            f"whose leaves broadcast to x0's; got {bound!r} ({err})."
        ) from None
    flat, _ = jax.flatten_util.ravel_pytree(leaves)
    return np.asarray(flat, float)


class Problem:
    r"""A nonlinear program (module docstring).

    **Arguments:**

    - `objective`: `objective(x, args) -> ()` the scalar cost $J$ to minimize.
    - `x0`: the initial guess, a pytree of float arrays (its structure is that of $x$).
    - `lower`, `upper`: bounds on $x$: None (unbounded), a scalar, or a pytree like `x0` (leaves
      broadcast; `-inf`/`inf` for unbounded entries).
    - `equality`: `equality(x, args) -> (m_eq,)` constraints $c_{eq} = 0$ (any shape, flattened),
      or None.
    - `inequality`: `inequality(x, args) -> (m_in,)` constraints $c_{in} \le 0$, or None.
    - `args`: default data for the functions (a pytree of arrays; a solver's `args=` replaces it
      without recompiling when its structure and shapes stay the same).
    - `jacobian`: `"auto"` (reverse mode when $4(1 + m_{eq} + m_{in}) \le$ the number of
      variables, else forward mode; reverse mode also when the functions refuse forward mode,
      as a run with an adaptive phase does), `"rev"` or `"fwd"` (refused at the first
      evaluation, naming `jacobian="rev"`, when the functions refuse forward mode).

    Construction traces the functions once (`jax.eval_shape`) to learn the constraint sizes;
    nothing is compiled until the first evaluation. `compile_count` counts the traces of the
    compiled evaluations (one per program and distinct argument structure): it stays the same
    across the iterations of a solve and across solves whose `args` change only in value.
    `jacobian_mode` is the mode in use (`"rev"` or `"fwd"`; `"auto"` resolved).
    """

    def __init__(
        self,
        objective: Callable[[PyTree, PyTree], ArrayLike],
        x0: PyTree,
        *,
        lower: PyTree | float | None = None,
        upper: PyTree | float | None = None,
        equality: Callable[[PyTree, PyTree], ArrayLike] | None = None,
        inequality: Callable[[PyTree, PyTree], ArrayLike] | None = None,
        args: PyTree = None,
        jacobian: str = "auto",
        _functions: Callable | None = None,
    ) -> None:
        self._functions = _functions
        if not callable(objective):
            raise ValueError(f"{_CLS}: `objective` must be callable; got {objective!r}.")
        for name, fn in (("equality", equality), ("inequality", inequality)):
            if fn is not None and not callable(fn):
                raise ValueError(f"{_CLS}: `{name}` must be callable or None; got {fn!r}.")
        if jacobian not in ("auto", "fwd", "rev"):
            raise ValueError(
                f"{_CLS}: `jacobian` must be 'auto', 'fwd' or 'rev'; got {jacobian!r}."
            )
        decision_vector(_CLS, "x0", x0)
        x0 = jax.tree.map(lambda v: jnp.asarray(v, dtype=float), x0)
        flat0, self.unravel = jax.flatten_util.ravel_pytree(x0)
        self.x0 = x0
        self.z0 = np.asarray(flat0, float)
        self.lower = _flat_bound("lower", lower, x0, -np.inf)
        self.upper = _flat_bound("upper", upper, x0, np.inf)
        bad = np.nonzero(~(self.lower <= self.upper))[0]
        if bad.size:
            raise ValueError(
                f"{_CLS}: `lower` must be <= `upper` entrywise; entries {bad.tolist()} have "
                f"lower {self.lower[bad].tolist()} > upper {self.upper[bad].tolist()}."
            )
        self._objective = objective
        self._equality = equality
        self._inequality = inequality
        self.args = args
        self.trace_counts = {
            "evaluate": 0, "objective_and_gradient": 0, "forward": 0, "hessian": 0,
        }  # fmt: skip
        shapes = jax.eval_shape(self._split, flat0, args)
        if shapes[0].shape != ():
            raise ValueError(
                f"{_CLS}: `objective` must return a scalar; got shape {shapes[0].shape}."
            )
        self.num_variables = int(flat0.size)
        self.num_equality = int(shapes[1].shape[0])
        self.num_inequality = int(shapes[2].shape[0])
        rows = 1 + self.num_equality + self.num_inequality
        # "auto" resolved here; forward mode chosen by "auto" falls back to reverse mode where
        # the functions refuse it (`_evaluate`), an explicit "fwd" is refused there by name.
        self._auto = jacobian == "auto"
        if jacobian == "auto":
            # A reverse pass (with its tape) costs several forward-mode columns: measured on the
            # orbit transfer (44 rows, 82 variables), jacfwd 8 ms, jacrev 24 ms (forward 0.66).
            jacobian = "rev" if _REV_COST * rows <= self.num_variables else "fwd"
        self.jacobian_mode = jacobian
        self.evaluate = _jit(self._evaluate)
        self.objective_and_gradient = _jit(self._objective_and_gradient)
        self.forward = _jit(self._forward)
        self.hessian = _jit(self._hessian)
        # Set by the host solvers after the Hessian's first successful trace (its compile then
        # no longer runs before each solve).
        self._hessian_compiled = False

    # -- the functions on the flat vector ------------------------------------------------------

    @classmethod
    def combined(
        cls, functions: Callable[[PyTree, PyTree], tuple], x0: PyTree, **kwargs
    ) -> "Problem":
        r"""A problem whose objective and constraints come from one function,
        `functions(x, args) -> (J, c_eq, c_in)` (`c_eq`/`c_in` None when absent), so that one
        simulation serves all three (the usual case: the objective and the constraints read the
        same trajectory). Other arguments as for `Problem` (without `equality`/`inequality`)."""
        if not callable(functions):
            raise ValueError(f"{_CLS}.combined: `functions` must be callable; got {functions!r}.")
        for name in ("equality", "inequality"):
            if name in kwargs:
                raise ValueError(
                    f"{_CLS}.combined: `{name}` comes from `functions`; do not pass it."
                )

        def objective(x, args):
            return functions(x, args)[0]

        problem = cls(objective, x0, _functions=functions, **kwargs)
        return problem

    def _split(self, z, args):
        x = self.unravel(z)
        empty = jnp.zeros((0,))
        if self._functions is not None:
            out = self._functions(x, args)
            if not (isinstance(out, tuple | list) and len(out) == 3):
                got = (
                    f"a {type(out).__name__} of {len(out)}"
                    if isinstance(out, tuple | list)
                    else (type(out).__name__)
                )
                raise ValueError(
                    f"{_CLS}.combined: `functions` must return a tuple (J, c_eq, c_in) (c_eq or "
                    f"c_in None when absent); got {got}."
                )
            f, ceq, cin = (
                _real_output(n, v)
                for n, v in zip(
                    ("functions()[0] (J)", "functions()[1] (c_eq)", "functions()[2] (c_in)"),
                    out,
                    strict=True,
                )
            )
            f = jnp.asarray(f, dtype=float)
            ceq = empty if ceq is None else _as_vector(ceq, "eq")
            cin = empty if cin is None else _as_vector(cin, "in")
            return f, ceq, cin
        f = jnp.asarray(_real_output("objective", self._objective(x, args)), dtype=float)
        ceq = empty if self._equality is None else self._equality(x, args)
        cin = empty if self._inequality is None else self._inequality(x, args)
        ceq = _as_vector(_real_output("equality", ceq), "eq")
        cin = _as_vector(_real_output("inequality", cin), "in")
        return f, ceq, cin

    def values(self, z, args):
        r"""$F = [J, c_{eq}, c_{in}]$ at the flat vector `z` (traceable; not compiled by itself)."""
        f, ceq, cin = self._split(z, args)
        return jnp.concatenate([jnp.reshape(f, (1,)), ceq, cin])

    def _evaluate(self, z, args):
        self.trace_counts["evaluate"] += 1

        def pair(v):
            F = self.values(v, args)
            return F, F

        if self.jacobian_mode == "rev":
            J, F = jax.jacrev(pair, has_aux=True)(z)
            return F, J
        try:
            J, F = jax.jacfwd(pair, has_aux=True)(z)
        except TypeError as err:
            if not forward_mode_refused(err):
                raise
            if not self._auto:
                raise ValueError(
                    f"{_CLS}: `jacobian='fwd'` needs forward-mode derivatives, which these "
                    "functions refuse (a run with an adaptive phase or another reverse-mode-only "
                    "adjoint); use `jacobian='rev'` (or 'auto', which picks it)."
                ) from err
            # jacobian="auto": the functions are reverse mode only; this trace and every later
            # one use reverse mode.
            self.jacobian_mode = "rev"
            J, F = jax.jacrev(pair, has_aux=True)(z)
        return F, J

    def _hessian(self, z, args, w):
        self.trace_counts["hessian"] += 1

        def gradient_and_values(v):
            F, pullback = jax.vjp(lambda u: self.values(u, args), v)
            (g,) = pullback(w)
            return (F, g), F

        try:
            (J, H), F = jax.jacfwd(gradient_and_values, has_aux=True)(z)
        except TypeError as err:
            if not forward_mode_refused(err):
                raise
            raise ValueError(
                f"{_CLS}: the exact Hessian (forward over reverse mode) needs forward-mode "
                "derivatives, which these functions refuse (a run with an adaptive phase or "
                "another reverse-mode-only adjoint); solve with a quasi-Newton Hessian: "
                "`hessian='limited-memory'` (solve_ipopt) or `hessian='bfgs'` (solve_scipy), or "
                "'auto', which falls back to it."
            ) from err
        return F, J, 0.5 * (H + H.T)

    def _objective_and_gradient(self, z, args):
        self.trace_counts["objective_and_gradient"] += 1
        return jax.value_and_grad(lambda v: self._split(v, args)[0])(z)

    def _forward(self, z, args):
        self.trace_counts["forward"] += 1
        return self.values(z, args)

    @property
    def compile_count(self) -> int:
        """Traces of the compiled evaluations so far (all three entry points together)."""
        return sum(self.trace_counts.values())

    def split(self, F):
        """`(objective, c_eq, c_in)` from a stacked `F` (or the rows of its Jacobian)."""
        a, b = 1, 1 + self.num_equality
        return F[0], F[a:b], F[b:]

    def violation(self, z, F) -> float:
        """Largest violation of constraints and bounds at `z` with values `F` (host numbers; NaN
        when a constraint or `z` is NaN: `constraint_violation`)."""
        _, ceq, cin = self.split(np.asarray(F))
        return float(constraint_violation(ceq, cin, z, self.lower, self.upper))

    def x(self, z):
        """The pytree of decision variables of the flat vector `z`."""
        return self.unravel(jnp.asarray(z, dtype=float))

    def flat(self, x, caller: str = "Problem.flat", name: str = "x") -> np.ndarray:
        """The flat vector of a pytree `x` with the structure and shapes of `x0` (checked:
        `decision_vector`)."""
        return np.asarray(decision_vector(caller, name, x, self.x0), float)


class HostEvaluator:
    """A problem's compiled programs for a host solver: numpy in, numpy out, each point computed
    once (module docstring).

    The last point's values, values with Jacobian, and Hessian (with its weights) are kept, so a
    solver asking for the objective, its gradient, the constraints, their Jacobians and the
    Hessian of the Lagrangian in separate callbacks at one point gets each from one compiled call;
    a point whose values only are asked (a line search's trial) runs `Problem.forward` only, and
    a Jacobian or Hessian asked later at that point runs the larger program once.

    Counts of the compiled calls: `count` (values with Jacobian: `Problem.evaluate`),
    `value_count` (values only: `Problem.forward`), `hessian_count` (`Problem.hessian`, which
    gives the values and Jacobian too); `seconds` in all of them.
    """

    def __init__(self, problem: Problem, args: PyTree) -> None:
        self.problem = problem
        self.args = args
        self.count = 0
        self.value_count = 0
        self.hessian_count = 0
        self.seconds = 0.0
        self._z = None  # the point of _F and _J
        self._F = None
        self._J = None
        self._vz = None  # the point of _vF (values only)
        self._vF = None
        self._hkey = None  # (point, weights) of _H
        self._H = None
        # Whether an evaluation since the solver's last accepted iterate (`accept`) was not
        # finite: a stop right after one is a stop against a region where the problem fails.
        self.met_nonfinite = False

    def accept(self):
        """The solver accepted an iterate (its per-iteration callback): start a new iteration."""
        self.met_nonfinite = False

    def _note(self, *arrays):
        if not all(np.all(np.isfinite(a)) for a in arrays):
            self.met_nonfinite = True

    def _at(self, z, point):
        return point is not None and np.array_equal(z, point)

    def __call__(self, z):
        """`(F, J)` at `z`: values and Jacobian (`Problem.evaluate`, once per point)."""
        z = np.asarray(z, dtype=float)
        if not self._at(z, self._z):
            start = time.perf_counter()
            F, J = self.problem.evaluate(jnp.asarray(z), self.args)
            self._F, self._J = np.asarray(F), np.asarray(J)
            self.seconds += time.perf_counter() - start
            self._z = z.copy()
            self.count += 1
            self._note(self._F, self._J)
        return self._F, self._J

    def values(self, z):
        """`F` at `z`: from the point's Jacobian evaluation when there was one, else
        `Problem.forward` (once per point)."""
        z = np.asarray(z, dtype=float)
        if self._at(z, self._z):
            return self._F
        if not self._at(z, self._vz):
            start = time.perf_counter()
            self._vF = np.asarray(self.problem.forward(jnp.asarray(z), self.args))
            self.seconds += time.perf_counter() - start
            self._vz = z.copy()
            self.value_count += 1
            self._note(self._vF)
        return self._vF

    def hessian(self, z, weights):
        r"""$\nabla^2_{xx}(w^T F)$ at `z` for the weights `w` (`Problem.hessian`, once per point
        and weights; its values and Jacobian are kept for the point)."""
        z = np.asarray(z, dtype=float)
        w = np.asarray(weights, dtype=float)
        key = self._hkey
        if key is None or not (np.array_equal(z, key[0]) and np.array_equal(w, key[1])):
            start = time.perf_counter()
            F, J, H = self.problem.hessian(jnp.asarray(z), self.args, jnp.asarray(w))
            self._H = np.asarray(H)
            if not self._at(z, self._z):
                self._F, self._J, self._z = np.asarray(F), np.asarray(J), z.copy()
            self.seconds += time.perf_counter() - start
            self._hkey = (z.copy(), w.copy())
            self.hessian_count += 1
            self._note(self._H)
        return self._H

    def objective(self, z):
        return float(self.values(z)[0])

    def gradient(self, z):
        return self(z)[1][0].copy()

    def equality(self, z):
        return self.values(z)[1 : 1 + self.problem.num_equality].copy()

    def equality_jacobian(self, z):
        _, J = self(z)
        return J[1 : 1 + self.problem.num_equality].copy()

    def inequality(self, z):
        return self.values(z)[1 + self.problem.num_equality :].copy()

    def inequality_jacobian(self, z):
        _, J = self(z)
        return J[1 + self.problem.num_equality :].copy()
