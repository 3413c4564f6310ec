"""Root finders for event times: wrappers of optimistix's, adapted to diffrax's event functions."""

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import optimistix as optx


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


def default_root_finder(events, t0, y0, args_m, root_finder):
    """Bisection when a condition is boolean, else Newton stopping on its step in time."""
    if root_finder is None:
        kinds = [
            jnp.issubdtype(jax.eval_shape(e.cond, jnp.asarray(t0), y0, args_m).dtype, jnp.bool_)
            for e in events
        ]
        root_finder = (
            _SummedBisection(optx.Bisection(rtol=1e-14, atol=1e-14))
            if any(kinds)
            else _StepNewton(optx.Newton(rtol=1e-13, atol=1e-13))
        )
    if isinstance(root_finder, optx.Bisection):
        root_finder = _SummedBisection(root_finder)
    return root_finder


def locate(events, info, interp, unpack, args_user, root_finder):
    """`(t, result)`: the crossing of event `info.index` in the bracket `[info.lo, info.hi]` of the
    check grid (`jaxsim._events._guard`), on the step's dense output `interp`.

    The root finder starts from the secant of the bracket and stays in it; the time is
    differentiable through the dense output (implicit function theorem, as optimistix does).
    """
    lo, hi, c_lo, c_hi = info.lo, info.hi, info.c_lo, info.c_hi

    def one(ev):
        def g(t):
            c = jnp.asarray(ev.cond(t, unpack(interp.evaluate(t)), args_user))
            return jnp.where(c, 1.0, -1.0) if c.dtype == bool else c.astype(float)

        return g

    branches = [one(ev) for ev in events]

    def fn(t, _):
        return jax.lax.switch(info.index, branches, t)

    denom = c_lo - c_hi
    guess = jnp.where(denom != 0, lo + (hi - lo) * c_lo / jnp.where(denom != 0, denom, 1.0), hi)
    guess = jnp.clip(jnp.where(c_lo == 0, lo, guess), lo, hi)
    sol = optx.root_find(fn, root_finder, guess, options={"lower": lo, "upper": hi}, throw=False)
    return sol.value, sol.result
