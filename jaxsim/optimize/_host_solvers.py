r"""Host solver adapters: SciPy (`SLSQP`, `trust-constr`) and IPOPT (through `cyipopt`).

Each iterate's objective, constraints and Jacobians come from one compiled call
(`Problem.evaluate`); the last point is cached on the host (`HostEvaluator`), so SLSQP's separate
requests for values and Jacobians at a point cost one evaluation. Both solvers build their own
quasi-Newton approximation of the Hessian of the Lagrangian from these first derivatives (BFGS in
SLSQP and trust-constr, limited-memory BFGS in IPOPT).

References: Kraft, "A software package for sequential quadratic programming", DFVLR-FB 88-28
(1988) (SLSQP); Byrd, Hribar & Nocedal, SIAM J. Optim. 9(4), 1999 (trust-constr's equality
SQP) and Conn, Gould & Toint, *Trust-Region Methods* (SIAM, 2000); Wächter & Biegler, "On the
implementation of an interior-point filter line-search algorithm for large-scale nonlinear
programming", Math. Program. 106, 2006 (IPOPT).
"""

import time
import warnings

import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from ._problem import HostEvaluator, Problem
from ._result import CONVERGED, FAILED, INFEASIBLE, ITERATION_LIMIT, OptimizeResult


_SCIPY_METHODS = ("SLSQP", "trust-constr")


def _start(problem, x0):
    z0 = problem.z0 if x0 is None else problem.flat(x0)
    return np.clip(z0, problem.lower, problem.upper)


def _result(problem, ev, z, status, iterations, lam, mu, log, solver, message, t0):
    F, _ = ev(z)
    return OptimizeResult(
        x=problem.x(z),
        objective=jnp.asarray(F[0]),
        violation=jnp.asarray(problem.violation(z, F)),
        status=jnp.asarray(status),
        iterations=jnp.asarray(iterations),
        multipliers={"equality": jnp.asarray(lam), "inequality": jnp.asarray(mu)},
        log={k: jnp.asarray(v, dtype=float) for k, v in log.items()},
        solver=solver,
        solver_message=str(message),
        evaluations=ev.count,
        solve_time_s=time.perf_counter() - t0,
    )


def solve_scipy(
    problem: Problem,
    method: str = "SLSQP",
    *,
    x0: PyTree | None = None,
    args: PyTree | None = None,
    tol: float = 1e-8,
    constraint_tol: float = 1e-6,
    max_iter: int = 200,
    options: dict | None = None,
) -> OptimizeResult:
    r"""Solve `problem` with `scipy.optimize.minimize` (`method` `"SLSQP"` or `"trust-constr"`).

    **Arguments:** `x0` (default `problem.x0`), `args` (default `problem.args`), `tol` (SLSQP's
    `ftol`; trust-constr's `gtol` and `xtol`), `constraint_tol` (largest violation accepted as
    converged, in the constraints' units), `max_iter`, `options` (passed to SciPy, after ours).

    **Outcome** (`OptimizeResult.status`): `converged` when SciPy reports success and the
    violation is at most `constraint_tol`; `iteration_limit` when SciPy stopped at `max_iter`;
    `infeasible` when SLSQP reports incompatible constraints, or when either method stops (line
    search, step below `tol`) at a point violating the constraints by more than `constraint_tol`;
    `failed` otherwise. Multipliers in the convention of `OptimizeResult`.
    """
    import scipy.optimize as so

    if method not in _SCIPY_METHODS:
        raise ValueError(f"solve_scipy: `method` must be one of {_SCIPY_METHODS}; got {method!r}.")
    args = problem.args if args is None else args
    t_start = time.perf_counter()
    ev = HostEvaluator(problem, args)
    z0 = _start(problem, x0)
    log = {"objective": [], "violation": []}

    def callback(intermediate_result):
        z = np.asarray(intermediate_result.x)
        F, _ = ev(z)
        log["objective"].append(float(F[0]))
        log["violation"].append(problem.violation(z, F))

    lo = np.where(np.isfinite(problem.lower), problem.lower, -np.inf)
    hi = np.where(np.isfinite(problem.upper), problem.upper, np.inf)
    bounded = np.any(np.isfinite(lo)) or np.any(np.isfinite(hi))
    bounds = so.Bounds(lo, hi) if bounded else None
    m_eq, m_in = problem.num_equality, problem.num_inequality
    if method == "SLSQP":
        cons = []
        if m_eq:
            cons.append({"type": "eq", "fun": ev.equality, "jac": ev.equality_jacobian})
        if m_in:
            cons.append(
                {
                    "type": "ineq",
                    "fun": lambda z: -ev.inequality(z),
                    "jac": lambda z: -ev.inequality_jacobian(z),
                }
            )
        opts = {"maxiter": int(max_iter), "ftol": float(tol), **(options or {})}
        res = so.minimize(
            ev.objective, z0, jac=ev.gradient, method="SLSQP", bounds=bounds,
            constraints=cons, options=opts, callback=callback,
        )  # fmt: skip
        mult = np.asarray(getattr(res, "multipliers", np.full(m_eq + m_in, np.nan)), float)
        lam, mu = -mult[:m_eq], mult[m_eq : m_eq + m_in]
        code = int(res.status)
        stopped_at_limit = code == 9
        reports_infeasible = code in (2, 4)
        stalled = code == 8
        success = bool(res.success)
    else:
        cons = []
        if m_eq:
            cons.append(so.NonlinearConstraint(ev.equality, 0.0, 0.0, jac=ev.equality_jacobian))
        if m_in:
            cons.append(
                so.NonlinearConstraint(ev.inequality, -np.inf, 0.0, jac=ev.inequality_jacobian)
            )
        opts = {"maxiter": int(max_iter), "gtol": float(tol), "xtol": float(tol)}
        opts.update(options or {})
        with warnings.catch_warnings():
            # SciPy's quasi-Newton update notes a linear constraint (delta_grad == 0); harmless.
            warnings.filterwarnings("ignore", message="delta_grad == 0.0", category=UserWarning)
            res = so.minimize(
                ev.objective, z0, jac=ev.gradient, hess=so.BFGS(), method="trust-constr",
                bounds=bounds, constraints=cons, options=opts, callback=callback,
            )  # fmt: skip
        v = list(res.v)
        lam = np.asarray(v[0], float) if m_eq else np.zeros(0)
        mu = np.asarray(v[1 if m_eq else 0], float) if m_in else np.zeros(0)
        code = int(res.status)
        stopped_at_limit = code == 0
        reports_infeasible = False
        stalled = code == 2
        success = code in (1, 2)
    z = np.asarray(res.x, float)
    F, _ = ev(z)
    violation = problem.violation(z, F)
    if success and violation <= constraint_tol:
        status = CONVERGED
    elif stopped_at_limit:
        status = ITERATION_LIMIT
    elif reports_infeasible or ((stalled or success) and violation > constraint_tol):
        status = INFEASIBLE
    else:
        status = FAILED
    iterations = int(getattr(res, "nit", len(log["objective"])))
    return _result(problem, ev, z, status, iterations, lam, mu, log, method, res.message, t_start)


def cyipopt_available() -> bool:
    """True when `cyipopt` (IPOPT's Python interface) imports."""
    try:
        import cyipopt  # noqa: F401
    except ImportError:
        return False
    return True


def solve_ipopt(
    problem: Problem,
    *,
    x0: PyTree | None = None,
    args: PyTree | None = None,
    tol: float = 1e-8,
    constraint_tol: float = 1e-6,
    max_iter: int = 500,
    options: dict | None = None,
) -> OptimizeResult:
    r"""Solve `problem` with IPOPT through `cyipopt` (the `optimize` extra; IPOPT's
    limited-memory quasi-Newton Hessian).

    **Arguments:** `x0`, `args`, `tol` (IPOPT's `tol`), `constraint_tol` (`constr_viol_tol`),
    `max_iter`, `options` (IPOPT options, after ours).

    **Outcome:** `converged` for IPOPT's `Solve_Succeeded` (and `Solved_To_Acceptable_Level` with
    the violation at most `constraint_tol`), `infeasible` for `Infeasible_Problem_Detected`,
    `iteration_limit` for `Maximum_Iterations_Exceeded`, `failed` otherwise.

    Raises `ImportError` naming the extra when `cyipopt` is not installed.
    """
    try:
        import cyipopt
    except ImportError:
        raise ImportError(
            "solve_ipopt needs cyipopt (IPOPT): pip install 'jaxsim-spacecraft[optimize]' "
            "(cyipopt builds against an installed IPOPT, e.g. Debian's coinor-libipopt-dev)."
        ) from None
    args = problem.args if args is None else args
    t_start = time.perf_counter()
    ev = HostEvaluator(problem, args)
    z0 = _start(problem, x0)
    n, m_eq, m_in = problem.num_variables, problem.num_equality, problem.num_inequality
    m = m_eq + m_in
    log = {"objective": [], "violation": [], "dual_infeasibility": []}

    class _Callbacks:
        def objective(self, z):
            return ev.objective(z)

        def gradient(self, z):
            return ev.gradient(z)

        def constraints(self, z):
            return ev(z)[0][1:].copy()

        def jacobian(self, z):
            return ev(z)[1][1:].ravel().copy()

        def jacobianstructure(self):
            return np.nonzero(np.ones((m, n)))

        def intermediate(self, alg_mod, iter_count, obj_value, inf_pr, inf_du, *rest):
            log["objective"].append(float(obj_value))
            log["violation"].append(float(inf_pr))
            log["dual_infeasibility"].append(float(inf_du))

    big = 1e19  # IPOPT's infinity (nlp_lower/upper_bound_inf)
    lb = np.where(np.isfinite(problem.lower), problem.lower, -big)
    ub = np.where(np.isfinite(problem.upper), problem.upper, big)
    cl = np.concatenate([np.zeros(m_eq), np.full(m_in, -big)])
    cu = np.zeros(m)
    nlp = cyipopt.Problem(n=n, m=m, problem_obj=_Callbacks(), lb=lb, ub=ub, cl=cl, cu=cu)
    opts = {
        "tol": float(tol),
        "constr_viol_tol": float(constraint_tol),
        "max_iter": int(max_iter),
        "hessian_approximation": "limited-memory",
        "print_level": 0,
        "sb": "yes",
    }
    opts.update(options or {})
    for key, value in opts.items():
        nlp.add_option(key, value)
    z, info = nlp.solve(z0)
    z = np.asarray(z, float)
    code = int(info["status"])
    F, _ = ev(z)
    violation = problem.violation(z, F)
    if code == 0 or (code == 1 and violation <= constraint_tol):
        status = CONVERGED
    elif code == 2:
        status = INFEASIBLE
    elif code == -1:
        status = ITERATION_LIMIT
    else:
        status = FAILED
    mult = np.asarray(info["mult_g"], float)
    msg = info["status_msg"]
    msg = msg.decode() if isinstance(msg, bytes) else msg
    return _result(
        problem, ev, z, status, len(log["objective"]) - 1, mult[:m_eq], mult[m_eq:], log,
        "ipopt", msg, t_start,
    )  # fmt: skip
