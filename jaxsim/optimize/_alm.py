r"""A pure-JAX solver: augmented Lagrangian outer loop, projected quasi-Newton inner solve.

For $c_{eq} = 0$, $c_{in} \le 0$ and bounds $l \le x \le u$, the outer loop minimizes over the
box the augmented Lagrangian (Rockafellar's form for inequalities)

$$L_A(x; \lambda, \mu, \rho) = J + \lambda^T c_{eq} + \tfrac\rho2|c_{eq}|^2
+ \tfrac1{2\rho}\big(|\max(0, \mu + \rho c_{in})|^2 - |\mu|^2\big),$$

then updates $\lambda \leftarrow \lambda + \rho c_{eq}$, $\mu \leftarrow \max(0, \mu + \rho c_{in})$ and
multiplies $\rho$ by 10 when the violation is above `constraint_tol` and fell by less than a factor
of 4 (Nocedal & Wright,
*Numerical Optimization*, 2nd ed., alg. 17.4; Conn, Gould & Toint, LANCELOT, 1992). The inner
minimization over the box is a projected BFGS method: variables at a bound with the gradient
pushing outwards are held, the BFGS direction acts on the others, and a backtracking (Armijo)
search runs along the projected path (Bertsekas, "Projected Newton methods for optimization
problems with simple constraints", SIAM J. Control Optim. 20(2), 1982). Bounds hold exactly at
every iterate (projection).

All in `lax.while_loop`s of fixed-size arrays: the solver is `jit`-compiled once and runs under
`vmap` over a batch of problems (one `args` per member), each member reporting its own outcome.
Each inner iteration costs one forward + reverse pass of the problem (the gradient of $L_A$ by one
vector-Jacobian product) and one or more forward passes in the line search.
"""

import jax
import jax.flatten_util
import jax.numpy as jnp
from jaxtyping import PyTree

from .._compilation._jit import jit as _jit
from ._problem import Problem, check_count, check_number, decision_vector
from ._result import (
    CONVERGED,
    FAILED,
    INFEASIBLE,
    OptimizeResult,
    constraint_violation,
    final_status,
)


_RUNNING = -1
_ARMIJO = 1e-4  # sufficient-decrease constant of the line search (Nocedal & Wright, sec. 3.1)
_MAX_HALVINGS = 40  # line-search halvings before the inner solve stops (step 1e-12 of the first)
_STALL = 0.9  # violation not reduced below this fraction at the largest penalty: infeasible


def _core(problem: Problem, opts):
    tol, ctol, max_outer, max_inner, rho0, rho_max = opts
    n, me = problem.num_variables, problem.num_equality
    lo, hi = jnp.asarray(problem.lower), jnp.asarray(problem.upper)

    def run(z0, args):
        problem.trace_counts["solve_jax"] = problem.trace_counts.get("solve_jax", 0) + 1

        def F(z):
            return problem.values(z, args)

        def split(Fz):
            return Fz[0], Fz[1 : 1 + me], Fz[1 + me :]

        def la_value(Fz, lam, mu, rho):
            f, ceq, cin = split(Fz)
            shifted = jnp.maximum(0.0, mu + rho * cin)
            pen = jnp.sum(shifted**2) - jnp.sum(mu**2)
            return f + lam @ ceq + 0.5 * rho * ceq @ ceq + pen / (2.0 * rho)

        def weighted_grad(z, weights_of):
            Fz, vjp = jax.vjp(F, z)
            return Fz, vjp(weights_of(Fz))[0]

        def la_grad(z, lam, mu, rho):
            def weights(Fz):
                _, ceq, cin = split(Fz)
                w_in = jnp.maximum(0.0, mu + rho * cin)
                return jnp.concatenate([jnp.ones(1), lam + rho * ceq, w_in])

            Fz, g = weighted_grad(z, weights)
            return la_value(Fz, lam, mu, rho), g

        def proj_grad(z, g):
            return jnp.max(jnp.abs(jnp.clip(z - g, lo, hi) - z))

        def inner(z, lam, mu, rho, inner_tol):
            val, g = la_grad(z, lam, mu, rho)
            eye = jnp.eye(n)

            def cond(s):
                k, _, _, _, _, stop = s
                return (k < max_inner) & ~stop

            def body(s):
                k, z, val, g, H, _ = s
                held = ((z <= lo) & (g > 0)) | ((z >= hi) & (g < 0))
                gf = jnp.where(held, 0.0, g)
                d = -jnp.where(held, 0.0, H @ gf)
                d = jnp.where(g @ d < 0, d, -gf)

                def ls_cond(c):
                    i, _, _, ok = c
                    return (i < _MAX_HALVINGS) & ~ok

                def ls_body(c):
                    i, a, _, _ = c
                    z_a = jnp.clip(z + a * d, lo, hi)
                    v_a = la_value(F(z_a), lam, mu, rho)
                    ok = jnp.isfinite(v_a) & (v_a <= val + _ARMIJO * (g @ (z_a - z)))
                    return i + 1, jnp.where(ok, a, 0.5 * a), z_a, ok

                _, _, z_n, ok = jax.lax.while_loop(
                    ls_cond, ls_body, (0, jnp.ones(()), z, jnp.zeros((), bool))
                )
                z_n = jnp.where(ok, z_n, z)
                val_n, g_n = la_grad(z_n, lam, mu, rho)
                s_, y_ = z_n - z, g_n - g
                sy = s_ @ y_
                good = ok & (sy > 1e-12 * jnp.linalg.norm(s_) * jnp.linalg.norm(y_))
                H0 = jnp.where(k == 0, (sy / jnp.maximum(y_ @ y_, 1e-300)) * eye, H)
                r = 1.0 / jnp.where(good, sy, 1.0)
                V = eye - r * jnp.outer(s_, y_)
                H_n = jnp.where(good, V @ H0 @ V.T + r * jnp.outer(s_, s_), H)
                stop = ~ok | (proj_grad(z_n, g_n) <= inner_tol)
                return k + 1, z_n, val_n, g_n, H_n, stop

            k, z, val, g, _, _ = jax.lax.while_loop(
                cond, body, (0, z, val, g, eye, proj_grad(z, g) <= inner_tol)
            )
            return z, k

        lam0 = jnp.zeros(me)
        mu0 = jnp.zeros(problem.num_inequality)
        nan_log = jnp.full(max_outer, jnp.nan)
        logs0 = {
            "objective": nan_log,
            "violation": nan_log,
            "optimality": nan_log,
            "penalty": nan_log,
            "inner_iterations": nan_log,
        }
        z0 = jnp.clip(z0, lo, hi)

        def outer_cond(s):
            j, status = s[0], s[6]
            return (j < max_outer) & (status == _RUNNING)

        def outer_body(s):
            j, z, lam, mu, rho, viol_prev, _, logs, inner_tol = s
            z, k_in = inner(z, lam, mu, rho, inner_tol)
            Fz = F(z)
            f, ceq, cin = split(Fz)
            viol = constraint_violation(ceq, cin, z, lo, hi)
            lam_n = lam + rho * ceq
            mu_n = jnp.maximum(0.0, mu + rho * cin)
            _, gL = weighted_grad(z, lambda _: jnp.concatenate([jnp.ones(1), lam_n, mu_n]))
            opt = proj_grad(z, gL)
            done = (viol <= ctol) & (opt <= tol)
            stuck = (rho >= rho_max) & (viol > ctol) & (viol > _STALL * viol_prev)
            nonfinite = ~jnp.isfinite(f) | ~jnp.isfinite(viol) | ~jnp.isfinite(opt)
            status = jnp.where(done, CONVERGED, jnp.where(stuck, INFEASIBLE, _RUNNING))
            status = jnp.where(nonfinite, FAILED, status)
            # The penalty grows only while the constraints are not met and their violation fell
            # by less than 4x (Nocedal & Wright, alg. 17.4); once they are met to `ctol`,
            # only optimality is left and a larger penalty would only worsen the conditioning.
            grow = (viol > ctol) & (viol > 0.25 * viol_prev)
            rho_n = jnp.where(grow, jnp.minimum(10.0 * rho, rho_max), rho)
            row = {
                "objective": f,
                "violation": viol,
                "optimality": opt,
                "penalty": rho,
                "inner_iterations": k_in,
            }
            logs = {key: logs[key].at[j].set(row[key]) for key in logs}
            inner_tol_n = jnp.maximum(tol, 0.1 * inner_tol)
            return j + 1, z, lam_n, mu_n, rho_n, viol, status, logs, inner_tol_n

        init = (
            0,
            z0,
            lam0,
            mu0,
            jnp.asarray(rho0, float),
            jnp.asarray(jnp.inf),
            jnp.asarray(_RUNNING),
            logs0,
            jnp.asarray(1e-2),
        )
        j, z, lam, mu, _, _, status, logs, _ = jax.lax.while_loop(outer_cond, outer_body, init)
        Fz = F(z)
        f, ceq, cin = split(Fz)
        viol = constraint_violation(ceq, cin, z, lo, hi)
        _, gL = weighted_grad(z, lambda _: jnp.concatenate([jnp.ones(1), lam, mu]))
        status = final_status(
            f, viol, jnp.all(jnp.isfinite(gL)), ctol, success=status == CONVERGED,
            at_limit=status == _RUNNING, infeasible=status == INFEASIBLE,
        )  # fmt: skip
        return z, f, viol, status, j, lam, mu, logs

    return _jit(run)


def solve_jax(
    problem: Problem,
    *,
    x0: PyTree | None = None,
    args: PyTree | None = None,
    tol: float = 1e-6,
    constraint_tol: float = 1e-6,
    max_outer: int = 30,
    max_inner: int = 200,
    penalty: float = 10.0,
    max_penalty: float = 1e8,
) -> OptimizeResult:
    r"""Solve `problem` with the augmented-Lagrangian / projected-BFGS solver (module docstring),
    in JAX: callable under `jit` and `vmap` (e.g. `jax.vmap(lambda a: solve_jax(p, args=a))`),
    with `x0` and `args` possibly traced.

    **Arguments:** `x0` (default `problem.x0`), `args` (default `problem.args`), `tol` (projected
    gradient of the Lagrangian), `constraint_tol` (largest violation), `max_outer` (multiplier
    updates), `max_inner` (BFGS iterations per update), `penalty` $\rho_0$, `max_penalty`.

    **Outcome:** `converged` (violation <= `constraint_tol` and optimality <= `tol`),
    `infeasible` (at the largest penalty the violation stalls above `constraint_tol`),
    `iteration_limit` (`max_outer` updates), `failed` (non-finite objective, constraints or
    derivatives; the rule of every solver, `final_status`). `x0` is checked like every solver's
    (`decision_vector`: the structure and shapes of `problem.x0`, real, finite when concrete);
    `tol`, `constraint_tol` >= 0, `penalty`, `max_penalty` > 0 (finite), counts >= 1.
    `log` rows are per outer iteration (NaN past the last): objective, violation, optimality,
    penalty, inner iterations. The multipliers are the first-order estimates of the last update.
    """
    name = "solve_jax"
    rho0 = check_number(name, "penalty", penalty, "> 0")
    rho_max = check_number(name, "max_penalty", max_penalty, "> 0")
    if rho_max < rho0:
        raise ValueError(
            f"{name}: `max_penalty` must be >= `penalty` = {rho0!r}; got {max_penalty!r}."
        )
    opts = (check_number(name, "tol", tol, ">= 0"), check_number(name, "constraint_tol",
            constraint_tol, ">= 0"), check_count(name, "max_outer", max_outer),
            check_count(name, "max_inner", max_inner), rho0, rho_max)  # fmt: skip
    cache = problem.__dict__.setdefault("_jax_solvers", {})
    if opts not in cache:
        cache[opts] = _core(problem, opts)
    z0 = jnp.asarray(problem.z0) if x0 is None else decision_vector(name, "x0", x0, problem.x0)
    args = problem.args if args is None else args
    z, f, viol, status, j, lam, mu, logs = cache[opts](jnp.asarray(z0, float), args)
    return OptimizeResult(
        x=problem.unravel(z) if jnp.ndim(z) == 1 else jax.vmap(problem.unravel)(z),
        objective=f,
        violation=viol,
        status=status,
        iterations=j,
        multipliers={"equality": lam, "inequality": mu},
        log=logs,
        solver="alm",
    )
