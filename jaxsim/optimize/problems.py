r"""Published reference problems of trajectory optimization, built on `jaxsim.optimize`.

**Maximum-radius low-thrust orbit transfer** (Bryson & Ho, *Applied Optimal Control*, Hemisphere,
1975, sec. 2.5; Bryson, *Dynamic Optimization*, Addison Wesley, 1999, sec. 4.4). A spacecraft with
constant thrust $T$ and mass flow $\dot m$, starting on a circular orbit of radius $r_0$, steers
its thrust angle $\phi(t)$ (from the local horizontal) to reach the largest circular orbit at the
fixed final time $t_f$. In canonical units ($\mu = r_0 = m_0 = 1$), polar coordinates:

$$\dot r = u,\quad \dot\theta = v/r,\quad \dot u = \frac{v^2}{r} - \frac{\mu}{r^2}
+ \frac{T\sin\phi}{m_0 - \dot m t},\quad \dot v = -\frac{uv}{r} + \frac{T\cos\phi}{m_0 - \dot m t},$$

maximize $r(t_f)$ subject to $u(t_f) = 0$, $v(t_f) = \sqrt{\mu/r(t_f)}$, from $r = 1$, $\theta = 0$,
$u = 0$, $v = 1$. Bryson & Ho's data: $T = 0.1405$, $\dot m = 0.0749$, $t_f = 3.32$ (193 days for
a Earth-Mars transfer with $r_0$ = 1 AU); their optimum $r(t_f) = 1.525$.

The control is `jaxsim.controls.PiecewiseLinear` over `num_knots` equally spaced knots (values
unbounded: the thrust direction sweeps through more than a half turn), integrated by RK4.

**Goddard rocket: maximum altitude with drag, free final time** (Goddard, "A method of reaching
extreme altitudes", Smithsonian Misc. Coll. 71(2), 1919; the normalised data of Dolan, Moré &
Munson, "Benchmarking optimization software with COPS 3.0", ANL/MCS-TM-273, 2004, problem
"rocket"). A vertical ascent with altitude $h$, speed $v$, mass $m$ and thrust $T \in [0,
T_{max}]$, in units of the initial radius, mass and surface gravity:

$$\dot h = v,\quad \dot v = \frac{T - D}{m} - \frac{1}{h^2},\quad \dot m = -T/c,\qquad
D = D_c v^2 e^{-h_c (h - 1)},$$

from $h = 1$, $v = 0$, $m = 1$ to the largest $h(t_f)$ with the final mass $m(t_f) = m_c$ and
$t_f$ free. Data: $T_{max} = 3.5$, $c = 0.5$, $D_c = 310$, $h_c = 500$, $m_c = 0.6$. The optimum
is full thrust, a singular arc where drag and thrust balance, then a coast; COPS 3.0 reports
$h(t_f) = 1.01283$ (all its mesh sizes 100-800 agree to that digit).
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, PyTree

from .._model._controls import PiecewiseLinear
from .._model._dynamic_object import AbstractDynamicObject
from .._model._signals import PiecewiseConstant
from .._simulate import simulate
from ._problem import Problem
from ._transcription import interior_nodes, shoot


# Bryson & Ho (1975), sec. 2.5, canonical units (mu = r0 = m0 = 1).
BRYSON_HO = {"mu": 1.0, "thrust": 0.1405, "mass_flow": 0.0749, "t_f": 3.32}
BRYSON_HO_RADIUS = 1.525  # published optimum r(t_f) [r0] (Bryson & Ho 1975, fig. 2.5.1)


class OrbitRaising(AbstractDynamicObject):
    r"""The planar orbit-raising dynamics of the module docstring (canonical units).

    **Arguments:** `steering` (a signal of time: the thrust angle $\phi$ [rad] from the local
    horizontal, positive outwards), `mu`, `thrust`, `mass_flow` (canonical units; may be
    traced), `name`.

    State: `{"r", "theta", "u", "v"}` (radius, polar angle, radial and tangential velocity).
    """

    steering: object
    mu: jnp.ndarray
    thrust: jnp.ndarray
    mass_flow: jnp.ndarray
    name: str = "orbit"

    def __init__(
        self,
        steering: Callable[[ArrayLike], ArrayLike],
        mu: ArrayLike = 1.0,
        thrust: ArrayLike = 0.1405,
        mass_flow: ArrayLike = 0.0749,
        name: str = "orbit",
    ) -> None:
        self.steering = steering
        self.mu = jnp.asarray(mu, float)
        self.thrust = jnp.asarray(thrust, float)
        self.mass_flow = jnp.asarray(mass_flow, float)
        self.name = name

    def init_state(self, r=1.0, theta=0.0, u=0.0, v=None):
        v = jnp.sqrt(self.mu / r) if v is None else v
        return {k: jnp.asarray(x, float) for k, x in zip("r theta u v".split(), (r, theta, u, v))}

    def drift(self, t, y, args):
        r, u, v = y["r"], y["u"], y["v"]
        w = self.steering(t)
        a = self.thrust / ((1.0 - self.mass_flow * t) * jnp.sqrt(w[0] ** 2 + w[1] ** 2))
        return {
            "r": u,
            "theta": v / r,
            "u": v * v / r - self.mu / (r * r) + a * w[0],
            "v": -u * v / r + a * w[1],
        }


def _model(w, args, t_f):
    knots = jnp.linspace(0.0, 1.0, w.shape[0]) * t_f
    steering = PiecewiseLinear(knots, w)
    return OrbitRaising(steering, args["mu"], args["thrust"], args["mass_flow"])


def orbit_raising(
    *,
    num_knots: int = 41,
    num_segments: int = 4,
    steps_per_segment: int = 50,
    multiple_shooting: bool = False,
    data: dict | None = None,
) -> Problem:
    r"""The maximum-radius transfer as a `Problem`: minimize $-r(t_f)$ subject to
    $[u(t_f),\ v(t_f) - \sqrt{\mu/r(t_f)}] = 0$.

    **Arguments:** `num_knots` (control knots, equally spaced on $[0, t_f]$), `num_segments`,
    `steps_per_segment` (RK4 steps: `num_segments * steps_per_segment` in all),
    `multiple_shooting` (node states at the segment edges become decision variables, with
    defect constraints), `data` (default `BRYSON_HO`: `mu`, `thrust`, `mass_flow`, `t_f`; they
    are the problem's `args`, so another data set does not recompile).

    Decision variables: `{"phi": (num_knots,)}` [rad] (+ `"nodes"` for multiple shooting);
    initial guess: tangential thrust ($\phi = 0$), nodes from a run of that guess.
    `problem.run(x, args)` gives the states at the segment edges (a `Shot`),
    `trajectory(problem, x)` a sampled run.
    """
    data = dict(BRYSON_HO if data is None else data)
    args = {k: jnp.asarray(data[k], float) for k in ("mu", "thrust", "mass_flow", "t_f")}
    K, m = int(num_segments), int(steps_per_segment)

    def run(x, a):
        model = _model(x["w"], a, a["t_f"])
        y0 = model.init_state()
        return shoot(model, y0, a["t_f"], num_segments=K, steps_per_segment=m, nodes=x.get("nodes"))

    def functions(x, a):
        shot = run(x, a)
        r, u, v = (shot.ys[k][-1] for k in "ruv")
        terminal = jnp.stack([u, v - jnp.sqrt(a["mu"] / r)])
        unit = jnp.sum(x["w"] ** 2, axis=1) - 1.0  # unit direction at the knots (fixes the scale)
        return -r, jnp.concatenate([terminal, unit, shot.defects]), None

    x0 = {"w": jnp.zeros((int(num_knots), 2)).at[:, 1].set(1.0)}
    if multiple_shooting:
        x0["nodes"] = interior_nodes(run(x0, args))
    problem = Problem.combined(functions, x0, args=args)
    problem.run = run  # x, args -> Shot (the states at the segment edges)
    problem.num_steps = K * m
    return problem


# Dolan, Moré & Munson (2004), COPS 3.0 "rocket" (normalised Goddard data).
GODDARD = {"thrust_max": 3.5, "c": 0.5, "drag": 310.0, "h_c": 500.0, "m_final": 0.6}
GODDARD_ALTITUDE = 1.01283  # published optimum h(t_f) [initial radius] (COPS 3.0)


class GoddardRocket(AbstractDynamicObject):
    r"""The vertical ascent of the Goddard problem (module docstring; normalised units).

    **Arguments:** `thrust` (a signal of time [normalised force], or None: the drift reads
    `args["thrust"]`, a segment's held value from `shoot(..., segment_args=)`), `c` (exhaust
    speed), `drag` ($D_c$), `h_c` (density scale), `name`. State: `{"h", "v", "m"}`.
    """

    thrust: object
    c: jnp.ndarray
    drag: jnp.ndarray
    h_c: jnp.ndarray
    name: str = "rocket"

    def __init__(self, thrust=None, c=0.5, drag=310.0, h_c=500.0, name="rocket") -> None:
        self.thrust = thrust
        self.c = jnp.asarray(c, float)
        self.drag = jnp.asarray(drag, float)
        self.h_c = jnp.asarray(h_c, float)
        self.name = name

    def init_state(self, h=1.0, v=0.0, m=1.0):
        return {k: jnp.asarray(x, float) for k, x in zip("hvm", (h, v, m))}

    def drift(self, t, y, args):
        h, v, m = y["h"], y["v"], y["m"]
        T = args["thrust"] if self.thrust is None else self.thrust(t)
        D = self.drag * v * v * jnp.exp(-self.h_c * (h - 1.0))
        return {"h": v, "v": (T - D) / m - 1.0 / (h * h), "m": -T / self.c}


def goddard_rocket(
    *,
    num_intervals: int = 100,
    steps_per_interval: int = 2,
    control: str = "signal",
    data: dict | None = None,
) -> Problem:
    r"""The Goddard ascent as a `Problem`, single shooting as the guide teaches: thrust held over
    `num_intervals` equal intervals of the free horizon $t_f$, `steps_per_interval` RK4 steps
    each; minimize $-h(t_f)$ subject to $m(t_f) - m_c = 0$.

    `control`: `"signal"` (a `PiecewiseConstant` over the horizon switching at the segment
    edges, as the guide's examples) or `"segments"` (each segment's held value through
    `shoot(..., segment_args=)`: the same problem, whose steps read one value; cheaper
    derivatives for many intervals).

    Decision variables: `{"thrust": (num_intervals,)}` (fractions of $T_{max}$, in [0, 1]) and
    `{"t_f": ()}` (tenths of a time unit, in [0.1, 100]); initial guess: half thrust, $t_f$ = 0.2.
    `data` (default `GODDARD`) is the problem's `args` (another data set does not recompile).
    """
    data = dict(GODDARD if data is None else data)
    args = {k: jnp.asarray(data[k], float) for k in GODDARD}
    N, m = int(num_intervals), int(steps_per_interval)

    if control not in ("signal", "segments"):
        raise ValueError(
            f"goddard_rocket: `control` must be 'signal' or 'segments'; got {control!r}."
        )

    def run(x, a):
        t_f = 0.1 * x["t_f"]
        thrust = a["thrust_max"] * x["thrust"]
        if control == "segments":
            model = GoddardRocket(None, a["c"], a["drag"], a["h_c"])
            return shoot(
                model, model.init_state(), t_f, num_segments=N, steps_per_segment=m,
                segment_args={"thrust": thrust},
            )  # fmt: skip
        signal = PiecewiseConstant(jnp.arange(1, N) * (t_f / N), thrust)
        model = GoddardRocket(signal, a["c"], a["drag"], a["h_c"])
        return shoot(model, model.init_state(), t_f, num_segments=N, steps_per_segment=m)

    def functions(x, a):
        end = jax.tree.map(lambda v: v[-1], run(x, a).ys)
        return -end["h"], jnp.reshape(end["m"] - a["m_final"], (1,)), None

    x0 = {"thrust": jnp.full(N, 0.5), "t_f": jnp.asarray(2.0)}
    problem = Problem.combined(
        functions, x0, lower={"thrust": 0.0, "t_f": 0.1}, upper={"thrust": 1.0, "t_f": 100.0},
        args=args,
    )  # fmt: skip
    problem.run = run
    return problem


def trajectory(problem: Problem, x: PyTree, *, steps_per_sample: int = 1) -> tuple:
    """`(t, states)` of the orbit transfer of decision variables `x`, sampled every
    `steps_per_sample` RK4 steps of a single-shooting run (for plots)."""
    a = problem.args
    model = _model(jnp.asarray(x["w"]), a, a["t_f"])
    dt = float(a["t_f"]) / problem.num_steps
    sol = simulate(
        model, model.init_state(), float(a["t_f"]), dt=dt, sample_dt=dt * steps_per_sample
    )
    return np.asarray(sol.ts), {k: np.asarray(v) for k, v in sol.ys.items()}
