r"""One-degree-of-freedom spinning bodies (Basilisk `spinningBodyOneDOFStateEffector`), N in one effector.

Body $i$ is a rigid body (full inertia, CoM anywhere) turning about a body-fixed axis through the joint
point $S$ at $\mathbf r_{S/B}$. Frames (Basilisk `spinningBodyOneDOFStateEffector` documentation): $\mathcal S_0$ given by $[S_0B]$;
$\mathcal S$ is $\mathcal S_0$ rotated by $+\theta$ about the spin axis ${}^{S}\hat{\mathbf s}$:
$[SB] = C(\theta\,{}^{S}\hat{\mathbf s})[S_0B]$, $C(\Phi\hat e) = \cos\Phi\,I + (1-\cos\Phi)\hat e\hat e^T - \sin\Phi[\tilde{\hat e}]$.
"""

from collections.abc import Callable, Mapping, Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxsim.kinematics import cross3, dcm_to_mrp, dot3, mm3, mtv3, mv3, outer3, tilde
from jaxsim.signals import AbstractSignal
from jaxsim.validation import (
    check_inertia,
    check_name,
    check_nonnegative,
    check_orthonormal,
    check_unit_vectors,
)

from .._spacecraft._attachments import AttachmentHost, Attachments, body_context
from .._spacecraft._contract import AbstractDynamicEffector, KinematicsStateEffector
from .._spacecraft._joints import JointContribution, JointRows
from .._spacecraft._physical import inertia_pd, nonnegative
from .._spacecraft._types import EnergyMomentum, HubContext, MassProps
from .._spacecraft._unit_params import check_flags, per_unit, unit_count
from ._joint_drive import ROTARY_NAMES, ROTARY_UNITS, CommandedRotaryJoints, JointDrive


def _T(m):
    return jnp.swapaxes(m, -1, -2)


class SpinningBodies(CommandedRotaryJoints, AttachmentHost, KinematicsStateEffector):
    r"""$n$ rigid bodies, each rotating about one body-fixed axis with spring, damper, motor or a lock.

    Each free body obeys (Vaz Carneiro, Allard & Schaub, "Rotating Rigid Body Dynamics Architecture for
    Spacecraft Simulation Software Implementation", AAS GN&C Conference, 2023)

    $$\ddot\theta = \mathbf a_\theta^T\,{}^{B}\ddot{\mathbf r}_{B/N} + \mathbf b_\theta^T\dot{\boldsymbol\omega} + c_\theta,\qquad
    \mathbf a_\theta = \frac{m\mathbf q}{m_\theta},\quad \mathbf b_\theta = -\frac{[I_S]\hat{\mathbf s} - m\,\mathbf r_{S/B}\times\mathbf q}{m_\theta},$$

    $\mathbf q = \mathbf r_{S_c/S}\times\hat{\mathbf s}$, $m_\theta = \hat{\mathbf s}^T[I_S]\hat{\mathbf s}$ ($[I_S]$ the inertia about the joint),
    with the axis torque $u - k(\theta-\theta_{ref}) - c(\dot\theta-\dot\theta_{ref})$ about $+\hat{\mathbf s}$.

    **Arguments** (per-body values: shape `(n, ...)`, or one value for all bodies):

    - `mass`: body masses [kg], `(n,)`, >= 0 (0: a pure inertia, e.g. a balanced rotor); fixes $n$.
    - `ISPntSc_S`: inertia about the body CoM $S_c$ in $\mathcal S$ components [kg m^2], `(n, 3, 3)`,
      symmetric positive definite.
    - `dcm_S0B`: $[S_0B]$, `(n, 3, 3)`, proper orthonormal.
    - `sHat_S`: spin axes in $\mathcal S$ components, `(n, 3)`, unit vectors (not normalised for you).
    - `r_SB_B`: joint points $S$ [m], `(n, 3)` (default 0). `r_ScS_S`: CoM offsets from $S$ in $\mathcal S$
      components [m], `(n, 3)` (default 0).
    - `k` [N m/rad], `c` [N m s/rad]: spring and damper, >= 0 (default 0).
    - `theta0` [rad], `thetaDot0` [rad/s]: initial angle and rate (default 0).
    - `thetaRef`, `thetaDotRef`, `motor_torque` [N m]: constants or signals (default 0), with
      `args[name]` overrides as in `HingedRigidBodies` (`"motor_torque"` is added, references replace).
    - `locked`: static flag(s), a bool or one per body (default all `False`). A **locked** body is
      welded to the hub at its current angle: its $\dot\theta$ is taken as 0 in every quantity
      (kinematics, mass properties, energy, outputs; the stored `thetaDot` state is ignored), its state
      derivative is zero ($\theta$ and `thetaDot` stay at their initial values) and $\mathbf a_\theta = \mathbf b_\theta = 0$,
      $c_\theta = 0$, so it adds exactly its mass and inertia as a rigid part of the hub. Its spring,
      damper and motor torques are absorbed by the lock (no effect); loads of attached effectors go to
      the hub in full. The flag is static (a change recompiles).
    - `attached`: dynamic effectors mounted on bodies, `{index: effector(s)}`. Each child sees the body
      as its hub with frame $\mathcal S$ and origin the **joint point $S$** (`effectors/_spacecraft/_attachments.py`):
      forces act through $S$ (`force_B` in $\mathcal S$ comps), `torque_B` is about $S$ in $\mathcal S$ comps; the load
      enters the hub translation, the hub rotation ($\boldsymbol\tau_S + \mathbf r_{S/B}\times\mathbf F$) and the axis
      equation ($\hat{\mathbf s}\cdot\boldsymbol\tau_S$: a force through the axis exerts no axis torque).
    - `name`: key of the state `{"theta": (n,), "thetaDot": (n,)}` and of the outputs.

    **Outputs** (under `name`): `theta`, `thetaDot` (0 for locked bodies), `axis_torque`
    $u-k(\theta-\theta_{ref})-c(\dot\theta-\dot\theta_{ref})$ [N m] (0 when locked), `damper_power` [W], `r_ScN_N`,
    `v_ScN_N`, `sigma_SN`, `omega_SN_S`; with attachments `attached_force_S`, `attached_torque_S` and the
    children's outputs under `attached`.

    **Assumptions and limitations:** one rigid body per axis (no chains), fixed axis and joint in
    $\mathcal B$, linear spring and damper, no prescribed-motion platform; inputs are evaluated at each
    stage time (use `PiecewiseConstant` for a zero-order hold).

    **Reference:** J. Vaz Carneiro, C. Allard, H. Schaub, "Rotating Rigid Body Dynamics Architecture for
    Spacecraft Simulation Software Implementation", AAS Guidance, Navigation and Control Conference, 2023.
    """

    mass: Float[Array, " n"]
    ISPntSc_S: Float[Array, "n 3 3"]
    dcm_S0B: Float[Array, "n 3 3"]
    sHat_S: Float[Array, "n 3"]
    r_SB_B: Float[Array, "n 3"]
    r_ScS_S: Float[Array, "n 3"]
    theta0: Float[Array, " n"]
    thetaDot0: Float[Array, " n"]
    drive: JointDrive
    attachments: Attachments
    locked: tuple = eqx.field(static=True)
    num_bodies: int = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        mass: Float[ArrayLike, " n"],
        ISPntSc_S: Float[ArrayLike, "n 3 3"],
        dcm_S0B: Float[ArrayLike, "n 3 3"],
        sHat_S: Float[ArrayLike, "n 3"],
        *,
        r_SB_B: Float[ArrayLike, "*n 3"] = (0.0, 0.0, 0.0),
        r_ScS_S: Float[ArrayLike, "*n 3"] = (0.0, 0.0, 0.0),
        k: Float[ArrayLike, "*n"] = 0.0,
        c: Float[ArrayLike, "*n"] = 0.0,
        theta0: Float[ArrayLike, "*n"] = 0.0,
        thetaDot0: Float[ArrayLike, "*n"] = 0.0,
        thetaRef: ArrayLike | AbstractSignal | Callable[..., ArrayLike] = 0.0,
        thetaDotRef: ArrayLike | AbstractSignal | Callable[..., ArrayLike] = 0.0,
        motor_torque: ArrayLike | AbstractSignal | Callable[..., ArrayLike] = 0.0,
        locked: bool | Sequence[bool] = False,
        attached: Mapping[int, AbstractDynamicEffector | Sequence[AbstractDynamicEffector]]
        | None = None,
        name: str = "spinners",
    ):
        cls = "SpinningBodies"
        n = unit_count(cls, "mass", mass)
        self.num_bodies = n
        self.mass = check_nonnegative(cls, "mass", per_unit(cls, "mass", mass, "kg", n), "kg")
        inertia = per_unit(cls, "ISPntSc_S", ISPntSc_S, "kg m^2", n, (3, 3))
        self.ISPntSc_S = check_inertia(cls, "ISPntSc_S", inertia)
        dcm = per_unit(cls, "dcm_S0B", dcm_S0B, "-", n, (3, 3))
        self.dcm_S0B = check_orthonormal(cls, "dcm_S0B", dcm)
        self.sHat_S = check_unit_vectors(
            cls, "sHat_S", per_unit(cls, "sHat_S", sHat_S, "-", n, (3,))
        )
        self.r_SB_B = per_unit(cls, "r_SB_B", r_SB_B, "m", n, (3,))
        self.r_ScS_S = per_unit(cls, "r_ScS_S", r_ScS_S, "m", n, (3,))
        self.drive = JointDrive(cls, n, k=k, c=c, ref=thetaRef, rate_ref=thetaDotRef,
                                motor=motor_torque, names=ROTARY_NAMES, units=ROTARY_UNITS)  # fmt: skip
        self.theta0 = per_unit(cls, "theta0", theta0, "rad", n)
        self.thetaDot0 = per_unit(cls, "thetaDot0", thetaDot0, "rad/s", n)
        self.locked = check_flags(cls, "locked", locked, n)
        self.attachments = Attachments(cls, attached, n)
        self.name = check_name(cls, "name", name)

    # ----------------------------------------------------------------------------------------------
    # States and kinematics

    def physical_checks(self, x=None) -> dict:
        """`{quantity: traced bool}` (read by `Spacecraft.validity`): masses >= 0, inertias
        `ISPntSc_S` positive definite, stiffnesses `k` and dampings `c` >= 0."""
        return {
            "mass": nonnegative(self.mass),
            "ISPntSc_S": inertia_pd(self.ISPntSc_S),
            "k": nonnegative(self.k),
            "c": nonnegative(self.c),
        }

    def init_state(self, theta=None, thetaDot=None) -> dict:
        n = self.num_bodies
        cls = f"SpinningBodies({self.name}).init_state"
        return {
            "theta": self.theta0 if theta is None else per_unit(cls, "theta", theta, "rad", n),
            "thetaDot": self.thetaDot0
            if thetaDot is None
            else per_unit(cls, "thetaDot", thetaDot, "rad/s", n),
        }

    def _free(self):
        return jnp.asarray(np.logical_not(np.asarray(self.locked)))

    def _rate(self, x):
        """$\\dot\\theta$ as used by the physics: 0 for locked bodies."""
        thetaDot = jnp.asarray(x["thetaDot"], dtype=float)
        if not any(self.locked):
            return thetaDot
        return jnp.where(self._free(), thetaDot, 0.0)

    def _kinematics(self, x):
        theta = x["theta"]
        thetaDot = self._rate(x)
        e = self.sHat_S
        ct, st = jnp.cos(theta)[:, None, None], jnp.sin(theta)[:, None, None]
        dcm_SS0 = ct * jnp.eye(3) + (1.0 - ct) * outer3(e, e) - st * tilde(e)
        dcm_SB = mm3(dcm_SS0, self.dcm_S0B)
        dcm_BS = _T(dcm_SB)
        s = mtv3(dcm_SB, e)
        r_ScS = mtv3(dcm_SB, self.r_ScS_S)
        r_ScB = r_ScS + self.r_SB_B
        I_Sc = mm3(dcm_BS, mm3(self.ISPntSc_S, dcm_SB))
        omega_SB = thetaDot[:, None] * s
        rPrime_ScS = cross3(omega_SB, r_ScS)
        return dict(
            thetaDot=thetaDot,
            dcm_SB=dcm_SB,
            s=s,
            r_ScS=r_ScS,
            r_ScB=r_ScB,
            I_Sc=I_Sc,
            omega_SB=omega_SB,
            rPrime=rPrime_ScS,
        )

    def _inputs(self, ctx):
        return self.drive.inputs(ctx.t, ctx.args, self.name)

    def mass_props(self, x, ctx=None) -> MassProps:
        kin = self._kinematics(x)
        m = self.mass
        m3 = m[:, None, None]
        rt, rpt = tilde(kin["r_ScB"]), tilde(kin["rPrime"])
        wt = tilde(kin["omega_SB"])
        I_Sc = kin["I_Sc"]
        inertia = I_Sc - m3 * mm3(rt, rt)
        inertia_prime = mm3(wt, I_Sc) - mm3(I_Sc, wt) - m3 * (mm3(rpt, rt) + mm3(rt, rpt))
        return MassProps(
            mass=jnp.sum(m),
            mass_dot=jnp.zeros(()),
            first_moment=jnp.sum(m[:, None] * kin["r_ScB"], axis=0),
            first_moment_prime=jnp.sum(m[:, None] * kin["rPrime"], axis=0),
            inertia_B=jnp.sum(inertia, axis=0),
            inertia_prime_B=jnp.sum(inertia_prime, axis=0),
        )

    # ----------------------------------------------------------------------------------------------
    # Attached dynamic effectors

    def _body_context(self, i, ctx, kin):
        omega = ctx.omega_BN_B
        r = self.r_SB_B[i]
        c_S = self.r_ScS_S[i]
        ct = tilde(c_S)
        I_O_S = self.ISPntSc_S[i] - self.mass[i] * mm3(ct, ct)
        return body_context(
            ctx,
            r,
            cross3(omega, r),
            kin["dcm_SB"][i],
            omega + kin["omega_SB"][i],
            self.mass[i],
            c_S,
            I_O_S,
        )

    def _attached(self, ctx, kin):
        """Children's loads on each body (`Attachments.loads`): `(F_B, tau_B, F_S, tau_S,
        contexts)`, through and about the joint point $S$."""
        return self.attachments.loads(kin["dcm_SB"], lambda i: self._body_context(i, ctx, kin))

    # ----------------------------------------------------------------------------------------------
    # Back-substitution

    def _coefficients(self, x, ctx: HubContext):
        kin = self._kinematics(x)
        m = self.mass
        m1 = m[:, None]
        s, r_ScS, I_Sc, omega_SB = kin["s"], kin["r_ScS"], kin["I_Sc"], kin["omega_SB"]
        thetaDot = kin["thetaDot"]
        omega = jnp.broadcast_to(ctx.omega_BN_B, s.shape)
        drive = self._inputs(ctx)
        F_B, tau_B, _, _, _ = self._attached(ctx, kin)
        rt = tilde(r_ScS)
        I_S = I_Sc - m[:, None, None] * mm3(rt, rt)
        q = cross3(r_ScS, s)
        I_S_s = mv3(I_S, s)
        m_theta = dot3(s, I_S_s)
        omega_SN = omega + omega_SB
        a = m1 * q / m_theta[:, None]
        b = -(I_S_s - m1 * cross3(self.r_SB_B, q)) / m_theta[:, None]
        axis = self.drive.force(x["theta"], thetaDot, drive)
        wwr = cross3(omega, cross3(omega, self.r_SB_B))
        torque = (
            cross3(r_ScS, m1 * ctx.g_B)
            - cross3(omega_SN, mv3(I_S, omega_SN))
            - mv3(I_S, cross3(omega, omega_SB))
            + tau_B
            - m1 * cross3(r_ScS, wwr)
        )
        c_theta = (axis + dot3(s, torque)) / m_theta
        if any(self.locked):
            free = self._free()
            a = jnp.where(free[:, None], a, 0.0)
            b = jnp.where(free[:, None], b, 0.0)
            c_theta = jnp.where(free, c_theta, 0.0)
        return kin, q, a, b, c_theta, (F_B, tau_B)

    def contribute(self, x, ctx: HubContext) -> JointContribution:
        r"""The bodies' joint rows from one evaluation of the coefficients, with columns
        $\mathbf p = -m\,\mathbf q_S$ and $\mathbf q = [I_{S_c}]\hat{\mathbf s} - m\,\mathbf r_{S_c/B}\times\mathbf q_S$."""
        kin, q, a, b, c_theta, (F_B, tau_B) = self._coefficients(x, ctx)
        m1 = self.mass[:, None]
        s, r_ScB, I_Sc, omega_SB, rPrime = (
            kin["s"],
            kin["r_ScB"],
            kin["I_Sc"],
            kin["omega_SB"],
            kin["rPrime"],
        )
        omega = jnp.broadcast_to(ctx.omega_BN_B, s.shape)
        omega_SN = omega + omega_SB
        v_trans = -m1 * cross3(omega_SB, rPrime) + F_B
        v_rot = (
            -cross3(omega_SN, mv3(I_Sc, omega_SB))
            - m1 * cross3(omega, cross3(r_ScB, rPrime))
            - m1 * cross3(r_ScB, cross3(omega_SB, rPrime))
            + tau_B
            + cross3(self.r_SB_B, F_B)
        )
        rows = JointRows(
            p=-m1 * q,
            q=mv3(I_Sc, s) - m1 * cross3(r_ScB, q),
            a=a,
            b=b,
            c=c_theta,
            v_trans=jnp.sum(v_trans, axis=0),
            v_rot=jnp.sum(v_rot, axis=0),
        )
        # Locked bodies: a = b = c = 0 gives a zero acceleration; their rate is already 0.
        thetaDot = kin["thetaDot"]
        return JointContribution(rows, lambda thetaDDot: {"theta": thetaDot, "thetaDot": thetaDDot})

    # ----------------------------------------------------------------------------------------------
    # Diagnostics

    def _energy_momentum(self, x, ctx: HubContext, kin) -> EnergyMomentum:
        m = self.mass
        omega = jnp.broadcast_to(ctx.omega_BN_B, kin["s"].shape)
        drive = self._inputs(ctx)
        omega_SN = omega + kin["omega_SB"]
        rDot = kin["rPrime"] + cross3(omega, kin["r_ScB"])
        Iw = mv3(kin["I_Sc"], omega_SN)
        H = Iw + m[:, None] * cross3(kin["r_ScB"], rDot)
        E = (
            0.5 * dot3(omega_SN, Iw)
            + 0.5 * m * dot3(rDot, rDot)
            + self.drive.spring_energy(x["theta"], drive)
        )
        return EnergyMomentum(jnp.sum(H, axis=0), jnp.sum(E))

    # Units of the states, outputs and commands by name (`units()`).
    ELEMENT_DIM = "body"  # one entry per unit in result datasets
    UNITS = {
        "theta": "rad",
        "thetaDot": "rad/s",
        "axis_torque": "N m",
        "damper_power": "W",
        "r_ScN_N": "m",
        "v_ScN_N": "m/s",
        "sigma_SN": "-",
        "omega_SN_S": "rad/s",
        "attached_force_S": "N",
        "attached_torque_S": "N m",
        "motor_torque": "N m",
        "thetaRef": "rad",
        "thetaDotRef": "rad/s",
    }

    def _outputs(self, x, ctx: HubContext, kin) -> dict:
        thetaDot = kin["thetaDot"]
        omega = ctx.omega_BN_B
        drive = self._inputs(ctx)
        damper = self.drive.damper(thetaDot, drive)
        axis = self.drive.force(x["theta"], thetaDot, drive)
        if any(self.locked):
            axis = jnp.where(self._free(), axis, 0.0)
        rDot = kin["rPrime"] + cross3(omega, kin["r_ScB"])
        dcm_NB = ctx.dcm_NB
        out = {
            "theta": x["theta"],
            "thetaDot": thetaDot,
            "axis_torque": axis,
            "damper_power": -damper * thetaDot,
            "r_ScN_N": ctx.r_BN_N + ctx.r_origin_N + mv3(dcm_NB, kin["r_ScB"]),
            "v_ScN_N": ctx.v_BN_N + ctx.v_origin_N + mv3(dcm_NB, rDot),
            "sigma_SN": dcm_to_mrp(mm3(kin["dcm_SB"], ctx.dcm_BN)),
            "omega_SN_S": mv3(kin["dcm_SB"], omega + kin["omega_SB"]),
        }
        if self.attached:
            _, _, F_S, tau_S, contexts = self._attached(ctx, kin)
            out.update(self.attachments.outputs(F_S, tau_S, contexts))
        return out

    def breakpoints(self):
        return self.drive.breakpoints() + self.attachments.breakpoints()
