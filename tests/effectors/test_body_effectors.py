"""Gravity, atmosphere and SRP built from `effectors.astro.Body` objects equal the explicit ones."""

import math

import numpy as np
import pytest

import effectors as fx


EARTH = fx.astro.EARTH
X_N = np.array([6.9e6, 1.2e6, -2.0e6])  # [m]
# The same field from the same numbers: identical up to the order of a few operations.
SAME_RTOL = 1e-15


def test_point_mass_from_body():
    g = fx.PointMassGravity(EARTH)
    assert g.name == "earth" and float(g.mu) == EARTH.mu
    assert fx.PointMassGravity(fx.astro.MOON).name == "moon"
    assert fx.PointMassGravity(EARTH, name="home").name == "home"
    assert fx.PointMassGravity(3.986e14).name == "earth"  # the former default kept


def test_spherical_harmonics_from_body_zonals():
    j2_only = fx.SphericalHarmonicGravity.j2(EARTH.mu, EARTH.radius_equatorial, EARTH.J[0])
    from_body = fx.SphericalHarmonicGravity.from_body(EARTH, degree=2)
    np.testing.assert_allclose(from_body.field(0.0, X_N), j2_only.field(0.0, X_N), rtol=SAME_RTOL)
    full = fx.SphericalHarmonicGravity.from_body(EARTH)
    assert full.degree == len(EARTH.J) + 1
    C = np.asarray(full.C)
    for l, J in enumerate(EARTH.J, start=2):
        assert C[l, 0] == pytest.approx(-J / math.sqrt(2 * l + 1), rel=1e-15)
    with pytest.raises(ValueError, match="from_body: `degree` must be in"):
        fx.SphericalHarmonicGravity.from_body(EARTH, degree=len(EARTH.J) + 2)
    with pytest.raises(TypeError, match="from_body: `body`"):
        fx.SphericalHarmonicGravity.from_body("earth")


def test_atmosphere_and_srp_occulter_from_body():
    atm = fx.ExponentialAtmosphere.from_body(EARTH, 1.217, 8500.0)
    assert float(atm.planet_radius) == EARTH.radius_equatorial
    srp = fx.CannonballSRP(1.0, [1.5e11, 0.0, 0.0], shadow="conical", R_occ=fx.astro.MOON)
    assert float(srp.R_occ) == fx.astro.MOON.radius_equatorial
    with pytest.raises(TypeError, match="ExponentialAtmosphere.from_body: `body`"):
        fx.ExponentialAtmosphere.from_body(6371e3, 1.217, 8500.0)
