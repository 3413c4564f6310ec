r"""The router of `simulate`: which driver runs a request, decided once, from the solver's kind.

**Two cores.** A request runs on one of two steppers:

- the **fixed-grid stepper** (`jaxsim._cores._fixed_grid.scan_grid`, and its per-segment form in the
  clocked driver): jaxsim's own fixed-step Runge-Kutta (`Euler`, `RK2`, `RK4`) and SDE schemes
  (`EulerMaruyama`, `Heun`, `Milstein`, `SRA1`), with the step map, held inputs and
  checkpointing;
- the **diffrax segment solver** (`diffrax.diffeqsolve` with the step map wrapped around the
  solver): adaptive solvers (`Tsit5`, `Dopri5`, `Dopri8`, `ShARK`), any diffrax solver instance,
  and every segment that needs dense output (events).

Clocks, zero-crossing events and discontinuities are a loop of segments over either core
(`jaxsim._drivers._clocked`): fixed-step runs whose clock ticks and samples lie on the step grid, without
events or discontinuity times, step through their segments with the fixed-grid stepper.

**The solver's kind** is a property of its class: jaxsim solvers declare `adaptive` and
`stochastic` (class variables); a diffrax solver instance is adaptive when it is an
`AbstractAdaptiveSolver` used without `dt`, and stochastic when it is one of diffrax's SDE-only
schemes, or an SDE-capable one given with a key. `solver_kind` is the one place that reads them.

**Combinations.** Every request either runs or is refused by name by the request's checks
(`jaxsim._request._solver_checks.check_combinations`) before it is routed: SDE requests with clocks, events,
discontinuities or `dtmax` (not supported yet); `max_events`/`root_finder` without events;
`dtmax` with a fixed-step solver; an SDE request on a model without diffusion.
"""

import dataclasses

import diffrax as dfx

from ._cores._adaptive import supports
from ._solvers._ode import AbstractSolver


# diffrax schemes that only make sense for SDEs (given a drift-only model they are refused).
_DIFFRAX_SDE_ONLY = (
    dfx.SRA1,
    dfx.ShARK,
    dfx.SEA,
    dfx.SPaRK,
    dfx.GeneralShARK,
    dfx.SlowRK,
    dfx.ItoMilstein,
    dfx.StratonovichMilstein,
    dfx.EulerHeun,
)


@dataclasses.dataclass(frozen=True)
class SolverKind:
    """What a solver is: `native` (a jaxsim solver class), `adaptive`, `stochastic` (an SDE scheme,
    or an SDE request: a key or increments given), and the driver that runs the request."""

    name: str
    native: bool
    adaptive: bool
    stochastic: bool
    driver: str  # "fixed", "adaptive", "sde", or "clocked" ("" before routing)
    # The core that steps the run: "fixed_grid" (jaxsim's fixed-grid stepper; on the clocked
    # driver the request's `grid` says whether its segments use it), "lean" (jaxsim's adaptive
    # core), or "diffrax" (`diffrax.diffeqsolve`). "" before routing.
    core: str = ""

    @property
    def failure_path(self) -> str:
        """The driver whose in-program check a failed run's message quotes
        (`jaxsim._result._host_checks.raise_if_failed`)."""
        if self.driver == "clocked":
            return "clocked"
        if self.driver == "sde":
            return "diffrax" if self.adaptive or not self.native else "SDE"
        return "diffrax" if self.adaptive else "fixed-step"


def solver_kind(solver, *, dt, key=None, dW=None) -> SolverKind:
    """The kind of `solver` for a request with step `dt` and noise `key`/`dW` (no driver yet)."""
    name = type(solver).__name__
    native = isinstance(solver, AbstractSolver)
    if native:
        adaptive = bool(solver.adaptive)
        stochastic = bool(getattr(type(solver), "stochastic", False))
    else:
        stochastic = isinstance(solver, _DIFFRAX_SDE_ONLY)
        # diffrax's stochastic Runge-Kutta schemes (ShARK, SRA1, ...) carry an error estimate
        # without subclassing AbstractAdaptiveSolver: without `dt` they run adaptively.
        error_estimate = isinstance(solver, dfx.AbstractAdaptiveSolver) or stochastic
        adaptive = error_estimate and dt is None
    stochastic = stochastic or key is not None or dW is not None
    return SolverKind(name, native, adaptive, stochastic, driver="")


def route(req) -> tuple[str, str]:
    """`(driver, core)` of a checked request (`jaxsim._request._build.Request`): the one routing
    decision of `simulate`, free-time runs included. The request's checks refuse the combinations
    that no driver supports before this runs.

    - driver: "sde" for noise (a key, increments or an SDE scheme); "clocked" for clocks, events,
      discontinuities or `dtmax`; otherwise "adaptive" or "fixed" (the plain driver).
    - core: "lean" for jaxsim's adaptive pairs on the plain driver where the lean core supports the
      state and adjoint (`jaxsim._cores._adaptive.supports`); "diffrax" for every other adaptive
      run (a diffrax solver instance, clocked segments, adaptive SDEs); "fixed_grid" otherwise.
    """
    kind = req.kind
    if kind.stochastic:
        driver = "sde"
    elif req.clocks or req.events or req.discontinuities or req.dtmax is not None:
        driver = "clocked"
    else:
        driver = "adaptive" if kind.adaptive else "fixed"
    if not kind.adaptive:
        core = "fixed_grid"
    elif driver == "adaptive" and kind.native and supports(req.solver, req.y0, req.adjoint):
        core = "lean"
    else:
        core = "diffrax"
    return driver, core
