r"""Gravity bodies: point masses and spherical harmonics, with Basilisk's central-body formulation.

Gravity is a *field*, not a dynamic effector: the spacecraft evaluates it at the composite CoM $C$ and
applies $m_{sc}\mathbf g_N$ through $C$, so that about $B$ it adds the moment $\mathbf c\times m_{sc}\mathbf g$,
whereas dynamic-effector forces act through $B$ (Basilisk `spacecraft` module documentation).

Several bodies superpose. When one body is flagged `central=True` the spacecraft's position/velocity
states are relative to it, and the field includes the indirect term of every other body $P$:

$$\mathbf g_N = \sum_P \mathbf g_P(\mathbf r_{C/N} - \mathbf r_{P/N}) + \sum_{P \ne \oplus} \mathbf g_P(\mathbf r_{P/\oplus}).$$

Body positions $\mathbf r_{P/N}(t)$ are constant arrays or functions of time (ephemerides).

Bodies given as `effectors.astro.Body` objects (`PointMassGravity(fx.astro.EARTH)`,
`SphericalHarmonicGravity.from_body(fx.astro.EARTH, degree=6)`) take their gravitational parameter,
reference radius, zonal harmonics and name from it. A body whose field is a *perturbation relative
to the integration origin* (`ThirdBodyGravity`, `includes_indirect = True`) supplies its direct and
indirect terms together in a cancellation-free form (`field_relative`).

The potential used for energy logging is the point-mass one, $U = -\sum_P \mu_P/\|\mathbf r_{C/P}\|$ (plus
the indirect terms), even for spherical harmonics, exactly as Basilisk logs it.
"""

import abc
import math
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from jaxsim.kinematics import dot3, mv3
from jaxsim.signals import AbstractSignal, evaluate
from jaxsim.validation import (
    as_array,
    check_name,
    check_orthonormal,
    check_positive,
    check_unique_names,
)

from .._spacecraft._physical import positive
from ..astro._bodies import Body


class AbstractGravityBody(eqx.Module):
    """A gravitating body with gravitational parameter `mu` [m^3/s^2] and a position [m] in N."""

    name: eqx.AbstractVar[str]
    mu: eqx.AbstractVar[jnp.ndarray]
    central: eqx.AbstractVar[bool]
    r_PN_N: eqx.AbstractVar[object]
    # True for a body that gives its direct and indirect terms together (`field_relative`).
    includes_indirect = False

    def position(self, t):
        """Body position $\\mathbf r_{P/N}(t)$ [m], $\\mathcal N$ components."""
        return evaluate(self.r_PN_N, t)

    def physical_checks(self) -> dict:
        """`{quantity: traced bool}` (read by `Spacecraft.validity`): `mu` > 0, and a body's
        reference `radius` > 0 where it has one."""
        out = {"mu": positive(self.mu)}
        radius = getattr(self, "radius", None)
        if radius is not None:
            out["radius"] = positive(radius)
        return out

    @abc.abstractmethod
    def field(self, t, x_N):
        """Acceleration [m/s^2] ($\\mathcal N$ comps) at position `x_N` relative to the body centre."""

    def potential(self, t, x_N):
        """Specific potential energy used for logging, $-\\mu/\\|x\\|$ [J/kg]."""
        return -self.mu / jnp.sqrt(dot3(x_N, x_N))


def _mu_and_name(cls, mu, name):
    """`(mu, name)` from a `Body` (its `mu`, and its name unless `name` is given) or a number."""
    if isinstance(mu, Body):
        return mu.mu, mu.name if name is None else name
    return mu, "earth" if name is None else name


def zonal_coefficients(body, degree=None):
    r"""Fully normalised $\bar C$ `(L+1, L+1)` of `body`'s zonal field: $\bar C_{00} = 1$,
    $\bar C_{l0} = -J_l/\sqrt{2l+1}$ from `body.J` $= (J_2, J_3, \dots)$, up to `degree` (default
    all of `J`)."""
    lmax = len(body.J) + 1
    degree = lmax if degree is None else int(degree)
    if not 0 <= degree <= lmax:
        raise ValueError(
            f"SphericalHarmonicGravity.from_body: `degree` must be in [0, {lmax}] (J2..J{lmax} of "
            f"{body.name!r}); got {degree}."
        )
    C = np.zeros((degree + 1, degree + 1))
    C[0, 0] = 1.0
    for l in range(2, degree + 1):
        C[l, 0] = -body.J[l - 2] / math.sqrt(2 * l + 1)
    return C


def _position_arg(cls, r_PN_N):
    if r_PN_N is None:
        return jnp.zeros(3)
    if callable(r_PN_N):
        return r_PN_N
    return as_array(cls, "r_PN_N", r_PN_N, "m", (3,))


class PointMassGravity(AbstractGravityBody):
    r"""Point-mass field $\mathbf g(\mathbf x) = -\mu\,\mathbf x/\|\mathbf x\|^3$.

    **Arguments:**

    - `mu`: gravitational parameter [m^3/s^2], > 0, or an `effectors.astro.Body` (its `mu`, and
      its `name` as the default name).
    - `r_PN_N`: body position [m] in $\mathcal N$: a constant `(3,)` array (default the origin) or a
      function of time `t -> (3,)` (an ephemeris, e.g. `DE421Ephemeris.trajectory(body, epoch)`).
    - `central`: the spacecraft states are relative to this body (at most one central body).
    - `name`: unique name of the body (default `"earth"`, or the `Body`'s name).
    """

    mu: jnp.ndarray
    r_PN_N: object
    central: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        mu: Float[ArrayLike, ""] | Body,
        *,
        r_PN_N: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike] | None = None,
        central: bool = False,
        name: str | None = None,
    ):
        cls = "PointMassGravity"
        mu, name = _mu_and_name(cls, mu, name)
        self.mu = check_positive(cls, "mu", as_array(cls, "mu", mu, "m^3/s^2", ()), "m^3/s^2")
        self.r_PN_N = _position_arg(cls, r_PN_N)
        self.central = bool(central)
        self.name = check_name(cls, "name", name)

    def field(self, t, x_N):
        r2 = dot3(x_N, x_N)
        return -self.mu * x_N / (r2 * jnp.sqrt(r2))


class SphericalHarmonicGravity(AbstractGravityBody):
    r"""Spherical-harmonic field from fully normalised coefficients $\bar C_{lm}, \bar S_{lm}$.

    $U = \frac{\mu}{r}\sum_{l=0}^{L}\sum_{m=0}^{l}(R/r)^l \bar P_{lm}(\sin\phi)[\bar C_{lm}\cos m\lambda +
    \bar S_{lm}\sin m\lambda]$ (geodesy normalisation, no Condon-Shortley phase); the acceleration
    $\nabla U$ is computed with Pines' singularity-free formulation (Lundberg & Schutz recursions),
    in the planet-fixed frame $\mathcal P$: $\mathbf g_N = [PN]^T \mathbf a([PN]\mathbf x_N)$.
    $\bar C_{00}$ carries the point-mass term (normally 1).

    **Arguments:**

    - `mu` [m^3/s^2], `radius` reference (equatorial) radius $R$ [m].
    - `C`, `S`: normalised coefficients, shape `(L+1, L+1)`, indexed `[l, m]` (entries with m > l ignored).
    - `degree`, `order`: truncation (default: all of `C`); `order <= degree`.
    - `dcm_PN`: planet-fixed orientation $[PN]$ (constant 3x3 or a function of time, e.g.
      `effectors.astro.EarthRotation(epoch)` or `IAURotation(body, epoch)`), default identity.
    - `r_PN_N`, `central`, `name`: as for `PointMassGravity`.

    `SphericalHarmonicGravity.from_body(body, degree, ...)` builds the zonal field of an
    `effectors.astro.Body` (its `J`), or takes full `C`, `S` with the body's `mu`, radius and name.

    **Reference:** Pines, S., "Uniform representation of the gravitational potential and its
    derivatives", AIAA J. 11(11), 1973, doi:10.2514/3.50631; Lundberg & Schutz, J. Guid. Control 11(1),
    1988, doi:10.2514/3.20271.
    """

    mu: jnp.ndarray
    radius: jnp.ndarray
    C: jnp.ndarray
    S: jnp.ndarray
    dcm_PN: object
    r_PN_N: object
    degree: int = eqx.field(static=True)
    order: int = eqx.field(static=True)
    central: bool = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(
        self,
        mu: Float[ArrayLike, ""] | Body,
        radius: Float[ArrayLike, ""] | None,
        C: Float[ArrayLike, "L+1 L+1"] | None,
        S: Float[ArrayLike, "L+1 L+1"] | None = None,
        *,
        degree: int | None = None,
        order: int | None = None,
        dcm_PN: Float[ArrayLike, "3 3"] | AbstractSignal | Callable[..., ArrayLike] | None = None,
        r_PN_N: Float[ArrayLike, "3"] | AbstractSignal | Callable[..., ArrayLike] | None = None,
        central: bool = False,
        name: str | None = None,
    ):
        cls = "SphericalHarmonicGravity"
        mu, name = _mu_and_name(cls, mu, name)
        self.mu = check_positive(cls, "mu", as_array(cls, "mu", mu, "m^3/s^2", ()), "m^3/s^2")
        self.radius = check_positive(cls, "radius", as_array(cls, "radius", radius, "m", ()), "m")
        C = as_array(cls, "C", C, "-", (None, None))
        if C.shape[0] != C.shape[1] or C.shape[0] < 1:
            raise ValueError(f"{cls}: `C` [-] must be square (L+1, L+1); got shape {C.shape}.")
        S = jnp.zeros_like(C) if S is None else as_array(cls, "S", S, "-", C.shape)
        lmax = C.shape[0] - 1
        degree = lmax if degree is None else int(degree)
        order = degree if order is None else int(order)
        if not 0 <= degree <= lmax:
            raise ValueError(f"{cls}: `degree` must be in [0, {lmax}] (size of `C`); got {degree}.")
        if not 0 <= order <= degree:
            raise ValueError(f"{cls}: `order` must be in [0, degree={degree}]; got {order}.")
        keep = np.zeros((degree + 1, degree + 1))
        for l in range(degree + 1):
            keep[l, : min(l, order) + 1] = 1.0
        self.C = C[: degree + 1, : degree + 1] * keep
        self.S = S[: degree + 1, : degree + 1] * keep
        self.degree, self.order = degree, order
        if dcm_PN is None:
            dcm_PN = jnp.eye(3)
        elif not callable(dcm_PN):
            dcm_PN = check_orthonormal(cls, "dcm_PN", as_array(cls, "dcm_PN", dcm_PN, "-", (3, 3)))
        self.dcm_PN = dcm_PN
        self.r_PN_N = _position_arg(cls, r_PN_N)
        self.central = bool(central)
        self.name = check_name(cls, "name", name)

    @classmethod
    def j2(cls, mu, radius, J2, **kwargs):
        r"""Zonal J2-only field: $\bar C_{20} = -J_2/\sqrt5$, $\bar C_{00} = 1$."""
        J2 = as_array("SphericalHarmonicGravity.j2", "J2", J2, "-", ())
        C = jnp.zeros((3, 3)).at[0, 0].set(1.0).at[2, 0].set(-J2 / math.sqrt(5.0))
        return cls(mu, radius, C, **kwargs)

    @classmethod
    def from_body(cls, body, degree=None, *, C=None, S=None, **kwargs):
        r"""The field of `body` (an `effectors.astro.Body`): its `mu`, `radius_equatorial` and name;
        coefficients `C`, `S` if given (normalised, referred to that radius), else its zonal
        harmonics $\bar C_{l0} = -J_l/\sqrt{2l+1}$ up to `degree` (default all of `body.J`).
        Other keywords (`dcm_PN`, `r_PN_N`, `central`, `name`, `order`) as for the constructor."""
        if not isinstance(body, Body):
            raise TypeError(
                f"SphericalHarmonicGravity.from_body: `body` must be an effectors.astro.Body; got "
                f"{type(body).__name__}."
            )
        if C is None:
            if S is not None:
                raise ValueError("SphericalHarmonicGravity.from_body: `S` needs `C`.")
            C = zonal_coefficients(body, degree)
            degree = None
        return cls(body, body.radius_equatorial, C, S, degree=degree, **kwargs)

    def field(self, t, x_N):
        dcm = evaluate(self.dcm_PN, t)
        return mv3(dcm.T, self.field_planet_fixed(mv3(dcm, x_N)))

    def field_planet_fixed(self, x_P):
        """Acceleration $\\nabla U$ [m/s^2] at planet-fixed position `x_P` [m]."""
        return _pines_acceleration(x_P, self.mu, self.radius, self.C, self.S, self.degree)


def _pines_coefficients(L):
    """Static recursion coefficients of the derived Legendre functions, as numpy arrays."""
    K = lambda m: 1.0 if m == 0 else 2.0
    n1 = np.zeros((L + 2, L + 2))
    n2 = np.zeros((L + 2, L + 2))
    for l in range(2, L + 2):
        for m in range(0, l - 1):
            n1[l, m] = math.sqrt((2 * l + 1) * (2 * l - 1) / ((l - m) * (l + m)))
            n2[l, m] = math.sqrt(
                (l + m - 1) * (2 * l + 1) * (l - m - 1) / ((l - m) * (l + m) * (2 * l - 3))
            )
    diag = np.array(
        [0.0] + [math.sqrt((2 * l + 1) * K(l) / (2 * l * K(l - 1))) for l in range(1, L + 2)]
    )
    sub = np.array([0.0] + [math.sqrt(2 * l * K(l - 1) / K(l)) for l in range(1, L + 2)])
    q1 = np.zeros((L + 1, L + 1))
    q2 = np.zeros((L + 1, L + 1))
    for l in range(L + 1):
        for m in range(l + 1):
            q1[l, m] = math.sqrt((l - m) * K(m) * (l + m + 1) / K(m + 1))
            q2[l, m] = math.sqrt(
                (l + m + 2) * (l + m + 1) * (2 * l + 1) * K(m) / ((2 * l + 3) * K(m + 1))
            )
    return n1, n2, diag, sub, q1, q2


def _pines_acceleration(x, mu, radius, C, S, L):
    n1, n2, diag, sub, q1, q2 = _pines_coefficients(L)
    r = jnp.sqrt(dot3(x, x))
    s, t, u = jnp.unstack(x / r)
    # Derived Legendre functions A[l, m], l <= L+1, padded to L+3 columns so that A[l, m+1] exists.
    # Each row is concatenated from its parts (static splits, no indexed updates): no scatter or
    # gather in the drift or its derivatives.
    rows = [jnp.asarray(np.eye(1, L + 3))[0]]
    for l in range(1, L + 2):
        head, diag_prev, _ = jnp.split(rows[l - 1], [l - 1, l])
        all_ = diag[l] * diag_prev
        parts = [u * sub[l] * all_, all_, jnp.zeros(L + 3 - (l + 1))]
        if l >= 2:
            head2 = jnp.split(rows[l - 2], [l - 1])[0]
            parts.insert(0, u * n1[l, : l - 1] * head - n2[l, : l - 1] * head2)
        rows.append(jnp.concatenate(parts))
    A = jnp.stack(rows)
    # Real and imaginary parts of (s + i t)^m, m = 0..L; index -1 (R_{m-1} at m = 0) is zero.
    Rm, Im = [jnp.ones(())], [jnp.zeros(())]
    for _ in range(1, L + 1):
        Rm.append(s * Rm[-1] - t * Im[-1])
        Im.append(s * Im[-1] + t * Rm[-2])
    Rm, Im = jnp.stack(Rm), jnp.stack(Im)
    Rm1 = jnp.concatenate([jnp.zeros(1), Rm[:-1]])
    Im1 = jnp.concatenate([jnp.zeros(1), Im[:-1]])
    rho = (mu / r) * (radius / r) ** jnp.arange(L + 2)
    D = C * Rm + S * Im
    E = C * Rm1 + S * Im1
    F = S * Rm1 - C * Im1
    mvec = jnp.arange(L + 1)
    Alm = A[: L + 1, : L + 1]
    w = rho[1 : L + 2] / radius  # rho_{l+1}/R for l = 0..L
    a1 = jnp.sum(w * jnp.sum(mvec * Alm * E, axis=1))
    a2 = jnp.sum(w * jnp.sum(mvec * Alm * F, axis=1))
    a3 = jnp.sum(w * jnp.sum(q1 * A[: L + 1, 1 : L + 2] * D, axis=1))
    a4 = -jnp.sum(w * jnp.sum(q2 * A[1 : L + 2, 1 : L + 2] * D, axis=1))
    return jnp.stack([a1 + s * a4, a2 + t * a4, a3 + u * a4])


def gravity_bodies(cls: str, gravity) -> tuple:
    """`gravity` (one body, a sequence or None) as a tuple of gravity bodies with unique names and
    at most one `central` body; anything else is refused naming `cls` and the argument."""
    if gravity is None:
        return ()
    if isinstance(gravity, AbstractGravityBody):
        gravity = (gravity,)
    gravity = tuple(gravity)
    for i, b in enumerate(gravity):
        if not isinstance(b, AbstractGravityBody):
            raise TypeError(
                f"{cls}: `gravity[{i}]` must be a gravity body (PointMassGravity, "
                f"SphericalHarmonicGravity, ThirdBodyGravity); got {type(b).__name__}."
            )
    check_unique_names(cls, "gravity", [b.name for b in gravity])
    central = [b.name for b in gravity if b.central]
    if len(central) > 1:
        raise ValueError(
            f"{cls}: `gravity` may flag at most one central body; got {len(central)} ({central})."
        )
    return gravity


def gravity_at(bodies, t, r_CN_N):
    r"""Total field at the spacecraft CoM (states relative to the integration origin).

    **Returns:** `(g_N, U, r_origin_N)`: acceleration [m/s^2], logged specific potential [J/kg], and
    the position of the integration origin (the central body, else zero).
    """
    central = [b for b in bodies if b.central]
    r_origin = central[0].position(t) if central else jnp.zeros(3)
    r_abs = r_CN_N + r_origin
    g = jnp.zeros(3)
    U = jnp.zeros(())
    for b in bodies:
        if b.includes_indirect:
            # Direct and indirect terms together, relative to the integration origin.
            g_b, U_b = b.field_relative(t, r_CN_N, b.position(t) - r_origin)
            g, U = g + g_b, U + U_b
            continue
        x = r_abs - b.position(t)
        g = g + b.field(t, x)
        U = U + b.potential(t, x)
        if central and b is not central[0]:
            x_P = b.position(t) - r_origin
            g = g + b.field(t, x_P)
            U = U + b.potential(t, x_P)
    return g, U, r_origin
