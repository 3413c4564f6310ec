r"""A MuJoCo scene (an MJCF multibody) as a dynamic object, its forward dynamics from MJX.

The scene's states are MuJoCo's generalized coordinates: `qpos` (size `nq`), `qvel` (size `nv`)
and, when the model has stateful actuators, their activations `act` (size `na`). The drift is

$$\dot q_{pos} = N(q_{pos})\,q_{vel},\qquad \dot q_{vel} = \ddot q(q_{pos}, q_{vel}, u, t),
\qquad \dot a = \dot a(a, u),$$

where $\ddot q$ is MuJoCo's forward dynamics (`mujoco.mjx.forward`: composite rigid-body mass
matrix, bias forces, passive springs and dampers, actuators, applied forces and, when the model has
any, the constraint solver) and $N$ maps velocities to coordinate rates joint by joint: identity
for hinge and slide joints; for a free joint the world-frame velocity of the body origin, and for
free and ball joints $\dot{\mathbf q} = \tfrac12\,\mathbf q \otimes (0, \boldsymbol\omega)$ with
$\boldsymbol\omega$ in the child body frame (MuJoCo's convention for `qvel`). Our solvers integrate
these states like any other (one integrator for every object of a `System`); the quaternions are
brought back to unit norm by the step map after each completed step, a map between descriptions of
the same attitude, since MuJoCo's kinematics normalizes them anyway.

Gravity comes from our gravity bodies (`PointMassGravity`, `SphericalHarmonicGravity`): body $i$
(mass $m_i$, centre of mass $\mathbf r_i$) receives $m_i\,\mathbf g(t, \mathbf r_i)$ through its
centre of mass. The MJCF's uniform `<option gravity>` is ignored unless `model_gravity=True`.
World positions are relative to the central gravity body when one is flagged (as for a
`Spacecraft`), else to the origin of $\mathcal N$ (MuJoCo's world frame).

Commands come from `args` (the arguments of `simulate`, or held outputs of flight software on a
clock): `args["ctrl"]` (shape `(nu,)`, MuJoCo's actuator controls: joint motors, thrusters) and
`args["xfrc_applied"]` (shape `(nbody, 6)`: a force [N] and a torque [N m] in world components,
applied at each body's centre of mass, MuJoCo's `xfrc_applied`). Inside a `System`, the scene
named `name` reads them from `args[name]`.

**Reference:** E. Todorov, T. Erez, Y. Tassa, "MuJoCo: a physics engine for model-based control",
IROS 2012; MuJoCo documentation, "Computation" and "MJX" chapters (mujoco.readthedocs.io).
"""

import os
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxsim.dynamic_object import AbstractDynamicObject, ArrayCommand
from jaxsim.kinematics import cross3, dcm_to_mrp, dot3
from jaxsim.signals import AbstractSignal, breakpoints_of
from jaxsim.validation import as_array, check_name

from .._forces._gravity import AbstractGravityBody, gravity_at, gravity_bodies


_CLS = "MuJoCoScene"
# MuJoCo's joint types (mjtJoint): free, ball, slide, hinge.
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_OUTPUT_UNITS = {
    "bodies": {"r_BN_N": "m", "sigma_BN": "-", "v_BN_N": "m/s", "omega_BN_B": "rad/s"},
    "r_CN_N": "m",
    "v_CN_N": "m/s",
    "mass": "kg",
    "totOrbEnergy": "J",
    "totRotEnergy": "J",
    "totOrbAngMomPntN_N": "kg m^2/s",
    "totRotAngMomPntC_N": "kg m^2/s",
}


def _mujoco():
    """`(mujoco, mujoco.mjx)`, or an ImportError that names the extra to install."""
    try:
        import mujoco
        from mujoco import mjx
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            f"{_CLS} needs MuJoCo and MJX: "
            "pip install 'jaxsim-spacecraft[mujoco]' (mujoco, mujoco-mjx)."
        ) from err
    return mujoco, mjx


def _load_mjmodel(mjcf):
    """A `mujoco.MjModel` from MJCF text, an MJCF file path, or an `MjModel`."""
    mujoco, _ = _mujoco()
    if isinstance(mjcf, mujoco.MjModel):
        return mjcf
    if isinstance(mjcf, os.PathLike) or (
        isinstance(mjcf, str) and not mjcf.lstrip().startswith("<")
    ):
        path = os.fspath(mjcf)
        if not os.path.isfile(path):
            raise ValueError(
                f"{_CLS}: `mjcf` must be MJCF text (starting with '<'), an existing MJCF file or a "
                f"mujoco.MjModel; got the path {path!r}, which is not a file."
            )
        try:
            return mujoco.MjModel.from_xml_path(path)
        except ValueError as err:
            raise ValueError(f"{_CLS}: `mjcf` file {path!r} does not parse: {err}") from err
    if isinstance(mjcf, str):
        try:
            return mujoco.MjModel.from_xml_string(mjcf)
        except ValueError as err:
            raise ValueError(f"{_CLS}: `mjcf` text does not parse: {err}") from err
    raise TypeError(
        f"{_CLS}: `mjcf` must be MJCF text, a path to an MJCF file or a mujoco.MjModel; "
        f"got {type(mjcf).__name__}."
    )


def _names(mj, kind: str, n: int) -> tuple:
    return tuple(getattr(mj, kind)(i).name for i in range(n))


def _quat_mul(u, v):
    """Hamilton product of scalar-first quaternions."""
    w1, x1, y1, z1 = u[..., 0], u[..., 1], u[..., 2], u[..., 3]
    w2, x2, y2, z2 = v[..., 0], v[..., 1], v[..., 2], v[..., 3]
    return jnp.stack(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ],
        axis=-1,
    )


def _quat_rate(q, omega_local):
    r"""$\dot{\mathbf q} = \frac12\,\mathbf q \otimes (0, \boldsymbol\omega)$, $\boldsymbol\omega$ in the child frame."""
    return 0.5 * _quat_mul(q, jnp.concatenate([jnp.zeros(1, q.dtype), omega_local]))


class MuJoCoScene(AbstractDynamicObject):
    r"""A MuJoCo multibody scene (Basilisk `MJScene`), integrated by jaxsim's solvers.

    **Arguments:**

    - `mjcf`: the model: MJCF text, a path to an MJCF file, or a `mujoco.MjModel`.
    - `gravity`: gravity bodies (`PointMassGravity`, `SphericalHarmonicGravity`) acting on every
      body of the scene at its centre of mass; at most one `central`.
    - `model_gravity`: keep the MJCF's uniform `<option gravity>` (False, the default, sets it to
      zero: in orbit the field comes from `gravity`).
    - `ctrl`: an open-loop actuator command, a signal of time returning shape `(nu,)` (e.g. a
      `jaxsim.controls` parameterization, the way to drive the actuators with an optimized input;
      its values and times may be traced), added to `args["ctrl"]`; default None.
    - `name`: key of the scene's state, outputs and commands in a `System`.

    **State:** `{"qpos": (nq,), "qvel": (nv,)}`, plus `"act": (na,)` when the model has actuator
    activations. **Commands (from `args`):** `ctrl` `(nu,)`, `xfrc_applied` `(nbody, 6)` [N, N m].
    **Parameters** are the leaves of the MJX model in `model` (e.g. `model.body_mass` [kg],
    `model.jnt_stiffness` [N m/rad or N/m]): change them with `eqx.tree_at`; they can be traced,
    vmapped and differentiated.

    **Outputs** (`derived`): per moving body (MuJoCo body ids 1..nbody-1, see `body_names`) the
    frame origin `r_BN_N` [m], attitude `sigma_BN` (MRP), origin velocity `v_BN_N` [m/s] and rate
    `omega_BN_B` [rad/s]; the scene's centre of mass `r_CN_N`, `v_CN_N`, its `mass`; and
    Basilisk's totals: `totOrbEnergy` $= \frac12 M v_C^2 + \sum_i m_i U(\mathbf r_i)$ (the
    gravity bodies' potential of each body), `totRotEnergy` (kinetic energy relative to $C$ plus
    the hinge and slide joint springs $\frac12 k (q - q_{ref})^2$), `totOrbAngMomPntN_N` $=
    M\,\mathbf r_C\times\mathbf v_C$ and `totRotAngMomPntC_N` (about $C$), in $\mathcal N$.

    **Assumptions and limitations:** the MJCF's `<option timestep>` and `integrator` are not
    used (our solver steps the scene); MJX's feature set (`mujoco.mjx.put_model` refuses what it
    does not support); stiffness of ball and free joints, tendon springs and the MJCF's uniform
    gravity are not in the energy totals; contacts and other constraints go through MuJoCo's
    constraint solver (not reverse-differentiable: use scenes without active constraints for
    `jax.grad`).
    """

    model: Any
    gravity: tuple
    qpos0: jnp.ndarray
    model_gravity: bool = eqx.field(static=True)
    body_names: tuple = eqx.field(static=True)
    joint_names: tuple = eqx.field(static=True)
    actuator_names: tuple = eqx.field(static=True)
    ctrl: Any
    name: str = eqx.field(static=True)

    def __init__(
        self,
        mjcf: str | os.PathLike[str] | Any,
        *,
        gravity: AbstractGravityBody | Sequence[AbstractGravityBody] = (),
        model_gravity: bool = False,
        ctrl: AbstractSignal | None = None,
        name: str = "scene",
    ):
        mujoco, mjx = _mujoco()
        mj = _load_mjmodel(mjcf)
        gravity = gravity_bodies(_CLS, gravity)
        if not isinstance(model_gravity, bool):
            raise TypeError(f"{_CLS}: `model_gravity` must be a bool; got {model_gravity!r}.")
        if mj.nv == 0:
            raise ValueError(f"{_CLS}: `mjcf` must have at least one joint (nv > 0); got nv = 0.")
        try:
            model = mjx.put_model(mj, impl="jax")
        except NotImplementedError as err:
            raise NotImplementedError(f"{_CLS}: MJX does not support this model: {err}") from err
        if not model_gravity:
            model = model.tree_replace({"opt.gravity": jnp.zeros(3)})
        self.model = model
        self.gravity = gravity
        self.qpos0 = jnp.asarray(mj.qpos0, dtype=float)
        self.model_gravity = model_gravity
        self.body_names = _names(mj, "body", mj.nbody)
        self.joint_names = _names(mj, "joint", mj.njnt)
        self.actuator_names = _names(mj, "actuator", mj.nu)
        if ctrl is not None and not isinstance(ctrl, AbstractSignal):
            raise TypeError(
                f"{_CLS}: `ctrl` must be a signal of time (e.g. a jaxsim.controls "
                f"parameterization) or None; got {type(ctrl).__name__}."
            )
        self.ctrl = ctrl
        self.name = check_name(_CLS, "name", name)

    # ----------------------------------------------------------------------------------------------
    # Sizes and addresses

    @property
    def nq(self) -> int:
        return int(self.model.nq)

    @property
    def nv(self) -> int:
        return int(self.model.nv)

    @property
    def na(self) -> int:
        return int(self.model.na)

    @property
    def nu(self) -> int:
        return int(self.model.nu)

    @property
    def nbody(self) -> int:
        return int(self.model.nbody)

    def _joint_id(self, joint: str) -> int:
        if joint not in self.joint_names:
            raise ValueError(f"{_CLS}: no joint named {joint!r}; joints are {self.joint_names!r}.")
        return self.joint_names.index(joint)

    def qpos_slice(self, joint: str) -> slice:
        """Where the coordinates of the joint named `joint` lie in `qpos`."""
        j = self._joint_id(joint)
        adr = int(self.model.jnt_qposadr[j])
        size = {_FREE: 7, _BALL: 4}.get(int(self.model.jnt_type[j]), 1)
        return slice(adr, adr + size)

    def qvel_slice(self, joint: str) -> slice:
        """Where the velocities of the joint named `joint` lie in `qvel`."""
        j = self._joint_id(joint)
        adr = int(self.model.jnt_dofadr[j])
        size = {_FREE: 6, _BALL: 3}.get(int(self.model.jnt_type[j]), 1)
        return slice(adr, adr + size)

    def body_id(self, body: str) -> int:
        """MuJoCo's id of the body named `body` (row `id - 1` of the `bodies` outputs)."""
        if body not in self.body_names:
            raise ValueError(f"{_CLS}: no body named {body!r}; bodies are {self.body_names!r}.")
        return self.body_names.index(body)

    # ----------------------------------------------------------------------------------------------
    # State

    def init_state(self, qpos=None, qvel=None, act=None) -> dict:
        """Initial state: `qpos` (default the model's `qpos0`), `qvel` [rad/s, m/s] (default 0),
        `act` (default 0; only for models with actuator activations)."""
        cls = f"{_CLS}.init_state"
        y = {
            "qpos": self.qpos0 if qpos is None else as_array(cls, "qpos", qpos, "", (self.nq,)),
            "qvel": jnp.zeros(self.nv)
            if qvel is None
            else as_array(cls, "qvel", qvel, "", (self.nv,)),
        }
        if self.na:
            y["act"] = (
                jnp.zeros(self.na) if act is None else as_array(cls, "act", act, "", (self.na,))
            )
        elif act is not None:
            raise ValueError(
                f"{cls}: `act` given but the model has no actuator activations (na = 0)."
            )
        return y

    def units(self) -> dict:
        """Units of the state (`qpos`, `qvel`: mixed by joint type; `act`: the actuators'), the
        outputs and the commands (`ctrl`: the actuators' own; `xfrc_applied` [N, N m])."""
        ys = {"qpos": "m, -, rad", "qvel": "m/s, rad/s"}
        if self.na:
            ys["act"] = "-"
        outputs = {k: dict(v) if isinstance(v, dict) else v for k, v in _OUTPUT_UNITS.items()}
        args = {"ctrl": "N, N m or model units", "xfrc_applied": "N, N m"}
        return {"ys": ys, "outputs": outputs, "args": args}

    def qpos_rate(self, qpos, qvel):
        r"""$\dot q_{pos}$ from `qvel` (see the module docstring), shape `(nq,)`."""
        m = self.model
        pieces = []
        for j in range(int(m.njnt)):
            typ, qa, da = int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
            if typ == _FREE:
                pieces.append(qvel[da : da + 3])
                pieces.append(_quat_rate(qpos[qa + 3 : qa + 7], qvel[da + 3 : da + 6]))
            elif typ == _BALL:
                pieces.append(_quat_rate(qpos[qa : qa + 4], qvel[da : da + 3]))
            else:
                pieces.append(qvel[da : da + 1])
        return jnp.concatenate(pieces)

    def step_map(self, t, y):
        """Unit quaternions of free and ball joints after each step (no counters)."""
        m = self.model
        qpos = y["qpos"]
        for j in range(int(m.njnt)):
            typ, qa = int(m.jnt_type[j]), int(m.jnt_qposadr[j])
            if typ in (_FREE, _BALL):
                lo = qa + 3 if typ == _FREE else qa
                q = qpos[lo : lo + 4]
                qpos = qpos.at[lo : lo + 4].set(q / jnp.sqrt(jnp.sum(q * q)))
        return {**y, "qpos": qpos}, {}

    # ----------------------------------------------------------------------------------------------
    # Dynamics

    def _data(self, t, y, args):
        """MJX data at `y` with the commands of `args` and the gravity loads applied."""
        _, mjx = _mujoco()
        m = self.model
        d = mjx.make_data(m)
        d = d.replace(qpos=y["qpos"], qvel=y["qvel"])
        if self.na:
            d = d.replace(act=y["act"])
        cmd = args if isinstance(args, dict) else {}
        ctrl = None
        if "ctrl" in cmd:
            ctrl = self._command(cmd, "ctrl", (self.nu,), "N, N m or model units")
        if self.ctrl is not None:
            u = jnp.broadcast_to(jnp.asarray(self.ctrl(t), dtype=float), (self.nu,))
            ctrl = u if ctrl is None else ctrl + u
        if ctrl is not None:
            d = d.replace(ctrl=ctrl)
        xfrc = jnp.zeros((self.nbody, 6))
        if "xfrc_applied" in cmd:
            xfrc = xfrc + self._command(cmd, "xfrc_applied", (self.nbody, 6), "N, N m")
        if self.gravity:
            # Moving bodies only: the world body (id 0) sits at the origin, the attractor's centre.
            xipos = mjx.kinematics(m, d).xipos[1:]
            g, _ = self._gravity_field(t, xipos)
            xfrc = xfrc.at[1:, :3].add(m.body_mass[1:, None] * g)
        return d.replace(xfrc_applied=xfrc)

    def _command(self, cmd, key, shape, unit):
        """`cmd[key]` broadcast to `shape`, or a ValueError naming the command (shapes are static)."""
        value = jnp.asarray(cmd[key], float)
        try:
            return jnp.broadcast_to(value, shape)
        except ValueError:
            raise ValueError(
                f"{_CLS} {self.name!r}: command `{key}` [{unit}] must broadcast to shape {shape}; "
                f"got shape {value.shape}."
            ) from None

    def _gravity_field(self, t, r_N):
        """Gravity `(g_N, U)` [m/s^2, J/kg] at each row of `r_N` (relative to the origin)."""
        g, U, _ = jax.vmap(lambda r: gravity_at(self.gravity, t, r))(r_N)
        return g, U

    def drift(self, t, y, args):
        _, mjx = _mujoco()
        d = mjx.forward(self.model, self._data(t, y, args))
        dy = {"qpos": self.qpos_rate(y["qpos"], y["qvel"]), "qvel": d.qacc}
        if self.na:
            dy["act"] = d.act_dot
        return dy

    def breakpoints(self):
        return breakpoints_of(self.ctrl)

    def command_spec(self) -> dict:
        """`ctrl` `(nu,)` and `xfrc_applied` `(nbody, 6)`, each read as one array from `args`
        (checked by `simulate`: a misspelt or misshapen command is an error, not ignored)."""
        return {
            "ctrl": ArrayCommand((self.nu,)),
            "xfrc_applied": ArrayCommand((self.nbody, 6), exact=True),  # a wrench per body
        }

    @property
    def reads_only_commands(self) -> bool:
        return True

    # ----------------------------------------------------------------------------------------------
    # Diagnostics

    def _bodies(self, y):
        """Body poses and velocities (moving bodies), by forward-mode differentiation of MJX's
        kinematics along $\\dot q_{pos}$."""
        _, mjx = _mujoco()
        m = self.model
        base = mjx.make_data(m)

        def poses(qpos):
            d = mjx.kinematics(m, base.replace(qpos=qpos))
            return d.xpos[1:], d.xmat[1:], d.xipos[1:], d.ximat[1:]

        qdot = self.qpos_rate(y["qpos"], y["qvel"])
        (xpos, xmat, xipos, ximat), (vpos, dxmat, vipos, _) = jax.jvp(poses, (y["qpos"],), (qdot,))
        # [NB]' [NB]^T = [omega_N x]: the world-frame rate of each body.
        W = jnp.einsum("bij,bkj->bik", dxmat, xmat)
        omega_N = 0.5 * jnp.stack(
            [W[:, 2, 1] - W[:, 1, 2], W[:, 0, 2] - W[:, 2, 0], W[:, 1, 0] - W[:, 0, 1]], -1
        )
        return xpos, xmat, xipos, ximat, vpos, vipos, omega_N

    def derived(self, t, y, args) -> dict:
        m = self.model
        xpos, xmat, xipos, ximat, vpos, vipos, omega_N = self._bodies(y)
        mass = m.body_mass[1:]
        M = jnp.sum(mass)
        r_C = jnp.sum(mass[:, None] * xipos, 0) / M
        v_C = jnp.sum(mass[:, None] * vipos, 0) / M
        # Inertia about each body's CoM in N: [R] diag(I) [R]^T, with [R] the inertial frame.
        omega_I = jnp.einsum("bji,bj->bi", ximat, omega_N)  # rate in the principal frame
        h_I = m.body_inertia[1:] * omega_I
        h_N = jnp.einsum("bij,bj->bi", ximat, h_I)
        dr, dv = xipos - r_C, vipos - v_C
        E_rel = 0.5 * jnp.sum(mass * jnp.sum(dv * dv, -1)) + 0.5 * jnp.sum(omega_I * h_I)
        H_C = jnp.sum(mass[:, None] * cross3(dr, dv) + h_N, 0)
        # Joint springs (hinge and slide): 0.5 k (q - q_ref)^2.
        E_spring = jnp.zeros(())
        for j in range(int(m.njnt)):
            if int(m.jnt_type[j]) in (_HINGE, _SLIDE):
                qa = int(m.jnt_qposadr[j])
                dq = y["qpos"][qa] - m.qpos_spring[qa]
                E_spring = E_spring + 0.5 * m.jnt_stiffness[j] * dq * dq
        U = jnp.zeros(())
        if self.gravity:
            _, u = self._gravity_field(t, xipos)
            U = jnp.sum(mass * u)
        if self.model_gravity:
            U = U - jnp.sum(mass * (xipos @ m.opt.gravity))
        sigma = dcm_to_mrp(jnp.swapaxes(xmat, -1, -2))  # [BN] = [NB]^T
        omega_B = jnp.einsum("bji,bj->bi", xmat, omega_N)
        return {
            "bodies": {"r_BN_N": xpos, "sigma_BN": sigma, "v_BN_N": vpos, "omega_BN_B": omega_B},
            "r_CN_N": r_C,
            "v_CN_N": v_C,
            "mass": M,
            "totOrbEnergy": 0.5 * M * dot3(v_C, v_C) + U,
            "totRotEnergy": E_rel + E_spring,
            "totOrbAngMomPntN_N": M * cross3(r_C, v_C),
            "totRotAngMomPntC_N": H_C,
        }

    def outputs(self, t, y, args) -> dict:
        return self.derived(t, y, args)

    def energy_momentum(self, t, y, args) -> dict:
        d = self.derived(t, y, args)
        keys = ("totOrbEnergy", "totRotEnergy", "totOrbAngMomPntN_N", "totRotAngMomPntC_N")
        return {k: d[k] for k in keys}
