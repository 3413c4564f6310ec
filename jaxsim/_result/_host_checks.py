"""`throw=True` checked on the host after a top-level run, instead of inside the compiled program.

Inside a program, a run-time check (`equinox.error_if`, diffrax's `throw=True`) is a host
callback, and JAX does not write programs with host callbacks to its persistent compilation cache
(`jaxsim.enable_cache()`): every process would compile the simulation again. So when `simulate`
is called at the top level (concrete inputs, no trace active), the drivers run without in-program checks (`throw=False`) and `raise_if_failed` raises
after the run, from the returned result code, the error the in-program check raises: the same
class (`equinox.EquinoxRuntimeError`) and message. Under a user's `jit`/`vmap`/`grad` the checks
stay in the program (the result is a tracer there). A failed run raises either way; never a
silent NaN.

With `EQX_ON_ERROR` set to anything but `raise` (`nan`, `breakpoint`, `off`), the checks stay in
the program too, so that equinox's behaviour applies as documented.
"""

import os

import equinox as eqx
import numpy as np

from .._compilation._jit import _at_top_level
from ._codes import RESULTS


def on_host(throw: bool) -> bool:
    """Whether a run with this `throw` is checked on the host (top-level call, `throw=True`)."""
    return bool(throw) and _at_top_level() and os.environ.get("EQX_ON_ERROR", "raise") == "raise"


def nonfinite_message(what: str) -> str:
    """The message of a non-finite state in a `what` solve (fixed-step, SDE, clocked drivers)."""
    return (
        f"simulate: the state became non-finite (NaN/inf) during the {what} solve; check "
        "parameters and step size, or pass throw=False to inspect `Solution.result`."
    )


# The clocked driver's causes with their own message; other failures: `SEGMENT`.
CLOCKED_CAUSES = (
    RESULTS.too_many_events,
    RESULTS.nonfinite_state,
    RESULTS.max_steps_reached,
    RESULTS.event_location_failed,
    RESULTS.zeno,
    RESULTS.event_condition_nonfinite,
)
SEGMENT_FAILED = "simulate: a segment solve failed; pass throw=False to inspect `Solution.result`."


def clocked_message(cause) -> str:
    """The message of one of `CLOCKED_CAUSES` in the clocked driver."""
    return RESULTS[cause] + " (pass throw=False to inspect `Solution.result` and `t_final`)"


def _clocked(result) -> str:
    for cause in CLOCKED_CAUSES:
        if result == cause:
            return clocked_message(cause)
    return SEGMENT_FAILED


def _diffrax(result) -> str:
    # diffrax's `throw=True` raises with the message of its result code (same text in RESULTS).
    return RESULTS[result]


def raise_if_failed(sol, path: str):
    """`sol`, or the error its in-program check raises when the run failed.

    `path`: `"diffrax"` (adaptive and diffrax-SDE runs: diffrax's message of the result code),
    `"clocked"` (the clocked driver: `clocked_message`), or the `what` of `nonfinite_message`
    (fixed-step drivers, whose only failure is a non-finite state).
    """
    result = sol.result
    # Read on the host with NumPy: no eager JAX operation (each is a compile in a fresh process).
    if np.all(np.asarray(result._value) == np.asarray(RESULTS.successful._value)):
        return sol
    if path == "diffrax":
        message = _diffrax(result)
    elif path == "clocked":
        message = _clocked(result)
        if result == RESULTS.zeno:  # the accumulation time, read on the host
            message += f" Accumulation time: t = {float(np.asarray(sol.t_final)):.12g} s."
    else:
        message = nonfinite_message(path)
    raise eqx.EquinoxRuntimeError(message)
