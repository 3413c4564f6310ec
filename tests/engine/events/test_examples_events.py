"""Example event-driven runs: eclipse entry/exit on a circular LEO and an altitude-threshold stop."""

import jax
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors._forces._srp import AU, R_EARTH, cylindrical_shadow_margin


MU = 3.986004418e14  # m^3/s^2
# Event times vs the analytic geometric times. The Keplerian orbit is integrated by Tsit5 at
# rtol 1e-12 (position error ~1e-4 m over half an orbit); the shadow margin changes at ~3 km/s at
# the crossings, so the time error is ~1e-8 s (measured 7e-9 s at the exit); the root finder
# converges to 1e-13 relative.
EVENT_TIME_ATOL = 1e-7  # s
# Altitude stop: the radial speed at the threshold is ~4 km/s, the same position error gives
# ~1e-9 s (measured 4e-10 s); the position at the stop sits on the threshold to round-off.
STOP_TIME_ATOL = 1e-7  # s
STOP_RADIUS_ATOL = 1e-5  # m
STOP_SPEED_RTOL = 1e-9


def spacecraft():
    return fx.Spacecraft(fx.Hub(100.0, np.eye(3)), gravity=(fx.PointMassGravity(MU),))


R_SUN_N = np.array([AU, 0.0, 0.0])
A_LEO = 7000e3  # m
N_LEO = np.sqrt(MU / A_LEO**3)  # rad/s


# The shadow condition is scaled to O(1); the altitude test below also runs it in metres (the
# default root finder stops on its step in time, so the condition's units do not matter).
def shadow(t, y, args):
    return cylindrical_shadow_margin(y["hub"]["r_BN_N"], R_SUN_N, np.zeros(3), R_EARTH) / R_EARTH


ENTRY = js.Event(shadow, direction="falling", name="eclipse_entry")
EXIT = js.Event(shadow, direction="rising", name="eclipse_exit")


@pytest.fixture(scope="module")
def eclipse_run():
    sc = spacecraft()
    z = np.zeros(3)
    # Start at theta = 90 deg (on +y, lit), prograde about +z: the sun is along +x.
    y0 = sc.init_state(np.array([0.0, A_LEO, 0.0]), np.array([-A_LEO * N_LEO, 0.0, 0.0]), z, z)
    t1 = 2700.0  # s, past the exit (~2521 s), before the next entry
    ts = np.linspace(0.0, t1, 28)
    sol = js.simulate(
        sc, y0, t1, solver=js.Tsit5(), rtol=1e-12, atol=1e-6, ts=ts, events=(ENTRY, EXIT),
        max_events=4,
    )  # fmt: skip
    return sol, ts


def test_eclipse_entry_exit_times(eclipse_run):
    sol, ts = eclipse_run
    log = sol.events
    half = np.arcsin(R_EARTH / A_LEO)
    t_in = (np.pi / 2 - half) / N_LEO
    t_out = (np.pi / 2 + half) / N_LEO
    assert int(log.count) == 2
    np.testing.assert_array_equal(np.asarray(log.index[:2]), [0, 1])
    assert log.names == ("eclipse_entry", "eclipse_exit")
    np.testing.assert_allclose(np.asarray(log.t[:2]), [t_in, t_out], rtol=0, atol=EVENT_TIME_ATOL)
    # Non-terminal: the run reaches t1 and the state is untouched by the (reset-free) events.
    assert float(sol.t_final) == ts[-1]
    r_b = np.asarray(log.y_before["hub"]["r_BN_N"][:2])
    r_a = np.asarray(log.y_after["hub"]["r_BN_N"][:2])
    np.testing.assert_array_equal(r_b, r_a)
    # On the cylinder at both events: |y| = R_Earth on the night side.
    np.testing.assert_allclose(np.abs(r_b[:, 1]), R_EARTH, atol=1e-2)
    assert np.all(r_b[:, 0] < 0)
    # The samples between the two events are in shadow for the SRP effector, the others lit.
    srp = fx.CannonballSRP(1.0, R_SUN_N, shadow="cylindrical")
    nu = np.asarray(srp.illumination(0.0, sol.ys["hub"]["r_BN_N"]))
    inside = (ts > t_in) & (ts < t_out)
    np.testing.assert_array_equal(nu, np.where(inside, 0.0, 1.0))
    assert inside.sum() > 5


R0 = R_EARTH + 1000e3  # m, drop from rest
H_STOP = 100e3  # m


def fall_time(r, r0=R0):
    """Radial free fall from rest at r0 to r in point-mass gravity (closed form)."""
    x = r / r0
    return np.sqrt(r0**3 / (2 * MU)) * (np.sqrt(x * (1 - x)) + np.arccos(np.sqrt(x)))


@pytest.mark.parametrize("scale", [R_EARTH, 1.0], ids=["scaled", "metres"])
def test_altitude_threshold_terminal_stop(scale):
    sc = spacecraft()
    z = np.zeros(3)
    d = np.array([1.0, 2.0, 2.0]) / 3.0  # arbitrary radial direction
    y0 = sc.init_state(R0 * d, z, z, z)

    def altitude_margin(t, y, args):
        r = y["hub"]["r_BN_N"]
        return (jax.numpy.sqrt(r @ r) - R_EARTH - H_STOP) / scale

    stop = js.Event(altitude_margin, direction="falling", terminal=True, name="altitude")
    t_an = fall_time(R_EARTH + H_STOP)
    assert 400.0 < t_an < 600.0
    sol = js.simulate(
        sc, y0, 1000.0, solver=js.Tsit5(), rtol=1e-12, atol=1e-6, ts=np.array([0.0, 300.0, 1000.0]),
        events=(stop,), max_events=1,
    )  # fmt: skip
    assert int(sol.events.count) == 1
    np.testing.assert_allclose(sol.events.t[0], t_an, rtol=0, atol=STOP_TIME_ATOL)
    np.testing.assert_allclose(sol.t_final, t_an, rtol=0, atol=STOP_TIME_ATOL)
    r_stop = np.asarray(sol.events.y_before["hub"]["r_BN_N"][0])
    np.testing.assert_allclose(np.linalg.norm(r_stop), R_EARTH + H_STOP, atol=STOP_RADIUS_ATOL)
    v_stop = np.asarray(sol.events.y_before["hub"]["v_BN_N"][0])
    v_an = np.sqrt(2 * MU * (1 / (R_EARTH + H_STOP) - 1 / R0))
    np.testing.assert_allclose(v_stop, -v_an * d, rtol=STOP_SPEED_RTOL, atol=1e-6)
    # The sample at 300 s is on the closed-form trajectory; the one after the stop is NaN.
    r300 = np.linalg.norm(np.asarray(sol.ys["hub"]["r_BN_N"][1]))
    np.testing.assert_allclose(fall_time(r300), 300.0, atol=STOP_TIME_ATOL)
    assert np.all(np.isnan(np.asarray(sol.ys["hub"]["r_BN_N"][2])))
