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
(`jaxsim._request._build.check_combinations`) before it is routed: SDE requests with clocks, events,
discontinuities or `dtmax` (not supported yet); `max_events`/`root_finder` without events;
`dtmax` with a fixed-step solver; an SDE request on a model without diffusion.
"""

import dataclasses

import diffrax as dfx

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
    driver: str  # "fixed", "adaptive", "sde", or "clocked"


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


def route(
    solver,
    *,
    dt,
    key,
    dW,
    clocks,
    events,
    discontinuities,
    dtmax,
) -> SolverKind:
    """The kind of the request and its driver (the request's checks, `jaxsim._request._build`, refuse
    the combinations that no driver supports before this runs)."""
    kind = solver_kind(solver, dt=dt, key=key, dW=dW)
    if kind.stochastic:
        return dataclasses.replace(kind, driver="sde")
    if clocks or events or discontinuities or dtmax is not None:
        return dataclasses.replace(kind, driver="clocked")
    return dataclasses.replace(kind, driver="adaptive" if kind.adaptive else "fixed")
