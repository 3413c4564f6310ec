"""The clocked driver's loop state, as named modules (one scan iteration = one segment)."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from ..._model._clocks import with_held


def where(c, a, b):
    """`a` where `c` else `b`, leaf by leaf (`c` a scalar boolean)."""
    return jtu.tree_map(lambda u, v: jnp.where(c, u, v), a, b)


def nan_rows(tree, n: int):
    """`n` rows shaped like `tree`'s leaves: NaN for floating leaves, -1 for integer ones."""

    def mk(u):
        u = jnp.asarray(u)
        fill = jnp.nan if jnp.issubdtype(u.dtype, jnp.inexact) else -1
        return jnp.full((n,) + u.shape, fill, u.dtype)

    return jtu.tree_map(mk, tree)


def set_rows(buf, rows, values):
    """`buf` with `values` written at `rows` (out-of-range rows dropped), leaf by leaf."""
    return jtu.tree_map(lambda b, v: b.at[rows].set(v, mode="drop"), buf, values)


class Tally(eqx.Module):
    """Work and counters of the run so far (`Solution.stats`)."""

    num_steps: jax.Array
    num_rejected_steps: jax.Array
    num_rhs: jax.Array
    num_segments: jax.Array
    num_events: jax.Array
    counts: Any  # step-map counters (e.g. MRP switches), totals

    @classmethod
    def zero(cls, counts0, num_rhs=0, num_events=0):
        i64 = lambda x: jnp.asarray(x, jnp.int64)
        return cls(i64(0), i64(0), i64(num_rhs), i64(0), i64(num_events), counts0)


class Arming(eqx.Module):
    """How each event condition is read at a segment start (after an event, or for a re-solve).

    - `override`: the condition's value at the segment start is replaced by `sign` (a restart on
      its surface takes the sign of where it is heading, so it cannot re-fire);
    - `sign`: that replacement value (+-1);
    - `disabled`: the condition is held constant for a re-solve up to `cap` (it was reported by the
      solver although another condition crossed earlier in the same step);
    - `cap`: the time a re-solve stops at (inf otherwise);
    - `left`: the side (+-1) each condition was on at the end of the previous segment, when that
      segment reached a boundary (a clock tick, a scheduled discontinuity, a re-solve cap); 0
      otherwise. A condition exactly on its surface with no rate at the segment start (a tangency
      on a tick) stays on that side, as it would between two steps of one segment.
    """

    override: jax.Array
    sign: jax.Array
    disabled: jax.Array
    cap: jax.Array
    left: jax.Array


class Samples(eqx.Module):
    """Values at the sample times `ts` (left limits at boundaries)."""

    y: Any
    z: Any
    held: Any

    def put(self, idx, window: int, y, z, held):
        """Write window rows `idx` (out of range: dropped); `z`, `held` are broadcast."""

        def one(b, v):
            v = jnp.broadcast_to(v, (window,) + b.shape[1:])
            return b.at[idx].set(v, mode="drop")

        put = lambda buf, vals: jtu.tree_map(one, buf, vals)
        return Samples(put(self.y, y), put(self.z, z), put(self.held, held))


class EventLogBuffer(eqx.Module):
    """Fixed-size event log being filled (`jaxsim.EventLog` at the end)."""

    t: jax.Array
    index: jax.Array
    y_before: Any
    y_after: Any
    z_before: Any
    z_after: Any

    @classmethod
    def empty(cls, n: int, y0, z0):
        return cls(
            jnp.full((n,), jnp.nan),
            jnp.full((n,), -1),
            nan_rows(y0, n),
            nan_rows(y0, n),
            nan_rows(z0, n),
            nan_rows(z0, n),
        )

    def write(self, rows, t, index, y_before, y_after, z_before, z_after):
        """Rows `rows` (out of range: dropped) record one firing each."""
        return EventLogBuffer(
            self.t.at[rows].set(t, mode="drop"),
            self.index.at[rows].set(index, mode="drop"),
            set_rows(self.y_before, rows, y_before),
            set_rows(self.y_after, rows, y_after),
            set_rows(self.z_before, rows, z_before),
            set_rows(self.z_after, rows, z_after),
        )


class Status(eqx.Module):
    """Where the run is: `done` (no more segments), `stopped` (a terminal event or level stop),
    `overflow` (more firings than `max_events`), `result` (first failure, else successful)."""

    done: jax.Array
    stopped: jax.Array
    overflow: jax.Array
    result: Any


class SegmentInputs(eqx.Module):
    """The `args` of one segment's solve (diffrax passes them to every term and solver call): the
    driver's own data beside the user's `args` and the held outputs, each in its own field.

    - `args`: the user's `args`, as given to `simulate`;
    - `held`: the held outputs `{model name: {address: value}}` over the segment;
    - `lo`, `hi`: the times one ulp inside the segment at which the drift is evaluated;
    - `t_start`: the segment's start; `override`, `sign`, `disabled`, `left`: the event arming
      there (`Arming`).

    `model_args()` is what the model and the events read (`jaxsim._model._clocks.with_held`).
    """

    args: Any
    held: Any
    lo: jax.Array
    hi: jax.Array
    t_start: jax.Array
    override: jax.Array
    sign: jax.Array
    disabled: jax.Array
    left: jax.Array

    def model_args(self):
        return with_held(self.args, self.held)


class Carry(eqx.Module):
    """The scan carry: time and states, step-size state, event arming, buffers and counters."""

    t: jax.Array
    y: Any
    z: Any  # discrete states {model_name: z}
    held: Any  # held outputs {model_name: {address: value}}
    k: jax.Array  # next boundary (index into the sorted boundaries)
    dt_proposed: jax.Array  # adaptive: the controller's proposed next step
    controller_state: Any
    arming: Arming
    status: Status
    tally: Tally
    samples: Samples
    clock_log: Any  # {model_name: {"z": rows, "held": rows}} (post-tick values)
    event_log: EventLogBuffer
