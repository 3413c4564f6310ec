"""A hostile probe of the public API (issue #33): one case per class of silent wrong answer or
unclear failure that was found, each asserting the corrected behaviour (each failed before)."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors._thrusters import G0


Z3 = np.zeros(3)


# --------------------------------------------------------------------------------------------------
# Actuators beyond their range


def _thruster_sc(throttle=1.0, tank=None, F=100.0, isp=100.0, m_hub=100.0):
    thr = fx.Thrusters(
        [[0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0]], [F], [isp], throttle=throttle, name="thr"
    )
    tanks = () if tank is None else (tank,)
    sc = fx.Spacecraft(fx.Hub(m_hub, np.eye(3)), dynamic_effectors=(thr,), state_effectors=tanks)
    return sc, sc.init_state(Z3, Z3, Z3, Z3)


# Thrust out of range after construction: the delta-v of a full-throttle burn is F/m t to round-off.
THROTTLE_RTOL = 1e-12


@pytest.mark.parametrize("u, factor", [(2.0, 1.0), (-1.0, 0.0)])
def test_throttle_changed_after_construction_is_clipped(u, factor):
    """A throttle set to 2 (or -1) with `eqx.tree_at` gives full (or no) thrust, never 2x."""
    sc, y0 = _thruster_sc(F=1.0, m_hub=1.0)
    sc = eqx.tree_at(lambda s: s.dynamic_effectors[0].throttle, sc, jnp.array([u]))
    sol = js.simulate(sc, y0, 1.0, dt=0.1)
    v = float(sol.ys["hub"]["v_BN_N"][-1, 0])
    assert v == pytest.approx(factor * 1.0, rel=THROTTLE_RTOL, abs=THROTTLE_RTOL)


def test_thrusters_starve_from_an_empty_tank():
    """A tank that empties stops its thrusters (default): the delta-v is the rocket equation's to
    within the one step in which the tank empties; Basilisk's behaviour (`starve_thrusters=False`)
    keeps the thrust."""
    F, isp, m_dry, m_fuel, dt = 100.0, 100.0, 100.0, 1.0, 0.1
    dv_rocket = isp * G0 * np.log((m_dry + m_fuel) / m_dry)
    step_dv = F / m_dry * dt  # at most one step of thrust past the empty time
    out = {}
    for starve in (True, False):
        tank = fx.FuelTank(
            fx.ConstantVolumeTank(m_fuel, 0.5), thrusters=("thr",), starve_thrusters=starve
        )
        sc, y0 = _thruster_sc(tank=tank, F=F, isp=isp, m_hub=m_dry)
        sol = js.simulate(sc, y0, 20.0, dt=dt)
        assert sol.ok
        out[starve] = sol
    starved = out[True]
    assert float(starved.ys["tank"]["mass"][-1]) == 0.0
    assert float(starved.outputs["thr"]["throttle"][-1, 0]) == 0.0
    dv = float(starved.ys["hub"]["v_BN_N"][-1, 0])
    assert abs(dv - dv_rocket) <= step_dv
    # Basilisk's rule: thrust continues on an empty tank (about 10 s more at F / m_dry).
    assert float(out[False].ys["hub"]["v_BN_N"][-1, 0]) > dv + 5.0
