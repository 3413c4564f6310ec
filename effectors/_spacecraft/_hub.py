r"""The rigid hub of a spacecraft: mass, inertia about its own CoM, and CoM offset from point B."""

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import ArrayLike, Float

from jaxsim.kinematics import cross3, dot3, mm3, mv3, tilde
from jaxsim.validation import as_array, check_inertia, check_positive, fail, is_concrete

from ._physical import inertia_ok, positive
from ._types import EnergyMomentum, MassProps


class Hub(eqx.Module):
    r"""Rigid hub (Basilisk `hubEffector`).

    **Arguments:**

    - `mass`: hub mass $m_{hub}$ [kg], > 0.
    - `IHubPntBc_B`: inertia about the hub CoM $B_c$, $\mathcal B$ components [kg m^2]; symmetric
      positive definite, principal moments satisfying the triangle inequality
      $I_1 + I_2 \ge I_3$. With balanced or simple-jitter reaction wheels it must already contain the
      wheels' full inertia (Basilisk convention).
    - `r_BcB_B`: hub CoM relative to the body origin $B$ [m] (default 0).

    Mass properties about $B$: $[I_{hub,B}] = [I_{hub,B_c}] + m_{hub}[\tilde r_{B_c/B}][\tilde r_{B_c/B}]^T$.
    """

    ints_are_parameters: ClassVar[bool] = True  # `mass=750` is traced as 750.0
    mass: jnp.ndarray
    IHubPntBc_B: jnp.ndarray
    r_BcB_B: jnp.ndarray

    def __init__(
        self,
        mass: Float[ArrayLike, ""],
        IHubPntBc_B: Float[ArrayLike, "3 3"],
        r_BcB_B: Float[ArrayLike, "3"] | None = None,
    ):
        cls = "Hub"
        self.mass = check_positive(cls, "mass", as_array(cls, "mass", mass, "kg", ()), "kg")
        inertia = as_array(cls, "IHubPntBc_B", IHubPntBc_B, "kg m^2", (3, 3))
        self.IHubPntBc_B = check_inertia(cls, "IHubPntBc_B", inertia)
        if is_concrete(inertia) and not bool(inertia_ok(inertia)):
            fail(
                cls,
                "IHubPntBc_B",
                "must have principal moments satisfying the triangle inequality I1 + I2 >= I3",
                "kg m^2",
                inertia,
            )
        self.r_BcB_B = (
            jnp.zeros(3) if r_BcB_B is None else as_array(cls, "r_BcB_B", r_BcB_B, "m", (3,))
        )

    def physical_checks(self) -> dict:
        """`{quantity: traced bool}`: mass > 0, inertia physical (read by `Spacecraft.validity`)."""
        return {"mass": positive(self.mass), "IHubPntBc_B": inertia_ok(self.IHubPntBc_B)}

    def mass_props(self) -> MassProps:
        r = self.r_BcB_B
        rt = tilde(r)
        inertia_B = self.IHubPntBc_B + self.mass * mm3(rt, rt.T)
        z3, z33 = jnp.zeros(3), jnp.zeros((3, 3))
        return MassProps(self.mass, jnp.zeros(()), self.mass * r, z3, inertia_B, z33)

    def energy_momentum(self, omega_BN_B) -> EnergyMomentum:
        r = self.r_BcB_B
        rdot = cross3(omega_BN_B, r)
        Iw = mv3(self.IHubPntBc_B, omega_BN_B)
        H = Iw + self.mass * cross3(r, rdot)
        E = 0.5 * dot3(omega_BN_B, Iw) + 0.5 * self.mass * dot3(rdot, rdot)
        return EnergyMomentum(H, E)
