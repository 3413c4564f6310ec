"""The solution: what `simulate` returns on every path, and the one result tail that builds it.

Every driver program (fixed grid, lean adaptive core, diffrax core, SDE, clocked driver) ends in
`finish`: the samples after the run's end set to NaN, the model's derived outputs at the
samples, and one `Solution` whose fields a path does not produce are None. The outcome helpers
(`check_finite`, `solve_outcome`, `mark_after`, `make_stats`) are shared by the drivers; the
error a failed run raises comes once, at `simulate`'s exit (`jaxsim._result._host_checks`), or inside
the program under a user's trace.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from . import _codes as _results
from ._codes import RESULTS
from ._host_checks import nonfinite_message


class Solution(eqx.Module):
    """What `simulate` returns, on every path (fixed step, adaptive, SDE, clocked).

    **Fields:**

    - `ts`: sample times [s], shape `(n,)`.
    - `ys`: the state pytree with a leading axis of length `n` (rows after `t_final` are NaN).
    - `outputs`: derived outputs of the object at `ts` (e.g. `r_CN_N`, energies), leading axis `n`;
      None with `outputs=False`.
    - `counts`: cumulative step-map counters at `ts` (e.g. MRP switches since `t0`) where the
      driver steps on the sample grid (fixed-step runs without events); None elsewhere. The
      totals are always in `stats["counts"]`.
    - `stats`: the same keys on every path: `num_steps` (accepted steps), `num_rejected_steps`,
      `num_rhs` (drift evaluations), `num_segments` (solves between boundaries; 1 without
      clocks, discontinuities or events), `num_events` (event firings), `counts` (step-map totals,
      e.g. `{"mrp_switches": ...}` per object).
    - `result`: a `jaxsim.RESULTS` item: `successful`, or the cause of a failure (with
      `throw=False`): `max_steps_reached`, `nonfinite_state`, `too_many_events`,
      `event_location_failed`, or another diffrax code. `ok` and `message` read it.
    - `t_final`: the time the run ended [s]: `t1`, a terminal event's time, or where it failed.
    - `zs`: discrete states `{model_name: z}` of the clocked models at `ts` (pre-tick values at
      tick times); None without clocks, discontinuities or events.
    - `held`: held outputs `{model_name: outputs}` of the clocked models at `ts`; None likewise.
    - `clock_logs`: `{model_name: {"t": tick times, "z": post-tick states, "held": ...}}`; None
      likewise.
    - `events`: an `EventLog`; None without events.
    - `info`: static: what `to_xarray` needs of the run (units, per-effector dimensions, event
      names, solver settings), attached by `simulate`; None on a hand-made Solution.

    `jaxsim.HybridSolution` is this class (the name is kept for code written when runs with
    clocks, discontinuities or events returned a subclass).
    """

    ts: jax.Array
    ys: Any
    outputs: Any
    counts: Any
    stats: dict
    result: Any
    t_final: Any = None
    zs: Any = None
    held: Any = None
    clock_logs: Any = None
    events: Any = None
    info: Any = eqx.field(static=True, default=None)

    def to_xarray(self, **kwargs):
        """`jaxsim.results.to_xarray(self, **kwargs)`: this run (or `vmap`-batched runs) as an
        `xarray.Dataset` of the one schema (see `jaxsim.results`); no model needed."""
        # Local: the public `jaxsim.results` module is built on this one (it imports the result
        # stage), so a module-level import would climb back up the flow.
        from ..results import to_xarray

        return to_xarray(self, **kwargs)

    @property
    def ok(self):
        """Whether the run succeeded (a boolean array: one per member under `vmap`)."""
        return _results.promote(self.result) == RESULTS.successful

    @property
    def message(self) -> str:
        """The failure's message ("" on success); concrete results only (not under `jit`)."""
        return _results.message(self.result)


# The name of the subclass that runs with clocks, discontinuities or events returned before every
# path returned one class; kept for users' code (`isinstance`, annotations).
HybridSolution = Solution


def finish(
    model,
    args,
    ts,
    ys,
    stats: dict,
    result,
    t_final,
    *,
    outputs: bool,
    counts=None,
    zs=None,
    held=None,
    clock_logs=None,
    events=None,
    derive_args=None,
) -> Solution:
    """The one result tail of every driver program: the `Solution` of a run sampled at `ts`.

    The floating rows of `ys` (and `zs`, `held`) after `t_final` become NaN; with `outputs`, the
    model's derived outputs are evaluated at the samples, with `args`, or with
    `derive_args(held row)` where held outputs of clocked models join the arguments.
    """
    ys = mark_after(ts, ys, t_final)
    if zs is not None:
        zs = mark_after(ts, zs, t_final)
    if held is not None:
        held = mark_after(ts, held, t_final)
    derived = None
    if outputs and derive_args is None:
        derived = jax.vmap(model.derived, in_axes=(0, 0, None))(ts, ys, args)
    elif outputs:
        derived = jax.vmap(lambda t, y, h: model.derived(t, y, derive_args(h)))(ts, ys, held)
    return Solution(
        ts=ts, ys=ys, outputs=derived, counts=counts, stats=stats, result=result,
        t_final=t_final, zs=zs, held=held, clock_logs=clock_logs, events=events,
    )  # fmt: skip


def make_stats(
    num_steps, num_rhs, counts, *, num_rejected_steps=0, num_segments=1, num_events=0, **extra
) -> dict:
    """`Solution.stats` with the keys every path reports (as int64 arrays), plus `extra`."""

    def as_int(x):
        return jnp.asarray(x).astype(jnp.int64)

    return {
        "num_steps": as_int(num_steps),
        "num_rejected_steps": as_int(num_rejected_steps),
        "num_rhs": as_int(num_rhs),
        "num_segments": as_int(num_segments),
        "num_events": as_int(num_events),
        "counts": counts,
        **extra,
    }


def zeros_counts(model, y0):
    """The step map's counters of `model`, zero (int32 leaves)."""
    _, counts = jax.eval_shape(lambda y: model.step_map(0.0, y), y0)
    return jtu.tree_map(lambda s: jnp.zeros(s.shape, jnp.int32), counts)


def all_finite(tree):
    """Whether every floating leaf of `tree` is finite (a boolean scalar)."""
    ok = jnp.asarray(True)
    for leaf in jtu.tree_leaves(tree):
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
            ok = ok & jnp.all(jnp.isfinite(leaf))
    return ok


def check_finite(ts, ys, throw: bool, what: str):
    """`(ys, result, t_final)` of a run sampled at `ts`, checked for non-finite states.

    A NaN/inf state gives `RESULTS.nonfinite_state`, `t_final` = the last sample time whose state
    (and every earlier one) is finite, and NaN rows from there on; with `throw` it raises at run
    time instead.
    """
    finite = jax.vmap(all_finite)(ys)
    good = jnp.cumprod(finite.astype(jnp.int32)).astype(bool)  # finite up to and including i
    ok = good[-1]
    result = RESULTS.where(ok, RESULTS.successful, RESULTS.nonfinite_state)
    n_good = jnp.sum(good.astype(jnp.int32))
    t_final = jnp.where(ok, ts[-1], ts[jnp.maximum(n_good - 1, 0)])
    ys = mark_after(ts, ys, jnp.where(n_good == 0, -jnp.inf, t_final))
    if throw:
        ys = eqx.error_if(ys, ~ok, nonfinite_message(what))
    return ys, result, t_final


def mark_after(ts, tree, t_final):
    """`tree` (leading axis: samples at `ts`) with the floating rows after `t_final` set to NaN."""
    after = ts > t_final

    def one(b):
        if not jnp.issubdtype(b.dtype, jnp.inexact):
            return b
        return jnp.where(after.reshape((-1,) + (1,) * (b.ndim - 1)), jnp.nan, b)

    return jtu.tree_map(one, tree)


def solve_outcome(sol, ts):
    """`(result, t_final)` of a `diffeqsolve` sampled at `ts` (with `throw=False` it may have failed).

    diffrax fills the samples after a failure with its last state; `t_final` is then the last time
    it reached (from its step-size controller's state, or the last sample before the failure).
    """
    result = _results.promote(sol.result)
    ok = result == RESULTS.successful
    # Samples diffrax could not reach are +inf in `sol.ts` (it pads them); the last finite one is
    # where the run stopped, to the sample resolution.
    reached = jnp.isfinite(sol.ts) & (sol.ts <= ts[-1])
    last = jnp.max(jnp.where(reached, sol.ts, ts[0]))
    return result, jnp.where(ok, ts[-1], last)
