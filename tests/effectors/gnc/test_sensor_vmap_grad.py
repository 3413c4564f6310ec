"""Sensors under `vmap` (a Monte Carlo over noise keys through the clocked run) and `jax.jacfwd`
(against central differences; zero derivative at quantization and saturation).
"""

import jax
import jax.numpy as jnp
import numpy as np

import effectors as fx
import jaxsim as js
from tests.effectors.gnc.test_sensor_noise import _noisy_run
from tests.effectors.gnc.test_sensors import DCM, DIPOLE, R_SUN


def test_vmap_over_keys_gives_a_monte_carlo():
    sc, y0, _ = _noisy_run()

    def final_rate(key_data):
        sens = fx.Sensors(js.Clock(0.5), [fx.IMU(gyro_noise_std=[1e-3] * 3)], key=key_data)
        sol = js.simulate(sc, y0, 0.5, dt=0.1, solver=js.RK4(), clocks=[sens], outputs=False)
        return sol.clock_logs["sensors"]["held"]["sensors"]["imu"]["AngVelPlatform"][-1]

    keys = jax.random.split(jax.random.key(3), 4)
    batch = np.asarray(jax.vmap(final_rate)(jax.random.key_data(keys)))
    # Same truth for every member: the differences are the noise draws of the tick at 0.5 s
    # (draw index 1; index 0 is the call at t0).
    draws = np.stack(
        [np.asarray(jax.random.normal(jax.random.fold_in(k, 1), (6,)))[:3] for k in keys]
    )
    np.testing.assert_allclose(batch - batch[0], 1e-3 * (draws - draws[0]), rtol=0, atol=1e-15)
    assert np.min(np.abs(batch[1:] - batch[0])) > 0


def test_sensor_gradients_match_central_differences():
    """Magnetometer output w.r.t. position and dipole strength; sun-sensor output w.r.t. attitude
    and scale (inside the field of view, unsaturated)."""

    def f(x):
        field = fx.CenteredDipole(
            x[3] * 1e-5, DIPOLE["g11"], DIPOLE["h11"], DIPOLE["planet_radius"]
        )
        truth = {
            "r_BN_N": x[:3] * 1e6,
            "sigma_BN": x[4:7],
            "omega_BN_B": jnp.zeros(3),
            "v_BN_N": jnp.zeros(3),
        }
        tam = fx.Magnetometer(field, DCM, scale_factor=x[7])
        css = fx.CoarseSunSensors([[0.0, -0.6, -0.8], [1.0, 0.0, 0.0]], R_SUN, fov=1.4, kelly_factor=0.1,
                                  scale_factor=x[7])  # fmt: skip
        m = tam(0.0, truth, tam.init_state(), jnp.zeros(3))[1]["tam_S"] * 1e5
        c = css(0.0, truth, css.init_state(), jnp.zeros(2))[1]["OutputData"]
        return jnp.concatenate([m, c])

    x0 = np.array([7.0, 0.5, 0.3, -3.0926, 0.1, -0.2, 0.3, 1.2])
    jf = jax.jit(f)
    jac = np.asarray(jax.jit(jax.jacfwd(f))(jnp.asarray(x0)))
    fd = np.zeros_like(jac)
    for i in range(x0.size):
        h = 1e-6 * max(abs(x0[i]), 1.0)
        e = np.zeros_like(x0)
        e[i] = h
        fd[:, i] = (np.asarray(jf(x0 + e)) - np.asarray(jf(x0 - e))) / (2 * h)
    assert np.max(np.abs(jac - fd)) < 1e-6 * np.max(np.abs(fd))
    assert np.all(np.abs(fd[-2:, 4:7]).sum(1) > 0)  # the sun sensors see the attitude


def test_quantization_and_saturation_gradients_are_documented_steps():
    """Quantized output: a step function (zero derivative); saturated axis: zero derivative."""
    imu = fx.IMU(gyro_lsb=1e-3, gyro_max=0.02)
    z = {**imu.init_state(), "init": jnp.zeros(())}

    def rate(w):
        truth = {"sigma_BN": jnp.zeros(3), "omega_BN_B": w}
        return imu(1.0, truth, z, jnp.zeros(6))[1]["AngVelPlatform"]

    w = jnp.array([0.0123456, -0.0057, 0.05])
    rate = jax.jit(rate)
    out = np.asarray(rate(w))
    np.testing.assert_allclose(out, [0.012, -0.005, 0.02], atol=1e-15)  # toward zero; clipped
    np.testing.assert_array_equal(np.asarray(jax.jacfwd(rate)(w)), np.zeros((3, 3)))
