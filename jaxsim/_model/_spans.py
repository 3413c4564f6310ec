"""Time spans of tabulated model inputs (an ephemeris' copied records), checked before a run.

A model input that covers a limited time span (`effectors.astro.DE421Ephemeris`: the Chebyshev
records it copied) declares it: any object in the model's pytree whose class defines
`time_span_checks(t0, t1)` returns `[(ok, message), ...]`, `ok` a bool (array) that is True where
the run's times `[t0, t1]` [s] stay inside the span. `simulate` reads them once per run:

- concrete checks that fail are refused at the call (`check_time_spans`, a `ValueError` with the
  message: the class, the span needed and the span covered, in seconds);
- traced ones (a traced `t0`/`t1`, an epoch offset under `vmap`) fail the run with
  `RESULTS.invalid_model` (`jaxsim._validity.InProgram`: with `throw=True` an error naming the
  span, with `throw=False` the result code, states and outputs NaN).

Inside the programs `simulate` builds, the inputs then skip their own run-time range checks
(`spans_checked()` is True while `simulate` traces its drivers): an `eqx.error_if` there is a host
callback, and JAX's persistent compilation cache does not store programs with host callbacks
(issue 41). A time outside the span inside such a program (a custom effector calling an
ephemeris at other times) gives NaN, which fails the run; never an extrapolation.
"""

import contextlib
import threading

import jax.tree_util as jtu
import numpy as np

from ._validation import is_concrete


_state = threading.local()


@contextlib.contextmanager
def checked():
    """Within: the programs being traced are `simulate`'s, whose time spans were checked
    (`check_time_spans` on concrete times, `InProgram` on traced ones)."""
    previous = getattr(_state, "on", False)
    _state.on = True
    try:
        yield
    finally:
        _state.on = previous


def spans_checked() -> bool:
    """Whether the program being traced is one of `simulate`'s (see `checked`)."""
    return getattr(_state, "on", False)


def _declares(x) -> bool:
    return callable(getattr(type(x), "time_span_checks", None))


def span_checks(model, t0, t1) -> list:
    """`[(ok, message), ...]` of every object of `model` that declares a time span."""
    out = []
    for obj in jtu.tree_leaves(model, is_leaf=_declares):
        if _declares(obj):
            out.extend(type(obj).time_span_checks(obj, t0, t1))
    return out


def check_time_spans(model, t0, t1) -> None:
    """Refuse a run whose concrete times leave a span of the model (module docstring)."""
    for ok, message in span_checks(model, t0, t1):
        if is_concrete(ok) and not bool(np.all(np.asarray(ok))):
            raise ValueError(message)
