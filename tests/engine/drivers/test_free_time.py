"""Free final time (`jaxsim._drivers._free_time`): traced `t0`/`t1`, `num_steps`, `num_samples`.

Oracles: d y(t1)/d t1 is the drift at t1 (exact for the ODE; the discrete solutions' derivatives
approach it as the solver's error) and central differences of the run; one compiled program over
several horizons (XLA's compile log, and a trace counter under the user's `jit`); runs with
`num_steps` equal runs with the concrete `dt = (t1 - t0) / num_steps` bit for bit; a bang-bang
integrator's final state (2 s - 1) T has the exact derivative 2 s - 1 with respect to T.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim.controls import CubicSpline, SwitchingTimes


T1 = 2.0  # nominal horizon [s]
K = 400  # fixed steps over the horizon
FIXED = {"num_steps": K}
ADAPTIVE = {"solver": js.Tsit5(), "rtol": 1e-12, "atol": 1e-12}
# d y/d t1 vs the drift at t1: RK4 at h = 5e-3 (global error derivative ~ h^4 ~ 1e-9 relative
# measured 9e-11), Tsit5 at rtol 1e-12 (measured 8e-14).
DRIFT_RTOL = 1e-8
# Central differences with FD_EPS: truncation ~ FD_EPS^2 |y'''| ~ 1e-10, round-off 1e-16 / FD_EPS;
# the step sequence of the adaptive run does not change within +- FD_EPS (measured 3.5e-11).
FD_EPS, FD_RTOL = 1e-5, 1e-8
# The integrator's bang-bang integral is exact on every RK step (held mean): round-off only.
EXACT_TOL = 1e-12
# A smooth function of T: central differences with a larger step (truncation ~ 1e-6^2).
SPLINE_EPS = 1e-3
HORIZONS = (1.0, 1.5, 2.0, 2.5, 3.0)


class Forced(js.AbstractDynamicObject):
    """A forced oscillator x'' = -w^2 x + sin t (non-autonomous: the drift depends on t)."""

    w: float = 1.3
    name: str = eqx.field(static=True, default="osc")

    def init_state(self):
        return {"x": jnp.array([1.0, 0.0])}

    def drift(self, t, y, args):
        x = y["x"]
        return {"x": jnp.array([x[1], -(self.w**2) * x[0] + jnp.sin(t)])}


class Integrator(js.AbstractDynamicObject):
    """x' = u(t), the control's breakpoints as the model's."""

    u: js.AbstractSignal
    name: str = eqx.field(static=True, default="integrator")

    def init_state(self):
        return {"x": jnp.zeros(())}

    def drift(self, t, y, args):
        return {"x": jnp.asarray(self.u(t)).reshape(())}

    def breakpoints(self):
        return self.u.breakpoints()


MODEL = Forced()
Y0 = MODEL.init_state()


def final(t1, t0=0.0, **kw):
    return js.simulate(MODEL, Y0, t1, t0=t0, outputs=False, **kw).ys["x"][-1]


class FreshForced(Forced):
    """`Forced` under its own class name, so that its first run compiles in this test."""


def test_num_steps_top_level_compiles_once_over_horizons(compilations):
    _free_time_compiles_once(FreshForced(), compilations)


def _free_time_compiles_once(model, compilations):
    for t1 in HORIZONS:
        sol = js.simulate(model, model.init_state(), t1, num_steps=K, num_samples=5, outputs=False)
        ref = js.simulate(model, model.init_state(), t1, dt=t1 / K, sample_dt=t1 / 4, outputs=False)
        np.testing.assert_array_equal(sol.ys["x"], ref.ys["x"])
        np.testing.assert_allclose(sol.ts, np.linspace(0.0, t1, 5), rtol=1e-15)
        assert dict(sol.info.attrs)["dt"] == t1 / K  # the run's step, in its metadata
    free = [n for n in compilations if n == "jit(_run_fixed)"]
    # One program for the five free-time runs; the concrete `dt` runs compile one each.
    assert len(free) == 1 + len(HORIZONS), compilations


class FullerForced(Forced):
    """`Forced` under another class name, for the test below."""


def test_compile_count_does_not_depend_on_programs_of_earlier_tests(monkeypatch, request):
    """The count above was 7, not 6, when earlier tests of the worker had left programs of the
    fixed-step driver: one compile past `MAX_PROGRAMS` drops them all, the free-time program
    with them. Here the cache is nearly full (4 programs, `MAX_PROGRAMS` lowered to 8) when the
    counting starts: the `compilations` fixture starts from no program (`fresh_programs`)."""
    from jaxsim._compilation import _jit

    monkeypatch.setattr(_jit, "MAX_PROGRAMS", 8)
    model = Forced()
    for k in range(4):
        js.simulate(model, model.init_state(), 1.0, dt=1.0 / (10 + k), outputs=False)
    _free_time_compiles_once(FullerForced(), request.getfixturevalue("compilations"))


@pytest.mark.parametrize("kw", [FIXED, ADAPTIVE], ids=["RK4", "Tsit5"])
def test_traced_horizon_traces_once_under_jit(kw):
    traces = []

    @jax.jit
    def f(t1):
        traces.append(1)
        return final(t1, **kw)

    for t1 in HORIZONS:
        np.testing.assert_allclose(f(t1), final(t1, **kw), rtol=0, atol=0)
    assert len(traces) == 1


# A diffrax solver instance runs in `diffrax.diffeqsolve` (not jaxsim's adaptive core).
DIFFRAX = {"solver": js.Tsit5().to_diffrax(), "rtol": 1e-12, "atol": 1e-12}


# With a small-loop threshold in the user's XLA_FLAGS this gradient through diffrax's loop warns that its adjoint replays
# the step decisions; the test checks it against exact values and central differences anyway.
@pytest.mark.filterwarnings("ignore::jaxsim.ReplayedDecisionsWarning")
@pytest.mark.parametrize("kw", [FIXED, ADAPTIVE, DIFFRAX], ids=["RK4", "Tsit5", "diffrax-Tsit5"])
def test_final_state_derivative_wrt_t1_is_the_drift(kw):
    d_dt1 = jax.jit(jax.jacrev(lambda t1: final(t1, **kw)))(T1)
    drift = MODEL.drift(T1, {"x": final(T1, **kw)}, None)["x"]
    np.testing.assert_allclose(d_dt1, drift, rtol=DRIFT_RTOL)
    f = jax.jit(lambda t1: final(t1, **kw))
    central = (f(T1 + FD_EPS) - f(T1 - FD_EPS)) / (2 * FD_EPS)
    np.testing.assert_allclose(d_dt1, central, rtol=FD_RTOL)


@pytest.mark.parametrize("kw", [FIXED, ADAPTIVE], ids=["RK4", "Tsit5"])
def test_derivative_wrt_t1_under_vmap(kw):
    horizons = jnp.asarray(HORIZONS)
    grads = jax.jit(jax.vmap(jax.jacrev(lambda t1: final(t1, **kw))))(horizons)
    finals = jax.jit(jax.vmap(lambda t1: final(t1, **kw)))(horizons)
    for t1, g, y in zip(HORIZONS, grads, finals):
        drift = MODEL.drift(t1, {"x": y}, None)["x"]
        np.testing.assert_allclose(g, drift, rtol=DRIFT_RTOL)


def test_derivative_wrt_t0_matches_central_differences():
    f = jax.jit(lambda t0: final(T1, t0=t0, **FIXED))
    d_dt0 = jax.jit(jax.jacrev(lambda t0: final(T1, t0=t0, **FIXED)))(0.3)
    central = (f(0.3 + FD_EPS) - f(0.3 - FD_EPS)) / (2 * FD_EPS)
    np.testing.assert_allclose(d_dt0, central, rtol=FD_RTOL)


def test_num_samples_scale_with_the_horizon():
    def run(t1, **kw):
        sol = js.simulate(MODEL, Y0, t1, num_samples=5, outputs=False, **kw)
        return sol.ts, sol.ys["x"]

    for kw in (FIXED, ADAPTIVE):
        ts, ys = jax.jit(lambda t1, kw=kw: run(t1, **kw))(3.0)
        np.testing.assert_allclose(ts, np.linspace(0.0, 3.0, 5), rtol=1e-15)
        ref = js.simulate(
            MODEL, Y0, 3.0, ts=np.linspace(0.0, 3.0, 5), outputs=False,
            **({"dt": 3.0 / K} if kw is FIXED else kw),
        )  # fmt: skip
        np.testing.assert_allclose(ys, ref.ys["x"], rtol=0, atol=1e-13)


def test_traced_sample_times_on_an_adaptive_solver():
    fractions = jnp.array([0.0, 0.25, 0.7, 1.0])

    @jax.jit
    def run(t1):
        return js.simulate(MODEL, Y0, ts=t1 * fractions, outputs=False, **ADAPTIVE).ys["x"]

    ys = run(2.0)
    ref = js.simulate(MODEL, Y0, ts=np.asarray(2.0 * fractions), outputs=False, **ADAPTIVE)
    np.testing.assert_allclose(ys, ref.ys["x"], rtol=0, atol=1e-13)


def test_times_out_of_order_fail_the_run():
    @jax.jit
    def run(t1):
        return js.simulate(MODEL, Y0, t1, t0=1.0, throw=False, outputs=False, **FIXED)

    sol = run(0.5)
    assert sol.result == js.RESULTS.invalid_times
    assert np.all(np.isnan(sol.ys["x"]))
    assert np.isfinite(run(2.0).ys["x"]).all() and run(2.0).ok
    with pytest.raises(Exception, match="times are out of order"):
        jax.jit(lambda t1: final(t1, t0=1.0, **FIXED))(0.5).block_until_ready()


def test_bang_bang_switch_scaled_with_the_horizon():
    # u = +1 up to s T, then -1: x(T) = (2 s - 1) T, dx/dT = 2 s - 1 exactly.
    s = 0.3

    def x_final(T, **kw):
        model = Integrator(SwitchingTimes(jnp.reshape(s * T, (1,)), jnp.array([1.0, -1.0])))
        return js.simulate(model, model.init_state(), T, outputs=False, **kw).ys["x"][-1]

    for T in (1.0, 2.7):
        x, g = jax.jit(jax.value_and_grad(lambda T: x_final(T, num_steps=40)))(T)
        np.testing.assert_allclose(x, (2 * s - 1) * T, rtol=0, atol=EXACT_TOL)
        np.testing.assert_allclose(g, 2 * s - 1, rtol=0, atol=EXACT_TOL)


def test_spline_control_with_knots_scaled_with_the_horizon():
    # Knots T * (0, 1/3, 2/3, 1) on the grid of 30 RK4 steps (Simpson's rule is exact on a cubic):
    # x(T) = T * (the integral of the spline over [0, 1] in scaled time), dx/dT = x(T) / T.
    values = jnp.array([0.0, 1.0, -0.5, 0.25])

    def x_final(T):
        model = Integrator(CubicSpline(T * jnp.linspace(0.0, 1.0, 4), values))
        return js.simulate(model, model.init_state(), T, num_steps=30, outputs=False).ys["x"][-1]

    f = jax.jit(x_final)
    g = jax.jit(jax.grad(x_final))(2.0)
    central = (f(2.0 + SPLINE_EPS) - f(2.0 - SPLINE_EPS)) / (2 * SPLINE_EPS)
    np.testing.assert_allclose(g, central, rtol=FD_RTOL)
    np.testing.assert_allclose(g, f(2.0) / 2.0, rtol=EXACT_TOL)


def test_concrete_switch_with_a_traced_horizon_on_an_adaptive_solver():
    # u = +1 up to 0.6 s, then -1 (a `jump_ts` step end): x(T) = 1.2 - T, dx/dT = u(T) = -1.
    model = Integrator(SwitchingTimes([0.6], [1.0, -1.0]))

    def x_final(T):
        return js.simulate(model, model.init_state(), T, outputs=False, **ADAPTIVE).ys["x"][-1]

    x, g = jax.jit(jax.value_and_grad(x_final))(2.0)
    np.testing.assert_allclose([x, g], [1.2 - 2.0, -1.0], rtol=0, atol=EXACT_TOL)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"dt": 0.01, "num_steps": K}, "either `dt`"),
        ({"num_steps": K, "sample_dt": 0.5}, "num_samples"),
        ({"num_steps": K, "num_samples": 7}, "must divide"),
        ({"num_steps": 0}, "num_steps"),
        ({"num_steps": K, "ts": [0.0, 2.0]}, "num_samples"),
        ({**ADAPTIVE, "num_steps": K}, "adaptive"),
    ],
)
def test_refused_requests(kw, match):
    with pytest.raises(ValueError, match=match):
        js.simulate(MODEL, Y0, T1, **kw)


def test_traced_horizon_with_dt_names_num_steps():
    with pytest.raises(ValueError, match="num_steps"):
        jax.jit(lambda t1: final(t1, dt=0.01))(T1)


def test_traced_horizon_with_clocks_is_refused_by_name():
    fsw = js.DiscreteModel("fsw", js.Clock(0.5), lambda t, y, z, a: (z, {}))
    with pytest.raises(ValueError, match="`clocks`"):
        jax.jit(lambda t1: final(t1, clocks=[fsw], **FIXED))(T1)
