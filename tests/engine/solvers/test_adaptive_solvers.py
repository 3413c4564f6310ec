"""Unrolled adaptive Runge-Kutta pairs (`UnrolledTsit5`, `UnrolledDopri5`, `UnrolledDopri8`).

Oracles: diffrax's own solvers with the same tableaus (one step, dense output, full adaptive solves
with the same controller), Kepler's equation (analytic orbit) and central finite differences for the
reverse-mode gradient through an adaptive run.
"""

import math

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim._solvers import _ode as S


# One step: the unrolled stages sum the same terms as diffrax's stage loop in another order, so y1
# and the dense output agree to a few ulps (|y| ~ 1).
STEP_REL_TOL = 1e-14
# The error estimate sum_i e_i k_i cancels terms of size |k| ~ h |f| ~ 0.1 down to ~1e-9 (Dopri8):
# compared in absolute terms, a few ulps of the stage size.
ERR_ABS_TOL = 1e-15
# Full adaptive solve at rtol 1e-9 over one orbit from dt0 = 0.1: the same accepted/rejected steps
# (the error estimate's round-off, ~1e-17 absolute, perturbs each step size by ~1e-9 relative) and
# states equal up to that perturbation of the truncation error. (diffrax's automatic dt0 would start
# with a step whose error estimate is pure round-off, so the two step sequences would differ by ~2%.)
# Measured: 3.4e-12 for Dopri8 (its error weights cancel most), 1.6e-13 for Tsit5/Dopri5.
SOLVE_REL_TOL = 1e-11
# Kepler's equation over one orbit with Dopri8 at rtol 1e-12: ~1e-10 relative position error
# (tests/engine/model/test_analytic.py uses the same bound for the Spacecraft model).
KEPLER_REL_TOL = 1e-8
# Gradient vs central differences: the adaptive step sequence is piecewise constant in the
# parameters, so finite differences see the frozen-step derivative plus controller switching noise.
GRAD_REL_TOL = 1e-6
FD_STEP = 1e-6  # relative step of the central differences

MU = 1.0  # nondimensional two-body problem (period 2 pi a^1.5)
ECC = 0.5
PAIRS = [
    (S.UnrolledTsit5, dfx.Tsit5),
    (S.UnrolledDopri5, dfx.Dopri5),
    (S.UnrolledDopri8, dfx.Dopri8),
]


def kepler_rhs(t, y, args):
    r = y["r"]
    r2 = r @ r
    return {"r": y["v"], "v": -args * r / (r2 * jnp.sqrt(r2))}


def y0_kepler(e=ECC):
    """Periapsis of an orbit with a = 1, eccentricity e, inclined 0.3 rad."""
    rp, vp = 1.0 - e, math.sqrt(MU * (1.0 + e) / (1.0 - e))
    ci, si = math.cos(0.3), math.sin(0.3)
    return {"r": jnp.array([rp, 0.0, 0.0]), "v": jnp.array([0.0, vp * ci, vp * si])}


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


# ------------------------------------------------------------------------------- one step
@pytest.mark.parametrize("unrolled_cls, diffrax_cls", PAIRS)
def test_step_equals_diffrax(unrolled_cls, diffrax_cls):
    term = dfx.ODETerm(kepler_rhs)
    y0, h = y0_kepler(), 0.1

    @jax.jit
    def two_steps(solver, y0):
        # A first step, then a second one that uses the FSAL stage from the solver state.
        st = solver.init(term, 0.0, h, y0, MU)
        y1, e1, _, st, _ = solver.step(term, 0.0, h, y0, MU, st, False)
        y2, e2, dense, _, _ = solver.step(term, h, 2 * h, y1, MU, st, False)
        interp = solver.interpolation_cls(t0=h, t1=2 * h, **dense)
        ys = [interp.evaluate(h + x * h) for x in (0.0, 0.25, 0.6, 1.0)]
        return y1, e1, y2, e2, ys

    got = two_steps(unrolled_cls(), y0)
    want = two_steps(diffrax_cls(), y0)
    y1, e1, y2, e2, ys = got
    for key in ("r", "v"):
        assert rel(y1[key], want[0][key]) <= STEP_REL_TOL
        assert rel(y2[key], want[2][key]) <= STEP_REL_TOL
        assert np.max(np.abs(e1[key] - want[1][key])) <= ERR_ABS_TOL
        assert np.max(np.abs(e2[key] - want[3][key])) <= ERR_ABS_TOL
        for a, b in zip(ys, want[4]):
            assert rel(a[key], b[key]) <= STEP_REL_TOL
        # Dense output hits the step's end points (the interpolant is full order, not Hermite).
        assert rel(ys[-1][key], y2[key]) <= STEP_REL_TOL
    # The error estimate is not trivially zero (the test above would then be vacuous).
    assert np.max(np.abs(e2["r"])) > 1e-3 * 10.0**-unrolled_cls._order


def test_num_stages_and_fsal_for_stats():
    # `_simulate._stages` and `_clocked._solver_info` read `tableau` to count RHS evaluations.
    for unrolled_cls, diffrax_cls in PAIRS:
        assert unrolled_cls.tableau is diffrax_cls.tableau
        assert unrolled_cls.tableau.fsal
    assert isinstance(js.Dopri8().to_diffrax(), S.UnrolledDopri8)
    assert isinstance(js.Dopri8(unrolled=False).to_diffrax(), dfx.Dopri8)
    assert isinstance(js.Tsit5(unrolled=True).to_diffrax(), S.UnrolledTsit5)
    assert isinstance(js.Tsit5().to_diffrax(), dfx.Tsit5)  # default: diffrax's loop
    assert isinstance(js.Dopri5(unrolled=False).to_diffrax(), dfx.Dopri5)


# --------------------------------------------------------------------------- full solves
def _solve(solver, y0, ts, rtol, jump_ts=None):
    return dfx.diffeqsolve(
        dfx.ODETerm(kepler_rhs),
        solver,
        0.0,
        ts[-1],
        0.1,  # dt0: diffrax's automatic first step (0.01 here) has a round-off-level error estimate
        y0,
        MU,
        saveat=dfx.SaveAt(ts=ts),
        stepsize_controller=dfx.PIDController(rtol=rtol, atol=rtol, jump_ts=jump_ts),
        max_steps=100_000,
    )


_solve_jit = eqx.filter_jit(_solve)


@pytest.mark.parametrize("unrolled_cls, diffrax_cls", PAIRS)
def test_adaptive_solve_equals_diffrax(unrolled_cls, diffrax_cls):
    # One orbit sampled at off-step times (dense output), with a jump time inside (made_jump:
    # the FSAL stage must be recomputed after it).
    ts = jnp.linspace(0.0, 2 * math.pi, 13)
    jump = jnp.array([1.234])
    got = _solve_jit(unrolled_cls(), y0_kepler(), ts, 1e-9, jump)
    want = _solve_jit(diffrax_cls(), y0_kepler(), ts, 1e-9, jump)
    for k in ("num_accepted_steps", "num_rejected_steps"):
        assert int(got.stats[k]) == int(want.stats[k])
    assert int(got.stats["num_accepted_steps"]) > 20
    for key in ("r", "v"):
        assert rel(got.ys[key], want.ys[key]) <= SOLVE_REL_TOL


def test_vmap_solve_matches_single_runs():
    # Under vmap the FSAL recomputation is an un-batched cond (one member's jump recomputes the
    # first stage for all, which gives the same value for the others); each member keeps its own
    # steps. Same call as in the test above (its compiled single run is reused).
    ts = jnp.linspace(0.0, 2 * math.pi, 13)
    jump = jnp.array([1.234])
    eccs = (0.1, 0.6)
    y0s = jax.tree_util.tree_map(lambda *u: jnp.stack(u), *[y0_kepler(x) for x in eccs])
    batched = eqx.filter_jit(
        jax.vmap(lambda y: _solve(S.UnrolledTsit5(), y, ts, 1e-9, jump).ys["r"])
    )(y0s)
    steps = []
    for i, x in enumerate(eccs):
        single = _solve_jit(S.UnrolledTsit5(), y0_kepler(x), ts, 1e-9, jump)
        steps.append(int(single.stats["num_steps"]))
        assert rel(batched[i], single.ys["r"]) <= STEP_REL_TOL
    assert steps[0] != steps[1]  # the members do take different steps


# --------------------------------------------------------------- through jaxsim.simulate
class PointKepler(js.AbstractDynamicObject):
    """Two-body point mass, state `{"r_BN_N", "v_BN_N"}` (nondimensional, gravity parameter mu)."""

    mu: jax.Array
    name: str = eqx.field(static=True, default="point")

    def init_state(self, r_BN_N=(0.0, 0.0, 0.0), v_BN_N=(0.0, 0.0, 0.0)):
        return {"r_BN_N": jnp.asarray(r_BN_N, float), "v_BN_N": jnp.asarray(v_BN_N, float)}

    def drift(self, t, y, args):
        r = y["r_BN_N"]
        r2 = r @ r
        return {"r_BN_N": y["v_BN_N"], "v_BN_N": -self.mu * r / (r2 * jnp.sqrt(r2))}


def kepler_position(t, e=ECC):
    """Analytic position at time t from periapsis (a = 1, mu = 1, inclination 0.3 rad)."""
    E = t
    for _ in range(50):  # Newton on Kepler's equation E - e sin E = M (M = t)
        E = E - (E - e * np.sin(E) - t) / (1 - e * np.cos(E))
    x, y = np.cos(E) - e, math.sqrt(1 - e * e) * np.sin(E)
    return np.array([x, y * math.cos(0.3), y * math.sin(0.3)])


@pytest.fixture(scope="module")
def kepler_run():
    y = y0_kepler()
    model = PointKepler(jnp.asarray(MU))
    y0 = model.init_state(y["r"], y["v"])
    ts = np.linspace(0.0, 2 * math.pi, 9)
    return model, y0, ts


def test_simulate_dopri8_meets_kepler(kepler_run):
    model, y0, ts = kepler_run
    sol = js.simulate(model, y0, ts=ts, solver=js.Dopri8(), rtol=1e-12, atol=1e-12, outputs=False)
    for t, r in zip(ts, np.asarray(sol.ys["r_BN_N"])):
        r_exact = kepler_position(t)
        err = np.linalg.norm(r - r_exact) / np.linalg.norm(r_exact)
        assert err <= KEPLER_REL_TOL, f"t={t}: {err:.3e}"
    # RHS count: FSAL, 13 evaluations per step (also for the unrolled solver).
    n = int(sol.stats["num_steps"]) + int(sol.stats["num_rejected_steps"])
    assert int(sol.stats["num_rhs"]) == 13 * n


def test_grad_through_adaptive_run_matches_central_differences(kepler_run):
    # d|r(T)|^2 / d mu with diffrax's default RecursiveCheckpointAdjoint through the unrolled stages.
    _, y0, _ = kepler_run
    ts = np.array([0.0, 3.0])

    def final(mu):
        sol = js.simulate(
            PointKepler(mu), y0, ts=ts, solver=js.Dopri8(), rtol=1e-10, atol=1e-10, outputs=False
        )
        r = sol.ys["r_BN_N"][-1]
        return r @ r

    vg = jax.jit(jax.value_and_grad(final))  # one compile serves the gradient and the differences
    g = float(vg(jnp.asarray(MU))[1])
    d = FD_STEP * MU
    fd = (float(vg(jnp.asarray(MU + d))[0]) - float(vg(jnp.asarray(MU - d))[0])) / (2 * d)
    assert abs(g) > 0.1
    assert abs(g - fd) <= GRAD_REL_TOL * abs(fd), (g, fd)


def test_unrolled_tableau_must_be_explicit():
    with pytest.raises(ValueError, match="tableau"):

        class _Bad(S.AbstractUnrolledERK):
            tableau = dfx.Kvaerno3.tableau
            interpolation_cls = dfx.Kvaerno3.interpolation_cls
            _order = 3
