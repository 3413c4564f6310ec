r"""Attitude flight software: navigation, attitude error, MRP feedback control and the RW torque map
(Basilisk `simpleNav`, `inertial3D` + `attTrackingError`, `mrpFeedback`, `rwMotorTorque`), and a
discrete model that chains them on a clock (run by jaxsim's clocked driver).

The pieces are pure equinox modules (parameters as leaves: vmappable and differentiable):

- `AttitudeNavigation`: $\boldsymbol\sigma_{B/N}$, ${}^B\boldsymbol\omega_{B/N}$ (and the wheel speeds) sampled from the
  continuous state, without noise (Basilisk `simpleNav` with zero noise).
- `attitude_error`: the tracking errors of $\mathcal B$ relative to a reference $\mathcal R$ (`attTrackingError`).
- `MRPFeedback`: the MRP feedback law of Schaub & Junkins Example 8.14 (Basilisk `mrpFeedback`).
- `RWMotorTorque`: minimum-norm map of a body torque onto the wheel motors (`rwMotorTorque`).
- `RWAttitudeFSW`: an `AbstractDiscreteModel` running nav -> error -> control -> map at each tick and
  writing `{wheels: {"motor_torque": u_s}}` into the held outputs (read by `ReactionWheels`).

**MRP feedback law** (Basilisk `mrpFeedback`, all vectors in $\mathcal B$ components, scalar gains $K$ [N m],
$P$ [N m s], $K_i$ [1/s]). With $\boldsymbol\sigma = \boldsymbol\sigma_{B/R}$, $\delta\boldsymbol\omega = \boldsymbol\omega_{B/R}$,
$\boldsymbol\omega = \boldsymbol\omega_{B/N} = \delta\boldsymbol\omega + \boldsymbol\omega_{R/N}$, the inertia $[I]$
(the FSW's `ISCPntB_B`) and the wheel spin momenta $h_{s,i} = J_{s,i}(\hat{\mathbf g}_{s,i}^T\boldsymbol\omega + \Omega_i)$:

$$\mathbf s_k = \mathrm{lim}\big(\mathbf s_{k-1} + K\,\Delta t_k\,\boldsymbol\sigma\big),\qquad
\mathbf z = \mathbf s_k + [I]\,\delta\boldsymbol\omega\qquad (\mathbf z = 0 \text{ if } K_i \le 0),$$

$$\mathbf L_r = -K\boldsymbol\sigma - P\,\delta\boldsymbol\omega - P K_i\mathbf z
+ [\tilde{\mathbf a}]\Big([I]\boldsymbol\omega + \sum_i h_{s,i}\hat{\mathbf g}_{s,i}\Big)
- [I]\big(\boldsymbol\omega\times\boldsymbol\omega_{R/N} - \dot{\boldsymbol\omega}_{R/N}\big) - \mathbf L,$$

with $\mathbf a = \boldsymbol\omega_{R/N} + K_i\mathbf z$ (`control_law_type=0`, default) or $\mathbf a = \boldsymbol\omega$ (`1`),
$\mathbf L$ the known external torque (`known_torque_B`), and $\mathrm{lim}$ the element-wise integral limit
(an element with $|s_j| > $ `integral_limit` is scaled to $\pm$`integral_limit`). $\mathbf L_r$ is the torque
to apply *to the body* (Basilisk's `cmdTorqueOutMsg.torqueRequestBody`). All terms of Basilisk's law are
implemented: integral with limit, RW gyroscopic terms (when `gsHat_B`/`Js` are given), reference-rate
and reference-acceleration feed-forward, known torque, both control-law types.

*Integral time step (Basilisk's rule, kept exactly).* $\Delta t_k = t_k - t_{prior}$, except that
$\Delta t_k = 0$ while the stored prior time is 0 ("never called"). The discrete state is
`{"int_sigma": s, "prior_time": t_prior}`, initially zeros. A run whose first call is at $t = 0$ stores
$t_{prior} = 0$ again, so the first **two** calls (at $0$ and $\Delta t_{fsw}$) integrate nothing, as in
Basilisk.

**RW torque map** (`rwMotorTorque`): with control axes $\hat{\mathbf c}_j$ (rows of $[C]$, $m \le 3$), the
$m\times n$ matrix $[CG_s]_{ji} = \hat{\mathbf c}_j^T\hat{\mathbf g}_{s,i}$ over the *available* wheels and
$\mathbf L_C = [C](-\mathbf L_r)$, the motor torques are the minimum-norm solution of $[CG_s]\mathbf u_s = \mathbf L_C$:

$$\mathbf u_s = [CG_s]^T\big([CG_s][CG_s]^T\big)^{-1}\mathbf L_C$$

(a wheel's motor torque $u_s$ acts on the body as $-u_s\hat{\mathbf g}_s$, so the body receives $\mathbf L_r$ on the
control axes). Unavailable wheels get 0; with fewer available wheels than control axes all get 0.

**Tick at t0 (Basilisk's first FSW call).** Basilisk's task scheduler calls the flight software at
$t = 0$ with the initial state, and its command is applied over $[0, \Delta t_{fsw}]$; the clocked driver's
clocks tick strictly after `t0`. `RWAttitudeFSW(tick_at_t0=True)` (default) therefore supplies its
held outputs before the first tick (`init_outputs`) by running its update on $y_0$ at $t = 0$. That call
leaves the discrete state unchanged (with `prior_time = 0` it integrates nothing and stores 0 again), so
the driver's initial `z` stays exact. At each later tick $t_k$ the update reads $y(t_k)$ (the left
limit, before any state change at $t_k$) and its command is held over $[t_k, t_{k+1}]$: exactly
Basilisk's order with the dynamics task ahead of the FSW task (`tests/reference/basilisk_slew.py`).
On the test slew this reproduces Basilisk to 4e-16 in $\boldsymbol\sigma_{B/N}$; without the $t_0$ call
(zero torque over the first FSW period) the run is 4.7e-3 off.

**Assumptions and limitations:** scalar gains $K$, $P$, $K_i$ (Basilisk's); navigation without noise or
bias; a constant reference $(\boldsymbol\sigma_{R/N}, \boldsymbol\omega_{R/N}, \dot{\boldsymbol\omega}_{R/N})$ given in
$\mathcal N$ components (inertial pointing when the rates are zero); no wheel-speed or torque
saturation in the FSW (the `ReactionWheels` effector applies its own limits); with
`tick_at_t0=True` and `t0 != 0`, Basilisk would integrate over the second call ($\Delta t = t_1 - t_0$) while
here it still sees `prior_time = 0` (documented difference; exact for the usual `t0 = 0`). Under
`jax.grad` the integral limit and the shadow-set switches are piecewise (zero derivative across them).

**Reference:** H. Schaub, J. L. Junkins, *Analytical Mechanics of Space Systems*, 4th ed., AIAA 2018,
Example 8.14 (integral MRP feedback with RWs) and sec. 3.7 (MRP addition/subtraction); Basilisk
`mrpFeedback` and `rwMotorTorque` module documentation (AVS Lab, 2016-2019).
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxsim import AbstractClock, AbstractDiscreteModel
from jaxsim.kinematics import cross3, dot3, inv3, mrp_to_dcm, mv3
from jaxsim.validation import (
    as_array,
    check_inertia,
    check_name,
    check_positive,
    check_unit_vectors,
    fail,
    is_concrete,
)


# Basilisk's subMRP switches the first MRP to its shadow set when the denominator of the
# subtraction formula is below this value (a near-singular difference of two MRPs).
_SUB_MRP_DET_MIN = 0.1


def _safe_s2(s2):
    return jnp.where(s2 > 0, s2, 1.0)


def _mrp_subtract(sb, sr, sb2, sr2, sbr):
    """`mrp_subtract` given the squared norms and the dot product of its arguments (computed once
    by the caller: one reduction on the CPU for all of them)."""
    near = jnp.abs(1.0 + sb2 * sr2 + 2.0 * sbr) < _SUB_MRP_DET_MIN
    # Shadow set of sigma_BN: -sb / sb2, whose squared norm is 1 / sb2 and dot with sr -sbr / sb2.
    inv = 1.0 / _safe_s2(sb2)
    sb = jnp.where(near, -sb * inv, sb)
    sbr = jnp.where(near, -sbr * inv, sbr)
    sb2 = jnp.where(near, inv, sb2)
    num = 2.0 * cross3(sb, sr) + (1.0 - sr2) * sb - (1.0 - sb2) * sr
    q = num / (1.0 + sb2 * sr2 + 2.0 * sbr)
    q2 = dot3(q, q)
    return jnp.where(q2 > 1.0, -q / _safe_s2(q2), q)


def mrp_subtract(
    sigma_BN: Float[ArrayLike, "*batch 3"], sigma_RN: Float[ArrayLike, "*batch 3"]
) -> Float[Array, "*batch 3"]:
    r"""$\boldsymbol\sigma_{B/R}$ from $\boldsymbol\sigma_{B/N}$ and $\boldsymbol\sigma_{R/N}$ (short set, $|\sigma| \le 1$).

    $$\boldsymbol\sigma_{B/R} = \frac{(1-\sigma_{R}^2)\,\boldsymbol\sigma_B - (1-\sigma_B^2)\,\boldsymbol\sigma_R
    + 2\,\boldsymbol\sigma_B\times\boldsymbol\sigma_R}{1 + \sigma_R^2\sigma_B^2 + 2\,\boldsymbol\sigma_R\cdot\boldsymbol\sigma_B}$$

    (Schaub & Junkins eq. 3.160); when the denominator is below 0.1 in magnitude
    $\boldsymbol\sigma_{B/N}$ is first replaced by its shadow set (Basilisk's rule), and the result is mapped
    to the inner set.
    """
    sb = jnp.asarray(sigma_BN)
    sr = jnp.asarray(sigma_RN)
    # The dot products in one reduction (a kernel per reduction on the CPU).
    sb2, sr2, sbr = dot3(jnp.stack([sb, sr, sb]), jnp.stack([sb, sr, sr]))
    return _mrp_subtract(sb, sr, sb2, sr2, sbr)


def attitude_error(
    sigma_BN: Float[ArrayLike, "3"],
    omega_BN_B: Float[ArrayLike, "3"],
    sigma_RN: Float[ArrayLike, "3"],
    omega_RN_N: Float[ArrayLike, "3"] | None = None,
    domega_RN_N: Float[ArrayLike, "3"] | None = None,
) -> dict:
    r"""Attitude tracking errors of $\mathcal B$ relative to $\mathcal R$ (Basilisk `attTrackingError`).

    **Arguments:** `sigma_BN` (3,) [-], `omega_BN_B` (3,) [rad/s] in $\mathcal B$; the reference `sigma_RN`
    (3,) [-], `omega_RN_N` (3,) [rad/s] and `domega_RN_N` (3,) [rad/s^2] in $\mathcal N$ (default 0).

    **Returns:** `{"sigma_BR", "omega_BR_B", "omega_RN_B", "domega_RN_B"}` with
    $\boldsymbol\omega_{R/N} = [BN]\,{}^N\boldsymbol\omega_{R/N}$, $\delta\boldsymbol\omega = \boldsymbol\omega_{B/N} - \boldsymbol\omega_{R/N}$,
    $\dot{\boldsymbol\omega}_{R/N} = [BN]\,{}^N\dot{\boldsymbol\omega}_{R/N}$ (Basilisk's convention). The rotation
    is applied without forming $[BN]$: $[BN]\mathbf v = \mathbf v + \big(8\,\boldsymbol\sigma\times(\boldsymbol\sigma\times
    \mathbf v) - 4(1-\sigma^2)\,\boldsymbol\sigma\times\mathbf v\big)/(1+\sigma^2)^2$ (Schaub & Junkins eq. 3.147 applied to
    $\mathbf v$), so the whole error costs two reductions.
    """
    sb = jnp.asarray(sigma_BN)
    sr = jnp.asarray(sigma_RN)
    w_RN_N = jnp.zeros(3) if omega_RN_N is None else jnp.asarray(omega_RN_N)
    dw_RN_N = jnp.zeros(3) if domega_RN_N is None else jnp.asarray(domega_RN_N)
    sb2, sr2, sbr = dot3(jnp.stack([sb, sr, sb]), jnp.stack([sb, sr, sr]))  # one reduction
    v = jnp.stack([w_RN_N, dw_RN_N])
    sv = cross3(sb[None, :], v)
    rot = v + (8.0 * cross3(sb[None, :], sv) - 4.0 * (1.0 - sb2) * sv) / (1.0 + sb2) ** 2
    omega_RN_B, domega_RN_B = rot[0], rot[1]
    return {
        "sigma_BR": _mrp_subtract(sb, sr, sb2, sr2, sbr),
        "omega_BR_B": jnp.asarray(omega_BN_B) - omega_RN_B,
        "omega_RN_B": omega_RN_B,
        "domega_RN_B": domega_RN_B,
    }


class AttitudeNavigation(eqx.Module):
    r"""Noise-free attitude navigation (Basilisk `simpleNav` with zero noise): samples the hub state.

    **Arguments:**

    - `spacecraft`: key of the spacecraft state inside the model state (e.g. its name in a
      `jaxsim.System`); `None` (default) when the model itself is the `Spacecraft`.
    - `wheels`: name of a `ReactionWheels` effector whose speeds `Omega` [rad/s] are also read
      (Basilisk `rwSpeedOutMsg`); `None` for none.
    - `r_sun_N`: the sun's inertial position (3,) [m] (constant); when given, the output also holds
      `vehSunPntBdy`, the unit sun heading in $\mathcal B$ (Basilisk `simpleNav`'s).

    `__call__(y)` returns `{"sigma_BN", "omega_BN_B", "r_BN_N", "v_BN_N"}` [-, rad/s in $\mathcal B$, m,
    m/s in $\mathcal N$] (plus `"Omega"`).
    """

    spacecraft: str | None = eqx.field(static=True)
    wheels: str | None = eqx.field(static=True)
    r_sun_N: Float[Array, "3"] | None

    def __init__(
        self,
        spacecraft: str | None = None,
        wheels: str | None = None,
        r_sun_N: Float[ArrayLike, "3"] | None = None,
    ):
        self.r_sun_N = (
            None
            if r_sun_N is None
            else as_array("AttitudeNavigation", "r_sun_N", r_sun_N, "m", (3,))
        )
        if spacecraft is not None:
            check_name("AttitudeNavigation", "spacecraft", spacecraft)
        if wheels is not None:
            check_name("AttitudeNavigation", "wheels", wheels)
        self.spacecraft = spacecraft
        self.wheels = wheels

    def __call__(self, y) -> dict:
        s = y if self.spacecraft is None else y[self.spacecraft]
        hub = s["hub"]
        out = {
            "sigma_BN": hub["sigma_BN"],
            "omega_BN_B": hub["omega_BN_B"],
            "r_BN_N": hub["r_BN_N"],
            "v_BN_N": hub["v_BN_N"],
        }
        if self.wheels is not None:
            out["Omega"] = s[self.wheels]["Omega"]
        if self.r_sun_N is not None:
            # simpleNav's sun heading: [BN] (r_sun - r_BN) / |r_sun - r_BN|.
            d = self.r_sun_N - hub["r_BN_N"]
            out["vehSunPntBdy"] = mv3(mrp_to_dcm(hub["sigma_BN"]), d / jnp.sqrt(dot3(d, d)))
        return out


class MRPFeedback(eqx.Module):
    r"""MRP feedback attitude control with integral term and RW gyroscopic compensation
    (Basilisk `mrpFeedback`). See the module docstring for the law and the integral rule.

    **Arguments:**

    - `K`: attitude gain $K$ [N m], > 0.
    - `P`: rate gain $P$ [N m s], > 0.
    - `I_B`: spacecraft inertia $[I]$ used by the FSW [kg m^2], (3, 3) symmetric positive definite.
    - `Ki`: integral gain $K_i$ [1/s]; $\le 0$ disables the integral (default -1, Basilisk's).
    - `integral_limit`: element-wise bound on $\int K\boldsymbol\sigma\,dt$ [N m s], >= 0 (default 0).
    - `known_torque_B`: known external torque $\mathbf L$ [N m] in $\mathcal B$ (default 0).
    - `gsHat_B` (n, 3) [-] and `Js` (n,) [kg m^2]: wheel spin axes and inertias for the gyroscopic
      terms (both or neither; default none: wheel terms ignored).
    - `control_law_type`: 0 (default, $\mathbf a = \boldsymbol\omega_{R/N} + K_i\mathbf z$) or 1 ($\mathbf a = \boldsymbol\omega$).

    `init_state()` gives `{"int_sigma": zeros(3), "prior_time": 0}`; `__call__(t, guid, z, Omega=None)`
    returns `(z_next, L_r)` with `guid` the dict of `attitude_error` and `Omega` (n,) the wheel speeds.
    """

    K: Float[Array, ""]
    P: Float[Array, ""]
    Ki: Float[Array, ""]
    integral_limit: Float[Array, ""]
    I_B: Float[Array, "3 3"]
    known_torque_B: Float[Array, "3"]
    gsHat_B: Float[Array, "n 3"] | None
    Js: Float[Array, " n"] | None
    # Set by `precomputed()` only: the stacked products' matrix of `_matrices()`.
    matrices: Float[Array, "3 3 m"] | None
    control_law_type: int = eqx.field(static=True)

    def __init__(
        self,
        K: Float[ArrayLike, ""],
        P: Float[ArrayLike, ""],
        I_B: Float[ArrayLike, "3 3"],
        *,
        Ki: Float[ArrayLike, ""] = -1.0,
        integral_limit: Float[ArrayLike, ""] = 0.0,
        known_torque_B: Float[ArrayLike, "3"] | None = None,
        gsHat_B: Float[ArrayLike, "n 3"] | None = None,
        Js: Float[ArrayLike, " n"] | None = None,
        control_law_type: int = 0,
    ):
        c = "MRPFeedback"
        self.K = check_positive(c, "K", as_array(c, "K", K, "N m", ()), "N m")
        self.P = check_positive(c, "P", as_array(c, "P", P, "N m s", ()), "N m s")
        self.Ki = as_array(c, "Ki", Ki, "1/s", ())
        self.integral_limit = check_positive(
            c,
            "integral_limit",
            as_array(c, "integral_limit", integral_limit, "N m s", ()),
            "N m s",
            allow_zero=True,
        )
        self.I_B = check_inertia(c, "I_B", as_array(c, "I_B", I_B, "kg m^2", (3, 3)))
        self.known_torque_B = (
            jnp.zeros(3)
            if known_torque_B is None
            else as_array(c, "known_torque_B", known_torque_B, "N m", (3,))
        )
        if (gsHat_B is None) != (Js is None):
            raise ValueError(
                f"{c}: `gsHat_B` and `Js` must be given together (wheel terms); got "
                f"gsHat_B={'None' if gsHat_B is None else 'array'}, Js={'None' if Js is None else 'array'}."
            )
        if gsHat_B is None:
            self.gsHat_B = None
            self.Js = None
        else:
            g = as_array(c, "gsHat_B", gsHat_B, "-", (None, 3))
            self.gsHat_B = check_unit_vectors(c, "gsHat_B", g)
            js = as_array(c, "Js", Js, "kg m^2", (g.shape[0],))
            self.Js = check_positive(c, "Js", js, "kg m^2")
        if control_law_type not in (0, 1):
            raise ValueError(f"{c}: `control_law_type` must be 0 or 1; got {control_law_type!r}.")
        self.control_law_type = int(control_law_type)
        self.matrices = None

    def _matrices(self):
        r"""The (3, 3, 3 + n) stack $[[I]\,|\,0],\ [[I]\,|\,0],\ [[I] + \sum_i J_i\hat g_i\hat g_i^T\,|\,(J_i\hat g_i)_i]$:
        applied to $(\deltaoldsymbol\omega, 0)$, $(\mathbf f, 0)$ and $(oldsymbol\omega, oldsymbol\Omega)$ it gives $[I]\deltaoldsymbol\omega$,
        $[I]\mathbf f$ and the total angular momentum $[I]oldsymbol\omega + \sum_i h_{s,i}\hat{\mathbf g}_{s,i}$ in one
        reduction (parameters only)."""
        eye = self.I_B
        if self.gsHat_B is None:
            return jnp.stack([eye, eye, eye])
        g, js = self.gsHat_B, self.Js
        n = g.shape[0]
        I_tot = eye + jnp.sum(js[:, None, None] * g[:, :, None] * g[:, None, :], 0)
        pad = jnp.zeros((3, n))
        return jnp.stack(
            [
                jnp.concatenate([eye, pad], 1),
                jnp.concatenate([eye, pad], 1),
                jnp.concatenate([I_tot, (js[:, None] * g).T], 1),
            ]
        )

    def precomputed(self) -> "MRPFeedback":
        """This law with its parameter-only matrix evaluated (`RWAttitudeFSW.prepare` uses it once
        per run); the result is the same, bit for bit."""
        return eqx.tree_at(
            lambda s: s.matrices, self, self._matrices(), is_leaf=lambda x: x is None
        )

    def init_state(self) -> dict:
        """`{"int_sigma": (3,) zeros [N m s], "prior_time": 0 [s]}` (Basilisk's reset)."""
        return {"int_sigma": jnp.zeros(3), "prior_time": jnp.zeros(())}

    def __call__(self, t, guid: dict, z: dict, Omega=None):
        sigma = guid["sigma_BR"]
        dw = guid["omega_BR_B"]
        w_RN = guid["omega_RN_B"]
        dw_RN = guid["domega_RN_B"]
        omega = dw + w_RN
        t = jnp.asarray(t, float)
        prior = z["prior_time"]
        dt = jnp.where(prior == 0.0, 0.0, t - prior)
        on = self.Ki > 0
        s = z["int_sigma"] + self.K * dt * sigma
        lim = self.integral_limit
        mag = jnp.abs(s)
        over = mag > lim
        s = jnp.where(over, s * lim / jnp.where(over, mag, 1.0), s)
        s = jnp.where(on, s, z["int_sigma"])
        if self.gsHat_B is not None and Omega is None:
            raise ValueError(
                "MRPFeedback: configured with wheels (`gsHat_B`, `Js`) but called without "
                "`Omega` (wheel speeds)."
            )
        # [I] dw, [I] (omega x w_RN - dw_RN) and the total angular momentum about B in B (rigid
        # body plus wheel spin momenta h_s = Js (gs . omega + Omega)): one reduction.
        M = self._matrices() if self.matrices is None else self.matrices
        n = M.shape[-1] - 3
        pad = jnp.zeros(n)
        wheels = pad if self.gsHat_B is None else jnp.asarray(Omega)
        x = jnp.stack(
            [
                jnp.concatenate([dw, pad]),
                jnp.concatenate([cross3(omega, w_RN) - dw_RN, pad]),
                jnp.concatenate([omega, wheels]),
            ]
        )
        I_dw, I_ff, H = jnp.sum(M * x[:, None, :], -1)
        zvec = jnp.where(on, s + I_dw, jnp.zeros(3))
        Ki_z = self.Ki * zvec
        a = w_RN + Ki_z if self.control_law_type == 0 else omega
        # Basilisk's internal sum (the torque the body must *not* receive), then negated.
        L = self.K * sigma + self.P * dw + self.P * Ki_z
        L = L - cross3(a, H)
        L = L + I_ff
        L = L + self.known_torque_B
        z_next = {"int_sigma": s, "prior_time": t}
        return z_next, -L


# Smallest singular value of [C][G_s] (relative to the largest) below which the available wheel axes
# do not span the control axes (round-off of unit vectors is ~1e-16).
_SPAN_RTOL = 1e-10


class RWMotorTorque(eqx.Module):
    r"""Map a required body torque onto the wheel motor torques (Basilisk `rwMotorTorque`).

    **Arguments:**

    - `gsHat_B`: wheel spin axes (n, 3) [-], unit vectors in $\mathcal B$.
    - `control_axes_B`: control axes $\hat{\mathbf c}_j$ as rows (m, 3), $1 \le m \le 3$ [-] (default the
      three body axes).
    - `available`: (n,) 1 (available) or 0 (unavailable) per wheel (default all 1; may be traced).

    `__call__(L_r)` maps the body torque `L_r` (3,) [N m] (the `MRPFeedback` output) to `u_s` (n,) [N m]
    by the minimum-norm rule of the module docstring, folded into one (n, 3) matrix
    $[Q] = -[CG_s]^T([CG_s][CG_s]^T)^{-1}[C]$ so that a tick costs one product. `precomputed()` returns
    the map with $[Q]$ evaluated once (`RWAttitudeFSW.prepare` uses it once per run); the result is
    the same, bit for bit.

    **Assumptions and limitations:** $[CG_s][CG_s]^T$ must be invertible (the available wheel axes
    spanning the control axes): a concrete mapping that is not is refused at construction, naming
    its rank; no torque saturation here.
    """

    gsHat_B: Float[Array, "n 3"]
    control_axes_B: Float[Array, "m 3"]
    available: Float[Array, " n"]
    # Set by `precomputed()` only: the (n, 3) map [Q] of `_matrices()`.
    matrices: Float[Array, "n 3"] | None

    def __init__(
        self,
        gsHat_B: Float[ArrayLike, "n 3"],
        control_axes_B: Float[ArrayLike, "m 3"] | None = None,
        available: Float[ArrayLike, " n"] | None = None,
    ):
        c = "RWMotorTorque"
        g = as_array(c, "gsHat_B", gsHat_B, "-", (None, 3))
        self.gsHat_B = check_unit_vectors(c, "gsHat_B", g)
        n = g.shape[0]
        if n < 1:
            fail(c, "gsHat_B", "must hold at least one wheel axis", "-", g)
        ca = jnp.eye(3) if control_axes_B is None else control_axes_B
        ca = as_array(c, "control_axes_B", ca, "-", (None, 3))
        if not 1 <= ca.shape[0] <= 3:
            fail(c, "control_axes_B", "must hold 1 to 3 control axes (rows)", "-", ca)
        if n < ca.shape[0]:
            fail(
                c,
                "control_axes_B",
                f"must not outnumber the wheels ({n}; Basilisk would command zero torque)",
                "-",
                ca,
            )
        self.control_axes_B = ca
        av = jnp.ones(n) if available is None else as_array(c, "available", available, "-", (n,))
        if is_concrete(av) and not bool(jnp.all((av == 0.0) | (av == 1.0))):
            fail(c, "available", "must be 0 or 1 per wheel", "-", av)
        self.available = av
        self.matrices = None
        m = ca.shape[0]
        if all(is_concrete(x) for x in (g, ca, av)) and int(np.sum(np.asarray(av))) >= m:
            # The available wheels must span the control axes, else [CG_s][CG_s]^T is singular
            # and the map is NaN (Basilisk's 3x3 inverse gives zero torque and prints an error).
            CG = np.asarray(ca) @ np.asarray(g).T * np.asarray(av)[None, :]
            sv = np.linalg.svd(CG, compute_uv=False)
            if sv[-1] <= _SPAN_RTOL * sv[0]:
                fail(
                    c,
                    "gsHat_B",
                    f"must span the {m} control axes `control_axes_B` with the available wheels "
                    f"([CG_s][CG_s]^T is singular: the wheel mapping has rank "
                    f"{int(np.sum(sv > _SPAN_RTOL * sv[0]))} < {m})",
                    "-",
                    g,
                )

    def _matrices(self):
        r"""The (n, 3) matrix $[Q]$ with $\mathbf u_s = [Q]\,\mathbf L_r$: $-[CG_s]^T([CG_s][CG_s]^T)^{-1}[C]$,
        zero rows for unavailable wheels, all zero without enough wheels (parameters only)."""
        m = self.control_axes_B.shape[0]
        # Products as broadcast sums (fused loops, no separate `dot` kernels on the CPU).
        CG = mv3(self.gsHat_B, self.control_axes_B) * self.available[None, :]  # (m, n)
        # [CG][CG]^T in the top-left block of an identity (Basilisk's padded 3x3 inverse).
        M_inv = inv3(jnp.eye(3).at[:m, :m].set(mv3(CG, CG)))[:m, :m]
        MC = jnp.sum(M_inv[:, :, None] * self.control_axes_B[None, :, :], 1)  # (m, 3)
        Q = -jnp.sum(CG[:, :, None] * MC[:, None, :], 0)  # (n, 3)
        enough = jnp.sum(self.available) >= m
        return jnp.where(enough, Q, jnp.zeros_like(Q)) * self.available[:, None]

    def precomputed(self) -> "RWMotorTorque":
        """This map with its parameter-only matrix evaluated (see the class docstring)."""
        return eqx.tree_at(
            lambda s: s.matrices, self, self._matrices(), is_leaf=lambda x: x is None
        )

    def __call__(self, L_r):
        Q = self._matrices() if self.matrices is None else self.matrices
        return jnp.sum(Q * jnp.asarray(L_r)[None, :], -1)  # one reduction per tick


class RWAttitudeFSW(AbstractDiscreteModel):
    r"""Reaction-wheel attitude flight software on a clock: navigation -> attitude error -> MRP
    feedback -> RW torque map, as one discrete model of the clocked driver.

    **Arguments:**

    - `clock`: a `jaxsim.Clock` (e.g. `Clock(0.1)`) or `Schedule`.
    - `control`: an `MRPFeedback`.
    - `mapping`: an `RWMotorTorque`.
    - `sigma_RN`: reference attitude (3,) [-]; `omega_RN_N` [rad/s], `domega_RN_N` [rad/s^2]
      reference rate and acceleration in $\mathcal N$ (default 0: inertial pointing).
    - `guidance`: instead of the constant reference, a guidance module run at each tick on the
      navigation dict (`Inertial3D`, `HillPoint`, `VelocityPoint`: Basilisk's reference module
      ahead of `attTrackingError` in the same task; or `SunSafePoint`, which gives the tracking
      errors itself and needs `r_sun_N`).
    - `r_sun_N`: the sun's inertial position (3,) [m], for the navigation's sun heading
      `vehSunPntBdy` (default None: none).
    - `tracking`: an `AttTrackingError` (e.g. with a body-frame offset `sigma_R0R`); default the
      plain tracking error `attitude_error`.
    - `wheels`: name of the `ReactionWheels` effector commanded (default `"rw"`); its speeds are read
      for the gyroscopic terms when `control` has wheels.
    - `spacecraft`: key of the spacecraft state in the model state (`None`: the model is the
      `Spacecraft`).
    - `tick_at_t0`: run the update on $y_0$ for the held outputs before the first tick (Basilisk's
      FSW call at $t = 0$; default True). False: zero command until the first tick.
    - `name`: unique model name (default `"fsw"`).

    **Held outputs** (merged into `args`): `{wheels: {"motor_torque": u_s}, name: {"L_r_B", "sigma_BR",
    "omega_BR_B"}}` [N m, N m, -, rad/s]. **Discrete state:** `MRPFeedback`'s.
    """

    name: str = eqx.field(static=True)
    clock: AbstractClock
    control: MRPFeedback
    mapping: RWMotorTorque
    nav: AttitudeNavigation
    sigma_RN: Float[Array, "3"] | None
    omega_RN_N: Float[Array, "3"] | None
    domega_RN_N: Float[Array, "3"] | None
    guidance: eqx.Module | None
    tracking: eqx.Module | None
    wheels: str = eqx.field(static=True)
    tick_at_t0: bool = eqx.field(static=True)

    @property
    def spacecraft(self) -> str | None:
        """The `spacecraft` argument (kept by the navigation)."""
        return self.nav.spacecraft

    @property
    def r_sun_N(self):
        """The `r_sun_N` argument (kept by the navigation)."""
        return self.nav.r_sun_N

    @property
    def command_addresses(self) -> tuple:
        """Held-output addresses that command effectors of the simulated spacecraft (`simulate`
        checks that they exist): the reaction wheels."""
        return (self.wheels,)

    def units(self) -> dict:
        """Units of the held outputs (`simulate` compares the wheels' with `ReactionWheels`'
        declared command unit): motor torques [N m], the required torque [N m], the attitude
        error [-] and rate error [rad/s]."""
        return {
            "held": {
                self.wheels: {"motor_torque": "N m"},
                self.name: {"L_r_B": "N m", "sigma_BR": "-", "omega_BR_B": "rad/s"},
            }
        }

    def __init__(
        self,
        clock: AbstractClock,
        control: MRPFeedback,
        mapping: RWMotorTorque,
        sigma_RN: Float[ArrayLike, "3"] | None = None,
        *,
        omega_RN_N: Float[ArrayLike, "3"] | None = None,
        domega_RN_N: Float[ArrayLike, "3"] | None = None,
        guidance: eqx.Module | None = None,
        tracking: eqx.Module | None = None,
        wheels: str = "rw",
        spacecraft: str | None = None,
        r_sun_N: Float[ArrayLike, "3"] | None = None,
        tick_at_t0: bool = True,
        name: str = "fsw",
    ):
        c = "RWAttitudeFSW"
        if not isinstance(clock, AbstractClock):
            raise ValueError(
                f"{c}: `clock` must be a Clock or Schedule; got {type(clock).__name__}."
            )
        if not isinstance(control, MRPFeedback):
            raise ValueError(
                f"{c}: `control` must be an MRPFeedback; got {type(control).__name__}."
            )
        if not isinstance(mapping, RWMotorTorque):
            raise ValueError(
                f"{c}: `mapping` must be an RWMotorTorque; got {type(mapping).__name__}."
            )
        self.name = check_name(c, "name", name)
        self.wheels = check_name(c, "wheels", wheels)
        if name == wheels:
            raise ValueError(
                f"{c}: `name` must differ from `wheels` (both are held-output addresses); got {name!r}."
            )
        if control.gsHat_B is not None and control.gsHat_B.shape != mapping.gsHat_B.shape:
            raise ValueError(
                f"{c}: `mapping` must map onto as many wheels as `control` models "
                f"({control.gsHat_B.shape[0]}); got {mapping.gsHat_B.shape[0]}."
            )
        self.clock = clock
        self.control = control
        self.mapping = mapping
        self.nav = AttitudeNavigation(
            spacecraft, wheels if control.gsHat_B is not None else None, r_sun_N
        )
        # A guidance module (a callable of the navigation dict giving Basilisk's attitude
        # reference message: `Inertial3D`, `HillPoint`, `VelocityPoint`) replaces the constant
        # reference; `tracking` (an `AttTrackingError`) the plain tracking error.
        if guidance is not None:
            if not (isinstance(guidance, eqx.Module) and callable(guidance)):
                raise ValueError(
                    f"{c}: `guidance` must be a reference module such as HillPoint; got "
                    f"{type(guidance).__name__}."
                )
            if hasattr(guidance, "init_state"):
                raise ValueError(
                    f"{c}: `guidance` must be a stateless guidance module (Inertial3D, HillPoint, "
                    f"VelocityPoint, SunSafePoint); got {type(guidance).__name__}, which keeps a "
                    "state between calls."
                )
            if type(guidance).__name__ == "SunSafePoint" and r_sun_N is None:
                raise ValueError(
                    f"{c}: `guidance` SunSafePoint reads the sun heading: give `r_sun_N` [m]; "
                    "got None."
                )
            if sigma_RN is not None or omega_RN_N is not None or domega_RN_N is not None:
                raise ValueError(
                    f"{c}: give either `guidance` or the constant reference `sigma_RN` "
                    "(`omega_RN_N`, `domega_RN_N`), not both."
                )
        elif sigma_RN is None:
            raise ValueError(f"{c}: `sigma_RN` [-] is required without `guidance`; got None.")
        if tracking is not None and not (isinstance(tracking, eqx.Module) and callable(tracking)):
            raise ValueError(
                f"{c}: `tracking` must be an AttTrackingError; got {type(tracking).__name__}."
            )
        self.guidance = guidance
        self.tracking = tracking
        self.sigma_RN = None if sigma_RN is None else as_array(c, "sigma_RN", sigma_RN, "-", (3,))
        constant = guidance is None
        self.omega_RN_N = (
            (jnp.zeros(3) if constant else None)
            if omega_RN_N is None
            else as_array(c, "omega_RN_N", omega_RN_N, "rad/s", (3,))
        )
        self.domega_RN_N = (
            (jnp.zeros(3) if constant else None)
            if domega_RN_N is None
            else as_array(c, "domega_RN_N", domega_RN_N, "rad/s^2", (3,))
        )
        self.tick_at_t0 = bool(tick_at_t0)

    def init_state(self):
        return self.control.init_state()

    def update(self, t, y, z, args):
        nav = self.nav(y)
        if self.guidance is None and self.tracking is None:
            guid = attitude_error(
                nav["sigma_BN"], nav["omega_BN_B"], self.sigma_RN, self.omega_RN_N, self.domega_RN_N
            )
        else:
            if self.guidance is None:
                ref = {
                    "sigma_RN": self.sigma_RN,
                    "omega_RN_N": self.omega_RN_N,
                    "domega_RN_N": self.domega_RN_N,
                }
            else:
                ref = self.guidance(nav)
            if "sigma_BR" in ref:  # a guidance module giving the tracking errors (SunSafePoint)
                guid = ref
            elif self.tracking is None:
                guid = attitude_error(
                    nav["sigma_BN"],
                    nav["omega_BN_B"],
                    ref["sigma_RN"],
                    ref["omega_RN_N"],
                    ref["domega_RN_N"],
                )
            else:
                guid = self.tracking(nav, ref)
        z_next, L_r = self.control(t, guid, z, nav.get("Omega"))
        u = self.mapping(L_r)
        held = {
            self.wheels: {"motor_torque": u},
            self.name: {
                "L_r_B": L_r,
                "sigma_BR": guid["sigma_BR"],
                "omega_BR_B": guid["omega_BR_B"],
            },
        }
        return z_next, held

    def prepare(self):
        """The FSW with the control law's and the torque map's parameter-only matrices evaluated
        once per run."""
        return eqx.tree_at(
            lambda s: (s.control, s.mapping),
            self,
            (self.control.precomputed(), self.mapping.precomputed()),
        )

    def init_outputs(self, y0, args):
        if not self.tick_at_t0:
            return None
        # Basilisk's FSW call at t = 0; with prior_time = 0 it leaves the discrete state unchanged.
        return self.update(jnp.zeros(()), y0, self.init_state(), args)[1]
