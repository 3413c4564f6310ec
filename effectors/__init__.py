"""effectors: the spacecraft physics library built on the jaxsim engine.

A `Spacecraft` is a rigid `Hub` plus state effectors (with their own states, coupled through
back-substitution) and dynamic effectors (external loads), in gravity fields.
"""

import jaxsim as _jaxsim  # noqa: F401  (enables float64 before any array is built)

from ._effector import (
    AbstractDynamicEffector as AbstractDynamicEffector,
    AbstractEffector as AbstractEffector,
    AbstractStateEffector as AbstractStateEffector,
)
from ._ext_force_torque import ExtForceTorque as ExtForceTorque
from ._gravity import (
    AbstractGravityBody as AbstractGravityBody,
    PointMassGravity as PointMassGravity,
    SphericalHarmonicGravity as SphericalHarmonicGravity,
)
from ._gravity_gradient import GravityGradient as GravityGradient
from ._hub import Hub as Hub
from ._spacecraft import Spacecraft as Spacecraft
from ._types import (
    BackSub as BackSub,
    EnergyMomentum as EnergyMomentum,
    ForceTorque as ForceTorque,
    HubContext as HubContext,
    MassProps as MassProps,
)
