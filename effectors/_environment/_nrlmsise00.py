r"""NRLMSISE-00 thermosphere (Picone et al. 2002) in JAX: species number densities, total mass
density and temperature from the date, position and space weather, 72.5 km and above.

The model is the MSIS-86 formulation (Hedin 1987) with the NRLMSISE-00 coefficients. Each
quantity $G$ (exospheric temperature, lower-boundary densities and temperature gradient, the
lower-thermosphere temperature nodes) is a fixed expansion in associated Legendre functions
$P_n^m(\sin\phi)$ of the geodetic latitude, harmonics of the local solar time (diurnal, semidiurnal,
terdiurnal), of the day of the year (annual, semiannual), of the universal time and longitude,
and of the solar (F10.7) and geomagnetic (Ap) activity (Hedin 1987, eqs. A1-A22; its "G(L)").
The temperature follows the Bates profile above $z_a = 123.435$ km,

$$T(z) = T_\infty - (T_\infty - T_{lb})\,e^{-\sigma\,\zeta(z, z_{lb})},\qquad
\zeta(z, z_l) = \frac{(z - z_l)(R + z_l)}{R + z}$$

($z_{lb} = 120$ km, $\sigma = T'_{lb}/(T_\infty - T_{lb})$) and, below $z_a$, a cubic spline in
$1/T$ over the geopotential height through nodes at 123.435, 110, 100, 90 and 72.5 km. Each species
is in diffusive equilibrium above its lower boundary,

$$n_d(z) = n_{lb}\left(\frac{T_{lb}}{T(z)}\right)^{1 + \alpha + \gamma}e^{-\sigma\gamma\zeta},\qquad
\gamma = \frac{m\,g_{lb}}{\sigma R_g T_\infty},$$

(the integral of $1/T$ along the spline below $z_a$), blended with the mixed profile below the
turbopause, $n = n_d\,(1 + (n_m/n_d)^{A})^{1/A}$, and corrected for chemistry and dissociation by
factors $\exp(r/(1 + e^{(z - z_h)/H}))$. The total mass density sums all species but anomalous
oxygen (the `gtd7` convention); `rho_with_anomalous_O` adds it (`gtd7d`, what pymsis returns).

**Switches:** all of the model's 23 switches on (the standard configuration), with switch 9 either
1 (daily Ap, `ap_mode="daily"`) or -1 (the 3-hourly Ap history, `ap_mode="history"`).

**Precision:** float64 throughout. The distributed Fortran (and pymsis, which compiles it) is
single precision: agreement with it is at the float32 level (see docs/environment.md for the figures).

**Reference:** Picone, J. M., Hedin, A. E., Drob, D. P., Aikin, A. C., "NRLMSISE-00 empirical model
of the atmosphere: Statistical comparisons and scientific issues", J. Geophys. Res. 107(A12), 1468,
2002, doi:10.1029/2002JA009430; Hedin, A. E., "MSIS-86 thermospheric model", J. Geophys. Res. 92(A5),
4649-4662, 1987, doi:10.1029/JA092iA05p04649. The coefficients are the published NRLMSISE-00 tables
(`_data/README.md`).
"""

from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float


_DATA = Path(__file__).parent / "_data" / "nrlmsise00.npz"
with np.load(_DATA) as _npz:
    _C = {k: np.asarray(_npz[k], dtype=np.float64) for k in _npz.files}

_DGTR = 1.74533e-2  # [rad/deg], the model's value
_DR = 1.72142e-2  # [rad/day], 2 pi / 365, the model's value
_HR = 0.2618  # [rad/h]
_SR = 7.2722e-5  # [rad/s]
_RGAS = 831.4  # gas constant in the model's units (km^2 / s^2 / K per g/mol, scaled)
_AMU_G = 1.66e-24  # [g] the model's atomic mass unit
_ZA = float(_C["pdl"][1, 15])  # [km] top of the spline region (123.435)
_ZN1 = (_ZA, 110.0, 100.0, 90.0, 72.5)  # [km] spline nodes
_ZLB = float(_C["ptm"][5])  # [km] lower boundary of the Bates profile (120)
_XMM = float(_C["pdm"][2, 4])  # mean molecular mass below the turbopause (28.95)
ALTITUDE_MIN = 72.5  # [km] the thermospheric part of the model (below it, the lower atmosphere)

# Species in the model's order of `pd` rows / mixing parameters:
# name, molecular mass, pd row, pdm row, thermal diffusion alpha, top of the mixing region [km]
_SPECIES = (
    ("He", 4.0, 0, 0, -0.38, 200.0),
    ("O", 16.0, 1, 1, 0.0, 300.0),
    ("N2", 28.0, 2, 2, 0.0, 160.0),
    ("O2", 32.0, 4, 3, 0.0, 250.0),
    ("Ar", 40.0, 5, 4, 0.17, 240.0),
    ("H", 1.0, 6, 5, -0.38, 320.0),
    ("N", 14.0, 7, 6, 0.0, 450.0),
)


class NRLMSISE00Output(NamedTuple):
    """Outputs of `nrlmsise00`: number densities [1/m^3], mass densities [kg/m^3], temperatures [K]."""

    He: jax.Array
    O: jax.Array  # noqa: E741
    N2: jax.Array
    O2: jax.Array
    Ar: jax.Array
    H: jax.Array
    N: jax.Array
    anomalous_O: jax.Array
    rho: jax.Array
    rho_with_anomalous_O: jax.Array
    T: jax.Array
    T_exo: jax.Array


def _legendre(lat_deg):
    """The associated Legendre functions P[m][n] of sin(latitude) the expansions use (4 lists of 8)."""
    c = jnp.sin(lat_deg * _DGTR)
    s = jnp.cos(lat_deg * _DGTR)
    c2, s2 = c * c, s * s
    c4 = c2 * c2
    z = jnp.zeros_like(c)
    p0 = [z, c, 0.5 * (3 * c2 - 1), 0.5 * (5 * c * c2 - 3 * c), (35 * c4 - 30 * c2 + 3) / 8,
          (63 * c2 * c2 * c - 70 * c2 * c + 15 * c) / 8]  # fmt: skip
    p0 += [(11 * c * p0[5] - 5 * p0[4]) / 6, z]
    p1 = [z, s, 3 * c * s, 1.5 * (5 * c2 - 1) * s, 2.5 * (7 * c2 * c - 3 * c) * s,
          1.875 * (21 * c4 - 14 * c2 + 1) * s]  # fmt: skip
    p1 += [(11 * c * p1[5] - 6 * p1[4]) / 5, z]
    p2 = [z, z, 3 * s2, 15 * s2 * c, 7.5 * (7 * c2 - 1) * s2]
    p2 += [3 * c * p2[4] - 2 * p2[3]]
    p2 += [(11 * c * p2[5] - 7 * p2[4]) / 4]
    p2 += [(13 * c * p2[6] - 8 * p2[5]) / 5]
    p3 = [z, z, z, 15 * s2 * s, 105 * s2 * s * c]
    p3 += [(9 * c * p3[4] - 7 * p3[3]) / 2]
    p3 += [(11 * c * p3[5] - 8 * p3[4]) / 3, z]
    return (p0, p1, p2, p3)  # lists of scalars: no slicing of traced arrays (compile time)


class _Context(NamedTuple):
    """Everything the expansions share: Legendre functions, harmonics, solar and magnetic inputs."""

    plg: tuple
    doy: jax.Array
    sec: jax.Array
    lat: jax.Array
    lon: jax.Array
    tloc: jax.Array
    f107: jax.Array
    f107a: jax.Array
    ap: tuple  # 7 scalars


def _g0(a, p):
    """The Ap response function: a - 4 + (p25 - 1)(a - 4 + (exp(-|p24|(a - 4)) - 1)/|p24|)."""
    k = jnp.abs(p[24])
    return a - 4.0 + (p[25] - 1.0) * (a - 4.0 + (jnp.exp(-k * (a - 4.0)) - 1.0) / k)


def _sg0(ex, p, ap):
    """Exponentially weighted mean of the Ap response over the 3-hourly history (Hedin 1987)."""
    g = [_g0(ap[i], p) for i in range(1, 7)]
    tail = (g[4] * ex**4 + g[5] * ex**12) * (1.0 - ex**8) / (1.0 - ex)
    total = g[0] + g[1] * ex + g[2] * ex**2 + g[3] * ex**3 + tail
    sumex = 1.0 + (1.0 - ex**19) / (1.0 - ex) * jnp.sqrt(ex)
    return total / sumex


def _magnetic(p, ctx, history):
    """(apt, apdf): the weighted Ap-history response and the daily-Ap response for coefficients p."""
    pp = dict(enumerate(p))
    pp[24] = np.maximum(p[24], 1e-4)  # the model's floor
    ex = jnp.exp(-10800.0 * jnp.abs(p[51]) / (1.0 + p[138] * (45.0 - jnp.abs(ctx.lat))))
    ex = jnp.minimum(ex, 0.99999)
    apd = ctx.ap[0] - 4.0
    p44 = np.where(p[43] < 0.0, 1e-5, p[43])
    apdf = apd + (p[44] - 1.0) * (apd + (jnp.exp(-p44 * apd) - 1.0) / p44)
    apt = _sg0(ex, pp, ctx.ap) if history else jnp.zeros_like(apdf)
    return apt, apdf


def _globe7(p, ctx: _Context, history: bool):
    """The MSIS expansion G(L) for the 150 coefficients p (all switches on); returns (G, apt, apdf)."""
    plg, doy = ctx.plg, ctx.doy
    P0, P1, P2, P3 = plg[0], plg[1], plg[2], plg[3]
    tl = _HR * ctx.tloc
    cd32 = jnp.cos(_DR * (doy - p[31]))
    cd18 = jnp.cos(2.0 * _DR * (doy - p[17]))
    cd14 = jnp.cos(_DR * (doy - p[13]))
    cd39 = jnp.cos(2.0 * _DR * (doy - p[38]))
    df = ctx.f107 - ctx.f107a
    dfa = ctx.f107a - 150.0
    t = []
    t.append(p[19] * df * (1.0 + p[59] * dfa) + p[20] * df * df + p[21] * dfa + p[29] * dfa * dfa)
    f1 = 1.0 + (p[47] * dfa + p[19] * df + p[20] * df * df)
    f2 = 1.0 + (p[49] * dfa + p[19] * df + p[20] * df * df)
    t.append(p[1] * P0[2] + p[2] * P0[4] + p[22] * P0[6] + p[14] * P0[2] * dfa + p[26] * P0[1])
    t.append(p[18] * cd32)
    t.append((p[15] + p[16] * P0[2]) * cd18)
    t.append(f1 * (p[9] * P0[1] + p[10] * P0[3]) * cd14)
    t.append(p[37] * P0[1] * cd39)
    t71 = p[11] * P1[2] * cd14
    t72 = p[12] * P1[2] * cd14
    t.append(
        f2
        * (
            (p[3] * P1[1] + p[4] * P1[3] + p[27] * P1[5] + t71) * jnp.cos(tl)
            + (p[6] * P1[1] + p[7] * P1[3] + p[28] * P1[5] + t72) * jnp.sin(tl)
        )
    )
    t81 = (p[23] * P2[3] + p[35] * P2[5]) * cd14
    t82 = (p[33] * P2[3] + p[36] * P2[5]) * cd14
    t.append(
        f2
        * (
            (p[5] * P2[2] + p[41] * P2[4] + t81) * jnp.cos(2.0 * tl)
            + (p[8] * P2[2] + p[42] * P2[4] + t82) * jnp.sin(2.0 * tl)
        )
    )
    t_ter = f2 * (
        (p[39] * P3[3] + (p[93] * P3[4] + p[46] * P3[6]) * cd14) * jnp.sin(3.0 * tl)
        + (p[40] * P3[3] + (p[94] * P3[4] + p[48] * P3[6]) * cd14) * jnp.cos(3.0 * tl)
    )
    apt, apdf = _magnetic(p, ctx, history)
    has_mag = p[51] != 0.0
    if history:
        t_mag = jnp.where(
            has_mag,
            apt
            * (
                p[50] + p[96] * P0[2] + p[54] * P0[4]
                + (p[125] * P0[1] + p[126] * P0[3] + p[127] * P0[5]) * cd14
                + (p[128] * P1[1] + p[129] * P1[3] + p[130] * P1[5])
                * jnp.cos(_HR * (ctx.tloc - p[131]))
            ),
            0.0,
        )  # fmt: skip
    else:
        t_mag = apdf * (
            p[32] + p[45] * P0[2] + p[34] * P0[4]
            + (p[100] * P0[1] + p[101] * P0[3] + p[102] * P0[5]) * cd14
            + (p[121] * P1[1] + p[122] * P1[3] + p[123] * P1[5]) * jnp.cos(_HR * (ctx.tloc - p[124]))
        )  # fmt: skip
    t.append(t_mag)
    lon = _DGTR * ctx.lon
    t_lon = (1.0 + p[80] * dfa) * (
        (
            p[64] * P1[2] + p[65] * P1[4] + p[66] * P1[6]
            + p[103] * P1[1] + p[104] * P1[3] + p[105] * P1[5]
            + (p[109] * P1[1] + p[110] * P1[3] + p[111] * P1[5]) * cd14
        ) * jnp.cos(lon)
        + (
            p[90] * P1[2] + p[91] * P1[4] + p[92] * P1[6]
            + p[106] * P1[1] + p[107] * P1[3] + p[108] * P1[5]
            + (p[112] * P1[1] + p[113] * P1[3] + p[114] * P1[5]) * cd14
        ) * jnp.sin(lon)
    )  # fmt: skip
    t_ut = (
        (1.0 + p[95] * P0[1]) * (1.0 + p[81] * dfa) * (1.0 + p[119] * P0[1] * cd14)
        * (p[68] * P0[1] + p[69] * P0[3] + p[70] * P0[5]) * jnp.cos(_SR * (ctx.sec - p[71]))
    )  # fmt: skip
    t_ut = t_ut + (p[76] * P2[3] + p[77] * P2[5] + p[78] * P2[7]) * jnp.cos(
        _SR * (ctx.sec - p[79]) + 2.0 * lon
    ) * (1.0 + p[137] * dfa)
    if history:
        t_aplon = jnp.where(
            has_mag,
            apt * (1.0 + p[132] * P0[1])
            * (p[52] * P1[2] + p[98] * P1[4] + p[67] * P1[6]) * jnp.cos(_DGTR * (ctx.lon - p[97]))
            + apt * (p[133] * P1[1] + p[134] * P1[3] + p[135] * P1[5]) * cd14
            * jnp.cos(_DGTR * (ctx.lon - p[136]))
            + apt * (p[55] * P0[1] + p[56] * P0[3] + p[57] * P0[5]) * jnp.cos(_SR * (ctx.sec - p[58])),
            0.0,
        )  # fmt: skip
    else:
        t_aplon = (
            apdf * (1.0 + p[120] * P0[1])
            * (p[60] * P1[2] + p[61] * P1[4] + p[62] * P1[6]) * jnp.cos(_DGTR * (ctx.lon - p[63]))
            + apdf * (p[115] * P1[1] + p[116] * P1[3] + p[117] * P1[5]) * cd14
            * jnp.cos(_DGTR * (ctx.lon - p[118]))
            + apdf * (p[83] * P0[1] + p[84] * P0[3] + p[85] * P0[5]) * jnp.cos(_SR * (ctx.sec - p[75]))
        )  # fmt: skip
    total = sum(t) + t_lon + t_ut + t_aplon + t_ter
    return total, apt, apdf


def _glob7s(p, ctx: _Context, apt, apdf, history: bool):
    """The lower-thermosphere expansion for the 100 coefficients p (all switches on)."""
    plg, doy = ctx.plg, ctx.doy
    P0, P1, P2, P3 = plg[0], plg[1], plg[2], plg[3]
    tl = _HR * ctx.tloc
    cd32 = jnp.cos(_DR * (doy - p[31]))
    cd18 = jnp.cos(2.0 * _DR * (doy - p[17]))
    cd14 = jnp.cos(_DR * (doy - p[13]))
    cd39 = jnp.cos(2.0 * _DR * (doy - p[38]))
    dfa = ctx.f107a - 150.0
    t = [
        p[21] * dfa,
        p[1] * P0[2] + p[2] * P0[4] + p[22] * P0[6] + p[26] * P0[1] + p[14] * P0[3] + p[59] * P0[5],
        (p[18] + p[47] * P0[2] + p[29] * P0[4]) * cd32,
        (p[15] + p[16] * P0[2] + p[30] * P0[4]) * cd18,
        (p[9] * P0[1] + p[10] * P0[3] + p[20] * P0[5]) * cd14,
        p[37] * P0[1] * cd39,
    ]
    t71 = p[11] * P1[2] * cd14
    t72 = p[12] * P1[2] * cd14
    t.append(
        (p[3] * P1[1] + p[4] * P1[3] + t71) * jnp.cos(tl)
        + (p[6] * P1[1] + p[7] * P1[3] + t72) * jnp.sin(tl)
    )
    t81 = (p[23] * P2[3] + p[35] * P2[5]) * cd14
    t82 = (p[33] * P2[3] + p[36] * P2[5]) * cd14
    t.append(
        (p[5] * P2[2] + p[41] * P2[4] + t81) * jnp.cos(2.0 * tl)
        + (p[8] * P2[2] + p[42] * P2[4] + t82) * jnp.sin(2.0 * tl)
    )
    t.append(p[39] * P3[3] * jnp.sin(3.0 * tl) + p[40] * P3[3] * jnp.cos(3.0 * tl))
    if history:
        t.append(p[50] * apt + p[96] * P0[2] * apt)
    else:
        t.append(apdf * (p[32] + p[45] * P0[2]))
    lon = _DGTR * ctx.lon
    t.append(
        (
            1.0
            + P0[1] * (p[80] * jnp.cos(_DR * (doy - p[81])) + p[85] * jnp.cos(2 * _DR * (doy - p[86])))
            + p[83] * jnp.cos(_DR * (doy - p[84]))
            + p[87] * jnp.cos(2 * _DR * (doy - p[88]))
        )
        * (
            (p[64] * P1[2] + p[65] * P1[4] + p[66] * P1[6] + p[74] * P1[1] + p[75] * P1[3]
             + p[76] * P1[5]) * jnp.cos(lon)
            + (p[90] * P1[2] + p[91] * P1[4] + p[92] * P1[6] + p[77] * P1[1] + p[78] * P1[3]
               + p[79] * P1[5]) * jnp.sin(lon)
        )
    )  # fmt: skip
    return sum(t)


def _gravity(lat_deg):
    """(surface gravity [cm/s^2], effective radius [km]) at the latitude (the model's formula)."""
    c2 = jnp.cos(2.0 * _DGTR * lat_deg)
    gsurf = 980.616 * (1.0 - 0.0026373 * c2)
    re = 2.0 * gsurf / (3.085462e-6 + 2.27e-9 * c2) * 1.0e-5
    return gsurf, re


def _spline_second_derivatives(x, y, yp1, ypn):
    """Second derivatives of the cubic spline through (x, y) with end slopes yp1, ypn (5 nodes)."""
    n = x.shape[0]
    y2 = [-0.5]
    u = [(3.0 / (x[1] - x[0])) * ((y[1] - y[0]) / (x[1] - x[0]) - yp1)]
    for i in range(1, n - 1):
        sig = (x[i] - x[i - 1]) / (x[i + 1] - x[i - 1])
        pp = sig * y2[i - 1] + 2.0
        y2.append((sig - 1.0) / pp)
        d = (y[i + 1] - y[i]) / (x[i + 1] - x[i]) - (y[i] - y[i - 1]) / (x[i] - x[i - 1])
        u.append((6.0 * d / (x[i + 1] - x[i - 1]) - sig * u[i - 1]) / pp)
    un = (3.0 / (x[n - 1] - x[n - 2])) * (ypn - (y[n - 1] - y[n - 2]) / (x[n - 1] - x[n - 2]))
    y2.append((un - 0.5 * u[n - 2]) / (0.5 * y2[n - 2] + 1.0))
    for k in range(n - 2, -1, -1):
        y2[k] = y2[k] * y2[k + 1] + u[k]
    return jnp.stack(y2)


def _spline_value_and_integral(x, y, y2, xq):
    """The spline's value at xq and its integral from x[0] to xq (x increasing, x[0] <= xq <= x[-1])."""
    n = x.shape[0]
    h = x[1:] - x[:-1]
    k = jnp.sum(xq >= x[1 : n - 1]).astype(int)  # the interval holding xq
    a = (x[k + 1] - xq) / h[k]
    b = (xq - x[k]) / h[k]
    value = (
        a * y[k] + b * y[k + 1] + ((a**3 - a) * y2[k] + (b**3 - b) * y2[k + 1]) * h[k] ** 2 / 6.0
    )
    # integral over each interval from its left node to min(xq, right node); zero past xq
    xx = jnp.clip(xq, x[:-1], x[1:])
    a = (x[1:] - xx) / h
    b = (xx - x[:-1]) / h
    a2, b2 = a * a, b * b
    pieces = (
        (1.0 - a2) * y[:-1] / 2.0 + b2 * y[1:] / 2.0
        + ((-(1.0 + a2 * a2) / 4.0 + a2 / 2.0) * y2[:-1] + (b2 * b2 / 4.0 - b2 / 2.0) * y2[1:])
        * h * h / 6.0
    ) * h  # fmt: skip
    integral = jnp.sum(jnp.where(xq > x[:-1], pieces, 0.0))
    return value, integral


def _densu(alt, tinf, tlb, xm, alpha, s2, tn1, tgn1_low, gsurf, re):
    """(density / lower-boundary density, temperature) at `alt` [km]: the Bates profile above z_a,
    the spline below it (the density is proportional to the lower-boundary density)."""
    zeta = lambda zz, zl: (zz - zl) * (re + zl) / (re + zz)
    z = jnp.maximum(alt, _ZA)
    zg2 = zeta(z, _ZLB)
    tt = tinf - (tinf - tlb) * jnp.exp(-s2 * zg2)
    # below z_a: spline in 1/T through the nodes, its top node and slope from the Bates profile
    dta = (tinf - tt) * s2 * ((re + _ZLB) / (re + _ZA)) ** 2
    zn1 = jnp.asarray(_ZN1)
    t_nodes = tn1.at[0].set(tt)
    zlow = jnp.maximum(alt, _ZN1[-1])
    zgdif = zeta(_ZN1[-1], _ZA)
    xs = zeta(zn1, _ZA) / zgdif
    ys = 1.0 / t_nodes
    yd1 = -dta / (t_nodes[0] ** 2) * zgdif
    yd2 = -tgn1_low / (t_nodes[-1] ** 2) * zgdif * ((re + _ZN1[-1]) / (re + _ZA)) ** 2
    y2 = _spline_second_derivatives(xs, ys, yd1, yd2)
    xq = jnp.clip(zeta(zlow, _ZA) / zgdif, 0.0, 1.0)
    y, yi = _spline_value_and_integral(xs, ys, y2, xq)
    below = alt < _ZA
    tz = jnp.where(below, 1.0 / y, tt)
    # density above z_a
    glb = gsurf / (1.0 + _ZLB / re) ** 2
    gamma = xm * glb / (s2 * _RGAS * tinf)
    expl = jnp.exp(-s2 * gamma * zg2)
    expl = jnp.where((expl > 50.0) | (tt <= 0.0), 50.0, expl)
    dens = (tlb / tt) ** (1.0 + alpha + gamma) * expl
    # below z_a: integrate the spline
    glb1 = gsurf / (1.0 + _ZA / re) ** 2
    gamm = xm * glb1 * zgdif / _RGAS
    expl1 = gamm * yi
    expl1 = jnp.where((expl1 > 50.0) | (tz <= 0.0), 50.0, expl1)
    dens_low = dens * (t_nodes[0] / tz) ** (1.0 + alpha) * jnp.exp(-expl1)
    return jnp.where(below, dens_low, dens), tz


_densu_v = jax.vmap(_densu, in_axes=(0, 0, 0, 0, 0, None, None, None, None, None))


def _dnet(dd, dm, zhm, xmm, xm):
    """Blend of the diffusive (dd) and mixed (dm) densities across the turbopause."""
    a = zhm / (xmm - xm)
    ylog = a * jnp.log(dm / dd)
    blended = dd * (1.0 + jnp.exp(jnp.clip(ylog, -10.0, 10.0))) ** (1.0 / a)
    return jnp.where(ylog < -10.0, dd, jnp.where(ylog > 10.0, dm, blended))


def _ccor(alt, r, h1, zh):
    """Chemistry/dissociation correction exp(r / (1 + exp((alt - zh)/h1)))."""
    e = (alt - zh) / h1
    core = jnp.exp(r / (1.0 + jnp.exp(jnp.clip(e, -70.0, 70.0))))
    return jnp.where(e > 70.0, 1.0, jnp.where(e < -70.0, jnp.exp(r), core))


def _ccor2(alt, r, h1, zh, h2):
    """The two-scale-height form of `_ccor`."""
    e1 = (alt - zh) / h1
    e2 = (alt - zh) / h2
    ex1 = jnp.exp(jnp.clip(e1, -70.0, 70.0))
    ex2 = jnp.exp(jnp.clip(e2, -70.0, 70.0))
    core = jnp.exp(r / (1.0 + 0.5 * (ex1 + ex2)))
    return jnp.where(
        (e1 > 70.0) | (e2 > 70.0), 1.0, jnp.where((e1 < -70.0) & (e2 < -70.0), jnp.exp(r), core)
    )


def nrlmsise00(
    doy: Float[ArrayLike, ""],
    sec: Float[ArrayLike, ""],
    alt: Float[ArrayLike, ""],
    lat: Float[ArrayLike, ""],
    lon: Float[ArrayLike, ""],
    f107: Float[ArrayLike, ""],
    f107a: Float[ArrayLike, ""],
    ap: Float[ArrayLike, "7"] | Float[ArrayLike, ""],
    *,
    ap_mode: str = "history",
) -> NRLMSISE00Output:
    r"""NRLMSISE-00 at one point (scalars; `jax.vmap` it for many).

    **Arguments:**

    - `doy`: day of the year [day], 1-366 (the model takes the integer day; a fraction is used as given).
    - `sec`: universal time [s] of the day, 0-86400.
    - `alt`: geodetic altitude [km], >= 72.5 (the thermospheric part of the model).
    - `lat`, `lon`: geodetic latitude and longitude [deg].
    - `f107`: the daily F10.7 solar flux of the previous day [sfu] (observed, not adjusted to 1 AU).
    - `f107a`: its 81-day average centred on the day [sfu].
    - `ap`: geomagnetic Ap, shape (7,): the daily Ap; the 3-hourly ap of the current 3-hour interval;
      of 3, 6 and 9 hours before; the mean of the eight 3-hourly values 12-33 hours before; and of
      the eight 36-57 hours before. With `ap_mode="daily"` only `ap[0]` is used.
    - `ap_mode`: `"history"` (the model's switch 9 = -1, the 3-hourly history) or `"daily"` (switch 9 = 1).

    The local solar time is $t_{LST} = t_{UT}/3600 + \lambda/15$ hours.

    **Returns:** an `NRLMSISE00Output`: number densities `He`, `O`, `N2`, `O2`, `Ar`, `H`, `N`,
    `anomalous_O` [1/m^3]; `rho` [kg/m^3] (all but anomalous oxygen), `rho_with_anomalous_O`
    [kg/m^3]; the temperature `T` [K] at the altitude and the exospheric `T_exo` [K].
    """
    if ap_mode not in ("history", "daily"):
        raise ValueError(f'nrlmsise00: `ap_mode` must be "history" or "daily"; got {ap_mode!r}.')
    history = ap_mode == "history"
    f = lambda x: jnp.asarray(x, dtype=float)
    doy, sec, alt, lat, lon, f107, f107a = map(f, (doy, sec, alt, lat, lon, f107, f107a))
    ap = jnp.broadcast_to(f(ap), (7,)) if jnp.ndim(ap) == 0 else f(ap)
    C = {k: jnp.asarray(v) for k, v in _C.items()}
    ctx = _Context(
        plg=_legendre(lat), doy=doy, sec=sec, lat=lat, lon=lon, tloc=sec / 3600.0 + lon / 15.0,
        f107=f107, f107a=f107a, ap=tuple(ap[i] for i in range(7)),
    )  # fmt: skip
    pd, ptm, pdm, pdl = C["pd"], C["ptm"], C["pdm"], C["pdl"]
    # one vmapped expansion for the 11 coefficient sets: pt, ps, pd[0..8]
    psets = np.concatenate([_C["pt"][None], _C["ps"][None], _C["pd"]])
    # the coefficients are constants: each p[k] is a numpy column over the sets, so the
    # expansion is traced once for all sets with no indexing of traced arrays (compile time)
    G, apt, apdf = _globe7(psets.T, ctx, history)
    g_pt, g_ps, g_pd = G[0], G[1], G[2:]
    tinf = ptm[0] * C["pt"][0] * jnp.where(alt > _ZA, 1.0 + g_pt, 1.0)
    g0 = ptm[3] * C["ps"][0] * (1.0 + g_ps)
    tlb = ptm[1] * (1.0 + g_pd[3]) * pd[3, 0]
    s = g0 / (tinf - tlb)
    # lower-thermosphere temperature nodes (110, 100, 90, 72.5 km) and the gradient at 72.5 km;
    # the magnetic terms use the response of the last full expansion (pd[3], the T_lb one)
    low = np.concatenate([_C["ptl"], _C["pma"][8][None]])
    gs = _glob7s(low.T, ctx, apt[5], apdf[5], history)
    gs = jnp.where(alt < 300.0, gs, 0.0)
    ptl0 = C["ptl"][:, 0]
    tn_base = jnp.stack([ptm[6], ptm[2], ptm[7], ptm[4]]) * ptl0
    tn1 = jnp.concatenate([jnp.zeros(1), tn_base / (1.0 - gs[:4])])
    tgn1_low = ptm[8] * C["pma"][8, 0] * (1.0 + gs[4]) * tn1[4] ** 2 / (ptm[4] * ptl0[3]) ** 2
    gsurf, re = _gravity(lat)
    zhf = pdl[1, 24] * (
        1.0 + pdl[0, 24] * jnp.sin(_DGTR * lat) * jnp.cos(_DR * (doy - C["pt"][13]))
    )
    z = alt
    # lower-boundary densities of the species and anomalous oxygen
    rows = jnp.array([r for _, _, r, _, _, _ in _SPECIES])
    mrows = jnp.array([m for _, _, _, m, _, _ in _SPECIES])
    mass = jnp.array([m for _, m, _, _, _, _ in _SPECIES])
    alpha = jnp.array([a for _, _, _, _, a, _ in _SPECIES])
    altl = jnp.array([h for _, _, _, _, _, h in _SPECIES])
    dlb = pdm[mrows, 0] * jnp.exp(g_pd[rows]) * pd[rows, 0]
    tho = pdm[7, 9] * pdl[0, 6]
    db16h = pdm[7, 0] * jnp.exp(g_pd[8]) * pd[8, 0]
    n = len(_SPECIES)
    # one vmapped profile evaluation for: the 7 species in diffusive equilibrium at z, anomalous
    # oxygen at z (T_inf = T_lb = tho), the 7 species at their turbopause heights zh (mass
    # m - m_mix, alpha - 1), and the mixed profiles at z (mean mass m_mix)
    zh = pdm[mrows, 2].at[2].multiply(zhf)
    alpha_m = jnp.zeros(n).at[2].set(alpha[2])
    full = jnp.ones(n)
    factor, tz = _densu_v(
        jnp.concatenate([z * full, z[None], zh, z * full]),
        jnp.concatenate([tinf * full, tho[None], tinf * full, tinf * full]),
        jnp.concatenate([tlb * full, tho[None], tlb * full, tlb * full]),
        jnp.concatenate([mass, jnp.array([16.0]), mass - _XMM, _XMM * full]),
        jnp.concatenate([alpha, jnp.zeros(1), alpha - 1.0, alpha_m]),
        s, tn1, tgn1_low, gsurf, re,
    )  # fmt: skip
    d_diff = jnp.append(dlb, db16h) * factor[: n + 1]
    b = dlb * factor[n + 1 : 2 * n + 1]
    dm = b * factor[2 * n + 1 :]
    zhm = pdm[2, 3] * pdl[1, 5]
    mixed = _dnet(d_diff[:n], dm, zhm, _XMM, mass)
    b28 = b[2]
    # chemistry and dissociation corrections, per species (He, O, N2, O2, Ar, H, N)
    f107a_term = 1.0 + pdl[0, 23] * (f107a - 150.0)
    c_he = _ccor(z, jnp.log(b28 * pdm[0, 1] / b[0]), pdm[0, 5] * pdl[1, 1], pdm[0, 4] * pdl[1, 0])
    c_o = _ccor2(z, pdm[1, 1] * pdl[1, 16] * f107a_term, pdm[1, 5] * pdl[1, 3],
                 pdm[1, 4] * pdl[1, 2], pdm[1, 5] * pdl[1, 4]) * _ccor(
        z, pdm[1, 3] * pdl[1, 14], pdm[1, 7] * pdl[1, 13], pdm[1, 6] * pdl[1, 12])  # fmt: skip
    c_o2 = _ccor(z, jnp.log(b28 * pdm[3, 1] / b[3]), pdm[3, 5] * pdl[1, 7], pdm[3, 4] * pdl[1, 6])
    c_ar = _ccor(z, jnp.log(b28 * pdm[4, 1] / b[4]), pdm[4, 5] * pdl[1, 9], pdm[4, 4] * pdl[1, 8])
    c_h = _ccor(z, jnp.log(b28 * pdm[5, 1] * jnp.abs(pdl[1, 17]) / b[5]), pdm[5, 5] * pdl[1, 11],
                pdm[5, 4] * pdl[1, 10]) * _ccor(
        z, pdm[5, 3] * pdl[1, 20], pdm[5, 7] * pdl[1, 19], pdm[5, 6] * pdl[1, 18])  # fmt: skip
    c_n = _ccor(z, jnp.log(b28 * pdm[6, 1] * jnp.abs(pdl[0, 2]) / b[6]), pdm[6, 5] * pdl[0, 1],
                pdm[6, 4] * pdl[0, 0]) * _ccor(
        z, pdm[6, 3] * pdl[0, 5], pdm[6, 7] * pdl[0, 4], pdm[6, 6] * pdl[0, 3])  # fmt: skip
    corr = jnp.stack([c_he, c_o, jnp.ones(()), c_o2, c_ar, c_h, c_n])
    strict = jnp.array([True, False, False, False, False, False, False])  # He: z < altl
    inside = jnp.where(strict, z < altl, z <= altl)
    dens = jnp.where(inside, mixed * corr, d_diff[:n])
    # O2: departure from diffusive equilibrium above the lower boundary, at every altitude
    rc32 = pdm[3, 3] * pdl[1, 23] * f107a_term
    dens = dens.at[3].multiply(
        _ccor2(z, rc32, pdm[3, 7] * pdl[1, 22], pdm[3, 6] * pdl[1, 21], pdm[3, 7] * pdl[0, 22])
    )
    # anomalous oxygen
    zsht, zmho = pdm[7, 5], pdm[7, 4]
    zsho = _RGAS * tho / (gsurf / (1.0 + zmho / re) ** 2 * 16.0)
    d_ao = d_diff[n] * jnp.exp(-zsht / zsho * (jnp.exp(-(z - zmho) / zsht) - 1.0))
    rho = _AMU_G * jnp.dot(jnp.array([4.0, 16.0, 28.0, 32.0, 40.0, 1.0, 14.0]), dens)
    rho_ao = rho + _AMU_G * 16.0 * d_ao
    cm3 = 1.0e6  # [1/cm^3] -> [1/m^3]
    gcm3 = 1.0e3  # [g/cm^3] -> [kg/m^3]
    return NRLMSISE00Output(
        *(dens[i] * cm3 for i in range(n)), d_ao * cm3, rho * gcm3, rho_ao * gcm3, tz[0], tinf
    )
