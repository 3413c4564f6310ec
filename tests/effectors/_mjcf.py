"""MJCF twins of the Basilisk reference spacecraft (tests/data): a free-joint hub, hinge joints for
hinged panels (torsional springs as joint `stiffness`, reference angle 0) and for balanced reaction
wheels (rotors as bodies spinning about the wheel axis, motors as MuJoCo `motor` actuators)."""

import numpy as np

import jaxsim as js


_FULL = ([0, 1, 2, 0, 0, 1], [0, 1, 2, 1, 2, 2])  # MJCF `fullinertia` order: xx yy zz xy xz yz


def _fmt(v) -> str:
    return " ".join(f"{x:.17g}" for x in np.ravel(np.asarray(v, dtype=float)))


def _inertial(pos, mass, inertia) -> str:
    inertia = np.asarray(inertia, dtype=float)
    return f'<inertial pos="{_fmt(pos)}" mass="{mass:.17g}" fullinertia="{_fmt(inertia[_FULL])}"/>'


def hub_mjcf(spec, *, children: str = "", hub_mass_less: float = 0.0, hub_inertia_less=0.0,
             actuators: str = "") -> str:  # fmt: skip
    """The hub as a free body whose frame is B (Basilisk's body frame); `children`: MJCF bodies."""
    h = spec["hub"]
    inertia = np.asarray(h["IHubPntBc_B_kgm2"], dtype=float) - hub_inertia_less
    return (
        '<mujoco model="hub"><worldbody><body name="hub"><freejoint name="hub"/>'
        + _inertial(h["r_BcB_B_m"], h["mHub_kg"] - hub_mass_less, inertia)
        + children
        + f"</body></worldbody><actuator>{actuators}</actuator></mujoco>"
    )


def panels_mjcf(spec) -> str:
    """Hub + hinged panels: the panel body frame is the hinge frame H at theta = 0 (origin at the
    hinge point, axes the rows of [HB]); the hinge axis is h2, the panel CoM at -d h1."""
    children = ""
    for p in spec["effectors"][0]["panels"]:
        beta_HB = np.asarray(js.kinematics.dcm_to_quat(np.asarray(p["dcm_HB"])))
        children += (
            f'<body name="{p["name"]}" pos="{_fmt(p["r_HB_B_m"])}" quat="{_fmt(beta_HB)}">'
            f'<joint name="{p["name"]}" type="hinge" axis="0 1 0" '
            f'stiffness="{p["k_Nm_per_rad"]:.17g}" damping="{p["c_Nms_per_rad"]:.17g}"/>'
            + _inertial([-p["d_m"], 0.0, 0.0], p["mass_kg"], p["IPntS_S_kgm2"])
            + "</body>"
        )
    return hub_mjcf(spec, children=children)


def wheels_mjcf(spec, m_rotor: float = 1.0) -> str:
    """Hub + balanced wheels. Basilisk's hub inertia already holds the wheels; here each rotor
    (mass `m_rotor`, inertia Js g g^T + Jt (1 - g g^T)) sits at the hub CoM, and the hub body keeps
    the rest, so the composite mass, CoM and inertia are Basilisk's."""
    children, actuators = "", ""
    less = np.zeros((3, 3))
    wheels = spec["effectors"][0]["wheels"]
    for w in wheels:
        g = np.asarray(w["gsHat_B"], dtype=float)
        I_w = w["Js_kgm2"] * np.outer(g, g) + w["Jt_kgm2"] * (np.eye(3) - np.outer(g, g))
        less = less + I_w
        children += (
            f'<body name="{w["name"]}" pos="{_fmt(spec["hub"]["r_BcB_B_m"])}">'
            f'<joint name="{w["name"]}" type="hinge" axis="{_fmt(g)}"/>'
            + _inertial([0.0, 0.0, 0.0], m_rotor, I_w)
            + "</body>"
        )
        actuators += f'<motor name="{w["name"]}" joint="{w["name"]}"/>'
    return hub_mjcf(
        spec, children=children, hub_mass_less=len(wheels) * m_rotor, hub_inertia_less=less,
        actuators=actuators,
    )  # fmt: skip


def scene_state(scene, spec, ref, joint_q=(), joint_qdot=()):
    """The scene's initial state from Basilisk's recorded initial B state and the joint states."""
    ic = spec["initial_conditions"]
    beta_BN = np.asarray(js.kinematics.mrp_to_quat(np.asarray(ic["sigma_BN"], dtype=float)))
    qpos = np.concatenate([ref["r_BN_N"][0], beta_BN, np.asarray(joint_q, dtype=float)])
    qvel = np.concatenate(
        [ref["v_BN_N"][0], ic["omega_BN_B_radps"], np.asarray(joint_qdot, dtype=float)]
    )
    return scene.init_state(qpos, qvel)
