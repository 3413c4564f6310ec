"""Clocks, discrete models, scheduled discontinuities (left/right limits, traced times)."""

from fractions import Fraction

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim._model._clocks import plan_ticks


# Lag x' = (u - x)/tau with a unit step at T: closed form; Tsit5 at rtol 1e-10 reaches ~1e-11.
LAG_TOL = 1e-9
# d x(t1) / dT (burn start) vs closed form and central differences.
GRAD_RTOL = 1e-6
FD_EPS = 1e-5
TAU = 0.5


class Lag(js.AbstractDynamicObject):
    u: js.Step
    name: str = eqx.field(static=True, default="lag")

    def init_state(self):
        return {"x": jnp.asarray(0.0)}

    def drift(self, t, y, args):
        return {"x": (self.u(t) - y["x"]) / TAU}

    def breakpoints(self):
        return self.u.breakpoints()


def lag_final(T, solver=js.Tsit5(), **kw):
    model = Lag(js.Step(T, 0.0, 1.0))
    sol = js.simulate(model, model.init_state(), 3.0, solver=solver, dtmax=1.0, **kw)
    return sol.ys["x"][-1]


def test_clock_ticks_and_ties():
    a = js.DiscreteModel("a", js.Clock(0.01), lambda t, y, z, args: (z, {}))
    b = js.DiscreteModel("b", js.Clock(0.05), lambda t, y, z, args: (z, {}))
    c = js.DiscreteModel("c", js.Clock("1/3", offset=0.1), lambda t, y, z, args: (z, {}))
    plan = plan_ticks((a, b, c), 0.0, 1.0)
    due = np.asarray(plan.due)
    times = np.asarray(plan.times)
    # No tick at t0; 100 ticks of a, 20 of b (all tied with a), ticks of c at 0.1 + k/3.
    assert plan.n_ticks == (100, 20, 3)
    assert times[0] == 0.01 and times[-1] == 1.0
    assert np.all(due[due[:, 1], 0])  # every b tick is an a tick (3 * 0.05 ties with 15 * 0.01)
    np.testing.assert_allclose(np.asarray(plan.model_times[2]),
                               [float(Fraction(1, 10) + k * Fraction(1, 3)) for k in range(3)])  # fmt: skip
    assert float(Fraction(3, 20)) in plan.model_times[1]


def test_clock_validation():
    with pytest.raises(ValueError, match="period"):
        js.Clock(0.0)
    with pytest.raises(ValueError, match="period"):
        js.Clock(np.pi)  # not a rational with a small denominator
    with pytest.raises(ValueError, match="offset"):
        js.Clock(0.1, offset="a/b")
    with pytest.raises(ValueError, match="times"):
        js.Schedule([])
    with pytest.raises(ValueError, match="clock"):
        js.DiscreteModel("m", 0.1, lambda t, y, z, a: (z, {}))
    with pytest.raises(ValueError, match="update"):
        js.DiscreteModel("m", js.Clock(0.1), 3)
    with pytest.raises(ValueError, match="name"):
        js.DiscreteModel("", js.Clock(0.1), lambda t, y, z, a: (z, {}))


def test_signal_limits_and_validation():
    s = js.Step(1.0, 0.2, 1.0)
    assert float(s(1.0)) == 1.0 and float(s(np.nextafter(1.0, 0))) == 0.2
    w = js.SquareWave(0.5, duty=0.3, phase=0.1)
    edges = w.breakpoints(0.0, 20.0)
    assert len(edges) == 20
    for k, te in enumerate(edges):  # right-continuous at every declared edge
        post = 1.0 if k % 2 == 0 else -1.0
        assert float(w(te)) == post and float(w(np.nextafter(te, 0))) == -post
    tab = js.PiecewiseTable([1.0, 2.0], [0.0, 5.0, 7.0])
    assert [float(tab(x)) for x in (0.5, 1.0, 1.5, 2.0)] == [0.0, 5.0, 5.0, 7.0]
    tri = js.TriangleWave(1.0)
    assert float(tri(0.5)) == pytest.approx(1.0) and float(tri(0.0)) == pytest.approx(-1.0)
    assert float(js.Ramp(1.0, 2.0)(2.0)) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="duty"):
        js.SquareWave(1.0, duty=1.5)
    with pytest.raises(ValueError, match="freq"):
        js.SquareWave(-1.0)
    with pytest.raises(ValueError, match="on"):
        js.Step(1.0, 0.0, [1.0, 2.0])
    with pytest.raises(ValueError, match="values"):
        js.PiecewiseTable([1.0], [0.0])
    with pytest.raises(ValueError, match="horizon"):
        w.breakpoints()


# With a small-loop threshold in the user's XLA_FLAGS this gradient through diffrax's loop warns that its adjoint replays
# the step decisions; the test checks it against exact values and central differences anyway.
@pytest.mark.filterwarnings("ignore::jaxsim.ReplayedDecisionsWarning")
def test_traced_burn_start_gradient():
    T = 1.0
    exact = 1.0 - np.exp(-(3.0 - T) / TAU)
    kw = dict(rtol=1e-10, atol=1e-12)
    f = jax.jit(lambda T: lag_final(T, **kw))
    assert abs(float(f(T)) - exact) < LAG_TOL
    g = jax.grad(lambda T: lag_final(T, **kw))(T)
    g_exact = -np.exp(-(3.0 - T) / TAU) / TAU
    fd = (f(T + FD_EPS) - f(T - FD_EPS)) / (2 * FD_EPS)
    np.testing.assert_allclose(g, g_exact, rtol=GRAD_RTOL)
    np.testing.assert_allclose(g, fd, rtol=GRAD_RTOL)


def test_fixed_step_clocked_pid_matches_exact():
    """RK4 on a 1 ms grid under a 10 ms clock: the plant is LTI between ticks, so the result must
    match the closed-form recursion to RK4 truncation (~1e-12 here)."""
    tau, K = 0.25, 2.0

    class Motor(js.AbstractDynamicObject):
        name: str = eqx.field(static=True, default="m")

        def init_state(self):
            return {"w": jnp.asarray(0.0)}

        def drift(self, t, y, args):
            return {"w": (-y["w"] + K * args["m"]["u"]) / tau}

    def ctrl(t, y, z, args):
        u = 0.8 * (1.0 - y["w"]) + z["i"]
        return {"i": z["i"] + 4.0 * 0.01 * (1.0 - y["w"])}, {"m": {"u": u}}

    c = js.DiscreteModel("pi", js.Clock(0.01), ctrl, {"i": 0.0})
    model = Motor()
    sol = js.simulate(model, model.init_state(), 1.0, solver=js.RK4(), dt=0.001, clocks=(c,),
                      sample_dt=0.5)  # fmt: skip
    w = i = u = 0.0
    a = np.exp(-0.01 / tau)
    for _ in range(100):
        w = K * u + (w - K * u) * a
        u, i = 0.8 * (1.0 - w) + i, i + 4.0 * 0.01 * (1.0 - w)
    assert abs(float(sol.ys["w"][-1]) - w) < 1e-10
    assert int(sol.stats["num_rhs"]) == 4 * 1000
    # Samples show pre-tick held outputs; logs the post-tick ones.
    assert float(sol.held["pi"]["m"]["u"][-1]) != float(sol.clock_logs["pi"]["held"]["m"]["u"][-1])


def test_clocked_argument_errors():
    model = Lag(js.Step(1.0))
    c = js.DiscreteModel("c", js.Clock(0.5), lambda t, y, z, a: (z, {"lag": 1.0}))
    with pytest.raises(ValueError, match="args"):
        js.simulate(model, model.init_state(), 1.0, dt=0.1, clocks=(c,), args=3.0)
    with pytest.raises(ValueError, match="clocks"):
        js.simulate(model, model.init_state(), 1.0, dt=0.1, clocks=(c, c))
    with pytest.raises(ValueError, match="clocks"):
        js.simulate(model, model.init_state(), 1.0, dt=0.1, clocks=(3,))


class _Prepared(js.AbstractDiscreteModel):
    """A discrete model whose update reads a value only `prepare()` provides."""

    name: str = eqx.field(static=True)
    clock: js.Clock
    gain: jax.Array
    precomputed: jax.Array | None

    def __init__(self, gain, precomputed=None):
        self.name, self.clock = "prep", js.Clock(0.1)
        self.gain, self.precomputed = jnp.asarray(gain), precomputed

    def init_state(self):
        return {}

    def update(self, t, y, z, args):
        if self.precomputed is None:
            raise AssertionError("update ran on a model that was not prepared")
        return z, {"lag": {"u": self.precomputed}}

    def init_outputs(self, y0, args):
        return {"lag": {"u": jnp.asarray(0.0)}}

    def prepare(self):
        return _Prepared(self.gain, 2.0 * self.gain)


@pytest.mark.parametrize("solver", [js.RK4(), js.Tsit5()], ids=["grid", "segments"])
def test_prepare_runs_once_per_run_with_current_parameters(solver):
    """`prepare()` is what the ticks use, on both clocked paths (the fixed-step grid and the
    diffrax segments), and it sees the parameters of each call: a second gain in the same compiled
    program gives the second value (no stale precomputation)."""

    class Plant(js.AbstractDynamicObject):
        name: str = eqx.field(static=True, default="lag")

        def init_state(self):
            return {"x": jnp.asarray(0.0)}

        def drift(self, t, y, args):
            return {"x": args["lag"]["u"]}  # x' = held input

    model = Plant()
    kw = dict(dt=0.01) if not solver.adaptive else dict(rtol=1e-10, atol=1e-12)

    @js.jit
    def final(gain):
        sol = js.simulate(model, model.init_state(), 1.0, solver=solver, clocks=(_Prepared(gain),),
                          **kw)  # fmt: skip
        return sol.ys["x"][-1]

    for gain in (0.5, 1.5):
        # Zero input over [0, 0.1), then 2 * gain from the first tick on: x(1) = 2 gain * 0.9.
        np.testing.assert_allclose(float(final(gain)), 2.0 * gain * 0.9, rtol=1e-12)
