"""TEME -> GCRS/ITRS (`effectors.astro.teme_to_gcrs`, `teme_to_itrs`) against astropy's `TEME`
frame and ERFA's IAU 1976/1980 functions; WGS84 geodetic coordinates against their generating
values and astropy; `tle_state` (a run's initial state from a TLE at an Epoch)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest


astropy = pytest.importorskip("astropy", reason="the astro extra (astropy, ERFA)")
erfa = pytest.importorskip("erfa")

import astropy.units as u  # noqa: E402
from astropy.coordinates import (  # noqa: E402
    GCRS,
    ITRS,
    TEME,
    CartesianDifferential,
    CartesianRepresentation,
    EarthLocation,
)
from astropy.time import Time  # noqa: E402
from astropy.utils import iers  # noqa: E402

from effectors import astro  # noqa: E402


# ERFA's nut80/eqeq94/pnm80/bp00 and ours: the same series, summed in another order [rad].
ERFA_ROUNDOFF = 1e-14
# FK5 (IAU 1976 precession, IAU 1980 nutation, no celestial-pole offsets) against astropy's IAU
# 2006/2000A GCRS: the pole models differ by up to ~30 mas; measured 1.4e-7 rad (2024) [rad].
FK5_POLE = 2e-7
# TEME -> ITRS, same definition as astropy's (GMST82, polar motion): UT1 and polar motion from the
# same bundled tables, interpolated apart (measured 1e-9 rad in 2006, 6e-12 elsewhere) [rad].
ITRS_SAME = 2e-9
# Velocities in the ITRS: the derivative of GMST82 against astropy's finite differences, which
# follow UT1's own rate (length-of-day excess up to ~3 ms/d: 3.5e-8 of omega x r; measured 1.8e-5 m/s
# at 42000 km in 2000) [-], plus round-off [m/s].
LOD = 4e-8
ITRS_VELOCITY = 1e-6
OMEGA = 7.2921158553e-5  # [rad/s]
# Geodetic: Heikkinen's closed form, measured 2e-8 m and 4e-16 rad against the generating values.
GEODETIC_M = 1e-7  # [m]
GEODETIC_RAD = 1e-15  # [rad]
# astropy's to_geodetic (ERFA gc2gd) is accurate to ~3e-11 rad.
ASTROPY_GEODETIC_RAD = 1e-10

DATES = ["2000-06-27T18:50:19", "2006-06-26T06:53:44", "2015-03-20T12:00:00", "2024-01-01T00:00:00"]
# A LEO state (case 29238 of Vallado's set) and a GEO-radius state, TEME [m], [m/s].
R = np.array([[-5566595.1, -3789759.9, 67603.8], [25298400.0, 33731200.0, 1000000.0]])
V = np.array([[2873.76, -3825.34, 6023.25], [-2459.2, 1844.4, 10.0]])


@pytest.fixture(autouse=True)
def _no_download():
    with iers.conf.set_temp("auto_download", False):
        yield


@pytest.mark.parametrize("jd", [2440000.2, 2451545.0, 2453000.3, 2460000.7, 2470000.1])
def test_series_against_erfa(jd):
    d = jd - 2451545.0
    dpsi, deps = astro.nutation80(d)
    ref = erfa.nut80(jd, 0.0)
    assert abs(float(dpsi) - ref[0]) <= ERFA_ROUNDOFF and abs(float(deps) - ref[1]) <= ERFA_ROUNDOFF
    assert abs(float(astro.equation_of_equinoxes94(d)) - erfa.eqeq94(jd, 0.0)) <= ERFA_ROUNDOFF
    assert abs(float(astro.mean_obliquity80(d)) - erfa.obl80(jd, 0.0)) <= ERFA_ROUNDOFF
    rb, _, _ = erfa.bp00(jd, 0.0)
    M_ref = erfa.rz(erfa.eqeq94(jd, 0.0), erfa.pnm80(jd, 0.0)) @ rb
    assert np.abs(np.asarray(astro.dcm_gcrs_to_teme(d)) - M_ref).max() <= ERFA_ROUNDOFF


def _astropy(frame, iso, t, k):
    at = Time(iso, scale="utc") + t * u.s
    rep = CartesianRepresentation(R[k] * u.m, differentials=CartesianDifferential(V[k] * u.m / u.s))
    out = TEME(rep, obstime=at).transform_to(frame(obstime=at))
    return out.cartesian.xyz.to_value(u.m), out.velocity.d_xyz.to_value(u.m / u.s)


@pytest.mark.parametrize("iso", DATES)
def test_teme_to_gcrs_against_astropy(iso):
    epoch = astro.Epoch(iso + "Z")
    for k in range(2):
        for t in (0.0, 3600.0):
            r, v = astro.teme_to_gcrs(R[k], V[k], epoch, t)
            r_ref, v_ref = _astropy(GCRS, iso, t, k)
            assert np.linalg.norm(np.asarray(r) - r_ref) <= FK5_POLE * np.linalg.norm(R[k])
            # The velocity also carries the neglected rotation of the frame (< 1e-4 m/s).
            dv = np.linalg.norm(np.asarray(v) - v_ref)
            assert dv <= FK5_POLE * np.linalg.norm(V[k]) + 1e-4


@pytest.mark.parametrize("iso", DATES)
def test_teme_to_itrs_against_astropy(iso):
    epoch = astro.Epoch(iso + "Z")
    for k in range(2):
        r, v = astro.teme_to_itrs(R[k], V[k], epoch)
        r_ref, v_ref = _astropy(ITRS, iso, 0.0, k)
        assert np.linalg.norm(np.asarray(r) - r_ref) <= ITRS_SAME * np.linalg.norm(R[k])
        dv = np.linalg.norm(np.asarray(v) - v_ref)
        assert dv <= LOD * OMEGA * np.linalg.norm(R[k]) + ITRS_VELOCITY


def test_itrs_velocity_is_the_derivative_of_the_position():
    # d/dt [W R3(theta(t)) r(t)] with r moving at v: forward-mode derivative of the position map.
    epoch = astro.Epoch("2024-01-01T00:00:00Z")

    def pos(t):
        return astro.teme_to_itrs(R[0] + V[0] * t, V[0], epoch, t, xp=1e-6, yp=2e-6)[0]

    drdt = jax.jacfwd(pos)(jnp.asarray(10.0))
    _, v = astro.teme_to_itrs(R[0] + V[0] * 10.0, V[0], epoch, 10.0, xp=1e-6, yp=2e-6)
    assert np.abs(np.asarray(drdt) - np.asarray(v)).max() <= 1e-9


def test_batches_over_times():
    epoch = astro.Epoch("2015-03-20T12:00:00Z")
    t = np.array([0.0, 600.0, 1200.0])
    r, v = astro.teme_to_gcrs(np.tile(R[0], (3, 1)), np.tile(V[0], (3, 1)), epoch, t)
    assert r.shape == (3, 3)
    for k in range(3):
        rk, _ = astro.teme_to_gcrs(R[0], V[0], epoch, t[k])
        assert np.abs(np.asarray(r[k]) - np.asarray(rk)).max() <= 1e-8
    ri, _ = astro.teme_to_itrs(np.tile(R[0], (3, 1)), np.tile(V[0], (3, 1)), epoch, t)
    assert ri.shape == (3, 3)


def test_geodetic_recovers_generating_coordinates():
    rng = np.random.default_rng(0)
    n = 400
    lat = np.arcsin(rng.uniform(-1, 1, n))
    lon = rng.uniform(-np.pi, np.pi, n)
    h = np.concatenate([rng.uniform(-5e3, 2e6, n // 2), rng.uniform(2e6, 5e7, n // 2)])
    loc = EarthLocation.from_geodetic(lon * u.rad, lat * u.rad, h * u.m, ellipsoid="WGS84")
    xyz = np.stack([loc.x.to_value(u.m), loc.y.to_value(u.m), loc.z.to_value(u.m)], -1)
    la, lo, hh = (np.asarray(x) for x in astro.geodetic(xyz))
    assert np.abs(la - lat).max() <= GEODETIC_RAD and np.abs(hh - h).max() <= GEODETIC_M
    assert np.abs(np.angle(np.exp(1j * (lo - lon)))).max() <= GEODETIC_RAD
    g = loc.to_geodetic("WGS84")
    assert np.abs(la - g.lat.to_value(u.rad)).max() <= ASTROPY_GEODETIC_RAD
    # The poles and the equator: closed forms.
    b = astro.WGS84_A * (1.0 - astro.WGS84_F)
    la, lo, hh = astro.geodetic(np.array([[0.0, 0.0, b + 100.0], [0.0, 0.0, -b - 50.0]]))
    np.testing.assert_allclose(np.asarray(la), [np.pi / 2, -np.pi / 2], rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(hh), [100.0, 50.0], rtol=0, atol=1e-6)
    la, lo, hh = astro.geodetic(np.array([0.0, astro.WGS84_A + 7.0, 0.0]))
    assert float(la) == 0.0 and float(lo) == np.pi / 2 and abs(float(hh) - 7.0) <= GEODETIC_M


L1 = "1 00005U 58002B   00179.78495062  .00000023  00000-0  28098-4 0  4753"
L2 = "2 00005  34.2682 348.7242 1859667 331.7664  19.3264 10.82419157413667"


def test_tle_state_is_sgp4_then_gcrs():
    tle = astro.TLE(L1, L2)
    epoch = astro.Epoch("2000-06-28T00:00:00Z")
    r, v = astro.tle_state(tle, epoch)
    dt = (Time("2000-06-28T00:00:00", scale="utc") - tle.epoch.to_astropy()).to_value(u.s)
    out = tle.propagate(dt)
    r_ref, v_ref = astro.teme_to_gcrs(out.r_TEME, out.v_TEME, epoch)
    assert np.abs(np.asarray(r) - np.asarray(r_ref)).max() <= 1e-6
    assert np.abs(np.asarray(v) - np.asarray(v_ref)).max() <= 1e-9
    # Decayed by then: SGP4's code named, nothing returned.
    decayed = astro.TLE(
        "1 28872U 05037B   05333.02012661  .25992681  00000-0  24476-3 0  1534",
        "2 28872  96.4736 157.9986 0303955 244.0492 110.6523 16.46015938 10708",
    )
    with pytest.raises(ValueError, match="SGP4 gives error 6"):
        astro.tle_state(decayed, astro.Epoch("2005-11-29T01:30:00Z"))


def test_gcrs_to_itrs_is_the_chain_and_matches_astropy():
    epoch = astro.Epoch("2024-01-01T00:00:00Z")
    t = np.array([0.0, 1800.0])
    rg, vg = astro.teme_to_gcrs(np.tile(R[0], (2, 1)), np.tile(V[0], (2, 1)), epoch, t)
    ri, vi = astro.gcrs_to_itrs(rg, vg, epoch, t)
    ri_ref, vi_ref = astro.teme_to_itrs(np.tile(R[0], (2, 1)), np.tile(V[0], (2, 1)), epoch, t)
    assert np.abs(np.asarray(ri) - np.asarray(ri_ref)).max() <= 1e-7
    assert np.abs(np.asarray(vi) - np.asarray(vi_ref)).max() <= 1e-10
    at = Time("2024-01-01T00:00:00", scale="utc")
    g = GCRS(CartesianRepresentation(np.asarray(rg[0]) * u.m), obstime=at).transform_to(
        ITRS(obstime=at)
    )
    dr = np.linalg.norm(np.asarray(ri[0]) - g.cartesian.xyz.to_value(u.m))
    assert dr <= FK5_POLE * np.linalg.norm(R[0])


def test_ground_track_plot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from effectors import plotting

    # Two orbits of Vanguard 1 (34.27 deg inclination) from SGP4, in the GCRS.
    tle = astro.TLE(L1, L2)
    epoch = tle.epoch
    ts = np.arange(0.0, 2 * 133.0 * 60.0, 60.0)
    out = tle.propagate(ts)
    r, _ = astro.teme_to_gcrs(out.r_TEME, out.v_TEME, epoch, ts)
    sol = {"ts": ts, "outputs": {"r_CN_N": np.asarray(r)}}
    fig = plotting.plot_ground_track(sol, epoch)
    ax, axh = fig.axes
    lines = [ln for ln in ax.lines if ln.get_marker() in ("None", None, "")]
    lon = np.concatenate([ln.get_xdata() for ln in lines])
    lat = np.concatenate([ln.get_ydata() for ln in lines])
    assert len(lon) == len(ts) and len(lines) >= 2  # split at the antimeridian, nothing lost
    assert all(np.abs(np.diff(ln.get_xdata())).max(initial=0.0) < 180.0 for ln in lines)
    # Geodetic latitude reaches about the inclination (34.27 deg; geodetic > geocentric by < 0.2).
    assert 33.5 <= np.abs(lat).max() <= 34.6
    h = axh.lines[0].get_ydata()
    assert 600.0 <= h.min() and h.max() <= 3900.0  # perigee ~650 km, apogee ~3800 km
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match="draw_ground_track: `lat_deg` and `lon_deg`"):
        plotting.draw_ground_track(ax, np.zeros(3), np.zeros(4))
