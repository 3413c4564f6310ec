"""Schmitt-trigger thruster firing logic (`effectors.ThrFiringSchmitt`) against live Basilisk
`thrFiringSchmitt` (`bsk` 2.12.1) on the same request sequences, tick by tick (on- and off-pulsing,
saturation, the hysteresis band, the first calls); refused arguments; the derivative.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx


MAX_THRUST = [1.0, 2.0, 0.5, 1.5]  # [N]
T_MIN = 0.02  # [s]
DT = 0.1  # [s] control period
# On-times are products and quotients of O(1) numbers: round-off.
TOL = 1e-14


def _requests(n_ticks=24, seed=0, off_pulsing=False):
    rng = np.random.default_rng(seed)
    F = rng.uniform(0.0, 1.0, (n_ticks, 4)) ** 3 * np.array(MAX_THRUST) * 1.3  # many small ones
    return -F if off_pulsing else F


def _ours(forces, base):
    logic = fx.ThrFiringSchmitt(MAX_THRUST, T_MIN, 0.6, 0.3, base_thrust_state=base)
    z = logic.init_state()
    out = []
    for k, f in enumerate(forces):
        z, on = logic(k * DT, f, z)
        out.append(np.asarray(on))
    return np.stack(out)


@pytest.mark.crossval
@pytest.mark.parametrize("base", [0, 1])
def test_matches_basilisk(base):
    pytest.importorskip("Basilisk")
    from Basilisk.utilities import fswSetupThrusters

    from tests.reference import basilisk_gnc as bg

    forces = _requests(off_pulsing=bool(base))
    keep = []

    def setup(mod, keep_):
        fswSetupThrusters.clearSetup()
        for f in MAX_THRUST:
            fswSetupThrusters.create([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], f)
        msg = fswSetupThrusters.writeConfigMessage()
        mod.thrConfInMsg.subscribeTo(msg)
        keep_.append(msg)
        keep.append(msg)

    cfg = {"thrMinFireTime": T_MIN, "level_on": 0.6, "level_off": 0.3, "baseThrustState": base}
    inputs = [{"thrForceInMsg": ("THRArrayCmdForceMsgPayload", {"thrForce": list(f) + [0.0] * 32})}
              for f in forces]  # fmt: skip
    ref = bg.run_module("thrFiringSchmitt", cfg, inputs, {"onTimeOutMsg": ("OnTimeRequest",)},
                        dt=DT, setup=setup)  # fmt: skip
    ref = ref["onTimeOutMsg.OnTimeRequest"][:, :4]
    ours = _ours(forces, base)
    np.testing.assert_allclose(ours, ref, rtol=0.0, atol=TOL)
    # The sequence exercises every branch: off, t_min by the trigger, proportional, saturated (on
    # pulsing; off-pulsing never exceeds the period).
    later = ours[2:]
    assert np.any(later == 0.0) and np.any(later == T_MIN)
    assert np.any((later > T_MIN) & (later < 0.099))
    assert base == 1 or np.any(np.isclose(later, 1.1 * DT))
    if base == 1:  # first calls request 2 s, as Basilisk's
        np.testing.assert_array_equal(ours[:2], 2.0)


def test_hysteresis_and_first_calls():
    logic = fx.ThrFiringSchmitt([1.0], 0.02, 0.6, 0.3)
    z = logic.init_state()
    levels = [0.5, 0.5, 0.7, 0.5, 0.2, 0.5]  # duty levels l = t / t_min
    got = []
    for k, l in enumerate(levels):
        z, on = logic(k * 0.1, jnp.array([l * 0.02 / 0.1]), z)
        got.append(float(on[0]))
    # First two calls (prior time 0, as Basilisk's): 0 whatever the request; then 0.7 > l_on: on;
    # 0.5 inside the band stays on; 0.2 < l_off: off; 0.5 inside the band stays off.
    assert got == [0.0, 0.0, 0.02, 0.02, 0.0, 0.0]


def test_derivative_is_the_proportional_branch():
    logic = fx.ThrFiringSchmitt([2.0], 0.02)
    z = {"last_on": jnp.zeros(1), "prior_time": jnp.asarray(1.0)}
    d = jax.grad(lambda f: logic(1.1, f, z)[1][0])(jnp.array([1.0]))  # t = 0.05 s: proportional
    np.testing.assert_allclose(d, [0.1 / 2.0], rtol=1e-15)
    d0 = jax.grad(lambda f: logic(1.1, f, z)[1][0])(jnp.array([0.3]))  # t = 0.015 < t_min
    np.testing.assert_array_equal(d0, [0.0])


def test_refused_arguments():
    with pytest.raises(ValueError, match=r"ThrFiringSchmitt: `max_thrust` must be > 0 \[N\]"):
        fx.ThrFiringSchmitt([1.0, 0.0], 0.02)
    with pytest.raises(ValueError, match=r"ThrFiringSchmitt: `min_fire_time` must be > 0 \[s\]"):
        fx.ThrFiringSchmitt([1.0], -0.02)
    with pytest.raises(ValueError, match=r"ThrFiringSchmitt: `level_on` must satisfy"):
        fx.ThrFiringSchmitt([1.0], 0.02, 0.2, 0.5)
    with pytest.raises(ValueError, match=r"ThrFiringSchmitt: `base_thrust_state` must be 0"):
        fx.ThrFiringSchmitt([1.0], 0.02, base_thrust_state=2)
