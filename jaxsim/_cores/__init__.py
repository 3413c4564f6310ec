"""The core stage: the steppers that advance the flat state.

`_fixed_grid` (the fixed-grid stepper shared by the fixed-step, SDE and clocked drivers),
`_adaptive` (jaxsim's lean adaptive core: controller, step loop, sensitivities and the discrete
adjoint), `_diffrax` (`diffrax.diffeqsolve` on the flat state).
"""
