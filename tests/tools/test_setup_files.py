"""Saved setups (`effectors.save_setup` / `load_setup`, `python -m effectors.run`).

Oracles: every public effector of `effectors/__init__.py`, built with representative arguments,
saved and loaded, equals the original pytree leaf by leaf (values, shapes, dtypes, static
fields); a spacecraft run from a loaded setup equals the run of the original bitwise; invalid
files are refused with the key and its expected type; the runner writes the schema's Dataset.
"""

import inspect
import json
import subprocess
import sys

import equinox as eqx
import jax
import numpy as np
import pytest

import effectors as fx
import jaxsim as js
from effectors._tools._setup_files import _NOT_DECLARATIVE


MU = 3.986004415e14  # [m^3/s^2]
I_B = np.diag([900.0, 800.0, 600.0])  # [kg m^2]
R0 = [7000e3, 0.0, 0.0]  # [m]
V0 = [0.0, 7546.05, 0.0]  # [m/s]


def _earth():
    return fx.PointMassGravity(MU, name="earth")


def _tank():
    return fx.FuelTank(
        fx.ConstantVolumeTank(prop_mass_init=50.0, radius=0.3),
        r_TB_B=[0.0, 0.0, -0.5],
        thrusters=("thr",),
        name="tank",
    )


# One representative instance of each public effector (and of the objects they take: gravity
# bodies, atmosphere, tank models, signals, flight software). Keys: the class names.
def _instances() -> dict:
    earth = _earth()
    atmosphere = fx.ExponentialAtmosphere(rho0=1.2, scale_height=8500.0, planet_radius=6378e3)
    panels = fx.HingedRigidBodies(
        mass=[10.0, 12.0],
        IPntS_S=[np.diag([1.0, 2.0, 3.0]), np.diag([1.5, 2.5, 3.5])],
        d=[1.0, 1.2],
        k=[50.0, 60.0],
        r_HB_B=[[0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]],
        dcm_HB=[np.eye(3), np.diag([-1.0, -1.0, 1.0])],
        c=[1.0, 2.0],
        theta0=[0.1, -0.1],
        attached={0: fx.ExtForceTorque(torque_B=[0.0, 0.0, 1e-3], name="panel_torque")},
        name="panels",
    )
    return {
        "Hub": fx.Hub(mass=750.0, IHubPntBc_B=I_B, r_BcB_B=[0.0, 0.0, 0.1]),
        "PointMassGravity": earth,
        "SphericalHarmonicGravity": fx.SphericalHarmonicGravity(
            MU,
            6378.1363e3,
            C=[[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [-4.84e-4, 0.0, 2.4e-6]],
            S=[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, -1.4e-6]],
            name="earth_sh",
        ),  # fmt: skip
        "ExponentialAtmosphere": atmosphere,
        "HarrisPriesterAtmosphere": fx.HarrisPriesterAtmosphere([1.496e11, 0.0, 0.0], n=6),
        "SpaceWeather": fx.SpaceWeather.constant(f107=180.0, f107a=160.0, ap=12.0),
        "ReactionWheels": fx.ReactionWheels(
            gsHat_B=np.eye(3),
            Js=[0.1, 0.1, 0.12],
            Omega=[50.0, -30.0, 20.0],
            motor_torque=js.Step(5.0, [0.0, 0.0, 0.0], [1e-3, 0.0, 0.0]),
            name="rw",
        ),  # fmt: skip
        "HingedRigidBodies": panels,
        "SpinningBodies": fx.SpinningBodies(
            mass=[5.0],
            ISPntSc_S=[np.diag([0.1, 0.2, 0.3])],
            dcm_S0B=[np.eye(3)],
            sHat_S=[[0.0, 0.0, 1.0]],
            r_SB_B=[[0.0, 0.3, 0.0]],
            r_ScS_S=[[0.0, 0.0, 0.05]],
            thetaDot0=[1.0],
            name="spinners",
        ),  # fmt: skip
        "SpringMassDampers": fx.SpringMassDampers(
            mass=[2.0],
            k=[100.0],
            pHat_B=[[1.0, 0.0, 0.0]],
            r_PB_B=[[0.0, 0.0, 0.4]],
            c=[0.5],
            rho0=[0.01],
            name="slosh",
        ),  # fmt: skip
        "GravityGradient": fx.GravityGradient(earth),
        "ExtForceTorque": fx.ExtForceTorque(
            force_B=[0.1, 0.0, 0.0], torque_B=js.Ramp(2.0, [1e-5, 0.0, 0.0], [1e-4, 0.0, 0.0])
        ),
        "Drag": fx.Drag(
            atmosphere, Cd=2.2, area=3.0, r_cp_B=[0.1, 0.0, 0.0], planet_omega_N=fx.astro.EARTH
        ),  # fmt: skip
        "CannonballSRP": fx.CannonballSRP(area=4.0, r_sun_N=[1.496e11, 0.0, 0.0]),
        "Eclipse": fx.Eclipse([1.496e11, 0.0, 0.0]),
        "ThirdBodyGravity": fx.ThirdBodyGravity(4.9028e12, [3.844e8, 0.0, 0.0], name="moon"),
        "MeanRevertingNoise": fx.MeanRevertingNoise(tau=30.0, sigma=[1e-4, 1e-4, 1e-4]),
        "GeometricBrownianMotion": fx.GeometricBrownianMotion(mu=1.0, tau=100.0, sigma_st=0.1),
        "StochasticTorque": fx.StochasticTorque("noise", scale=2.0),
        "Thrusters": fx.Thrusters(
            r_TB_B=[[0.0, 0.0, -1.0]],
            tHat_B=[[0.0, 0.0, 1.0]],
            max_thrust=[1.0],
            Isp=[220.0],
            throttle=fx.OnTimeSchedule([1.0, 5.0], [[0.5], [0.25]]),
            name="thr",
        ),  # fmt: skip
        "ThrusterStateEffector": fx.ThrusterStateEffector(
            r_TB_B=[[0.0, 0.0, -1.0]],
            tHat_B=[[0.0, 0.0, 1.0]],
            max_thrust=[1.0],
            Isp=[220.0],
            cutoff_frequency=[10.0],
            name="thr_state",
        ),  # fmt: skip
        "FuelTank": _tank(),
        "OnTimeSchedule": fx.OnTimeSchedule([1.0, 5.0], [[0.5], [0.25]]),
        "MRPFeedback": fx.MRPFeedback(K=4.0, P=7.0, I_B=I_B),
        "RWMotorTorque": fx.RWMotorTorque(np.eye(3)),
        "RWAttitudeFSW": fx.RWAttitudeFSW(
            js.Clock("1/10"),
            fx.MRPFeedback(K=4.0, P=7.0, I_B=I_B),
            fx.RWMotorTorque(np.eye(3)),
            sigma_RN=[0.3, -0.2, 0.1],
        ),  # fmt: skip
        "AttitudeNavigation": fx.AttitudeNavigation(),
        "Inertial3D": fx.Inertial3D([0.1, 0.2, -0.3]),
        "HillPoint": fx.HillPoint([1e3, 0.0, 0.0], [0.0, 1.0, 0.0]),
        "VelocityPoint": fx.VelocityPoint(MU),
        "SunSafePoint": fx.SunSafePoint(
            [0.0, 0.0, 1.0],
            min_unit_mag=0.1,
            small_angle=1e-3,
            sun_axis_spin_rate=0.01,
            omega_RN_B=[0.0, 0.01, 0.0],
        ),
        "LocationPointing": fx.LocationPointing(
            [0.0, 0.0, 1.0], [6378e3, 0.0, 0.0], use_boresight_rate_damping=True
        ),
        "AttTrackingError": fx.AttTrackingError([0.01, 0.0, 0.0]),
        "CSSWlsEst": fx.CSSWlsEst(np.eye(3), CBias=[1.0, 0.9, 1.1], sensorUseThresh=0.1),
        "SunlineEKF": fx.SunlineEKF(np.eye(3), qProcVal=1e-6, qObsVal=4e-6, eKFSwitch=5.0),
        "AttitudeMEKF": fx.AttitudeMEKF(3e-5, 3e-8, [1e-4, 1e-4, 2e-4]),
        "ThrFiringSchmitt": fx.ThrFiringSchmitt([1.0, 2.0], 0.02, 0.6, 0.3, base_thrust_state=1),
        "StarTracker": fx.StarTracker(np.eye(3), noise_std=[1e-5] * 3, walk_bounds=[1e-4] * 3),
        "CenteredDipole": fx.CenteredDipole(-3e-5, -2e-6, 6e-6, 6371.2e3),
        "Magnetometer": fx.Magnetometer(
            fx.CenteredDipole(-3e-5, -2e-6, 6e-6, 6371.2e3), bias=[1e-7, 0.0, 0.0], max_output=1e-4
        ),
        "CoarseSunSensors": fx.CoarseSunSensors(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],
            [1.496e11, 0.0, 0.0],
            kelly_factor=0.1,
            occulter_radius=6378e3,
        ),  # fmt: skip
        "IMU": fx.IMU(gyro_bias=[1e-5, 0.0, 0.0], gyro_lsb=1e-6, gyro_noise_std=[1e-6] * 3),
        "SimpleNav": fx.SimpleNav([1.496e11, 0.0, 0.0], noise_std=[1.0] * 15),
        "Sensors": fx.Sensors(
            js.Clock("1/2"), [fx.StarTracker(), fx.IMU()], key=jax.random.key(3), name="sens"
        ),
        "ConstantVolumeTank": fx.ConstantVolumeTank(prop_mass_init=50.0, radius=0.3),
        "ConstantDensityTank": fx.ConstantDensityTank(prop_mass_init=50.0, radius=0.3),
        "EmptyingTank": fx.EmptyingTank(prop_mass_init=50.0, radius=0.3),
        "UniformBurnTank": fx.UniformBurnTank(prop_mass_init=50.0, radius=0.3, length=0.5),
        "CentrifugalBurnTank": fx.CentrifugalBurnTank(prop_mass_init=50.0, radius=0.3, length=0.5),
        "Spacecraft": _spacecraft(),
    }


def _spacecraft():
    earth = _earth()
    return fx.Spacecraft(
        fx.Hub(mass=750.0, IHubPntBc_B=I_B),
        state_effectors=[
            fx.ReactionWheels(
                gsHat_B=np.eye(3),
                Js=[0.1] * 3,
                Omega=[50.0, -30.0, 20.0],
                motor_torque=[1e-3, -5e-4, 8e-4],
                name="rw",
            ),  # fmt: skip
            fx.HingedRigidBodies(
                mass=[10.0, 10.0],
                IPntS_S=[np.diag([1.0, 2.0, 3.0])] * 2,
                d=[1.0, 1.0],
                k=[50.0, 50.0],
                r_HB_B=[[0.5, 0.0, 0.0], [-0.5, 0.0, 0.0]],
                dcm_HB=[np.eye(3), np.diag([-1.0, -1.0, 1.0])],
                c=[1.0, 1.0],
                theta0=[0.1, 0.0],
                name="panels",
            ),  # fmt: skip
        ],
        dynamic_effectors=[fx.GravityGradient(earth), fx.ExtForceTorque(torque_B=[1e-4, 0, 0])],
        gravity=[earth],
        name="craft",
    )


# Classes of `effectors/__init__.py` that are not effectors (contracts, context and
# contribution records built by the spacecraft at run time) or are not declarative: the one list
# that `save_setup` and `load_setup` consult.
_NOT_SAVED = set(_NOT_DECLARATIVE)


def _public_classes():
    names = []
    for name in dir(fx):
        cls = getattr(fx, name)
        if isinstance(cls, type) and issubclass(cls, eqx.Module) and not inspect.isabstract(cls):
            if not name.startswith(("Abstract", "_")) and name not in _NOT_SAVED:
                names.append(name)
    return sorted(names)


def test_every_public_class_has_an_instance_here():
    """A new public effector must be added to `_instances` (and so to the round trip)."""
    assert set(_public_classes()) <= set(_instances()), set(_public_classes()) - set(_instances())


def _assert_same_pytree(a, b, what):
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    assert ta == tb, f"{what}: structure (static fields) differs"
    for i, (x, y) in enumerate(zip(la, lb, strict=True)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: leaf {i}"
        np.testing.assert_array_equal(x, y, err_msg=f"{what}: leaf {i}")


@pytest.mark.parametrize("name", sorted(_instances()))
def test_round_trip_of_every_public_class(name, tmp_path):
    obj = _instances()[name]
    described = fx.describe(obj)
    assert described["type"] == f"effectors.{name}"
    back = fx.build(json.loads(json.dumps(described)))
    _assert_same_pytree(obj, back, name)


@pytest.mark.parametrize(
    "signal",
    [
        js.controls.PiecewiseConstant([1.0], [[0.0] * 3, [1e-3, 0.0, 0.0]]),
        js.controls.PiecewiseLinear([0.0, 1.0, 2.0], [[0.0] * 3, [1e-3, 0.0, 0.0], [0.0] * 3]),
        js.controls.CubicSpline([0.0, 1.0, 2.0], [[0.0] * 3, [1e-3, 0.0, 0.0], [0.0] * 3]),
        js.controls.SwitchingTimes([0.5, 1.5], [[1e-3, 0.0, 0.0], [-1e-3, 0.0, 0.0]]),
    ],
    ids=lambda s: type(s).__name__,
)
def test_control_parameterizations_round_trip(signal):
    """The public control parameterizations (`jaxsim.controls`) drive an effector in a setup."""
    obj = fx.ExtForceTorque(torque_B=signal)
    back = fx.build(json.loads(json.dumps(fx.describe(obj))))
    _assert_same_pytree(obj, back, type(signal).__name__)


def _small_spacecraft():
    """A hub with three wheels and a scheduled torque (a small program to compile)."""
    return fx.Spacecraft(
        fx.Hub(mass=750.0, IHubPntBc_B=I_B),
        state_effectors=[
            fx.ReactionWheels(gsHat_B=np.eye(3), Js=[0.1] * 3, Omega=[50.0, -30.0, 20.0], name="rw")
        ],
        dynamic_effectors=[fx.ExtForceTorque(torque_B=js.Step(0.5, [0.0] * 3, [1e-3, 0.0, 0.0]))],
        name="craft",
    )


def test_spacecraft_setup_runs_equal(tmp_path):
    sc = _small_spacecraft()
    y0 = sc.init_state(R0, V0, [0.1, 0.2, -0.3], [1e-3, -1e-2, 3e-2])
    settings = dict(t1=1.0, dt=0.1, sample_dt=0.5, solver=js.RK4())
    path = tmp_path / "craft.json"
    fx.save_setup(path, sc, y0, epoch="2026-01-01T00:00:00+00:00", **settings)
    setup = fx.load_setup(path)
    _assert_same_pytree(sc, setup.model, "Spacecraft")
    _assert_same_pytree(y0, jax.tree.map(np.asarray, setup.y0), "y0")
    ref = js.simulate(sc, y0, **settings)
    sol = setup.run()
    _assert_same_pytree((ref.ys, ref.outputs), (sol.ys, sol.outputs), "run")
    ds = setup.to_xarray(sol)
    assert ds.attrs["epoch"] == "2026-01-01T00:00:00+00:00" and ds.attrs["solver"] == "RK4"
    assert ds["rw.Omega"].dims == ("time", "wheel")


def test_adaptive_settings_and_flight_software_round_trip(tmp_path):
    """Solver settings and a clock with flight software: loaded as given (runs: the slow test
    below)."""
    sc = _small_spacecraft()
    guided = fx.RWAttitudeFSW(
        js.Clock("1/10"),
        fx.MRPFeedback(K=4.0, P=7.0, I_B=I_B),
        fx.RWMotorTorque(np.eye(3)),
        guidance=fx.HillPoint(),
        tracking=fx.AttTrackingError([0.01, 0.0, 0.0]),
    )
    _assert_same_pytree(guided, fx.build(json.loads(json.dumps(fx.describe(guided)))), "guided")
    # The spacecraft key and the sun position live in the navigation: read back through it.
    keyed = fx.RWAttitudeFSW(
        js.Clock("1/10"),
        fx.MRPFeedback(K=4.0, P=7.0, I_B=I_B),
        fx.RWMotorTorque(np.eye(3)),
        guidance=fx.SunSafePoint([0.0, 0.0, 1.0]),
        r_sun_N=[1.496e11, 0.0, 0.0],
        spacecraft="sat",
    )
    _assert_same_pytree(keyed, fx.build(json.loads(json.dumps(fx.describe(keyed)))), "keyed")
    fsw = fx.RWAttitudeFSW(
        js.Clock("1/10"), fx.MRPFeedback(K=4.0, P=7.0, I_B=I_B), fx.RWMotorTorque(np.eye(3)),
        sigma_RN=[0.3, -0.2, 0.1],
    )  # fmt: skip
    path = tmp_path / "fsw.json"
    y0 = sc.init_state(omega_BN_B=[0.0, 0.0, 0.01])
    fx.save_setup(path, sc, y0, t1=0.3, solver=js.Tsit5(), rtol=1e-9, atol=1e-9, clocks=(fsw,))
    setup = fx.load_setup(path)
    assert setup.settings["rtol"] == 1e-9 and isinstance(setup.settings["solver"], js.Tsit5)
    _assert_same_pytree(fsw, setup.settings["clocks"][0], "RWAttitudeFSW")
    assert setup.settings["t1"] == 0.3 and setup.settings["atol"] == 1e-9


@pytest.mark.slow  # compiles the clocked driver twice (about 25 s on 2 busy cores)
def test_flight_software_setup_runs_equal(tmp_path):
    sc = _small_spacecraft()
    fsw = fx.RWAttitudeFSW(
        js.Clock("1/10"), fx.MRPFeedback(K=4.0, P=7.0, I_B=I_B), fx.RWMotorTorque(np.eye(3)),
        sigma_RN=[0.3, -0.2, 0.1],
    )  # fmt: skip
    y0 = sc.init_state(omega_BN_B=[0.0, 0.0, 0.01])
    fx.save_setup(tmp_path / "f.json", sc, y0, t1=0.3, solver=js.Tsit5(), rtol=1e-9, atol=1e-9,
                  clocks=(fsw,))  # fmt: skip
    ref = js.simulate(sc, y0, 0.3, solver=js.Tsit5(), rtol=1e-9, atol=1e-9, clocks=(fsw,))
    sol = fx.load_setup(tmp_path / "f.json").run()
    _assert_same_pytree(ref.ys, sol.ys, "run with flight software")


def test_not_declarative_refused_by_name(tmp_path):
    sc = _spacecraft()
    with pytest.raises(TypeError, match="not declarative"):
        fx.save_setup(tmp_path / "e.json", sc, t1=1.0, dt=0.1, events=(lambda t, y, a: t,))
    changed = eqx.tree_at(lambda s: s.hub.mass, sc, 800.0)  # consistent: saved with its value
    fx.save_setup(tmp_path / "c.json", changed, t1=1.0, dt=0.1)
    assert float(fx.load_setup(tmp_path / "c.json").model.hub.mass) == 800.0


@pytest.mark.parametrize(
    "data, message",
    [
        ({"model": {"type": "effectors.Hub", "mass": 1.0, "IHubPntBc_B": np.eye(3).tolist()},
          "simulate": {"t1": "ten"}},
         r"`simulate.t1` must be a number \[s\]; got 'ten'"),
        ({"model": {"type": "effectors.Hub", "mass": 1.0}, "simulate": {"t1": 1.0, "dtt": 0.1}},
         r"`simulate.dtt` is not a setting"),
        ({"model": {"type": "os.system"}, "simulate": {"t1": 1.0}},
         r"`model.type` must name a public class of effectors, jaxsim"),
        ({"model": {"type": "effectors.Hub", "mas": 1.0}, "simulate": {"t1": 1.0}},
         r"`model.mas` is not an argument of Hub"),
        ({"modle": {}}, r"unknown key `modle`"),
        ({"model": {"type": "effectors.Hub", "mass": -1.0, "IHubPntBc_B": np.eye(3).tolist()},
          "simulate": {"t1": 1.0}},
         r"`model` \(Hub\) could not be built"),
    ],
)  # fmt: skip
def test_invalid_files_name_the_key(data, message, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        fx.load_setup(path)


def test_toml_setup_and_runner(tmp_path):
    """A hand-written TOML setup loads like JSON; `python -m effectors.run` writes the run's
    Dataset (the schema of `jaxsim.results.to_xarray`) to Zarr."""
    xr = pytest.importorskip("xarray")
    pytest.importorskip("zarr")
    toml = tmp_path / "hub.toml"
    toml.write_text(
        'epoch = "2026-01-01T00:00:00+00:00"\n'
        "[model]\n"
        'type = "effectors.Spacecraft"\n'
        "[model.hub]\n"
        'type = "effectors.Hub"\n'
        "mass = 100.0\n"
        "IHubPntBc_B = [[10.0, 0.0, 0.0], [0.0, 20.0, 0.0], [0.0, 0.0, 30.0]]\n"
        "[y0.hub]\n"
        "r_BN_N = [0.0, 0.0, 0.0]\n"
        "v_BN_N = [0.0, 0.0, 0.0]\n"
        "sigma_BN = [0.0, 0.0, 0.0]\n"
        "omega_BN_B = [0.1, 0.0, 0.01]\n"
        "[simulate]\n"
        "t1 = 0.4\n"
        "dt = 0.1\n"
        "sample_dt = 0.2\n"
    )
    setup = fx.load_setup(toml)
    out = tmp_path / "hub.zarr"
    subprocess.run(
        [sys.executable, "-W", "error", "-m", "effectors.run", str(toml), "-o", str(out)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    ds = xr.open_zarr(out, consolidated=False).load()
    sol = setup.run()
    np.testing.assert_array_equal(ds["omega_BN_B"].values, sol.outputs["omega_BN_B"])
    assert ds.attrs["epoch"] == "2026-01-01T00:00:00+00:00" and ds.attrs["dt"] == 0.1
    assert list(ds["xyz"].values) == ["x", "y", "z"]


def test_campaign_records_its_setup(tmp_path):
    """`run_campaign(..., setup=path)`: the setup's description and file in the store's
    attributes, as `open_campaign` shows them."""
    pytest.importorskip("xarray")
    pytest.importorskip("zarr")
    from jaxsim import montecarlo as mc
    from tests._sharding_worker import oscillator_member

    path = tmp_path / "setup.json"
    written = fx.save_setup(path, _small_spacecraft(), t1=1.0, dt=0.1)
    params = {"a": np.array([0.5, 1.0]), "x0": np.array([1.0, 0.9])}
    mc.run_campaign(oscillator_member, params, tmp_path / "c", chunk_size=2, setup=path)
    ds = mc.open_campaign(tmp_path / "c")
    assert ds.attrs["setup"] == written and ds.attrs["setup_file"] == str(path)
    with pytest.raises(ValueError, match="`setup` must be a path or a JSON-serializable"):
        mc.run_campaign(oscillator_member, params, tmp_path / "d", chunk_size=2, setup={1j})
