"""Progress of long runs: `simulate(..., progress=True)`.

The compiled run reports the simulated time it has reached through `jax.debug.callback`, at
points that cost nothing per step: after each sample interval and each checkpoint block of the
fixed-grid stepper, after each segment of the hybrid segment loop, and through diffrax's own
progress meter on the plain diffrax paths (every accepted step there). With `progress=False` (the
default) the program contains no callback at all.

`progress=True` shows a bar on stderr (tqdm when installed, else one text line per tenth of the
horizon); a callable `progress(t, t1)` [s] receives every report instead (for a GUI, a log, a
test). Under `vmap` the earliest time over the batch is reported (the slowest member); under
`jax.grad` the reports come again while the backward pass recomputes the checkpointed intervals.
"""

import functools
import sys
import threading
import time
from collections.abc import Callable

import diffrax as dfx
import jax
import numpy as np


# Text reports (no tqdm): one line each time the run passes another tenth of the horizon.
_TEXT_STEPS = 10


def check_progress(where: str, progress):
    """`progress` as given (bool or callable), or a ValueError naming it."""
    if isinstance(progress, bool) or callable(progress):
        return progress
    raise ValueError(
        f"{where}: `progress` must be a bool or a callable progress(t, t1) [s]; got {progress!r}."
    )


class _Display:
    """The host side of one `progress=True` run: a tqdm bar in percent, or text lines."""

    def __init__(self, t0: float, t1: float):
        self.t0, self.t1 = float(t0), float(t1)
        self.lock = threading.Lock()
        self.bar = None
        self.last = None
        self.start = None

    def _open(self):
        self.start = time.perf_counter()
        try:
            from tqdm import tqdm
        except ImportError:
            self.bar = None
        else:
            self.bar = tqdm(total=100, desc="simulate", unit="%", file=sys.stderr)

    def __call__(self, t, t1):
        span = self.t1 - self.t0
        frac = 1.0 if span <= 0 else min(max((float(t) - self.t0) / span, 0.0), 1.0)
        with self.lock:
            if self.last is None or frac < self.last:  # a new run of the same program
                if self.bar is not None:
                    self.bar.close()
                self._open()
                self.last = 0.0
            if self.bar is not None:
                self.bar.update(int(100 * frac) - int(100 * self.last))
            elif int(_TEXT_STEPS * frac) > int(_TEXT_STEPS * self.last) or frac == 1.0 > self.last:
                print(
                    f"simulate: {100 * frac:3.0f} % (t = {float(t):.6g} of {self.t1:.6g} s, "
                    f"{time.perf_counter() - self.start:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
            self.last = frac
            if frac >= 1.0 and self.bar is not None:
                self.bar.close()
                self.bar = None


class Reporter:
    """What a driver calls inside the compiled run: `reporter(t)` reports time `t` [s] to the host.

    Built outside the trace from the user's `progress` (True or a callable) and the horizon.
    """

    def __init__(self, progress, t0: float, t1: float):
        self.t0, self.t1 = float(t0), float(t1)
        self.target: Callable = _Display(t0, t1) if progress is True else progress

    def _host(self, t):
        self.target(float(np.min(np.asarray(t))), self.t1)

    def _host_fraction(self, p):
        self.target(self.t0 + float(np.min(np.asarray(p))) * (self.t1 - self.t0), self.t1)

    def __call__(self, t):
        jax.debug.callback(self._host, t)

    def meter(self) -> dfx.AbstractProgressMeter:
        """A diffrax progress meter for a plain `diffeqsolve` over the run's horizon."""
        return _DiffraxMeter(self)


class _DiffraxMeter(dfx.AbstractProgressMeter):
    """diffrax's progress-meter protocol feeding a `Reporter` (diffrax reports the fraction of
    `[t0, t1]` covered after each step)."""

    reporter: Reporter

    def init(self):
        return None

    def step(self, state, progress):
        jax.debug.callback(self.reporter._host_fraction, progress)
        return state

    def close(self, state):
        pass


@functools.lru_cache(maxsize=64)
def _cached(progress, t0: float, t1: float) -> Reporter:
    return Reporter(progress, t0, t1)


def reporter(progress, t0, t1) -> Reporter | None:
    """A `Reporter` for `progress` (None when off: the drivers then add no callback). The same
    `(progress, t0, t1)` gives the same reporter, a static argument of the compiled drivers, so a
    repeated call does not compile again."""
    return _cached(progress, float(t0), float(t1)) if progress is not False else None
