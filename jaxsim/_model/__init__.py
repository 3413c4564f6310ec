"""The model stage: what a run is made of, used by every stage above it.

`_dynamic_object` (models and their composition), `_layout` (the flat state), `_clocks` (clocks and
discrete models), `_signals` and `_controls` (inputs of time), `_quantity` (commands with units),
`_kinematics` (attitude), `_validation` (construction-time checks), `_arguments` (normalization of a
run's model and arguments), `_step_context` (which solver step is being evaluated).
"""
