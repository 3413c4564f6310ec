"""Control parameterizations (`jaxsim.controls`): analytic integrals, stage semantics, construction
under `jit`/`grad`/`vmap`, derivatives w.r.t. values and (switch) times vs exact values and central
differences, on fixed-step and adaptive solvers.

The model is an integrator x' = u(t) (plus a linear term in one case), whose final state is the
integral of the input: closed forms for every parameterization.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim.controls import CubicSpline, PiecewiseConstant, PiecewiseLinear, SwitchingTimes


T1 = 2.0  # horizon [s]
DT = 0.1  # fixed step [s]
ADAPTIVE = {"solver": js.Tsit5(), "rtol": 1e-11, "atol": 1e-12}
# Every RK scheme integrates a held (per-step constant) rate exactly: round-off of 20 steps.
EXACT_TOL = 1e-12
# Tsit5 at rtol 1e-11 on piecewise-polynomial rates with the breakpoints as step ends.
ADAPTIVE_TOL = 1e-9
# Central differences of a piecewise-linear function of the parameter (exact up to round-off
# 1e-16 / FD_EPS) or of a smooth run (truncation FD_EPS^2 ~ 1e-12).
FD_EPS, FD_TOL = 1e-6, 1e-8
# RK4 with the step split at a switch time, h = 0.1: derivative error ~ h^4 / 5! ~ 1e-6.
RK4_SPLIT_TOL = 1e-6
# The held mean over the step holding a switch: the derivative is first order in h (~ h / 2 rel.).
HELD_MEAN_TOL = 0.05
# RK4 at h = 0.1 vs Tsit5 at rtol 1e-11 on a smooth input: RK4's global error ~ h^4 ~ 1e-4.
SOLVER_TOL = 1e-4


class Integrator(js.AbstractDynamicObject):
    """x' = u(t) + a x, with the control's breakpoints as the model's."""

    u: js.AbstractSignal
    a: float = 0.0
    name: str = eqx.field(static=True, default="integrator")

    def init_state(self):
        return {"x": jnp.zeros(jnp.shape(self.u(0.0)))}

    def drift(self, t, y, args):
        return {"x": self.u(t) + self.a * y["x"]}

    def breakpoints(self):
        return self.u.breakpoints()


def final_x(u, a=0.0, **kw):
    model = Integrator(u, a)
    kw = kw or {"dt": DT}
    return js.simulate(model, model.init_state(), T1, outputs=False, **kw).ys["x"][-1]


def central(f, x):
    return (f(x + FD_EPS) - f(x - FD_EPS)) / (2 * FD_EPS)


# ---- piecewise constant: the held value at every stage ------------------------------------------


class StageWrapper(js.AbstractDynamicObject):
    """The pitfall: a hand-written zero-order hold read at the RK stage time."""

    knots: jnp.ndarray
    values: jnp.ndarray
    name: str = eqx.field(static=True, default="wrapper")

    def init_state(self):
        return {"x": jnp.asarray(0.0)}

    def drift(self, t, y, args):
        return {"x": self.values[jnp.searchsorted(self.knots, t, side="right")] + 0.0 * y["x"]}


@pytest.mark.parametrize("solver", ["RK4", "Euler", "Tsit5"])
def test_piecewise_constant_holds_the_step_value_at_every_stage(solver):
    """Knots on the step grid: every stage of a step ending on a knot reads the step's interval
    value, not the next one (the integral is exact); a wrapper read at the stage time is off."""
    knots, values = [0.5, 1.0, 1.5], [1.0, 2.0, 3.0, 4.0]
    exact = 0.5 * sum(values)
    kw = ADAPTIVE if solver == "Tsit5" else {"dt": DT, "solver": getattr(js, solver)()}
    x = final_x(PiecewiseConstant(knots, values), **kw)
    assert abs(float(x) - exact) < (ADAPTIVE_TOL if solver == "Tsit5" else EXACT_TOL)
    if solver == "RK4":
        wrapper = StageWrapper(jnp.asarray(knots), jnp.asarray(values))
        y = js.simulate(wrapper, wrapper.init_state(), T1, dt=DT, outputs=False).ys["x"][-1]
        assert abs(float(y) - exact) > 1e-3  # the last stage reads the next interval's value


def test_piecewise_constant_builds_under_jit_grad_vmap():
    def build_and_run(tau):
        u = PiecewiseConstant(jnp.stack([tau, tau + 0.5]), jnp.array([3.0, 1.0, -2.0]))
        return final_x(u)

    exact = lambda tau: 3.0 * tau + 0.5 - 2.0 * (T1 - tau - 0.5)  # noqa: E731
    taus = jnp.array([0.3, 0.73, 1.0])
    np.testing.assert_allclose(jax.vmap(build_and_run)(taus), exact(taus), atol=EXACT_TOL)
    np.testing.assert_allclose(jax.jit(build_and_run)(0.73), exact(0.73), atol=EXACT_TOL)
    # dx/dtau = (3 - 1) + (1 - (-2)) = 5, on and off the step grid.
    for tau in (0.73, 1.0):
        assert abs(float(jax.grad(build_and_run)(tau)) - 5.0) < FD_TOL


def test_traced_times_not_increasing_fail_the_run():
    def run(tau):
        u = PiecewiseConstant(jnp.stack([tau, 0.5]), jnp.array([3.0, 1.0, -2.0]))
        model = Integrator(u)
        return js.simulate(model, model.init_state(), T1, dt=DT, outputs=False, throw=False)

    ok = jax.jit(lambda tau: run(tau).ok)
    assert bool(ok(0.2)) and not bool(ok(0.9))
    # Times moved out of order after construction (as an optimizer's update does) fail too.
    u = eqx.tree_at(lambda c: c.times, PiecewiseConstant([0.2, 0.5], [3.0, 1.0, -2.0]),
                    jnp.array([0.9, 0.5]))  # fmt: skip
    model = Integrator(u)
    assert not js.simulate(model, model.init_state(), T1, dt=DT, outputs=False, throw=False).ok
    with pytest.raises(ValueError, match=r"PiecewiseConstant: `times` \[s\] must be increasing"):
        PiecewiseConstant([0.9, 0.5], [3.0, 1.0, -2.0])


# ---- switching times: d x(T) / d tau on every solver ---------------------------------------------


SLOW = pytest.mark.slow  # segmented runs (clocked driver): ~40 s compile each, loaded machine


@pytest.mark.parametrize(
    "solver",
    ["RK4", pytest.param("RK4-segmented", marks=SLOW), pytest.param("Tsit5-segmented", marks=SLOW)],
)
def test_switch_times_are_differentiable(solver):
    """x' = u: dx(T)/dtau_k = u before - u after, exactly (also for a switch on the grid)."""
    kw = {"dt": DT}
    if solver.startswith("Tsit5"):
        kw = dict(ADAPTIVE)

    def run(times):
        model = Integrator(SwitchingTimes(times, jnp.array([1.5, -0.5])))
        if solver.endswith("segmented"):
            kw["discontinuities"] = [model]
        return js.simulate(model, model.init_state(), T1, outputs=False, **kw).ys["x"][-1]

    times = jnp.array([0.73, 1.2])  # 1.2 on the step grid
    np.testing.assert_allclose(jax.grad(run)(times), [2.0, -2.0], atol=FD_TOL)
    x = 1.5 * 0.73 - 0.5 * (1.2 - 0.73) + 1.5 * (T1 - 1.2)
    assert abs(float(run(times)) - x) < ADAPTIVE_TOL


def test_traced_switch_times_on_a_plain_adaptive_run_are_refused_by_name():
    def run(tau):
        return final_x(SwitchingTimes(jnp.stack([tau]), jnp.array([1.0, 0.0])), **ADAPTIVE)

    with pytest.raises(ValueError, match=r"discontinuities=\[model\]"):
        jax.grad(run)(0.73)


def _feedback_run(tau, segmented):
    model = Integrator(SwitchingTimes(jnp.stack([tau]), jnp.array([1.0, 0.0])), a=-1.0)
    kw = {"discontinuities": [model]} if segmented else {}
    return js.simulate(model, model.init_state(), T1, dt=DT, outputs=False, **kw).ys["x"][-1]


@pytest.mark.parametrize("segmented", [False, pytest.param(True, marks=SLOW)])
def test_switch_time_derivative_with_state_feedback(segmented):
    """x' = u - x (the input's effect decays): the AD derivative of the RK4 run is the derivative
    of the computed run (central differences); the exact one is (u- - u+) exp(-(T - tau)), to
    RK4 accuracy with the step split at tau (segmented), to first order in h with the held mean."""
    tau = 0.73
    g = float(jax.grad(_feedback_run)(tau, segmented))
    fd = float(central(lambda s: _feedback_run(s, segmented), tau))
    assert abs(g - fd) < FD_TOL
    exact = np.exp(-(T1 - tau))
    assert abs(g - exact) < (RK4_SPLIT_TOL if segmented else HELD_MEAN_TOL)


# ---- continuous parameterizations ----------------------------------------------------------------


PL_KNOTS = jnp.array([0.0, 0.7, 1.3, 2.0])  # interior knots on the step grid
PL_VALUES = jnp.array([[1.0, 0.0], [-1.0, 2.0], [0.5, 1.0], [2.0, -1.0]])


def _trapezoid(k, v):
    """The exact integral over [k_0, k_3] = [0, T1] of the linear interpolant."""
    return jnp.sum(0.5 * (v[1:] + v[:-1]) * jnp.diff(k)[:, None], axis=0)


def _pl_run(k, v, **kw):
    model = Integrator(PiecewiseLinear(k, v))
    if kw.pop("segmented", False):
        kw["discontinuities"] = [model]
    return js.simulate(model, model.init_state(), T1, dt=DT, outputs=False, **kw).ys["x"][-1]


def test_piecewise_linear_integral_and_value_derivatives():
    """RK4 (Simpson's rule per step) integrates the linear pieces exactly with the knots on the
    grid; the derivative w.r.t. the values is the trapezoid rule's."""
    np.testing.assert_allclose(_pl_run(PL_KNOTS, PL_VALUES), _trapezoid(PL_KNOTS, PL_VALUES),
                               atol=EXACT_TOL)  # fmt: skip
    gv = jax.jacrev(_pl_run, argnums=1)(PL_KNOTS, PL_VALUES)
    np.testing.assert_allclose(gv, jax.jacrev(_trapezoid, argnums=1)(PL_KNOTS, PL_VALUES),
                               atol=FD_TOL)  # fmt: skip


@SLOW
def test_piecewise_linear_knot_derivatives_on_the_segmented_path():
    """Traced interior knots as segment boundaries: the exact derivative of the integral."""
    gk = jax.jacrev(lambda k: _pl_run(k, PL_VALUES, segmented=True))(PL_KNOTS)
    ek = jax.jacrev(_trapezoid)(PL_KNOTS, PL_VALUES)
    np.testing.assert_allclose(gk[:, 1:3], ek[:, 1:3], atol=FD_TOL)


def test_cubic_spline_interpolates_and_is_natural():
    knots = np.array([0.0, 0.4, 1.1, 1.5, 2.0])
    values = np.array([0.3, -1.0, 0.5, 2.0, 1.0])
    u = CubicSpline(knots, values)
    at = jax.jit(jax.vmap(u))
    np.testing.assert_allclose(at(jnp.asarray(knots)), values, atol=EXACT_TOL)
    # Natural ends and linear extension: zero second derivative at and beyond both ends; C2 at
    # an interior knot (both sides of 1.1 agree to the third derivative times 2e-9).
    d2 = jax.jit(jax.vmap(jax.grad(jax.grad(u))))
    np.testing.assert_allclose(d2(jnp.array([0.0, 2.0, -1.0, 3.0])), 0.0, atol=EXACT_TOL)
    left, right = d2(jnp.array([1.1 - 1e-9, 1.1 + 1e-9]))
    assert abs(float(left - right)) < 1e-6
    # Data on a line: the natural spline is that line.
    line = CubicSpline(knots, 2.0 - 0.5 * knots)
    np.testing.assert_allclose(line(0.77), 2.0 - 0.5 * 0.77, atol=EXACT_TOL)


@SLOW
def test_cubic_spline_run_derivatives_match_central_differences():
    knots = jnp.array([0.0, 0.6, 1.3, 2.0])
    values = jnp.array([0.0, 1.0, -0.5, 0.2])
    run = jax.jit(lambda k, v: final_x(CubicSpline(k, v), a=-0.5))
    gk, gv = jax.jit(jax.grad(run, argnums=(0, 1)))(knots, values)
    e = jnp.eye(4)
    fdv = jax.vmap(lambda ei: central(lambda s: run(knots, values + s * ei), 0.0))(e)
    fdk = jax.vmap(lambda ei: central(lambda s: run(knots + s * ei, values), 0.0))(e[1:3])
    np.testing.assert_allclose(gv, fdv, atol=FD_TOL)
    np.testing.assert_allclose(gk[1:3], fdk, atol=FD_TOL)
    # Adaptive, traced knots: no breakpoints, so the plain adaptive run differentiates them.
    ga = jax.grad(lambda k: final_x(CubicSpline(k, values), a=-0.5, **ADAPTIVE))(knots)
    np.testing.assert_allclose(ga, gk, atol=SOLVER_TOL)


def test_controls_build_under_vmap_and_refuse_bad_concrete_input():
    ks = jnp.array([[0.0, 1.0, 2.0], [0.0, 0.5, 2.0]])
    vs = jnp.array([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    out = jax.vmap(lambda k, v: final_x(CubicSpline(k, v)))(ks, vs)
    assert out.shape == (2,) and abs(float(out[1]) - 2.0) < EXACT_TOL
    with pytest.raises(ValueError, match=r"PiecewiseLinear: `knots` \[s\] must be increasing"):
        PiecewiseLinear([0.0, 2.0, 1.0], [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match=r"CubicSpline: `values` must have shape"):
        CubicSpline([0.0, 1.0], [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match=r"SwitchingTimes: `levels` must have shape \(2, ...\)"):
        SwitchingTimes([1.0], [0.0, 1.0, 2.0])


# ---- a MuJoCo actuator driven by a control --------------------------------------------------------

ROTOR = (
    '<mujoco><worldbody><body name="rotor"><joint name="h" type="hinge" axis="0 0 1"/>'
    '<inertial pos="0 0 0" mass="1" diaginertia="1 1 2"/></body></worldbody>'
    '<actuator><motor name="m" joint="h"/></actuator></mujoco>'
)


def test_mujoco_ctrl_driven_by_switching_times():
    """A motor torque u on a hinge of inertia 2 kg m^2: qvel(T) = integral of u / 2, and
    d qvel(T) / d tau = (u- - u+) / 2 for a traced switch time (inside a step)."""
    pytest.importorskip("mujoco")
    import effectors as fx

    def final_rate(tau):
        scene = fx.MuJoCoScene(ROTOR, ctrl=SwitchingTimes(jnp.stack([tau]), jnp.array([3.0, -1.0])))
        sol = js.simulate(scene, scene.init_state(), 0.2, dt=0.05, outputs=False)
        return sol.ys["qvel"][-1, 0]

    tau = 0.13
    assert abs(float(final_rate(tau)) - (3.0 * tau - (0.2 - tau)) / 2.0) < EXACT_TOL
    assert abs(float(jax.grad(final_rate)(tau)) - 2.0) < FD_TOL
    with pytest.raises(TypeError, match=r"MuJoCoScene: `ctrl` must be a signal of time"):
        fx.MuJoCoScene(ROTOR, ctrl=[1.0])
