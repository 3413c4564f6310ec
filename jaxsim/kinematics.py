"""Public attitude-kinematics functions (MRP, DCM, quaternion, PRV) and 3x3 linear algebra.

Batched over leading axes; conventions are Basilisk's (Schaub and Junkins, *Analytical
Mechanics of Space Systems*, 4th ed., AIAA 2018).
"""

from ._model._kinematics import (
    cross3 as cross3,
    dcm_to_mrp as dcm_to_mrp,
    dcm_to_quat as dcm_to_quat,
    dot3 as dot3,
    euler_axis_rotation as euler_axis_rotation,
    inv3 as inv3,
    mm3 as mm3,
    mrp_b_matrix as mrp_b_matrix,
    mrp_dot as mrp_dot,
    mrp_shadow as mrp_shadow,
    mrp_switch as mrp_switch,
    mrp_to_dcm as mrp_to_dcm,
    mrp_to_quat as mrp_to_quat,
    mtv3 as mtv3,
    mv3 as mv3,
    outer3 as outer3,
    prv_to_dcm as prv_to_dcm,
    quat_to_dcm as quat_to_dcm,
    quat_to_mrp as quat_to_mrp,
    solve3 as solve3,
    tilde as tilde,
)


__all__ = [
    "cross3",
    "dcm_to_mrp",
    "dcm_to_quat",
    "dot3",
    "euler_axis_rotation",
    "inv3",
    "mm3",
    "mrp_b_matrix",
    "mrp_dot",
    "mrp_shadow",
    "mrp_switch",
    "mrp_to_dcm",
    "mrp_to_quat",
    "mtv3",
    "mv3",
    "outer3",
    "prv_to_dcm",
    "quat_to_dcm",
    "quat_to_mrp",
    "solve3",
    "tilde",
]
