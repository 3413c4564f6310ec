"""Live cross-validation of the environment forces against Basilisk (`bsk` 2.12.1).

- Spherical-harmonic gravity (degree and order 8) of a rotated Earth: the planet-fixed orientation
  $[PN]$ of `effectors.astro.EarthRotation` at several times, written into the Earth's
  `SpicePlanetStateMsg.J20002Pfix` from Python (zero `J20002Pfix_dot`, so Basilisk holds it over the
  step), against `SphericalHarmonicGravity(dcm_PN=...)` with the same coefficients.
- Third bodies: Moon and Sun as point masses whose positions are written into their planet messages,
  the Earth central, against `ThirdBodyGravity`.

Both: one RK4 step of 1 s from the same state; the velocity change $\\Delta v = \\int g\\,dt$ carries
the field, compared relative to its size.
"""

import numpy as np
import pytest


pytest.importorskip("Basilisk")

import effectors as fx
import jaxsim as js
from tests.reference import basilisk_scenarios as bs


pytestmark = pytest.mark.crossval

# Delta-v of one step is a difference of two ~7 km/s velocities: its float64 round-off is ~1e-12 m/s
# on ~8 m/s (measured 1.5e-14 .. 1.4e-13 relative); the field without rotation differs by 5e-6.
DV_RTOL = 1e-12
DT = 1.0  # [s] one RK4 step
R0 = np.array([6.9e6, 1.2e6, -2.0e6])  # [m]
V0 = np.array([-1.0e3, 6.5e3, 3.0e3])  # [m/s]
DEGREE = 8
EPOCH = 7.9e8  # [s] TDB past J2000 (2025-01-13)


def _coefficients():
    """Normalised C, S: EGM2008's C20 and random higher terms of Kaula-rule size 1e-6/l^2."""
    rng = np.random.default_rng(3)
    C = np.zeros((DEGREE + 1, DEGREE + 1))
    S = np.zeros_like(C)
    for l in range(2, DEGREE + 1):
        C[l, : l + 1] = rng.normal(size=l + 1) * 1e-6 / l**2
        S[l, 1 : l + 1] = rng.normal(size=l) * 1e-6 / l**2
    C[0, 0] = 1.0
    C[2, 0] = -fx.astro.EARTH.J[0] / np.sqrt(5.0)
    return C, S


def _basilisk_step(earth_model=None, dcm_PN=None, third_bodies=()):
    """Basilisk: one RK4 step of a 1 kg hub about a central Earth; returns (r, v) at DT."""
    from Basilisk.architecture import messaging
    from Basilisk.utilities import SimulationBaseClass, macros, simIncludeGravBody

    keep = []
    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("p")
    proc.addTask(sim.CreateNewTask("t", macros.sec2nano(DT)))
    sc = bs.rk4_spacecraft(keep, "sc", 1.0, np.eye(3), r_CN_N=R0, v_CN_N=V0)
    sim.AddModelToTask("t", sc)
    factory = simIncludeGravBody.gravBodyFactory()
    earth = factory.createEarth()
    earth.mu = fx.astro.EARTH.mu
    earth.radEquator = fx.astro.EARTH.radius_equatorial
    earth.isCentralBody = True
    if earth_model is not None:
        earth.gravityModel = earth_model
    if dcm_PN is not None:
        payload = messaging.SpicePlanetStateMsgPayload()
        payload.J20002Pfix = np.asarray(dcm_PN).tolist()
        msg = messaging.SpicePlanetStateMsg().write(payload)
        earth.planetBodyInMsg.subscribeTo(msg)
        keep += [payload, msg]
    for body, r_PN_N in third_bodies:
        grav = factory.createCustomGravObject(body.name, body.mu)
        payload = messaging.SpicePlanetStateMsgPayload()
        payload.PositionVector = list(map(float, r_PN_N))
        msg = messaging.SpicePlanetStateMsg().write(payload)
        grav.planetBodyInMsg.subscribeTo(msg)
        keep += [grav, payload, msg]
    factory.addBodiesTo(sc)
    keep += [factory, earth, earth_model]
    sim.InitializeSimulation()
    sim.ConfigureStopTime(macros.sec2nano(DT))
    sim.ExecuteSimulation()
    out = sc.scStateOutMsg.read()
    return np.array(out.r_BN_N), np.array(out.v_BN_N)


def _jaxsim_step(gravity):
    sc = fx.Spacecraft(fx.Hub(1.0, np.eye(3)), gravity=gravity)
    sol = js.simulate(sc, sc.init_state(R0, V0), DT, dt=DT)
    return np.asarray(sol.ys["hub"]["r_BN_N"][-1]), np.asarray(sol.ys["hub"]["v_BN_N"][-1])


def _dv_err(v_ours, v_bsk):
    return np.linalg.norm(v_ours - v_bsk) / np.linalg.norm(v_bsk - V0)


@pytest.mark.parametrize("t", [0.0, 3000.0, 3.3 * 86400.0])
def test_spherical_harmonics_rotating_earth(t):
    from Basilisk.simulation import gravityEffector

    C, S = _coefficients()
    R = fx.astro.EARTH.radius_equatorial
    sh = gravityEffector.SphericalHarmonicsGravityModel()
    sh.cBar = [list(C[l, : l + 1]) for l in range(DEGREE + 1)]
    sh.sBar = [list(S[l, : l + 1]) for l in range(DEGREE + 1)]
    sh.maxDeg = DEGREE
    sh.radEquator = R
    sh.muBody = fx.astro.EARTH.mu
    dcm = np.asarray(fx.astro.EarthRotation(EPOCH)(t))
    _, v_bsk = _basilisk_step(sh, dcm)
    earth = fx.SphericalHarmonicGravity.from_body(
        fx.astro.EARTH, C=C, S=S, dcm_PN=dcm, central=True
    )
    _, v_ours = _jaxsim_step([earth])
    assert _dv_err(v_ours, v_bsk) < DV_RTOL


def test_third_bodies_moon_sun():
    eph = fx.astro.AnalyticSunMoon()
    bodies = [(b, np.asarray(eph.position(b, EPOCH))) for b in (fx.astro.MOON, fx.astro.SUN)]
    _, v_bsk = _basilisk_step(third_bodies=bodies)
    _, v_ours = _jaxsim_step(
        [fx.PointMassGravity(fx.astro.EARTH, central=True)]
        + [fx.ThirdBodyGravity(b, r) for b, r in bodies]
    )
    _, v_earth_only = _jaxsim_step([fx.PointMassGravity(fx.astro.EARTH, central=True)])
    assert _dv_err(v_ours, v_bsk) < DV_RTOL
    # The third bodies do change the step (by ~1e-7 of Delta v), so the comparison sees them.
    assert _dv_err(v_earth_only, v_bsk) > 100 * DV_RTOL


# Density: one exp of the same argument (altitude / H with altitude from the same norm).
DENSITY_RTOL = 1e-13


@pytest.mark.parametrize("altitude", [150e3, 400e3, 800e3])
def test_exponential_atmosphere_density(altitude):
    """Basilisk `exponentialAtmosphere` reading a spacecraft state message written from Python
    vs `ExponentialAtmosphere.from_body(EARTH, ...)`."""
    from Basilisk.architecture import messaging
    from Basilisk.simulation import exponentialAtmosphere
    from Basilisk.utilities import SimulationBaseClass, macros

    rho0, H = 1.217, 8500.0  # [kg/m^3], [m]
    r_N = (fx.astro.EARTH.radius_equatorial + altitude) * np.array([0.6, -0.48, 0.64])
    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("p")
    proc.addTask(sim.CreateNewTask("t", macros.sec2nano(1.0)))
    atmo = exponentialAtmosphere.ExponentialAtmosphere()
    atmo.baseDensity = rho0
    atmo.scaleHeight = H
    atmo.planetRadius = fx.astro.EARTH.radius_equatorial
    payload = messaging.SCStatesMsgPayload()
    payload.r_BN_N = list(r_N)
    msg = messaging.SCStatesMsg().write(payload)
    atmo.addSpacecraftToModel(msg)
    sim.AddModelToTask("t", atmo)
    sim.InitializeSimulation()
    sim.ConfigureStopTime(0)
    sim.ExecuteSimulation()
    rho_bsk = atmo.envOutMsgs[0].read().neutralDensity
    atm = fx.ExponentialAtmosphere.from_body(fx.astro.EARTH, rho0, H)
    np.testing.assert_allclose(atm.density(r_N), rho_bsk, rtol=DENSITY_RTOL)
