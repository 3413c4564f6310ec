"""Which solver serves which request: combinations of solver, adjoint and features, refused by name."""

import diffrax as dfx
import numpy as np

from .._route import SolverKind
from ._settings import _scalar


# --------------------------------------------------------------------------------------------------
# Solvers


def check_combinations(
    kind, *, clocks, events, discontinuities, dtmax, max_events, root_finder
) -> None:
    """What no driver supports, refused by name: `dtmax` not a positive finite scalar,
    `max_events`/`root_finder` without events, an SDE with clocks, events, discontinuities or
    `dtmax`, `dtmax` with a fixed-step solver."""
    if dtmax is not None:
        if np.ndim(dtmax) != 0:
            raise ValueError(
                f"simulate: `dtmax` [s] must be a scalar; got shape {np.shape(dtmax)}."
            )
        d = _scalar("dtmax", dtmax, "s")
        if d is not None and not (np.isfinite(d) and d > 0):
            raise ValueError(f"simulate: `dtmax` [s] must be finite and > 0; got {float(d)!r}.")
    if not events:
        for name, value in (("max_events", max_events), ("root_finder", root_finder)):
            if value is not None:
                raise ValueError(
                    f"simulate: `{name}` applies to runs with `events`; got {name}={value!r} "
                    "without events. Give `events=` or drop it."
                )
    segmented = {
        "clocks": bool(clocks),
        "events": bool(events),
        "discontinuities": bool(discontinuities),
        "dtmax": dtmax is not None,
    }
    given = [name for name, on in segmented.items() if on]
    if kind.stochastic:
        if given:
            raise ValueError(
                f"simulate: the stochastic (SDE) drivers do not support {', '.join(given)} yet; "
                f"got an SDE request (solver {kind.name}, key or dW given) with "
                f"{', '.join(f'`{g}`' for g in given)}. Run the SDE without them, or the "
                "deterministic model with them; nothing is dropped silently."
            )
        return
    if dtmax is not None and not kind.adaptive:
        raise ValueError(
            f"simulate: `dtmax` [s] bounds the steps of adaptive solvers; {kind.name} is "
            f"fixed-step (got dtmax={dtmax}): its step is `dt`. To split the steps at the "
            "model's (possibly traced) breakpoints, pass `discontinuities=[model]`."
        )


def check_supported_solver(solver, kind: SolverKind) -> None:
    """diffrax solvers that the drivers cannot run are refused by name: implicit ones (a root
    finder per step) and those taking several terms (`SemiImplicitEuler`, IMEX schemes) on an ODE
    request."""
    if kind.native or not isinstance(solver, dfx.AbstractSolver):
        return
    name = type(solver).__name__
    implicit = isinstance(solver, dfx.AbstractImplicitSolver)
    split = not kind.stochastic and solver.term_structure is not dfx.AbstractTerm
    if implicit or split:
        why = "an implicit solver" if implicit else "a solver of split (several-term) systems"
        raise TypeError(
            f"simulate: `solver` diffrax.{name}() is {why}, which jaxsim's drivers do not run. "
            "Supported: jaxsim's Euler, RK2, RK4 (fixed step), Tsit5, Dopri5, Dopri8 (adaptive) "
            "and SDE solvers, or an explicit diffrax solver of one term (e.g. diffrax.Tsit5(), "
            "diffrax.Heun(), diffrax.Bosh3())."
        )
