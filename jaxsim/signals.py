"""Public time signals (scheduled inputs) and the helpers models use to read them.

- Signals: `AbstractSignal`, `PiecewiseConstant`, `PiecewiseTable`, `Ramp`, `Step`, `SquareWave`,
  `TriangleWave` (also exported at the top level, `jaxsim.Step`, ...).
- `evaluate(signal_or_value, t)`: a signal's value at `t`, or a constant passed through.
- `breakpoints_of(*items)`: the discontinuity times of the signals among `items` (for adaptive
  solvers, through a model's `breakpoints()`).
- `held_time(t)`: the time a zero-order-hold command reads inside a fixed step (the step midpoint),
  else `t`.
- `stage_clock()`: the step interval and stage nodes of the fixed-step stage being evaluated (for
  models that reproduce a reference simulator's per-stage floating-point rule), else None.
"""

from ._model._signals import (
    AbstractSignal as AbstractSignal,
    PiecewiseConstant as PiecewiseConstant,
    PiecewiseTable as PiecewiseTable,
    Ramp as Ramp,
    SquareWave as SquareWave,
    Step as Step,
    TriangleWave as TriangleWave,
    breakpoints_of as breakpoints_of,
    evaluate as evaluate,
)
from ._model._step_context import held_time as held_time, stage_clock as stage_clock


__all__ = [
    "AbstractSignal",
    "PiecewiseConstant",
    "PiecewiseTable",
    "Ramp",
    "SquareWave",
    "Step",
    "TriangleWave",
    "breakpoints_of",
    "evaluate",
    "held_time",
    "stage_clock",
]
