r"""Distributions of one Monte Carlo parameter, each sampled from a `jax.random` key: `Normal`,
`Uniform`, `Relative` (`percent`), `PrincipalInertia`, `AttitudeMRP`, `UnitVector`.

A draw is written without reductions and `dot`s (whose rounding XLA may vary with the batch size),
so a member's draw is bitwise the same at every batch (chunk) size.

**Reference:** the dispersion types follow Basilisk's Monte Carlo module
(`utilities/MonteCarlo/Dispersions.py`: normal, uniform, inertia-tensor and MRP dispersions),
re-designed for `jax.random` and `vmap`.
"""

import abc

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._model._kinematics import prv_to_dcm
from .._model._validation import (
    as_array,
    check_inertia,
    check_nonnegative,
    check_unit_vectors,
    fail,
)


__all__ = [
    "AbstractDistribution",
    "AttitudeMRP",
    "Normal",
    "PrincipalInertia",
    "Relative",
    "Uniform",
    "UnitVector",
    "percent",
]


class AbstractDistribution(eqx.Module):
    """A distribution of one parameter (an array of fixed shape), sampled from a `jax.random` key.

    Subclasses implement `sample(key)`, which draws one member's value, and `shape`.
    """

    @abc.abstractmethod
    def sample(self, key) -> Array:
        """One draw, of shape `self.shape`."""

    @property
    @abc.abstractmethod
    def shape(self) -> tuple[int, ...]:
        """Shape of one draw."""


def _broadcast(cls, names, arrays, unit):
    try:
        shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    except ValueError:
        got = ", ".join(f"`{n}` {np.shape(a)}" for n, a in zip(names, arrays))
        raise ValueError(
            f"{cls}: `{names[0]}` and `{names[1]}` must have broadcastable shapes [{unit}]; got {got}."
        ) from None
    return shape, [jnp.broadcast_to(a, shape) for a in arrays]


class Normal(AbstractDistribution):
    r"""Normal (Gaussian) dispersion $x \sim \mathcal N(\mu, \sigma^2)$, elementwise, optionally
    truncated to $[\text{low}, \text{high}]$ (Basilisk's `NormalDispersion` with bounds).

    **Arguments:**

    - `mean`: $\mu$, any shape.
    - `std`: $\sigma \ge 0$, broadcastable with `mean` (the draw has the broadcast shape).
    - `low`, `high`: optional truncation bounds (then `std > 0` and `low < high`), broadcastable.
    - `unit`: unit of the parameter, for error messages and documentation only.

    !!! example

        ```python
        mc.Normal(jnp.array([1e-3, -2e-3, 1.5e-3]), 5e-4, unit="rad/s")
        mc.Normal(750.0, 20.0, low=700.0, unit="kg")         # truncated below
        ```
    """

    mean: Float[Array, "..."]
    std: Float[Array, "..."]
    low: Float[Array, "..."] | None
    high: Float[Array, "..."] | None
    unit: str = eqx.field(static=True)

    def __init__(
        self,
        mean: ArrayLike,
        std: ArrayLike,
        *,
        low: ArrayLike | None = None,
        high: ArrayLike | None = None,
        unit: str = "",
    ):
        cls = "Normal"
        mean = as_array(cls, "mean", mean, unit)
        std = check_nonnegative(cls, "std", as_array(cls, "std", std, unit), unit)
        arrays = [mean, std]
        names = ["mean", "std"]
        for name, bound in (("low", low), ("high", high)):
            if bound is not None:
                arrays.append(as_array(cls, name, bound, unit))
                names.append(name)
        _, arrays = _broadcast(cls, names, arrays, unit)
        self.mean, self.std = arrays[0], arrays[1]
        bounds = dict(zip(names[2:], arrays[2:]))
        self.low, self.high = bounds.get("low"), bounds.get("high")
        if bounds:
            if np.any(np.asarray(self.std) <= 0):
                fail(
                    cls, "std", "must be > 0 when `low`/`high` truncate the distribution", unit, std
                )
        if self.low is not None and self.high is not None:
            if np.any(np.asarray(self.low) >= np.asarray(self.high)):
                fail(cls, "high", f"must be > `low` = {np.asarray(self.low)}", unit, self.high)
        self.unit = unit

    @property
    def shape(self):
        return tuple(self.mean.shape)

    def sample(self, key):
        if self.low is None and self.high is None:
            return self.mean + self.std * jr.normal(key, self.shape)
        lower = -jnp.inf if self.low is None else (self.low - self.mean) / self.std
        upper = jnp.inf if self.high is None else (self.high - self.mean) / self.std
        return self.mean + self.std * jr.truncated_normal(key, lower, upper, self.shape)


class Uniform(AbstractDistribution):
    r"""Uniform dispersion $x \sim \mathcal U[\text{low}, \text{high})$, elementwise (Basilisk's
    `UniformDispersion`).

    **Arguments:**

    - `low`, `high`: bounds, broadcastable, `low <= high` (equal bounds give a constant).
    - `unit`: unit of the parameter, for error messages and documentation only.

    !!! example

        ```python
        mc.Uniform(-0.01, 0.01, unit="m")                    # a CoM offset component
        ```
    """

    low: Float[Array, "..."]
    high: Float[Array, "..."]
    unit: str = eqx.field(static=True)

    def __init__(self, low: ArrayLike, high: ArrayLike, *, unit: str = ""):
        cls = "Uniform"
        low = as_array(cls, "low", low, unit)
        high = as_array(cls, "high", high, unit)
        _, (low, high) = _broadcast(cls, ["low", "high"], [low, high], unit)
        if np.any(np.asarray(high) < np.asarray(low)):
            fail(cls, "high", f"must be >= `low` = {np.asarray(low)}", unit, high)
        self.low, self.high, self.unit = low, high, unit

    @property
    def shape(self):
        return tuple(self.low.shape)

    def sample(self, key):
        return self.low + (self.high - self.low) * jr.uniform(key, self.shape)


class Relative(AbstractDistribution):
    r"""Relative dispersion about a nominal value: $x = x_0\,(1 + s\,z)$ with
    $z \sim \mathcal N(0, 1)$ (`kind="normal"`, $s$ the relative 1-sigma) or
    $z \sim \mathcal U[-1, 1)$ (`kind="uniform"`, $s$ the relative half-width).

    **Arguments:**

    - `nominal`: $x_0$, any shape.
    - `scale`: $s \ge 0$ (a fraction: 0.05 for 5 %), broadcastable with `nominal`.
    - `kind`: `"normal"` or `"uniform"`.
    - `unit`: unit of the parameter, for error messages and documentation only.

    See also `percent(nominal, 5.0)` (the same with `scale` in percent).

    !!! example

        ```python
        mc.Relative(750.0, 0.05, unit="kg")                  # 5 % (1 sigma)
        mc.Relative(jnp.array([0.2, 0.3]), 0.1, kind="uniform")
        ```
    """

    nominal: Float[Array, "..."]
    scale: Float[Array, "..."]
    kind: str = eqx.field(static=True)
    unit: str = eqx.field(static=True)

    def __init__(
        self, nominal: ArrayLike, scale: ArrayLike, *, kind: str = "normal", unit: str = ""
    ):
        cls = "Relative"
        if kind not in ("normal", "uniform"):
            raise ValueError(f"{cls}: `kind` must be 'normal' or 'uniform'; got {kind!r}.")
        nominal = as_array(cls, "nominal", nominal, unit)
        scale = check_nonnegative(cls, "scale", as_array(cls, "scale", scale, "-"), "-")
        _, (self.nominal, self.scale) = _broadcast(
            cls, ["nominal", "scale"], [nominal, scale], unit
        )
        self.kind, self.unit = kind, unit

    @property
    def shape(self):
        return tuple(self.nominal.shape)

    def sample(self, key):
        if self.kind == "normal":
            z = jr.normal(key, self.shape)
        else:
            z = jr.uniform(key, self.shape, minval=-1.0, maxval=1.0)
        return self.nominal * (1.0 + self.scale * z)


def percent(
    nominal: ArrayLike, pct: ArrayLike, *, kind: str = "normal", unit: str = ""
) -> Relative:
    """`Relative(nominal, pct / 100, kind=kind)`: a dispersion given in percent of the nominal.

    !!! example

        ```python
        mc.percent(750.0, 5.0, unit="kg")                    # 750 kg +- 5 % (1 sigma)
        ```
    """
    pct = check_nonnegative("percent", "pct", as_array("percent", "pct", pct, "%"), "%")
    return Relative(nominal, pct / 100.0, kind=kind, unit=unit)


def _mm(a, b):
    """3x3 matrix product written out as three products and two additions. A `dot` or a `sum`
    reduction is vectorized by XLA depending on the batch size, which can change its rounding;
    written out, a member's draw is bitwise the same at every batch (chunk) size."""
    terms = [a[..., :, k, None] * b[..., None, k, :] for k in range(3)]
    return terms[0] + terms[1] + terms[2]


def _triangle_ok(p):
    """All moments positive and each smaller than the sum of the other two."""
    p0, p1, p2 = p[..., 0], p[..., 1], p[..., 2]
    positive = (p0 > 0) & (p1 > 0) & (p2 > 0)
    return positive & (p0 + p1 > p2) & (p1 + p2 > p0) & (p2 + p0 > p1)


class PrincipalInertia(AbstractDistribution):
    r"""Dispersed inertia tensor: principal moments scaled and principal axes rotated.

    With the nominal tensor $[I_0] = [V]\,\mathrm{diag}(p)\,[V]^T$ (principal moments $p$ in
    ascending order, axes the columns of $[V]$), a draw is

    $$[I] = [R]\,[V]\,\mathrm{diag}(p \odot (1 + s \odot z))\,[V]^T [R]^T,\quad
    z \sim \mathcal N(0, I_3),\quad [R] = [R(\boldsymbol\theta)],\
    \boldsymbol\theta \sim \mathcal N(0, \sigma_\theta^2 I_3),$$

    with $[R(\boldsymbol\theta)]$ the DCM of the principal rotation vector $\boldsymbol\theta$.
    Draws whose moments are not all positive or violate the triangle inequality
    $p_i + p_j > p_k$ (every rigid body satisfies it) are rejected: `max_tries` candidates $z$
    are drawn and the first physical one is kept, so every tensor is symmetric positive definite
    and physical.

    **Arguments:**

    - `inertia`: nominal tensor $[I_0]$ [kg m^2], shape `(3, 3)`, symmetric positive definite,
      strictly satisfying the triangle inequality.
    - `rel_std`: $s$, relative 1-sigma of the principal moments (fraction), scalar or shape `(3,)`
      (in ascending order of the nominal moments), in `[0, 1)`.
    - `angle_std`: $\sigma_\theta$ [rad], 1-sigma of each component of the axes' rotation vector.
    - `max_tries`: candidate draws per member; if none is physical the member's tensor is NaN,
      and its simulation is reported as failed rather than run with a non-physical body.

    **Assumptions and limitations:** the nominal principal frame is computed once with
    `numpy.linalg.eigh`; for (nearly) repeated moments the axes are arbitrary within the degenerate
    plane, which is harmless since the tensor is then invariant under rotations in it.

    !!! example

        ```python
        mc.PrincipalInertia(I_nominal, 0.03, angle_std=np.deg2rad(1.0))
        ```
    """

    moments: Float[Array, " 3"]
    axes: Float[Array, "3 3"]
    rel_std: Float[Array, " 3"]
    angle_std: Float[Array, ""]
    max_tries: int = eqx.field(static=True)

    def __init__(
        self,
        inertia: Float[ArrayLike, "3 3"],
        rel_std: Float[ArrayLike, "*d"],
        *,
        angle_std: Float[ArrayLike, ""] = 0.0,
        max_tries: int = 16,
    ):
        cls = "PrincipalInertia"
        inertia = check_inertia(cls, "inertia", as_array(cls, "inertia", inertia, "kg m^2", (3, 3)))
        moments, axes = np.linalg.eigh(np.asarray(inertia))
        if not moments[0] + moments[1] > moments[2]:
            fail(
                cls,
                "inertia",
                f"must satisfy the triangle inequality I1 + I2 > I3 strictly (principal moments "
                f"{np.array2string(moments, precision=6)})",
                "kg m^2",
                inertia,
            )
        rel_std = np.broadcast_to(np.asarray(as_array(cls, "rel_std", rel_std, "-")), (3,))
        if np.any(rel_std < 0) or np.any(rel_std >= 1):
            fail(cls, "rel_std", "must lie in [0, 1)", "-", rel_std)
        angle_std = as_array(cls, "angle_std", angle_std, "rad", ())
        check_nonnegative(cls, "angle_std", angle_std, "rad")
        if not isinstance(max_tries, int) or max_tries < 1:
            raise ValueError(f"{cls}: `max_tries` must be an integer >= 1; got {max_tries!r}.")
        self.moments = jnp.asarray(moments)
        self.axes = jnp.asarray(axes)
        self.rel_std = jnp.asarray(rel_std)
        self.angle_std = angle_std
        self.max_tries = max_tries

    @property
    def shape(self):
        return (3, 3)

    @property
    def unit(self) -> str:
        """The unit of the draws (recorded with the results; their axes are `row`/`column`)."""
        return "kg m^2"

    def sample(self, key):
        # One normal draw: the axes' rotation vector, then all `max_tries` candidates at once (a
        # straight-line program, no loop); the first physical candidate is kept.
        z = jr.normal(key, (1 + self.max_tries, 3))
        candidates = self.moments * (1.0 + self.rel_std * z[1:])
        valid = _triangle_ok(candidates)
        p = candidates[jnp.argmax(valid)]
        p = jnp.where(jnp.any(valid), p, jnp.nan)
        dcm = prv_to_dcm(self.angle_std * z[0])
        axes = _mm(dcm, self.axes)
        inertia = _mm(axes * p, axes.T)
        return 0.5 * (inertia + inertia.T)


class AttitudeMRP(AbstractDistribution):
    r"""Dispersed attitude: the nominal frame rotated by a small random rotation.

    $[B'N] = [R(\boldsymbol\theta)]\,[BN(\boldsymbol\sigma_0)]$ with
    $\boldsymbol\theta \sim \mathcal N(0, \mathrm{diag}(\sigma_\theta^2))$ a principal rotation
    vector in $\mathcal B$ components; the draw is the MRP set of $[B'N]$ with $|\sigma| \le 1$.

    **Arguments:**

    - `sigma_BN`: nominal MRPs $\boldsymbol\sigma_0$ [-], shape `(3,)`.
    - `angle_std`: $\sigma_\theta$ [rad], scalar or shape `(3,)`, >= 0.

    !!! example

        ```python
        mc.AttitudeMRP(jnp.array([0.1, 0.2, -0.1]), np.deg2rad(2.0))
        ```
    """

    sigma_BN: Float[Array, " 3"]
    angle_std: Float[Array, " 3"]
    beta_BN: Float[Array, " 4"]

    def __init__(self, sigma_BN: Float[ArrayLike, "3"], angle_std: Float[ArrayLike, "*d"]):
        cls = "AttitudeMRP"
        self.sigma_BN = as_array(cls, "sigma_BN", sigma_BN, "-", (3,))
        angle_std = check_nonnegative(
            cls, "angle_std", as_array(cls, "angle_std", angle_std, "rad"), "rad"
        )
        if angle_std.shape not in ((), (3,)):
            raise ValueError(
                f"AttitudeMRP: `angle_std` must be a scalar or have shape (3,) [rad]; got shape "
                f"{angle_std.shape}."
            )
        self.angle_std = jnp.broadcast_to(angle_std, (3,))
        s = np.asarray(self.sigma_BN)
        s2 = float(s @ s)
        self.beta_BN = jnp.asarray(np.concatenate([[1.0 - s2], 2.0 * s]) / (1.0 + s2))

    @property
    def shape(self):
        return (3,)

    def sample(self, key):
        # Euler parameters of [R(theta)] and the product [B'N] = [R][BN], written out (no
        # reductions: bitwise the same draw at every batch size).
        t = self.angle_std * jr.normal(key, (3,))
        phi2 = t[0] ** 2 + t[1] ** 2 + t[2] ** 2
        small = phi2 < 1e-8
        phi = jnp.sqrt(jnp.where(small, 1.0, phi2))
        half_sinc = jnp.where(small, 0.5 - phi2 / 48.0, jnp.sin(0.5 * phi) / phi)
        r0 = jnp.where(small, 1.0 - phi2 / 8.0, jnp.cos(0.5 * phi))
        r1, r2, r3 = half_sinc * t[0], half_sinc * t[1], half_sinc * t[2]
        b0, b1, b2, b3 = (self.beta_BN[i] for i in range(4))
        q = jnp.stack(
            [
                r0 * b0 - r1 * b1 - r2 * b2 - r3 * b3,
                r1 * b0 + r0 * b1 + r3 * b2 - r2 * b3,
                r2 * b0 - r3 * b1 + r0 * b2 + r1 * b3,
                r3 * b0 + r2 * b1 - r1 * b2 + r0 * b3,
            ]
        )
        q = jnp.where(q[0] < 0, -q, q)  # the short rotation: |sigma| <= 1
        return q[1:] / (1.0 + q[0])


class UnitVector(AbstractDistribution):
    r"""Dispersed unit vector(s) (e.g. thruster or wheel axes): each nominal vector $\hat g$ is
    rotated by a principal rotation vector $\boldsymbol\theta \sim \mathcal N(0, \sigma_\theta^2 I_3)$,
    so the pointing error is Rayleigh distributed with scale $\sigma_\theta$ (the component of
    $\boldsymbol\theta$ along $\hat g$ does not move it). The result is renormalized.

    **Arguments:**

    - `nominal`: unit vector(s) [-], shape `(3,)` or `(n, 3)`.
    - `angle_std`: $\sigma_\theta$ [rad], scalar, >= 0.

    !!! example

        ```python
        mc.UnitVector(gsHat_B, np.deg2rad(0.5))              # (4, 3) wheel spin axes
        ```
    """

    nominal: Float[Array, "*n 3"]
    angle_std: Float[Array, ""]

    def __init__(self, nominal: Float[ArrayLike, "*n 3"], angle_std: Float[ArrayLike, ""]):
        cls = "UnitVector"
        nominal = as_array(cls, "nominal", nominal, "-")
        if nominal.ndim not in (1, 2) or nominal.shape[-1] != 3:
            raise ValueError(
                f"{cls}: `nominal` must have shape (3,) or (n, 3) [-]; got shape {nominal.shape}."
            )
        self.nominal = check_unit_vectors(cls, "nominal", nominal)
        self.angle_std = check_nonnegative(
            cls, "angle_std", as_array(cls, "angle_std", angle_std, "rad", ()), "rad"
        )

    @property
    def shape(self):
        return tuple(self.nominal.shape)

    def sample(self, key):
        g = self.nominal.reshape(-1, 3)
        theta = self.angle_std * jr.normal(key, g.shape)
        v = _mm(prv_to_dcm(theta), g[:, :, None])[..., 0]
        v = v / jnp.sqrt(v[:, :1] ** 2 + v[:, 1:2] ** 2 + v[:, 2:] ** 2)
        return v.reshape(self.shape)
