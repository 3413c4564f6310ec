r"""Thrusters with a first-order thrust ramp as a state effector (Basilisk `thrusterStateEffector`).

Each thruster $i$ carries a thrust factor $\kappa_i\in[0,1]$ with

$$\dot\kappa_i = \omega_{c,i}\,\big(s_i(t) - \kappa_i\big),$$

$s_i(t)\in\{0,1\}$ the firing state of the on-time command in force (Basilisk
`thrusterStateEffector`'s rule: fires iff $T_i > 0$ and $(t_c + T_i) - \tau \ge 0$ at the stage
time $\tau$, exactly, in Basilisk's floating point on the fixed-step path; not the tolerance test
of `thrusterDynamicEffector` that `Thrusters` uses, module docstring of
`effectors._actuators._thrusters`), $\omega_{c,i}$ the cutoff frequency [rad/s]. The thrust is
$F_i = \kappa_i F_{\max,i}$ along $\hat{\mathbf t}_i$, continuous in time: adaptive solvers and
gradients see a smooth thrust (the switch of $s_i$ is a kink in $\kappa_i$, not a jump in the
force).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.signals import breakpoints_of, held_time
from jaxsim.validation import as_array, check_name, check_positive, fail, is_concrete

from .._spacecraft._contract import AbstractStateEffector, require_fixed_rk4
from .._spacecraft._physical import nonnegative, positive
from .._spacecraft._types import BackSub, Contribution, HubContext, MassContext, supplied
from ._thrusters import (
    G0,
    STATE_RULE,
    OnTimeSchedule,
    _on_time_window,
    _thruster_arrays,
    basilisk_stage_times,
    basilisk_window,
    on_time_command_state,
    thruster_loads,
)


class ThrusterStateEffector(AbstractStateEffector):
    r"""`n` hub-fixed thrusters whose thrust factors $\kappa_i$ follow a first-order ramp
    (Basilisk `thrusterStateEffector`):

    $$\dot\kappa_i = \omega_{c,i}(s_i - \kappa_i),\qquad \mathbf F_i = \kappa_i F_{\max,i}\hat{\mathbf t}_i,
    \qquad \dot m_i = \frac{\kappa_i F_{\max,i}}{I_{sp,i} g_0},$$

    the force through $B$ and the torque $\sum_i \mathbf r_{T_i/B}\times\mathbf F_i + \kappa_i\tau_{s,i}
    \hat{\mathbf t}_i$ (plus the exhaust terms of `thruster_loads` with `depletion_loads`), entering
    the hub equations as back-substitution vectors $\mathbf v_{trans}$, $\mathbf v_{rot}$. $s_i$ is the
    firing state of the on-time command (Basilisk `thrusterStateEffector`'s exact end test, not the
    tolerance test of `Thrusters`; module docstring): from
    `commands` (an `OnTimeSchedule`) and from flight software writing `args[name]["on_time"]`,
    `["on_time_start"]` (e.g. `OnTimeFSW`), summed and clipped to $[0, 1]$.

    **Arguments:**

    - `r_TB_B` (n, 3) [m], `tHat_B` (n, 3) [-] unit, `max_thrust` (n,) [N] > 0, `Isp` (n,) [s] > 0:
      as `Thrusters`.
    - `cutoff_frequency`: $\omega_c$ [rad/s] > 0, shape `()` or `(n,)` (Basilisk `cutoffFrequency`).
    - `commands`: an `OnTimeSchedule` (command times and windows ends are `breakpoints()`), or
      None (flight-software commands only).
    - `kappa0`: initial thrust factors in $[0, 1]$, shape `()` or `(n,)` (default 0).
    - `swirl_torque` [N m], `area_nozzle` [m^2], `depletion_loads`: as `Thrusters`.
    - `basilisk_hold`: reproduce Basilisk's time discretisation (default False, the continuous
      model above). Basilisk computes the thrust once per step, after the step
      (`calcForceTorqueOnBody` in the spacecraft's post-integration), from the thrust factor of the
      last derivative evaluation (the RK4 fourth stage, $\kappa_k + h\,k_3$), and holds it over the
      next step; $\kappa$ itself is integrated as above. With `basilisk_hold=True` the state adds
      that held factor and the step start ($\kappa_k$, $t_k$), and the step map recomputes the
      fourth stage of the step just taken (RK4 stages at $t_k$, $t_k + h/2$, $t_k + h$), so a
      fixed-step RK4 run equals Basilisk's to round-off. Only for RK4 with `commands` (the step
      map cannot read flight-software commands in `args`), a run starting at $t = 0$, and without
      `depletion_loads` (Basilisk evaluates those with the rate at the step end; here at the
      stage).
    - `name`: unique effector name.

    **State:** `{"kappa": (n,)}` [-] (plus `"kappa_held"`, `"kappa_start"` [-], `"t_start"` [s]
    with `basilisk_hold`).

    **Commands** (`args[name]`): `on_time` (n,) [s], `on_time_start` () [s].

    **Mass flow:** `mass_flow(mctx)` (n,) [kg/s] from $\kappa$ in `mctx.states[name]`: the
    protocol a fuel tank calls on the thrusters it feeds.

    **Outputs:** `kappa` (n,), `thrust_B` (n, 3) [N], `force_B` [N], `torque_B` [N m], `mDot` (n,)
    and `mDot_total` [kg/s].

    **Assumptions and limitations:** the hub's mass does not change here (a fuel tank drains the
    mass flow); no Isp or thrust blow-down, no dispersions; thrusters fixed to the hub. Basilisk's
    fuel tank drains the flow of the thrust factor of the *previous* derivative evaluation (one
    stage late); `mass_flow` is that of the current state, and `FuelTank(basilisk_lag=True)`
    applies Basilisk's lag. `MinOnTime` with `OnTimeSchedule` uses the command window as
    "firing", whereas Basilisk's state effector uses $\kappa > 10^{-5}$ (use
    `OnTimeFSW(firing_state=(name, "kappa"))` for Basilisk's rule).

    **Reference:** Basilisk `thrusterStateEffector` (`thrusterStateEffector.cpp` and its
    documentation: first-order thrust factor, `cutoffFrequency`).
    """

    r_TB_B: Float[Array, "n 3"]
    tHat_B: Float[Array, "n 3"]
    max_thrust: Float[Array, " n"]
    Isp: Float[Array, " n"]
    cutoff_frequency: Float[Array, " n"]
    commands_schedule: OnTimeSchedule | None
    kappa0: Float[Array, " n"]
    swirl_torque: Float[Array, " n"]
    area_nozzle: Float[Array, " n"]
    depletion_loads: bool = eqx.field(static=True)
    basilisk_hold: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)

    ELEMENT_DIM = "thruster"  # one entry per unit in result datasets
    UNITS = {
        "kappa": "-",
        "kappa_held": "-",
        "kappa_start": "-",
        "t_start": "s",
        "thrust_B": "N",
        "force_B": "N",
        "torque_B": "N m",
        "mDot": "kg/s",
        "mDot_total": "kg/s",
        "on_time": "s",
        "on_time_start": "s",
    }

    def init_commands(self) -> dict:
        """`{"on_time": zeros (n,) [s], "on_time_start": 0 [s]}`: the commands read from
        `args[name]`."""
        return {"on_time": jnp.zeros(self.n), "on_time_start": jnp.zeros(())}

    def __init__(
        self,
        r_TB_B: Float[ArrayLike, "n 3"],
        tHat_B: Float[ArrayLike, "n 3"],
        max_thrust: Float[ArrayLike, "*n"],
        Isp: Float[ArrayLike, "*n"],
        cutoff_frequency: Float[ArrayLike, "*n"],
        commands: OnTimeSchedule | None = None,
        *,
        kappa0: Float[ArrayLike, "*n"] = 0.0,
        swirl_torque: Float[ArrayLike, "*n"] = 0.0,
        area_nozzle: Float[ArrayLike, "*n"] = 0.0,
        depletion_loads: bool = False,
        basilisk_hold: bool = False,
        name: str = "thrusters",
    ):
        cls = "ThrusterStateEffector"
        arrays = _thruster_arrays(cls, r_TB_B, tHat_B, max_thrust, Isp, swirl_torque, area_nozzle)
        self.r_TB_B, self.tHat_B, self.max_thrust, self.Isp, self.swirl_torque = arrays[:5]
        self.area_nozzle = arrays[5]
        n = self.r_TB_B.shape[0]
        wc = as_array(cls, "cutoff_frequency", cutoff_frequency, "rad/s")
        if wc.shape not in ((), (n,)):
            raise ValueError(
                f"{cls}: `cutoff_frequency` [rad/s] must have shape () or ({n},); got {wc.shape}."
            )
        self.cutoff_frequency = check_positive(
            cls, "cutoff_frequency", jnp.broadcast_to(wc, (n,)), "rad/s"
        )
        if commands is not None:
            if not isinstance(commands, OnTimeSchedule):
                raise ValueError(
                    f"{cls}: `commands` must be an OnTimeSchedule or None; got "
                    f"{type(commands).__name__}."
                )
            if commands.n not in (1, n):
                raise ValueError(
                    f"{cls}: `commands` must command 1 or {n} thrusters (columns of `on_times` "
                    f"[s]); got {commands.n}."
                )
        self.commands_schedule = commands
        k0 = as_array(cls, "kappa0", kappa0, "-")
        if k0.shape not in ((), (n,)):
            raise ValueError(f"{cls}: `kappa0` [-] must have shape () or ({n},); got {k0.shape}.")
        if is_concrete(k0) and bool(jnp.any((k0 < 0) | (k0 > 1))):
            fail(cls, "kappa0", "must be in [0, 1]", "-", k0)
        self.kappa0 = jnp.broadcast_to(k0, (n,))
        self.depletion_loads = bool(depletion_loads)
        self.basilisk_hold = bool(basilisk_hold)
        if self.basilisk_hold and commands is None:
            raise ValueError(
                f"{cls}: `basilisk_hold=True` needs `commands` (an OnTimeSchedule): its step map "
                "recomputes the last stage from the schedule; got commands=None."
            )
        if self.basilisk_hold and self.depletion_loads:
            raise ValueError(
                f"{cls}: `basilisk_hold=True` does not support `depletion_loads=True` (Basilisk "
                "evaluates them with the step-end rate); got both."
            )
        self.name = check_name(cls, "name", name)

    @property
    def n(self) -> int:
        return self.r_TB_B.shape[0]

    def init_state(self, **overrides):
        kappa = jnp.asarray(overrides.get("kappa", self.kappa0), dtype=float)
        x = {"kappa": jnp.broadcast_to(kappa, (self.n,))}
        if self.basilisk_hold:
            x["kappa_held"] = x["kappa"]
            x["kappa_start"] = x["kappa"]
            x["t_start"] = jnp.zeros(())
        return x

    def _schedule_state(self, t, t_select, tau=None):
        """Firing state (n,) of `commands` at `t`, with the command in force at `t_select`
        (Basilisk `thrusterStateEffector`'s end test, `STATE_RULE`; at Basilisk's stage time
        `tau` when given)."""
        sched = self.commands_schedule
        if sched is None:
            return jnp.zeros(self.n)
        T = sched.effective()
        k = jnp.searchsorted(sched.times, t_select, side="right") - 1
        kk = jnp.clip(k, 0, sched.times.shape[0] - 1)
        if tau is None:
            on = _on_time_window(T[kk], sched.times[kk], t, STATE_RULE)
        else:
            on = jnp.where(basilisk_window(T[kk], sched.times[kk], tau, tau, STATE_RULE), 1.0, 0.0)
        on = jnp.where(k >= 0, on, 0.0)
        return jnp.broadcast_to(on, (self.n,))

    def firing(self, t, args):
        """$s_i(t)$ (n,): the schedule's and the flight-software command's firing states, clipped."""
        s = self._schedule_state(t, held_time(t)) + on_time_command_state(
            self.name, args, self.n, t, STATE_RULE
        )
        return jnp.clip(s, 0.0, 1.0)

    def physical_checks(self, x=None) -> dict:
        """`{quantity: traced bool}` (read by `Spacecraft.validity`): `max_thrust` and `Isp` > 0,
        `area_nozzle` >= 0, `cutoff_frequency` > 0."""
        return {
            "max_thrust": positive(self.max_thrust),
            "Isp": positive(self.Isp),
            "area_nozzle": nonnegative(self.area_nozzle),
            "cutoff_frequency": positive(self.cutoff_frequency),
        }

    def mass_flow(self, mctx: MassContext) -> Float[Array, " n"]:
        r"""Mass flow per thruster $\kappa_i F_{\max,i}/(I_{sp,i} g_0)$ [kg/s], shape `(n,)`, $\ge 0$,
        from the thrust factors in `mctx.states[name]` (the thruster mass-flow protocol a fuel
        tank calls; equals the `mDot` output)."""
        kappa = mctx.states[self.name]["kappa"]
        return jnp.maximum(kappa, 0.0) * self.max_thrust / (self.Isp * G0)

    def _loads(self, x, ctx: HubContext):
        kappa = x["kappa_held"] if self.basilisk_hold else x["kappa"]
        thrust = kappa * self.max_thrust
        mdot = jnp.maximum(x["kappa"], 0.0) * self.max_thrust / (self.Isp * G0)
        F_i, F, tau = thruster_loads(
            self.r_TB_B,
            self.tHat_B,
            thrust,
            mdot,
            ctx.omega_BN_B,
            kappa * self.swirl_torque,
            self.area_nozzle,
            self.depletion_loads,
        )
        return F_i, F, tau, mdot

    def contribute(self, x, ctx: HubContext) -> Contribution:
        _, F, tau, _ = self._loads(x, ctx)
        z33 = jnp.zeros((3, 3))
        bs = BackSub(z33, z33, z33, z33, F, tau)
        # A starved set (its tank empty, `FuelTank(starve_thrusters=True)`) shuts down: the
        # commanded firing state drops to 0 and the thrust factor decays as after a command end.
        s = self.firing(ctx.t, ctx.args) * supplied(ctx, self.name)
        kdot = self.cutoff_frequency * (s - x["kappa"])

        def derivative(rDDot_BN_B, omegaDot_BN_B):
            dx = {"kappa": kdot}
            if self.basilisk_hold:
                dx["kappa_held"] = jnp.zeros(self.n)
                dx["kappa_start"] = jnp.zeros(self.n)
                dx["t_start"] = jnp.zeros(())
            return dx

        return Contribution(bs, derivative)

    def step_map(self, t, x):
        """With `basilisk_hold`: the held thrust factor becomes the fourth RK4 stage of the step
        that just ended ($\\kappa_k + h k_3$, recomputed from $\\kappa_k$, $t_k$ and the schedule),
        and the step start moves to `t`."""
        if not self.basilisk_hold:
            return x, {}
        t = jnp.asarray(t, dtype=float)
        t0, k0 = x["t_start"], x["kappa_start"]
        h = t - t0
        mid = t0 + 0.5 * h
        wc = self.cutoff_frequency
        # The firing states at the stages, at Basilisk's stage times (as the drift saw them).
        tau1 = basilisk_stage_times(t0, t, 0.0, 0.0, False)[0]
        tau2 = basilisk_stage_times(t0, t, 0.5, 0.0, False)[0]
        s1 = self._schedule_state(t0, mid, tau1)
        s2 = self._schedule_state(mid, mid, tau2)
        k1 = wc * (s1 - k0)
        k2 = wc * (s2 - (k0 + 0.5 * h * k1))
        k3 = wc * (s2 - (k0 + 0.5 * h * k2))
        new = dict(x)
        new["kappa_held"] = k0 + h * k3
        new["kappa_start"] = x["kappa"]
        new["t_start"] = t
        return new, {}

    def outputs(self, x, ctx: HubContext) -> dict:
        F_i, F, tau, mdot = self._loads(x, ctx)
        return {
            "kappa": x["kappa"],
            "thrust_B": F_i,
            "force_B": F,
            "torque_B": tau,
            "mDot": mdot,
            "mDot_total": jnp.sum(mdot),
        }

    def check_solver(self, solver, dt) -> None:
        if self.basilisk_hold:
            require_fixed_rk4(self, "basilisk_hold", solver, dt)

    def breakpoints(self):
        return breakpoints_of(self.commands_schedule)
