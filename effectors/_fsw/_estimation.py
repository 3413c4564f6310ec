r"""Attitude estimation: the coarse-sun-sensor sun-heading estimate (Basilisk `cssWlsEst`) and a
multiplicative extended Kalman filter on gyro and star-tracker measurements with gyro-bias states.

Both are pure equinox modules (parameters as leaves: `vmap` over dispersions, `grad` through
them), called from a discrete model's update on a clock, like `MRPFeedback`.

**`CSSWlsEst`** (Basilisk `cssWlsEst`; O'Keefe & Schaub, "Consider-filter coarse sun sensor
attitude estimation", the module's documentation). At each call, the sensors whose cosine value
exceeds `sensorUseThresh` are active; their rows $\mathbf h_i = c_i \hat{\mathbf n}_i$ (`CBias`
times the normal) and values $y_i$ give the heading $\mathbf d$:

- one active sensor: $\mathbf d = \mathbf h_1 y_1$;
- two: the minimum-norm solution $\mathbf d = H^T (H H^T)^{-1} \mathbf y$;
- three or more: the weighted least squares $\mathbf d = (H^T W H)^{-1} H^T W \mathbf y$ with
  $W = \mathrm{diag}(\mathbf y)$ (`useWeights`) or $I$;
- none: $\mathbf d = 0$.

The post-fit residuals $r_i = y_i - \max(0, \hat{\mathbf n}_i \cdot \mathbf d)$ (all sensors) are
taken before $\mathbf d$ is normalized; the output heading is $\mathbf d / |\mathbf d|$. A singular
$H H^T$ or $H^T W H$ ($|\det| \le 10^{-30}$, Basilisk's `DB0_EPS`) gives a zero heading and rate.
The partial body rate from two successive headings is
$\boldsymbol\omega = \widehat{(\mathbf d_n \times \mathbf d_{n-1})}\, \arccos(\mathbf d_n \cdot
\mathbf d_{n-1}) / \Delta t$ (zero on the first call with a signal, after a call without one, for
collinear headings, and when $\Delta t = 0$). Basilisk's time rule is kept: $\Delta t = 0$ while
the stored prior call time is 0, so a first call at $t = 0$ gives $\Delta t = 0$ at the second
call too.

**`AttitudeMEKF`** (Lefferts, Markley & Shuster, "Kalman filtering for spacecraft attitude
estimation", J. Guidance 5(5), 1982; Crassidis & Junkins, *Optimal Estimation of Dynamic
Systems*, 2nd ed., CRC 2012, sec. 7.2). State: the attitude quaternion $\hat q_{B/N}$ (scalar
first, Basilisk's Euler-parameter order) and the gyro bias $\hat{\boldsymbol\beta}$ [rad/s];
covariance $P$ (6x6) of the attitude error angles $\delta\boldsymbol\alpha$ [rad] and the bias
error. The gyro model is $\tilde{\boldsymbol\omega} = \boldsymbol\omega + \boldsymbol\beta +
\boldsymbol\eta_v$, $\dot{\boldsymbol\beta} = \boldsymbol\eta_u$ (angle random walk `sigma_v`
[rad/s^(1/2)], rate random walk `sigma_u` [rad/s^(3/2)]). Propagation over $\Delta t$ with
$\hat{\boldsymbol\omega} = \tilde{\boldsymbol\omega} - \hat{\boldsymbol\beta}$: the exact
quaternion rotation at that rate, the closed-form transition matrix $\Phi$ and the discrete
process noise

$$Q = \begin{bmatrix} (\sigma_v^2 \Delta t + \tfrac13 \sigma_u^2 \Delta t^3) I & -\tfrac12
\sigma_u^2 \Delta t^2 I \\ -\tfrac12 \sigma_u^2 \Delta t^2 I & \sigma_u^2 \Delta t\, I
\end{bmatrix}$$

(Crassidis & Junkins eqs. 7.43-7.45). A star-tracker update takes a measured quaternion with
noise `sigma_st` [rad] per axis: residual $\delta\boldsymbol\alpha = 2\,\mathrm{vec}(\tilde q
\otimes \hat q^{-1})$ (sign chosen for a positive scalar part), $H = [I_3\ 0]$, the Joseph-form
covariance update, and the multiplicative correction of the quaternion (renormalized).
**`SunlineEKF`** (Basilisk `sunlineEKF`; the module's documentation). State: the sun heading
$\mathbf d$ (unnormalized) and its rate $\dot{\mathbf d}$ in $\mathcal B$. Time update over
$\Delta t$: $\dot{\mathbf d}$ loses its component along $\hat{\mathbf d}$ (the unobservable
rotation about the heading) and $\mathbf d \leftarrow \mathbf d + \Delta t\,\dot{\mathbf d}$;
the transition matrix is $I + \Delta t\,A$ with $A$ the documented Jacobian of the dynamics at
the state before the step (its lower blocks, which divide by $\Delta t$, zero for
$\Delta t \le 10^{-10}$); $\bar P = \Phi P \Phi^T + \Gamma Q \Gamma^T$ with
$\Gamma = [\tfrac12 \Delta t^2 I;\ \Delta t I]$ and $Q$ = `qProcVal` $I_3$. Measurement update
with the active sensors (value above `sensorUseThresh`): rows $c_i \hat{\mathbf n}_i^T$, innovation
$y_i - c_i \hat{\mathbf n}_i \cdot \mathbf d$, noise `qObsVal` $I$, the Joseph form; while the
largest entry of the previous covariance exceeds `eKFSwitch` a classical (linearized) update of
the state error $\mathbf x$ about an unchanged reference, otherwise the extended update
($\mathbf x = K\mathbf y$ added to the reference). The output heading is the normalized
reference $\mathbf d$; the post-fit residuals $\mathbf y - H\mathbf x$. As in Basilisk, the
state error of an extended update is kept (and propagated by the next time update) although
the reference already holds it.
"""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxsim.validation import as_array, check_positive, check_unit_vectors


# Basilisk's zero threshold of determinants and norms (`DB0_EPS` in its linear-algebra library).
DB0_EPS = 1e-30


def _normalize(v):
    n = jnp.linalg.norm(v)
    return jnp.where(n > DB0_EPS, v / jnp.where(n > DB0_EPS, n, 1.0), 0.0)


def _inverse_2x2(m):
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    ok = jnp.abs(det) > DB0_EPS
    inv = jnp.where(ok, 1.0 / jnp.where(ok, det, 1.0), 0.0)
    out = jnp.array([[m[1, 1], -m[0, 1]], [-m[1, 0], m[0, 0]]]) * inv
    return jnp.where(ok, out, 0.0), ok


def _inverse_3x3(m):
    """The adjugate over the determinant (cofactor expansion along the first row)."""
    c00 = m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1]
    c01 = m[1, 0] * m[2, 2] - m[1, 2] * m[2, 0]
    c02 = m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0]
    det = m[0, 0] * c00 - m[0, 1] * c01 + m[0, 2] * c02
    ok = jnp.abs(det) > DB0_EPS
    inv = jnp.where(ok, 1.0 / jnp.where(ok, det, 1.0), 0.0)
    adj = jnp.array(
        [
            [c00, -(m[0, 1] * m[2, 2] - m[0, 2] * m[2, 1]), m[0, 1] * m[1, 2] - m[0, 2] * m[1, 1]],
            [-c01, m[0, 0] * m[2, 2] - m[0, 2] * m[2, 0], -(m[0, 0] * m[1, 2] - m[0, 2] * m[1, 0])],
            [c02, -(m[0, 0] * m[2, 1] - m[0, 1] * m[2, 0]), m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]],
        ]
    )
    return jnp.where(ok, adj * inv, 0.0), ok


def _cos_values(cls: str, cos_values, n: int):
    """The sensors' cosine values as a float array of shape `(n,)`, else a ValueError."""
    y = jnp.asarray(cos_values, dtype=float)
    if y.shape != (n,):
        raise ValueError(
            f"{cls}: `cos_values` [-] must have shape ({n},), one per sensor; got {y.shape}."
        )
    return y


class CSSWlsEst(eqx.Module):
    r"""Sun heading and partial body rate from a coarse-sun-sensor constellation by weighted
    least squares (Basilisk `cssWlsEst`; module docstring).

    **Arguments:**

    - `nHat_B`: sensor normals in $\mathcal B$ [-], shape `(n, 3)`, unit vectors.
    - `CBias`: per-sensor scale of the normal [-], shape `(n,)` (default ones; Basilisk's
      `CSSUnitConfigMsgPayload.CBias`).
    - `sensorUseThresh`: a sensor is used when its value exceeds this [-] (default 0).
    - `useWeights`: weight the least squares by the measured values (default True).

    `init_state()` gives `{"dOld": zeros(3), "prior_available": False, "prior_time": 0}`;
    `__call__(t, cos_values, z)` returns `(z_next, out)` with `out["vehSunPntBdy"]` (unit
    heading, or zeros), `out["omega_BN_B"]` [rad/s], `out["postFitRes"]` (n,) and
    `out["numObs"]` (active sensors).
    """

    nHat_B: Float[Array, "n 3"]
    CBias: Float[Array, " n"]
    sensorUseThresh: Float[Array, ""]
    useWeights: bool = eqx.field(static=True)

    def __init__(
        self,
        nHat_B: Float[ArrayLike, "n 3"],
        *,
        CBias: Float[ArrayLike, " n"] | None = None,
        sensorUseThresh: Float[ArrayLike, ""] = 0.0,
        useWeights: bool = True,
    ):
        c = "CSSWlsEst"
        normals = as_array(c, "nHat_B", nHat_B, "-", (None, 3))
        if normals.shape[0] < 1:
            raise ValueError(f"{c}: `nHat_B` [-] needs at least one sensor; got shape (0, 3).")
        self.nHat_B = check_unit_vectors(c, "nHat_B", normals)
        n = normals.shape[0]
        self.CBias = jnp.ones(n) if CBias is None else as_array(c, "CBias", CBias, "-", (n,))
        self.sensorUseThresh = as_array(c, "sensorUseThresh", sensorUseThresh, "-", ())
        if not isinstance(useWeights, bool):
            raise ValueError(f"{c}: `useWeights` must be a bool; got {useWeights!r}.")
        self.useWeights = useWeights

    def init_state(self) -> dict:
        return {
            "dOld": jnp.zeros(3),
            "prior_available": jnp.asarray(False),
            "prior_time": jnp.asarray(0.0),
        }

    def __call__(self, t, cos_values, z: dict) -> tuple[dict, dict]:
        y = _cos_values("CSSWlsEst", cos_values, self.nHat_B.shape[0])
        t = jnp.asarray(t, dtype=float)
        dt = jnp.where(z["prior_time"] == 0.0, 0.0, t - z["prior_time"])
        active = y > self.sensorUseThresh
        count = jnp.sum(active)
        H = jnp.where(active[:, None], self.CBias[:, None] * self.nHat_B, 0.0)
        ym = jnp.where(active, y, 0.0)
        # One sensor: its row times its value.
        d1 = H.T @ ym
        # Two: the minimum norm solution on the first two active rows.
        idx = jnp.nonzero(active, size=2, fill_value=0)[0]
        H2, y2 = H[idx], ym[idx]
        inv2, ok2 = _inverse_2x2(H2 @ H2.T)
        d2 = H2.T @ (inv2 @ y2)
        # Three or more: weighted least squares (weights zero on the inactive rows).
        w = ym if self.useWeights else active.astype(float)
        HtW = H.T * w[None, :]
        inv3, ok3 = _inverse_3x3(HtW @ H)
        d3 = (inv3 @ H.T) @ (w * ym)
        d = jnp.where(count == 1, d1, jnp.where(count == 2, d2, jnp.where(count > 2, d3, 0.0)))
        ok = jnp.where(count == 2, ok2, jnp.where(count > 2, ok3, True))
        residuals = y - jnp.maximum(self.nHat_B @ d, 0.0)
        d_hat = _normalize(d)
        has_sun = count > 0
        d_old = _normalize(z["dOld"])
        axis = _normalize(jnp.cross(d_hat, d_old))
        angle = jnp.arccos(jnp.clip(d_hat @ d_old, -1.0, 1.0))
        rate = z["prior_available"] & (dt > 0.0) & has_sun
        omega = jnp.where(rate, axis * angle / jnp.where(dt > 0.0, dt, 1.0), 0.0)
        good = has_sun & ok
        out = {
            "vehSunPntBdy": jnp.where(good, d_hat, 0.0),
            "omega_BN_B": jnp.where(good, omega, 0.0),
            "postFitRes": residuals,
            "numObs": count,
        }
        z_next = {
            "dOld": jnp.where(has_sun, d_hat, z["dOld"]),
            "prior_available": good,
            "prior_time": t,
        }
        return z_next, out


def quat_multiply(p, q):
    """The quaternion product $p \\otimes q$ (scalar first), composing rotations as DCMs do:
    $C(p \\otimes q) = C(p)\\,C(q)$."""
    p0, pv = p[0], p[1:]
    q0, qv = q[0], q[1:]
    return jnp.concatenate(
        [jnp.reshape(p0 * q0 - pv @ qv, (1,)), p0 * qv + q0 * pv - jnp.cross(pv, qv)]
    )


def _rotation_quaternion(phi):
    """The quaternion of the rotation by the angle vector `phi` [rad] (frame rotation, DCM
    convention), with a series below 1e-8 rad."""
    a = jnp.linalg.norm(phi)
    small = a < 1e-8
    a_safe = jnp.where(small, 1.0, a)
    s = jnp.where(small, 0.5 - a * a / 48.0, jnp.sin(0.5 * a_safe) / a_safe)
    return jnp.concatenate([jnp.reshape(jnp.cos(0.5 * a), (1,)), s * phi])


def _skew(v):
    return jnp.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


class AttitudeMEKF(eqx.Module):
    r"""Multiplicative extended Kalman filter with gyro-bias states (module docstring).

    **Arguments:**

    - `sigma_v`: gyro angle random walk [rad/s^(1/2)], >= 0.
    - `sigma_u`: gyro bias rate random walk [rad/s^(3/2)], >= 0.
    - `sigma_st`: star-tracker noise per axis [rad], > 0 (scalar or shape (3,)).

    `init_state(q_BN, bias, P)` gives the filter state `{"q_BN", "bias", "P"}`;
    `propagate(z, omega_meas, dt)` and `update(z, q_meas)` return the next state (`update` also
    the innovation and its covariance: `(z, nu, S)`, for NIS checks); `error(z, q_BN, bias)` the
    6-vector of the estimate's errors (attitude angles [rad], bias [rad/s]) against the truth.
    """

    sigma_v: Float[Array, ""]
    sigma_u: Float[Array, ""]
    sigma_st: Float[Array, "3"]

    def __init__(
        self,
        sigma_v: Float[ArrayLike, ""],
        sigma_u: Float[ArrayLike, ""],
        sigma_st: Float[ArrayLike, "..."],
    ):
        c = "AttitudeMEKF"
        self.sigma_v = check_positive(
            c, "sigma_v", as_array(c, "sigma_v", sigma_v, "rad/s^(1/2)", ()), "rad/s^(1/2)",
            allow_zero=True,
        )  # fmt: skip
        self.sigma_u = check_positive(
            c, "sigma_u", as_array(c, "sigma_u", sigma_u, "rad/s^(3/2)", ()), "rad/s^(3/2)",
            allow_zero=True,
        )  # fmt: skip
        st = jnp.broadcast_to(jnp.asarray(sigma_st, dtype=float), (3,))
        self.sigma_st = check_positive(
            c, "sigma_st", as_array(c, "sigma_st", st, "rad", (3,)), "rad"
        )

    def init_state(self, q_BN, bias, P) -> dict:
        q = jnp.asarray(q_BN, dtype=float)
        return {
            "q_BN": q / jnp.linalg.norm(q),
            "bias": jnp.asarray(bias, dtype=float),
            "P": jnp.asarray(P, dtype=float),
        }

    def propagate(self, z: dict, omega_meas, dt) -> dict:
        w = jnp.asarray(omega_meas, dtype=float) - z["bias"]
        dt = jnp.asarray(dt, dtype=float)
        # q_{k+1} = q(rotation by w dt) (x) q_k: the body frame turns by w dt about w.
        q = quat_multiply(_rotation_quaternion(w * dt), z["q_BN"])
        q = q / jnp.linalg.norm(q)
        a = jnp.linalg.norm(w)
        small = a * dt < 1e-6
        a_s = jnp.where(small, 1.0, a)
        W = _skew(w)
        W2 = W @ W
        ad = a_s * dt
        # Closed-form blocks (Crassidis & Junkins eq. 7.45), with series for small angles.
        c1 = jnp.where(small, dt - dt**3 * a * a / 6.0, jnp.sin(ad) / a_s)
        c2 = jnp.where(small, dt**2 / 2.0, (1.0 - jnp.cos(ad)) / a_s**2)
        c3 = jnp.where(small, dt**3 / 6.0, (ad - jnp.sin(ad)) / a_s**3)
        I3 = jnp.eye(3)
        phi11 = I3 - c1 * W + c2 * W2
        phi12 = c2 * W - dt * I3 - c3 * W2
        Phi = jnp.block([[phi11, phi12], [jnp.zeros((3, 3)), I3]])
        sv2, su2 = self.sigma_v**2, self.sigma_u**2
        Q = jnp.block(
            [
                [(sv2 * dt + su2 * dt**3 / 3.0) * I3, -0.5 * su2 * dt**2 * I3],
                [-0.5 * su2 * dt**2 * I3, su2 * dt * I3],
            ]
        )
        P = Phi @ z["P"] @ Phi.T + Q
        return {"q_BN": q, "bias": z["bias"], "P": 0.5 * (P + P.T)}

    def _attitude_error(self, q_a, q_b):
        """Small angles [rad] from `q_b` to `q_a` (2 vec(q_a (x) q_b^-1), scalar part >= 0)."""
        inv = jnp.concatenate([q_b[:1], -q_b[1:]])
        dq = quat_multiply(q_a, inv)
        return 2.0 * jnp.where(dq[0] < 0, -1.0, 1.0) * dq[1:]

    def update(self, z: dict, q_meas) -> tuple[dict, Array, Array]:
        q_m = jnp.asarray(q_meas, dtype=float)
        q_m = q_m / jnp.linalg.norm(q_m)
        nu = self._attitude_error(q_m, z["q_BN"])
        H = jnp.concatenate([jnp.eye(3), jnp.zeros((3, 3))], axis=1)
        R = jnp.diag(self.sigma_st**2)
        P = z["P"]
        S = H @ P @ H.T + R
        K = jnp.linalg.solve(S, H @ P).T
        dx = K @ nu
        IKH = jnp.eye(6) - K @ H
        P = IKH @ P @ IKH.T + K @ R @ K.T
        q = quat_multiply(_rotation_quaternion(dx[:3]), z["q_BN"])
        z = {"q_BN": q / jnp.linalg.norm(q), "bias": z["bias"] + dx[3:], "P": 0.5 * (P + P.T)}
        return z, nu, S

    def error(self, z: dict, q_BN, bias) -> Array:
        """`[attitude error angles (rad), bias error (rad/s)]` of the estimate against the truth."""
        da = self._attitude_error(z["q_BN"], jnp.asarray(q_BN, dtype=float))
        return jnp.concatenate([da, z["bias"] - jnp.asarray(bias, dtype=float)])


def nees(err, P):
    """The normalized estimation error squared $e^T P^{-1} e$ (consistency: mean = dimension)."""
    return err @ jnp.linalg.solve(P, err)


class SunlineEKF(eqx.Module):
    r"""Sun heading and its rate from coarse sun sensors by an extended Kalman filter (Basilisk
    `sunlineEKF`; module docstring).

    **Arguments:**

    - `nHat_B` (n, 3) [-], `CBias` (n,) [-], `sensorUseThresh` [-]: the constellation, as for
      `CSSWlsEst`.
    - `qProcVal`: process noise of the heading acceleration [1/s^4 per axis], >= 0.
    - `qObsVal`: measurement noise variance of a cosine value [-], > 0.
    - `eKFSwitch`: above this largest covariance entry the update is linear (classical), below
      it extended [-] (Basilisk's default 0 makes every update classical only while any entry
      is above 0; set it as Basilisk users do, e.g. 5).

    `init_state(state, covar, t0=0)` gives `{"state", "x", "covar", "timeTag"}`;
    `__call__(t, cos_values, z)` runs the time update to `t` [s] and the measurement update
    with `cos_values`, returning `(z_next, out)` with `out["vehSunPntBdy"]`, `out["postFitRes"]`
    (zeros for inactive sensors), `out["numObs"]`, `out["covar"]` and `out["state"]`.
    """

    nHat_B: Float[Array, "n 3"]
    CBias: Float[Array, " n"]
    sensorUseThresh: Float[Array, ""]
    qProcVal: Float[Array, ""]
    qObsVal: Float[Array, ""]
    eKFSwitch: Float[Array, ""]

    def __init__(
        self,
        nHat_B: Float[ArrayLike, "n 3"],
        *,
        qProcVal: Float[ArrayLike, ""],
        qObsVal: Float[ArrayLike, ""],
        eKFSwitch: Float[ArrayLike, ""] = 5.0,
        CBias: Float[ArrayLike, " n"] | None = None,
        sensorUseThresh: Float[ArrayLike, ""] = 0.0,
    ):
        c = "SunlineEKF"
        css = CSSWlsEst(nHat_B, CBias=CBias, sensorUseThresh=sensorUseThresh)
        self.nHat_B, self.CBias, self.sensorUseThresh = css.nHat_B, css.CBias, css.sensorUseThresh
        self.qProcVal = check_positive(
            c, "qProcVal", as_array(c, "qProcVal", qProcVal, "1/s^4", ()), "1/s^4",
            allow_zero=True,
        )  # fmt: skip
        self.qObsVal = check_positive(c, "qObsVal", as_array(c, "qObsVal", qObsVal, "-", ()), "-")
        self.eKFSwitch = as_array(c, "eKFSwitch", eKFSwitch, "-", ())

    def init_state(self, state, covar, t0=0.0) -> dict:
        return {
            "state": jnp.asarray(state, dtype=float).reshape(6),
            "x": jnp.zeros(6),
            "covar": jnp.asarray(covar, dtype=float).reshape(6, 6),
            "timeTag": jnp.asarray(t0, dtype=float),
        }

    def _time_update(self, z, t):
        dt = t - z["timeTag"]
        X = z["state"]
        d, ddot = X[:3], X[3:]
        I3 = jnp.eye(3)
        n2 = jnp.linalg.norm(d) ** 2
        dd = d @ ddot
        dFdd = -(jnp.outer(d, ddot) / n2 + dd / (n2 * n2) * (n2 * I3 - 2.0 * jnp.outer(d, d)))
        dFdddot = I3 - jnp.outer(d, d) / n2
        live = dt > 1e-10
        dt_safe = jnp.where(live, dt, 1.0)
        low = jnp.where(live, 1.0 / dt_safe, 0.0)
        A = jnp.block([[dFdd, dFdddot], [low * dFdd, low * (dFdddot - I3)]])
        u = _normalize(d)
        ddot = ddot - (ddot @ u) * u
        X = jnp.concatenate([d + dt * ddot, ddot])
        Phi = jnp.eye(6) + dt * A
        x_bar = Phi @ z["x"]
        Gamma = jnp.concatenate([0.5 * dt * dt * I3, dt * I3])
        P_bar = Phi @ z["covar"] @ Phi.T + Gamma @ (self.qProcVal * I3) @ Gamma.T
        return X, x_bar, P_bar

    def __call__(self, t, cos_values, z: dict) -> tuple[dict, dict]:
        n = self.nHat_B.shape[0]
        y_cos = _cos_values("SunlineEKF", cos_values, n)
        t = jnp.asarray(t, dtype=float)
        X, x_bar, P_bar = self._time_update(z, t)
        active = y_cos > self.sensorUseThresh
        normals = self.CBias[:, None] * self.nHat_B
        H = jnp.where(active[:, None], jnp.concatenate([normals, jnp.zeros((n, 3))], axis=1), 0.0)
        innovation = jnp.where(active, y_cos - normals @ X[:3], 0.0)
        R = self.qObsVal * jnp.eye(n)
        S = H @ P_bar @ H.T + R
        K = jnp.linalg.solve(S, H @ P_bar).T  # P H^T S^-1 (S symmetric)
        IKH = jnp.eye(6) - K @ H
        P = IKH @ P_bar @ IKH.T + K @ R @ K.T
        linear = jnp.max(jnp.abs(z["covar"])) > self.eKFSwitch
        x_ckf = x_bar + K @ (innovation - H @ x_bar)
        x_ekf = K @ innovation
        x = jnp.where(linear, x_ckf, x_ekf)
        X = jnp.where(linear, X, X + x_ekf)
        post = jnp.where(active, innovation - H @ x, 0.0)
        z_next = {"state": X, "x": x, "covar": P, "timeTag": t}
        out = {
            "vehSunPntBdy": _normalize(X[:3]),
            "postFitRes": post,
            "numObs": jnp.sum(active),
            "covar": P,
            "state": X,
        }
        return z_next, out
