r"""The effector contracts of Basilisk's spacecraft (seed 002), as pure functions on equinox modules.

- `AbstractDynamicEffector`: no states; returns loads (`ForceTorque`) at every derivative evaluation.
- `AbstractStateEffector`: registers states (`init_state`), supplies mass properties, back-substitution
  contributions, its derivative from the solved hub accelerations, energy/momentum and outputs.

Effectors never hold a reference to their parent: every evaluation receives a `HubContext`. Derived
quantities are computed from the configured inputs at each call (nothing accumulates), so building or
re-using an effector any number of times gives the same model. Several instances coexist under
distinct `name`s; N units of one type live in one vectorized effector.
"""

import abc
from typing import Any

import equinox as eqx

from ._types import BackSub, EnergyMomentum, ForceTorque, HubContext, MassProps


class AbstractEffector(eqx.Module):
    """Common base: a unique `name` (static) and optional breakpoints of scheduled inputs."""

    name: eqx.AbstractVar[str]

    def breakpoints(self) -> tuple:
        """Times [s] at which this effector's inputs are discontinuous."""
        return ()

    @property
    def reads_states(self) -> tuple[str, ...]:
        """Names of state effectors whose states this effector reads from `ctx.states`.

        `Spacecraft` checks at construction that each named state effector exists.
        """
        return ()


class AbstractDynamicEffector(AbstractEffector):
    """External loads without states (gravity gradient, external force/torque, drag, SRP, thrusters)."""

    @abc.abstractmethod
    def force_torque(self, ctx: HubContext) -> ForceTorque:
        """Loads at this evaluation: forces through $B$, torque about $B$."""

    def outputs(self, ctx: HubContext) -> dict:
        """Derived outputs recorded at sample times."""
        return {}


class AbstractStateEffector(AbstractEffector):
    """An effector with its own states, coupled to the hub through back-substitution."""

    @abc.abstractmethod
    def init_state(self, **overrides) -> Any:
        """The effector's state pytree at t0, from its configured initial values (or `overrides`)."""

    def mass_props(self, t, x) -> MassProps:
        """Mass properties this effector adds to the spacecraft (about $B$). Default: none."""
        return MassProps.zeros()

    @abc.abstractmethod
    def back_substitution(self, x, ctx: HubContext) -> BackSub:
        """Contributions $A, B, C, D, \\mathbf v_{trans}, \\mathbf v_{rot}$."""

    @abc.abstractmethod
    def derivative(self, x, ctx: HubContext, rDDot_BN_B, omegaDot_BN_B) -> Any:
        """State derivative from the solved hub accelerations (both in $\\mathcal B$ components)."""

    def energy_momentum(self, x, ctx: HubContext) -> EnergyMomentum:
        """Energy/momentum contribution. Default: none."""
        return EnergyMomentum.zeros()

    def outputs(self, x, ctx: HubContext) -> dict:
        """Derived outputs recorded at sample times. Default: the states themselves."""
        return {}

    def step_map(self, t, x):
        """Map after each completed step (Basilisk `modifyStates`); returns `(x, counts)`."""
        return x, {}

    @property
    def noise_dim(self) -> int:
        """Number of independent Wiener processes driving this effector's states (0: none)."""
        return 0

    def diffusion(self, x, ctx: HubContext) -> Any:
        r"""$g(t, x)$ for $dx = f\,dt + g\,dW$: leaves shaped `leaf.shape + (noise_dim,)`. Default: none."""
        return None
