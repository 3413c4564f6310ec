r"""Optional components of `ReactionWheels`: the command limits and the bearing friction.

Each is an equinox module that a `ReactionWheels` holds (`wheels.limits`, `wheels.friction`), or
`None` when the group is left unset: then its terms are not evaluated at all. The equations, and
where they differ from Basilisk's `reactionWheelStateEffector`, are in the `effectors/_actuators/_reaction_wheels.py`
module docstring; references: Basilisk `reactionWheelStateEffector` documentation; H. Olsson,
K. J. Astrom et al., "Friction models and friction compensation", European Journal of Control
4(3), 1998 (Stribeck friction).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxsim.validation import as_array, check_nonnegative, fail, is_concrete


_CLS = "ReactionWheels"


def per_wheel(arg, value, unit, n, default):
    """A per-wheel parameter: scalar or `(n,)`, finite; `None` gives `default` (scalar)."""
    # Explicit dtype: strongly typed leaves, so that models differing only in values share a compile.
    if value is None:
        return jnp.full((n,), float(default), dtype=float)
    arr = as_array(_CLS, arg, value, unit)
    if arr.ndim == 0:
        return jnp.broadcast_to(arr, (n,))
    if arr.shape != (n,):
        raise ValueError(
            f"{_CLS}: `{arg}` must be a scalar or have shape ({n},) (one per wheel) [{unit}]; "
            f"got shape {tuple(arr.shape)}."
        )
    return arr


def _disabled(x):
    """A limit: its value where > 0, else -1 (disabled)."""
    return jnp.where(x > 0, x, -1.0)


def safe(x, ok):
    """`x` where `ok`, else 1 (keeps both branches of a `where` finite under grad)."""
    return jnp.where(ok, x, 1.0)


class WheelLimits(eqx.Module):
    """Basilisk's command limits, applied in order: clip at `u_max` [N m], deadband below
    `u_min` [N m], power limit `P_max` [W], speed limit `Omega_max` [rad/s]; a limit <= 0 (or
    `None`) is disabled. Per-wheel `(n,)` arrays."""

    u_max: Float[Array, " n"]
    u_min: Float[Array, " n"]
    P_max: Float[Array, " n"]
    Omega_max: Float[Array, " n"]

    def __init__(self, n, *, u_max=None, u_min=None, P_max=None, Omega_max=None):
        self.u_max = _disabled(per_wheel("u_max", u_max, "N m", n, -1.0))
        self.u_min = per_wheel("u_min", u_min, "N m", n, 0.0)
        self.P_max = _disabled(per_wheel("P_max", P_max, "W", n, -1.0))
        self.Omega_max = _disabled(per_wheel("Omega_max", Omega_max, "rad/s", n, -1.0))
        if is_concrete(self.u_min) and is_concrete(self.u_max):
            if bool(jnp.any((self.u_max > 0) & (self.u_min > self.u_max))):
                msg = "must be <= `u_max` where both are enabled"
                fail(_CLS, "u_min", msg, "N m", self.u_min)

    def apply(self, u, Omega) -> Float[Array, " n"]:
        """The applied torques $u_s$ from the commands `u` at speeds `Omega`."""
        u = jnp.where(self.u_max > 0, jnp.clip(u, -self.u_max, self.u_max), u)
        u = jnp.where(jnp.abs(u) < self.u_min, 0.0, u)
        over_power = (self.P_max > 0) & (jnp.abs(u * Omega) >= self.P_max)
        Omega_safe = safe(Omega, over_power)
        u = jnp.where(over_power, jnp.sign(u) * jnp.abs(self.P_max / Omega_safe), u)
        at_speed = (self.Omega_max > 0) & (jnp.abs(Omega) >= self.Omega_max) & (Omega * u >= 0)
        return jnp.where(at_speed, 0.0, u)


class WheelFriction(eqx.Module):
    r"""Basilisk's wheel friction: Coulomb `fCoulomb` $\tau_c$ [N m] (exact sign, or $\tanh$ of
    width `coulomb_width` [rad/s] when > 0), viscous `cViscous` [N m s], Stribeck `fStatic`
    [N m] with `betaStatic` [rad/s] (<= 0: no Stribeck mode), limit-cycle smoothing below
    `omegaLimitCycle` [rad/s] (default $10^{-4}$). Per-wheel `(n,)` arrays; `stribeck` (static):
    whether the Stribeck mode (a discrete state updated once per step) is part of the model."""

    fCoulomb: Float[Array, " n"]
    fStatic: Float[Array, " n"]
    cViscous: Float[Array, " n"]
    betaStatic: Float[Array, " n"]
    omegaLimitCycle: Float[Array, " n"]
    coulomb_width: Float[Array, " n"]
    stribeck: bool = eqx.field(static=True)

    def __init__(
        self,
        n,
        *,
        fCoulomb=None,
        fStatic=None,
        betaStatic=None,
        cViscous=None,
        omegaLimitCycle=None,
        coulomb_width=None,
    ):
        def nonneg(arg, value, unit, default):
            return check_nonnegative(_CLS, arg, per_wheel(arg, value, unit, n, default), unit)

        self.fCoulomb = nonneg("fCoulomb", fCoulomb, "N m", 0.0)
        self.fStatic = nonneg("fStatic", fStatic, "N m", 0.0)
        self.cViscous = nonneg("cViscous", cViscous, "N m s", 0.0)
        self.betaStatic = _disabled(per_wheel("betaStatic", betaStatic, "rad/s", n, -1.0))
        self.omegaLimitCycle = nonneg("omegaLimitCycle", omegaLimitCycle, "rad/s", 1e-4)
        self.coulomb_width = nonneg("coulomb_width", coulomb_width, "rad/s", 0.0)
        if betaStatic is None:
            self.stribeck = False
        elif is_concrete(self.betaStatic):
            self.stribeck = bool(jnp.any(self.betaStatic > 0))
        else:
            self.stribeck = True

    def torque(self, Omega, stribeck=None) -> Float[Array, " n"]:
        r"""Friction torque $\tau_f$ [N m] at speeds `Omega` (Stribeck mode `stribeck`, 0/1,
        default off)."""
        tc, ts, cv = self.fCoulomb, self.fStatic, self.cViscous
        beta_on = self.betaStatic > 0
        beta = safe(self.betaStatic, beta_on)
        width_on = self.coulomb_width > 0
        width = safe(self.coulomb_width, width_on)
        wlc_on = self.omegaLimitCycle > 0
        wlc = safe(self.omegaLimitCycle, wlc_on)
        mode = jnp.zeros_like(Omega) if stribeck is None else stribeck
        use_s = (mode > 0.5) & beta_on

        def f_coulomb(w):
            s = jnp.where(width_on, jnp.tanh(w / width), jnp.sign(w))
            return tc * s + cv * w

        def f_stribeck(w):
            x = w / (jnp.sqrt(2.0) * beta)
            bump = jnp.sqrt(2.0 * jnp.e) * (ts - tc) * x * jnp.exp(-(x**2))
            return bump + tc * jnp.tanh(10.0 * w / beta) + cv * w

        def f(w):
            return jnp.where(use_s, f_stribeck(w), f_coulomb(w))

        linear = f(wlc) / wlc * Omega
        in_lc = wlc_on & (jnp.abs(Omega) < self.omegaLimitCycle)
        return -jnp.where(in_lc, linear, f(Omega))

    def initial_mode(self, Omega):
        """Basilisk's entry rule at the initial speed: 1.0 where the Stribeck mode is on."""
        on = (self.betaStatic > 0) & (jnp.abs(Omega) < 0.1 * self.omegaLimitCycle)
        return on.astype(float)

    def next_mode(self, Omega, Omega_prev, mode):
        """The Stribeck mode after a step ending at `Omega` that started at `Omega_prev`."""
        near_rest = jnp.abs(Omega) < 0.1 * self.omegaLimitCycle
        not_back = jnp.abs(jnp.sign(Omega) - jnp.sign(Omega - Omega_prev)) <= 1.0
        on = (self.betaStatic > 0) & (near_rest | (mode > 0.5)) & not_back
        return on.astype(Omega.dtype)
