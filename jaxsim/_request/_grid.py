"""Physical checks of the initial state, clock ticks, sample times and the step grid, the step budget."""

import jax
import numpy as np

from .._model._arguments import _validity
from .._model._validation import is_concrete
from .._solvers._ode import AbstractFixedStepSolver
from ._settings import GRID_RTOL, _scalar, _short


# --------------------------------------------------------------------------------------------------
# Physical checks, clock ticks


def check_physical(model, y0) -> None:
    """A concrete model whose physical checks fail (e.g. a hub mass set to a negative value with
    `eqx.tree_at`, a fuel load above the tank's maximum in `y0`) is refused, naming the quantities.

    Traced values are checked in the program: they fail the run as `invalid_model`."""
    checks = _validity(model, y0)
    bad = [k for k, v in checks.items() if is_concrete(v) and not bool(np.all(np.asarray(v)))]
    if bad:
        raise ValueError(
            f"simulate: the model is not physical: {', '.join(bad)} out of range (the ranges are "
            f"those of `{type(model).__name__}.validity(y0)`, e.g. masses and inertias positive, "
            "fuel within [0, max]); was it changed after construction (eqx.tree_at, a "
            "dispersion)?"
        )


# Clock ticks are listed on the host and each is a segment boundary of the run: more than this
# many is refused up front (a period in the wrong unit listed ticks for minutes).
MAX_CLOCK_TICKS = 10**7


def check_clock_ticks(clocks, t0, t1) -> None:
    """Periodic clocks (`Clock`, the `clock` of a discrete model) over `[t0, t1]`: at most
    `MAX_CLOCK_TICKS` ticks, else a `ValueError` with the estimate (concrete times only)."""
    a, b = _scalar("t0", t0, "s"), _scalar("t1", t1, "s")
    if a is None or b is None or not clocks:
        return
    for c in clocks:
        clock = getattr(c, "clock", c)
        period = getattr(clock, "period", None)
        if period is None:
            continue
        try:
            p = float(period)
        except (TypeError, ValueError):
            continue
        if p > 0 and abs(float(b) - float(a)) / p > MAX_CLOCK_TICKS:
            n = abs(float(b) - float(a)) / p
            name = getattr(c, "name", type(c).__name__)
            raise ValueError(
                f"simulate: clock of {name!r} (period {p!r} s) would tick {n:.3g} times over "
                f"[{float(a)!r}, {float(b)!r}] s (more than {MAX_CLOCK_TICKS:.0e}, each a segment "
                "boundary); check the unit of its period."
            )


# --------------------------------------------------------------------------------------------------
# Sample times and the step grid


def concrete(name, value):
    """`value` as a float64 numpy array, or a ValueError saying it must be concrete."""
    try:
        return np.asarray(value, dtype=float)
    except jax.errors.TracerArrayConversionError as err:
        raise ValueError(
            f"simulate: `{name}` must be concrete (a Python float or numpy array), since it fixes "
            "the step grid and the output shape; got a traced value. Pass it outside `jit`/`grad`."
        ) from err


def sample_times(t0, t1, ts, sample_dt):
    """`(t0, t1, ts)` as floats and a concrete array: `ts`, `[t0, t1]` or a uniform grid of
    `sample_dt`; `ts` non-decreasing from `t0` to `t1`, `sample_dt` dividing the horizon."""
    if ts is not None and sample_dt is not None:
        raise ValueError("simulate: give either `ts` or `sample_dt`, not both.")
    if t1 is None and ts is None:
        raise ValueError("simulate: `t1` [s] is required when `ts` is not given; got None.")
    t0 = float(concrete("t0", t0))
    if ts is not None:
        ts = np.atleast_1d(concrete("ts", ts))
        if ts.ndim != 1 or ts.size == 0:
            raise ValueError(
                f"simulate: `ts` [s] must be a non-empty 1-D array; got shape {ts.shape}."
            )
        if np.any(np.diff(ts) < 0):
            raise ValueError(f"simulate: `ts` [s] must be non-decreasing; got {ts}.")
        if ts[0] < t0:
            raise ValueError(
                f"simulate: `ts` [s] must start at or after t0={t0}; got ts[0]={ts[0]}."
            )
        if t1 is not None and not np.isclose(float(t1), ts[-1], rtol=1e-12, atol=0.0):
            raise ValueError(
                f"simulate: `ts[-1]` must equal `t1` [s] (integration ends at the last sample); "
                f"got ts[-1]={ts[-1]} and t1={t1}."
            )
        return t0, float(ts[-1]), ts
    t1 = float(concrete("t1", t1))
    if not t1 > t0:
        raise ValueError(f"simulate: `t1` [s] must be > t0={t0}; got {t1}.")
    if sample_dt is None:
        return t0, t1, np.array([t0, t1])
    sample_dt = float(concrete("sample_dt", sample_dt))
    if not sample_dt > 0:
        raise ValueError(f"simulate: `sample_dt` [s] must be > 0; got {sample_dt}.")
    n = (t1 - t0) / sample_dt
    if abs(n - round(n)) > GRID_RTOL * max(1.0, n):
        raise ValueError(
            f"simulate: `sample_dt` [s] must divide the horizon t1 - t0 = {t1 - t0}; got {sample_dt} "
            f"({n:.6g} intervals)."
        )
    return t0, t1, t0 + sample_dt * np.arange(round(n) + 1)


def check_step(solver_name: str, dt, what: str = "fixed-step solver") -> float:
    """The fixed step `dt` [s]: given, concrete, > 0."""
    if dt is None:
        raise ValueError(f"simulate: {what} {solver_name} needs `dt` [s]; got None.")
    dt = float(concrete("dt", dt))
    if not dt > 0:
        raise ValueError(f"simulate: `dt` [s] must be > 0; got {dt}.")
    return dt


def grid_segments(ts, t0, t1, dt) -> tuple:
    """Steps of `dt` per sample interval (the first from `t0` to `ts[0]`); every sample on the
    grid `t0 + k dt`, else a ValueError naming the off-grid times."""
    idx = (ts - t0) / dt
    off = np.abs(idx - np.round(idx)) > GRID_RTOL * np.maximum(1.0, idx)
    if np.any(off):
        raise ValueError(
            f"simulate: with fixed step `dt`={dt} s every sample time must be t0 + k*dt (exact "
            f"sampling); got off-grid time(s) {ts[off][:5]} (the horizon t1 - t0 = {t1 - t0} s "
            f"must also be a multiple of dt)."
        )
    idx = np.round(idx).astype(np.int64)
    return tuple(int(s) for s in np.diff(np.concatenate([[0], idx])))


def on_grid(solver, adaptive, dt, events, disc, t0, boundaries, ts) -> bool:
    """Whether a segmented run can use the fixed-grid stepper (`jaxsim._drivers._clocked._grid`).

    A jaxsim fixed-step solver, no events (they need dense output), and every clock tick, sample
    time and discontinuity time concrete and on the global grid `t0 + k dt` (a traced or off-grid
    switch time splits a step: `diffeqsolve` segments).
    """
    if adaptive or events or not isinstance(solver, AbstractFixedStepSolver):
        return False
    try:
        switch = np.asarray([float(d) for d in disc], dtype=float)
    except (TypeError, jax.errors.ConcretizationTypeError):
        return False  # traced discontinuity times
    dt = float(dt)
    edges = np.concatenate([[t0], np.asarray(boundaries, dtype=float)])
    for times in (edges, np.asarray(ts, dtype=float), switch):
        k = (times - t0) / dt
        if np.any(np.abs(k - np.round(k)) > GRID_RTOL * np.maximum(1.0, np.abs(k))):
            return False
    return True


def check_max_steps(max_steps) -> int:
    """`max_steps`: an int >= 1 (the step budget of each `diffeqsolve`)."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer):
        raise TypeError(
            f"simulate: `max_steps` must be an int >= 1 (the step budget of each adaptive or "
            f"segment solve); got {type(max_steps).__name__} {_short(max_steps)}."
        )
    if not 1 <= int(max_steps) <= _INT64_MAX:
        raise ValueError(
            f"simulate: `max_steps` must be an int >= 1 and <= 2**63 - 1 (the step budget of "
            f"each adaptive or segment solve, an int64 in the program); got {int(max_steps)}."
        )
    return int(max_steps)


_INT64_MAX = 2**63 - 1


def check_budget(t0, t1, step, what: str, max_steps: int, segments: int) -> None:
    """A run that needs at least `(t1 - t0) / step` steps (`what` names the step) over at most
    `segments` solves of `max_steps` each is refused up front with the estimate."""
    if step is None:
        return
    need = abs(float(t1) - float(t0)) / float(step)
    budget = max_steps * max(int(segments), 1)
    if need > budget:
        raise ValueError(
            f"simulate: the run needs at least {need:.3g} steps ((t1 - t0) / {what}) but "
            f"`max_steps`={max_steps} per solve allows {budget:.3g} over its {max(segments, 1)} "
            "solve(s): it would fail with max_steps_reached. Raise `max_steps` or the step."
        )
