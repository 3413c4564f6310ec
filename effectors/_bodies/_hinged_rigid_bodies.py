r"""Hinged rigid panels (Basilisk `hingedRigidBodyStateEffector`), N panels in one effector.

Frames and points (Basilisk `hingedRigidBodyStateEffector` documentation): hinge point $H$ at $\mathbf r_{H/B}$; hinge frame
$\mathcal H$ with $[HB]$ (rows $\hat{\mathbf h}_i$ in $\mathcal B$); panel frame $[SB] = M_2(\theta)[HB]$ with rows
$\hat{\mathbf s}_1, \hat{\mathbf s}_2 = \hat{\mathbf h}_2, \hat{\mathbf s}_3$; panel CoM $S$ at $\mathbf r_{S/B} = \mathbf r_{H/B} - d\,\hat{\mathbf s}_1$.
"""

from collections.abc import Callable, Mapping, Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxsim.kinematics import (
    cross3,
    dcm_to_mrp,
    dot3,
    euler_axis_rotation,
    mm3,
    mv3,
    outer3,
    tilde,
)
from jaxsim.signals import AbstractSignal
from jaxsim.validation import (
    check_inertia,
    check_name,
    check_nonnegative,
    check_orthonormal,
    check_positive,
    fail,
    is_concrete,
)

from .._spacecraft._attachments import AttachmentHost, Attachments, body_context
from .._spacecraft._contract import AbstractDynamicEffector, KinematicsStateEffector
from .._spacecraft._joints import JointContribution, JointRows
from .._spacecraft._physical import inertia_pd, nonnegative, positive
from .._spacecraft._types import EnergyMomentum, HubContext, MassProps
from .._spacecraft._unit_params import per_unit, unit_count
from ._joint_drive import ROTARY_NAMES, ROTARY_UNITS, CommandedRotaryJoints, JointDrive


def _congruence(dcm_SB, I_S):
    r"""$[SB]^T [I] [SB]$: an inertia in $\mathcal S$ components expressed in $\mathcal B$."""
    return mm3(jnp.swapaxes(dcm_SB, -1, -2), mm3(I_S, dcm_SB))


class HingedRigidBodies(CommandedRotaryJoints, AttachmentHost, KinematicsStateEffector):
    r"""$n$ rigid panels, each on a single-axis torsional hinge with spring, damper and motor.

    Each panel obeys (Allard, Schaub & Piggott, JSR 55(5), 2018; Basilisk `hingedRigidBodyStateEffector`)

    $$\ddot\theta = \mathbf a_\theta^T\,{}^{B}\ddot{\mathbf r}_{B/N} + \mathbf b_\theta^T\dot{\boldsymbol\omega} + c_\theta,$$

    with the hinge torque $u - k(\theta-\theta_{ref}) - c(\dot\theta-\dot\theta_{ref})$ about $+\hat{\mathbf s}_2$, gravity
    about the hinge, inertial coupling terms and the torque of attached dynamic effectors.

    **Arguments** (per-panel values: shape `(n, ...)`, or one value for all panels):

    - `mass`: panel masses $m_p$ [kg], shape `(n,)`, > 0; fixes the number of panels $n$.
    - `IPntS_S`: inertia about the panel CoM $S$ in $\mathcal S$ components [kg m^2], `(n, 3, 3)`;
      positive definite and **diagonal** ($I_{s1}, I_{s2}, I_{s3}$; $I_{s2}$ about the hinge axis).
    - `d`: hinge-to-CoM distance [m], `(n,)`, >= 0.
    - `k`: torsional spring [N m/rad], `(n,)`, >= 0. `c`: damper [N m s/rad], >= 0 (default 0).
    - `r_HB_B`: hinge points [m], `(n, 3)`. `dcm_HB`: hinge frames $[HB]$, `(n, 3, 3)`, proper orthonormal.
    - `theta0`, `thetaDot0`: initial deflection [rad] and rate [rad/s] (default 0).
    - `thetaRef`, `thetaDotRef`: spring/damper references [rad], [rad/s]: constants or signals
      (default 0); `args[name]["thetaRef"]` / `["thetaDotRef"]`, when present, replace them.
    - `motor_torque`: hinge motor torque $u$ [N m] about $+\hat{\mathbf s}_2$: constant or signal (default 0);
      `args[name]["motor_torque"]` (shape `(n,)`), when present, is added (flight-software command).
    - `attached`: dynamic effectors mounted on panels, `{panel index: effector or tuple of effectors}`.
      Each child sees the panel as its hub: $\mathcal B \to \mathcal S$, point $B \to$ the panel CoM $S$
      (see `effectors/_spacecraft/_attachments.py`). Its `force_B` is in $\mathcal S$ components, `force_N` in
      $\mathcal N$, both **through $S$**; its `torque_B` is about $S$ in $\mathcal S$ components. The load enters
      the hub translation ($\mathbf F$), the hub rotation ($\boldsymbol\tau_S + \mathbf r_{S/B}\times\mathbf F$) and the
      hinge equation ($\hat{\mathbf s}_2\cdot(\boldsymbol\tau_S - d\,\hat{\mathbf s}_1\times\mathbf F)$) consistently.
    - `name`: key of the state `{"theta": (n,), "thetaDot": (n,)}` and of the outputs.

    **Outputs** (under `name`): `theta`, `thetaDot`, `hinge_torque` $u-k(\theta-\theta_{ref})-c(\dot\theta-\dot\theta_{ref})$
    [N m], `damper_power` $-c(\dot\theta-\dot\theta_{ref})\dot\theta$ [W] (power of the dampers on the system),
    `r_SN_N`, `v_SN_N` (true inertial velocity of $S$; Basilisk's panel message adds
    $\mathcal B$-component terms to the $\mathcal N$-component hub velocity without rotating them),
    `sigma_SN`, `omega_SN_S`, and with attachments `attached_force_S`,
    `attached_torque_S` (about $S$), `attached_hinge_torque` and the children's outputs under `attached`.

    **Assumptions and limitations:** rigid panels with diagonal inertia in $\mathcal S$; a single rotation
    axis per panel; no hinge stops; spring and damper linear; inputs are evaluated at each stage time
    (use `PiecewiseConstant` for a zero-order hold); $n \ge 1$; zero mass is rejected (give a
    massless panel no effector at all). With $k = c = 0$ and no motor torque the hinge is free.

    **Reference:** C. Allard, H. Schaub, S. Piggott, "General Hinged Rigid-Body Dynamics Approximating
    First-Order Spacecraft Solar Panel Flexing", J. Spacecraft and Rockets 55(5), 2018,
    doi:10.2514/1.A34125.
    """

    mass: Float[Array, " n"]
    IPntS_S: Float[Array, "n 3 3"]
    d: Float[Array, " n"]
    k: Float[Array, " n"]
    c: Float[Array, " n"]
    r_HB_B: Float[Array, "n 3"]
    dcm_HB: Float[Array, "n 3 3"]
    theta0: Float[Array, " n"]
    thetaDot0: Float[Array, " n"]
    drive: JointDrive
    attachments: Attachments
    num_panels: int = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        mass: Float[ArrayLike, " n"],
        IPntS_S: Float[ArrayLike, "n 3 3"],
        d: Float[ArrayLike, "*n"],
        k: Float[ArrayLike, "*n"],
        r_HB_B: Float[ArrayLike, "n 3"],
        dcm_HB: Float[ArrayLike, "n 3 3"],
        *,
        c: Float[ArrayLike, "*n"] = 0.0,
        theta0: Float[ArrayLike, "*n"] = 0.0,
        thetaDot0: Float[ArrayLike, "*n"] = 0.0,
        thetaRef: ArrayLike | AbstractSignal | Callable[..., ArrayLike] = 0.0,
        thetaDotRef: ArrayLike | AbstractSignal | Callable[..., ArrayLike] = 0.0,
        motor_torque: ArrayLike | AbstractSignal | Callable[..., ArrayLike] = 0.0,
        attached: Mapping[int, AbstractDynamicEffector | Sequence[AbstractDynamicEffector]]
        | None = None,
        name: str = "panels",
    ):
        cls = "HingedRigidBodies"
        n = unit_count(cls, "mass", mass)
        self.num_panels = n
        self.mass = check_positive(cls, "mass", per_unit(cls, "mass", mass, "kg", n), "kg")
        inertia = per_unit(cls, "IPntS_S", IPntS_S, "kg m^2", n, (3, 3))
        check_inertia(cls, "IPntS_S", inertia)
        if is_concrete(inertia):
            arr = np.asarray(inertia)
            off = arr - np.einsum("nii->ni", arr)[:, :, None] * np.eye(3)
            if np.max(np.abs(off)) > 1e-12 * max(np.max(np.abs(arr)), 1e-300):
                fail(cls, "IPntS_S", "must be diagonal in the panel frame S", "kg m^2", inertia)
        self.IPntS_S = inertia
        self.d = check_nonnegative(cls, "d", per_unit(cls, "d", d, "m", n), "m")
        self.drive = JointDrive(cls, n, k=k, c=c, ref=thetaRef, rate_ref=thetaDotRef,
                                motor=motor_torque, names=ROTARY_NAMES, units=ROTARY_UNITS)  # fmt: skip
        self.r_HB_B = per_unit(cls, "r_HB_B", r_HB_B, "m", n, (3,))
        self.dcm_HB = check_orthonormal(
            cls, "dcm_HB", per_unit(cls, "dcm_HB", dcm_HB, "-", n, (3, 3))
        )
        self.theta0 = per_unit(cls, "theta0", theta0, "rad", n)
        self.thetaDot0 = per_unit(cls, "thetaDot0", thetaDot0, "rad/s", n)
        self.attachments = Attachments(cls, attached, n)
        self.name = check_name(cls, "name", name)

    # ----------------------------------------------------------------------------------------------
    # States and kinematics

    def physical_checks(self, x=None) -> dict:
        """`{quantity: traced bool}` (read by `Spacecraft.validity`): masses > 0, inertias
        `IPntS_S` positive definite, hinge offsets `d`, stiffnesses `k`, dampings `c` >= 0."""
        return {
            "mass": positive(self.mass),
            "IPntS_S": inertia_pd(self.IPntS_S),
            "d": nonnegative(self.d),
            "k": nonnegative(self.k),
            "c": nonnegative(self.c),
        }

    def init_state(self, theta=None, thetaDot=None) -> dict:
        n = self.num_panels
        cls = f"HingedRigidBodies({self.name}).init_state"
        return {
            "theta": self.theta0 if theta is None else per_unit(cls, "theta", theta, "rad", n),
            "thetaDot": self.thetaDot0
            if thetaDot is None
            else per_unit(cls, "thetaDot", thetaDot, "rad/s", n),
        }

    def _kinematics(self, x):
        theta, thetaDot = x["theta"], x["thetaDot"]
        dcm_SB = mm3(euler_axis_rotation(2, theta), self.dcm_HB)
        s1, s2, s3 = jnp.unstack(dcm_SB, axis=1)
        d = self.d[:, None]
        r_SB = self.r_HB_B - d * s1
        rPrime_SB = (self.d * thetaDot)[:, None] * s3
        return dcm_SB, s1, s2, s3, r_SB, rPrime_SB

    def _principal(self):
        """$I_{s1}, I_{s2}, I_{s3}$, each `(n,)` (unstacked: see `jaxsim.kinematics`' notes)."""
        return jnp.unstack(jnp.sum(self.IPntS_S * jnp.eye(3), axis=-1), axis=-1)

    def _inputs(self, ctx):
        return self.drive.inputs(ctx.t, ctx.args, self.name)

    def mass_props(self, x, ctx=None) -> MassProps:
        dcm_SB, s1, s2, s3, r_SB, rPrime_SB = self._kinematics(x)
        m = self.mass
        Is1, _, Is3 = self._principal()
        rt, rpt = tilde(r_SB), tilde(rPrime_SB)
        I_S_B = _congruence(dcm_SB, self.IPntS_S)
        inertia = I_S_B - m[:, None, None] * mm3(rt, rt)
        Iprime_S = (x["thetaDot"] * (Is3 - Is1))[:, None, None] * (outer3(s1, s3) + outer3(s3, s1))
        inertia_prime = Iprime_S - m[:, None, None] * (mm3(rpt, rt) + mm3(rt, rpt))
        return MassProps(
            mass=jnp.sum(m),
            mass_dot=jnp.zeros(()),
            first_moment=jnp.sum(m[:, None] * r_SB, axis=0),
            first_moment_prime=jnp.sum(m[:, None] * rPrime_SB, axis=0),
            inertia_B=jnp.sum(inertia, axis=0),
            inertia_prime_B=jnp.sum(inertia_prime, axis=0),
        )

    # ----------------------------------------------------------------------------------------------
    # Attached dynamic effectors

    def _panel_context(self, i, x, ctx, kin):
        dcm_SB, s1, s2, s3, r_SB, rPrime_SB = kin
        omega = ctx.omega_BN_B
        rDot_SB = rPrime_SB[i] + cross3(omega, r_SB[i])
        omega_SN_B = omega + x["thetaDot"][i] * s2[i]
        return body_context(
            ctx,
            r_SB[i],
            rDot_SB,
            dcm_SB[i],
            omega_SN_B,
            self.mass[i],
            jnp.zeros(3),
            self.IPntS_S[i],
        )

    def _attached(self, x, ctx, kin):
        """Children's loads on each panel (`Attachments.loads`): `(F_B, tau_B, F_S, tau_S,
        contexts)`, through and about the panel CoM $S$."""
        return self.attachments.loads(kin[0], lambda i: self._panel_context(i, x, ctx, kin))

    def _attached_hinge_torque(self, kin, F_B, tau_B):
        r"""$\hat{\mathbf s}_2\cdot(\boldsymbol\tau_S - d\,\hat{\mathbf s}_1\times\mathbf F)$: the hinge torque of
        the attached loads, `(n,)`."""
        dcm_SB, s1, s2, s3, r_SB, rPrime_SB = kin
        return dot3(s2, tau_B + cross3(-self.d[:, None] * s1, F_B))

    # ----------------------------------------------------------------------------------------------
    # Back-substitution

    def _coefficients(self, x, ctx: HubContext):
        kin = self._kinematics(x)
        dcm_SB, s1, s2, s3, r_SB, rPrime_SB = kin
        theta, thetaDot = x["theta"], x["thetaDot"]
        m, d = self.mass, self.d
        Is1, Is2, Is3 = self._principal()
        omega = jnp.broadcast_to(ctx.omega_BN_B, s1.shape)
        drive = self._inputs(ctx)
        F_B, tau_B, _, _, _ = self._attached(x, ctx, kin)
        md = m * d
        J = Is2 + m * d**2
        a = -(md / J)[:, None] * s3
        b = -(J[:, None] * s2 + md[:, None] * cross3(self.r_HB_B, s3)) / J[:, None]
        tau_gH = cross3(-d[:, None] * s1, m[:, None] * ctx.g_B)
        hinge = self.drive.force(theta, thetaDot, drive)
        hinge_att = self._attached_hinge_torque(kin, F_B, tau_B)
        w_s1, w_s3 = dot3(s1, omega), dot3(s3, omega)
        wwr = cross3(omega, cross3(omega, self.r_HB_B))
        c_theta = (
            hinge
            + dot3(s2, tau_gH)
            + hinge_att
            + (Is3 - Is1 + m * d**2) * w_s3 * w_s1
            - md * dot3(s3, wwr)
        ) / J
        return kin, a, b, c_theta, (F_B, tau_B)

    def contribute(self, x, ctx: HubContext) -> JointContribution:
        r"""The panels' joint rows from one evaluation of their coefficients $\mathbf a$,
        $\mathbf b$, $c_\theta$ ($\ddot\theta = \mathbf a^T\ddot{\mathbf r} + \mathbf b^T\dot{\boldsymbol\omega} + c_\theta$),
        with columns $\mathbf p = m d\,\hat{\mathbf s}_3$ and
        $\mathbf q = I_{s_2}\hat{\mathbf s}_2 + m d\,\mathbf r_{S/B}\times\hat{\mathbf s}_3$."""
        kin, a, b, c_theta, (F_B, tau_B) = self._coefficients(x, ctx)
        dcm_SB, s1, s2, s3, r_SB, rPrime_SB = kin
        thetaDot = x["thetaDot"]
        m, d = self.mass, self.d
        _, Is2, _ = self._principal()
        omega = jnp.broadcast_to(ctx.omega_BN_B, s1.shape)
        md = (m * d)[:, None]
        f = Is2[:, None] * s2 + md * cross3(r_SB, s3)
        td2 = (thetaDot**2)[:, None]
        v_trans = -md * td2 * s1 + F_B
        v_rot = (
            -(thetaDot[:, None] * cross3(omega, f) + md * td2 * cross3(r_SB, s1))
            + tau_B
            + cross3(r_SB, F_B)
        )
        rows = JointRows(
            p=md * s3,
            q=f,
            a=a,
            b=b,
            c=c_theta,
            v_trans=jnp.sum(v_trans, axis=0),
            v_rot=jnp.sum(v_rot, axis=0),
        )
        return JointContribution(rows, lambda thetaDDot: {"theta": thetaDot, "thetaDot": thetaDDot})

    # ----------------------------------------------------------------------------------------------
    # Diagnostics

    def _energy_momentum(self, x, ctx: HubContext, kin) -> EnergyMomentum:
        dcm_SB, s1, s2, s3, r_SB, rPrime_SB = kin
        m = self.mass
        omega = jnp.broadcast_to(ctx.omega_BN_B, s1.shape)
        drive = self._inputs(ctx)
        omega_SN = omega + x["thetaDot"][:, None] * s2
        I_S_B = _congruence(dcm_SB, self.IPntS_S)
        rDot = rPrime_SB + cross3(omega, r_SB)
        Iw = mv3(I_S_B, omega_SN)
        H = Iw + m[:, None] * cross3(r_SB, rDot)
        E = (
            0.5 * dot3(omega_SN, Iw)
            + 0.5 * m * dot3(rDot, rDot)
            + self.drive.spring_energy(x["theta"], drive)
        )
        return EnergyMomentum(jnp.sum(H, axis=0), jnp.sum(E))

    # Units of the states, outputs and commands by name (`units()`).
    ELEMENT_DIM = "panel"  # one entry per unit in result datasets
    UNITS = {
        "theta": "rad",
        "thetaDot": "rad/s",
        "hinge_torque": "N m",
        "damper_power": "W",
        "r_SN_N": "m",
        "v_SN_N": "m/s",
        "sigma_SN": "-",
        "omega_SN_S": "rad/s",
        "attached_force_S": "N",
        "attached_torque_S": "N m",
        "attached_hinge_torque": "N m",
        "motor_torque": "N m",
        "thetaRef": "rad",
        "thetaDotRef": "rad/s",
    }

    def _outputs(self, x, ctx: HubContext, kin) -> dict:
        dcm_SB, s1, s2, s3, r_SB, rPrime_SB = kin
        theta, thetaDot = x["theta"], x["thetaDot"]
        omega = ctx.omega_BN_B
        drive = self._inputs(ctx)
        damper = self.drive.damper(thetaDot, drive)
        dcm_NB = ctx.dcm_NB
        rDot = rPrime_SB + cross3(omega, r_SB)
        out = {
            "theta": theta,
            "thetaDot": thetaDot,
            "hinge_torque": self.drive.force(theta, thetaDot, drive),
            "damper_power": -damper * thetaDot,
            "r_SN_N": ctx.r_BN_N + ctx.r_origin_N + mv3(dcm_NB, r_SB),
            "v_SN_N": ctx.v_BN_N + ctx.v_origin_N + mv3(dcm_NB, rDot),
            "sigma_SN": dcm_to_mrp(mm3(dcm_SB, ctx.dcm_BN)),
            "omega_SN_S": mv3(dcm_SB, omega + thetaDot[:, None] * s2),
        }
        if self.attached:
            F_B, tau_B, F_S, tau_S, contexts = self._attached(x, ctx, kin)
            hinge = self._attached_hinge_torque(kin, F_B, tau_B)
            out.update(self.attachments.outputs(F_S, tau_S, contexts, attached_hinge_torque=hinge))
        return out

    def breakpoints(self):
        return self.drive.breakpoints() + self.attachments.breakpoints()
