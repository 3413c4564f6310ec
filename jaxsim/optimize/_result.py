"""What every solver of `jaxsim.optimize` returns: one result type, one set of outcomes."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree


# Outcome codes, in this order (an integer array under `vmap`, so that a batch reports per member).
STATUS = ("converged", "infeasible", "iteration_limit", "failed")
CONVERGED, INFEASIBLE, ITERATION_LIMIT, FAILED = range(4)


def constraint_violation(ceq, cin, z, lower, upper):
    r"""The largest violation $\max(0, |c_{eq}|_\infty, \max c_{in}, \max(l - z), \max(z - u))$,
    NaN when a constraint or a variable is NaN (a plain `max` would drop it and report 0).

    One rule for every solver (host numbers or traced arrays): `OptimizeResult.violation`,
    the host solvers' logs and `solve_jax`'s loop all read it."""
    ceq, cin, z = (jnp.ravel(jnp.asarray(v, dtype=float)) for v in (ceq, cin, z))
    parts = jnp.concatenate([jnp.zeros(1), jnp.abs(ceq), cin, lower - z, z - upper])
    nan = jnp.any(jnp.isnan(ceq)) | jnp.any(jnp.isnan(cin)) | jnp.any(jnp.isnan(z))
    return jnp.where(nan, jnp.nan, jnp.max(parts))


def final_status(
    objective, violation, derivatives_finite, constraint_tol, *, success, at_limit,
    infeasible=False, stalled=False,
):  # fmt: skip
    """The outcome of a solve from the solver's own report and the values at its last point: one
    rule for every solver (traced or host values; an int32 array).

    - `failed` wherever the objective, the violation or the derivatives there are not finite,
      whatever the solver reported (a NaN constraint is no evidence of feasibility, and a point
      with finite values but NaN derivatives lies at the edge of a region where the run fails);
    - else `converged` when the solver reports success and the violation is <= `constraint_tol`;
    - else `iteration_limit` when it stopped at its limit;
    - else `infeasible` when it reports the constraints locally unsatisfiable, or stopped
      (`stalled` or `success`) at a point violating them by more than `constraint_tol`;
    - else `failed`."""
    finite = jnp.isfinite(objective) & jnp.isfinite(violation) & jnp.asarray(derivatives_finite)
    feasible = violation <= constraint_tol
    success, at_limit = jnp.asarray(success), jnp.asarray(at_limit)
    stopped = jnp.asarray(stalled) | success
    status = jnp.where(
        success & feasible,
        CONVERGED,
        jnp.where(
            at_limit,
            ITERATION_LIMIT,
            jnp.where(jnp.asarray(infeasible) | (stopped & ~feasible), INFEASIBLE, FAILED),
        ),
    )
    return jnp.where(finite, status, FAILED).astype(jnp.int32)


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
      \text{bound violation})$ (in the constraints' own units; 0 when there are none; NaN when a
      constraint or a variable is NaN).
    - `status`: an index into `STATUS`: `converged`, `infeasible` (the solver reports the
      constraints locally unsatisfiable), `iteration_limit`, `failed` (any other stop, and
      always where the objective, the violation or the derivatives at `x` are not finite).
    - `iterations`: solver iterations (major iterations; outer iterations for `solve_jax`).
    - `multipliers`: `{"equality": (m_eq,), "inequality": (m_in,)}`, in the convention
      $\nabla J + J_{eq}^T\lambda + J_{in}^T\mu =$ (bound terms), $\mu \ge 0$ for $c_{in} \le 0$.
    - `log`: per iteration, `{"objective": (k,), "violation": (k,)}` (and solver-specific rows;
      `solve_jax` pads unused rows with NaN).
    - `solver`: the solver's name; `solver_message`: its own words (host solvers).
    - `evaluations`: compiled evaluations of objective + constraints + Jacobians (host solvers:
      `Problem.evaluate`, once per iterate: the solver's separate requests at a point are
      answered by one call); `value_evaluations`: of the values only (`Problem.forward`: a line
      search's trial points); `hessian_evaluations`: of the Hessian of the Lagrangian
      (`Problem.hessian`; 0 with a quasi-Newton Hessian).
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
    value_evaluations: int = eqx.field(static=True, default=-1)
    hessian_evaluations: int = eqx.field(static=True, default=-1)
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
