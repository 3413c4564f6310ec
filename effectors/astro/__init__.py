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
from ._ephemeris import (
    DE421_TARGETS as DE421_TARGETS,
    AbstractEphemeris as AbstractEphemeris,
    AnalyticSunMoon as AnalyticSunMoon,
    DE421Ephemeris as DE421Ephemeris,
    EphemerisPosition as EphemerisPosition,
    moon_position_analytic as moon_position_analytic,
    sun_position_analytic as sun_position_analytic,
)
