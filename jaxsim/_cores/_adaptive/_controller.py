"""The step-size controller of jaxsim's adaptive core: diffrax.PIDController's constants and semantics, the error norm, the initial step and the end-of-interval rules."""

import functools

import jax
import jax.numpy as jnp


# diffrax.PIDController's defaults (an I controller): safety factor and the limits of one change.
SAFETY = 0.9
FACTOR_MIN = 0.2
FACTOR_MAX = 10.0
# diffrax.PIDController's default `(pcoeff, icoeff)`: the I controller (the fast path).
DEFAULT_GAINS = (0.0, 1.0)
# A step ending within this many ulps of t1 is stretched to t1 (diffrax's rule).
_END_ULPS = 100
# Progress reports every this many attempted steps (one host call per step would dominate the
# run time of a small drift).
_PROGRESS_EVERY = 64


def _neg_root(x, m: int):
    """`x ** (-1 / m)`; for m a power of two as square roots (on the CPU the square root takes a
    fraction of the time of the general power, and this sits between a step and the next)."""
    if m & (m - 1) == 0 and m > 1:
        while m > 2:
            x = jnp.sqrt(x)
            m //= 2
        return jax.lax.rsqrt(x)
    return x ** (-1.0 / m)


def _rms(x):
    return jnp.sqrt(jnp.mean(x * x))


def initial_step(f, t0, y0, f0, order, rtol, atol):
    """Hairer-Nørsett-Wanner's starting step (module docstring); two drift evaluations."""
    scale = atol + jnp.abs(y0) * rtol
    d0 = _rms(y0 / scale)
    d1 = _rms(f0 / scale)
    small = (d0 < 1e-5) | (d1 < 1e-5)
    h0 = jnp.where(small, 1e-6, 0.01 * d0 / jnp.where(small, 1.0, d1))
    f1 = f(t0 + h0, y0 + h0 * f0)
    d2 = _rms((f1 - f0) / scale) / h0
    max_d = jnp.maximum(d1, d2)
    h1 = jnp.where(max_d <= 1e-15, jnp.maximum(1e-6, h0 * 1e-3), (0.01 / max_d) ** (1.0 / order))
    return jax.lax.stop_gradient(jnp.minimum(100 * h0, h1))


# The next float up / down, differentiated as the identity (a traced `t0`/`t1` reaches the step
# times through them; JAX has no derivative rule for `nextafter`).
@jax.custom_jvp
def _next_after(x):
    return jnp.nextafter(x, jnp.inf)


@jax.custom_jvp
def _prev_before(x):
    return jnp.nextafter(x, -jnp.inf)


_next_after.defjvp(lambda primals, tangents: (_next_after(*primals), tangents[0]))
_prev_before.defjvp(lambda primals, tangents: (_prev_before(*primals), tangents[0]))


# `n` floats down (`_prev_before` n times) in one custom_jvp: traced once, where n separate ones
# took a fifth of the trace of a Dopri8 gradient program (each custom_jvp is traced with its rule).
@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _ulps_before(x, n: int):
    for _ in range(n):
        x = jnp.nextafter(x, -jnp.inf)
    return x


_ulps_before.defjvp(lambda n, primals, tangents: (_ulps_before(primals[0], n), tangents[0]))
