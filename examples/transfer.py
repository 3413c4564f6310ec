r"""Finite-burn orbit targeting: burn start, duration and thrust direction of one burn in LEO.

A 500 kg spacecraft in a circular low Earth orbit (point-mass Earth) fires one thruster
(`effectors.Thrusters`) through its centre of mass, so the hub does not rotate and the attitude
stays inertially fixed ($\mathcal B = \mathcal N$). The thruster is on (throttle 1) on
$[t_{on}, t_{on} + \Delta t]$; the thrust direction, in $\mathcal N$ (= $\mathcal B$) components, is

$$\hat{\mathbf t} = \cos\beta\,(\cos\alpha\,\hat{\mathbf r}_0 + \sin\alpha\,\hat{\boldsymbol\theta}_0)
+ \sin\beta\,\hat{\mathbf h}_0,$$

with the radial, along-track and orbit-normal unit vectors of the initial orbit at $t = 0$.

The target is the state $(\mathbf r^\star, \mathbf v^\star)$ at $t_f$ reached by a reference burn
(`make_problem(true_burn=...)`): a point on the target orbit at the target time, which fixes all
four parameters (six equations, four unknowns, zero residual at the solution). The residual

$$\mathbf r(p) = \big[\mathbf r(t_f) - \mathbf r^\star,\ \tau\,(\mathbf v(t_f) - \mathbf v^\star)\big]\ \text{[m]},$$

$\tau = 1/n$ (the orbit's time scale), is solved with `optimistix.LevenbergMarquardt`. The
parameters are $p = (t_{on}/t_s, \Delta t/t_s, \alpha, \beta)$ with $t_s$ = `time_scale` [s], so that
all four have comparable sensitivities.

**Differentiable burn edges.** The burn edges are discontinuities of the thrust, and the
parameters move them. Three ways to integrate through them:

- plain fixed-step driver, `PiecewiseConstant` throttle with traced edges: the step holding an
  edge reads the mean throttle over the step, so the derivative w.r.t. $t_{on}$ exists but is
  that of a first-order-in-$h$ treatment of the edge step (exact only for an input that enters
  the drift additively; guide "Controls and trajectory optimization");
- hybrid driver (`simulate(..., discontinuities=[model])`: the thruster's traced `breakpoints()`): every
  edge is a segment boundary and the derivative is that of the exact piecewise solution, but
  the number of RK4 steps per segment is a step function of the edges (jumps of the size of the
  truncation error) and the segment solves (diffrax) support reverse mode only and compile
  slowly;
- **phase time transformation (used here, `PhaseModel`)**: the run is three phases (coast, burn,
  coast) with fixed numbers of RK4 steps $m_k$ and a normalised time $\tau$ on the integer grid;
  in phase $k$, $t = t_k + (L_k/m_k)(\tau - c_k)$ with phase length $L_k$, and the model
  integrated by the ordinary fixed-step driver is $dy/d\tau = (L_k/m_k)\,f(t, y)$. The edges are
  phase boundaries on the $\tau$ grid (the phase of a step is read at its midpoint, exactly the
  zero-order-hold semantics of `held_time`), the thrust is exactly on in the burn phase, and the
  final state is a smooth function of $(t_{on}, \Delta t)$ through the step lengths $L_k/m_k$:
  forward- and reverse-mode derivatives of the discrete solution, agreeing with central finite
  differences to round-off/truncation level, and the same physics as the hybrid driver up to
  the RK4 truncation error.

**Assumptions and limitations:** mass depletion is not modelled (the thruster reports its mass
flow only); point-mass gravity; the phase step counts are fixed at set-up (from the reference
burn and `dt`), so the physical step $L_k/m_k$ changes with the parameters; a phase of negative
length (burn past $t_f$) integrates backwards (no error is raised).

**Reference:** Vallado, *Fundamentals of Astrodynamics and Applications*, 4th ed., sec. 2.5
(orbital elements from r, v) and 6.3 (orbit raising); Betts, *Practical Methods for Optimal
Control*, 2nd ed., sec. 4 (direct shooting).
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
from jaxsim.dynamic_object import AbstractDynamicObject
from jaxsim.signals import held_time
from jaxsim.validation import as_array, check_positive, fail

from ._common import dense_jacobian, least_squares, solver_message, timed_solve


_CLS = "transfer.make_problem"
MU_EARTH = 3.986004418e14  # [m^3/s^2] (EGM2008 / WGS-84 value)
R_EARTH = 6378.1363e3  # [m] equatorial radius (EGM2008)
_THRUSTER = "thruster"
# Reference burn: start [s], duration [s], in-plane angle [rad], out-of-plane angle [rad].
TRUE_BURN = (600.0, 150.0, 0.5 * np.pi + 0.65, 0.05)


class TransferProblem(eqx.Module):
    """A finite-burn targeting problem (module docstring); build it with `make_problem`.

    **Fields:** `spacecraft`, `y0`, `frame_N` (rows $\\hat r_0, \\hat\\theta_0, \\hat h_0$), `r_target_N` [m],
    `v_target_N` [m/s], `velocity_scale` $\\tau$ [s], `time_scale` $t_s$ [s]; static: `t_f` [s],
    `phase_steps` (RK4 steps of the coast, burn and coast phases).
    """

    spacecraft: fx.Spacecraft
    y0: dict
    frame_N: Float[Array, "3 3"]
    r_target_N: Float[Array, "3"]
    v_target_N: Float[Array, "3"]
    velocity_scale: Float[Array, ""]
    time_scale: Float[Array, ""]
    t_f: float = eqx.field(static=True)
    phase_steps: tuple = eqx.field(static=True)  # RK4 steps (coast, burn, coast)


class PhaseModel(AbstractDynamicObject):
    r"""A spacecraft integrated in the phase time $\tau$ (module docstring): phases
    [0, t_on], [t_on, t_on + duration], [t_on + duration, t_f] of `phase_steps` unit steps each;
    the thruster named `thruster` is commanded to full throttle in the burn phase (through
    `args`), and $dy/d\tau = (L_k/m_k) f(t, y)$.

    **Arguments:** `spacecraft`, `t_on` [s], `duration` [s] (may be traced), `t_f` [s],
    `phase_steps` (three positive integers), `thruster` (name of the thruster effector).

    **Assumptions and limitations:** the spacecraft's own scheduled signals would be read at the
    $\tau$-step midpoint, not at $t$: give it constant inputs only (the burn comes through `args`).
    """

    spacecraft: fx.Spacecraft
    t_on: Float[Array, ""]
    duration: Float[Array, ""]
    t_f: float = eqx.field(static=True)
    phase_steps: tuple = eqx.field(static=True)
    thruster: str = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def __init__(self, spacecraft, t_on, duration, t_f, phase_steps, thruster=_THRUSTER):
        self.spacecraft = spacecraft
        self.t_on = jnp.asarray(t_on, float)
        self.duration = jnp.asarray(duration, float)
        self.t_f = float(t_f)
        self.phase_steps = tuple(int(m) for m in phase_steps)
        self.thruster = thruster
        self.name = spacecraft.name

    @property
    def horizon(self) -> float:
        r"""Total phase time $\sum_k m_k$ (one unit per RK4 step)."""
        return float(sum(self.phase_steps))

    def _phase(self, tau):
        """Phase index, physical step length [s] and physical time [s] at phase time `tau`."""
        m = jnp.asarray(self.phase_steps, float)
        c = jnp.concatenate([jnp.zeros(1), jnp.cumsum(m)])
        # The phase of a step is fixed at its midpoint (held_time): all RK stages agree.
        k = jnp.sum(held_time(tau) > c[1:3]).astype(int)
        t_b = jnp.stack(
            [jnp.zeros(()), self.t_on, self.t_on + self.duration, jnp.asarray(self.t_f)]
        )
        h = (t_b[k + 1] - t_b[k]) / m[k]
        return k, h, t_b[k] + h * (tau - c[k])

    def time(self, tau):
        """Physical time [s] at phase time `tau`."""
        return self._phase(tau)[2]

    def init_state(self, *args, **kwargs):
        return self.spacecraft.init_state(*args, **kwargs)

    def _args(self, k, args):
        cmd = {self.thruster: {"throttle": jnp.where(k == 1, 1.0, 0.0)}}
        return cmd if args is None else {**args, **cmd}

    def drift(self, tau, y, args):
        k, h, t = self._phase(tau)
        f = self.spacecraft.drift(t, y, self._args(k, args))
        return jax.tree.map(lambda x: h * x, f)

    def step_map(self, tau, y):
        return self.spacecraft.step_map(self.time(tau), y)


def circular_orbit(altitude, inclination, mu=MU_EARTH):
    """Position [m] and velocity [m/s] at the ascending node of a circular orbit (RAAN 0)."""
    r = R_EARTH + altitude
    v = np.sqrt(mu / r)
    ci, si = np.cos(inclination), np.sin(inclination)
    return np.array([r, 0.0, 0.0]), v * np.array([0.0, ci, si])


def make_problem(
    *,
    true_burn=TRUE_BURN,
    altitude=400e3,
    inclination=np.deg2rad(51.6),
    mass=500.0,
    max_thrust=20.0,
    Isp=220.0,
    t_f=2400.0,
    dt=10.0,
    time_scale=100.0,
) -> TransferProblem:
    """Set up the targeting problem; the target is the state at `t_f` after `true_burn`.

    **Arguments:** `true_burn` = (start [s], duration [s], alpha [rad], beta [rad]), `altitude` [m]
    of the circular initial orbit, `inclination` [rad], `mass` [kg], `max_thrust` [N], `Isp` [s],
    `t_f` [s] (the burn must end before), `dt` [s] (RK4 step), `time_scale` $t_s$ [s].
    """
    t_f = float(check_positive(_CLS, "t_f", as_array(_CLS, "t_f", t_f, "s", ()), "s"))
    dt = float(check_positive(_CLS, "dt", as_array(_CLS, "dt", dt, "s", ()), "s"))
    alt = check_positive(_CLS, "altitude", as_array(_CLS, "altitude", altitude, "m", ()), "m")
    ts = check_positive(_CLS, "time_scale", as_array(_CLS, "time_scale", time_scale, "s", ()), "s")
    burn = np.asarray(as_array(_CLS, "true_burn", true_burn, "s, s, rad, rad", (4,)))
    if burn[0] < 0 or burn[1] <= 0 or burn[0] + burn[1] >= t_f:
        fail(_CLS, "true_burn", f"must have 0 <= start, duration > 0, end < t_f = {t_f}", "s", burn)
    r0, v0 = circular_orbit(float(alt), float(inclination))
    r_hat = r0 / np.linalg.norm(r0)
    h_hat = np.cross(r0, v0) / np.linalg.norm(np.cross(r0, v0))
    frame = np.stack([r_hat, np.cross(h_hat, r_hat), h_hat])
    # Placeholder direction (`model` sets it); the throttle comes from PhaseModel through args.
    thr = fx.Thrusters(np.zeros((1, 3)), frame[1:2], [max_thrust], [Isp], name=_THRUSTER)
    hub = fx.Hub(mass, np.diag([100.0, 120.0, 80.0]))
    sc = fx.Spacecraft(hub, dynamic_effectors=(thr,), gravity=(fx.PointMassGravity(MU_EARTH),))
    y0 = sc.init_state(r0, v0, np.zeros(3), np.zeros(3))
    n = np.sqrt(MU_EARTH / np.linalg.norm(r0) ** 3)
    zero = jnp.zeros(3)
    lengths = (burn[0], burn[1], t_f - burn[0] - burn[1])
    steps = tuple(max(1, int(np.ceil(x / dt - 1e-9))) for x in lengths)
    problem = TransferProblem(sc, y0, frame, zero, zero, 1.0 / n, ts, t_f, steps)
    r_t, v_t = final_state(problem, burn_to_params(problem, burn))
    return eqx.tree_at(lambda p: (p.r_target_N, p.v_target_N), problem, (r_t, v_t))


def burn_to_params(problem: TransferProblem, burn) -> Float[Array, "4"]:
    """(start [s], duration [s], alpha [rad], beta [rad]) to the scaled parameters $p$."""
    b = jnp.asarray(burn, float)
    return jnp.stack([b[0] / problem.time_scale, b[1] / problem.time_scale, b[2], b[3]])


def params_to_burn(problem: TransferProblem, params) -> Float[Array, "4"]:
    """Inverse of `burn_to_params`."""
    p = jnp.asarray(params, float)
    return jnp.stack([p[0] * problem.time_scale, p[1] * problem.time_scale, p[2], p[3]])


def thrust_direction(problem: TransferProblem, alpha, beta) -> Float[Array, "3"]:
    r"""$\hat{\mathbf t}$ in $\mathcal N$ components (module docstring)."""
    f = problem.frame_N
    return jnp.cos(beta) * (jnp.cos(alpha) * f[0] + jnp.sin(alpha) * f[1]) + jnp.sin(beta) * f[2]


def model(problem: TransferProblem, params) -> PhaseModel:
    """The phase-time model of the burn of `params` (possibly traced)."""
    t_on, dur, alpha, beta = params_to_burn(problem, params)
    t_hat = thrust_direction(problem, alpha, beta)[None, :]
    sc = eqx.tree_at(lambda s: s.dynamic_effectors[0].tHat_B, problem.spacecraft, t_hat)
    return PhaseModel(sc, t_on, dur, problem.t_f, problem.phase_steps)


@eqx.filter_jit
def trajectory(problem: TransferProblem, params):
    """RK4 run of the burn of `params` sampled at every step: `(t [s], r_BN_N [m], v_BN_N [m/s])`."""
    m = model(problem, params)
    sol = _simulate(
        m, problem.y0, m.horizon, dt=1.0, sample_dt=1.0, outputs=False, checkpoint=False
    )
    hub = sol.ys["hub"]
    return jax.vmap(m.time)(sol.ts), hub["r_BN_N"], hub["v_BN_N"]


def final_state(problem: TransferProblem, params):
    """`(r_BN_N, v_BN_N)` [m], [m/s] at `t_f` after the burn of `params`."""
    _, r, v = trajectory(problem, params)
    return r[-1], v[-1]


def residuals(params, problem: TransferProblem) -> Float[Array, "6"]:
    """Position [m] and scaled velocity [m] misses at `t_f` (module docstring)."""
    r, v = final_state(problem, params)
    dr = r - problem.r_target_N
    dv = v - problem.v_target_N
    return jnp.concatenate([dr, problem.velocity_scale * dv])


def loss(params, problem: TransferProblem):
    r"""Scalar loss $\sum_i r_i^2$ [m^2]."""
    r = residuals(params, problem)
    return jnp.sum(r * r)


def orbital_elements(r_N, v_N, mu=MU_EARTH) -> dict:
    """Semi-major axis [m], eccentricity [-], inclination [rad] from position and velocity."""
    r_N, v_N = np.asarray(r_N), np.asarray(v_N)
    r, v2 = np.linalg.norm(r_N), v_N @ v_N
    a = 1.0 / (2.0 / r - v2 / mu)
    h = np.cross(r_N, v_N)
    e_vec = np.cross(v_N, h) / mu - r_N / r
    return {"a": a, "e": np.linalg.norm(e_vec), "i": np.arccos(h[2] / np.linalg.norm(h))}


@dataclasses.dataclass(frozen=True)
class TransferResult:
    """What `solve` reports (plain floats).

    - `position_miss` [m], `velocity_miss` [m/s]: $|\\mathbf r(t_f) - \\mathbf r^\\star|$, $|\\mathbf v(t_f) - \\mathbf v^\\star|$.
    - `burn`: (start [s], duration [s], alpha [rad], beta [rad]) found; `delta_v` [m/s] of the burn.
    - `jacobian`: $\\partial r/\\partial p$ (6, 4) [m] at the solution (the one the solver used).
    - `iterations`, `result`, `compile_time_s`, `run_time_s`.
    """

    position_miss: float
    velocity_miss: float
    burn: tuple
    delta_v: float
    jacobian: np.ndarray
    iterations: int
    result: str
    compile_time_s: float
    run_time_s: float


_dense_residuals = dense_jacobian(residuals, "fwd")


@eqx.filter_jit
def _solve(problem, params0, solver, max_steps):
    return least_squares(_dense_residuals, problem, params0, solver, max_steps)


def solve(problem: TransferProblem, params0, *, solver=None, max_steps: int = 32):
    """Find the burn that reaches the target state.

    **Arguments:** `params0` (4,) scaled initial guess (see `burn_to_params`), `solver` (default
    `optimistix.LevenbergMarquardt(rtol=1e-10, atol=1e-6)`), `max_steps`.

    **Returns:** `(params, TransferResult)`.
    """
    if solver is None:
        solver = optx.LevenbergMarquardt(rtol=1e-10, atol=1e-6)
    (params, r, J, steps, result), t_c, t_r = timed_solve(
        _solve, problem, jnp.asarray(params0, float), solver, int(max_steps)
    )
    burn = np.asarray(params_to_burn(problem, params))
    thr = problem.spacecraft.dynamic_effectors[0]
    accel = float(thr.max_thrust[0] / problem.spacecraft.hub.mass)
    info = TransferResult(
        position_miss=float(np.linalg.norm(np.asarray(r[:3]))),
        velocity_miss=float(np.linalg.norm(np.asarray(r[3:])) / float(problem.velocity_scale)),
        burn=tuple(float(x) for x in burn),
        delta_v=accel * float(burn[1]),
        jacobian=np.asarray(J),
        iterations=int(steps),
        result=solver_message(result),
        compile_time_s=t_c,
        run_time_s=t_r,
    )
    return params, info
