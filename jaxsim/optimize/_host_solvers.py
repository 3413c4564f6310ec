r"""Host solver adapters: SciPy (`SLSQP`, `trust-constr`) and IPOPT (through `cyipopt`).

Each point's values, Jacobians and Hessian come from the problem's compiled programs, each run
at most once per point (`HostEvaluator`): a line search's trial points run the values only
(`Problem.forward`), an accepted iterate its Jacobians once (`Problem.evaluate`) and, with the
exact Hessian, the Hessian of the Lagrangian once for the solver's multipliers
(`Problem.hessian`, forward over reverse mode). IPOPT and trust-constr take the exact Hessian by
default (`hessian="auto"`: where the problem can be differentiated twice, which a run with an
adaptive phase cannot) and their quasi-Newton approximations on request
(`hessian="limited-memory"` for IPOPT's limited-memory BFGS, `hessian="bfgs"` for SciPy's
BFGS); SLSQP always builds its own BFGS approximation.

References: Kraft, "A software package for sequential quadratic programming", DFVLR-FB 88-28
(1988) (SLSQP); Byrd, Hribar & Nocedal, SIAM J. Optim. 9(4), 1999 (trust-constr's equality
SQP) and Conn, Gould & Toint, *Trust-Region Methods* (SIAM, 2000); Wächter & Biegler, "On the
implementation of an interior-point filter line-search algorithm for large-scale nonlinear
programming", Math. Program. 106, 2006 (IPOPT).
"""

import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from ._problem import HostEvaluator, Problem, check_count, check_number, forward_mode_refused
from ._result import FAILED, OptimizeResult, final_status


_SCIPY_METHODS = ("SLSQP", "trust-constr")
_IPOPT_HESSIANS = ("auto", "exact", "limited-memory")
_SCIPY_HESSIANS = ("auto", "exact", "bfgs")
# What solve_ipopt's ImportError asks for: the wheels bundle IPOPT (and MUMPS, OpenBLAS), so no
# system package is needed on Linux, macOS or Windows.
_IPOPT_INSTALL = (
    "solve_ipopt needs cyipopt (IPOPT's Python interface): pip install cyipopt-wheels (or the "
    "optimize extra: pip install 'jaxsim-spacecraft[optimize]'), which bundles IPOPT; no system "
    "package is needed. Conda users: conda install -c conda-forge cyipopt."
)


def _start(problem, x0, caller):
    z0 = problem.z0 if x0 is None else problem.flat(x0, caller, "x0")
    return np.clip(z0, problem.lower, problem.upper)


def _check_options(caller, tol, constraint_tol, max_iter):
    return (
        check_number(caller, "tol", tol, ">= 0"),
        check_number(caller, "constraint_tol", constraint_tol, ">= 0"),
        check_count(caller, "max_iter", max_iter),
    )


def _nonfinite(problem, F, J) -> str:
    """Which of the objective, constraints and their Jacobians (None: not computed) are not
    finite ("" when all are)."""
    names = []
    for what, rows in zip(
        ("objective", "equality", "inequality"), problem.split(np.arange(F.size))
    ):
        rows = np.atleast_1d(rows)
        if not np.all(np.isfinite(F[rows])):
            names.append(f"{what} {F[rows].tolist()}")
        elif J is not None and not np.all(np.isfinite(J[rows])):
            names.append(f"the derivatives of {what}")
    return "; ".join(names)


def _exact_hessian(problem, ev, z0, hessian, quasi_newton):
    """Whether the solve uses the exact Hessian: `hessian` "exact" or "auto" (then compiled here,
    at `z0`, before the solver starts, on the problem's first such solve), falling back for
    "auto" where the problem refuses forward over reverse mode (`Problem.hessian`'s ValueError,
    re-raised for "exact")."""
    if hessian == quasi_newton:
        return False
    if problem._hessian_compiled:
        return True  # traced by an earlier solve: the functions take forward over reverse mode
    weights = jnp.ones(1 + problem.num_equality + problem.num_inequality)
    try:
        # Compiled (and run once) here; not counted among the solve's evaluations.
        jax.block_until_ready(problem.hessian(jnp.asarray(z0), ev.args, weights))
    except ValueError as err:
        if hessian == "exact" or not forward_mode_refused(err.__cause__):
            raise
        return False
    problem._hessian_compiled = True
    return True


# Appended to the solver's message when its success is not trusted (`_status`).
_EDGE = (
    "; stopped right after meeting non-finite values or derivatives (the edge of a region where "
    "the problem fails): not taken as converged"
)


def _status(problem, ev, z, constraint_tol, *, success, **report):
    """The shared outcome rule (`final_status`) at the solver's last point `z`, and whether a
    reported success was discarded: a solver whose last iteration met non-finite values (a line
    search blocked by a failing run) reports success at the edge of that region, not at a KKT
    point."""
    untrusted = bool(success) and ev.met_nonfinite
    F, J = ev(z)
    status = final_status(
        F[0], problem.violation(z, F), np.all(np.isfinite(J)), constraint_tol,
        success=bool(success) and not untrusted, **report,
    )  # fmt: skip
    return int(status), untrusted


def _failed_at_start(problem, ev, z0, log, solver, t0):
    """A `failed` result without running the solver when the values or derivatives at the start
    are not finite (SciPy's and IPOPT's iterations are undefined there), else None."""
    F, J = ev(z0)
    bad = _nonfinite(problem, F, J)
    if not bad:
        return None
    message = f"not finite at the initial point x0: {bad}; the solver was not started"
    lam, mu = np.full(problem.num_equality, np.nan), np.full(problem.num_inequality, np.nan)
    return _result(problem, ev, z0, FAILED, 0, lam, mu, log, solver, message, t0)


def _result(problem, ev, z, status, iterations, lam, mu, log, solver, message, t0):
    F = ev.values(z)
    return OptimizeResult(
        x=problem.x(z),
        objective=jnp.asarray(F[0]),
        violation=jnp.asarray(problem.violation(z, F)),
        status=jnp.asarray(status, dtype=jnp.int32),
        iterations=jnp.asarray(iterations),
        multipliers={"equality": jnp.asarray(lam), "inequality": jnp.asarray(mu)},
        log={k: jnp.asarray(v, dtype=float) for k, v in log.items()},
        solver=solver,
        solver_message=str(message),
        evaluations=ev.count,
        value_evaluations=ev.value_count,
        hessian_evaluations=ev.hessian_count,
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
    hessian: str = "auto",
) -> OptimizeResult:
    r"""Solve `problem` with `scipy.optimize.minimize` (`method` `"SLSQP"` or `"trust-constr"`).

    **Arguments:** `x0` (default `problem.x0`), `args` (default `problem.args`), `tol` (SLSQP's
    `ftol`; trust-constr's `gtol` and `xtol`), `constraint_tol` (largest violation accepted as
    converged, in the constraints' units), `max_iter`, `options` (passed to SciPy, after ours),
    `hessian` (trust-constr: `"exact"`, the Hessians of the objective and of the constraints
    weighted by SciPy's multipliers from `Problem.hessian`; `"bfgs"`, SciPy's quasi-Newton
    approximation; `"auto"`, exact where the problem can be differentiated twice (module
    docstring), else BFGS. SLSQP builds its own BFGS approximation: `"auto"` or `"bfgs"`).

    **Outcome** (`OptimizeResult.status`, the rule of every solver: `final_status`): `failed`
    where the objective, the violation or the derivatives at the last point are not finite
    (also at `x0`: SciPy is then not started; and when SciPy raises on such values), and where
    SciPy reports success right after its last iteration met non-finite values (a stop at the
    edge of a region where the problem fails, not at a KKT point); else
    `converged` when SciPy reports success and the violation is at most `constraint_tol`;
    `iteration_limit` when SciPy stopped at `max_iter`; `infeasible` when SLSQP reports
    incompatible constraints, or when either method stops (line search, step below `tol`) at a
    point violating the constraints by more than `constraint_tol`; `failed` otherwise.
    Multipliers in the convention of `OptimizeResult`. `x0` is checked like every solver's
    (`decision_vector`); `tol`, `constraint_tol` finite and >= 0, `max_iter` >= 1.
    """
    import scipy.optimize as so

    if method not in _SCIPY_METHODS:
        raise ValueError(f"solve_scipy: `method` must be one of {_SCIPY_METHODS}; got {method!r}.")
    tol, constraint_tol, max_iter = _check_options("solve_scipy", tol, constraint_tol, max_iter)
    if hessian not in _SCIPY_HESSIANS or (method == "SLSQP" and hessian == "exact"):
        raise ValueError(
            f"solve_scipy: `hessian` must be one of {_SCIPY_HESSIANS} ('exact' with "
            "method='trust-constr' only: SLSQP takes no Hessian; use trust-constr or solve_ipopt "
            f"for the exact one); got {hessian!r} with method={method!r}."
        )
    args = problem.args if args is None else args
    t_start = time.perf_counter()
    ev = HostEvaluator(problem, args)
    z0 = _start(problem, x0, "solve_scipy")
    log = {"objective": [], "violation": []}
    early = _failed_at_start(problem, ev, z0, log, method, t_start)
    if early is not None:
        return early

    def callback(intermediate_result):
        ev.accept()
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
        res = _minimize(
            problem, ev, log, method, t_start, ev.objective, z0, jac=ev.gradient,
            method="SLSQP", bounds=bounds, constraints=cons, options=opts, callback=callback,
        )  # fmt: skip
        if isinstance(res, OptimizeResult):
            return res
        mult = np.asarray(getattr(res, "multipliers", np.full(m_eq + m_in, np.nan)), float)
        lam, mu = -mult[:m_eq], mult[m_eq : m_eq + m_in]
        code = int(res.status)
        stopped_at_limit = code == 9
        reports_infeasible = code in (2, 4)
        stalled = code == 8
        success = bool(res.success)
    else:
        exact = _exact_hessian(problem, ev, z0, hessian, "bfgs")
        cons = []

        def weighted(rows, v):
            # The weights w of F = [J, c_eq, c_in] for one of trust-constr's Hessian requests.
            w = np.zeros(1 + m_eq + m_in)
            w[rows] = v
            return w

        def hess_of(rows):
            # trust-constr's `hess(z, v)` of a constraint block (BFGS unless exact).
            if not exact:
                return so.BFGS()
            return lambda z, v: ev.hessian(z, weighted(rows, np.asarray(v, float)))

        hess = (lambda z: ev.hessian(z, weighted(0, 1.0))) if exact else so.BFGS()
        if m_eq:
            cons.append(
                so.NonlinearConstraint(
                    ev.equality, 0.0, 0.0, jac=ev.equality_jacobian,
                    hess=hess_of(slice(1, 1 + m_eq)),
                )
            )  # fmt: skip
        if m_in:
            cons.append(
                so.NonlinearConstraint(
                    ev.inequality, -np.inf, 0.0, jac=ev.inequality_jacobian,
                    hess=hess_of(slice(1 + m_eq, None)),
                )
            )  # fmt: skip
        opts = {"maxiter": int(max_iter), "gtol": float(tol), "xtol": float(tol)}
        opts.update(options or {})
        with warnings.catch_warnings():
            # SciPy's quasi-Newton update notes a linear constraint (delta_grad == 0); harmless.
            warnings.filterwarnings("ignore", message="delta_grad == 0.0", category=UserWarning)
            res = _minimize(
                problem, ev, log, method, t_start, ev.objective, z0, jac=ev.gradient,
                hess=hess, method="trust-constr", bounds=bounds, constraints=cons,
                options=opts, callback=callback,
            )  # fmt: skip
        if isinstance(res, OptimizeResult):
            return res
        v = list(res.v)
        lam = np.asarray(v[0], float) if m_eq else np.zeros(0)
        mu = np.asarray(v[1 if m_eq else 0], float) if m_in else np.zeros(0)
        code = int(res.status)
        stopped_at_limit = code == 0
        reports_infeasible = False
        stalled = code == 2
        success = code in (1, 2)
    z = np.asarray(res.x, float)
    status, untrusted = _status(
        problem, ev, z, constraint_tol, success=success, at_limit=stopped_at_limit,
        infeasible=reports_infeasible, stalled=stalled,
    )  # fmt: skip
    iterations = int(getattr(res, "nit", len(log["objective"])))
    message = str(res.message) + (_EDGE if untrusted else "")
    return _result(problem, ev, z, status, iterations, lam, mu, log, method, message, t_start)


def _minimize(problem, ev, log, solver, t0, *args, **kwargs):
    """`scipy.optimize.minimize`, or a `failed` result when SciPy stops with an exception after
    the problem returned non-finite values or derivatives (trust-constr's factorizations raise on
    NaN instead of reporting it)."""
    import scipy.optimize as so

    try:
        return so.minimize(*args, **kwargs)
    except (ValueError, np.linalg.LinAlgError) as err:
        # The last point met, with values and Jacobian or with values only (a trial point).
        met = [(z, F, J) for z, F, J in ((ev._z, ev._F, ev._J), (ev._vz, ev._vF, None))]
        met = [(z, F, J) for z, F, J in met if F is not None and _nonfinite(problem, F, J)]
        if not met:
            raise
        z, F, J = met[0]
        m_eq, m_in = problem.num_equality, problem.num_inequality
        message = (
            f"not finite at an iterate: {_nonfinite(problem, F, J)}; SciPy stopped "
            f"({type(err).__name__}: {err})"
        )
        return _result(
            problem, ev, z, FAILED, len(log["objective"]), np.full(m_eq, np.nan),
            np.full(m_in, np.nan), log, solver, message, t0,
        )  # fmt: skip


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
    hessian: str = "auto",
) -> OptimizeResult:
    r"""Solve `problem` with IPOPT through `cyipopt` (the `optimize` extra: `cyipopt-wheels`,
    which bundles IPOPT).

    **Arguments:** `x0`, `args`, `tol` (IPOPT's `tol`), `constraint_tol` (`constr_viol_tol`),
    `max_iter`, `options` (IPOPT options, after ours), `hessian`: `"exact"` (the Hessian of the
    Lagrangian for IPOPT's multipliers, `Problem.hessian`: forward over reverse mode, once per
    iterate), `"limited-memory"` (IPOPT's limited-memory BFGS from the exact first derivatives),
    or `"auto"` (exact where the problem can be differentiated twice, else limited memory: a run
    with an adaptive phase is reverse mode only). The exact Hessian is compiled before IPOPT
    starts (its first solve pays that compile).

    **Outcome** (the rule of every solver, `final_status`): `failed` where the objective, the
    violation or the derivatives at the last point (or at `x0`: IPOPT is then not started) are not
    finite; else `converged` for IPOPT's `Solve_Succeeded` or `Solved_To_Acceptable_Level` with the
    violation at most `constraint_tol`, `infeasible` for `Infeasible_Problem_Detected` (or a
    success above `constraint_tol`), `iteration_limit` for `Maximum_Iterations_Exceeded`,
    `failed` otherwise.

    Raises `ImportError` naming the extra when `cyipopt` is not installed.
    """
    try:
        import cyipopt
    except ImportError:
        raise ImportError(_IPOPT_INSTALL) from None
    tol, constraint_tol, max_iter = _check_options("solve_ipopt", tol, constraint_tol, max_iter)
    if hessian not in _IPOPT_HESSIANS:
        raise ValueError(
            f"solve_ipopt: `hessian` must be one of {_IPOPT_HESSIANS}; got {hessian!r}."
        )
    args = problem.args if args is None else args
    t_start = time.perf_counter()
    ev = HostEvaluator(problem, args)
    z0 = _start(problem, x0, "solve_ipopt")
    n, m_eq, m_in = problem.num_variables, problem.num_equality, problem.num_inequality
    m = m_eq + m_in
    log = {"objective": [], "violation": [], "dual_infeasibility": []}
    early = _failed_at_start(problem, ev, z0, log, "ipopt", t_start)
    if early is not None:
        return early
    exact = _exact_hessian(problem, ev, z0, hessian, "limited-memory")
    lower = np.tril_indices(n)  # IPOPT takes the lower triangle of the symmetric Hessian

    class _Callbacks:
        # Values at every point IPOPT asks (its line search's trials too), Jacobians and the
        # Hessian at its iterates: each from one compiled call (HostEvaluator's cache).
        def objective(self, z):
            return ev.objective(z)

        def gradient(self, z):
            return ev.gradient(z)

        def constraints(self, z):
            return ev.values(z)[1:].copy()

        def jacobian(self, z):
            return ev(z)[1][1:].ravel().copy()

        def jacobianstructure(self):
            return np.nonzero(np.ones((m, n)))

        def hessianstructure(self):
            return lower

        def hessian(self, z, lagrange, obj_factor):
            # IPOPT's Lagrangian: obj_factor * J + lagrange . [c_eq, c_in].
            weights = np.concatenate([[obj_factor], np.asarray(lagrange, float)])
            return ev.hessian(z, weights)[lower].copy()

        def intermediate(self, alg_mod, iter_count, obj_value, inf_pr, inf_du, *rest):
            ev.accept()
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
        "hessian_approximation": "exact" if exact else "limited-memory",
        "print_level": 0,
        "sb": "yes",
    }
    opts.update(options or {})
    for key, value in opts.items():
        nlp.add_option(key, value)
    z, info = nlp.solve(z0)
    z = np.asarray(z, float)
    code = int(info["status"])
    # Solve_Succeeded (0) and Solved_To_Acceptable_Level (1) are successes; the shared rule then
    # asks the violation to be <= constraint_tol and the values and derivatives to be finite.
    status, untrusted = _status(
        problem, ev, z, constraint_tol, success=code in (0, 1), at_limit=code == -1,
        infeasible=code == 2,
    )  # fmt: skip
    mult = np.asarray(info["mult_g"], float)
    msg = info["status_msg"]
    msg = (msg.decode() if isinstance(msg, bytes) else msg) + (_EDGE if untrusted else "")
    return _result(
        problem, ev, z, status, len(log["objective"]) - 1, mult[:m_eq], mult[m_eq:], log,
        "ipopt", msg, t_start,
    )  # fmt: skip
