r"""Thruster sets fixed on the hub, commanded by throttle or by Basilisk on-time commands
(Basilisk `thrusterDynamicEffector`), and the pieces shared with `ThrusterStateEffector`.

**On-time commands (Basilisk's rule).** A command issued at $t_c$ with on-time $T_i \ge 0$ for
thruster $i$ replaces the previous command of that thruster. A thruster fires at an evaluation
time $\tau \ge t_c$ of the drift (an integration stage) iff

$$T_i > 0 \quad\text{and}\quad \tau \le t_c + T_i ,$$

the window is closed at its end. Basilisk reads the command in the thruster module's
`UpdateState` at the dynamics tick that follows the write and starts the firing at the time the
message was *written*; with the dynamics task ahead of the flight-software task this is the
first stage of the step that starts at $t_c$, and what jaxsim's held outputs give: a command
written by a discrete model at a clock tick $t_c$ acts from the first stage after $t_c$. With the
RK4 stages at $t_k$, $t_k + h/2$ (twice), $t_k + h$:

- a window ending at a step end $t_{k+1}$ is seen by the last stage of that step, and by the
  first stage of the next step when the two stage times compare as equal (see below);
- a window ending at $t_k + h/2$ is seen by stages 1 to 3; one ending inside $(t_k, t_k + h/2)$
  by stage 1 only.

In floating point the end test is Basilisk's own: $(T_i + t_c) - \tau \ge -10^{-9}(\tau -
\tau_{prev})$, $\tau_{prev}$ the time of the previous evaluation, with Basilisk's stage times
$\tau = t_k + c\,h$ where $t_k$ and $h$ are integer nanoseconds times $10^{-9}$. On the fixed-step
path jaxsim evaluates exactly that (`_on_time_window`, from the stage clock
`jaxsim.signals.stage_clock`), so at any step size a window ending on a step end, a half step or
inside a step fires at the same stages as in Basilisk. E.g. at $h = 0.01$ s the last stage of the
step ending at 17.5 s is at 17.500000000000004 (within the tolerance: on) and the first stage of
the next step at 17.5 follows it ($\tau - \tau_{prev} < 0$: a window ending at 17.5 is off there).
On the adaptive path, and at the first stage just past a segment boundary of a segmented run
(`discontinuities=`: window ends as segment edges), the window is compared exactly at the
evaluation time.

Basilisk's `thrusterStateEffector` (`ThrusterStateEffector`) decides its firing state by its own
test, $(t_c + T_i) - \tau \ge 0$ at the same stage times, without the tolerance: there a window
ending on a step end is off at that step's last stage when its time rounds above the end, and on
at the next step's first stage. Each kind keeps its module's test (`DYNAMIC_RULE`, `STATE_RULE`).

**Minimum on-time** (`MinOnTime`): a requested $T_i$ below the thruster's minimum on-time is
honoured only if the thruster is firing when the command arrives (the previous window covers
$t_c$); otherwise it becomes 0 (no firing). A request $\ge$ the minimum always replaces the previous
window, and $T_i = 0$ with a zero minimum stops a firing.

Two ways to command on-times: an `OnTimeSchedule` (commands at given times, a signal of time
passed as `throttle`; its command times and window ends are breakpoints, so with
`simulate(..., discontinuities=[model])` they may be traced and differentiated), or flight
software on a clock writing `args[name]["on_time"]` (n,) [s] and `args[name]["on_time_start"]`
() [s] (the issue time), e.g. `OnTimeFSW`.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim import AbstractClock, AbstractDiscreteModel
from jaxsim.kinematics import cross3
from jaxsim.signals import AbstractSignal, breakpoints_of, evaluate, held_time, stage_clock
from jaxsim.validation import (
    as_array,
    check_name,
    check_nonnegative,
    check_positive,
    check_unit_vectors,
    fail,
    is_concrete,
)

from .._spacecraft._contract import AbstractDynamicEffector
from .._spacecraft._physical import nonnegative, positive
from .._spacecraft._types import ForceTorque, HubContext, MassContext, supplied
from .._spacecraft._unit_params import command


# Standard gravity [m/s^2] in the rocket equation mdot = F / (Isp g0) (CGPM 1901, exact; Basilisk's
# EARTH_GRAV).
G0 = 9.80665


# Basilisk counts time in integer nanoseconds and converts with this factor (`NANO2SEC`).
_NANO2SEC = 1e-9
# Basilisk's end-of-window tolerance per second since the previous evaluation (`dt*10E-10`).
_END_TOL = 1e-9


# The two Basilisk modules decide the firing state by different end tests (each kind of jaxsim
# thruster keeps its module's rule): `thrusterDynamicEffector` accepts a stage up to a tolerance
# past the end, `thrusterStateEffector` compares exactly.
DYNAMIC_RULE, STATE_RULE = "dynamic", "state"


def basilisk_stage_times(a, b, c, c_prev, prev_step):
    r"""`(tau, tau_prev)`: Basilisk's time of the RK stage of node `c` of the step $[a, b]$, and of
    the evaluation before it (node `c_prev` of this step, or of the previous step when
    `prev_step`): $\tau = t_k + c\,h$ with $t_k$ and $h$ integer nanoseconds times $10^{-9}$, in
    Basilisk's floating point."""
    ns_k = jnp.round(a / _NANO2SEC)
    ns_h = jnp.round((b - a) / _NANO2SEC)
    t_k = ns_k * _NANO2SEC
    h = ns_h * _NANO2SEC
    t_prev = jnp.where(prev_step, (ns_k - ns_h) * _NANO2SEC, t_k)
    return t_k + h * c, t_prev + h * c_prev


def basilisk_window(on_time, start, tau, tau_prev, rule):
    r"""Whether a command `(start, on_time)` fires at Basilisk's stage time `tau` (bool).

    The issue time is Basilisk's (integer nanoseconds times $10^{-9}$; value only, the gradient
    flows to `start`), the end $E = T + t_c$ in its floating point. `DYNAMIC_RULE`
    (`thrusterDynamicEffector`): fires while $E - \tau \ge -10^{-9}(\tau - \tau_{prev})$;
    `STATE_RULE` (`thrusterStateEffector`): while $E - \tau \ge 0$ (exact: no tolerance, so a
    last stage a round-off past $E$ is off, and a first stage of the next step at $E$ on).
    """
    start_b = start + jax.lax.stop_gradient(jnp.round(start / _NANO2SEC) * _NANO2SEC - start)
    left = on_time + start_b - tau
    if rule == STATE_RULE:
        return (on_time > 0.0) & (left >= 0.0)
    return (on_time > 0.0) & (left >= -(tau - tau_prev) * _END_TOL)


def _on_time_window(on_time, start, t, rule=DYNAMIC_RULE):
    r"""1.0 where a command `(start, on_time)` fires at `t` (Basilisk's closed window), else 0.

    Inside a fixed-step stage (`jaxsim.signals.stage_clock`) the test is Basilisk's module's own
    (`rule`: `DYNAMIC_RULE` for `Thrusters`, `STATE_RULE` for `ThrusterStateEffector`), in its
    floating point, at Basilisk's stage time (`basilisk_stage_times`, `basilisk_window`).
    Elsewhere (adaptive drivers, outputs), and at a first stage that a segment driver evaluates
    just past a segment boundary (`discontinuities=`), the window $t \le t_c + T$ is compared
    exactly.
    """
    if rule not in (DYNAMIC_RULE, STATE_RULE):
        raise ValueError(f"_on_time_window: unknown rule {rule!r}.")
    clock = stage_clock()
    if clock is None:
        return jnp.where((on_time > 0.0) & (t <= start + on_time), 1.0, 0.0)
    a, b, c, c_prev, prev_step = clock
    tau, tau_prev = basilisk_stage_times(a, b, c, c_prev, prev_step)
    basilisk = basilisk_window(on_time, start, tau, tau_prev, rule)
    # A first stage that a segment driver moved just past a segment boundary (`discontinuities=`:
    # window ends as segment edges) sees the right limit there: the exact test, as off the grid.
    past_edge = (c == 0) & (t > a)
    fires = jnp.where(past_edge, (on_time > 0.0) & (t <= start + on_time), basilisk)
    return jnp.where(fires, 1.0, 0.0)


def effective_on_times(times, on_times, min_on_time):
    r"""The on-times Basilisk applies to a sequence of commands (`MinOnTime` rule).

    `times` (K,) [s] increasing, `on_times` (K, n) [s], `min_on_time` (n,) [s]. Command $k$'s
    request $T$ is kept if $T \ge$ `min_on_time`, or if the thruster is firing at $t_k$ under the
    previous effective command; else it is 0.
    """
    out = []
    prev_T = jnp.zeros(on_times.shape[1])
    prev_t = jnp.full((), -jnp.inf)
    for k in range(times.shape[0]):
        T = on_times[k]
        firing = (prev_T > 0.0) & (times[k] <= prev_t + prev_T)
        T = jnp.where((T >= min_on_time) | firing, T, 0.0)
        out.append(T)
        prev_T, prev_t = T, times[k]
    return jnp.stack(out)


class OnTimeSchedule(AbstractSignal):
    r"""Basilisk on-time commands at given times, as a signal: $u_i(\tau) \in \{0, 1\}$, the firing
    state of thruster $i$ under the last command issued at or before $\tau$ (module docstring:
    window closed at its end, `MinOnTime` rule).

    **Arguments:**

    - `times`: command times $t_1 < \dots < t_K$ [s], shape `(K,)` (may be traced).
    - `on_times`: requested on-times [s] >= 0, shape `(K, n)` (may be traced).
    - `min_on_time`: minimum on-time per thruster [s] >= 0, shape `()` or `(n,)` (default 0).

    `breakpoints()` returns the command times and every window end $t_k + T_{k,i}$ (with
    `simulate(..., discontinuities=[model])` they become segment boundaries; traced times and
    on-times are then differentiable).

    **Assumptions and limitations:** before $t_1$ all thrusters are off. Evaluated at raw stage
    times (not the step midpoint): on the fixed-step path with command times and window ends on
    the step grid it reproduces Basilisk's per-stage rule; as segment boundaries of the clocked
    driver, an end is seen at its left limit before it and off after it (the exact piecewise
    solution, without Basilisk's first-stage sample of a window ending on a step end).
    """

    times: Float[Array, " K"]
    on_times: Float[Array, "K n"]
    min_on_time: Float[Array, " n"]

    def __init__(
        self,
        times: Float[ArrayLike, " K"],
        on_times: Float[ArrayLike, "K n"],
        min_on_time: Float[ArrayLike, "*n"] = 0.0,
    ):
        c = "OnTimeSchedule"
        self.times = as_array(c, "times", times, "s", (None,))
        K = self.times.shape[0]
        if K < 1:
            fail(c, "times", "must hold at least one command time", "s", self.times)
        if is_concrete(self.times) and K > 1 and bool(jnp.any(jnp.diff(self.times) <= 0)):
            fail(c, "times", "must be increasing", "s", self.times)
        T = as_array(c, "on_times", on_times, "s")
        if T.ndim == 1 and T.shape[0] == K:
            T = T[:, None]
        if T.ndim != 2 or T.shape[0] != K:
            raise ValueError(
                f"{c}: `on_times` [s] must have shape ({K}, n) (one row per command time); got "
                f"shape {T.shape}."
            )
        self.on_times = check_nonnegative(c, "on_times", T, "s")
        n = T.shape[1]
        m = as_array(c, "min_on_time", min_on_time, "s")
        if m.shape not in ((), (n,)):
            raise ValueError(f"{c}: `min_on_time` [s] must have shape () or ({n},); got {m.shape}.")
        self.min_on_time = check_nonnegative(c, "min_on_time", jnp.broadcast_to(m, (n,)), "s")

    @property
    def n(self) -> int:
        return self.on_times.shape[1]

    def effective(self):
        """`(K, n)` on-times after the `MinOnTime` rule [s]."""
        return effective_on_times(self.times, self.on_times, self.min_on_time)

    def __call__(self, t):
        T = self.effective()
        # The command in force over the step (Basilisk reads it before integrating the step that
        # starts at its issue time): chosen at the step midpoint inside a fixed step; the window
        # end is compared with the stage time itself.
        k = jnp.searchsorted(self.times, held_time(t), side="right") - 1
        kk = jnp.clip(k, 0, self.times.shape[0] - 1)
        on = _on_time_window(T[kk], self.times[kk], t)
        return jnp.where(k >= 0, on, 0.0)

    def breakpoints(self, t0=None, t1=None):
        T = self.effective()
        ends = [self.times[k] + T[k, i] for k in range(T.shape[0]) for i in range(T.shape[1])]
        if is_concrete(self.times) and is_concrete(T):
            # Concrete: only ends that matter (a firing window ending before the next command).
            nxt = list(map(float, self.times[1:])) + [float("inf")]
            ends = [
                float(self.times[k] + T[k, i])
                for k in range(T.shape[0])
                for i in range(T.shape[1])
                if float(T[k, i]) > 0 and float(self.times[k] + T[k, i]) < nxt[k]
            ]
            pts = sorted(set(map(float, self.times)) | set(ends))
            return tuple(pts)
        return tuple(self.times[k] for k in range(self.times.shape[0])) + tuple(ends)


def on_time_command_state(name, args, n, t, rule=DYNAMIC_RULE):
    """Firing state `(n,)` from the flight-software command `args[name]` (`on_time`,
    `on_time_start`) at `t` (`rule`: `_on_time_window`'s); zeros without a command."""
    on_time = command(args, name, "on_time")
    if on_time is None:
        return jnp.zeros(n)
    T = jnp.broadcast_to(jnp.asarray(on_time), (n,))
    start = jnp.asarray(command(args, name, "on_time_start", 0.0))
    return _on_time_window(T, start, t, rule)


def thruster_loads(r_TB_B, tHat_B, thrust, mdot, omega_BN_B, swirl, area_nozzle, depletion):
    r"""Per-thruster force `(n, 3)`, total force and torque about $B$ (all $\mathcal B$ comps).

    `thrust` (n,) [N], `mdot` (n,) [kg/s], `swirl` (n,) maximum swirl torque [N m] times the thrust
    factor, `area_nozzle` (n,) [m^2]. With `depletion` (Basilisk `updateOnly = False`) the exhaust
    terms are added: force $2\dot m_i\,\boldsymbol\omega\times\mathbf r_{T_i/B}$ and torque
    $\dot m_i\big([\tilde{\mathbf t}][\tilde{\mathbf t}]^T + \frac{A_i}{4\pi}[M][W][M]^T\big)\boldsymbol\omega$
    with $[M] = [\hat{\mathbf t}, \mathbf b_2, \hat{\mathbf t}\times\mathbf b_2]$, $\mathbf b_2 = (-t_2, t_1, t_3)$,
    $[W] = \mathrm{diag}(2, 1, 1)$ (Basilisk's expressions).
    """
    F_i = thrust[:, None] * tHat_B
    tau_i = cross3(r_TB_B, F_i) + swirl[:, None] * tHat_B
    F = jnp.sum(F_i, axis=0)
    tau = jnp.sum(tau_i, axis=0)
    if depletion:
        w = omega_BN_B
        F = F + jnp.sum(2.0 * mdot[:, None] * cross3(w[None, :], r_TB_B), axis=0)
        t = tHat_B
        b2 = jnp.stack([-t[:, 1], t[:, 0], t[:, 2]], axis=1)
        b3 = cross3(t, b2)
        # [t~][t~]^T w = (t.t) w - t (t.w)
        tt = jnp.sum(t * t, 1)[:, None] * w[None, :] - t * (t @ w)[:, None]
        # [M][W][M]^T w = 2 t (t.w) + b2 (b2.w) + b3 (b3.w)
        mwm = 2.0 * t * (t @ w)[:, None] + b2 * (b2 @ w)[:, None] + b3 * (b3 @ w)[:, None]
        tau = tau + jnp.sum(
            mdot[:, None] * (tt + (area_nozzle / (4.0 * jnp.pi))[:, None] * mwm), axis=0
        )
    return F_i, F, tau


def _thruster_arrays(cls, r_TB_B, tHat_B, max_thrust, Isp, swirl_torque, area_nozzle):
    r = as_array(cls, "r_TB_B", r_TB_B, "m", (None, 3))
    n = r.shape[0]
    if n < 1:
        raise ValueError(f"{cls}: `r_TB_B` [m] must hold at least one thruster; got shape (0, 3).")
    tHat = check_unit_vectors(cls, "tHat_B", as_array(cls, "tHat_B", tHat_B, "-", (n, 3)))
    Fmax = check_positive(
        cls, "max_thrust", as_array(cls, "max_thrust", max_thrust, "N", (n,)), "N"
    )
    isp = check_positive(cls, "Isp", as_array(cls, "Isp", Isp, "s", (n,)), "s")
    swirl = as_array(cls, "swirl_torque", swirl_torque, "N m")
    if swirl.shape not in ((), (n,)):
        raise ValueError(
            f"{cls}: `swirl_torque` [N m] must have shape () or ({n},); got {swirl.shape}."
        )
    area = as_array(cls, "area_nozzle", area_nozzle, "m^2")
    if area.shape not in ((), (n,)):
        raise ValueError(
            f"{cls}: `area_nozzle` [m^2] must have shape () or ({n},); got {area.shape}."
        )
    area = check_nonnegative(cls, "area_nozzle", jnp.broadcast_to(area, (n,)), "m^2")
    return r, tHat, Fmax, isp, jnp.broadcast_to(swirl, (n,)), area


class Thrusters(AbstractDynamicEffector):
    r"""`n` thrusters, vectorized: thruster $i$ at $\mathbf r_{T_i/B}$ pushes the spacecraft along
    $+\hat{\mathbf t}_i$ with

    $$\mathbf F_i = u_i F_{\max,i}\,\hat{\mathbf t}_i,\qquad
    \mathbf F_B = \sum_i \mathbf F_i \ \text{(through } B\text{)},\qquad
    \boldsymbol\tau_B = \sum_i \mathbf r_{T_i/B}\times\mathbf F_i + u_i\tau_{s,i}\hat{\mathbf t}_i,\qquad
    \dot m_i = \frac{u_i F_{\max,i}}{I_{sp,i}\,g_0},$$

    all in $\mathcal B$ components, $g_0 = 9.80665$ m/s^2, $\tau_{s,i}$ the swirl torque. The thrust
    factor $u_i\in[0,1]$ is the sum of the `throttle` argument (a constant or a signal of time,
    e.g. an `OnTimeSchedule`), the flight-software throttle `args[name]["throttle"]` and the firing
    state of a flight-software on-time command `args[name]["on_time"]`, `["on_time_start"]`
    (module docstring: Basilisk's rule), clipped to $[0, 1]$.

    **Arguments:**

    - `r_TB_B`: thruster locations relative to $B$ [m], shape `(n, 3)`, $\mathcal B$ components.
    - `tHat_B`: unit thrust directions [-], shape `(n, 3)` (the force on the spacecraft is along
      $+\hat{\mathbf t}$, i.e. opposite to the exhaust).
    - `max_thrust`: $F_{\max}$ [N] > 0, shape `(n,)`.
    - `Isp`: specific impulse [s] > 0, shape `(n,)`.
    - `throttle`: default `None` (0); a constant in $[0,1]$ of shape `()` or `(n,)`, or a signal of
      time (e.g. `jaxsim.PiecewiseConstant` for the fixed-step driver, `jaxsim.PiecewiseTable` /
      `jaxsim.Step` with possibly traced switch times for the clocked driver, `OnTimeSchedule` for
      Basilisk on-time commands) returning a value of shape `()` or `(n,)`. Its switch times are
      the effector's `breakpoints()`.
    - `swirl_torque`: $\tau_{s}$ [N m] at full thrust (Basilisk `MaxSwirlTorque`), default 0.
    - `area_nozzle`: nozzle exit area [m^2] >= 0 (Basilisk `areaNozzle`), default 0.
    - `depletion_loads`: add the exhaust's force and torque (Basilisk `updateOnly = False`; see
      `thruster_loads`); default False (Basilisk's default `updateOnly = True`).
    - `name`: unique effector name.

    **Commands** (`args[name]`, checked by `simulate`): `throttle` (n,) [-]; `on_time` (n,) [s] and
    `on_time_start` () [s], the issue time of the on-time command.

    **Mass flow:** `mass_flow(mctx)` (n,) [kg/s] is what a fuel tank linked to these thrusters
    drains (the protocol of thruster effectors; equal to the `mDot` output).

    **Outputs:** `throttle` `(n,)`, `thrust_B` per-thruster force [N] `(n, 3)`, `force_B` [N],
    `torque_B` [N m], `mDot` [kg/s] `(n,)` and `mDot_total` [kg/s].

    **Assumptions and limitations:** without a fuel tank the mass flow is **reported only** (the
    spacecraft mass, centre of mass and inertia do not change); thrust switches instantly (no
    ramp tables: Basilisk's `ThrusterOnRamp`/`ThrusterOffRamp` are not modelled; see
    `ThrusterStateEffector` for a first-order ramp); no thrust or Isp blow-down, no dispersions,
    no plume impingement; thrusters are rigidly fixed to the hub (no gimbals); the force acts
    through $B$ and its moment arm is carried by `torque_B`.

    **Reference:** Basilisk `thrusterDynamicEffector` (`ThrusterDynamicEffector.cpp`: on-time
    commands, `MinOnTime`, steady-state thrust, mass-depletion terms); Sutton & Biblarz, *Rocket
    Propulsion Elements*, 9th ed., eq. 2-5 ($\dot m = F/(I_{sp} g_0)$).
    """

    r_TB_B: Float[Array, "n 3"]
    tHat_B: Float[Array, "n 3"]
    max_thrust: Float[Array, " n"]
    Isp: Float[Array, " n"]
    throttle: object
    swirl_torque: Float[Array, " n"]
    area_nozzle: Float[Array, " n"]
    depletion_loads: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def init_commands(self) -> dict:
        """`{"throttle": zeros (n,) [-], "on_time": zeros (n,) [s], "on_time_start": 0 [s]}`:
        the commands read from `args[name]`."""
        return {
            "throttle": jnp.zeros(self.n),
            "on_time": jnp.zeros(self.n),
            "on_time_start": jnp.zeros(()),
        }

    def __init__(
        self,
        r_TB_B: Float[ArrayLike, "n 3"],
        tHat_B: Float[ArrayLike, "n 3"],
        max_thrust: Float[ArrayLike, "*n"],
        Isp: Float[ArrayLike, "*n"],
        throttle: ArrayLike | AbstractSignal | Callable[..., ArrayLike] | None = None,
        *,
        swirl_torque: Float[ArrayLike, "*n"] = 0.0,
        area_nozzle: Float[ArrayLike, "*n"] = 0.0,
        depletion_loads: bool = False,
        name: str = "thrusters",
    ):
        cls = "Thrusters"
        arrays = _thruster_arrays(cls, r_TB_B, tHat_B, max_thrust, Isp, swirl_torque, area_nozzle)
        self.r_TB_B, self.tHat_B, self.max_thrust, self.Isp, self.swirl_torque = arrays[:5]
        self.area_nozzle = arrays[5]
        n = self.r_TB_B.shape[0]
        if throttle is None:
            throttle = jnp.zeros(n)
        elif isinstance(throttle, OnTimeSchedule) and throttle.n not in (1, n):
            raise ValueError(
                f"{cls}: `throttle` OnTimeSchedule must command 1 or {n} thrusters (columns of "
                f"`on_times` [s]); got {throttle.n}."
            )
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
        self.depletion_loads = bool(depletion_loads)
        self.name = check_name(cls, "name", name)

    @property
    def n(self) -> int:
        return self.r_TB_B.shape[0]

    def throttle_at(self, ctx: HubContext | MassContext):
        """Thrust factor $u\\in[0,1]$ per thruster, shape `(n,)`: signal/constant plus the commands
        (throttle, on-time firing state), clipped; 0 while a starving tank that feeds the set is
        empty (`FuelTank(starve_thrusters=True)`, the default)."""
        u = jnp.broadcast_to(evaluate(self.throttle, ctx.t), (self.n,))
        throttle = self.read_command(ctx.args, "throttle", 0.0)
        u = u + jnp.broadcast_to(jnp.asarray(throttle), (self.n,))
        u = u + on_time_command_state(self.name, ctx.args, self.n, ctx.t)
        return jnp.clip(u, 0.0, 1.0) * supplied(ctx, self.name)

    def physical_checks(self, x=None) -> dict:
        """`{quantity: traced bool}` (read by `Spacecraft.validity`): `max_thrust` and `Isp` > 0,
        `area_nozzle` >= 0 (the throttle is clipped to [0, 1] where it is read)."""
        return {
            "max_thrust": positive(self.max_thrust),
            "Isp": positive(self.Isp),
            "area_nozzle": nonnegative(self.area_nozzle),
        }

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
        mdot = thrust / (self.Isp * G0)
        F_i, F, tau = thruster_loads(
            self.r_TB_B,
            self.tHat_B,
            thrust,
            mdot,
            ctx.omega_BN_B,
            u * self.swirl_torque,
            self.area_nozzle,
            self.depletion_loads,
        )
        return u, F_i, F, tau, mdot

    def force_torque(self, ctx: HubContext) -> ForceTorque:
        _, _, F_B, tau_B, _ = self._loads(ctx)
        return ForceTorque(jnp.zeros(3), F_B, tau_B)

    # Units of the outputs (and commands) by name (`units()`).
    ELEMENT_DIM = "thruster"  # one entry per unit in result datasets
    UNITS = {
        "throttle": "-",
        "thrust_B": "N",
        "force_B": "N",
        "torque_B": "N m",
        "mDot": "kg/s",
        "mDot_total": "kg/s",
        "on_time": "s",
        "on_time_start": "s",
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


class OnTimeFSW(AbstractDiscreteModel):
    r"""Flight software on a clock that issues Basilisk on-time commands to a thruster effector.

    At each tick $t_c$ (and at $t_0$ with `tick_at_t0`, Basilisk's first FSW call) it evaluates
    `request(t, y, args)` -> requested on-times `(n,)` [s], applies the `MinOnTime` rule (a request
    below `min_on_time` is kept only while the thruster fires under the command held so far, else
    0) and writes the held outputs `{thrusters: {"on_time": T, "on_time_start": t_c}}`, read by
    `Thrusters` or `ThrusterStateEffector` named `thrusters` (module docstring for the firing rule).

    **Arguments:**

    - `clock`: a `jaxsim.Clock` or `Schedule`.
    - `request`: `request(t, y, args) -> (n,)` on-times [s] (>= 0), a pure function of the tick
      time, the model state and the arguments (held outputs included).
    - `n`: number of thrusters.
    - `thrusters`: name of the commanded effector (default `"thrusters"`).
    - `min_on_time`: [s] >= 0, shape `()` or `(n,)` (default 0).
    - `firing_state`: None (default): "firing" means inside the held command's window (Basilisk
      `thrusterDynamicEffector`); a path `(key, ...)` into `y` of the thrust factors $\kappa$ (e.g.
      `("thrusters",)` for a `ThrusterStateEffector` of that name): firing means
      $\kappa > 10^{-5}$ (Basilisk `thrusterStateEffector`).
    - `tick_at_t0`: issue a command at $t_0$ (held before the first tick; default True).
    - `name`: unique model name (default `"on_time_fsw"`).

    **Discrete state:** none (`{}`): the held command itself says whether a thruster fires.
    """

    name: str = eqx.field(static=True)
    clock: AbstractClock
    request: Callable = eqx.field(static=True)
    n: int = eqx.field(static=True)
    thrusters: str = eqx.field(static=True)
    min_on_time: Float[Array, " n"]
    firing_state: tuple | None = eqx.field(static=True)
    tick_at_t0: bool = eqx.field(static=True)

    @property
    def command_addresses(self) -> tuple:
        """The commanded thruster effector (`simulate` checks that it exists)."""
        return (self.thrusters,)

    def units(self) -> dict:
        """Units of the held outputs: on-times and their issue time [s] (`simulate` compares them
        with the thrusters' declared command units)."""
        return {"held": {self.thrusters: {"on_time": "s", "on_time_start": "s"}}}

    def __init__(
        self,
        clock: AbstractClock,
        request: Callable[..., ArrayLike],
        n: int,
        *,
        thrusters: str = "thrusters",
        min_on_time: Float[ArrayLike, "*n"] = 0.0,
        firing_state: tuple[str, ...] | None = None,
        tick_at_t0: bool = True,
        name: str = "on_time_fsw",
    ):
        c = "OnTimeFSW"
        if not isinstance(clock, AbstractClock):
            raise ValueError(
                f"{c}: `clock` must be a Clock or Schedule; got {type(clock).__name__}."
            )
        if not callable(request):
            raise ValueError(
                f"{c}: `request` must be a function (t, y, args) -> (n,) on-times [s]."
            )
        if int(n) < 1:
            raise ValueError(f"{c}: `n` (number of thrusters) must be >= 1; got {n}.")
        self.clock = clock
        self.request = request
        self.n = int(n)
        self.thrusters = check_name(c, "thrusters", thrusters)
        self.name = check_name(c, "name", name)
        m = as_array(c, "min_on_time", min_on_time, "s")
        if m.shape not in ((), (self.n,)):
            raise ValueError(
                f"{c}: `min_on_time` [s] must have shape () or ({self.n},); got {m.shape}."
            )
        self.min_on_time = check_nonnegative(c, "min_on_time", jnp.broadcast_to(m, (self.n,)), "s")
        self.firing_state = None if firing_state is None else tuple(firing_state)
        self.tick_at_t0 = bool(tick_at_t0)

    def init_state(self):
        return {}

    def _firing(self, t, y, args):
        if self.firing_state is not None:
            kappa = y
            for key in self.firing_state:
                kappa = kappa[key]
            return jnp.asarray(kappa) > KAPPA_FIRING
        return on_time_command_state(self.thrusters, args, self.n, t) > 0

    def update(self, t, y, z, args):
        t = jnp.asarray(t, dtype=float)
        T = jnp.broadcast_to(jnp.asarray(self.request(t, y, args), dtype=float), (self.n,))
        T = jnp.where((T >= self.min_on_time) | self._firing(t, y, args), T, 0.0)
        return z, {self.thrusters: {"on_time": T, "on_time_start": t}}

    def init_outputs(self, y0, args):
        if not self.tick_at_t0:
            return None
        return self.update(jnp.zeros(()), y0, {}, args)[1]


# Basilisk `thrusterStateEffector`: a thruster counts as firing (for `MinOnTime`) while its thrust
# factor exceeds this value.
KAPPA_FIRING = 1e-5
