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
from ._unit_params import command


class AbstractEffector(eqx.Module):
    """Common base: the declared contract of every effector.

    A subclass defines `name` (a static field). Every other member has a declared default here,
    which a subclass overrides (a class attribute, a field or a method) when it has the feature;
    the spacecraft reads them directly, never by probing:

    - `attached`: effectors mounted on this one (e.g. on a panel), each seeing the body as its hub;
    - `reads_mass_flows`: names of the effectors whose `mass_flow` this one drains (a tank);
    - `reads_states`: names of state effectors whose states it reads from `ctx.states`;
    - `UNITS`, `units()`: units of its states, outputs and commands, by name;
    - `ELEMENT_DIM`: the dimension of its units in result datasets;
    - `init_commands()`: the commands it reads from `args[name]` (with `read_command`);
    - `mass_flow(mctx)`: its propellant mass flow [kg/s] per unit (thrusters);
    - `physical_checks(x)`: traced checks of its parameters (and state);
    - `breakpoints()`, `check_solver(solver, dt)`.
    """

    name: eqx.AbstractVar[str]
    # Effectors mounted on this one: a tuple of dynamic effectors (a field where it has them).
    attached: ClassVar[tuple] = ()
    # Names of the effectors whose `mass_flow` this one drains (resolved by `Spacecraft`).
    reads_mass_flows: ClassVar[tuple[str, ...]] = ()
    # Units by name of the state leaves, the `outputs` entries and the commands (one meaning per
    # name), e.g. `{"Omega": "rad/s", "motor_torque": "N m"}`; it may name entries that a
    # configuration does not have (e.g. the angle of balanced wheels). See `units()`.
    UNITS: ClassVar[dict] = {}
    # The name of the dimension along which this effector's units lie in its outputs and states
    # (e.g. "wheel"), shared by all its entries in `jaxsim.results.to_xarray`; None: its `name`.
    ELEMENT_DIM: ClassVar[str | None] = None
    # A Python int in an effector's non-static field is a parameter given without a decimal point:
    # traced as float64 (`jaxsim.AbstractDynamicObject.ints_are_parameters`).
    ints_are_parameters: ClassVar[bool] = True

    def breakpoints(self) -> tuple:
        """Times [s] at which this effector's inputs are discontinuous."""
        return ()

    def check_solver(self, solver, dt) -> None:
        """Refuse, with a ValueError naming the effector, a solver (and step `dt`, None for an
        adaptive run) this configuration cannot run under; called by `simulate` at the call.
        Default: any solver."""

    def init_commands(self) -> dict | None:
        """The commands this effector reads from `args[name]`: `{key: zeros}` with the shapes
        they broadcast to (units in `units()["args"]`), `{}` when it reads none. `simulate`
        refuses a misspelt key or a wrong shape, naming them. None (the default, for effectors
        that do not declare it): undeclared, not checked; the spacecraft then accepts any other
        top-level key of `args`."""
        return None

    def read_command(self, args, key: str, default=None):
        """`args[name][key]`, this effector's command `key`, else `default` (also when `args` is
        not a dict): where effectors read their commands. On a clocked run `args` is the user's
        with the flight software's held outputs at their addresses. `simulate` has checked the
        keys and shapes against `init_commands()` and tagged units (`jaxsim.Quantity`) against
        `units()["args"]`; the value is a plain array in the declared unit."""
        return command(args, self.name, key, default)

    def units(self) -> dict:
        """Units of what this effector records, keyed as the results are:
        `{"ys": state units, "outputs": output units, "args": command units}`, each a dict by
        name from `UNITS` (states: the keys of its state; commands: the keys of
        `init_commands()`; outputs: all of `UNITS`, of which `Spacecraft.units` keeps the entries
        that its outputs have). Effectors mounted on it (`attached`) nest their output units under
        `"attached"` by name, as their outputs do. An effector with an array state (not a dict)
        overrides this method to give its unit as a string."""
        state_keys = self._state_keys()
        commands = self.init_commands() or {}
        outputs = dict(self.UNITS)
        kids = {c.name: c.units()["outputs"] for c in self.attached}
        kids = {name: u for name, u in kids.items() if u}
        if kids:
            outputs["attached"] = kids
        return {
            "ys": {k: u for k, u in self.UNITS.items() if k in state_keys},
            "outputs": outputs,
            "args": {k: u for k, u in self.UNITS.items() if k in commands},
        }

    def _state_keys(self) -> set:
        """The keys of its dict state (none for a dynamic effector)."""
        return set()

    def element_dim(self) -> str:
        """The dimension of this effector's units in result datasets: `ELEMENT_DIM` or `name`."""
        return self.ELEMENT_DIM or self.name

    def mass_flow(self, mctx: MassContext) -> Any:
        """Propellant mass flow [kg/s] per unit, `(n,)`, read by the state effectors that drain
        it (`reads_mass_flows`). Default: this effector has no mass flow (not drainable)."""
        raise NotImplementedError(f"{type(self).__name__} {self.name!r} has no mass flow.")

    def physical_checks(self, x=None) -> dict:
        """`{quantity: traced bool}` (True where physical) of its parameters and, with a state
        `x`, of its state; read by `Spacecraft.validity`. Default: none (`{}`)."""
        return {}

    @property
    def reads_states(self) -> tuple[str, ...]:
        """Names of state effectors whose states this effector reads from `ctx.states`.

        `Spacecraft` checks at construction that each named state effector exists.
        """
        return ()


def has_mass_flow(effector) -> bool:
    """Whether `effector` defines `mass_flow` (overrides the declared default)."""
    return type(effector).mass_flow is not AbstractEffector.mass_flow


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


class AbstractStateEffector(AbstractEffector):
    """An effector with its own states, coupled to the hub through back-substitution.

    A subclass implements `init_state` and `contribute` (the one form of a state effector; the
    two-method form `back_substitution` + `derivative` is `TwoMethodStateEffector`, an adapter);
    the other members have declared defaults.
    """

    @abc.abstractmethod
    def init_state(self, **overrides) -> Any:
        """The effector's state pytree at t0, from its configured initial values (or `overrides`)."""

    @abc.abstractmethod
    def contribute(self, x, ctx: HubContext) -> Contribution | JointContribution:
        """This effector's part of one derivative evaluation, in one pass: its back-substitution
        terms and a closure giving its state derivative from the solved hub accelerations
        (`Contribution`), or, for a 1-DOF effector, its joint rows and a closure giving its state
        derivative from its joint accelerations (`JointContribution`, stacked by the spacecraft
        with the rows of its other 1-DOF effectors). What both need is computed once, here."""

    def _state_keys(self) -> set:
        state = jax.eval_shape(self.init_state)
        return set(state) if isinstance(state, dict) else set()

    def mass_props(self, x, ctx: MassContext) -> MassProps:
        """Mass properties this effector adds to the spacecraft (about $B$), given its state `x`
        and the `MassContext` (time, `args`, all states). Default: none."""
        return MassProps.zeros()

    def supplies(self, x) -> Any:
        """Whether the effectors it drains (`reads_mass_flows`) have propellant (a traced bool),
        or None (the default) when it never starves them; read by `Spacecraft`."""
        return None

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


class TwoMethodStateEffector(AbstractStateEffector):
    """Adapter: a state effector written as two methods, `back_substitution(x, ctx)` (its
    `BackSub` terms) and `derivative(x, ctx, rDDot_BN_B, omegaDot_BN_B)` (its state derivative
    from the solved hub accelerations), for effectors whose two halves share nothing (e.g. the
    noise states). `contribute` is the pair of them; everything else is `AbstractStateEffector`'s."""

    @abc.abstractmethod
    def back_substitution(self, x, ctx: HubContext) -> BackSub:
        """Contributions $A, B, C, D, \\mathbf v_{trans}, \\mathbf v_{rot}$."""

    @abc.abstractmethod
    def derivative(self, x, ctx: HubContext, rDDot_BN_B, omegaDot_BN_B) -> Any:
        """State derivative from the solved hub accelerations (both in $\\mathcal B$ components)."""

    def contribute(self, x, ctx: HubContext) -> Contribution:
        return Contribution(
            self.back_substitution(x, ctx),
            lambda rDDot_BN_B, omegaDot_BN_B: self.derivative(x, ctx, rDDot_BN_B, omegaDot_BN_B),
        )


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
