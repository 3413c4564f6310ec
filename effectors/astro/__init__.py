"""effectors.astro: the astrodynamics environment (bodies and constants, orbital elements, epochs,
two-line elements and SGP4/SDP4).

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
from ._elements import (
    CIRCULAR_E as CIRCULAR_E,
    E2M as E2M,
    EQUATORIAL_I as EQUATORIAL_I,
    H2N as H2N,
    M2E as M2E,
    MEE_RETROGRADE_MIN as MEE_RETROGRADE_MIN,
    N2H as N2H,
    PARABOLIC_ALPHA_R as PARABOLIC_ALPHA_R,
    ClassicElements as ClassicElements,
    E2f as E2f,
    H2f as H2f,
    M2f as M2f,
    ModifiedEquinoctialElements as ModifiedEquinoctialElements,
    elem2mee as elem2mee,
    elem2rv as elem2rv,
    f2E as f2E,
    f2H as f2H,
    f2M as f2M,
    kepler_propagate as kepler_propagate,
    mee2elem as mee2elem,
    mee2rv as mee2rv,
    rv2elem as rv2elem,
    rv2mee as rv2mee,
    semilatus_rectum as semilatus_rectum,
    solve_kepler as solve_kepler,
    solve_kepler_hyperbolic as solve_kepler_hyperbolic,
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
from ._rotation import (
    EarthRotation as EarthRotation,
    IAURotation as IAURotation,
    earth_rotation_angle as earth_rotation_angle,
    gmst82 as gmst82,
    precession76 as precession76,
)
from ._sgp4 import (
    MAX_RESONANCE_STEPS as MAX_RESONANCE_STEPS,
    SGP4_ERRORS as SGP4_ERRORS,
    SGP4Elements as SGP4Elements,
    SGP4Result as SGP4Result,
    sgp4 as sgp4,
)
from ._teme import (
    WGS84_A as WGS84_A,
    WGS84_F as WGS84_F,
    dcm_gcrs_to_teme as dcm_gcrs_to_teme,
    equation_of_equinoxes94 as equation_of_equinoxes94,
    gcrs_to_itrs as gcrs_to_itrs,
    geodetic as geodetic,
    mean_obliquity80 as mean_obliquity80,
    nutation80 as nutation80,
    polar_motion as polar_motion,
    teme_to_gcrs as teme_to_gcrs,
    teme_to_itrs as teme_to_itrs,
)
from ._time import (
    J2000_JD_TDB as J2000_JD_TDB,
    TT_MINUS_TAI as TT_MINUS_TAI,
    Epoch as Epoch,
)
from ._tle import (
    TLE as TLE,
    read_tles as read_tles,
    stack_elements as stack_elements,
    tle_checksum as tle_checksum,
    tle_state as tle_state,
)
