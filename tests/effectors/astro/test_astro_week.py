"""A week of perturbed orbits against an independent high-accuracy integration (issue #30, item 6).

Two scenarios of `tests/data/astro_week_heyoka.json` (a perturbed 800 km LEO and a 300 x 380000 km
transfer-like ellipse) are built from `effectors` (EARTH's J2..J6 zonal field, Sun and Moon third
bodies and cannonball SRP from the DE421 ephemeris, the epoch from `fx.astro.Epoch`, the initial
state from `fx.astro.elem2rv`) and integrated for 7 days with Dopri8. The reference is heyoka's
Taylor integrator in extended precision with its own EGM2008 zonal model and Sun/Moon positions fitted
to jplephem's DE421 (see `tests/reference/make_astro_week_reference.py` and `tests/data/README.md`).
"""

import json
from pathlib import Path

import numpy as np
import pytest


pytest.importorskip("de421", reason="DE421 needs the astro extra")
pytest.importorskip("astropy", reason="Epoch needs the astro extra")

import effectors as fx  # noqa: E402
import jaxsim as js  # noqa: E402


DATA = Path(__file__).resolve().parents[2] / "data" / "astro_week_heyoka.json"
# Dopri8 tolerance: the final position converges to heyoka's as rtol falls (LEO, measured on the
# 2-core machine: 1e-12 -> 0.17 m, 1e-13 -> 1.6 cm, 1e-14 -> 1.7 mm; transfer 1e-13 -> 0.2 mm).
RTOL = 1e-13
ATOL = 1e-16  # [m, m/s] effectively pure relative control
# Final position within this of the independent integration [m] (the issue asks 1 m; measured
# 1.6 cm for the LEO and 0.2 mm for the transfer at RTOL).
WEEK_POSITION_M = 0.1
# ... and velocity [m/s] (LEO 7.4 km/s: 1.6 cm of along-track error is ~2e-5 m/s).
WEEK_VELOCITY_MS = 1e-3
# Initial state: our elem2rv vs the generator's numpy closed form (same formulas, round-off).
INITIAL_REL = 1e-14
# A live heyoka rerun (float64 there is not used; the same long-double run) reproduces the stored
# numbers to round-off of their JSON float64 copy.
HEYOKA_REPRO_M = 1e-6


def _reference():
    return json.loads(DATA.read_text(encoding="utf-8"))


def _model(spec, ref_constants):
    epoch = fx.astro.Epoch(spec["epoch"])
    week = spec["t"][-1]
    t0 = epoch.tdb_seconds_past_j2000
    eph = fx.astro.DE421Ephemeris(("sun", "moon"), t0 - 3600.0, t0 + week + 3600.0, center="earth")
    earth = fx.SphericalHarmonicGravity.from_body(fx.astro.EARTH, central=True)
    sun = fx.ThirdBodyGravity.from_ephemeris(fx.astro.SUN, eph, epoch)
    moon = fx.ThirdBodyGravity.from_ephemeris(fx.astro.MOON, eph, epoch)
    srp = fx.CannonballSRP.from_ephemeris(spec["area"], eph, epoch, C_R=spec["C_R"], occulters=())
    sc = fx.Spacecraft(
        fx.Hub(spec["mass"], np.diag([100.0, 100.0, 100.0])),
        dynamic_effectors=[srp],
        gravity=[earth, sun, moon],
    )
    # The reference used the same constants.
    assert ref_constants["mu_earth"] == fx.astro.EARTH.mu
    assert ref_constants["mu_sun"] == fx.astro.SUN.mu
    assert ref_constants["mu_moon"] == fx.astro.MOON.mu
    return epoch, sc


def test_reference_epochs_and_initial_states():
    """The stored epochs are the TDB dates of the scenario's UTC strings (astropy in the generator,
    Epoch here) and its initial states are elem2rv of the scenario's elements."""
    ref = _reference()
    for name, spec in ref["scenarios"].items():
        epoch = fx.astro.Epoch(spec["epoch"])
        jd1, jd2 = spec["epoch_jd_tdb"]
        assert abs(epoch.tdb_seconds_past_j2000 - ((jd1 - 2451545.0) + jd2) * 86400.0) < 1e-6
        r0, v0 = fx.astro.elem2rv(fx.astro.EARTH.mu, fx.astro.ClassicElements(*spec["elements"]))
        np.testing.assert_allclose(r0, spec["r0_N"], rtol=INITIAL_REL, atol=1e-7, err_msg=name)
        np.testing.assert_allclose(v0, spec["v0_N"], rtol=INITIAL_REL, atol=1e-10, err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["perturbed_leo", "lunar_transfer"])
def test_week_matches_independent_integration(name):
    ref = _reference()
    spec = ref["scenarios"][name]
    epoch, sc = _model(spec, ref["constants"])
    y0 = sc.init_state(spec["r0_N"], spec["v0_N"])
    ts = np.asarray(spec["t"])
    sol = js.simulate(
        sc, y0, ts[-1], solver=js.Dopri8(), rtol=RTOL, atol=ATOL, ts=ts, outputs=False
    )
    r = np.asarray(sol.ys["hub"]["r_BN_N"])
    v = np.asarray(sol.ys["hub"]["v_BN_N"])
    dr = np.linalg.norm(r - np.asarray(spec["r_N"]), axis=1)
    dv = np.linalg.norm(v - np.asarray(spec["v_N"]), axis=1)
    print(f"{name}: |dr| per day [m] {np.round(dr, 4)}, final |dv| {dv[-1]:.2e} m/s")
    assert dr[-1] < WEEK_POSITION_M, dr
    assert dv[-1] < WEEK_VELOCITY_MS, dv


@pytest.mark.slow
def test_reference_reproduces_with_heyoka():
    """Rerun the generator's heyoka integration of the LEO (when heyoka is installed)."""
    pytest.importorskip("heyoka", reason="heyoka is in the bench extra")
    import tests.reference.make_astro_week_reference as gen

    ref = _reference()
    spec = ref["scenarios"]["perturbed_leo"]
    jd1, jd2 = spec["epoch_jd_tdb"]
    out = gen.heyoka_run(gen.SCENARIOS["perturbed_leo"], {"jd_tdb1": jd1, "jd_tdb2": jd2})
    np.testing.assert_allclose(out["r_N"], spec["r_N"], rtol=0, atol=HEYOKA_REPRO_M)
