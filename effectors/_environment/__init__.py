"""Environment models the force effectors read: atmospheres (exponential, Harris-Priester,
NRLMSISE-00 with its space-weather inputs), eclipses and shadow geometry. Bodies, elements, epochs
and ephemerides are the public `effectors.astro`.
"""
