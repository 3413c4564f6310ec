r"""The drive of one-degree-of-freedom joints: spring, damper, references, motor and commands.

Hinged panels, spinning bodies and spring-mass-dampers act on each unit's joint coordinate $q_j$
(an angle or a stretch) with the generalized force (Allard, Schaub & Piggott, JSR 55(5), 2018;
Basilisk `hingedRigidBodyStateEffector`, `spinningBodyOneDOFStateEffector`,
`linearSpringMassDamper`)

$$f_j = u_j - k_j\,(q_j - q_{ref,j}) - c_j\,(\dot q_j - \dot q_{ref,j}),$$

a linear spring $k$ and damper $c$ about references $q_{ref}$, $\dot q_{ref}$, plus a motor term $u$.
`JointDrive` is that term as one component: the effectors hold one (`effector.drive`) and call it.

The references and the motor term are constants (one per unit, or one for all) or signals of
time (`jaxsim.PiecewiseConstant`, any callable `t -> array`). When the drive is **commanded**,
flight software may write them in `args[name]`: the motor command is added to the configured
motor term, a reference command replaces the configured reference (`init_commands()` lists the
keys and shapes). A part configured as `None` is absent: it is zero and costs nothing.
"""

from collections.abc import Callable, Sequence

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.signals import AbstractSignal, breakpoints_of
from jaxsim.validation import check_nonnegative

from .._spacecraft._unit_params import command, input_at, per_unit, unit_input


class JointDrive(eqx.Module):
    r"""Spring, damper, references and motor term of `n` one-degree-of-freedom joints.

    **Arguments:**

    - `cls`: the owning class's name (for error messages); `n`: the number of units.
    - `k`, `c`: spring and damper coefficients, `(n,)` or one for all, >= 0.
    - `ref`, `rate_ref`, `motor`: references and motor term: constants, signals, or `None` (absent,
      zero).
    - `names`: the owner's argument names of `(k, c, ref, rate_ref, motor)`, which are also the
      command keys in `args[name]` (e.g. `("k", "c", "thetaRef", "thetaDotRef",
      "motor_torque")`).
    - `units`: their units, in the same order (e.g. `("N m/rad", "N m s/rad", "rad", "rad/s",
      "N m")`).
    - `commanded`: whether flight software may command the motor term and the references through
      `args[name]` (default True).
    """

    k: Float[Array, " n"]
    c: Float[Array, " n"]
    ref: object
    rate_ref: object
    motor: object
    names: tuple = eqx.field(static=True)
    units: tuple = eqx.field(static=True)
    commanded: bool = eqx.field(static=True)
    num_units: int = eqx.field(static=True)

    def __init__(
        self,
        cls: str,
        n: int,
        *,
        k: Float[ArrayLike, "*n"],
        c: Float[ArrayLike, "*n"],
        ref: ArrayLike | AbstractSignal | Callable[..., ArrayLike] | None,
        rate_ref: ArrayLike | AbstractSignal | Callable[..., ArrayLike] | None,
        motor: ArrayLike | AbstractSignal | Callable[..., ArrayLike] | None,
        names: Sequence[str],
        units: Sequence[str],
        commanded: bool = True,
    ):
        self.num_units = n
        self.names, self.units, self.commanded = tuple(names), tuple(units), bool(commanded)
        (nk, nc, nr, nrr, nm), (uk, uc, ur, urr, um) = self.names, self.units
        self.k = check_nonnegative(cls, nk, per_unit(cls, nk, k, uk, n), uk)
        self.c = check_nonnegative(cls, nc, per_unit(cls, nc, c, uc, n), uc)
        self.ref = None if ref is None else unit_input(cls, nr, ref, ur, n)
        self.rate_ref = None if rate_ref is None else unit_input(cls, nrr, rate_ref, urr, n)
        self.motor = None if motor is None else unit_input(cls, nm, motor, um, n)

    def init_commands(self) -> dict:
        """`{key: zeros (n,)}`: the commands it reads from `args[name]` (`{}` when not commanded)."""
        if not self.commanded:
            return {}
        return {key: jnp.zeros(self.num_units) for key in (self.names[4], *self.names[2:4])}

    def command_units(self) -> dict:
        """`{key: unit}` of `init_commands()`'s entries."""
        if not self.commanded:
            return {}
        return {self.names[i]: self.units[i] for i in (4, 2, 3)}

    def inputs(self, t, args, name: str):
        """`(u, q_ref, qdot_ref)` at time `t`, each `(n,)`: the configured values, with the
        commands of `args[name]` (motor added, references replaced) when commanded."""
        n = self.num_units
        zero = jnp.zeros(n)
        u = zero if self.motor is None else input_at(self.motor, t, n)
        refs = []
        for key, value in ((self.names[2], self.ref), (self.names[3], self.rate_ref)):
            cmd = command(args, name, key) if self.commanded else None
            value = value if cmd is None else cmd
            refs.append(zero if value is None else input_at(value, t, n))
        if self.commanded:
            cmd = command(args, name, self.names[4])
            if cmd is not None:
                u = u + jnp.broadcast_to(jnp.asarray(cmd, dtype=float), (n,))
        return u, refs[0], refs[1]

    def damper(self, qdot, inputs):
        r"""$c\,(\dot q - \dot q_{ref})$, `(n,)` (`inputs` from `inputs`)."""
        return self.c * (qdot - inputs[2])

    def force(self, q, qdot, inputs):
        r"""$u - k\,(q - q_{ref}) - c\,(\dot q - \dot q_{ref})$, `(n,)`."""
        u, ref, _ = inputs
        return u - self.k * (q - ref) - self.damper(qdot, inputs)

    def spring_energy(self, q, inputs):
        r"""$\frac12 k\,(q - q_{ref})^2$, `(n,)`."""
        return 0.5 * self.k * (q - inputs[1]) ** 2

    def breakpoints(self) -> tuple:
        """Switch times [s] of the signal references and motor term."""
        parts = [p for p in (self.ref, self.rate_ref, self.motor) if p is not None]
        return breakpoints_of(*parts) if parts else ()


class DrivenJoints(eqx.Module):
    """Base of effectors whose joints a `JointDrive` (field `drive`) acts on: the drive's spring
    and damper under the owner's argument names `k`, `c` (read them, or set them with
    `eqx.tree_at(lambda e: e.k, ...)`), its commands and its breakpoints."""

    drive: eqx.AbstractVar[JointDrive]

    @property
    def k(self):
        """Spring coefficients, `(n,)` (the drive's)."""
        return self.drive.k

    @property
    def c(self):
        """Damper coefficients, `(n,)` (the drive's)."""
        return self.drive.c

    def init_commands(self) -> dict:
        """The drive's commands, `{key: zeros (n,)}` (`{}` when it reads none)."""
        return self.drive.init_commands()


class CommandedRotaryJoints(DrivenJoints):
    """`DrivenJoints` with angle references and a motor torque: `thetaRef` [rad], `thetaDotRef`
    [rad/s], `motor_torque` [N m], which flight software may command in `args[name]`."""

    @property
    def thetaRef(self):
        """Reference angles: `(n,)` constant or signal (the drive's)."""
        return self.drive.ref

    @property
    def thetaDotRef(self):
        """Reference rates: `(n,)` constant or signal (the drive's)."""
        return self.drive.rate_ref

    @property
    def motor_torque(self):
        """Motor torque: `(n,)` constant or signal (the drive's)."""
        return self.drive.motor


# `JointDrive` argument names and units of the rotary joints (hinged panels, spinning bodies).
ROTARY_NAMES = ("k", "c", "thetaRef", "thetaDotRef", "motor_torque")
ROTARY_UNITS = ("N m/rad", "N m s/rad", "rad", "rad/s", "N m")
