"""Third-body gravity: Battin's form against 50-digit decimal arithmetic, bodies from `Body`
objects and ephemerides, and the spacecraft wiring (central Earth + Moon + Sun)."""

import math
from decimal import Decimal, getcontext

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js


# Battin's form in float64: a few ulps of the result (measured <= 9e-16).
BATTIN_RTOL = 2e-15
# The naive difference loses log10(|s|/|x|) digits; for the Sun seen from 400 km it is > 1e-13.
NAIVE_LOSS = 1e-13
# Two float64 evaluations of the same field (naive vs Battin) for the Moon from low orbit.
SAME_FIELD_RTOL = 1e-10
# Finite-difference check of force = -grad U (central differences, step 1 m, relative to |a|).
POTENTIAL_RTOL = 1e-6

MU_SUN = fx.astro.SUN.mu  # [m^3/s^2]


def _decimal_perturbation(mu, x, s):
    """Direct minus indirect term in 50-digit decimal arithmetic (exactly rounded sqrt)."""
    getcontext().prec = 50
    mu = Decimal(float(mu))
    x = [Decimal(float(v)) for v in x]
    s = [Decimal(float(v)) for v in s]
    d = [a - b for a, b in zip(x, s)]
    nd = sum(v * v for v in d).sqrt()
    ns = sum(v * v for v in s).sqrt()
    return np.array([float(-mu * (di / nd**3 + si / ns**3)) for di, si in zip(d, s)])


@pytest.mark.parametrize(
    "s_scale",
    [3.84e8, 1.496e11, 7.8e11, 4.5e12],  # Moon, Sun, Jupiter, Neptune distances [m]
)
def test_battin_form_exact_and_naive_cancels(s_scale):
    rng = np.random.default_rng(int(math.log10(s_scale) * 10))
    worst_battin, worst_naive = 0.0, 0.0
    for _ in range(50):
        x = rng.normal(size=3) * 6.8e6 / math.sqrt(3)  # low orbit [m]
        s = rng.normal(size=3)
        s = s / np.linalg.norm(s) * s_scale
        ref = _decimal_perturbation(MU_SUN, x, s)
        battin = np.asarray(fx.third_body_acceleration(MU_SUN, jnp.asarray(x), jnp.asarray(s)))
        d = x - s
        naive = -MU_SUN * (d / np.linalg.norm(d) ** 3 + s / np.linalg.norm(s) ** 3)
        scale = np.linalg.norm(ref)
        worst_battin = max(worst_battin, np.linalg.norm(battin - ref) / scale)
        worst_naive = max(worst_naive, np.linalg.norm(naive - ref) / scale)
    assert worst_battin < BATTIN_RTOL, worst_battin
    if s_scale >= 1.0e11:  # the naive difference does cancel for distant bodies
        assert worst_naive > NAIVE_LOSS, worst_naive


def test_battin_f_small_q():
    q = jnp.asarray([1e-12, -1e-8, 0.3, 2.0])
    ref = [float((1 + Decimal(float(v))) ** Decimal("1.5") - 1) for v in np.asarray(q)]
    np.testing.assert_allclose(fx.battin_f(q), ref, rtol=BATTIN_RTOL)


def test_third_body_in_spacecraft_matches_point_mass_path_and_potential():
    """Earth central + Moon: the ThirdBodyGravity field equals the existing PointMassGravity
    (naive indirect term) path; its logged potential's gradient is minus the field."""
    r_moon = jnp.asarray([3.0e8, 2.0e8, 1.0e8])  # [m]
    earth = fx.PointMassGravity(fx.astro.EARTH, central=True)
    moon_tb = fx.ThirdBodyGravity(fx.astro.MOON, r_moon)
    moon_pm = fx.PointMassGravity(fx.astro.MOON, r_PN_N=r_moon)
    hub = fx.Hub(100.0, np.eye(3))
    sc_tb = fx.Spacecraft(hub, gravity=[earth, moon_tb])
    sc_pm = fx.Spacecraft(hub, gravity=[earth, moon_pm])
    y = sc_tb.init_state([7.0e6, 1.0e5, -2.0e5], [0.0, 7.5e3, 0.0])
    g_tb = np.asarray(sc_tb.context(0.0, y, None).g_N)
    g_pm = np.asarray(sc_pm.context(0.0, y, None).g_N)
    g_earth = np.asarray(fx.Spacecraft(hub, gravity=[earth]).context(0.0, y, None).g_N)
    np.testing.assert_allclose(g_tb - g_earth, g_pm - g_earth, rtol=SAME_FIELD_RTOL)
    x = jnp.asarray([7.0e6, 1.0e5, -2.0e5])
    U = lambda x: moon_tb.field_relative(0.0, x, r_moon)[1]
    a = np.asarray(moon_tb.field_relative(0.0, x, r_moon)[0])
    h = 1.0  # [m]
    fd = [-(U(x + h * e) - U(x - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(fd, a, rtol=0, atol=POTENTIAL_RTOL * np.linalg.norm(a))
    np.testing.assert_allclose(jax.grad(U)(x), -a, rtol=1e-12)


def _geo_spacecraft():
    """A GEO spacecraft about a central Earth with Moon and Sun from the analytic ephemeris."""
    eph = fx.astro.AnalyticSunMoon()
    epoch = 7.9e8  # [s] TDB past J2000
    gravity = [
        fx.PointMassGravity(fx.astro.EARTH, central=True),
        fx.ThirdBodyGravity.from_ephemeris(fx.astro.MOON, eph, epoch),
        fx.ThirdBodyGravity.from_ephemeris(fx.astro.SUN, eph, epoch),
    ]
    sc = fx.Spacecraft(fx.Hub(100.0, np.eye(3)), gravity=gravity)
    r0 = 4.2164e7  # GEO radius [m]
    y0 = sc.init_state([r0, 0.0, 0.0], [0.0, math.sqrt(fx.astro.EARTH.mu / r0), 0.0])
    return sc, y0, eph, epoch


def test_third_body_from_ephemeris_field():
    """Moon and Sun from an ephemeris: the spacecraft's field is the sum of the three terms."""
    sc, y0, eph, epoch = _geo_spacecraft()
    ctx = sc.context(0.0, y0, None)
    x = y0["hub"]["r_BN_N"]
    expected = (
        -fx.astro.EARTH.mu * x / np.linalg.norm(x) ** 3
        + fx.third_body_acceleration(fx.astro.MOON.mu, x, eph.position("moon", epoch))
        + fx.third_body_acceleration(fx.astro.SUN.mu, x, eph.position("sun", epoch))
    )
    np.testing.assert_allclose(ctx.g_N, expected, rtol=1e-14)


@pytest.mark.slow
def test_third_body_run_differentiates():
    """A jitted run through the ephemeris-driven field; grad w.r.t. the initial state finite."""
    sc, y0, _, _ = _geo_spacecraft()

    def final_x(y0):
        return js.simulate(sc, y0, 600.0, dt=300.0).ys["hub"]["r_BN_N"][-1, 0]

    g = jax.grad(final_x)(y0)
    assert np.all(np.isfinite(g["hub"]["r_BN_N"]))


def test_third_body_errors():
    with pytest.raises(ValueError, match="ThirdBodyGravity: `r_PN_N`"):
        fx.ThirdBodyGravity(fx.astro.MOON, None)
    with pytest.raises((ValueError, RuntimeError), match="ThirdBodyGravity: `mu`"):
        fx.ThirdBodyGravity(-1.0, jnp.ones(3))
    with pytest.raises(TypeError, match="from_ephemeris: `body`"):
        fx.ThirdBodyGravity.from_ephemeris("moon", fx.astro.AnalyticSunMoon(), 0.0)
    assert fx.ThirdBodyGravity(1.0, jnp.ones(3)).name == "third_body"
