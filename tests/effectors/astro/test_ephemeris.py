"""JAX ephemerides: DE421 Chebyshev series against jplephem, and the analytic Sun/Moon accuracy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from effectors.astro._ephemeris import DAY, J2000_JD, AnalyticSunMoon, DE421Ephemeris


de421 = pytest.importorskip("de421")
jplephem_ephem = pytest.importorskip("jplephem.ephem")

# jplephem evaluates the same series in float64 (its time split into JD + day fraction): the two
# agree to round-off, ~1e-12 for the Moon; the requirement is 1e-9.
EPHEMERIS_RTOL = 1e-9
# Reverse-mode and forward-mode derivatives of one polynomial: round-off apart.
GRAD_RTOL = 1e-12
# Measured accuracy of the analytic series over 2000-2050 (AnalyticSunMoon's docstring), with margin:
SUN_ANGLE_DEG = 0.2  # M&G's Sun longitude drifts 0.32 deg/century from J2000 (fixed perihelion)
SUN_DISTANCE_REL = 2e-4  # measured 8e-5
MOON_ANGLE_DEG = 0.1  # measured 0.08 deg (M&G: "several arcminutes")
MOON_DISTANCE_REL = 2e-3  # measured 1.3e-3 (~500 km, as M&G state)

START = 7.9e8  # [s] TDB past J2000 (2025-01-13)
STOP = START + 40 * DAY  # [s]
TARGETS = ("sun", "mercury", "venus", "moon", "mars", "jupiter", "saturn", "emb")


def _jpl():
    return jplephem_ephem.Ephemeris(de421)


def _jpl_ssb(e, name, t):
    """Position [m] and velocity [m/s] of `name` about the SSB from jplephem, `t` TDB s past J2000."""
    if name == "ssb":
        return np.zeros(3), np.zeros(3)
    if name in ("earth", "moon", "emb"):
        p, v = e.position_and_velocity("earthmoon", J2000_JD, t / DAY)
        pm, vm = e.position_and_velocity("moon", J2000_JD, t / DAY)
        share = {"earth": -e.earth_share, "moon": e.moon_share, "emb": 0.0}[name]
        p, v = p + share * pm, v + share * vm
    else:
        p, v = e.position_and_velocity(name, J2000_JD, t / DAY)
    return np.ravel(p) * 1e3, np.ravel(v) * 1e3 / DAY


def _rel(a, b):
    return np.max(np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1))


@pytest.mark.parametrize("center", ["earth", "ssb", "moon"])
def test_de421_matches_jplephem(center):
    """Positions and velocities at random times under jit + vmap equal jplephem's."""
    targets = tuple(t for t in (*TARGETS, "earth") if t != center)
    eph = DE421Ephemeris(targets, START, STOP, center=center)
    ts = np.random.default_rng(0).uniform(START, STOP, 100)
    e = _jpl()
    states = jax.jit(jax.vmap(lambda t: [eph.state(n, t) for n in targets]))(jnp.asarray(ts))
    for name, (r, v) in zip(targets, states):
        ref = [np.subtract(_jpl_ssb(e, name, t), _jpl_ssb(e, center, t)) for t in ts]
        R, V = np.array([x[0] for x in ref]), np.array([x[1] for x in ref])
        np.testing.assert_array_less(_rel(np.asarray(r), R), EPHEMERIS_RTOL, err_msg=name)
        np.testing.assert_array_less(_rel(np.asarray(v), V), EPHEMERIS_RTOL, err_msg=name)


def test_de421_grad_is_velocity_and_body_targets():
    """`grad` of each position component w.r.t. time is the velocity; `Body` objects as targets."""
    eph = DE421Ephemeris((fx.astro.MOON, fx.astro.SUN), START, STOP, center=fx.astro.EARTH)
    t = START + 12.3456 * DAY
    for body in (fx.astro.MOON, fx.astro.SUN):
        _, v = jax.jit(lambda s: eph.state(body, s))(t)
        g = jax.jit(jax.jacrev(lambda s: eph.position(body, s)))(t)  # reverse mode
        np.testing.assert_allclose(g, v, rtol=GRAD_RTOL, atol=0.0)
    # A trajectory of a run's time: the epoch offset added.
    traj = eph.trajectory(fx.astro.MOON, START)
    np.testing.assert_array_equal(traj(5.0), eph.position("moon", START + 5.0))


def test_de421_errors():
    with pytest.raises(ValueError, match="DE421Ephemeris: `targets` must be among"):
        DE421Ephemeris(("sun", "vulcan"), START, STOP)
    with pytest.raises(ValueError, match="DE421Ephemeris: `stop`"):
        DE421Ephemeris("sun", START, START - 1.0)
    with pytest.raises(ValueError, match="DE421's"):
        DE421Ephemeris("sun", 6e9, 7e9)
    eph = DE421Ephemeris("sun", START, STOP)
    with pytest.raises(ValueError, match="one of the ephemeris' targets"):
        eph.position("moon", START)
    # A time outside the copied records is an error, not an extrapolation.
    with pytest.raises(Exception, match="outside the copied records"):
        jax.jit(lambda t: eph.position("sun", t))(STOP + 40 * DAY)


def test_analytic_sun_moon_accuracy():
    """Montenbruck & Gill's series against DE421 over 2000-2050: the documented accuracy."""
    start, stop = 0.0, 50 * 365.25 * DAY
    eph = DE421Ephemeris(("sun", "moon"), start, stop)
    an = AnalyticSunMoon()
    ts = jnp.asarray(np.random.default_rng(1).uniform(start, stop, 2000))
    limits = {"sun": (SUN_ANGLE_DEG, SUN_DISTANCE_REL), "moon": (MOON_ANGLE_DEG, MOON_DISTANCE_REL)}
    for name, (max_angle, max_dist) in limits.items():
        r = np.asarray(jax.vmap(lambda t: eph.position(name, t))(ts))
        a = np.asarray(jax.jit(jax.vmap(lambda t: an.position(name, t)))(ts))
        nr, na = np.linalg.norm(r, axis=1), np.linalg.norm(a, axis=1)
        angle = np.degrees(np.arccos(np.clip(np.sum(r * a, 1) / (nr * na), -1.0, 1.0)))
        np.testing.assert_array_less(angle.max(), max_angle, err_msg=name)
        np.testing.assert_array_less(np.abs(na / nr - 1).max(), max_dist, err_msg=name)
    with pytest.raises(ValueError, match="AnalyticSunMoon.position: `target`"):
        an.position("mars", 0.0)
