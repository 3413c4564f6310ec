"""The record of a differentiated run's accepted steps (`DiscreteAdjoint`): every step's times, the start states of the first steps densely and of every K-th step past them, within a memory budget."""

import dataclasses

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp

from ..._compilation._jit import loops_hoisted


# Reverse mode (`DiscreteAdjoint`): the recorded start states of one run's accepted steps past
# the first `_DENSE_BYTES` of them, every K-th, take at most this many bytes; the steps between
# are recomputed in the backward pass. Measured on a 2-core CPU: a loop buffer of 16 MiB costs
# 0.5 ms to fill per call, one of 32 MiB or more 25 ms or more (allocated afresh each call: page
# faults).
RECORD_BYTES = 16 * 2**20
# The start states of the first accepted steps are all recorded within this many bytes (the J2
# orbit's state: 21840 steps): a run of fewer steps recomputes none, and the buffers filled at
# every call grow with `max_steps` by the times (16 bytes a step) and every K-th state only (J2
# day, default `max_steps`, loops hoisted: 6.5 MB instead of 16.8 MB).
_DENSE_BYTES = 2**20
# XLA's CPU runtime runs a loop body's kernels in sequence only if none touches a buffer over 512
# bytes (otherwise through its concurrent executor: 1.8x the time of a Dopri8 step of the J2
# orbit, measured); the step loops of the record keep their buffers within this size, and copy
# them to and from the whole record once per chunk of steps.
_SMALL_BYTES = 512
_MAX_CHUNK = 64


class DiscreteAdjoint(eqx.Module):
    r"""`simulate(..., adjoint=DiscreteAdjoint())`, the default (`adjoint=None`) on jaxsim's
    adaptive pairs (`Tsit5`, `Dopri5`, `Dopri8`): reverse mode (`jax.grad`, `jax.jacrev`) by
    the discrete adjoint of the accepted steps.

    The forward pass is the plain step loop, which also records each accepted step's start and
    end times and start state. The backward pass runs over the accepted steps from the last to the
    first, each time through the vector-Jacobian product of one Runge-Kutta step
    $y_{n+1} = \Phi(\theta, t_n, t_{n+1}, y_n)$ (its stages recomputed from $y_n$; the step map
    after it, e.g. the MRP shadow switch, included), and through that of the pair's dense output
    for the samples inside the step (the adjoint of a Runge-Kutta method: Hager, "Runge-Kutta
    methods in optimal control and the transformed adjoint system", Numer. Math. 87, 2000;
    Sandu, "On the properties of Runge-Kutta discrete adjoints", ICCS 2006). It is the same
    derivative as that of diffrax's `RecursiveCheckpointAdjoint` (the derivative of the accepted
    step sequence with the step sizes and accept/reject decisions held fixed: they are not
    differentiated) to round-off, at a fraction of its cost: each accepted step is
    differentiated once, rejected steps never (figures in `docs/gradients.md`).

    One step's vector-Jacobian product is a reverse loop over the stages with one drift VJP each
    (a small program, the drift's VJP compiled once; about half the time of the alternative on a
    large model such as the `combined` spacecraft) for looped stages (`unrolled=False`, the default
    of `Tsit5` and `Dopri5`), and for unrolled ones (`Dopri8`'s default) when XLA compiles loops as
    one function (`jaxsim.small_loops()`: jaxsim's programs, by default). Otherwise, and for
    derivatives w.r.t. `t0` or `t1`, it is `jax.vjp` of the written-out step (fastest for a cheap
    drift when each loop iteration is a sequence of runtime calls).

    Times: a traced `t0`, `t1` or `ts` is differentiated as in the checkpointed loop: each step's
    times carry their derivatives w.r.t. `t0` and `t1` (a step starts where the last ended, the
    last one ends at `t1`; a breakpoint is fixed), and a sample's time enters its interpolant.

    Memory (under `vmap`, per member): 16 bytes per allowed step (`max_steps`) for the times (48
    when `t0` or `t1` is differentiated); the start states of the first accepted steps within
    `_DENSE_BYTES` (1 MiB: 21840 steps of a 6-element state), and past them every K-th, K a
    multiple of the record's chunk (512 bytes of states, at most 64 steps), the smallest that
    keeps `max_steps / K` states within `RECORD_BYTES` (16 MiB); the K - 1 steps between two
    recorded states are recomputed from the recorded times in the backward pass, in the loop of
    the backward steps (the step's forward part shared: no second copy of the step in the
    gradient program). Where loops are not hoisted (a program jaxsim did not build) every state
    is recorded while `max_steps` of them fit in `RECORD_BYTES` (there the recomputing loop's
    per-step bookkeeping costs more than filling the buffers).

    Reverse mode only: forward mode (`jax.jvp`, `jax.jacfwd`) through a run with this adjoint is
    refused; pass `adjoint=diffrax.ForwardMode()` or `ForwardSensitivity()` there.
    `diffrax.RecursiveCheckpointAdjoint()` passed explicitly runs the checkpointed loop
    (diffrax's scheme: every attempted step recomputed and differentiated, memory O(sqrt of
    `max_steps`) states).
    """


def _chunk_size(y0, tangents: bool) -> int:
    """Accepted steps per chunk of the record: its buffers within `_SMALL_BYTES` (one at least)."""
    per_step = max(y0.size * jnp.dtype(y0.dtype).itemsize, 8 * (2 if tangents else 1))
    return max(1, min(_SMALL_BYTES // per_step, _MAX_CHUNK))


def _record_every(max_steps: int, y0, tangents: bool, budget: int) -> int:
    """K: past the dense part (`_dense_steps`) every K-th accepted step's state is recorded, a
    multiple of the chunk size, the smallest that keeps `max_steps / K` states within `budget`
    bytes."""
    size = max_steps * y0.size * jnp.dtype(y0.dtype).itemsize
    every = -(-size // max(int(budget), 1))
    chunk = _chunk_size(y0, tangents)
    return max(1, -(-every // chunk)) * chunk


def _dense_steps(max_steps: int, y0, tangents: bool, every: int, budget: int, dense=None) -> int:
    """D: the first D accepted steps' states are all recorded, a multiple of K (`every`), one
    block at least: as many as fit in `dense` bytes (`_DENSE_BYTES`), all of `max_steps` (rounded
    up to a multiple of K) if they fit or if K is 1. Where XLA does not compile loops whole
    (`loops_hoisted()` false; `dense` not given) also all of them if they fit in `budget`: each
    loop iteration a sequence of runtime calls, the recomputing loop's bookkeeping costs more
    than the buffers' filling (J2 day, Dopri8 gradient: 10.5-11.1 ms against 10.2-10.9 ms,
    alternated)."""
    span = max(_chunk_size(y0, tangents), every)
    total = -(-max_steps // span) * span
    state = y0.size * jnp.dtype(y0.dtype).itemsize
    if every == 1 or (dense is None and not loops_hoisted() and max_steps * state <= budget):
        return total  # (K = 1: a state over 512 bytes, every one within the budget)
    limit = _DENSE_BYTES if dense is None else int(dense)
    return min(max(1, limit // (state * every)) * every, total)


class _Chunk(eqx.Module):
    """The accepted steps of the current chunk (in the step loop; small buffers)."""

    count: jax.Array  # accepted steps recorded in this chunk
    tp: jax.Array  # (B,) start times
    tn: jax.Array  # (B,) end times (inf past `count`)
    y: jax.Array  # (B, n) start states
    d_now: object  # (2, 2) d(tprev, tnext) / d(t0, t1) of the loop's current step, or None
    d_tp: object  # (B, 2) d tp / d(t0, t1), or None
    d_tn: object  # (B, 2) d tn / d(t0, t1), or None

    @staticmethod
    def empty(tangents, y0, first_end, t0, t1):
        tdtype = jnp.result_type(float)
        size = _chunk_size(y0, tangents)
        d_now = d_tp = d_tn = None
        if tangents:
            # tprev = t0; tnext = first_end(t0, t1).
            eye = jnp.eye(2, dtype=tdtype)
            d_next = jax.vmap(lambda d: jax.jvp(first_end, (t0, t1), (d[0], d[1]))[1])(eye)
            d_now = jnp.stack([eye[0], d_next])
            d_tp = d_tn = jnp.zeros((size, 2), tdtype)
        return _Chunk(
            count=jnp.asarray(0, jnp.int64), tp=jnp.zeros((size,), tdtype),
            tn=jnp.full((size,), jnp.inf, tdtype),
            y=jnp.zeros((size,) + y0.shape, y0.dtype), d_now=d_now,
            d_tp=d_tp, d_tn=d_tn,
        )  # fmt: skip

    def add(self, keep, tp, tn, y, times, t1, t1_floor):
        """Record the step `(tp, tn)` from `y` where `keep`; carry the derivatives of the next
        step's times (`times(tp, tn, t1, t1_floor) -> (t_start, t_end)`)."""
        k = self.count

        def put(buf, value):
            return buf.at[k].set(jnp.where(keep, value, buf[k]))

        new = dict(
            count=k + keep.astype(k.dtype), tp=put(self.tp, tp), tn=put(self.tn, tn),
            y=put(self.y, y),
        )  # fmt: skip
        if self.d_now is not None:
            new["d_tp"] = put(self.d_tp, self.d_now[0])
            new["d_tn"] = put(self.d_tn, self.d_now[1])

            def tangent(j):  # the derivatives w.r.t. t0 (j = 0) and t1 (j = 1)
                d1 = jnp.asarray(j, t1.dtype)
                tangents = (self.d_now[0, j], self.d_now[1, j], d1, d1)
                return jnp.stack(jax.jvp(times, (tp, tn, t1, t1_floor), tangents)[1])

            new["d_now"] = jnp.stack([tangent(0), tangent(1)], axis=1)
        return dataclasses.replace(self, **new)


class _Record(eqx.Module):
    """A run's accepted steps (`integrate(..., record=K)`); index k is the k-th accepted step."""

    tp: jax.Array  # (M,) start times (M: max_steps rounded up to a multiple of the chunk and K)
    tn: jax.Array  # (M,) end times (inf past the last accepted step)
    y: object  # (M / K, n) start states of accepted steps 0, K, 2K, ..., or None (D = M)
    y_dense: jax.Array  # (D, n) start states of accepted steps 0 to D - 1
    d_tp: object  # (M, 2) d tp / d(t0, t1), or None
    d_tn: object  # (M, 2) d tn / d(t0, t1), or None


def _recorded_loop(cond, body, state, max_steps: int, every: int, dense: int):
    """The step loop (`body` recording into `state.rec`, a `_Chunk`) in chunks: each chunk of
    accepted steps runs in an inner loop on the chunk's small buffers, then is copied into the
    whole record (the states of the first `dense` steps, and every `every`-th). Returns
    `(final state, _Record)`."""
    chunk0 = state.rec
    size = chunk0.tp.shape[0]
    span = max(size, every)  # K is a multiple of the chunk
    total = -(-max_steps // span) * span
    tdtype = chunk0.tp.dtype
    tangents = chunk0.d_now is not None
    sparse = dense < total
    record = _Record(
        tp=jnp.zeros((total,), tdtype), tn=jnp.full((total,), jnp.inf, tdtype),
        y=jnp.zeros((total // every,) + state.y.shape, state.y.dtype) if sparse else None,
        y_dense=jnp.zeros((dense,) + state.y.shape, state.y.dtype),
        d_tp=jnp.zeros((total, 2), tdtype) if tangents else None,
        d_tn=jnp.zeros((total, 2), tdtype) if tangents else None,
    )  # fmt: skip
    per_state = every // size  # chunks per recorded state
    n_dense = dense // size  # chunks with every state recorded

    def running(s):
        return cond(s) & (s.num_steps < max_steps)

    def chunk_body(carry):
        s, rec, c = carry
        if sparse:
            k = c // per_state
            rec = dataclasses.replace(
                rec, y=rec.y.at[k].set(jnp.where(c % per_state == 0, s.y, rec.y[k]))
            )
        fresh = dataclasses.replace(
            s.rec, count=jnp.zeros_like(s.rec.count), tn=jnp.full_like(s.rec.tn, jnp.inf)
        )
        s = jax.lax.while_loop(
            lambda s: running(s) & (s.rec.count < size), body,
            dataclasses.replace(s, rec=fresh),
        )  # fmt: skip
        off = c * size

        def put(buf, part):
            return jax.lax.dynamic_update_slice_in_dim(buf, part, off, 0)

        new = dict(tp=put(rec.tp, s.rec.tp), tn=put(rec.tn, s.rec.tn))
        if sparse:  # past the dense part the chunk's states are dropped
            at = jnp.minimum(c, n_dense - 1) * size
            old = jax.lax.dynamic_slice_in_dim(rec.y_dense, at, size, 0)
            part = jnp.where(c < n_dense, s.rec.y, old)
            new["y_dense"] = jax.lax.dynamic_update_slice_in_dim(rec.y_dense, part, at, 0)
        else:
            new["y_dense"] = put(rec.y_dense, s.rec.y)
        if tangents:
            new["d_tp"] = put(rec.d_tp, s.rec.d_tp)
            new["d_tn"] = put(rec.d_tn, s.rec.d_tn)
        return s, dataclasses.replace(rec, **new), c + 1

    # Under `vmap` the chunk loop goes on while any member runs (an unbatched predicate): a
    # batched one would select each whole record buffer between old and new values at every
    # chunk (J2 day gradient, 8 members: 1.44 s against 0.37 s). A member that is done takes no
    # step and writes its (empty) chunks past its last accepted step, where nothing is read.
    final, record, _ = jax.lax.while_loop(
        lambda carry: eqxi.unvmap_any(running(carry[0])), chunk_body,
        (state, record, jnp.asarray(0, jnp.int64)),
    )  # fmt: skip
    return final, record
