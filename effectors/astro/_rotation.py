r"""Planet orientation $[PN](t)$: Earth's rotation (mean equator and equinox of date) and the IAU
WGCCRE rotation models of the other bodies, as callables of a run's time for
`SphericalHarmonicGravity(dcm_PN=...)`.

Frames: $\mathcal N$ is the ICRF/EME2000 frame of the ephemerides; $\mathcal P$ the body-fixed frame.
Rotations $R_i(\alpha)$ are frame rotations (`R3(a) = [[c, s, 0], [-s, c, 0], [0, 0, 1]]`).

**Earth** (`EarthRotation`): $[PN] = R_3(\theta_{GMST})\,P$, the IAU 1976 precession
$P = R_3(-z)R_2(\theta)R_3(-\zeta)$ (Lieske et al. 1977) from J2000 to the mean equator and equinox
of date, and the IAU 1982 Greenwich mean sidereal time (Aoki et al. 1982)

$$\theta_{GMST} = 67310.54841\,\mathrm s + (876600\,\mathrm h + 8640184.812866\,\mathrm s)T_u
+ 0.093104\,\mathrm s\,T_u^2 - 6.2\times10^{-6}\,\mathrm s\,T_u^3$$

($T_u$ Julian centuries of UT1 from J2000; UT1 = UTC + `dut1`). Nutation (up to 17" in longitude,
9" in obliquity), the equation of the equinoxes (< 1.2 s of time) and polar motion (< 0.5") are
neglected: the frame is within about 25 arcsec (1.2e-4 rad) of the ITRS, measured against astropy's
GCRS-to-ITRS transformation in `tests/effectors/astro/test_rotation.py`. For gravity this is an error of order
$10^{-4}$ of the tesseral part of the field (1e-10 of the total for the Earth).
`earth_rotation_angle(jd_ut1)` gives the IERS 2010 Earth rotation angle.

**Other bodies** (`IAURotation`): $[PN] = R_3(W)\,R_1(90° - \delta_0)\,R_3(90° + \alpha_0)$ with
the pole right ascension $\alpha_0$, declination $\delta_0$ (linear in Julian centuries $T$ of TDB) and
prime meridian angle $W$ (linear in days $d$) of the IAU WGCCRE reports (Archinal et al. 2011, 2018),
including the Moon's periodic terms.

**References:** Lieske, J. H., et al., "Expressions for the precession quantities based upon the IAU
(1976) system of astronomical constants", Astron. Astrophys. 58, 1-16, 1977; Aoki, S., et al., "The
new definition of Universal Time", Astron. Astrophys. 105, 359-361, 1982; Petit, G., Luzum, B.
(eds.), *IERS Conventions (2010)*, IERS Technical Note 36, eq. 5.15; Vallado, D. A., *Fundamentals
of Astrodynamics and Applications*, 4th ed., 2013, sec. 3.7; Archinal, B. A., et al., "Report of the
IAU Working Group on Cartographic Coordinates and Rotational Elements: 2009", Celest. Mech. Dyn.
Astron. 109, 101-135, 2011, doi:10.1007/s10569-010-9320-4.
"""

import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._bodies import Body
from ._time import Epoch


_DEG = math.pi / 180.0  # [rad]
_ARCSEC = _DEG / 3600.0  # [rad]
_DAY = 86400.0  # [s]
_CENTURY_DAYS = 36525.0  # [d]
_J2000_JD = 2451545.0  # [d]
# TT - UTC since 2017-01-01 (32.184 s + 37 leap seconds), used when the epoch is a plain number.
_TT_MINUS_UTC = 69.184  # [s]


def _r1(a):
    c, s = jnp.cos(a), jnp.sin(a)
    o, z = jnp.ones_like(a), jnp.zeros_like(a)
    return jnp.stack([jnp.stack([o, z, z]), jnp.stack([z, c, s]), jnp.stack([z, -s, c])])


def _r2(a):
    c, s = jnp.cos(a), jnp.sin(a)
    o, z = jnp.ones_like(a), jnp.zeros_like(a)
    return jnp.stack([jnp.stack([c, z, -s]), jnp.stack([z, o, z]), jnp.stack([s, z, c])])


def _r3(a):
    c, s = jnp.cos(a), jnp.sin(a)
    o, z = jnp.ones_like(a), jnp.zeros_like(a)
    return jnp.stack([jnp.stack([c, s, z]), jnp.stack([-s, c, z]), jnp.stack([z, z, o])])


def earth_rotation_angle(jd_ut1: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""IERS 2010 Earth rotation angle [rad] in [0, 2 pi) at Julian date `jd_ut1` (UT1):
    $2\pi(0.7790572732640 + 1.00273781191135448\,D_u)$, $D_u$ = JD(UT1) - 2451545.0."""
    du = jnp.asarray(jd_ut1, dtype=float) - _J2000_JD
    turns = jnp.mod(du, 1.0) + 0.7790572732640 + 0.00273781191135448 * du
    return 2.0 * jnp.pi * jnp.mod(turns, 1.0)


def gmst82(days_ut1: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""IAU 1982 Greenwich mean sidereal time [rad] at `days_ut1` days of UT1 past J2000."""
    tu = days_ut1 / _CENTURY_DAYS
    seconds = (
        67310.54841 + (876600.0 * 3600.0 + 8640184.812866) * tu + 0.093104 * tu**2 - 6.2e-6 * tu**3
    )
    return jnp.mod(seconds, _DAY) * (2.0 * jnp.pi / _DAY)


def precession76(days_tt: Float[ArrayLike, ""]) -> Float[Array, "3 3"]:
    """IAU 1976 precession matrix [-] from the J2000 mean equator and equinox to those of date,
    `days_tt` days of TT past J2000 (Lieske et al. 1977)."""
    T = days_tt / _CENTURY_DAYS
    zeta = (2306.2181 * T + 0.30188 * T**2 + 0.017998 * T**3) * _ARCSEC
    theta = (2004.3109 * T - 0.42665 * T**2 - 0.041833 * T**3) * _ARCSEC
    z = (2306.2181 * T + 1.09468 * T**2 + 0.018203 * T**3) * _ARCSEC
    return _r3(-z) @ _r2(theta) @ _r3(-zeta)


def _epoch_days(cls, epoch, dut1):
    """(days of TT past J2000, days of UT1 past J2000) at the epoch."""
    if all(hasattr(epoch, a) for a in ("jd_utc", "jd_tt")):
        return float(epoch.jd_tt) - _J2000_JD, float(epoch.jd_utc) - _J2000_JD + dut1 / _DAY
    try:
        t = float(getattr(epoch, "tdb_seconds_past_j2000", epoch))
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{cls}: `epoch` must be an Epoch or TDB seconds past J2000 [s]; got {epoch!r}."
        ) from err
    return t / _DAY, (t - _TT_MINUS_UTC + dut1) / _DAY


class EarthRotation(eqx.Module):
    r"""Earth orientation $[PN](t) = R_3(\theta_{GMST})P_{76}$ along a run (see the module docs).

    **Arguments:**

    - `epoch`: the run's epoch, an `Epoch` (its UTC and TT dates) or TDB seconds past J2000 [s]
      (then TT = TDB and UTC = TT - 69.184 s, the offset since 2017).
    - `dut1`: UT1 - UTC [s] (IERS Bulletin A, |dut1| < 0.9 s). Default: the `Epoch`'s
      `ut1_minus_utc` (astropy's bundled IERS tables) where they cover the date, else 0 (a 0.9 s
      error turns the Earth by 6.6e-5 rad). UT1 is advanced at the rate of TDB over the run (the
      length-of-day excess, ~1 ms/day, is neglected: < 1e-6 rad after a week).

    Call it with the run's time `t` [s] (TDB seconds past the epoch) for the `(3, 3)` $[PN]$.

    **Accuracy:** within 25 arcsec of the ITRS (nutation, equation of the equinoxes and polar motion
    neglected), measured against astropy in `tests/effectors/astro/test_rotation.py`.

    **Reference:** Vallado 2013, sec. 3.7 (FK5 reduction without nutation); Lieske et al. 1977;
    Aoki et al. 1982.
    """

    days_tt0: float = eqx.field(static=True)
    days_ut10: float = eqx.field(static=True)

    def __init__(self, epoch: Epoch | Float[ArrayLike, ""], *, dut1: float | None = None):
        if dut1 is None:
            try:
                dut1 = float(getattr(epoch, "ut1_minus_utc", 0.0))
            except ValueError:  # a date the bundled IERS tables do not cover
                dut1 = 0.0
        dut1 = float(dut1)
        if not abs(dut1) <= 1.0:
            raise ValueError(f"EarthRotation: `dut1` [s] must be within [-1, 1]; got {dut1}.")
        self.days_tt0, self.days_ut10 = _epoch_days("EarthRotation", epoch, dut1)

    def __call__(self, t):
        days = jnp.asarray(t, dtype=float) / _DAY
        return _r3(gmst82(self.days_ut10 + days)) @ precession76(self.days_tt0 + days)


# IAU WGCCRE rotation elements: (alpha0, alpha0 rate [deg/century], delta0, delta0 rate
# [deg/century], W0, W rate [deg/day]) at J2000 TDB; Archinal et al. 2011 (2009 report), Table 1-2.
_IAU_LINEAR = {
    "sun": (286.13, 0.0, 63.87, 0.0, 84.176, 14.1844000),
    "mercury": (281.0097, -0.0328, 61.4143, -0.0049, 329.5469, 6.1385025),
    "venus": (272.76, 0.0, 67.16, 0.0, 160.20, -1.4813688),
    "earth": (0.00, -0.641, 90.00, -0.557, 190.147, 360.9856235),
    "mars": (317.68143, -0.1061, 52.88650, -0.0609, 176.630, 350.89198226),
    "jupiter": (268.056595, -0.006499, 64.495303, 0.002413, 284.95, 870.5360000),
    "saturn": (40.589, -0.036, 83.537, -0.004, 38.90, 810.7939024),
    "uranus": (257.311, 0.0, -15.175, 0.0, 203.81, -501.1600928),
    "neptune": (299.36, 0.0, 43.46, 0.0, 249.978, 541.1397757),
    "moon": (269.9949, 0.0031, 66.5392, 0.0130, 38.3213, 13.17635815),
}


def _moon_periodic(d, T):
    """The Moon's periodic terms (deg) in alpha0, delta0, W (Archinal et al. 2011, Table 2)."""
    E = [
        (125.045, -0.0529921),
        (250.089, -0.1059842),
        (260.008, 13.0120009),
        (176.625, 13.3407154),
        (357.529, 0.9856003),
        (311.589, 26.4057084),
        (134.963, 13.0649930),
        (276.617, 0.3287146),
        (34.226, 1.7484877),
        (15.134, -0.1589763),
        (119.743, 0.0036096),
        (239.961, 0.1643573),
        (25.053, 12.9590088),
    ]
    E = [(e0 + e1 * d) * _DEG for e0, e1 in E]
    s = [jnp.sin(e) for e in E]
    c = [jnp.cos(e) for e in E]
    da = (
        -3.8787 * s[0] - 0.1204 * s[1] + 0.0700 * s[2] - 0.0172 * s[3] + 0.0072 * s[5]
        - 0.0052 * s[9] + 0.0043 * s[12]
    )  # fmt: skip
    dd = (
        1.5419 * c[0] + 0.0239 * c[1] - 0.0278 * c[2] + 0.0068 * c[3] - 0.0029 * c[5]
        + 0.0009 * c[6] + 0.0008 * c[9] - 0.0009 * c[12]
    )  # fmt: skip
    dw = (
        3.5610 * s[0] + 0.1208 * s[1] - 0.0642 * s[2] + 0.0158 * s[3] + 0.0252 * s[4]
        - 0.0066 * s[5] - 0.0047 * s[6] - 0.0046 * s[7] + 0.0028 * s[8] + 0.0052 * s[9]
        + 0.0040 * s[10] + 0.0019 * s[11] - 0.0044 * s[12] - 1.4e-12 * d**2
    )  # fmt: skip
    return da, dd, dw


def _neptune_periodic(d, T):
    """Neptune's periodic terms (deg), N = 357.85 + 52.316 T (Archinal et al. 2011, Table 1)."""
    N = (357.85 + 52.316 * T) * _DEG
    return 0.70 * jnp.sin(N), -0.51 * jnp.cos(N), -0.48 * jnp.sin(N)


_IAU_PERIODIC = {"moon": _moon_periodic, "neptune": _neptune_periodic}


class IAURotation(eqx.Module):
    r"""Body-fixed orientation $[PN](t) = R_3(W)R_1(90° - \delta_0)R_3(90° + \alpha_0)$ from the IAU
    WGCCRE 2009 rotation elements (see the module documentation).

    **Arguments:**

    - `body`: an `effectors.astro.Body` or name among the Sun, the planets and the Moon (the Moon's
      mean-Earth/polar-axis frame with its 13 periodic terms; Neptune's with its N terms; Jupiter's
      small periodic pole terms omitted, < 0.0004 deg).
    - `epoch`: the run's epoch, an `Epoch` or TDB seconds past J2000 [s].

    Call it with the run's time `t` [s] (TDB seconds past the epoch) for the `(3, 3)` $[PN]$.

    **Reference:** Archinal, B. A., et al., Celest. Mech. Dyn. Astron. 109, 101-135, 2011,
    doi:10.1007/s10569-010-9320-4.
    """

    body: str = eqx.field(static=True)
    t0: float = eqx.field(static=True)

    def __init__(self, body: Body | str, epoch: Epoch | Float[ArrayLike, ""]):
        name = body.name if isinstance(body, Body) else body
        if name not in _IAU_LINEAR:
            raise ValueError(
                f"IAURotation: `body` must be one of {tuple(_IAU_LINEAR)}; got {name!r}."
            )
        self.body = name
        self.t0 = float(getattr(epoch, "tdb_seconds_past_j2000", epoch))

    def angles(self, t):
        """$(\\alpha_0, \\delta_0, W)$ [rad] at the run's time `t` [s]."""
        d = (self.t0 + jnp.asarray(t, dtype=float)) / _DAY
        T = d / _CENTURY_DAYS
        a0, a1, d0, d1, w0, w1 = _IAU_LINEAR[self.body]
        alpha, delta, W = a0 + a1 * T, d0 + d1 * T, w0 + jnp.mod(w1 * d, 360.0)
        if self.body in _IAU_PERIODIC:
            da, dd, dw = _IAU_PERIODIC[self.body](d, T)
            alpha, delta, W = alpha + da, delta + dd, W + dw
        return alpha * _DEG, delta * _DEG, W * _DEG

    def __call__(self, t):
        alpha, delta, W = self.angles(t)
        return _r3(W) @ _r1(0.5 * jnp.pi - delta) @ _r3(0.5 * jnp.pi + alpha)
