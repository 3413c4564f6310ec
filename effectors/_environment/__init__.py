"""Environment models the force effectors read: atmospheres (exponential, Harris-Priester), eclipses
and shadow geometry. Bodies, elements, epochs and ephemerides are the public `effectors.astro`.
"""
