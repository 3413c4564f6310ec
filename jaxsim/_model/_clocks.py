r"""Clocks and discrete-time models (flight software) for the clocked driver.

A **clock** is a static schedule of tick instants. Tick times are held as exact rationals
(`fractions.Fraction`) so that ties between clocks are decided by integer tick index on a common
base (the least common multiple of the denominators), never by a float window: clocks at 1/2 s and
1/3 s tie exactly at t = 1, 2, 3, ..., and 3 x 0.05 equals 0.15.

A **discrete model** owns a discrete state `z` and an update

$$ z_{k+1},\ h_{k+1} = \mathrm{update}(t_k, y(t_k), z_k, \mathrm{args}_k) $$

run at each tick $t_k$ of its clock, where $h$ are its *held outputs* (zero-order hold). Held
outputs are a dict whose top-level keys are *addresses*; they are merged into the `args` that every
`drift` call receives:

```
args seen by drift / update / events = {**user_args, **held_outputs_of_all_models}
```

So a controller returning `{"motor": {"u": 0.3}}` is read by the plant as `args["motor"]["u"]`, the
same convention as `effectors` commands (`args[effector_name][key]`). Two models may not write the
same top-level key, nor a key of `user_args`, which must then be a dict (or None).

The drivers keep the two apart: the user's `args` are passed on as given (never updated), the held
outputs travel in the drivers' own typed loop state (`held`, beside `args`), and the view above is
built where a function is called, by one function (`with_held`). What a user's model, a discrete
model or an event receives as `args` is therefore the same on every path, and the driver's own
data (segment bounds, event arming) never enters it.

Tick semantics (bdsim's, made exact):

- ticks at `offset + k * period` strictly after `t0` and up to and including `t1` (no tick at
  `t0`), from integer `k` (no drift);
- all *Jacobi* models due at one instant update from the same pre-tick values (`y(t_k)`, every
  model's pre-tick `z` and held outputs in `args`), so their order cannot matter;
- then *sequential* models (`sequential=True`, bdsim's "user callables") due at that instant run in
  declaration order, each seeing the held outputs already updated by the clocks and by the
  sequential models before it;
- a discontinuity time (`discontinuities=`) or a sample time equal to a tick is not a separate
  event: sampled values at a tick time are the **pre-tick** values (left limits); the clock log
  holds the **post-tick** state.

**Reference:** P. Corke, bdsim (2020-2024), `Clock` and `TimeQ` semantics; Basilisk's integer
nanosecond task scheduler.
"""

import abc
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._quantity import parse_unit
from ._validation import check_name


# Largest denominator accepted when turning a float period/offset/time into an exact rational.
_MAX_DEN = 10**6
# Relative mismatch allowed between a float and its rational: a few ulps of float64.
_RAT_RTOL = 4e-16


def as_rational(cls: str, arg: str, value) -> Fraction:
    """Exact rational of `value` [s] (a Fraction, an int, a "p/q" string or a float close to p/q)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, str):
        try:
            return Fraction(value)
        except ValueError as err:
            raise ValueError(
                f"{cls}: `{arg}` must be a rational like '1/3' [s]; got {value!r}."
            ) from err
    if isinstance(value, jax.core.Tracer):
        raise ValueError(
            f"{cls}: `{arg}` [s] must be concrete (it fixes the tick schedule); got a traced value."
        )
    try:
        x = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{cls}: `{arg}` must be a number [s]; got {value!r}.") from err
    if not math.isfinite(x):
        raise ValueError(f"{cls}: `{arg}` must be finite [s]; got {x}.")
    r = Fraction(x).limit_denominator(_MAX_DEN)
    if abs(float(r) - x) > _RAT_RTOL * max(abs(x), 1e-300):
        raise ValueError(
            f"{cls}: `{arg}` [s] must be a rational p/q with q <= {_MAX_DEN} (ties are decided "
            f"exactly); got {x!r}. Pass a fractions.Fraction or a string like '1/3'."
        )
    return r


def with_held(args, held) -> dict:
    """The `args` that a model, a discrete model or an event reads at a time of a clocked run:
    `{**args, **held outputs of every discrete model}` (`held`: `{model name: {address:
    value}}`), a new dict (the user's `args` are not changed)."""
    out = dict(args) if isinstance(args, Mapping) else {}
    for h in held.values():
        if isinstance(h, Mapping):
            out.update(h)
    return out


class AbstractClock(eqx.Module):
    """A static schedule of tick instants."""

    @abc.abstractmethod
    def ticks(self, t0: Fraction, t1: Fraction) -> list[Fraction]:
        """Exact tick instants in $(t_0, t_1]$, increasing."""


class Clock(AbstractClock):
    r"""Periodic clock: ticks at $t_k = \mathrm{offset} + k\,\mathrm{period}$ for integers $k$, $t_0 < t_k \le t_1$.

    **Arguments:**

    - `period`: tick period [s] > 0 (float close to a rational p/q, a `Fraction`, or "p/q").
    - `offset`: phase [s] (same forms), default 0.

    **Assumptions and limitations:** static (not differentiable, not traced); no tick at `t0`.
    """

    period: Fraction = eqx.field(static=True)
    offset: Fraction = eqx.field(static=True)

    def __init__(self, period: float | Fraction | str, offset: float | Fraction | str = 0.0):
        p = as_rational("Clock", "period", period)
        if p <= 0:
            raise ValueError(f"Clock: `period` must be > 0 [s]; got {float(p)}.")
        self.period = p
        self.offset = as_rational("Clock", "offset", offset)

    def ticks(self, t0, t1):
        k0 = math.floor((t0 - self.offset) / self.period) + 1
        k1 = math.floor((t1 - self.offset) / self.period)
        return [self.offset + k * self.period for k in range(k0, k1 + 1)]


class Schedule(AbstractClock):
    """Ticks at explicit instants (bdsim's one-shot callables).

    **Arguments:**

    - `times`: tick instants [s], each a float close to a rational, a `Fraction` or "p/q".
    """

    times: tuple = eqx.field(static=True)

    def __init__(self, times: float | Fraction | str | Sequence[float | Fraction | str]):
        ts = tuple(sorted(set(as_rational("Schedule", "times", x) for x in np.atleast_1d(times))))
        if not ts:
            raise ValueError("Schedule: `times` must hold at least one instant [s]; got ().")
        self.times = ts

    def ticks(self, t0, t1):
        return [x for x in self.times if t0 < x <= t1]


class AbstractDiscreteModel(eqx.Module):
    """A discrete-time model on a clock (a flight-software module).

    Subclasses define `name` (static), `clock`, `init_state()` and `update`; `init_outputs`,
    `sequential`, `command_addresses`, `units()` and `prepare()` have declared defaults. See the
    module docstring for the tick semantics and the `args` convention.
    """

    name: eqx.AbstractVar[str]
    clock: eqx.AbstractVar[AbstractClock]

    @property
    def sequential(self) -> bool:
        """False: Jacobi update with the clocks; True: run after them, in declaration order."""
        return False

    @property
    def command_addresses(self) -> tuple[str, ...]:
        """Held-output addresses that command effectors of the simulated model (e.g. the name of
        the wheels that an attitude controller drives): `simulate` refuses the run when the model
        reads commands only and has no such address (the command would be ignored). Default:
        none (`()`)."""
        return ()

    def units(self) -> dict | None:
        """Units of what this model writes: `{"held": {address: {key: unit}}}` (a unit string
        may stand for a whole subtree). `simulate` compares them with the units the simulated
        model declares for the commands they feed (its `units()["args"]`) and refuses a
        different one by name (`"mN m"` written where `"N m"` is read). Default None:
        undeclared, not compared."""
        return None

    @abc.abstractmethod
    def init_state(self) -> Any:
        """Discrete state before the first tick (a pytree; may be empty `{}`)."""

    @abc.abstractmethod
    def update(self, t, y, z, args) -> tuple[Any, dict]:
        """`(z_next, held_outputs)` at a tick `t` [s] from the pre-tick `y`, `z`, `args`."""

    def init_outputs(self, y0, args) -> dict | None:
        """Held outputs before the first tick; None (default) means zeros of `update`'s outputs."""
        return None

    def prepare(self) -> "AbstractDiscreteModel":
        """This model with what its updates compute from its parameters alone done once per run.

        `simulate` calls it inside the compiled run, before the first tick and outside the step
        loop, and ticks the returned model: the precomputed values always match the parameters
        of this call (a sweep or `eqx.tree_at` cannot leave them stale) and gradients flow
        through them. An update runs under a conditional (only when its clock is due), where the
        compiler cannot hoist parameter-only work out of the loop itself. The returned model must
        keep `name`, `clock`, `init_state()` and the outputs' structure. Default: `self`.
        """
        return self


class DiscreteModel(AbstractDiscreteModel):
    """A discrete model from a plain function.

    **Arguments:**

    - `name`: unique name (key of its discrete state in `Solution.zs` and the clock logs).
    - `clock`: a `Clock` or `Schedule`.
    - `update`: `update(t, y, z, args) -> (z_next, held_outputs)`; `held_outputs` a dict of
      addresses merged into `args` (see module docstring).
    - `z0`: initial discrete state pytree (default `{}`).
    - `held0`: held outputs before the first tick (default zeros).
    - `sequential`: run after the Jacobi clocks of the same instant, in declaration order.
    - `units`: units of the held outputs, `{address: {key: unit}}` (default None: undeclared);
      `simulate` compares them with the units the model declares for those commands.
    """

    name: str = eqx.field(static=True)
    clock: AbstractClock
    fn: Callable = eqx.field(static=True)
    z0: Any
    held0: Any
    is_sequential: bool = eqx.field(static=True)
    held_units: Any = eqx.field(static=True)

    def __init__(
        self,
        name: str,
        clock: AbstractClock,
        update: Callable[..., tuple[Any, dict]],
        z0: Any = None,
        held0: Any = None,
        *,
        sequential: bool = False,
        units: dict | None = None,
    ):
        self.name = check_name("DiscreteModel", "name", name)
        if not isinstance(clock, AbstractClock):
            raise ValueError(
                f"DiscreteModel: `clock` must be a Clock or Schedule; got {type(clock).__name__}."
            )
        if not callable(update):
            raise ValueError(f"DiscreteModel: `update` must be callable; got {update!r}.")
        self.clock = clock
        self.fn = update
        self.z0 = {} if z0 is None else jtu.tree_map(jnp.asarray, z0)
        self.held0 = held0
        self.is_sequential = bool(sequential)
        self.held_units = _checked_units(name, units)

    @property
    def sequential(self):
        return self.is_sequential

    def units(self):
        return None if self.held_units is None else {"held": _thaw(self.held_units)}

    def init_state(self):
        return self.z0

    def update(self, t, y, z, args):
        return self.fn(t, y, z, args)

    def init_outputs(self, y0, args):
        return self.held0


def _checked_units(name: str, units):
    """`DiscreteModel`'s `units` as a hashable tree (a static field): nested `(key, value)`
    tuples of unit strings, each one read by `parse_unit`."""

    if units is None:
        return None

    def freeze(node, path):
        if isinstance(node, str):
            parse_unit(node, f"DiscreteModel {name!r}: `units{path}`")
            return node
        if not isinstance(node, dict):
            raise TypeError(
                f"DiscreteModel {name!r}: `units{path}` must be a unit string or a dict of "
                f"them, keyed like the held outputs; got {type(node).__name__}."
            )
        return tuple((k, freeze(v, f"{path}[{k!r}]")) for k, v in node.items())

    return freeze(units, "")


def _thaw(node):
    return node if isinstance(node, str) else {k: _thaw(v) for k, v in node}


@dataclasses.dataclass(frozen=True)
class TickPlan:
    """The merged static schedule of several clocks (built once, outside `jit`; hashable).

    - `times`: float64 boundary times, length `n`; the last is `t1` (a tick or not).
    - `due`: `(n, n_models)` booleans: model m updates at boundary k.
    - `tick_number`: `(n, n_models)` ints: index of that tick in model m's log (or `n_ticks[m]`).
    - `n_ticks`: ticks per model; `model_times`: each model's tick times.
    """

    times: tuple
    due: tuple
    tick_number: tuple
    n_ticks: tuple
    model_times: tuple
    base: int


def plan_ticks(models, t0: float, t1: float) -> TickPlan:
    """Merge the clocks of `models` on an integer base; ties decided exactly."""
    r0 = Fraction(float(t0))
    r1 = Fraction(float(t1))
    per_model = [m.clock.ticks(r0, r1) for m in models]
    dens = [x.denominator for ticks in per_model for x in ticks[:1]]
    for m in models:
        c = m.clock
        if isinstance(c, Clock):
            dens += [c.period.denominator, c.offset.denominator]
        else:
            dens += [x.denominator for x in c.times]
    base = 1
    for d in dens:
        base = base * d // math.gcd(base, d)
    if base * max(abs(r1), 1) > 2**62:
        raise ValueError(
            f"simulate: the clocks' common tick base 1/{base} s over t1 = {float(r1)} s overflows "
            "64-bit tick indices; use periods/offsets with smaller denominators."
        )
    ints = [np.array([int(x * base) for x in ticks], dtype=np.int64) for ticks in per_model]
    allint = np.unique(np.concatenate(ints)) if ints else np.zeros(0, np.int64)
    times = [float(Fraction(int(n), base)) for n in allint]
    # The tick integers are exact; the float end time t1 closes the schedule.
    if not times or times[-1] < float(t1):
        times.append(float(t1))
        allint = np.concatenate([allint, [-1]])
    n, nm = len(times), len(models)
    due = np.zeros((n, nm), bool)
    num = np.zeros((n, nm), np.int64)
    for j, arr in enumerate(ints):
        pos = {int(v): i for i, v in enumerate(arr)}
        for k, v in enumerate(allint):
            i = pos.get(int(v))
            due[k, j] = i is not None
            num[k, j] = i if i is not None else len(arr)
    return TickPlan(
        times=tuple(float(x) for x in times),
        due=tuple(tuple(bool(b) for b in row) for row in due),
        tick_number=tuple(tuple(int(i) for i in row) for row in num),
        n_ticks=tuple(len(a) for a in ints),
        model_times=tuple(tuple(float(x) for x in t) for t in per_model),
        base=int(base),
    )
