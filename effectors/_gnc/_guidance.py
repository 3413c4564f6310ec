r"""Attitude guidance: reference generators and tracking errors (Basilisk `inertial3D`, `hillPoint`,
`velocityPoint`, `sunSafePoint`, `locationPointing`, `attTrackingError`).

Every module is a pure equinox module (parameters as leaves: `jit`, `vmap` and `grad` go through)
returning Basilisk's messages as dicts:

- the **attitude reference** (`AttRefMsgPayload`): `{"sigma_RN" [-], "omega_RN_N" [rad/s],
  "domega_RN_N" [rad/s^2]}`, the reference frame $\mathcal R$ relative to the inertial frame $\mathcal N$
  with its rate and acceleration in $\mathcal N$ components;
- the **attitude guidance** (`AttGuidMsgPayload`): `{"sigma_BR" [-], "omega_BR_B" [rad/s],
  "omega_RN_B" [rad/s], "domega_RN_B" [rad/s^2]}`, the tracking errors of the body $\mathcal B$
  relative to $\mathcal R$ and the reference rate and acceleration in $\mathcal B$ components (what
  `MRPFeedback` reads).

The navigation input is a dict with Basilisk's `NavAttMsgPayload`/`NavTransMsgPayload` names:
`sigma_BN`, `omega_BN_B`, `r_BN_N`, `v_BN_N`, and `vehSunPntBdy` (the sun heading in $\mathcal B$).

**Reference:** H. Schaub, J. L. Junkins, *Analytical Mechanics of Space Systems*, 4th ed., AIAA
2018 (MRP addition eq. 3.158, subtraction eq. 3.160, MRP differential kinematics eq. 3.152);
Basilisk module documentation of `inertial3D`, `hillPoint`, `velocityPoint`, `sunSafePoint`,
`locationPointing` and `attTrackingError` (AVS Lab).
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.kinematics import cross3, dcm_to_mrp, dot3, mrp_to_dcm
from jaxsim.validation import as_array, check_nonnegative, check_unit_vectors, fail, is_concrete

from .._fsw._flight_software import mrp_subtract


# Basilisk's addMRP/subMRP switch an argument to its shadow set when the denominator of the
# composition formula is below this value (a near-singular composition).
_MRP_DEN_MIN = 0.1
# Below this norm the cross product with b1 is ill-conditioned and b2 is used for the 180 deg
# eigen-axis (sunSafePoint, locationPointing): sHat/pHat within ~5.7 deg of b1.
_EHAT180_MIN = 0.1


def _norm(v):
    """|v|, gradient-safe at v = 0 (derivative 0 there)."""
    n2 = jnp.sum(v * v, -1)
    safe = jnp.where(n2 > 0.0, n2, 1.0)
    return jnp.where(n2 > 0.0, jnp.sqrt(safe), 0.0)


def mrp_add(sigma1: Float[ArrayLike, "3"], sigma2: Float[ArrayLike, "3"]) -> Float[Array, "3"]:
    r"""The MRP of the composed rotation $[FN] = [FB(\boldsymbol\sigma_2)][BN(\boldsymbol\sigma_1)]$:

    $$\boldsymbol\sigma = \frac{(1-\sigma_1^2)\boldsymbol\sigma_2 + (1-\sigma_2^2)\boldsymbol\sigma_1
    - 2\boldsymbol\sigma_2\times\boldsymbol\sigma_1}{1 + \sigma_1^2\sigma_2^2 - 2\boldsymbol\sigma_1\cdot\boldsymbol\sigma_2}$$

    (Schaub & Junkins eq. 3.158, Basilisk `addMRP`); when the denominator is below 0.1 in
    magnitude $\boldsymbol\sigma_2$ is first replaced by its shadow set, and the result is mapped to the
    inner set ($|\boldsymbol\sigma| \le 1$).
    """
    s1, s2 = jnp.asarray(sigma1, float), jnp.asarray(sigma2, float)
    n1, n2, d12 = dot3(s1, s1), dot3(s2, s2), dot3(s1, s2)
    near = jnp.abs(1.0 + n1 * n2 - 2.0 * d12) < _MRP_DEN_MIN
    inv = 1.0 / jnp.where(n2 > 0.0, n2, 1.0)
    s2 = jnp.where(near, -s2 * inv, s2)
    d12 = jnp.where(near, -d12 * inv, d12)
    n2 = jnp.where(near, inv, n2)
    num = (1.0 - n1) * s2 + (1.0 - n2) * s1 - 2.0 * cross3(s2, s1)
    q = num / (1.0 + n1 * n2 - 2.0 * d12)
    q2 = dot3(q, q)
    return jnp.where(q2 > 1.0, -q / jnp.where(q2 > 1.0, q2, 1.0), q)


def _reference(RN, w_R, dw_R):
    """The reference message from the rows of [RN] and the rate/acceleration in N."""
    return {"sigma_RN": dcm_to_mrp(RN), "omega_RN_N": w_R, "domega_RN_N": dw_R}


def _vec(c, arg, v, unit):
    return jnp.zeros(3) if v is None else as_array(c, arg, v, unit, (3,))


class Inertial3D(eqx.Module):
    r"""Inertial pointing (Basilisk `inertial3D`): $\boldsymbol\sigma_{R/N} = \boldsymbol\sigma_{R_0/N}$,
    $\boldsymbol\omega_{R/N} = \dot{\boldsymbol\omega}_{R/N} = 0$.

    **Arguments:** `sigma_R0N` (3,) [-]: the inertially fixed reference attitude.

    `__call__(nav=None)` returns the reference message (module docstring); `nav` is ignored.
    """

    sigma_R0N: Float[Array, "3"]

    def __init__(self, sigma_R0N: Float[ArrayLike, "3"]):
        self.sigma_R0N = as_array("Inertial3D", "sigma_R0N", sigma_R0N, "-", (3,))

    def __call__(self, nav: dict | None = None) -> dict:
        z = jnp.zeros(3)
        return {"sigma_RN": self.sigma_R0N, "omega_RN_N": z, "domega_RN_N": z}


class _OrbitFrame(eqx.Module):
    """Shared fields of `HillPoint` and `VelocityPoint`: the celestial body's inertial state."""

    r_PN_N: eqx.AbstractVar[Float[Array, "3"]]
    v_PN_N: eqx.AbstractVar[Float[Array, "3"]]

    def _relative(self, nav):
        r = jnp.asarray(nav["r_BN_N"], float) - self.r_PN_N
        v = jnp.asarray(nav["v_BN_N"], float) - self.v_PN_N
        return r, v


class HillPoint(_OrbitFrame):
    r"""Hill-frame pointing (Basilisk `hillPoint`): $\mathcal R$ aligned with the orbit frame
    $\{\hat{\boldsymbol\imath}_r, \hat{\boldsymbol\imath}_\theta, \hat{\boldsymbol\imath}_h\}$ of the spacecraft about a
    celestial body.

    With $\mathbf r = \mathbf r_{B/N} - \mathbf r_{P/N}$, $\mathbf v = \mathbf v_{B/N} - \mathbf v_{P/N}$,
    $\mathbf h = \mathbf r\times\mathbf v$:
    $\hat{\boldsymbol\imath}_r = \mathbf r/r$, $\hat{\boldsymbol\imath}_h = \mathbf h/h$,
    $\hat{\boldsymbol\imath}_\theta = \hat{\boldsymbol\imath}_h\times\hat{\boldsymbol\imath}_r$, $[RN]$ with these rows;
    $\dot f = h/r^2$, $\ddot f = -2(\mathbf v\cdot\hat{\boldsymbol\imath}_r)\dot f/r$,
    $\boldsymbol\omega_{R/N} = \dot f\hat{\boldsymbol\imath}_h$, $\dot{\boldsymbol\omega}_{R/N} = \ddot f\hat{\boldsymbol\imath}_h$.

    **Arguments:** `r_PN_N` (3,) [m], `v_PN_N` (3,) [m/s]: the celestial body's inertial position
    and velocity (default 0: Basilisk's unconnected `celBodyInMsg`).

    `__call__(nav)` reads `nav["r_BN_N"]`, `nav["v_BN_N"]` and returns the reference message.
    **Assumptions:** $\mathbf r$ and $\mathbf v$ not collinear (a rectilinear orbit has no Hill frame).
    """

    r_PN_N: Float[Array, "3"]
    v_PN_N: Float[Array, "3"]

    def __init__(
        self,
        r_PN_N: Float[ArrayLike, "3"] | None = None,
        v_PN_N: Float[ArrayLike, "3"] | None = None,
    ):
        self.r_PN_N = _vec("HillPoint", "r_PN_N", r_PN_N, "m")
        self.v_PN_N = _vec("HillPoint", "v_PN_N", v_PN_N, "m/s")

    def __call__(self, nav: dict) -> dict:
        r, v = self._relative(nav)
        rn = _norm(r)
        h = cross3(r, v)
        hn = _norm(h)
        ir, ih = r / rn, h / hn
        ith = cross3(ih, ir)
        df = hn / rn**2
        ddf = -2.0 * dot3(v, ir) / rn * df
        return _reference(jnp.stack([ir, ith, ih]), df * ih, ddf * ih)


class VelocityPoint(_OrbitFrame):
    r"""Velocity pointing (Basilisk `velocityPoint`): $\mathcal R$ aligned with
    $\{\hat{\boldsymbol\imath}_n, \hat{\boldsymbol\imath}_v, \hat{\boldsymbol\imath}_h\}$, $\hat{\boldsymbol\imath}_v = \mathbf v/v$,
    $\hat{\boldsymbol\imath}_h = \mathbf h/h$, $\hat{\boldsymbol\imath}_n = \hat{\boldsymbol\imath}_v\times\hat{\boldsymbol\imath}_h$.

    With the eccentricity $e$ and true anomaly $f$ of the osculating orbit about the body
    (gravitational parameter $\mu$), $\dot f = h/r^2$, $\ddot f = -2(\mathbf v\cdot\hat{\boldsymbol\imath}_r)\dot f/r$,
    $D = 1 + e^2 + 2e\cos f$:

    $$\boldsymbol\omega_{R/N} = \frac{1 + e\cos f}{D}\dot f\,\hat{\boldsymbol\imath}_h,\qquad
    \dot{\boldsymbol\omega}_{R/N} = \Big(\frac{1 + e\cos f}{D}\ddot f - \frac{e(e^2-1)\sin f}{D^2}\dot f^2\Big)\hat{\boldsymbol\imath}_h.$$

    $e\cos f = p/r - 1$ and $e\sin f = h(\mathbf r\cdot\mathbf v)/(\mu r)$ with $p = h^2/\mu$ (no angle is
    formed, so the rates are smooth through circular orbits).

    **Arguments:** `mu` [m^3/s^2] > 0; `r_PN_N` (3,) [m], `v_PN_N` (3,) [m/s] as in `HillPoint`.
    """

    mu: Float[Array, ""]
    r_PN_N: Float[Array, "3"]
    v_PN_N: Float[Array, "3"]

    def __init__(
        self,
        mu: Float[ArrayLike, ""],
        r_PN_N: Float[ArrayLike, "3"] | None = None,
        v_PN_N: Float[ArrayLike, "3"] | None = None,
    ):
        c = "VelocityPoint"
        self.mu = as_array(c, "mu", mu, "m^3/s^2", ())
        if is_concrete(self.mu) and not float(self.mu) > 0.0:
            fail(c, "mu", "must be > 0", "m^3/s^2", self.mu)
        self.r_PN_N = _vec(c, "r_PN_N", r_PN_N, "m")
        self.v_PN_N = _vec(c, "v_PN_N", v_PN_N, "m/s")

    def __call__(self, nav: dict) -> dict:
        r, v = self._relative(nav)
        rn, vn = _norm(r), _norm(v)
        h = cross3(r, v)
        hn = _norm(h)
        iv, ih = v / vn, h / hn
        i_n = cross3(iv, ih)
        df = hn / rn**2
        ddf = -2.0 * dot3(v, r / rn) / rn * df
        ecf = hn * hn / (self.mu * rn) - 1.0
        esf = hn * dot3(r, v) / (self.mu * rn)
        e2 = ecf * ecf + esf * esf
        D = 1.0 + e2 + 2.0 * ecf
        w = (1.0 + ecf) / D * df
        dw = (1.0 + ecf) / D * ddf - (e2 - 1.0) * esf / D**2 * df**2
        return _reference(jnp.stack([i_n, iv, ih]), w * ih, dw * ih)


def _ehat180(v):
    """Basilisk's eigen-axis for a 180 deg rotation away from the unit vector `v`: v x b1
    normalised, or v x b2 when v is within ~5.7 deg of b1."""
    e1 = cross3(v, jnp.array([1.0, 0.0, 0.0]))
    e2 = cross3(v, jnp.array([0.0, 1.0, 0.0]))
    e = jnp.where(_norm(e1) < _EHAT180_MIN, e2, e1)
    return e / _norm(e)


class AttTrackingError(eqx.Module):
    r"""Attitude tracking error (Basilisk `attTrackingError`) of $\mathcal B$ relative to a reference
    corrected by a constant body-frame offset $\boldsymbol\sigma_{R_0/R}$:

    $\boldsymbol\sigma_{R/N} = \mathrm{addMRP}(\boldsymbol\sigma_{R_0/N}, -\boldsymbol\sigma_{R_0/R})$,
    $\boldsymbol\sigma_{B/R} = \mathrm{subMRP}(\boldsymbol\sigma_{B/N}, \boldsymbol\sigma_{R/N})$,
    ${}^B\boldsymbol\omega_{R/N} = [BN]\,{}^N\boldsymbol\omega_{R/N}$, ${}^B\dot{\boldsymbol\omega}_{R/N} = [BN]\,{}^N\dot{\boldsymbol\omega}_{R/N}$,
    $\boldsymbol\omega_{B/R} = \boldsymbol\omega_{B/N} - \boldsymbol\omega_{R/N}$.

    **Arguments:** `sigma_R0R` (3,) [-]: the body-frame correction (default 0).

    `__call__(nav, ref)` reads `nav["sigma_BN"]`, `nav["omega_BN_B"]` and the reference message
    `ref`; returns the guidance message.
    """

    sigma_R0R: Float[Array, "3"]

    def __init__(self, sigma_R0R: Float[ArrayLike, "3"] | None = None):
        self.sigma_R0R = _vec("AttTrackingError", "sigma_R0R", sigma_R0R, "-")

    def __call__(self, nav: dict, ref: dict) -> dict:
        sb = jnp.asarray(nav["sigma_BN"], float)
        sr = mrp_add(ref["sigma_RN"], -self.sigma_R0R)
        BN = mrp_to_dcm(sb)
        w_RN_B = BN @ jnp.asarray(ref["omega_RN_N"], float)
        return {
            "sigma_BR": mrp_subtract(sb, sr),
            "omega_BR_B": jnp.asarray(nav["omega_BN_B"], float) - w_RN_B,
            "omega_RN_B": w_RN_B,
            "domega_RN_B": BN @ jnp.asarray(ref["domega_RN_N"], float),
        }


class SunSafePoint(eqx.Module):
    r"""Sun-safe pointing (Basilisk `sunSafePoint`): align the body axis $\hat{\mathbf s}_c$ with the
    measured sun heading $\mathbf s$ (in $\mathcal B$, not necessarily unit).

    With $\Phi = \arccos(\mathbf s\cdot\hat{\mathbf s}_c/|\mathbf s|)$ and
    $\hat{\mathbf e} = \mathbf s\times\hat{\mathbf s}_c/|\mathbf s\times\hat{\mathbf s}_c|$:

    - $|\mathbf s| <$ `min_unit_mag` (no sun): $\boldsymbol\sigma_{B/R} = 0$,
      $\boldsymbol\omega_{R/N} =$ `omega_RN_B` (a search rate);
    - otherwise $\boldsymbol\sigma_{B/R} = \tan(\Phi/4)\,\hat{\mathbf e}$, except $0$ when $\Phi <$ `small_angle`
      and $\tan(\Phi/4)\,\hat{\mathbf e}_{180}$ when $\pi - \Phi <$ `small_angle` ($\hat{\mathbf e}_{180} =
      \hat{\mathbf s}_c\times\hat{\mathbf b}_1$ normalised, or $\hat{\mathbf s}_c\times\hat{\mathbf b}_2$ when
      $\hat{\mathbf s}_c$ is near $\hat{\mathbf b}_1$); $\boldsymbol\omega_{R/N} = \dot\theta\,\mathbf s/|\mathbf s|$ with
      $\dot\theta$ = `sun_axis_spin_rate`;
    - $\boldsymbol\omega_{B/R} = \boldsymbol\omega_{B/N} - \boldsymbol\omega_{R/N}$, $\dot{\boldsymbol\omega}_{R/N} = 0$.

    **Arguments:** `sHat_c_B` (3,) [-] unit; `min_unit_mag` [-] >= 0 (default 0); `small_angle`
    [rad] >= 0 (default 0); `sun_axis_spin_rate` [rad/s] (default 0); `omega_RN_B` (3,) [rad/s]
    (default 0).

    `__call__(nav)` reads `nav["vehSunPntBdy"]` and `nav["omega_BN_B"]`; returns the guidance
    message. Under `jax.grad` the branch conditions are piecewise (zero derivative across them).
    """

    sHat_c_B: Float[Array, "3"]
    min_unit_mag: Float[Array, ""]
    small_angle: Float[Array, ""]
    sun_axis_spin_rate: Float[Array, ""]
    omega_RN_B: Float[Array, "3"]

    def __init__(
        self,
        sHat_c_B: Float[ArrayLike, "3"],
        *,
        min_unit_mag: Float[ArrayLike, ""] = 0.0,
        small_angle: Float[ArrayLike, ""] = 0.0,
        sun_axis_spin_rate: Float[ArrayLike, ""] = 0.0,
        omega_RN_B: Float[ArrayLike, "3"] | None = None,
    ):
        c = "SunSafePoint"
        s = as_array(c, "sHat_c_B", sHat_c_B, "-", (3,))
        self.sHat_c_B = check_unit_vectors(c, "sHat_c_B", s)
        m = as_array(c, "min_unit_mag", min_unit_mag, "-", ())
        self.min_unit_mag = check_nonnegative(c, "min_unit_mag", m, "-")
        a = as_array(c, "small_angle", small_angle, "rad", ())
        self.small_angle = check_nonnegative(c, "small_angle", a, "rad")
        self.sun_axis_spin_rate = as_array(c, "sun_axis_spin_rate", sun_axis_spin_rate, "rad/s", ())
        self.omega_RN_B = _vec(c, "omega_RN_B", omega_RN_B, "rad/s")

    def __call__(self, nav: dict) -> dict:
        s = jnp.asarray(nav["vehSunPntBdy"], float)
        w_BN = jnp.asarray(nav["omega_BN_B"], float)
        sc = self.sHat_c_B
        sn = _norm(s)
        visible = sn >= self.min_unit_mag
        safe_sn = jnp.where(sn > 0.0, sn, 1.0)
        cphi = jnp.clip(dot3(s, sc) / safe_sn, -1.0, 1.0)
        # arccos has an infinite derivative at +-1: evaluate it away from there (those branches are
        # replaced below, so their value does not matter).
        edge = (cphi >= 1.0) | (cphi <= -1.0)
        phi = jnp.arccos(jnp.where(edge, 0.0, cphi))
        phi = jnp.where(edge, jnp.where(cphi > 0, 0.0, jnp.pi), phi)
        e = cross3(s, sc)
        en = _norm(e)
        near180 = jnp.pi - phi < self.small_angle
        e = jnp.where(near180, _ehat180(sc), e / jnp.where(en > 0, en, 1.0))
        sigma = jnp.tan(phi / 4.0) * e
        sigma = jnp.where((phi < self.small_angle) | ~visible, jnp.zeros(3), sigma)
        w_RN = jnp.where(visible, self.sun_axis_spin_rate * s / safe_sn, self.omega_RN_B)
        return {
            "sigma_BR": sigma,
            "omega_BR_B": w_BN - w_RN,
            "omega_RN_B": w_RN,
            "domega_RN_B": jnp.zeros(3),
        }


class LocationPointing(eqx.Module):
    r"""Location pointing (Basilisk `locationPointing`, location mode): point the body axis $\hat{\mathbf p}_B$
    at an inertial location $\mathbf r_{L/N}$.

    With $\hat{\mathbf r} = [BN](\mathbf r_{L/N} - \mathbf r_{B/N})$ normalised, $\phi = \arccos(\hat{\mathbf p}_B\cdot\hat{\mathbf r})$
    and $\hat{\mathbf e} = \hat{\mathbf p}_B\times\hat{\mathbf r}/|\hat{\mathbf p}_B\times\hat{\mathbf r}|$:
    $\boldsymbol\sigma_{B/R} = -\tan(\phi/4)\,\hat{\mathbf e}$ ($0$ when $\phi <$ `small_angle`; the axis
    $\hat{\mathbf e}_{180}$ of `SunSafePoint` when $\pi - \phi <$ `small_angle`), and
    $\boldsymbol\sigma_{R/N} = \mathrm{addMRP}(\boldsymbol\sigma_{B/N}, -\boldsymbol\sigma_{B/R})$.

    **Rates by differencing (Basilisk's rule).** The module keeps the previous error and time:
    on the first call $\boldsymbol\omega_{B/R} = 0$; afterwards
    $\boldsymbol\omega_{B/R} = [B(\boldsymbol\sigma_{B/R})]^{-1}\,(\boldsymbol\sigma_{B/R,k} - \boldsymbol\sigma_{B/R,k-1})/(t_k - t_{k-1})$
    with $[B]^{-1} = 4[B]^T/(1+\sigma^2)^2$. With `use_boresight_rate_damping` the body rate about the
    target heading, $(\boldsymbol\omega_{B/N}\cdot\hat{\mathbf r})\hat{\mathbf r}$, is added to $\boldsymbol\omega_{B/R}$
    (about the heading to the target, not about $\hat{\mathbf p}_B$: the two coincide once pointed).
    $\boldsymbol\omega_{R/N} = \boldsymbol\omega_{B/N} - \boldsymbol\omega_{B/R}$ (in $\mathcal B$; ${}^N\boldsymbol\omega_{R/N} =
    [NB]\,{}^B\boldsymbol\omega_{R/N}$), $\dot{\boldsymbol\omega}_{R/N} = 0$.

    **Arguments:** `pHat_B` (3,) [-] unit; `r_LN_N` (3,) [m] the target location (constant);
    `small_angle` [rad] >= 0 (default 0); `use_boresight_rate_damping` (bool, default False).

    `init_state()` gives `{"sigma_BR_old": zeros(3), "time_old": 0, "init": 1}`;
    `__call__(t, nav, z)` reads `nav["sigma_BN"]`, `nav["omega_BN_B"]`, `nav["r_BN_N"]` and returns
    `(z_next, guidance, reference)`. **Limitations:** strip imaging and moving targets are not
    modelled; a shadow-set switch of $\boldsymbol\sigma_{B/R}$ between two calls is differenced as is.
    """

    pHat_B: Float[Array, "3"]
    r_LN_N: Float[Array, "3"]
    small_angle: Float[Array, ""]
    use_boresight_rate_damping: bool = eqx.field(static=True)

    def __init__(
        self,
        pHat_B: Float[ArrayLike, "3"],
        r_LN_N: Float[ArrayLike, "3"],
        *,
        small_angle: Float[ArrayLike, ""] = 0.0,
        use_boresight_rate_damping: bool = False,
    ):
        c = "LocationPointing"
        p = as_array(c, "pHat_B", pHat_B, "-", (3,))
        self.pHat_B = check_unit_vectors(c, "pHat_B", p)
        self.r_LN_N = as_array(c, "r_LN_N", r_LN_N, "m", (3,))
        a = as_array(c, "small_angle", small_angle, "rad", ())
        self.small_angle = check_nonnegative(c, "small_angle", a, "rad")
        if not isinstance(use_boresight_rate_damping, bool | int):
            raise ValueError(
                f"{c}: `use_boresight_rate_damping` must be True or False; got "
                f"{use_boresight_rate_damping!r}."
            )
        self.use_boresight_rate_damping = bool(use_boresight_rate_damping)

    def init_state(self) -> dict:
        return {"sigma_BR_old": jnp.zeros(3), "time_old": jnp.zeros(()), "init": jnp.ones(())}

    def __call__(self, t, nav: dict, z: dict):
        sb = jnp.asarray(nav["sigma_BN"], float)
        w_BN = jnp.asarray(nav["omega_BN_B"], float)
        BN = mrp_to_dcm(sb)
        r = BN @ (self.r_LN_N - jnp.asarray(nav["r_BN_N"], float))
        rhat = r / _norm(r)
        p = self.pHat_B
        cphi = jnp.clip(dot3(p, rhat), -1.0, 1.0)
        edge = (cphi >= 1.0) | (cphi <= -1.0)
        phi = jnp.arccos(jnp.where(edge, 0.0, cphi))
        phi = jnp.where(edge, jnp.where(cphi > 0, 0.0, jnp.pi), phi)
        e = cross3(p, rhat)
        en = _norm(e)
        near180 = jnp.pi - phi < self.small_angle
        e = jnp.where(near180, _ehat180(p), e / jnp.where(en > 0, en, 1.0))
        sigma_BR = jnp.where(phi < self.small_angle, jnp.zeros(3), -jnp.tan(phi / 4.0) * e)
        sigma_RN = mrp_add(sb, -sigma_BR)
        t = jnp.asarray(t, float)
        first = z["init"] > 0.0
        dt = jnp.where(first, 1.0, t - z["time_old"])
        ds = (sigma_BR - z["sigma_BR_old"]) / dt
        s2 = dot3(sigma_BR, sigma_BR)
        # [B]^{-1} dsigma = 4/(1+s^2)^2 [B]^T dsigma, [B] = (1-s^2) I + 2[s~] + 2 s s^T.
        BT_ds = (1.0 - s2) * ds - 2.0 * cross3(sigma_BR, ds) + 2.0 * sigma_BR * dot3(sigma_BR, ds)
        w_BR = jnp.where(first, jnp.zeros(3), 4.0 / (1.0 + s2) ** 2 * BT_ds)
        if self.use_boresight_rate_damping:
            w_BR = w_BR + dot3(w_BN, rhat) * rhat
        w_RN_B = w_BN - w_BR
        guid = {
            "sigma_BR": sigma_BR,
            "omega_BR_B": w_BR,
            "omega_RN_B": w_RN_B,
            "domega_RN_B": jnp.zeros(3),
        }
        ref = {"sigma_RN": sigma_RN, "omega_RN_N": BN.T @ w_RN_B, "domega_RN_N": jnp.zeros(3)}
        z_next = {"sigma_BR_old": sigma_BR, "time_old": t, "init": jnp.zeros(())}
        return z_next, guid, ref
