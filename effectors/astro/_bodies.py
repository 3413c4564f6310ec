r"""Celestial bodies: gravitational parameters, shapes, zonal harmonics and rotation rates, with sources.

Every value is SI (m, s, rad). The Earth follows the models GNSS, Basilisk and most orbit tools use
together: the EGM2008 gravitational parameter and zonal coefficients with the WGS84 ellipsoid and
rotation rate. The other bodies take their gravitational parameters from the JPL planetary ephemeris
DE421 (so that third-body forces and the DE421 positions are consistent) and their shapes and rotation
rates from the IAU Working Group on Cartographic Coordinates and Rotational Elements.

**References:**

- NGA, *Department of Defense World Geodetic System 1984*, NGA.STND.0036_1.0.0_WGS84, 2014
  (a = 6378137 m, 1/f = 298.257223563, $\omega_\oplus$ = 7.292115e-5 rad/s).
- Pavlis, N. K., Holmes, S. A., Kenyon, S. C., Factor, J. K., "The development and evaluation of the
  Earth Gravitational Model 2008 (EGM2008)", J. Geophys. Res. 117, B04406, 2012,
  doi:10.1029/2011JB008916 (GM = 3.986004415e14 m^3/s^2; tide-free $\bar C_{n0}$ for the reference
  radius 6378136.3 m, which `EARTH.J` rescales to the WGS84 radius, $J_n \propto a^n$).
- Folkner, W. M., Williams, J. G., Boggs, D. H., "The Planetary and Lunar Ephemeris DE 421", JPL IOM
  343R-08-003, 2008, and IPN Progress Report 42-178, 2009 (GM values; the outer planets' are those
  of their systems, which DE421 integrates as barycentres).
- Archinal, B. A. et al., "Report of the IAU Working Group on Cartographic Coordinates and Rotational
  Elements: 2015", Celest. Mech. Dyn. Astron. 130:22, 2018, doi:10.1007/s10569-017-9805-5 (radii,
  rotation rates $\dot W$); IAU 2015 Resolution B3 (nominal solar radius 695700 km).
"""

import dataclasses
import math


_DEG_PER_DAY = math.pi / 180.0 / 86400.0  # [rad/s] per [deg/day]
_KM3 = 1e9  # [m^3/s^2] per [km^3/s^2]


@dataclasses.dataclass(frozen=True)
class Body:
    r"""A celestial body's constants (immutable and hashable: usable as a static field under `jit`).

    **Arguments:**

    - `name`: lower-case name (the key in `BODIES`).
    - `mu`: gravitational parameter $GM$ [m^3/s^2], > 0.
    - `radius_equatorial`: equatorial radius $R$ [m], > 0 (also the reference radius of `J`).
    - `flattening`: $f = (R - R_{polar})/R$ [-], in [0, 1).
    - `J`: unnormalized zonal coefficients $(J_2, J_3, \dots)$ [-] referenced to `radius_equatorial`
      ($J_n = -\sqrt{2n+1}\,\bar C_{n0}$); empty where none are given.
    - `rotation_rate`: sidereal rotation rate about the body's north pole [rad/s] (negative:
      retrograde).
    - `naif_id`: NAIF integer code of the body's DE421 target (a barycentre for the outer planets).
    - `source`: where the values come from.
    """

    name: str
    mu: float
    radius_equatorial: float
    flattening: float
    J: tuple[float, ...]
    rotation_rate: float
    naif_id: int
    source: str

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Body: `name` must be a non-empty string; got {self.name!r}.")
        for arg, unit in (("mu", "m^3/s^2"), ("radius_equatorial", "m")):
            v = getattr(self, arg)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"Body: `{arg}` [{unit}] must be a finite float > 0; got {v!r}.")
            object.__setattr__(self, arg, float(v))
        f = self.flattening
        if not (isinstance(f, (int, float)) and 0.0 <= f < 1.0):
            raise ValueError(f"Body: `flattening` [-] must be in [0, 1); got {f!r}.")
        object.__setattr__(self, "flattening", float(f))
        J = tuple(self.J)
        if not all(isinstance(j, (int, float)) and math.isfinite(j) for j in J):
            raise ValueError(f"Body: `J` [-] must be finite floats (J2, J3, ...); got {self.J!r}.")
        object.__setattr__(self, "J", tuple(float(j) for j in J))
        w = self.rotation_rate
        if not (isinstance(w, (int, float)) and math.isfinite(w)):
            raise ValueError(f"Body: `rotation_rate` [rad/s] must be a finite float; got {w!r}.")
        object.__setattr__(self, "rotation_rate", float(w))
        if not isinstance(self.naif_id, int):
            raise ValueError(f"Body: `naif_id` must be an integer; got {self.naif_id!r}.")

    @property
    def radius_polar(self) -> float:
        """Polar radius $R(1 - f)$ [m]."""
        return self.radius_equatorial * (1.0 - self.flattening)

    @property
    def J2(self) -> float:
        """$J_2$ [-] (0.0 when `J` is empty)."""
        return self.J[0] if self.J else 0.0

    def with_(self, **changes) -> "Body":
        """A copy with some fields replaced (validated again), e.g. `EARTH.with_(J=EARTH.J[:1])`."""
        return dataclasses.replace(self, **changes)


_IAU = "IAU WGCCRE 2015 (Archinal et al. 2018) radii and rotation rate"
_DE421 = "DE421 GM (Folkner et al. 2008)"

# EGM2008 tide-free normalised zonal coefficients C20..C60 and their reference radius [m] (Pavlis et
# al. 2012). EARTH.J refers them to the WGS84 radius 6378137 m: J_n = -sqrt(2n+1) C_n0 (a_EGM/a)^n,
# the same field (J2 is 2.2e-7 smaller than with a_EGM; the potential is unchanged).
_EGM2008_C_N0 = (
    -0.484165143790815e-03,
    0.957161207093473e-06,
    0.539965866638991e-06,
    0.686702913736681e-07,
    -0.149953927978527e-06,
)
_EGM2008_RADIUS = 6378136.3

SUN = Body(
    name="sun",
    mu=132712440040.944 * _KM3,
    radius_equatorial=695700.0e3,
    flattening=0.0,
    J=(),
    rotation_rate=14.1844 * _DEG_PER_DAY,
    naif_id=10,
    source=f"{_DE421}; IAU 2015 Resolution B3 nominal radius; {_IAU}",
)

MERCURY = Body(
    name="mercury",
    mu=22032.09 * _KM3,
    radius_equatorial=2440.53e3,
    flattening=(2440.53 - 2438.26) / 2440.53,
    J=(),
    rotation_rate=6.1385108 * _DEG_PER_DAY,
    naif_id=199,
    source=f"{_DE421}; {_IAU}",
)

VENUS = Body(
    name="venus",
    mu=324858.592 * _KM3,
    radius_equatorial=6051.8e3,
    flattening=0.0,
    J=(),
    rotation_rate=-1.4813688 * _DEG_PER_DAY,
    naif_id=299,
    source=f"{_DE421}; {_IAU}",
)

EARTH = Body(
    name="earth",
    mu=3.986004415e14,
    radius_equatorial=6378137.0,
    flattening=1.0 / 298.257223563,
    J=tuple(
        -c * math.sqrt(2 * n + 1) * (_EGM2008_RADIUS / 6378137.0) ** n
        for n, c in enumerate(_EGM2008_C_N0, start=2)
    ),
    rotation_rate=7.292115e-5,
    naif_id=399,
    source="EGM2008 GM and tide-free J2..J6 (Pavlis et al. 2012; referred to the WGS84 radius); "
    "WGS84 radius, flattening and rotation rate (NGA.STND.0036, 2014)",
)

MOON = Body(
    name="moon",
    mu=4902.800076 * _KM3,
    radius_equatorial=1737.4e3,
    flattening=0.0,
    J=(),
    rotation_rate=13.17635815 * _DEG_PER_DAY,
    naif_id=301,
    source=f"{_DE421}; {_IAU}",
)

MARS = Body(
    name="mars",
    mu=42828.375214 * _KM3,
    radius_equatorial=3396.19e3,
    flattening=(3396.19 - 3376.20) / 3396.19,
    J=(),
    rotation_rate=350.891982443297 * _DEG_PER_DAY,
    naif_id=499,
    source=f"{_DE421} (Mars system); {_IAU}",
)

JUPITER = Body(
    name="jupiter",
    mu=126712764.8 * _KM3,
    radius_equatorial=71492.0e3,
    flattening=(71492.0 - 66854.0) / 71492.0,
    J=(),
    rotation_rate=870.536 * _DEG_PER_DAY,
    naif_id=5,
    source=f"{_DE421} (Jupiter system, DE421 target: barycentre 5); {_IAU} (System III)",
)

SATURN = Body(
    name="saturn",
    mu=37940585.2 * _KM3,
    radius_equatorial=60268.0e3,
    flattening=(60268.0 - 54364.0) / 60268.0,
    J=(),
    rotation_rate=810.7939024 * _DEG_PER_DAY,
    naif_id=6,
    source=f"{_DE421} (Saturn system, DE421 target: barycentre 6); {_IAU}",
)

URANUS = Body(
    name="uranus",
    mu=5794548.6 * _KM3,
    radius_equatorial=25559.0e3,
    flattening=(25559.0 - 24973.0) / 25559.0,
    J=(),
    rotation_rate=-501.1600928 * _DEG_PER_DAY,
    naif_id=7,
    source=f"{_DE421} (Uranus system, DE421 target: barycentre 7); {_IAU}",
)

NEPTUNE = Body(
    name="neptune",
    mu=6836535.0 * _KM3,
    radius_equatorial=24764.0e3,
    flattening=(24764.0 - 24341.0) / 24764.0,
    J=(),
    rotation_rate=541.1397757 * _DEG_PER_DAY,
    naif_id=8,
    source=f"{_DE421} (Neptune system, DE421 target: barycentre 8); {_IAU} (secular rate)",
)

BODIES: dict[str, Body] = {
    b.name: b for b in (SUN, MERCURY, VENUS, EARTH, MOON, MARS, JUPITER, SATURN, URANUS, NEPTUNE)
}
