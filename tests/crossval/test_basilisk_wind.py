"""Live cross-validation of the co-rotating atmosphere of `Drag(planet_omega_N=...)` against
Basilisk's `ZeroWindModel` (`bsk` 2.12.1): the air velocity it writes for `dragDynamicEffector`'s
`windVelInMsg`, $\\mathbf v_{air} = \\boldsymbol\\omega_P\\times(\\mathbf r_{B/N} - \\mathbf r_P)$, is
the difference between the hub velocity and `Drag.velocity_N`."""

import numpy as np
import pytest


pytest.importorskip("Basilisk")

import effectors as fx


pytestmark = pytest.mark.crossval

# One cross product of the same numbers: round-off of ~500 m/s.
AIR_RTOL = 1e-14


def _basilisk_air_velocity(r_N, v_N, omega):
    """(`v_air_N` [m/s], the planet's angular velocity [rad/s]) from Basilisk's ZeroWindModel with
    `setPlanetOmega_N(omega)`, the planet at the origin."""
    from Basilisk.architecture import messaging
    from Basilisk.simulation import zeroWindModel
    from Basilisk.utilities import SimulationBaseClass, macros

    sim = SimulationBaseClass.SimBaseClass()
    proc = sim.CreateNewProcess("p")
    proc.addTask(sim.CreateNewTask("t", macros.sec2nano(1.0)))
    wind = zeroWindModel.ZeroWindModel()
    wind.setPlanetOmega_N(list(omega))
    state = messaging.SCStatesMsgPayload()
    state.r_BN_N, state.v_BN_N = list(r_N), list(v_N)
    state_msg = messaging.SCStatesMsg().write(state)
    wind.addSpacecraftToModel(state_msg)
    planet = messaging.SpicePlanetStateMsgPayload()
    planet.PositionVector = [0.0, 0.0, 0.0]
    planet.J20002Pfix = np.eye(3).tolist()
    planet_msg = messaging.SpicePlanetStateMsg().write(planet)
    wind.planetPosInMsg.subscribeTo(planet_msg)
    sim.AddModelToTask("t", wind)
    sim.InitializeSimulation()
    sim.ConfigureStopTime(0)
    sim.ExecuteSimulation()
    out = wind.envOutMsgs[0].read()
    assert np.all(np.asarray(out.v_wind_N) == 0.0)
    return np.asarray(out.v_air_N), np.ravel(wind.getPlanetOmega_N())


@pytest.mark.parametrize("omega", [[0.0, 0.0, fx.astro.EARTH.rotation_rate], [2e-5, -1e-5, 7e-5]])
def test_air_velocity_matches_basilisk_zero_wind_model(omega):
    r_N = np.array([4.0e6, -3.5e6, 3.9e6])  # [m]
    v_N = np.array([5.1e3, 4.9e3, -0.9e3])  # [m/s]
    v_air, omega_bsk = _basilisk_air_velocity(r_N, v_N, omega)
    np.testing.assert_array_equal(omega_bsk, omega)
    atmosphere = fx.ExponentialAtmosphere(1e-11, 6e4, fx.astro.EARTH.radius_equatorial)
    drag = fx.Drag(atmosphere, 2.2, 1.5, planet_omega_N=omega_bsk)
    sc = fx.Spacecraft(fx.Hub(100.0, np.eye(3)), dynamic_effectors=(drag,))
    ctx = sc.context(0.0, sc.init_state(r_N, v_N), None)
    ours = v_N - np.asarray(drag.velocity_N(ctx))
    np.testing.assert_allclose(ours, v_air, rtol=AIR_RTOL)
