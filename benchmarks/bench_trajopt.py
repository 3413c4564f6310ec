"""Trajectory optimization against CasADi + IPOPT on the same transcriptions.

**Bryson & Ho's maximum-radius orbit transfer**: thrust direction components at 41 equally spaced
knots, linear between them, normalised in the dynamics; unit-norm equality at the knots; single
shooting with 200 RK4 steps over t_f = 3.32; terminal u = 0 and v = sqrt(mu/r).

**Goddard ascent** (maximum altitude with drag, free final time, a singular arc;
`jaxsim.optimize.problems.goddard_rocket`): thrust held over 100 equal intervals of the free
horizon, 2 RK4 steps each, single shooting as the guide teaches (a `PiecewiseConstant` thrust;
one more row holds it per segment through `shoot(..., segment_args=)`, the same problem); final
mass equality. CasADi builds the same 200 RK4 steps with the step t_f / 200 symbolic.

Both sides solve the same finite-dimensional problems and reach the same optimum to the solvers'
tolerance (the tables show it). CasADi builds the expression graph symbolically and hands IPOPT
exact first and second derivatives (its default); jaxsim's IPOPT runs take the exact Hessian
(`hessian="auto"`, forward over reverse mode) and, as a second row, IPOPT's limited-memory
quasi-Newton Hessian.

Timings: "first solve" includes jaxsim's trace and compile (and CasADi's graph construction);
"warm solve" is a second solve in the same process (no compile). Evaluation costs are medians of
repeated calls of the compiled functions: forward (objective and constraints), objective +
gradient (one reverse pass), objective + constraints + full Jacobian (what a host solver gets per
iterate) and the Hessian of the Lagrangian.

Run: `OPENBLAS_NUM_THREADS=1 python benchmarks/bench_trajopt.py` (needs the `bench` extra for
CasADi and the `optimize` extra for IPOPT; a side whose package is missing is skipped and
reported as such). Writes `benchmarks/results/trajopt.json` and `.md`.
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
from jaxsim.optimize.problems import (  # noqa: E402
    BRYSON_HO,
    BRYSON_HO_RADIUS,
    GODDARD,
    GODDARD_ALTITUDE,
)


NAME = "trajopt"
KNOTS, STEPS = 41, 200
ASCENT_INTERVALS, ASCENT_STEPS = 100, 2  # held thrust intervals, RK4 steps in each


def _median_time(fn, repeats=15):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def jaxsim_side():
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
    w = jnp.ones(1 + problem.num_equality)
    start = time.perf_counter()
    jax.block_until_ready(problem.hessian(z, a, w))
    first_hess = time.perf_counter() - start
    t_fwd = _median_time(lambda: problem.forward(z, a))
    t_grad = _median_time(lambda: problem.objective_and_gradient(z, a))
    t_eval = _median_time(lambda: problem.evaluate(z, a))
    t_hess = _median_time(lambda: problem.hessian(z, a, w), repeats=5)
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
        "hessian_ms": 1e3 * t_hess,
        "hessian_ratio": t_hess / t_fwd,
        "first_call_hessian_s": first_hess,
    }
    return _solve_rows(
        lambda: jo.problems.orbit_raising(num_knots=KNOTS, num_segments=4, steps_per_segment=50)
    ), costs


IPOPT_EXACT = "jaxsim + IPOPT (cyipopt, exact Hessian)"
IPOPT_LBFGS = "jaxsim + IPOPT (cyipopt, L-BFGS)"


def _solve_rows(make, lbfgs=True, slsqp=True):
    """First and warm solves of a fresh problem from `make()` by each solver."""
    rows = {}
    solvers = []
    if slsqp:
        solvers.append(
            ("jaxsim + SLSQP (SciPy)", lambda p: jo.solve_scipy(p, "SLSQP", max_iter=500))
        )
    if jo.cyipopt_available():
        solvers[:0] = [(IPOPT_EXACT, lambda p: jo.solve_ipopt(p))]
        if lbfgs:
            solvers.insert(1, (IPOPT_LBFGS, lambda p: jo.solve_ipopt(p, hessian="limited-memory")))
    else:
        rows[IPOPT_EXACT] = rows[IPOPT_LBFGS] = {"skipped": "cyipopt not installed"}
    for name, solve in solvers:
        fresh = make()
        start = time.perf_counter()
        res = solve(fresh)
        first = time.perf_counter() - start
        start = time.perf_counter()
        res = solve(fresh)
        warm = time.perf_counter() - start
        rows[name] = {
            "status": str(res.status_name),
            "optimum": -float(res.objective),
            "violation": float(res.violation),
            "iterations": int(res.iterations),
            "evaluations": int(res.evaluations),
            "value_evaluations": int(res.value_evaluations),
            "hessian_evaluations": int(res.hessian_evaluations),
            "first_solve_s": first,
            "warm_solve_s": warm,
            "compiles": fresh.compile_count,
        }
    return rows


def _casadi_solve(ca, nlp, x0, lbx, ubx, lbg, ubg, build_start):
    opts = {"ipopt.print_level": 0, "print_time": 0, "ipopt.tol": 1e-8, "ipopt.sb": "yes"}
    solver = ca.nlpsol("nlp", "ipopt", nlp, opts)
    build = time.perf_counter() - build_start
    kw = {"x0": x0, "lbx": lbx, "ubx": ubx, "lbg": lbg, "ubg": ubg}
    start = time.perf_counter()
    sol = solver(**kw)
    first = time.perf_counter() - start
    start = time.perf_counter()
    sol = solver(**kw)
    warm = time.perf_counter() - start
    stats = solver.stats()
    gval = np.asarray(sol["g"]).ravel()
    return sol, {
        "status": "converged" if stats["success"] else stats["return_status"],
        "optimum": -float(sol["f"]),
        "violation": float(np.max(np.abs(gval))),
        "iterations": int(stats["iter_count"]),
        "evaluations": -1,
        "first_solve_s": build + first,
        "warm_solve_s": warm,
        "compiles": 0,
    }


def ascent_jaxsim_side():
    def make(control="signal"):
        return jo.problems.goddard_rocket(
            num_intervals=ASCENT_INTERVALS, steps_per_interval=ASCENT_STEPS, control=control
        )

    rows = _solve_rows(make)
    if jo.cyipopt_available():
        # The held thrust per segment (shoot's segment_args) instead of a PiecewiseConstant
        # over the horizon: the same problem, whose steps read one value.
        seg = _solve_rows(lambda: make("segments"), lbfgs=False, slsqp=False)
        rows[IPOPT_EXACT + ", segment_args"] = seg[IPOPT_EXACT]
    return rows


def ascent_casadi_side():
    try:
        import casadi as ca
    except ImportError:
        return {"CasADi + IPOPT (exact Hessian)": {"skipped": "casadi not installed"}}
    start = time.perf_counter()
    d = GODDARD
    N, m = ASCENT_INTERVALS, ASCENT_STEPS
    u = ca.SX.sym("thrust", N)  # fractions of the maximum thrust
    s = ca.SX.sym("t_f")  # tenths of a time unit, as jaxsim's problem
    h = 0.1 * s / (N * m)

    def f(y, T):
        hh, v, mass = y[0], y[1], y[2]
        drag = d["drag"] * v**2 * ca.exp(-d["h_c"] * (hh - 1.0))
        return ca.vertcat(v, (T - drag) / mass - 1.0 / hh**2, -T / d["c"])

    y = ca.SX([1.0, 0.0, 1.0])
    for i in range(N):
        T = d["thrust_max"] * u[i]
        for _ in range(m):
            k1 = f(y, T)
            k2 = f(y + h / 2 * k1, T)
            k3 = f(y + h / 2 * k2, T)
            k4 = f(y + h * k3, T)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    nlp = {"x": ca.vertcat(u, s), "f": -y[0], "g": y[2] - d["m_final"]}
    x0 = np.concatenate([np.full(N, 0.5), [2.0]])
    lbx = np.concatenate([np.zeros(N), [0.1]])
    ubx = np.concatenate([np.ones(N), [100.0]])
    _, row = _casadi_solve(ca, nlp, x0, lbx, ubx, 0.0, 0.0, start)
    return {"CasADi + IPOPT (exact Hessian)": row}


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
    w0 = np.zeros((KNOTS, 2))
    w0[:, 1] = 1.0
    x0 = w0.reshape(-1, order="F")
    inf = np.full(x0.size, np.inf)
    _, row = _casadi_solve(ca, nlp, x0, -inf, inf, 0.0, 0.0, start)
    return {"CasADi + IPOPT (exact Hessian)": row}


def _table(rows, what):
    lines = [
        f"| solver | status | {what} | violation | iterations | Jacobians / values / Hessians "
        "| first solve [s] | warm solve [s] |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in rows.items():
        if "skipped" in r:
            lines.append(f"| {name} | skipped: {r['skipped']} | | | | | | |")
            continue
        counts = (
            "-"
            if r["evaluations"] < 0
            else f"{r['evaluations']} / {r['value_evaluations']} / {r['hessian_evaluations']}"
        )
        lines.append(
            f"| {name} | {r['status']} | {r['optimum']:.6f} | {r['violation']:.1e} | "
            f"{r['iterations']} | {counts} | {r['first_solve_s']:.2f} | {r['warm_solve_s']:.2f} |"
        )
    return lines


def main():
    rows, costs = jaxsim_side()
    rows.update(casadi_side())
    ascent = ascent_jaxsim_side()
    ascent.update(ascent_casadi_side())
    out = {
        "problem": "Bryson & Ho maximum-radius orbit transfer, 41 knots, 200 RK4 steps",
        "published_r_tf": BRYSON_HO_RADIUS,
        "solvers": rows,
        "evaluation_costs": costs,
        "ascent": {
            "problem": f"Goddard ascent, {ASCENT_INTERVALS} held thrust intervals x "
            f"{ASCENT_STEPS} RK4 steps, free t_f, single shooting",
            "published_h_tf": GODDARD_ALTITUDE,
            "solvers": ascent,
        },
        "environment": cm.environment(),
    }
    load = out["environment"].get("loadavg_1m", float("nan"))
    lines = [
        "# Trajectory optimization: jaxsim against CasADi + IPOPT",
        "",
        f"Load average {load:.1f} on {out['environment']['cpu_count']} CPUs (timings are noisy "
        "under load). Every row of a table solves the same transcription.",
        "",
        "## Bryson & Ho orbit transfer",
        "",
        f"41 knots, 200 RK4 steps; published r(t_f) = {BRYSON_HO_RADIUS}.",
        "",
        *_table(rows, "r(t_f)"),
        "",
        "## Goddard ascent (singular arc, free t_f)",
        "",
        f"{ASCENT_INTERVALS} held thrust intervals x {ASCENT_STEPS} RK4 steps, single shooting; "
        f"published h(t_f) = {GODDARD_ALTITUDE} (COPS 3.0).",
        "",
        *_table(ascent, "h(t_f)"),
    ]
    c = costs
    lines += [
        "",
        "## Evaluation costs (orbit transfer)",
        "",
        "| evaluation (compiled, median) | time [ms] | / forward |",
        "| --- | --- | --- |",
        f"| forward (objective + constraints) | {c['forward_ms']:.2f} | 1 |",
        f"| objective + gradient (reverse) | {c['objective_gradient_ms']:.2f} | "
        f"{c['objective_gradient_ratio']:.2f} |",
        f"| objective + constraints + Jacobian ({c['jacobian_mode']}, {c['rows']} rows x "
        f"{c['variables']}) | {c['full_jacobian_ms']:.2f} | {c['full_jacobian_ratio']:.2f} |",
        f"| Hessian of the Lagrangian (forward over reverse) | {c['hessian_ms']:.2f} | "
        f"{c['hessian_ratio']:.2f} |",
        "",
        f"First calls (trace + compile + run): forward {c['first_call_forward_s']:.2f} s, "
        f"objective + gradient {c['first_call_objective_gradient_s']:.2f} s, full Jacobian "
        f"{c['first_call_full_jacobian_s']:.2f} s, Hessian {c['first_call_hessian_s']:.2f} s.",
        "",
    ]
    cm.write_results(NAME, out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
