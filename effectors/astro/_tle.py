r"""Two-line element sets: parsing (host-side) into SGP4's mean elements.

The format is NORAD's (CelesTrak, "NORAD Two-Line Element Set Format"; Hoots & Roehrich 1980,
Spacetrack Report #3, appendix), columns counted from 1:

| line 1 | columns | | line 2 | columns |
|---|---|---|---|---|
| line number `1` | 1 | | line number `2` | 1 |
| catalogue number (alpha-5 allowed) | 3-7 | | catalogue number | 3-7 |
| classification | 8 | | inclination [deg] | 9-16 |
| international designator | 10-17 | | right ascension of the node [deg] | 18-25 |
| epoch year (2 digits) | 19-20 | | eccentricity (implied leading `0.`) | 27-33 |
| epoch day of year, fractional | 21-32 | | argument of perigee [deg] | 35-42 |
| $\dot n/2$ [rev/d^2] | 34-43 | | mean anomaly [deg] | 44-51 |
| $\ddot n/6$ [rev/d^3] (implied decimal, exponent) | 45-52 | | mean motion [rev/d] | 53-63 |
| $B^*$ [1/Earth radii] (implied decimal, exponent) | 54-61 | | revolution number at epoch | 64-68 |
| ephemeris type | 63 | | checksum | 69 |
| element set number | 65-68 | | | |
| checksum | 69 | | | |

The checksum (column 69) is the sum of the digits of columns 1-68, a minus sign counting 1, modulo
10. Implied-decimal fields read `±MMMMM±E` as $\pm 0.MMMMM \times 10^{\pm E}$. Two-digit epoch years
57-99 are 1957-1999 and 00-56 are 2000-2056 (the catalogue began in 1957). The epoch is UTC.

Conversions to SGP4's units follow python-sgp4 (so that both read a TLE alike): mean motion
[rev/d] times $2\pi/1440$ [rad/min]; $\dot n/2$ divided by $1440^2/2\pi$ [rad/min^2]; $\ddot n/6$
divided by $1440^3/2\pi$ [rad/min^3]; angles in radians; the epoch as the Julian date of the day
plus the day fraction.
"""

import math

import numpy as np
from jaxtyping import Array

from ._sgp4 import SGP4_ERRORS, SGP4Elements, SGP4Result, sgp4
from ._teme import teme_to_gcrs
from ._time import Epoch


_JD_1950 = 2433281.5  # [d] 1949-12-31 00:00 UT: SGP4's epoch origin
_XPDOTP = 1440.0 / (2.0 * math.pi)  # [rev/d per rad/min]
_DEG = math.pi / 180.0
_ALPHA5 = "ABCDEFGHJKLMNPQRSTUVWXYZ"  # alpha-5 leading letters (I and O omitted): 10..33


def tle_checksum(line: str) -> int:
    """The checksum of a TLE line: the digits of columns 1-68 summed, `-` counting 1, modulo 10."""
    return sum(int(c) if c.isdigit() else (1 if c == "-" else 0) for c in line[:68]) % 10


def _fail(lineno, name, cols, text, expected):
    raise ValueError(f"TLE: line {lineno}, {name} (columns {cols}): {expected}; got {text!r}.")


def _text(line, lineno, name, c0, c1):
    """Columns c0..c1 (1-based, inclusive) of a line (lines are checked to hold 68 columns)."""
    return line[c0 - 1 : c1]


def _float(line, lineno, name, c0, c1, *, lo=None, hi=None, unit=""):
    text = _text(line, lineno, name, c0, c1)
    s = text.strip()
    try:
        if not s or " " in s:
            raise ValueError
        value = float(s)
    except ValueError:
        _fail(lineno, name, f"{c0}-{c1}", text, f"expected a decimal number{unit}")
    if (
        not math.isfinite(value)
        or (lo is not None and value < lo)
        or (hi is not None and value > hi)
    ):
        _fail(lineno, name, f"{c0}-{c1}", text, f"expected a value in [{lo}, {hi}]{unit}")
    return value


def _int(line, lineno, name, c0, c1, *, blank=None):
    text = _text(line, lineno, name, c0, c1)
    s = text.strip()
    if not s and blank is not None:
        return blank
    if not s.isdigit():
        _fail(lineno, name, f"{c0}-{c1}", text, "expected digits")
    return int(s)


def _implied(line, lineno, name, c0, c1):
    """An implied-decimal field `±MMMMM±E` (8 columns) = ±0.MMMMM x 10^±E."""
    text = _text(line, lineno, name, c0, c1)
    s = text.strip()
    if not s:
        return 0.0
    sign = -1.0 if s[0] == "-" else 1.0
    body = s[1:] if s[0] in "+-" else s
    ok = len(body) >= 3 and body[-2] in "+-" and body[-1].isdigit() and body[:-2].isdigit()
    if not ok:
        _fail(
            lineno, name, f"{c0}-{c1}", text,
            "expected an implied-decimal field such as ' 12345-4' (= 0.12345e-4)",
        )  # fmt: skip
    mantissa = float("0." + body[:-2])
    exponent = int(body[-2:])
    return sign * mantissa * 10.0**exponent


def _satnum(text, lineno):
    s = text.strip()
    if len(s) == 5 and s[0] in _ALPHA5 and s[1:].isdigit():
        return (_ALPHA5.index(s[0]) + 10) * 10000 + int(s[1:])
    if s.isdigit():
        return int(s)
    _fail(lineno, "catalogue number", "3-7", text, "expected digits or an alpha-5 number (A0000)")


def _jd_of_day(year: int, doy: int) -> float:
    """Julian date of 00:00 UTC of day-of-year `doy` of `year` (day 1 = January 1)."""
    y = year - 1
    return 1721425.5 + 365 * y + y // 4 - y // 100 + y // 400 + (doy - 1)


class TLE:
    r"""A two-line element set, parsed on the host (see the module documentation for the format).

    **Arguments:**

    - `line1`, `line2`: the two lines (trailing text after column 69 is ignored).
    - `name`: optional satellite name (line 0 of the three-line format).
    - `checksum`: verify each line's checksum (column 69); default True. The error names the line
      and gives the expected and the found digit.

    Malformed input raises `ValueError` naming the line, the field, its columns and the text.

    **Attributes:** `satnum` (int; alpha-5 numbers decoded), `classification`, `intldesg`,
    `epoch_year` (4 digits), `epoch_day` (day of year, 1.0 = January 1 00:00 UTC), `ndot`
    ($\dot n/2$ [rev/d^2]), `nddot` ($\ddot n/6$ [rev/d^3]), `bstar` [1/Earth radii],
    `ephemeris_type`, `element_number`, `inclination`, `raan`, `argp`, `mean_anomaly` [deg],
    `eccentricity` [-], `mean_motion` [rev/d], `rev_number`, `line1`, `line2`, `name`.

    **Methods:** `jd_epoch` (UTC Julian date as `(day, fraction)`), `epoch` (an `Epoch`),
    `elements()` (`SGP4Elements`), `propagate(t)` (`sgp4` at `t` [s] past the epoch), `state(t)`.

    !!! example
        ```python
        tle = fx.astro.TLE(line1, line2)
        out = tle.propagate(jnp.linspace(0.0, 86400.0, 97))  # r_TEME [m], v_TEME [m/s], error
        ```
    """

    def __init__(self, line1: str, line2: str, name: str | None = None, *, checksum: bool = True):
        for k, line in ((1, line1), (2, line2)):
            if not isinstance(line, str):
                raise TypeError(f"TLE: line {k} must be a str; got {type(line).__name__}.")
        l1, l2 = line1.rstrip("\r\n"), line2.rstrip("\r\n")
        for k, line in ((1, l1), (2, l2)):
            if len(line) < 68:
                raise ValueError(
                    f"TLE: line {k} has {len(line)} characters; a TLE line has 69 (68 and a "
                    f"checksum): {line!r}."
                )
            if line[0] != str(k):
                _fail(k, "line number", "1", line[0], f"expected '{k}'")
            if checksum:
                if len(line) < 69 or not line[68].isdigit():
                    _fail(k, "checksum", "69", line[68:69], "expected a digit")
                expected = tle_checksum(line)
                if int(line[68]) != expected:
                    raise ValueError(
                        f"TLE: line {k} checksum (column 69) is {line[68]}, expected {expected} "
                        f"(digits of columns 1-68 summed, '-' = 1, modulo 10): {line!r}. Pass "
                        f"checksum=False to read it anyway."
                    )
        self.line1, self.line2, self.name = l1, l2, name
        self.satnum = _satnum(l1[2:7], 1)
        n2 = _satnum(l2[2:7], 2)
        if n2 != self.satnum:
            _fail(2, "catalogue number", "3-7", l2[2:7], f"expected line 1's {l1[2:7]!r}")
        self.classification = l1[7]
        self.intldesg = l1[9:17].strip()
        yy = _int(l1, 1, "epoch year", 19, 20)
        self.epoch_year = 2000 + yy if yy < 57 else 1900 + yy
        leap = self.epoch_year % 4 == 0 and (
            self.epoch_year % 100 != 0 or self.epoch_year % 400 == 0
        )
        self.epoch_day = _float(l1, 1, "epoch day", 21, 32, lo=1.0, hi=367.0 if leap else 366.0)
        # The day and its fraction read apart from the text (the fraction exact to its digits).
        whole, _, digits = l1[20:32].strip().partition(".")
        self._day = int(whole)
        self._fraction = float("0." + digits) if digits else 0.0
        self.ndot = _float(l1, 1, "ndot/2", 34, 43, unit=" [rev/d^2]")
        self.nddot = _implied(l1, 1, "nddot/6", 45, 52)
        self.bstar = _implied(l1, 1, "BSTAR", 54, 61)
        self.ephemeris_type = l1[62].strip() or "0"
        self.element_number = _int(l1, 1, "element set number", 65, 68, blank=0)
        self.inclination = _float(l2, 2, "inclination", 9, 16, lo=0.0, hi=180.0, unit=" [deg]")
        self.raan = _float(
            l2, 2, "right ascension of the node", 18, 25, lo=0.0, hi=360.0, unit=" [deg]"
        )
        ecc = _text(l2, 2, "eccentricity", 27, 33)
        if not ecc.strip().isdigit():
            _fail(2, "eccentricity", "27-33", ecc, "expected 7 digits (implied leading '0.')")
        self.eccentricity = float("0." + ecc.strip())
        self.argp = _float(l2, 2, "argument of perigee", 35, 42, lo=0.0, hi=360.0, unit=" [deg]")
        self.mean_anomaly = _float(l2, 2, "mean anomaly", 44, 51, lo=0.0, hi=360.0, unit=" [deg]")
        self.mean_motion = _float(l2, 2, "mean motion", 53, 63, lo=0.0, unit=" [rev/d]")
        if self.mean_motion <= 0.0:
            _fail(2, "mean motion", "53-63", l2[52:63], "expected a value > 0 [rev/d]")
        self.rev_number = _int(l2, 2, "revolution number", 64, 68, blank=0)

    @property
    def jd_epoch(self) -> tuple[float, float]:
        """The epoch's UTC Julian date as (the day's 00:00, the fraction of the day) [d]."""
        return _jd_of_day(self.epoch_year, self._day), self._fraction

    @property
    def epoch(self):
        """The element epoch as an `effectors.astro.Epoch` (UTC)."""
        return Epoch(self.jd_epoch, scale="utc")

    def elements(self) -> SGP4Elements:
        """The mean elements in SGP4's units (python-sgp4's conversions)."""
        jd, frac = self.jd_epoch
        return SGP4Elements(
            epoch_days=(jd + frac) - _JD_1950,
            bstar=self.bstar,
            ndot=self.ndot / (_XPDOTP * 1440.0),
            nddot=self.nddot / (_XPDOTP * 1440.0 * 1440.0),
            ecco=self.eccentricity,
            argpo=self.argp * _DEG,
            inclo=self.inclination * _DEG,
            mo=self.mean_anomaly * _DEG,
            no_kozai=self.mean_motion / _XPDOTP,
            nodeo=self.raan * _DEG,
        )

    def propagate(self, t, **kwargs) -> SGP4Result:
        """`sgp4(self.elements(), t, **kwargs)`: TEME position [m], velocity [m/s], error at `t` [s]
        past the epoch."""
        return sgp4(self.elements(), t, **kwargs)

    def __repr__(self):
        name = f"{self.name!r}, " if self.name else ""
        return f"TLE({name}satnum={self.satnum}, epoch {self.epoch_year} day {self.epoch_day})"


def read_tles(text: str, *, checksum: bool = True) -> list[TLE]:
    """All element sets in a text (two-line or three-line format, blank lines ignored).

    A line that starts with `0 ` or is not a `1`/`2` line is a name line for the next set."""
    out, name, pending = [], None, None
    for k, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.startswith("1 ") and pending is None:
            pending = (k, line)
        elif line.startswith("2 ") and pending is not None:
            try:
                out.append(TLE(pending[1], line, name, checksum=checksum))
            except ValueError as err:
                raise ValueError(f"read_tles: lines {pending[0]}-{k}: {err}") from err
            pending, name = None, None
        elif pending is None:
            name = line[2:].strip() if line.startswith("0 ") else line.strip()
        else:
            raise ValueError(
                f"read_tles: line {k} should be line 2 of the set that starts at line "
                f"{pending[0]}; got {line!r}."
            )
    if pending is not None:
        raise ValueError(f"read_tles: the set that starts at line {pending[0]} has no line 2.")
    return out


def stack_elements(tles: "list[TLE] | tuple[TLE, ...]") -> SGP4Elements:
    """The elements of several TLEs as one batch (leading axis), for `sgp4` over satellites."""
    els = [t.elements() for t in tles]
    fields = (
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
    return SGP4Elements(*(np.stack([np.asarray(getattr(e, f)) for e in els]) for f in fields))


def tle_state(tle: TLE, epoch: Epoch, **kwargs: str) -> tuple[Array, Array]:
    r"""The GCRS position [m] and velocity [m/s] of a TLE's satellite at `epoch` (an
    `effectors.astro.Epoch`): SGP4 in TEME at the elapsed time since the element epoch (from the
    two-part TT dates, exact to the microsecond), then `teme_to_gcrs`. The initial state of a run
    in the GCRS (jaxsim's inertial frame $\mathcal N$ around the Earth):

    ```python
    sc.init_state(*fx.astro.tle_state(tle, epoch))
    ```

    `kwargs` go to `sgp4` (`gravity`, `opsmode`). Raises `ValueError` naming SGP4's error code when
    the elements give no valid state at `epoch` (decayed, eccentricity out of range, ...).
    """
    if not isinstance(tle, TLE):
        raise TypeError(f"tle_state: `tle` must be a TLE; got {type(tle).__name__}.")
    if not hasattr(epoch, "to_astropy"):
        raise TypeError(f"tle_state: `epoch` must be an Epoch; got {epoch!r}.")
    dt = float((epoch.to_astropy().tt - tle.epoch.to_astropy().tt).sec)
    out = sgp4(tle.elements(), dt, **kwargs)
    code = int(out.error)
    if code != 0:
        raise ValueError(
            f"tle_state: SGP4 gives error {code} ({SGP4_ERRORS[code]}) for satellite "
            f"{tle.satnum} at {epoch.iso}Z, {dt / 86400.0:.3f} d from its element epoch."
        )
    return teme_to_gcrs(out.r_TEME, out.v_TEME, epoch)
