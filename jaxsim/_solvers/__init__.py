"""The solver stage: Runge-Kutta tableaus and SDE schemes the cores step with.

`_ode` (fixed-step and adaptive ODE solvers), `_verner` (Verner's 9(8) pair), `_sde` (SDE solvers).
"""
