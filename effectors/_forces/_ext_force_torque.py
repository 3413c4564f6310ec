r"""External force and torque (Basilisk `extForceTorque`)."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import ArrayLike, Float

from jaxsim.signals import AbstractSignal, breakpoints_of, evaluate
from jaxsim.validation import as_array, check_name

from .._spacecraft._contract import AbstractDynamicEffector
from .._spacecraft._types import ForceTorque, HubContext


def _vec_or_signal(arg, value):
    unit = "N" if arg.startswith("force") else "N m"
    if value is None:
        return jnp.zeros(3)
    if isinstance(value, AbstractSignal) or callable(value):
        # A signal is checked once, abstractly, at t = 0: its shape must be that of the load.
        try:
            shape = jax.eval_shape(lambda: jnp.asarray(evaluate(value, jnp.zeros(())))).shape
        except Exception as err:  # noqa: BLE001  (report any failure of the user's callable)
            raise ValueError(
                f"ExtForceTorque: `{arg}` signal must be callable as f(t) -> (3,) [{unit}]; "
                f"calling it at t=0 failed with {type(err).__name__}: {err}."
            ) from err
        if shape != (3,):
            raise ValueError(
                f"ExtForceTorque: `{arg}` signal must return shape (3,) [{unit}]; got shape "
                f"{shape}."
            )
        return value
    return as_array("ExtForceTorque", arg, value, unit, (3,))


class ExtForceTorque(AbstractDynamicEffector):
    r"""Applied inertial force, body force (both through point $B$) and body torque about $B$.

    Each load is a constant `(3,)` array or a signal of time (e.g. `jaxsim.PiecewiseConstant`), and
    may also be commanded through `args`: when `args` is a dict holding `args[name]` with any of the
    keys `"force_N"`, `"force_B"`, `"torque_B"`, those commands are added (flight software writes them).

    **Arguments:**

    - `force_N`: force [N] in $\mathcal N$ components (Basilisk `extForce_N`).
    - `force_B`: force [N] in $\mathcal B$ components (`extForce_B`).
    - `torque_B`: torque about $B$ [N m] in $\mathcal B$ components (`extTorquePntB_B`).
    - `name`: unique effector name.

    **Assumptions:** forces act through $B$ (no moment arm, as in Basilisk's spacecraft); a force applied
    at point $F$ needs its moment $\mathbf r_{F/B}\times\mathbf F$ in `torque_B`.
    """

    force_N: object
    force_B: object
    torque_B: object
    name: str = eqx.field(static=True)

    def init_commands(self) -> dict:
        """`{"force_N", "force_B": zeros (3,) [N], "torque_B": zeros (3,) [N m]}`: the commands
        read from `args[name]`."""
        return {k: jnp.zeros(3) for k in ("force_N", "force_B", "torque_B")}

    def __init__(
        self,
        force_N: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike] | None = None,
        force_B: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike] | None = None,
        torque_B: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike] | None = None,
        *,
        name: str = "ext_force_torque",
    ):
        self.force_N = _vec_or_signal("force_N", force_N)
        self.force_B = _vec_or_signal("force_B", force_B)
        self.torque_B = _vec_or_signal("torque_B", torque_B)
        self.name = check_name("ExtForceTorque", "name", name)

    def force_torque(self, ctx: HubContext) -> ForceTorque:
        F_N = evaluate(self.force_N, ctx.t)
        F_B = evaluate(self.force_B, ctx.t)
        tau = evaluate(self.torque_B, ctx.t)
        F_N = F_N + self.read_command(ctx.args, "force_N", 0.0)
        F_B = F_B + self.read_command(ctx.args, "force_B", 0.0)
        tau = tau + self.read_command(ctx.args, "torque_B", 0.0)
        return ForceTorque(jnp.asarray(F_N), jnp.asarray(F_B), jnp.asarray(tau))

    # Units of the outputs (and commands) by name (`units()`).
    UNITS = {
        "force_N": "N",
        "force_B": "N",
        "torque_B": "N m",
    }

    def outputs(self, ctx):
        ft = self.force_torque(ctx)
        return {"force_N": ft.force_N, "force_B": ft.force_B, "torque_B": ft.torque_B}

    def breakpoints(self):
        return breakpoints_of(self.force_N, self.force_B, self.torque_B)
