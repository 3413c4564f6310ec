"""Trajectory optimization: Bryson & Ho's maximum-radius orbit transfer solved by jaxsim.optimize
(IPOPT through cyipopt, SciPy SLSQP) and by CasADi + IPOPT on the same transcription, and the cost
of one evaluation against the forward run.

The transcription is the same on both sides: thrust direction components at 41 equally spaced
knots, linear between them, normalised in the dynamics; unit-norm equality at the knots; single
shooting with 200 RK4 steps over t_f = 3.32; terminal u = 0 and v = sqrt(mu/r). So both solve the
same finite-dimensional problem and reach the same r(t_f) to the solvers' tolerance (equal
accuracy: the table shows it). CasADi builds the expression graph of the 200 RK4 steps
symbolically and hands IPOPT exact first and second derivatives (its default); jaxsim's IPOPT
run uses IPOPT's limited-memory quasi-Newton Hessian from exact first derivatives.

Timings: "first solve" includes jaxsim's trace and compile (and CasADi's graph construction);
"warm solve" is a second solve in the same process (no compile). Evaluation costs are medians of
repeated calls of the compiled functions: forward (objective and constraints), objective +
gradient (one reverse pass), and objective + constraints + full Jacobian (what a host solver
gets per iterate).

Run: `python benchmarks/bench_trajopt.py` (needs the `bench` extra for CasADi and the `optimize`
extra for cyipopt; a side whose package is missing is skipped and reported as such). Writes
`benchmarks/results/trajopt.json` and `.md`.
"""

import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # also runnable as a script

from benchmarks import _common as cm  # noqa: E402
from jaxsim import optimize as jo  # noqa: E402
from jaxsim.optimize.problems import BRYSON_HO, BRYSON_HO_RADIUS  # noqa: E402


NAME = "trajopt"
KNOTS, STEPS = 41, 200


def _median_time(fn, repeats=15):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def jaxsim_side():
    rows = {}
    problem = jo.problems.orbit_raising(num_knots=KNOTS, num_segments=4, steps_per_segment=50)
    z, a = jnp.asarray(problem.z0), problem.args
    start = time.perf_counter()
    jax.block_until_ready(problem.forward(z, a))
    first_forward = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(problem.objective_and_gradient(z, a))
    first_grad = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(problem.evaluate(z, a))
    first_eval = time.perf_counter() - start
    t_fwd = _median_time(lambda: problem.forward(z, a))
    t_grad = _median_time(lambda: problem.objective_and_gradient(z, a))
    t_eval = _median_time(lambda: problem.evaluate(z, a))
    costs = {
        "forward_ms": 1e3 * t_fwd,
        "objective_gradient_ms": 1e3 * t_grad,
        "objective_gradient_ratio": t_grad / t_fwd,
        "full_jacobian_ms": 1e3 * t_eval,
        "full_jacobian_ratio": t_eval / t_fwd,
        "jacobian_mode": problem.jacobian_mode,
        "rows": 1 + problem.num_equality,
        "variables": problem.num_variables,
        "first_call_forward_s": first_forward,
        "first_call_objective_gradient_s": first_grad,
        "first_call_full_jacobian_s": first_eval,
    }
    solvers = [("jaxsim + SLSQP (SciPy)", lambda p: jo.solve_scipy(p, "SLSQP", max_iter=500))]
    if jo.cyipopt_available():
        solvers.insert(0, ("jaxsim + IPOPT (cyipopt, L-BFGS)", lambda p: jo.solve_ipopt(p)))
    else:
        rows["jaxsim + IPOPT (cyipopt, L-BFGS)"] = {"skipped": "cyipopt not installed"}
    for name, solve in solvers:
        fresh = jo.problems.orbit_raising(num_knots=KNOTS, num_segments=4, steps_per_segment=50)
        start = time.perf_counter()
        res = solve(fresh)
        first = time.perf_counter() - start
        start = time.perf_counter()
        res = solve(fresh)
        warm = time.perf_counter() - start
        rows[name] = {
            "status": str(res.status_name),
            "r_tf": -float(res.objective),
            "violation": float(res.violation),
            "iterations": int(res.iterations),
            "evaluations": int(res.evaluations),
            "first_solve_s": first,
            "warm_solve_s": warm,
            "compiles": fresh.compile_count,
        }
    return rows, costs


def casadi_side():
    try:
        import casadi as ca
    except ImportError:
        return {"CasADi + IPOPT (exact Hessian)": {"skipped": "casadi not installed"}}
    start = time.perf_counter()
    mu, T, mdot, tf = (BRYSON_HO[k] for k in ("mu", "thrust", "mass_flow", "t_f"))
    W = ca.SX.sym("w", KNOTS, 2)
    knots = np.linspace(0.0, tf, KNOTS)
    h = tf / STEPS

    def control(t):
        # Linear interpolation between knots at a numeric time t (the grid is fixed).
        i = min(int(np.searchsorted(knots, t, side="right")) - 1, KNOTS - 2)
        s = (t - knots[i]) / (knots[i + 1] - knots[i])
        return (1 - s) * W[i, :] + s * W[i + 1, :]

    def f(t, y):
        r, _, u, v = y[0], y[1], y[2], y[3]
        w = control(t)
        acc = T / ((1.0 - mdot * t) * ca.sqrt(w[0] ** 2 + w[1] ** 2))
        return ca.vertcat(u, v / r, v**2 / r - mu / r**2 + acc * w[0], -u * v / r + acc * w[1])

    y = ca.DM([1.0, 0.0, 0.0, 1.0])
    for k in range(STEPS):
        t = k * h
        k1 = f(t, y)
        k2 = f(t + h / 2, y + h / 2 * k1)
        k3 = f(t + h / 2, y + h / 2 * k2)
        k4 = f(t + h, y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    r, u, v = y[0], y[2], y[3]
    g = ca.vertcat(u, v - ca.sqrt(mu / r), ca.sum2(W**2) - 1.0)
    nlp = {"x": ca.reshape(W, -1, 1), "f": -r, "g": g}
    opts = {"ipopt.print_level": 0, "print_time": 0, "ipopt.tol": 1e-8, "ipopt.sb": "yes"}
    solver = ca.nlpsol("orbit", "ipopt", nlp, opts)
    w0 = np.zeros((KNOTS, 2))
    w0[:, 1] = 1.0
    x0 = w0.reshape(-1, order="F")
    build = time.perf_counter() - start
    start = time.perf_counter()
    sol = solver(x0=x0, lbg=0.0, ubg=0.0)
    first = time.perf_counter() - start
    start = time.perf_counter()
    sol = solver(x0=x0, lbg=0.0, ubg=0.0)
    warm = time.perf_counter() - start
    stats = solver.stats()
    gval = np.asarray(sol["g"]).ravel()
    return {
        "CasADi + IPOPT (exact Hessian)": {
            "status": "converged" if stats["success"] else stats["return_status"],
            "r_tf": -float(sol["f"]),
            "violation": float(np.max(np.abs(gval))),
            "iterations": int(stats["iter_count"]),
            "evaluations": -1,
            "first_solve_s": build + first,
            "warm_solve_s": warm,
            "compiles": 0,
        }
    }


def main():
    rows, costs = jaxsim_side()
    rows.update(casadi_side())
    out = {
        "problem": "Bryson & Ho maximum-radius orbit transfer, 41 knots, 200 RK4 steps",
        "published_r_tf": BRYSON_HO_RADIUS,
        "solvers": rows,
        "evaluation_costs": costs,
        "environment": cm.environment(),
    }
    load = out["environment"].get("loadavg_1m", float("nan"))
    lines = [
        "# Trajectory optimization: Bryson & Ho orbit transfer",
        "",
        f"Same transcription on every row (41 knots, 200 RK4 steps); published r(t_f) = "
        f"{BRYSON_HO_RADIUS}. Load average {load:.1f} on {out['environment']['cpu_count']} CPUs "
        "(timings are noisy under load).",
        "",
        "| solver | status | r(t_f) | violation | iterations | first solve [s] | warm solve [s] |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in rows.items():
        if "skipped" in r:
            lines.append(f"| {name} | skipped: {r['skipped']} | | | | | |")
            continue
        lines.append(
            f"| {name} | {r['status']} | {r['r_tf']:.6f} | {r['violation']:.1e} | "
            f"{r['iterations']} | {r['first_solve_s']:.2f} | {r['warm_solve_s']:.2f} |"
        )
    c = costs
    lines += [
        "",
        "| evaluation (compiled, median) | time [ms] | / forward |",
        "| --- | --- | --- |",
        f"| forward (objective + constraints) | {c['forward_ms']:.2f} | 1 |",
        f"| objective + gradient (reverse) | {c['objective_gradient_ms']:.2f} | "
        f"{c['objective_gradient_ratio']:.2f} |",
        f"| objective + constraints + Jacobian ({c['jacobian_mode']}, {c['rows']} rows x "
        f"{c['variables']}) | {c['full_jacobian_ms']:.2f} | {c['full_jacobian_ratio']:.2f} |",
        "",
        f"First calls (trace + compile + run): forward {c['first_call_forward_s']:.2f} s, "
        f"objective + gradient {c['first_call_objective_gradient_s']:.2f} s, full Jacobian "
        f"{c['first_call_full_jacobian_s']:.2f} s.",
        "",
    ]
    cm.write_results(NAME, out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
