r"""Shadow geometry shared by solar radiation pressure and eclipses: the cylindrical shadow margin
and the conical (umbra/penumbra) visible fraction of the solar disc, and the solar and Earth radii
they default to."""

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.signals import AbstractSignal
from jaxsim.validation import as_array


# Nominal solar radius [m] (IAU 2015 Resolution B3), for the conical shadow.
R_SUN = 6.957e8
# Earth equatorial radius [m] (the default occulting body).
R_EARTH = 6378136.6


def _norm(v):
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def cylindrical_shadow_margin(r_N, r_sun_N, r_occ_N, R_occ):
    r"""Signed distance [m] to the cylindrical shadow of a sphere: $> 0$ lit, $\le 0$ in shadow.

    With $\hat{\mathbf d}$ the unit vector from the occulter to the sun and $\mathbf p = \mathbf r -
    \mathbf r_{occ}$: on the night side ($\mathbf p\cdot\hat{\mathbf d} < 0$) the margin is
    $\|\mathbf p_\perp\| - R$ ($\mathbf p_\perp$ the part of $\mathbf p$ normal to
    $\hat{\mathbf d}$), on the day side it is $\|\mathbf p\| - R$ (the altitude, positive outside
    the body). Both agree on the terminator plane, so the margin is continuous; outside the body
    it changes sign only on the shadow cylinder, so it is a zero-crossing condition for eclipse
    entry (falling) and exit (rising); shape `(...)` for positions `(..., 3)`.
    """
    d = r_sun_N - r_occ_N
    d_hat = d / _norm(d)[..., None]
    p = r_N - r_occ_N
    along = jnp.sum(p * d_hat, axis=-1)
    perp = _norm(p - along[..., None] * d_hat)
    return jnp.where(along < 0, perp, _norm(p)) - R_occ


def _safe_acos(x):
    return jnp.arccos(jnp.clip(x, -1.0, 1.0))


def conical_illumination(
    r_N: Float[ArrayLike, "*batch 3"],
    r_sun_N: Float[ArrayLike, "*batch 3"],
    r_occ_N: Float[ArrayLike, "*batch 3"],
    R_occ: Float[ArrayLike, ""],
    R_sun: Float[ArrayLike, ""] = R_SUN,
) -> Float[Array, "*batch"]:
    r"""Visible fraction $\nu\in[0,1]$ of the solar disc seen from `r_N` past a spherical occulter.

    Apparent radii $a = \arcsin(R_\odot/\|\mathbf s\|)$, $b = \arcsin(R/\|\mathbf p\|)$ and
    separation $c$ of the sun and occulter centres seen from the spacecraft ($\mathbf s$ to the
    sun, $\mathbf p$ to the occulter). No overlap for $c \ge a + b$ ($\nu = 1$); umbra for
    $c \le b - a$ ($\nu = 0$); annular for $c \le a - b$ ($\nu = 1 - b^2/a^2$); otherwise the
    overlap of the two (flat) discs
    $A = a^2\arccos(x/a) + b^2\arccos((c - x)/b) - c\,y$, $x = (c^2 + a^2 - b^2)/(2c)$,
    $y = \sqrt{a^2 - x^2}$, and $\nu = 1 - A/(\pi a^2)$. Continuous in the position.

    **Assumptions and limitations:** flat apparent discs (small-angle overlap geometry, as in the
    reference); $\nu$ carries ~1e-10 absolute round-off in the penumbra (the lens-area formula
    cancels terms of size $b^2$ down to $a^2$); gradients are finite everywhere, including on the
    sun-occulter axis ($c$ from `atan2`), and zero in full sun and in the umbra.

    **Reference:** Montenbruck & Gill, *Satellite Orbits* (2000), sec. 3.4.2, eqs. 3.85-3.87.
    """
    s = r_sun_N - r_N
    p = r_occ_N - r_N
    ns, np_ = _norm(s), _norm(p)
    a = jnp.arcsin(jnp.clip(R_sun / ns, 0.0, 1.0))
    b = jnp.arcsin(jnp.clip(R_occ / np_, 0.0, 1.0))
    # Separation by atan2 (finite gradients on the sun-occulter axis, where arccos' is infinite).
    cr2 = jnp.sum(jnp.cross(s, p) ** 2, axis=-1)
    off_axis = cr2 > 0
    sin_c = jnp.where(off_axis, jnp.sqrt(jnp.where(off_axis, cr2, 1.0)), 0.0)
    c = jnp.arctan2(sin_c, jnp.sum(s * p, axis=-1))
    partial = (c < a + b) & (c > jnp.abs(a - b))
    c_s = jnp.where(partial, c, 0.5 * (a + b + jnp.abs(a - b)))  # gradient-safe stand-in
    x = (c_s**2 + a**2 - b**2) / (2.0 * c_s)
    y = jnp.sqrt(jnp.maximum(a**2 - x**2, 0.0))
    area = a**2 * _safe_acos(x / a) + b**2 * _safe_acos((c_s - x) / b) - c_s * y
    nu_partial = 1.0 - area / (jnp.pi * a**2)
    nu_annular = 1.0 - b**2 / a**2
    nu = jnp.where(
        c >= a + b, 1.0, jnp.where(partial, nu_partial, jnp.where(b >= a, 0.0, nu_annular))
    )
    return jnp.clip(nu, 0.0, 1.0)


def _position(cls, arg, value):
    if isinstance(value, AbstractSignal) or callable(value):
        return value
    return as_array(cls, arg, value, "m", (3,))
