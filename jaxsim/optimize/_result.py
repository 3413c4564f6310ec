"""What every solver of `jaxsim.optimize` returns: one result type, one set of outcomes."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree


# Outcome codes, in this order (an integer array under `vmap`, so that a batch reports per member).
STATUS = ("converged", "infeasible", "iteration_limit", "failed")
CONVERGED, INFEASIBLE, ITERATION_LIMIT, FAILED = range(4)

_MESSAGES = {
    CONVERGED: "converged: constraints met to `tol` and the KKT conditions hold",
    INFEASIBLE: "infeasible: the solver stopped at a point that violates the constraints and "
    "cannot reduce the violation (locally infeasible problem)",
    ITERATION_LIMIT: "iteration limit reached before convergence",
    FAILED: "failed: the solver stopped for another reason (see `solver_message`)",
}


class OptimizeResult(eqx.Module):
    r"""The outcome of a solve (every solver of `jaxsim.optimize`).

    **Fields:**

    - `x`: the decision variables at the end, with the structure of `Problem.x0`.
    - `objective`: $J(x)$ there.
    - `violation`: the largest constraint violation, $\max(|c_{eq}|_\infty, \max(c_{in}, 0),
      \text{bound violation})$ (in the constraints' own units; 0 when there are none).
    - `status`: an index into `STATUS`: `converged`, `infeasible` (the solver reports the
      constraints locally unsatisfiable), `iteration_limit`, `failed` (any other stop).
    - `iterations`: solver iterations (major iterations; outer iterations for `solve_jax`).
    - `multipliers`: `{"equality": (m_eq,), "inequality": (m_in,)}`, in the convention
      $\nabla J + J_{eq}^T\lambda + J_{in}^T\mu = $ (bound terms), $\mu \ge 0$ for $c_{in} \le 0$.
    - `log`: per iteration, `{"objective": (k,), "violation": (k,)}` (and solver-specific rows;
      `solve_jax` pads unused rows with NaN).
    - `solver`: the solver's name; `solver_message`: its own words (host solvers).
    - `evaluations`: compiled evaluations of objective + constraints + Jacobians (host solvers;
      SciPy asks for values and Jacobians separately, the cache answers the second).
    """

    x: PyTree
    objective: Array
    violation: Array
    status: Array
    iterations: Array
    multipliers: dict
    log: dict
    solver: str = eqx.field(static=True)
    solver_message: str = eqx.field(static=True, default="")
    evaluations: int = eqx.field(static=True, default=-1)
    solve_time_s: float = eqx.field(static=True, default=float("nan"))

    @property
    def status_name(self):
        """The name of `status` (an array of names for a batch)."""
        s = np.asarray(self.status)
        if s.ndim == 0:
            return STATUS[int(s)]
        return np.array([STATUS[int(v)] for v in s.ravel()]).reshape(s.shape)

    @property
    def converged(self):
        """True where the solve converged."""
        return jnp.asarray(self.status) == CONVERGED

    @property
    def message(self) -> str:
        """A sentence per outcome (the first member's for a batch)."""
        s = int(np.asarray(self.status).ravel()[0])
        text = _MESSAGES[s]
        if self.solver_message:
            text += f" [{self.solver}: {self.solver_message}]"
        return text
