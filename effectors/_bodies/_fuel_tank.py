r"""A fuel tank whose propellant mass is a state (Basilisk `FuelTank` and its tank models).

The tank's fuel is a body of mass $m_f$ whose centre of mass $T_c$ and central inertia follow a tank
model as functions of $m_f$; thrusters linked to the tank (and an optional leak) drain it. The
mass-depletion terms follow Basilisk's variable-mass formulation (Panicucci, Allard & Schaub,
"Spacecraft Dynamics Employing a General Multi-tank and Multi-thruster Mass Depletion Formulation",
J. Astronautical Sciences 65, 2018, doi:10.1007/s40295-017-0124-6). The equations and the exact
correspondence with Basilisk's module are in `docs/variable_mass.md`.
"""

import abc
import math
from collections.abc import Callable, Sequence

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.kinematics import cross3, dot3, mm3, mtv3, mv3
from jaxsim.signals import AbstractSignal, breakpoints_of, evaluate
from jaxsim.validation import (
    as_array,
    check_name,
    check_nonnegative,
    check_orthonormal,
    check_positive,
    fail,
    is_concrete,
)

from .._spacecraft._contract import AbstractStateEffector, require_fixed_rk4
from .._spacecraft._types import (
    BackSub,
    Contribution,
    EnergyMomentum,
    HubContext,
    MassContext,
    MassProps,
)
from .._spacecraft._unit_params import command


class TankProps(eqx.Module):
    r"""A tank model's fuel geometry at one fuel mass and mass rate (tank frame $\mathcal T$ components).

    - `r_TcT_T`: fuel centre of mass $T_c$ relative to the tank origin $T$ [m];
    - `rPrime_TcT_T`, `rPPrime_TcT_T`: its first and second derivatives in $\mathcal T$ [m/s, m/s^2];
    - `ITankPntT_T`: the fuel's inertia about $T_c$ [kg m^2] (Basilisk's name), `IPrimeTankPntT_T` its
      rate [kg m^2/s].
    """

    r_TcT_T: Float[Array, "3"]
    rPrime_TcT_T: Float[Array, "3"]
    rPPrime_TcT_T: Float[Array, "3"]
    ITankPntT_T: Float[Array, "3 3"]
    IPrimeTankPntT_T: Float[Array, "3 3"]


def _diag(a, b, c):
    z = jnp.zeros_like(a)
    return jnp.stack([jnp.stack([a, z, z]), jnp.stack([z, b, z]), jnp.stack([z, z, c])])


class AbstractTankModel(eqx.Module):
    r"""How the fuel's centre of mass and inertia depend on the fuel mass $m_f$.

    Every model has `prop_mass_init` $m_{f,0}$ [kg] (> 0: the initial fuel load, and for the
    geometric models the full tank that fixes the fuel density), `r_TcT_T` the position of the
    fuel's centre of mass (of the full tank for `EmptyingTank`) relative to the tank origin $T$ [m]
    in $\mathcal T$ components, and `max_fuel_mass` [kg] (reported in the outputs only).
    """

    prop_mass_init: eqx.AbstractVar[Float[Array, ""]]
    r_TcT_T: eqx.AbstractVar[Float[Array, "3"]]
    max_fuel_mass: eqx.AbstractVar[Float[Array, ""]]

    @abc.abstractmethod
    def props(self, m, m_dot) -> TankProps:
        """Geometry at fuel mass `m` [kg] (>= 0) and fuel mass rate `m_dot` [kg/s] (<= 0)."""


def _common(cls, prop_mass_init, r_TcT_T, max_fuel_mass):
    m0 = check_positive(
        cls, "prop_mass_init", as_array(cls, "prop_mass_init", prop_mass_init, "kg", ()), "kg"
    )
    r = jnp.zeros(3) if r_TcT_T is None else as_array(cls, "r_TcT_T", r_TcT_T, "m", (3,))
    mmax = m0 if max_fuel_mass is None else as_array(cls, "max_fuel_mass", max_fuel_mass, "kg", ())
    return m0, r, check_nonnegative(cls, "max_fuel_mass", mmax, "kg")


def _length(cls, arg, value):
    return check_positive(cls, arg, as_array(cls, arg, value, "m", ()), "m")


class ConstantVolumeTank(AbstractTankModel):
    r"""Spherical tank of fixed radius $R$ whose fuel keeps filling it (a pressurant-free idealisation
    where the fuel's density drops): $\mathbf r_{T_c/T}$ fixed, $[I] = \tfrac25 m_f R^2 [I_3]$,
    $[I]' = \tfrac25\dot m_f R^2 [I_3]$ (Basilisk `FuelTankModelConstantVolume`).

    **Arguments:** `prop_mass_init` [kg] > 0, `radius` $R$ [m] > 0 (Basilisk `radiusTankInit`),
    `r_TcT_T` [m] (default 0), `max_fuel_mass` [kg] (default `prop_mass_init`).
    """

    prop_mass_init: Float[Array, ""]
    radius: Float[Array, ""]
    r_TcT_T: Float[Array, "3"]
    max_fuel_mass: Float[Array, ""]

    def __init__(
        self,
        prop_mass_init: Float[ArrayLike, ""],
        radius: Float[ArrayLike, ""],
        r_TcT_T: Float[ArrayLike, "3"] | None = None,
        max_fuel_mass: Float[ArrayLike, ""] | None = None,
    ):
        cls = "ConstantVolumeTank"
        self.prop_mass_init, self.r_TcT_T, self.max_fuel_mass = _common(
            cls, prop_mass_init, r_TcT_T, max_fuel_mass
        )
        self.radius = _length(cls, "radius", radius)

    def props(self, m, m_dot) -> TankProps:
        k = 0.4 * self.radius**2
        z3 = jnp.zeros(3)
        eye = jnp.eye(3)
        return TankProps(self.r_TcT_T, z3, z3, k * m * eye, k * m_dot * eye)


class ConstantDensityTank(AbstractTankModel):
    r"""Spherical fuel ball of fixed density whose radius shrinks, $R = R_0 (m_f/m_{f,0})^{1/3}$:
    $[I] = \tfrac25 m_f R^2 [I_3]$, $[I]' = \tfrac23 \dot m_f R^2 [I_3]$, centre fixed (Basilisk
    `FuelTankModelConstantDensity`).

    **Arguments:** `prop_mass_init` [kg] > 0, `radius` $R_0$ [m] > 0 (the full tank, Basilisk
    `radiusTankInit`), `r_TcT_T` [m] (default 0), `max_fuel_mass` [kg] (default `prop_mass_init`).
    """

    prop_mass_init: Float[Array, ""]
    radius: Float[Array, ""]
    r_TcT_T: Float[Array, "3"]
    max_fuel_mass: Float[Array, ""]

    def __init__(
        self,
        prop_mass_init: Float[ArrayLike, ""],
        radius: Float[ArrayLike, ""],
        r_TcT_T: Float[ArrayLike, "3"] | None = None,
        max_fuel_mass: Float[ArrayLike, ""] | None = None,
    ):
        cls = "ConstantDensityTank"
        self.prop_mass_init, self.r_TcT_T, self.max_fuel_mass = _common(
            cls, prop_mass_init, r_TcT_T, max_fuel_mass
        )
        self.radius = _length(cls, "radius", radius)

    def props(self, m, m_dot) -> TankProps:
        # R^2 = R0^2 (m/m0)^(2/3), written with cbrt so that an empty tank has R = 0 (and a finite
        # gradient away from it).
        ratio = jnp.cbrt(m / self.prop_mass_init)
        R2 = (self.radius * ratio) ** 2
        z3 = jnp.zeros(3)
        eye = jnp.eye(3)
        return TankProps(self.r_TcT_T, z3, z3, 0.4 * m * R2 * eye, (2.0 / 3.0) * m_dot * R2 * eye)


class EmptyingTank(AbstractTankModel):
    r"""Spherical tank of radius $R$ that empties from the top: the fuel (constant density
    $\rho = m_{f,0}/(\tfrac43\pi R^3)$) fills the sphere below a plane normal to the tank's
    $\hat{\mathbf t}_3$ axis, the fuel surface at polar angle $\theta^*$ from $+\hat{\mathbf t}_3$:

    $$m_f = \tfrac23\pi\rho R^3\big(1 + \tfrac32\cos\theta^* - \tfrac12\cos^3\theta^*\big),\qquad
    \mathbf r_{T_c/T} = \mathbf r_{T_c/T,0} - \frac{\pi\rho R^4\sin^4\theta^*}{4 m_f}\hat{\mathbf t}_3,$$

    with the inertia about $T_c$ and all rates from $\dot\theta^* = -\dot m_f/(\pi\rho R^3\sin^3\theta^*)$
    ($\ddot m_f = 0$) (Basilisk `FuelTankModelEmptying`, as corrected in Basilisk for issue #1487).
    At exactly $m_f = m_{f,0}$ (full) $\theta^* = 0$ and all rates are 0, as in Basilisk.

    **Arguments:** `prop_mass_init` [kg] > 0 (a full tank), `radius` $R$ [m] > 0 (Basilisk
    `radiusTankInit`), `r_TcT_T` [m] the sphere's centre (default 0), `max_fuel_mass` [kg].
    """

    prop_mass_init: Float[Array, ""]
    radius: Float[Array, ""]
    r_TcT_T: Float[Array, "3"]
    max_fuel_mass: Float[Array, ""]

    def __init__(
        self,
        prop_mass_init: Float[ArrayLike, ""],
        radius: Float[ArrayLike, ""],
        r_TcT_T: Float[ArrayLike, "3"] | None = None,
        max_fuel_mass: Float[ArrayLike, ""] | None = None,
    ):
        cls = "EmptyingTank"
        self.prop_mass_init, self.r_TcT_T, self.max_fuel_mass = _common(
            cls, prop_mass_init, r_TcT_T, max_fuel_mass
        )
        self.radius = _length(cls, "radius", radius)

    @property
    def rho(self):
        """Fuel density [kg/m^3]: the full tank's."""
        return self.prop_mass_init / (4.0 / 3.0 * math.pi * self.radius**3)

    def theta_star(self, m):
        r"""$\theta^*$ [rad] for a fuel mass `m` strictly between 0 and `prop_mass_init`: the cubic in
        $x = \cos\theta^*$, $x^3 - 3x + 2(s - 1) = 0$ with $s = 2m_f/m_{f,0}$, in closed form, then one
        Newton step on Basilisk's residual in $\theta$ (Basilisk iterates Newton from $\pi/2$)."""
        m0 = self.prop_mass_init
        s = 2.0 * m / m0
        x = 2.0 * jnp.cos((jnp.arccos(jnp.clip(1.0 - s, -1.0, 1.0)) + 4.0 * math.pi) / 3.0)
        theta = jnp.arccos(jnp.clip(x, -1.0, 1.0))
        c, sn = jnp.cos(theta), jnp.sin(theta)
        f = 0.5 * m0 * (1.0 + 1.5 * c - 0.5 * c**3) - m
        fp = -0.75 * m0 * sn**3
        return theta - f / fp

    def props(self, m, m_dot) -> TankProps:
        m0, R = self.prop_mass_init, self.radius
        rho = self.rho
        full = m == m0
        empty = m <= 0.0
        inside = ~(full | empty)
        # Double `where`: the closed form runs on a mass strictly inside (0, m0), so that neither
        # values nor gradients of the branches not taken are infinite.
        theta = self.theta_star(jnp.where(inside, m, 0.5 * m0))
        theta = jnp.where(full, 0.0, jnp.where(empty, math.pi, theta))
        c, sn = jnp.cos(theta), jnp.sin(theta)
        c3t, s3t = jnp.cos(3.0 * theta), jnp.sin(3.0 * theta)
        k3 = jnp.array([0.0, 0.0, 1.0])
        volume = 2.0 / 3.0 * math.pi * R**3 * (1.0 + 1.5 * c - 0.5 * c**3)
        safe_volume = jnp.where(empty, 1.0, volume)
        shift = jnp.where(
            empty, -R, math.pi * R**4 / (4.0 * safe_volume) * (2.0 * c**2 - c**4 - 1.0)
        )
        r = self.r_TcT_T + shift * k3
        K = 0.4 * math.pi * rho * R**5
        I33 = K * (2.0 / 3.0 + 0.25 * c * sn**4 - (c3t - 9.0 * c) / 12.0)
        I11 = K * (2.0 / 3.0 - 0.25 * c**5 + (c3t - 9.0 * c) / 24.0 + 1.25 * c + 0.125 * c * sn**4)
        # Rates (zero when full or empty, as Basilisk's full-tank branch).
        sn_safe = jnp.where(inside, sn, 1.0)
        m_safe = jnp.where(inside, m, 1.0)
        th_dot = jnp.where(inside, -m_dot / (math.pi * rho * R**3 * sn_safe**3), 0.0)
        th_ddot = jnp.where(inside, -3.0 * th_dot**2 * c / sn_safe, 0.0)
        dI33 = K * th_dot * (c**2 * sn**3 - 0.25 * sn**5 + 0.25 * s3t - 0.75 * sn)
        dI11 = (
            K
            * th_dot
            * (
                1.25 * sn * c**4
                - 1.25 * sn
                - s3t / 8.0
                + 0.375 * sn
                + 0.5 * c**2 * sn**3
                - 0.125 * sn**5
            )
        )
        q = sn**4
        q_dot = 4.0 * sn**3 * c * th_dot
        q_ddot = 4.0 * ((3.0 * sn**2 * c**2 - sn**4) * th_dot**2 + sn**3 * c * th_ddot)
        a = -math.pi * R**4 * rho / 4.0
        r_p = a * (q_dot / m_safe - q * m_dot / m_safe**2)
        r_pp = a * (
            q_ddot / m_safe - 2.0 * q_dot * m_dot / m_safe**2 + 2.0 * q * m_dot**2 / m_safe**3
        )
        r_p = jnp.where(inside, r_p, 0.0) * k3
        r_pp = jnp.where(inside, r_pp, 0.0) * k3
        return TankProps(r, r_p, r_pp, _diag(I11, I11, I33), _diag(dI11, dI11, dI33))


class _CylindricalGrain(AbstractTankModel):
    """The arguments of the cylindrical solid-grain models (radius $R$ and length $L$ [m])."""

    prop_mass_init: Float[Array, ""]
    radius: Float[Array, ""]
    length: Float[Array, ""]
    r_TcT_T: Float[Array, "3"]
    max_fuel_mass: Float[Array, ""]

    def __init__(
        self,
        prop_mass_init: Float[ArrayLike, ""],
        radius: Float[ArrayLike, ""],
        length: Float[ArrayLike, ""],
        r_TcT_T: Float[ArrayLike, "3"] | None = None,
        max_fuel_mass: Float[ArrayLike, ""] | None = None,
    ):
        cls = type(self).__name__
        self.prop_mass_init, self.r_TcT_T, self.max_fuel_mass = _common(
            cls, prop_mass_init, r_TcT_T, max_fuel_mass
        )
        self.radius = _length(cls, "radius", radius)
        self.length = _length(cls, "length", length)


class UniformBurnTank(_CylindricalGrain):
    r"""Cylindrical fuel grain (radius $R$, length $L$, axis $\hat{\mathbf t}_3$) burning uniformly
    through its volume: $I_{11} = I_{22} = m_f(R^2/4 + L^2/12)$, $I_{33} = m_f R^2/2$, rates with
    $\dot m_f$, centre fixed (Basilisk `FuelTankModelUniformBurn`).

    **Arguments:** `prop_mass_init` [kg] > 0, `radius` $R$ [m] > 0 (Basilisk `radiusTankInit`),
    `length` $L$ [m] > 0 (Basilisk `lengthTank`), `r_TcT_T` [m] (default 0), `max_fuel_mass` [kg].
    """

    def props(self, m, m_dot) -> TankProps:
        R2, L2 = self.radius**2, self.length**2
        k1, k3 = R2 / 4.0 + L2 / 12.0, R2 / 2.0
        z3 = jnp.zeros(3)
        return TankProps(
            self.r_TcT_T,
            z3,
            z3,
            _diag(m * k1, m * k1, m * k3),
            _diag(m_dot * k1, m_dot * k1, m_dot * k3),
        )


class CentrifugalBurnTank(_CylindricalGrain):
    r"""Hollow cylindrical fuel grain (outer radius $R$, length $L$, axis $\hat{\mathbf t}_3$) burning
    from the inside out at constant density: inner radius $r_i^2 = \max(R^2 - m_f/(\pi L\rho), 0)$,
    $\rho = m_{f,0}/(\pi R^2 L)$; $I_{11} = I_{22} = m_f((R^2 + r_i^2)/4 + L^2/12)$,
    $I_{33} = m_f(R^2 + r_i^2)/2$, $I'_{11} = \dot m_f(r_i^2/2 + L^2/12)$, $I'_{33} = \dot m_f r_i^2$,
    centre fixed (Basilisk `FuelTankModelCentrifugalBurn`).

    **Arguments:** as `UniformBurnTank`.
    """

    def props(self, m, m_dot) -> TankProps:
        R2, L = self.radius**2, self.length
        rho = self.prop_mass_init / (math.pi * R2 * L)
        ri2 = jnp.maximum(R2 - m / (math.pi * L * rho), 0.0)
        L2 = L**2
        z3 = jnp.zeros(3)
        I11 = m * ((R2 + ri2) / 4.0 + L2 / 12.0)
        I33 = m * (R2 + ri2) / 2.0
        dI11 = m_dot * (ri2 / 2.0 + L2 / 12.0)
        dI33 = m_dot * ri2
        return TankProps(self.r_TcT_T, z3, z3, _diag(I11, I11, I33), _diag(dI11, dI11, dI33))


class FuelTank(AbstractStateEffector):
    r"""A fuel tank: its fuel mass $m_f$ is a state, drained by the thrusters it feeds and a leak.

    The tank frame $\mathcal T$ sits at $T$, $\mathbf r_{T/B}$ from $B$, oriented by $[TB]$; the tank
    model gives the fuel's centre of mass $\mathbf r_{T_c/T}$ and central inertia in $\mathcal T$ as
    functions of $m_f$. With the fuel consumption $\dot m_{out} = \dot m_{leak} + \sum_{thrusters}
    \dot m_i$ (0 once the tank is empty):

    $$\dot m_f = -\dot m_{out},\quad \mathbf r_{T_c/B} = \mathbf r_{T/B} + [TB]^T\mathbf r_{T_c/T},
    \quad [I_{f,B}] = [TB]^T[I_{f,T_c}][TB] + m_f[\tilde{\mathbf r}_{T_c/B}][\tilde{\mathbf r}_{T_c/B}]^T.$$

    The spacecraft's mass rate $\dot m_{sc}$ gains $-\dot m_{out}$ (hence
    $\mathbf c' = -\dot m_{sc}\mathbf c/m_{sc}$ and the hub's $-2\dot m_{sc}(\mathbf c' +
    \boldsymbol\omega\times\mathbf c)$ term). Unless `update_only`, the tank adds Basilisk's
    depletion torque to the rotational equation:

    $$\mathbf v_{rot} \mathrel{+}= -m_f\,\mathbf r\times\mathbf r'' - m_f\,\boldsymbol\omega\times
    (\mathbf r\times\mathbf r') - \dot m_f\,\mathbf r\times\mathbf r' - [I_{f,B}]'\boldsymbol\omega,
    \quad \mathbf r = \mathbf r_{T_c/B},$$

    $[I_{f,B}]' = [TB]^T[I_{f,T_c}]'[TB] + \dot m_f(r^2[I_3] - \mathbf r\mathbf r^T) +
    m_f(2\,\mathbf r\cdot\mathbf r'[I_3] - \mathbf r\mathbf r'^T - \mathbf r'\mathbf r^T)$.
    As in Basilisk, the tank reports no $\mathbf r'$ or $[I]'$ in its mass properties (they enter
    only through this torque), so `update_only=True` (Basilisk's default) changes the mass
    properties and $\dot m_{sc}$ only (see `docs/variable_mass.md` for what each choice conserves).

    **Arguments:**

    - `model`: the tank model (`ConstantVolumeTank`, `ConstantDensityTank`, `EmptyingTank`,
      `UniformBurnTank`, `CentrifugalBurnTank`).
    - `r_TB_B`: tank origin $T$ relative to $B$ [m] (default 0). `dcm_TB`: $[TB]$ (default identity).
    - `thrusters`: names of the thruster effectors this tank feeds (Basilisk `addThrusterSet`):
      each must be an effector of the same spacecraft with a `mass_flow(mctx)` method (checked by
      `Spacecraft`). As in Basilisk, a tank drains the full flow of every set it names (a set
      named by two tanks drains both).
    - `leak_rate`: fuel leak [kg/s] >= 0, a constant or a signal of time (Basilisk `fuelLeakRate` /
      `fuelLeakRateInMsg`); the command `args[name]["leak_rate"]` adds to it.
    - `update_only`: skip the depletion torque (Basilisk `updateOnly`, default True).
    - `basilisk_lag`: reproduce Basilisk's one-stage lag of the thrusters' flow (default False: the
      tank drains the flow of the current evaluation, the consistent model that adaptive solvers
      and gradients need). Basilisk's tank reads its thrusters' flow from their *previous*
      derivative evaluation: under RK4 (stages 1 to 4 at $t_k$, $t_k + h/2$ twice, $t_k + h$)
      stage $j > 1$ drains the flow of stage $j - 1$, and stage 1 that of the previous step's
      stage 4 (at $t_k$, under the previous step's command), as do the outputs at $t_k$. With
      `basilisk_lag=True` the state carries four auxiliary scalars that RK4's stage updates turn
      into the previous stage's flow (`_lag_stage`); a fixed-step RK4 run then equals Basilisk's
      to round-off, burns that start and stop mid-run included. Only for fixed-step `RK4` (the
      auxiliary states assume its tableau). The leak is not lagged (Basilisk reads it at the
      current evaluation).
    - `starve_thrusters`: the thrusters this tank feeds stop while it is empty (default True): a
      `Thrusters` set's thrust factor, and a `ThrusterStateEffector`'s commanded firing state,
      are multiplied by $[m_f > 0]$ (a set fed by several starving tanks stops when any of them is
      empty). False: Basilisk's behaviour (its thrusters do not read their tank: an empty tank
      stops draining but the thrusters keep their thrust), for cross-validation.
    - `name`: key of the state `{"mass": ()}` and of the outputs.

    **Outputs** (under `name`): `fuelMass` [kg], `fuelMassDot` [kg/s] (Basilisk's `FuelTankMsg`),
    `maxFuelMass` [kg], `r_TcB_B` [m], `ITankPntT_B` the fuel's inertia about $T_c$ [kg m^2].

    **Assumptions and limitations:** the fuel moves with the tank (no slosh: Basilisk's attached
    fuel-slosh particles, which share the depletion, are not modelled); the fuel mass is clamped at
    0 (the flow, and with `starve_thrusters` the thrust, stops when the tank is empty; the RK step
    in which it empties is not split, so the cut-off is resolved to that step); no blow-down (the
    thrust does not depend on the tank's pressure).

    **Reference:** Basilisk `FuelTank` (`fuelTank.h/.cpp` and its documentation
    `Basilisk-FUELTANK-20171203`); Panicucci, Allard & Schaub, JAS 65, 2018.
    """

    model: AbstractTankModel
    r_TB_B: Float[Array, "3"]
    dcm_TB: Float[Array, "3 3"]
    leak_rate: object
    thrusters: tuple = eqx.field(static=True)
    update_only: bool = eqx.field(static=True)
    basilisk_lag: bool = eqx.field(static=True)
    starve_thrusters: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        model: AbstractTankModel,
        *,
        r_TB_B: Float[ArrayLike, "3"] | None = None,
        dcm_TB: Float[ArrayLike, "3 3"] | None = None,
        thrusters: str | Sequence[str] = (),
        leak_rate: ArrayLike | AbstractSignal | Callable[..., ArrayLike] = 0.0,
        update_only: bool = True,
        basilisk_lag: bool = False,
        starve_thrusters: bool = True,
        name: str = "tank",
    ):
        cls = "FuelTank"
        if not isinstance(model, AbstractTankModel):
            raise TypeError(
                f"{cls}: `model` must be a tank model (ConstantVolumeTank, ConstantDensityTank, "
                f"EmptyingTank, UniformBurnTank, CentrifugalBurnTank); got {type(model).__name__}."
            )
        self.model = model
        self.r_TB_B = jnp.zeros(3) if r_TB_B is None else as_array(cls, "r_TB_B", r_TB_B, "m", (3,))
        dcm = jnp.eye(3) if dcm_TB is None else as_array(cls, "dcm_TB", dcm_TB, "-", (3, 3))
        self.dcm_TB = check_orthonormal(cls, "dcm_TB", dcm)
        if isinstance(thrusters, str):
            thrusters = (thrusters,)
        thrusters = tuple(thrusters)
        for i, n in enumerate(thrusters):
            if not isinstance(n, str) or not n:
                raise ValueError(
                    f"{cls}: `thrusters[{i}]` must be the name (a non-empty string) of a thruster "
                    f"effector; got {n!r}."
                )
        if len(set(thrusters)) != len(thrusters):
            raise ValueError(f"{cls}: `thrusters` names a set twice; got {thrusters!r}.")
        self.thrusters = thrusters
        if not (isinstance(leak_rate, AbstractSignal) or callable(leak_rate)):
            leak_rate = as_array(cls, "leak_rate", leak_rate, "kg/s", ())
            if is_concrete(leak_rate) and float(leak_rate) < 0.0:
                fail(cls, "leak_rate", "must be >= 0", "kg/s", leak_rate)
        self.leak_rate = leak_rate
        if not isinstance(update_only, bool):
            raise ValueError(f"{cls}: `update_only` must be a bool; got {update_only!r}.")
        self.update_only = update_only
        if not isinstance(basilisk_lag, bool):
            raise ValueError(f"{cls}: `basilisk_lag` must be a bool; got {basilisk_lag!r}.")
        self.basilisk_lag = basilisk_lag
        if not isinstance(starve_thrusters, bool):
            raise ValueError(f"{cls}: `starve_thrusters` must be a bool; got {starve_thrusters!r}.")
        self.starve_thrusters = starve_thrusters
        self.name = check_name(cls, "name", name)

    def init_commands(self) -> dict:
        """`{"leak_rate": 0}` [kg/s]: the command read from `args[name]`."""
        return {"leak_rate": jnp.zeros(())}

    # Units of the states, outputs and commands by name (`units()`).
    UNITS = {
        "mass": "kg",
        "flow_prev": "kg/s",
        "lag_h": "s",
        "lag_n": "s",
        "lag_flow_h": "kg",
        "fuelMass": "kg",
        "fuelMassDot": "kg/s",
        "maxFuelMass": "kg",
        "r_TcB_B": "m",
        "ITankPntT_B": "kg m^2",
        "leak_rate": "kg/s",
    }

    @property
    def reads_mass_flows(self) -> tuple[str, ...]:
        """Names of the effectors whose `mass_flow` this tank drains (resolved by `Spacecraft`)."""
        return self.thrusters

    def init_state(self, mass=None, flow_prev=None) -> dict:
        """`{"mass": m_f}`: `prop_mass_init` unless `mass` [kg] is given.

        With `basilisk_lag`, also the auxiliary states (`_lag_stage`): `flow_prev` [kg/s] is the
        thrusters' flow of the evaluation before the run, drained by the first stage (default 0:
        in Basilisk, the thrusters' state before a command is read). A command read before the
        first step (a message written before `InitializeSimulation`) fires in Basilisk's
        zero-length integration at $t_0$: then set `flow_prev` to that flow in the state that
        `Spacecraft.init_state` returns (built with 0, as Basilisk's `Reset` sees no firing
        thruster when it places $B$)."""
        cls = f"FuelTank({self.name}).init_state"
        if mass is None:
            x = {"mass": jnp.asarray(self.model.prop_mass_init, dtype=float)}
        else:
            m = check_nonnegative(cls, "mass", as_array(cls, "mass", mass, "kg", ()), "kg")
            x = {"mass": m}
        if self.basilisk_lag:
            f0 = (
                jnp.zeros(())
                if flow_prev is None
                else as_array(cls, "flow_prev", flow_prev, "kg/s", ())
            )
            z = jnp.zeros(())
            x.update(flow_prev=jnp.asarray(f0, dtype=float), lag_h=z, lag_n=z, lag_flow_h=z)
        elif flow_prev is not None:
            raise ValueError(f"{cls}: `flow_prev` needs `basilisk_lag=True`.")
        return x

    def physical_checks(self, x=None) -> dict:
        """`{quantity: traced bool}`: with a state `x`, whether the fuel mass [kg] lies in the
        closed interval from 0 to `max_fuel_mass` (read by `Spacecraft.validity`)."""
        if x is None:
            return {}
        m, mmax = x["mass"], self.model.max_fuel_mass
        return {"fuelMass": (m >= 0.0) & (m <= mmax * (1.0 + 1e-12))}

    def supplies(self, x):
        """Whether the tank can feed its thrusters (`x["mass"] > 0`), or None when it does not
        starve them (`starve_thrusters=False`); read by `Spacecraft` (`MassContext.supply`)."""
        return x["mass"] > 0.0 if self.starve_thrusters else None

    def check_solver(self, solver, dt) -> None:
        if self.basilisk_lag:
            require_fixed_rk4(self, "basilisk_lag", solver, dt)

    def breakpoints(self) -> tuple:
        return breakpoints_of(self.leak_rate)

    # ----------------------------------------------------------------------------------------------

    def thruster_flow(self, mass_flows) -> Float[Array, ""]:
        """Sum of the current flows of the linked thruster sets [kg/s] (this evaluation's)."""
        total = jnp.zeros(())
        for n in self.thrusters:
            if mass_flows is None or n not in mass_flows:
                raise ValueError(
                    f"FuelTank({self.name}): the mass flow of {n!r} is missing from the context "
                    f"(the tank must belong to a Spacecraft that holds the effector {n!r})."
                )
            total = total + jnp.sum(mass_flows[n])
        return total

    @staticmethod
    def _lag_stage(x, flow):
        r"""Basilisk's lagged thruster flow at this RK4 stage, and the auxiliary derivatives.

        Four scalar states, reset to 0 by `step_map` except `flow_prev`, follow RK4's stage inputs
        $Y_2 = y_k + \tfrac h2 k_1$, $Y_3 = y_k + \tfrac h2 k_2$, $Y_4 = y_k + h k_3$:
        `lag_h` (derivatives 2, 2, 1 at stages 1-3) reads $h$ at stages 2-4 and 0 at stage 1;
        `lag_n` (2, 4, 3) reads $h, 2h, 3h$, so `lag_n / lag_h` + 1 is the stage;
        `lag_flow_h` ($2F_1$, $2F_2$, $F_3$, $F_j$ the thrusters' flow at stage $j$) reads
        $h F_{j-1}$ at stage $j$; `flow_prev` (0 at stages 1-3, $6(F_4 - P)/h$ at stage 4) is $P$
        over the step and $F_4$ after it. The lagged flow is $P$ at stage 1, else
        `lag_flow_h / lag_h`.
        """
        h, n, fh, p = x["lag_h"], x["lag_n"], x["lag_flow_h"], x["flow_prev"]
        first = h == 0.0
        safe_h = jnp.where(first, 1.0, h)
        ratio = n / safe_h
        second = ~first & (ratio < 1.5)
        third = ~first & (ratio >= 1.5) & (ratio < 2.5)
        fourth = ~first & (ratio >= 2.5)
        lagged = jnp.where(first, p, fh / safe_h)
        early = first | second
        dx = {
            "flow_prev": jnp.where(fourth, 6.0 * (flow - p) / safe_h, 0.0),
            "lag_h": jnp.where(early, 2.0, jnp.where(third, 1.0, 0.0)),
            "lag_n": jnp.where(first, 2.0, jnp.where(second, 4.0, jnp.where(third, 3.0, 0.0))),
            "lag_flow_h": jnp.where(early, 2.0 * flow, jnp.where(third, flow, 0.0)),
        }
        return lagged, dx

    def consumption(self, x, t, args, mass_flows) -> Float[Array, ""]:
        r"""Fuel leaving the tank $\dot m_{out}$ [kg/s] (>= 0): leak plus the flows of its thrusters
        (with `basilisk_lag`, those of the previous RK4 stage), 0 once the fuel mass is 0 (Basilisk
        stops the depletion of an empty tank)."""
        leak = jnp.asarray(evaluate(self.leak_rate, t), dtype=float)
        cmd = command(args, self.name, "leak_rate")
        if cmd is not None:
            leak = leak + jnp.asarray(cmd, dtype=float)
        flow = self.thruster_flow(mass_flows)
        if self.basilisk_lag:
            flow = self._lag_stage(x, flow)[0]
        return jnp.where(x["mass"] > 0.0, leak + flow, 0.0)

    def _geometry(self, x, m_dot):
        m = jnp.maximum(x["mass"], 0.0)
        p = self.model.props(m, m_dot)
        dcm = self.dcm_TB
        r = self.r_TB_B + mtv3(dcm, p.r_TcT_T)
        I_c = mm3(dcm.T, mm3(p.ITankPntT_T, dcm))
        return m, p, r, I_c

    @staticmethod
    def _parallel(m, r):
        return m * (dot3(r, r) * jnp.eye(3) - r[:, None] * r[None, :])

    def mass_props(self, x, ctx: MassContext) -> MassProps:
        m_out = self.consumption(x, ctx.t, ctx.args, ctx.mass_flows)
        m, p, r, I_c = self._geometry(x, -m_out)
        z3, z33 = jnp.zeros(3), jnp.zeros((3, 3))
        return MassProps(
            mass=m,
            mass_dot=-m_out,
            first_moment=m * r,
            first_moment_prime=z3,
            inertia_B=I_c + self._parallel(m, r),
            inertia_prime_B=z33,
            first_moment_depletion=-m_out * r + m * mtv3(self.dcm_TB, p.rPrime_TcT_T),
            mass_dot_omitted=-m_out if self.update_only else jnp.zeros(()),
        )

    def contribute(self, x, ctx: HubContext) -> Contribution:
        m_out = self.consumption(x, ctx.t, ctx.args, ctx.mass_flows)
        m_dot = -m_out
        bs = BackSub.zeros()
        if not self.update_only:
            m, p, r, _ = self._geometry(x, m_dot)
            dcm, omega = self.dcm_TB, ctx.omega_BN_B
            r_p = mtv3(dcm, p.rPrime_TcT_T)
            r_pp = mtv3(dcm, p.rPPrime_TcT_T)
            I_p = (
                mm3(dcm.T, mm3(p.IPrimeTankPntT_T, dcm))
                + self._parallel(m_dot, r)
                + m
                * (
                    2.0 * dot3(r, r_p) * jnp.eye(3)
                    - r[:, None] * r_p[None, :]
                    - r_p[:, None] * r[None, :]
                )
            )
            r_x_rp = cross3(r, r_p)
            v_rot = (
                -m * cross3(r, r_pp) - m * cross3(omega, r_x_rp) - m_dot * r_x_rp - mv3(I_p, omega)
            )
            bs = eqx.tree_at(lambda b: b.v_rot, bs, v_rot)
        dx = {"mass": m_dot}
        if self.basilisk_lag:
            dx.update(self._lag_stage(x, self.thruster_flow(ctx.mass_flows))[1])
        return Contribution(bs, lambda rDDot_BN_B, omegaDot_BN_B: dx)

    def energy_momentum(self, x, ctx: HubContext) -> EnergyMomentum:
        m, _, r, I_c = self._geometry(x, jnp.zeros(()))
        omega = ctx.omega_BN_B
        r_dot = cross3(omega, r)
        I_w = mv3(I_c, omega)
        return EnergyMomentum(
            I_w + m * cross3(r, r_dot), 0.5 * dot3(omega, I_w) + 0.5 * m * dot3(r_dot, r_dot)
        )

    def outputs(self, x, ctx: HubContext) -> dict:
        m_out = self.consumption(x, ctx.t, ctx.args, ctx.mass_flows)
        m, _, r, I_c = self._geometry(x, -m_out)
        return {
            "fuelMass": m,
            "fuelMassDot": -m_out,
            "maxFuelMass": self.model.max_fuel_mass,
            "r_TcB_B": r,
            "ITankPntT_B": I_c,
        }

    def step_map(self, t, x):
        """Clamp the fuel mass at 0 after each step (Basilisk resets a negative mass state to 0);
        with `basilisk_lag`, reset the stage counters (`flow_prev` keeps the last stage's flow)."""
        new = dict(x)
        new["mass"] = jnp.maximum(x["mass"], 0.0)
        if self.basilisk_lag:
            z = jnp.zeros_like(x["lag_h"])
            new.update(lag_h=z, lag_n=z, lag_flow_h=z)
        return new, {}
