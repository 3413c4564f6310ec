r"""Phases: a run as a sequence of phases with their own durations, models, inputs and solvers.

A phase is a model propagated over a duration (which may be traced: a decision variable of an
optimizer), with its own parameters (another model instance, e.g. another thrust level), inputs
(`args`, or a control in the model) and solver settings. Between two phases the state is
continuous, or jumps through a user function $y \mapsto y'$ (an impulsive $\Delta v$, a stage
separation that drops mass). The whole sequence is one compiled program: the phase boundaries
$t_k = t_0 + \sum_{j<k} d_j$ are run-time values, so changing the durations never recompiles.

Each phase runs `simulate` with free times (`jaxsim._drivers._free_time`): fixed-step solvers take
`num_steps` steps of $h_k = d_k / K_k$, adaptive ones their own steps; the derivatives with
respect to the durations are those of the discrete solution (exact for the fixed-step runs, the
drift at the boundaries to the tolerance for adaptive ones). This is the transcription of
multi-phase optimal control problems (dymos's phases, GPOPS-II's phases) for direct shooting:
Betts, *Practical Methods for Optimal Control and Estimation Using Nonlinear Programming*, 2nd
ed. (SIAM, 2010), sec. 4.6 and 4.7.
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
from jaxtyping import Array, ArrayLike, Float, PyTree

from ._compilation._jit import jit as jaxsim_jit
from ._model._dynamic_object import AbstractDynamicObject
from ._model._validation import as_array, is_concrete
from ._request._horizon import check_horizon
from ._result._codes import RESULTS
from ._result._host_checks import on_host
from ._simulate import simulate
from ._solvers._ode import RK4, AbstractSolver


class Phase(eqx.Module):
    r"""One phase of a multi-phase run (`simulate_phases`).

    **Arguments:**

    - `model`: the `AbstractDynamicObject` propagated in this phase (its parameters and controls
      are this phase's; its state structure must match the state entering the phase).
    - `duration`: the phase's length [s], > 0 (may be traced: a decision variable).
    - `solver`: `RK4()` (default) or another jaxsim or diffrax solver.
    - `num_steps`: fixed-step solvers: steps over the phase ($h = d / K$). Required with them.
    - `num_samples`: samples uniform over the phase, both ends included (default 2: its start
      and end). With `num_steps`, `num_samples - 1` must divide it.
    - `rtol`, `atol`: adaptive solvers' tolerances (required with them).
    - `args`: passed to the model's `drift` in this phase (e.g. effector commands).
    - `jump`: `y -> y'`, applied to the state entering the phase (the previous phase's final
      state, or `y0` for the first phase), at the phase's start: an impulsive burn, a stage
      separation. Default: none (continuous state). A function defined once (module level) or an
      `equinox.Module` holding its parameters as arrays: a new Python function at every call is
      a new program.
    - `max_steps`: adaptive solvers' step budget in this phase.

    **Assumptions and limitations:** the phase boundaries are run-time values, so the phase's
    model sees absolute times $t \in [t_k, t_k + d_k]$ (give controls their knots in absolute
    time, e.g. `t_k + d_k * fractions`). Clocks, events and discontinuities are not available
    inside phases (`simulate` refuses them with traced times).
    """

    model: AbstractDynamicObject
    duration: Float[Array, ""]
    solver: Any = RK4()
    num_steps: int | None = eqx.field(static=True, default=None)
    num_samples: int = eqx.field(static=True, default=2)
    rtol: float | None = eqx.field(static=True, default=None)
    atol: float | None = eqx.field(static=True, default=None)
    args: Any = None
    jump: Callable | None = None
    max_steps: int = eqx.field(static=True, default=4096 * 64)

    def __init__(
        self,
        model: AbstractDynamicObject,
        duration: Float[ArrayLike, ""],
        *,
        solver: AbstractSolver | Any = RK4(),
        num_steps: int | None = None,
        num_samples: int = 2,
        rtol: float | None = None,
        atol: float | None = None,
        args: PyTree | None = None,
        jump: Callable[[PyTree], PyTree] | None = None,
        max_steps: int = 4096 * 64,
    ):
        if not isinstance(model, AbstractDynamicObject):
            raise TypeError(
                f"Phase: `model` must be an AbstractDynamicObject; got {type(model).__name__}."
            )
        self.model = model
        self.duration = as_array("Phase", "duration", duration, "s", ())
        if is_concrete(self.duration) and not float(self.duration) > 0:
            raise ValueError(f"Phase: `duration` [s] must be > 0; got {float(self.duration)!r}.")
        self.solver = solver
        self.num_steps = num_steps
        self.num_samples = int(num_samples)
        # Tolerances are static (a changed tolerance is another program, as in `simulate`).
        self.rtol = None if rtol is None else float(rtol)
        self.atol = None if atol is None else float(atol)
        self.args = args
        if jump is not None and not callable(jump):
            raise TypeError(f"Phase: `jump` must be a function y -> y'; got {jump!r}.")
        self.jump = jump
        self.max_steps = int(max_steps)


class PhasesSolution(eqx.Module):
    """What `simulate_phases` returns.

    **Fields:**

    - `solutions`: one `jaxsim.Solution` per phase (its `ts` in absolute time, from the phase's
      start, after its jump, to its end).
    - `boundaries`: the phase boundaries $t_0, t_1, \\dots, t_n$ [s], shape `(n + 1,)`.
    - `y_final`: the state at the end of the last phase.
    - `result`: the first failed phase's result code (`RESULTS.successful` when all succeed).
    """

    solutions: tuple
    boundaries: Float[Array, " n+1"]
    y_final: Any
    result: Any

    @property
    def ok(self):
        """Whether every phase succeeded (a boolean array: one per member under `vmap`)."""
        return self.result == RESULTS.successful


def _checked(phases) -> tuple:
    phases = tuple(phases)
    if not phases:
        raise ValueError("simulate_phases: `phases` must hold at least one Phase; got none.")
    for i, p in enumerate(phases):
        if not isinstance(p, Phase):
            raise TypeError(
                f"simulate_phases: `phases[{i}]` must be a jaxsim.phases.Phase; got "
                f"{type(p).__name__}."
            )
    return phases


def simulate_phases(
    phases: list[Phase] | tuple[Phase, ...],
    y0: PyTree[ArrayLike],
    t0: Float[ArrayLike, ""] = 0.0,
    *,
    outputs: bool = True,
    throw: bool = True,
) -> PhasesSolution:
    r"""Run `phases` one after the other from `y0` at `t0` [s], in one compiled program.

    Phase $k$ starts at $t_k = t_0 + \sum_{j<k} d_j$ from the previous phase's final state (or
    `y0`), passed through its `jump` if it has one, and runs its model for its duration with its
    solver settings (`Phase`). Durations and `t0` may be traced (`jax.grad` with respect to
    them is the derivative of the discrete solution); changing them does not recompile.

    **Arguments:** `phases` (a sequence of `Phase`), `y0` (the state entering the first phase),
    `t0` [s], `outputs` (derived outputs at every phase's samples), `throw` (raise on a failed
    phase; with `False` read `result`: the first failure; the phases after it run on NaN states).

    **Returns:** a `PhasesSolution`.
    """
    phases = _checked(phases)
    check_horizon(t0, None, caller="simulate_phases")  # simulate's concrete-time checks
    # A top-level call checks `throw` on the host after the run (`jaxsim._result._host_checks`).
    host = on_host(throw)
    sol = _run_phases(
        phases, y0, jnp.asarray(t0, dtype=float), bool(outputs), bool(throw) and not host
    )
    if host and not bool(sol.result == RESULTS.successful):
        raise eqx.EquinoxRuntimeError(f"simulate_phases: {RESULTS[sol.result]}")
    return sol


@jaxsim_jit
def _run_phases(phases, y0, t0, outputs: bool, throw: bool):
    t, y = t0, y0
    solutions, boundaries = [], [t0]
    result = RESULTS.successful
    for p in phases:
        if p.jump is not None:
            y = p.jump(y)
        t_end = t + p.duration
        kw = {"num_samples": p.num_samples}
        if p.num_steps is not None:
            kw["num_steps"] = p.num_steps
        if p.rtol is not None or p.atol is not None:
            kw.update(rtol=p.rtol, atol=p.atol, max_steps=p.max_steps)
        sol = simulate(
            p.model, y, t_end, t0=t, solver=p.solver, args=p.args, outputs=outputs, throw=throw,
            **kw,
        )  # fmt: skip
        solutions.append(sol)
        boundaries.append(t_end)
        result = RESULTS.where(result == RESULTS.successful, sol.result, result)
        y = jtu.tree_map(lambda a: a[-1], sol.ys)
        t = t_end
    return PhasesSolution(tuple(solutions), jnp.stack(boundaries), y, result)
