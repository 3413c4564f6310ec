"""Harris-Priester atmosphere against its published table (Montenbruck & Gill Table 3.8) and
closed forms of the interpolation and the bulge; drag driven by it."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from effectors._environment._harris_priester import _TABLE


EARTH = fx.astro.EARTH
R_SUN_N = np.array([1.496e11, 0.0, 0.0])  # [m] sun on the x axis: declination 0, RA 0
LAG = math.radians(30.0)  # bulge apex lag
APEX = np.array([math.cos(LAG), math.sin(LAG), 0.0])
# Table values reproduced through exp/log: a few ulps.
TABLE_RTOL = 1e-12
# Drag force of the same closed form: round-off.
FORCE_RTOL = 1e-12


def _density(atm, h_km, direction):
    """Densities [kg/m^3] at altitudes `h_km` (scalar or array) along `direction`, one call."""
    h = np.atleast_1d(np.asarray(h_km, dtype=float))
    r = (EARTH.radius_equatorial + 1000.0 * h)[:, None] * np.asarray(direction)[None, :]
    rho = np.asarray(jax.vmap(lambda x: atm.density_at(0.0, x))(jnp.asarray(r)))
    return rho if np.ndim(h_km) else float(rho[0])


@pytest.mark.parametrize("n", [2, 6])
def test_table_nodes_apex_antapex_and_bulge(n):
    atm = fx.HarrisPriesterAtmosphere(R_SUN_N, n=n)
    h, rho_min, rho_max = _TABLE[:-1].T
    np.testing.assert_allclose(_density(atm, h, APEX), rho_max * 1e-12, rtol=TABLE_RTOL)
    np.testing.assert_allclose(_density(atm, h, -APEX), rho_min * 1e-12, rtol=TABLE_RTOL)
    # 90 deg from the apex, in the equator: cos^n(45 deg) = 0.5^(n/2) of the way to the maximum.
    side = np.array([-math.sin(LAG), math.cos(LAG), 0.0])
    h, rho_min, rho_max = _TABLE[24]  # 400 km
    expected = (rho_min + (rho_max - rho_min) * 0.5 ** (n / 2)) * 1e-12
    np.testing.assert_allclose(_density(atm, h, side), expected, rtol=TABLE_RTOL)


def test_exponential_interpolation_and_limits():
    atm = fx.HarrisPriesterAtmosphere(R_SUN_N)
    for k in (0, 10, 30, 48):
        (h0, m0, M0), (h1, m1, M1) = _TABLE[k], _TABLE[k + 1]
        mid = 0.5 * (h0 + h1)
        # Exponential between nodes: the geometric mean at the midpoint.
        np.testing.assert_allclose(
            _density(atm, mid, APEX), math.sqrt(M0 * M1) * 1e-12, rtol=TABLE_RTOL
        )
        np.testing.assert_allclose(
            _density(atm, mid, -APEX), math.sqrt(m0 * m1) * 1e-12, rtol=TABLE_RTOL
        )
    assert _density(atm, 1000.5, APEX) == 0.0
    # Continuous across a node: 0.2 mm apart around 400 km the density changes by dh/H ~ 3e-9.
    below, above = _density(atm, 400.0 - 1e-7, APEX), _density(atm, 400.0 + 1e-7, APEX)
    np.testing.assert_allclose(below, above, rtol=1e-8)
    # Altitude above the ellipsoid: at the pole the radius is R (1 - f).
    pole = np.array([0.0, 0.0, EARTH.radius_equatorial * (1 - EARTH.flattening) + 400e3])
    np.testing.assert_allclose(atm.altitude(jnp.asarray(pole)), 400e3, rtol=1e-12)


def test_drag_with_harris_priester():
    """Drag reads the time-dependent density at the run's time; gradient finite."""
    eph = fx.astro.AnalyticSunMoon()
    atm = fx.HarrisPriesterAtmosphere(eph.trajectory("sun", 7.9e8))
    drag = fx.Drag(atm, Cd=2.2, area=1.5)
    sc = fx.Spacecraft(
        fx.Hub(100.0, np.eye(3)),
        dynamic_effectors=[drag],
        gravity=[fx.PointMassGravity(EARTH, central=True)],
    )
    r = np.array([EARTH.radius_equatorial + 400e3, 0.0, 0.0])
    v = np.array([0.0, 7.67e3, 0.0])
    y = sc.init_state(r, v)
    F = np.asarray(drag.force_torque(sc.context(0.0, y, None)).force_B)
    rho = float(atm.density_at(0.0, jnp.asarray(r)))
    np.testing.assert_allclose(F, -0.5 * 2.2 * 1.5 * rho * np.linalg.norm(v) * v, rtol=FORCE_RTOL)
    assert 1e-13 < rho < 1e-11  # [kg/m^3] 400 km, between the table's extremes

    # d|F|/dr: finite, and negative upward (density falls with altitude).
    g = jax.grad(
        lambda r: jnp.sum(
            drag.force_torque(
                sc.context(0.0, {**y, "hub": {**y["hub"], "r_BN_N": r}}, None)
            ).force_B
            ** 2
        )
    )(jnp.asarray(r))
    assert np.all(np.isfinite(g)) and g[0] < 0


def test_harris_priester_errors():
    with pytest.raises(ValueError, match="HarrisPriesterAtmosphere: `n`"):
        fx.HarrisPriesterAtmosphere(R_SUN_N, n=8)
    with pytest.raises(ValueError, match="Drag: `atmosphere`"):
        fx.Drag(object(), Cd=2.2, area=1.0)
