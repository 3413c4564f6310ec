"""Sensors (`effectors._gnc._sensors`) against live Basilisk (`bsk` 2.12.1) modules run standalone
on the same spacecraft states, tick by tick (`tests/reference/basilisk_gnc.py`), with the noise
off and every deterministic corruption on (bias, scale, quantization, saturation, platform DCMs,
field of view, Kelly factor, sun distance); then the noise: keys, prescribed samples, `vmap`,
statistics, gradients against central differences, refused arguments.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from jaxsim.kinematics import euler_axis_rotation


# Same formulas in float64, different operation orders: round-off of O(1) quantities (measured
# <= 4e-16 on quaternions and sun-sensor outputs, <= 2e-15 relative on fields and rates).
TOL_BSK_REL = 1e-12
TICK = 0.5  # [s] sensor period of the standalone runs
MU = 3.986004418e14


def _bsk():
    pytest.importorskip("Basilisk")
    from tests.reference import basilisk_gnc as bg

    return bg


def _states(n=5, seed=0):
    """Spacecraft states along a short arc: dict of arrays (n, ...)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * TICK
    r = np.stack([7000e3 * np.cos(1e-3 * t), 7000e3 * np.sin(1e-3 * t), 500e3 + 0 * t], 1)
    v = np.stack([-7.0e3 * np.sin(1e-3 * t), 7.0e3 * np.cos(1e-3 * t), 10.0 + 0 * t], 1)
    sigma = np.array([0.1, -0.2, 0.3]) + 0.02 * np.outer(t, [1.0, 0.5, -0.3])
    omega = np.array([0.01, -0.02, 0.03]) + 0.004 * rng.normal(size=(n, 3))
    return {"r_BN_N": r, "v_BN_N": v, "sigma_BN": sigma, "omega_BN_B": omega}


def _sc_msg(states, k, **extra):
    fields = {key: states[key][k] for key in ("r_BN_N", "v_BN_N", "sigma_BN", "omega_BN_B")}
    fields.update({key: val[k] for key, val in extra.items()})
    return ("SCStatesMsgPayload", fields)


def _run_ours(sensor, states, extra=None):
    z = sensor.init_state()
    outs = []
    for k in range(len(states["r_BN_N"])):
        truth = {key: jnp.asarray(v[k]) for key, v in states.items()}
        if extra is not None:
            truth.update({key: jnp.asarray(v[k]) for key, v in extra.items()})
        call = sensor.measure if isinstance(sensor, fx.IMU) else sensor
        z, out = call(k * TICK, truth, z, jnp.zeros(sensor.noise_dim))
        outs.append(out)
    return {key: np.stack([np.asarray(o[key]) for o in outs]) for key in outs[0]}


def _close(ours, ref, what, scale=None):
    ours, ref = np.asarray(ours), np.asarray(ref)
    scale = max(np.max(np.abs(ref)), 1e-300) if scale is None else scale
    err = np.max(np.abs(ours - ref)) / scale
    assert err < TOL_BSK_REL, f"{what}: rel err {err:.3e}"


DCM = np.asarray(euler_axis_rotation(3, 0.3) @ euler_axis_rotation(1, -0.7))  # a platform DCM


@pytest.mark.crossval
def test_star_tracker_matches_basilisk():
    bg = _bsk()
    st = _states()
    inputs = [{"scStateInMsg": _sc_msg(st, k)} for k in range(5)]
    ref = bg.run_module(
        "starTracker",
        {"dcm_CB": DCM},
        inputs,
        {"sensorOutMsg": ("qInrtl2Case", "timeTag")},
        dt=TICK,
    )
    ours = _run_ours(fx.StarTracker(DCM), st)
    _close(ours["qInrtl2Case"], ref["sensorOutMsg.qInrtl2Case"], "qInrtl2Case")
    # Basilisk's time tag is in integer nanoseconds; ours in seconds.
    np.testing.assert_allclose(ours["timeTag"] * 1e9, ref["sensorOutMsg.timeTag"], rtol=1e-15)


DIPOLE = dict(g10=-30926.00e-9, g11=-2318.00e-9, h11=5817.00e-9, planet_radius=6371.2e3)


@pytest.mark.crossval
def test_centered_dipole_and_magnetometer_match_basilisk():
    bg = _bsk()
    st = _states()
    # The field model alone.
    field = fx.CenteredDipole(**DIPOLE)
    cfg = {"g10": DIPOLE["g10"], "g11": DIPOLE["g11"], "h11": DIPOLE["h11"],
           "planetRadius": DIPOLE["planet_radius"]}  # fmt: skip
    inputs = [{"addSpacecraftToModel": _sc_msg(st, k)} for k in range(5)]
    ref = bg.run_module(
        "magneticFieldCenteredDipole", cfg, inputs, {"envOutMsgs[0]": ("magField_N",)}, dt=TICK
    )
    ours_B = np.stack([np.asarray(field(st["r_BN_N"][k])) for k in range(5)])
    _close(ours_B, ref["envOutMsgs[0].magField_N"], "magField_N")
    # The magnetometer on the field message: platform DCM, bias, scale, saturation.
    cfg = {"dcm_SB": DCM, "senBias": [1e-6, -2e-6, 5e-7], "scaleFactor": 1.3, "maxOutput": 2.5e-5,
           "minOutput": -2.0e-5}  # fmt: skip
    inputs = [
        {
            "stateInMsg": _sc_msg(st, k),
            "magInMsg": ("MagneticFieldMsgPayload", {"magField_N": ours_B[k]}),
        }
        for k in range(5)
    ]
    ref = bg.run_module("magnetometer", cfg, inputs, {"tamDataOutMsg": ("tam_S",)}, dt=TICK)
    tam = fx.Magnetometer(field, DCM, bias=cfg["senBias"], scale_factor=1.3, max_output=2.5e-5,
                          min_output=-2.0e-5)  # fmt: skip
    ours = _run_ours(tam, st)
    _close(ours["tam_S"], ref["tamDataOutMsg.tam_S"], "tam_S")
    assert np.any(np.abs(ours["tam_S"]) == 2.5e-5) or np.any(ours["tam_S"] == -2.0e-5)  # saturated


R_SUN = np.array([1.40e11, 4.0e10, -3.0e9])  # [m]: ~0.98 AU


@pytest.mark.crossval
def test_coarse_sun_sensors_match_basilisk():
    bg = _bsk()
    st = _states()
    normals = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-0.6, 0.0, 0.8], [0.0, -0.6, -0.8]])
    cfg = dict(fov=np.deg2rad(70.0), scale_factor=2.0, kelly_factor=0.2, max_output=1.8,
               min_output=0.05)  # fmt: skip
    bias = [0.01, -0.02, 0.0, 0.03]
    css = fx.CoarseSunSensors(normals, R_SUN, bias=bias, **cfg)
    ours = _run_ours(css, st)["OutputData"]
    for i, n in enumerate(normals):
        bsk_cfg = {"nHat_B": n, "fov": cfg["fov"], "scaleFactor": 2.0, "kellyFactor": 0.2,
                   "maxOutput": 1.8, "minOutput": 0.05, "senBias": bias[i], "senNoiseStd": 0.0}  # fmt: skip
        inputs = [
            {
                "stateInMsg": _sc_msg(st, k),
                "sunInMsg": ("SpicePlanetStateMsgPayload", {"PositionVector": R_SUN}),
            }
            for k in range(5)
        ]
        ref = bg.run_module(
            "coarseSunSensor", bsk_cfg, inputs, {"cssDataOutMsg": ("OutputData",)}, dt=TICK
        )
        # From the second call: the standalone runner's first call gives 0 in Basilisk's CSS
        # (inputs written at t = 0 are not seen by it); in a simulation the t = 0 call measures
        # (`test_sensors_on_a_clock_match_basilisk`).
        _close(ours[1:, i], ref["cssDataOutMsg.OutputData"][1:], f"css {i}", scale=1.0)
    # Every branch was exercised: in view, out of view (floored to min_output), saturated.
    assert np.any(ours[1:] == 0.05) and np.any(ours[1:] == 1.8)
    assert np.any((ours[1:] > 0.05) & (ours[1:] < 1.8))


@pytest.mark.crossval
def test_coarse_sun_sensor_eclipse_factor_matches_basilisk():
    """In the penumbra of a planet at the origin: Basilisk's shadowFactor input vs ours."""
    bg = _bsk()
    r_sc = np.array([-6800e3, 0.0, 6371e3 * 1.0])  # behind the Earth, near the shadow edge
    st = {"r_BN_N": r_sc[None], "v_BN_N": np.zeros((1, 3)), "sigma_BN": np.zeros((1, 3)),
          "omega_BN_B": np.zeros((1, 3))}  # fmt: skip
    sun = np.array([1.496e11, 0.0, 0.0])
    css = fx.CoarseSunSensors([[1.0, 0.0, 0.0]], sun, fov=1.5, occulter_radius=6378.1363e3)
    ours = _run_ours(css, st)["OutputData"][0, 0]
    fs = float(fx.conical_illumination(r_sc, sun, np.zeros(3), 6378.1363e3))
    assert 0.0 < fs < 1.0  # a penumbra case
    inputs = [{"stateInMsg": _sc_msg(st, 0), "sunInMsg": ("SpicePlanetStateMsgPayload", {"PositionVector": sun}),
               "sunEclipseInMsg": ("EclipseMsgPayload", {"illuminationFactor": fs})}]  # fmt: skip
    ref = bg.run_module("coarseSunSensor", {"nHat_B": [1.0, 0.0, 0.0], "senNoiseStd": 0.0, "fov": 1.5},
                        inputs * 2, {"cssDataOutMsg": ("OutputData",)})  # fmt: skip
    _close(ours, ref["cssDataOutMsg.OutputData"][1], "css eclipse", scale=1.0)


@pytest.mark.crossval
def test_imu_matches_basilisk():
    bg = _bsk()
    st = _states(6)
    rng = np.random.default_rng(5)
    extra = {
        "omegaDot_BN_B": 1e-3 * rng.normal(size=(6, 3)),
        "nonConservativeAccelpntB_B": 1e-2 * rng.normal(size=(6, 3)),
        "TotalAccumDV_BN_B": np.cumsum(5e-3 * rng.normal(size=(6, 3)), 0),
    }
    pos = [0.3, -0.2, 0.5]
    bias_g, bias_a = [1e-4, -2e-4, 3e-5], [1e-3, 0.0, -2e-3]
    lsb_g, lsb_a = 1e-4, 1e-3
    max_g, max_a = 0.03, 0.02

    def setup(mod, keep):
        mod.setLSBs(lsb_a, lsb_g)

    cfg = {"dcm_PB": DCM, "sensorPos_B": pos, "senRotBias": bias_g, "senTransBias": bias_a,
           "senRotMax": max_g, "senTransMax": max_a}  # fmt: skip
    inputs = [{"scStateInMsg": _sc_msg(st, k, **extra)} for k in range(6)]
    fields = ("AngVelPlatform", "DRFramePlatform", "AccelPlatform", "DVFramePlatform")
    ref = bg.run_module("imuSensor", cfg, inputs, {"sensorOutMsg": fields}, dt=TICK, setup=setup)
    imu = fx.IMU(DCM, pos, gyro_bias=bias_g, accel_bias=bias_a, gyro_lsb=lsb_g, accel_lsb=lsb_a,
                 gyro_max=max_g, accel_max=max_a)  # fmt: skip
    ours = _run_ours(imu, st, extra)
    for f in fields:
        _close(ours[f], ref[f"sensorOutMsg.{f}"], f)
    assert np.all(ours["AngVelPlatform"][0] == 0.0)  # Basilisk's first call: zeros


@pytest.mark.crossval
def test_simple_nav_matches_basilisk():
    bg = _bsk()
    st = _states()
    inputs = [
        {"scStateInMsg": _sc_msg(st, k),
         "sunStateInMsg": ("SpicePlanetStateMsgPayload", {"PositionVector": R_SUN})}
        for k in range(5)
    ]  # fmt: skip
    ref = bg.run_module("simpleNav", {}, inputs, {"attOutMsg": ("sigma_BN", "omega_BN_B", "vehSunPntBdy"),
                                                  "transOutMsg": ("r_BN_N", "v_BN_N")}, dt=TICK)  # fmt: skip
    ours = _run_ours(fx.SimpleNav(R_SUN), st)
    for key in ("sigma_BN", "omega_BN_B", "vehSunPntBdy"):
        _close(ours[key], ref[f"attOutMsg.{key}"], key)
    for key in ("r_BN_N", "v_BN_N"):
        _close(ours[key], ref[f"transOutMsg.{key}"], key)


SIM = {
    "mass": 300.0,
    "I_B": [[15.0, 0.5, -0.3], [0.5, 12.0, 0.2], [-0.3, 0.2, 10.0]],
    "r_CN_N": [7000e3, 0.0, 300e3],
    "v_CN_N": [0.0, 7.4e3, 1.0e3],
    "sigma_BN": [0.1, -0.2, 0.3],
    "omega_BN_B": [0.02, -0.03, 0.05],
    "mu": MU,
    "dyn_dt": 0.1,
    "sensor_dt": 0.5,
    "duration": 3.0,
    "dcm_CB": DCM,
    "dipole": DIPOLE,
    "dcm_SB": DCM.T,
    "css_nHat_B": [0.0, -0.6, -0.8],
    "css_fov": 1.4,
    "r_sun_N": R_SUN,
    "dcm_PB": DCM,
    "gyro_bias": [1e-4, -2e-4, 3e-5],
}
# The sensors read the state that Basilisk's RK4 wrote: the same RK4 steps in jaxsim, so the
# states agree to round-off over the 30 steps (measured ~1e-15), and the sensor outputs with them.
TOL_SIM = 1e-12


def _sensor_suite():
    s = SIM
    return fx.Sensors(
        js.Clock(s["sensor_dt"]),
        [
            fx.StarTracker(s["dcm_CB"]),
            fx.Magnetometer(fx.CenteredDipole(**s["dipole"]), s["dcm_SB"]),
            fx.CoarseSunSensors([s["css_nHat_B"]], s["r_sun_N"], fov=s["css_fov"]),
            fx.IMU(s["dcm_PB"], gyro_bias=s["gyro_bias"]),
            fx.SimpleNav(s["r_sun_N"]),
        ],
    )


@pytest.mark.crossval
def test_sensors_on_a_clock_match_basilisk():
    """Timing: Basilisk calls the sensors at t = 0 and at every period, after the dynamics task
    (each reads the state just integrated to that time), and the IMU's first call outputs zeros.
    `Sensors` on a clock (with `tick_at_t0`) gives the same outputs at the same times."""
    bg = _bsk()
    ref = bg.run_sensor_sim(SIM)
    s = SIM
    sc = fx.Spacecraft(fx.Hub(s["mass"], s["I_B"]), gravity=[fx.PointMassGravity(MU)])
    y0 = sc.init_state(s["r_CN_N"], s["v_CN_N"], s["sigma_BN"], s["omega_BN_B"])
    sens = _sensor_suite()
    sol = js.simulate(sc, y0, s["duration"], dt=s["dyn_dt"], solver=js.RK4(), clocks=[sens],
                      sample_dt=s["sensor_dt"])  # fmt: skip
    first = sol.held["sensors"]["sensors"]  # held over [0, 0.5]: the call at t = 0
    log = sol.clock_logs["sensors"]["held"]["sensors"]  # post-tick outputs at 0.5, 1.0, ...
    np.testing.assert_allclose(np.asarray(sol.clock_logs["sensors"]["t"]), ref["t"][1:], atol=1e-12)

    def series(sensor, key):
        return np.concatenate([np.asarray(first[sensor][key][:1]), np.asarray(log[sensor][key])])

    _close(series("st", "qInrtl2Case"), ref["qInrtl2Case"], "star tracker")
    _close(series("tam", "tam_S"), ref["tam_S"], "magnetometer")
    _close(series("css", "OutputData")[:, 0], ref["css"], "css", scale=1.0)
    _close(series("imu", "AngVelPlatform"), ref["AngVelPlatform"], "imu rate")
    _close(series("imu", "DRFramePlatform"), ref["DRFramePlatform"], "imu angle")
    _close(series("nav", "sigma_BN"), ref["sigma_BN"], "nav attitude")
    _close(series("nav", "vehSunPntBdy"), ref["vehSunPntBdy"], "nav sun heading")
    assert np.all(ref["AngVelPlatform"][0] == 0.0) and np.all(ref["AngVelPlatform"][1] != 0.0)
    assert np.all(ref["css"] > 0.1)  # the sun is in the sensor's view throughout
