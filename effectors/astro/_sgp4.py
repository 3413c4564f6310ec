r"""SGP4/SDP4 in JAX: the NORAD analytic propagator of two-line element sets, in TEME.

Written from the published equations: Hoots, F. R., Roehrich, R. L., *Models for Propagation of
NORAD Element Sets*, Spacetrack Report No. 3, 1980 (SGP4 near-Earth theory, SDP4 deep-space
secular, lunisolar periodic and resonance terms), with the corrections of Vallado, D. A., Crawford,
P., Hujsak, R., Kelso, T. S., "Revisiting Spacetrack Report #3", AIAA 2006-6753, 2006 (the
"improved" operation mode `'i'`: GMST 1982 for the resonance phase, the Lyddane node choice without
the AFSPC wrapping, the mean-anomaly/argument-of-perigee modulo, the mrt < 1 decay flag, no
negative-inclination flip inside the resonance set-up, the 720-minute resonance integrator restarted
from the epoch).

Units follow the report: SGP4's time is minutes since the element epoch, its distances Earth radii
and its rates radians per minute; `sgp4` takes seconds and returns metres and metres per second in
the TEME frame (true equator, mean equinox of the epoch of each evaluation; `effectors.astro.teme_to_gcrs`).

Everything is one pure JAX function of the elements and the time: `jit`, `vmap` (over satellites and
times) and `grad`/`jacfwd` (with respect to the elements and to time) go through it. The near-Earth
and deep-space branches, the error checks and the resonance integrator are all evaluated and
selected with `where`, so a batch may mix satellites of every kind. The resonance integrator (12-h
and 24-h orbits) is a fixed-length scan of 720-minute steps whose unused steps are masked; its length
is `max_resonance_steps` (the span it covers is 720 min times that; a time beyond it gives error 7).

Errors (python-sgp4's codes, in the result's `error` array, never raised inside a program):
0 none; 1 mean eccentricity outside [-0.001, 1); 2 mean motion <= 0; 3 perturbed eccentricity outside
[0, 1] (deep space); 4 semi-latus rectum < 0; 6 the satellite has decayed (radius below one Earth
radius; the position is still returned, as python-sgp4 does); 7 (this module) a resonant deep-space
time beyond `max_resonance_steps` x 720 min; 8 (this module) traced elements of a kind the program
was not built for (`SGP4Elements.kinds`); 9 (this module) a non-finite element or time. Codes 1-4
and 7-9 set the position and velocity to NaN.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from jaxsim import jit as jaxsim_jit
from jaxsim.validation import is_concrete


_TWO_PI = 2.0 * math.pi
_X2O3 = 2.0 / 3.0
_TEMP4 = 1.5e-12  # SGP4's guard for 1 + cos i near zero (retrograde equatorial orbits)
# Deep-space resonance step [min] and Earth's rotation rate [rad/min] (Spacetrack Report #3).
_STEP = 720.0
_RPTIM = 4.37526908801129966e-3
# Default length of the resonance scan (720-min steps): about 2 years of propagation.
MAX_RESONANCE_STEPS = 1024
# Error codes (python-sgp4's, plus 7 for a resonant time beyond the scan).
SGP4_ERRORS = {
    0: "no error",
    1: "mean eccentricity is outside the range 0 <= e < 1 (mean elements)",
    2: "mean motion has fallen below zero",
    3: "perturbed eccentricity is outside the range 0 <= e <= 1 (deep-space periodics)",
    4: "semi-latus rectum is below zero",
    6: "the satellite has decayed (orbit radius below 1 Earth radius)",
    7: "a resonant deep-space time beyond max_resonance_steps x 720 min",
    8: "an element set of a kind (near-Earth, deep-space, resonant) the program was not built for",
    9: "a non-finite element or time (NaN or infinite)",
}


def _gravity(name: str):
    """(mu [km^3/s^2], Earth radius [km], xke [1/min], j2, j3, j4) of a named model (Vallado 2006,
    `getgravconst`)."""
    if name == "wgs72old":
        mu, re = 398600.79964, 6378.135
        xke = 0.0743669161
        j2, j3, j4 = 0.001082616, -0.00000253881, -0.00000165597
    elif name == "wgs72":
        mu, re = 398600.8, 6378.135
        xke = 60.0 / math.sqrt(re**3 / mu)
        j2, j3, j4 = 0.001082616, -0.00000253881, -0.00000165597
    elif name == "wgs84":
        mu, re = 398600.5, 6378.137
        xke = 60.0 / math.sqrt(re**3 / mu)
        j2, j3, j4 = 0.00108262998905, -0.00000253215306, -0.00000161098761
    else:
        raise ValueError(
            f"sgp4: `gravity` must be 'wgs72' (the default, as for the published element sets), "
            f"'wgs72old' or 'wgs84'; got {name!r}."
        )
    return mu, re, xke, j2, j3, j4


_FIELDS = (
    "epoch_days",
    "bstar",
    "ndot",
    "nddot",
    "ecco",
    "argpo",
    "inclo",
    "mo",
    "no_kozai",
    "nodeo",
)


class SGP4Elements(eqx.Module):
    r"""The mean elements of a two-line element set, in SGP4's units (every field may be a batch).

    **Fields:**

    - `epoch_days`: the element epoch [d] in days of UTC since 1949-12-31 00:00 (JD 2433281.5),
      SGP4's epoch argument (deep-space terms and the sidereal angle at epoch depend on it).
    - `bstar`: drag term $B^*$ [1/Earth radii].
    - `ndot`, `nddot`: first and second mean-motion derivatives [rad/min^2], [rad/min^3] (the TLE's
      $\dot n/2$ and $\ddot n/6$ fields; carried for completeness, SGP4 does not use them).
    - `ecco`: eccentricity [-]; `argpo`: argument of perigee [rad]; `inclo`: inclination [rad];
      `mo`: mean anomaly [rad]; `nodeo`: right ascension of the ascending node [rad].
    - `no_kozai`: Kozai mean motion [rad/min] (the TLE's revolutions per day times $2\pi/1440$).

    - `kinds` (static): which branches the program holds, `(near-Earth, deep-space, resonant)`;
      default: those of the given values when concrete (a near-Earth batch compiles no deep-space
      code), all three when traced. A traced element set of a kind the program does not hold gives
      error 8.

    Build one with `TLE.elements()`, or directly for studies.
    """

    epoch_days: Float[Array, "*batch"]
    bstar: Float[Array, "*batch"]
    ndot: Float[Array, "*batch"]
    nddot: Float[Array, "*batch"]
    ecco: Float[Array, "*batch"]
    argpo: Float[Array, "*batch"]
    inclo: Float[Array, "*batch"]
    mo: Float[Array, "*batch"]
    no_kozai: Float[Array, "*batch"]
    nodeo: Float[Array, "*batch"]
    kinds: tuple[bool, bool, bool] = eqx.field(static=True)

    def __init__(
        self,
        epoch_days: Float[ArrayLike, "*batch"],
        bstar: Float[ArrayLike, "*batch"],
        ndot: Float[ArrayLike, "*batch"],
        nddot: Float[ArrayLike, "*batch"],
        ecco: Float[ArrayLike, "*batch"],
        argpo: Float[ArrayLike, "*batch"],
        inclo: Float[ArrayLike, "*batch"],
        mo: Float[ArrayLike, "*batch"],
        no_kozai: Float[ArrayLike, "*batch"],
        nodeo: Float[ArrayLike, "*batch"],
        *,
        kinds: tuple[bool, bool, bool] | None = None,
    ):
        self.epoch_days = jnp.asarray(epoch_days, dtype=float)
        self.bstar = jnp.asarray(bstar, dtype=float)
        self.ndot = jnp.asarray(ndot, dtype=float)
        self.nddot = jnp.asarray(nddot, dtype=float)
        self.ecco = jnp.asarray(ecco, dtype=float)
        self.argpo = jnp.asarray(argpo, dtype=float)
        self.inclo = jnp.asarray(inclo, dtype=float)
        self.mo = jnp.asarray(mo, dtype=float)
        self.no_kozai = jnp.asarray(no_kozai, dtype=float)
        self.nodeo = jnp.asarray(nodeo, dtype=float)
        for name in _FIELDS:
            value = getattr(self, name)
            if is_concrete(value) and not np.all(np.isfinite(np.asarray(value))):
                raise ValueError(
                    f"SGP4Elements: `{name}` must be finite; got "
                    f"{np.asarray(value) if np.size(value) <= 6 else np.shape(value)}."
                )
        if kinds is None:
            kinds = _kinds(self.no_kozai, self.ecco, self.inclo)
        self.kinds = tuple(bool(k) for k in kinds)


class SGP4Result(eqx.Module):
    """Positions, velocities and error codes from `sgp4` (shape: elements' batch + times' shape).

    - `r_TEME`: position [m] in TEME; `v_TEME`: velocity [m/s] in TEME (last axis 3).
    - `error`: int32 code (0 ok; see `SGP4_ERRORS`): NaN positions and velocities for 1-4 and 7-9.
    """

    r_TEME: Float[Array, "*shape 3"]
    v_TEME: Float[Array, "*shape 3"]
    error: Int[Array, "*shape"]


def _kinds(no_kozai, ecco, inclo):
    """(any near-Earth, any deep-space, any resonant) of concrete elements (WGS72's un-Kozai mean
    motion; the program checks the kind again with the model's constants: error 8)."""
    if not all(is_concrete(x) for x in (no_kozai, ecco, inclo)):
        return (True, True, True)
    n, e, i = (np.asarray(x, dtype=float) for x in (no_kozai, ecco, inclo))
    _, _, xke, j2, _, _ = _gravity("wgs72")
    with np.errstate(all="ignore"):
        cosio2 = np.cos(i) ** 2
        omeosq = 1.0 - e * e
        ak = (xke / n) ** _X2O3
        d1 = 0.75 * j2 * (3.0 * cosio2 - 1.0) / (np.sqrt(omeosq) * omeosq)
        d = d1 / (ak * ak)
        adel = ak * (1.0 - d * d - d * (1.0 / 3.0 + 134.0 * d * d / 81.0))
        no = n / (1.0 + d1 / (adel * adel))
        deep = _TWO_PI / no >= 225.0
        res = deep & (
            ((no > 0.0034906585) & (no < 0.0052359877))
            | ((no >= 8.26e-3) & (no <= 9.24e-3) & (e >= 0.5))
        )
    # NaN or invalid values: keep every branch (the program reports the error).
    odd = ~np.isfinite(no)
    return (bool(np.any(~deep | odd)), bool(np.any(deep | odd)), bool(np.any(res | odd)))


def _safe(cond, x, fill=1.0):
    """`x` where `cond`, else `fill`: keeps a denominator of an unused branch away from zero, so
    that `where` does not carry NaN into gradients."""
    return jnp.where(cond, x, fill)


def _gstime(jdut1):
    """IAU 1982 Greenwich mean sidereal time [rad] in [0, 2 pi) at Julian date `jdut1` (UT1)."""
    tut1 = (jdut1 - 2451545.0) / 36525.0
    temp = (
        -6.2e-6 * tut1**3
        + 0.093104 * tut1**2
        + (876600.0 * 3600.0 + 8640184.812866) * tut1
        + 67310.54841
    )
    temp = jnp.fmod(temp * (math.pi / 180.0) / 240.0, _TWO_PI)
    return jnp.where(temp < 0.0, temp + _TWO_PI, temp)


def _gstime_afspc(epoch):
    """The AFSPC sidereal angle at `epoch` [d past 1950 Jan 0.0] (operation mode 'a')."""
    ts70 = epoch - 7305.0
    ids70 = jnp.floor(ts70 + 1.0e-8)
    tfrac = ts70 - ids70
    c1 = 1.72027916940703639e-2
    thgr70 = 1.7321343856509374
    fk5r = 5.07551419432269442e-15
    c1p2p = c1 + _TWO_PI
    gsto = jnp.fmod(thgr70 + c1 * ids70 + c1p2p * tfrac + ts70 * ts70 * fk5r, _TWO_PI)
    return jnp.where(gsto < 0.0, gsto + _TWO_PI, gsto)


def _dscom(epoch, ep, argpp, tc, inclp, nodep, np_):
    """Lunar and solar perturbation coefficients (Spacetrack Report #3, DSCOM)."""
    zes, zel = 0.01675, 0.05490
    c1ss, c1l = 2.9864797e-6, 4.7968065e-7
    zsinis, zcosis = 0.39785416, 0.91744867
    zcosgs, zsings = 0.1945905, -0.98088458
    o = {}
    nm = np_
    em = ep
    snodm, cnodm = jnp.sin(nodep), jnp.cos(nodep)
    sinomm, cosomm = jnp.sin(argpp), jnp.cos(argpp)
    sinim, cosim = jnp.sin(inclp), jnp.cos(inclp)
    emsq = em * em
    betasq = 1.0 - emsq
    rtemsq = jnp.sqrt(betasq)
    day = epoch + 18261.5 + tc / 1440.0
    xnodce = jnp.fmod(4.5236020 - 9.2422029e-4 * day, _TWO_PI)
    stem, ctem = jnp.sin(xnodce), jnp.cos(xnodce)
    zcosil = 0.91375164 - 0.03568096 * ctem
    zsinil = jnp.sqrt(1.0 - zcosil * zcosil)
    zsinhl = 0.089683511 * stem / zsinil
    zcoshl = jnp.sqrt(1.0 - zsinhl * zsinhl)
    gam = 5.8351514 + 0.0019443680 * day
    zx = 0.39785416 * stem / zsinil
    zy = zcoshl * ctem + 0.91744867 * zsinhl * stem
    zx = jnp.arctan2(zx, zy)
    zx = gam + zx - xnodce
    zcosgl, zsingl = jnp.cos(zx), jnp.sin(zx)

    # Sun (first pass) then Moon (second pass): the same geometry with each body's angles.
    bodies = (
        (zcosgs, zsings, zcosis, zsinis, cnodm, snodm, c1ss),
        (
            zcosgl,
            zsingl,
            zcosil,
            zsinil,
            zcoshl * cnodm + zsinhl * snodm,
            snodm * zcoshl - cnodm * zsinhl,
            c1l,
        ),
    )
    terms = []
    xnoi = 1.0 / nm
    for zcosg, zsing, zcosi, zsini, zcosh, zsinh, cc in bodies:
        a1 = zcosg * zcosh + zsing * zcosi * zsinh
        a3 = -zsing * zcosh + zcosg * zcosi * zsinh
        a7 = -zcosg * zsinh + zsing * zcosi * zcosh
        a8 = zsing * zsini
        a9 = zsing * zsinh + zcosg * zcosi * zcosh
        a10 = zcosg * zsini
        a2 = cosim * a7 + sinim * a8
        a4 = cosim * a9 + sinim * a10
        a5 = -sinim * a7 + cosim * a8
        a6 = -sinim * a9 + cosim * a10
        x1 = a1 * cosomm + a2 * sinomm
        x2 = a3 * cosomm + a4 * sinomm
        x3 = -a1 * sinomm + a2 * cosomm
        x4 = -a3 * sinomm + a4 * cosomm
        x5 = a5 * sinomm
        x6 = a6 * sinomm
        x7 = a5 * cosomm
        x8 = a6 * cosomm
        z31 = 12.0 * x1 * x1 - 3.0 * x3 * x3
        z32 = 24.0 * x1 * x2 - 6.0 * x3 * x4
        z33 = 12.0 * x2 * x2 - 3.0 * x4 * x4
        z1 = 3.0 * (a1 * a1 + a2 * a2) + z31 * emsq
        z2 = 6.0 * (a1 * a3 + a2 * a4) + z32 * emsq
        z3 = 3.0 * (a3 * a3 + a4 * a4) + z33 * emsq
        z11 = -6.0 * a1 * a5 + emsq * (-24.0 * x1 * x7 - 6.0 * x3 * x5)
        z12 = -6.0 * (a1 * a6 + a3 * a5) + emsq * (
            -24.0 * (x2 * x7 + x1 * x8) - 6.0 * (x3 * x6 + x4 * x5)
        )
        z13 = -6.0 * a3 * a6 + emsq * (-24.0 * x2 * x8 - 6.0 * x4 * x6)
        z21 = 6.0 * a2 * a5 + emsq * (24.0 * x1 * x5 - 6.0 * x3 * x7)
        z22 = 6.0 * (a4 * a5 + a2 * a6) + emsq * (
            24.0 * (x2 * x5 + x1 * x6) - 6.0 * (x4 * x7 + x3 * x8)
        )
        z23 = 6.0 * a4 * a6 + emsq * (24.0 * x2 * x6 - 6.0 * x4 * x8)
        z1 = z1 + z1 + betasq * z31
        z2 = z2 + z2 + betasq * z32
        z3 = z3 + z3 + betasq * z33
        s3 = cc * xnoi
        s2 = -0.5 * s3 / rtemsq
        s4 = s3 * rtemsq
        s1 = -15.0 * em * s4
        s5 = x1 * x3 + x2 * x4
        s6 = x2 * x3 + x1 * x4
        s7 = x2 * x4 - x1 * x3
        terms.append(
            dict(
                s1=s1,
                s2=s2,
                s3=s3,
                s4=s4,
                s5=s5,
                s6=s6,
                s7=s7,
                z1=z1,
                z2=z2,
                z3=z3,
                z11=z11,
                z12=z12,
                z13=z13,
                z21=z21,
                z22=z22,
                z23=z23,
                z31=z31,
                z32=z32,
                z33=z33,
            )  # fmt: skip
        )
    sun, moon = terms
    o["zmol"] = jnp.fmod(4.7199672 + 0.22997150 * day - gam, _TWO_PI)
    o["zmos"] = jnp.fmod(6.2565837 + 0.017201977 * day, _TWO_PI)
    # Solar periodic coefficients.
    o["se2"] = 2.0 * sun["s1"] * sun["s6"]
    o["se3"] = 2.0 * sun["s1"] * sun["s7"]
    o["si2"] = 2.0 * sun["s2"] * sun["z12"]
    o["si3"] = 2.0 * sun["s2"] * (sun["z13"] - sun["z11"])
    o["sl2"] = -2.0 * sun["s3"] * sun["z2"]
    o["sl3"] = -2.0 * sun["s3"] * (sun["z3"] - sun["z1"])
    o["sl4"] = -2.0 * sun["s3"] * (-21.0 - 9.0 * emsq) * zes
    o["sgh2"] = 2.0 * sun["s4"] * sun["z32"]
    o["sgh3"] = 2.0 * sun["s4"] * (sun["z33"] - sun["z31"])
    o["sgh4"] = -18.0 * sun["s4"] * zes
    o["sh2"] = -2.0 * sun["s2"] * sun["z22"]
    o["sh3"] = -2.0 * sun["s2"] * (sun["z23"] - sun["z21"])
    # Lunar periodic coefficients.
    o["ee2"] = 2.0 * moon["s1"] * moon["s6"]
    o["e3"] = 2.0 * moon["s1"] * moon["s7"]
    o["xi2"] = 2.0 * moon["s2"] * moon["z12"]
    o["xi3"] = 2.0 * moon["s2"] * (moon["z13"] - moon["z11"])
    o["xl2"] = -2.0 * moon["s3"] * moon["z2"]
    o["xl3"] = -2.0 * moon["s3"] * (moon["z3"] - moon["z1"])
    o["xl4"] = -2.0 * moon["s3"] * (-21.0 - 9.0 * emsq) * zel
    o["xgh2"] = 2.0 * moon["s4"] * moon["z32"]
    o["xgh3"] = 2.0 * moon["s4"] * (moon["z33"] - moon["z31"])
    o["xgh4"] = -18.0 * moon["s4"] * zel
    o["xh2"] = -2.0 * moon["s2"] * moon["z22"]
    o["xh3"] = -2.0 * moon["s2"] * (moon["z23"] - moon["z21"])
    aux = dict(sinim=sinim, cosim=cosim, emsq=emsq, nm=nm, sun=sun, moon=moon)
    return o, aux


def _dpper(d, t, ep, inclp, nodep, argpp, mp, opsmode):
    """Lunar-solar periodics applied to the mean elements at `t` [min] (DPPER, init = 'n')."""
    zns, zes, znl, zel = 1.19459e-5, 0.01675, 1.5835218e-4, 0.05490

    def periodic(zm, ze, c):
        zf = zm + 2.0 * ze * jnp.sin(zm)
        sinzf = jnp.sin(zf)
        f2 = 0.5 * sinzf * sinzf - 0.25
        f3 = -0.5 * sinzf * jnp.cos(zf)
        e = c[0] * f2 + c[1] * f3
        i = c[2] * f2 + c[3] * f3
        ll = c[4] * f2 + c[5] * f3 + c[6] * sinzf
        gh = c[7] * f2 + c[8] * f3 + c[9] * sinzf
        h = c[10] * f2 + c[11] * f3
        return e, i, ll, gh, h

    sun = periodic(
        d["zmos"] + zns * t,
        zes,
        [d[k] for k in ("se2", "se3", "si2", "si3", "sl2", "sl3", "sl4")]
        + [d[k] for k in ("sgh2", "sgh3", "sgh4", "sh2", "sh3")],
    )
    moon = periodic(
        d["zmol"] + znl * t,
        zel,
        [d[k] for k in ("ee2", "e3", "xi2", "xi3", "xl2", "xl3", "xl4")]
        + [d[k] for k in ("xgh2", "xgh3", "xgh4", "xh2", "xh3")],
    )
    pe, pinc, pl, pgh, ph = (a + b for a, b in zip(sun, moon))
    inclp = inclp + pinc
    ep = ep + pe
    sinip, cosip = jnp.sin(inclp), jnp.cos(inclp)
    # Direct application (inclination >= 0.2 rad).
    ph_d = ph / _safe(inclp >= 0.2, sinip)
    pgh_d = pgh - cosip * ph_d
    argp_d = argpp + pgh_d
    node_d = nodep + ph_d
    m_d = mp + pl
    # Lyddane's modification (inclination < 0.2 rad).
    sinop, cosop = jnp.sin(nodep), jnp.cos(nodep)
    alfdp = sinip * sinop + (ph * cosop + pinc * cosip * sinop)
    betdp = sinip * cosop + (-ph * sinop + pinc * cosip * cosop)
    node_l = jnp.fmod(nodep, _TWO_PI)
    if opsmode == "a":
        node_l = jnp.where(node_l < 0.0, node_l + _TWO_PI, node_l)
    xls = mp + argpp + cosip * node_l
    dls = pl + pgh - pinc * node_l * sinip
    xls = xls + dls
    xnoh = node_l
    node_l = jnp.arctan2(alfdp, betdp)
    if opsmode == "a":
        node_l = jnp.where(node_l < 0.0, node_l + _TWO_PI, node_l)
    jump = jnp.abs(xnoh - node_l) > math.pi
    node_l = jnp.where(jump, jnp.where(node_l < xnoh, node_l + _TWO_PI, node_l - _TWO_PI), node_l)
    m_l = mp + pl
    argp_l = xls - m_l - cosip * node_l
    direct = inclp >= 0.2
    return (
        ep,
        inclp,
        jnp.where(direct, node_d, node_l),
        jnp.where(direct, argp_d, argp_l),
        jnp.where(direct, m_d, m_l),
    )


def _dsinit(s, dsc, aux, xke, resonant: bool):
    """Deep-space secular rates and resonance set-up at the epoch (DSINIT, t = 0)."""
    q22, q31, q33 = 1.7891679e-6, 2.1460748e-6, 2.2123015e-7
    root22, root44, root54 = 1.7891679e-6, 7.3636953e-9, 2.1765803e-9
    root32, root52 = 3.7393792e-7, 1.1428639e-7
    znl, zns = 1.5835218e-4, 1.19459e-5
    sun, moon = aux["sun"], aux["moon"]
    sinim, cosim, emsq = aux["sinim"], aux["cosim"], aux["emsq"]
    nm = s["no_unkozai"]
    em = s["ecco"]
    inclm = s["inclo"]
    o = {}
    irez = jnp.where((nm > 0.0034906585) & (nm < 0.0052359877), 1, 0)
    irez = jnp.where((nm >= 8.26e-3) & (nm <= 9.24e-3) & (em >= 0.5), 2, irez)
    # Solar secular terms.
    ses = sun["s1"] * zns * sun["s5"]
    sis = sun["s2"] * zns * (sun["z11"] + sun["z13"])
    sls = -zns * sun["s3"] * (sun["z1"] + sun["z3"] - 14.0 - 6.0 * emsq)
    sghs = sun["s4"] * zns * (sun["z31"] + sun["z33"] - 6.0)
    shs = -zns * sun["s2"] * (sun["z21"] + sun["z23"])
    equatorial = (inclm < 5.2359877e-2) | (inclm > math.pi - 5.2359877e-2)
    shs = jnp.where(equatorial, 0.0, shs)
    nonzero = sinim != 0.0
    shs = jnp.where(nonzero, shs / _safe(nonzero, sinim), shs)
    sgs = sghs - cosim * shs
    # Lunar secular terms.
    o["dedt"] = ses + moon["s1"] * znl * moon["s5"]
    o["didt"] = sis + moon["s2"] * znl * (moon["z11"] + moon["z13"])
    o["dmdt"] = sls - znl * moon["s3"] * (moon["z1"] + moon["z3"] - 14.0 - 6.0 * emsq)
    sghl = moon["s4"] * znl * (moon["z31"] + moon["z33"] - 6.0)
    shll = -znl * moon["s2"] * (moon["z21"] + moon["z23"])
    shll = jnp.where(equatorial, 0.0, shll)
    safe_sin = _safe(nonzero, sinim)
    o["domdt"] = jnp.where(nonzero, sgs + sghl - cosim / safe_sin * shll, sgs + sghl)
    o["dnodt"] = jnp.where(nonzero, shs + shll / safe_sin, shs)

    o["irez"] = irez
    if not resonant:  # no resonant orbit in the batch (static): no resonance terms
        for k in ("xlamo", "xfact", "del1", "del2", "del3", "d2201", "d2211", "d3210", "d3222",
                  "d4410", "d4422", "d5220", "d5232", "d5421", "d5433"):  # fmt: skip
            o[k] = jnp.zeros_like(nm)
        return o
    # Resonance set-up (theta: the sidereal angle at the epoch, tc = 0).
    theta = jnp.fmod(s["gsto"], _TWO_PI)
    aonv = (nm / xke) ** _X2O3
    # 12-hour resonance (irez = 2): coefficients with the epoch eccentricity.
    ecco, eccsq = s["ecco"], s["eccsq"]
    cosisq = cosim * cosim
    e, e2 = ecco, eccsq
    eoc = e * e2
    g201 = -0.306 - (e - 0.64) * 0.440
    low = e <= 0.65
    g211 = jnp.where(
        low,
        3.616 - 13.2470 * e + 16.2900 * e2,
        -72.099 + 331.819 * e - 508.738 * e2 + 266.724 * eoc,
    )
    g310 = jnp.where(
        low,
        -19.302 + 117.3900 * e - 228.4190 * e2 + 156.5910 * eoc,
        -346.844 + 1582.851 * e - 2415.925 * e2 + 1246.113 * eoc,
    )
    g322 = jnp.where(
        low,
        -18.9068 + 109.7927 * e - 214.6334 * e2 + 146.5816 * eoc,
        -342.585 + 1554.908 * e - 2366.899 * e2 + 1215.972 * eoc,
    )
    g410 = jnp.where(
        low,
        -41.122 + 242.6940 * e - 471.0940 * e2 + 313.9530 * eoc,
        -1052.797 + 4758.686 * e - 7193.992 * e2 + 3651.957 * eoc,
    )
    g422 = jnp.where(
        low,
        -146.407 + 841.8800 * e - 1629.014 * e2 + 1083.4350 * eoc,
        -3581.690 + 16178.110 * e - 24462.770 * e2 + 12422.520 * eoc,
    )
    g520_high = jnp.where(
        e > 0.715,
        -5149.66 + 29936.92 * e - 54087.36 * e2 + 31324.56 * eoc,
        1464.74 - 4664.75 * e + 3763.64 * e2,
    )
    g520 = jnp.where(low, -532.114 + 3017.977 * e - 5740.032 * e2 + 3708.2760 * eoc, g520_high)
    below = e < 0.7
    g533 = jnp.where(
        below,
        -919.22770 + 4988.6100 * e - 9064.7700 * e2 + 5542.21 * eoc,
        -37995.780 + 161616.52 * e - 229838.20 * e2 + 109377.94 * eoc,
    )
    g521 = jnp.where(
        below,
        -822.71072 + 4568.6173 * e - 8491.4146 * e2 + 5337.524 * eoc,
        -51752.104 + 218913.95 * e - 309468.16 * e2 + 146349.42 * eoc,
    )
    g532 = jnp.where(below, -853.66600 + 4690.2500 * e - 8624.7700 * e2 + 5341.4 * eoc, -40023.880 + 170470.89 * e - 242699.48 * e2 + 115605.82 * eoc)  # fmt: skip
    sini2 = sinim * sinim
    f220 = 0.75 * (1.0 + 2.0 * cosim + cosisq)
    f221 = 1.5 * sini2
    f321 = 1.875 * sinim * (1.0 - 2.0 * cosim - 3.0 * cosisq)
    f322 = -1.875 * sinim * (1.0 + 2.0 * cosim - 3.0 * cosisq)
    f441 = 35.0 * sini2 * f220
    f442 = 39.3750 * sini2 * sini2
    f522 = (
        9.84375
        * sinim
        * (
            sini2 * (1.0 - 2.0 * cosim - 5.0 * cosisq)
            + 0.33333333 * (-2.0 + 4.0 * cosim + 6.0 * cosisq)
        )
    )
    f523 = sinim * (
        4.92187512 * sini2 * (-2.0 - 4.0 * cosim + 10.0 * cosisq)
        + 6.56250012 * (1.0 + 2.0 * cosim - 3.0 * cosisq)
    )
    f542 = 29.53125 * sinim * (2.0 - 8.0 * cosim + cosisq * (-12.0 + 8.0 * cosim + 10.0 * cosisq))
    f543 = 29.53125 * sinim * (-2.0 - 8.0 * cosim + cosisq * (12.0 + 8.0 * cosim - 10.0 * cosisq))
    xno2 = nm * nm
    ainv2 = aonv * aonv
    temp1 = 3.0 * xno2 * ainv2
    temp = temp1 * root22
    o["d2201"] = temp * f220 * g201
    o["d2211"] = temp * f221 * g211
    temp1 = temp1 * aonv
    temp = temp1 * root32
    o["d3210"] = temp * f321 * g310
    o["d3222"] = temp * f322 * g322
    temp1 = temp1 * aonv
    temp = 2.0 * temp1 * root44
    o["d4410"] = temp * f441 * g410
    o["d4422"] = temp * f442 * g422
    temp1 = temp1 * aonv
    temp = temp1 * root52
    o["d5220"] = temp * f522 * g520
    o["d5232"] = temp * f523 * g532
    temp = 2.0 * temp1 * root54
    o["d5421"] = temp * f542 * g521
    o["d5433"] = temp * f543 * g533
    xlamo2 = jnp.fmod(s["mo"] + s["nodeo"] + s["nodeo"] - theta - theta, _TWO_PI)
    xfact2 = s["mdot"] + o["dmdt"] + 2.0 * (s["nodedot"] + o["dnodt"] - _RPTIM) - s["no_unkozai"]
    # 24-hour resonance (irez = 1), with the mean eccentricity (DSCOM's).
    g200 = 1.0 + emsq * (-2.5 + 0.8125 * emsq)
    g310s = 1.0 + 2.0 * emsq
    g300 = 1.0 + emsq * (-6.0 + 6.60937 * emsq)
    f220s = 0.75 * (1.0 + cosim) * (1.0 + cosim)
    f311 = 0.9375 * sinim * sinim * (1.0 + 3.0 * cosim) - 0.75 * (1.0 + cosim)
    f330 = 1.0 + cosim
    f330 = 1.875 * f330 * f330 * f330
    del1 = 3.0 * nm * nm * aonv * aonv
    o["del2"] = 2.0 * del1 * f220s * g200 * q22
    o["del3"] = 3.0 * del1 * f330 * g300 * q33 * aonv
    o["del1"] = del1 * f311 * g310s * q31 * aonv
    xlamo1 = jnp.fmod(s["mo"] + s["nodeo"] + s["argpo"] - theta, _TWO_PI)
    xfact1 = (
        s["mdot"] + s["xpidot"] - _RPTIM + o["dmdt"] + o["domdt"] + o["dnodt"] - s["no_unkozai"]
    )
    o["xlamo"] = jnp.where(irez == 2, xlamo2, jnp.where(irez == 1, xlamo1, 0.0))
    o["xfact"] = jnp.where(irez == 2, xfact2, jnp.where(irez == 1, xfact1, 0.0))
    return o


def _init(el: SGP4Elements, gravity: str, opsmode: str) -> dict:
    """SGP4's initialisation (INITL, SGP4INIT with DSCOM and DSINIT) for one element set."""
    _, re, xke, j2, j3, j4 = _gravity(gravity)
    j3oj2 = j3 / j2
    s = dict(
        ecco=el.ecco, argpo=el.argpo, inclo=el.inclo, mo=el.mo, nodeo=el.nodeo,
        bstar=el.bstar, epoch=el.epoch_days,
    )  # fmt: skip
    ecco, inclo = el.ecco, el.inclo
    # INITL: un-Kozai the mean motion.
    eccsq = ecco * ecco
    omeosq = 1.0 - eccsq
    rteosq = jnp.sqrt(omeosq)
    cosio = jnp.cos(inclo)
    cosio2 = cosio * cosio
    ak = (xke / el.no_kozai) ** _X2O3
    d1 = 0.75 * j2 * (3.0 * cosio2 - 1.0) / (rteosq * omeosq)
    del_ = d1 / (ak * ak)
    adel = ak * (1.0 - del_ * del_ - del_ * (1.0 / 3.0 + 134.0 * del_ * del_ / 81.0))
    del_ = d1 / (adel * adel)
    no = el.no_kozai / (1.0 + del_)
    ao = (xke / no) ** _X2O3
    sinio = jnp.sin(inclo)
    po = ao * omeosq
    con42 = 1.0 - 5.0 * cosio2
    con41 = -con42 - cosio2 - cosio2
    posq = po * po
    rp = ao * (1.0 - ecco)
    if opsmode == "a":
        gsto = _gstime_afspc(el.epoch_days)
    else:
        gsto = _gstime(el.epoch_days + 2433281.5)
    s.update(no_unkozai=no, eccsq=eccsq, gsto=gsto, con41=con41)

    # SGP4INIT.
    ss = 78.0 / re + 1.0
    qzms2t = ((120.0 - 78.0) / re) ** 4
    isimp = rp < 220.0 / re + 1.0
    perige = (rp - 1.0) * re
    sfour = jnp.where(perige < 98.0, 20.0, perige - 78.0)
    qzms24 = jnp.where(perige < 156.0, ((120.0 - sfour) / re) ** 4, qzms2t)
    sfour = jnp.where(perige < 156.0, sfour / re + 1.0, ss)
    pinvsq = 1.0 / posq
    tsi = 1.0 / (ao - sfour)
    eta = ao * ecco * tsi
    etasq = eta * eta
    eeta = ecco * eta
    psisq = jnp.abs(1.0 - etasq)
    coef = qzms24 * tsi**4
    coef1 = coef / psisq**3.5
    cc2 = (
        coef1
        * no
        * (
            ao * (1.0 + 1.5 * etasq + eeta * (4.0 + etasq))
            + 0.375 * j2 * tsi / psisq * con41 * (8.0 + 3.0 * etasq * (8.0 + etasq))
        )
    )
    cc1 = el.bstar * cc2
    ecc_ok = ecco > 1.0e-4
    cc3 = jnp.where(ecc_ok, -2.0 * coef * tsi * j3oj2 * no * sinio / _safe(ecc_ok, ecco), 0.0)
    x1mth2 = 1.0 - cosio2
    cc4 = (
        2.0
        * no
        * coef1
        * ao
        * omeosq
        * (
            eta * (2.0 + 0.5 * etasq)
            + ecco * (0.5 + 2.0 * etasq)
            - j2
            * tsi
            / (ao * psisq)
            * (
                -3.0 * con41 * (1.0 - 2.0 * eeta + etasq * (1.5 - 0.5 * eeta))
                + 0.75 * x1mth2 * (2.0 * etasq - eeta * (1.0 + etasq)) * jnp.cos(2.0 * el.argpo)
            )
        )
    )
    cc5 = 2.0 * coef1 * ao * omeosq * (1.0 + 2.75 * (etasq + eeta) + eeta * etasq)
    cosio4 = cosio2 * cosio2
    temp1 = 1.5 * j2 * pinvsq * no
    temp2 = 0.5 * temp1 * j2 * pinvsq
    temp3 = -0.46875 * j4 * pinvsq * pinvsq * no
    mdot = (
        no
        + 0.5 * temp1 * rteosq * con41
        + 0.0625 * temp2 * rteosq * (13.0 - 78.0 * cosio2 + 137.0 * cosio4)
    )
    argpdot = (
        -0.5 * temp1 * con42
        + 0.0625 * temp2 * (7.0 - 114.0 * cosio2 + 395.0 * cosio4)
        + temp3 * (3.0 - 36.0 * cosio2 + 49.0 * cosio4)
    )
    xhdot1 = -temp1 * cosio
    nodedot = (
        xhdot1 + (0.5 * temp2 * (4.0 - 19.0 * cosio2) + 2.0 * temp3 * (3.0 - 7.0 * cosio2)) * cosio
    )
    xpidot = argpdot + nodedot
    omgcof = el.bstar * cc3 * jnp.cos(el.argpo)
    xmcof = jnp.where(ecc_ok, -_X2O3 * coef * el.bstar / _safe(ecc_ok, eeta), 0.0)
    nodecf = 3.5 * omeosq * xhdot1 * cc1
    t2cof = 1.5 * cc1
    not_retro = jnp.abs(cosio + 1.0) > 1.5e-12
    xlcof = -0.25 * j3oj2 * sinio * (3.0 + 5.0 * cosio) / jnp.where(not_retro, 1.0 + cosio, _TEMP4)
    aycof = -0.5 * j3oj2 * sinio
    delmo = (1.0 + eta * jnp.cos(el.mo)) ** 3
    sinmao = jnp.sin(el.mo)
    x7thm1 = 7.0 * cosio2 - 1.0
    s.update(
        cc1=cc1, cc4=cc4, cc5=cc5, mdot=mdot, argpdot=argpdot, nodedot=nodedot, xpidot=xpidot,
        omgcof=omgcof, xmcof=xmcof, nodecf=nodecf, t2cof=t2cof, xlcof=xlcof, aycof=aycof,
        delmo=delmo, sinmao=sinmao, x7thm1=x7thm1, x1mth2=x1mth2, eta=eta,
    )  # fmt: skip

    # Deep space (period >= 225 min): lunar-solar coefficients, secular rates, resonance.
    deep = _TWO_PI / no >= 225.0
    _, has_deep, has_resonant = el.kinds
    if has_deep:
        dsc, aux = _dscom(el.epoch_days, ecco, el.argpo, 0.0, inclo, el.nodeo, no)
        s.update(dsc)
        s.update(_dsinit(s, dsc, aux, xke, has_resonant))
    s["deep"] = deep
    s["kinds"] = el.kinds
    isimp = isimp | deep
    s["isimp"] = isimp
    # Higher-order drag terms (not simplified).
    cc1sq = cc1 * cc1
    d2 = 4.0 * ao * tsi * cc1sq
    temp = d2 * tsi * cc1 / 3.0
    d3 = (17.0 * ao + sfour) * temp
    d4 = 0.5 * temp * ao * tsi * (221.0 * ao + 31.0 * sfour) * cc1
    s.update(
        d2=d2, d3=d3, d4=d4,
        t3cof=d2 + 2.0 * cc1sq,
        t4cof=0.25 * (3.0 * d3 + cc1 * (12.0 * d2 + 10.0 * cc1sq)),
        t5cof=0.2 * (3.0 * d4 + 12.0 * cc1 * d3 + 6.0 * d2 * d2 + 15.0 * cc1sq * (2.0 * d2 + cc1sq)),
    )  # fmt: skip
    return s


def _resonance(s, t, nsteps):
    """Deep-space resonance: the mean motion and longitude integrated in 720-min steps from the
    epoch to `t` [min] (DSPACE's Euler-Maclaurin integrator), as a masked scan of `nsteps`."""
    fasx2, fasx4, fasx6 = 0.13130908, 2.8843198, 0.37448087
    g22, g32, g44, g52, g54 = 5.7686396, 0.95240898, 1.8014998, 1.0508330, 4.4108898
    step2 = 259200.0
    irez = s["irez"]
    delt = jnp.where(t > 0.0, _STEP, -_STEP)

    def rates(xli, xni, atime):
        # 24-hour (synchronous) resonance.
        a = xli - fasx2
        b = 2.0 * (xli - fasx4)
        c = 3.0 * (xli - fasx6)
        xndt1 = s["del1"] * jnp.sin(a) + s["del2"] * jnp.sin(b) + s["del3"] * jnp.sin(c)
        xnddt1 = (
            s["del1"] * jnp.cos(a) + 2.0 * s["del2"] * jnp.cos(b) + 3.0 * s["del3"] * jnp.cos(c)
        )
        # 12-hour resonance.
        xomi = s["argpo"] + s["argpdot"] * atime
        x2omi = xomi + xomi
        x2li = xli + xli
        args = (
            ("d2201", x2omi + xli - g22, 1.0),
            ("d2211", xli - g22, 1.0),
            ("d3210", xomi + xli - g32, 1.0),
            ("d3222", -xomi + xli - g32, 1.0),
            ("d4410", x2omi + x2li - g44, 2.0),
            ("d4422", x2li - g44, 2.0),
            ("d5220", xomi + xli - g52, 1.0),
            ("d5232", -xomi + xli - g52, 1.0),
            ("d5421", xomi + x2li - g54, 2.0),
            ("d5433", -xomi + x2li - g54, 2.0),
        )
        xndt2 = sum(s[k] * jnp.sin(x) for k, x, _ in args)
        xnddt2 = sum(m * s[k] * jnp.cos(x) for k, x, m in args)
        xldot = xni + s["xfact"]
        two = irez == 2
        xndt = jnp.where(two, xndt2, xndt1)
        xnddt = jnp.where(two, xnddt2, xnddt1) * xldot
        return xndt, xldot, xnddt

    # Steps taken: while |t - atime| >= 720 min, i.e. floor(|t| / 720).
    n = jnp.floor(jnp.abs(t) / _STEP)

    def body(carry, k):
        xli, xni, atime = carry
        xndt, xldot, xnddt = rates(xli, xni, atime)
        active = k < n
        xli_new = xli + xldot * delt + xndt * step2
        xni_new = xni + xndt * delt + xnddt * step2
        return (
            jnp.where(active, xli_new, xli),
            jnp.where(active, xni_new, xni),
            jnp.where(active, atime + delt, atime),
        ), None

    init = (s["xlamo"], s["no_unkozai"], jnp.zeros_like(t))
    if nsteps > 0:
        (xli, xni, atime), _ = jax.lax.scan(body, init, jnp.arange(nsteps, dtype=float))
    else:
        xli, xni, atime = init
    xndt, xldot, xnddt = rates(xli, xni, atime)
    ft = t - atime
    nm = xni + xndt * ft + xnddt * ft * ft * 0.5
    xl = xli + xldot * ft + xndt * ft * ft * 0.5
    return nm, xl, n > nsteps


def _propagate(s: dict, t, gravity: str, opsmode: str, nsteps: int):
    """SGP4 (with DSPACE and DPPER) at `t` [min] since the epoch: (r [km], v [km/s], error)."""
    _, re, xke, j2, j3, j4 = _gravity(gravity)
    j3oj2 = j3 / j2
    vkmpersec = re * xke / 60.0
    deep, isimp = s["deep"], s["isimp"]
    # Secular gravity and atmospheric drag.
    xmdf = s["mo"] + s["mdot"] * t
    argpdf = s["argpo"] + s["argpdot"] * t
    nodedf = s["nodeo"] + s["nodedot"] * t
    t2 = t * t
    nodem = nodedf + s["nodecf"] * t2
    delomg = s["omgcof"] * t
    delm = s["xmcof"] * ((1.0 + s["eta"] * jnp.cos(xmdf)) ** 3 - s["delmo"])
    mm_full = xmdf + delomg + delm
    full = ~isimp
    mm = jnp.where(full, mm_full, xmdf)
    argpm = jnp.where(full, argpdf - delomg - delm, argpdf)
    t3, t4 = t2 * t, t2 * t2
    tempa = 1.0 - s["cc1"] * t - jnp.where(full, s["d2"] * t2 + s["d3"] * t3 + s["d4"] * t4, 0.0)
    tempe = s["bstar"] * s["cc4"] * t + jnp.where(
        full, s["bstar"] * s["cc5"] * (jnp.sin(mm_full) - s["sinmao"]), 0.0
    )
    templ = s["t2cof"] * t2 + jnp.where(
        full, s["t3cof"] * t3 + t4 * (s["t4cof"] + t * s["t5cof"]), 0.0
    )
    nm = s["no_unkozai"]
    em = s["ecco"]
    inclm = s["inclo"]

    # Deep space: lunar-solar secular rates and the resonance integrator.
    _, has_deep, has_resonant = s["kinds"]
    beyond = jnp.zeros(jnp.shape(t), bool)
    if has_deep:
        em_d = em + s["dedt"] * t
        incl_d = inclm + s["didt"] * t
        argp_d = argpm + s["domdt"] * t
        node_d = nodem + s["dnodt"] * t
        mm_d = mm + s["dmdt"] * t
        nm_d = nm
        if has_resonant:
            theta = jnp.fmod(s["gsto"] + t * _RPTIM, _TWO_PI)
            nm_r, xl, beyond = _resonance(s, t, nsteps)
            resonant = s["irez"] != 0
            mm_r = jnp.where(
                s["irez"] == 1, xl - node_d - argp_d + theta, xl - 2.0 * node_d + 2.0 * theta
            )
            mm_d = jnp.where(resonant, mm_r, mm_d)
            nm_d = jnp.where(resonant, nm_r, nm)
        em = jnp.where(deep, em_d, em)
        inclm = jnp.where(deep, incl_d, inclm)
        argpm = jnp.where(deep, argp_d, argpm)
        nodem = jnp.where(deep, node_d, nodem)
        mm = jnp.where(deep, mm_d, mm)
        nm = jnp.where(deep, nm_d, nm)

    err2 = nm <= 0.0
    nm_safe = _safe(~err2, nm)
    am = (xke / nm_safe) ** _X2O3 * tempa * tempa
    nm = xke / am**1.5
    em = em - tempe
    err1 = (em >= 1.0) | (em < -0.001)
    em = jnp.where(em < 1.0e-6, 1.0e-6, em)
    mm = mm + s["no_unkozai"] * templ
    xlm = mm + argpm + nodem
    nodem = jnp.fmod(nodem, _TWO_PI)
    argpm = jnp.fmod(argpm, _TWO_PI)
    xlm = jnp.fmod(xlm, _TWO_PI)
    mm = jnp.fmod(xlm - argpm - nodem, _TWO_PI)

    # Lunar-solar periodics (deep space).
    ep, xincp, nodep, argpp, mp = em, inclm, nodem, argpm, mm
    err3 = jnp.zeros(jnp.shape(t), bool)
    aycof, xlcof = s["aycof"], s["xlcof"]
    if has_deep:
        ep_d, xincp_d, nodep_d, argpp_d, mp_d = _dpper(s, t, ep, xincp, nodep, argpp, mp, opsmode)
        neg = xincp_d < 0.0
        xincp_d = jnp.where(neg, -xincp_d, xincp_d)
        nodep_d = jnp.where(neg, nodep_d + math.pi, nodep_d)
        argpp_d = jnp.where(neg, argpp_d - math.pi, argpp_d)
        err3 = deep & ((ep_d < 0.0) | (ep_d > 1.0))
        ep = jnp.where(deep, ep_d, ep)
        xincp = jnp.where(deep, xincp_d, xincp)
        nodep = jnp.where(deep, nodep_d, nodep)
        argpp = jnp.where(deep, argpp_d, argpp)
        mp = jnp.where(deep, mp_d, mp)
    sinip, cosip = jnp.sin(xincp), jnp.cos(xincp)
    if has_deep:
        not_retro = jnp.abs(cosip + 1.0) > 1.5e-12
        xlcof_d = (
            -0.25 * j3oj2 * sinip * (3.0 + 5.0 * cosip) / jnp.where(not_retro, 1.0 + cosip, _TEMP4)
        )
        aycof = jnp.where(deep, -0.5 * j3oj2 * sinip, aycof)
        xlcof = jnp.where(deep, xlcof_d, xlcof)

    # Long-period periodics.
    axnl = ep * jnp.cos(argpp)
    temp = 1.0 / (am * (1.0 - ep * ep))
    aynl = ep * jnp.sin(argpp) + temp * aycof
    xl = mp + argpp + nodep + temp * xlcof * axnl

    # Kepler's equation for E + omega (at most 10 Newton steps, each limited to 0.95 rad).
    u = jnp.fmod(xl - nodep, _TWO_PI)

    def kepler(_, c):
        eo1, tem5, sineo1, coseo1 = c
        active = jnp.abs(tem5) >= 1.0e-12
        sn, cs = jnp.sin(eo1), jnp.cos(eo1)
        d = (u - aynl * cs + axnl * sn - eo1) / (1.0 - cs * axnl - sn * aynl)
        d = jnp.clip(d, -0.95, 0.95)
        return (
            jnp.where(active, eo1 + d, eo1),
            jnp.where(active, d, tem5),
            jnp.where(active, sn, sineo1),
            jnp.where(active, cs, coseo1),
        )

    big = jnp.full_like(u, 9999.9)
    _, _, sineo1, coseo1 = jax.lax.fori_loop(
        0, 10, kepler, (u, big, jnp.zeros_like(u), jnp.ones_like(u))
    )

    # Short-period periodics.
    ecose = axnl * coseo1 + aynl * sineo1
    esine = axnl * sineo1 - aynl * coseo1
    el2 = axnl * axnl + aynl * aynl
    pl = am * (1.0 - el2)
    err4 = pl < 0.0
    pl = _safe(~err4, pl)
    rl = am * (1.0 - ecose)
    rdotl = jnp.sqrt(am) * esine / rl
    rvdotl = jnp.sqrt(pl) / rl
    betal = jnp.sqrt(_safe(el2 < 1.0, 1.0 - el2))
    temp = esine / (1.0 + betal)
    sinu = am / rl * (sineo1 - aynl - axnl * temp)
    cosu = am / rl * (coseo1 - axnl + aynl * temp)
    su = jnp.arctan2(sinu, cosu)
    sin2u = (cosu + cosu) * sinu
    cos2u = 1.0 - 2.0 * sinu * sinu
    temp = 1.0 / pl
    temp1 = 0.5 * j2 * temp
    temp2 = temp1 * temp
    cosisq = cosip * cosip
    con41 = jnp.where(deep, 3.0 * cosisq - 1.0, s["con41"])
    x1mth2 = jnp.where(deep, 1.0 - cosisq, s["x1mth2"])
    x7thm1 = jnp.where(deep, 7.0 * cosisq - 1.0, s["x7thm1"])
    mrt = rl * (1.0 - 1.5 * temp2 * betal * con41) + 0.5 * temp1 * x1mth2 * cos2u
    su = su - 0.25 * temp2 * x7thm1 * sin2u
    xnode = nodep + 1.5 * temp2 * cosip * sin2u
    xinc = xincp + 1.5 * temp2 * cosip * sinip * cos2u
    mvt = rdotl - nm * temp1 * x1mth2 * sin2u / xke
    rvdot = rvdotl + nm * temp1 * (x1mth2 * cos2u + 1.5 * con41) / xke

    # Orientation vectors.
    sinsu, cossu = jnp.sin(su), jnp.cos(su)
    snod, cnod = jnp.sin(xnode), jnp.cos(xnode)
    sini, cosi = jnp.sin(xinc), jnp.cos(xinc)
    xmx = -snod * cosi
    xmy = cnod * cosi
    uvec = jnp.stack([xmx * sinsu + cnod * cossu, xmy * sinsu + snod * cossu, sini * sinsu], -1)
    vvec = jnp.stack([xmx * cossu - cnod * sinsu, xmy * cossu - snod * sinsu, sini * cossu], -1)
    r = (mrt * re)[..., None] * uvec
    v = vkmpersec * (mvt[..., None] * uvec + rvdot[..., None] * vvec)

    # Error codes, in SGP4's order of checks.
    # A traced element set of a kind the program was not built for (SGP4Elements.kinds).
    has_near = s["kinds"][0]
    other_kind = (deep & (not has_deep)) | (~deep & (not has_near))
    if has_resonant:
        beyond = deep & (s["irez"] != 0) & beyond
    elif has_deep:
        other_kind = other_kind | (deep & (s["irez"] != 0))
    error = jnp.where(mrt < 1.0, 6, 0)
    error = jnp.where(err4, 4, error)
    error = jnp.where(err3, 3, error)
    error = jnp.where(err1, 1, error)
    error = jnp.where(err2, 2, error)
    error = jnp.where(beyond, 7, error)
    error = jnp.where(other_kind, 8, error)
    inputs = [t] + [s[k] for k in ("ecco", "argpo", "inclo", "mo", "nodeo", "bstar", "no_unkozai")]
    nonfinite = ~jnp.all(jnp.isfinite(jnp.stack(jnp.broadcast_arrays(*inputs))), axis=0)
    error = jnp.where(nonfinite, 9, error).astype(jnp.int32)
    bad = ((error != 0) & (error != 6))[..., None]
    r = jnp.where(bad, jnp.nan, r)
    v = jnp.where(bad, jnp.nan, v)
    return r, v, error


def _check_options(gravity, opsmode):
    _gravity(gravity)
    if opsmode not in ("i", "a"):
        raise ValueError(
            f"sgp4: `opsmode` must be 'i' (improved, python-sgp4's default) or 'a' (AFSPC); "
            f"got {opsmode!r}."
        )


def _resonance_steps(t_s, max_resonance_steps):
    """The scan length: given, or for concrete times the steps their span needs."""
    if max_resonance_steps is not None:
        n = int(max_resonance_steps)
        if n < 0:
            raise ValueError(
                f"sgp4: `max_resonance_steps` must be an int >= 0; got {max_resonance_steps!r}."
            )
        return n
    if is_concrete(t_s):
        tmax = float(np.max(np.abs(np.asarray(t_s)))) if np.size(t_s) else 0.0
        if math.isfinite(tmax):
            # Rounded up to a power of two (at least 16: 8 days), so that spans compile few programs.
            need = int(math.floor(tmax / 60.0 / _STEP)) + 1
            return max(16, 1 << (need - 1).bit_length())
    return MAX_RESONANCE_STEPS


def sgp4(
    elements: SGP4Elements,
    t: Float[ArrayLike, "*times"],
    *,
    gravity: str = "wgs72",
    opsmode: str = "i",
    max_resonance_steps: int | None = None,
) -> SGP4Result:
    r"""Propagate mean elements with SGP4/SDP4 to times `t` [s] since their epoch (TEME frame).

    **Arguments:**

    - `elements`: an `SGP4Elements` (e.g. `TLE.elements()`), scalar fields or a batch of shape `B`.
    - `t`: time since the element epoch [s] (UTC seconds), any shape `T` (negative: backwards).
    - `gravity`: the constants `'wgs72'` (default: the element sets are fitted with them, as
      python-sgp4's default), `'wgs72old'` or `'wgs84'`.
    - `opsmode`: `'i'` improved (default, python-sgp4's) or `'a'` (AFSPC's sidereal angle and node
      wrapping).
    - `max_resonance_steps`: length of the resonance scan (720-min steps) for 12-h and 24-h
      deep-space orbits; default: what concrete `t` needs (rounded up to a power of two, at least
      16), else `MAX_RESONANCE_STEPS` (1024, about 2 years). A resonant time beyond it is error 7.
      Only programs for resonant element sets (`SGP4Elements.kinds`) hold the scan.

    Returns an `SGP4Result` with `r_TEME` [m] and `v_TEME` [m/s] of shape `B + T + (3,)` and `error`
    of shape `B + T` (see the module documentation for the codes).

    Differentiable with respect to `elements` and `t` (`grad`, `jacfwd`); the element set's epoch
    enters only through `epoch_days`.
    """
    _check_options(gravity, opsmode)
    if not isinstance(elements, SGP4Elements):
        raise TypeError(f"sgp4: `elements` must be SGP4Elements; got {type(elements).__name__}.")
    shapes = {x.shape for x in jax.tree_util.tree_leaves(elements)}
    if len(shapes) != 1:
        raise ValueError(f"sgp4: the `elements` fields must share one shape; got {sorted(shapes)}.")
    nsteps = _resonance_steps(t, max_resonance_steps) if elements.kinds[2] else 0
    options = _Options(gravity, opsmode, nsteps)
    return _sgp4_program(elements, jnp.asarray(t, dtype=float), options)


class _Options(eqx.Module):
    """The compile-time options of one SGP4 program (static)."""

    gravity: str = eqx.field(static=True)
    opsmode: str = eqx.field(static=True)
    nsteps: int = eqx.field(static=True)


def _sgp4(elements, t, options):
    gravity, opsmode, nsteps = options.gravity, options.opsmode, options.nsteps
    (bshape,) = {x.shape for x in jax.tree_util.tree_leaves(elements)}

    def over_times(el):
        s = _init(el, gravity, opsmode)
        tf = t.reshape(-1)
        r, v, e = jax.vmap(lambda tt: _propagate(s, tt / 60.0, gravity, opsmode, nsteps))(tf)
        return r.reshape(t.shape + (3,)), v.reshape(t.shape + (3,)), e.reshape(t.shape)

    if bshape == ():
        r, v, e = over_times(elements)
    else:
        flat = jax.tree_util.tree_map(lambda x: x.reshape(-1), elements)
        r, v, e = jax.vmap(over_times)(flat)
        r = r.reshape(bshape + t.shape + (3,))
        v = v.reshape(bshape + t.shape + (3,))
        e = e.reshape(bshape + t.shape)
    return SGP4Result(r_TEME=r * 1e3, v_TEME=v * 1e3, error=e)


# One compiled program per (shapes, kinds, options), with jaxsim's CPU compile options (XLA's
# classic emitters: about 2.5x less compile time for SGP4's scalar graph); inside another program
# it is traced inline.
_sgp4_program = jaxsim_jit(_sgp4)
