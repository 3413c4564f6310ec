r"""Gravity-gradient torque (Basilisk `GravityGradientEffector`)."""

from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp

from jaxsim.kinematics import cross3, dot3, mv3
from jaxsim.validation import check_name

from .._spacecraft._contract import AbstractDynamicEffector
from .._spacecraft._types import ForceTorque, HubContext
from ._gravity import AbstractGravityBody


class GravityGradient(AbstractDynamicEffector):
    r"""Torque $\boldsymbol\tau_B = \sum_P \frac{3\mu_P}{R_P^3}\,\hat{\mathbf r}_B\times[I_C]\hat{\mathbf r}_B$.

    $\mathbf R_P = \mathbf r_{C/P}$ is the composite CoM relative to the body $P$ (absolute positions,
    so a central body that is not at the origin is handled consistently; Basilisk uses the hub state
    and the ephemeris position, which agree only when the central body is at the origin),
    $\hat{\mathbf r}_B = [BN]\mathbf R_P/R_P$ and $[I_C]$ the current composite inertia about $C$.
    No force.

    **Arguments:**

    - `bodies`: the gravity bodies whose gradient acts (e.g. the spacecraft's `PointMassGravity`).
    - `name`: unique effector name.

    **Reference:** Schaub & Junkins, *Analytical Mechanics of Space Systems*, §4.6.
    """

    bodies: tuple
    name: str = eqx.field(static=True)
    commands = ()  # reads no commands from `args` (checked by `simulate`)

    def __init__(
        self,
        bodies: AbstractGravityBody | Sequence[AbstractGravityBody],
        *,
        name: str = "gravity_gradient",
    ):
        if isinstance(bodies, AbstractGravityBody):
            bodies = (bodies,)
        bodies = tuple(bodies)
        if not bodies or not all(isinstance(b, AbstractGravityBody) for b in bodies):
            raise ValueError(
                "GravityGradient: `bodies` must be one or more gravity bodies "
                f"(PointMassGravity/SphericalHarmonicGravity); got {bodies!r}."
            )
        self.bodies = bodies
        self.name = check_name("GravityGradient", "name", name)

    def init_commands(self) -> dict:
        """Reads no commands (`{}`)."""
        return {}

    def force_torque(self, ctx: HubContext) -> ForceTorque:
        IC = ctx.IC_B
        tau = jnp.zeros(3)
        for b in self.bodies:
            R_N = ctx.r_CN_N + ctx.r_origin_N - b.position(ctx.t)
            # (3 mu / R^5) R_B x [I_C] R_B: the same torque without normalizing R_B first (one
            # scalar power instead of a square root and two divisions: fewer kernels per drift).
            R_B = mv3(ctx.dcm_BN, R_N)
            tau = tau + 3.0 * b.mu * dot3(R_N, R_N) ** -2.5 * cross3(R_B, mv3(IC, R_B))
        z = jnp.zeros(3)
        return ForceTorque(z, z, tau)

    # Units of the outputs (and commands) by name (`units()`).
    UNITS = {
        "torque_B": "N m",
    }

    def outputs(self, ctx):
        return {"torque_B": self.force_torque(ctx).torque_B}
