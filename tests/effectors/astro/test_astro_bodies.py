"""Body constants (`effectors.astro`): WGS84 against ERFA's ellipsoid table, J2..J6 signs and
normalisation through closed-form zonal fields on the axis and the equator, Earth's rotation rate
against the IAU Earth rotation angle, the planets against Basilisk's `astroConstants` (other
ephemeris releases: loose bars), and construction errors by name."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from effectors import astro


# WGS84 defining constants: the same decimal numbers.
EXACT = 1e-15
# Zonal fields J2..J6 by Pines' recursion vs the Legendre closed form: round-off.
FIELD_REL = 1e-13
# IAU 2000 Earth rotation angle rate 2 pi * 1.00273781191135448 / day = 7.2921151467e-5 rad/s;
# WGS84 keeps 7.292115e-5 (rounded): 2.0e-8 relative.
ERA_RATE_REL = 3e-8
# Basilisk's astroConstants take GM from other ephemeris releases (up to 1.8e-6 relative for
# Uranus) and older radii (Sun 695000 vs the IAU 2015 nominal 695700 km, 1.0e-3; Mercury 2439.7 vs
# 2440.53 km): loose bars that catch unit or digit slips, not the releases' differences.
BSK_GM_REL = 5e-6
BSK_RADIUS_REL = 2e-3


def test_bodies_registry():
    assert set(astro.BODIES) == {
        "sun",
        "mercury",
        "venus",
        "earth",
        "moon",
        "mars",
        "jupiter",
        "saturn",
        "uranus",
        "neptune",
    }
    for name, b in astro.BODIES.items():
        assert b.name == name and b.source
        assert hash(b) == hash(astro.BODIES[name])  # usable as a static field
    assert fx.astro.EARTH is astro.EARTH
    assert astro.EARTH.mu == 3.986004415e14
    assert [b.naif_id for b in (astro.SUN, astro.EARTH, astro.MOON)] == [10, 399, 301]


def test_wgs84_matches_erfa():
    erfa = pytest.importorskip("erfa")
    a, f = erfa.eform(erfa.WGS84)
    assert abs(astro.EARTH.radius_equatorial - a) <= EXACT * a
    assert abs(astro.EARTH.flattening - f) <= EXACT
    # Polar radius b = a (1 - f) = 6356752.3142 m (NGA.STND.0036 Table 3.2).
    assert abs(astro.EARTH.radius_polar - 6356752.3142) < 1e-4


def test_earth_rotation_rate_matches_the_iau_earth_rotation_angle():
    erfa = pytest.importorskip("erfa")
    d = 1e-3  # [d]: a finite difference of the ERA over 86.4 s (ERA is linear in UT1)
    era = np.unwrap([erfa.era00(2460755.0, 0.0), erfa.era00(2460755.0, d)])
    rate = (era[1] - era[0]) / (d * 86400.0)
    np.testing.assert_allclose(astro.EARTH.rotation_rate, rate, rtol=ERA_RATE_REL)


_FIELD = eqx.filter_jit(lambda body, x: body.field(0.0, x))


def _zonal_closed_form(body, r, sin_phi):
    """Radial acceleration [m/s^2] of the zonal field on the axis (sin phi = 1) or the equator
    (sin phi = 0), where the latitude derivative vanishes: -mu/r^2 (1 - sum (n+1) J_n (R/r)^n P_n)."""
    P = {
        1.0: {n: 1.0 for n in range(2, 7)},
        0.0: {2: -0.5, 3: 0.0, 4: 3.0 / 8.0, 5: 0.0, 6: -5.0 / 16.0},
    }[sin_phi]
    s = sum(
        (n + 1) * Jn * (body.radius_equatorial / r) ** n * P[n] for n, Jn in enumerate(body.J, 2)
    )
    return -body.mu / r**2 * (1.0 - s)


@pytest.mark.parametrize(
    "direction", [(0.0, 0.0, 1.0), (0.0, 0.0, -1.0), (1.0, 0.0, 0.0), (0.6, 0.8, 0.0)]
)
def test_zonal_harmonics_signs_and_normalisation(direction):
    """EARTH.J through SphericalHarmonicGravity.from_body against the Legendre closed form: on the
    axis every P_n(1) = 1 (odd terms change sign on the south axis), on the equator P_n(0) radially
    and P_n'(0) along z."""
    earth = fx.SphericalHarmonicGravity.from_body(astro.EARTH)
    r = 7.0e6
    u = np.asarray(direction)
    g = np.asarray(_FIELD(earth, jnp.asarray(r * u)))
    if u[2] != 0.0:
        sign = u[2]
        # P_n(-1) = (-1)^n: the south axis is the north axis with odd J flipped.
        body = astro.EARTH.with_(J=tuple(J * sign**n for n, J in enumerate(astro.EARTH.J, 2)))
        want = _zonal_closed_form(body, r, 1.0) * u
    else:
        want = _zonal_closed_form(astro.EARTH, r, 0.0) * u
        # Odd zonals pull along z on the equator: a_z = -mu/r^2 sum J_n (R/r)^n P_n'(0), with
        # P_3'(0) = -3/2 and P_5'(0) = 15/8 (even n: 0).
        e = astro.EARTH
        q = e.radius_equatorial / r
        want[2] = -e.mu / r**2 * (e.J[1] * q**3 * -1.5 + e.J[3] * q**5 * 15.0 / 8.0)
    np.testing.assert_allclose(g, want, rtol=0, atol=FIELD_REL * np.linalg.norm(want))
    # J2 dominates the non-spherical part with the right sign: polar gravity is stronger than
    # equatorial at the same radius (J2 > 0, oblate).
    assert astro.EARTH.J2 > 1e-3 and astro.EARTH.J[1] < 0


def test_bodies_against_basilisk_constants():
    ac = pytest.importorskip("Basilisk.architecture.astroConstants")
    for name in (
        "sun",
        "mercury",
        "venus",
        "earth",
        "moon",
        "mars",
        "jupiter",
        "saturn",
        "uranus",
        "neptune",
    ):
        b = astro.BODIES[name]
        up = name.upper()
        np.testing.assert_allclose(
            b.mu, getattr(ac, f"MU_{up}") * 1e9, rtol=BSK_GM_REL, err_msg=name
        )
        np.testing.assert_allclose(
            b.radius_equatorial, getattr(ac, f"REQ_{up}") * 1e3, rtol=BSK_RADIUS_REL, err_msg=name
        )
    np.testing.assert_allclose(astro.EARTH.J2, ac.J2_EARTH, rtol=1e-5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mu": -1.0}, r"Body: `mu` \[m\^3/s\^2\] must be a finite float > 0; got -1.0"),
        ({"radius_equatorial": 0.0}, r"Body: `radius_equatorial` \[m\] must be a finite float > 0"),
        ({"flattening": 1.0}, r"Body: `flattening` \[-\] must be in \[0, 1\); got 1.0"),
        ({"J": (1e-3, float("nan"))}, r"Body: `J` \[-\] must be finite floats"),
        (
            {"rotation_rate": float("inf")},
            r"Body: `rotation_rate` \[rad/s\] must be a finite float",
        ),
        ({"name": ""}, r"Body: `name` must be a non-empty string"),
        ({"naif_id": 3.5}, r"Body: `naif_id` must be an integer"),
    ],
)
def test_bad_body_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        astro.EARTH.with_(**kwargs)


def test_earth_zonal_field_matches_heyoka_egm2008():
    """EARTH (J2..J6 referred to the WGS84 radius) gives the same field as heyoka's EGM2008 model
    truncated to degree 6, order 0 (its own coefficients, GM and 6378136.3 m reference radius)."""
    hy = pytest.importorskip("heyoka", reason="heyoka is in the bench extra")
    x, y, z = hy.make_vars("x", "y", "z")
    acc = hy.cfunc(hy.model.egm2008_acc([x, y, z], 6, 0), [x, y, z])
    earth = fx.SphericalHarmonicGravity.from_body(astro.EARTH)
    rng = np.random.default_rng(7)
    pts = rng.normal(size=(8, 3))
    pts *= (rng.uniform(6.6e6, 4.5e7, 8) / np.linalg.norm(pts, axis=1))[:, None]
    for p in pts:
        want = acc(p)
        got = np.asarray(_FIELD(earth, jnp.asarray(p)))
        np.testing.assert_allclose(got, want, rtol=0, atol=FIELD_REL * np.linalg.norm(want))
