r"""Linear spring-mass-damper particles (Basilisk `linearSpringMassDamper`, fuel slosh), N in one effector.

Particle $j$ is a point mass at $\mathbf r_{P_c/B} = \mathbf r_{P/B} + \rho\,\hat{\mathbf p}$ that moves along the
body-fixed unit direction $\hat{\mathbf p}$ about its equilibrium point $P$ (Basilisk `linearSpringMassDamper` module documentation).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.kinematics import cross3, dot3, mm3, tilde
from jaxsim.validation import check_name, check_positive, check_unit_vectors

from .._spacecraft._contract import KinematicsStateEffector
from .._spacecraft._joints import JointContribution, JointRows
from .._spacecraft._physical import nonnegative, positive
from .._spacecraft._types import EnergyMomentum, HubContext, MassProps
from .._spacecraft._unit_params import per_unit, unit_count
from ._joint_drive import DrivenJoints, JointDrive


# `JointDrive` argument names and units of the particles' springs and dampers (no references,
# no force: the last three are not arguments of `SpringMassDampers`).
_DRIVE_NAMES = ("k", "c", "rhoRef", "rhoDotRef", "force")
_DRIVE_UNITS = ("N/m", "N s/m", "m", "m/s", "N")


class SpringMassDampers(DrivenJoints, KinematicsStateEffector):
    r"""$n$ point masses on linear springs and dampers along body-fixed directions (fuel slosh model).

    Each particle obeys (Basilisk `linearSpringMassDamper` documentation; Newton and Kane give the same equation)

    $$\ddot\rho = -\hat{\mathbf p}^T\,{}^{B}\ddot{\mathbf r}_{B/N} + (\hat{\mathbf p}\times\mathbf r_{P_c/B})^T\dot{\boldsymbol\omega} + c_\rho,\quad
    m c_\rho = \hat{\mathbf p}\cdot m\mathbf g_B - k\rho - c\dot\rho - 2m\hat{\mathbf p}\cdot(\boldsymbol\omega\times\mathbf r'_{P_c/B})
    - m\hat{\mathbf p}\cdot\big(\boldsymbol\omega\times(\boldsymbol\omega\times\mathbf r_{P_c/B})\big).$$

    **Arguments** (per-particle values: shape `(n, ...)`, or one value for all particles):

    - `mass`: particle masses [kg], `(n,)`, > 0; fixes the number of particles $n$.
    - `k`: spring constants [N/m], `(n,)`, >= 0. `c`: damping [N s/m], >= 0 (default 0).
    - `pHat_B`: slosh directions, unit vectors in $\mathcal B$ components, `(n, 3)` (not normalised for you).
    - `r_PB_B`: equilibrium points $P$ [m], `(n, 3)`.
    - `rho0`, `rhoDot0`: initial displacement [m] and rate [m/s] along $\hat{\mathbf p}$ (default 0).
    - `name`: key of the state `{"rho": (n,), "rhoDot": (n,)}` and of the outputs.

    **Outputs** (under `name`): `rho`, `rhoDot`, `r_PcB_B` [m], `spring_force` $-k\rho-c\dot\rho$ [N] (on the
    particle along $+\hat{\mathbf p}$), `damper_power` $-c\dot\rho^2$ [W] (power of the dampers on the system).

    **Assumptions and limitations:** point masses (no rotational inertia), constant mass (no fuel-tank
    depletion), no travel limits, particles not interconnected; the spring acts on $\rho$ itself (no
    reference). With $k = c = 0$ a particle slides freely; zero mass is rejected (the equation divides by it).

    **Reference:** C. Allard, M. Diaz Ramos, H. Schaub, "Spacecraft Dynamics Integrating Hinged Solar
    Panels and Lumped-Mass Fuel Slosh Model", AIAA/AAS Astrodynamics Specialist Conference, 2016
    (the Newtonian and Kane derivations of Basilisk's `linearSpringMassDamper` documentation).
    """

    mass: Float[Array, " n"]
    drive: JointDrive
    pHat_B: Float[Array, "n 3"]
    r_PB_B: Float[Array, "n 3"]
    rho0: Float[Array, " n"]
    rhoDot0: Float[Array, " n"]
    num_particles: int = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        mass: Float[ArrayLike, " n"],
        k: Float[ArrayLike, "*n"],
        pHat_B: Float[ArrayLike, "n 3"],
        r_PB_B: Float[ArrayLike, "n 3"],
        *,
        c: Float[ArrayLike, "*n"] = 0.0,
        rho0: Float[ArrayLike, "*n"] = 0.0,
        rhoDot0: Float[ArrayLike, "*n"] = 0.0,
        name: str = "slosh",
    ):
        cls = "SpringMassDampers"
        n = unit_count(cls, "mass", mass)
        self.num_particles = n
        self.mass = check_positive(cls, "mass", per_unit(cls, "mass", mass, "kg", n), "kg")
        # A spring and a damper about rho = 0: no references, no force, no commands.
        self.drive = JointDrive(cls, n, k=k, c=c, ref=None, rate_ref=None, motor=None,
                                names=_DRIVE_NAMES, units=_DRIVE_UNITS, commanded=False)  # fmt: skip
        self.pHat_B = check_unit_vectors(
            cls, "pHat_B", per_unit(cls, "pHat_B", pHat_B, "-", n, (3,))
        )
        self.r_PB_B = per_unit(cls, "r_PB_B", r_PB_B, "m", n, (3,))
        self.rho0 = per_unit(cls, "rho0", rho0, "m", n)
        self.rhoDot0 = per_unit(cls, "rhoDot0", rhoDot0, "m/s", n)
        self.name = check_name(cls, "name", name)

    def physical_checks(self, x=None) -> dict:
        """`{quantity: traced bool}` (read by `Spacecraft.validity`): masses > 0, stiffnesses `k`
        and dampings `c` >= 0."""
        return {"mass": positive(self.mass), "k": nonnegative(self.k), "c": nonnegative(self.c)}

    def init_state(self, rho=None, rhoDot=None) -> dict:
        n = self.num_particles
        cls = f"SpringMassDampers({self.name}).init_state"
        return {
            "rho": self.rho0 if rho is None else per_unit(cls, "rho", rho, "m", n),
            "rhoDot": self.rhoDot0 if rhoDot is None else per_unit(cls, "rhoDot", rhoDot, "m/s", n),
        }

    def _inputs(self, ctx):
        return self.drive.inputs(ctx.t, ctx.args, self.name)

    def _kinematics(self, x):
        r = self.r_PB_B + x["rho"][:, None] * self.pHat_B
        rPrime = x["rhoDot"][:, None] * self.pHat_B
        return r, rPrime

    def mass_props(self, x, ctx=None) -> MassProps:
        r, rPrime = self._kinematics(x)
        m = self.mass
        rt, rpt = tilde(r), tilde(rPrime)
        m3 = m[:, None, None]
        return MassProps(
            mass=jnp.sum(m),
            mass_dot=jnp.zeros(()),
            first_moment=jnp.sum(m[:, None] * r, axis=0),
            first_moment_prime=jnp.sum(m[:, None] * rPrime, axis=0),
            inertia_B=jnp.sum(-m3 * mm3(rt, rt), axis=0),
            inertia_prime_B=jnp.sum(-m3 * (mm3(rpt, rt) + mm3(rt, rpt)), axis=0),
        )

    def _coefficients(self, x, ctx: HubContext):
        r, rPrime = self._kinematics(x)
        p, m = self.pHat_B, self.mass
        omega = jnp.broadcast_to(ctx.omega_BN_B, r.shape)
        a = -p
        b = cross3(p, r)
        c_rho = (
            dot3(p, ctx.g_B)
            + self.drive.force(x["rho"], x["rhoDot"], self._inputs(ctx)) / m
            - 2.0 * dot3(p, cross3(omega, rPrime))
            - dot3(p, cross3(omega, cross3(omega, r)))
        )
        return r, rPrime, a, b, c_rho

    def contribute(self, x, ctx: HubContext) -> JointContribution:
        r"""The masses' joint rows from one evaluation of the coefficients, with columns
        $\mathbf p = m\hat{\mathbf p}$ and $\mathbf q = -m\,\mathbf r_{P_c/B}\times\hat{\mathbf p}$."""
        r, rPrime, a, b, c_rho = self._coefficients(x, ctx)
        m1 = self.mass[:, None]
        omega = jnp.broadcast_to(ctx.omega_BN_B, r.shape)
        rows = JointRows(
            p=m1 * self.pHat_B,
            q=-m1 * b,
            a=a,
            b=b,
            c=c_rho,
            v_trans=jnp.zeros(3),
            v_rot=-jnp.sum(m1 * cross3(omega, cross3(r, rPrime)), axis=0),
        )
        rhoDot = x["rhoDot"]
        return JointContribution(rows, lambda rhoDDot: {"rho": rhoDot, "rhoDot": rhoDDot})

    def _energy_momentum(self, x, ctx: HubContext, kin) -> EnergyMomentum:
        r, rPrime = kin
        m = self.mass
        rDot = rPrime + cross3(jnp.broadcast_to(ctx.omega_BN_B, r.shape), r)
        H = jnp.sum(m[:, None] * cross3(r, rDot), axis=0)
        E = jnp.sum(
            0.5 * m * dot3(rDot, rDot) + self.drive.spring_energy(x["rho"], self._inputs(ctx))
        )
        return EnergyMomentum(H, E)

    # Units of the states, outputs and commands by name (`units()`).
    ELEMENT_DIM = "mass"  # one entry per unit in result datasets
    UNITS = {
        "rho": "m",
        "rhoDot": "m/s",
        "r_PcB_B": "m",
        "spring_force": "N",
        "damper_power": "W",
    }

    def _outputs(self, x, ctx: HubContext, kin) -> dict:
        r, _ = kin
        rho, rhoDot = x["rho"], x["rhoDot"]
        return {
            "rho": rho,
            "rhoDot": rhoDot,
            "r_PcB_B": r,
            "spring_force": self.drive.force(rho, rhoDot, self._inputs(ctx)),
            "damper_power": -self.drive.damper(rhoDot, self._inputs(ctx)) * rhoDot,
        }
