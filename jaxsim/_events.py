r"""Zero-crossing events for the hybrid driver (`simulate(..., events=...)`).

An `Event` watches a scalar condition $c(t, y, \mathrm{args})$. It *fires* when $c$ crosses zero in
its `direction` (rising: from $\le 0$ to $> 0$; falling: from $> 0$ to $\le 0$; both: any sign
change). The crossing time is located by a root finder (optimistix) on the solver's dense output,
so it is differentiable (implicit function theorem). A boolean condition is mapped to
$+1$ (True) / $-1$ (False) and located by bisection to the root finder's tolerance.

On firing, the optional `reset(t, y, z, args) -> (y, z)` may change the continuous state `y` and
the discrete states `z` (`{model_name: z}`; checked at the call: it must return that pair); a
`terminal` event ends the run (bdsim's STOP).

**Edge- and level-triggered.** Events fire on crossings (edges). A *terminal* event with a
direction is also level-triggered, like bdsim's STOP and Simulink's Stop block: if its condition
already lies on the side it fires into at `t0`, or right after the resets of an event instant
(rising: $c > 0$, or $c = 0$ heading up; falling: $c < 0$, or $c = 0$ heading down; a boolean
condition: True for rising, False for falling), the run ends there and the event is logged at
that time. Terminal events with direction "both" are edge-triggered only.

Rules of the driver (see `jaxsim/_hybrid.py`):

- **Simultaneous events.** After the solver stops at $t_e$ for one event, every other event whose
  condition has also crossed, with an estimated crossing time $c/\dot c$ within `event_tol` of
  $t_e$, fires at $t_e$ too. Resets run in **declaration order**, each on the state left by the
  previous one; the run stops after them if any of them is terminal. An event that crossed
  *earlier* than $t_e$ in the same step (diffrax reports the first condition in leaf order, not
  the earliest) triggers a re-solve of the segment up to $t_e$ without the reported condition, so
  the earliest crossing is always the one handled.
- **No re-firing on the surface.** At a restart after an event, a fired condition still on its
  surface (within `event_tol` of it in time) takes as its initial sign the sign of $\dot c$ just
  after the reset (where the trajectory is heading), not the round-off sign of $c \approx 0$;
  restarting exactly on the surface therefore cannot re-fire, for any direction, and needs no
  time "kick" (bdsim restarts at $t_c + 10^{-9}$). A reset that moves the state off the surface
  (a sawtooth) keeps the sign of $c$, so the next crossing is seen even within one long step.
- **Bounded count.** At most `max_events` firings are logged; one more is an error (never silent
  truncation): with `throw=False`, `Solution.result` is `RESULTS.too_many_events` and `t_final`
  the time of the firing that overflowed.

**Assumptions and limitations:** crossings are detected at step ends, so two crossings of one
condition within one step (a grazing double crossing) are not seen: bound the step (`dtmax`) when
that matters. Event times are differentiable only for floating-point conditions with
$\dot c \neq 0$ at the crossing.

**Reference:** Hairer, Norsett & Wanner, *Solving ODEs I*, sec. II.6 (dense output, event location);
Kidger, *On Neural Differential Equations* (2021), sec. 5.2.
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax

from ._validation import check_name


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
