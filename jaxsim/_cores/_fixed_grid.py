r"""The fixed-grid core: the stepper shared by the fixed-step, SDE and clocked drivers.

A nested `lax.scan` (outer over sample intervals, inner over steps), time computed from an
integer step index (no drift, as Basilisk's integer-nanosecond clock), the object's `step_map`
applied after every step, the state carried as one flat vector (`jaxsim._model._layout`). Reverse-mode
memory is bounded by checkpointing (`checkpoint=True`, the default): the backward pass stores the
states at the sample times and at the boundaries of sub-blocks of about 20 steps (the steps whose
stacked inputs stay small buffers on the CPU runtime; `_checkpoint_levels`), and recomputes one
sub-block, then one step, at a time. An interval of more than 1024 sub-blocks groups them into
blocks of about sqrt(count), so memory grows as sqrt(steps), at the price of one more forward
pass. With XLA's loops compiled whole (`jaxsim._compilation._jit.loops_hoisted`, jaxsim's programs on the
CPU) and a step that keeps only its stages' inputs (RK2, RK4), the steps are not rematerialized
again, and a run whose stage inputs fit in `STORE_BYTES` is not checkpointed at all.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._compilation._jit import loops_hoisted
from .._model._layout import StateLayout
from .._model._step_context import step_interval
from .._result._solution import zeros_counts
from .._solvers._ode import AbstractFixedStepSolver, _is_chain


# Sample intervals of at least this many steps (or with more steps than a sub-block holds, see
# `_checkpoint_levels`) are checkpointed in blocks; shorter ones as a whole.
_MIN_BLOCKED_STEPS = 64


def _checkpoint_blocks(length: int):
    """`(number, size)` of the checkpoint blocks of an interval of `length` steps, or None.

    The size is a divisor of `length` within a factor 2 of sqrt(length) when there is one (no
    padding); otherwise ceil(sqrt(length)), the last block padded with masked steps.
    """
    if length < _MIN_BLOCKED_STEPS:
        return None
    root = int(np.sqrt(length))
    divisors = [k for k in range(max(root // 2, 1), 2 * root + 1) if length % k == 0]
    size = min(divisors, key=lambda k: abs(k - root)) if divisors else root + 1
    return -(-length // size), size


# XLA's CPU runtime runs a loop body's kernels one after the other only if every buffer they touch
# holds at most this many bytes (`ThunkExecutor`'s `execute_sequential_buffer_threshold`, not
# configurable); a body touching a larger one runs them through a thread pool, which for hundreds of
# tiny kernels costs more than the kernels. Reverse mode stacks the rematerialized steps' inputs
# over a checkpoint block, so blocks are cut into sub-blocks whose stacks stay below it.
_SMALL_BUFFER_BYTES = 512


# Up to this many sub-blocks per sample interval are checkpointed in one level (their boundary
# states stored, memory O(steps / sub-block)); more are grouped into blocks of about sqrt(count).
_MAX_FLAT_SUBBLOCKS = 1024


# With XLA's loops compiled whole, a run whose stored stage inputs (every step's, for reverse mode)
# fit in this many bytes is not checkpointed: the backward pass then recomputes no step at all.
# Measured on a 2-core CPU (`jaxsim._cores._adaptive.RECORD_BYTES`, the same budget): a loop buffer
# of 16 MiB costs 0.5 ms to fill per call. Under `vmap`, per member.
STORE_BYTES = 16 * 2**20


def _checkpoint_levels(length: int, cap: int):
    """`(blocks, sub_blocks, steps)` of the checkpointing of an interval of `length` steps, or None.

    `steps` per sub-block is at most `cap` (the steps whose stacked residuals stay small), chosen in
    [cap/2, cap] for the least padding; `sub_blocks` per block is 1 (two levels: the interval's
    sub-blocks are the blocks) unless there are more than `_MAX_FLAT_SUBBLOCKS` of them, then about
    sqrt of their count (`_checkpoint_blocks`). The padded steps (< one sub-block, plus whole
    sub-blocks of a padded block) are masked. None: the interval is checkpointed whole.
    """
    cap = max(int(cap), 1)
    if length < _MIN_BLOCKED_STEPS and length <= cap:
        return None
    if length <= cap:
        return 1, 1, length
    waste = lambda k: -(-length // k) * k - length
    sub = min(range(max(cap // 2, 1), cap + 1), key=lambda k: (waste(k), -k))
    count = -(-length // sub)
    if count <= _MAX_FLAT_SUBBLOCKS:
        return count, 1, sub
    num, per = _checkpoint_blocks(count)
    return num, per, sub


def _residual_cap(*trees) -> int:
    """Steps whose stacked per-step residuals (a copy of each leaf of `trees`, the per-step state
    and inputs, and the step index) stay within `_SMALL_BUFFER_BYTES` each."""
    sizes = [8]
    for leaf in jtu.tree_leaves(trees):
        sizes.append(max(int(np.prod(jnp.shape(leaf))), 1) * jnp.result_type(leaf).itemsize)
    return max(_SMALL_BUFFER_BYTES // max(sizes), 1)


def scan_grid(
    model,
    y0,
    seg,
    dt,
    t0,
    checkpoint,
    advance,
    per_segment=None,
    *,
    aux0=None,
    before_step=None,
    sampled=None,
    progress=None,
    stages_remat=0,
):
    """The fixed-grid stepper: the fixed-step driver's loop, shared by the ODE, SDE and clocked
    (`jaxsim._drivers._clocked._grid`) paths.

    Runs `seg[k]` steps of size `dt` between consecutive samples (nested `lax.scan`: outer over sample
    intervals, inner over steps; time from the integer step index), applying `model.step_map` after
    every step and accumulating its counters. `advance(n, t, y, extra) -> y1` takes one step from
    step index `n` at time `t`; `per_segment(n0, length)` optionally precomputes per-step `extra`
    inputs of a whole interval (stacked along the first axis). With `checkpoint`, reverse mode
    stores the states at the samples and at sub-block boundaries only (`_checkpoint_levels`:
    sub-blocks of at most `_residual_cap` steps, grouped into blocks of about sqrt(count) when an
    interval has more than `_MAX_FLAT_SUBBLOCKS`), each recomputed once in the backward pass, so
    its memory grows as O(samples + steps / sub-block) states, per interval at most 1024 sub-block
    boundaries or O(sqrt(steps)).

    Discrete state besides `y` (the clocks' states, held outputs and logs) travels in `aux`:
    `before_step(n, t, y, aux) -> (aux, inputs)` runs at the start of each step, outside the
    rematerialized step, and `inputs` reach `advance(n, t, y, extra, inputs)`; `sampled(aux)` is
    what of `aux` is recorded at the samples (left limits: before the next step's `before_step`).
    `progress` (a `jaxsim._drivers._progress.Reporter`) receives the time reached after each sample interval
    and checkpoint block. `stages_remat`: the number of stage inputs `advance` keeps for reverse
    mode when it keeps nothing else (the chain step of `jaxsim._solvers._ode`, its drift rematerialized),
    else 0. With XLA's loops compiled whole (`jaxsim._compilation._jit.loops_hoisted`) such steps are not
    rematerialized again: a run whose stage inputs fit in `STORE_BYTES` is not checkpointed at all,
    a longer one only in blocks and sub-blocks.

    **Returns:** `(ys, counts)` at the samples; with `aux0`, `(ys, counts, aux at the samples,
    final aux)`.
    """
    seg = np.asarray(seg)
    length = int(seg.max()) if seg.size else 0
    uniform = bool(np.all(seg[1:] == length)) and seg[0] in (0, length)
    counts0 = zeros_counts(model, y0)
    # With checkpointing, each step is also rematerialized: the backward pass recomputes a step's
    # stages from its input state instead of stacking every intermediate of every step of a block
    # (one stacked buffer, and a dynamic-slice kernel, per intermediate). Combined spacecraft, 6,000
    # steps: gradient compile 19.4 -> 13.6 s and run 4.8 -> 3.3 s. (Inside a scan, CSE cannot merge
    # the recomputation with the forward pass, so `prevent_cse` is not needed.) A step that already
    # keeps only its stages' inputs (`stages_remat`) is not rematerialized when XLA compiles the
    # loops whole: the sub-block's recompute then stacks the stage inputs (a few kB), and the
    # backward pass runs each step's stages once less (combined spacecraft, RK4, 6,000 steps,
    # hoisting on: gradient 6.9 -> 5.8x the forward run). Without hoisting the stacked stage inputs
    # exceed `_SMALL_BUFFER_BYTES` and the loop runs on the thread pool (9.7 -> 13.3x), so the step
    # is rematerialized there.
    # Stage inputs that fit in `STORE_BYTES` for the whole run are all stored: the backward pass
    # recomputes no sub-block (combined spacecraft, RK4, 6,000 steps, 3.3 MiB: 5.3 -> 4.2x the
    # forward run). With `progress` the blocks stay, as loops not rematerialized (a report after
    # each); without, the interval is one loop (the blocks' padding and loops cost about 5 %).
    layout = StateLayout.of(y0)
    hoisted = bool(stages_remat) and loops_hoisted()
    remat = checkpoint
    if checkpoint and hoisted:
        state_bytes = sum(
            int(np.prod(jnp.shape(x))) * jnp.result_type(x).itemsize for x in jtu.tree_leaves(y0)
        )
        remat = int(seg.sum()) * (stages_remat + 1) * state_bytes > STORE_BYTES
    remat_step = remat and not hoisted
    maybe_remat = jax.checkpoint if remat else (lambda f: f)
    blocks = remat or (checkpoint and progress is not None)
    step = jax.checkpoint(advance, prevent_cse=False) if remat_step else advance

    # The state is carried as one flat vector between steps (`jaxsim._model._layout`); the pytree is
    # rebuilt (static slices) for the step itself.
    pack = (lambda y: y) if layout is None else layout.flatten
    unpack = (lambda v: v) if layout is None else layout.unflatten

    def one_step(carry, xs):
        active, extra = xs
        n, v, counts, aux = carry
        t = t0 + n * dt
        y = unpack(v)
        aux1, inputs = (aux, None) if before_step is None else before_step(n, t, y, aux)
        # Held inputs keep one value over the step's stages; the intervals tile the horizon
        # exactly (a step ends where the next begins), so a switch time on a node is in one step.
        with step_interval(t, t0 + (n + 1) * dt):
            y1 = step(n, t, y, extra, inputs)
        y1, c = model.step_map(t + dt, y1)
        y1 = pack(y1)
        counts1 = jtu.tree_map(lambda a, b: a + b.astype(a.dtype), counts, c)
        if active is not None:
            y1 = jtu.tree_map(lambda a, b: jnp.where(active, a, b), y1, v)
            counts1 = jtu.tree_map(lambda a, b: jnp.where(active, a, b), counts1, counts)
            aux1 = jtu.tree_map(lambda a, b: jnp.where(active, a, b), aux1, aux)
            n1 = n + active.astype(n.dtype)
        else:
            n1 = n + 1
        return (n1, y1, counts1, aux1), None

    def steps(carry, active, extra, n):
        if active is None:
            return jax.lax.scan(lambda c, e: one_step(c, (None, e)), carry, extra, length=n)[0]
        return jax.lax.scan(one_step, carry, (active, extra))[0]

    def levels_of(extra):
        if not blocks:
            return None
        per_step = jtu.tree_map(lambda e: e[0], extra)
        return _checkpoint_levels(length, _residual_cap(y0, per_step))

    def segment(carry, seg_len):
        extra = None if per_segment is None else per_segment(carry[0], length)
        levels = levels_of(extra)
        if levels is None:
            active = None if uniform else jnp.arange(length) < seg_len
            whole = lambda c, a, e: steps(c, a, e, length)
            carry = maybe_remat(whole)(carry, active, extra)
            if progress is not None:
                progress(t0 + carry[0] * dt)
        else:
            # Checkpointing in blocks of sub-blocks of steps: the backward pass stores one carry per
            # block, then one per sub-block of the block being differentiated, then the inputs of
            # the steps of one sub-block (few enough that their stacks stay small buffers), and
            # recomputes each step's stages from its input (memory O(n/size + size) states).
            num, per, size = levels
            total = num * per * size
            pad = total - length
            active = None
            if pad or not uniform:
                active = (jnp.arange(total) < seg_len).reshape(num, per, size)
            extra = jtu.tree_map(
                lambda e: jnp.pad(e, [(0, pad)] + [(0, 0)] * (e.ndim - 1)).reshape(
                    (num, per, size) + e.shape[1:]
                ),
                extra,
            )

            def sub_block(c, xs):
                return steps(c, xs[0], xs[1], size), None

            def block_steps(c, xs):
                if per == 1:
                    c = steps(c, _first(xs[0]), _first(xs[1]), size)
                else:
                    c, _ = jax.lax.scan(maybe_remat(sub_block), c, xs, length=per)
                if progress is not None:
                    progress(t0 + c[0] * dt)
                return c, None

            block = maybe_remat(block_steps)
            carry, _ = jax.lax.scan(block, carry, (active, extra), length=num)
        return carry, (carry[1], carry[2], pick(carry[3]))

    pick = (lambda aux: None) if sampled is None else sampled
    carry0 = (jnp.asarray(0, jnp.int64), pack(y0), counts0, aux0)
    seg_arr = jnp.asarray(seg)
    if uniform and seg[0] == 0:
        # The first sample is t0 itself; the remaining intervals all have `length` steps.
        first = (pack(y0), counts0, pick(aux0))
        last, out = jax.lax.scan(segment, carry0, seg_arr[1:])
        out = jtu.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, out)
    else:
        last, out = jax.lax.scan(segment, carry0, seg_arr)
    ys, counts, aux_at = out
    ys = ys if layout is None else jax.vmap(unpack)(ys)
    if aux0 is None:
        return ys, counts
    return ys, counts, aux_at, last[3]


def stages_remat(solver) -> int:
    """The stage inputs `solver.step` keeps for reverse mode when it keeps nothing else (the chain
    step of `RK2`/`RK4`, `jaxsim._solvers._ode._chain_step`, whose drift is rematerialized), else 0:
    `scan_grid`'s `stages_remat`."""
    chain = (
        isinstance(solver, AbstractFixedStepSolver)
        and type(solver).step is AbstractFixedStepSolver.step
        and solver.num_stages > 1
        and _is_chain(solver.a)
    )
    return solver.num_stages if chain else 0


def _first(tree):
    """The leaves' first entries along the leading axis (None stays None)."""
    return jtu.tree_map(lambda x: x[0], tree)


def chunked_drift(model, args):
    """`drift(t, y, _)`: `model.drift(t, y, args)` reading the floating arrays of the model and of
    `args` from a few flat vectors of at most `_SMALL_BUFFER_BYTES` each, sliced inside every call.

    The step loops then close over these few vectors instead of every parameter array, so reverse
    mode carries and accumulates a few cotangent vectors through the loops instead of one per
    array (each a copy kernel per iteration on the CPU runtime); the chunks stay small buffers, so
    the loop bodies still run their kernels in sequence. Forward values are unchanged (the slices
    are exact). With arrays of mixed dtypes, or fewer than two, `model.drift` is used as is.

    When XLA compiles the loops whole (`jaxsim._compilation._jit.loops_hoisted`, jaxsim's programs on the CPU)
    neither buffer sizes nor carried leaves cost kernels, while the slices' transposes (a padded
    chunk-sized cotangent per array, summed) cost arithmetic: `model.drift` is used as is there
    (combined spacecraft, RK4, 6,000 steps: gradient 5.8 -> 5.1x the forward run; forward run
    unchanged).
    """
    dyn, static = eqx.partition((model, args), eqx.is_inexact_array)
    leaves, treedef = jtu.tree_flatten(dyn)
    dtypes = {jnp.result_type(x) for x in leaves}
    if len(leaves) < 2 or len(dtypes) != 1 or loops_hoisted():
        return lambda t, y, _: model.drift(t, y, args)
    limit = max(_SMALL_BUFFER_BYTES // next(iter(dtypes)).itemsize, 1)
    shapes = [jnp.shape(x) for x in leaves]
    groups, current, filled = [], [], 0
    for i, shape in enumerate(shapes):
        size = int(np.prod(shape))
        if current and filled + size > limit:
            groups.append(current)
            current, filled = [], 0
        current.append(i)
        filled += size
    groups.append(current)
    chunks = [jnp.concatenate([jnp.ravel(leaves[i]) for i in g]) for g in groups]

    def drift(t, y, _):
        parts = [None] * len(shapes)
        for g, chunk in zip(groups, chunks, strict=True):
            offset = 0
            for i in g:
                size = int(np.prod(shapes[i]))
                parts[i] = jnp.reshape(chunk[offset : offset + size], shapes[i])
                offset += size
        m, a = eqx.combine(jtu.tree_unflatten(treedef, parts), static)
        return m.drift(t, y, a)

    return drift
