"""`jaxsim.Verner9`: Verner's "most efficient" 9(8) pair and its 8th-order interpolant.

Oracles: the Runge-Kutta order conditions (Butcher's rooted trees, exact rational arithmetic on
the float64 coefficients), measured convergence orders on Kepler's problem against Kepler's
equation, diffrax's `diffeqsolve` with the same pair (same steps and samples), central finite
differences for a gradient through the dense output.
"""

import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim._cores import _adaptive as ac
from jaxsim._solvers._ode import _verner


# Order conditions on the float64 coefficients (each ~1e-16 relative from its published decimal
# value, sums of up to 21 terms of size <= 35): measured residuals <= 8e-16 for the weights.
WEIGHT_ORDER_TOL = 1e-14
# The interpolant's coefficients reach 320 in size: measured residuals <= 3.1e-12.
DENSE_ORDER_TOL = 1e-11
# A condition of the next order is violated by far more (measured >= 1.8e-6): the order is exact.
NEXT_ORDER_MIN = 1e-8
# Measured convergence orders (halving the step) within this of the nominal ones.
ORDER_SLACK = 0.4
# Kepler e = 0.5 (a = 1) samples at rtol 1e-12, between steps (interpolated): measured 8.3e-13.
SAMPLE_REL_TOL = 1e-10
# Event time (apoapsis crossing) at rtol 1e-12 through the interpolant and diffrax's root
# finder: measured 6.8e-13 (Dopri8: 3.3e-12).
EVENT_TIME_TOL = 1e-10
# Looped vs unrolled stages (sums in another order) at rtol 1e-10, a = 1: a flipped step
# decision moves a sample by ~rtol; 100 x rtol (measured 2.2e-13, same 29/10 steps).
LOOP_STATE_TOL = 1e-8
# Gradient vs central differences (relative step FD_STEP), as in tests/engine/cores/test_adaptive_core.py.
GRAD_REL_TOL = 1e-6
FD_STEP = 1e-6

ECC = 0.5


@functools.cache
def _trees(n):
    """Rooted trees with n nodes, each a sorted tuple of its subtrees."""
    if n == 1:
        return ((),)
    found = set()

    def split(rest, acc):
        if rest == 0:
            found.add(tuple(sorted(acc)))
            return
        for m in range(1, rest + 1):
            for t in _trees(m):
                split(rest - m, acc + [t])

    split(n - 1, [])
    return tuple(sorted(found))


def _gamma(t):
    out = 1 + sum(_size(c) for c in t)
    for c in t:
        out *= _gamma(c)
    return out


def _size(t):
    return 1 + sum(_size(c) for c in t)


def _exact_tableau():
    """The 21-stage tableau (step, first-same-as-last stage, interpolant's stages) as exact
    fractions of the float64 values used: `(A, b, b_hat, P)`."""
    n = _verner.DENSE_STAGES
    fr = Fraction
    a = [[fr(0)] * n for _ in range(n)]
    for i, row in enumerate(_verner._VERNER9_A, start=1):
        for j, x in enumerate(row):
            a[i][j] = fr(x)
    b = [fr(x) for x in _verner._VERNER9_B] + [fr(0)] * (n - 16)
    b_hat = [x + fr(d) for x, d in zip(b, list(_verner._VERNER9_D) + [0.0] * (n - 16))]
    p = [[fr(x) for x in row] for row in _verner._VERNER9_P]
    c = [fr(0)] + [fr(x) for x in _verner._VERNER9_C]
    return a, b, b_hat, p, c


def _residuals(weights, order, a):
    """max |sum_i w_i Phi_i(t) - 1/gamma(t)| over the trees of each order 1..order (`weights(n)`:
    the weights for trees of n nodes and the target factor, for the interpolant theta^n)."""
    memo = {}
    n = len(a)

    def phi(t):  # the stage vector of tree t: prod over subtrees of A phi(subtree)
        if t not in memo:
            v = [Fraction(1)] * n
            for sub in t:
                g = phi(sub)
                v = [x * sum(a[i][j] * g[j] for j in range(i) if a[i][j]) for i, x in enumerate(v)]
            memo[t] = v
        return memo[t]

    out = {}
    for m in range(1, order + 1):
        w, scale = weights(m)
        out[m] = max(
            abs(float(sum(wi * gi for wi, gi in zip(w, phi(t))) - scale / _gamma(t)))
            for t in _trees(m)
        )
    return out


def test_tableau_rows_sum_to_the_nodes():
    a, _, _, _, c = _exact_tableau()
    assert max(abs(float(sum(row) - ci)) for row, ci in zip(a, c)) <= WEIGHT_ORDER_TOL


@pytest.mark.parametrize("which,order", [("b", 9), ("b_hat", 8)])
def test_weights_satisfy_the_order_conditions_exactly_to_their_order(which, order):
    a, b, b_hat, _, _ = _exact_tableau()
    w = b if which == "b" else b_hat
    res = _residuals(lambda m: (w, 1), order + 1, a)
    assert max(res[m] for m in range(1, order + 1)) <= WEIGHT_ORDER_TOL, res
    assert res[order + 1] >= NEXT_ORDER_MIN, res


@pytest.mark.parametrize("theta", [Fraction(1, 4), Fraction(3, 5), Fraction(1)], ids=str)
def test_interpolant_is_of_order_8(theta):
    a, b, _, p, _ = _exact_tableau()

    def weights(m):
        return [sum(pij * theta ** (j + 1) for j, pij in enumerate(row)) for row in p], theta**m

    res = _residuals(weights, 8, a)
    assert max(res.values()) <= DENSE_ORDER_TOL, res
    if theta == 1:  # the interpolant ends at the step's solution
        bt, _ = weights(1)
        assert max(abs(float(x - y)) for x, y in zip(bt, b)) <= DENSE_ORDER_TOL


def kepler_state(t, e=ECC):
    """Position and velocity at time t on the planar orbit a = 1, mu = 1, periapsis at t = 0."""
    ecc_anom = t
    for _ in range(60):
        ecc_anom -= (ecc_anom - e * math.sin(ecc_anom) - t) / (1.0 - e * math.cos(ecc_anom))
    c, s = math.cos(ecc_anom), math.sin(ecc_anom)
    q = math.sqrt(1.0 - e * e)
    rdot = 1.0 / (1.0 - e * c)
    return np.array([c - e, q * s, -s * rdot, q * c * rdot])


def _kepler_f(t, y):
    r = y[:2]
    r2 = r @ r
    return jnp.concatenate([y[2:], -r / (r2 * jnp.sqrt(r2))])


PAIR = ac.pair_of(js.Verner9._unrolled_cls)


@jax.jit
def _fixed_steps(h_and_n):
    """`n` fixed steps of size h from periapsis with the 9th-order weights and, apart, with the
    8th-order ones (`y1 - error`): both final states."""
    h, n = h_and_n

    def step(t0, y):
        return ac.step_unrolled(PAIR, _kepler_f, t0, t0 + h, y, _kepler_f(t0, y))

    def body(i, carry):
        y, y_hat = carry
        y1, _, _, _ = step(i * h, y)
        y1_hat, err, _, _ = step(i * h, y_hat)
        return y1, y1_hat - err

    y0 = jnp.asarray(kepler_state(0.0))
    return jax.lax.fori_loop(0, n, body, (y0, y0))


def test_convergence_orders_on_keplers_problem():
    t_end = 2.0
    errs = []
    for n in (16, 32):
        y, y_hat = _fixed_steps((jnp.asarray(t_end / n), n))
        exact = kepler_state(t_end)
        errs.append([np.linalg.norm(np.asarray(v) - exact) for v in (y, y_hat)])
    (e9, e8), (e9h, e8h) = errs
    assert abs(math.log2(e9 / e9h) - 9) <= ORDER_SLACK, (e9, e9h)
    assert abs(math.log2(e8 / e8h) - 8) <= ORDER_SLACK, (e8, e8h)


def test_interpolant_converges_at_order_8():
    # Local error of the dense output at the middle of one step from periapsis: O(h^9).
    errs = []
    for h in (0.4, 0.2):
        y0 = jnp.asarray(kepler_state(0.0))
        t0, t1 = jnp.asarray(0.0), jnp.asarray(h)
        _, _, ks, _ = ac.step_unrolled(PAIR, _kepler_f, t0, t1, y0, _kepler_f(t0, y0))
        ks = ac.dense_stages(PAIR, _kepler_f, t0, t1, y0, ks)
        mid = PAIR.interpolation(t0=0.0, t1=h, y0=y0, y1=None, k=ks).evaluate(0.5 * h)
        errs.append(np.linalg.norm(np.asarray(mid) - kepler_state(0.5 * h)))
    assert abs(math.log2(errs[0] / errs[1]) - 9) <= ORDER_SLACK, errs


class PlanarKepler(js.AbstractDynamicObject):
    mu: jax.Array
    name: str = "kepler"

    def init_state(self):
        x = kepler_state(0.0)
        return {"r": jnp.asarray(x[:2]), "v": jnp.asarray(x[2:])}

    def drift(self, t, y, args):
        r = y["r"]
        r2 = r @ r
        return {"r": y["v"], "v": -self.mu * r / (r2 * jnp.sqrt(r2))}


def test_samples_between_steps_match_keplers_equation():
    model = PlanarKepler(jnp.asarray(1.0))
    ts = np.linspace(0.0, 2 * math.pi, 23)[1:]
    sol = js.simulate(
        model, model.init_state(), ts=ts, solver=js.Verner9(), rtol=1e-12, atol=1e-12,
        outputs=False,
    )  # fmt: skip
    for t, r in zip(ts, np.asarray(sol.ys["r"])):
        assert np.linalg.norm(r - kepler_state(t)[:2]) <= SAMPLE_REL_TOL, t


def _sampled_r2(mu, unrolled=True):
    model = PlanarKepler(mu)
    sol = js.simulate(
        model, model.init_state(), ts=jnp.asarray([0.5, 1.7, 2.9]),
        solver=js.Verner9(unrolled=unrolled), rtol=1e-10, atol=1e-10, outputs=False,
    )  # fmt: skip
    return jnp.sum(sol.ys["r"] ** 2)


@pytest.mark.parametrize("unrolled", [True, False], ids=["unrolled", "looped"])
def test_gradient_through_samples_matches_central_differences(unrolled):
    # Reverse mode (the default discrete adjoint) through the interpolant's extra stages.
    fn = functools.partial(_sampled_r2, unrolled=unrolled)
    g = float(jax.jit(jax.grad(fn))(jnp.asarray(1.0)))
    value = jax.jit(fn)
    fd = float(value(jnp.asarray(1.0 + FD_STEP))) - float(value(jnp.asarray(1.0 - FD_STEP)))
    fd /= 2 * FD_STEP
    assert abs(g) > 0.1
    assert abs(g - fd) <= GRAD_REL_TOL * abs(fd), (g, fd)


def test_event_located_through_the_interpolant():
    # Events run on the diffrax path (`UnrolledVerner9`, the interpolant's stages in every step):
    # the orbit crosses the periapsis line again at apoapsis, t = pi (a = 1, mu = 1).
    model = PlanarKepler(jnp.asarray(1.0))
    cross = js.Event(lambda t, y, args: y["r"][1], direction="falling", terminal=True)
    sol = js.simulate(
        model, model.init_state(), 5.0, solver=js.Verner9(), rtol=1e-12, atol=1e-12,
        events=(cross,), max_events=1, outputs=False,
    )  # fmt: skip
    assert abs(float(sol.t_final) - math.pi) <= EVENT_TIME_TOL, float(sol.t_final)


def test_stage_loop_equals_unrolled_stages():
    # `unrolled=False`: the 17 stages in a loop and the interpolant's 4 appended to the stacked
    # stages; same steps, samples equal to round-off.
    model = PlanarKepler(jnp.asarray(1.0))
    ts = np.linspace(0.0, 2 * math.pi, 9)
    kw = dict(ts=ts, rtol=1e-10, atol=1e-10, outputs=False)
    a = js.simulate(model, model.init_state(), solver=js.Verner9(), **kw)
    b = js.simulate(model, model.init_state(), solver=js.Verner9(unrolled=False), **kw)
    for key in ("num_steps", "num_rejected_steps"):
        assert abs(int(a.stats[key]) - int(b.stats[key])) <= 1, key
    np.testing.assert_allclose(np.asarray(a.ys["r"]), np.asarray(b.ys["r"]), atol=LOOP_STATE_TOL)
