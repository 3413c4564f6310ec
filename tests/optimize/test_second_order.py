"""Second-order information and one evaluation per iterate (issue 42 items 1, 2, 6).

Oracles: central differences of the gradient of the Lagrangian (the exact Hessian), counts of the
compiled calls per point (each point's values, Jacobian and Hessian computed once), the iteration
counts of IPOPT with the exact and the limited-memory Hessian on the Goddard ascent (a singular
arc: quasi-Newton methods crawl along it), its published optimum (COPS 3.0: h(t_f) = 1.01283).
"""

import sys

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsim import optimize as jo
from jaxsim.optimize import problems


# Central differences of the gradient: truncation FD_STEP^2 |g'''| ~ 1e-10, round-off
# 1e-16 |g| / FD_STEP ~ 1e-11; relative to the Hessian's largest entry.
FD_STEP, FD_RTOL = 1e-5, 1e-6
# The Jacobian by forward over reverse mode against reverse mode: round-off of the two orders.
JACOBIAN_RTOL = 1e-12
# Goddard optimum at 20 held intervals against COPS 3.0's h(t_f) = 1.01283 (published to six
# digits; the 20-interval discretization of the thrust's singular arc costs ~1e-6).
GODDARD_RTOL = 1e-5
# Both Hessians reach the same optimum of the same discrete problem (IPOPT's tol 1e-8).
SAME_OPTIMUM_RTOL = 1e-7
GODDARD_N = 20  # held thrust intervals (2 RK4 steps each): small enough for a fast test


@pytest.fixture(scope="module")
def goddard():
    return problems.goddard_rocket(num_intervals=GODDARD_N)


def test_hessian_of_the_lagrangian_matches_central_differences(goddard):
    p = goddard
    rng = np.random.default_rng(0)
    z = np.clip(p.z0 + 0.1 * rng.standard_normal(p.z0.size), p.lower, p.upper)
    w = np.array([0.7, -1.3])  # objective factor, multiplier of the final-mass constraint
    F, J, H = (np.asarray(v) for v in p.hessian(jnp.asarray(z), p.args, jnp.asarray(w)))
    F_ref, J_ref = (np.asarray(v) for v in p.evaluate(jnp.asarray(z), p.args))
    np.testing.assert_allclose(F, F_ref, rtol=JACOBIAN_RTOL)
    np.testing.assert_allclose(J, J_ref, rtol=0, atol=JACOBIAN_RTOL * np.abs(J_ref).max())

    fd = central_hessian(p, z, w, p.args)
    np.testing.assert_array_equal(H, H.T)
    np.testing.assert_allclose(H, fd, rtol=0, atol=FD_RTOL * np.abs(fd).max())


def central_hessian(p, z, w, args=None):
    """Central differences of the gradient of w . F (from the problem's reverse-mode Jacobian)."""

    def gradient(v):
        return np.asarray(p.evaluate(jnp.asarray(v), args)[1]).T @ w

    columns = [
        (gradient(z + FD_STEP * e) - gradient(z - FD_STEP * e)) / (2 * FD_STEP)
        for e in np.eye(z.size)
    ]
    return np.stack(columns, axis=1)


class _Counted:
    """A compiled program of the problem with the points (and weights) it was called at."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, z, args, *rest):
        self.calls.append(tuple(np.asarray(v).tobytes() for v in (z, *rest)))
        return self.fn(z, args, *rest)


@pytest.mark.parametrize("hessian", ["exact", "limited-memory"])
def test_one_evaluation_per_iterate_ipopt(goddard, hessian, monkeypatch):
    pytest.importorskip("cyipopt")
    p = goddard
    for name in ("forward", "evaluate", "hessian"):
        monkeypatch.setattr(p, name, _Counted(getattr(p, name)))
    res = jo.solve_ipopt(p, hessian=hessian)
    assert res.status_name == "converged", res.message
    k = int(res.iterations)
    # Each point's values, Jacobian and Hessian once; Jacobians at the iterates only (the start
    # and one per iteration), values only at the line search's trial points.
    for name in ("forward", "evaluate", "hessian"):
        calls = getattr(p, name).calls
        assert len(calls) == len(set(calls)), name
    assert len(p.evaluate.calls) == res.evaluations == k + 1
    assert len(p.forward.calls) == res.value_evaluations
    if hessian == "exact":
        # One per iteration's step (and one at x0 before IPOPT starts, the problem's first solve
        # with the exact Hessian: its compile).
        assert res.hessian_evaluations == k
        assert len(p.hessian.calls) - k in (0, 1)
    else:
        assert res.hessian_evaluations == 0 and not p.hessian.calls


def test_exact_hessian_needs_fewer_ipopt_iterations(goddard):
    pytest.importorskip("cyipopt")
    exact = jo.solve_ipopt(goddard, hessian="exact")
    lbfgs = jo.solve_ipopt(goddard, hessian="limited-memory")
    assert exact.status_name == lbfgs.status_name == "converged"
    # Measured: 15 iterations against 39 (100 intervals: 15 against > 500).
    assert int(exact.iterations) < int(lbfgs.iterations) / 2
    h_exact, h_lbfgs = -float(exact.objective), -float(lbfgs.objective)
    assert abs(h_exact / problems.GODDARD_ALTITUDE - 1.0) < GODDARD_RTOL
    assert abs(h_exact / h_lbfgs - 1.0) < SAME_OPTIMUM_RTOL


def test_trust_constr_exact_hessian_converges(goddard):
    res = jo.solve_scipy(goddard, "trust-constr", max_iter=300)  # hessian="auto": exact
    assert res.status_name == "converged", res.message
    assert res.hessian_evaluations > 0
    assert abs(-float(res.objective) / problems.GODDARD_ALTITUDE - 1.0) < GODDARD_RTOL
    # Measured: 42 iterations; BFGS stops at the iteration limit (1000) short of the optimum.
    assert int(res.iterations) < 100


def test_hessian_option_is_checked(goddard):
    with pytest.raises(ValueError, match="SLSQP takes no Hessian"):
        jo.solve_scipy(goddard, "SLSQP", hessian="exact")
    with pytest.raises(ValueError, match="`hessian` must be one of"):
        jo.solve_scipy(goddard, "trust-constr", hessian="newton")
    if jo.cyipopt_available():
        with pytest.raises(ValueError, match="`hessian` must be one of"):
            jo.solve_ipopt(goddard, hessian="bfgs")


def test_ipopt_import_error_names_the_package(goddard, monkeypatch):
    monkeypatch.setitem(sys.modules, "cyipopt", None)  # import cyipopt raises ImportError
    assert not jo.cyipopt_available()
    with pytest.raises(ImportError, match="pip install cyipopt-wheels"):
        jo.solve_ipopt(goddard)


# --------------------------------------------------------------------------------------------------
# Held controls per segment (`shoot(..., segment_args=)`): the same problem as a PiecewiseConstant.

# The same RK4 arithmetic with the held value read two ways (weights exactly 1 and 0): round-off.
SAME_PROBLEM_RTOL = 1e-12


def test_segment_args_give_the_signal_problem(goddard):
    seg = problems.goddard_rocket(num_intervals=GODDARD_N, control="segments")
    rng = np.random.default_rng(1)
    z = jnp.asarray(np.clip(goddard.z0 + 0.2 * rng.standard_normal(goddard.z0.size), 0.05, 0.95))
    z = z.at[-1].set(2.0)  # t_f = 0.2
    for a, b in zip(seg.evaluate(z, seg.args), goddard.evaluate(z, goddard.args), strict=True):
        np.testing.assert_allclose(a, b, rtol=SAME_PROBLEM_RTOL, atol=SAME_PROBLEM_RTOL)
    if jo.cyipopt_available():
        res = jo.solve_ipopt(seg)
        assert res.status_name == "converged", res.message
        assert abs(-float(res.objective) / problems.GODDARD_ALTITUDE - 1.0) < GODDARD_RTOL


def test_segment_args_multiple_shooting_and_checks():
    model = problems.GoddardRocket()  # reads args["thrust"]
    y0 = model.init_state()
    u = {"thrust": jnp.linspace(3.0, 0.0, 4)}
    single = jo.shoot(model, y0, 0.2, num_segments=4, steps_per_segment=3, segment_args=u)
    multi = jo.shoot(
        model, y0, 0.2, num_segments=4, steps_per_segment=3, segment_args=u,
        nodes=jo.interior_nodes(single),
    )  # fmt: skip
    np.testing.assert_allclose(multi.defects, 0.0, atol=SAME_PROBLEM_RTOL)
    for k in "hvm":
        np.testing.assert_allclose(multi.ys[k], single.ys[k], rtol=SAME_PROBLEM_RTOL)
    # The mass falls by thrust * duration / c in each segment (exact for RK4: linear).
    dm = np.asarray(u["thrust"]) * 0.05 / float(model.c)
    np.testing.assert_allclose(-np.diff(single.ys["m"]), dm, rtol=SAME_PROBLEM_RTOL)
    with pytest.raises(ValueError, match="not both"):
        jo.shoot(model, y0, 0.2, steps_per_segment=3, args=u, segment_args=u)
    with pytest.raises(ValueError, match="leading axis of num_segments = 3"):
        jo.shoot(model, y0, 0.2, num_segments=3, steps_per_segment=3, segment_args=u)
