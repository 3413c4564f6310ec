"""Progress of long runs: `simulate(..., progress=True)`, and the bars of `run_batch` and
`run_campaign`.

**Reports.** The compiled run reports the simulated time it has reached through
`jax.debug.callback`, at points that cost little per step: after each sample interval and each
checkpoint block of the fixed-grid stepper, after each segment of the clocked driver, and
through diffrax's progress meter on the plain diffrax paths (every accepted step there). Each
report carries a token, an array argument of the program, naming the host target of this call.
`progress=False` (the default) adds no reports: the program has no host callbacks, so JAX's
persistent cache (`jaxsim.enable_cache()`) can keep it. Switching progress on compiles once more;
every later call with progress on (`True` or any callable) runs that program, since the host
target travels as the token. Inside a user's `jit`/`vmap`/`grad` the token is a constant of the
outer program (that program is compiled per call of `simulate` with progress on anyway).

**Display.** `progress=True` draws a `tqdm.auto` bar (a Jupyter widget where ipywidgets is
installed, text on stderr elsewhere; tqdm is the `progress` extra, and `progress=True` without it
is refused): the status "compiling" from the call until the first report (the compile, or a
program load, comes first), then the simulated time reached and the rate in simulated seconds per
wall-clock second, measured from the first report. A callable `progress(t, t1)` [s] receives every
report instead (a GUI, a log, a test). Under `vmap` the earliest time over the batch is reported
(the slowest member); under `jax.grad` the reports come again while the backward pass recomputes
the checkpointed intervals. `run_batch` and `run_campaign` use the same `Bar` (members, members per
second).
"""

import collections
import itertools
import threading
import time
from collections.abc import Callable

import diffrax as dfx
import equinox as eqx
import jax
import numpy as np


# Host targets (displays or callables) by token, the most recent first out of the table last: a
# program traced with a constant token (inside a user's jit) reports to it while it is here.
_MAX_TARGETS = 256


def check_progress(where: str, progress):
    """`progress` as given (bool or callable), or a ValueError naming it; `True` needs tqdm."""
    if progress is True:
        tqdm_class(where)
        return progress
    if isinstance(progress, bool) or callable(progress):
        return progress
    raise ValueError(
        f"{where}: `progress` must be a bool or a callable progress(t, t1) [s]; got {progress!r}."
    )


def tqdm_class(where: str):
    """`tqdm.auto.tqdm`, or an ImportError saying how to install it."""
    try:
        from tqdm.auto import tqdm
    except ImportError as err:
        raise ImportError(
            f"{where}: `progress=True` draws a tqdm progress bar, and tqdm is not installed: "
            "`pip install 'jaxsim-spacecraft[progress]'` (or `pip install tqdm`), or pass a callable that "
            "receives each report."
        ) from err
    return tqdm


class Bar:
    """One progress bar (`tqdm.auto`) of `simulate`, `run_batch` or `run_campaign`.

    Opened with the status "compiling"; `update(n)` sets the position (in `unit`) and shows the
    rate in `unit` per second measured from the first update (so the compile is not counted).
    """

    def __init__(self, where: str, total: float, unit: str, *, compiling: bool = True):
        tqdm = tqdm_class(where)
        self.unit, self.total = unit, total
        self.lock = threading.Lock()
        self.first = None  # (wall time, position) at the first update
        fmt = "{n:.4g}/{total:.4g}" if unit.endswith(" s") else "{n:.0f}/{total:.0f}"
        self.bar = tqdm(
            total=total,
            desc=where,
            unit=unit,
            bar_format="{l_bar}{bar}| " + fmt + " {unit} [{elapsed}{postfix}]",
            dynamic_ncols=True,
        )
        if compiling:
            self.bar.set_postfix_str("compiling")

    def status(self, text: str) -> None:
        """Show `text` (e.g. "running" once compiled) until the next update."""
        with self.lock:
            if self.bar is not None:
                self.bar.set_postfix_str(text)

    def start_at(self, n: float, extra: str = "") -> None:
        """Set the position to `n` (work done before, e.g. a resumed campaign's adopted chunks)
        without starting the rate: it is measured from the next update on, over what this call
        computes."""
        with self.lock:
            if self.bar is None:
                return
            self.bar.n = n
            self.bar.set_postfix_str(extra, refresh=False)
            self.bar.refresh()

    def update(self, n: float, extra: str = "") -> None:
        with self.lock:
            if self.bar is None:
                return
            now = time.perf_counter()
            if self.first is None:
                self.first = (now, n)
                status = "running"
            else:
                t_first, n_first = self.first
                rate = (n - n_first) / (now - t_first) if now > t_first else 0.0
                status = f"{rate:.4g} {self.unit}/s"
            self.bar.n = n
            self.bar.set_postfix_str(status + (f", {extra}" if extra else ""), refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None


class _Display:
    """The host side of one `progress=True` call of `simulate`: a `Bar` in simulated seconds."""

    def __init__(self, t0: float, t1: float):
        self.t0, self.t1 = float(t0), float(t1)
        self.last = None
        self.bar = Bar("simulate", self.t1 - self.t0, "sim s")

    def __call__(self, t, t1):
        span = self.t1 - self.t0
        frac = 1.0 if span <= 0 else min(max((float(t) - self.t0) / span, 0.0), 1.0)
        if self.last is not None and frac < self.last:
            # A new run of a program traced with this display (a user's jit called again).
            self.bar.close()
            self.bar = Bar("simulate", span, "sim s", compiling=False)
        self.last = frac
        self.bar.update(frac * span)
        if frac >= 1.0:
            self.bar.close()

    def close(self):
        self.bar.close()


class _Target:
    def __init__(self, progress, t0: float, t1: float):
        self.t0, self.t1 = float(t0), float(t1)
        self.fn: Callable = _Display(t0, t1) if progress is True else progress
        # The first exception a callable raised: the run goes on without reports, and `guarded`
        # raises it after the run (raised inside the program, it would surface as JAX's
        # "CpuCallback error" that does not name it).
        self.error: Exception | None = None

    def time(self, t: float):
        if self.error is not None:
            return
        try:
            self.fn(t, self.t1)
        except Exception as err:  # noqa: BLE001 - the user's callback; raised by `guarded`
            self.error = err

    def close(self):
        if isinstance(self.fn, _Display):
            self.fn.close()


_targets: collections.OrderedDict = collections.OrderedDict()
_targets_lock = threading.Lock()
_tokens = itertools.count(1)


def _register(progress, t0, t1) -> int:
    token = next(_tokens)
    target = _Target(progress, t0, t1)
    with _targets_lock:
        _targets[token] = target
        old = _targets.popitem(last=False)[1] if len(_targets) > _MAX_TARGETS else None
    if old is not None:
        old.close()
    return token


def release(reporter) -> None:
    """Close the display of `reporter`'s call (after a run that failed before its last report)."""
    if reporter is None:
        return
    with _targets_lock:
        target = _targets.pop(int(np.asarray(reporter.token)), None)
    if target is not None:
        target.close()


def guarded(reporter, fn, *args, **kwargs):
    """`fn(*args, **kwargs)`, closing `reporter`'s display if it raises (a refused request, a
    failed run)."""
    try:
        out = fn(*args, **kwargs)
    except BaseException:
        release(reporter)
        raise
    if reporter is not None:
        _raise_callback_error(reporter, out)
    return out


def _raise_callback_error(reporter, out) -> None:
    """The exception a `progress` callable raised during the run that computed `out`, raised
    here with a note naming the callback (top-level runs; under a user's trace the run has not
    happened yet)."""
    target = _target(reporter.token)
    if target is None or isinstance(target.fn, _Display):
        return
    if isinstance(reporter.token, jax.core.Tracer) or any(
        isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(out)
    ):
        return
    jax.block_until_ready(out)
    jax.effects_barrier()  # every report of the run delivered
    if target.error is not None:
        err = target.error
        release(reporter)
        err.add_note(
            "simulate: raised by the `progress` callback progress(t, t1) [s] during the run "
            "(reports stopped there)."
        )
        raise err


def _target(token):
    with _targets_lock:
        return _targets.get(int(np.asarray(token)))


def host_time(token, t):
    """Host side of a report: the time `t` [s] reached (the earliest over a batch)."""
    target = _target(token)
    if target is not None:
        target.time(float(np.min(np.asarray(t))))


def host_fraction(token, p):
    """Host side of a diffrax progress-meter report: the fraction `p` of the horizon covered."""
    target = _target(token)
    if target is not None:
        frac = float(np.min(np.asarray(p)))
        target.time(target.t0 + frac * (target.t1 - target.t0))


class Reporter(eqx.Module):
    """What a driver calls inside the compiled run: `reporter(t)` reports time `t` [s] to the host.

    `token` (an int64 array, an argument of the program) names the host target of this call.
    """

    token: np.ndarray

    def __call__(self, t):
        jax.debug.callback(host_time, self.token, t)

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
        jax.debug.callback(host_fraction, self.reporter.token, progress)
        return state

    def close(self, state):
        pass


def reporter(progress, t0, t1) -> Reporter | None:
    """The `Reporter` of one call of `simulate` (`progress` checked by `check_progress`): None
    when `progress` is False (no reports in the program), else one with a fresh token (a
    `progress=True` display opens here, with its "compiling" status)."""
    if progress is False:
        return None
    return Reporter(np.asarray(_register(progress, t0, t1), np.int64))
