"""effectors.astro: the astrodynamics environment (bodies and constants, orbital elements, epochs).

`import effectors as fx; fx.astro.EARTH.mu`.
"""

from ._bodies import (
    BODIES as BODIES,
    EARTH as EARTH,
    JUPITER as JUPITER,
    MARS as MARS,
    MERCURY as MERCURY,
    MOON as MOON,
    NEPTUNE as NEPTUNE,
    SATURN as SATURN,
    SUN as SUN,
    URANUS as URANUS,
    VENUS as VENUS,
    Body as Body,
)
