r"""Cannonball atmospheric drag with optional stochastic density and drag-coefficient corrections
(Basilisk `dragDynamicEffector`)."""

from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.kinematics import cross3, dot3, mv3
from jaxsim.validation import as_array, check_name, check_nonnegative, check_positive

from .._spacecraft._contract import AbstractDynamicEffector
from .._spacecraft._types import ForceTorque, HubContext
from ..astro._bodies import Body


# Below this relative speed [m/s] the drag force is zero (Basilisk's threshold).
_MIN_SPEED = 1e-12


def read_state(ctx: HubContext, cls: str, state_name: str):
    """The state of the state effector `state_name`, from `ctx.states`."""
    if ctx.states is None or state_name not in ctx.states:
        have = None if ctx.states is None else sorted(ctx.states)
        raise ValueError(
            f"{cls}: needs the state {state_name!r} in `ctx.states` (a state effector of the same "
            f"Spacecraft); got states {have}."
        )
    return jnp.ravel(ctx.states[state_name])


class Drag(AbstractDynamicEffector):
    r"""Cannonball drag through point $B$, with torque from a centre-of-pressure offset:

    $$\mathbf F_B = -\tfrac12 C_D A\,\rho\,\|\mathbf v_B\|^2\hat{\mathbf v}_B,\qquad
    \mathbf v_B = [BN]\,\mathbf v_{B/N},\qquad \boldsymbol\tau_B = \mathbf r_{cp/B}\times\mathbf F_B,$$

    with, for an atmosphere that rotates with the planet (`planet_omega_N` given), the velocity
    relative to the air $\mathbf v_B = [BN](\mathbf v_{B/N} - \boldsymbol\omega_P\times\mathbf r_{B/N})$,

    zero when $\|\mathbf v_B\| \le 10^{-12}$ m/s. The density is the atmosphere's at the hub position,
    optionally corrected by a noise state $\delta$: $\rho = \max(0, \rho_{atm}(1 + \delta))$; the drag
    coefficient likewise by a noise state $\epsilon$: $C_D^{eff} = \max(0, C_D(1 + \epsilon))$.

    **Arguments:**

    - `atmosphere`: an `ExponentialAtmosphere`, `HarrisPriesterAtmosphere` or
      `NRLMSISE00Atmosphere` (any model with `density_at(t, r_N)`), centred at the integration
      origin.
    - `Cd`: drag coefficient $C_D$ [-], > 0.
    - `area`: projected area $A$ [m^2], >= 0.
    - `r_cp_B`: centre of pressure relative to $B$ [m], $\mathcal B$ components (Basilisk
      `comOffset`, which is effectively measured from $B$; default 0).
    - `density_correction`: name of a state effector of the same spacecraft (e.g. a
      `MeanRevertingNoise` or `GeometricBrownianMotion`) whose state entry `density_correction_index`
      is $\delta$ (Basilisk `densityCorrectionStateName`); default none.
    - `cd_correction`, `cd_correction_index`: the same for a drag-coefficient correction $\epsilon$
      (e.g. an independent `MeanRevertingNoise` state); default none.
    - `planet_omega_N`: the atmosphere's angular velocity $\boldsymbol\omega_P$ [rad/s] in
      $\mathcal N$ components, a `(3,)` vector or an `effectors.astro.Body` (then
      $(0, 0, \omega_\oplus)$ with the body's `rotation_rate`: the rotation axis taken as the $z$ axis
      of $\mathcal N$, within 0.2 deg of the Earth's true pole in 1990-2035); default `None`: an
      atmosphere at rest in $\mathcal N$. Basilisk's `dragDynamicEffector` is at rest by default and
      co-rotates when its `windVelInMsg` is connected to a `ZeroWindModel` (whose
      `setPlanetOmega_N` is this argument).
    - `name`: unique effector name.

    **Coupling design:** a dynamic effector has no state; `Spacecraft.context` passes the whole
    state dict as `ctx.states`, and the drag effector reads `ctx.states[density_correction]`. It
    declares the dependency in `reads_states`, which `Spacecraft` checks at construction.

    **Assumptions and limitations:** without `planet_omega_N` the velocity relative to the air is
    the hub's inertial velocity (no co-rotation: at 400 km and 51.6 deg the co-rotation changes the
    force by up to about 10 %); no winds; constant area and coefficient (no attitude
    dependence); density and velocity read at every derivative stage (Basilisk holds the density
    over a step).

    **Reference:** Vallado, *Fundamentals of Astrodynamics and Applications*, 4th ed., §8.6.2;
    Basilisk `dragDynamicEffector` module documentation (cannonball model); Montenbruck & Gill,
    *Satellite Orbits* (2000), sec. 3.5.
    """

    atmosphere: eqx.Module
    Cd: Float[Array, ""]
    area: Float[Array, ""]
    r_cp_B: Float[Array, "3"]
    density_correction: str | None = eqx.field(static=True)
    density_correction_index: int = eqx.field(static=True)
    cd_correction: str | None = eqx.field(static=True)
    cd_correction_index: int = eqx.field(static=True)
    planet_omega_N: Float[Array, "3"] | None
    name: str = eqx.field(static=True)
    commands = ()  # reads no commands from `args` (checked by `simulate`)

    def __init__(
        self,
        atmosphere: Any,
        Cd: Float[ArrayLike, ""],
        area: Float[ArrayLike, ""],
        r_cp_B: Float[ArrayLike, "3"] | None = None,
        *,
        density_correction: str | None = None,
        density_correction_index: int = 0,
        cd_correction: str | None = None,
        cd_correction_index: int = 0,
        planet_omega_N: Float[ArrayLike, "3"] | Body | None = None,
        name: str = "drag",
    ):
        cls = "Drag"
        if not callable(getattr(atmosphere, "density_at", None)):
            raise ValueError(
                f"{cls}: `atmosphere` must be an ExponentialAtmosphere, HarrisPriesterAtmosphere or "
                f"NRLMSISE00Atmosphere (a model with `density_at(t, r_N)`); got "
                f"{type(atmosphere).__name__}."
            )
        self.atmosphere = atmosphere
        self.Cd = check_positive(cls, "Cd", as_array(cls, "Cd", Cd, "-", ()), "-")
        self.area = check_nonnegative(cls, "area", as_array(cls, "area", area, "m^2", ()), "m^2")
        self.r_cp_B = jnp.zeros(3) if r_cp_B is None else as_array(cls, "r_cp_B", r_cp_B, "m", (3,))
        for arg, state, index in [
            ("density_correction", density_correction, density_correction_index),
            ("cd_correction", cd_correction, cd_correction_index),
        ]:
            if state is not None:
                check_name(cls, arg, state)
            if not isinstance(index, int) or index < 0:
                raise ValueError(f"{cls}: `{arg}_index` must be an integer >= 0; got {index!r}.")
        self.density_correction = density_correction
        self.density_correction_index = density_correction_index
        self.cd_correction = cd_correction
        self.cd_correction_index = cd_correction_index
        if isinstance(planet_omega_N, Body):
            planet_omega_N = [0.0, 0.0, planet_omega_N.rotation_rate]
        self.planet_omega_N = as_array(
            cls, "planet_omega_N", planet_omega_N, "rad/s", (3,), required=False
        )
        self.name = check_name(cls, "name", name)

    @property
    def reads_states(self) -> tuple[str, ...]:
        names = (self.density_correction, self.cd_correction)
        return tuple(dict.fromkeys(n for n in names if n is not None))

    def density(self, ctx: HubContext):
        """Corrected density [kg/m^3] at the hub position."""
        rho = self.atmosphere.density_at(ctx.t, ctx.r_BN_N)
        if self.density_correction is not None:
            delta = read_state(ctx, "Drag", self.density_correction)[self.density_correction_index]
            rho = jnp.maximum(0.0, rho * (1.0 + delta))
        return rho

    def drag_coefficient(self, ctx: HubContext):
        """Corrected drag coefficient [-]."""
        if self.cd_correction is None:
            return self.Cd
        eps = read_state(ctx, "Drag", self.cd_correction)[self.cd_correction_index]
        return jnp.maximum(0.0, self.Cd * (1.0 + eps))

    def init_commands(self) -> dict:
        """Reads no commands (`{}`)."""
        return {}

    def velocity_N(self, ctx: HubContext):
        r"""Velocity of the hub relative to the air [m/s], $\mathcal N$ components."""
        if self.planet_omega_N is None:
            return ctx.v_BN_N
        return ctx.v_BN_N - cross3(self.planet_omega_N, ctx.r_BN_N)

    def force_torque(self, ctx: HubContext) -> ForceTorque:
        return self._force_torque(ctx, self.density(ctx))

    def _force_torque(self, ctx: HubContext, rho) -> ForceTorque:
        v_B = mv3(ctx.dcm_BN, self.velocity_N(ctx))
        v2 = dot3(v_B, v_B)
        moving = v2 > _MIN_SPEED**2
        speed = jnp.sqrt(jnp.where(moving, v2, 1.0))  # gradient-safe at v = 0
        F_B = (
            jnp.where(
                moving,
                -0.5 * self.drag_coefficient(ctx) * self.area * rho * speed,
                0.0,
            )
            * v_B
        )
        return ForceTorque(jnp.zeros(3), F_B, cross3(self.r_cp_B, F_B))

    # Units of the outputs (and commands) by name (`units()`).
    UNITS = {
        "density": "kg/m^3",
        "Cd": "-",
        "force_B": "N",
        "torque_B": "N m",
    }

    def outputs(self, ctx: HubContext) -> dict:
        rho = self.density(ctx)  # once: an atmosphere model may be costly to compile
        ft = self._force_torque(ctx, rho)
        return {
            "density": rho,
            "Cd": self.drag_coefficient(ctx),
            "force_B": ft.force_B,
            "torque_B": ft.torque_B,
        }
