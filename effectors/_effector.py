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
import inspect
from typing import Any, ClassVar

import equinox as eqx
import jax

from ._joints import JointContribution
from ._types import (
    BackSub,
    Contribution,
    EnergyMomentum,
    ForceTorque,
    HubContext,
    MassContext,
    MassProps,
)


class AbstractEffector(eqx.Module):
    """Common base: a unique `name` (static) and optional breakpoints of scheduled inputs."""

    name: eqx.AbstractVar[str]

    def breakpoints(self) -> tuple:
        """Times [s] at which this effector's inputs are discontinuous."""
        return ()

    def check_solver(self, solver, dt) -> None:
        """Refuse, with a ValueError naming the effector, a solver (and step `dt`, None for an
        adaptive run) this configuration cannot run under; called by `simulate` at the call.
        Default: any solver."""

    # Units of the `outputs` entries by name, e.g. `{"torque_B": "N m"}` (subclasses set it; it may
    # name entries that a configuration does not record, e.g. the angle of balanced wheels).
    OUTPUT_UNITS = {}

    def output_units(self) -> dict:
        """Units of this effector's `outputs` entries, keyed like them (`{"torque_B": "N m"}`);
        effectors mounted on it (`attached`) nest theirs under `"attached"` by name, as their
        outputs do. Read by `Spacecraft.output_units`, hence by `jaxsim.results.to_xarray` and
        the plots. Default: the class's `OUTPUT_UNITS`."""
        units = dict(self.OUTPUT_UNITS)
        kids = {c.name: c.output_units() for c in getattr(self, "attached", ())}
        kids = {name: u for name, u in kids.items() if u}
        if kids:
            units["attached"] = kids
        return units

    # The name of the dimension along which this effector's units lie in its outputs and states
    # (e.g. "wheel"), shared by all its entries in `jaxsim.results.to_xarray`; None: the
    # effector's `name`.
    ELEMENT_DIM = None
    # A Python int in an effector's non-static field is a parameter given without a decimal point:
    # traced as float64 (`jaxsim.AbstractDynamicObject.ints_are_parameters`).
    ints_are_parameters: ClassVar[bool] = True

    def element_dim(self) -> str:
        """The dimension of this effector's units in result datasets: `ELEMENT_DIM` or `name`."""
        return self.ELEMENT_DIM or self.name

    # The commands this effector reads from `args[name]`, checked by `simulate` at the call:
    # `{key: shape}` (the value must broadcast to `shape`; None: any shape), a tuple of keys
    # (shapes unknown) or `()` (reads none). None (the default, for effectors that do not declare
    # it): undeclared, not checked; the spacecraft then accepts any other top-level key of `args`.
    commands = None

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


def as_contribution(part: Contribution | JointContribution) -> Contribution:
    """A `Contribution` from what `contribute` returned (a `JointContribution`'s rows summed into
    a `BackSub`, its derivative fed with the rows' accelerations)."""
    if not isinstance(part, JointContribution):
        return part
    rows, derivative = part
    return Contribution(
        rows.back_sub(),
        lambda rDDot_BN_B, omegaDot_BN_B: derivative(rows.accelerations(rDDot_BN_B, omegaDot_BN_B)),
    )


def require_fixed_rk4(effector, flag: str, solver, dt) -> None:
    """A ValueError unless the run is fixed-step `jaxsim.RK4()` with a step `dt`: for options that
    reproduce Basilisk's RK4 stage sequence (`flag` names the option)."""
    from jaxsim import RK4

    if not isinstance(solver, RK4) or dt is None:
        raise ValueError(
            f"{type(effector).__name__} {effector.name!r}: `{flag}=True` reproduces Basilisk's "
            f"RK4 stage sequence and runs only under the fixed-step `js.RK4()` with `dt`; got "
            f"solver {type(solver).__name__}, dt={dt!r}."
        )


def _missing(effector, method: str) -> str:
    return (
        f"{type(effector).__name__}: a state effector implements `contribute(x, ctx)`, or both "
        f"`back_substitution(x, ctx)` and `derivative(x, ctx, rDDot_BN_B, omegaDot_BN_B)`; "
        f"`{method}` is missing."
    )


def check_state_effector(effector) -> None:
    """Refuse, by name, a state effector that cannot take part in a derivative evaluation: neither
    `contribute` nor both `back_substitution` and `derivative` overridden, or a `mass_props` with
    the former signature `(t, x)` (now `(x, ctx)`, the time is `ctx.t`)."""
    cls = type(effector)
    base = AbstractStateEffector
    if cls.contribute is base.contribute:
        for method in ("back_substitution", "derivative"):
            if getattr(cls, method) is getattr(base, method):
                raise TypeError(_missing(effector, method))
    if cls.mass_props is not base.mass_props:
        params = list(inspect.signature(cls.mass_props).parameters)
        if len(params) >= 2 and params[1] == "t":
            raise TypeError(
                f"{cls.__name__}.mass_props: the signature is `mass_props(self, x, ctx)` (ctx: a "
                f"`MassContext` with the time `ctx.t`, `ctx.args` and all states `ctx.states`); "
                f"got the former `mass_props(self, t, x)`."
            )


class AbstractStateEffector(AbstractEffector):
    """An effector with its own states, coupled to the hub through back-substitution."""

    @abc.abstractmethod
    def init_state(self, **overrides) -> Any:
        """The effector's state pytree at t0, from its configured initial values (or `overrides`)."""

    # Units of the state leaves by name (a dict state), or one unit string (an array state).
    STATE_UNITS = {}

    def state_units(self):
        """Units of this effector's state, keyed like `init_state()`'s dict (only the entries it
        has), or one unit string for an array state. Default: from the class's `STATE_UNITS`."""
        if isinstance(self.STATE_UNITS, str):
            return self.STATE_UNITS
        state = jax.eval_shape(self.init_state)
        if not isinstance(state, dict):
            return {}
        return {k: u for k, u in self.STATE_UNITS.items() if k in state}

    def mass_props(self, x, ctx: MassContext) -> MassProps:
        """Mass properties this effector adds to the spacecraft (about $B$), given its state `x`
        and the `MassContext` (time, `args`, all states). Default: none."""
        return MassProps.zeros()

    def contribute(self, x, ctx: HubContext) -> Contribution | JointContribution:
        """This effector's part of one derivative evaluation, in one pass: its back-substitution
        terms and a closure giving its state derivative from the solved hub accelerations
        (`Contribution`), or, for a 1-DOF effector, its joint rows and a closure giving its state
        derivative from its joint accelerations (`JointContribution`, stacked by the spacecraft
        with the rows of its other 1-DOF effectors). Override it to compute shared intermediates
        once. Default: from `back_substitution` and `derivative`."""
        return Contribution(
            self.back_substitution(x, ctx),
            lambda rDDot_BN_B, omegaDot_BN_B: self.derivative(x, ctx, rDDot_BN_B, omegaDot_BN_B),
        )

    def back_substitution(self, x, ctx: HubContext) -> BackSub:
        """Contributions $A, B, C, D, \\mathbf v_{trans}, \\mathbf v_{rot}$. Implement this and
        `derivative`, or `contribute` (then this method is `contribute(x, ctx).back_sub`)."""
        if type(self).contribute is AbstractStateEffector.contribute:
            raise NotImplementedError(_missing(self, "back_substitution"))
        return as_contribution(self.contribute(x, ctx)).back_sub

    def derivative(self, x, ctx: HubContext, rDDot_BN_B, omegaDot_BN_B) -> Any:
        """State derivative from the solved hub accelerations (both in $\\mathcal B$ components).
        Implement this and `back_substitution`, or `contribute`."""
        if type(self).contribute is AbstractStateEffector.contribute:
            raise NotImplementedError(_missing(self, "derivative"))
        return as_contribution(self.contribute(x, ctx)).derivative(rDDot_BN_B, omegaDot_BN_B)

    def energy_momentum(self, x, ctx: HubContext) -> EnergyMomentum:
        """Energy/momentum contribution. Default: none."""
        return EnergyMomentum.zeros()

    def outputs(self, x, ctx: HubContext) -> dict:
        """Derived outputs recorded at sample times. Default: the states themselves."""
        return {}

    def derived(self, x, ctx: HubContext) -> tuple[dict, EnergyMomentum]:
        """`(outputs(x, ctx), energy_momentum(x, ctx))`, what the spacecraft records at the
        samples; override to compute what the two share once."""
        return self.outputs(x, ctx), self.energy_momentum(x, ctx)

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


class KinematicsStateEffector(AbstractStateEffector):
    """A state effector whose outputs and energy/momentum read the same kinematics of its state
    (`_kinematics(x)`): `derived` evaluates them once for both. Subclasses implement
    `_kinematics(x)`, `_outputs(x, ctx, kin)` and `_energy_momentum(x, ctx, kin)`."""

    @abc.abstractmethod
    def _kinematics(self, x):
        """What `_outputs` and `_energy_momentum` share, from the state `x`."""

    @abc.abstractmethod
    def _outputs(self, x, ctx: HubContext, kin) -> dict:
        """`outputs` given the kinematics."""

    @abc.abstractmethod
    def _energy_momentum(self, x, ctx: HubContext, kin) -> EnergyMomentum:
        """`energy_momentum` given the kinematics."""

    def outputs(self, x, ctx: HubContext) -> dict:
        return self._outputs(x, ctx, self._kinematics(x))

    def energy_momentum(self, x, ctx: HubContext) -> EnergyMomentum:
        return self._energy_momentum(x, ctx, self._kinematics(x))

    def derived(self, x, ctx: HubContext) -> tuple[dict, EnergyMomentum]:
        """`outputs` and `energy_momentum` from one evaluation of the kinematics."""
        kin = self._kinematics(x)
        return self._outputs(x, ctx, kin), self._energy_momentum(x, ctx, kin)
