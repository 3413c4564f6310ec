r"""Attitude sensors (Basilisk `starTracker`, `magnetometer` with `magneticFieldCenteredDipole`,
`coarseSunSensor`, `imuSensor`, `simpleNav`) and `Sensors`, the discrete model that samples them on a
clock.

Each sensor is a pure equinox module with `noise_dim` (the number of standard-normal samples it
takes per call), `init_state()` (its discrete state) and `__call__(t, truth, z, w) -> (z_next,
output)`, where `truth` is the true state at the tick (Basilisk's `SCStatesMsgPayload` names:
`r_BN_N`, `v_BN_N`, `sigma_BN`, `omega_BN_B`) and `w` the samples. Outputs use Basilisk's message
field names.

**Noise.** A sensor with noise standard deviations $\boldsymbol\sigma$ (per axis) keeps an error
state $\mathbf e$: white noise $\mathbf e_k = \boldsymbol\sigma \odot \mathbf w_k$ by default, or, with walk
bounds $\mathbf b$ (`walk_bounds`), a bounded random walk
$\mathbf e_k = \mathrm{clip}(\mathbf e_{k-1} + \boldsymbol\sigma\odot\mathbf w_k, -\mathbf b, \mathbf b)$ (a
Gauss-Markov process with unit propagation matrix, Basilisk's `GaussMarkov` with $A = I$; the bound
here clips, an explicit choice). The samples $\mathbf w_k$ come from a `jax.random` key
(`Sensors(key=...)`: `jax.random.normal(jax.random.fold_in(key, k))` at the $k$-th tick, so a run is
reproducible and `vmap` over keys gives a Monte Carlo) or from prescribed standard-normal samples
(`Sensors(samples=...)`, one row per tick), so a run can replay given noise exactly. Basilisk's own
random streams cannot be replayed (its generator is internal), so the checks against Basilisk run
with the noise off.

**Order of the corruptions (Basilisk's, per sensor):** star tracker: error MRP added to the true
attitude, then $[CB]$; magnetometer: $(\mathbf B_S + \mathbf e + \mathbf b)\,f$, then saturation; coarse
sun sensor: field of view, Kelly factor, distance and eclipse factors, $+\,n + b$, $\times f$, then
saturation; IMU: platform rotation, $\times$ scale, $+\,$bias $+\,$noise, quantization (toward zero to
the LSB), saturation.

**Gradients.** Outputs are differentiable in the state and in the parameters away from the
piecewise parts: saturation and the walk bounds (zero derivative where clipped), quantization
(zero derivative: the output is a step function), the field-of-view edge of a sun sensor (a jump
to 0). Where a quantity must be differentiated through a quantizer, set `lsb=0`.

**Reference:** Basilisk module documentation of `starTracker`, `magnetometer`,
`magneticFieldCenteredDipole`, `coarseSunSensor`, `imuSensor`, `simpleNav` (AVS Lab, 2016-2023);
F. L. Markley, J. L. Crassidis, *Fundamentals of Spacecraft Attitude Determination and Control*,
Springer 2014, sec. 3.4 (centered dipole).
"""

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim import AbstractClock, AbstractDiscreteModel
from jaxsim.kinematics import cross3, dcm_to_mrp, dcm_to_quat, dot3, mrp_to_dcm
from jaxsim.validation import (
    as_array,
    check_name,
    check_nonnegative,
    check_orthonormal,
    check_positive,
    check_unique_names,
    check_unit_vectors,
    fail,
    is_concrete,
)

from .._environment._shadow import conical_illumination
from ._guidance import _norm, mrp_add


# Basilisk's astronomical unit [m] (astroConstants.h AU = 149597870.693 km), the distance at
# which a coarse sun sensor's output is standardised.
AU = 149597870693.0
# Default saturation bounds: none (Basilisk's defaults are likewise far outside any signal).
_NO_LIMIT = 1e200


def _vec3(c, arg, v, unit, default=0.0):
    return jnp.full(3, default) if v is None else as_array(c, arg, v, unit, (3,))


def _dcm(c, arg, v):
    m = jnp.eye(3) if v is None else as_array(c, arg, v, "-", (3, 3))
    return check_orthonormal(c, arg, m)


class _Noise(eqx.Module):
    """Per-axis noise (white, or a bounded random walk), shared by the sensors."""

    std: Float[Array, " n"]
    walk_bounds: Float[Array, " n"] | None

    def init(self):
        return jnp.zeros(self.std.shape)

    def __call__(self, e, w):
        step = self.std * w
        if self.walk_bounds is None:
            return step
        return jnp.clip(e + step, -self.walk_bounds, self.walk_bounds)


class _NoisySensor(eqx.Module):
    """A sensor whose only discrete state is its noise (`_Noise`): the noise settings read back
    under their constructor names, and the initial error."""

    noise: eqx.AbstractVar[_Noise]

    @property
    def noise_std(self):
        return self.noise.std

    @property
    def walk_bounds(self):
        return self.noise.walk_bounds

    def init_state(self):
        return {"error": self.noise.init()}


def _noise(c, std, walk_bounds, n, unit, prefix=""):
    sa, wa = f"{prefix}noise_std", f"{prefix}walk_bounds"
    s = jnp.zeros(n) if std is None else as_array(c, sa, std, unit, (n,))
    check_nonnegative(c, sa, s, unit)
    if walk_bounds is None:
        return _Noise(s, None)
    b = as_array(c, wa, walk_bounds, unit, (n,))
    check_positive(c, wa, b, unit)
    return _Noise(s, b)


def _saturate_args(c, lo, hi, unit):
    lo = as_array(c, "min_output", -_NO_LIMIT if lo is None else lo, unit, ())
    hi = as_array(c, "max_output", _NO_LIMIT if hi is None else hi, unit, ())
    if is_concrete(lo) and is_concrete(hi) and not float(lo) <= float(hi):
        fail(c, "max_output", f"must be >= `min_output` ({float(lo)!r})", unit, hi)
    return lo, hi


# --------------------------------------------------------------------------------------------------
# Star tracker


class StarTracker(_NoisySensor):
    r"""Star tracker (Basilisk `starTracker`): the attitude of the case frame $\mathcal C$.

    $[CN] = [CB]\,[BN(\boldsymbol\sigma_{B/N}\oplus\boldsymbol\sigma_e)]$ with $\boldsymbol\sigma_e$ the error MRP
    (noise), output as the quaternion `qInrtl2Case` (scalar first, $\beta_0 \ge 0$, Basilisk's C2EP) and
    the MRP `sigma_CN`, with the time tag `timeTag` [s].

    **Arguments:** `dcm_CB` (3, 3) [-] (default identity); `noise_std` (3,) [-] error-MRP standard
    deviations; `walk_bounds` (3,) [-] (None: white noise); `name` (default `"st"`).
    """

    dcm_CB: Float[Array, "3 3"]
    noise: _Noise
    name: str = eqx.field(static=True)

    def __init__(
        self,
        dcm_CB: Float[ArrayLike, "3 3"] | None = None,
        *,
        noise_std: Float[ArrayLike, "3"] | None = None,
        walk_bounds: Float[ArrayLike, "3"] | None = None,
        name: str = "st",
    ):
        c = "StarTracker"
        self.dcm_CB = _dcm(c, "dcm_CB", dcm_CB)
        self.noise = _noise(c, noise_std, walk_bounds, 3, "-")
        self.name = check_name(c, "name", name)

    noise_dim = 3

    def __call__(self, t, truth, z, w):
        e = self.noise(z["error"], w)
        sigma = mrp_add(truth["sigma_BN"], e)
        CN = self.dcm_CB @ mrp_to_dcm(sigma)
        out = {
            "qInrtl2Case": dcm_to_quat(CN),
            "sigma_CN": dcm_to_mrp(CN),
            "timeTag": jnp.asarray(t, float),
        }
        return {"error": e}, out

    def units(self):
        return {"qInrtl2Case": "-", "sigma_CN": "-", "timeTag": "s"}

    def state_units(self):
        return {"error": "-"}


# --------------------------------------------------------------------------------------------------
# Magnetic field and magnetometer


class CenteredDipole(eqx.Module):
    r"""Centered-dipole magnetic field (Basilisk `magneticFieldCenteredDipole`).

    With $\mathbf r = [PN](\mathbf r_{B/N} - \mathbf r_{P/N})$ in planet-fixed components,
    $\mathbf m = (g_1^1, h_1^1, g_1^0)$ [T] and the planet radius $R$:

    $${}^P\mathbf B = \frac{R^3}{r^3}\big(3(\mathbf m\cdot\hat{\mathbf r})\hat{\mathbf r} - \mathbf m\big),\qquad
    {}^N\mathbf B = [PN]^T\,{}^P\mathbf B .$$

    **Arguments:** `g10`, `g11`, `h11` [T] Gauss coefficients; `planet_radius` [m] > 0;
    `r_PN_N` (3,) [m] planet position (default 0); `dcm_PN` (3, 3) [-] planet-fixed orientation
    (default identity; constant).

    `__call__(r_BN_N)` returns ${}^N\mathbf B$ (3,) [T]. **Assumptions:** a fixed planet orientation
    during the run (Basilisk reads it from an ephemeris message).
    """

    g10: Float[Array, ""]
    g11: Float[Array, ""]
    h11: Float[Array, ""]
    planet_radius: Float[Array, ""]
    r_PN_N: Float[Array, "3"]
    dcm_PN: Float[Array, "3 3"]

    def __init__(
        self,
        g10: Float[ArrayLike, ""],
        g11: Float[ArrayLike, ""],
        h11: Float[ArrayLike, ""],
        planet_radius: Float[ArrayLike, ""],
        *,
        r_PN_N: Float[ArrayLike, "3"] | None = None,
        dcm_PN: Float[ArrayLike, "3 3"] | None = None,
    ):
        c = "CenteredDipole"
        self.g10 = as_array(c, "g10", g10, "T", ())
        self.g11 = as_array(c, "g11", g11, "T", ())
        self.h11 = as_array(c, "h11", h11, "T", ())
        r = as_array(c, "planet_radius", planet_radius, "m", ())
        self.planet_radius = check_positive(c, "planet_radius", r, "m")
        self.r_PN_N = _vec3(c, "r_PN_N", r_PN_N, "m")
        self.dcm_PN = _dcm(c, "dcm_PN", dcm_PN)

    def __call__(self, r_BN_N):
        r = self.dcm_PN @ (jnp.asarray(r_BN_N, float) - self.r_PN_N)
        rn = _norm(r)
        rhat = r / rn
        m = jnp.stack([self.g11, self.h11, self.g10])
        B_P = (self.planet_radius / rn) ** 3 * (3.0 * dot3(m, rhat) * rhat - m)
        return self.dcm_PN.T @ B_P


class Magnetometer(_NoisySensor):
    r"""Three-axis magnetometer (Basilisk `magnetometer`).

    ${}^S\mathbf B = [SB][BN]\,{}^N\mathbf B$, measured
    $\mathbf B_m = \mathrm{sat}\big((\,{}^S\mathbf B + \mathbf e + \mathbf b)\,f\big)$ element-wise between
    `min_output` and `max_output`.

    **Arguments:** `field`: a `CenteredDipole`; `dcm_SB` (3, 3) [-] (default identity); `bias` (3,)
    [T]; `scale_factor` [-] (default 1); `noise_std` (3,) [T], `walk_bounds` (3,) [T];
    `min_output`, `max_output` [T]; `name` (default `"tam"`).

    Output `tam_S` (3,) [T] (Basilisk's `TAMSensorMsgPayload`).
    """

    field: CenteredDipole
    dcm_SB: Float[Array, "3 3"]
    bias: Float[Array, "3"]
    scale_factor: Float[Array, ""]
    noise: _Noise
    min_output: Float[Array, ""]
    max_output: Float[Array, ""]
    name: str = eqx.field(static=True)

    noise_dim = 3

    def __init__(
        self,
        field: CenteredDipole,
        dcm_SB: Float[ArrayLike, "3 3"] | None = None,
        *,
        bias: Float[ArrayLike, "3"] | None = None,
        scale_factor: Float[ArrayLike, ""] = 1.0,
        noise_std: Float[ArrayLike, "3"] | None = None,
        walk_bounds: Float[ArrayLike, "3"] | None = None,
        min_output: Float[ArrayLike, ""] | None = None,
        max_output: Float[ArrayLike, ""] | None = None,
        name: str = "tam",
    ):
        c = "Magnetometer"
        if not isinstance(field, CenteredDipole):
            raise ValueError(f"{c}: `field` must be a CenteredDipole; got {type(field).__name__}.")
        self.field = field
        self.dcm_SB = _dcm(c, "dcm_SB", dcm_SB)
        self.bias = _vec3(c, "bias", bias, "T")
        self.scale_factor = as_array(c, "scale_factor", scale_factor, "-", ())
        self.noise = _noise(c, noise_std, walk_bounds, 3, "T")
        self.min_output, self.max_output = _saturate_args(c, min_output, max_output, "T")
        self.name = check_name(c, "name", name)

    def __call__(self, t, truth, z, w):
        B_N = self.field(truth["r_BN_N"])
        B_S = self.dcm_SB @ (mrp_to_dcm(truth["sigma_BN"]) @ B_N)
        e = self.noise(z["error"], w)
        m = (B_S + e + self.bias) * self.scale_factor
        m = jnp.clip(m, self.min_output, self.max_output)
        return {"error": e}, {"tam_S": m, "magField_N": B_N}

    def units(self):
        return {"tam_S": "T", "magField_N": "T"}

    def state_units(self):
        return {"error": "T"}


# --------------------------------------------------------------------------------------------------
# Coarse sun sensors


class CoarseSunSensors(_NoisySensor):
    r"""A constellation of coarse sun sensors (Basilisk `coarseSunSensor` units in a
    `CSSConstellation`), one output per sensor.

    With $\hat{\mathbf s}_B = [BN]\,\widehat{\mathbf r_\odot - \mathbf r_{B/N}}$ and each unit's normal $\hat{\mathbf n}_i$:
    $\gamma = \hat{\mathbf n}_i\cdot\hat{\mathbf s}_B$, set to 0 outside the field of view
    ($\arccos\gamma >$ `fov`); Kelly factor $\gamma \leftarrow \gamma(1 - e^{-\gamma^2/\kappa})$ when
    $\kappa > 0$; $\gamma_{li} = \gamma\,(1\,\mathrm{AU}/|\mathbf r_\odot - \mathbf r_{B/N}|)^2 f_s$ with the
    eclipse factor $f_s$; output $\mathrm{sat}\big((\gamma_{li} + n + b)\,f\big)$ between
    `min_output` and `max_output`.

    **Arguments:** `nHat_B` (n, 3) [-] unit normals in $\mathcal B$ (a platform DCM is folded in:
    $\hat{\mathbf n}_B = [PB]^T\hat{\mathbf n}_P$); `r_sun_N` (3,) [m] sun position (constant over the run);
    `fov` [rad] half-angle (default $\pi/2$); `scale_factor` [-] (default 1); `bias` (n,) [-];
    `kelly_factor` [-] >= 0 (default 0: none); `noise_std` (n,) [-], `walk_bounds` (n,) [-];
    `min_output` (default 0), `max_output`; `occulter_radius` [m]: a spherical planet at the
    origin casting the shadow ($f_s$ by `conical_illumination`; default None: $f_s = 1$);
    `name` (default `"css"`).

    Output `OutputData` (n,) (Basilisk's `CSSArraySensorMsgPayload`) and `sHat_B` (3,) [-].
    """

    nHat_B: Float[Array, "n 3"]
    r_sun_N: Float[Array, "3"]
    fov: Float[Array, ""]
    scale_factor: Float[Array, ""]
    bias: Float[Array, " n"]
    kelly_factor: Float[Array, ""]
    noise: _Noise
    min_output: Float[Array, ""]
    max_output: Float[Array, ""]
    occulter_radius: Float[Array, ""] | None
    name: str = eqx.field(static=True)

    def __init__(
        self,
        nHat_B: Float[ArrayLike, "n 3"],
        r_sun_N: Float[ArrayLike, "3"],
        *,
        fov: Float[ArrayLike, ""] = jnp.pi / 2,
        scale_factor: Float[ArrayLike, ""] = 1.0,
        bias: Float[ArrayLike, " n"] | None = None,
        kelly_factor: Float[ArrayLike, ""] = 0.0,
        noise_std: Float[ArrayLike, " n"] | None = None,
        walk_bounds: Float[ArrayLike, " n"] | None = None,
        min_output: Float[ArrayLike, ""] = 0.0,
        max_output: Float[ArrayLike, ""] | None = None,
        occulter_radius: Float[ArrayLike, ""] | None = None,
        name: str = "css",
    ):
        c = "CoarseSunSensors"
        n = as_array(c, "nHat_B", nHat_B, "-", (None, 3))
        self.nHat_B = check_unit_vectors(c, "nHat_B", n)
        k = n.shape[0]
        self.r_sun_N = as_array(c, "r_sun_N", r_sun_N, "m", (3,))
        f = as_array(c, "fov", fov, "rad", ())
        if is_concrete(f) and not 0.0 < float(f) <= float(jnp.pi):
            fail(c, "fov", "must be in (0, pi]", "rad", f)
        self.fov = f
        self.scale_factor = as_array(c, "scale_factor", scale_factor, "-", ())
        self.bias = jnp.zeros(k) if bias is None else as_array(c, "bias", bias, "-", (k,))
        kf = as_array(c, "kelly_factor", kelly_factor, "-", ())
        self.kelly_factor = check_nonnegative(c, "kelly_factor", kf, "-")
        self.noise = _noise(c, noise_std, walk_bounds, k, "-")
        self.min_output, self.max_output = _saturate_args(c, min_output, max_output, "-")
        if occulter_radius is None:
            self.occulter_radius = None
        else:
            r = as_array(c, "occulter_radius", occulter_radius, "m", ())
            self.occulter_radius = check_positive(c, "occulter_radius", r, "m")
        self.name = check_name(c, "name", name)

    @property
    def noise_dim(self):
        return self.nHat_B.shape[0]

    def __call__(self, t, truth, z, w):
        r = jnp.asarray(truth["r_BN_N"], float)
        s_N = self.r_sun_N - r
        d = _norm(s_N)
        s_B = mrp_to_dcm(truth["sigma_BN"]) @ (s_N / d)
        gamma = self.nHat_B @ s_B
        inside = gamma >= jnp.cos(self.fov)
        kf = self.kelly_factor
        kelly = 1.0 - jnp.exp(-(gamma**2) / jnp.where(kf > 0.0, kf, 1.0))
        gamma = jnp.where(kf > 0.0, gamma * kelly, gamma)
        gamma = jnp.where(inside, gamma, 0.0)
        fs = 1.0
        if self.occulter_radius is not None:
            fs = conical_illumination(r, self.r_sun_N, jnp.zeros(3), self.occulter_radius)
        g_li = gamma * (AU / d) ** 2 * fs
        e = self.noise(z["error"], w)
        out = (g_li + e + self.bias) * self.scale_factor
        out = jnp.clip(out, self.min_output, self.max_output)
        return {"error": e}, {"OutputData": out, "sHat_B": s_B}

    def units(self):
        return {"OutputData": "-", "sHat_B": "-"}

    def state_units(self):
        return {"error": "-"}


# --------------------------------------------------------------------------------------------------
# IMU (gyro channel on the clock; the full model as a function)


def _quantize(x, lsb):
    """Basilisk's discretization: toward zero to a multiple of `lsb` (none where lsb <= 0)."""
    safe = jnp.where(lsb > 0.0, lsb, 1.0)
    q = jnp.sign(x) * safe * jnp.floor(jnp.abs(x) / safe)
    return jnp.where(lsb > 0.0, q, x)


def _prv(C):
    """Principal rotation vector of a DCM (Schaub & Junkins eq. 3.29-3.30), gradient-safe at 0."""
    tr = jnp.trace(C)
    cphi = jnp.clip(0.5 * (tr - 1.0), -1.0, 1.0)
    v = jnp.stack([C[1, 2] - C[2, 1], C[2, 0] - C[0, 2], C[0, 1] - C[1, 0]])
    sphi = 0.5 * _norm(v)
    phi = jnp.arctan2(sphi, cphi)
    small = sphi < 1e-8
    # phi / (2 sin phi) -> 1/2 + phi^2/12 as phi -> 0.
    k = jnp.where(small, 0.5 + phi**2 / 12.0, phi / (2.0 * jnp.where(small, 1.0, sphi)))
    return k * v


class IMU(eqx.Module):
    r"""Inertial measurement unit (Basilisk `imuSensor`), platform frame $\mathcal P$.

    **Gyro channel.** ${}^P\boldsymbol\omega = [PB]\,\boldsymbol\omega_{B/N}$; the angle since the previous call
    $\mathbf q = \mathrm{PRV}\big([PN]_k[PN]_{k-1}^T\big)$, $[PN] = [PB][BN]$. **Accelerometer channel**
    (`measure`, from Basilisk's spacecraft message fields): ${}^P\mathbf a = [PB]\big(\mathbf a_{nc} +
    \dot{\boldsymbol\omega}\times\mathbf r_{S/B} + \boldsymbol\omega\times(\boldsymbol\omega\times\mathbf r_{S/B})\big)$ and
    the velocity change since the previous call
    $[PN]_k\big([NB]_k\Delta\mathbf V_k - [NB]_{k-1}\Delta\mathbf V_{k-1} + [NB]_k(\boldsymbol\omega_k\times\mathbf r_{S/B})
    - [NB]_{k-1}(\boldsymbol\omega_{k-1}\times\mathbf r_{S/B})\big)$.

    **Corruptions, in Basilisk's order:** each axis is multiplied by its scale, then
    $\mathbf x \leftarrow \mathbf x + \mathbf b + \mathbf e$ with the same error integrated over the period added to
    the accumulated value ($\mathbf q \leftarrow \mathbf q + (\mathbf b + \mathbf e)\Delta t$); quantization toward zero
    to the LSB, the removed part taken off the accumulated value ($\mathbf q \leftarrow \mathbf q -
    (\mathbf x - \mathbf x_d)\Delta t$); saturation at $\pm$max, an axis clipped having its accumulated value
    replaced by $x_{sat}\Delta t$. **First call:** Basilisk outputs zeros on its first call (no
    previous attitude); here too (`init` flag in the state).

    **Arguments:** `dcm_PB` (3, 3) [-]; `sensor_pos_B` (3,) [m]; `gyro_bias` (3,) [rad/s],
    `gyro_scale` (3,) [-] (default 1), `gyro_lsb` [rad/s] (0: none), `gyro_max` [rad/s] (default
    none), `gyro_noise_std` (3,) [rad/s], `gyro_walk_bounds` (3,) [rad/s]; the same for the
    accelerometer (`accel_bias` [m/s^2], ...); `name` (default `"imu"`).

    On a clock (`Sensors`) the gyro outputs `AngVelPlatform` [rad/s] and `DRFramePlatform` [rad]
    are produced from the true state; the accelerometer needs the spacecraft's non-conservative
    acceleration and angular acceleration, which the state does not hold: call `measure` with
    them. **Limitations:** no accelerometer outputs on a clock.
    """

    dcm_PB: Float[Array, "3 3"]
    sensor_pos_B: Float[Array, "3"]
    gyro_bias: Float[Array, "3"]
    gyro_scale: Float[Array, "3"]
    gyro_lsb: Float[Array, ""]
    gyro_max: Float[Array, ""]
    gyro_noise: _Noise
    accel_bias: Float[Array, "3"]
    accel_scale: Float[Array, "3"]
    accel_lsb: Float[Array, ""]
    accel_max: Float[Array, ""]
    accel_noise: _Noise
    name: str = eqx.field(static=True)

    noise_dim = 6

    def __init__(
        self,
        dcm_PB: Float[ArrayLike, "3 3"] | None = None,
        sensor_pos_B: Float[ArrayLike, "3"] | None = None,
        *,
        gyro_bias: Float[ArrayLike, "3"] | None = None,
        gyro_scale: Float[ArrayLike, "3"] | None = None,
        gyro_lsb: Float[ArrayLike, ""] = 0.0,
        gyro_max: Float[ArrayLike, ""] | None = None,
        gyro_noise_std: Float[ArrayLike, "3"] | None = None,
        gyro_walk_bounds: Float[ArrayLike, "3"] | None = None,
        accel_bias: Float[ArrayLike, "3"] | None = None,
        accel_scale: Float[ArrayLike, "3"] | None = None,
        accel_lsb: Float[ArrayLike, ""] = 0.0,
        accel_max: Float[ArrayLike, ""] | None = None,
        accel_noise_std: Float[ArrayLike, "3"] | None = None,
        accel_walk_bounds: Float[ArrayLike, "3"] | None = None,
        name: str = "imu",
    ):
        c = "IMU"
        self.dcm_PB = _dcm(c, "dcm_PB", dcm_PB)
        self.sensor_pos_B = _vec3(c, "sensor_pos_B", sensor_pos_B, "m")
        self.gyro_bias = _vec3(c, "gyro_bias", gyro_bias, "rad/s")
        self.gyro_scale = _vec3(c, "gyro_scale", gyro_scale, "-", 1.0)
        lsb = as_array(c, "gyro_lsb", gyro_lsb, "rad/s", ())
        self.gyro_lsb = check_nonnegative(c, "gyro_lsb", lsb, "rad/s")
        mx = as_array(c, "gyro_max", _NO_LIMIT if gyro_max is None else gyro_max, "rad/s", ())
        self.gyro_max = check_positive(c, "gyro_max", mx, "rad/s")
        self.gyro_noise = _noise(c, gyro_noise_std, gyro_walk_bounds, 3, "rad/s", "gyro_")
        self.accel_bias = _vec3(c, "accel_bias", accel_bias, "m/s^2")
        self.accel_scale = _vec3(c, "accel_scale", accel_scale, "-", 1.0)
        lsb = as_array(c, "accel_lsb", accel_lsb, "m/s^2", ())
        self.accel_lsb = check_nonnegative(c, "accel_lsb", lsb, "m/s^2")
        mx = as_array(c, "accel_max", _NO_LIMIT if accel_max is None else accel_max, "m/s^2", ())
        self.accel_max = check_positive(c, "accel_max", mx, "m/s^2")
        self.accel_noise = _noise(c, accel_noise_std, accel_walk_bounds, 3, "m/s^2", "accel_")
        self.name = check_name(c, "name", name)

    @property
    def gyro_noise_std(self):
        return self.gyro_noise.std

    @property
    def gyro_walk_bounds(self):
        return self.gyro_noise.walk_bounds

    @property
    def accel_noise_std(self):
        return self.accel_noise.std

    @property
    def accel_walk_bounds(self):
        return self.accel_noise.walk_bounds

    def init_state(self):
        z3 = jnp.zeros(3)
        return {
            "init": jnp.ones(()),
            "time_old": jnp.zeros(()),
            "sigma_old": z3,
            "omega_old": z3,
            "dv_old": z3,
            "gyro_error": z3,
            "accel_error": z3,
        }

    @staticmethod
    def _corrupt(x, acc, dt, scale, bias, err, lsb, mx):
        x = x * scale
        x = x + bias + err
        acc = acc + (bias + err) * dt
        xd = _quantize(x, lsb)
        acc = acc - (x - xd) * dt
        xs = jnp.clip(xd, -mx, mx)
        acc = jnp.where(xs != xd, xs * dt, acc)
        return xs, acc

    def measure(self, t, truth, z, w):
        """The full model on Basilisk's spacecraft message fields: `truth` holds `sigma_BN`,
        `omega_BN_B`, `omegaDot_BN_B` [rad/s^2], `nonConservativeAccelpntB_B` [m/s^2] and
        `TotalAccumDV_BN_B` [m/s]; returns `(z_next, {"AngVelPlatform", "DRFramePlatform",
        "AccelPlatform", "DVFramePlatform"})`."""
        t = jnp.asarray(t, float)
        sigma = jnp.asarray(truth["sigma_BN"], float)
        omega = jnp.asarray(truth["omega_BN_B"], float)
        PB = self.dcm_PB
        BN = mrp_to_dcm(sigma)
        BN_old = mrp_to_dcm(z["sigma_old"])
        first = z["init"] > 0.0
        dt = jnp.where(first, 0.0, t - z["time_old"])
        # Gyro channel.
        w_P = PB @ omega
        q = _prv((PB @ BN) @ (PB @ BN_old).T)
        # Accelerometer channel.
        r = self.sensor_pos_B
        wdot = jnp.asarray(truth.get("omegaDot_BN_B", jnp.zeros(3)), float)
        a_nc = jnp.asarray(truth.get("nonConservativeAccelpntB_B", jnp.zeros(3)), float)
        dv = jnp.asarray(truth.get("TotalAccumDV_BN_B", jnp.zeros(3)), float)
        a_P = PB @ (a_nc + cross3(wdot, r) + cross3(omega, cross3(omega, r)))
        dv_N = BN.T @ (dv + cross3(omega, r)) - BN_old.T @ (z["dv_old"] + cross3(z["omega_old"], r))
        dv_P = PB @ (BN @ dv_N)
        eg = self.gyro_noise(z["gyro_error"], w[:3])
        ea = self.accel_noise(z["accel_error"], w[3:])
        w_s, q_s = self._corrupt(
            w_P, q, dt, self.gyro_scale, self.gyro_bias, eg, self.gyro_lsb, self.gyro_max
        )
        a_s, dv_s = self._corrupt(
            a_P, dv_P, dt, self.accel_scale, self.accel_bias, ea, self.accel_lsb, self.accel_max
        )
        zero = jnp.zeros(3)
        out = {
            "AngVelPlatform": jnp.where(first, zero, w_s),
            "DRFramePlatform": jnp.where(first, zero, q_s),
            "AccelPlatform": jnp.where(first, zero, a_s),
            "DVFramePlatform": jnp.where(first, zero, dv_s),
        }
        z_next = {
            "init": jnp.zeros(()),
            "time_old": t,
            "sigma_old": sigma,
            "omega_old": omega,
            "dv_old": dv,
            "gyro_error": eg,
            "accel_error": ea,
        }
        return z_next, out

    def __call__(self, t, truth, z, w):
        z_next, out = self.measure(t, truth, z, w)
        return z_next, {k: out[k] for k in ("AngVelPlatform", "DRFramePlatform")}

    def units(self):
        return {"AngVelPlatform": "rad/s", "DRFramePlatform": "rad"}

    def state_units(self):
        return {
            "init": "-",
            "time_old": "s",
            "sigma_old": "-",
            "omega_old": "rad/s",
            "dv_old": "m/s",
            "gyro_error": "rad/s",
            "accel_error": "m/s^2",
        }


# --------------------------------------------------------------------------------------------------
# Navigation


class SimpleNav(_NoisySensor):
    r"""Navigation output with optional errors (Basilisk `simpleNav`).

    Attitude message: `sigma_BN` $=\boldsymbol\sigma_{B/N}\oplus\boldsymbol\sigma_e$, `omega_BN_B` $+\,\mathbf e_\omega$,
    `vehSunPntBdy` $=[BN]\,\widehat{\mathbf r_\odot - \mathbf r_{B/N}}$ (true attitude) $+\,\mathbf e_s$; translation
    message: `r_BN_N` $+\,\mathbf e_r$, `v_BN_N` $+\,\mathbf e_v$. Each error is a bias plus noise.

    **Arguments:** `r_sun_N` (3,) [m] (constant; default None: `vehSunPntBdy` is zero, Basilisk's
    unconnected sun message); `noise_std` (15,) [m, m/s, -, rad/s, -] for $(\mathbf e_r, \mathbf e_v,
    \boldsymbol\sigma_e, \mathbf e_\omega, \mathbf e_s)$; `walk_bounds` (15,); `bias` (15,); `name`
    (default `"nav"`).
    """

    r_sun_N: Float[Array, "3"] | None
    bias: Float[Array, "15"]
    noise: _Noise
    name: str = eqx.field(static=True)

    noise_dim = 15

    def __init__(
        self,
        r_sun_N: Float[ArrayLike, "3"] | None = None,
        *,
        noise_std: Float[ArrayLike, "15"] | None = None,
        walk_bounds: Float[ArrayLike, "15"] | None = None,
        bias: Float[ArrayLike, "15"] | None = None,
        name: str = "nav",
    ):
        c = "SimpleNav"
        self.r_sun_N = None if r_sun_N is None else as_array(c, "r_sun_N", r_sun_N, "m", (3,))
        self.bias = (
            jnp.zeros(15)
            if bias is None
            else as_array(c, "bias", bias, "m, m/s, -, rad/s, -", (15,))
        )
        self.noise = _noise(c, noise_std, walk_bounds, 15, "m, m/s, -, rad/s, -")
        self.name = check_name(c, "name", name)

    def __call__(self, t, truth, z, w):
        e = self.noise(z["error"], w)
        err = e + self.bias
        r = jnp.asarray(truth["r_BN_N"], float)
        sigma = jnp.asarray(truth["sigma_BN"], float)
        if self.r_sun_N is None:
            sun = jnp.zeros(3)
        else:
            s = self.r_sun_N - r
            sun = mrp_to_dcm(sigma) @ (s / _norm(s))
        out = {
            "r_BN_N": r + err[0:3],
            "v_BN_N": jnp.asarray(truth["v_BN_N"], float) + err[3:6],
            "sigma_BN": mrp_add(sigma, err[6:9]),
            "omega_BN_B": jnp.asarray(truth["omega_BN_B"], float) + err[9:12],
            "vehSunPntBdy": sun + err[12:15],
        }
        return {"error": e}, out

    def units(self):
        return {
            "r_BN_N": "m",
            "v_BN_N": "m/s",
            "sigma_BN": "-",
            "omega_BN_B": "rad/s",
            "vehSunPntBdy": "-",
        }

    def state_units(self):
        return {"error": "-"}


# --------------------------------------------------------------------------------------------------
# The discrete model


_SENSORS = (StarTracker, Magnetometer, CoarseSunSensors, IMU, SimpleNav)


class Sensors(AbstractDiscreteModel):
    r"""Sensors sampled on a clock: at each tick every sensor reads the true state (the pre-tick
    value $y(t_k)$, as a Basilisk sensor in the dynamics task reads the state the integration just
    wrote) and its outputs are held until the next tick under `args[name][sensor.name]`.

    **Arguments:**

    - `clock`: a `jaxsim.Clock` or `Schedule`.
    - `sensors`: a sequence of `StarTracker`, `Magnetometer`, `CoarseSunSensors`, `IMU`,
      `SimpleNav` (unique names).
    - `key`: a `jax.random` key (typed or raw `uint32[2]`) for the noise; or `samples`: prescribed
      standard-normal samples, shape (ticks, noise_dim) with one row per tick (row 0 for the call
      at $t_0$ when `tick_at_t0`), `noise_dim` the sum of the sensors' (in order). Neither: no noise
      (samples of zero). A run that ticks more often than `samples` has rows fails
      (`eqx.error_if`).
    - `spacecraft`: key of the spacecraft state in the model state (None: the model is the
      `Spacecraft`).
    - `tick_at_t0`: also sample at $t_0$ for the outputs held over the first period (Basilisk's
      first call at $t = 0$; default True).
    - `sequential`: run after the Jacobi clocks of the same instant (default False). Flight
      software that reads these outputs at the same tick must come after: declare it later with
      `sequential=True`, or give the sensors a clock offset.
    - `name` (default `"sensors"`).

    **Discrete state:** `{"tick": count, sensor.name: sensor state}`.
    """

    name: str = eqx.field(static=True)
    clock: AbstractClock
    sensors: tuple
    key: Array | None
    samples: Float[Array, "ticks n"] | None
    spacecraft: str | None = eqx.field(static=True)
    tick_at_t0: bool = eqx.field(static=True)
    is_sequential: bool = eqx.field(static=True)

    def __init__(
        self,
        clock: AbstractClock,
        sensors: "Sequence[StarTracker | Magnetometer | CoarseSunSensors | IMU | SimpleNav]",
        *,
        key: Array | None = None,
        samples: Float[ArrayLike, "ticks n"] | None = None,
        spacecraft: str | None = None,
        tick_at_t0: bool = True,
        sequential: bool = False,
        name: str = "sensors",
    ):
        c = "Sensors"
        if not isinstance(clock, AbstractClock):
            raise ValueError(
                f"{c}: `clock` must be a Clock or Schedule; got {type(clock).__name__}."
            )
        sensors = tuple(sensors)
        if not sensors:
            raise ValueError(f"{c}: `sensors` must hold at least one sensor; got none.")
        for s in sensors:
            if not isinstance(s, _SENSORS):
                raise ValueError(
                    f"{c}: `sensors` must hold StarTracker, Magnetometer, CoarseSunSensors, IMU or "
                    f"SimpleNav; got {type(s).__name__}."
                )
        check_unique_names(c, "sensors", [s.name for s in sensors])
        if key is not None and samples is not None:
            raise ValueError(f"{c}: give `key` or `samples`, not both.")
        self.clock = clock
        self.sensors = sensors
        n = sum(int(s.noise_dim) for s in sensors)
        if key is not None:
            if isinstance(key, jax.Array) and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
                key = jax.random.key_data(key)
            key = jnp.asarray(key)
            if key.shape == (2,) and jnp.issubdtype(key.dtype, jnp.integer):
                if is_concrete(key) and bool(jnp.any(key < 0)):
                    fail(c, "key", "must be a jax.random key or its uint32[2] data", "-", key)
                key = key.astype(jnp.uint32)  # a saved setup's integers
            if key.shape != (2,) or key.dtype != jnp.uint32:
                raise ValueError(
                    f"{c}: `key` must be a jax.random key or its uint32[2] data; got shape "
                    f"{key.shape}, dtype {key.dtype}."
                )
        self.key = key
        self.samples = None if samples is None else as_array(c, "samples", samples, "-", (None, n))
        self.spacecraft = None if spacecraft is None else check_name(c, "spacecraft", spacecraft)
        self.tick_at_t0 = bool(tick_at_t0)
        self.is_sequential = bool(sequential)
        self.name = check_name(c, "name", name)

    @property
    def sequential(self):
        return self.is_sequential

    @property
    def noise_dim(self) -> int:
        return sum(int(s.noise_dim) for s in self.sensors)

    def units(self):
        held = {s.name: s.units() for s in self.sensors}
        if self.tick_at_t0:
            state = {s.name: s.state_units() for s in self.sensors}
            state["tick"] = "-"
            held["state"] = state
        return {"held": {self.name: held}}

    def init_state(self):
        z = {s.name: s.init_state() for s in self.sensors}
        z["tick"] = jnp.zeros(())
        return z

    def _samples(self, tick):
        n = self.noise_dim
        if self.key is not None:
            k = jax.random.wrap_key_data(self.key)
            return jax.random.normal(jax.random.fold_in(k, tick.astype(jnp.uint32)), (n,))
        if self.samples is not None:
            i = tick.astype(jnp.int32)
            rows = self.samples.shape[0]
            w = self.samples[jnp.clip(i, 0, rows - 1)]
            return eqx.error_if(
                w, i >= rows, "Sensors: the run ticks more often than `samples` has rows."
            )
        return jnp.zeros(n)

    def _truth(self, y):
        s = y if self.spacecraft is None else y[self.spacecraft]
        return s["hub"]

    def update(self, t, y, z, args):
        if self.tick_at_t0:
            # The driver's discrete state starts at `init_state()` and the call at t0 (made for
            # the held outputs) cannot change it: that call's state travels in the held outputs
            # (`state`) and is taken up at the first tick.
            held0 = args[self.name]["state"]
            z = jax.tree.map(lambda a, b: jnp.where(z["tick"] == 0.0, a, b), held0, z)
        truth = self._truth(y)
        w = self._samples(z["tick"])
        z_next, held, i = {}, {}, 0
        for s in self.sensors:
            k = int(s.noise_dim)
            z_next[s.name], held[s.name] = s(t, truth, z[s.name], w[i : i + k])
            i += k
        z_next["tick"] = z["tick"] + 1.0
        if self.tick_at_t0:
            held["state"] = z_next
        return z_next, {self.name: held}

    def init_outputs(self, y0, args):
        if not self.tick_at_t0:
            return None
        # Basilisk's first call at t = 0, from y0 (its state is carried in the held outputs).
        z0 = self.init_state()
        out = self.update(jnp.zeros(()), y0, z0, {self.name: {"state": z0}})[1]
        return out
