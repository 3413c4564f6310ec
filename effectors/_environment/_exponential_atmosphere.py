r"""Exponential atmosphere density model (Basilisk `exponentialAtmosphere`)."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.kinematics import dot3
from jaxsim.validation import as_array, check_nonnegative, check_positive, fail

from ..astro._bodies import Body


class ExponentialAtmosphere(eqx.Module):
    r"""$\rho(h) = \rho_0\,e^{-h/H}$ with altitude $h = \|\mathbf r\| - R_P$.

    **Arguments:**

    - `rho0`: base density $\rho_0$ [kg/m^3], >= 0 (Earth 1.217, Mars 0.020 in Basilisk's tests).
    - `scale_height`: $H$ [m], > 0 (Earth 8500).
    - `planet_radius`: $R_P$ [m], >= 0 (Earth 6371e3).
    - `min_altitude`, `max_altitude`: optional altitude window [m] outside which $\rho = 0$ (Basilisk
      `envMinReach`/`envMaxReach`); default: no window.

    `ExponentialAtmosphere.from_body(body, rho0, scale_height)` takes $R_P$ from an
    `effectors.astro.Body` (its equatorial radius).

    **Assumptions and limitations:** spherical planet centred at the integration origin (the central
    gravity body of the spacecraft, else the origin of $\mathcal N$); no co-rotation, no time variation.
    Evaluated at every derivative stage (Basilisk evaluates it once per step from the previous state).

    **Reference:** Vallado, *Fundamentals of Astrodynamics and Applications*, 4th ed., §8.6.2;
    Basilisk `exponentialAtmosphere.cpp`.
    """

    rho0: Float[Array, ""]
    scale_height: Float[Array, ""]
    planet_radius: Float[Array, ""]
    min_altitude: Float[Array, ""] | None
    max_altitude: Float[Array, ""] | None

    def __init__(
        self,
        rho0: Float[ArrayLike, ""],
        scale_height: Float[ArrayLike, ""],
        planet_radius: Float[ArrayLike, ""],
        *,
        min_altitude: Float[ArrayLike, ""] | None = None,
        max_altitude: Float[ArrayLike, ""] | None = None,
    ):
        cls = "ExponentialAtmosphere"
        self.rho0 = check_nonnegative(
            cls, "rho0", as_array(cls, "rho0", rho0, "kg/m^3", ()), "kg/m^3"
        )
        self.scale_height = check_positive(
            cls, "scale_height", as_array(cls, "scale_height", scale_height, "m", ()), "m"
        )
        self.planet_radius = check_nonnegative(
            cls, "planet_radius", as_array(cls, "planet_radius", planet_radius, "m", ()), "m"
        )
        self.min_altitude = as_array(cls, "min_altitude", min_altitude, "m", (), required=False)
        self.max_altitude = as_array(cls, "max_altitude", max_altitude, "m", (), required=False)
        if (
            self.min_altitude is not None
            and self.max_altitude is not None
            and float(self.max_altitude) <= float(self.min_altitude)
        ):
            fail(cls, "max_altitude", f"must be > min_altitude = {float(self.min_altitude)}", "m",
                 self.max_altitude)  # fmt: skip

    @classmethod
    def from_body(cls, body, rho0, scale_height, **kwargs):
        """The atmosphere of `body` (an `effectors.astro.Body`): $R_P$ its equatorial radius."""
        if not isinstance(body, Body):
            raise TypeError(
                f"ExponentialAtmosphere.from_body: `body` must be an effectors.astro.Body; got "
                f"{type(body).__name__}."
            )
        return cls(rho0, scale_height, body.radius_equatorial, **kwargs)

    def altitude(self, r_N):
        """Altitude [m] of the position `r_N` [m] (relative to the planet centre)."""
        return jnp.sqrt(dot3(r_N, r_N)) - self.planet_radius

    def density_at(self, t, r_N):
        """Density [kg/m^3] at `r_N` [m] and run time `t` [s] (time-independent here; the form
        `Drag` calls for every atmosphere)."""
        return self.density(r_N)

    def density(self, r_N):
        """Density [kg/m^3] at `r_N` [m] (relative to the planet centre), shape ()."""
        h = self.altitude(r_N)
        rho = self.rho0 * jnp.exp(-h / self.scale_height)
        inside = jnp.asarray(True)
        if self.min_altitude is not None:
            inside = inside & (h >= self.min_altitude)
        if self.max_altitude is not None:
            inside = inside & (h <= self.max_altitude)
        return jnp.where(inside, rho, 0.0)
