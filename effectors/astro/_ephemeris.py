r"""Sun, Moon and planet positions inside a program: JPL DE421 Chebyshev series, and a low-precision
analytic Sun/Moon model.

Time is TDB seconds past J2000.0 (JD 2451545.0 TDB), the `Epoch.tdb_seconds_past_j2000 + t` of a run;
positions are in metres and velocities in metres per second, in the ICRF axes of DE421 (the
$\mathcal N$ frame of a run: EME2000/GCRF to within 0.02 arcsec), centred on a chosen body.

**DE421.** Each DE421 quantity is a piecewise Chebyshev expansion: over record $k$, which spans
$[t_k, t_k + \Delta]$,

$$\mathbf x(t) = \sum_{n=0}^{N-1}\mathbf a_{k,n}\,T_n(\tau),\qquad \tau = 2(t - t_k)/\Delta - 1,$$

and $\dot{\mathbf x}(t) = (2/\Delta)\sum_n \mathbf a_{k,n}T'_n(\tau)$. `DE421Ephemeris` copies, on the host,
the records covering a time span from the `de421` package (read with `jplephem`), and evaluates them
with Clenshaw's recurrence inside `jit`/`vmap`/`grad` (the derivative series by the recurrence of
$T'_n$, so `grad` of a position with respect to time equals the velocity). DE421 tabulates the
Earth-Moon barycentre (EMB) about the solar-system barycentre (SSB) and the geocentric Moon
$\mathbf r_{M/\oplus}$; with $\mu_\oplus/\mu_M$ = EMRAT,

$$\mathbf r_\oplus = \mathbf r_{EMB} - \frac{\mathbf r_{M/\oplus}}{1 + \mathrm{EMRAT}},\qquad
\mathbf r_M = \mathbf r_{EMB} + \frac{\mathrm{EMRAT}\,\mathbf r_{M/\oplus}}{1 + \mathrm{EMRAT}}.$$

A position relative to the centre is one linear combination of series (the EMB cancels exactly for
Earth-centred Moon and Sun). Mercury and Venus are the planets; Mars to Pluto are the barycentres of
their systems (DE421 integrates those; Mars' centre is within 0.2 m of its barycentre).

**Analytic.** `AnalyticSunMoon`: Montenbruck & Gill's low-precision series (mean elements and the
largest periodic terms, referred to the mean ecliptic and equinox of J2000, rotated to the equator by
$\varepsilon$ = 23.43929111 deg). Measured against DE421 over 2000-2050 (`tests/effectors/astro/test_ephemeris.py`):
see `AnalyticSunMoon` for the figures.

**References:** Folkner, W. M., Williams, J. G., Boggs, D. H., "The Planetary and Lunar Ephemeris
DE 421", IPN Progress Report 42-178, 2009; Newhall, X X, "Numerical representation of planetary
ephemerides", Celest. Mech. 45, 305-310, 1989, doi:10.1007/BF01232561 (the Chebyshev records);
Montenbruck, O., Gill, E., *Satellite Orbits*, Springer, 2000, sec. 3.3.2.
"""

import abc
import math
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxsim.validation import is_concrete, spans_checked

from ._bodies import Body
from ._time import Epoch


J2000_JD = 2451545.0  # [d] J2000.0 epoch, Julian date TDB
DAY = 86400.0  # [s]
_KM = 1000.0  # [m] per [km]

# Targets DE421 provides (the `de421` package's series names): the planets or system barycentres.
_DE421_SERIES = {
    "sun": "sun",
    "mercury": "mercury",
    "venus": "venus",
    "mars": "mars",
    "jupiter": "jupiter",
    "saturn": "saturn",
    "uranus": "uranus",
    "neptune": "neptune",
    "pluto": "pluto",
}
DE421_TARGETS = ("ssb", "emb", "earth", "moon", *_DE421_SERIES)


def _target_name(cls: str, arg: str, target) -> str:
    name = target.name if isinstance(target, Body) else target
    if not isinstance(name, str):
        raise TypeError(
            f"{cls}: `{arg}` must be a Body or a body name; got {type(target).__name__}."
        )
    return name.lower()


def _tdb_offset(epoch) -> float:
    """TDB seconds past J2000 of an `Epoch` (its `tdb_seconds_past_j2000`) or a number [s]."""
    return float(getattr(epoch, "tdb_seconds_past_j2000", epoch))


class AbstractEphemeris(eqx.Module):
    """Positions of bodies relative to a centre, as functions of TDB seconds past J2000."""

    center: eqx.AbstractVar[str]

    @abc.abstractmethod
    def position(self, target, t):
        """Position [m] of `target` (a `Body` or name) relative to `center` at TDB seconds `t` past
        J2000, shape `(3,)` (`t` a scalar; `vmap` for many)."""

    def state(self, target, t):
        """`(r, v)`: position [m] and velocity [m/s] of `target` relative to `center` at `t`."""
        t = jnp.asarray(t, dtype=float)
        return jax.jvp(lambda s: self.position(target, s), (t,), (jnp.ones_like(t),))

    def span(self) -> tuple[float, float]:
        """`(lo, hi)` [s TDB past J2000]: the times the ephemeris covers (unbounded by default)."""
        return -math.inf, math.inf

    def trajectory(self, target, epoch) -> "EphemerisPosition":
        """`target`'s position as a function of a run's time `t` [s] (TDB seconds past `epoch`, an
        `Epoch` or TDB seconds past J2000): a callable module for the `r_PN_N` of gravity bodies,
        the sun of `CannonballSRP` and `Eclipse` occulters."""
        return EphemerisPosition(self, _target_name(type(self).__name__, "target", target), epoch)


class EphemerisPosition(eqx.Module):
    """`t -> ephemeris.position(target, t0 + t)` [m]: a body's position along a run (`t` [s] TDB
    seconds past the run's epoch, `t0` its TDB seconds past J2000)."""

    ephemeris: AbstractEphemeris
    t0: jnp.ndarray  # an array: `vmap`/`grad` over the epoch offset without recompiling
    target: str = eqx.field(static=True)

    def __init__(
        self, ephemeris: AbstractEphemeris, target: Body | str, epoch: Epoch | Float[ArrayLike, ""]
    ):
        self.ephemeris = ephemeris
        self.target = _target_name("EphemerisPosition", "target", target)
        self.t0 = jnp.asarray(_tdb_offset(epoch), dtype=float)

    def __call__(self, t):
        return self.ephemeris.position(self.target, self.t0 + t)

    def time_span_checks(self, t0, t1) -> list:
        """`[(ok, message)]`: the run's times `[t0, t1]` [s] (past the epoch) inside the span the
        ephemeris covers (checked by `simulate` before the run)."""
        lo, hi = self.ephemeris.span()
        if lo == -math.inf and hi == math.inf:
            return []
        values = (self.t0, t0, t1)
        if all(is_concrete(v) for v in values):
            offset, a, b = (np.asarray(v, dtype=float) for v in values)
            first, last = offset + np.minimum(a, b), offset + np.maximum(a, b)
            ok = (first >= lo) & (last <= hi)
            need = f"[{np.min(first)!r}, {np.max(last)!r}]"
        else:
            first = self.t0 + jnp.minimum(t0, t1)
            last = self.t0 + jnp.maximum(t0, t1)
            ok = (first >= lo) & (last <= hi)
            need = "the run's times (traced)"
        name = type(self.ephemeris).__name__
        message = (
            f"simulate: {name} ({self.target!r}): the run needs times [s TDB past J2000] {need}, "
            f"outside the copied records [{lo!r}, {hi!r}]; build the ephemeris with a "
            "`start`/`stop` covering the run (epoch + [t0, t1])."
        )
        return [(ok, message)]


class _ChebyshevRecords(eqx.Module):
    """Consecutive Chebyshev records of one vector quantity (km in the file, m here)."""

    coefficients: jnp.ndarray  # (records, 3, N) [m]
    t_first: float = eqx.field(static=True)  # [s] TDB past J2000, start of the first record
    interval: float = eqx.field(static=True)  # [s] record length

    def __call__(self, t):
        n_rec, _, n_coef = self.coefficients.shape
        k = jnp.clip(jnp.floor((t - self.t_first) / self.interval), 0, n_rec - 1).astype(int)
        tau = 2.0 * (t - self.t_first - k * self.interval) / self.interval - 1.0
        a = self.coefficients[k]  # (3, N)
        # Clenshaw: b_n = a_n + 2 tau b_{n+1} - b_{n+2}; x = a_0 + tau b_1 - b_2. Written out (N - 1
        # steps of 3-vectors, fused into a few kernels): measured on the Sun + Moon (issue 41),
        # 0.77 us per evaluation; the same recurrence as a `lax.scan` ran 3-6x slower in a drift
        # (a loop's per-iteration cost on the CPU runtime), and the Chebyshev polynomials summed
        # with the coefficients (`jnp.sum`) 7x slower (a reduction per series breaks the fusion).
        b1 = jnp.zeros(3)
        b2 = jnp.zeros(3)
        for n in range(n_coef - 1, 0, -1):
            b1, b2 = a[:, n] + 2.0 * tau * b1 - b2, b1
        return a[:, 0] + tau * b1 - b2


class DE421Ephemeris(AbstractEphemeris):
    r"""JPL DE421 positions of `targets` relative to `center` over the TDB span `[start, stop]`.

    **Arguments:**

    - `targets`: bodies (`Body` objects or names) among `DE421_TARGETS`: `"sun"`, `"mercury"`,
      `"venus"`, `"earth"`, `"moon"`, `"mars"`, `"jupiter"`, `"saturn"`, `"uranus"`, `"neptune"`,
      `"pluto"` (Mars to Pluto: system barycentres), `"emb"` (Earth-Moon barycentre), `"ssb"`.
    - `start`, `stop`: the span [s], TDB seconds past J2000 (`Epoch.tdb_seconds_past_j2000`, or
      `epoch.tdb_seconds_past_j2000 + duration`), inside DE421's 1899-07-29 .. 2053-10-09.
    - `center`: the origin (default `"earth"`).

    Only the records covering `[start, stop]` are copied (about 2 kB per body-month), as arrays in
    the module: it is a pytree and can be passed through `jit`. A time outside the copied records is
    an error, never an extrapolation: `simulate` refuses a run whose times leave them before it
    starts (traced times: the run fails with `invalid_model`), and its programs hold no run-time
    check (no host callback: JAX's persistent cache can store them); elsewhere (a direct call)
    the check is an `eqx.error_if` at run time.

    **Methods:** `position(target, t)`, `state(target, t)` (position and velocity),
    `trajectory(target, epoch)` (a function of a run's time).

    Needs the optional extra `astro` (`jplephem`, `de421`).

    **Reference:** Folkner, Williams & Boggs, "The Planetary and Lunar Ephemeris DE 421", IPN
    Progress Report 42-178, 2009.
    """

    center: str = eqx.field(static=True)
    targets: tuple[str, ...] = eqx.field(static=True)
    start: float = eqx.field(static=True)
    stop: float = eqx.field(static=True)
    records: dict
    # Per target, the series names and weights of its position relative to `center`.
    combinations: tuple = eqx.field(static=True)

    def __init__(
        self, targets: Sequence[Body | str], start: float, stop: float, *, center: str = "earth"
    ):
        cls = "DE421Ephemeris"
        try:
            import de421
            from jplephem.ephem import Ephemeris
        except ImportError as err:
            raise ImportError(
                f"{cls}: needs the packages `jplephem` and `de421` (pip install 'jaxsim-spacecraft[astro]'); "
                "`AnalyticSunMoon` is a low-precision Sun/Moon model without them."
            ) from err
        if isinstance(targets, (str, Body)):
            targets = (targets,)
        names = tuple(_target_name(cls, "targets", t) for t in targets)
        center = _target_name(cls, "center", center)
        for arg, name in [("center", center)] + [("targets", n) for n in names]:
            if name not in DE421_TARGETS:
                raise ValueError(f"{cls}: `{arg}` must be among {DE421_TARGETS}; got {name!r}.")
        if len(set(names)) != len(names):
            raise ValueError(f"{cls}: `targets` must be distinct; got {names}.")
        start, stop = float(start), float(stop)
        if not (math.isfinite(start) and math.isfinite(stop) and stop >= start):
            raise ValueError(
                f"{cls}: `stop` [s] must be >= `start`; got start={start}, stop={stop}."
            )
        eph = Ephemeris(de421)
        lo, hi = float(eph.jalpha - J2000_JD) * DAY, float(eph.jomega - J2000_JD) * DAY
        if start < lo or stop > hi:
            raise ValueError(
                f"{cls}: the span [start, stop] [s TDB past J2000] must lie in DE421's [{lo}, {hi}]; "
                f"got [{start}, {stop}]."
            )
        emrat = float(eph.EMRAT)
        combos = {}
        for name in (center, *names):
            combos[name] = _ssb_combination(name, emrat)
        combinations = []
        used = set()
        for name in names:
            w = dict(combos[name])
            for series, wc in combos[center].items():
                w[series] = w.get(series, 0.0) - wc
            w = {s: v for s, v in w.items() if v != 0.0}
            used.update(w)
            combinations.append(tuple(sorted(w.items())))
        records = {}
        for series in sorted(used):
            sets = eph.load(series)
            n_sets = sets.shape[0]
            interval_days = (eph.jomega - eph.jalpha) / n_sets
            first = (eph.jalpha - J2000_JD) * DAY
            interval = interval_days * DAY
            k0 = min(int(math.floor((start - first) / interval)), n_sets - 1)
            k1 = min(int(math.floor((stop - first) / interval)), n_sets - 1)
            records[series] = _ChebyshevRecords(
                jnp.asarray(sets[k0 : k1 + 1] * _KM), float(first + k0 * interval), float(interval)
            )
        self.center = center
        self.targets = names
        self.start, self.stop = start, stop
        self.records = records
        self.combinations = tuple(combinations)

    def span(self) -> tuple[float, float]:
        """`(lo, hi)` [s TDB past J2000]: the span covered by every copied record."""
        lo = max(r.t_first for r in self.records.values()) if self.records else -math.inf
        hi = (
            min(r.t_first + r.coefficients.shape[0] * r.interval for r in self.records.values())
            if self.records
            else math.inf
        )
        return lo, hi

    def position(self, target, t):
        name = _target_name("DE421Ephemeris", "target", target)
        if name not in self.targets:
            raise ValueError(
                f"DE421Ephemeris.position: `target` must be one of the ephemeris' targets "
                f"{self.targets}; got {name!r}."
            )
        t = jnp.asarray(t, dtype=float)
        lo, hi = self.span()
        outside = (t < lo) | (t > hi)
        if not spans_checked():
            t = eqx.error_if(
                t,
                outside,
                f"DE421Ephemeris: time [s TDB past J2000] outside the copied records [{lo}, {hi}]; "
                "build the ephemeris with a `start`/`stop` covering the run.",
            )
        r = jnp.zeros(3)
        for series, w in self.combinations[self.targets.index(name)]:
            r = r + w * self.records[series](t)
        if spans_checked():
            # In `simulate`'s programs the run's span was checked before the run (no host
            # callback: the program stays cacheable); a time outside it is NaN, never an
            # extrapolation, and fails the run.
            r = jnp.where(outside, jnp.nan, r)
        return r


def _ssb_combination(name: str, emrat: float) -> dict:
    """Weights of the DE421 series whose sum is `name`'s position relative to the SSB."""
    if name == "ssb":
        return {}
    if name == "emb":
        return {"earthmoon": 1.0}
    if name == "earth":
        return {"earthmoon": 1.0, "moon": -1.0 / (1.0 + emrat)}
    if name == "moon":
        return {"earthmoon": 1.0, "moon": emrat / (1.0 + emrat)}
    return {_DE421_SERIES[name]: 1.0}


# --------------------------------------------------------------------------------------------------
# Low-precision analytic Sun and Moon (Montenbruck & Gill, Satellite Orbits, sec. 3.3.2).

_ARCSEC = math.pi / (180.0 * 3600.0)  # [rad]
_DEG = math.pi / 180.0  # [rad]
_OBLIQUITY_J2000 = 23.43929111 * _DEG  # [rad] mean obliquity of the ecliptic at J2000
_CENTURY = 36525.0 * DAY  # [s] Julian century


def _ecliptic_to_equator(lon, lat, r):
    cb = jnp.cos(lat)
    x, y, z = r * cb * jnp.cos(lon), r * cb * jnp.sin(lon), r * jnp.sin(lat)
    ce, se = math.cos(_OBLIQUITY_J2000), math.sin(_OBLIQUITY_J2000)
    return jnp.stack([x, ce * y - se * z, se * y + ce * z])


def sun_position_analytic(t: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch 3"]:
    r"""Geocentric Sun [m] (EME2000) at TDB seconds `t` past J2000: Montenbruck & Gill eq. 3.43,
    mean anomaly $M = 357.5256° + 35999.049° T$, ecliptic longitude
    $\lambda = 282.9400° + M + 6892'' \sin M + 72'' \sin 2M$, distance
    $(149.619 - 2.499\cos M - 0.021\cos 2M)\,10^6$ km, latitude 0 ($T$ in Julian centuries)."""
    T = t / _CENTURY
    M = (357.5256 + 35999.049 * T) * _DEG
    lon = 282.9400 * _DEG + M + (6892.0 * jnp.sin(M) + 72.0 * jnp.sin(2 * M)) * _ARCSEC
    r = (149.619 - 2.499 * jnp.cos(M) - 0.021 * jnp.cos(2 * M)) * 1e9
    return _ecliptic_to_equator(lon, jnp.zeros_like(lon), r)


def moon_position_analytic(t: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch 3"]:
    r"""Geocentric Moon [m] (EME2000) at TDB seconds `t` past J2000: Montenbruck & Gill eq. 3.47
    (Brown's theory truncated to its largest terms: 14 in longitude, 8 in latitude, 9 in distance),
    the mean longitude reduced to the J2000 equinox by $-1.3972° T$."""
    T = t / _CENTURY
    L0 = (218.31617 + 481267.88088 * T - 1.3972 * T) * _DEG
    l = (134.96292 + 477198.86753 * T) * _DEG
    lp = (357.52543 + 35999.04944 * T) * _DEG
    F = (93.27283 + 483202.01873 * T) * _DEG
    D = (297.85027 + 445267.11135 * T) * _DEG
    s = jnp.sin
    dlon = (
        22640 * s(l)
        + 769 * s(2 * l)
        - 4586 * s(l - 2 * D)
        + 2370 * s(2 * D)
        - 668 * s(lp)
        - 412 * s(2 * F)
        - 212 * s(2 * l - 2 * D)
        - 206 * s(l + lp - 2 * D)
        + 192 * s(l + 2 * D)
        - 165 * s(lp - 2 * D)
        + 148 * s(l - lp)
        - 125 * s(D)
        - 110 * s(l + lp)
        - 55 * s(2 * F - 2 * D)
    ) * _ARCSEC
    lon = L0 + dlon
    lat = (
        18520 * s(F + dlon + (412 * s(2 * F) + 541 * s(lp)) * _ARCSEC)
        - 526 * s(F - 2 * D)
        + 44 * s(l + F - 2 * D)
        - 31 * s(-l + F - 2 * D)
        - 25 * s(-2 * l + F)
        - 23 * s(lp + F - 2 * D)
        + 21 * s(-l + F)
        + 11 * s(-lp + F - 2 * D)
    ) * _ARCSEC
    c = jnp.cos
    r = (
        385000
        - 20905 * c(l)
        - 3699 * c(2 * D - l)
        - 2956 * c(2 * D)
        - 570 * c(2 * l)
        + 246 * c(2 * l - 2 * D)
        - 205 * c(lp - 2 * D)
        - 171 * c(l + 2 * D)
        - 152 * c(l + lp - 2 * D)
    ) * _KM
    return _ecliptic_to_equator(lon, lat, r)


class AnalyticSunMoon(AbstractEphemeris):
    r"""Low-precision geocentric Sun and Moon from analytic series (no data files, no extra).

    Targets `"sun"`, `"moon"` and `"earth"` (the zero vector), centred on the Earth. The series are
    Montenbruck & Gill's (`sun_position_analytic`, `moon_position_analytic`); the time argument is
    TDB (TT to 2 ms, which these series cannot resolve).

    **Accuracy** against DE421, measured over 2000-2050 at 2000 random times
    (`tests/effectors/astro/test_ephemeris.py::test_analytic_sun_moon_accuracy`): Sun direction within 0.02 deg
    (max) and distance within 0.02 %; Moon direction within 0.3 deg and distance within 0.5 %
    (about 2000 km). Good enough for third-body perturbations at 1e-3 relative and for shadow
    entry times to about 10 s in low orbit; use `DE421Ephemeris` for anything finer.

    **Reference:** Montenbruck, O., Gill, E., *Satellite Orbits*, Springer, 2000, sec. 3.3.2
    (eqs. 3.43-3.47).
    """

    center: str = eqx.field(static=True)

    def __init__(self, *, center: str = "earth"):
        center = _target_name("AnalyticSunMoon", "center", center)
        if center != "earth":
            raise ValueError(f"AnalyticSunMoon: `center` must be 'earth'; got {center!r}.")
        self.center = center

    def position(self, target, t):
        name = _target_name("AnalyticSunMoon", "target", target)
        t = jnp.asarray(t, dtype=float)
        if name == "sun":
            return sun_position_analytic(t)
        if name == "moon":
            return moon_position_analytic(t)
        if name == "earth":
            return jnp.zeros(3) * t
        raise ValueError(
            f"AnalyticSunMoon.position: `target` must be 'sun', 'moon' or 'earth'; got {name!r}."
        )
