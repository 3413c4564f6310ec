"""Clocked runs on the fixed-step grid: the fixed-grid stepper with clock ticks between steps.

When a jaxsim fixed-step solver runs with clocks whose ticks (and the samples, and any concrete
discontinuity times) all lie on the grid `t0 + k dt`, and without events, the segment loop needs
no solver restarts and no dense output: the tick schedule is static, so the run is the plain
fixed-step driver's nested scan (outer over sample intervals, inner over steps) in which the
clock updates due at a step's start run before the step. Every step is the plain driver's
(`solver.step`, held inputs over the step, the step map after it), so a clocked run whose clocks
change nothing equals the plain run bit for bit, and a tick costs only its models' updates.

Semantics are those of the segment loop (`jaxsim._hybrid`): at a tick time the models due update
from the pre-tick state (Jacobi models together, then sequential ones in order); samples record
left limits (pre-tick discrete states and held outputs); the clock logs hold post-tick values.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._compile import jit as jaxsim_jit
from .._layout import StateLayout
from .._simulate import _zeros_counts, check_finite, make_stats
from .._step_context import step_interval
from ._carry import nan_rows, where
from ._driver import HybridSolution, merge_args
from ._segments import inside, next_down, next_up


class GridPlan(eqx.Module):
    """The schedule of a clocked run on the step grid (built outside `jit`).

    Sample interval `r` runs global steps `step[r, :]`, padded to a common width (`active` masks
    the padding). At the start of step `n` the models with `due[n, i]` update and write row
    `row[n, i]` of their logs (the spare last row when not due); the drift's time stays inside
    the boundaries `[lo, hi]` around the step (ticks and discontinuities). The arrays are data
    (they do not change the compiled program); the counts and flags are static.
    """

    active: jax.Array  # (n_intervals, width) bool
    step: jax.Array  # (n_intervals, width) int64
    due: jax.Array  # (n_intervals, width, n_models) bool
    row: jax.Array  # (n_intervals, width, n_models) int64
    lo: jax.Array  # (n_intervals, width) float64
    hi: jax.Array  # (n_intervals, width) float64
    final_due: tuple = eqx.field(static=True)  # models due at t1 (after the last step)
    final_row: tuple = eqx.field(static=True)
    n_steps: int = eqx.field(static=True)
    n_segments: int = eqx.field(static=True)
    first_sample_at_t0: bool = eqx.field(static=True)
    dt: float = eqx.field(static=True)


def make_grid_plan(plan, n_models, t0, t1, dt, ts, disc_times) -> GridPlan:
    """The grid schedule of tick plan `plan` (all times on the grid, checked by the caller)."""
    n_steps = int(round((t1 - t0) / dt))
    step_of = lambda t: int(round((float(t) - t0) / dt))
    due = np.zeros((n_steps + 1, n_models), bool)
    row = np.zeros((n_steps + 1, n_models), np.int64)
    row[:] = np.asarray(plan.n_ticks, np.int64)[None, :]  # the logs' spare row: "not due"
    for k, t in enumerate(plan.times):
        n = step_of(t)
        for i in range(n_models):
            if plan.due[k][i]:
                due[n, i] = True
                row[n, i] = plan.tick_number[k][i]
    bounds = sorted({0, n_steps, *(step_of(t) for t in plan.times), *map(step_of, disc_times)})
    bounds = np.asarray(bounds, np.int64)
    steps = np.arange(n_steps)
    seg = np.searchsorted(bounds, steps, side="right") - 1
    lo_all = t0 + bounds[seg] * dt
    hi_all = t0 + bounds[seg + 1] * dt
    samples = np.asarray([step_of(t) for t in ts], np.int64)
    first_at_t0 = bool(samples.size and samples[0] == 0)
    ends = samples[1:] if first_at_t0 else samples
    starts = np.concatenate([[0], ends[:-1]]) if ends.size else np.zeros(0, np.int64)
    lengths = ends - starts
    width = max(int(lengths.max()) if lengths.size else 0, 1)
    idx = starts[:, None] + np.arange(width)[None, :]
    active = np.arange(width)[None, :] < lengths[:, None]
    idx_c = np.minimum(idx, max(n_steps - 1, 0))
    spare = np.asarray(plan.n_ticks, np.int64)[None, None, :]
    return GridPlan(
        active=jnp.asarray(active),
        step=jnp.asarray(idx_c.astype(np.int64)),
        due=jnp.asarray(due[idx_c] & active[..., None]),
        row=jnp.asarray(np.where(active[..., None], row[idx_c], spare)),
        lo=jnp.asarray(lo_all[idx_c] if n_steps else np.zeros(idx_c.shape)),
        hi=jnp.asarray(hi_all[idx_c] if n_steps else np.zeros(idx_c.shape)),
        final_due=tuple(bool(x) for x in due[n_steps]),
        final_row=tuple(int(x) for x in row[n_steps]),
        n_steps=n_steps,
        n_segments=int(len(bounds) - 1),
        first_sample_at_t0=first_at_t0,
        dt=float(dt),
    )


def _tick(models, args, t, y, z, held, due):
    """Clock updates due at `t` (Jacobi models from pre-tick values, then sequential ones)."""
    args_pre = merge_args(args, held)
    z_new, held_new = dict(z), dict(held)
    for i, md in enumerate(models):
        if not md.sequential:
            zi, hi = md.update(t, y, z[md.name], args_pre)
            z_new[md.name] = where(due[i], zi, z[md.name])
            held_new[md.name] = where(due[i], hi, held[md.name])
    for i, md in enumerate(models):
        if md.sequential:
            zi, hi = md.update(t, y, z_new[md.name], merge_args(args, held_new))
            z_new[md.name] = where(due[i], zi, z_new[md.name])
            held_new[md.name] = where(due[i], hi, held_new[md.name])
    return z_new, held_new


@jaxsim_jit
def run_grid(model, models, y0, args, held0, ts, solver, grid, static):
    """The clocked run on the step grid (see the module docstring)."""
    cfg, plan, dt = static.config, static.plan, grid.dt
    t0 = jnp.asarray(cfg.t0)
    nm = len(models)
    z0 = {md.name: md.init_state() for md in models}
    counts0 = _zeros_counts(model, y0)
    layout = StateLayout.of(y0)
    pack = (lambda y: y) if layout is None else layout.flatten
    unpack = (lambda v: v) if layout is None else layout.unflatten
    logs0 = {
        md.name: {
            "z": nan_rows(z0[md.name], plan.n_ticks[i] + 1),
            "held": nan_rows(held0[md.name], plan.n_ticks[i] + 1),
        }
        for i, md in enumerate(models)
    }

    def tick_and_log(t, y, z, held, logs, due, row):
        def do(_):
            z1, h1 = _tick(models, args, t, y, z, held, due)
            new_logs = {}
            for i, md in enumerate(models):
                put = lambda b, v, r=row[i]: jax.lax.dynamic_update_index_in_dim(b, v, r, 0)
                new_logs[md.name] = {
                    "z": jtu.tree_map(put, logs[md.name]["z"], z1[md.name]),
                    "held": jtu.tree_map(put, logs[md.name]["held"], h1[md.name]),
                }
            return z1, h1, new_logs

        return jax.lax.cond(jnp.any(due), do, lambda _: (z, held, logs), None)

    def advance(t, y, args_m, lo, hi):
        def drift(tt, yy, a):
            return model.drift(inside(tt, next_up(lo), next_down(hi)), yy, a)

        with step_interval(t, t + dt):  # held inputs keep one value over the step's stages
            return solver.step(drift, t, y, dt, args_m)

    step_fn = jax.checkpoint(advance, prevent_cse=False)

    def one_step(carry, xs):
        active, n, due, row, lo, hi = xs
        v, z, held, logs, counts = carry
        t = t0 + n * dt
        y = unpack(v)
        if nm:
            z, held, logs = tick_and_log(t, y, z, held, logs, due, row)
        y1 = step_fn(t, y, merge_args(args, held), lo, hi)
        y1, c = model.step_map(t + dt, y1)
        counts1 = jtu.tree_map(lambda a, b: a + b.astype(a.dtype), counts, c)
        v1 = jnp.where(active, pack(y1), v) if layout is not None else where(active, y1, v)
        counts1 = where(active, counts1, counts)
        return (v1, z, held, logs, counts1), None

    def interval(carry, xs):
        carry, _ = jax.lax.scan(one_step, carry, xs)
        v, z, held, _, counts = carry
        return carry, (v, z, held, counts)

    interval = jax.checkpoint(interval)
    xs = (grid.active, grid.step, grid.due, grid.row, grid.lo, grid.hi)
    carry0 = (pack(y0), z0, held0, logs0, counts0)
    carry, (vs, zs, hs, cs) = jax.lax.scan(interval, carry0, xs)
    if grid.first_sample_at_t0:
        first = (pack(y0), z0, held0, counts0)
        vs, zs, hs, cs = jtu.tree_map(
            lambda a, b: jnp.concatenate([a[None], b]), first, (vs, zs, hs, cs)
        )
    v_end, z_end, held_end, logs, counts_end = carry
    if nm and any(grid.final_due):
        t_end = t0 + grid.n_steps * dt
        due = jnp.asarray(grid.final_due)
        row = jnp.asarray(grid.final_row)
        _, _, logs = tick_and_log(t_end, unpack(v_end), z_end, held_end, logs, due, row)
    ys = vs if layout is None else jax.vmap(unpack)(vs)
    ys, result, t_final = check_finite(ts, ys, cfg.throw, "fixed-step (clocked)")
    derived = None
    if cfg.outputs:
        derived = jax.vmap(lambda t, y, h: model.derived(t, y, merge_args(args, h)))(ts, ys, hs)
    stats = make_stats(
        grid.n_steps,
        grid.n_steps * solver.num_stages,
        counts_end,
        num_segments=grid.n_segments,
    )
    clock_logs = {
        md.name: {
            "t": jnp.asarray(plan.model_times[i]),
            "z": jtu.tree_map(lambda b: b[:-1], logs[md.name]["z"]),
            "held": jtu.tree_map(lambda b: b[:-1], logs[md.name]["held"]),
        }
        for i, md in enumerate(models)
    }
    return HybridSolution(
        ts=ts,
        ys=ys,
        outputs=derived,
        counts=cs,
        stats=stats,
        result=result,
        t_final=t_final,
        zs=zs,
        held=hs,
        clock_logs=clock_logs,
        events=None,
    )
