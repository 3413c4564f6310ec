"""Hermite-Simpson collocation (`jaxsim.optimize.collocate`, issue 42 item 4): order, held inputs,
optima, free final time, mesh refinement, bad input.

Oracles: the harmonic oscillator's closed form (defects of the exact nodes scale as h^5, the
midpoint cubic as h^4); a double integrator under a held input switching at the nodes, whose
exact solution is piecewise quadratic (Simpson's rule and the Hermite cubic are exact: defects at
round-off); the minimum-energy transfer of a double integrator with a held control on K
intervals, whose discrete optimum is a least-norm linear problem solved in closed form, and its
single-shooting optimum; central differences of the defects in the horizon; an eccentric Kepler
orbit for the mesh refinement (the error concentrates at periapsis).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim import optimize as jo
from jaxsim.controls import PiecewiseConstant


# h^5 scaling of the local error: halving h divides the defects by 32 (in [24, 40] allows the
# next term of the expansion at these step sizes: measured 31.9 and 32.0).
ORDER_RATIO = (24.0, 40.0)
# A piecewise-quadratic solution is reproduced exactly: only round-off of O(10) operations on
# O(1) values remains.
EXACT_TOL = 1e-13
# SLSQP at ftol 1e-14 on a 2-constraint quadratic problem: the optimum to about 1e-10.
OPTIMUM_RTOL = 1e-8
# Central differences of the defects in T (step 1e-6 on T = 1.3: truncation ~1e-12, round-off
# ~1e-10 of values O(1)).
FD_STEP = 1e-6
FD_TOL = 1e-7
# Mesh refinement target (scaled local error) and the intervals allowed to reach it.
REFINE_TOL = 1e-7


class Oscillator(js.AbstractDynamicObject):
    omega: float = 1.0
    name: str = "osc"

    def init_state(self):
        return {"x": jnp.array([1.0, 0.0])}

    def drift(self, t, y, args):
        x = y["x"]
        return {"x": jnp.stack([x[1], -(self.omega**2) * x[0]])}


class DoubleIntegrator(js.AbstractDynamicObject):
    """x'' = u(t) with u a held input; q' = u^2 (the energy as a state)."""

    u: PiecewiseConstant
    name: str = "di"

    def init_state(self):
        return {"x": jnp.zeros(2), "q": jnp.zeros(())}

    def drift(self, t, y, args):
        u = self.u(t)
        return {"x": jnp.stack([y["x"][1], u]), "q": u**2}

    def breakpoints(self):
        return self.u.breakpoints()


class Kepler(js.AbstractDynamicObject):
    name: str = "kepler"

    def init_state(self):
        return {"r": jnp.array([0.3, 0.0]), "v": jnp.array([0.0, jnp.sqrt(1.7 / 0.3)])}

    def drift(self, t, y, args):
        r = y["r"]
        return {"r": y["v"], "v": -r / jnp.linalg.norm(r) ** 3}


def _oscillator_nodes(T, K):
    t = jnp.linspace(0.0, T, K + 1)
    return {"x": jnp.stack([jnp.cos(t), -jnp.sin(t)], axis=1)[1:]}


def test_defects_and_midpoints_are_fourth_order():
    model, y0, T = Oscillator(), {"x": jnp.array([1.0, 0.0])}, 2.0
    defects, mids = [], []
    for K in (8, 16, 32):
        col = jo.collocate(model, y0, _oscillator_nodes(T, K), T)
        assert col.defects.shape == (2 * K,)
        defects.append(float(jnp.max(jnp.abs(col.defects))))
        mids.append(float(jnp.max(jnp.abs(col.ys_mid["x"][:, 0] - jnp.cos(col.ts_mid)))))
    for a, b in zip(defects, defects[1:]):
        assert ORDER_RATIO[0] < a / b < ORDER_RATIO[1], defects
    # The midpoint cubic: h^4 (a factor 16 per halving).
    for a, b in zip(mids, mids[1:]):
        assert 12.0 < a / b < 20.0, mids


def _held_exact(u, ts):
    """States of x'' = u (held on the intervals of ts), q' = u^2, from rest: node values."""
    x, v, q, out = 0.0, 0.0, 0.0, []
    for k in range(len(u)):
        h = ts[k + 1] - ts[k]
        x, v, q = x + v * h + 0.5 * u[k] * h * h, v + u[k] * h, q + u[k] ** 2 * h
        out.append((x, v, q))
    return np.array(out)


def test_held_input_switching_at_nodes_is_exact():
    """Each interval reads its own held value at both ends (the interval is declared as the
    held step): evaluating the left-continuous input at the interval's start would read the
    previous value and give defects of O(h^2 |du|)."""
    T = 3.0
    u = np.array([1.0, -2.0, 0.5, 3.0, -1.0, 0.25])
    mesh = np.array([0.0, 0.1, 0.3, 0.45, 0.7, 0.85, 1.0])
    ts = T * mesh
    model = DoubleIntegrator(PiecewiseConstant(ts[1:-1], u))
    exact = _held_exact(u, ts)
    nodes = {"x": jnp.asarray(exact[:, :2]), "q": jnp.asarray(exact[:, 2])}
    col = jo.collocate(model, model.init_state(), nodes, T, mesh=mesh)
    assert float(jnp.max(jnp.abs(col.defects))) < EXACT_TOL
    np.testing.assert_allclose(col.ts, ts, rtol=0, atol=1e-15)


K_ENERGY = 8


def _energy_reference():
    """min h sum u_k^2 s.t. x(1) = 1, v(1) = 0 (u held on K equal intervals of [0, 1]): the
    least-norm solution of the two linear end conditions, in closed form."""
    h = 1.0 / K_ENERGY
    t_next = h * np.arange(1, K_ENERGY + 1)
    A = np.stack([h * np.ones(K_ENERGY), h * h / 2 + h * (1.0 - t_next)])
    b = np.array([0.0, 1.0])
    u = A.T @ np.linalg.solve(A @ A.T, b)
    return u, h * np.sum(u**2)


def _energy_collocation(x, a):
    times = jnp.arange(1, K_ENERGY) / K_ENERGY
    model = DoubleIntegrator(PiecewiseConstant(times, x["u"]))
    col = jo.collocate(model, model.init_state(), x["nodes"], 1.0)
    end = jax.tree.map(lambda v: v[-1], col.ys)
    eq = jnp.concatenate([col.defects, end["x"] - jnp.array([1.0, 0.0])])
    return end["q"], eq, None


def _energy_shooting(x, a):
    times = jnp.arange(1, K_ENERGY) / K_ENERGY
    model = DoubleIntegrator(PiecewiseConstant(times, x["u"]))
    shot = jo.shoot(model, model.init_state(), 1.0, num_segments=K_ENERGY, steps_per_segment=1)
    end = jax.tree.map(lambda v: v[-1], shot.ys)
    return end["q"], end["x"] - jnp.array([1.0, 0.0]), None


def test_minimum_energy_optimum_equals_closed_form_and_shooting():
    u_ref, j_ref = _energy_reference()
    x0 = {
        "u": jnp.ones(K_ENERGY),
        "nodes": {"x": jnp.zeros((K_ENERGY, 2)), "q": jnp.zeros(K_ENERGY)},
    }
    res = jo.solve_scipy(jo.Problem.combined(_energy_collocation, x0), tol=1e-14)
    assert res.status_name == "converged", res
    assert abs(float(res.objective) / j_ref - 1.0) < OPTIMUM_RTOL
    np.testing.assert_allclose(res.x["u"], u_ref, rtol=0, atol=OPTIMUM_RTOL * np.abs(u_ref).max())
    shot = jo.solve_scipy(
        jo.Problem.combined(_energy_shooting, {"u": jnp.ones(K_ENERGY)}), tol=1e-14
    )
    assert shot.status_name == "converged"
    assert abs(float(res.objective) / float(shot.objective) - 1.0) < OPTIMUM_RTOL
    # The continuous problem's optimum is 12 (u = 6 - 12 t): K = 8 held values are above it.
    assert 12.0 < j_ref < 12.0 * (1 + 1.0 / K_ENERGY)


def test_free_final_time_defects_differentiable():
    model, y0, K = Oscillator(), {"x": jnp.array([1.0, 0.0])}, 5
    nodes = _oscillator_nodes(1.0, K)
    mesh = np.array([0.0, 0.15, 0.4, 0.6, 0.8, 1.0])

    def defects(T):
        return jo.collocate(model, y0, nodes, T, mesh=mesh).defects

    T = 1.3
    jac = jax.jacfwd(defects)(T)
    fd = (defects(T + FD_STEP) - defects(T - FD_STEP)) / (2 * FD_STEP)
    np.testing.assert_allclose(jac, fd, rtol=0, atol=FD_TOL)
    np.testing.assert_allclose(jax.jacrev(defects)(T), jac, rtol=1e-12, atol=1e-14)
    # Under jit, the horizon traced: the same values.
    np.testing.assert_allclose(jax.jit(defects)(T), defects(T), rtol=1e-14, atol=1e-15)


def _solve_ivp(model, y0, T, mesh, guess):
    """Nodes with zero defects (an initial-value problem solved by collocation, through the
    problem layer)."""

    def functions(x, a):
        return 0.0 * x["r"][0, 0], jo.collocate(model, y0, x, T, mesh=mesh).defects, None

    if guess is None:  # a loose run (rtol 1e-4) at the nodes
        ts = T * np.asarray(mesh)
        sol = js.simulate(model, y0, T, ts=ts, solver=js.Dopri5(), rtol=1e-4, atol=1e-4)
        guess = jax.tree.map(lambda v: v[1:], sol.ys)
    x0 = guess
    res = jo.solve_scipy(jo.Problem.combined(functions, x0), tol=1e-14, constraint_tol=1e-11)
    assert res.status_name == "converged", res
    return jo.collocate(model, y0, res.x, T, mesh=mesh)


def test_mesh_refinement_reaches_the_tolerance_where_the_error_is():
    """An orbit of eccentricity 0.7 from periapsis, a quarter period: a uniform mesh's error sits
    in the first intervals; refinement splits those and the refined solve meets the tolerance."""
    model = Kepler()
    y0 = model.init_state()
    T = 1.2
    mesh = np.linspace(0.0, 1.0, 9)
    col = _solve_ivp(model, y0, T, mesh, None)
    err = np.asarray(jo.mesh_errors(model, col))
    assert err.shape == (8,)
    assert err.max() > REFINE_TOL
    assert np.argmax(err) == 0  # periapsis: the fastest part of the arc
    for _ in range(4):
        if err.max() <= REFINE_TOL:
            break
        new = jo.refine_mesh(mesh, err, REFINE_TOL)
        # Intervals within the tolerance kept as they were.
        for k in np.nonzero(err <= REFINE_TOL)[0]:
            assert mesh[k] in new and mesh[k + 1] in new
        col = _solve_ivp(model, y0, T, new, jo.resample(col, new))
        mesh = new
        err = np.asarray(jo.mesh_errors(model, col))
    assert err.max() <= REFINE_TOL, (len(mesh), err)
    # Against the accurate run over the whole arc.
    sol = js.simulate(model, y0, T, solver=js.Dopri8(), rtol=1e-12, atol=1e-12)
    r_end = np.asarray(col.ys["r"][-1])
    assert np.max(np.abs(r_end - np.asarray(sol.ys["r"][-1]))) < 20 * REFINE_TOL * len(mesh)


def test_resample_reproduces_the_cubics():
    model, y0, T, K = Oscillator(), {"x": jnp.array([1.0, 0.0])}, 2.0, 16
    col = jo.collocate(model, y0, _oscillator_nodes(T, K), T)
    same = jo.resample(col, np.linspace(0.0, 1.0, K + 1))
    np.testing.assert_allclose(same["x"], col.ys["x"][1:], rtol=0, atol=1e-15)
    fine = np.linspace(0.0, 1.0, 4 * K + 1)
    out = jo.resample(col, fine)["x"][:, 0]
    np.testing.assert_allclose(out, np.cos(T * fine[1:]), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "mesh, match",
    [
        (np.array([0.0, 0.5, 0.4, 1.0]), "increase strictly"),
        (np.array([0.1, 0.5, 1.0]), "from 0.0 to\n?.*1.0"),
        (np.array([[0.0, 1.0]]), "1-D"),
    ],
)
def test_bad_mesh_refused_by_name(mesh, match):
    model, y0 = Oscillator(), {"x": jnp.array([1.0, 0.0])}
    nodes = {"x": jnp.zeros((mesh.size - 1 if mesh.ndim == 1 else 1, 2))}
    with pytest.raises(ValueError, match=r"collocate: `mesh` \(fractions of the horizon, -\)"):
        jo.collocate(model, y0, nodes, 1.0, mesh=mesh)
    with pytest.raises(ValueError, match=match):
        jo.collocate(model, y0, nodes, 1.0, mesh=mesh)


def test_bad_nodes_and_horizon_refused_by_name():
    model, y0 = Oscillator(), {"x": jnp.array([1.0, 0.0])}
    with pytest.raises(ValueError, match=r"leaf \['x'\] has shape \(4, 3\)"):
        jo.collocate(model, y0, {"x": jnp.zeros((4, 3))}, 1.0)
    with pytest.raises(ValueError, match=r"K = 3 from the mesh"):
        jo.collocate(model, y0, {"x": jnp.zeros((4, 2))}, 1.0, mesh=[0.0, 0.2, 0.5, 1.0])
    with pytest.raises(ValueError, match="structure of `y0`"):
        jo.collocate(model, y0, {"y": jnp.zeros((4, 2))}, 1.0)
    with pytest.raises(ValueError, match="t1"):
        jo.collocate(model, y0, {"x": jnp.zeros((4, 2))}, -1.0)
    with pytest.raises(ValueError, match="refine_mesh: `errors` must have one entry"):
        jo.refine_mesh([0.0, 0.5, 1.0], [1.0], 1e-6)
    with pytest.raises(ValueError, match=r"refine_mesh: `tol` \(scaled error, -\)"):
        jo.refine_mesh([0.0, 0.5, 1.0], [1.0, 1.0], 0.0)
