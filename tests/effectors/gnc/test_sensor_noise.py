"""Sensor noise (`effectors._gnc._sensors`): from `jax.random` keys (reproducible, different per
key), replayed from prescribed samples, white-noise statistics, bounded random walks, `vmap` over
keys; gradients of the sensors against central differences; the derivative at quantization and
saturation; refused arguments.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from tests.effectors.gnc.test_sensors import DIPOLE, R_SUN, SIM


# --------------------------------------------------------------------------------------------------
# Noise, vmap, gradients, refused arguments

# White noise of known standard deviation: 2000 samples estimate it to ~1.6 % (1 sigma); 6 % is
# ~4 sigma (deterministic with the fixed key).
NOISE_STD_RTOL = 0.06


def _noisy_run(key=None, samples=None, duration=3.0, std=1e-4):
    s = SIM
    sc = fx.Spacecraft(fx.Hub(s["mass"], s["I_B"]))
    y0 = sc.init_state(s["r_CN_N"], s["v_CN_N"], s["sigma_BN"], s["omega_BN_B"])
    sens = fx.Sensors(
        js.Clock(s["sensor_dt"]),
        [
            fx.IMU(gyro_noise_std=[std] * 3),
            fx.StarTracker(noise_std=[1e-5] * 3, walk_bounds=[2e-5] * 3),
        ],
        key=key,
        samples=samples,
    )
    return sc, y0, sens


def _gyro_series(sc, y0, sens, duration=3.0):
    sol = js.simulate(sc, y0, duration, dt=0.1, solver=js.RK4(), clocks=[sens], outputs=False)
    return sol.clock_logs["sensors"]["held"]["sensors"]["imu"]["AngVelPlatform"], sol


def test_noise_from_key_and_prescribed_samples():
    sc, y0, sens = _noisy_run(key=jax.random.key(7))
    w1, sol = _gyro_series(sc, y0, sens)
    # Row k of the draws is jax.random.normal(fold_in(key, k)) (row 0: the call at t0); the same
    # noise replayed from prescribed samples gives the same run.
    n_ticks = 7
    rows = np.stack([np.asarray(jax.random.normal(jax.random.fold_in(jax.random.key(7), k), (9,)))
                     for k in range(n_ticks)])  # fmt: skip
    sc, y0, replay = _noisy_run(samples=rows)
    np.testing.assert_allclose(_gyro_series(sc, y0, replay)[0], w1, rtol=0, atol=1e-15)
    # Too few rows: the draw past the last row fails (in a run: the run fails) rather than reuse
    # samples.
    short = _noisy_run(samples=rows[:3])[2]
    np.testing.assert_array_equal(short._samples(jnp.asarray(2.0)), rows[2])
    with pytest.raises(Exception, match="more often than `samples`"):
        short._samples(jnp.asarray(3.0))


def test_noise_statistics_and_walk_bounds():
    imu = fx.IMU(gyro_noise_std=[1e-3, 2e-3, 3e-3], gyro_walk_bounds=None)
    st = fx.StarTracker(noise_std=[1e-3] * 3, walk_bounds=[2e-3] * 3)
    truth = {
        "sigma_BN": jnp.zeros(3),
        "omega_BN_B": jnp.zeros(3),
        "r_BN_N": jnp.ones(3),
        "v_BN_N": jnp.zeros(3),
    }
    keys = jax.random.split(jax.random.key(0), 2000)

    def draw(k):
        z = imu.init_state()
        z = {**z, "init": jnp.zeros(())}  # past the first call
        return imu(1.0, truth, z, jax.random.normal(k, (6,)))[1]["AngVelPlatform"]

    w = np.asarray(jax.vmap(draw)(keys))
    np.testing.assert_allclose(w.std(0), [1e-3, 2e-3, 3e-3], rtol=NOISE_STD_RTOL)
    assert np.all(np.abs(w.mean(0)) < 4 * np.array([1e-3, 2e-3, 3e-3]) / np.sqrt(2000))

    def walk(z, w):
        z, _ = st(0.0, truth, z, w)
        return z, z["error"]

    _, errs = jax.lax.scan(walk, st.init_state(), jax.random.normal(jax.random.key(1), (500, 3)))
    assert float(jnp.max(jnp.abs(errs))) <= 2e-3
    assert float(jnp.max(jnp.abs(errs))) == 2e-3  # the walk reached its bound


def test_refused_arguments():
    with pytest.raises(ValueError, match=r"StarTracker: `dcm_CB` must be a proper orthonormal DCM"):
        fx.StarTracker(2 * np.eye(3))
    with pytest.raises(ValueError, match=r"StarTracker: `noise_std` must be >= 0 \[-\]"):
        fx.StarTracker(noise_std=[-1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"CenteredDipole: `planet_radius` must be > 0 \[m\]"):
        fx.CenteredDipole(1e-5, 0.0, 0.0, -1.0)
    with pytest.raises(ValueError, match=r"Magnetometer: `field` must be a CenteredDipole"):
        fx.Magnetometer(None)
    with pytest.raises(ValueError, match=r"Magnetometer: `max_output` must be >= `min_output`"):
        fx.Magnetometer(fx.CenteredDipole(**DIPOLE), min_output=1.0, max_output=0.0)
    with pytest.raises(ValueError, match=r"CoarseSunSensors: `fov` must be in \(0, pi\] \[rad\]"):
        fx.CoarseSunSensors([[1.0, 0.0, 0.0]], R_SUN, fov=4.0)
    with pytest.raises(ValueError, match=r"CoarseSunSensors: `nHat_B` must be unit"):
        fx.CoarseSunSensors([[2.0, 0.0, 0.0]], R_SUN)
    with pytest.raises(ValueError, match=r"CoarseSunSensors: `bias`.*shape \(1,\)"):
        fx.CoarseSunSensors([[1.0, 0.0, 0.0]], R_SUN, bias=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"IMU: `gyro_lsb` must be >= 0 \[rad/s\]"):
        fx.IMU(gyro_lsb=-1.0)
    with pytest.raises(ValueError, match=r"IMU: `accel_walk_bounds` must be > 0 \[m/s\^2\]"):
        fx.IMU(accel_walk_bounds=[0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"SimpleNav: `noise_std`.*shape \(15,\)"):
        fx.SimpleNav(noise_std=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"Sensors: `clock` must be a Clock"):
        fx.Sensors(0.5, [fx.StarTracker()])
    with pytest.raises(ValueError, match=r"Sensors: `sensors` must hold StarTracker"):
        fx.Sensors(js.Clock(0.5), [fx.HillPoint()])
    with pytest.raises(ValueError, match=r"Sensors: `sensors`.*st"):
        fx.Sensors(js.Clock(0.5), [fx.StarTracker(), fx.StarTracker()])
    with pytest.raises(ValueError, match=r"Sensors: give `key` or `samples`, not both"):
        fx.Sensors(
            js.Clock(0.5), [fx.StarTracker()], key=jax.random.key(0), samples=np.zeros((2, 3))
        )
    with pytest.raises(ValueError, match=r"Sensors: `samples` must have shape \(n, 3\)"):
        fx.Sensors(js.Clock(0.5), [fx.StarTracker()], samples=np.zeros((2, 4)))
