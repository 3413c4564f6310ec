"""Dynamic effectors: external forces and torques on the spacecraft (gravity, third bodies,
gravity gradient, drag, solar radiation pressure, external and stochastic torques).
"""
