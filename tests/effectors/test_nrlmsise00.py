"""NRLMSISE-00 in JAX against the model's double-precision C release (a reference grid in
tests/data), against pymsis (its Fortran build, single precision), gradients against central
differences; the atmosphere along a run (geodetic position, UTC date, space weather, time span)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from tests.helpers import DATA


SPACE_WEATHER = DATA / "space_weather_2000.csv"
NAMES = ("He", "O", "N2", "O2", "Ar", "H", "N", "anomalous_O", "rho", "rho_with_anomalous_O",
         "T", "T_exo")  # fmt: skip
# The C release is double precision, with the same equations in another order: measured 1.1e-13
# at worst (anomalous oxygen at 100 km, a difference of large exponents), 3.4e-14 on the other
# species, 3.7e-15 on the mass density, 8.7e-16 on the temperature.
C_RTOL = 1e-11
# pymsis compiles the Fortran release in single precision (float32 inputs, arithmetic and
# outputs), so agreement is at the float32 level, which grows with the exponent of each profile
# (ln of the density ratio to 120 km, up to ~60 for the heavy species at 1000 km). Measured on
# this grid: total mass density 1.8e-5, temperature 3.2e-6, species 1.4e-4 (Ar at 1000 km);
# our own equations evaluated in float32 differ from float64 by as much (2.1e-5 on N2 at 1000 km).
PYMSIS_RTOL_RHO = 5e-5
PYMSIS_RTOL_SPECIES = 3e-4
PYMSIS_RTOL_T = 1e-5
# Central differences of log density with a 1 m step: truncation (h^2/6 * d3/dr3 ~ 1e-12 of
# the 1/H slope) and round-off (1e-16 / 1 m over a 2e-5 1/m slope): 1e-7 relative.
GRAD_RTOL = 1e-7


def _jit(f):
    """`jax.jit` with the compile options `simulate` uses (XLA's classic CPU emitters: this
    model compiles 3-5x faster with them)."""
    return jax.jit(f, compiler_options=js.compiler_options())


BATCH = 2048  # every call padded to this many points: one compiled program per Ap mode


@pytest.fixture(scope="module")
def model():
    """The model jitted and vmapped over points, in each Ap mode (inputs padded to `BATCH`)."""
    jitted = {
        mode: _jit(jax.vmap(lambda *a, mode=mode: fx.nrlmsise00(*a, ap_mode=mode)))
        for mode in ("history", "daily")
    }

    def run(mode, *args):
        n = len(args[0])
        assert n <= BATCH
        padded = [jnp.concatenate([a, jnp.repeat(a[:1], BATCH - n, axis=0)]) for a in args]
        out = jitted[mode](*padded)
        return type(out)(*(np.asarray(v)[:n] for v in out))

    return run


def _grid_inputs(ref, mask):
    keys = ("doy", "sec", "alt_km", "lat_deg", "lon_deg", "f107", "f107a", "ap")
    return [jnp.asarray(ref[k][mask]) for k in keys]


def test_matches_the_c_release_on_the_reference_grid(model):
    ref = np.load(DATA / "nrlmsise00_c_reference.npz")
    for mode, switch9 in (("history", -1.0), ("daily", 1.0)):
        mask = ref["switch9"] == switch9
        assert mask.sum() > 500
        out = model(mode, *_grid_inputs(ref, mask))
        for name in NAMES:
            np.testing.assert_allclose(
                np.asarray(getattr(out, name)), ref[name][mask], rtol=C_RTOL, err_msg=name
            )


def _pymsis_grid():
    """Dates, latitudes, local times, altitudes 100-1000 km and space-weather levels."""
    rows = []
    weather = [
        (70.0, 72.0, [4.0, 3.0, 4.0, 5.0, 3.0, 4.0, 4.0]),
        (150.0, 150.0, [15.0] * 7),
        (250.0, 210.0, [150.0, 207.0, 179.0, 94.0, 80.0, 111.0, 48.0]),
    ]
    k = 0
    for doy in (15, 105, 196, 288):
        for lat in (-70.0, -20.0, 0.0, 35.0, 85.0):
            for lst in (2.0, 8.0, 14.0, 20.0):
                for alt in (100.0, 120.0, 160.0, 250.0, 400.0, 600.0, 800.0, 1000.0):
                    f107, f107a, ap = weather[k % 3]
                    sec = 43200.0 + 3600.0 * (k % 5)
                    lon = ((lst - sec / 3600.0) * 15.0 + 180.0) % 360.0 - 180.0
                    rows.append((doy, sec, alt, lat, lon, f107, f107a, *ap))
                    k += 1
    # float32, as pymsis passes them to the Fortran: both models see the same inputs
    return np.asarray(rows, dtype=np.float32).astype(np.float64)


@pytest.mark.parametrize("mode", ["history", "daily"])
def test_matches_pymsis_version_0(model, mode):
    pymsis = pytest.importorskip("pymsis")
    x = _pymsis_grid()
    doy, sec, alt, lat, lon, f107, f107a = x[:, :7].T
    ap = x[:, 7:]
    dates = (np.datetime64("2000-01-01T00:00") + (doy - 1).astype("timedelta64[D]")
             + (sec * 1e6).astype("timedelta64[us]"))  # fmt: skip
    ref = pymsis.calculate(dates, lon, lat, alt, f107, f107a, ap, version=0,
                           geomagnetic_activity=-1 if mode == "history" else 1)  # fmt: skip
    # pymsis columns: mass density, N2, O2, O, He, H, Ar, N, anomalous O, NO, temperature
    out = model(mode, *(jnp.asarray(v) for v in (doy, sec, alt, lat, lon, f107, f107a, ap)))
    np.testing.assert_allclose(
        np.asarray(out.rho_with_anomalous_O), ref[:, 0], rtol=PYMSIS_RTOL_RHO
    )
    np.testing.assert_allclose(np.asarray(out.T), ref[:, 10], rtol=PYMSIS_RTOL_T)
    cols = {"N2": 1, "O2": 2, "O": 3, "He": 4, "H": 5, "Ar": 6, "N": 7}
    for name, k in cols.items():
        np.testing.assert_allclose(
            np.asarray(getattr(out, name)), ref[:, k], rtol=PYMSIS_RTOL_SPECIES, err_msg=name
        )
    # anomalous oxygen underflows float32 below ~110 km: compared where pymsis has it
    mask = ref[:, 8] > 1e-30
    np.testing.assert_allclose(np.asarray(out.anomalous_O)[mask], ref[mask, 8],
                               rtol=PYMSIS_RTOL_SPECIES)  # fmt: skip


@pytest.fixture(scope="module")
def run_atmosphere():
    """The atmosphere during the Bastille Day storm (2000-07-15, Ap 164) and one jitted program
    `probe(t, r_N) -> (inputs, outputs, log density, its gradient w.r.t. r_N)` (one compile)."""
    epoch = fx.astro.Epoch("2000-07-15T10:00:00Z")
    sw = fx.SpaceWeather.from_csv(SPACE_WEATHER, epoch, "2000-07-16")
    atm = fx.NRLMSISE00Atmosphere(epoch, sw)

    def probe(t, r):
        log_rho, grad = jax.value_and_grad(lambda r: jnp.log(atm.density_at(t, r)))(r)
        return atm.inputs(t, r), atm.evaluate(t, r), log_rho, grad

    return atm, _jit(probe)


def test_gradient_wrt_position_matches_central_differences(run_atmosphere):
    _, probe = run_atmosphere
    h = 1.0  # [m]
    for r in ([6.778e6, 1.0e5, 2.0e5], [2.0e6, -4.0e6, 5.0e6], [-1.0e6, 3.0e5, 6.48e6]):
        r = jnp.asarray(r)
        g = probe(1800.0, r)[3]
        fd = [(probe(1800.0, r + h * e)[2] - probe(1800.0, r - h * e)[2]) / (2 * h)
              for e in jnp.eye(3)]  # fmt: skip
        np.testing.assert_allclose(np.asarray(g), np.array(fd), rtol=GRAD_RTOL,
                                   atol=GRAD_RTOL * 1e-4)  # fmt: skip


def test_inputs_along_a_run_match_the_model_at_the_geodetic_point(run_atmosphere, model):
    atm, probe = run_atmosphere
    t = 5400.0  # 2000-07-15 11:30 UTC
    r_N = jnp.asarray([3.5e6, -4.5e6, 4.0e6])
    x, out, _, _ = probe(t, r_N)
    assert float(x["doy"]) == 197.0 and float(x["sec"]) == 41400.0
    # Earth-fixed position from the geodetic coordinates on the WGS84 ellipsoid, back to N
    a, f = fx.astro.EARTH.radius_equatorial, fx.astro.EARTH.flattening
    e2 = f * (2 - f)
    lat, lon, h = np.radians(float(x["lat"])), np.radians(float(x["lon"])), 1e3 * float(x["alt"])
    n = a / np.sqrt(1 - e2 * np.sin(lat) ** 2)
    r_P = np.array([(n + h) * np.cos(lat) * np.cos(lon), (n + h) * np.cos(lat) * np.sin(lon),
                    (n * (1 - e2) + h) * np.sin(lat)])  # fmt: skip
    r_back = np.asarray(atm.rotation(t)).T @ r_P
    np.testing.assert_allclose(r_back, np.asarray(r_N), rtol=0, atol=1e-6)  # [m]
    # From the file's rows: F10.7_OBS of 2000-07-14, F10.7_OBS_CENTER81 and AP_AVG of 2000-07-15,
    # its AP4..AP1 (09-12 h back to 00-03 h), and the means of 2000-07-14's eight values and of
    # 2000-07-13's (the 12-33 h and 36-57 h before the 09-12 h interval)
    assert (float(x["f107"]), float(x["f107a"])) == (203.9, 185.8)
    expected_ap = [164.0, 32.0, 39.0, 22.0, 15.0, 406.0 / 8, 340.0 / 8]
    np.testing.assert_allclose(np.asarray(x["ap"]), expected_ap, rtol=1e-15)
    keys = ("doy", "sec", "alt", "lat", "lon", "f107", "f107a", "ap")
    direct = model("history", *(jnp.asarray(x[k])[None] for k in keys))
    for name in NAMES:
        np.testing.assert_allclose(float(getattr(out, name)), float(getattr(direct, name)[0]),
                                   rtol=1e-14, err_msg=name)  # fmt: skip


def test_outside_the_span_or_the_domain_is_an_error(run_atmosphere):
    _, probe = run_atmosphere
    with pytest.raises(Exception, match="outside the space weather's span 2000-07-15 00:00 to "
                       "2000-07-16 24:00"):  # fmt: skip
        jax.block_until_ready(probe(3 * 86400.0, jnp.asarray([6.778e6, 0.0, 0.0])))
    with pytest.raises(Exception, match="altitude below 72.5 km"):
        jax.block_until_ready(probe(0.0, jnp.asarray([6.4e6, 0.0, 0.0])))


def test_simulate_refuses_a_run_past_the_space_weather(run_atmosphere):
    atm = run_atmosphere[0]
    sc = fx.Spacecraft(fx.Hub(500.0, np.eye(3) * 100.0),
                       dynamic_effectors=[fx.Drag(atm, Cd=2.2, area=4.0)],
                       gravity=[fx.PointMassGravity(fx.astro.EARTH, central=True)])  # fmt: skip
    r0 = fx.astro.EARTH.radius_equatorial + 400e3
    y0 = sc.init_state([r0, 0.0, 0.0], [0.0, 7.67e3, 0.0])
    with pytest.raises(ValueError, match=r"2000-07-15T10:00 to 2000-07-18T10:00 \(UTC\); the "
                       r"SpaceWeather covers 2000-07-15 00:00 to 2000-07-16 24:00"):  # fmt: skip
        js.simulate(sc, y0, 3 * 86400.0, dt=10.0)
