r"""TEME, the frame of SGP4, to the GCRS and the ITRS (IAU-76/FK5 equinox-based reduction).

SGP4 states are in TEME, the true equator and mean equinox of date (Vallado et al. 2006, sec. on
"TEME"): the true equator of the epoch of each evaluation, with its $x$ axis the mean equinox
projected on it, so that the Earth-fixed frame follows from the 1982 mean sidereal time alone.

- **TEME -> ITRS**: $\mathbf r_{PEF} = R_3(\theta_{GMST82})\,\mathbf r_{TEME}$ (GMST of UT1, Aoki et
  al. 1982), $\mathbf r_{ITRS} = W\,\mathbf r_{PEF}$ with the polar motion
  $W = R_1(-y_p)R_2(-x_p)$; velocities $\mathbf v_{ITRS} = W(R_3\mathbf v_{TEME} -
  \boldsymbol\omega\times\mathbf r_{PEF})$ with $\omega = \dot\theta_{GMST82}$ (7.2921158553e-5
  rad/s: the derivative of the rotation itself; polar motion is held constant).
- **TEME -> GCRS**: $\mathbf r_{GCRS} = B^T P^T N^T R_3(-E_q)\,\mathbf r_{TEME}$: the equation of the
  equinoxes $E_q = \Delta\psi\cos\epsilon_A + 0.00264''\sin\Omega + 0.000063''\sin 2\Omega$ (IAU
  1994, as ERFA's `eqeq94`) takes TEME to the true equator and equinox of date; the IAU 1980
  nutation $N = R_1(-\epsilon_A-\Delta\epsilon)R_3(-\Delta\psi)R_1(\epsilon_A)$ (all 106 terms of
  Seidelmann 1982, the mean obliquity of Lieske et al. 1977) to the mean equator and equinox of date;
  the IAU 1976 precession $P$ (`precession76`) to the mean equator and equinox of J2000; the IERS
  2003 frame bias $B$ ($d\psi_b = -0.041775''$, $d\epsilon_b = -0.0068192''$, $d\alpha_0 = -0.0146''$)
  to the GCRS. Velocities are rotated by the same matrix (its own rotation, precession and nutation,
  is below 1e-11 rad/s: 1e-4 m/s at GEO).

No celestial-pole offsets ($d\psi$, $d\epsilon$ of the IERS bulletins) are applied: the IAU
1976/1980 pole then differs from the IAU 2006/2000A pole of astropy's GCRS by some 0.01-0.05 arcsec,
the accuracy of this reduction (0.3-1.7 m at 7000 km, measured against astropy's `TEME` frame in
`tests/effectors/astro/test_teme.py`). TEME -> ITRS involves no precession or nutation and agrees
with astropy (which defines TEME the same way) to round-off, given the same UT1 and polar motion.

Time arguments: TT for precession and nutation, UT1 for GMST. With an `Epoch`, both come from it
(UT1 - UTC and the polar motion from astropy's bundled IERS tables where they cover the date);
the run's time `t` [s] advances them together.

**References:** Vallado, D. A., Crawford, P., Hujsak, R., Kelso, T. S., "Revisiting Spacetrack
Report #3", AIAA 2006-6753, 2006 (TEME); Vallado, D. A., *Fundamentals of Astrodynamics and
Applications*, 4th ed., 2013, sec. 3.7 (FK5 reduction); Seidelmann, P. K., "1980 IAU theory of
nutation: the final report of the IAU Working Group on Nutation", Celest. Mech. 27, 79-106, 1982;
Lieske, J. H., et al., Astron. Astrophys. 58, 1-16, 1977; Aoki, S., et al., Astron. Astrophys. 105,
359-361, 1982; McCarthy, D. D., Petit, G. (eds.), *IERS Conventions (2003)*, IERS TN 32, sec. 5.5.3
(frame bias).
"""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._rotation import _r1, _r2, _r3, gmst82, precession76
from ._time import Epoch


_ARCSEC = math.pi / 180.0 / 3600.0  # [rad]
_DAY = 86400.0  # [s]
_J2000_JD = 2451545.0  # [d]
_CENTURY_DAYS = 36525.0  # [d]
_TT_MINUS_UTC = 69.184  # [s] since 2017, when the epoch is a plain number

# IAU 1980 nutation series (Seidelmann 1982, Table 1): multipliers of (l, l', F, D, Omega), then
# the longitude sine coefficient and its rate, the obliquity cosine coefficient and its rate, in
# 0.1 mas and 0.1 mas per Julian century.
_NUT80 = np.array(
    [
        (0, 0, 0, 0, 1, -171996.0, -174.2, 92025.0, 8.9),
        (0, 0, 0, 0, 2, 2062.0, 0.2, -895.0, 0.5),
        (-2, 0, 2, 0, 1, 46.0, 0.0, -24.0, 0.0),
        (2, 0, -2, 0, 0, 11.0, 0.0, 0.0, 0.0),
        (-2, 0, 2, 0, 2, -3.0, 0.0, 1.0, 0.0),
        (1, -1, 0, -1, 0, -3.0, 0.0, 0.0, 0.0),
        (0, -2, 2, -2, 1, -2.0, 0.0, 1.0, 0.0),
        (2, 0, -2, 0, 1, 1.0, 0.0, 0.0, 0.0),
        (0, 0, 2, -2, 2, -13187.0, -1.6, 5736.0, -3.1),
        (0, 1, 0, 0, 0, 1426.0, -3.4, 54.0, -0.1),
        (0, 1, 2, -2, 2, -517.0, 1.2, 224.0, -0.6),
        (0, -1, 2, -2, 2, 217.0, -0.5, -95.0, 0.3),
        (0, 0, 2, -2, 1, 129.0, 0.1, -70.0, 0.0),
        (2, 0, 0, -2, 0, 48.0, 0.0, 1.0, 0.0),
        (0, 0, 2, -2, 0, -22.0, 0.0, 0.0, 0.0),
        (0, 2, 0, 0, 0, 17.0, -0.1, 0.0, 0.0),
        (0, 1, 0, 0, 1, -15.0, 0.0, 9.0, 0.0),
        (0, 2, 2, -2, 2, -16.0, 0.1, 7.0, 0.0),
        (0, -1, 0, 0, 1, -12.0, 0.0, 6.0, 0.0),
        (-2, 0, 0, 2, 1, -6.0, 0.0, 3.0, 0.0),
        (0, -1, 2, -2, 1, -5.0, 0.0, 3.0, 0.0),
        (2, 0, 0, -2, 1, 4.0, 0.0, -2.0, 0.0),
        (0, 1, 2, -2, 1, 4.0, 0.0, -2.0, 0.0),
        (1, 0, 0, -1, 0, -4.0, 0.0, 0.0, 0.0),
        (2, 1, 0, -2, 0, 1.0, 0.0, 0.0, 0.0),
        (0, 0, -2, 2, 1, 1.0, 0.0, 0.0, 0.0),
        (0, 1, -2, 2, 0, -1.0, 0.0, 0.0, 0.0),
        (0, 1, 0, 0, 2, 1.0, 0.0, 0.0, 0.0),
        (-1, 0, 0, 1, 1, 1.0, 0.0, 0.0, 0.0),
        (0, 1, 2, -2, 0, -1.0, 0.0, 0.0, 0.0),
        (0, 0, 2, 0, 2, -2274.0, -0.2, 977.0, -0.5),
        (1, 0, 0, 0, 0, 712.0, 0.1, -7.0, 0.0),
        (0, 0, 2, 0, 1, -386.0, -0.4, 200.0, 0.0),
        (1, 0, 2, 0, 2, -301.0, 0.0, 129.0, -0.1),
        (1, 0, 0, -2, 0, -158.0, 0.0, -1.0, 0.0),
        (-1, 0, 2, 0, 2, 123.0, 0.0, -53.0, 0.0),
        (0, 0, 0, 2, 0, 63.0, 0.0, -2.0, 0.0),
        (1, 0, 0, 0, 1, 63.0, 0.1, -33.0, 0.0),
        (-1, 0, 0, 0, 1, -58.0, -0.1, 32.0, 0.0),
        (-1, 0, 2, 2, 2, -59.0, 0.0, 26.0, 0.0),
        (1, 0, 2, 0, 1, -51.0, 0.0, 27.0, 0.0),
        (0, 0, 2, 2, 2, -38.0, 0.0, 16.0, 0.0),
        (2, 0, 0, 0, 0, 29.0, 0.0, -1.0, 0.0),
        (1, 0, 2, -2, 2, 29.0, 0.0, -12.0, 0.0),
        (2, 0, 2, 0, 2, -31.0, 0.0, 13.0, 0.0),
        (0, 0, 2, 0, 0, 26.0, 0.0, -1.0, 0.0),
        (-1, 0, 2, 0, 1, 21.0, 0.0, -10.0, 0.0),
        (-1, 0, 0, 2, 1, 16.0, 0.0, -8.0, 0.0),
        (1, 0, 0, -2, 1, -13.0, 0.0, 7.0, 0.0),
        (-1, 0, 2, 2, 1, -10.0, 0.0, 5.0, 0.0),
        (1, 1, 0, -2, 0, -7.0, 0.0, 0.0, 0.0),
        (0, 1, 2, 0, 2, 7.0, 0.0, -3.0, 0.0),
        (0, -1, 2, 0, 2, -7.0, 0.0, 3.0, 0.0),
        (1, 0, 2, 2, 2, -8.0, 0.0, 3.0, 0.0),
        (1, 0, 0, 2, 0, 6.0, 0.0, 0.0, 0.0),
        (2, 0, 2, -2, 2, 6.0, 0.0, -3.0, 0.0),
        (0, 0, 0, 2, 1, -6.0, 0.0, 3.0, 0.0),
        (0, 0, 2, 2, 1, -7.0, 0.0, 3.0, 0.0),
        (1, 0, 2, -2, 1, 6.0, 0.0, -3.0, 0.0),
        (0, 0, 0, -2, 1, -5.0, 0.0, 3.0, 0.0),
        (1, -1, 0, 0, 0, 5.0, 0.0, 0.0, 0.0),
        (2, 0, 2, 0, 1, -5.0, 0.0, 3.0, 0.0),
        (0, 1, 0, -2, 0, -4.0, 0.0, 0.0, 0.0),
        (1, 0, -2, 0, 0, 4.0, 0.0, 0.0, 0.0),
        (0, 0, 0, 1, 0, -4.0, 0.0, 0.0, 0.0),
        (1, 1, 0, 0, 0, -3.0, 0.0, 0.0, 0.0),
        (1, 0, 2, 0, 0, 3.0, 0.0, 0.0, 0.0),
        (1, -1, 2, 0, 2, -3.0, 0.0, 1.0, 0.0),
        (-1, -1, 2, 2, 2, -3.0, 0.0, 1.0, 0.0),
        (-2, 0, 0, 0, 1, -2.0, 0.0, 1.0, 0.0),
        (3, 0, 2, 0, 2, -3.0, 0.0, 1.0, 0.0),
        (0, -1, 2, 2, 2, -3.0, 0.0, 1.0, 0.0),
        (1, 1, 2, 0, 2, 2.0, 0.0, -1.0, 0.0),
        (-1, 0, 2, -2, 1, -2.0, 0.0, 1.0, 0.0),
        (2, 0, 0, 0, 1, 2.0, 0.0, -1.0, 0.0),
        (1, 0, 0, 0, 2, -2.0, 0.0, 1.0, 0.0),
        (3, 0, 0, 0, 0, 2.0, 0.0, 0.0, 0.0),
        (0, 0, 2, 1, 2, 2.0, 0.0, -1.0, 0.0),
        (-1, 0, 0, 0, 2, 1.0, 0.0, -1.0, 0.0),
        (1, 0, 0, -4, 0, -1.0, 0.0, 0.0, 0.0),
        (-2, 0, 2, 2, 2, 1.0, 0.0, -1.0, 0.0),
        (-1, 0, 2, 4, 2, -2.0, 0.0, 1.0, 0.0),
        (2, 0, 0, -4, 0, -1.0, 0.0, 0.0, 0.0),
        (1, 1, 2, -2, 2, 1.0, 0.0, -1.0, 0.0),
        (1, 0, 2, 2, 1, -1.0, 0.0, 1.0, 0.0),
        (-2, 0, 2, 4, 2, -1.0, 0.0, 1.0, 0.0),
        (-1, 0, 4, 0, 2, 1.0, 0.0, 0.0, 0.0),
        (1, -1, 0, -2, 0, 1.0, 0.0, 0.0, 0.0),
        (2, 0, 2, -2, 1, 1.0, 0.0, -1.0, 0.0),
        (2, 0, 2, 2, 2, -1.0, 0.0, 0.0, 0.0),
        (1, 0, 0, 2, 1, -1.0, 0.0, 0.0, 0.0),
        (0, 0, 4, -2, 2, 1.0, 0.0, 0.0, 0.0),
        (3, 0, 2, -2, 2, 1.0, 0.0, 0.0, 0.0),
        (1, 0, 2, -2, 0, -1.0, 0.0, 0.0, 0.0),
        (0, 1, 2, 0, 1, 1.0, 0.0, 0.0, 0.0),
        (-1, -1, 0, 2, 1, 1.0, 0.0, 0.0, 0.0),
        (0, 0, -2, 0, 1, -1.0, 0.0, 0.0, 0.0),
        (0, 0, 2, -1, 2, -1.0, 0.0, 0.0, 0.0),
        (0, 1, 0, 2, 0, -1.0, 0.0, 0.0, 0.0),
        (1, 0, -2, -2, 0, -1.0, 0.0, 0.0, 0.0),
        (0, -1, 2, 0, 1, -1.0, 0.0, 0.0, 0.0),
        (1, 1, 0, -2, 1, -1.0, 0.0, 0.0, 0.0),
        (1, 0, -2, 2, 0, -1.0, 0.0, 0.0, 0.0),
        (2, 0, 0, 2, 0, 1.0, 0.0, 0.0, 0.0),
        (0, 0, 2, 4, 2, -1.0, 0.0, 0.0, 0.0),
        (0, 1, 0, 1, 0, 1.0, 0.0, 0.0, 0.0),
    ]
)
_NUT80_MULT = _NUT80[:, :5]
_NUT80_COEF = _NUT80[:, 5:] * (1e-4 * _ARCSEC)  # [rad], [rad/century]
# Fundamental arguments of the Moon and Sun (IAU 1980; Seidelmann 1982): [arcsec] constant, linear,
# quadratic, cubic in Julian centuries of TT, plus whole revolutions per century.
_ARGS80 = np.array(
    [
        (485866.733, 715922.633, 31.310, 0.064, 1325.0),  # l: Moon's mean anomaly
        (1287099.804, 1292581.224, -0.577, -0.012, 99.0),  # l': Sun's mean anomaly
        (335778.877, 295263.137, -13.257, 0.011, 1342.0),  # F = L - Omega
        (1072261.307, 1105601.328, -6.891, 0.019, 1236.0),  # D: elongation of the Moon
        (450160.280, -482890.539, 7.455, 0.008, -5.0),  # Omega: the Moon's node
    ]
)
# IERS 2003 frame bias of the J2000 mean frame from the GCRS [rad].
_DPSI_BIAS = -0.041775 * _ARCSEC
_DEPS_BIAS = -0.0068192 * _ARCSEC
_DRA0 = -0.0146 * _ARCSEC
_EPS0_J2000 = 84381.448 * _ARCSEC


def mean_obliquity80(days_tt: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    """Mean obliquity of the ecliptic [rad], IAU 1976 (Lieske et al. 1977), at `days_tt` days of TT
    past J2000."""
    T = jnp.asarray(days_tt, dtype=float) / _CENTURY_DAYS
    return (84381.448 + (-46.8150 + (-0.00059 + 0.001813 * T) * T) * T) * _ARCSEC


def nutation80(
    days_tt: Float[ArrayLike, "*batch"],
) -> tuple[Float[Array, "*batch"], Float[Array, "*batch"]]:
    r"""IAU 1980 nutation $(\Delta\psi, \Delta\epsilon)$ [rad] (all 106 terms) at `days_tt` days of TT
    past J2000; agrees with ERFA's `nut80` to 1e-14 rad."""
    T = jnp.asarray(days_tt, dtype=float) / _CENTURY_DAYS
    c = _ARGS80
    whole = jnp.mod(T[..., None] * c[:, 4], 1.0) * (2.0 * math.pi)
    args = c[:, 0] + (c[:, 1] + (c[:, 2] + c[:, 3] * T[..., None]) * T[..., None]) * T[..., None]
    args = jnp.mod(args * _ARCSEC + whole, 2.0 * math.pi)
    phase = args @ _NUT80_MULT.T
    k = _NUT80_COEF
    dpsi = jnp.sum((k[:, 0] + k[:, 1] * T[..., None]) * jnp.sin(phase), axis=-1)
    deps = jnp.sum((k[:, 2] + k[:, 3] * T[..., None]) * jnp.cos(phase), axis=-1)
    return dpsi, deps


def equation_of_equinoxes94(days_tt: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""Equation of the equinoxes [rad], IAU 1994: $\Delta\psi\cos\epsilon_A + 0.00264''\sin\Omega +
    0.000063''\sin 2\Omega$ (as ERFA's `eqeq94`)."""
    T = jnp.asarray(days_tt, dtype=float) / _CENTURY_DAYS
    c = _ARGS80[4]
    om = (c[0] + (c[1] + (c[2] + c[3] * T) * T) * T) * _ARCSEC + jnp.mod(
        c[4] * T, 1.0
    ) * 2 * math.pi
    dpsi, _ = nutation80(days_tt)
    return (
        dpsi * jnp.cos(mean_obliquity80(days_tt))
        + (0.00264 * jnp.sin(om) + 0.000063 * jnp.sin(om + om)) * _ARCSEC
    )


def _bias() -> np.ndarray:
    r"""The frame bias $B = R_1(-d\epsilon_b)R_2(d\psi_b\sin\epsilon_0)R_3(d\alpha_0)$ [-]
    (GCRS to the J2000 mean frame), in numpy: a constant of every program."""

    def rot(axis, a):
        c, s = math.cos(a), math.sin(a)
        i, j = [(1, 2), (2, 0), (0, 1)][axis]
        m = np.eye(3)
        m[i, i] = m[j, j] = c
        m[i, j], m[j, i] = s, -s
        return m

    return rot(0, -_DEPS_BIAS) @ rot(1, _DPSI_BIAS * math.sin(_EPS0_J2000)) @ rot(2, _DRA0)


_BIAS = _bias()


@jax.jit
def dcm_gcrs_to_teme(days_tt: Float[ArrayLike, ""]) -> Float[Array, "3 3"]:
    r"""$[TEME \leftarrow GCRS] = R_3(E_q)\,N\,P\,B$ at `days_tt` days of TT past J2000 (IAU-76/FK5,
    see the module documentation); its transpose takes TEME to the GCRS."""
    days_tt = jnp.asarray(days_tt, dtype=float)
    dpsi, deps = nutation80(days_tt)
    eps = mean_obliquity80(days_tt)
    N = _r1(-(eps + deps)) @ _r3(-dpsi) @ _r1(eps)
    eqeq = equation_of_equinoxes94(days_tt)
    return _r3(eqeq) @ N @ precession76(days_tt) @ jnp.asarray(_BIAS)


def _days(cls, epoch, t, dut1):
    """(TT days past J2000, UT1 days past J2000) at run time `t` [s] past `epoch`."""
    t = jnp.asarray(t, dtype=float)
    if all(hasattr(epoch, a) for a in ("jd_utc", "jd_tt")):
        if dut1 is None:
            try:
                dut1 = float(epoch.ut1_minus_utc)
            except ValueError:  # a date astropy's bundled IERS tables do not cover
                dut1 = 0.0
        tt0 = float(epoch.jd_tt) - _J2000_JD
        ut10 = float(epoch.jd_utc) - _J2000_JD + float(dut1) / _DAY
        return tt0 + t / _DAY, ut10 + t / _DAY
    try:
        t0 = float(getattr(epoch, "tdb_seconds_past_j2000", epoch))
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{cls}: `epoch` must be an Epoch or TDB seconds past J2000 [s]; got {epoch!r}."
        ) from err
    dut1 = 0.0 if dut1 is None else float(dut1)
    return (t0 + t) / _DAY, (t0 + t - _TT_MINUS_UTC + dut1) / _DAY


def polar_motion(epoch: Epoch) -> tuple[float, float]:
    """Polar motion $(x_p, y_p)$ [rad] at an `Epoch` from astropy's bundled IERS tables (no
    download); (0, 0) where they do not cover the date (an error of up to 0.5 arcsec: 15 m on the
    ground)."""
    from astropy.utils import iers  # noqa: PLC0415  (astropy: the astro extra)

    try:
        with iers.conf.set_temp("auto_download", False), warnings.catch_warnings():
            warnings.simplefilter("error")
            xp, yp = iers.earth_orientation_table.get().pm_xy(epoch.to_astropy())
    except (iers.IERSRangeError, Warning, ValueError):
        return 0.0, 0.0
    return float(xp.to_value("rad")), float(yp.to_value("rad"))


def teme_to_gcrs(
    r_TEME: Float[ArrayLike, "*batch 3"],
    v_TEME: Float[ArrayLike, "*batch 3"],
    epoch: Epoch | float,
    t: Float[ArrayLike, "*batch"] = 0.0,
) -> tuple[Float[Array, "*batch 3"], Float[Array, "*batch 3"]]:
    """TEME position [m] and velocity [m/s] at run time `t` [s] past `epoch` (an `Epoch`, or TDB
    seconds past J2000) to the GCRS (IAU-76/FK5 reduction with the frame bias; see the module
    documentation for its accuracy). `t` broadcasts against the leading axes of the states.

    Returns `(r_GCRS, v_GCRS)`."""
    days_tt, _ = _days("teme_to_gcrs", epoch, t, 0.0)
    M = _batched(dcm_gcrs_to_teme, days_tt)
    r = jnp.einsum("...ji,...j->...i", M, jnp.asarray(r_TEME, dtype=float))
    v = jnp.einsum("...ji,...j->...i", M, jnp.asarray(v_TEME, dtype=float))
    return r, v


def teme_to_itrs(
    r_TEME: Float[ArrayLike, "*batch 3"],
    v_TEME: Float[ArrayLike, "*batch 3"],
    epoch: Epoch | float,
    t: Float[ArrayLike, "*batch"] = 0.0,
    *,
    dut1: float | None = None,
    xp: float | None = None,
    yp: float | None = None,
) -> tuple[Float[Array, "*batch 3"], Float[Array, "*batch 3"]]:
    r"""TEME position [m] and velocity [m/s] at run time `t` [s] past `epoch` to the ITRS:
    $W R_3(\theta_{GMST82})$ with the Earth's rotation in the velocity.

    - `dut1`: UT1 - UTC [s]; default the `Epoch`'s (astropy's bundled IERS tables), else 0.
    - `xp`, `yp`: polar motion [rad]; default `polar_motion(epoch)` for an `Epoch` (bundled tables),
      else 0.

    Returns `(r_ITRS, v_ITRS)`."""
    if xp is None or yp is None:
        pxp, pyp = polar_motion(epoch) if hasattr(epoch, "to_astropy") else (0.0, 0.0)
        xp = pxp if xp is None else xp
        yp = pyp if yp is None else yp
    _, days_ut1 = _days("teme_to_itrs", epoch, t, dut1)
    theta = gmst82(days_ut1)
    c, s = jnp.cos(theta)[..., None], jnp.sin(theta)[..., None]
    r, v = jnp.asarray(r_TEME, dtype=float), jnp.asarray(v_TEME, dtype=float)
    x, y, z = r[..., 0:1], r[..., 1:2], r[..., 2:3]
    r_pef = jnp.concatenate([c * x + s * y, -s * x + c * y, z * jnp.ones_like(c)], -1)
    vx, vy, vz = v[..., 0:1], v[..., 1:2], v[..., 2:3]
    v_rot = jnp.concatenate([c * vx + s * vy, -s * vx + c * vy, vz * jnp.ones_like(c)], -1)
    # The rate of GMST82 in UT1 [rad/s]: the time derivative of R3(theta) itself.
    tu = days_ut1 / _CENTURY_DAYS
    rate = (876600.0 * 3600.0 + 8640184.812866 + 2.0 * 0.093104 * tu - 3.0 * 6.2e-6 * tu**2) / (
        _CENTURY_DAYS * _DAY
    )
    omega = (2.0 * math.pi / _DAY) * rate
    zero = jnp.zeros_like(omega)
    w = jnp.stack([zero, zero, omega], -1)
    v_pef = v_rot - jnp.cross(w, r_pef)
    W = _r1(jnp.asarray(-float(yp))) @ _r2(jnp.asarray(-float(xp)))
    return r_pef @ W.T, v_pef @ W.T


def gcrs_to_itrs(
    r_GCRS: Float[ArrayLike, "*batch 3"],
    v_GCRS: Float[ArrayLike, "*batch 3"],
    epoch: Epoch | float,
    t: Float[ArrayLike, "*batch"] = 0.0,
    *,
    dut1: float | None = None,
    xp: float | None = None,
    yp: float | None = None,
) -> tuple[Float[Array, "*batch 3"], Float[Array, "*batch 3"]]:
    r"""GCRS position [m] and velocity [m/s] (a run's $\mathcal N$ frame around the Earth) at run
    time `t` [s] past `epoch` to the ITRS: `dcm_gcrs_to_teme` then `teme_to_itrs` (the FK5
    equinox-based chain; 1.4e-7 rad from astropy's IAU 2006/2000A chain, see the module
    documentation). Arguments as `teme_to_itrs`. Returns `(r_ITRS, v_ITRS)`."""
    days_tt, _ = _days("gcrs_to_itrs", epoch, t, 0.0)
    M = _batched(dcm_gcrs_to_teme, days_tt)
    r = jnp.einsum("...ij,...j->...i", M, jnp.asarray(r_GCRS, dtype=float))
    v = jnp.einsum("...ij,...j->...i", M, jnp.asarray(v_GCRS, dtype=float))
    return teme_to_itrs(r, v, epoch, t, dut1=dut1, xp=xp, yp=yp)


def _batched(fn, days):
    """`fn(days)` over any shape of `days`: (..., 3, 3)."""
    flat = days.reshape(-1)
    out = jax.vmap(fn)(flat)
    return out.reshape(days.shape + (3, 3))


# WGS84 ellipsoid (NIMA TR8350.2, 2000).
WGS84_A = 6378137.0  # [m]
WGS84_F = 1.0 / 298.257223563  # [-]


@jax.jit
def geodetic(
    r_ITRS: Float[ArrayLike, "*batch 3"], *, a: float = WGS84_A, f: float = WGS84_F
) -> tuple[Float[Array, "*batch"], Float[Array, "*batch"], Float[Array, "*batch"]]:
    r"""Geodetic latitude [rad], longitude [rad] in $(-\pi, \pi]$ and height [m] above the WGS84
    ellipsoid of Earth-fixed positions [m] (last axis 3): Heikkinen's closed form (no iteration;
    Heikkinen 1982, as given by Zhu 1993), differentiable away from the Earth's centre.
    Recovers the geodetic coordinates of points from 5 km below the ellipsoid to 50000 km above it
    to 4e-16 rad and 2e-8 m (at the poles 3e-7 m); astropy's `to_geodetic('WGS84')` (ERFA's `gc2gd`)
    agrees to 3e-11 rad (`tests/effectors/astro/test_teme.py`).

    Returns `(lat, lon, h)`.

    **References:** Heikkinen, M., "Geschlossene Formeln zur Berechnung räumlicher geodätischer
    Koordinaten aus rechtwinkligen Koordinaten", Z. Vermess. 107, 207-211, 1982; Zhu, J., "Exact
    conversion of Earth-centered, Earth-fixed coordinates to geodetic coordinates", J. Guid.
    Control Dyn. 16(2), 389-391, 1993."""
    r = jnp.asarray(r_ITRS, dtype=float)
    x, y, z = r[..., 0], r[..., 1], r[..., 2]
    b = a * (1.0 - f)
    e2 = f * (2.0 - f)
    ep2 = (a * a - b * b) / (b * b)
    p2 = x * x + y * y
    p = jnp.sqrt(p2)
    F = 54.0 * b * b * z * z
    G = p2 + (1.0 - e2) * z * z - e2 * (a * a - b * b)
    c = e2 * e2 * F * p2 / (G * G * G)
    s = jnp.cbrt(1.0 + c + jnp.sqrt(c * c + 2.0 * c))
    k = s + 1.0 + 1.0 / s
    P = F / (3.0 * k * k * G * G)
    Q = jnp.sqrt(1.0 + 2.0 * e2 * e2 * P)
    r0 = -P * e2 * p / (1.0 + Q) + jnp.sqrt(
        jnp.maximum(
            0.5 * a * a * (1.0 + 1.0 / Q) - P * (1.0 - e2) * z * z / (Q * (1.0 + Q)) - 0.5 * P * p2,
            0.0,
        )
    )
    d = p - e2 * r0
    U = jnp.sqrt(d * d + z * z)
    V = jnp.sqrt(d * d + (1.0 - e2) * z * z)
    z0 = b * b * z / (a * V)
    h = U * (1.0 - b * b / (a * V))
    lat = jnp.arctan2(z + ep2 * z0, p)
    lon = jnp.arctan2(y, x)
    return lat, lon, h
