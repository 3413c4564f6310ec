r"""Small pytrees exchanged between the spacecraft hub and its effectors (all $\mathcal B$ components).

Notation (Basilisk's; see the conventions page of the documentation, `docs/conventions.md`, and
Schaub & Junkins, *Analytical Mechanics of Space Systems*): $B$ body origin, $C$ composite centre of mass,
$\mathbf c = \mathbf r_{C/B}$; primes are body-frame derivatives.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
from jaxtyping import Array, Float


class _Summable(eqx.Module):
    def __add__(self, other):
        return jtu.tree_map(lambda a, b: a + b, self, other)


class MassProps(_Summable):
    r"""Mass properties of one or several bodies about point $B$, summed over bodies.

    - `mass` [kg], `mass_dot` [kg/s];
    - `first_moment` $\sum m_i \mathbf r_{c_i/B}$ [kg m], `first_moment_prime` $\sum m_i \mathbf r'_{c_i/B}$ [kg m/s];
    - `inertia_B` $\sum [I_{i,B}]$ about $B$ [kg m^2], `inertia_prime_B` its body-frame rate [kg m^2/s];
    - `first_moment_depletion` [kg m/s] (default 0): what the retained mass's first-moment rate
      $\frac{d}{dt}\sum m_i\mathbf r_{c_i/B}$ (body frame) adds to `first_moment_prime`:
      $\sum\dot m_i\mathbf r_{c_i/B}$, and the centre-of-mass motion of a variable-mass body that
      its `first_moment_prime` leaves out;
    - `mass_dot_omitted` [kg/s] (default 0): the part of `mass_dot` that the hub equations leave
      out (an update-only fuel tank's flow).

    `first_moment_prime`, `inertia_prime_B` and `mass_dot - mass_dot_omitted` are the rates the hub
    equations use (Basilisk's variable-mass approximation: a fuel tank reports no $\mathbf r'$ or
    $[I]'$ there). The reported $\mathbf c'$ (hence $\dot{\mathbf c}$, `v_CN_N`, the energy and
    momentum outputs and the initial $\mathbf v_{B/N}$) is the derivative of the retained mass's
    centre of mass, $(\sum m_i\mathbf r'_i + \sum\dot m_i\mathbf r_i)/m - \dot m\,\mathbf c/m$
    with the whole `mass_dot` (`Spacecraft.context`), as Basilisk reports it.
    """

    mass: Float[Array, ""]
    mass_dot: Float[Array, ""]
    first_moment: Float[Array, "3"]
    first_moment_prime: Float[Array, "3"]
    inertia_B: Float[Array, "3 3"]
    inertia_prime_B: Float[Array, "3 3"]
    first_moment_depletion: Float[Array, "3"] = eqx.field(default_factory=lambda: jnp.zeros(3))
    mass_dot_omitted: Float[Array, ""] = eqx.field(default_factory=lambda: jnp.zeros(()))

    @classmethod
    def zeros(cls):
        z3, z33 = jnp.zeros(3), jnp.zeros((3, 3))
        return cls(jnp.zeros(()), jnp.zeros(()), z3, z3, z33, z33)


class BackSub(_Summable):
    r"""Back-substitution contributions $[A], [B], [C], [D]$ (3x3), $\mathbf v_{trans}$, $\mathbf v_{rot}$.

    They enter $\begin{bmatrix}A & B\\ C & D\end{bmatrix}\begin{bmatrix}{}^B\ddot{\mathbf r}_{B/N}\\
    \dot{\boldsymbol\omega}\end{bmatrix} = \begin{bmatrix}\mathbf v_{trans}\\ \mathbf v_{rot}\end{bmatrix}$.
    """

    A: Float[Array, "3 3"]
    B: Float[Array, "3 3"]
    C: Float[Array, "3 3"]
    D: Float[Array, "3 3"]
    v_trans: Float[Array, "3"]
    v_rot: Float[Array, "3"]

    @classmethod
    def zeros(cls):
        z3, z33 = jnp.zeros(3), jnp.zeros((3, 3))
        return cls(z33, z33, z33, z33, z3, z3)


class ForceTorque(_Summable):
    r"""Loads of a dynamic effector: `force_N` ($\mathcal N$ comps) and `force_B` ($\mathcal B$ comps) [N],
    both acting through point $B$, and `torque_B` about $B$ [N m]."""

    force_N: Float[Array, "3"]
    force_B: Float[Array, "3"]
    torque_B: Float[Array, "3"]

    @classmethod
    def zeros(cls):
        z3 = jnp.zeros(3)
        return cls(z3, z3, z3)


class EnergyMomentum(_Summable):
    r"""Energy/momentum contribution of bodies (Basilisk `updateEnergyMomContributions`).

    - `H_B`: $\sum [I_{i,c_i}]\boldsymbol\omega_{i/N} + m_i \mathbf r_{c_i/B}\times\dot{\mathbf r}_{c_i/B}$ [kg m^2/s];
    - `E`: kinetic energy relative to $B$'s translation plus internal potential (springs) [J].
    """

    H_B: Float[Array, "3"]
    E: Float[Array, ""]

    @classmethod
    def zeros(cls):
        return cls(jnp.zeros(3), jnp.zeros(()))


class MassContext(eqx.Module):
    r"""What a state effector's `mass_props` may read: everything known before the composite mass
    properties are (a variable-mass model needs the time, the commands and the states).

    - `t` [s]; `args`: the `args` of the solve (commands; `None` outside a solve);
    - `states`: the spacecraft's state dict `{"hub": ..., <effector name>: ...}` (at
      `Spacecraft.init_state` the `"hub"` entry is absent: the hub state is built from the mass
      properties);
    - `mass_flows`: `{effector name: mass flow [kg/s]}` of the effectors that state effectors drain
      (e.g. the thrusters named by a `FuelTank`), each evaluated once by `Spacecraft` from the same
      `t`, `args` and `states` (`mass_flow(mctx)`); `None` outside a spacecraft;
    - `supply`: `{effector name: 1.0 or 0.0}` for the effectors whose propellant a state effector
      supplies (`supplies(x)`, e.g. the thrusters fed by a `FuelTank`): 0 while a supplying tank
      is empty (the effector starves); `None`, or a name absent, means supplied.
    """

    t: Any
    args: Any = None
    states: Any = None
    mass_flows: Any = None
    supply: Any = None


class Contribution(NamedTuple):
    r"""One state effector's part of one derivative evaluation (`AbstractStateEffector.contribute`).

    - `back_sub`: its `BackSub` terms, summed into the hub's system;
    - `derivative`: `derivative(rDDot_BN_B, omegaDot_BN_B) -> state derivative`, called once with the
      solved hub accelerations; a closure over what the back-substitution terms computed, so that
      nothing is evaluated twice.
    """

    back_sub: BackSub
    derivative: Callable[[Array, Array], Any]


class HubContext(eqx.Module):
    r"""Everything an effector may read at one derivative evaluation (hub state and mass properties).

    - `t` [s]; `args`: the `args` of the solve (commands);
    - `r_BN_N`, `v_BN_N` [m, m/s]: hub states (relative to the integration origin);
    - `r_origin_N`, `v_origin_N`: position/velocity of the integration origin in $\mathcal N$
      (the central gravity body, else zero);
    - `sigma_BN`, `omega_BN_B` [rad/s], `dcm_BN` $=[BN]$;
    - `m_sc` [kg], `mDot_sc` [kg/s], `c_B`, `cPrime_B`, `cDot_B` [m, m/s], `ISC_B`, `ISCPrime_B` [kg m^2] about $B$;
      with variable mass, `mDot_sc`, `cPrime_B` and `ISCPrime_B` are the rates of the hub equations
      ($\sum m_i\mathbf r'_i/m_{sc} - \dot m_{sc}\mathbf c/m_{sc}$, Basilisk's approximation; an
      update-only tank's flow is not in `mDot_sc`) while
      `cDot_B` $=\mathbf c'_{ret} + \boldsymbol\omega\times\mathbf c$ uses the derivative of the
      retained mass's centre of mass $\mathbf c'_{ret}$ (`MassProps.first_moment_depletion`), as
      Basilisk reports it; without variable mass $\mathbf c'_{ret} =$ `cPrime_B`;
    - `r_CN_N`, `v_CN_N`: composite CoM relative to the integration origin (`v_CN_N` from `cDot_B`);
    - `g_N`: gravitational acceleration of $C$ [m/s^2] ($\mathcal N$ comps), `g_B` the same in $\mathcal B$;
    - `states`: the spacecraft's whole state dict `{"hub": ..., <effector name>: ...}` (default `None`
      when built outside `Spacecraft.context`), so that an effector can read another effector's
      state by name (e.g. `Drag` reads the density-correction noise state; see `reads_states`);
    - `mass_flows`: the `MassContext.mass_flows` the mass properties were computed with (`None`
      when built outside `Spacecraft.context`); `supply`: the `MassContext.supply`.
    """

    t: Any
    args: Any
    r_BN_N: Array
    v_BN_N: Array
    r_origin_N: Array
    v_origin_N: Array
    sigma_BN: Array
    omega_BN_B: Array
    dcm_BN: Array
    m_sc: Array
    mDot_sc: Array
    c_B: Array
    cPrime_B: Array
    cDot_B: Array
    ISC_B: Array
    ISCPrime_B: Array
    r_CN_N: Array
    v_CN_N: Array
    g_N: Array
    g_B: Array
    states: Any = None
    mass_flows: Any = None
    supply: Any = None

    @property
    def dcm_NB(self):
        return self.dcm_BN.T

    @property
    def IC_B(self):
        r"""Composite inertia about $C$: $[I_{sc,B}] - m_{sc}[\tilde c][\tilde c]^T$."""
        c = self.c_B
        c2 = jnp.sum(c * c, axis=-1)  # not c[0] ** 2 + ...: indexing costs kernels in reverse mode
        return self.ISC_B - self.m_sc * (c2 * jnp.eye(3) - c[:, None] * c[None, :])


def supplied(ctx, name):
    """The supply factor (1.0 or 0.0) of effector `name` in a `MassContext` or `HubContext`: 0.0
    while a tank that supplies it and starves it is empty, 1.0 otherwise (also outside a
    spacecraft)."""
    supply = getattr(ctx, "supply", None)
    if supply is None or name not in supply:
        return 1.0
    return supply[name]
