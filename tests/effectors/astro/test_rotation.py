"""Planet orientation: Earth against astropy's GCRS->ITRS, the Moon's IAU model against DE421's
physical librations, rotation rates against the `Body` constants."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from effectors.astro._rotation import _r1, _r3


# EarthRotation neglects nutation (<= 17.2" in longitude, 9.2" in obliquity), the equation of the
# equinoxes and polar motion: <= 25" from the ITRS (measured 6.8" .. 7.3" at the dates below).
EARTH_FRAME_ARCSEC = 25.0
# Reaching the same instant from an epoch 12 h earlier: the two epochs' UT1-UTC differ by the
# length-of-day excess (~1 ms/day: 0.3 ms = 0.0045" here).
SHIFTED_EPOCH_ARCSEC = 0.01
# ERA: the same formula as ERFA's era00; astropy adds polar motion for longitude 0 (< 1e-8 rad).
ERA_ATOL = 1e-8  # [rad]
# GMST82 + precession rate vs WGS84's 7.292115e-5 rad/s (which rounds the sidereal rate): 1.5e-7.
EARTH_RATE_RTOL = 1e-6
# IAU 2009 W rates vs the IAU 2015 values of the Body constants (Mercury's changed by 1.4e-6).
W_RATE_RTOL = 1e-5
# The IAU Moon (mean-Earth axes) vs DE421's principal axes: a constant ~100" rotation (the PA-ME
# offset) plus what the IAU series leaves out; its variation over 50 years stays below 30"
# (measured 25"), whereas omitting the periodic terms would leave errors of ~4 deg.
MOON_VARIATION_ARCSEC = 30.0


def _angle_arcsec(D):
    return math.degrees(math.acos(min(1.0, (np.trace(D) - 1.0) / 2.0))) * 3600.0


@pytest.mark.parametrize(
    "utc", ["2001-03-01T00:00:00Z", "2010-09-17T12:30:00Z", "2020-06-15T03:25:00Z"]
)
def test_earth_rotation_vs_astropy_itrs(utc):
    pytest.importorskip("astropy")
    import astropy.units as u
    from astropy.coordinates import GCRS, ITRS, CartesianRepresentation
    from astropy.time import Time
    from astropy.utils import iers

    iers.conf.auto_download = False
    t = Time(utc.rstrip("Z"), scale="utc")
    rep = CartesianRepresentation(np.eye(3).T * 1e7 * u.m)
    itrs = GCRS(rep, obstime=t).transform_to(ITRS(obstime=t))
    M_PN = (itrs.cartesian.xyz.to_value(u.m) / 1e7).T.T  # column i: image of e_i
    epoch = fx.astro.Epoch(utc)
    dut1 = float(t.delta_ut1_utc)
    dcm = np.asarray(fx.astro.EarthRotation(epoch, dut1=dut1)(0.0))
    assert _angle_arcsec(dcm @ M_PN.T) < EARTH_FRAME_ARCSEC
    # The same orientation reached from an earlier epoch by the run's time.
    earlier = epoch.shift(-43200.0)
    later = np.asarray(fx.astro.EarthRotation(earlier, dut1=dut1)(43200.0))
    assert _angle_arcsec(later @ dcm.T) < SHIFTED_EPOCH_ARCSEC
    era = float(fx.astro.earth_rotation_angle(t.ut1.jd1 + t.ut1.jd2))
    assert abs(era - t.earth_rotation_angle(0.0).rad) < ERA_ATOL


def test_earth_rotation_rate_and_grad():
    rot = fx.astro.EarthRotation(7.9e8)
    dcm, dcm_dot = jax.jvp(rot, (jnp.asarray(100.0),), (jnp.asarray(1.0),))
    W = -np.asarray(dcm_dot) @ np.asarray(dcm).T  # [PN]' = -[w~][PN], w = (0, 0, w_z)
    np.testing.assert_allclose(W[1, 0], fx.astro.EARTH.rotation_rate, rtol=EARTH_RATE_RTOL)
    np.testing.assert_allclose(np.asarray(dcm) @ np.asarray(dcm).T, np.eye(3), atol=1e-15)


@pytest.mark.parametrize("name", ["sun", "mercury", "venus", "earth", "mars", "jupiter", "saturn"])
def test_iau_rates_match_body_constants(name):
    body = fx.astro.BODIES[name]
    rot = fx.astro.IAURotation(body, 0.0)
    _, (_, _, w_dot) = jax.jvp(rot.angles, (jnp.asarray(1.0e6),), (jnp.asarray(1.0),))
    np.testing.assert_allclose(w_dot, body.rotation_rate, rtol=W_RATE_RTOL)
    dcm = np.asarray(rot(1.0e6))
    np.testing.assert_allclose(dcm @ dcm.T, np.eye(3), atol=1e-15)


def test_iau_moon_vs_de421_librations():
    de421 = pytest.importorskip("de421")
    from jplephem.ephem import Ephemeris

    e = Ephemeris(de421)
    rot = fx.astro.IAURotation(fx.astro.MOON, 0.0)
    ts = np.random.default_rng(0).uniform(0.0, 50 * 365.25 * 86400.0, 40)
    offsets = []
    for t in ts:
        phi, theta, psi = e.position("librations", 2451545.0, t / 86400.0).ravel()
        dcm_PA = np.asarray(
            _r3(jnp.asarray(psi)) @ _r1(jnp.asarray(theta)) @ _r3(jnp.asarray(phi))
        )  # DE421 3-1-3 Euler angles of the lunar principal axes
        offsets.append(np.asarray(rot(t)) @ dcm_PA.T)
    variation = max(_angle_arcsec(D @ offsets[0].T) for D in offsets)
    assert variation < MOON_VARIATION_ARCSEC


def test_rotation_errors():
    with pytest.raises(ValueError, match="IAURotation: `body`"):
        fx.astro.IAURotation("vulcan", 0.0)
    with pytest.raises(ValueError, match="EarthRotation: `dut1`"):
        fx.astro.EarthRotation(0.0, dut1=2.0)
    with pytest.raises(TypeError, match="EarthRotation: `epoch`"):
        fx.astro.EarthRotation("tomorrow")
