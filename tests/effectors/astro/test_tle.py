"""Two-line element sets (`effectors.astro.TLE`): fields, implied decimals, epoch years across
1957-2056, checksums and malformed input, against values read by hand from the published lines
(the Vallado et al. 2006 verification set's first case, the Spacetrack Report #3 test set)."""

import math

import numpy as np
import pytest

from effectors import astro


# Vanguard 1 (catalogue 5), the first case of Vallado et al. 2006's verification set.
L1 = "1 00005U 58002B   00179.78495062  .00000023  00000-0  28098-4 0  4753"
L2 = "2 00005  34.2682 348.7242 1859667 331.7664  19.3264 10.82419157413667"
# Spacetrack Report #3's SGP4 test case (catalogue 88888): nddot and BSTAR with exponents.
S1 = "1 88888U          80275.98708465  .00073094  13844-3  66816-4 0    87"
S2 = "2 88888  72.8435 115.9689 0086731  52.6988 110.5714 16.05824518  1058"
# Unit conversions: a few float64 roundings of the same product [relative].
ROUNDOFF = 1e-15


def _with_checksum(line: str) -> str:
    return line[:68] + str(astro.tle_checksum(line))


def test_fields_and_units():
    tle = astro.TLE(L1, L2)
    assert tle.satnum == 5 and tle.classification == "U" and tle.intldesg == "58002B"
    assert tle.epoch_year == 2000 and tle.epoch_day == 179.78495062
    assert tle.ndot == 0.00000023 and tle.nddot == 0.0
    assert tle.bstar == pytest.approx(0.28098e-4, rel=ROUNDOFF)
    assert (tle.inclination, tle.raan, tle.argp, tle.mean_anomaly) == (
        34.2682, 348.7242, 331.7664, 19.3264,
    )  # fmt: skip
    assert tle.eccentricity == 0.1859667 and tle.mean_motion == 10.82419157
    assert tle.rev_number == 41366 and tle.element_number == 475
    el = tle.elements()
    assert float(el.no_kozai) == pytest.approx(10.82419157 * 2 * math.pi / 1440, rel=ROUNDOFF)
    assert float(el.inclo) == pytest.approx(math.radians(34.2682), rel=ROUNDOFF)
    # 2000 day 179.78495062 = 2000-06-27 18:50:19.733568 UTC; JD of 2000-06-27 00:00 = 2451722.5.
    jd, frac = tle.jd_epoch
    assert jd == 2451722.5 and abs(frac - 0.78495062) <= 1e-14
    assert float(el.epoch_days) == 2451722.5 + 0.78495062 - 2433281.5


def test_implied_decimal_exponents():
    tle = astro.TLE(S1, S2)
    assert tle.nddot == pytest.approx(0.13844e-3, rel=ROUNDOFF)
    assert tle.bstar == pytest.approx(0.66816e-4, rel=ROUNDOFF)
    neg = _with_checksum(S1[:44] + "-12345-5" + S1[52:53] + "-11606-4" + S1[61:])
    tle = astro.TLE(neg, S2)
    assert tle.nddot == pytest.approx(-0.12345e-5, rel=ROUNDOFF)
    assert tle.bstar == pytest.approx(-0.11606e-4, rel=ROUNDOFF)
    plus = _with_checksum(S1[:53] + "+66816+1" + S1[61:])
    assert astro.TLE(plus, S2).bstar == pytest.approx(6.6816, rel=ROUNDOFF)


@pytest.mark.parametrize(
    "yy, year", [("57", 1957), ("99", 1999), ("00", 2000), ("25", 2025), ("56", 2056)]
)
def test_epoch_years_1957_to_2056(yy, year):
    line = _with_checksum(L1[:18] + yy + L1[20:])
    tle = astro.TLE(line, L2)
    assert tle.epoch_year == year
    jd, _ = tle.jd_epoch
    # JD of January 1 of `year` (Meeus, Astronomical Algorithms, ch. 7) plus day 179 - 1.
    y = year - 1
    a = y // 100
    jan1 = (
        math.floor(365.25 * (y + 4716)) + math.floor(30.6001 * 14) + 1 + (2 - a + a // 4) - 1524.5
    )
    assert jd == jan1 + 178


def test_checksum_error_names_line_and_digits():
    bad = L1[:68] + "0"
    with pytest.raises(ValueError, match=r"line 1 checksum \(column 69\) is 0, expected 3"):
        astro.TLE(bad, L2)
    assert astro.TLE(bad, L2, checksum=False).satnum == 5
    with pytest.raises(ValueError, match=r"line 2 checksum \(column 69\) is 8, expected 7"):
        astro.TLE(L1, L2[:68] + "8")


@pytest.mark.parametrize(
    "line, where",
    [
        (L1[:20] + "x" + L1[21:], r"line 1, epoch day \(columns 21-32\).*'x"),
        (L1[:53] + " 2809x-4" + L1[61:], r"line 1, BSTAR \(columns 54-61\).*' 2809x-4'"),
        (L1[:44] + " 00000 0" + L1[52:], r"line 1, nddot/6 \(columns 45-52\)"),
        (L1[:18] + "a0" + L1[20:], r"line 1, epoch year \(columns 19-20\).*'a0'"),
    ],
)
def test_malformed_line1_names_field_columns_value(line, where):
    with pytest.raises(ValueError, match=where):
        astro.TLE(line, L2, checksum=False)


@pytest.mark.parametrize(
    "line, where",
    [
        (L2[:8] + "194.2682" + L2[16:], r"line 2, inclination \(columns 9-16\).*\[0.0, 180.0\]"),
        (L2[:26] + "18596a7" + L2[33:], r"line 2, eccentricity \(columns 27-33\).*'18596a7'"),
        (L2[:52] + " 0.00000000" + L2[63:], r"line 2, mean motion \(columns 53-63\).*> 0"),
        ("2 00006" + L2[7:], r"line 2, catalogue number \(columns 3-7\).*'00005'"),
    ],
)
def test_malformed_line2_names_field_columns_value(line, where):
    with pytest.raises(ValueError, match=where):
        astro.TLE(L1, line, checksum=False)


def test_short_line_and_wrong_line_number():
    with pytest.raises(ValueError, match="line 1 has 40 characters"):
        astro.TLE(L1[:40], L2)
    with pytest.raises(ValueError, match=r"line 2, line number \(columns 1\)"):
        astro.TLE(L1, "3" + L2[1:], checksum=False)


def test_alpha5_catalogue_number():
    a1 = _with_checksum("1 A0005" + L1[7:])
    a2 = _with_checksum("2 A0005" + L2[7:])
    assert astro.TLE(a1, a2).satnum == 100005
    z1 = _with_checksum("1 Z9999" + L1[7:])
    z2 = _with_checksum("2 Z9999" + L2[7:])
    assert astro.TLE(z1, z2).satnum == 339999


def test_read_tles_three_line_format_and_stack():
    text = f"VANGUARD 1\n{L1}\n{L2}\n\n0 TEST SAT\n{S1}\n{S2}\n"
    tles = astro.read_tles(text)
    assert [t.name for t in tles] == ["VANGUARD 1", "TEST SAT"]
    assert [t.satnum for t in tles] == [5, 88888]
    batch = astro.stack_elements(tles)
    assert batch.ecco.shape == (2,) and batch.kinds == (True, False, False)
    np.testing.assert_array_equal(np.asarray(batch.ecco), [0.1859667, 0.0086731])
    with pytest.raises(ValueError, match="read_tles: lines 2-3: TLE: line 1 checksum"):
        astro.read_tles(f"X\n{L1[:68]}0\n{L2}\n")
    with pytest.raises(ValueError, match="has no line 2"):
        astro.read_tles(L1)


def test_epoch_is_utc():
    pytest.importorskip("astropy")
    tle = astro.TLE(L1, L2)
    assert tle.epoch.iso.startswith("2000-06-27T18:50:19.73")
