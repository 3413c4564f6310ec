r"""Free times: `simulate` over a horizon that is a traced value, in one compiled program.

A minimum-time or free-final-time problem differentiates the final state with respect to `t1` and
moves `t1` at every iteration. `simulate` takes `t0` and `t1` as traced values (under `jit`,
`grad`, `vmap`) and, with `num_steps`, as run-time inputs of a top-level call, so one compiled
program serves every horizon:

- **adaptive solvers** (`Tsit5`, `Dopri5`, `Dopri8`, diffrax solvers) as they are: the last step
  ends on `t1`, so $\partial y(t_1)/\partial t_1$ is the derivative of that step, which equals the
  drift $f(t_1, y(t_1))$ to the solver's tolerance;
- **fixed-step solvers** with `num_steps=K` in place of `dt`: $h = (t_1 - t_0)/K$, so the final
  state is a smooth function of the horizon through the step (the derivative of the discrete
  solution: the drift at $t_1$ to $O(h^p)$). A traced horizon with `dt` is refused by name (the
  number of steps would depend on a traced value);
- **samples**: `num_samples=N`, uniform in $[t_0, t_1]$ (they scale with the horizon; with a
  fixed-step solver $N - 1$ must divide $K$, so that the samples lie on the step grid), or `ts`
  given as (traced) times with an adaptive solver.

Times that a traced value puts out of order ($t_1 \le t_0$, samples not non-decreasing in
$[t_0, t_1]$) cannot be refused at the call: the run then fails with `RESULTS.invalid_times`
(states NaN from `t0` on; `throw=True` raises). Concrete times are checked at the call as always.

Not on this path (refused by name): clocks, events and discontinuities (the segment driver's
clock ticks and segment count are planned on the host from concrete times), SDE solvers, and
`sample_dt` (the number of samples would follow the horizon).
"""

import copy
import dataclasses
import functools
import operator
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._model._validation import is_concrete
from .._result._codes import RESULTS


def traced(*values) -> bool:
    """Whether any of `values` (None allowed) is a traced array."""
    return any(v is not None and not is_concrete(v) for v in values)


def requested(t0, t1, ts, num_steps) -> bool:
    """Whether a `simulate` request runs with free times: `num_steps` given, or `t0`, `t1` or `ts`
    traced."""
    return num_steps is not None or traced(t0, t1, ts)


def _count(name: str, value, minimum: int) -> int:
    """A concrete Python/NumPy integer >= `minimum` (a step or sample count fixes shapes)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if not is_concrete(value):
            raise TypeError(
                f"simulate: `{name}` must be a concrete int (it fixes the shape of the run); got a "
                "traced value."
            )
        raise TypeError(f"simulate: `{name}` must be an int; got {value!r}.")
    if int(value) < minimum:
        raise ValueError(f"simulate: `{name}` must be an int >= {minimum}; got {int(value)}.")
    return int(value)


def uniform_samples(t0, t1, num_samples):
    """`num_samples` concrete times uniform in [t0, t1], the last exactly `t1` (a concrete run)."""
    n = _count("num_samples", num_samples, 2)
    ts = float(t0) + (float(t1) - float(t0)) * np.linspace(0.0, 1.0, n)
    ts[0], ts[-1] = float(t0), float(t1)
    return ts


@dataclasses.dataclass(frozen=True)
class Horizon:
    """The times of a free-time run (scalars and `ts` are float64 arrays, possibly traced).

    `dt`: the fixed step $(t_1 - t_0)/K$ (None on adaptive runs); `seg`: steps per sample interval
    (fixed step, first entry 0: the sample at t0); `endpoints_only`: the samples are `[t0, t1]`;
    `valid`: a traced bool, the times in order (None when every time is concrete and was checked
    at the call)."""

    t0: Any
    t1: Any
    ts: Any
    dt: Any
    seg: tuple | None
    endpoints_only: bool
    valid: Any


def _refuse_segments(clocks, events, discontinuities, dtmax) -> None:
    given = [
        name
        for name, on in (
            ("clocks", bool(clocks)),
            ("events", bool(events)),
            ("discontinuities", bool(discontinuities)),
            ("dtmax", dtmax is not None),
        )
        if on
    ]
    if given:
        raise ValueError(
            f"simulate: traced `t0`/`t1` (or `num_steps`) cannot be combined with "
            f"{', '.join(f'`{g}`' for g in given)}: the segment driver plans its clock ticks and "
            "segments on the host from concrete times (their count fixes the program's shape). "
            "Give concrete `t0`/`t1` (and `dt`) for this run, or model the schedule as a control "
            "(`jaxsim.controls`) or as phases (`jaxsim.phases`)."
        )


def plan(
    t0, t1, ts, *, sample_dt, num_samples, dt, num_steps, adaptive, solver_name,
    stochastic=False, clocks=(), events=(), discontinuities=(), dtmax=None,
) -> Horizon:  # fmt: skip
    """The `Horizon` of a free-time request (`requested` is true), or a ValueError/TypeError
    naming the argument that this path cannot take."""
    if stochastic:
        raise ValueError(
            "simulate: traced `t0`/`t1` and `num_steps` are not supported by the stochastic (SDE) "
            "drivers yet; give concrete times and `dt`."
        )
    _refuse_segments(clocks, events, discontinuities, dtmax)
    if sample_dt is not None:
        raise ValueError(
            "simulate: `sample_dt` [s] cannot be used with traced times or `num_steps` (the number "
            "of samples would follow the horizon); give `num_samples=` (uniform in [t0, t1]) or "
            "`ts`."
        )
    if num_samples is not None and ts is not None:
        raise ValueError("simulate: give either `ts` or `num_samples`, not both.")
    if adaptive:
        if num_steps is not None:
            raise ValueError(
                f"simulate: `num_steps` sets the step of fixed-step solvers; {solver_name} is "
                f"adaptive (got num_steps={num_steps!r}): drop it (the horizon may be traced as "
                "it is)."
            )
        if dt is not None and not is_concrete(dt):
            raise ValueError(
                "simulate: `dt` [s] (the initial step of an adaptive solver) must be concrete; got "
                "a traced value."
            )
    else:
        if num_steps is None:
            raise ValueError(
                f"simulate: fixed-step solver {solver_name} with a traced horizon needs "
                "`num_steps=K` in place of `dt` (the step is then (t1 - t0) / K, so one program "
                f"serves every horizon); got dt={'a traced value' if traced(dt) else dt!r}."
            )
        if dt is not None:
            raise ValueError(
                f"simulate: give either `dt` [s] or `num_steps`, not both (num_steps={num_steps!r}"
                " fixes the step as (t1 - t0) / num_steps)."
            )
        num_steps = _count("num_steps", num_steps, 1)
        if ts is not None:
            raise ValueError(
                f"simulate: fixed-step solver {solver_name} samples on its step grid: with a "
                "traced horizon or `num_steps`, give `num_samples=` (uniform in [t0, t1], on the "
                "grid when num_samples - 1 divides num_steps) instead of `ts`."
            )
    if t1 is None and ts is None:
        raise ValueError("simulate: `t1` [s] is required when `ts` is not given; got None.")

    concrete = not traced(t0, t1, ts)
    t0_ = jnp.asarray(t0, dtype=float)
    checks = []
    if ts is None:
        n = 2 if num_samples is None else _count("num_samples", num_samples, 2)
        t1_ = jnp.asarray(t1, dtype=float)
        _scalar_times(t0_, t1_)
        checks.append(t1_ > t0_)
        if concrete and not float(t1) > float(t0):
            raise ValueError(f"simulate: `t1` [s] must be > t0={float(t0)}; got {float(t1)}.")
        if adaptive:
            frac = np.linspace(0.0, 1.0, n)
            inner = t0_ + (t1_ - t0_) * jnp.asarray(frac[1:-1])
            dt_, seg = None, None
        else:
            if num_steps % (n - 1):
                raise ValueError(
                    f"simulate: `num_samples` - 1 must divide `num_steps` (samples on the step "
                    f"grid); got num_samples={n}, num_steps={num_steps}."
                )
            per = num_steps // (n - 1)
            dt_ = (t1_ - t0_) / num_steps
            inner = t0_ + jnp.asarray(per * np.arange(1, n - 1), dtype=float) * dt_
            seg = (0,) + (per,) * (n - 1)
        ts_ = jnp.concatenate([t0_[None], inner, t1_[None]])
        endpoints = n == 2
    else:
        ts_ = jnp.atleast_1d(jnp.asarray(ts, dtype=float))
        if ts_.ndim != 1 or ts_.shape[0] == 0:
            raise ValueError(
                f"simulate: `ts` [s] must be a non-empty 1-D array; got shape {ts_.shape}."
            )
        t1_ = ts_[-1] if t1 is None else jnp.asarray(t1, dtype=float)
        _scalar_times(t0_, t1_)
        checks += [t1_ > t0_, ts_[0] >= t0_, jnp.all(jnp.diff(ts_) >= 0), ts_[-1] == t1_]
        if concrete:
            _check_concrete_ts(float(t0), None if t1 is None else float(t1), np.asarray(ts_))
        dt_, seg, endpoints = None, None, False
    valid = None if concrete else functools.reduce(operator.and_, checks)
    return Horizon(t0_, t1_, ts_, dt_, seg, endpoints, valid)


def _check_concrete_ts(t0: float, t1: float | None, ts) -> None:
    if np.any(np.diff(ts) < 0):
        raise ValueError(f"simulate: `ts` [s] must be non-decreasing; got {ts}.")
    if ts[0] < t0:
        raise ValueError(f"simulate: `ts` [s] must start at or after t0={t0}; got ts[0]={ts[0]}.")
    if not ts[-1] > t0:
        raise ValueError(f"simulate: `ts[-1]` [s] must be > t0={t0}; got {ts[-1]}.")
    if t1 is not None and ts[-1] != t1:
        raise ValueError(
            f"simulate: `ts[-1]` must equal `t1` [s] (integration ends at the last sample); got "
            f"ts[-1]={ts[-1]} and t1={t1}."
        )


def _scalar_times(t0, t1) -> None:
    for name, value in (("t0", t0), ("t1", t1)):
        if jnp.ndim(value) != 0:
            raise ValueError(
                f"simulate: `{name}` [s] must be a scalar; got an array of shape "
                f"{jnp.shape(value)}."
            )


def finish(sol, horizon: Horizon, throw: bool):
    """`sol` with traced times out of order reported: `RESULTS.invalid_times`, NaN states and
    outputs, `t_final = t0`; with `throw` (in-program checks) an error at run time."""
    if horizon.valid is None:
        return sol
    bad = ~horizon.valid

    def nan(tree):
        def one(x):
            if not jnp.issubdtype(jnp.result_type(x), jnp.inexact):
                return x
            # NaN multiplied in, not selected: a select sends zero cotangents back through the
            # failed run (reverse mode gave a 0 derivative where forward mode gave NaN), and an
            # added NaN constant keeps a finite tangent in an eager `jax.grad` (where `bad` is
            # concrete and `nan_tangents` leaves the solution alone). x * 1.0 is x exactly.
            return x * jnp.where(bad, jnp.nan, 1.0).astype(jnp.result_type(x))

        return jtu.tree_map(one, tree)

    ys = nan(sol.ys)
    if throw:
        ys = eqx.error_if(ys, bad, RESULTS[RESULTS.invalid_times])
    out = copy.copy(sol)
    for name, value in (
        ("ys", ys),
        ("outputs", nan(sol.outputs)),
        ("result", RESULTS.where(bad, RESULTS.invalid_times, sol.result)),
        ("t_final", jnp.where(bad, horizon.t0, sol.t_final)),
    ):
        object.__setattr__(out, name, value)
    return out
