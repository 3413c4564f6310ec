"""Independent reference for the week-long perturbed-orbit comparison (`tests/effectors/astro/test_astro_week.py`).

Writes `tests/data/astro_week_heyoka.json`: for each scenario, the spacecraft state after one week
(and once a day) from heyoka's Taylor integrator in extended precision (x87 80-bit `long double`,
tolerance its machine epsilon ~1.1e-19), with the force model the test builds from `effectors`:

- the Earth's zonal field J2..J6: heyoka's own EGM2008 model (`heyoka.model.egm2008_acc`, degree 6,
  order 0, its coefficients, GM and 6378136.3 m reference radius), whose z axis is the inertial z
  (a zonal field does not depend on the Earth's rotation about it);
- the Sun and the Moon as point masses (DE421 GM), direct and indirect terms;
- cannonball solar radiation pressure, no shadow: a = C_R (A/m) Phi (1 AU)^2 / c * (r - r_sun) /
  |r - r_sun|^3, with Phi = 1361 W/m^2, 1 AU = 1.49597870693e11 m, c = 299792458 m/s.

The Sun's and the Moon's geocentric positions are Chebyshev polynomials in time (written into the
heyoka expression by Clenshaw's recurrence), fitted to **jplephem**'s evaluation of the DE421 series
(`jplephem.ephem.Ephemeris` over the `de421` package; Earth = EMB - Moon/(1 + EMRAT)), at
JD TDB = epoch + t; the fit's error over the week is measured on a dense
grid against jplephem and recorded (`fit_max_error_m`: about 2 cm for the Sun at 1.5e11 m, where the
DE421 records join with only C1 continuity, and under 1 mm for the Moon; relative errors of 1e-13
and 2e-12, which move a spacecraft by far less than a millimetre in a week). Nothing here uses jaxsim.

Run (needs heyoka, jplephem, de421 and astropy: the `bench` and `astro` extras), a few minutes:

    python tests/reference/make_astro_week_reference.py
"""

import json
import math
import sys
import time
from pathlib import Path

import numpy as np


ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "astro_week_heyoka.json"

WEEK = 7 * 86400.0  # [s]
SAMPLES = 8  # t = 0, 1, ..., 7 days
# Constants of the force model (the values effectors.astro and effectors.CannonballSRP use).
MU_SUN = 132712440040.944e9  # [m^3/s^2] DE421
MU_MOON = 4902.800076e9  # [m^3/s^2] DE421
SOLAR_FLUX_1AU = 1361.0  # [W/m^2]
AU = 1.49597870693e11  # [m]
SPEED_OF_LIGHT = 299792458.0  # [m/s]
# Chebyshev fit of the Sun and Moon positions: degree and margin beyond the week [s].
FIT_DEGREE = 40
FIT_MARGIN = 3600.0

SCENARIOS = {
    "perturbed_leo": {
        "description": "800 km near-circular sun-synchronous-like LEO, one week",
        "epoch": "2025-03-20T12:00:00Z",
        # a [m], e, i, Omega, omega, f [rad]: converted to r, v with mu_earth below
        "elements": [6378137.0 + 800e3, 0.001, math.radians(98.6), math.radians(30.0), 0.5, 0.2],
        "mass": 500.0,  # [kg]
        "area": 10.0,  # [m^2]
        "C_R": 1.3,
    },
    "lunar_transfer": {
        "description": "300 km x 380000 km transfer-like ellipse from perigee, one week",
        "epoch": "2025-06-01T00:00:00Z",
        "elements": [
            0.5 * (6378137.0 + 300e3 + 380000e3),
            1.0 - (6378137.0 + 300e3) / (0.5 * (6378137.0 + 300e3 + 380000e3)),
            math.radians(28.5),
            math.radians(40.0),
            math.radians(200.0),
            0.0,
        ],
        "mass": 1000.0,
        "area": 20.0,
        "C_R": 1.2,
    },
}

MU_EARTH = 3.986004415e14  # [m^3/s^2] EGM2008 (also heyoka's egm2008 GM)


def elements_to_rv(mu, a, e, i, Omega, omega, f):
    """Classical elements to position [m] and velocity [m/s] (Schaub & Junkins sec. 9.6), numpy."""
    p = a * (1.0 - e * e)
    cO, sO, co, so, ci, si = (
        math.cos(Omega),
        math.sin(Omega),
        math.cos(omega),
        math.sin(omega),
        math.cos(i),
        math.sin(i),
    )
    p_hat = np.array([cO * co - sO * so * ci, sO * co + cO * so * ci, so * si])
    q_hat = np.array([-cO * so - sO * co * ci, -sO * so + cO * co * ci, co * si])
    r = p / (1.0 + e * math.cos(f))
    r_N = r * (math.cos(f) * p_hat + math.sin(f) * q_hat)
    v_N = math.sqrt(mu / p) * (-math.sin(f) * p_hat + (e + math.cos(f)) * q_hat)
    return r_N, v_N


def de421_geocentric(jd_tdb1, jd_tdb2_days):
    """Geocentric Sun and Moon positions [m], shape (n, 3), from jplephem's evaluation of the DE421
    series (`jplephem.ephem.Ephemeris` over the `de421` package) at JD TDB = jd_tdb1 + jd_tdb2."""
    import de421
    from jplephem.ephem import Ephemeris

    eph = Ephemeris(de421)
    t2 = np.asarray(jd_tdb2_days, dtype=float)
    t1 = np.full_like(t2, jd_tdb1)
    emb = eph.position("earthmoon", t1, t2)
    moon_geo = eph.position("moon", t1, t2)  # DE421's moon series is geocentric
    earth = emb - moon_geo / (1.0 + float(eph.EMRAT))
    sun = eph.position("sun", t1, t2)
    return 1e3 * (sun - earth).T, 1e3 * moon_geo.T


def chebyshev_fit(epoch):
    """Chebyshev coefficients (3, FIT_DEGREE + 1) of the Sun and the Moon over the week, in
    tau = (t - t_mid) / half, and the fit's maximum error [m] on a dense grid."""
    t0, t1 = -FIT_MARGIN, WEEK + FIT_MARGIN
    mid, half = 0.5 * (t0 + t1), 0.5 * (t1 - t0)
    k = np.arange(4 * (FIT_DEGREE + 1))
    tau = np.cos(math.pi * (k + 0.5) / k.size)  # Chebyshev nodes
    t = mid + half * tau
    jd1 = epoch["jd_tdb1"]
    sun, moon = de421_geocentric(jd1, epoch["jd_tdb2"] + t / 86400.0)
    cheb = np.polynomial.chebyshev
    coeffs = {
        name: np.stack([cheb.chebfit(tau, pos[:, j], FIT_DEGREE) for j in range(3)])
        for name, pos in (("sun", sun), ("moon", moon))
    }
    t_check = np.linspace(0.0, WEEK, 5001)
    sun_c, moon_c = de421_geocentric(jd1, epoch["jd_tdb2"] + t_check / 86400.0)
    tau_c = (t_check - mid) / half
    errors = {}
    for name, pos in (("sun", sun_c), ("moon", moon_c)):
        fit = np.stack([cheb.chebval(tau_c, coeffs[name][j]) for j in range(3)], axis=-1)
        errors[name] = float(np.max(np.linalg.norm(fit - pos, axis=1)))
    return coeffs, errors, mid, half


def clenshaw(hy, c, tau):
    """sum_k c_k T_k(tau) as a heyoka expression (Clenshaw's recurrence)."""
    b1, b2 = hy.expression(0.0), hy.expression(0.0)
    for ck in c[:0:-1]:
        b1, b2 = float(ck) + 2.0 * tau * b1 - b2, b1
    return float(c[0]) + tau * b1 - b2


def heyoka_run(spec, epoch):
    import heyoka as hy

    coeffs, fit_errors, mid, half = chebyshev_fit(epoch)
    x, y, z, vx, vy, vz = hy.make_vars("x", "y", "z", "vx", "vy", "vz")
    tau = (hy.time - mid) / half
    r = [x, y, z]
    acc = hy.model.egm2008_acc(r, 6, 0)  # includes the central -mu r/|r|^3 term
    for name, mu in (("sun", MU_SUN), ("moon", MU_MOON)):
        s = [clenshaw(hy, coeffs[name][j], tau) for j in range(3)]
        d = [r[j] - s[j] for j in range(3)]
        d3 = (d[0] ** 2 + d[1] ** 2 + d[2] ** 2) ** 1.5
        s3 = (s[0] ** 2 + s[1] ** 2 + s[2] ** 2) ** 1.5
        acc = [acc[j] - mu * (d[j] / d3 + s[j] / s3) for j in range(3)]
        if name == "sun":
            k_srp = spec["C_R"] * spec["area"] / spec["mass"] * SOLAR_FLUX_1AU * AU**2
            k_srp /= SPEED_OF_LIGHT
            acc = [acc[j] + k_srp * d[j] / d3 for j in range(3)]
    sys_ = [(x, vx), (y, vy), (z, vz), (vx, acc[0]), (vy, acc[1]), (vz, acc[2])]
    r0, v0 = elements_to_rv(MU_EARTH, *spec["elements"])
    start = time.perf_counter()
    ta = hy.taylor_adaptive(
        sys_,
        np.concatenate([r0, v0]).astype(np.longdouble),
        fp_type=np.longdouble,
        compact_mode=True,
    )
    build = time.perf_counter() - start
    grid = np.linspace(0.0, WEEK, SAMPLES).astype(np.longdouble)
    start = time.perf_counter()
    outcome, *_, states = ta.propagate_grid(grid)
    run = time.perf_counter() - start
    if outcome != hy.taylor_outcome.time_limit:
        raise RuntimeError(f"heyoka stopped early: {outcome}")
    return {
        "r0_N": r0.tolist(),
        "v0_N": v0.tolist(),
        "t": [float(t) for t in grid],
        "r_N": np.asarray(states[:, :3], dtype=np.float64).tolist(),
        "v_N": np.asarray(states[:, 3:], dtype=np.float64).tolist(),
        "fit_max_error_m": fit_errors,
        "heyoka_tol": float(ta.tol),
        "heyoka_build_s": build,
        "heyoka_run_s": run,
    }


def main():
    import astropy
    import heyoka as hy
    import jplephem
    from astropy.time import Time

    result = {
        "generator": "tests/reference/make_astro_week_reference.py",
        "software": {
            "heyoka": hy.__version__,
            "jplephem": jplephem.__version__,
            "astropy": astropy.__version__,
            "numpy": np.__version__,
            "python": sys.version.split()[0],
        },
        "constants": {
            "mu_earth": MU_EARTH,
            "mu_sun": MU_SUN,
            "mu_moon": MU_MOON,
            "solar_flux_1au": SOLAR_FLUX_1AU,
            "au": AU,
            "speed_of_light": SPEED_OF_LIGHT,
            "zonal": "heyoka.model.egm2008_acc degree 6 order 0 (a = 6378136.3 m)",
        },
        "fit_degree": FIT_DEGREE,
        "scenarios": {},
    }
    for name, spec in SCENARIOS.items():
        t = Time(spec["epoch"].rstrip("Z"), scale="utc").tdb
        epoch = {"jd_tdb1": float(t.jd1), "jd_tdb2": float(t.jd2)}
        out = heyoka_run(spec, epoch)
        result["scenarios"][name] = {
            **spec,
            "epoch_jd_tdb": [epoch["jd_tdb1"], epoch["jd_tdb2"]],
            **out,
        }
        print(
            f"{name}: final r {np.round(out['r_N'][-1], 3)} m; fit errors {out['fit_max_error_m']} m; "
            f"heyoka build {out['heyoka_build_s']:.1f} s, run {out['heyoka_run_s']:.1f} s"
        )
    OUT.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
