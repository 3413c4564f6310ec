"""Space weather from CelesTrak's SW-All.csv format (tests/data/space_weather_2000.csv): the model's
inputs against pymsis' reader of the same file and hand-read rows, the span, errors, constants."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
from effectors._environment._space_weather import _day_number
from tests.helpers import DATA


FILE = DATA / "space_weather_2000.csv"


def _at(sw, iso):
    day, sec = _day_number("test", "date", iso)
    f107, f107a, ap = sw.indices(day, sec)
    return float(f107), float(f107a), np.asarray(ap)


def test_indices_match_pymsis_reading_the_same_file():
    pytest.importorskip("pymsis")
    from pymsis import utils

    utils.use_space_weather_file(FILE)  # pymsis' global choice (no default file offline)
    sw = fx.SpaceWeather.from_csv(FILE, "2000-07-10", "2000-07-20")
    dates = np.arange(np.datetime64("2000-07-10T00:00"), np.datetime64("2000-07-20T23:59"),
                      np.timedelta64(97, "m"))  # fmt: skip
    f107, f107a, ap = utils.get_f107_ap(dates)
    days, secs = np.array([_day_number("test", "date", str(d)) for d in dates]).T
    mine = jax.vmap(sw.indices)(jnp.asarray(days), jnp.asarray(secs))
    np.testing.assert_array_equal(np.asarray(mine[0]), f107)
    np.testing.assert_array_equal(np.asarray(mine[1]), f107a)
    np.testing.assert_array_equal(np.asarray(mine[2]), ap)


def test_indices_from_the_rows_at_a_storm():
    """2000-07-16 01:00 UTC: rows 2000-07-13..16 of the file (AP1..AP8, AP_AVG, F10.7_OBS,
    F10.7_OBS_CENTER81)."""
    sw = fx.SpaceWeather.from_csv(FILE, "2000-07-15", "2000-07-16")
    f107, f107a, ap = _at(sw, "2000-07-16T01:00:00Z")
    assert (f107, f107a) == (213.1, 185.4)  # F10.7_OBS of 07-15, CENTER81 of 07-16
    # daily Ap of 07-16; its AP1; 07-15's AP8, AP7, AP6; means of 07-15 AP5..AP1 + 07-14 AP8..AP6
    # (12-33 h before) and of 07-14 AP5..AP1 + 07-13 AP8..AP6 (36-57 h before)
    expected = [50.0, 179.0, 300.0, 400.0, 300.0,
                (207 + 32 + 39 + 22 + 15 + 39 + 111 + 154) / 8, (27 + 27 + 18 + 15 + 15 + 15 + 12 + 94) / 8]  # fmt: skip
    np.testing.assert_allclose(ap, expected, rtol=1e-15)


def test_span_and_errors_name_the_date_and_the_file_span():
    sw = fx.SpaceWeather.from_csv(FILE, "2000-03-01T12:00:00Z", "2000-03-05")
    assert (sw.first_day, sw.last_day) == ("2000-03-01", "2000-03-05")
    assert bool(sw.covers(*_day_number("t", "d", "2000-03-05T23:59:59")))
    assert not bool(sw.covers(*_day_number("t", "d", "2000-03-06T00:00:01")))
    assert not bool(sw.covers(*_day_number("t", "d", "2000-02-29T23:00:00")))
    with pytest.raises(ValueError, match=r"1999-12-29 \(the 3 days of Ap history before `start`\) "
                       r"is outside the file's span 2000-01-01 to 2040-12-01"):  # fmt: skip
        fx.SpaceWeather.from_csv(FILE, "2000-01-01", "2000-01-05")
    with pytest.raises(ValueError, match=r"2041-01-01 \(`end`\) is outside the file's span "
                       r"2000-01-01 to 2040-12-01"):  # fmt: skip
        fx.SpaceWeather.from_csv(FILE, "2040-11-01", "2041-01-01")
    # the file jumps from 2001-01-01 to 2040-12-01 (monthly predictions): a missing day, and the
    # 2001-01-01 row has no Ap values
    with pytest.raises(ValueError, match=r"2001-01-01 has no `AP1` value"):
        fx.SpaceWeather.from_csv(FILE, "2000-12-30", "2001-01-01")
    with pytest.raises(ValueError, match=r"2001-01-02 is missing from"):
        fx.SpaceWeather.from_csv(FILE, "2000-12-30", "2001-01-02")
    with pytest.raises(ValueError, match=r"`end` \(2000-03-01\) must not be before `start`"):
        fx.SpaceWeather.from_csv(FILE, "2000-03-02", "2000-03-01")
    with pytest.raises(FileNotFoundError, match="no space-weather file"):
        fx.SpaceWeather.from_csv(DATA / "missing.csv", "2000-03-02")


def test_not_the_celestrak_format_is_refused(tmp_path):
    bad = tmp_path / "sw.csv"
    bad.write_text("DATE,F10.7\n2000-01-01,150\n")
    with pytest.raises(ValueError, match=r"not in CelesTrak's SW-All.csv format: no columns"):
        fx.SpaceWeather.from_csv(bad, "2000-01-05")


def test_constant_space_weather_gives_the_constant_inputs():
    sw = fx.SpaceWeather.constant(f107=120.0, f107a=130.0, ap=9.0)
    f107, f107a, ap = sw.indices(11000.0, 300.0)
    assert (float(f107), float(f107a)) == (120.0, 130.0)
    np.testing.assert_array_equal(np.asarray(ap), np.full(7, 9.0))
    assert fx.SpaceWeather.constant(100.0).f107a[0] == 100.0
    atm = fx.NRLMSISE00Atmosphere(fx.astro.Epoch("2031-02-01T00:00:00Z"), sw)
    assert atm.time_span_checks(0.0, 1e9) == []
    with pytest.raises(ValueError, match=r"SpaceWeather.constant: `ap` must be a number >= 0"):
        fx.SpaceWeather.constant(ap=-1.0)
