r"""Zero-crossing events for the clocked driver (`simulate(..., events=...)`).

An `Event` watches a scalar condition $c(t, y, \mathrm{args})$. It *fires* when $c$ crosses zero in
its `direction` (rising: from $\le 0$ to $> 0$; falling: from $> 0$ to $\le 0$; both: any sign
change). The crossing time is located by a root finder (optimistix) on the solver's dense output,
so it is differentiable (implicit function theorem). A boolean condition is mapped to
$+1$ (True) / $-1$ (False) and located by bisection to the root finder's tolerance.

**Detection inside every step.** Each condition is checked on every step's dense output, on a
grid that halves until the condition's values and rates certify, half by half, either no zero or
exactly one (a quadratic bound with the curvature estimated from the rates; see
`jaxsim/_events/_guard.py` for the test): two crossings inside one step (a bounce and a landing,
a condition faster than the dynamics) are both found, the earliest first, with either solver
kind, without evaluating the drift again or rejecting a step. What can still be missed: a
pair of crossings where the condition curves more than twice as fast as its rates at three grid
points show (e.g. an oscillation aliased by the grid), crossings closer than `event_tol` [s], a
boolean condition that switches twice between two grid points, and what the solver's dense
output itself gets wrong. A step that would need more than 512 grid intervals fails with
`event_location_failed` (bound it with `dtmax`).

**A condition at zero** is on the side it is heading to: the sign of $\dot c$ along the
trajectory, or where $\dot c = 0$ too, of $\ddot c$. Hence:

- *at `t0`*: a condition exactly zero and heading into the side its event fires into fires at
  `t0` (falling: heading down; rising: up; both: either), as in scipy's `solve_ivp` (bdsim's
  solver); heading away it does not fire;
- *tangency*: a condition that touches zero without changing sign (e.g. $(t - 1)^2$) does not
  fire, also when a step ends exactly on the touching point;
- *on a boundary* (a clock tick, a scheduled discontinuity): a step's end is checked on the state
  the next step starts from, and each condition keeps its side across the boundary, so a crossing
  on a tick (or one ulp before or after it) fires once, at its time, and a tangency there does not
  fire. A condition that jumps across zero *because of* a tick (it reads a held output that the
  tick changes) does not fire: the segment after the tick starts from its new value;
- *non-finite*: a condition that evaluates to NaN/inf at a grid point fails the run with
  `RESULTS.event_condition_nonfinite` (crossings before it are found; `t_final` is the last
  finite point, within `event_tol`).

**Zeno.** Firing times that accumulate fail the run with `RESULTS.zeno`, `t_final` the
accumulation time, the firings before it in the log: (a) four successive firings of one event
whose intervals shrink by a constant ratio $r < 1$ (within `1e-4` relative), with the
accumulation time $t_z = t_4 + \Delta_3 r/(1 - r)$ (the geometric series, e.g. a bouncing ball:
$t_z = t_1 (1 + e)/(1 - e)$) not after `t1`; or (b) a fired event with a reset whose condition,
after the resets, is on its surface with $\dot c = 0$ and $\ddot c$ into its firing side (a state
resting on the surface, e.g. a ball at rest on the floor: the reset cannot move it off; $t_z$ is
that instant).

On firing, the optional `reset(t, y, z, args) -> (y, z)` may change the continuous state `y` and
the discrete states `z` (`{model_name: z}`; checked at the call: it must return that pair); a
`terminal` event ends the run (bdsim's STOP).

**Edge- and level-triggered.** Events fire on crossings (edges). A *terminal* event with a
direction is also level-triggered, like bdsim's STOP and Simulink's Stop block: if its condition
already lies on the side it fires into at `t0`, or right after the resets of an event instant
(rising: $c > 0$, or $c = 0$ heading up; falling: $c < 0$, or $c = 0$ heading down; a boolean
condition: True for rising, False for falling), the run ends there and the event is logged at
that time. Terminal events with direction "both" are edge-triggered only.

Rules of the driver (see `jaxsim/_drivers/_clocked/`):

- **Simultaneous events.** After the solver stops at $t_e$ for one event, every other event whose
  condition has also crossed, with an estimated crossing time $c/\dot c$ within `event_tol` of
  $t_e$, fires at $t_e$ too. Resets run in **declaration order**, each on the state left by the
  previous one; the run stops after them if any of them is terminal. The check grid brackets
  the earliest crossing of a step (below); should another condition still show a crossing
  *earlier* than $t_e$ (two within `event_tol` of each other in one bracket), the segment is
  solved again up to $t_e$ without the reported condition, so the earliest crossing is always the
  one handled.
- **No re-firing on the surface.** At a restart after an event, a fired condition still on its
  surface (within `event_tol` of it in time) takes as its initial sign the sign of $\dot c$ just
  after the reset (where the trajectory is heading; of $\ddot c$ where $\dot c = 0$), not the
  round-off sign of $c \approx 0$;
  restarting exactly on the surface therefore cannot re-fire, for any direction, and needs no
  time "kick" (bdsim restarts at $t_c + 10^{-9}$). A reset that moves the state off the surface
  (a sawtooth) keeps the sign of $c$, so the next crossing is seen even within one long step.
- **Bounded count.** At most `max_events` firings are logged; one more is an error (never silent
  truncation): with `throw=False`, `Solution.result` is `RESULTS.too_many_events` and `t_final`
  the time of the firing that overflowed.

**Assumptions and limitations:** see "What can still be missed" above; Zeno rule (a) is an
extrapolation from four firings (a sequence that stops being geometric later is not foreseen), and
firing sequences that accumulate otherwise end in `too_many_events`. Event times are
differentiable only for floating-point conditions with $\dot c \neq 0$ at the crossing.

**Reference:** Hairer, Norsett & Wanner, *Solving ODEs I*, sec. II.6 (dense output, event location);
Kidger, *On Neural Differential Equations* (2021), sec. 5.2; Esposito, Kumar & Pappas, *Accurate
event detection for simulating hybrid systems*, HSCC 2001 (guaranteed detection from a Taylor model
of the event function); Johansson, Egerstedt, Lygeros & Sastry, *On the regularization of Zeno
hybrid automata*, Systems & Control Letters 38 (1999) (the bouncing ball's Zeno time).
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax

from .._model._validation import check_name


_DIRECTIONS = {"rising": True, "falling": False, "both": None}


class Event(eqx.Module):
    """A zero-crossing event.

    **Arguments:**

    - `cond`: `cond(t, y, args) -> scalar` (float, or bool for a boolean switch).
    - `direction`: `"rising"`, `"falling"` or `"both"`.
    - `terminal`: end the run when it fires (after the resets of the same instant).
    - `reset`: optional `reset(t, y, z, args) -> (y_new, z_new)`; `z` is `{model_name: z}`.
    - `name`: label used in the event log (`Solution.events.names`).
    """

    cond: Callable = eqx.field(static=True)
    direction: str = eqx.field(static=True)
    terminal: bool = eqx.field(static=True)
    reset: Callable | None = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        cond: Callable[..., Any],
        *,
        direction: str = "both",
        terminal: bool = False,
        reset: Callable[..., tuple[Any, Any]] | None = None,
        name: str = "event",
    ):
        if not callable(cond):
            raise ValueError(
                f"Event: `cond` must be callable (t, y, args) -> scalar; got {cond!r}."
            )
        if direction not in _DIRECTIONS:
            raise ValueError(
                f"Event: `direction` must be one of {sorted(_DIRECTIONS)}; got {direction!r}."
            )
        if reset is not None and not callable(reset):
            raise ValueError(
                f"Event: `reset` must be callable (t, y, z, args) -> (y, z) or None; got {reset!r}."
            )
        self.cond = cond
        self.direction = direction
        self.terminal = bool(terminal)
        self.reset = reset
        self.name = check_name("Event", "name", name)

    @property
    def diffrax_direction(self):
        return _DIRECTIONS[self.direction]


class EventLog(eqx.Module):
    """The events of a run (fixed size `max_events`; rows past `count` are NaN / -1).

    - `t`: firing times [s], shape `(max_events,)`.
    - `index`: which event (position in `events=`), int, shape `(max_events,)`; -1 when unused.
    - `y_before`, `y_after`: continuous state just before / after the reset, leading axis
      `max_events`; `z_before`, `z_after`: the same for the discrete states.
    - `count`: number of firings; `names`: the events' names (static).
    """

    t: jax.Array
    index: jax.Array
    y_before: Any
    y_after: Any
    z_before: Any
    z_after: Any
    count: jax.Array
    names: tuple = eqx.field(static=True)
