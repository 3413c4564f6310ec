"""The spacecraft: the hub, the effector contracts and the back-substitution assembly.

`_assembly` (`Spacecraft`), `_hub`, `_contract` (the effector contracts), `_types` (pytrees exchanged
between hub and effectors), `_physical` (traced validity checks), `_unit_params` (per-unit parameters
of vectorized effectors), `_joints` (1-DOF effectors as one block), `_attachments` (effectors on
moving bodies).
"""
