r"""Attitude kinematics: skew matrices, MRPs, DCMs, quaternions, principal rotations.

Conventions (Schaub & Junkins, *Analytical Mechanics of Space Systems*, 4th ed., ch. 3):

- ``dcm_BN`` $=[BN]$ maps $\mathcal N$ components to $\mathcal B$ components: ${}^B v = [BN]\,{}^N v$.
- MRPs: $\boldsymbol\sigma = \hat e \tan(\Phi/4)$; shadow set $\boldsymbol\sigma^S = -\boldsymbol\sigma/\sigma^2$.
- Quaternions (Euler parameters) are scalar first, $\beta = (\beta_0, \beta_1, \beta_2, \beta_3)$.

Every function is pure, works under `jit`/`vmap`/`grad`, and has a finite gradient at zero rotation
(no norms of possibly-zero vectors are differentiated).
"""

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float


# Small linear algebra, in one place so that its lowering can be tuned for all models. Measured on the
# CPU (XLA thunk runtime, float64, RK4 spacecraft step): products written as a broadcast multiply and
# a sum lower to one loop fusion each, fused with their operands' producers, where `@`/`einsum` give
# a separate `dot` kernel per 3x3 product (hub + 3 wheels drift: 32 -> 21 kernels, open-loop slew
# step 3.4 -> 2.7 us); hand-written component formulas (slices, `jnp.stack`) split into more tiny
# fusions and were no faster. Where a formula needs components, they come from `jnp.unstack`, not
# from indexing: reverse mode transposes an unstack into one concatenation that fuses with its
# neighbours, but each indexed component into a zero-padded copy of the whole array, a kernel of
# its own (`combined` spacecraft drift VJP: 281 -> 227 kernels with `cross3`, `tilde`, `inv3`
# written this way; the forward values are bit-identical).


def dot3(a, b):
    """Dot product of 3-vectors (batched over leading axes)."""
    return jnp.sum(jnp.asarray(a) * jnp.asarray(b), axis=-1)


def cross3(a, b):
    """Cross product of 3-vectors (batched over leading axes)."""
    a, b = jnp.broadcast_arrays(a, b)
    a0, a1, a2 = jnp.unstack(a, axis=-1)
    b0, b1, b2 = jnp.unstack(b, axis=-1)
    return jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def mv3(m, v):
    """Matrix-vector product `m @ v` for 3x3 `m` (batched over leading axes)."""
    return jnp.sum(jnp.asarray(m) * jnp.asarray(v)[..., None, :], axis=-1)


def mtv3(m, v):
    """Transposed matrix-vector product `m^T v` for 3x3 `m` (batched over leading axes)."""
    return jnp.sum(jnp.asarray(m) * jnp.asarray(v)[..., :, None], axis=-2)


def mm3(a, b):
    """Matrix product `a @ b` of 3x3 matrices (batched over leading axes)."""
    return jnp.sum(jnp.asarray(a)[..., :, :, None] * jnp.asarray(b)[..., None, :, :], axis=-2)


def outer3(a, b):
    """Outer product `a b^T` of 3-vectors."""
    return a[..., :, None] * b[..., None, :]


def tilde(v: ArrayLike) -> Float[Array, "*batch 3 3"]:
    r"""Skew-symmetric matrix $[\tilde v]$ with $[\tilde v] w = v \times w$."""
    x, y, z = jnp.unstack(jnp.asarray(v), axis=-1)
    zero = jnp.zeros_like(x)
    return jnp.stack(
        [
            jnp.stack([zero, -z, y], axis=-1),
            jnp.stack([z, zero, -x], axis=-1),
            jnp.stack([-y, x, zero], axis=-1),
        ],
        axis=-2,
    )


def mrp_to_dcm(sigma: ArrayLike) -> Float[Array, "*batch 3 3"]:
    r"""$[BN]$ from $\boldsymbol\sigma_{B/N}$: $I + (8[\tilde\sigma]^2 - 4(1-\sigma^2)[\tilde\sigma])/(1+\sigma^2)^2$."""
    sigma = jnp.asarray(sigma)
    s2 = jnp.sum(sigma * sigma, axis=-1)[..., None, None]
    st = tilde(sigma)
    return jnp.eye(3) + (8.0 * mm3(st, st) - 4.0 * (1.0 - s2) * st) / (1.0 + s2) ** 2


def mrp_b_matrix(sigma: ArrayLike) -> Float[Array, "*batch 3 3"]:
    r"""$[B(\sigma)] = (1-\sigma^2) I + 2[\tilde\sigma] + 2\sigma\sigma^T$, so $\dot\sigma = \frac14 [B]\omega$."""
    sigma = jnp.asarray(sigma)
    s2 = jnp.sum(sigma * sigma, axis=-1)[..., None, None]
    outer = sigma[..., :, None] * sigma[..., None, :]
    return (1.0 - s2) * jnp.eye(3) + 2.0 * tilde(sigma) + 2.0 * outer


def mrp_dot(sigma: ArrayLike, omega: ArrayLike) -> Float[Array, "*batch 3"]:
    r"""MRP kinematic differential equation $\dot\sigma = \frac14[B(\sigma)]\,{}^B\omega_{B/N}$."""
    return 0.25 * mv3(mrp_b_matrix(sigma), omega)


def mrp_shadow(sigma: ArrayLike) -> Float[Array, "*batch 3"]:
    r"""Shadow set $-\sigma/\sigma^2$ (same attitude). Undefined at $\sigma=0$; callers switch only if $|\sigma|>1$."""
    sigma = jnp.asarray(sigma)
    s2 = jnp.sum(sigma * sigma, axis=-1, keepdims=True)
    return -sigma / s2


def mrp_switch(sigma: ArrayLike, threshold: float = 1.0):
    r"""Basilisk's shadow-set switch: if $|\sigma| >$ `threshold`, return $-\sigma/\sigma^2$.

    **Returns:** `(sigma_new, switched)` with `switched` a boolean array. Gradient-safe: the
    division is evaluated on a denominator that is never zero.
    """
    sigma = jnp.asarray(sigma)
    s2 = jnp.sum(sigma * sigma, axis=-1, keepdims=True)
    switched = s2 > threshold**2
    safe_s2 = jnp.where(switched, s2, 1.0)
    return jnp.where(switched, -sigma / safe_s2, sigma), switched[..., 0]


def dcm_to_quat(dcm: ArrayLike) -> Float[Array, "*batch 4"]:
    r"""Euler parameters $\beta$ ($\beta_0 \ge 0$) from a DCM, Sheppard's method (Schaub & Junkins §3.5)."""
    c = jnp.asarray(dcm)
    tr = jnp.trace(c, axis1=-2, axis2=-1)
    b2 = jnp.stack(
        [
            0.25 * (1.0 + tr),
            0.25 * (1.0 + 2.0 * c[..., 0, 0] - tr),
            0.25 * (1.0 + 2.0 * c[..., 1, 1] - tr),
            0.25 * (1.0 + 2.0 * c[..., 2, 2] - tr),
        ],
        axis=-1,
    )
    i = jnp.argmax(b2, axis=-1)
    d01 = 0.25 * (c[..., 1, 2] - c[..., 2, 1])
    d02 = 0.25 * (c[..., 2, 0] - c[..., 0, 2])
    d03 = 0.25 * (c[..., 0, 1] - c[..., 1, 0])
    s12 = 0.25 * (c[..., 0, 1] + c[..., 1, 0])
    s31 = 0.25 * (c[..., 2, 0] + c[..., 0, 2])
    s23 = 0.25 * (c[..., 1, 2] + c[..., 2, 1])
    # Each candidate divides the off-diagonal products by the largest beta_i, which is >= 1/2.
    bmax = jnp.sqrt(jnp.max(b2, axis=-1))
    cand = jnp.stack(
        [
            jnp.stack([bmax, d01 / bmax, d02 / bmax, d03 / bmax], -1),
            jnp.stack([d01 / bmax, bmax, s12 / bmax, s31 / bmax], -1),
            jnp.stack([d02 / bmax, s12 / bmax, bmax, s23 / bmax], -1),
            jnp.stack([d03 / bmax, s31 / bmax, s23 / bmax, bmax], -1),
        ],
        axis=-2,
    )
    q = jnp.take_along_axis(cand, i[..., None, None], axis=-2)[..., 0, :]
    return jnp.where(q[..., :1] < 0, -q, q)


def quat_to_dcm(beta: ArrayLike) -> Float[Array, "*batch 3 3"]:
    r"""DCM from Euler parameters (scalar first); the input is normalised first."""
    b = jnp.asarray(beta)
    b = b / jnp.linalg.norm(b, axis=-1, keepdims=True)
    b0, b1, b2, b3 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return jnp.stack(
        [
            jnp.stack(
                [
                    b0**2 + b1**2 - b2**2 - b3**2,
                    2 * (b1 * b2 + b0 * b3),
                    2 * (b1 * b3 - b0 * b2),
                ],
                -1,
            ),
            jnp.stack(
                [
                    2 * (b1 * b2 - b0 * b3),
                    b0**2 - b1**2 + b2**2 - b3**2,
                    2 * (b2 * b3 + b0 * b1),
                ],
                -1,
            ),
            jnp.stack(
                [
                    2 * (b1 * b3 + b0 * b2),
                    2 * (b2 * b3 - b0 * b1),
                    b0**2 - b1**2 - b2**2 + b3**2,
                ],
                -1,
            ),
        ],
        axis=-2,
    )


def quat_to_mrp(beta: ArrayLike) -> Float[Array, "*batch 3"]:
    r"""MRP $\sigma_i = \beta_i/(1+\beta_0)$, taking the $\beta_0 \ge 0$ set so that $|\sigma| \le 1$."""
    b = jnp.asarray(beta)
    b = jnp.where(b[..., :1] < 0, -b, b)
    return b[..., 1:] / (1.0 + b[..., :1])


def mrp_to_quat(sigma: ArrayLike) -> Float[Array, "*batch 4"]:
    r"""Euler parameters from an MRP: $\beta_0 = (1-\sigma^2)/(1+\sigma^2)$, $\beta_i = 2\sigma_i/(1+\sigma^2)$."""
    s = jnp.asarray(sigma)
    s2 = jnp.sum(s * s, axis=-1, keepdims=True)
    return jnp.concatenate([(1.0 - s2) / (1.0 + s2), 2.0 * s / (1.0 + s2)], axis=-1)


def dcm_to_mrp(dcm: ArrayLike) -> Float[Array, "*batch 3"]:
    """MRP (with $|\\sigma| \\le 1$) from a DCM, through the Euler parameters."""
    return quat_to_mrp(dcm_to_quat(dcm))


def prv_to_dcm(prv: ArrayLike) -> Float[Array, "*batch 3 3"]:
    r"""DCM $\cos\Phi I + (1-\cos\Phi)\hat e\hat e^T - \sin\Phi[\tilde{\hat e}]$ from $\mathbf q = \Phi \hat e$.

    Gradient-safe at $\Phi = 0$ through series expansions of $\sin\Phi/\Phi$ and $(1-\cos\Phi)/\Phi^2$.
    """
    q = jnp.asarray(prv)
    phi2 = jnp.sum(q * q, axis=-1)[..., None, None]
    small = phi2 < 1e-8
    safe = jnp.where(small, 1.0, phi2)
    phi = jnp.sqrt(safe)
    sinc = jnp.where(small, 1.0 - phi2 / 6.0, jnp.sin(phi) / phi)
    cosc = jnp.where(small, 0.5 - phi2 / 24.0, (1.0 - jnp.cos(phi)) / safe)
    outer = q[..., :, None] * q[..., None, :]
    cos_phi = jnp.where(small, 1.0 - phi2 / 2.0, jnp.cos(phi))
    return cos_phi * jnp.eye(3) + cosc * outer - sinc * tilde(q)


def euler_axis_rotation(axis: int, angle: ArrayLike) -> Float[Array, "*batch 3 3"]:
    r"""Single-axis rotation $M_k(\theta)$ (`axis` = 1, 2 or 3): DCM of a frame rotated by $+\theta$ about axis $k$."""
    a = jnp.asarray(angle)
    c, s = jnp.cos(a), jnp.sin(a)
    one, zero = jnp.ones_like(a), jnp.zeros_like(a)
    if axis == 1:
        rows = [[one, zero, zero], [zero, c, s], [zero, -s, c]]
    elif axis == 2:
        rows = [[c, zero, -s], [zero, one, zero], [s, zero, c]]
    elif axis == 3:
        rows = [[c, s, zero], [-s, c, zero], [zero, zero, one]]
    else:
        raise ValueError(f"euler_axis_rotation: `axis` must be 1, 2 or 3; got {axis!r}.")
    return jnp.stack([jnp.stack(r, -1) for r in rows], axis=-2)


def inv3(m: ArrayLike) -> Float[Array, "*batch 3 3"]:
    """Closed-form inverse of a 3x3 matrix by its adjugate (a LAPACK call costs more than a whole step)."""
    (a, b, c), (d, e, f), (g, h, i) = (
        jnp.unstack(row, axis=-1) for row in jnp.unstack(jnp.asarray(m), axis=-2)
    )
    co00 = e * i - f * h
    co01 = -(d * i - f * g)
    co02 = d * h - e * g
    det = a * co00 + b * co01 + c * co02
    adj = jnp.stack(
        [
            jnp.stack([co00, -(b * i - c * h), b * f - c * e], -1),
            jnp.stack([co01, a * i - c * g, -(a * f - c * d)], -1),
            jnp.stack([co02, -(a * h - b * g), a * e - b * d], -1),
        ],
        axis=-2,
    )
    return adj / det[..., None, None]


def solve3(m: ArrayLike, v: ArrayLike) -> Float[Array, "*batch 3"]:
    """Solve the 3x3 system `m x = v` in closed form (see `inv3`)."""
    return mv3(inv3(m), v)
