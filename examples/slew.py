r"""Rest-to-rest slew with piecewise-constant wheel torques on the controller clock.

A rigid hub with reaction wheels (`effectors.ReactionWheels`, balanced, at rest) starts at rest at
$\boldsymbol\sigma_{B/N}(0) = \boldsymbol\sigma_0$ and must be at rest at the reference attitude
$\boldsymbol\sigma_{R/N}$ at $t = T$. The decision variables are the wheel motor torques held
constant over $N$ control intervals of length $T/N$ (the flight-software clock period), given to
the wheels as a `jaxsim.PiecewiseConstant` signal whose switch times lie on the RK4 step grid (the
fixed-step driver evaluates such a signal at the step midpoint, so each step sees exactly the
value held over it: zero-order hold). The torques are bounded through $u = u_{max}\tanh p$.

Least-squares residual:

$$\mathbf r(p) = \Big[\boldsymbol\sigma_{B/R}(T),\ \tau\,\boldsymbol\omega_{B/N}(T)\ \Big(,\
\sqrt{\rho/N}\;\mathbf u/u_{max}\Big)\Big],$$

with $\boldsymbol\sigma_{B/R}$ from `effectors.mrp_subtract` and the rate weight $\tau$ [s] (default $T$,
so that both terminal terms are angles). By default (effort weight $\rho = 0$) these are 6
equations in $3N$ unknowns, solved by `optimistix.GaussNewton`, whose steps are minimum-norm
least-squares steps (QR): started from zero torque, the first step is the minimum-effort profile
of the linearised slew, and the iteration converges quadratically onto the terminal constraint
(errors at round-off level) close to that minimum-effort profile. With $\rho > 0$ the effort
residuals are appended (a regularised problem whose optimum has $O(\rho)$ terminal errors); note
that Gauss-Newton/Levenberg-Marquardt then converge only linearly, since the neglected curvature
$\sum_i r_i\nabla^2 r_i$ is of the same order as the regulariser; use `optimistix.BFGS` there.

With the wheels and the hub at rest the total angular momentum is zero for all time, so
$\boldsymbol\omega\times\mathbf H = 0$ and the hub obeys the linear law
$[I_{RW}]\dot{\boldsymbol\omega} = -[G_s]\mathbf u$, $[I_{RW}] = [I] - \sum_i J_{s,i}\hat g_i\hat g_i^T$:
an eigenaxis rotation driven by a bang-bang profile (`eigenaxis_bang_bang`) is then an exact
rest-to-rest solution, the natural intuition to compare the optimised profile with.

**Assumptions and limitations:** wheels start at rest (the bang-bang reference needs zero total
momentum); no wheel speed/power limits; the slew must stay below 360 deg (MRP switching is
handled by the spacecraft's step map, the error by `mrp_subtract`).

**Reference:** Schaub & Junkins, *Analytical Mechanics of Space Systems*, 4th ed., sec. 3.7 (MRPs)
and 4.5 (reaction wheels); Bilimoria & Wie, "Time-optimal three-axis reorientation of a rigid
spacecraft", J. Guidance, Control, and Dynamics 16(3), 1993 (eigenaxis bang-bang as the reference
manoeuvre).
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
from jaxsim.signals import PiecewiseConstant
from jaxsim.validation import as_array, check_positive, fail

from ._common import dense_jacobian, least_squares, solver_message, timed_solve


_CLS = "slew.make_problem"
# Default hub (wheels included, Basilisk convention) [kg m^2], as in notebook 02.
_I_B = np.array([[15.0, 0.5, -0.3], [0.5, 12.0, 0.2], [-0.3, 0.2, 10.0]])
_WHEEL = "rw"


class SlewProblem(eqx.Module):
    """A rest-to-rest slew (see the module docstring); build it with `make_problem`.

    **Fields:** `spacecraft` (hub + wheels, torque signal with placeholder values), `y0`
    (initial state), `sigma_RN` [-] (target), `u_max` [N m], `rate_scale` [s]; static: `T` [s],
    `num_intervals`, `dt` [s], `effort_weight` [-].
    """

    spacecraft: fx.Spacecraft
    y0: dict
    sigma_RN: Float[Array, "3"]
    u_max: Float[Array, ""]
    rate_scale: Float[Array, ""]
    T: float = eqx.field(static=True)
    num_intervals: int = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    effort_weight: float = eqx.field(static=True)  # static: 0 removes the effort residuals

    @property
    def num_wheels(self) -> int:
        return self.spacecraft.state_effectors[0].gsHat_B.shape[0]

    @property
    def interval(self) -> float:
        """Controller clock period $T/N$ [s]."""
        return self.T / self.num_intervals


def make_problem(
    *,
    sigma_BN0=(0.0, 0.0, 0.0),
    sigma_RN=None,
    T=30.0,
    num_intervals=15,
    dt=0.5,
    u_max=0.1,
    IHubPntBc_B=_I_B,
    mass=300.0,
    gsHat_B=np.eye(3),
    Js=0.05,
    rate_scale=None,
    effort_weight=0.0,
) -> SlewProblem:
    r"""Set up a slew.

    **Arguments:**

    - `sigma_BN0`: initial attitude [-]; `sigma_RN`: target attitude [-] (default: 60 deg about
      $(1, 2, -1)/\sqrt6$).
    - `T`: slew time [s]; `num_intervals`: $N$ control intervals; `dt`: RK4 step [s]; $T/N$ must be
      a whole number of steps (the torque switches lie on the step grid).
    - `u_max`: torque bound per wheel [N m] (tanh parametrisation).
    - `IHubPntBc_B` [kg m^2] (wheels included), `mass` [kg], `gsHat_B` (n, 3), `Js` [kg m^2].
    - `rate_scale`: $\tau$ [s] (default $T$); `effort_weight`: $\rho$ [-] (default 0: terminal
      residuals only, minimum-norm Gauss-Newton steps).
    """
    T = float(check_positive(_CLS, "T", as_array(_CLS, "T", T, "s", ()), "s"))
    dt = float(check_positive(_CLS, "dt", as_array(_CLS, "dt", dt, "s", ()), "s"))
    if int(num_intervals) != num_intervals or num_intervals < 1:
        fail(_CLS, "num_intervals", "must be a positive integer", "", num_intervals)
    num_intervals = int(num_intervals)
    steps = T / num_intervals / dt
    if abs(steps - round(steps)) > 1e-9 * max(1.0, steps) or round(steps) < 1:
        fail(_CLS, "dt", f"must divide the control interval T/N = {T / num_intervals}", "s", dt)
    if sigma_RN is None:
        sigma_RN = np.tan(np.deg2rad(60.0) / 4.0) * np.array([1.0, 2.0, -1.0]) / np.sqrt(6.0)
    sigma_RN = as_array(_CLS, "sigma_RN", sigma_RN, "-", (3,))
    sigma_BN0 = as_array(_CLS, "sigma_BN0", sigma_BN0, "-", (3,))
    u_max = check_positive(_CLS, "u_max", as_array(_CLS, "u_max", u_max, "N m", ()), "N m")
    tau = T if rate_scale is None else rate_scale
    tau = check_positive(_CLS, "rate_scale", as_array(_CLS, "rate_scale", tau, "s", ()), "s")
    rho = float(as_array(_CLS, "effort_weight", effort_weight, "-", ()))
    if rho < 0:
        fail(_CLS, "effort_weight", "must be >= 0", "-", rho)
    n = np.asarray(gsHat_B).reshape(-1, 3).shape[0]
    times = np.arange(1, num_intervals) * (T / num_intervals)
    signal = PiecewiseConstant(times, np.zeros((num_intervals, n)))
    rw = fx.ReactionWheels(gsHat_B, Js, motor_torque=signal, name=_WHEEL)
    sc = fx.Spacecraft(fx.Hub(mass, IHubPntBc_B), state_effectors=(rw,))
    y0 = sc.init_state(np.zeros(3), np.zeros(3), sigma_BN0, np.zeros(3))
    return SlewProblem(sc, y0, sigma_RN, u_max, tau, T, num_intervals, dt, rho)


def torques(problem: SlewProblem, params) -> Float[Array, "N n"]:
    r"""Wheel motor torques [N m] per control interval, $u = u_{max}\tanh p$, shape (N, n)."""
    return problem.u_max * jnp.tanh(params)


def params_from_torques(problem: SlewProblem, u) -> Float[Array, "N n"]:
    r"""Inverse of `torques` ($|u| < u_{max}$)."""
    return jnp.arctanh(jnp.asarray(u) / problem.u_max)


def model(problem: SlewProblem, u) -> fx.Spacecraft:
    """The spacecraft with the torque profile `u` [N m], shape (N, n), on the controller clock."""
    return eqx.tree_at(
        lambda s: s.state_effectors[0].motor_torque.values, problem.spacecraft, jnp.asarray(u)
    )


def simulate(problem: SlewProblem, u, *, sample_dt=None, outputs=True):
    """Run the slew with torques `u` [N m]; returns the `jaxsim.Solution` (default samples:
    every control interval; `outputs=False` skips the derived outputs, a smaller compile)."""
    sample_dt = problem.interval if sample_dt is None else sample_dt
    return _simulate(
        model(problem, u), problem.y0, problem.T, dt=problem.dt, sample_dt=sample_dt,
        outputs=outputs,
    )  # fmt: skip


def terminal_errors(problem: SlewProblem, u):
    """`(sigma_BR(T), omega_BN_B(T))` [-], [rad/s] for the torque profile `u` [N m]."""
    sol = _simulate(
        model(problem, u), problem.y0, problem.T, dt=problem.dt, outputs=False, checkpoint=False
    )
    hub = jax.tree.map(lambda a: a[-1], sol.ys["hub"])
    return fx.mrp_subtract(hub["sigma_BN"], problem.sigma_RN), hub["omega_BN_B"]


def residuals(params, problem: SlewProblem) -> Float[Array, " m"]:
    """The least-squares residual of the module docstring, shape (6,) (or (6 + N n,) for rho > 0)."""
    u = torques(problem, params)
    sigma_BR, omega = terminal_errors(problem, u)
    terminal = [sigma_BR, problem.rate_scale * omega]
    if problem.effort_weight == 0.0:
        return jnp.concatenate(terminal)
    effort = jnp.sqrt(problem.effort_weight / problem.num_intervals) * (u / problem.u_max)
    return jnp.concatenate(terminal + [effort.ravel()])


def loss(params, problem: SlewProblem):
    r"""Scalar loss $\sum_i r_i^2$ (for a minimiser such as `optimistix.BFGS`)."""
    r = residuals(params, problem)
    return jnp.sum(r * r)


def effort(problem: SlewProblem, u):
    r"""Control effort $\int_0^T |\mathbf u|^2 dt$ [N^2 m^2 s] of a profile held over the intervals."""
    return jnp.sum(jnp.asarray(u) ** 2) * problem.interval


def eigenaxis_bang_bang(problem: SlewProblem) -> np.ndarray:
    r"""Wheel torques [N m] (N, n) of the eigenaxis bang-bang slew on the controller clock.

    The rotation from $\boldsymbol\sigma_0$ to $\boldsymbol\sigma_{R/N}$ has principal axis $\hat e$ and
    angle $\Phi$; accelerate about $\hat e$ for the first half of the intervals and decelerate for
    the second (an odd middle interval coasts), with the acceleration $a$ that gives $\Phi$ in
    $T$; the torques solve $[G_s]\mathbf u = -[I_{RW}]\hat e\,a$ (least squares for $n > 3$).
    Exact rest-to-rest (zero total momentum, module docstring) up to the RK4 truncation error.
    """
    N, h = problem.num_intervals, problem.interval
    sigma0 = np.asarray(problem.y0["hub"]["sigma_BN"])
    sigma_R0 = np.asarray(fx.mrp_subtract(problem.sigma_RN, sigma0))
    s = np.linalg.norm(sigma_R0)
    if s == 0.0:
        return np.zeros((N, problem.num_wheels))
    e_hat, phi = sigma_R0 / s, 4.0 * np.arctan(s)
    sign = np.where(np.arange(N) < N // 2, 1.0, -1.0)
    if N % 2:
        sign[N // 2] = 0.0
    # Angle per unit acceleration: sum over intervals of (rate at start) h + sign h^2 / 2.
    rate_start = np.concatenate([[0.0], np.cumsum(sign)[:-1]]) * h
    a = phi / np.sum(rate_start * h + 0.5 * sign * h * h)
    rw = problem.spacecraft.state_effectors[0]
    g = np.asarray(rw.gsHat_B)
    I_RW = np.asarray(problem.spacecraft.hub.IHubPntBc_B) - np.einsum(
        "i,ij,ik->jk", np.asarray(rw.Js), g, g
    )
    L = I_RW @ e_hat  # hub torque per unit acceleration [N m s^2]
    u_unit = -np.linalg.lstsq(g.T, L, rcond=None)[0]
    return sign[:, None] * a * u_unit[None, :]


@dataclasses.dataclass(frozen=True)
class SlewResult:
    """What `solve` reports (plain floats).

    - `sigma_BR_norm` [-], `omega_norm` [rad/s]: terminal errors of the optimised profile.
    - `effort` [N^2 m^2 s] ($\\int|u|^2dt$), `u_peak` [N m] (largest wheel torque).
    - `iterations`, `result` (optimistix outcome), `loss` (final $\\sum r^2$).
    - `jacobian`: $\\partial r/\\partial p$ at the solution, shape (m, N n), the one the solver used.
    - `compile_time_s`, `run_time_s`: wall times of compiling and running the solve.
    """

    sigma_BR_norm: float
    omega_norm: float
    effort: float
    u_peak: float
    iterations: int
    result: str
    loss: float
    jacobian: np.ndarray
    compile_time_s: float
    run_time_s: float


_dense_residuals = dense_jacobian(residuals, "fwd")


@eqx.filter_jit
def _solve(problem, params0, solver, max_steps):
    return least_squares(_dense_residuals, problem, params0, solver, max_steps)


def solve(problem: SlewProblem, params0=None, *, solver=None, max_steps: int = 64):
    """Optimise the torque profile.

    **Arguments:** `params0` (N, n) (default 0: no torque), `solver` (default
    `optimistix.GaussNewton(rtol=1e-10, atol=1e-12)`; any optimistix least-squares solver or
    minimiser), `max_steps`.

    **Returns:** `(params, SlewResult)`; `torques(problem, params)` gives the profile [N m].
    """
    if params0 is None:
        params0 = jnp.zeros((problem.num_intervals, problem.num_wheels))
    if solver is None:
        solver = optx.GaussNewton(rtol=1e-10, atol=1e-12)
    (params, r, J, steps, result), t_c, t_r = timed_solve(
        _solve, problem, jnp.asarray(params0, float), solver, int(max_steps)
    )
    u = torques(problem, params)
    rate = np.asarray(r[3:6]) / float(problem.rate_scale)
    info = SlewResult(
        sigma_BR_norm=float(np.linalg.norm(np.asarray(r[:3]))),
        omega_norm=float(np.linalg.norm(rate)),
        effort=float(effort(problem, u)),
        u_peak=float(jnp.max(jnp.abs(u))),
        iterations=int(steps),
        result=solver_message(result),
        loss=float(jnp.sum(r * r)),
        jacobian=np.asarray(J),
        compile_time_s=t_c,
        run_time_s=t_r,
    )
    return params, info
