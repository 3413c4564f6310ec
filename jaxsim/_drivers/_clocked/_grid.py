"""Clocked runs on the fixed-step grid: the fixed-grid stepper with clock ticks between steps.

When a jaxsim fixed-step solver runs with clocks whose ticks (and the samples, and any concrete
discontinuity times) all lie on the grid `t0 + k dt`, and without events, the clocked driver needs
no solver restarts and no dense output: the tick schedule is static, so the run is the plain
fixed-step driver's loop (`jaxsim._cores._fixed_grid.scan_grid`: outer scan over sample intervals, inner
over steps) in which the clock updates due at a step's start run before the step. Every step is the plain driver's
(`solver.step`, held inputs over the step, the step map after it), so a clocked run whose clocks
change nothing equals the plain run bit for bit, and a tick costs only its models' updates.

Semantics are those of the clocked driver (`jaxsim._drivers._clocked`): at a tick time the models due update
from the pre-tick state (Jacobi models together, then sequential ones in order); samples record
left limits (pre-tick discrete states and held outputs); the clock logs hold post-tick values.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ..._compilation._jit import jit as jaxsim_jit
from ..._cores._fixed_grid import scan_grid, stages_remat
from ..._model._clocks import with_held
from ..._model._layout import StateLayout
from ..._result._codes import RESULTS
from ..._result._host_checks import clocked_message
from ..._result._solution import check_finite, finish, make_stats
from ._carry import nan_rows
from ._driver import tick
from ._segments import inside, next_down, next_up


class GridPlan(eqx.Module):
    """The schedule of a clocked run on the step grid (built outside `jit`).

    At the start of global step `n` the models with `due[n, i]` update and write row `row[n, i]`
    of their logs (the spare last row when not due); the drift's time stays inside the boundaries
    `[lo[n], hi[n]]` around the step (ticks and discontinuities). `seg`: steps per sample interval
    (as the plain driver). The arrays are data (they do not change the compiled program).
    """

    due: jax.Array  # (n_steps + 1, n_models) bool; row n_steps: ticks at t1, after the last step
    row: jax.Array  # (n_steps + 1, n_models) int64
    lo: jax.Array  # (n_steps,) float64
    hi: jax.Array  # (n_steps,) float64
    seg: tuple = eqx.field(static=True)
    final_due: tuple = eqx.field(static=True)
    n_steps: int = eqx.field(static=True)
    n_segments: int = eqx.field(static=True)
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
    interval = np.searchsorted(bounds, np.arange(n_steps), side="right") - 1
    samples = np.asarray([step_of(t) for t in ts], np.int64)
    return GridPlan(
        due=jnp.asarray(due),
        row=jnp.asarray(row),
        lo=jnp.asarray(t0 + bounds[interval] * dt),
        hi=jnp.asarray(t0 + bounds[np.minimum(interval + 1, len(bounds) - 1)] * dt),
        seg=tuple(int(x) for x in np.diff(np.concatenate([[0], samples]))),
        final_due=tuple(bool(x) for x in due[n_steps]),
        n_steps=n_steps,
        n_segments=int(len(bounds) - 1),
        dt=float(dt),
    )


@jaxsim_jit
def run_grid(model, models, y0, args, held0, ts, solver, grid, static):
    """The clocked run on the step grid (see the module docstring)."""
    cfg, plan, dt = static.config, static.plan, grid.dt
    models = tuple(md.prepare() for md in models)  # parameter-only work, once per run
    t0 = jnp.asarray(cfg.t0)
    z0 = {md.name: md.init_state() for md in models}
    # Each model's log is one flat row per tick (its post-tick `z` and held outputs, through a
    # `StateLayout`) when they share a float dtype: one in-place write per tick, one loop-carry
    # buffer (per-leaf logs cost about 1 us per tick on the slew); else one buffer per leaf.
    layouts = [StateLayout.of({"z": z0[md.name], "held": held0[md.name]}) for md in models]
    logs0 = {}
    for i, md in enumerate(models):
        entry = {"z": z0[md.name], "held": held0[md.name]}
        if layouts[i] is None:
            logs0[md.name] = nan_rows(entry, plan.n_ticks[i] + 1)
        else:
            logs0[md.name] = jnp.full((plan.n_ticks[i] + 1, layouts[i].size), jnp.nan)

    def tick_and_log(n, t, y, aux):
        z, held, logs = aux
        due, row = grid.due[n], grid.row[n]
        # The updates run only when a model is due; the logs (large buffers) stay outside the
        # conditional, written in place (the spare row when not due), so no tick copies them.
        z1, h1 = jax.lax.cond(
            jnp.any(due),
            lambda _: tick(models, args, t, y, z, held, due),
            lambda _: (z, held),
            None,
        )
        new_logs = {}
        for i, md in enumerate(models):
            put = lambda b, v, r=row[i]: jax.lax.dynamic_update_index_in_dim(b, v, r, 0)
            entry = {"z": z1[md.name], "held": h1[md.name]}
            if layouts[i] is not None:
                entry = layouts[i].flatten(entry)
            new_logs[md.name] = jtu.tree_map(put, logs[md.name], entry)
        return z1, h1, new_logs

    def before_step(n, t, y, aux):
        aux = tick_and_log(n, t, y, aux)
        return aux, (with_held(args, aux[1]), grid.lo[n], grid.hi[n])

    def advance(n, t, y, extra, inputs):
        args_m, lo, hi = inputs

        def drift(tt, yy, a):
            return model.drift(inside(tt, next_up(lo), next_down(hi)), yy, a)

        return solver.step(drift, t, y, dt, args_m)

    ys, cs, (zs, hs), (z_end, held_end, logs) = scan_grid(
        model, y0, grid.seg, dt, cfg.t0, cfg.checkpoint, advance,
        aux0=(z0, held0, logs0), before_step=before_step, sampled=lambda aux: aux[:2],
        progress=static.progress, stages_remat=stages_remat(solver),
    )  # fmt: skip
    if models and any(grid.final_due):
        # Ticks at t1 (after the last step): they only reach the clock logs.
        y_end = jtu.tree_map(lambda u: u[-1], ys)
        logs = tick_and_log(grid.n_steps, t0 + grid.n_steps * dt, y_end, (z_end, held_end, logs))[2]
    ys, result, t_final = check_finite(ts, ys, False, "clocked")
    if cfg.throw:  # the clocked driver's message: one message per cause on every clocked run
        ys = eqx.error_if(
            ys, result != RESULTS.successful, clocked_message(RESULTS.nonfinite_state)
        )
    stats = make_stats(
        grid.n_steps,
        grid.n_steps * solver.num_stages,
        jtu.tree_map(lambda c: c[-1], cs),
        num_segments=grid.n_segments,
    )
    clock_logs = {}
    for i, md in enumerate(models):
        rows = jtu.tree_map(lambda b: b[:-1], logs[md.name])  # without the spare row
        if layouts[i] is not None:
            rows = jax.vmap(layouts[i].unflatten)(rows)
        clock_logs[md.name] = {"t": jnp.asarray(plan.model_times[i]), **rows}
    return finish(
        model, args, ts, ys, stats, result, t_final, outputs=cfg.outputs, counts=cs, zs=zs,
        held=hs, clock_logs=clock_logs, derive_args=lambda h: with_held(args, h),
    )  # fmt: skip
