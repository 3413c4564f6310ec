"""Control parameterizations: the way to drive an effector with an optimized open-loop input.

- `PiecewiseConstant`: values held over intervals (zero-order hold; every RK stage of a step reads
  the value held over the step, never the next interval's).
- `PiecewiseLinear`: linear between knots.
- `CubicSpline`: the natural cubic spline through knots.
- `SwitchingTimes`: bang-bang between two levels at (traced, differentiable) switch times.

Each is a signal of time (`jaxsim.signals.AbstractSignal`) that an effector takes as its command
(an external torque, a wheel motor torque, a thruster throttle, a MuJoCo `ctrl`), constructible
inside `jit`/`grad`/`vmap` and differentiable with respect to its values and times. Guide:
"Controls and trajectory optimization".
"""

from ._model._controls import (
    CubicSpline as CubicSpline,
    PiecewiseLinear as PiecewiseLinear,
    SwitchingTimes as SwitchingTimes,
)
from ._model._signals import PiecewiseConstant as PiecewiseConstant


__all__ = ["CubicSpline", "PiecewiseConstant", "PiecewiseLinear", "SwitchingTimes"]
