"""effectors: the spacecraft physics library built on the jaxsim engine.

A `Spacecraft` is a rigid `Hub` plus state effectors (with their own states, coupled through
back-substitution) and dynamic effectors (external loads), in gravity fields.

Submodules imported on their own: `effectors.scenarios` (benchmark spacecraft), `effectors.plotting`
and `effectors.animation` (spacecraft plots and drawing, on the engine's generic ones),
and `effectors.demo` (`python -m effectors.demo`); the optimization demos are the top-level
`examples/` folder of a checkout (not installed).
`write_vizard` / `read_vizard` (module `effectors.vizard`) export a run to Basilisk's Vizard viewer.
`effectors.astro` (also `fx.astro`): bodies and constants, orbital elements, epochs and time scales.
"""

import jaxsim as _jaxsim  # noqa: F401  (enables float64 before any array is built)

from . import astro as astro
from ._actuators._reaction_wheels import ReactionWheels as ReactionWheels
from ._actuators._thruster_state_effector import ThrusterStateEffector as ThrusterStateEffector
from ._actuators._thrusters import (
    OnTimeFSW as OnTimeFSW,
    OnTimeSchedule as OnTimeSchedule,
    Thrusters as Thrusters,
)
from ._bodies._fuel_tank import (
    AbstractTankModel as AbstractTankModel,
    CentrifugalBurnTank as CentrifugalBurnTank,
    ConstantDensityTank as ConstantDensityTank,
    ConstantVolumeTank as ConstantVolumeTank,
    EmptyingTank as EmptyingTank,
    FuelTank as FuelTank,
    TankProps as TankProps,
    UniformBurnTank as UniformBurnTank,
)
from ._bodies._hinged_rigid_bodies import HingedRigidBodies as HingedRigidBodies
from ._bodies._mujoco_scene import MuJoCoScene as MuJoCoScene
from ._bodies._spinning_body import SpinningBodies as SpinningBodies
from ._bodies._spring_mass_damper import SpringMassDampers as SpringMassDampers
from ._environment._eclipse import Eclipse as Eclipse
from ._environment._exponential_atmosphere import ExponentialAtmosphere as ExponentialAtmosphere
from ._environment._harris_priester import HarrisPriesterAtmosphere as HarrisPriesterAtmosphere
from ._environment._nrlmsise00 import (
    NRLMSISE00Output as NRLMSISE00Output,
    nrlmsise00 as nrlmsise00,
)
from ._environment._nrlmsise00_atmosphere import NRLMSISE00Atmosphere as NRLMSISE00Atmosphere
from ._environment._shadow import conical_illumination as conical_illumination
from ._environment._space_weather import SpaceWeather as SpaceWeather
from ._forces._drag import Drag as Drag
from ._forces._ext_force_torque import ExtForceTorque as ExtForceTorque
from ._forces._gravity import (
    AbstractGravityBody as AbstractGravityBody,
    PointMassGravity as PointMassGravity,
    SphericalHarmonicGravity as SphericalHarmonicGravity,
)
from ._forces._gravity_gradient import GravityGradient as GravityGradient
from ._forces._srp import CannonballSRP as CannonballSRP
from ._forces._stochastic_torque import StochasticTorque as StochasticTorque
from ._forces._third_body import (
    ThirdBodyGravity as ThirdBodyGravity,
    battin_f as battin_f,
    third_body_acceleration as third_body_acceleration,
)
from ._fsw._estimation import (
    AttitudeMEKF as AttitudeMEKF,
    CSSWlsEst as CSSWlsEst,
    SunlineEKF as SunlineEKF,
)
from ._fsw._flight_software import (
    AttitudeNavigation as AttitudeNavigation,
    MRPFeedback as MRPFeedback,
    RWAttitudeFSW as RWAttitudeFSW,
    RWMotorTorque as RWMotorTorque,
    attitude_error as attitude_error,
    mrp_subtract as mrp_subtract,
)
from ._gnc._guidance import (
    AttTrackingError as AttTrackingError,
    HillPoint as HillPoint,
    Inertial3D as Inertial3D,
    LocationPointing as LocationPointing,
    SunSafePoint as SunSafePoint,
    VelocityPoint as VelocityPoint,
    mrp_add as mrp_add,
)
from ._gnc._sensors import (
    IMU as IMU,
    CenteredDipole as CenteredDipole,
    CoarseSunSensors as CoarseSunSensors,
    Magnetometer as Magnetometer,
    Sensors as Sensors,
    SimpleNav as SimpleNav,
    StarTracker as StarTracker,
)
from ._gnc._thruster_logic import ThrFiringSchmitt as ThrFiringSchmitt
from ._noise._geometric_brownian_motion import GeometricBrownianMotion as GeometricBrownianMotion
from ._noise._mean_reverting_noise import MeanRevertingNoise as MeanRevertingNoise
from ._spacecraft._assembly import Spacecraft as Spacecraft
from ._spacecraft._contract import (
    AbstractDynamicEffector as AbstractDynamicEffector,
    AbstractEffector as AbstractEffector,
    AbstractStateEffector as AbstractStateEffector,
    TwoMethodStateEffector as TwoMethodStateEffector,
    as_contribution as as_contribution,
)
from ._spacecraft._hub import Hub as Hub
from ._spacecraft._joints import JointContribution as JointContribution, JointRows as JointRows
from ._spacecraft._types import (
    BackSub as BackSub,
    Contribution as Contribution,
    EnergyMomentum as EnergyMomentum,
    ForceTorque as ForceTorque,
    HubContext as HubContext,
    MassContext as MassContext,
    MassProps as MassProps,
)
from ._tools._setup_files import (
    Setup as Setup,
    build as build,
    describe as describe,
    load_setup as load_setup,
    save_setup as save_setup,
)
from .vizard import read_vizard as read_vizard, write_vizard as write_vizard
