r"""The clocked driver: continuous dynamics, discrete models on clocks, scheduled discontinuities,
zero-crossing events and output frames in one pure, fixed-shape computation.

`simulate(model, y0, t1, clocks=..., discontinuities=..., events=..., ...)` dispatches here.

**Structure.** The run is one `lax.scan` over a *static* number of segments. The segment
boundaries are the ticks of all clocks (exact, see `jaxsim/_model/_clocks.py`), the times of the
scheduled discontinuities (possibly traced, sorted at run time) and `t1`. Each scan iteration
solves one segment with `diffrax.diffeqsolve` from the current time to the next boundary, with the
zero-crossing conditions as a `diffrax.Event`; it then either

- handles the event (resets, log, restart at the crossing, same boundary next), or
- reaches the boundary and runs the clock updates due there (Jacobi, then sequential models).

Non-terminal events are therefore just extra scan iterations: the scan length is
`n_boundaries + 2 * max_events + 1` (each event may need one re-solve, see `_events.py`), and
iterations after the end are skipped (`lax.cond`). Everything is vmap- and grad-safe. Each
segment solve runs on the diffrax core (`jaxsim._cores._diffrax.DiffraxSegments`: the flat state, the
model's step map after every accepted step, its switches counted up to an event).

**Clocked runs on the step grid.** With a jaxsim fixed-step solver, no events, and every tick,
sample and discontinuity time concrete and on the grid `t0 + k dt`, no segment needs a solver
restart or dense output: the run is the fixed-grid stepper with the clock updates before the
steps they precede (`_grid.py`), bit for bit the plain run when the clocks change nothing.

**Modules.** `_setup` (checks, tick plan, the choice of path), `_driver` (the scan over
segments and the result), `_segments` (one segment solve), `_event_rules` (crossings, resets,
restart signs, level-triggered stops), `_guard` (each condition checked on every step's dense
output), `_roots` (root finders), `_carry` (the named loop state),
`_grid` (clocked runs on the step grid).

**Step size across boundaries.** Adaptive solvers carry the controller's *proposed* next step
(not the last, clipped one) and the PID history from one segment into the next, so a boundary
costs only the fresh first-same-as-last stage (1 RHS for Tsit5/Dopri5), as if the solver had a
`jump_ts` there. The discontinuity times are segment ends rather than `jump_ts`: this gives the
same step sequence, works identically for fixed-step solvers, and keeps the boundary times
differentiable (they enter as `t0`/`t1` of a solve). Fixed-step solvers restart their grid at each
boundary (`t_a + j dt`, the last step shortened to end on the boundary: "split"); ticks that are
multiples of `dt` keep the global grid.

**Left and right limits.** Inside a segment $[t_a, t_b]$ the drift is evaluated at
$\mathrm{clip}(t, t_a^+, t_b^-)$, one ulp inside the open interval (the gradient still flows through
$t$). A source with an edge at a boundary is thus seen at its left limit by the stages that end
a segment and at its right limit by those that start the next, whatever its own convention at
the edge (bdsim's last RK45 stage sees the post-step value, which costs it 2.5e-4 on
`step_response`).

**Output frames.** Samples `ts` are `SaveAt` points inside the segments (dense output); they never
cut steps, so the number of RHS evaluations does not depend on the output rate. A sample at a
boundary or event time records the *left limit* (pre-tick discrete states and held outputs,
pre-reset continuous state); the clock logs hold post-tick states and the event log both sides.
Samples after a terminal event are NaN.

**Assumptions and limitations:** the clock schedule and `ts` are static; the number of
discontinuity times is static (their values may be traced); fixed-step solvers cannot take a
traced boundary onto their grid (they split the step there); what event detection guarantees is
stated in `_events.py` and `_guard.py`.

**Reference:** Hairer, Norsett & Wanner, *Solving ODEs I*, sec. II.4 and II.6.
"""

from ._setup import simulate_clocked as simulate_clocked
