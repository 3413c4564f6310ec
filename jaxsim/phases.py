"""Phases: one run as a sequence of phases (durations, models, inputs, solvers, state jumps).

- `Phase`: a model propagated over a (traced) duration with its own parameters, inputs and
  solver settings, entered through an optional state jump `y -> y'` (an impulsive burn, a stage
  separation).
- `simulate_phases`: the phases one after the other in one compiled program; gradients with
  respect to the durations are those of the discrete solution.
- `PhasesSolution`: the phases' `Solution`s, the boundaries, the final state, the result.

Guide: "Free final time and phases".
"""

from ._phases import (
    Phase as Phase,
    PhasesSolution as PhasesSolution,
    simulate_phases as simulate_phases,
)


__all__ = ["Phase", "PhasesSolution", "simulate_phases"]
