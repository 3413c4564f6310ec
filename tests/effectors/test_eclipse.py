"""Eclipse by several bodies from an ephemeris, and SRP driven by it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from effectors._forces._srp import AU, SOLAR_FLUX_1AU, SPEED_OF_LIGHT


EARTH, MOON = fx.astro.EARTH, fx.astro.MOON
EPOCH = 7.9e8  # [s] TDB past J2000
R_LEO = 7000e3  # [m]
# Force of the same closed form evaluated in two orders (effector vs test): round-off.
FORCE_RTOL = 1e-12
# Penumbra half-way point: bisection to 1e-3 m on a ~13 km wide penumbra; nu = 1/2 there.
NU_HALF_ATOL = 1e-6


def _unit(v):
    v = np.asarray(v)
    return v / np.linalg.norm(v)


def _ephemeris():
    return fx.astro.AnalyticSunMoon()


def test_earth_umbra_full_sun_and_penumbra_midpoint():
    """Anti-sun side at LEO: umbra; sun side: full light; across the terminator the light
    fraction falls continuously from 1 to 0 through 1/2, at finite, nonzero gradient."""
    eph = _ephemeris()
    ecl = fx.Eclipse.from_ephemeris(eph, EPOCH, occulters=[EARTH])
    s_hat = _unit(eph.position("sun", EPOCH))
    assert float(ecl.illumination(0.0, -R_LEO * s_hat)) == 0.0
    assert float(ecl.illumination(0.0, R_LEO * s_hat)) == 1.0
    # Along a line perpendicular to the sun direction, behind the Earth: bisect for nu = 1/2.
    n_hat = _unit(np.cross(s_hat, [0.0, 0.0, 1.0]))
    point = lambda h: -1000e3 * s_hat + h * n_hat  # [m]
    lo, hi = 0.0, 2 * EARTH.radius_equatorial  # umbra .. full sun
    f = jax.jit(lambda h: ecl.illumination(0.0, point(h)))
    assert float(f(lo)) == 0.0 and float(f(hi)) == 1.0
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(f(mid)) < 0.5 else (lo, mid)
    np.testing.assert_allclose(f(lo), 0.5, atol=NU_HALF_ATOL)
    g = jax.grad(f)(jnp.asarray(lo))
    assert np.isfinite(g) and g > 0


def test_moon_shadow_and_min_of_occulters():
    """A spacecraft in the Moon's umbra (just behind the Moon on the sun line) is dark with the
    Moon as occulter, lit with the Earth alone; the Earth+Moon eclipse takes the deeper shadow."""
    eph = _ephemeris()
    r_moon = np.asarray(eph.position("moon", EPOCH))
    r_sun = np.asarray(eph.position("sun", EPOCH))
    r = r_moon - 1.1 * MOON.radius_equatorial * _unit(r_sun - r_moon)
    both = fx.Eclipse.from_ephemeris(eph, EPOCH)  # Earth and Moon
    earth_only = fx.Eclipse.from_ephemeris(eph, EPOCH, occulters=[EARTH])
    moon_only = fx.Eclipse(eph.trajectory("sun", EPOCH), [(MOON, eph.trajectory("moon", EPOCH))])
    assert float(moon_only.illumination(0.0, r)) == 0.0
    assert float(earth_only.illumination(0.0, r)) == 1.0
    assert float(both.illumination(0.0, r)) == 0.0


def test_srp_from_ephemeris_force_and_shadow():
    """Sunlit: |F| = C_R A Phi (1 AU / d)^2 / c away from the sun; in the umbra: zero."""
    area, C_R = 3.0, 1.4
    eph = _ephemeris()
    srp = fx.CannonballSRP.from_ephemeris(area, eph, EPOCH, C_R)
    sc = fx.Spacecraft(fx.Hub(100.0, np.eye(3)), dynamic_effectors=[srp])
    r_sun = np.asarray(eph.position("sun", EPOCH))
    for sign, lit in ((1.0, True), (-1.0, False)):
        r = sign * R_LEO * _unit(r_sun)
        y = sc.init_state(r, np.zeros(3))
        F = np.asarray(srp.force_torque(sc.context(0.0, y, None)).force_N)
        s = r_sun - r
        expected = (
            -C_R * area * SOLAR_FLUX_1AU * AU**2 / SPEED_OF_LIGHT * s / np.linalg.norm(s) ** 3
        )
        np.testing.assert_allclose(F, expected if lit else 0.0 * expected, rtol=FORCE_RTOL)
    # The single-occulter eclipse equals the built-in conical shadow about the Earth.
    conical = fx.CannonballSRP(
        area, eph.trajectory("sun", EPOCH), C_R, shadow="conical", R_occ=EARTH
    )
    single = fx.CannonballSRP.from_ephemeris(area, eph, EPOCH, C_R, occulters=[EARTH])
    r = np.array([-6.0e6, 3.2e6, 1.0e6])
    np.testing.assert_array_equal(single.illumination(0.0, r), conical.illumination(0.0, r))


def test_eclipse_errors():
    with pytest.raises(ValueError, match="CannonballSRP: give either `shadow` or `eclipse`"):
        fx.CannonballSRP(1.0, [AU, 0, 0], shadow="conical", eclipse=fx.Eclipse([AU, 0, 0]))
    with pytest.raises(TypeError, match=r"Eclipse: `occulters\[0\]`"):
        fx.Eclipse([AU, 0, 0], ["earth"])
    with pytest.raises(ValueError, match="Eclipse: `occulters`"):
        fx.Eclipse([AU, 0, 0], [])
