r"""A cluster of `n` thrusters fixed on the hub (Basilisk `thrusterDynamicEffector`, simplified)."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxsim.signals import AbstractSignal, breakpoints_of, evaluate
from jaxsim.validation import (
    as_array,
    check_name,
    check_positive,
    check_unit_vectors,
    fail,
    is_concrete,
)

from ._effector import AbstractDynamicEffector
from ._types import ForceTorque, HubContext, MassContext


# Standard gravity [m/s^2] in the rocket equation mdot = F / (Isp g0) (CGPM 1901, exact).
G0 = 9.80665


class Thrusters(AbstractDynamicEffector):
    r"""`n` thrusters, vectorized: thruster $i$ at $\mathbf r_{T_i/B}$ pushes the spacecraft along
    $+\hat{\mathbf t}_i$ with
    $$\mathbf F_i = u_i F_{\max,i}\,\hat{\mathbf t}_i,\qquad
    \mathbf F_B = \sum_i \mathbf F_i \ \text{(through } B\text{)},\qquad
    \boldsymbol\tau_B = \sum_i \mathbf r_{T_i/B}\times\mathbf F_i,\qquad
    \dot m_i = \frac{u_i F_{\max,i}}{I_{sp,i}\,g_0},$$
    all in $\mathcal B$ components, $g_0 = 9.80665$ m/s^2. The throttle $u_i\in[0,1]$ is the sum of
    the `throttle` argument (a constant or a signal of time) and the flight-software command
    `args[name]["throttle"]` (when `args` is a dict holding it), clipped to $[0, 1]$.

    **Arguments:**

    - `r_TB_B`: thruster locations relative to $B$ [m], shape `(n, 3)`, $\mathcal B$ components.
    - `tHat_B`: unit thrust directions [-], shape `(n, 3)` (the force on the spacecraft is along
      $+\hat{\mathbf t}$, i.e. opposite to the exhaust).
    - `max_thrust`: $F_{\max}$ [N] > 0, shape `(n,)`.
    - `Isp`: specific impulse [s] > 0, shape `(n,)`.
    - `throttle`: default `None` (0); a constant in $[0,1]$ of shape `()` or `(n,)`, or a signal of
      time (e.g. `jaxsim.PiecewiseConstant` for the fixed-step driver, `jaxsim.PiecewiseTable` /
      `jaxsim.Step` with possibly traced switch times for the hybrid driver) returning a value of
      shape `()` or `(n,)`. Its switch times are the effector's `breakpoints()`.
    - `name`: unique effector name.

    **Outputs:** `throttle` `(n,)`, `thrust_B` per-thruster force [N] `(n, 3)`, `force_B` [N],
    `torque_B` [N m], `mDot` [kg/s] `(n,)` and `mDot_total` [kg/s].

    **Assumptions and limitations:** the mass flow is **reported only**: the spacecraft mass,
    centre of mass and inertia do not change (no fuel-tank state effector, no exhaust momentum
    terms); thrust is on/off-proportional to the throttle with no ramp-up/down, minimum impulse bit,
    pulse-width modulation or plume impingement; thrusters are rigidly fixed to the hub (no
    gimbals); the force acts through $B$ and its moment arm is carried by `torque_B`.

    **Reference:** Basilisk `thrusterDynamicEffector` (`ThrusterDynamicEffector.cpp`, steady-state
    thrust branch); Sutton & Biblarz, *Rocket Propulsion Elements*, 9th ed., eq. 2-5 ($\dot m =
    F/(I_{sp} g_0)$).
    """

    r_TB_B: Float[Array, "n 3"]
    tHat_B: Float[Array, "n 3"]
    max_thrust: Float[Array, " n"]
    Isp: Float[Array, " n"]
    throttle: object
    name: str = eqx.field(static=True)

    @property
    def commands(self) -> dict:
        """The keys read from `args[name]` and the shapes they broadcast to (`simulate` checks)."""
        return {"throttle": (self.n,)}

    def __init__(self, r_TB_B, tHat_B, max_thrust, Isp, throttle=None, *, name="thrusters"):
        cls = "Thrusters"
        self.r_TB_B = as_array(cls, "r_TB_B", r_TB_B, "m", (None, 3))
        n = self.r_TB_B.shape[0]
        if n < 1:
            raise ValueError(
                f"{cls}: `r_TB_B` [m] must hold at least one thruster; got shape (0, 3)."
            )
        tHat = as_array(cls, "tHat_B", tHat_B, "-", (n, 3))
        self.tHat_B = check_unit_vectors(cls, "tHat_B", tHat)
        Fmax = as_array(cls, "max_thrust", max_thrust, "N", (n,))
        self.max_thrust = check_positive(cls, "max_thrust", Fmax, "N")
        self.Isp = check_positive(cls, "Isp", as_array(cls, "Isp", Isp, "s", (n,)), "s")
        if throttle is None:
            throttle = jnp.zeros(n)
        elif not (isinstance(throttle, AbstractSignal) or callable(throttle)):
            u = as_array(cls, "throttle", throttle, "-")
            if u.shape not in ((), (n,)):
                raise ValueError(
                    f"{cls}: `throttle` must have shape () or ({n},) [-]; got shape {u.shape}."
                )
            if is_concrete(u) and bool(jnp.any((u < 0) | (u > 1))):
                fail(cls, "throttle", "must be in [0, 1]", "-", u)
            throttle = jnp.broadcast_to(u, (n,))
        self.throttle = throttle
        self.name = check_name(cls, "name", name)

    @property
    def n(self) -> int:
        return self.r_TB_B.shape[0]

    def throttle_at(self, ctx: HubContext | MassContext):
        """Throttle $u\\in[0,1]$ per thruster, shape `(n,)`: signal/constant plus command, clipped."""
        u = jnp.broadcast_to(evaluate(self.throttle, ctx.t), (self.n,))
        cmd = ctx.args.get(self.name, {}) if isinstance(ctx.args, dict) else {}
        u = u + jnp.broadcast_to(jnp.asarray(cmd.get("throttle", 0.0)), (self.n,))
        return jnp.clip(u, 0.0, 1.0)

    def mass_flow(self, mctx: MassContext) -> Float[Array, " n"]:
        r"""Mass flow per thruster $\dot m_i = u_i F_{\max,i}/(I_{sp,i} g_0)$ [kg/s], shape `(n,)`, $\ge 0$.

        The mass-flow protocol of thruster effectors: a fuel tank linked to thrusters calls
        `mass_flow(mctx)` on each of them, with the `MassContext` (`t`, `args`, `states`) it is given
        in its own `mass_props`, and drains the sum. The value equals the `mDot` output at the same
        time and commands (the throttle at `mctx.t` from the signal plus `args[name]`). It reads only
        `mctx.t` and `mctx.args`, so it can be evaluated before the hub state is known.
        """
        return self.throttle_at(mctx) * self.max_thrust / (self.Isp * G0)

    def _loads(self, ctx: HubContext):
        u = self.throttle_at(ctx)
        thrust = u * self.max_thrust
        F_i = thrust[:, None] * self.tHat_B
        tau = jnp.sum(jnp.cross(self.r_TB_B, F_i), axis=0)
        return u, F_i, jnp.sum(F_i, axis=0), tau, thrust / (self.Isp * G0)

    def force_torque(self, ctx: HubContext) -> ForceTorque:
        _, _, F_B, tau_B, _ = self._loads(ctx)
        return ForceTorque(jnp.zeros(3), F_B, tau_B)

    # Units of the `outputs` entries (`output_units()`).
    OUTPUT_UNITS = {
        "throttle": "-",
        "thrust_B": "N",
        "force_B": "N",
        "torque_B": "N m",
        "mDot": "kg/s",
        "mDot_total": "kg/s",
    }

    def outputs(self, ctx: HubContext) -> dict:
        u, F_i, F_B, tau_B, mdot = self._loads(ctx)
        return {
            "throttle": u,
            "thrust_B": F_i,
            "force_B": F_B,
            "torque_B": tau_B,
            "mDot": mdot,
            "mDot_total": jnp.sum(mdot),
        }

    def breakpoints(self):
        return breakpoints_of(self.throttle)
