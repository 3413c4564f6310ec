"""Actuators: reaction wheels (and their limits and friction), thrusters fixed on the hub
(`thrusterDynamicEffector`) and thrusters with a thrust ramp as states (`thrusterStateEffector`).
"""
