"""State effectors with moving or changing mass: hinged panels, spinning bodies, spring-mass-damper
slosh, fuel tanks, the drive of 1-DOF joints and MuJoCo multibody scenes.
"""
