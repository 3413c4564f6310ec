r"""Epochs and time scales: converted once on the host, then float64 seconds inside a program.

An `Epoch` is the instant a run starts. It is built on the host from a UTC string, an astropy `Time`
or a Julian date, and converted there, once, to the scales a program needs (astropy with its bundled
leap-second and IERS tables: no network). Inside a program, time is the run's `t` [s], read as TDB
seconds past the epoch; the ephemeris argument is `epoch.tdb_seconds_past_j2000 + t` (TDB seconds past
J2000.0 = JD 2451545.0 TDB), or `epoch.tdb(t)`.

Time scales (IAU 2006 Resolution B3; USNO Circular 179, 2005; IERS Conventions 2010, ch. 10):

- UTC: civil time, with leap seconds; TAI = UTC + $\Delta AT$ (IERS Bulletin C).
- TT = TAI + 32.184 s: the geocentric coordinate time scale of clocks on the geoid.
- TDB = TT + a periodic term of about 1.66 ms amplitude (Fairhead & Bretagnon 1990, evaluated by
  ERFA's `dtdb` at the geocentre): the time argument of the JPL ephemerides.
- UT1 (Earth rotation angle): UTC + (UT1 - UTC) from the IERS tables bundled with astropy, available
  for dates those tables cover (`ut1_minus_utc`).

Treating the run's time as TDB while the spacecraft clocks keep TT is a relative rate error below
$2\times10^{-9}$ (the periodic term's slope): 2 us per day, far under any force model's error.
"""

import math
import warnings
from typing import Any

import numpy as np


TT_MINUS_TAI = 32.184  # [s] (IAU 1991 Resolution A4)
J2000_JD_TDB = 2451545.0  # [d] J2000.0, Julian date TDB (IAU 1976; the JPL ephemerides' epoch)
_DAY = 86400.0  # [s]
_SCALES = ("utc", "tai", "tt", "tdb")


def _past_end_of_day(message: str) -> bool:
    """Whether an ERFA warning says that `dtf2d` read a time past the end of its day (a second
    23:59:60 on a day without a leap second; "both of next two": that and a dubious year)."""
    return '"dtf2d"' in message and ("after end of day" in message or "both of next two" in message)


def _astropy():
    try:
        import erfa  # noqa: F401  (astropy's own dependency, pyerfa)
        from astropy.time import Time
        from astropy.utils import iers
    except ImportError as err:  # pragma: no cover (the astro extra is installed in CI)
        raise ImportError(
            "Epoch needs astropy (time scales, leap seconds): pip install 'jaxsim-spacecraft[astro]'."
        ) from err
    return Time, iers


class Epoch:
    r"""The instant a run starts, with its time scales (built on the host, once).

    **Arguments:**

    - `value`: one of
        - an ISO 8601 string, e.g. `"2025-03-20T12:00:00Z"` (a trailing `Z` means UTC; otherwise the
          string is read in `scale`, default UTC; a leap second `23:59:60` is accepted on a UTC
          day that ends with one, and refused on any other day or scale);
        - an astropy `Time` (its own scale);
        - a Julian date [d] (float, or a `(jd1, jd2)` pair whose sum is the date, for full
          precision), in `scale` (default UTC); `format="mjd"` reads a modified Julian date.
    - `scale`: `"utc"`, `"tai"`, `"tt"` or `"tdb"` for strings and dates.
    - `format`: `"jd"` (default) or `"mjd"` for numbers.

    **Attributes** (Python floats): `jd_utc`, `jd_tai`, `jd_tt`, `jd_tdb` [d];
    `tdb_seconds_past_j2000` [s] (from the two-part TDB date, rounded once to float64: 1.2e-7 s
    near 2025);
    `tt_minus_utc`, `tdb_minus_tt` [s]; `utc_extrapolated` (UTC past the leap-second table:
    no further leap seconds assumed); `ut1_minus_utc` [s] and `jd_ut1` [d] (computed on first use
    from the bundled IERS tables; an error outside them); `iso` (UTC).

    Epochs compare and hash by their TDB instant; `epoch.shift(dt)` is `dt` TDB seconds later.

    !!! example
        ```python
        epoch = fx.astro.Epoch("2025-03-20T12:00:00Z")
        t_eph = epoch.tdb(t)  # TDB seconds past J2000 of run time t, traceable
        ```
    """

    # Read-only properties over private slots (the epoch is immutable by convention).
    __slots__ = (
        "_tdb1",
        "_tdb2",
        "_jd_utc",
        "_jd_tai",
        "_jd_tt",
        "_iso",
        "_ut1_utc",
        "_tt_minus_utc_s",
        "_tdb_minus_tt_s",
        "_utc_extrapolated",
    )

    def __init__(
        self,
        value: str | float | tuple[float, float] | Any,
        *,
        scale: str | None = None,
        format: str = "jd",
    ):
        Time, iers = _astropy()
        import erfa

        # ERFA warns "dubious year" for UTC dates past its leap-second table (or before 1960):
        # recorded as `utc_extrapolated` (no further leap seconds assumed); other warnings pass on.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = _as_time(Time, value, scale, format)
            with iers.conf.set_temp("auto_download", False):
                utc, tai, tt, tdb = t.utc, t.tai, t.tt, t.tdb
                ymdhms = utc.ymdhms
                iso = utc.isot
                fd = (ymdhms.hour * 3600.0 + ymdhms.minute * 60.0 + ymdhms.second) / _DAY
                delta_at = erfa.dat(
                    int(ymdhms.year), int(ymdhms.month), int(ymdhms.day), min(fd, 1.0)
                )
        dubious = [w for w in caught if "dubious year" in str(w.message)]
        for w in caught:
            if w not in dubious:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self._utc_extrapolated = bool(dubious)
        # Keep TDB as an exact two-part date: jd1 a whole or half day, jd2 the fraction.
        tdb1, tdb2 = float(tdb.jd1), float(tdb.jd2)
        whole = math.floor(tdb1 - J2000_JD_TDB)
        self._tdb1 = J2000_JD_TDB + whole
        self._tdb2 = (tdb1 - self._tdb1) + tdb2
        self._jd_utc = float(utc.jd1) + float(utc.jd2)
        self._jd_tai = float(tai.jd1) + float(tai.jd2)
        self._jd_tt = float(tt.jd1) + float(tt.jd2)
        self._iso = iso
        self._ut1_utc = None
        # TT - UTC = 32.184 s + Delta AT of the UTC day (ERFA's leap-second table; also inside a
        # leap second, where astropy's UTC Julian dates stretch the day).
        self._tt_minus_utc_s = TT_MINUS_TAI + float(delta_at)
        self._tdb_minus_tt_s = float(((tdb.jd1 - tt.jd1) + (tdb.jd2 - tt.jd2)) * _DAY)

    @property
    def tdb_seconds_past_j2000(self) -> float:
        """TDB seconds since J2000.0 (JD 2451545.0 TDB) [s]: the ephemerides' time argument."""
        return (self._tdb1 - J2000_JD_TDB) * _DAY + self._tdb2 * _DAY

    @property
    def jd_tdb(self) -> float:
        """Julian date, TDB [d]."""
        return self._tdb1 + self._tdb2

    @property
    def jd_tt(self) -> float:
        """Julian date, TT [d]."""
        return self._jd_tt

    @property
    def jd_tai(self) -> float:
        """Julian date, TAI [d]."""
        return self._jd_tai

    @property
    def jd_utc(self) -> float:
        """Julian date, UTC [d] (astropy's convention inside a leap second)."""
        return self._jd_utc

    @property
    def iso(self) -> str:
        """The epoch as an ISO 8601 UTC string."""
        return self._iso

    @property
    def utc_extrapolated(self) -> bool:
        """True when the epoch lies outside ERFA's leap-second table (after its validity, or
        before 1960): UTC was converted assuming no further leap seconds (ERFA's "dubious year")."""
        return self._utc_extrapolated

    @property
    def tt_minus_utc(self) -> float:
        """TT - UTC [s] = 32.184 s + leap seconds (Delta AT) at the epoch."""
        return self._tt_minus_utc_s

    @property
    def tdb_minus_tt(self) -> float:
        """TDB - TT [s] at the epoch (periodic, |.| < 1.7 ms)."""
        return self._tdb_minus_tt_s

    @property
    def ut1_minus_utc(self) -> float:
        """UT1 - UTC [s] at the epoch, from the IERS tables bundled with astropy (no download).

        Raises `ValueError` for dates those tables do not cover."""
        if self._ut1_utc is None:
            Time, iers = _astropy()
            t = Time(self._tdb1, self._tdb2, format="jd", scale="tdb")
            try:
                with iers.conf.set_temp("auto_download", False), warnings.catch_warnings():
                    warnings.simplefilter("error")
                    dut1 = float(t.utc.delta_ut1_utc)
            except (iers.IERSRangeError, Warning, ValueError) as err:
                raise ValueError(
                    f"Epoch: UT1 - UTC is not available at {self._iso} from the IERS tables "
                    f"bundled with astropy ({err})."
                ) from err
            self._ut1_utc = dut1
        return self._ut1_utc

    @property
    def jd_ut1(self) -> float:
        """Julian date, UT1 [d] (see `ut1_minus_utc`)."""
        return self._jd_utc + self.ut1_minus_utc / _DAY

    def tdb(self, t):
        """TDB seconds past J2000.0 [s] at the run's time `t` [s] (TDB seconds past the epoch);
        works on traced values: `epoch.tdb_seconds_past_j2000 + t`."""
        return self.tdb_seconds_past_j2000 + t

    def shift(self, dt: float) -> "Epoch":
        """The epoch `dt` [s] of TDB later (host-side)."""
        dt = float(dt)
        if not math.isfinite(dt):
            raise ValueError(f"Epoch.shift: `dt` must be finite [s]; got {dt!r}.")
        whole = math.floor(dt / _DAY)
        return Epoch((self._tdb1 + whole, self._tdb2 + (dt - whole * _DAY) / _DAY), scale="tdb")

    def to_astropy(self, t: float = 0.0):
        """An astropy `Time` (TDB) at run time `t` [s]."""
        Time, _ = _astropy()
        return Time(self._tdb1, self._tdb2 + float(t) / _DAY, format="jd", scale="tdb")

    def __eq__(self, other):
        if not isinstance(other, Epoch):
            return NotImplemented
        return self.tdb_seconds_past_j2000 == other.tdb_seconds_past_j2000

    def __hash__(self):
        return hash(("Epoch", self.tdb_seconds_past_j2000))

    def __repr__(self):
        return f"Epoch('{self._iso}Z' UTC; TDB {self.tdb_seconds_past_j2000!r} s past J2000)"


def _as_time(Time, value, scale, format):
    cls = "Epoch"
    if scale is not None and scale not in _SCALES:
        raise ValueError(f"{cls}: `scale` must be one of {_SCALES}; got {scale!r}.")
    if format not in ("jd", "mjd"):
        raise ValueError(f"{cls}: `format` must be 'jd' or 'mjd'; got {format!r}.")
    if isinstance(value, Time):
        if scale is not None:
            raise ValueError(
                f"{cls}: `scale` applies to strings and Julian dates; an astropy Time has its own "
                f"(got scale={scale!r} with a Time in {value.scale!r})."
            )
        if value.shape != ():
            raise ValueError(f"{cls}: `value` must be a single time; got shape {value.shape}.")
        if value.scale not in _SCALES:
            value = value.tdb if value.scale == "tcb" else value.tt
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            if scale not in (None, "utc"):
                raise ValueError(
                    f"{cls}: a string ending in 'Z' is UTC; got scale={scale!r} with {value!r}."
                )
            text = text[:-1]
        try:
            # ERFA notes a second past 23:59:59 on a day that has no leap second ("time is after
            # end of day") and then reads it as the next day's midnight: refused below.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t = Time(text, format="isot" if "T" in text else None, scale=scale or "utc")
        except ValueError as err:
            raise ValueError(
                f"{cls}: `value` must be an ISO 8601 date and time such as "
                f"'2025-03-20T12:00:00Z'; got {value!r} ({err})."
            ) from err
        if any(_past_end_of_day(str(w.message)) for w in caught):
            raise ValueError(
                f"{cls}: `value` {value!r} is past the end of its day in "
                f"{(scale or 'utc').upper()}: a second past 23:59:59 (23:59:60) exists only in UTC, on "
                "a day that ends with a leap second (ERFA's leap-second table, through astropy; e.g. "
                "2016-12-31T23:59:60Z), and it is not read as the next day's midnight. Give "
                "00:00:00 of the next day, or a day with a leap second."
            )
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return t
    if isinstance(value, (tuple, list)) and len(value) == 2:
        jd1, jd2 = value
    elif isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        jd1, jd2 = value, 0.0
    else:
        raise ValueError(
            f"{cls}: `value` must be an ISO string, an astropy Time, or a Julian date (float or a "
            f"(jd1, jd2) pair) [d]; got {value!r}."
        )
    jd1, jd2 = float(jd1), float(jd2)
    if not (math.isfinite(jd1) and math.isfinite(jd2)):
        raise ValueError(f"{cls}: `value` Julian date must be finite [d]; got {value!r}.")
    return Time(jd1, jd2, format=format, scale=scale or "utc")
