"""Which solver step is being evaluated, for scheduled (piecewise) inputs.

A fixed-step RK step over $[t_k, t_{k+1}]$ evaluates the drift at stage times $t_k + c_i h$, including
both ends. A command held over the step (zero-order hold) must have one value at all stages, even
when $t_k$ or $t_{k+1}$ is a switch time. The fixed-step driver therefore declares the step interval
while it traces a step, and scheduled signals read `held_time(t)`: the step's midpoint inside a
declared step, else `t` itself (adaptive solvers stop at switch times through `jump_ts` and start the
next step just after them, so left-limit evaluation at `t` is already right there).

The declaration is trace-time dynamic scoping (a context variable holding tracers of the same trace),
so it composes with `jit`, `vmap` and `grad`.
"""

import contextlib
import contextvars


_STEP_INTERVAL = contextvars.ContextVar("jaxsim_step_interval", default=None)


@contextlib.contextmanager
def step_interval(t0, t1):
    """Declare that the drift evaluations traced inside belong to the step `[t0, t1]`."""
    token = _STEP_INTERVAL.set((t0, t1))
    try:
        yield
    finally:
        _STEP_INTERVAL.reset(token)


def held_time(t):
    """The time at which a held (piecewise) input is evaluated for a drift call at `t`."""
    interval = _STEP_INTERVAL.get()
    if interval is None:
        return t
    return 0.5 * (interval[0] + interval[1])
