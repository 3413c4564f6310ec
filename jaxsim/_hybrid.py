r"""The hybrid driver: continuous dynamics, discrete models on clocks, scheduled discontinuities,
zero-crossing events and output frames in one pure, fixed-shape computation.

`simulate(model, y0, t1, clocks=..., discontinuities=..., events=..., ...)` dispatches here.

**Structure.** The run is one `lax.scan` over a *static* number of segments. The segment
boundaries are the ticks of all clocks (exact, see `jaxsim/_clocks.py`), the times of the
scheduled discontinuities (possibly traced, sorted at run time) and `t1`. Each scan iteration
solves one segment with `diffrax.diffeqsolve` from the current time to the next boundary, with the
zero-crossing conditions as a `diffrax.Event`; it then either

- handles the event (resets, log, restart at the crossing, same boundary next), or
- reaches the boundary and runs the clock updates due there (Jacobi, then sequential models).

Non-terminal events are therefore just extra scan iterations: the scan length is
`n_boundaries + 2 * max_events + 1` (each event may need one re-solve, see `_events.py`), and
iterations after the end are skipped (`lax.cond`). Everything is vmap- and grad-safe.

**Step size across boundaries.** Adaptive solvers carry the controller's *proposed* next step
(not the last, clipped one) and the PID history from one segment into the next, so a boundary
costs only the fresh first-same-as-last stage (1 RHS for Tsit5/Dopri5), as if the solver had a
`jump_ts` there. The discontinuity times are segment ends rather than `jump_ts`: this gives the
same step sequence, works identically for fixed-step solvers, and keeps the boundary times
differentiable (they enter as `t0`/`t1` of a solve). Fixed-step solvers restart their grid at each
boundary (`t_a + j dt`, the last step shortened to end on the boundary: "split"); ticks that are
multiples of `dt` keep the global grid.

**Left and right limits.** Inside a segment $[t_a, t_b]$ the drift is evaluated at
$\mathrm{clip}(t, t_a^+, t_b^-)$, one ulp inside the open interval (the gradient still flows through
$t$). A source with an edge at a boundary is thus seen at its left limit by the stages that end
a segment and at its right limit by those that start the next, whatever its own convention at
the edge (bdsim's last RK45 stage sees the post-step value, which costs it 2.5e-4 on
`step_response`).

**Output frames.** Samples `ts` are `SaveAt` points inside the segments (dense output); they never
cut steps, so the number of RHS evaluations does not depend on the output rate. A sample at a
boundary or event time records the *left limit* (pre-tick discrete states and held outputs,
pre-reset continuous state); the clock logs hold post-tick states and the event log both sides.
Samples after a terminal event are NaN.

**Assumptions and limitations:** the clock schedule and `ts` are static; the number of
discontinuity times is static (their values may be traced); fixed-step solvers cannot take a
traced boundary onto their grid (they split the step there); diffrax's event traps handled here
are listed in `_events.py`.

**Reference:** DESIGN.md section 5; Hairer, Norsett & Wanner, *Solving ODEs I*, sec. II.4 and II.6.
"""

import dataclasses
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optimistix as optx

from ._clocks import AbstractDiscreteModel, plan_ticks
from ._compile import jit as jaxsim_jit
from ._events import Event, EventLog
from ._signals import AbstractSignal
from ._simulate import Solution
from ._validation import check_unique_names


class HybridSolution(Solution):
    """What `simulate` returns when clocks, discontinuities or events are given.

    The fields of `Solution` (`ts`, `ys`, `outputs`, `stats`, `result`; `counts` is None), plus:

    - `zs`: discrete states `{model_name: z}` at `ts` (pre-tick values at tick times).
    - `held`: held outputs `{model_name: outputs}` at `ts`.
    - `clock_logs`: `{model_name: {"t": tick times (numpy), "z": post-tick states, "held": ...}}`.
    - `events`: an `EventLog` (None without events).
    - `t_final`: time the run ended [s] (`t1`, or the time of a terminal event).
    """

    zs: Any
    held: Any
    clock_logs: Any
    events: Any
    t_final: jax.Array


class _CarryPID(dfx.AbstractAdaptiveStepSizeController):
    """A PID controller that also records its last proposed (unclipped) step in its state."""

    inner: dfx.PIDController

    @property
    def rtol(self):
        return self.inner.rtol

    @property
    def atol(self):
        return self.inner.atol

    @property
    def norm(self):
        return self.inner.norm

    def wrap(self, direction):
        return _CarryPID(self.inner.wrap(direction))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        tnext, state = self.inner.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return tnext, (state, jnp.asarray(tnext - t0, dtype=jnp.result_type(float)))

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, state):
        inner_state, _ = state
        keep, nt0, nt1, jump, inner_state, result = self.inner.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, inner_state
        )
        proposal = jax.lax.stop_gradient(nt1 - nt0)
        return keep, nt0, nt1, jump, (inner_state, proposal), result


def _summed(fn):
    def g(y, args):
        out, aux = fn(y, args)
        return sum(jtu.tree_leaves(out)), aux

    return g


class _WrappedRootFinder(optx.AbstractRootFinder):
    """An optimistix root finder delegating to `inner`, with `fn` passed through `_fn`; the
    subclasses change what diffrax's root function is or when the iteration stops."""

    inner: optx.AbstractRootFinder

    @property
    def rtol(self):
        return self.inner.rtol

    @property
    def atol(self):
        return self.inner.atol

    @property
    def norm(self):
        return self.inner.norm

    def _fn(self, fn):
        return fn

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        return self.inner.init(self._fn(fn), y, args, options, f_struct, aux_struct, tags)

    def step(self, fn, y, args, options, state, tags):
        return self.inner.step(self._fn(fn), y, args, options, state, tags)

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return self.inner.postprocess(self._fn(fn), y, aux, args, options, state, tags, result)


class _SummedBisection(_WrappedRootFinder):
    """Bisection on the sum of diffrax's per-event root functions (all but the triggered one are
    zero there), since `optx.Bisection` needs a scalar output and diffrax passes a list; it stops
    on the bracket width alone, so that boolean conditions (a +-1 jump) converge."""

    inner: optx.Bisection

    @property
    def norm(self):
        return jnp.abs

    def _fn(self, fn):
        return _summed(fn)

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        f_struct = jax.ShapeDtypeStruct((), jnp.result_type(float))  # the sum is a scalar
        return super().init(fn, y, args, options, f_struct, aux_struct, tags)

    def terminate(self, fn, y, args, options, state, tags):
        # Bracket width only: a boolean condition (+-1) never has a small residual.
        scale = self.inner.atol + self.inner.rtol * jnp.abs(y)
        return jnp.abs(state.lower - state.upper) < scale, optx.RESULTS.successful


class _StepNewton(_WrappedRootFinder):
    """Newton's method on the event time that stops on the size of its step in time alone.

    `optx.Newton` (Cauchy termination) also needs |condition| < atol in the condition's own units,
    which a condition in metres near Earth radius (round-off ~1e-9 m) never reaches. Near a simple
    root Newton converges quadratically, so a step below `atol + rtol |t|` leaves an error of
    order step^2: time-based stopping is scale-free and loses no accuracy.
    """

    inner: optx.Newton

    def terminate(self, fn, y, args, options, state, tags):
        small = jnp.abs(state.diff) <= self.inner.atol + self.inner.rtol * jnp.abs(y)
        exact = jnp.all(jnp.stack([jnp.all(f == 0) for f in jtu.tree_leaves(state.f)]))
        done = (state.step >= 1) & (small | exact)
        return done, optx.RESULTS.successful


@dataclasses.dataclass(frozen=True)
class _Config:
    t0: float
    t1: float
    adaptive: bool
    has_dt: bool
    has_dtmax: bool
    max_steps: int
    max_events: int
    outputs: bool
    throw: bool
    window: int
    n_iter: int
    has_y: bool
    stages: int
    fsal: bool


def _inside(t, lo, hi):
    """`t` clipped into [lo, hi] in value, with the derivative of `t` itself."""
    return t + jax.lax.stop_gradient(jnp.clip(t, lo, hi) - t)


def _next_up(x):
    """One ulp above `x` in value; derivative of `x` (nextafter has no JAX derivative)."""
    xs = jax.lax.stop_gradient(x)
    return x + (jnp.nextafter(xs, jnp.asarray(jnp.inf, jnp.result_type(xs))) - xs)


def _next_down(x):
    xs = jax.lax.stop_gradient(x)
    return x + (jnp.nextafter(xs, jnp.asarray(-jnp.inf, jnp.result_type(xs))) - xs)


def merge_args(user_args, held):
    """`{**user_args, **held outputs of every model}` (held: `{model_name: {address: value}}`)."""
    out = {} if user_args is None else dict(user_args)
    for h in held.values():
        out.update(h)
    return out


def collect_discontinuities(model, discontinuities, t0, t1) -> tuple:
    """Discontinuity times (scalars, possibly traced): the model's breakpoints plus `discontinuities`."""
    items = list(model.breakpoints())
    for d in discontinuities:
        if isinstance(d, AbstractSignal):
            try:
                items.extend(d.breakpoints(t0, t1))
            except TypeError:
                items.extend(d.breakpoints())
        else:
            arr = jnp.atleast_1d(jnp.asarray(d, dtype=float))
            if arr.ndim != 1:
                raise ValueError(
                    "simulate: `discontinuities` entries must be signals, scalars or 1-D arrays "
                    f"of times [s]; got shape {arr.shape}."
                )
            items.extend(arr[i] for i in range(arr.shape[0]))
    return tuple(jnp.asarray(x, dtype=float) for x in items)


def _solver_info(dsolver):
    tab = getattr(dsolver, "tableau", None)
    if tab is None:
        return 1, False
    return len(tab.b_sol), bool(tab.fsal)


def _check_held_keys(models, held0, user_args):
    seen = {}
    for m in models:
        h = held0[m.name]
        if not isinstance(h, dict):
            raise ValueError(
                f"simulate: discrete model {m.name!r} must return its held outputs as a dict "
                f"{{address: value}} (merged into args); got {type(h).__name__}."
            )
        for key in h:
            if key in seen:
                raise ValueError(
                    f"simulate: held-output address {key!r} is written by both {seen[key]!r} and "
                    f"{m.name!r}; each top-level key of args must have one writer."
                )
            if isinstance(user_args, dict) and key in user_args:
                raise ValueError(
                    f"simulate: held-output address {key!r} of {m.name!r} collides with a key of "
                    "`args`; rename one of them."
                )
            seen[key] = m.name


def _initial_held(models, y0, args, t0):
    """Held outputs before the first tick: `init_outputs` or zeros shaped like `update`'s output."""
    held = {}
    for m in models:
        h = m.init_outputs(y0, args)
        if h is not None:
            held[m.name] = jtu.tree_map(jnp.asarray, h)
    for _ in range(len(models) + 1):
        missing = [m for m in models if m.name not in held]
        if not missing:
            break
        for m in missing:
            known = merge_args(args, held)

            def probe(m=m, known=known):
                return m.update(jnp.asarray(t0), y0, m.init_state(), known)[1]

            try:
                shape = jax.eval_shape(probe)
            except (KeyError, TypeError, IndexError):
                continue
            held[m.name] = jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shape)
    missing = [m.name for m in models if m.name not in held]
    if missing:
        raise ValueError(
            f"simulate: cannot infer the held outputs of discrete model(s) {missing!r} before their "
            "first tick (their update reads outputs of models not yet known); give `held0=` / "
            "`init_outputs`."
        )
    return {m.name: held[m.name] for m in models}


def simulate_hybrid(
    model,
    y0,
    *,
    t0,
    t1,
    ts,
    solver,
    dsolver,
    adaptive,
    dt,
    rtol,
    atol,
    args,
    clocks=(),
    events=(),
    discontinuities=(),
    max_events=None,
    max_steps=4096,
    dtmax=None,
    event_tol=1e-9,
    root_finder=None,
    outputs=True,
    throw=True,
    adjoint=None,
) -> HybridSolution:
    """Entry point used by `simulate` (arguments already validated there, `ts` concrete)."""
    models = tuple(clocks)
    for i, m in enumerate(models):
        if not isinstance(m, AbstractDiscreteModel):
            raise ValueError(
                f"simulate: `clocks[{i}]` must be a discrete model (jaxsim.DiscreteModel or an "
                f"AbstractDiscreteModel); got {type(m).__name__}."
            )
    check_unique_names("simulate", "clocks", [m.name for m in models])
    events = tuple(events)
    for i, e in enumerate(events):
        if not isinstance(e, Event):
            raise ValueError(
                f"simulate: `events[{i}]` must be a jaxsim.Event; got {type(e).__name__}."
            )
    if max_events is None:
        max_events = 16 if events else 0
    max_events = int(max_events)
    if events and max_events < 1:
        raise ValueError(f"simulate: `max_events` must be >= 1 with events; got {max_events}.")
    if models and args is not None and not isinstance(args, dict):
        raise ValueError(
            "simulate: with discrete models `args` must be a dict (held outputs are merged into "
            f"it) or None; got {type(args).__name__}."
        )
    if not adaptive:
        if dt is None:
            raise ValueError("simulate: fixed-step solver needs `dt` [s]; got None.")
        if not float(dt) > 0:
            raise ValueError(f"simulate: `dt` [s] must be > 0; got {dt}.")
    event_tol = float(event_tol)
    if not event_tol >= 0:
        raise ValueError(f"simulate: `event_tol` [s] must be >= 0; got {event_tol}.")

    plan = plan_ticks(models, t0, t1)
    disc = collect_discontinuities(model, discontinuities, t0, t1)
    disc_arr = jnp.stack(disc) if disc else jnp.zeros((0,))
    ts_np = np.asarray(ts, dtype=float)
    # Window: most samples in one static interval (t_{k-1}, t_k] (segments are sub-intervals).
    edges = np.concatenate([[t0], np.asarray(plan.times)])
    counts = np.diff(np.searchsorted(ts_np, edges, side="right"))
    window = max(int(counts.max()) if counts.size else 1, 1)
    n_iter = len(plan.times) + len(disc) + (2 * max_events + 1 if events else 0)
    stages, fsal = _solver_info(dsolver)
    has_y = len(jtu.tree_leaves(y0)) > 0
    if events and not has_y:
        raise ValueError("simulate: `events` need continuous states; the model has none.")

    held0 = _initial_held(models, y0, args, t0)
    _check_held_keys(models, held0, args)
    if root_finder is None and events:
        am = merge_args(args, held0)
        kinds = [
            jnp.issubdtype(jax.eval_shape(e.cond, jnp.asarray(t0), y0, am).dtype, jnp.bool_)
            for e in events
        ]
        root_finder = (
            _SummedBisection(optx.Bisection(rtol=1e-14, atol=1e-14))
            if any(kinds)
            else _StepNewton(optx.Newton(rtol=1e-13, atol=1e-13))
        )
    if isinstance(root_finder, optx.Bisection):
        root_finder = _SummedBisection(root_finder)
    config = _Config(
        t0=float(t0),
        t1=float(t1),
        adaptive=bool(adaptive),
        has_dt=dt is not None,
        has_dtmax=dtmax is not None,
        max_steps=int(max_steps),
        max_events=max_events,
        outputs=bool(outputs),
        throw=bool(throw),
        window=window,
        n_iter=int(n_iter),
        has_y=has_y,
        stages=stages,
        fsal=fsal,
    )
    return _run(
        model,
        models,
        events,
        y0,
        args,
        held0,
        disc_arr,
        jnp.asarray(ts_np),
        dsolver,
        root_finder,
        _Static(plan, config, adjoint),
        _numbers(dt, rtol, atol, dtmax, event_tol),
    )


def _split_step(t_a, t_b, dt):
    """Fixed step for a segment: the segment split into n = ceil(length / dt) equal steps.

    Inflated by 1e-12 (relative) so that the last step lands exactly on `t_b` (diffrax clips it)
    instead of leaving a one-ulp sliver.
    """
    length = t_b - t_a
    n = jnp.maximum(jnp.ceil(length / dt * (1.0 - 1e-10)), 1.0)
    return jnp.where(length > 0, length / n * (1.0 + 1e-12), dt)


def _pid(num, cfg):
    return dfx.PIDController(
        rtol=num["rtol"], atol=num["atol"], dtmax=num["dtmax"] if cfg.has_dtmax else None
    )


class _Static(eqx.Module):
    plan: Any = eqx.field(static=True)
    config: Any = eqx.field(static=True)
    adjoint: Any = eqx.field(static=True, default=None)


def _sign(x):
    return jnp.where(x > 0, 1.0, -1.0)


def _as_float_cond(c):
    c = jnp.asarray(c)
    if jnp.issubdtype(c.dtype, jnp.bool_):
        return jnp.where(c, 1.0, -1.0), True
    return c.astype(float), False


def _triggered(old, new, direction):
    if direction is None:
        return jnp.sign(old) != jnp.sign(new)
    if direction:
        return (jnp.sign(old) <= 0) & (jnp.sign(new) > 0)
    return (jnp.sign(old) > 0) & (jnp.sign(new) <= 0)


def _where(c, a, b):
    return jtu.tree_map(lambda u, v: jnp.where(c, u, v), a, b)


def _numbers(dt, rtol, atol, dtmax, event_tol):
    """Dynamic scalars (changing them does not recompile)."""

    def f(x):
        return jnp.asarray(1.0 if x is None else float(x))

    return {
        "dt": f(dt),
        "rtol": f(rtol),
        "atol": f(atol),
        "dtmax": f(dtmax),
        "event_tol": f(event_tol),
    }


@jaxsim_jit
def _run(model, models, events, y0, args, held0, disc, ts, dsolver, root_finder, static, num):
    plan, cfg = static.plan, static.config
    nm, n_ev, n_s, m = len(models), len(events), ts.shape[0], cfg.window
    t0 = jnp.asarray(cfg.t0)
    jacobi = [i for i, md in enumerate(models) if not md.sequential]
    sequential = [i for i, md in enumerate(models) if md.sequential]

    # ---- boundaries: static ticks (+ t1) and (possibly traced) discontinuity times, sorted.
    nb = len(plan.times)
    due_tab = jnp.asarray(
        np.vstack([np.asarray(plan.due, bool).reshape(nb, nm), np.zeros((1, nm), bool)])
    )
    num_tab = jnp.asarray(
        np.vstack(
            [
                np.asarray(plan.tick_number, np.int64).reshape(nb, nm),
                np.asarray(plan.n_ticks, np.int64).reshape(1, nm),
            ]
        )
    )
    B = jnp.asarray(plan.times)
    ids = jnp.arange(nb)
    if disc.shape[0]:
        B = jnp.concatenate([B, jnp.clip(disc, cfg.t0, cfg.t1)])
        ids = jnp.concatenate([ids, jnp.full(disc.shape, nb)])
        order = jnp.argsort(B, stable=True)
        B, ids = B[order], ids[order]
    n_total = B.shape[0]

    z0 = {md.name: md.init_state() for md in models}

    # ---- one segment solve.
    def drift(t, y, a):
        return model.drift(_inside(t, a["lo"], a["hi"]), y, a["args"])

    term = dfx.ODETerm(drift)

    def make_cond(i, ev):
        def cond_fn(t, y, args, **kwargs):
            a = args
            c, _ = _as_float_cond(ev.cond(t, y, a["args"]))
            c = jnp.where(a["dis"][i], 1.0, c)
            return jnp.where((t == a["t_start"]) & a["ov"][i], a["ovs"][i], c)

        return cond_fn

    event = None
    if n_ev:
        event = dfx.Event(
            [make_cond(i, ev) for i, ev in enumerate(events)],
            root_finder=root_finder,
            direction=[ev.diffrax_direction for ev in events],
        )

    if cfg.adaptive:
        controller = _CarryPID(_pid(num, cfg))
    else:
        controller = dfx.ConstantStepSize()

    def solve(t_a, t_b, y, args_m, dtp, cstate, ov, ovs, dis):
        win_idx = jnp.searchsorted(ts, t_a, side="right") + jnp.arange(m)
        win_t = jnp.where(win_idx < n_s, ts[jnp.minimum(win_idx, n_s - 1)], jnp.inf)
        save_t = jnp.clip(win_t, t_a, t_b)
        if not cfg.has_y:
            ys_w = jtu.tree_map(lambda u: jnp.broadcast_to(u, (m,) + u.shape), y)
            return (
                y,
                t_b,
                jnp.zeros((n_ev,), bool),
                win_idx,
                win_t,
                ys_w,
                dtp,
                cstate,
                jnp.asarray(0),
                jnp.asarray(0),
                dfx.RESULTS.successful,
            )
        a = {
            "args": args_m,
            "lo": _next_up(t_a),
            "hi": _next_down(t_b),
            "t_start": t_a,
            "ov": ov,
            "ovs": ovs,
            "dis": dis,
        }
        saveat = dfx.SaveAt(
            subs=[dfx.SubSaveAt(ts=save_t), dfx.SubSaveAt(t1=True)],
            controller_state=cfg.adaptive,
        )
        sol = dfx.diffeqsolve(
            term,
            dsolver,
            t_a,
            t_b,
            dtp if cfg.adaptive else _split_step(t_a, t_b, num["dt"]),
            y,
            a,
            saveat=saveat,
            stepsize_controller=controller,
            event=event,
            max_steps=cfg.max_steps,
            throw=False,
            controller_state=cstate if cfg.adaptive else None,
            **({} if static.adjoint is None else {"adjoint": static.adjoint}),
        )
        y_end = jtu.tree_map(lambda u: u[0], sol.ys[1])
        t_end = sol.ts[1][0]
        mask = (
            jnp.stack([jnp.asarray(x) for x in sol.event_mask]) if n_ev else jnp.zeros((0,), bool)
        )
        mask = mask & (sol.result == dfx.RESULTS.event_occurred)
        nsteps = jnp.asarray(sol.stats["num_steps"]).astype(jnp.int64)
        rhs = (1 + (cfg.stages - 1) * nsteps) if cfg.fsal else cfg.stages * nsteps
        if cfg.adaptive:
            cstate = sol.controller_state
            dtp = cstate[1]
        ok = (sol.result == dfx.RESULTS.successful) | (sol.result == dfx.RESULTS.event_occurred)
        res = dfx.RESULTS.where(ok, dfx.RESULTS.successful, sol.result)
        return (y_end, t_end, mask, win_idx, win_t, sol.ys[0], dtp, cstate, nsteps, rhs, res)

    # ---- condition values and rates (for simultaneity, conflicts and restart signs).
    def cond_values(t, y, args_m, lo, hi):
        if not n_ev:
            return jnp.zeros((0,)), jnp.zeros((0,)), ()
        vals, rates, kinds = [], [], []
        f = model.drift(_inside(t, lo, hi), y, args_m)
        for ev in events:

            def c_of(tt, yy, ev=ev):
                return _as_float_cond(ev.cond(tt, yy, args_m))[0]

            c, cdot = jax.jvp(c_of, (t, y), (jnp.ones_like(t), f))
            is_bool = jnp.issubdtype(jax.eval_shape(ev.cond, t, y, args_m).dtype, jnp.bool_)
            vals.append(c)
            rates.append(jnp.where(is_bool, 0.0, cdot))
            kinds.append(is_bool)
        return jnp.stack(vals), jax.lax.stop_gradient(jnp.stack(rates)), tuple(kinds)

    # ---- clock updates at a boundary.
    def tick(t_k, y, z, held, due):
        args_pre = merge_args(args, held)
        z_new, held_new = dict(z), dict(held)
        for i in jacobi:
            md = models[i]
            zi, hi = md.update(t_k, y, z[md.name], args_pre)
            z_new[md.name] = _where(due[i], zi, z[md.name])
            held_new[md.name] = _where(due[i], hi, held[md.name])
        for i in sequential:
            md = models[i]
            zi, hi = md.update(t_k, y, z_new[md.name], merge_args(args, held_new))
            z_new[md.name] = _where(due[i], zi, z_new[md.name])
            held_new[md.name] = _where(due[i], hi, held_new[md.name])
        return z_new, held_new

    # ---- buffers.
    def nan_like(tree, n):
        def mk(u):
            u = jnp.asarray(u)
            fill = jnp.nan if jnp.issubdtype(u.dtype, jnp.inexact) else -1
            return jnp.full((n,) + u.shape, fill, u.dtype)

        return jtu.tree_map(mk, tree)

    at0 = ts == t0

    def init_rows(buf, val):
        return jtu.tree_map(
            lambda b, v: jnp.where(at0.reshape((-1,) + (1,) * v.ndim), v[None], b), buf, val
        )

    buf_y = init_rows(nan_like(y0, n_s), y0)
    buf_z = init_rows(nan_like(z0, n_s), z0)
    buf_h = init_rows(nan_like(held0, n_s), held0)
    log_z = {md.name: nan_like(z0[md.name], plan.n_ticks[i]) for i, md in enumerate(models)}
    log_h = {md.name: nan_like(held0[md.name], plan.n_ticks[i]) for i, md in enumerate(models)}
    ev_t = jnp.full((max(cfg.max_events, 0),), jnp.nan)
    ev_i = jnp.full((max(cfg.max_events, 0),), -1)
    ev_yb, ev_ya = nan_like(y0, cfg.max_events), nan_like(y0, cfg.max_events)
    ev_zb, ev_za = nan_like(z0, cfg.max_events), nan_like(z0, cfg.max_events)

    # ---- initial step.
    if cfg.adaptive:
        pid = _pid(num, cfg)
        a0 = {
            "args": merge_args(args, held0),
            "lo": _next_up(t0),
            "hi": _next_down(B[0]),
            "t_start": t0,
            "ov": jnp.zeros((n_ev,), bool),
            "ovs": jnp.ones((n_ev,)),
            "dis": jnp.zeros((n_ev,), bool),
        }
        if not cfg.has_dt and cfg.has_y:
            tn, pstate = pid.init(term, t0, cfg.t1, y0, None, a0, dsolver.func, dsolver.order(term))
            dtp0 = jax.lax.stop_gradient(tn - t0)
            rhs0 = 2
        else:
            dtp0 = num["dt"]
            _, pstate = pid.init(term, t0, cfg.t1, y0, dtp0, a0, dsolver.func, None)
            rhs0 = 0
        cstate0 = jtu.tree_map(jnp.asarray, (pstate, dtp0))
    else:
        dtp0, cstate0, rhs0 = num["dt"], None, 0

    ov0, ovs0 = jnp.zeros((n_ev,), bool), jnp.ones((n_ev,))
    if n_ev:
        # A condition exactly zero at t0 takes the sign of where it is heading (as at a restart).
        c00, r00, _ = cond_values(t0, y0, merge_args(args, held0), _next_up(t0), _next_down(B[0]))
        ov0 = (c00 == 0) & (r00 != 0)
        ovs0 = jax.lax.stop_gradient(jnp.where(r00 != 0, jnp.sign(r00), 1.0))
        rhs0 = rhs0 + 1
    carry0 = dict(
        t=t0,
        y=y0,
        z=z0,
        held=held0,
        k=jnp.asarray(0),
        nev=jnp.asarray(0),
        dtp=dtp0,
        cst=cstate0,
        ov=ov0,
        ovs=ovs0,
        dis=jnp.zeros((n_ev,), bool),
        cap=jnp.asarray(jnp.inf),
        done=jnp.asarray(False),
        stopped=jnp.asarray(False),
        overflow=jnp.asarray(False),
        res=dfx.RESULTS.successful,
        nsteps=jnp.asarray(0),
        nrhs=jnp.asarray(rhs0),
        nseg=jnp.asarray(0),
        by=buf_y,
        bz=buf_z,
        bh=buf_h,
        lz=log_z,
        lh=log_h,
        et=ev_t,
        ei=ev_i,
        eyb=ev_yb,
        eya=ev_ya,
        ezb=ev_zb,
        eza=ev_za,
    )

    def body(c, _):
        done = c["done"]
        kk = jnp.minimum(c["k"], n_total - 1)
        t_a = c["t"]
        t_b = jnp.where(done, t_a, jnp.minimum(B[kk], c["cap"]))
        args_m = merge_args(args, c["held"])

        def run(_):
            return solve(t_a, t_b, c["y"], args_m, c["dtp"], c["cst"], c["ov"], c["ovs"], c["dis"])

        def skip(_):
            win_idx = jnp.full((m,), n_s)
            ys_w = jtu.tree_map(lambda u: jnp.broadcast_to(u, (m,) + u.shape), c["y"])
            return (
                c["y"],
                t_a,
                jnp.zeros((n_ev,), bool),
                win_idx,
                jnp.full((m,), jnp.inf),
                ys_w,
                c["dtp"],
                c["cst"],
                jnp.asarray(0),
                jnp.asarray(0),
                dfx.RESULTS.successful,
            )

        (y_e, t_e, mask, win_idx, win_t, ys_w, dtp, cst, nst, rhs, res) = jax.lax.cond(
            done, skip, run, None
        )
        c = dict(c)
        c["nsteps"] = c["nsteps"] + nst
        c["nrhs"] = c["nrhs"] + rhs
        c["nseg"] = c["nseg"] + jnp.where(done, 0, 1)
        c["res"] = dfx.RESULTS.where(c["res"] == dfx.RESULTS.successful, res, c["res"])
        c["dtp"], c["cst"] = dtp, cst

        # Samples in (t_a, t_e]: left limits (pre-tick z and held, pre-reset y).
        valid = (win_idx < n_s) & (win_t > t_a) & (win_t <= t_e) & ~done
        idx = jnp.where(valid, win_idx, n_s)

        def put(buf, vals):
            def one(b, v):
                v = jnp.broadcast_to(v, (m,) + b.shape[1:])
                return b.at[idx].set(v, mode="drop")

            return jtu.tree_map(one, buf, vals)

        c["by"] = put(c["by"], ys_w)
        c["bz"] = put(c["bz"], c["z"])
        c["bh"] = put(c["bh"], c["held"])

        fired = jnp.any(mask) & ~done

        if n_ev:
            hi_seg = _next_down(t_b)

            def checks(_):
                lo_seg = _next_up(t_a)
                c_e, r_e, kinds = cond_values(t_e, y_e, args_m, lo_seg, hi_seg)
                c_s = []
                for i, ev in enumerate(events):
                    v = _as_float_cond(ev.cond(t_a, c["y"], args_m))[0]
                    v = jnp.where(c["dis"][i], 1.0, v)
                    c_s.append(jnp.where(c["ov"][i], c["ovs"][i], v))
                c_s = jnp.stack(c_s)
                dirs = [ev.diffrax_direction for ev in events]
                crossed = (
                    jnp.stack([_triggered(c_s[i], c_e[i], dirs[i]) for i in range(n_ev)])
                    & ~c["dis"]
                )
                is_bool = jnp.asarray(kinds)
                delta = jnp.where(is_bool, 0.0, c_e / jnp.where(r_e == 0, jnp.inf, r_e))
                near = jnp.abs(delta) <= num["event_tol"]
                moving = []
                for i in range(n_ev):
                    d = dirs[i]
                    if d is None:
                        armed = jnp.asarray(True)
                    else:
                        armed = (c_s[i] <= 0) if d else (c_s[i] > 0)
                    mv = (r_e[i] != 0) if d is None else ((r_e[i] > 0) if d else (r_e[i] < 0))
                    moving.append(armed & mv)
                moving = jnp.stack(moving) & ~c["dis"]
                conflict = jnp.any(crossed & ~mask & ~near)
                simul = mask | (crossed & near) | (near & moving & ~is_bool)
                return conflict, simul

            conflict, simul = jax.lax.cond(
                fired, checks, lambda _: (jnp.asarray(False), jnp.zeros((n_ev,), bool)), None
            )
            accept = fired & ~conflict
            simul = simul & accept
            # Resets in declaration order, each on the state left by the previous one.
            yb, zb = y_e, c["z"]
            rank = jnp.cumsum(simul.astype(int)) - 1
            n_new = jnp.sum(simul.astype(int))
            over = accept & (c["nev"] + n_new > cfg.max_events)
            terminal = jnp.asarray(False)
            for i, ev in enumerate(events):
                row = jnp.where(simul[i], c["nev"] + rank[i], cfg.max_events)
                y_before, z_before = yb, zb
                if ev.reset is not None:
                    yn, zn = ev.reset(t_e, yb, zb, args_m)
                    yb = _where(simul[i], yn, yb)
                    zb = _where(simul[i], zn, zb)
                c["et"] = c["et"].at[row].set(t_e, mode="drop")
                c["ei"] = c["ei"].at[row].set(i, mode="drop")
                for key, val in (("eyb", y_before), ("eya", yb), ("ezb", z_before), ("eza", zb)):
                    c[key] = jtu.tree_map(lambda b, v: b.at[row].set(v, mode="drop"), c[key], val)
                if ev.terminal:
                    terminal = terminal | simul[i]

            def restart_signs(_):
                lo_n = _next_up(t_e)
                c_a, r_a, _ = cond_values(t_e, yb, args_m, lo_n, jnp.maximum(lo_n, hi_seg))
                s = jnp.where(r_a != 0, jnp.sign(r_a), _sign(c_a))
                return jax.lax.stop_gradient(s)

            ovs_new = jax.lax.cond(accept, restart_signs, lambda _: c["ovs"], None)
        else:
            conflict = jnp.asarray(False)
            accept = jnp.asarray(False)
            over = jnp.asarray(False)
            terminal = jnp.asarray(False)
            yb, zb, n_new, simul, ovs_new = y_e, c["z"], 0, c["ov"], c["ovs"]

        # No event: the segment reached t_b (a boundary, or the cap of a re-solve).
        reached = ~done & ~fired
        at_boundary = reached & (t_b == B[kk]) & (c["cap"] >= B[kk])
        bid = ids[kk]
        due = due_tab[bid] & at_boundary
        z_t, held_t = tick(t_b, y_e, c["z"], c["held"], due)
        rows = num_tab[bid]
        for i, md in enumerate(models):
            r = jnp.where(due[i], rows[i], plan.n_ticks[i])
            c["lz"][md.name] = jtu.tree_map(
                lambda b, v, r=r: b.at[r].set(v, mode="drop"), c["lz"][md.name], z_t[md.name]
            )
            c["lh"][md.name] = jtu.tree_map(
                lambda b, v, r=r: b.at[r].set(v, mode="drop"), c["lh"][md.name], held_t[md.name]
            )

        # Next carry.
        new_t = jnp.where(accept | reached, t_e, t_a)
        new_y = _where(accept, yb, _where(reached, y_e, c["y"]))
        new_z = _where(accept, zb, _where(at_boundary, z_t, c["z"]))
        new_held = _where(at_boundary, held_t, c["held"])
        new_k = c["k"] + at_boundary.astype(c["k"].dtype)
        c.update(
            t=new_t,
            y=new_y,
            z=new_z,
            held=new_held,
            k=new_k,
            nev=c["nev"] + jnp.where(accept, n_new, 0),
            ov=jnp.where(accept, simul, jnp.where(reached, False, c["ov"])),
            ovs=jnp.where(accept, ovs_new, c["ovs"]),
            dis=jnp.where(conflict, c["dis"] | mask, jnp.where(accept | reached, False, c["dis"])),
            cap=jnp.where(conflict, t_e, jnp.where(accept | reached, jnp.inf, c["cap"])),
            stopped=c["stopped"] | (accept & terminal),
            overflow=c["overflow"] | over,
        )
        c["done"] = done | (new_k >= n_total) | c["stopped"] | over
        return c, None

    c, _ = jax.lax.scan(body, carry0, None, length=cfg.n_iter)

    finished = (c["k"] >= n_total) | c["stopped"]
    bad = c["overflow"] | ~finished
    result = dfx.RESULTS.where(bad, dfx.RESULTS.max_steps_reached, c["res"])
    t_final = jnp.where(c["stopped"], c["t"], cfg.t1)
    by, bz, bh = c["by"], c["bz"], c["bh"]
    after = ts > t_final

    def blank(tree):
        return jtu.tree_map(
            lambda b: (
                jnp.where(after.reshape((-1,) + (1,) * (b.ndim - 1)), jnp.nan, b)
                if jnp.issubdtype(b.dtype, jnp.inexact)
                else b
            ),
            tree,
        )

    by, bz, bh = blank(by), blank(bz), blank(bh)
    if cfg.throw:
        by, t_final = eqx.error_if(
            (by, t_final),
            bad,
            f"simulate: the hybrid run did not reach t1: more than max_events={cfg.max_events} "
            "event firings (or event re-solves) were needed. Raise `max_events` (the event "
            "log has that fixed size; nothing is truncated silently).",
        )
        by, t_final = eqx.error_if(
            (by, t_final),
            c["res"] != dfx.RESULTS.successful,
            "simulate: a segment solve failed (max_steps reached, or non-finite values); raise "
            "`max_steps` or check the model, or pass throw=False to inspect `Solution.result`.",
        )
    derived = None
    if cfg.outputs:

        def derive(t, y, h):
            a = merge_args(args, h)
            return model.derived(t, y, a)

        derived = jax.vmap(derive)(ts, by, bh)
    stats = {
        "num_steps": c["nsteps"],
        "num_rhs": c["nrhs"],
        "num_segments": c["nseg"],
        "num_events": c["nev"],
    }
    logs = {
        md.name: {
            "t": jnp.asarray(plan.model_times[i]),
            "z": c["lz"][md.name],
            "held": c["lh"][md.name],
        }
        for i, md in enumerate(models)
    }
    ev_log = None
    if n_ev:
        ev_log = EventLog(
            t=c["et"],
            index=c["ei"],
            y_before=c["eyb"],
            y_after=c["eya"],
            z_before=c["ezb"],
            z_after=c["eza"],
            count=c["nev"],
            names=tuple(ev.name for ev in events),
        )
    return HybridSolution(
        ts=ts,
        ys=by,
        outputs=derived,
        counts=None,
        stats=stats,
        result=result,
        zs=bz,
        held=bh,
        clock_logs=logs,
        events=ev_log,
        t_final=t_final,
    )
