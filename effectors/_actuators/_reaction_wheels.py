r"""Reaction wheels (Basilisk `reactionWheelStateEffector`), N wheels vectorized in one effector.

Frames and points: $\mathcal B$ hub body frame with origin $B$; per wheel $i$ the wheel frame
$\mathcal W_i = (\hat{\mathbf g}_s, \hat{\mathbf w}_2, \hat{\mathbf w}_3)$ with origin $W$ on the spin axis
($\mathbf r_{W/B}$), rotating relative to $\mathcal B$ by the wheel angle $\theta$ about $\hat{\mathbf g}_s$;
$W_c$ is the rotor centre of mass. All vectors are in $\mathcal B$ components.

Wheel equations in back-substitution form (Basilisk `reactionWheelStateEffector` documentation;
Allard, Schaub & Piggott, JSR 55(5), 2018, for the back-substitution method):

$$\dot\Omega_i = \mathbf a_{\Omega,i}^T\,{}^B\ddot{\mathbf r}_{B/N} + \mathbf b_{\Omega,i}^T\dot{\boldsymbol\omega}
+ c_{\Omega,i},\qquad \dot\theta_i = \Omega_i .$$

Three models (static flag `model`, one per effector; put wheels of different models in separate
effectors):

- `"balanced"` (Basilisk `BalancedWheels`): $\mathbf a_\Omega = 0$, $\mathbf b_\Omega = -\hat{\mathbf g}_s$,
  $c_\Omega = (u_s + \tau_f)/J_s$; $[D] = -J_s\hat g_s\hat g_s^T$,
  $\mathbf v_{rot} = -\hat g_s(u_s+\tau_f) - J_s\Omega\,\boldsymbol\omega\times\hat g_s$.
- `"jitter_simple"` (`JitterSimple`): balanced plus the imbalance load $\mathbf F_s = U_s\Omega^2\hat w_2$ in
  $\mathbf v_{trans}$ and $\mathbf r_{W/B}\times\mathbf F_s + U_d\Omega^2\hat w_2$ in $\mathbf v_{rot}$ (not conservative).
- `"jitter_fully_coupled"` (`JitterFullyCoupled`): the rotor is a separate rigid body of mass $m_w$ with CoM
  offset $d = U_s/m_w$ along $\hat w_2$ and product of inertia $J_{13} = U_d$ (as Basilisk sets them at reset).

**Difference from Basilisk for `jitter_fully_coupled` with $J_t \ne J_g$.** Basilisk's $c_\Omega$ uses
$\omega_{w2}\omega_{w3}(-m_wd^2)$ and its $[I'_{W_c}]$ omits the $\Omega(J_t-J_g)$ entries of the
$(\hat w_2,\hat w_3)$ block; both are exact only for $J_t = J_g$ (which Basilisk's factory always sets), and for
$J_t\neq J_g$ Basilisk leaks energy and angular momentum independently of the step. Here the default
`coupled_form="general"` uses the derivation's terms

$$c_\Omega \ni \omega_{w2}\omega_{w3}(J_t - J_g - m_wd^2)/J_d,\qquad
[I'_{W_c}] = [BW]\,\Omega\begin{bmatrix}0&-J_{13}&0\\-J_{13}&0&J_t-J_g\\0&J_t-J_g&0\end{bmatrix}[BW]^T,$$

which conserve energy and momentum to integrator accuracy and reduce exactly to Basilisk's for
$J_t = J_g$. `coupled_form="basilisk"` reproduces Basilisk's formulas (for cross-validation only).

**Motor torque.** The command $u$ per wheel [N m] is the sum of `motor_torque` (a constant `(n,)` array,
or a signal: a callable of $t$, e.g. `jaxsim.PiecewiseConstant`) and, when `args` is a dict holding
`args[name]["motor_torque"]`, that array (flight software; the caller holds it constant over a step,
i.e. zero-order hold). A `jaxsim.controls` parameterization is the way to give an optimized
profile: a `PiecewiseConstant` gives every RK stage of a fixed step the value held over the step
(with switches on the step grid, the exact zero-order hold from $t_k$ on). The command limits of Basilisk's `reactionWheelStateEffector` are applied in this order:
1. `u_max > 0`: $u \leftarrow \mathrm{clip}(u, -u_{max}, u_{max})$;
2. $|u| < u_{min}$: $u \leftarrow 0$ (deadband);
3. `P_max > 0` and $|u\Omega| \ge P_{max}$: $u \leftarrow \mathrm{sign}(u)\,|P_{max}/\Omega|$;
4. `Omega_max > 0`, $|\Omega| \ge \Omega_{max}$ and $\Omega u \ge 0$: $u \leftarrow 0$ (Basilisk's single
   threshold without hysteresis: a torque that would further increase $|\Omega|$ is zeroed).
A limit that is `None` or $\le 0$ is disabled. The result is the applied torque $u_s$.

*Where this differs from Basilisk:* Basilisk evaluates the limits once per scheduler step with the speed
at the start of the step and holds $u_s$ over the step. Here they are evaluated at **every derivative
evaluation** with the current (stage) speed, so the model is an ODE in its own right: the result does not
depend on the step size or on where step boundaries fall, the same model runs under adaptive solvers, and
no extra state is needed. Steps 1-2 depend only on the command and are therefore identical to Basilisk
for commands held over the step; steps 3-4 agree with Basilisk up to $O(h)$ in the speed at which they
act (the power limit is then a continuous function of $\Omega$; at the $\Omega_{max}$ threshold the
right-hand side is discontinuous, so a step that crosses it loses RK4's order, and the speed settles
within $O(h|\dot\Omega|)$ of $\Omega_{max}$, like Basilisk's once-per-step logic). Under `jax.grad` the
limits are piecewise: a clipped or zeroed torque has zero derivative w.r.t. the command.

**Friction** $\tau_f$ (Basilisk's wheel friction model, evaluated at every derivative evaluation), with the resisting
function $f$ and $\tau_f = -f$:

- Coulomb + viscous: $f_C(\Omega) = \tau_c\,s(\Omega) + c_v\Omega$ with $s = \mathrm{sign}$ (Basilisk), or
  $s(\Omega) = \tanh(\Omega/w)$ when `coulomb_width` $w > 0$ (a smooth option for gradients);
- Stribeck (when `betaStatic` $\beta_{st} > 0$ and the wheel starts near rest):
  $f_S = \sqrt{2e}(\tau_{st}-\tau_c)\,x e^{-x^2} + \tau_c\tanh(10\Omega/\beta_{st}) + c_v\Omega$, $x = \Omega/(\sqrt2\beta_{st})$;
- limit-cycle smoothing: for $|\Omega| < \omega_{lc}$, $f = f(\omega_{lc})\,\Omega/\omega_{lc}$ (the active mode's value at
  $+\omega_{lc}$), a line through zero (so $f$ is continuous for $\omega_{lc} > 0$).

Basilisk keeps the Stribeck mode in a sticky flag mutated inside the derivative. Here it is a discrete
per-wheel state `"stribeck"` (0/1, with the speed at the start of the step `"Omega_prev"`), present only
when some `betaStatic > 0`, held constant during a step and updated by `step_map` once per completed step,
with Basilisk's rule applied to the end-of-step speed $\Omega$ and start-of-step speed $\Omega_{prev}$:
the mode is on after the step iff $\beta_{st} > 0$, ($|\Omega| < 0.1\,\omega_{lc}$ or it was on) and
$|\mathrm{sign}(\Omega) - \mathrm{sign}(\Omega - \Omega_{prev})| \le 1$ (speed not moving back towards
zero); initially it is on iff $\beta_{st}>0$ and $|\Omega_0| < 0.1\,\omega_{lc}$. Holding the mode over a step
keeps the right-hand side smooth inside each step (RK4 keeps its order away from the other switches)
and makes the switch an explicit, documented step-level map instead of hidden mutation; Basilisk may
switch mid-step at an RK stage, so the two differ by at most one step in when the mode changes.
Under `jax.grad`: the mode is a discrete state (zero derivative through the switch); `sign` has zero
derivative (use `coulomb_width > 0` for a smooth Coulomb term); the limit-cycle branch switch at
$|\Omega| = \omega_{lc}$ is continuous with a kink, so derivatives are piecewise. With the defaults all
friction coefficients are zero and $\tau_f \equiv 0$.

**States** (`init_state(**overrides)`): `"Omega"` $(n,)$ [rad/s], wheel speed relative to $\mathcal B$; for the
jitter models `"theta"` $(n,)$ [rad]; with Stribeck friction `"stribeck"`, `"Omega_prev"` $(n,)$; with
`track_work=True` `"motor_work"` $= \int u_s\Omega\,dt$ and `"friction_work"` $= \int\tau_f\Omega\,dt$ $(n,)$ [J]
(their sum is the change of the rotational energy caused by the wheels).

**Outputs:** `Omega`, `theta` (jitter), `u_cmd` (command), `u_s` (applied motor torque after the limits),
`friction_torque` $\tau_f$, `power` $u_s\Omega$ (mechanical power delivered by the motor) [W], and
`stribeck` when present.

**Assumptions and limitations:** balanced and simple-jitter wheels contribute no mass or inertia: the
hub's `IHubPntBc_B` and mass must already contain the wheels' (Basilisk convention). Fully-coupled rotors
must **not** be in the hub. Basilisk's safety clamp of $|\dot\Omega|$ at `maxWheelAcceleration` ($10^6$ rad/s^2)
is not implemented (it never acts in physical set-ups and breaks momentum conservation when it does).
The configured initial `theta` is used (Basilisk always starts at 0). Motor electrical power/efficiency is
not modelled.

**Reference:** J. Alcorn, C. Allard, H. Schaub, "Fully Coupled Reaction Wheel Static and Dynamic
Imbalance for Spacecraft Jitter Modeling", J. Guidance, Control, and Dynamics 41(6), 2018,
doi:10.2514/1.G003277; friction: H. Olsson, K. J. Astrom et al., "Friction models and friction
compensation", European Journal of Control 4(3), 1998.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxsim.kinematics import cross3, dot3, mv3, outer3
from jaxsim.signals import AbstractSignal, breakpoints_of, evaluate
from jaxsim.validation import (
    as_array,
    check_name,
    check_positive,
    check_unit_vectors,
    fail,
    is_concrete,
)

from .._spacecraft._contract import AbstractStateEffector
from .._spacecraft._joints import JointContribution, JointRows
from .._spacecraft._physical import nonnegative, positive
from .._spacecraft._types import EnergyMomentum, HubContext, MassProps
from ._wheel_parts import WheelFriction, WheelLimits, per_wheel as _per_wheel


_CLS = "ReactionWheels"
_MODELS = ("balanced", "jitter_simple", "jitter_fully_coupled")
_COUPLED_FORMS = ("general", "basilisk")
# Tolerance on the orthonormality of (gsHat, w2Hat0, w3Hat0): the same as check_unit_vectors.
_ORTHO_TOL = 1e-9


def _per_wheel_vec(arg, value, unit, n):
    arr = as_array(_CLS, arg, value, unit)
    if arr.shape == (3,) and n == 1:
        arr = arr[None, :]
    if arr.shape != (n, 3):
        raise ValueError(
            f"{_CLS}: `{arg}` must have shape ({n}, 3) (one row per wheel) [{unit}]; "
            f"got shape {tuple(arr.shape)}."
        )
    return arr


def _default_transverse(gsHat_B):
    """Basilisk factory convention: w2 = unit(g x x) (g x y if |g x x| < 0.01), w3 = g x w2."""
    g = gsHat_B
    vx = cross3(g, jnp.array([1.0, 0.0, 0.0]))
    vy = cross3(g, jnp.array([0.0, 1.0, 0.0]))
    nx = jnp.sqrt(dot3(vx, vx))
    v = jnp.where((nx < 0.01)[:, None], vy, vx)
    w2 = v / jnp.sqrt(dot3(v, v))[:, None]
    return w2, cross3(g, w2)


def _part(component, field):
    return None if component is None else getattr(component, field)


def _spin_axes(gsHat_B):
    """The spin axes as `(n, 3)` unit vectors (one `(3,)` axis: one wheel)."""
    g = as_array(_CLS, "gsHat_B", gsHat_B, "-")
    if g.shape == (3,):
        g = g[None, :]
    if g.ndim != 2 or g.shape[1] != 3 or g.shape[0] < 1:
        raise ValueError(
            f"{_CLS}: `gsHat_B` must have shape (n, 3) with n >= 1 (one row per wheel) [-]; "
            f"got shape {tuple(g.shape)}."
        )
    return check_unit_vectors(_CLS, "gsHat_B", g)


def _transverse_axes(g, w2Hat0_B, w3Hat0_B):
    """`(w2Hat0_B, w3Hat0_B)`: given (checked to complete a right-handed triad with `g`), or
    Basilisk's factory convention when both are None."""
    n = g.shape[0]
    if w2Hat0_B is None and w3Hat0_B is None:
        return _default_transverse(g)
    if w2Hat0_B is None or w3Hat0_B is None:
        missing = "w2Hat0_B" if w2Hat0_B is None else "w3Hat0_B"
        raise ValueError(
            f"{_CLS}: `{missing}` must be given together with the other transverse axis "
            "(or both omitted for the factory default); got None."
        )
    w2 = check_unit_vectors(_CLS, "w2Hat0_B", _per_wheel_vec("w2Hat0_B", w2Hat0_B, "-", n))
    w3 = check_unit_vectors(_CLS, "w3Hat0_B", _per_wheel_vec("w3Hat0_B", w3Hat0_B, "-", n))
    if is_concrete(w2) and is_concrete(g):
        dots = jnp.abs(jnp.sum(g * w2, axis=-1))
        if bool(jnp.any(dots > _ORTHO_TOL)):
            why = f"must be orthogonal to `gsHat_B` (|g.w2| = {np.asarray(dots)})"
            fail(_CLS, "w2Hat0_B", why, "-", w2)
    if is_concrete(w3) and is_concrete(w2) and is_concrete(g):
        err = jnp.max(jnp.abs(jnp.cross(g, w2) - w3), axis=-1)
        if bool(jnp.any(err > _ORTHO_TOL)):
            why = f"must equal gsHat_B x w2Hat0_B (right-handed triad; error {np.asarray(err)})"
            fail(_CLS, "w3Hat0_B", why, "-", w3)
    return w2, w3


def _rotor_params(n, model, Js, Jt, Jg, mass, U_s, U_d):
    """`(Js, Jt, Jg, mass, U_s, U_d)` per wheel, checked (`Jt`, `Jg` default `Js / 2`)."""
    coupled = model == "jitter_fully_coupled"
    Js = check_positive(_CLS, "Js", _per_wheel("Js", Js, "kg m^2", n, 0.0), "kg m^2")
    Jt = Js / 2.0 if Jt is None else _per_wheel("Jt", Jt, "kg m^2", n, 0.0)
    Jg = Js / 2.0 if Jg is None else _per_wheel("Jg", Jg, "kg m^2", n, 0.0)
    check_positive(_CLS, "Jt", Jt, "kg m^2")
    check_positive(_CLS, "Jg", Jg, "kg m^2")
    if coupled and mass is None:
        raise ValueError(
            f"{_CLS}: `mass` [kg] is required for model 'jitter_fully_coupled'; got None."
        )
    mass = check_positive(_CLS, "mass", _per_wheel("mass", mass, "kg", n, 1.0), "kg")
    U_s = _per_wheel("U_s", U_s, "kg m", n, 0.0)
    U_d = _per_wheel("U_d", U_d, "kg m^2", n, 0.0)
    if coupled and is_concrete(U_d) and is_concrete(Js) and is_concrete(Jg):
        if bool(jnp.any(Js * Jg <= U_d**2)):
            why = "must satisfy U_d^2 < Js*Jg (positive-definite rotor inertia)"
            fail(_CLS, "U_d", why, "kg m^2", U_d)
    return Js, Jt, Jg, mass, U_s, U_d


def _initial_angle(theta, model, n):
    """The initial wheel angles (jitter models; balanced wheels have none: 0 only)."""
    out = _per_wheel("theta", theta, "rad", n, 0.0)
    if theta is not None and model == "balanced" and is_concrete(out):
        if bool(jnp.any(out != 0.0)):
            why = "applies only to jitter models (balanced wheels have no angle)"
            fail(_CLS, "theta", why, "rad", out)
    return out


def _motor_input(motor_torque, n):
    """The configured motor torque: `(n,)` zeros, an `(n,)` array, or a signal of t."""
    if motor_torque is None:
        return jnp.zeros(n)
    if not (isinstance(motor_torque, AbstractSignal) or callable(motor_torque)):
        return _per_wheel("motor_torque", motor_torque, "N m", n, 0.0)
    try:
        shape = jax.eval_shape(lambda: jnp.asarray(motor_torque(jnp.zeros(()))))
    except Exception as err:  # noqa: BLE001  (report any failure of the user's callable)
        raise ValueError(
            f"{_CLS}: `motor_torque` signal must be callable as f(t) [N m]; calling it at "
            f"t=0 failed with {type(err).__name__}: {err}."
        ) from err
    if shape.shape not in ((), (n,)):
        raise ValueError(
            f"{_CLS}: `motor_torque` signal must return shape () or ({n},) [N m]; got "
            f"shape {shape.shape}."
        )
    return motor_torque


class ReactionWheels(AbstractStateEffector):
    r"""N reaction wheels of one model in one effector (Basilisk `reactionWheelStateEffector`).

    See the module docstring for the equations, the command limits, friction, states and outputs.

    **Arguments** (per-wheel parameters accept a scalar, broadcast to all wheels, or an `(n,)` array;
    vectors are `(n, 3)` in $\mathcal B$ components, or `(3,)` for a single wheel):

    - `gsHat_B`: spin axes $\hat{\mathbf g}_s$ (unit vectors) [-]; fixes the number of wheels $n$.
    - `Js`: spin-axis inertias $J_s$ [kg m^2], > 0.
    - `model`: `"balanced"` (default), `"jitter_simple"` or `"jitter_fully_coupled"`.
    - `Omega`: initial wheel speeds relative to $\mathcal B$ [rad/s] (default 0).
    - `theta`: initial wheel angles [rad] (jitter models; default 0).
    - `motor_torque`: motor torque command [N m]: `(n,)` array or a callable of $t$ returning one
      (default 0); `args[name]["motor_torque"]` is added when given.
    - `w2Hat0_B`, `w3Hat0_B`: transverse axes at $\theta = 0$ [-], with $(\hat g_s, \hat w_{2,0}, \hat w_{3,0})$ a
      right-handed orthonormal triad (jitter models; default: Basilisk's factory convention
      $\hat w_{2,0} = \mathrm{unit}(\hat g_s\times\hat x)$, or $\times\hat y$ when nearly parallel; $\hat w_{3,0} = \hat g_s\times\hat w_{2,0}$).
    - `rWB_B`: wheel origin $W$ (on the spin axis) relative to $B$ [m] (default 0).
    - `Jt`, `Jg`: transverse inertias about $W_c$ along $\hat w_2$, $\hat w_3$ [kg m^2], > 0
      (fully coupled; default $J_s/2$ as Basilisk's factory).
    - `mass`: rotor mass $m_w$ [kg], > 0 (required for `"jitter_fully_coupled"`, unused otherwise).
    - `U_s`: static imbalance [kg m], `U_d`: dynamic imbalance [kg m^2] (jitter models; default 0);
      fully coupled requires $J_sJ_g > U_d^2$ (positive-definite rotor inertia).
    - `u_max` [N m], `u_min` [N m], `P_max` [W], `Omega_max` [rad/s]: command limits (`None` or <= 0:
      disabled).
    - `fCoulomb` $\tau_c$ [N m], `fStatic` $\tau_{st}$ [N m], `cViscous` $c_v$ [N m s], all >= 0;
      `betaStatic` $\beta_{st}$ [rad/s] (<= 0 or `None`: no Stribeck mode); `omegaLimitCycle` $\omega_{lc}$
      [rad/s], >= 0 (default $10^{-4}$; 0 disables the smoothing); `coulomb_width` $w$ [rad/s], >= 0
      (0: exact sign, Basilisk).
    - `track_work`: add the `motor_work` / `friction_work` states (energy audits).

      The command limits (`u_max`, `u_min`, `P_max`, `Omega_max`) and the friction parameters
      (`fCoulomb` ... `coulomb_width`) are two groups. A group left entirely unset (`None`) is not part
      of the model: its fields are `None` and its terms are not evaluated, so an ideal wheel costs no
      limit or friction work per derivative (about 20% of a closed-loop slew step on the CPU). To
      sweep, disperse or differentiate a limit or a friction coefficient, set it at construction
      (e.g. `fCoulomb=0.0`): its group then holds arrays that `eqx.tree_at` can replace.
    - `coupled_form`: `"general"` (default, conservative for $J_t\ne J_g$) or `"basilisk"`.
    - `name`: unique effector name (key of its state).
    """

    gsHat_B: Float[Array, "n 3"]
    w2Hat0_B: Float[Array, "n 3"]
    w3Hat0_B: Float[Array, "n 3"]
    rWB_B: Float[Array, "n 3"]
    Js: Float[Array, " n"]
    Jt: Float[Array, " n"]
    Jg: Float[Array, " n"]
    mass: Float[Array, " n"]
    U_s: Float[Array, " n"]
    U_d: Float[Array, " n"]
    Omega: Float[Array, " n"]
    theta: Float[Array, " n"]
    motor_torque: object
    limits: WheelLimits | None
    friction: WheelFriction | None
    model: str = eqx.field(static=True)
    coupled_form: str = eqx.field(static=True)
    track_work: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def init_commands(self) -> dict:
        """`{"motor_torque": zeros (n,)}` [N m]: the command read from `args[name]`."""
        return {"motor_torque": jnp.zeros(self.num_wheels)}

    def __init__(
        self,
        gsHat_B: Float[ArrayLike, "n 3"],
        Js: Float[ArrayLike, "*n"],
        *,
        model: str = "balanced",
        Omega: Float[ArrayLike, "*n"] | None = None,
        theta: Float[ArrayLike, "*n"] | None = None,
        motor_torque: ArrayLike | AbstractSignal | Callable[..., ArrayLike] | None = None,
        w2Hat0_B: Float[ArrayLike, "n 3"] | None = None,
        w3Hat0_B: Float[ArrayLike, "n 3"] | None = None,
        rWB_B: Float[ArrayLike, "*n 3"] | None = None,
        Jt: Float[ArrayLike, "*n"] | None = None,
        Jg: Float[ArrayLike, "*n"] | None = None,
        mass: Float[ArrayLike, "*n"] | None = None,
        U_s: Float[ArrayLike, "*n"] | None = None,
        U_d: Float[ArrayLike, "*n"] | None = None,
        u_max: Float[ArrayLike, "*n"] | None = None,
        u_min: Float[ArrayLike, "*n"] | None = None,
        P_max: Float[ArrayLike, "*n"] | None = None,
        Omega_max: Float[ArrayLike, "*n"] | None = None,
        fCoulomb: Float[ArrayLike, "*n"] | None = None,
        fStatic: Float[ArrayLike, "*n"] | None = None,
        betaStatic: Float[ArrayLike, "*n"] | None = None,
        cViscous: Float[ArrayLike, "*n"] | None = None,
        omegaLimitCycle: Float[ArrayLike, "*n"] | None = None,
        coulomb_width: Float[ArrayLike, "*n"] | None = None,
        track_work: bool = False,
        coupled_form: str = "general",
        name: str = "rw",
    ):
        if model not in _MODELS:
            raise ValueError(f"{_CLS}: `model` must be one of {_MODELS}; got {model!r}.")
        if coupled_form not in _COUPLED_FORMS:
            raise ValueError(
                f"{_CLS}: `coupled_form` must be one of {_COUPLED_FORMS}; got {coupled_form!r}."
            )
        self.model = model
        self.coupled_form = coupled_form
        self.track_work = bool(track_work)
        self.name = check_name(_CLS, "name", name)
        self.gsHat_B = g = _spin_axes(gsHat_B)
        n = g.shape[0]
        self.w2Hat0_B, self.w3Hat0_B = _transverse_axes(g, w2Hat0_B, w3Hat0_B)
        self.rWB_B = jnp.zeros((n, 3)) if rWB_B is None else _per_wheel_vec("rWB_B", rWB_B, "m", n)
        self.Js, self.Jt, self.Jg, self.mass, self.U_s, self.U_d = _rotor_params(
            n, model, Js, Jt, Jg, mass, U_s, U_d
        )
        self.Omega = _per_wheel("Omega", Omega, "rad/s", n, 0.0)
        self.theta = _initial_angle(theta, model, n)
        self.motor_torque = _motor_input(motor_torque, n)
        # A group left entirely unset is not part of the model (None: nothing computed).
        limits = dict(u_max=u_max, u_min=u_min, P_max=P_max, Omega_max=Omega_max)
        friction = dict(
            fCoulomb=fCoulomb,
            fStatic=fStatic,
            betaStatic=betaStatic,
            cViscous=cViscous,
            omegaLimitCycle=omegaLimitCycle,
            coulomb_width=coulomb_width,
        )
        unset = lambda group: all(v is None for v in group.values())  # noqa: E731
        self.limits = None if unset(limits) else WheelLimits(n, **limits)
        self.friction = None if unset(friction) else WheelFriction(n, **friction)

    # ----------------------------------------------------------------------------------------------
    # The components' parameters under the constructor's names (None when the group is unset);
    # `eqx.tree_at(lambda w: w.fCoulomb, ...)` sets them.

    u_max = property(lambda self: _part(self.limits, "u_max"), doc="Torque limit [N m].")
    u_min = property(lambda self: _part(self.limits, "u_min"), doc="Deadband [N m].")
    P_max = property(lambda self: _part(self.limits, "P_max"), doc="Power limit [W].")
    Omega_max = property(lambda self: _part(self.limits, "Omega_max"), doc="Speed limit [rad/s].")
    fCoulomb = property(lambda self: _part(self.friction, "fCoulomb"), doc="Coulomb [N m].")
    fStatic = property(lambda self: _part(self.friction, "fStatic"), doc="Static [N m].")
    betaStatic = property(lambda self: _part(self.friction, "betaStatic"), doc="[rad/s].")
    cViscous = property(lambda self: _part(self.friction, "cViscous"), doc="Viscous [N m s].")
    omegaLimitCycle = property(lambda self: _part(self.friction, "omegaLimitCycle"), doc="[rad/s]")
    coulomb_width = property(lambda self: _part(self.friction, "coulomb_width"), doc="[rad/s].")

    @property
    def stribeck(self) -> bool:
        """Whether the Stribeck friction mode is a state of this model (static)."""
        return self.friction is not None and self.friction.stribeck

    # ----------------------------------------------------------------------------------------------
    # Small helpers

    @property
    def num_wheels(self) -> int:
        return self.gsHat_B.shape[0]

    @property
    def _jitter(self) -> bool:
        return self.model != "balanced"

    def _axes(self, theta):
        """Current transverse axes $\\hat w_2, \\hat w_3$ (n, 3)."""
        c, s = jnp.cos(theta)[:, None], jnp.sin(theta)[:, None]
        w2 = c * self.w2Hat0_B + s * self.w3Hat0_B
        w3 = -s * self.w2Hat0_B + c * self.w3Hat0_B
        return w2, w3

    def physical_checks(self, x=None) -> dict:
        """`{quantity: traced bool}` (read by `Spacecraft.validity`): inertias `Js`, `Jt`, `Jg`
        and masses > 0; friction coefficients (`fCoulomb`, `fStatic`, `cViscous`,
        `omegaLimitCycle`, `coulomb_width`) and the torque floor `u_min` >= 0 where set."""
        out = {k: positive(getattr(self, k)) for k in ("Js", "Jt", "Jg", "mass")}
        for k in ("fCoulomb", "fStatic", "cViscous", "omegaLimitCycle", "coulomb_width", "u_min"):
            if getattr(self, k) is not None:
                out[k] = nonnegative(getattr(self, k))
        return out

    def init_state(self, **overrides) -> dict:
        """Initial state from the configured `Omega` (and `theta`), or from `overrides`.

        Accepted keys: `Omega`, `theta` (jitter), `stribeck`, `Omega_prev` (Stribeck friction),
        `motor_work`, `friction_work` (`track_work`); the Stribeck mode defaults to Basilisk's entry
        rule at the initial speed.
        """
        n = self.num_wheels
        keys = ["Omega"]
        if self._jitter:
            keys.append("theta")
        if self.stribeck:
            keys += ["stribeck", "Omega_prev"]
        if self.track_work:
            keys += ["motor_work", "friction_work"]
        unknown = set(overrides) - set(keys)
        if unknown:
            raise ValueError(
                f"{_CLS}.init_state: unknown state name(s) {sorted(unknown)!r}; states of "
                f"{self.name!r} are {keys!r}."
            )

        def get(key, default, unit):
            if key in overrides:
                return _per_wheel(key, overrides[key], unit, n, 0.0)
            return default

        x = {"Omega": get("Omega", self.Omega, "rad/s")}
        if self._jitter:
            x["theta"] = get("theta", self.theta, "rad")
        if self.stribeck:
            x["stribeck"] = get("stribeck", self.friction.initial_mode(x["Omega"]), "-")
            x["Omega_prev"] = get("Omega_prev", x["Omega"], "rad/s")
        if self.track_work:
            x["motor_work"] = get("motor_work", jnp.zeros(n), "J")
            x["friction_work"] = get("friction_work", jnp.zeros(n), "J")
        return x

    # ----------------------------------------------------------------------------------------------
    # Commands and friction

    def command(self, t, args) -> Float[Array, " n"]:
        """Commanded motor torque [N m] before limits: `motor_torque(t)` plus `args[name]["motor_torque"]`."""
        u = jnp.broadcast_to(jnp.asarray(evaluate(self.motor_torque, t), float), (self.num_wheels,))
        cmd = self.read_command(args, "motor_torque")
        return u if cmd is None else u + jnp.asarray(cmd)

    def limit_torque(self, u, Omega) -> Float[Array, " n"]:
        """Apply the command limits (clip, deadband, power, speed) to torques `u` at speeds `Omega`."""
        return u if self.limits is None else self.limits.apply(u, Omega)

    def friction_torque(self, Omega, stribeck=None) -> Float[Array, " n"]:
        r"""Friction torque $\tau_f$ [N m] at speeds `Omega` (Stribeck mode `stribeck`, 0/1, default off)."""
        if self.friction is None:  # no friction configured: nothing to compute
            return jnp.zeros_like(Omega)
        return self.friction.torque(Omega, stribeck)

    def _torques(self, x, ctx):
        Omega = x["Omega"]
        u_cmd = self.command(ctx.t, ctx.args)
        u_s = self.limit_torque(u_cmd, Omega)
        tau_f = self.friction_torque(Omega, x.get("stribeck"))
        return u_cmd, u_s, tau_f

    # ----------------------------------------------------------------------------------------------
    # Fully-coupled rotor geometry

    def _rotor(self, x):
        """Rotor geometry of the fully-coupled model: axes, CoM, inertia and their body-frame rates."""
        g = self.gsHat_B
        Omega = x["Omega"]
        w2, w3 = self._axes(x["theta"])
        m = self.mass
        d = self.U_s / m
        J13 = self.U_d
        # [I_Wc] = [BW][I_W][BW]^T and its body-frame rate, expanded on the wheel axes.
        col = lambda s: s[:, None, None]
        gw3 = outer3(g, w3) + outer3(w3, g)
        I_Wc = (
            col(self.Js) * outer3(g, g)
            + col(self.Jt) * outer3(w2, w2)
            + col(self.Jg) * outer3(w3, w3)
            + col(J13) * gw3
        )
        dJ = self.Jt - self.Jg if self.coupled_form == "general" else jnp.zeros_like(Omega)
        Ip_Wc = col(Omega) * (
            -col(J13) * (outer3(g, w2) + outer3(w2, g))
            + col(dJ) * (outer3(w2, w3) + outer3(w3, w2))
        )
        r = self.rWB_B + d[:, None] * w2
        rp = (d * Omega)[:, None] * w3
        return dict(g=g, w2=w2, w3=w3, m=m, d=d, J13=J13, I_Wc=I_Wc, Ip_Wc=Ip_Wc, r=r, rp=rp, dJ=dJ)

    # ----------------------------------------------------------------------------------------------
    # Effector contract

    def mass_props(self, x, ctx=None) -> MassProps:
        if self.model != "jitter_fully_coupled":
            return MassProps.zeros()
        R = self._rotor(x)
        m, r, rp = R["m"], R["r"], R["rp"]
        eye = jnp.eye(3)
        col = lambda s: s[:, None, None]
        # m [r~][r~]^T and its rate m([r~'][r~]^T + [r~][r~']^T).
        steiner = col(dot3(r, r)) * eye - outer3(r, r)
        steiner_p = col(2.0 * dot3(r, rp)) * eye - outer3(r, rp) - outer3(rp, r)
        return MassProps(
            jnp.sum(m),
            jnp.zeros(()),
            jnp.sum(m[:, None] * r, 0),
            jnp.sum(m[:, None] * rp, 0),
            jnp.sum(R["I_Wc"] + col(m) * steiner, 0),
            jnp.sum(R["Ip_Wc"] + col(m) * steiner_p, 0),
        )

    def _coefficients(self, x, ctx):
        r"""The wheels' `JointRows` ($\dot\Omega = \mathbf a^T\ddot{\mathbf r} + \mathbf b^T\dot{\boldsymbol\omega} + c$)
        and the torques."""
        g = self.gsHat_B
        Omega = x["Omega"]
        omega = ctx.omega_BN_B[None, :]
        u_cmd, u_s, tau_f = self._torques(x, ctx)
        torque = u_s + tau_f
        if self.model != "jitter_fully_coupled":
            # Spin axis only: p = 0, q = Js gs, a = 0, b = -gs, c = torque / Js.
            v_rot = -jnp.sum((self.Js * Omega)[:, None] * cross3(omega, g), 0)
            v_trans = jnp.zeros(3)
            if self.model == "jitter_simple":
                w2, _ = self._axes(x["theta"])
                O2 = Omega**2
                F_s = (self.U_s * O2)[:, None] * w2
                v_trans = jnp.sum(F_s, 0)
                v_rot = v_rot + jnp.sum(cross3(self.rWB_B, F_s) + (self.U_d * O2)[:, None] * w2, 0)
            rows = JointRows(
                p=jnp.zeros_like(g),
                q=self.Js[:, None] * g,
                a=jnp.zeros_like(g),
                b=-g,
                c=torque / self.Js,
                v_trans=v_trans,
                v_rot=v_rot,
            )
            return rows, (u_cmd, u_s, tau_f)

        R = self._rotor(x)
        w2, w3, m, d, J13, r = R["w2"], R["w3"], R["m"], R["d"], R["J13"], R["r"]
        md = m * d
        Jd = self.Js + m * d**2
        om_s, om_2, om_3 = dot3(g, omega), dot3(w2, omega), dot3(w3, omega)
        rWB = self.rWB_B
        a = -(md / Jd)[:, None] * w3
        b = -(Jd[:, None] * g + J13[:, None] * w3 + md[:, None] * cross3(rWB, w3)) / Jd[:, None]
        # Gravity term: cancels the g contained in the total hub acceleration rDDot_BN_B.
        grav = dot3(g, cross3(d[:, None] * w2, m[:, None] * ctx.g_B[None, :]))
        c = (
            om_2 * om_3 * (R["dJ"] - m * d**2)
            - J13 * om_2 * om_s
            - md * dot3(w3, cross3(omega, cross3(omega, rWB)))
            + torque
            + grav
        ) / Jd
        I_g = mv3(R["I_Wc"], g)
        O2 = Omega**2
        v_rot = jnp.sum(
            (md * O2)[:, None] * cross3(r, w2)
            - Omega[:, None] * mv3(R["Ip_Wc"], g)
            - cross3(omega, Omega[:, None] * I_g + m[:, None] * cross3(r, R["rp"])),
            0,
        )
        rows = JointRows(
            p=md[:, None] * w3,
            q=I_g + md[:, None] * cross3(r, w3),
            a=a,
            b=b,
            c=c,
            v_trans=jnp.sum((md * O2)[:, None] * w2, 0),
            v_rot=v_rot,
        )
        return rows, (u_cmd, u_s, tau_f)

    def contribute(self, x, ctx: HubContext) -> JointContribution:
        """The wheels' joint rows from one evaluation of the per-wheel coefficients."""
        rows, (_, u_s, tau_f) = self._coefficients(x, ctx)
        Omega = x["Omega"]

        def derivative(OmegaDot):
            dx = {"Omega": OmegaDot}
            if self._jitter:
                dx["theta"] = Omega
            if self.stribeck:
                dx["stribeck"] = jnp.zeros_like(Omega)
                dx["Omega_prev"] = jnp.zeros_like(Omega)
            if self.track_work:
                dx["motor_work"] = u_s * Omega
                dx["friction_work"] = tau_f * Omega
            return dx

        return JointContribution(rows, derivative)

    def energy_momentum(self, x, ctx: HubContext) -> EnergyMomentum:
        Omega = x["Omega"]
        omega = ctx.omega_BN_B[None, :]
        g = self.gsHat_B
        if self.model != "jitter_fully_coupled":
            JO = self.Js * Omega
            H = jnp.sum(JO[:, None] * g, 0)
            E = jnp.sum(0.5 * JO * Omega + JO * dot3(g, omega))
            return EnergyMomentum(H, E)
        R = self._rotor(x)
        omega_W = omega + Omega[:, None] * g
        r, m = R["r"], R["m"]
        rdot = R["rp"] + cross3(omega, r)
        Iw = mv3(R["I_Wc"], omega_W)
        H = jnp.sum(Iw + m[:, None] * cross3(r, rdot), 0)
        E = jnp.sum(0.5 * dot3(omega_W, Iw) + 0.5 * m * dot3(rdot, rdot))
        return EnergyMomentum(H, E)

    # Units of the states, outputs and commands by name (`units()`).
    ELEMENT_DIM = "wheel"  # one entry per unit in result datasets
    UNITS = {
        "Omega": "rad/s",
        "theta": "rad",
        "stribeck": "-",
        "Omega_prev": "rad/s",
        "motor_work": "J",
        "friction_work": "J",
        "u_cmd": "N m",
        "u_s": "N m",
        "friction_torque": "N m",
        "power": "W",
        "motor_torque": "N m",
    }

    def outputs(self, x, ctx: HubContext) -> dict:
        u_cmd, u_s, tau_f = self._torques(x, ctx)
        out = {
            "Omega": x["Omega"],
            "u_cmd": u_cmd,
            "u_s": u_s,
            "friction_torque": tau_f,
            "power": u_s * x["Omega"],
        }
        if self._jitter:
            out["theta"] = x["theta"]
        if self.stribeck:
            out["stribeck"] = x["stribeck"]
        return out

    def step_map(self, t, x):
        """Update the Stribeck friction mode once per completed step (identity without Stribeck)."""
        if not self.stribeck:
            return x, {}
        Omega = x["Omega"]
        new = dict(x)
        new["stribeck"] = self.friction.next_mode(Omega, x["Omega_prev"], x["stribeck"])
        new["Omega_prev"] = Omega
        return new, {}

    def breakpoints(self):
        return breakpoints_of(self.motor_torque)
