r"""Thruster on/off firing logic (Basilisk `thrFiringSchmitt`): requested thruster forces mapped to
on-time requests with a Schmitt trigger around a minimum firing time.

**Rule (Basilisk's, per thruster, at each call).** With the control period $\Delta t$ (the time since
the previous call), the maximum thrust $F_{max}$ and the requested force $F$:

- off-pulsing (`base_thrust_state=1`): $F \leftarrow F + F_{max}$; then $F \leftarrow \max(F, 0)$;
- $t = (F/F_{max})\,\Delta t$;
- $t \ge t_{min}$ and $t < \Delta t$: on for $t$; $t \ge \Delta t$ (saturated): on for $1.1\,\Delta t$, so the
  thruster stays on through the period; both leave the thruster *on*;
- $t < t_{min}$: with the duty level $l = t/t_{min}$, on for $t_{min}$ when $l > l_{on}$ (the thruster is
  then *on*), off when $l < l_{off}$ (*off*), and in between the previous state decides: on for
  $t_{min}$ if it was on, else off (the hysteresis).

**First call (Basilisk's).** The period is unknown on the first call after a reset (stored prior
time 0): every request is 0 s (on-pulsing) or 2 s (off-pulsing), and the state is left off. As in
`MRPFeedback`, the prior time 0 is "never called", so a first call at $t = 0$ is followed by a
second first call at the next tick.

**Gradients.** The on-times are piecewise linear in the forces: derivative $\Delta t/F_{max}$ where
$t_{min} \le t < \Delta t$, zero in the saturated and Schmitt-trigger branches (a step there).

**Reference:** Basilisk `thrFiringSchmitt` module documentation (AVS Lab, 2019); Alcorn, Allard,
Schaub, "Fully-coupled dynamical jitter modeling of variable-speed control moment gyroscopes",
AAS 16-237 (the Schmitt-trigger firing logic).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.validation import as_array, check_positive, fail, is_concrete


# Basilisk's saturated on-time, as a multiple of the control period (keeps the thruster on
# through the period until the next call).
_SATURATED = 1.1
# Basilisk's on-time request on the first call in off-pulsing mode [s].
_FIRST_OFF_PULSING_S = 2.0


class ThrFiringSchmitt(eqx.Module):
    r"""Schmitt-trigger thruster firing logic (Basilisk `thrFiringSchmitt`); the rule is in the module
    docstring.

    **Arguments:**

    - `max_thrust`: (n,) [N] > 0, each thruster's maximum force.
    - `min_fire_time`: $t_{min}$ [s] > 0 (Basilisk's `thrMinFireTime`).
    - `level_on`, `level_off`: the duty levels [-], $0 \le l_{off} \le l_{on} \le 1$.
    - `base_thrust_state`: 0 on-pulsing (default), 1 off-pulsing.

    `init_state()` gives `{"last_on": zeros(n), "prior_time": 0}`; `__call__(t, force, z)` returns
    `(z_next, on_time)` with `force` (n,) [N] the requested forces and `on_time` (n,) [s]
    (Basilisk's `OnTimeRequest`).
    """

    max_thrust: Float[Array, " n"]
    min_fire_time: Float[Array, ""]
    level_on: Float[Array, ""]
    level_off: Float[Array, ""]
    base_thrust_state: int = eqx.field(static=True)

    def __init__(
        self,
        max_thrust: Float[ArrayLike, " n"],
        min_fire_time: Float[ArrayLike, ""],
        level_on: Float[ArrayLike, ""] = 0.75,
        level_off: Float[ArrayLike, ""] = 0.25,
        *,
        base_thrust_state: int = 0,
    ):
        c = "ThrFiringSchmitt"
        f = as_array(c, "max_thrust", max_thrust, "N", (None,))
        if f.shape[0] < 1:
            fail(c, "max_thrust", "must hold at least one thruster", "N", f)
        self.max_thrust = check_positive(c, "max_thrust", f, "N")
        t = as_array(c, "min_fire_time", min_fire_time, "s", ())
        self.min_fire_time = check_positive(c, "min_fire_time", t, "s")
        on = as_array(c, "level_on", level_on, "-", ())
        off = as_array(c, "level_off", level_off, "-", ())
        if is_concrete(on) and is_concrete(off):
            if not 0.0 <= float(off) <= float(on) <= 1.0:
                fail(
                    c,
                    "level_on",
                    f"must satisfy 0 <= level_off ({float(off)!r}) <= level_on <= 1",
                    "-",
                    on,
                )
        self.level_on, self.level_off = on, off
        if base_thrust_state not in (0, 1):
            raise ValueError(
                f"{c}: `base_thrust_state` must be 0 (on-pulsing) or 1 (off-pulsing); got "
                f"{base_thrust_state!r}."
            )
        self.base_thrust_state = int(base_thrust_state)

    def init_state(self) -> dict:
        return {"last_on": jnp.zeros(self.max_thrust.shape), "prior_time": jnp.zeros(())}

    def __call__(self, t, force, z: dict):
        t = jnp.asarray(t, float)
        F = jnp.asarray(force, float)
        fmax = self.max_thrust
        first = z["prior_time"] == 0.0
        dt = t - z["prior_time"]
        if self.base_thrust_state == 1:
            F = F + fmax
        F = jnp.maximum(F, 0.0)
        ton = F / fmax * dt
        tmin = self.min_fire_time
        level = ton / tmin
        was_on = z["last_on"] > 0.0
        schmitt_on = (level > self.level_on) | ((level >= self.level_off) & was_on)
        long = ton >= tmin
        on_time = jnp.where(
            long,
            jnp.where(ton >= dt, _SATURATED * dt, ton),
            jnp.where(schmitt_on, tmin, 0.0),
        )
        now_on = long | schmitt_on
        first_value = 0.0 if self.base_thrust_state == 0 else _FIRST_OFF_PULSING_S
        on_time = jnp.where(first, jnp.full_like(F, first_value), on_time)
        last_on = jnp.where(first, z["last_on"], now_on.astype(float))
        return {"last_on": last_on, "prior_time": t}, on_time
