r"""Inertia estimation from noisy attitude measurements of a tumbling rigid hub.

A rigid hub (no gravity, no effectors except a known torque) tumbles from $(\boldsymbol\sigma_0,
\boldsymbol\omega_0)$; a star tracker measures its attitude every `sample_dt` seconds with a small
random rotation error: $[\tilde B N] = [\delta(\boldsymbol\nu)][BN]$, $\boldsymbol\nu\sim\mathcal N(0,
s^2 I_3)$ an MRP ($|\nu| \approx$ angle/4, so the angular noise is about $4s$ per axis).
The estimated parameters are the inertia $[I]$ about the hub centre of mass (6 numbers of a
symmetric positive-definite tensor through its Cholesky factor, $[I] = LL^T$ with
$L_{ii} = e^{\ell_i}$), the initial rate $\boldsymbol\omega_0$ and the initial attitude
$\boldsymbol\sigma_0$: 12 parameters. The residual (maximum likelihood for the noise model) is

$$\mathbf r = \big[\boldsymbol\sigma_{B/\tilde B}(t_j)/s\big]_j = \big[\texttt{mrp\_subtract}(\boldsymbol\sigma_{B/N}(t_j;\,p), \tilde{\boldsymbol\sigma}_j)/s\big]_j,$$

solved with `optimistix.LevenbergMarquardt`.

**Scale.** Torque-free motion depends on $[I]$ only up to a factor (Euler's equations are
homogeneous in $[I]$), so attitude data alone give the inertia *ratios*. A known torque
impulse fixes the scale: `torque_B` [N m] acts during the first `torque_time` seconds (a
`jaxsim.PiecewiseConstant` on the step grid, zero-order hold), then the hub tumbles freely.
With `torque_time = 0` the problem is scale-free and the normal matrix is singular along
$[I]$ (the solver then returns some point on that ray); estimate ratios in that case.

**Error bound.** At the solution, the Gauss-Newton covariance $\mathrm{cov}(p) \approx (J^TJ)^{-1}$
(residuals normalised by $s$) is the Cramer-Rao bound of this unbiased-to-first-order estimator;
`solve` maps it to standard errors of the six inertia entries
$(I_{11}, I_{22}, I_{33}, I_{12}, I_{13}, I_{23})$, which scale linearly with the noise $s$.

**Assumptions and limitations:** the measurement times, noise level and known torque are
exact; no gyro data (rates are estimated through the dynamics); RK4 with fixed step `dt`. The
default start (`initial_guess`: isotropic inertia, rate from the first two samples) converges
for the default tumble up to $s \approx 10^{-3}$ (0.2 deg); at $s = 10^{-2}$ the initial rate is
too poor and the fit ends in a local minimum (give a better `params0`).

**Reference:** Crassidis & Junkins, *Optimal Estimation of Dynamic Systems*, 2nd ed.,
ch. 1-2 (nonlinear least squares, Cramer-Rao bound); Schaub & Junkins, *Analytical Mechanics of
Space Systems*, 4th ed., sec. 4.4 (torque-free rigid body).
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float

import effectors as fx
from jaxsim import simulate as _simulate
from jaxsim.kinematics import dcm_to_mrp, mrp_to_dcm
from jaxsim.signals import PiecewiseConstant
from jaxsim.validation import as_array, check_inertia, check_nonnegative, check_positive, fail

from ._common import dense_jacobian, least_squares, solver_message, timed_solve


_CLS = "inertia.make_problem"
I_TRUE = np.array([[12.0, 0.6, -0.4], [0.6, 9.0, 0.3], [-0.4, 0.3, 7.0]])  # [kg m^2]
_TRIL = np.tril_indices(3)
# Order of the six reported inertia entries.
ENTRIES = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))


class InertiaProblem(eqx.Module):
    """Measurements and model of the inertia estimation (module docstring); see `make_problem`.

    **Fields:** `spacecraft`, `y0` (state template), `sigma_meas` [-] (n, 3), `noise` $s$ [-],
    `weights` (n,) (1: sample used; `solve` sets them for its growing fit windows), `true_params`
    (12,) (for reporting only); static: `T` [s], `dt` [s], `sample_dt` [s].
    """

    spacecraft: fx.Spacecraft
    y0: dict
    sigma_meas: Float[Array, "n 3"]
    noise: Float[Array, ""]
    weights: Float[Array, " n"]
    true_params: Float[Array, "12"]
    T: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    sample_dt: float = eqx.field(static=True)


def inertia_to_cholesky(I_B) -> Float[Array, "6"]:
    r"""The 6 Cholesky parameters ($\ell_{ii} = \log L_{ii}$, off-diagonal $L_{ij}$) of an SPD inertia."""
    L = jnp.linalg.cholesky(jnp.asarray(I_B, float))
    L = L.at[jnp.diag_indices(3)].set(jnp.log(jnp.diag(L)))
    return L[_TRIL]


def cholesky_to_inertia(c) -> Float[Array, "3 3"]:
    """Inverse of `inertia_to_cholesky`: $[I] = LL^T$ [kg m^2]."""
    L = jnp.zeros((3, 3)).at[_TRIL].set(c)
    L = L.at[jnp.diag_indices(3)].set(jnp.exp(jnp.diag(L)))
    return L @ L.T


def pack(I_B, omega0, sigma0) -> Float[Array, "12"]:
    """Parameter vector `[cholesky(I) (6), omega0 [rad/s] (3), sigma0 [-] (3)]`."""
    return jnp.concatenate(
        [inertia_to_cholesky(I_B), jnp.asarray(omega0, float), jnp.asarray(sigma0, float)]
    )


def unpack(params):
    """`(I_B [kg m^2], omega0 [rad/s], sigma0 [-])` from the parameter vector."""
    return cholesky_to_inertia(params[:6]), params[6:9], params[9:12]


def entries(I_B) -> Float[Array, "6"]:
    """$(I_{11}, I_{22}, I_{33}, I_{12}, I_{13}, I_{23})$ [kg m^2]."""
    return jnp.stack([I_B[i, j] for i, j in ENTRIES])


@eqx.filter_jit
def attitude_history(problem: InertiaProblem, params) -> Float[Array, "n 3"]:
    """Model attitudes $\\sigma_{B/N}$ at the sample times for the parameters `params`."""
    I_B, omega0, sigma0 = unpack(params)
    sc = eqx.tree_at(lambda s: s.hub.IHubPntBc_B, problem.spacecraft, I_B)
    y0 = eqx.tree_at(
        lambda y: (y["hub"]["sigma_BN"], y["hub"]["omega_BN_B"]), problem.y0, (sigma0, omega0)
    )
    sol = _simulate(
        sc,
        y0,
        problem.T,
        dt=problem.dt,
        sample_dt=problem.sample_dt,
        outputs=False,
        checkpoint=False,
        throw=False,
    )  # fmt: skip  (throw=False: a trial step of the solver may diverge; its NaN loss rejects it)
    return sol.ys["hub"]["sigma_BN"]


def make_problem(
    *,
    noise=1e-4,
    key=None,
    I_B=I_TRUE,
    omega0=(0.05, -0.03, 0.08),
    sigma0=(0.1, 0.2, -0.1),
    torque_B=(0.05, -0.03, 0.04),
    torque_time=10.0,
    T=60.0,
    dt=0.5,
    sample_dt=1.0,
    mass=100.0,
) -> InertiaProblem:
    """Simulate the truth and draw the measurements.

    **Arguments:** `noise` $s$ [-] (MRP noise per axis, > 0), `key` (`jax.random` key; default
    `PRNGKey(0)`), true `I_B` [kg m^2], `omega0` [rad/s], `sigma0` [-], the known `torque_B` [N m]
    applied from 0 to `torque_time` [s] (a multiple of `dt`; 0: torque-free, ratios only), horizon
    `T` [s], RK4 step `dt` [s], `sample_dt` [s] (a multiple of `dt` dividing `T`), `mass` [kg].
    """
    s = check_positive(_CLS, "noise", as_array(_CLS, "noise", noise, "-", ()), "-")
    I_B = check_inertia(_CLS, "I_B", as_array(_CLS, "I_B", I_B, "kg m^2", (3, 3)))
    T = float(check_positive(_CLS, "T", as_array(_CLS, "T", T, "s", ()), "s"))
    dt = float(check_positive(_CLS, "dt", as_array(_CLS, "dt", dt, "s", ()), "s"))
    sdt = float(
        check_positive(_CLS, "sample_dt", as_array(_CLS, "sample_dt", sample_dt, "s", ()), "s")
    )
    t_tq = float(check_nonnegative(_CLS, "torque_time", as_array(_CLS, "torque_time", torque_time, "s", ()), "s"))  # fmt: skip
    for arg, value in (("sample_dt", sdt), ("torque_time", t_tq)):
        k = value / dt
        if abs(k - round(k)) > 1e-9 * max(1.0, k):
            fail(_CLS, arg, f"must be a multiple of dt = {dt}", "s", value)
    if t_tq >= T:
        fail(_CLS, "torque_time", f"must be < T = {T}", "s", t_tq)
    tq = as_array(_CLS, "torque_B", torque_B, "N m", (3,))
    torque = PiecewiseConstant([t_tq if t_tq > 0 else dt], jnp.stack([tq if t_tq > 0 else 0 * tq, 0 * tq]))  # fmt: skip
    ext = fx.ExtForceTorque(torque_B=torque, name="known_torque")
    sc = fx.Spacecraft(fx.Hub(mass, I_B), dynamic_effectors=(ext,))
    y0 = sc.init_state(np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3))
    key = jax.random.PRNGKey(0) if key is None else key
    true = pack(I_B, omega0, sigma0)
    n = int(round(T / sdt)) + 1
    placeholder = InertiaProblem(sc, y0, jnp.zeros((n, 3)), s, jnp.ones(n), true, T, dt, sdt)
    sigma_true = attitude_history(placeholder, true)
    nu = s * jax.random.normal(key, sigma_true.shape)
    dcm_meas = jax.vmap(lambda a, b: mrp_to_dcm(a) @ mrp_to_dcm(b))(nu, sigma_true)
    return eqx.tree_at(lambda p: p.sigma_meas, placeholder, jax.vmap(dcm_to_mrp)(dcm_meas))


def residuals(params, problem: InertiaProblem) -> Float[Array, " m"]:
    """Normalised attitude misfits at the samples, shape (3 n,)."""
    sigma = attitude_history(problem, params)
    miss = jax.vmap(fx.mrp_subtract)(sigma, problem.sigma_meas)
    return (problem.weights[:, None] * miss / problem.noise).ravel()


def loss(params, problem: InertiaProblem):
    r"""Scalar loss $\sum_i r_i^2$ (chi-square with $3n$ terms at the truth)."""
    r = residuals(params, problem)
    return jnp.sum(r * r)


def initial_guess(problem: InertiaProblem, inertia_scale=10.0):
    """A data-driven start: isotropic inertia `inertia_scale` [kg m^2], the first measured
    attitude, and the rate from the first two measurements ($\\omega \\approx 4\\,\\delta\\sigma/\\Delta t$)."""
    s0, s1 = problem.sigma_meas[0], problem.sigma_meas[1]
    omega = 4.0 * fx.mrp_subtract(s1, s0) / problem.sample_dt
    return pack(inertia_scale * jnp.eye(3), omega, s0)


@dataclasses.dataclass(frozen=True)
class InertiaResult:
    """What `solve` reports.

    - `inertia` (3, 3) [kg m^2] estimate; `error` (6,) estimate minus truth of the entries
      `ENTRIES` [kg m^2]; `std` (6,) their standard errors from $(J^TJ)^{-1}$ [kg m^2];
      `max_normalised_error` $\\max_k |error_k| / std_k$; `omega0_error` [rad/s] (norm).
    - `chi2` ($\\sum r^2$ at the solution; about $3n - 12$ for a consistent fit), `num_residuals`,
      `iterations`, `result`, `compile_time_s`, `run_time_s`.
    - `jacobian`: $\\partial r/\\partial p$ (m, 12) at the solution (full window; the solver's own).
    """

    inertia: np.ndarray
    error: np.ndarray
    std: np.ndarray
    max_normalised_error: float
    omega0_error: float
    chi2: float
    num_residuals: int
    jacobian: np.ndarray
    iterations: int
    result: str
    compile_time_s: float
    run_time_s: float


_dense_residuals = dense_jacobian(residuals, "fwd")


@eqx.filter_jit
def _solve(problem, params0, solver, max_steps):
    p, r, J, num_steps, result = least_squares(
        _dense_residuals, problem, params0, solver, max_steps
    )
    # Covariance of the parameters, mapped to the inertia entries.
    cov_p = jnp.linalg.inv(J.T @ J)
    G = jax.jacfwd(lambda q: entries(cholesky_to_inertia(q[:6])))(p)
    cov_I = G @ cov_p @ G.T
    return p, r, J, jnp.sqrt(jnp.diag(cov_I)), num_steps, result


def solve(problem: InertiaProblem, params0=None, *, windows=None, solver=None, max_steps: int = 64):
    """Estimate inertia, initial rate and attitude.

    The attitude misfit is strongly non-convex in the inertia over a long tumble, so the fit
    grows its data window: it solves with the samples in $[0, w_1]$, restarts from that solution
    with $[0, w_2]$, and so on (the windows are sample weights: one compiled solve serves all).

    **Arguments:** `params0` (12,) (default `initial_guess(problem)`), `windows` [s] (increasing,
    last = T; default `(T/4, T/2, T)`), `solver` (default
    `optimistix.LevenbergMarquardt(rtol=1e-8, atol=1e-8)`), `max_steps` per window.

    **Returns:** `(params, InertiaResult)`; `unpack(params)` gives `(I_B, omega0, sigma0)`; the
    iterations and wall times are summed over the windows.
    """
    if params0 is None:
        params0 = initial_guess(problem)
    if solver is None:
        solver = optx.LevenbergMarquardt(rtol=1e-8, atol=1e-8)
    if windows is None:
        windows = (problem.T / 4, problem.T / 2, problem.T)
    windows = [float(w) for w in windows]
    if any(b <= a for a, b in zip(windows, windows[1:])) or windows[-1] != problem.T:
        fail("inertia.solve", "windows", f"must increase and end at T = {problem.T}", "s", windows)
    t = np.arange(problem.sigma_meas.shape[0]) * problem.sample_dt
    p = jnp.asarray(params0, float)
    steps, t_c, t_r = 0, 0.0, 0.0
    for w in windows:
        prob_w = eqx.tree_at(lambda q: q.weights, problem, jnp.asarray(t <= w + 1e-9, float))
        (p, r, J, std, n, result), c, run = timed_solve(_solve, prob_w, p, solver, int(max_steps))
        steps, t_c, t_r = steps + int(n), t_c + c, t_r + run
    I_est, omega0, _ = unpack(p)
    I_true, omega_true, _ = unpack(problem.true_params)
    err = np.asarray(entries(I_est) - entries(I_true))
    std = np.asarray(std)
    info = InertiaResult(
        inertia=np.asarray(I_est),
        error=err,
        std=std,
        max_normalised_error=float(np.max(np.abs(err) / std)),
        omega0_error=float(np.linalg.norm(np.asarray(omega0 - omega_true))),
        chi2=float(jnp.sum(r * r)),
        num_residuals=int(r.shape[0]),
        jacobian=np.asarray(J),
        iterations=steps,
        result=solver_message(result),
        compile_time_s=t_c,
        run_time_s=t_r,
    )
    return p, info
