r"""Eclipses by several spherical bodies (Basilisk `eclipse`): the visible fraction of the solar disc.

For each occulting body $k$ (radius $R_k$, centre $\mathbf r_k(t)$) the conical model with umbra and
penumbra gives $\nu_k\in[0,1]$ (`conical_illumination`, Montenbruck & Gill sec. 3.4.2); the
spacecraft sees $\nu = \min_k \nu_k$ (exact unless two bodies cover the disc at once, when it
overestimates the light; as Basilisk's `eclipse`, which reports the deepest shadow).
"""

from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import ArrayLike, Float

from jaxsim.signals import AbstractSignal, evaluate
from jaxsim.validation import as_array, check_positive

from ..astro._bodies import EARTH, MOON, Body
from ._shadow import R_SUN, _position, conical_illumination


def _occulter(cls, i, item):
    """`(radius array, position)` of occulter `i`: a `Body` (at the origin) or a pair `(Body or
    radius [m], position [m] constant or function of time)`."""
    if isinstance(item, Body):
        item = (item, jnp.zeros(3))
    if not (isinstance(item, (tuple, list)) and len(item) == 2):
        raise TypeError(
            f"{cls}: `occulters[{i}]` must be a Body or a pair (Body or radius [m], position [m]); "
            f"got {item!r}."
        )
    radius, pos = item
    if isinstance(radius, Body):
        radius = radius.radius_equatorial
    arg = f"occulters[{i}]"
    radius = check_positive(cls, arg, as_array(cls, arg, radius, "m", ()), "m")
    return radius, _position(cls, arg, pos)


class Eclipse(eqx.Module):
    r"""Sunlight fraction $\nu = \min_k \nu_k$ past spherical occulting bodies (conical shadows).

    **Arguments:**

    - `r_sun_N`: sun position [m] in $\mathcal N$, constant `(3,)` or a function of the run's time
      (e.g. `DE421Ephemeris.trajectory("sun", epoch)`).
    - `occulters`: sequence of `effectors.astro.Body` (at the origin) or pairs `(Body or radius
      [m], position [m] constant or function of time)`; default the Earth at the origin.
    - `R_sun`: solar radius [m] (default 6.957e8, IAU 2015 Resolution B3).

    `Eclipse.from_ephemeris(ephemeris, epoch, occulters=(EARTH, MOON))` takes the sun and every
    occulter other than the ephemeris centre (which sits at the origin) from an ephemeris.

    **Methods:** `illumination(t, r_N)` [-] at absolute position `r_N` [m] (same frame and origin as
    the ephemeris), `t` the run's time [s].

    **Assumptions and limitations:** spherical bodies (the Earth's equatorial radius; flattening
    neglected), no atmosphere refraction or limb darkening, geometric (no light-time) positions.

    **Reference:** Montenbruck & Gill, *Satellite Orbits* (2000), sec. 3.4.2; Basilisk `eclipse`
    module documentation.
    """

    r_sun_N: object
    radii: tuple
    positions: tuple
    R_sun: jnp.ndarray

    def __init__(
        self,
        r_sun_N: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike],
        occulters: Sequence[Any] | None = None,
        *,
        R_sun: Float[ArrayLike, ""] = R_SUN,
    ):
        cls = "Eclipse"
        self.r_sun_N = _position(cls, "r_sun_N", r_sun_N)
        if occulters is None:
            occulters = (EARTH,)
        if isinstance(occulters, Body):
            occulters = (occulters,)
        occulters = tuple(occulters)
        if not occulters:
            raise ValueError(f"{cls}: `occulters` must name at least one body; got none.")
        pairs = [_occulter(cls, i, o) for i, o in enumerate(occulters)]
        self.radii = tuple(p[0] for p in pairs)
        self.positions = tuple(p[1] for p in pairs)
        self.R_sun = check_positive(cls, "R_sun", as_array(cls, "R_sun", R_sun, "m", ()), "m")

    @classmethod
    def from_ephemeris(cls, ephemeris, epoch, occulters=None, *, R_sun=R_SUN):
        """The sun and the `occulters` (`Body` objects; default Earth and Moon) from `ephemeris`
        along a run starting at `epoch` (an `Epoch` or TDB seconds past J2000)."""
        if occulters is None:
            occulters = (EARTH, MOON)
        if isinstance(occulters, Body):
            occulters = (occulters,)
        pairs = []
        for b in occulters:
            if isinstance(b, Body):
                at_centre = b.name == ephemeris.center
                b = (b, jnp.zeros(3) if at_centre else ephemeris.trajectory(b, epoch))
            pairs.append(b)
        return cls(ephemeris.trajectory("sun", epoch), pairs, R_sun=R_sun)

    def illumination(self, t, r_N):
        """Visible fraction of the solar disc $\\nu$ [-] at `r_N` [m] and run time `t` [s]."""
        r_sun = evaluate(self.r_sun_N, t)
        nu = jnp.ones(jnp.shape(r_N)[:-1])
        for R, pos in zip(self.radii, self.positions):
            nu = jnp.minimum(nu, conical_illumination(r_N, r_sun, evaluate(pos, t), R, self.R_sun))
        return nu
