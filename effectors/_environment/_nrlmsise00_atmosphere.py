r"""NRLMSISE-00 along a run: the model at the spacecraft's geodetic position, UTC date and space
weather, for `Drag` (`density_at(t, r_N)`).

The position $\mathbf r_N$ (planet-centred, $\mathcal N$) is turned into the Earth-fixed frame by
`effectors.astro.EarthRotation` and into geodetic latitude, longitude and height above the
ellipsoid of the body (WGS84 for `EARTH`) by `effectors.astro.geodetic` (Heikkinen's closed form).

**Reference:** Picone et al. 2002 (the model).
"""

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from jaxsim.validation import is_concrete, spans_checked

from ..astro._bodies import EARTH, Body
from ..astro._rotation import EarthRotation
from ..astro._teme import geodetic
from ..astro._time import Epoch
from ._nrlmsise00 import ALTITUDE_MIN, NRLMSISE00Output, nrlmsise00
from ._space_weather import SpaceWeather, _day_number, _iso_day


_DAY = 86400.0  # [s]
# Day numbers (days since 1970-01-01) of 1 January of 1900..2200, for the day of the year.
_YEAR0 = 1900
_JAN1 = np.array(
    [np.datetime64(f"{y}-01-01", "D").astype(np.int64) for y in range(_YEAR0, 2201)], dtype=float
)


class NRLMSISE00Atmosphere(eqx.Module):
    r"""The NRLMSISE-00 thermosphere along a run (see the module docs and `nrlmsise00`).

    **Arguments:**

    - `epoch`: the run's epoch, an `effectors.astro.Epoch` (its UTC date; the run's time $t$ [s]
      is added to it as UTC seconds).
    - `space_weather`: a `SpaceWeather` (`SpaceWeather.from_csv(path, start, end)` covering the
      run, or `SpaceWeather.constant(f107, f107a, ap)`).
    - `ap_mode`: `"history"` (default: the 3-hourly Ap history, the model's switch 9 = -1) or
      `"daily"` (daily Ap only, switch 9 = 1).
    - `dut1`: UT1 - UTC [s] for the Earth's rotation (default: `EarthRotation`'s).
    - `body`: the ellipsoid of the geodetic coordinates (default `EARTH`, WGS84).

    **Methods:** `density_at(t, r_N)` [kg/m^3], the total mass density including anomalous
    oxygen (the model's `gtd7d` density, recommended for drag); `evaluate(t, r_N)` every output
    (an `NRLMSISE00Output`); `inputs(t, r_N)` the model's inputs (day of year, UT seconds,
    altitude [km], latitude and longitude [deg], F10.7, F10.7A, Ap (7,)).

    **Time span:** a run's times must stay inside the space weather's span: `simulate` refuses a
    run that leaves it (the message names the dates); elsewhere an evaluation outside it is an
    error (outside `simulate`) and never an extrapolation.

    **Assumptions and limitations:** UTC advances with the run's TDB seconds (rate difference
    < 2e-9, leap seconds inside a run ignored); the day of the year is the integer UTC day (the
    model's convention: a 1e-6 relative step in density at midnight); the Earth-fixed frame as
    accurate as `EarthRotation` (25 arcsec); altitudes from 72.5 km (below it, the model's lower
    atmosphere is not ported: an error at evaluation, NaN inside `simulate`'s programs).
    """

    space_weather: SpaceWeather
    rotation: EarthRotation
    radius: float = eqx.field(static=True)  # [m] of the ellipsoid
    flattening: float = eqx.field(static=True)
    day0: int = eqx.field(static=True)  # UTC day number (days since 1970-01-01) of the epoch
    sec0: float = eqx.field(static=True)  # UTC seconds of the day at the epoch
    ap_mode: str = eqx.field(static=True)

    def __init__(
        self,
        epoch: Epoch,
        space_weather: SpaceWeather,
        *,
        ap_mode: str = "history",
        dut1: float | None = None,
        body: Body = EARTH,
    ):
        cls = "NRLMSISE00Atmosphere"
        if not (hasattr(epoch, "iso") and hasattr(epoch, "jd_utc")):
            raise TypeError(f"{cls}: `epoch` must be an effectors.astro.Epoch; got {epoch!r}.")
        if not isinstance(space_weather, SpaceWeather):
            raise TypeError(
                f"{cls}: `space_weather` must be a SpaceWeather (SpaceWeather.from_csv or "
                f"SpaceWeather.constant); got {type(space_weather).__name__}."
            )
        if ap_mode not in ("history", "daily"):
            raise ValueError(f'{cls}: `ap_mode` must be "history" or "daily"; got {ap_mode!r}.')
        if not isinstance(body, Body):
            raise TypeError(f"{cls}: `body` must be an effectors.astro.Body; got {body!r}.")
        self.day0, self.sec0 = _day_number(cls, "epoch", epoch)
        self.space_weather = space_weather
        self.rotation = EarthRotation(epoch, dut1=dut1)
        self.radius = float(body.radius_equatorial)
        self.flattening = float(body.flattening)
        self.ap_mode = ap_mode

    def _utc(self, t):
        """(UTC day number, seconds of the day) at run time t [s]."""
        s = self.sec0 + jnp.asarray(t, dtype=float)
        whole = jnp.floor(s / _DAY)
        return self.day0 + whole, s - whole * _DAY

    def time_span_checks(self, t0, t1) -> list:
        """`[(ok, message)]`: the run's times `[t0, t1]` [s] inside the space weather's span
        (checked by `simulate` before the run)."""
        sw = self.space_weather
        if sw.is_constant:
            return []
        (d_lo, _), (d_hi, s_hi) = sw.span()
        lo = (d_lo - self.day0) * _DAY - self.sec0  # [s] run time of the span's start
        hi = (d_hi - self.day0) * _DAY + s_hi - self.sec0
        values = (t0, t1)
        if all(is_concrete(v) for v in values):
            a, b = (np.asarray(v, dtype=float) for v in values)
            first, last = np.minimum(a, b), np.maximum(a, b)
            ok = (first >= lo) & (last <= hi)
            need = (
                f"{_iso_at(self.day0, self.sec0, np.min(first))} to "
                f"{_iso_at(self.day0, self.sec0, np.max(last))}"
            )
        else:
            ok = (jnp.minimum(t0, t1) >= lo) & (jnp.maximum(t0, t1) <= hi)
            need = "the run's times (traced)"
        message = (
            f"simulate: NRLMSISE00Atmosphere: the run needs space weather for {need} (UTC); "
            f"the SpaceWeather covers {sw.first_day} 00:00 to {sw.last_day} 24:00 (from "
            f"{sw.source!r}, with 3 days of Ap history before its start)."
        )
        return [(ok, message)]

    def inputs(self, t, r_N):
        """The model's inputs at run time `t` [s] and position `r_N` [m]: a dict with `doy`,
        `sec` [s], `alt` [km], `lat`, `lon` [deg], `f107`, `f107a` [sfu], `ap` (7,) and `covered`
        (the instant inside the space weather's span)."""
        day, sec = self._utc(t)
        year = jnp.maximum(jnp.sum(day >= _JAN1) - 1, 0)  # no search loop (compile time)
        doy = day - jnp.asarray(_JAN1)[year] + 1.0
        r_P = self.rotation(t) @ jnp.asarray(r_N, dtype=float)
        lat, lon, h = geodetic(r_P, a=self.radius, f=self.flattening)
        f107, f107a, ap = self.space_weather.indices(day, sec)
        return {
            "doy": doy,
            "sec": sec,
            "alt": h / 1000.0,
            "lat": lat * (180.0 / math.pi),
            "lon": lon * (180.0 / math.pi),
            "f107": f107,
            "f107a": f107a,
            "ap": ap,
            "covered": self.space_weather.covers(day, sec),
        }

    def evaluate(self, t, r_N) -> NRLMSISE00Output:
        """Every output of the model at run time `t` [s] and position `r_N` [m] (planet-centred)."""
        x = self.inputs(t, r_N)
        valid = x["covered"] & (x["alt"] >= ALTITUDE_MIN)
        alt = x["alt"]
        if not spans_checked():
            sw = self.space_weather
            message = (
                f"NRLMSISE00Atmosphere: a point outside the model's domain: altitude below "
                f"{ALTITUDE_MIN} km, or a UTC date outside the space weather's span "
                f"{sw.first_day} 00:00 to {sw.last_day} 24:00 ({sw.source!r})."
            )
            alt = eqx.error_if(alt, ~valid, message)
        safe_alt = jnp.where(valid, alt, 400.0)  # a finite stand-in where invalid (gradient-safe)
        out = nrlmsise00(x["doy"], x["sec"], safe_alt, x["lat"], x["lon"], x["f107"], x["f107a"],
                         x["ap"], ap_mode=self.ap_mode)  # fmt: skip
        # In simulate's programs the span was checked before the run (no host callback there):
        # an invalid point is NaN, which fails the run, never an extrapolation.
        return NRLMSISE00Output(*(jnp.where(valid, v, jnp.nan) for v in out))

    def density_at(self, t, r_N):
        """Total mass density [kg/m^3] (with anomalous oxygen) at run time `t` [s] and `r_N` [m]."""
        return self.evaluate(t, r_N).rho_with_anomalous_O


def _iso_at(day0: int, sec0: float, t: float) -> str:
    s = sec0 + float(t)
    whole = math.floor(s / _DAY)
    rest = s - whole * _DAY
    hh, mm = int(rest // 3600), int(rest % 3600 // 60)
    return f"{_iso_day(day0 + whole)}T{hh:02d}:{mm:02d}"
