r"""Cannonball solar radiation pressure with cylindrical or conical shadow (Basilisk `radiationPressure`)."""

from collections.abc import Callable
from typing import TYPE_CHECKING

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.signals import AbstractSignal, evaluate
from jaxsim.validation import as_array, check_name, check_nonnegative, check_positive

from .._environment._shadow import (
    R_EARTH,
    R_SUN,
    _norm,
    _position,
    conical_illumination,
    cylindrical_shadow_margin,
)
from .._spacecraft._contract import AbstractDynamicEffector
from .._spacecraft._types import ForceTorque, HubContext
from ..astro._bodies import Body


if TYPE_CHECKING:
    from .._environment._eclipse import Eclipse


# Basilisk `radiationPressure` constants: solar flux at 1 AU, astronomical unit, speed of light.
SOLAR_FLUX_1AU = 1361.0  # W/m^2
AU = 1.49597870693e11  # m
SPEED_OF_LIGHT = 299792458.0  # m/s
_SHADOWS = ("none", "cylindrical", "conical")


class CannonballSRP(AbstractDynamicEffector):
    r"""Cannonball solar radiation pressure through point $B$:

    $$\mathbf F_N = -\,\nu\,\frac{C_R A\,\Phi_{1AU}\,(1\,\mathrm{AU})^2}{c\,\|\mathbf s\|^3}\,\mathbf s,
    \qquad \mathbf s = \mathbf r_{\odot/N} - \mathbf r_{B/N},\qquad \boldsymbol\tau = 0,$$

    $\Phi_{1AU} = 1361$ W/m^2, AU $= 1.49597870693\times10^{11}$ m, $c = 299792458$ m/s; at 1 AU
    $\|\mathbf F\| = \nu C_R A \Phi_{1AU}/c$, directed away from the sun.

    **Arguments:**

    - `area`: $A$ [m^2] >= 0.
    - `C_R`: reflection coefficient [-] > 0 (default 1.2, Basilisk's).
    - `r_sun_N`: sun position [m] in $\mathcal N$, a `(3,)` constant or a function/signal of time.
    - `shadow`: `"none"` ($\nu = 1$), `"cylindrical"` ($\nu\in\{0,1\}$ from
      `cylindrical_shadow_margin`) or `"conical"` (umbra/penumbra, `conical_illumination`).
    - `R_occ`: occulting-body radius [m] > 0 (default the Earth's, 6378136.6 m), or an
      `effectors.astro.Body` (its equatorial radius).
    - `r_occ_N`: occulting-body position [m] in $\mathcal N$, constant or function of time
      (default the origin).
    - `R_sun`: solar radius [m] > 0 for the conical model (default 6.957e8 m).
    - `eclipse`: an `Eclipse` (several occulting bodies, conical shadows) giving $\nu$ instead of
      `shadow` (which must then stay `"none"`).
    - `name`: unique effector name.

    `CannonballSRP.from_ephemeris(area, ephemeris, epoch, C_R, occulters=(EARTH, MOON))`: the
    sun from an ephemeris (`DE421Ephemeris`, `AnalyticSunMoon`) centred on the integration
    origin, shadowed by the `occulters` (`Eclipse.from_ephemeris`; `occulters=()` for none).

    **Outputs:** `force_N` [N] and `nu` [-].

    **Assumptions and limitations:** the hub position is taken **absolute** (`ctx.r_BN_N +
    ctx.r_origin_N`), so sun and occulter positions are given in the inertial frame's origin, not
    relative to a central body (Basilisk subtracts the hub position state, central-body relative
    when a central body is flagged, from the sun's inertial ephemeris position, which is consistent
    only when the central body sits at the ephemeris origin; in that case the two formulas agree); no attitude
    dependence (no faceted model, no torque); one spherical occulter, no atmosphere refraction; the
    cylindrical model is a step in $\nu$ (not differentiable across the shadow boundary: use the
    conical model or events for gradients); light-time and aberration neglected.

    **Reference:** Basilisk `radiationPressure` module documentation (cannonball model);
    Montenbruck & Gill, *Satellite Orbits* (2000), secs. 3.4.1-3.4.2.
    """

    area: Float[Array, ""]
    C_R: Float[Array, ""]
    r_sun_N: object
    R_occ: Float[Array, ""]
    r_occ_N: object
    R_sun: Float[Array, ""]
    eclipse: object
    shadow: str = eqx.field(static=True)
    name: str = eqx.field(static=True)
    commands = ()  # reads no commands from `args` (checked by `simulate`)

    def __init__(
        self,
        area: Float[ArrayLike, ""],
        r_sun_N: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike],
        C_R: Float[ArrayLike, ""] = 1.2,
        *,
        shadow: str = "none",
        R_occ: Float[ArrayLike, ""] = R_EARTH,
        r_occ_N: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike] | None = None,
        R_sun: Float[ArrayLike, ""] = R_SUN,
        eclipse: "Eclipse | None" = None,
        name: str = "srp",
    ):
        cls = "CannonballSRP"
        if isinstance(R_occ, Body):
            R_occ = R_occ.radius_equatorial
        if eclipse is not None and shadow != "none":
            raise ValueError(
                f"{cls}: give either `shadow` or `eclipse`; got shadow={shadow!r} and an eclipse."
            )
        if eclipse is not None and not hasattr(eclipse, "illumination"):
            raise TypeError(f"{cls}: `eclipse` must be an Eclipse; got {type(eclipse).__name__}.")
        self.eclipse = eclipse
        self.area = check_nonnegative(cls, "area", as_array(cls, "area", area, "m^2", ()), "m^2")
        self.C_R = check_positive(cls, "C_R", as_array(cls, "C_R", C_R, "-", ()), "-")
        self.r_sun_N = _position(cls, "r_sun_N", r_sun_N)
        if shadow not in _SHADOWS:
            raise ValueError(f"{cls}: `shadow` must be one of {_SHADOWS}; got {shadow!r}.")
        self.shadow = shadow
        self.R_occ = check_positive(cls, "R_occ", as_array(cls, "R_occ", R_occ, "m", ()), "m")
        self.r_occ_N = jnp.zeros(3) if r_occ_N is None else _position(cls, "r_occ_N", r_occ_N)
        self.R_sun = check_positive(cls, "R_sun", as_array(cls, "R_sun", R_sun, "m", ()), "m")
        self.name = check_name(cls, "name", name)

    @classmethod
    def from_ephemeris(
        cls, area, ephemeris, epoch, C_R=1.2, *, occulters=None, name="srp", R_sun=R_SUN
    ):
        """Cannonball SRP with the sun of `ephemeris` along a run starting at `epoch` (an `Epoch`
        or TDB seconds past J2000), shadowed by `occulters` (`Body` objects, default Earth and
        Moon; `()` for none)."""
        from .._environment._eclipse import Eclipse

        sun = ephemeris.trajectory("sun", epoch)
        if occulters is not None and len(tuple(occulters)) == 0:
            return cls(area, sun, C_R, name=name, R_sun=R_sun)
        eclipse = Eclipse.from_ephemeris(ephemeris, epoch, occulters, R_sun=R_sun)
        return cls(area, sun, C_R, eclipse=eclipse, name=name, R_sun=R_sun)

    def illumination(self, t, r_N):
        """$\\nu$ [-] at absolute position `r_N` [m] and time `t` [s]."""
        if self.eclipse is not None:
            return self.eclipse.illumination(t, r_N)
        r_sun = evaluate(self.r_sun_N, t)
        r_occ = evaluate(self.r_occ_N, t)
        if self.shadow == "cylindrical":
            margin = cylindrical_shadow_margin(r_N, r_sun, r_occ, self.R_occ)
            return jnp.where(margin > 0, 1.0, 0.0)
        if self.shadow == "conical":
            return conical_illumination(r_N, r_sun, r_occ, self.R_occ, self.R_sun)
        return jnp.ones(jnp.shape(r_N)[:-1])

    def _force(self, ctx: HubContext):
        r_N = ctx.r_BN_N + ctx.r_origin_N
        s = evaluate(self.r_sun_N, ctx.t) - r_N
        ns = _norm(s)
        nu = self.illumination(ctx.t, r_N)
        k = self.C_R * self.area * SOLAR_FLUX_1AU * AU**2 / SPEED_OF_LIGHT
        return -nu * k / ns**3 * s, nu

    def init_commands(self) -> dict:
        """Reads no commands (`{}`)."""
        return {}

    def force_torque(self, ctx: HubContext) -> ForceTorque:
        F_N, _ = self._force(ctx)
        return ForceTorque(F_N, jnp.zeros(3), jnp.zeros(3))

    # Units of the outputs (and commands) by name (`units()`).
    UNITS = {
        "force_N": "N",
        "nu": "-",
    }

    def outputs(self, ctx: HubContext) -> dict:
        F_N, nu = self._force(ctx)
        return {"force_N": F_N, "nu": nu}
