"""Shared machinery of the optimization examples: a dense-Jacobian residual, the least-squares
solve and timed solves."""

import time

import equinox as eqx
import jax
import jax.numpy as jnp


def dense_jacobian(fn, mode: str = "fwd"):
    r"""Wrap a residual `fn(params, problem) -> r` so that its JVP is a dense Jacobian product.

    The wrapper has the value of `fn` and the derivative $J\,\delta p$ with
    $J = \partial r/\partial p$ computed once per linearisation point by `jax.jacfwd`
    (`mode="fwd"`) or `jax.jacrev` (`mode="rev"`). A Gauss-Newton solver (`optimistix.GaussNewton`,
    `optimistix.LevenbergMarquardt`) then linearises and transposes a matrix product instead of the
    whole simulation, which roughly halves the size of the compiled program; `mode="rev"` also
    works when the simulation supports reverse mode only (diffrax's checkpointed solves inside
    the hybrid driver). `problem` receives no derivative.
    """
    if mode not in ("fwd", "rev"):
        raise ValueError(f"dense_jacobian: `mode` must be 'fwd' or 'rev'; got {mode!r}.")
    jac = jax.jacfwd if mode == "fwd" else jax.jacrev

    @eqx.filter_jit
    def value_and_jacobian(params, problem):
        def pair(p):
            r = fn(p, problem)
            return r, r

        J, r = jac(pair, has_aux=True)(params)
        return r, J

    def wrapped(params, problem):
        # Only the array leaves of `problem` cross the custom-JVP boundary (the rest is static).
        dynamic, static = eqx.partition(problem, eqx.is_array)

        @jax.custom_jvp
        def core(p, dyn):
            return fn(p, eqx.combine(dyn, static))

        @core.defjvp
        def _jvp(primals, tangents):
            p, dyn = primals
            r, J = value_and_jacobian(p, eqx.combine(dyn, static))
            return r, jnp.tensordot(J, tangents[0], axes=jnp.ndim(p))

        return core(params, dynamic)

    wrapped.value_and_jacobian = value_and_jacobian
    return wrapped


def least_squares(dense_residuals, problem, params0, solver, max_steps):
    """`optimistix.least_squares` of a `dense_jacobian` residual, not raising on failure.

    **Returns:** `(params, residual, jacobian, num_steps, result)`; the residual and the (dense)
    Jacobian at the solution come from the solver state, so no extra simulation is compiled.
    """
    import optimistix as optx

    sol = optx.least_squares(
        dense_residuals, solver, params0, args=problem, max_steps=max_steps, throw=False
    )
    f_info = sol.state.f_info
    return sol.value, f_info.residual, f_info.jac.as_matrix(), sol.stats["num_steps"], sol.result


def timed_solve(jitted, *args):
    """Compile `jitted` (an `eqx.filter_jit` function) for `args` and run it once.

    Returns `(out, compile_time_s, run_time_s)`; a second call with arguments of the same
    structure reuses the compiled program (its compile time is then the cache look-up).
    """
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    mid = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    end = time.perf_counter()
    return out, mid - start, end - mid


def solver_message(result) -> str:
    """A short text for an `optimistix.RESULTS` value."""
    import optimistix as optx

    for name in ("successful", "nonlinear_max_steps_reached", "nonlinear_divergence", "nonfinite"):
        if bool(result == getattr(optx.RESULTS, name)):
            return name
    return "failed"
