r"""A disturbance torque driven by noise states (e.g. Ornstein-Uhlenbeck torque components)."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.validation import as_array, check_name

from .._spacecraft._contract import AbstractDynamicEffector
from .._spacecraft._types import ForceTorque, HubContext
from ._drag import read_state


class StochasticTorque(AbstractDynamicEffector):
    r"""Body torque about $B$ from three entries of a noise state effector:
    $\boldsymbol\tau_B = s\,(x_i, x_{i+1}, x_{i+2})$.

    Typical use: `MeanRevertingNoise(tau, sigma=(s1, s2, s3), name="torque_noise")` (stationary
    standard deviations in N m) and `StochasticTorque("torque_noise")`: an exponentially correlated
    Gaussian disturbance torque with correlation time $\tau$.

    **Arguments:**

    - `noise_state`: name of a state effector of the same spacecraft holding at least
      `index + 3` entries.
    - `index`: first of the three entries (default 0).
    - `scale`: $s$ [N m per state unit] (default 1: the state is the torque in N m).
    - `name`: unique effector name.

    **Coupling design:** as `Drag`: the state is read from `ctx.states[noise_state]`; the dependency
    is declared in `reads_states` and checked by `Spacecraft`.

    **Assumptions and limitations:** torque in body axes about $B$, no force; components independent
    unless the noise states are.

    **Reference:** Kloeden & Platen, *Numerical Solution of Stochastic Differential Equations*, §1.7
    (coloured noise as an Ornstein-Uhlenbeck state).
    """

    scale: Float[Array, ""]
    noise_state: str = eqx.field(static=True)
    index: int = eqx.field(static=True)
    name: str = eqx.field(static=True)
    commands = ()  # reads no commands from `args` (checked by `simulate`)

    def __init__(
        self,
        noise_state: str,
        *,
        index: int = 0,
        scale: Float[ArrayLike, ""] = 1.0,
        name: str = "stochastic_torque",
    ):
        cls = "StochasticTorque"
        self.noise_state = check_name(cls, "noise_state", noise_state)
        if not isinstance(index, int) or index < 0:
            raise ValueError(f"{cls}: `index` must be an integer >= 0; got {index!r}.")
        self.index = index
        self.scale = as_array(cls, "scale", scale, "N m", ())
        self.name = check_name(cls, "name", name)

    @property
    def reads_states(self) -> tuple[str, ...]:
        return (self.noise_state,)

    def init_commands(self) -> dict:
        """Reads no commands (`{}`)."""
        return {}

    def force_torque(self, ctx: HubContext) -> ForceTorque:
        x = read_state(ctx, "StochasticTorque", self.noise_state)
        if x.shape[0] < self.index + 3:
            raise ValueError(
                f"StochasticTorque: `index` + 3 = {self.index + 3} exceeds the {x.shape[0]} entries "
                f"of state {self.noise_state!r}."
            )
        tau = self.scale * x[self.index : self.index + 3]
        return ForceTorque(jnp.zeros(3), jnp.zeros(3), tau)

    # Units of the outputs (and commands) by name (`units()`).
    UNITS = {
        "torque_B": "N m",
    }

    def outputs(self, ctx: HubContext) -> dict:
        return {"torque_B": self.force_torque(ctx).torque_B}
