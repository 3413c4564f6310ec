r"""Orbital elements: classical elements and Cartesian states, anomalies, modified equinoctial elements.

Conventions are Basilisk's `orbitalMotion` ones, so that elements move between the two codes unchanged:

- `ClassicElements(a, e, i, Omega, omega, f)`: semi-major axis $a$ [m], eccentricity $e$ [-],
  inclination $i$ [rad], right ascension of the ascending node $\Omega$ [rad], argument of periapsis
  $\omega$ [rad] and true anomaly $f$ [rad].
- Elliptic orbits ($0 \le e < 1$) have $a > 0$, hyperbolic ones ($e > 1$) $a < 0$; a parabola ($e = 1$)
  carries the negative periapsis radius, $a = -r_p$, in the `a` slot (semi-latus rectum $p = 2 r_p$).
- Undefined angles are set to zero and their content moved to the next one: an equatorial orbit has
  $\Omega = 0$ and $\omega$ the longitude of periapsis; a circular orbit has $\omega = 0$ and $f$ the
  argument of latitude; a circular equatorial orbit has $f$ the true longitude. The thresholds are
  `CIRCULAR_E` and `EQUATORIAL_I` ($i$ below it, or above $\pi$ minus it: Basilisk leaves
  retrograde equatorial orbits to its inclined case, where the node is undefined; here they get
  $\Omega = 0$ and angles measured from $x$ along the motion).
- `rv2elem` returns angles in $[0, 2\pi)$, except the true anomaly of a hyperbola, in
  $(-f_\infty, f_\infty)$ with $f_\infty = \arccos(-1/e)$.

Rectilinear orbits ($h = 0$) and retrograde equatorial orbits in modified equinoctial elements are
refused (their elements are singular). Arguments out of their range (`mu` <= 0, an eccentricity
outside a function's range) are refused when concrete (`ValueError` naming the function, the
argument and the value); traced ones (under `jit`, `vmap`, `grad`) make the result NaN, never a
finite wrong value. Every function is pure JAX: `jit`, `vmap` and `grad` go through
it; the Kepler solvers differentiate by the implicit-function theorem, not through their iterations.

**References:** Schaub, H., Junkins, J. L., *Analytical Mechanics of Space Systems*, 4th ed., AIAA, 2018,
§9.5-9.6 (elements, anomalies, Kepler's equation); Vallado, D. A., *Fundamentals of Astrodynamics and
Applications*, 4th ed., 2013, Algorithms 9-10 (RV2COE, COE2RV); Walker, M. J. H., Ireland, B.,
Owens, J., "A set of modified equinoctial orbit elements", Celest. Mech. 36, 409-419, 1985,
doi:10.1007/BF01227493; Basilisk `orbitalMotion` documentation (conventions).
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxsim.validation import as_array, is_concrete


# rv2elem's case thresholds, Basilisk's `orbitalMotion.rv2elem` values: below them an orbit is
# treated as circular (e) or equatorial (i, or pi - i), and the undefined angle is set to zero.
CIRCULAR_E = 1e-11
EQUATORIAL_I = 1e-11
# Kepler solvers stop when the Newton correction is below this [rad] (a few ulps of angles ~ 1).
# rv2elem treats an orbit as a parabola (e = 1, a = -p/2) when |r (2/r - v^2/mu)| is below this:
# round-off of v^2 r/mu is ~1e-16; above the bar, 1/a is resolved (|1 - e| > ~5e-13 at periapsis).
PARABOLIC_ALPHA_R = 1e-12
# Modified equinoctial elements refuse 1 + cos i below this (i within ~1.4e-6 rad of pi: h, k > 1e6).
MEE_RETROGRADE_MIN = 1e-12
_KEPLER_TOL = 4.0 * float(np.finfo(np.float64).eps)
_KEPLER_MAX_ITER = 100
_TWO_PI = 2.0 * math.pi


def _concrete(*xs) -> bool:
    return all(is_concrete(x) for x in xs)


def _require(fn: str, arg: str, ok, expected: str, unit: str, value):
    """Raise `ValueError` when a concrete `ok` is False somewhere (traced values are not checked)."""
    if _concrete(ok, value) and not np.all(np.asarray(ok)):
        v = np.asarray(value)
        shown = np.array2string(v, precision=12, separator=", ") if v.size <= 6 else f"{v.shape}"
        unit = f" [{unit}]" if unit else ""
        raise ValueError(f"{fn}: `{arg}` {expected}{unit}; got {shown}.")


class ClassicElements(eqx.Module):
    r"""Classical (Keplerian) orbital elements; every field may be a batch (same shapes).

    **Arguments:**

    - `a`: semi-major axis [m]: > 0 for $e < 1$, < 0 for $e > 1$; for a parabola ($e = 1$) the
      negative periapsis radius $-r_p$ (Basilisk's convention).
    - `e`: eccentricity [-], >= 0.
    - `i`: inclination [rad], in $[0, \pi]$.
    - `Omega`: right ascension of the ascending node [rad].
    - `omega`: argument of periapsis [rad].
    - `f`: true anomaly [rad]; on a hyperbola or parabola, $1 + e\cos f > 0$ (inside the asymptotes).

    Rectilinear orbits ($e = 1$, $a > 0$ or $a = 0$) are refused. Values are checked when concrete
    (not under a trace).
    """

    a: jnp.ndarray
    e: jnp.ndarray
    i: jnp.ndarray
    Omega: jnp.ndarray
    omega: jnp.ndarray
    f: jnp.ndarray

    def __init__(
        self,
        a: Float[ArrayLike, "*batch"],
        e: Float[ArrayLike, "*batch"],
        i: Float[ArrayLike, "*batch"],
        Omega: Float[ArrayLike, "*batch"],
        omega: Float[ArrayLike, "*batch"],
        f: Float[ArrayLike, "*batch"],
    ):
        cls = "ClassicElements"
        a = as_array(cls, "a", a, "m")
        e = as_array(cls, "e", e, "-")
        i = as_array(cls, "i", i, "rad")
        Omega = as_array(cls, "Omega", Omega, "rad")
        omega = as_array(cls, "omega", omega, "rad")
        f = as_array(cls, "f", f, "rad")
        try:
            jnp.broadcast_shapes(a.shape, e.shape, i.shape, Omega.shape, omega.shape, f.shape)
        except ValueError as err:
            shapes = [x.shape for x in (a, e, i, Omega, omega, f)]
            raise ValueError(
                f"{cls}: the elements' shapes do not broadcast; got {shapes}."
            ) from err
        _require(cls, "e", e >= 0, "must be >= 0", "-", e)
        _require(cls, "i", (i >= 0) & (i <= math.pi), "must be in [0, pi]", "rad", i)
        if _concrete(a, e):
            an, en = np.broadcast_arrays(np.asarray(a), np.asarray(e))
            _require(cls, "a", np.where(en < 1, an > 0, True), "must be > 0 when e < 1", "m", a)
            _require(cls, "a", np.where(en > 1, an < 0, True), "must be < 0 when e > 1", "m", a)
            _require(
                cls,
                "a",
                np.where(en == 1, an < 0, True),
                "must be the negative periapsis radius -r_p < 0 when e = 1 (parabola; rectilinear "
                "orbits are not supported)",
                "m",
                a,
            )
        if _concrete(e, f):
            _require(
                cls,
                "f",
                1.0 + np.asarray(e) * np.cos(np.asarray(f)) > 0,
                "must satisfy 1 + e cos f > 0 (inside the asymptotes of a hyperbola or parabola)",
                "rad",
                f,
            )
        self.a, self.e, self.i, self.Omega, self.omega, self.f = a, e, i, Omega, omega, f

    @property
    def p(self):
        """Semi-latus rectum $p$ [m]: $a(1 - e^2)$, or $2 r_p$ for a parabola."""
        return semilatus_rectum(self.a, self.e)

    @property
    def r_periapsis(self):
        """Periapsis radius $r_p = p/(1 + e)$ [m]."""
        return self.p / (1.0 + self.e)


def semilatus_rectum(
    a: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]
) -> Float[Array, "*batch"]:
    """$p$ [m] from `a` [m] and `e` [-], with Basilisk's parabola convention ($a = -r_p$ when $e = 1$)."""
    a, e = jnp.asarray(a, float), jnp.asarray(e, float)
    return jnp.where(e == 1.0, -2.0 * a, a * (1.0 - e * e))


def _perifocal_axes(i, Omega, omega):
    """Unit vectors $\\hat p$ (to periapsis) and $\\hat q$ (90 degrees ahead in the orbit plane) in N."""
    cO, sO, co, so, ci, si = (
        jnp.cos(Omega),
        jnp.sin(Omega),
        jnp.cos(omega),
        jnp.sin(omega),
        jnp.cos(i),
        jnp.sin(i),
    )
    p_hat = jnp.stack([cO * co - sO * so * ci, sO * co + cO * so * ci, so * si], axis=-1)
    q_hat = jnp.stack([-cO * so - sO * co * ci, -sO * so + cO * co * ci, co * si], axis=-1)
    return p_hat, q_hat


def elem2rv(
    mu: Float[ArrayLike, ""], elements: ClassicElements
) -> tuple[Float[Array, "*batch 3"], Float[Array, "*batch 3"]]:
    r"""Classical elements to the inertial position and velocity.

    $r = p/(1 + e\cos f)$, $\mathbf r = r(\cos f\,\hat p + \sin f\,\hat q)$,
    $\mathbf v = \sqrt{\mu/p}\,(-\sin f\,\hat p + (e + \cos f)\,\hat q)$ (Schaub & Junkins §9.6).

    **Arguments:** `mu` [m^3/s^2], `elements` (`ClassicElements`, possibly batched).

    **Returns:** `(r_N, v_N)` [m], [m/s], shape `(..., 3)`.
    """
    mu = _check_mu("elem2rv", mu)
    el = elements
    p = semilatus_rectum(el.a, el.e)
    p_hat, q_hat = _perifocal_axes(el.i, el.Omega, el.omega)
    cf, sf = jnp.cos(el.f)[..., None], jnp.sin(el.f)[..., None]
    r = (p / (1.0 + el.e * jnp.cos(el.f)))[..., None]
    r_N = r * (cf * p_hat + sf * q_hat)
    v_N = jnp.sqrt(mu / p)[..., None] * (-sf * p_hat + (el.e[..., None] + cf) * q_hat)
    return r_N, v_N


def _safe(cond, x, fill=1.0):
    """`x` where `cond`, else `fill`: keeps the unused branch of a `jnp.where` finite under `grad`."""
    return jnp.where(cond, x, fill)


def _wrap_2pi(x):
    return jnp.mod(x, _TWO_PI)


def rv2elem(
    mu: Float[ArrayLike, ""], r_N: Float[ArrayLike, "*batch 3"], v_N: Float[ArrayLike, "*batch 3"]
) -> ClassicElements:
    r"""Inertial position and velocity to classical elements (the inverse of `elem2rv`).

    $\mathbf h = \mathbf r\times\mathbf v$, $\mathbf e = \mathbf v\times\mathbf h/\mu - \hat{\mathbf r}$,
    $1/a = 2/r - v^2/\mu$ (a parabola, $|r/a|$ below `PARABOLIC_ALPHA_R`, gets $e = 1$ and
    $a = -p/2$); angles by `atan2` of
    in-plane components (accurate and differentiable everywhere inside each case). Case selection
    (circular below `CIRCULAR_E`, equatorial below `EQUATORIAL_I`) and angle ranges follow Basilisk's
    `rv2elem` (see the module docstring).

    **Arguments:** `mu` [m^3/s^2], `r_N` [m], `v_N` [m/s], shape `(..., 3)`.

    **Returns:** `ClassicElements` (rectilinear states, $\mathbf h = 0$, are refused when concrete).
    """
    mu = _check_mu("rv2elem", mu)
    r_N, v_N = jnp.asarray(r_N, float), jnp.asarray(v_N, float)
    h_N = jnp.cross(r_N, v_N)
    h2 = jnp.sum(h_N * h_N, axis=-1)
    _require(
        "rv2elem",
        "r_N x v_N",
        h2 > 0,
        "must be non-zero (rectilinear orbits are refused)",
        "m^2/s",
        h2,
    )
    h = jnp.sqrt(h2)
    r = jnp.linalg.norm(r_N, axis=-1)
    v2 = jnp.sum(v_N * v_N, axis=-1)
    rv = jnp.sum(r_N * v_N, axis=-1)
    e_N = ((v2 / mu - 1.0 / r)[..., None] * r_N) - (rv / mu)[..., None] * v_N
    # |e| with a finite gradient at e = 0 (an exactly circular state).
    e2 = jnp.sum(e_N * e_N, axis=-1)
    e = jnp.where(e2 > 0.0, jnp.sqrt(_safe(e2 > 0.0, e2)), 0.0)
    p = h2 / mu
    alpha = 2.0 / r - v2 / mu
    # Parabola: 1/a is round-off (|alpha r| < PARABOLIC_ALPHA_R); then e = 1 and a = -r_p = -p/2.
    parabolic = jnp.abs(alpha * r) < PARABOLIC_ALPHA_R
    a = jnp.where(parabolic, -0.5 * p, 1.0 / _safe(~parabolic, alpha))
    e = jnp.where(parabolic, 1.0, e)
    # Inclination from atan2(|h_xy|, h_z): accurate near 0 and pi, unlike acos(h_z/h).
    hxy2 = h_N[..., 0] ** 2 + h_N[..., 1] ** 2
    nonequatorial = hxy2 > 0.0
    hxy = jnp.sqrt(_safe(nonequatorial, hxy2))
    hxy = jnp.where(nonequatorial, hxy, 0.0)
    i = jnp.arctan2(hxy, h_N[..., 2])
    # Retrograde equatorial orbits (i near pi) too: Omega = 0 and omega measured from x along the motion.
    equatorial = (i < EQUATORIAL_I) | (i > math.pi - EQUATORIAL_I)
    circular = e < CIRCULAR_E
    # Node vector n = z x h = (-h_y, h_x, 0); Omega = atan2(n_y, n_x).
    nx, ny = -h_N[..., 1], h_N[..., 0]
    Omega = _wrap_2pi(jnp.arctan2(_safe(~equatorial, ny, 0.0), _safe(~equatorial, nx)))
    Omega = jnp.where(equatorial, 0.0, Omega)
    h_hat = h_N / h[..., None]
    # In-plane reference direction (node line, or x for equatorial orbits) and its 90-degree partner.
    n_hat = jnp.stack([nx, ny, jnp.zeros_like(nx)], axis=-1) / _safe(~equatorial, hxy)[..., None]
    x_hat = jnp.broadcast_to(jnp.array([1.0, 0.0, 0.0]), n_hat.shape)
    ref = jnp.where(equatorial[..., None], x_hat, n_hat)
    # The in-plane partner of x is y for prograde, -y for retrograde equatorial orbits: h_hat x ref.
    ref_perp = jnp.cross(h_hat, ref)
    # Argument of periapsis (or longitude of periapsis when equatorial).
    omega = _wrap_2pi(
        jnp.arctan2(
            _safe(~circular, jnp.sum(e_N * ref_perp, axis=-1), 0.0),
            _safe(~circular, jnp.sum(e_N * ref, axis=-1)),
        )
    )
    omega = jnp.where(circular, 0.0, omega)
    # True anomaly from e sin f = h (r.v)/(mu r) and e cos f = p/r - 1 (no division by e).
    f_ecc = jnp.arctan2(_safe(~circular, h * rv / mu, 0.0), _safe(~circular, p - r))  # (-pi, pi]
    # Circular: argument of latitude / true longitude from the reference direction.
    f_circ = jnp.arctan2(jnp.sum(r_N * ref_perp, axis=-1), jnp.sum(r_N * ref, axis=-1))
    f = jnp.where(circular, f_circ, f_ecc)
    f = jnp.where(e > 1.0, f, _wrap_2pi(f))
    return _elements_unchecked(a, e, i, Omega, omega, f)


def _elements_unchecked(a, e, i, Omega, omega, f) -> ClassicElements:
    el = object.__new__(ClassicElements)
    for k, v in zip(("a", "e", "i", "Omega", "omega", "f"), (a, e, i, Omega, omega, f)):
        object.__setattr__(el, k, v)
    return el


# ---------------------------------------------------------------------------------------------------
# Anomalies


def _in_range(fn, arg, x, ok, expected, unit):
    """`x` checked: a concrete value out of range is refused (`ValueError` naming `fn`, `arg`, the
    unit and the value); a traced one (under `jit`/`vmap`/`grad`) becomes NaN there, so that every
    result computed from it is NaN, never a finite wrong value."""
    _require(fn, arg, ok, expected, unit, x)
    return jnp.where(ok, x, jnp.nan)


def _check_elliptic(fn, e):
    e = jnp.asarray(e, dtype=float)
    return _in_range(fn, "e", e, (e >= 0) & (e < 1), "must be in [0, 1) (elliptic)", "-")


def _check_hyperbolic(fn, e):
    e = jnp.asarray(e, dtype=float)
    return _in_range(fn, "e", e, e > 1, "must be > 1 (hyperbolic)", "-")


def _check_mu(fn, mu):
    mu = jnp.asarray(mu, dtype=float)
    return _in_range(fn, "mu", mu, jnp.isfinite(mu) & (mu > 0), "must be finite and > 0", "m^3/s^2")


def E2f(E: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""Eccentric anomaly $E$ [rad] to true anomaly $f$ [rad], $0 \le e < 1$:
    $f = 2\,\mathrm{atan2}(\sqrt{1+e}\sin\frac E2, \sqrt{1-e}\cos\frac E2)$."""
    e = _check_elliptic("E2f", e)
    return 2.0 * jnp.arctan2(
        jnp.sqrt(1.0 + e) * jnp.sin(E / 2.0), jnp.sqrt(1.0 - e) * jnp.cos(E / 2.0)
    )


def f2E(f: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""True anomaly $f$ [rad] to eccentric anomaly $E$ [rad], $0 \le e < 1$ (inverse of `E2f`)."""
    e = _check_elliptic("f2E", e)
    return 2.0 * jnp.arctan2(
        jnp.sqrt(1.0 - e) * jnp.sin(f / 2.0), jnp.sqrt(1.0 + e) * jnp.cos(f / 2.0)
    )


def E2M(E: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""Eccentric anomaly to mean anomaly [rad]: Kepler's equation $M = E - e\sin E$, $0 \le e < 1$."""
    e = _check_elliptic("E2M", e)
    return E - e * jnp.sin(E)


def H2f(H: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""Hyperbolic anomaly $H$ to true anomaly $f$ [rad], $e > 1$:
    $\tan\frac f2 = \sqrt{\frac{e+1}{e-1}}\tanh\frac H2$."""
    e = _check_hyperbolic("H2f", e)
    return 2.0 * jnp.arctan(jnp.sqrt((e + 1.0) / (e - 1.0)) * jnp.tanh(H / 2.0))


def f2H(f: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""True anomaly $f$ to hyperbolic anomaly $H$ [rad], $e > 1$, $|f| < \arccos(-1/e)$."""
    e = _check_hyperbolic("f2H", e)
    if _concrete(f, e):
        _require(
            "f2H",
            "f",
            1.0 + np.asarray(e) * np.cos(np.asarray(f)) > 0,
            "must be inside the asymptotes (1 + e cos f > 0)",
            "rad",
            f,
        )
    return 2.0 * jnp.arctanh(jnp.sqrt((e - 1.0) / (e + 1.0)) * jnp.tan(f / 2.0))


def H2N(H: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    r"""Hyperbolic anomaly to hyperbolic mean anomaly [rad]: $N = e\sinh H - H$, $e > 1$."""
    e = _check_hyperbolic("H2N", e)
    return e * jnp.sinh(H) - H


def _newton(residual, slope, x0, args):
    """Newton iteration until the correction is below `_KEPLER_TOL` (at most `_KEPLER_MAX_ITER`)."""

    def cond(c):
        k, _, dx = c
        return (k < _KEPLER_MAX_ITER) & jnp.any(
            jnp.abs(dx) > _KEPLER_TOL * jnp.maximum(1.0, jnp.abs(c[1]))
        )

    def body(c):
        k, x, _ = c
        dx = residual(x, *args) / slope(x, *args)
        return k + 1, x - dx, dx

    _, x, _ = jax.lax.while_loop(cond, body, (0, x0, jnp.full_like(x0, jnp.inf)))
    return x


@jax.custom_jvp
def solve_kepler(
    M: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]
) -> Float[Array, "*batch"]:
    r"""Eccentric anomaly $E$ [rad] solving Kepler's equation $E - e\sin E = M$, $0 \le e < 1$.

    Newton's method from Danby's starter $E_0 = M + 0.85\,e\,\mathrm{sign}(\sin M)$ (converges for every
    $M$ and $e < 1$), to a few ulps. Derivatives by the implicit-function theorem,
    $dE = (dM + \sin E\,de)/(1 - e\cos E)$: exact, and `grad` never goes through the iterations.
    The result lies within $\pi$ of $M$ ($E - M = e\sin E$).

    **Reference:** Danby, J. M. A., *Fundamentals of Celestial Mechanics*, 2nd ed., 1988, §6.6.
    """
    e = _check_elliptic("solve_kepler", e)
    M, e = jnp.broadcast_arrays(jnp.asarray(M, float), e)
    # Reduce M to [-pi, pi) for the iteration, then add the turns back.
    turns = jnp.floor((M + math.pi) / _TWO_PI)
    m = M - turns * _TWO_PI
    x0 = m + 0.85 * e * jnp.sign(jnp.sin(m))
    x = _newton(
        lambda E, m, e: E - e * jnp.sin(E) - m, lambda E, m, e: 1.0 - e * jnp.cos(E), x0, (m, e)
    )
    return x + turns * _TWO_PI


@solve_kepler.defjvp
def _solve_kepler_jvp(primals, tangents):
    M, e = primals
    dM, de = tangents
    E = solve_kepler(M, e)
    M, e = jnp.broadcast_arrays(jnp.asarray(M, float), jnp.asarray(e, float))
    dE = (dM + jnp.sin(E) * de) / (1.0 - e * jnp.cos(E))
    return E, dE


def M2E(M: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    """Mean anomaly to eccentric anomaly [rad], $0 \\le e < 1$ (`solve_kepler`, with its check)."""
    e = _check_elliptic("M2E", e)
    return solve_kepler(M, e)


@jax.custom_jvp
def solve_kepler_hyperbolic(
    N: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]
) -> Float[Array, "*batch"]:
    r"""Hyperbolic anomaly $H$ [rad] solving $e\sinh H - H = N$, $e > 1$.

    Newton's method from $H_0 = \mathrm{sign}(N)\ln(2|N|/e + 1.8)$ (Vallado 2013, Algorithm 4 starter),
    to a few ulps; derivatives by the implicit-function theorem, $dH = (dN - \sinh H\,de)/(e\cosh H - 1)$.
    """
    e = _check_hyperbolic("solve_kepler_hyperbolic", e)
    N, e = jnp.broadcast_arrays(jnp.asarray(N, float), e)
    x0 = jnp.sign(N) * jnp.log(2.0 * jnp.abs(N) / e + 1.8)
    return _newton(
        lambda H, N, e: e * jnp.sinh(H) - H - N, lambda H, N, e: e * jnp.cosh(H) - 1.0, x0, (N, e)
    )


@solve_kepler_hyperbolic.defjvp
def _solve_kepler_hyperbolic_jvp(primals, tangents):
    N, e = primals
    dN, de = tangents
    H = solve_kepler_hyperbolic(N, e)
    N, e = jnp.broadcast_arrays(jnp.asarray(N, float), jnp.asarray(e, float))
    return H, (dN - jnp.sinh(H) * de) / (e * jnp.cosh(H) - 1.0)


def N2H(N: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    """Hyperbolic mean anomaly to hyperbolic anomaly [rad], $e > 1$ (`solve_kepler_hyperbolic`)."""
    e = _check_hyperbolic("N2H", e)
    return solve_kepler_hyperbolic(N, e)


def f2M(f: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    """True anomaly to mean anomaly [rad] (elliptic, $0 \\le e < 1$): `E2M(f2E(f, e), e)`; the
    result has the same number of turns as `f` (continuous in `f`)."""
    e = _check_elliptic("f2M", e)
    turns = jnp.floor((f + math.pi) / _TWO_PI)
    fr = f - turns * _TWO_PI
    return E2M(f2E(fr, e), e) + turns * _TWO_PI


def M2f(M: Float[ArrayLike, "*batch"], e: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    """Mean anomaly to true anomaly [rad] (elliptic, $0 \\le e < 1$), with the turns of `M` kept."""
    e = _check_elliptic("M2f", e)
    turns = jnp.floor((M + math.pi) / _TWO_PI)
    return E2f(solve_kepler(M - turns * _TWO_PI, e), e) + turns * _TWO_PI


def kepler_propagate(
    mu: Float[ArrayLike, ""], elements: ClassicElements, dt: Float[ArrayLike, "*batch"]
) -> ClassicElements:
    r"""Two-body propagation of elliptic or hyperbolic elements by `dt` [s] (only $f$ changes).

    Elliptic: $M(t) = M_0 + n\,\Delta t$, $n = \sqrt{\mu/a^3}$; hyperbolic: $N(t) = N_0 + n\,\Delta t$,
    $n = \sqrt{\mu/(-a)^3}$. Parabolas are refused. The true anomaly keeps its number of turns.
    """
    mu = _check_mu("kepler_propagate", mu)
    el = elements
    _require(
        "kepler_propagate",
        "elements.e",
        jnp.asarray(el.e) != 1.0,
        "must not be 1 (parabolic propagation is not supported)",
        "-",
        el.e,
    )
    hyper = el.e > 1.0
    e_ell = _safe(~hyper, el.e, 0.5)
    e_hyp = _safe(hyper, el.e, 2.0)
    n = jnp.sqrt(mu / jnp.abs(el.a) ** 3)
    f_ell = M2f(f2M(el.f, e_ell) + n * dt, e_ell)
    f_hyp = H2f(
        solve_kepler_hyperbolic(H2N(f2H(_safe(hyper, el.f, 0.0), e_hyp), e_hyp) + n * dt, e_hyp),
        e_hyp,
    )
    f = jnp.where(hyper, f_hyp, f_ell)
    return _elements_unchecked(el.a, el.e, el.i, el.Omega, el.omega, f)


# ---------------------------------------------------------------------------------------------------
# Modified equinoctial elements


class ModifiedEquinoctialElements(eqx.Module):
    r"""Modified equinoctial elements (Walker, Ireland & Owens 1985), non-singular for circular and
    equatorial orbits (singular only for retrograde equatorial ones, $i = \pi$):

    $p = a(1-e^2)$, $f = e\cos(\omega+\Omega)$, $g = e\sin(\omega+\Omega)$,
    $h = \tan\frac i2\cos\Omega$, $k = \tan\frac i2\sin\Omega$, $L = \Omega + \omega + \nu$.

    **Arguments:** `p` semi-latus rectum [m] > 0, `f`, `g`, `h`, `k` [-], `L` true longitude [rad].
    (Here `f` is the equinoctial element, not the true anomaly.)
    """

    p: jnp.ndarray
    f: jnp.ndarray
    g: jnp.ndarray
    h: jnp.ndarray
    k: jnp.ndarray
    L: jnp.ndarray

    def __init__(
        self,
        p: Float[ArrayLike, "*batch"],
        f: Float[ArrayLike, "*batch"],
        g: Float[ArrayLike, "*batch"],
        h: Float[ArrayLike, "*batch"],
        k: Float[ArrayLike, "*batch"],
        L: Float[ArrayLike, "*batch"],
    ):
        cls = "ModifiedEquinoctialElements"
        p = as_array(cls, "p", p, "m")
        _require(cls, "p", p > 0, "must be > 0", "m", p)
        self.p = p
        self.f = as_array(cls, "f", f, "-")
        self.g = as_array(cls, "g", g, "-")
        self.h = as_array(cls, "h", h, "-")
        self.k = as_array(cls, "k", k, "-")
        self.L = as_array(cls, "L", L, "rad")


def _mee_unchecked(p, f, g, h, k, L) -> ModifiedEquinoctialElements:
    el = object.__new__(ModifiedEquinoctialElements)
    for name, v in zip(("p", "f", "g", "h", "k", "L"), (p, f, g, h, k, L)):
        object.__setattr__(el, name, v)
    return el


def elem2mee(elements: ClassicElements) -> ModifiedEquinoctialElements:
    """Classical to modified equinoctial elements (retrograde equatorial orbits, $i = \\pi$, refused)."""
    el = elements
    _require(
        "elem2mee",
        "elements.i",
        1.0 + jnp.cos(jnp.asarray(el.i)) > MEE_RETROGRADE_MIN,
        "must not be pi (1 + cos i > MEE_RETROGRADE_MIN: retrograde equatorial orbits are singular in these elements)",
        "rad",
        el.i,
    )
    lon_peri = el.Omega + el.omega
    t = jnp.tan(el.i / 2.0)
    return _mee_unchecked(
        semilatus_rectum(el.a, el.e),
        el.e * jnp.cos(lon_peri),
        el.e * jnp.sin(lon_peri),
        t * jnp.cos(el.Omega),
        t * jnp.sin(el.Omega),
        lon_peri + el.f,
    )


def mee2elem(mee: ModifiedEquinoctialElements) -> ClassicElements:
    """Modified equinoctial to classical elements, with `rv2elem`'s conventions for undefined angles
    (through the Cartesian state, $\\mu$-free: the result does not depend on $\\mu$)."""
    r_N, v_N = mee2rv(1.0, mee)
    return rv2elem(1.0, r_N, v_N)


def mee2rv(
    mu: Float[ArrayLike, ""], mee: ModifiedEquinoctialElements
) -> tuple[Float[Array, "*batch 3"], Float[Array, "*batch 3"]]:
    r"""Modified equinoctial elements to inertial position [m] and velocity [m/s], shape `(..., 3)`.

    With $s^2 = 1 + h^2 + k^2$, $w = 1 + f\cos L + g\sin L$, $r = p/w$ and the equinoctial frame
    $\hat f = (1 - k^2 + h^2, 2hk, -2k)/s^2$, $\hat g = (2hk, 1 + k^2 - h^2, 2h)/s^2$:
    $\mathbf r = r(\cos L\,\hat f + \sin L\,\hat g)$,
    $\mathbf v = \sqrt{\mu/p}\,(-(g + \sin L)\,\hat f + (f + \cos L)\,\hat g)$ (Walker et al. 1985).
    """
    mu = _check_mu("mee2rv", mu)
    m = mee
    f_hat, g_hat = _equinoctial_axes(m.h, m.k)
    cL, sL = jnp.cos(m.L)[..., None], jnp.sin(m.L)[..., None]
    r = (m.p / (1.0 + m.f * jnp.cos(m.L) + m.g * jnp.sin(m.L)))[..., None]
    r_N = r * (cL * f_hat + sL * g_hat)
    v_N = jnp.sqrt(mu / m.p)[..., None] * (
        -(m.g[..., None] + sL) * f_hat + (m.f[..., None] + cL) * g_hat
    )
    return r_N, v_N


def _equinoctial_axes(h, k):
    s2 = (1.0 + h * h + k * k)[..., None]
    f_hat = jnp.stack([1.0 - k * k + h * h, 2.0 * h * k, -2.0 * k], axis=-1) / s2
    g_hat = jnp.stack([2.0 * h * k, 1.0 + k * k - h * h, 2.0 * h], axis=-1) / s2
    return f_hat, g_hat


def rv2mee(
    mu: Float[ArrayLike, ""], r_N: Float[ArrayLike, "*batch 3"], v_N: Float[ArrayLike, "*batch 3"]
) -> ModifiedEquinoctialElements:
    r"""Inertial position [m] and velocity [m/s] to modified equinoctial elements.

    $h = -\hat h_y/(1 + \hat h_z)$, $k = \hat h_x/(1 + \hat h_z)$ from the unit angular momentum,
    $f$, $g$ the eccentricity vector's components on $\hat f$, $\hat g$, and
    $L = \mathrm{atan2}(\mathbf r\cdot\hat g, \mathbf r\cdot\hat f)$ in $[0, 2\pi)$. Retrograde
    equatorial states ($\hat h_z = -1$) are refused when concrete.
    """
    mu = _check_mu("rv2mee", mu)
    r_N, v_N = jnp.asarray(r_N, float), jnp.asarray(v_N, float)
    h_N = jnp.cross(r_N, v_N)
    h2 = jnp.sum(h_N * h_N, axis=-1)
    _require(
        "rv2mee",
        "r_N x v_N",
        h2 > 0,
        "must be non-zero (rectilinear orbits are refused)",
        "m^2/s",
        h2,
    )
    h_hat = h_N / jnp.sqrt(h2)[..., None]
    denom = 1.0 + h_hat[..., 2]
    _require(
        "rv2mee",
        "r_N x v_N",
        denom > MEE_RETROGRADE_MIN,
        "must not point along -z (retrograde equatorial orbits are singular in these elements)",
        "m^2/s",
        h_N,
    )
    hh = -h_hat[..., 1] / denom
    kk = h_hat[..., 0] / denom
    f_hat, g_hat = _equinoctial_axes(hh, kk)
    r = jnp.linalg.norm(r_N, axis=-1)
    v2 = jnp.sum(v_N * v_N, axis=-1)
    rv = jnp.sum(r_N * v_N, axis=-1)
    e_N = ((v2 / mu - 1.0 / r)[..., None] * r_N) - (rv / mu)[..., None] * v_N
    L = _wrap_2pi(jnp.arctan2(jnp.sum(r_N * g_hat, axis=-1), jnp.sum(r_N * f_hat, axis=-1)))
    return _mee_unchecked(
        h2 / mu, jnp.sum(e_N * f_hat, axis=-1), jnp.sum(e_N * g_hat, axis=-1), hh, kk, L
    )
