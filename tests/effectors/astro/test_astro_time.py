"""Epochs and time scales (`effectors.astro.Epoch`) against published values and astropy/ERFA:
TT - UTC from the IERS Bulletin C leap-second table (across the 2016-12-31 leap second), TDB - TT
against ERFA's Fairhead-Bretagnon series and the two-term approximation, TDB seconds past J2000
against astropy, every input form agreeing, and traced use inside a program."""

import math
import warnings

import jax
import numpy as np
import pytest


astropy_time = pytest.importorskip("astropy.time", reason="Epoch needs the astro extra (astropy)")
erfa = pytest.importorskip("erfa")

from effectors import astro  # noqa: E402


Time = astropy_time.Time
# TT - UTC is 32.184 s plus an integer number of leap seconds: exact in float64 sums.
LEAP_EXACT = 1e-12  # [s]
# Our TDB seconds past J2000 and astropy's own difference of Times: the same two-part dates,
# rounded once to float64 (ulp of ~1e9 s is 1.2e-7 s).
ASTROPY_SECONDS = 3e-7  # [s]
# TDB - TT: ERFA's dtdb (the series astropy uses) at the geocentre; ours is a difference of two-part
# Julian dates, whose fractions carry 1e-16 d = 1e-11 s of round-off.
DTDB_EXACT = 3e-11  # [s]
# The two-term approximation 1.657 ms sin g + 0.014 ms sin 2g (USNO Circular 179, eq. 2.6) is
# good to ~10 us over 1980-2050; the bar leaves a margin.
DTDB_APPROX = 3e-5  # [s]
# Julian dates as single floats: ulp of 2.46e6 d is 4.7e-10 d = 40 us.
JD_FLOAT = 1e-9  # [d]

# IERS Bulletin C: Delta AT = TAI - UTC [s] from these UTC dates on.
DELTA_AT = [
    ("1972-01-01T00:00:00", 10.0),
    ("1999-01-01T00:00:00", 32.0),
    ("2006-01-01T00:00:00", 33.0),
    ("2009-01-01T00:00:00", 34.0),
    ("2012-07-01T00:00:00", 35.0),
    ("2015-07-01T00:00:00", 36.0),
    ("2017-01-01T00:00:00", 37.0),
]


def test_reexported():
    import effectors as fx

    assert fx.astro.Epoch is astro.Epoch
    assert astro.J2000_JD_TDB == 2451545.0


@pytest.mark.parametrize("date, delta_at", DELTA_AT)
def test_tt_minus_utc_is_the_leap_second_table(date, delta_at):
    e = astro.Epoch(date + "Z")
    assert abs(e.tt_minus_utc - (32.184 + delta_at)) < LEAP_EXACT
    before = astro.Epoch(Time(date, scale="utc") - 1.0 * astropy_time.TimeDelta(1.0, format="sec"))
    if date != "1972-01-01T00:00:00":
        assert abs(before.tt_minus_utc - (32.184 + delta_at - 1.0)) < LEAP_EXACT


def test_across_the_2016_leap_second():
    """23:59:59, 23:59:60 and 00:00:00 UTC are 1 s apart in TDB (the leap second is a real second),
    and TT - UTC is 68.184 s through 23:59:60.5, 69.184 s at 00:00:00."""
    t59 = astro.Epoch("2016-12-31T23:59:59Z")
    t60 = astro.Epoch("2016-12-31T23:59:60Z")
    t60h = astro.Epoch("2016-12-31T23:59:60.5Z")
    t00 = astro.Epoch("2017-01-01T00:00:00Z")
    s = [e.tdb_seconds_past_j2000 for e in (t59, t60, t60h, t00)]
    np.testing.assert_allclose(np.diff(s), [1.0, 0.5, 0.5], atol=ASTROPY_SECONDS)
    assert [e.tt_minus_utc for e in (t59, t60, t60h, t00)] == [68.184, 68.184, 68.184, 69.184]
    # TDB - UTC at 2017-01-01T00:00:00: 69.184 s + TDB - TT (astropy, independently).
    t = Time("2017-01-01T00:00:00", scale="utc")
    tdb_minus_utc = (t.tdb.jd1 - t.utc.jd1 + (t.tdb.jd2 - t.utc.jd2)) * 86400.0
    assert abs(t00.tt_minus_utc + t00.tdb_minus_tt - tdb_minus_utc) < ASTROPY_SECONDS


@pytest.mark.parametrize(
    "iso",
    [
        "2000-01-01T11:58:55.816",
        "1995-06-01T00:00:00",
        "2025-03-20T12:00:00",
        "2040-11-05T06:30:00",
    ],
)
def test_tdb_seconds_past_j2000_match_astropy(iso):
    e = astro.Epoch(iso + "Z")
    # 2040 is past ERFA's leap-second table: astropy warns "dubious year"; Epoch records it.
    assert e.utc_extrapolated == iso.startswith("2040")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*dubious year")
        t = Time(iso, scale="utc")
        tdb, tt, tai, utc = t.tdb, t.tt, t.tai, t.utc
    j2000 = Time(2451545.0, format="jd", scale="tdb")
    assert abs(e.tdb_seconds_past_j2000 - (tdb - j2000).sec) < ASTROPY_SECONDS
    assert abs(e.jd_tdb - tdb.jd) < JD_FLOAT
    assert abs(e.jd_tt - tt.jd) < JD_FLOAT
    assert abs(e.jd_tai - tai.jd) < JD_FLOAT
    assert abs(e.jd_utc - utc.jd) < JD_FLOAT
    # TDB - TT: ERFA's series (geocentre) and the two-term approximation.
    dtdb = erfa.dtdb(tt.jd1, tt.jd2, 0.0, 0.0, 0.0, 0.0)
    assert abs(e.tdb_minus_tt - dtdb) < DTDB_EXACT
    g = math.radians(357.53 + 0.98560028 * (tt.jd - 2451545.0))
    assert abs(e.tdb_minus_tt - (1.657e-3 * math.sin(g) + 1.4e-5 * math.sin(2 * g))) < DTDB_APPROX


def test_j2000_is_zero_and_its_utc():
    assert astro.Epoch(2451545.0, scale="tdb").tdb_seconds_past_j2000 == 0.0
    # J2000.0 is 2000-01-01T12:00:00 TT = 11:58:55.816 UTC (TAI - UTC = 32 s); TDB - TT ~ -7e-5 s.
    e = astro.Epoch("2000-01-01T11:58:55.816Z")
    assert abs(e.tdb_seconds_past_j2000 - e.tdb_minus_tt) < 1e-6
    assert abs(e.tt_minus_utc - 64.184) < LEAP_EXACT


def test_every_input_form_agrees():
    ref = astro.Epoch("2025-03-20T12:00:00Z")
    t = Time("2025-03-20T12:00:00", scale="utc")
    forms = [
        astro.Epoch("2025-03-20T12:00:00", scale="utc"),
        astro.Epoch(" 2025-03-20T12:00:00z "),
        astro.Epoch(t),
        astro.Epoch(t.tt),
        astro.Epoch(t.tdb),
        astro.Epoch((t.tt.jd1, t.tt.jd2), scale="tt"),
        astro.Epoch((t.tdb.jd1, t.tdb.jd2), scale="tdb"),
        astro.Epoch(t.mjd, format="mjd"),
        astro.Epoch(t.jd),
        astro.Epoch("2025-03-20 12:01:09.184", scale="tt"),
    ]
    for k, e in enumerate(forms):
        # Single-float Julian dates (forms 7, 8) carry the 40 us float resolution of a date.
        bar = 1e-4 if k in (7, 8) else ASTROPY_SECONDS
        assert abs(e.tdb_seconds_past_j2000 - ref.tdb_seconds_past_j2000) < bar, k
    assert forms[2] == ref and hash(forms[2]) == hash(ref)
    assert ref.iso == "2025-03-20T12:00:00.000"


def test_shift_and_astropy_round_trip():
    e = astro.Epoch("2025-03-20T12:00:00Z")
    later = e.shift(365.25 * 86400.0)
    assert abs(later.tdb_seconds_past_j2000 - e.tdb_seconds_past_j2000 - 365.25 * 86400.0) < 1e-6
    assert later.iso.startswith("2026-03-20T18:00:00")
    t = e.to_astropy(3600.0)
    assert abs((t - e.to_astropy()).sec - 3600.0) < 1e-6
    assert astro.Epoch(t) == e.shift(3600.0)


def test_ut1_from_bundled_tables():
    e = astro.Epoch("2025-03-20T12:00:00Z")
    from astropy.utils import iers

    with iers.conf.set_temp("auto_download", False):
        want = float(Time("2025-03-20T12:00:00", scale="utc").delta_ut1_utc)
    assert e.ut1_minus_utc == want
    assert abs(e.ut1_minus_utc) < 0.9  # the IERS keeps |UT1 - UTC| < 0.9 s
    assert abs(e.jd_ut1 - (e.jd_utc + want / 86400.0)) < JD_FLOAT


def test_traced_use_inside_a_program():
    e = astro.Epoch("2025-03-20T12:00:00Z")
    f = jax.jit(lambda t: e.tdb(t))
    assert float(f(10.0)) == e.tdb_seconds_past_j2000 + 10.0
    assert float(jax.grad(e.tdb)(3.0)) == 1.0


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (("not a date",), {}, r"Epoch: `value` must be an ISO 8601 date and time"),
        (("2025-03-20T12:00:00Z",), {"scale": "tt"}, r"Epoch: a string ending in 'Z' is UTC"),
        ((2460755.0,), {"scale": "gps"}, r"Epoch: `scale` must be one of"),
        ((2460755.0,), {"format": "unix"}, r"Epoch: `format` must be 'jd' or 'mjd'"),
        ((float("nan"),), {}, r"Epoch: `value` Julian date must be finite \[d\]"),
        ((True,), {}, r"Epoch: `value` must be an ISO string, an astropy Time, or a Julian date"),
        ((None,), {}, r"Epoch: `value` must be an ISO string"),
    ],
)
def test_bad_input_refused_by_name(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        astro.Epoch(*args, **kwargs)


def test_bad_time_objects_refused_by_name():
    with pytest.raises(ValueError, match=r"Epoch: `scale` applies to strings and Julian dates"):
        astro.Epoch(Time("2025-01-01T00:00:00", scale="utc"), scale="tt")
    with pytest.raises(ValueError, match=r"Epoch: `value` must be a single time; got shape \(2,\)"):
        astro.Epoch(Time(["2025-01-01T00:00:00", "2025-01-02T00:00:00"], scale="utc"))
    with pytest.raises(ValueError, match=r"Epoch.shift: `dt` must be finite \[s\]"):
        astro.Epoch("2025-01-01T00:00:00Z").shift(float("inf"))


def test_ut1_outside_the_tables_refused_by_name():
    e = astro.Epoch("2040-11-05T06:30:00Z")
    with pytest.raises(ValueError, match=r"Epoch: UT1 - UTC is not available at 2040-11-05"):
        e.ut1_minus_utc
