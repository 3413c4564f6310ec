"""Which solver step is being evaluated, for scheduled (piecewise) inputs.

A fixed-step RK step over $[t_k, t_{k+1}]$ evaluates the drift at stage times $t_k + c_i h$, including
both ends. A command held over the step (zero-order hold) must have one value at all stages, even
when $t_k$ or $t_{k+1}$ is a switch time. The fixed-step driver therefore declares the step interval
while it traces a step, and scheduled signals read `held_time(t)`: the step's midpoint inside a
declared step, else `t` itself (adaptive solvers stop at switch times through `jump_ts` and start the
next step just after them, so left-limit evaluation at `t` is already right there).

Inside a step, the fixed-step solvers also declare which stage is evaluated (`stage`): its node
$c_i$ and the node of the evaluation before it, so that a model can reproduce a reference
simulator's stage-by-stage rule in floating point (`stage_clock`; e.g. Basilisk's thruster on-time
test, whose tolerance scales with the time since the previous evaluation).

The declaration is trace-time dynamic scoping (a context variable holding tracers of the same trace),
so it composes with `jit`, `vmap` and `grad`.
"""

import contextlib
import contextvars


_STEP_INTERVAL = contextvars.ContextVar("jaxsim_step_interval", default=None)
_STAGE = contextvars.ContextVar("jaxsim_stage", default=None)


@contextlib.contextmanager
def step_interval(t0, t1):
    """Declare that the drift evaluations traced inside belong to the step `[t0, t1]`."""
    token = _STEP_INTERVAL.set((t0, t1))
    try:
        yield
    finally:
        _STEP_INTERVAL.reset(token)


def held_interval():
    """The declared step interval `(t_k, t_{k+1})` of the fixed-step driver, or None outside one."""
    return _STEP_INTERVAL.get()


def held_time(t):
    """The time at which a held (piecewise) input is evaluated for a drift call at `t`."""
    interval = _STEP_INTERVAL.get()
    if interval is None:
        return t
    return 0.5 * (interval[0] + interval[1])


@contextlib.contextmanager
def stage(c, c_prev, prev_step):
    r"""Declare that the drift evaluation traced inside is the stage of node `c` (at
    $t_k + c\,h$) whose previous evaluation was at node `c_prev`, of this step, or of the previous
    step when `prev_step` (at $t_{k-1} + c_{prev} h$)."""
    token = _STAGE.set((c, c_prev, prev_step))
    try:
        yield
    finally:
        _STAGE.reset(token)


def stage_clock():
    r"""`(t_k, t_{k+1}, c, c_prev, prev_step)` of the fixed-step stage being evaluated, or None.

    `t_k`, `t_{k+1}`: the step interval; `c`: the stage node (the drift is evaluated at
    $t_k + c\,(t_{k+1} - t_k)$); `c_prev`: the node of the evaluation before it, in this step or,
    when `prev_step` is true (the first stage), in the previous step, at $t_{k-1} + c_{prev} h$
    (for the first step, the same construction). None outside a fixed-step solver's stage
    (adaptive solvers, outputs, events).
    """
    interval = _STEP_INTERVAL.get()
    st = _STAGE.get()
    if interval is None or st is None:
        return None
    return (interval[0], interval[1]) + tuple(st)
