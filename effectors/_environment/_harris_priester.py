r"""Harris-Priester atmosphere: tabulated minimum/maximum densities with the diurnal bulge.

Between tabulated altitudes $h_i \le h < h_{i+1}$ the antapex and apex densities are exponential,

$$\rho_{m,M}(h) = \rho_{m,M}(h_i)\,\exp\!\left(\frac{h_i - h}{H_{m,M}}\right),\qquad
H_{m,M} = \frac{h_i - h_{i+1}}{\ln\big(\rho_{m,M}(h_{i+1})/\rho_{m,M}(h_i)\big)},$$

and the density is $\rho = \rho_m + (\rho_M - \rho_m)\cos^n(\psi/2)$, with $\psi$ the angle between
the position and the apex of the diurnal bulge, which lags the Sun by 30 deg in right ascension:
$\mathbf e_b = (\cos\delta_\odot\cos(\alpha_\odot + 30°), \cos\delta_\odot\sin(\alpha_\odot + 30°),
\sin\delta_\odot)$ and $\cos^n(\psi/2) = (\tfrac12 + \tfrac12\,\mathbf e_r\cdot\mathbf e_b)^{n/2}$.
The table (Montenbruck & Gill, Table 3.8) is for mean solar activity, 100-1000 km.

**Reference:** Harris, I., Priester, W., "Time-dependent structure of the upper atmosphere",
J. Atmos. Sci. 19, 286-301, 1962, doi:10.1175/1520-0469(1962)019<0286:TDSOTU>2.0.CO;2;
Montenbruck, O., Gill, E., *Satellite Orbits*, Springer, 2000, sec. 3.5.2, eqs. 3.99-3.104.
"""

import math
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from jaxsim.kinematics import dot3
from jaxsim.signals import AbstractSignal, evaluate
from jaxsim.validation import as_array, check_positive

from ..astro._bodies import EARTH, Body
from ._shadow import _position


# Montenbruck & Gill (2000) Table 3.8: altitude [km], minimum and maximum density [g/km^3] for
# mean solar activity.
_TABLE = np.array(
    [
        [100, 497400.0, 497400.0],
        [120, 24900.0, 24900.0],
        [130, 8377.0, 8710.0],
        [140, 3899.0, 4059.0],
        [150, 2122.0, 2215.0],
        [160, 1263.0, 1344.0],
        [170, 800.8, 875.8],
        [180, 528.3, 601.0],
        [190, 361.7, 429.7],
        [200, 255.7, 316.2],
        [210, 183.9, 239.6],
        [220, 134.1, 185.3],
        [230, 99.49, 145.5],
        [240, 74.88, 115.7],
        [250, 57.09, 93.08],
        [260, 44.03, 75.55],
        [270, 34.30, 61.82],
        [280, 26.97, 50.95],
        [290, 21.39, 42.26],
        [300, 17.08, 35.26],
        [320, 10.99, 25.11],
        [340, 7.214, 18.19],
        [360, 4.824, 13.37],
        [380, 3.274, 9.955],
        [400, 2.249, 7.492],
        [420, 1.558, 5.684],
        [440, 1.091, 4.355],
        [460, 0.7701, 3.362],
        [480, 0.5474, 2.612],
        [500, 0.3916, 2.042],
        [520, 0.2819, 1.605],
        [540, 0.2042, 1.267],
        [560, 0.1488, 1.005],
        [580, 0.1092, 0.7997],
        [600, 0.08070, 0.6390],
        [620, 0.06012, 0.5123],
        [640, 0.04519, 0.4121],
        [660, 0.03430, 0.3325],
        [680, 0.02632, 0.2691],
        [700, 0.02043, 0.2185],
        [720, 0.01607, 0.1779],
        [740, 0.01281, 0.1452],
        [760, 0.01036, 0.1190],
        [780, 0.008496, 0.09776],
        [800, 0.007069, 0.08059],
        [840, 0.004680, 0.05741],
        [880, 0.003200, 0.04210],
        [920, 0.002210, 0.03130],
        [960, 0.001560, 0.02360],
        [1000, 0.001150, 0.01810],
    ]
)
_LAG = 30.0 * math.pi / 180.0  # [rad] bulge apex lag in right ascension


class HarrisPriesterAtmosphere(eqx.Module):
    r"""Harris-Priester density with the diurnal bulge (see the module documentation).

    **Arguments:**

    - `r_sun_N`: Sun position [m] relative to the planet centre in $\mathcal N$ (EME2000), a
      constant `(3,)` or a function of the run's time (e.g. `ephemeris.trajectory("sun", epoch)`).
    - `n`: exponent of $\cos(\psi/2)$, 2 (low inclination) to 6 (polar orbits); default 4.
    - `body`: the planet (default `EARTH`): the altitude is above its ellipsoid (equatorial radius
      and flattening, to first order in the flattening: $h = r - R(1 - f\sin^2\phi)$).

    **Methods:** `density_at(t, r_N)` [kg/m^3] at the run's time `t` [s] and position `r_N` [m]
    relative to the planet centre; `altitude(r_N)` [m].

    **Assumptions and limitations:** mean solar activity only (Montenbruck & Gill's table; no
    F10.7 or Kp dependence); zero density above 1000 km; below 100 km the 100-120 km scale height
    is extrapolated (the model is not meant for it); the planet-fixed frame is taken as the
    equator of $\mathcal N$ for the latitude (precession neglected, < 0.5 deg).

    **Reference:** Montenbruck & Gill, *Satellite Orbits* (2000), sec. 3.5.2 and Table 3.8.
    """

    r_sun_N: object
    radius: jnp.ndarray
    flattening: jnp.ndarray
    n: float = eqx.field(static=True)

    def __init__(
        self,
        r_sun_N: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike],
        *,
        n: int = 4,
        body: Body = EARTH,
    ):
        cls = "HarrisPriesterAtmosphere"
        self.r_sun_N = _position(cls, "r_sun_N", r_sun_N)
        if not isinstance(n, (int, float)) or not 2 <= n <= 6:
            raise ValueError(f"{cls}: `n` [-] must be in [2, 6]; got {n!r}.")
        self.n = float(n)
        if not isinstance(body, Body):
            raise TypeError(f"{cls}: `body` must be an effectors.astro.Body; got {body!r}.")
        self.radius = check_positive(
            cls, "body", as_array(cls, "body", body.radius_equatorial, "m", ()), "m"
        )
        self.flattening = jnp.asarray(body.flattening)

    def altitude(self, r_N):
        """Height [m] above the planet's ellipsoid (first order in the flattening)."""
        r = jnp.sqrt(dot3(r_N, r_N))
        sin_lat = r_N[2] / r
        return r - self.radius * (1.0 - self.flattening * sin_lat**2)

    def density_at(self, t, r_N):
        """Density [kg/m^3] at position `r_N` [m] (planet-centred) and run time `t` [s]."""
        h = self.altitude(r_N) / 1000.0  # [km]
        hs, rho_m, rho_M = (jnp.asarray(_TABLE[:, k]) for k in range(3))
        i = jnp.clip(jnp.searchsorted(hs, h, side="right") - 1, 0, len(_TABLE) - 2)
        dh = hs[i] - h
        H_m = (hs[i] - hs[i + 1]) / jnp.log(rho_m[i + 1] / rho_m[i])
        H_M = (hs[i] - hs[i + 1]) / jnp.log(rho_M[i + 1] / rho_M[i])
        lo = rho_m[i] * jnp.exp(dh / H_m)
        hi = rho_M[i] * jnp.exp(dh / H_M)
        s = evaluate(self.r_sun_N, t)
        ra = jnp.arctan2(s[1], s[0]) + _LAG
        cd = jnp.sqrt(s[0] ** 2 + s[1] ** 2)
        e_b = jnp.stack([cd * jnp.cos(ra), cd * jnp.sin(ra), s[2]]) / jnp.sqrt(dot3(s, s))
        cos_psi = dot3(r_N, e_b) / jnp.sqrt(dot3(r_N, r_N))
        bulge = jnp.maximum(0.5 + 0.5 * cos_psi, 0.0) ** (0.5 * self.n)
        rho = (lo + (hi - lo) * bulge) * 1e-12  # [g/km^3] -> [kg/m^3]
        return jnp.where(h <= hs[-1], rho, 0.0)
