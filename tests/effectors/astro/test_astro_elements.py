"""Orbital elements (`effectors.astro`): live comparison with Basilisk's `orbitalMotion` (elem2rv,
rv2elem, anomalies, equinoctial elements), round trips over every conic, the edge cases refused by
name, and `vmap` / `grad` checked against central differences."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from effectors import astro


MU = astro.EARTH.mu  # [m^3/s^2]
# Basilisk's orbitalMotion and ours evaluate the same closed forms in float64 (Basilisk by acos,
# ours by atan2): measured <= 1.3e-14 relative in a, 1e-13 rad in angles over 400 random orbits.
BSK_REL = 1e-12
BSK_ANGLE = 1e-12  # [rad]
# Round trips elements -> r, v -> elements: a few ulps per operation on O(1) quantities.
ROUND_TRIP_REL = 1e-12
ROUND_TRIP_ANGLE = 1e-11  # [rad] (near-circular orbits lose digits in omega and f; not here)
# Kepler's equation solved to a few ulps of angles ~ 1 (|M| up to 20 rad).
KEPLER_RESIDUAL = 1e-13  # [rad]
# Central differences with step 1e-6 (relative) on smooth functions: truncation ~1e-10, round-off
# ~1e-10 relative; the bar leaves two decades.
FD_REL = 1e-7
FD_STEP = 1e-6


def _random_orbits(n, seed, kind):
    """`n` random elements of a conic `kind` ("elliptic" or "hyperbolic"), angles away from the
    0/pi points where Basilisk's acos loses digits."""
    rng = np.random.default_rng(seed)
    if kind == "elliptic":
        e = rng.uniform(0.001, 0.95, n)
        a = rng.uniform(6.8e6, 4.2e7, n)
        f = rng.uniform(0.05, 2 * math.pi - 0.05, n)
    else:
        e = rng.uniform(1.05, 4.0, n)
        a = -rng.uniform(6.8e6, 4.2e7, n)
        f_inf = np.arccos(-1.0 / e)
        f = rng.uniform(-0.95, 0.95, n) * f_inf
    i = rng.uniform(0.05, math.pi - 0.05, n)
    Omega = rng.uniform(0.05, 2 * math.pi - 0.05, n)
    omega = rng.uniform(0.05, 2 * math.pi - 0.05, n)
    return astro.ClassicElements(a, e, i, Omega, omega, f)


def _angle_diff(x, y):
    return np.abs((np.asarray(x) - np.asarray(y) + math.pi) % (2 * math.pi) - math.pi)


def _bsk_elements(om, a, e, i, Omega, omega, f):
    b = om.ClassicElements()
    b.a, b.e, b.i, b.Omega, b.omega, b.f = a, e, i, Omega, omega, f
    return b


def test_reexported():
    assert fx.astro.ClassicElements is astro.ClassicElements
    for name in (
        "elem2rv",
        "rv2elem",
        "solve_kepler",
        "elem2mee",
        "rv2mee",
        "mee2rv",
        "kepler_propagate",
    ):
        assert callable(getattr(fx.astro, name)), name


@pytest.mark.crossval
@pytest.mark.parametrize("kind", ["elliptic", "hyperbolic"])
def test_elem2rv_rv2elem_match_basilisk(kind):
    om = pytest.importorskip("Basilisk.utilities.orbitalMotion")
    els = _random_orbits(200, 1 if kind == "elliptic" else 2, kind)
    r_N, v_N = astro.elem2rv(MU, els)
    back = astro.rv2elem(MU, r_N, v_N)
    for j in range(200):
        x = [float(getattr(els, k)[j]) for k in ("a", "e", "i", "Omega", "omega", "f")]
        rb, vb = om.elem2rv(MU, _bsk_elements(om, *x))
        np.testing.assert_allclose(r_N[j], rb, rtol=0, atol=BSK_REL * np.linalg.norm(rb))
        np.testing.assert_allclose(v_N[j], vb, rtol=0, atol=BSK_REL * np.linalg.norm(vb))
        eb = om.rv2elem(MU, rb, vb)
        np.testing.assert_allclose(float(back.a[j]), eb.a, rtol=BSK_REL)
        np.testing.assert_allclose(float(back.e[j]), eb.e, rtol=0, atol=BSK_REL)
        for k in ("i", "Omega", "omega", "f"):
            # Same range convention as Basilisk ([0, 2 pi), hyperbolic f in (-pi, pi]), not only mod 2 pi.
            assert abs(float(getattr(back, k)[j]) - getattr(eb, k)) < BSK_ANGLE, (k, j)


@pytest.mark.crossval
@pytest.mark.parametrize(
    "case",
    [
        # (a, e, i, Omega, omega, f): circular inclined, equatorial eccentric, circular equatorial
        (7.0e6, 0.0, 0.7, 1.2, 0.0, 2.1),
        (9.0e6, 0.2, 0.0, 0.0, 2.5, 1.1),
        (7.0e6, 0.0, 0.0, 0.0, 0.0, 4.0),
    ],
)
def test_special_cases_match_basilisk(case):
    """Basilisk's conventions for undefined angles: omega = 0 (circular: f is the argument of
    latitude), Omega = 0 (equatorial: omega is the longitude of periapsis)."""
    om = pytest.importorskip("Basilisk.utilities.orbitalMotion")
    r_N, v_N = astro.elem2rv(MU, astro.ClassicElements(*case))
    rb, vb = om.elem2rv(MU, _bsk_elements(om, *case))
    np.testing.assert_allclose(r_N, rb, rtol=0, atol=BSK_REL * np.linalg.norm(rb))
    np.testing.assert_allclose(v_N, vb, rtol=0, atol=BSK_REL * np.linalg.norm(vb))
    ours, eb = astro.rv2elem(MU, r_N, v_N), om.rv2elem(MU, rb, vb)
    np.testing.assert_allclose(float(ours.a), eb.a, rtol=BSK_REL)
    for k in ("i", "Omega", "omega", "f"):
        assert _angle_diff(getattr(ours, k), getattr(eb, k)) < BSK_ANGLE, k
    for k, want in zip(("i", "Omega", "omega", "f"), case[2:]):
        assert _angle_diff(getattr(ours, k), want) < ROUND_TRIP_ANGLE, k


@pytest.mark.crossval
def test_parabola_matches_basilisk():
    """Parabola: `a` carries -r_p (Basilisk's `elem2rv_parab` convention)."""
    om = pytest.importorskip("Basilisk.utilities.orbitalMotion")
    case = (-7.5e6, 1.0, 0.4, 0.3, 1.9, 2.0)
    r_N, v_N = astro.elem2rv(MU, astro.ClassicElements(*case))
    rb, vb = om.elem2rv_parab(MU, _bsk_elements(om, *case))
    np.testing.assert_allclose(r_N, rb, rtol=0, atol=BSK_REL * np.linalg.norm(rb))
    np.testing.assert_allclose(v_N, vb, rtol=0, atol=BSK_REL * np.linalg.norm(vb))
    # Escape speed exactly: v^2 = 2 mu / r.
    np.testing.assert_allclose(
        float(jnp.sum(v_N**2)), 2 * MU / float(jnp.linalg.norm(r_N)), rtol=ROUND_TRIP_REL
    )
    p = astro.rv2elem(MU, r_N, v_N).p
    np.testing.assert_allclose(float(p), 2 * 7.5e6, rtol=ROUND_TRIP_REL)


@pytest.mark.crossval
def test_anomalies_match_basilisk():
    om = pytest.importorskip("Basilisk.utilities.orbitalMotion")
    rng = np.random.default_rng(3)
    e, x = rng.uniform(0.0, 0.97, 100), rng.uniform(-math.pi, math.pi, 100)
    eh, H = rng.uniform(1.01, 5.0, 100), rng.uniform(-4.0, 4.0, 100)
    ours = {
        "E2f": astro.E2f(x, e),
        "f2E": astro.f2E(x, e),
        "E2M": astro.E2M(x, e),
        "M2E": astro.M2E(x, e),
        "H2f": astro.H2f(H, eh),
    }
    fh = np.asarray(ours["H2f"])
    ours["f2H"] = astro.f2H(fh, eh)
    N = np.asarray(astro.H2N(H, eh))
    ours["N2H"] = astro.N2H(N, eh)
    ours = {k: np.asarray(v) for k, v in ours.items()}
    for j in range(100):
        for name in ("E2f", "f2E", "E2M", "M2E"):
            want = getattr(om, name)(x[j], e[j])
            assert abs(float(ours[name][j]) - want) < BSK_ANGLE, (name, j)
        assert abs(fh[j] - om.H2f(H[j], eh[j])) < BSK_ANGLE
        assert abs(float(ours["f2H"][j]) - om.f2H(fh[j], eh[j])) < BSK_ANGLE
        assert abs(N[j] - om.H2N(H[j], eh[j])) < BSK_ANGLE * max(1.0, abs(N[j]))
        assert abs(float(ours["N2H"][j]) - om.N2H(N[j], eh[j])) < BSK_ANGLE


@pytest.mark.crossval
def test_equinoctial_match_basilisk():
    """Basilisk's equinoctial set (P1, P2, Q1, Q2, L) is (g, f, k, h, L) of the modified one."""
    om = pytest.importorskip("Basilisk.utilities.orbitalMotion")
    els = _random_orbits(50, 4, "elliptic")
    mee = astro.elem2mee(els)
    for j in range(50):
        x = [float(getattr(els, k)[j]) for k in ("a", "e", "i", "Omega", "omega", "f")]
        eq = om.EquinoctialElements()
        om.clElem2eqElem(_bsk_elements(om, *x), eq)
        for ours, theirs in ((mee.g, eq.P1), (mee.f, eq.P2), (mee.k, eq.Q1), (mee.h, eq.Q2)):
            assert abs(float(ours[j]) - theirs) < BSK_REL * max(1.0, abs(theirs))
        assert abs(float(mee.L[j]) - eq.L) < BSK_ANGLE


@pytest.mark.parametrize("kind", ["elliptic", "hyperbolic"])
def test_round_trip_every_conic(kind):
    els = _random_orbits(100, 5, kind)
    back = astro.rv2elem(MU, *astro.elem2rv(MU, els))
    np.testing.assert_allclose(back.a, els.a, rtol=ROUND_TRIP_REL)
    np.testing.assert_allclose(back.e, els.e, rtol=0, atol=ROUND_TRIP_REL)
    for k in ("i", "Omega", "omega", "f"):
        assert np.max(_angle_diff(getattr(back, k), getattr(els, k))) < ROUND_TRIP_ANGLE, k
    # And through the modified equinoctial elements, both ways.
    mee = astro.rv2mee(MU, *astro.elem2rv(MU, els))
    mee2 = astro.elem2mee(els)
    for k in ("p", "f", "g", "h", "k"):
        np.testing.assert_allclose(getattr(mee, k), getattr(mee2, k), rtol=1e-11, atol=1e-12)
    assert np.max(_angle_diff(mee.L, mee2.L)) < ROUND_TRIP_ANGLE
    r2, v2 = astro.mee2rv(MU, mee)
    r1, v1 = astro.elem2rv(MU, els)
    np.testing.assert_allclose(r2, r1, rtol=ROUND_TRIP_REL, atol=ROUND_TRIP_REL * 1e7)
    np.testing.assert_allclose(v2, v1, rtol=ROUND_TRIP_REL, atol=ROUND_TRIP_REL * 1e4)


def test_retrograde_equatorial_and_circular_round_trips():
    cases = [
        (
            8.0e6,
            0.3,
            math.pi,
            0.0,
            1.0,
            2.0,
        ),  # retrograde equatorial: omega from x along the motion
        (8.0e6, 0.0, math.pi, 0.0, 0.0, 2.0),  # retrograde circular equatorial: true longitude
        (8.0e6, 0.0, 1.0, 0.5, 0.0, 5.0),  # circular inclined: argument of latitude
    ]
    for case in cases:
        r_N, v_N = astro.elem2rv(MU, astro.ClassicElements(*case))
        back = astro.rv2elem(MU, r_N, v_N)
        for k, want in zip(("a", "e", "i", "Omega", "omega", "f"), case):
            got = float(getattr(back, k))
            if k == "a":
                np.testing.assert_allclose(got, want, rtol=ROUND_TRIP_REL)
            elif k == "e":
                assert abs(got - want) < ROUND_TRIP_REL
            else:
                assert _angle_diff(got, want) < ROUND_TRIP_ANGLE, (case, k, got)


def test_two_body_closed_forms():
    """Vis-viva, |h| = sqrt(mu p), and the period: M advances by 2 pi in one period."""
    el = astro.ClassicElements(2.4e7, 0.7, 0.3, 0.2, 0.1, 0.0)
    r_N, v_N = astro.elem2rv(MU, el)
    r, v2 = float(jnp.linalg.norm(r_N)), float(jnp.sum(v_N**2))
    np.testing.assert_allclose(v2, MU * (2 / r - 1 / 2.4e7), rtol=ROUND_TRIP_REL)
    np.testing.assert_allclose(r, 2.4e7 * 0.3, rtol=ROUND_TRIP_REL)  # periapsis
    h = float(jnp.linalg.norm(jnp.cross(r_N, v_N)))
    np.testing.assert_allclose(h, math.sqrt(MU * 2.4e7 * (1 - 0.49)), rtol=ROUND_TRIP_REL)
    period = 2 * math.pi * math.sqrt(2.4e7**3 / MU)
    later = astro.kepler_propagate(MU, el, period)
    assert _angle_diff(later.f, 0.0) < ROUND_TRIP_ANGLE
    half = astro.kepler_propagate(MU, el, period / 2)
    assert _angle_diff(half.f, math.pi) < ROUND_TRIP_ANGLE


def test_kepler_propagate_matches_integration_of_two_body():
    """Kepler propagation of an ellipse and a hyperbola vs energy and angular momentum kept, and
    the hyperbola's position vs the closed-form H(t) relation (N advances by n dt)."""
    for el in (
        astro.ClassicElements(1.0e7, 0.4, 0.5, 0.3, 0.2, 0.4),
        astro.ClassicElements(-1.0e7, 1.8, 0.5, 0.3, 0.2, -0.4),
    ):
        later = astro.kepler_propagate(MU, el, 3000.0)
        r0, v0 = astro.elem2rv(MU, el)
        r1, v1 = astro.elem2rv(MU, later)
        energy = lambda r, v: 0.5 * float(jnp.sum(v**2)) - MU / float(jnp.linalg.norm(r))
        np.testing.assert_allclose(energy(r1, v1), energy(r0, v0), rtol=ROUND_TRIP_REL)
        np.testing.assert_allclose(jnp.cross(r1, v1), jnp.cross(r0, v0), rtol=ROUND_TRIP_REL)
        # Lagrange f and g: r1 = F r0 + G v0 with the universal relation checked through time:
        # the Kepler equation at both ends differs by n dt.
        n = math.sqrt(MU / abs(float(el.a)) ** 3)
        if float(el.e) < 1:
            dM = float(astro.f2M(later.f, el.e) - astro.f2M(el.f, el.e))
        else:
            dM = float(
                astro.H2N(astro.f2H(later.f, el.e), el.e) - astro.H2N(astro.f2H(el.f, el.e), el.e)
            )
        np.testing.assert_allclose(dM, n * 3000.0, rtol=ROUND_TRIP_REL)


def test_solve_kepler_residual_and_turns():
    M = jnp.linspace(-20.0, 20.0, 401)
    for e in (0.0, 0.1, 0.5, 0.9, 0.99, 0.9999):
        E = astro.solve_kepler(M, e)
        assert float(jnp.max(jnp.abs(E - e * jnp.sin(E) - M))) < KEPLER_RESIDUAL, e
        assert float(jnp.max(jnp.abs(E - M))) <= e + KEPLER_RESIDUAL  # |E - M| = e |sin E|
    N = jnp.linspace(-60.0, 60.0, 241)
    for e in (1.0001, 1.5, 10.0):
        H = astro.solve_kepler_hyperbolic(N, e)
        res = jnp.abs(e * jnp.sinh(H) - H - N) / jnp.maximum(1.0, jnp.abs(N))
        assert float(jnp.max(res)) < KEPLER_RESIDUAL, e
    # M2f / f2M inverse over several turns.
    f = jnp.linspace(-15.0, 15.0, 61)
    np.testing.assert_allclose(astro.M2f(astro.f2M(f, 0.6), 0.6), f, atol=ROUND_TRIP_ANGLE)


def _central_difference(fun, x, h):
    x = np.asarray(x, float)
    out = []
    for j in range(x.size):
        dx = np.zeros_like(x)
        dx.flat[j] = h * max(1.0, abs(x.flat[j]))
        out.append((np.asarray(fun(x + dx)) - np.asarray(fun(x - dx))) / (2 * dx.flat[j]))
    return np.stack(out, axis=-1)


def test_gradients_match_central_differences():
    x0 = np.array([1.2e7, 0.3, 0.6, 0.4, 1.1, 2.0])

    def to_rv(x):
        r, v = astro.elem2rv(MU, astro.ClassicElements(*x))
        return jnp.concatenate([r, v])

    def round_trip(x):
        el = astro.rv2elem(MU, *astro.elem2rv(MU, astro.ClassicElements(*x)))
        return jnp.stack([el.a, el.e, el.i, el.Omega, el.omega, el.f])

    def propagated(x):
        el = astro.kepler_propagate(MU, astro.ClassicElements(*x), 5000.0)
        return jnp.concatenate(astro.elem2rv(MU, el))

    def via_mee(x):
        m = astro.rv2mee(MU, *astro.elem2rv(MU, astro.ClassicElements(*x)))
        return jnp.stack([m.p, m.f, m.g, m.h, m.k, m.L])

    for fun in (to_rv, round_trip, propagated, via_mee):
        jac = np.asarray(jax.jacrev(fun)(jnp.asarray(x0)))
        fd = _central_difference(jax.jit(fun), x0, FD_STEP)
        # Scaled by the sizes of outputs and inputs (a ~ 1e7 m next to angles ~ 1 rad).
        s_f = np.maximum(1.0, np.abs(np.asarray(fun(x0))))[:, None]
        s_x = np.maximum(1.0, np.abs(x0))[None, :]
        np.testing.assert_allclose(
            jac * s_x / s_f, fd * s_x / s_f, rtol=0, atol=FD_REL, err_msg=fun.__name__
        )
    # Kepler solvers: implicit-function derivatives vs central differences.
    for fun, x in (
        (lambda x: astro.solve_kepler(x[0], x[1]), np.array([2.5, 0.8])),
        (lambda x: astro.solve_kepler_hyperbolic(x[0], x[1]), np.array([7.0, 1.7])),
    ):
        g = np.asarray(jax.grad(fun)(jnp.asarray(x)))
        np.testing.assert_allclose(g, _central_difference(jax.jit(fun), x, FD_STEP), rtol=FD_REL)


def test_jit_and_vmap():
    els = _random_orbits(16, 6, "elliptic")
    r_N, v_N = astro.elem2rv(MU, els)
    rj, vj = jax.jit(jax.vmap(lambda el: astro.elem2rv(MU, el)))(els)
    np.testing.assert_allclose(rj, r_N, rtol=1e-15, atol=1e-8)
    back = jax.jit(jax.vmap(lambda r, v: astro.rv2elem(MU, r, v)))(r_N, v_N)
    np.testing.assert_allclose(back.a, els.a, rtol=ROUND_TRIP_REL)
    E = jax.vmap(astro.solve_kepler)(jnp.linspace(0, 6, 16), jnp.linspace(0, 0.9, 16))
    np.testing.assert_allclose(
        E - jnp.linspace(0, 0.9, 16) * jnp.sin(E), jnp.linspace(0, 6, 16), atol=KEPLER_RESIDUAL
    )


@pytest.mark.parametrize(
    "args, match",
    [
        ((7e6, -0.1, 0.1, 0, 0, 0), r"ClassicElements: `e` must be >= 0 \[-\]; got -0.1"),
        ((7e6, 0.1, 3.5, 0, 0, 0), r"ClassicElements: `i` must be in \[0, pi\] \[rad\]; got 3.5"),
        ((-7e6, 0.1, 0.1, 0, 0, 0), r"ClassicElements: `a` must be > 0 when e < 1 \[m\]"),
        ((7e6, 1.5, 0.1, 0, 0, 0), r"ClassicElements: `a` must be < 0 when e > 1 \[m\]"),
        (
            (7e6, 1.0, 0.1, 0, 0, 0),
            r"ClassicElements: `a` must be the negative periapsis radius.*rectilinear",
        ),
        (
            (-7e6, 2.0, 0.1, 0, 0, 2.2),
            r"ClassicElements: `f` must satisfy 1 \+ e cos f > 0.*asymptotes",
        ),
        ((-7e6, 1.0, 0.1, 0, 0, math.pi), r"ClassicElements: `f` must satisfy 1 \+ e cos f > 0"),
        ((float("nan"), 0.1, 0.1, 0, 0, 0), r"ClassicElements: `a` must be finite \[m\]"),
    ],
)
def test_bad_elements_refused_by_name(args, match):
    with pytest.raises(ValueError, match=match):
        astro.ClassicElements(*args)


def test_bad_inputs_refused_by_name():
    with pytest.raises(ValueError, match=r"rv2elem: `r_N x v_N` must be non-zero \(rectilinear"):
        astro.rv2elem(MU, [7e6, 0, 0], [1e3, 0, 0])
    with pytest.raises(
        ValueError, match=r"M2E: `e` must be in \[0, 1\) \(elliptic\) \[-\]; got 1.2"
    ):
        astro.M2E(1.0, 1.2)
    with pytest.raises(ValueError, match=r"N2H: `e` must be > 1 \(hyperbolic\) \[-\]; got 0.5"):
        astro.N2H(1.0, 0.5)
    with pytest.raises(ValueError, match=r"f2H: `f` must be inside the asymptotes"):
        astro.f2H(2.5, 1.5)
    with pytest.raises(
        ValueError, match=r"kepler_propagate: `elements.e` must not be 1 \(parabolic"
    ):
        astro.kepler_propagate(MU, astro.ClassicElements(-7e6, 1.0, 0.1, 0, 0, 0), 10.0)
    with pytest.raises(
        ValueError, match=r"rv2mee: `r_N x v_N` must not point along -z \(retrograde"
    ):
        astro.rv2mee(MU, [7e6, 0, 0], [0, -7.5e3, 0])
    with pytest.raises(ValueError, match=r"elem2mee: `elements.i` must not be pi \(1 \+ cos i"):
        astro.elem2mee(astro.ClassicElements(7e6, 0.1, math.pi, 0, 0, 0))
    with pytest.raises(ValueError, match=r"ModifiedEquinoctialElements: `p` must be > 0 \[m\]"):
        astro.ModifiedEquinoctialElements(-1.0, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match=r"ClassicElements: the elements' shapes do not broadcast"):
        astro.ClassicElements(np.ones(2) * 7e6, np.zeros(3), 0, 0, 0, 0)


def test_gradients_finite_on_an_exactly_circular_equatorial_state():
    """e = 0 and i = 0 exactly: the undefined angles are set to zero and every gradient stays
    finite (no NaN from |e| or the node line at zero)."""
    r_N = jnp.array([7.0e6, 0.0, 0.0])
    v_N = jnp.array([0.0, math.sqrt(MU / 7.0e6), 0.0])
    el = astro.rv2elem(MU, r_N, v_N)
    assert float(el.e) == 0.0 and float(el.i) == 0.0 and float(el.Omega) == 0.0
    jac = jax.jacrev(
        lambda r: jnp.stack(
            [getattr(astro.rv2elem(MU, r, v_N), k) for k in ("a", "e", "i", "Omega", "omega", "f")]
        )
    )(r_N)
    assert np.all(np.isfinite(np.asarray(jac)))
    # Along-track displacement moves the true longitude by dx / r.
    np.testing.assert_allclose(float(jac[5, 1]), 1.0 / 7.0e6, rtol=ROUND_TRIP_REL)
