"""jaxsim: a differentiable spacecraft-dynamics engine on JAX.

Importing this package enables float64 (`jax_enable_x64`): the dynamics are validated against
Basilisk to round-off, which float32 cannot reach. To use float32 anyway, set
`jax.config.update("jax_enable_x64", False)` after importing jaxsim (tolerances then do not hold).

On the CPU, the programs jaxsim builds (`simulate`, `jaxsim.jit`, batches, `optimize`
evaluations) compile their step loops as one function each (XLA's small-while-loop hoisting, set
in those programs' own compile options, never in another program of the process: several times
faster for small models; `docs/engine.md`, "Loop speed on the CPU"). `jaxsim.small_loops()` tells
whether it is in effect; `JAXSIM_SMALL_LOOPS=0` switches it off.

It changes no other JAX setting and no environment variable. JAX's persistent compilation cache, with which a restart loads
jaxsim's compiled programs instead of compiling them again, is opt-in: `jaxsim.enable_cache()`, or
the environment variable `JAXSIM_CACHE=1` (or a folder path) set before importing jaxsim
(`jaxsim.enable_cache` documents both).
"""

import jax

from ._compilation import _xla_options as _xla_setup


_xla_setup.configure()  # JAXSIM_SMALL_LOOPS: per-program small-loop hoisting, or off
_xla_setup.install()  # the hook that gives jaxsim's programs, and only them, the option
jax.config.update("jax_enable_x64", True)

from ._compilation import _cache


_cache.from_environment()  # opt-in: only when JAXSIM_CACHE asks for it

from . import (  # plotting/results import matplotlib/xarray only when used
    animation as animation,
    controls as controls,
    dynamic_object as dynamic_object,
    kinematics as kinematics,
    montecarlo as montecarlo,
    optimize as optimize,
    phases as phases,
    plotting as plotting,
    results as results,
    signals as signals,
    validation as validation,
)
from ._compilation._cache import (
    cache_dir as cache_dir,
    disable_cache as disable_cache,
    enable_cache as enable_cache,
)
from ._compilation._jit import (
    RecompileWarning as RecompileWarning,
    ReplayedDecisionsWarning as ReplayedDecisionsWarning,
    compiler_options as compiler_options,
    jit as jit,
)
from ._compilation._xla_options import SmallLoops as SmallLoops, small_loops as small_loops
from ._cores._adaptive import (
    DiscreteAdjoint as DiscreteAdjoint,
    ForwardSensitivity as ForwardSensitivity,
)
from ._events._event import Event as Event, EventLog as EventLog
from ._model._clocks import (
    AbstractClock as AbstractClock,
    AbstractDiscreteModel as AbstractDiscreteModel,
    Clock as Clock,
    DiscreteModel as DiscreteModel,
    Schedule as Schedule,
)
from ._model._dynamic_object import (
    AbstractDynamicObject as AbstractDynamicObject,
    ArrayCommand as ArrayCommand,
    System as System,
)
from ._model._quantity import Quantity as Quantity
from ._model._signals import (
    AbstractSignal as AbstractSignal,
    PiecewiseConstant as PiecewiseConstant,
    PiecewiseTable as PiecewiseTable,
    Ramp as Ramp,
    SquareWave as SquareWave,
    Step as Step,
    TriangleWave as TriangleWave,
)
from ._result._codes import RESULTS as RESULTS
from ._result._solution import HybridSolution as HybridSolution, Solution as Solution
from ._simulate import simulate as simulate
from ._solvers._ode import (
    RK2 as RK2,
    RK4 as RK4,
    AbstractAdaptiveSolver as AbstractAdaptiveSolver,
    AbstractFixedStepSolver as AbstractFixedStepSolver,
    AbstractSolver as AbstractSolver,
    Dopri5 as Dopri5,
    Dopri8 as Dopri8,
    Euler as Euler,
    StepMappedSolver as StepMappedSolver,
    Tsit5 as Tsit5,
    Verner9 as Verner9,
)
from ._solvers._sde import (
    SRA1 as SRA1,
    AbstractSDESolver as AbstractSDESolver,
    EulerMaruyama as EulerMaruyama,
    Heun as Heun,
    Milstein as Milstein,
    ShARK as ShARK,
)
from ._version import __version__ as __version__
