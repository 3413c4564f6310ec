r"""Third-body point-mass gravity relative to an accelerating origin, in a cancellation-free form.

In a frame centred on the integration origin $O$ (the central body, e.g. the Earth), a body $P$ of
gravitational parameter $\mu$ at $\mathbf s = \mathbf r_{P/O}$ perturbs a spacecraft at
$\mathbf x = \mathbf r_{C/O}$ by its attraction minus the attraction it exerts on $O$ (the indirect
term):

$$\mathbf a = -\mu\left(\frac{\mathbf x - \mathbf s}{\|\mathbf x - \mathbf s\|^3} +
\frac{\mathbf s}{\|\mathbf s\|^3}\right).$$

For a distant body ($\|\mathbf x\| \ll \|\mathbf s\|$) the two terms are nearly equal and opposite,
and the difference loses $\log_{10}(\|\mathbf s\|/\|\mathbf x\|)$ digits (4-5 for the Sun seen from
low orbit). Battin's form has no such cancellation: with $\mathbf d = \mathbf x - \mathbf s$ and

$$q = \frac{\mathbf x\cdot(\mathbf x - 2\mathbf s)}{\mathbf s\cdot\mathbf s},\qquad
f(q) = (1+q)^{3/2} - 1 = q\,\frac{3 + 3q + q^2}{1 + (1+q)^{3/2}},$$

$$\mathbf a = -\frac{\mu}{\|\mathbf d\|^3}\left(\mathbf x + f(q)\,\mathbf s\right)$$

($\|\mathbf d\|^2 = \|\mathbf s\|^2(1 + q)$).

**Reference:** Battin, R. H., *An Introduction to the Mathematics and Methods of Astrodynamics*,
revised ed., AIAA, 1999, sec. 8.4 (eqs. 8.60-8.61); Montenbruck & Gill, *Satellite Orbits*, 2000,
sec. 3.2.1.
"""

from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.kinematics import dot3
from jaxsim.signals import AbstractSignal
from jaxsim.validation import as_array, check_name, check_positive

from ..astro._bodies import Body
from ._gravity import AbstractGravityBody, _mu_and_name, _position_arg


def battin_f(q: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""$f(q) = (1+q)^{3/2} - 1$ without cancellation for small $q$:
    $q(3 + 3q + q^2)/(1 + (1+q)^{3/2})$ (Battin 1999, eq. 8.61)."""
    return q * (3.0 + 3.0 * q + q * q) / (1.0 + (1.0 + q) ** 1.5)


def third_body_acceleration(
    mu: Float[ArrayLike, ""], x_N: Float[ArrayLike, "*batch 3"], s_N: Float[ArrayLike, "*batch 3"]
) -> Float[Array, "*batch 3"]:
    r"""Perturbing acceleration [m/s^2] of a point mass `mu` [m^3/s^2] at `s_N` [m] on a point at
    `x_N` [m], both relative to the origin, direct minus indirect term, in Battin's form."""
    ss = dot3(s_N, s_N)
    q = dot3(x_N, x_N - 2.0 * s_N) / ss
    d2 = ss * (1.0 + q)
    return -mu / (d2 * jnp.sqrt(d2)) * (x_N + battin_f(q) * s_N)


class ThirdBodyGravity(AbstractGravityBody):
    r"""A point-mass body perturbing the motion relative to the integration origin (direct and
    indirect terms, Battin's cancellation-free form; see the module documentation).

    Put it in a spacecraft's `gravity` beside the central body: the field acts at the composite
    CoM like every gravity field. The body's position is taken relative to the integration origin
    (the central body, else the origin of $\mathcal N$), so an Earth-centred ephemeris goes with an
    Earth at the origin, flagged central or not; the indirect term is always included.

    **Arguments:**

    - `mu`: gravitational parameter [m^3/s^2] > 0, or an `effectors.astro.Body` (its `mu` and name).
    - `r_PN_N`: body position [m] in $\mathcal N$: a function of the run's time (e.g.
      `DE421Ephemeris.trajectory(body, epoch)`) or a constant `(3,)` array.
    - `name`: unique name (default the `Body`'s name, else `"third_body"`).

    `ThirdBodyGravity.from_ephemeris(body, ephemeris, epoch)` reads the position from an ephemeris
    (`DE421Ephemeris`, `AnalyticSunMoon`) centred on the integration origin.

    **Logged potential:** $U = -\mu/\|\mathbf d\| + \mu\,\mathbf x\cdot\mathbf s/\|\mathbf s\|^3$
    ($\mathbf a = -\nabla_x U$).

    **Assumptions and limitations:** point mass; positions geometric (no light time).

    **Reference:** Battin 1999, sec. 8.4; Montenbruck & Gill 2000, sec. 3.2.1.
    """

    mu: jnp.ndarray
    r_PN_N: object
    central: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)
    includes_indirect = True

    def __init__(
        self,
        mu: Float[ArrayLike, ""] | Body,
        r_PN_N: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike],
        *,
        name: str | None = None,
    ):
        cls = "ThirdBodyGravity"
        mu, name = _mu_and_name(
            cls, mu, "third_body" if name is None and not isinstance(mu, Body) else name
        )
        self.mu = check_positive(cls, "mu", as_array(cls, "mu", mu, "m^3/s^2", ()), "m^3/s^2")
        if r_PN_N is None:
            raise ValueError(
                f"{cls}: `r_PN_N` [m] is required (a function of time or a (3,) array)."
            )
        self.r_PN_N = _position_arg(cls, r_PN_N)
        self.central = False
        self.name = check_name(cls, "name", name)

    @classmethod
    def from_ephemeris(cls, body, ephemeris, epoch, *, name: str | None = None):
        """`body` (a `Body`) at its position in `ephemeris` along a run starting at `epoch` (an
        `Epoch` or TDB seconds past J2000)."""
        if not isinstance(body, Body):
            raise TypeError(
                f"ThirdBodyGravity.from_ephemeris: `body` must be an effectors.astro.Body; got "
                f"{type(body).__name__}."
            )
        return cls(body, ephemeris.trajectory(body, epoch), name=name)

    def field(self, t, x_N):
        """Direct point-mass attraction at `x_N` relative to the body [m/s^2]."""
        r2 = dot3(x_N, x_N)
        return -self.mu * x_N / (r2 * jnp.sqrt(r2))

    def field_relative(self, t, x_N, s_N):
        """`(a, U)`: perturbing acceleration [m/s^2] and logged potential [J/kg] at `x_N` with the
        body at `s_N`, both relative to the integration origin [m]."""
        a = third_body_acceleration(self.mu, x_N, s_N)
        d = x_N - s_N
        ss = dot3(s_N, s_N)
        U = -self.mu / jnp.sqrt(dot3(d, d)) + self.mu * dot3(x_N, s_N) / (ss * jnp.sqrt(ss))
        return a, U
