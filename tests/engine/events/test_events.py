"""Zero-crossing events: gradients of event times and post-event states, vmap, bounds, rules."""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js


G = 9.81
E = 0.8
# Gradients vs analytic and central differences (brief: 1e-6 relative).
GRAD_RTOL = 1e-6
# Central-difference step on the drop height [m] (truncation ~ eps^2 * third derivative).
FD_EPS = 1e-4
# vmap vs single runs: the same arithmetic up to reassociation.
VMAP_TOL = 1e-12


class Ball(js.AbstractDynamicObject):
    name: str = eqx.field(static=True, default="ball")

    def init_state(self, h0=10.0):
        return {"v": jnp.asarray(0.0), "h": jnp.asarray(h0, dtype=float)}

    def drift(self, t, y, args):
        return {"v": jnp.asarray(-G), "h": y["v"]}


def bounce(t, y, z, args):
    return {**y, "v": -E * y["v"]}, z


GROUND = js.Event(lambda t, y, a: y["h"], direction="falling", reset=bounce, name="ground")
MODEL = Ball()


def run(h0):
    sol = js.simulate(
        MODEL, MODEL.init_state(h0), 2.5, solver=js.Tsit5(), rtol=1e-10, atol=1e-12,
        events=(GROUND,), max_events=2, ts=np.array([0.0, 2.0, 2.5]),
    )  # fmt: skip
    return sol.events.t[0], sol.events.y_after["v"][0], sol.ys["h"][1]


def analytic(h0):
    t1 = np.sqrt(2 * h0 / G)
    vp = E * np.sqrt(2 * G * h0)
    dt1 = 1 / np.sqrt(2 * h0 * G)
    dvp = E * G / np.sqrt(2 * G * h0)
    tau = 2.0 - t1
    h2 = vp * tau - 0.5 * G * tau**2
    dh2 = dvp * tau + (-vp + G * tau) * dt1
    return (t1, vp, h2), (dt1, dvp, dh2)


@pytest.fixture(scope="module")
def jitted_run():
    return jax.jit(run)


def test_event_values_analytic(jitted_run):
    vals, _ = analytic(10.0)
    np.testing.assert_allclose(jitted_run(10.0), vals, rtol=1e-10)


def test_event_gradients(jitted_run):
    _, dan = analytic(10.0)
    jac = jax.jacrev(run)(10.0)
    np.testing.assert_allclose(jac, dan, rtol=GRAD_RTOL)
    fd = [
        (a - b) / (2 * FD_EPS) for a, b in zip(jitted_run(10.0 + FD_EPS), jitted_run(10.0 - FD_EPS))
    ]
    np.testing.assert_allclose(jac, fd, rtol=GRAD_RTOL)


def test_vmap_different_event_times(jitted_run):
    hs = jnp.linspace(5.0, 15.0, 64)
    batch = jax.vmap(run)(hs)
    # impact times differ across the batch
    assert float(jnp.ptp(batch[0])) > 0.5
    for i in (0, 21, 63):
        single = jitted_run(hs[i])
        for b, s in zip(batch, single):
            assert abs(float(b[i]) - float(s)) < VMAP_TOL


def test_max_events_exceeded_is_an_error():
    with pytest.raises(Exception, match="max_events"):
        # Two impacts (1.43 s, 3.71 s) before t1 = 4 s, room for one.
        sol = js.simulate(
            MODEL, MODEL.init_state(), 4.0, solver=js.Tsit5(), rtol=1e-8, atol=1e-10,
            events=(GROUND,), max_events=1,
        )  # fmt: skip
        jax.block_until_ready(sol.ys)


class TwoBalls(js.AbstractDynamicObject):
    name: str = eqx.field(static=True, default="two")

    def init_state(self, h1=10.0, h2=10.0):
        return {"v": jnp.zeros(2), "h": jnp.array([h1, h2])}

    def drift(self, t, y, args):
        return {"v": jnp.full(2, -G), "h": y["v"]}


def _bounce_i(i):
    def reset(t, y, z, args):
        return {**y, "v": y["v"].at[i].set(-E * y["v"][i])}, z

    return reset


def test_simultaneous_and_earliest_rule():
    """Two balls in one state: equal heights fire together (declaration order); with ball 2
    slightly lower, its earlier impact is handled first even though it is declared second."""
    model = TwoBalls()
    evs = tuple(
        js.Event(
            lambda t, y, a, i=i: y["h"][i], direction="falling", reset=_bounce_i(i), name=f"b{i}"
        )
        for i in range(2)
    )
    # Same horizon and shapes: one compile for both runs.
    f = jax.jit(
        lambda y0: (
            js.simulate(
                model, y0, 1.6, solver=js.Tsit5(), rtol=1e-10, atol=1e-12, events=evs, max_events=4
            ).events
        )
    )
    log = f(model.init_state(10.0, 10.0))
    t_imp = np.sqrt(2 * 10.0 / G)
    assert int(log.count) == 2
    np.testing.assert_array_equal(np.asarray(log.index[:2]), [0, 1])
    np.testing.assert_allclose(log.t[:2], t_imp, rtol=1e-10)
    # The second reset sees the first one's result (sequential, declaration order).
    assert float(log.y_before["v"][1][0]) > 0
    log = f(model.init_state(10.0, 9.99))
    assert int(log.count) == 2
    np.testing.assert_array_equal(np.asarray(log.index[:2]), [1, 0])
    np.testing.assert_allclose(log.t[:2], [np.sqrt(2 * 9.99 / G), t_imp], rtol=1e-10)


def test_no_refire_on_surface_with_both_directions():
    """A 'both' event restarted exactly on its surface does not fire again at the restart."""
    ev = js.Event(lambda t, y, a: y["h"], direction="both", reset=bounce, name="ground")
    sol = js.simulate(
        MODEL, MODEL.init_state(), 2.5, solver=js.Tsit5(), rtol=1e-10, atol=1e-12, events=(ev,),
        max_events=3,
    )  # fmt: skip
    t1 = np.sqrt(2 * 10.0 / G)
    t2 = t1 + 2 * E * np.sqrt(2 * G * 10.0) / G
    assert int(sol.events.count) == 1  # second impact (t2 = 3.71 s) is after t1 = 2.5
    assert t2 > 2.5
    np.testing.assert_allclose(sol.events.t[0], t1, rtol=1e-10)


def test_event_validation():
    with pytest.raises(ValueError, match="direction"):
        js.Event(lambda t, y, a: y["h"], direction="up")
    with pytest.raises(ValueError, match="cond"):
        js.Event(3.0)
    with pytest.raises(ValueError, match="reset"):
        js.Event(lambda t, y, a: y["h"], reset=1.0)
    with pytest.raises(ValueError, match="max_events"):
        js.simulate(MODEL, MODEL.init_state(), 1.0, solver=js.Tsit5(), rtol=1e-6, atol=1e-8,
                    events=(GROUND,), max_events=0)  # fmt: skip
    with pytest.raises(ValueError, match="events"):
        js.simulate(MODEL, MODEL.init_state(), 1.0, solver=js.Tsit5(), rtol=1e-6, atol=1e-8,
                    events=(3,))  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Events that never tunnel (issue #33): the check grid inside every step, Zeno, zero starts,
# tangencies and non-finite conditions, each against its analytic answer.

# Event times against analytic crossing times: Newton on the dense output (measured ~1e-13).
EVENT_TIME_ATOL = 1e-9
# The Zeno time extrapolated from four firings of an exact geometric sequence (times ~1e-13).
ZENO_TIME_ATOL = 1e-9


class Line(js.AbstractDynamicObject):
    """x' = rate (conditions that depend on t alone see a trivial state)."""

    rate: float = 0.0
    name: str = eqx.field(static=True, default="line")

    def init_state(self, x0=0.0):
        return {"x": jnp.asarray(x0, dtype=float)}

    def drift(self, t, y, args):
        return {"x": jnp.asarray(self.rate)}


def _ground(e):
    def reset(t, y, z, args):
        return {**y, "v": -e * y["v"]}, z

    return js.Event(lambda t, y, a: y["h"], direction="falling", reset=reset, name="ground")


GROUND_HALF, GROUND_ELASTIC = _ground(0.5), _ground(1.0)
TIGHT = dict(solver=js.Tsit5(), rtol=1e-10, atol=1e-12)


def test_zeno_bouncing_ball():
    """Restitution 0.5 from 10 m: impacts at t_1 (1 + 2 sum_{j<k} e^j), accumulating at
    t_z = t_1 (1 + e) / (1 - e) = 3 t_1 (4.2835 s); the run stops there with `zeno` (it fell
    through the floor to h = -14.5 with ok=True before)."""
    e, h0, t1 = 0.5, 10.0, 6.0
    t_1 = np.sqrt(2 * h0 / G)
    t_z = t_1 * (1 + e) / (1 - e)
    sol = js.simulate(
        MODEL, MODEL.init_state(h0), t1, events=(GROUND_HALF,), max_events=16, throw=False,
        ts=np.array([0.0, 2.0, 5.0, t1]), **TIGHT,
    )  # fmt: skip
    assert sol.result == js.RESULTS.zeno and not bool(sol.ok)
    assert "accumulate" in sol.message
    assert abs(float(sol.t_final) - t_z) < ZENO_TIME_ATOL
    n = int(sol.events.count)
    impacts = t_1 * (1 + 2 * np.cumsum(np.r_[0.0, e ** np.arange(1, n)]))
    np.testing.assert_allclose(sol.events.t[:n], impacts, rtol=0, atol=EVENT_TIME_ATOL)
    assert np.all(np.isfinite(np.asarray(sol.ys["h"][:2])))
    assert np.all(np.isnan(np.asarray(sol.ys["h"][2:])))  # never below the floor
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"zeno.*t = 4\.2835"):
        js.simulate(MODEL, MODEL.init_state(h0), t1, events=(GROUND_HALF,), **TIGHT)


def test_elastic_ball_at_rest_on_the_floor():
    """h = 0, v = 0 under gravity: the impact fires at t0 and its reset leaves the ball at rest on
    the floor, heading into it: infinitely many firings at t0, `zeno` at t_final = 0 (it fell
    through the floor with ok=True before)."""
    sol = js.simulate(
        MODEL, MODEL.init_state(0.0), 1.0, events=(GROUND_ELASTIC,), throw=False, **TIGHT
    )
    assert sol.result == js.RESULTS.zeno
    assert float(sol.t_final) == 0.0
    assert int(sol.events.count) == 1 and float(sol.events.t[0]) == 0.0


FALLING_X = js.Event(lambda t, y, a: y["x"], direction="falling", name="x_falling")


@pytest.mark.parametrize("rate, fires", [(-1.0, True), (1.0, False)])
def test_condition_starting_at_zero(rate, fires):
    """c(t0) = 0 heading into the side the event fires into fires at t0 (scipy's solve_ivp, bdsim's
    solver, does the same); heading away it never fires (inward never fired before)."""
    model = Line(rate)
    sol = js.simulate(model, model.init_state(0.0), 1.0, events=(FALLING_X,), max_events=2, **TIGHT)
    assert int(sol.events.count) == int(fires)
    if fires:
        assert float(sol.events.t[0]) == 0.0
    assert float(sol.ys["x"][-1]) == pytest.approx(rate, abs=1e-12)


SQRT_COND = js.Event(lambda t, y, a: jnp.sqrt(y["x"]) - 0.5, direction="falling", name="sqrt")


def test_nan_condition_fails():
    """x = 1 - t: sqrt(x) - 0.5 crosses at t = 0.75 (found), is NaN from t = 1 on: the run fails
    with `event_condition_nonfinite` at the last finite point (within event_tol of 1); with
    throw=True it raises. It was accepted (ok=True, and the crossing missed) before."""
    model = Line(-1.0)
    sol = js.simulate(model, model.init_state(1.0), 2.0, events=(SQRT_COND,), throw=False, **TIGHT)
    assert sol.result == js.RESULTS.event_condition_nonfinite
    assert int(sol.events.count) == 1
    assert abs(float(sol.events.t[0]) - 0.75) < EVENT_TIME_ATOL
    assert 1.0 - 1e-8 < float(sol.t_final) <= 1.0
    with pytest.raises(eqx.EquinoxRuntimeError, match="NaN"):
        js.simulate(model, model.init_state(1.0), 2.0, events=(SQRT_COND,), **TIGHT)


TANGENT = js.Event(lambda t, y, a: (t - 1.0) ** 2, direction="both", name="tangent")
NEAR_TANGENT = js.Event(lambda t, y, a: (t - 1.0) ** 2 - 1e-6, direction="both", name="near")


@pytest.mark.parametrize("fixed", [False, True])
def test_tangency_does_not_fire(fixed):
    """(t - 1)^2 touches zero without a sign change: no firing, also when a step ends exactly on
    the touching point (RK4, dt = 0.25; it fired twice at t = 1 before). (t - 1)^2 - 1e-6 crosses
    twice, 2e-3 apart, inside one step: both crossings are found."""
    model = Line(0.0)
    kw = dict(solver=js.RK4(), dt=0.25) if fixed else TIGHT
    sol = js.simulate(model, model.init_state(), 2.0, events=(TANGENT,), max_events=4, **kw)
    assert int(sol.events.count) == 0
    sol = js.simulate(model, model.init_state(), 2.0, events=(NEAR_TANGENT,), max_events=4, **kw)
    assert int(sol.events.count) == 2
    np.testing.assert_allclose(sol.events.t[:2], [1 - 1e-3, 1 + 1e-3], rtol=0, atol=EVENT_TIME_ATOL)


FAST = js.Event(lambda t, y, a: jnp.cos(20.0 * t), direction="both", name="fast")


@pytest.mark.parametrize("fixed", [False, True])
def test_fast_condition_finds_every_crossing(fixed):
    """cos(20 t) on [0, 1.5] crosses zero 10 times, at (2k + 1) pi / 40, while the state is
    trivial (the adaptive steps grow to the horizon; RK4 with dt = 0.5 spans three crossings per
    step): every crossing at its analytic time (2 of 10 were found before, at wrong times with
    RK4)."""
    model = Line(0.0)
    kw = dict(solver=js.RK4(), dt=0.5) if fixed else TIGHT
    sol = js.simulate(model, model.init_state(), 1.5, events=(FAST,), max_events=16, **kw)
    exact = (2 * np.arange(10) + 1) * np.pi / 40
    assert int(sol.events.count) == 10
    np.testing.assert_allclose(sol.events.t[:10], exact, rtol=0, atol=EVENT_TIME_ATOL)


# --------------------------------------------------------------------------------------------------
# Crossings on segment boundaries (issue 47): a crossing that falls on a clock tick, a scheduled
# discontinuity or a sample time, exactly or one ulp before or after it, is found once, at its
# time, for every direction, with and without resets, on fixed and adaptive steps. (With a clock,
# a crossing on a tick was never located after the dense-output check grid came in: the segment
# before the tick saw the condition a round-off below zero on its dense output, the segment after
# it started from the step's end state exactly on zero, heading away.)

# Event times vs the exact ones: x' = +-1 is integrated exactly by every solver here (round-off
# ~1e-16 per step); the root finder stops within 1e-13 s.
BOUNDARY_TIME_ATOL = 1e-12
# Crossing levels [s] of the four conditions (each on a tick of a 0.1 s clock; firings of the
# sawtooths at multiples of them never coincide with another condition's).
LEVELS = {"rise": 0.3, "fall": 0.4, "both": 0.7, "time": 0.5}
T_END = 0.95


class Saws(js.AbstractDynamicObject):
    """x' = 1, w' = -1, u' = 1 from 0: one state per event condition."""

    name: str = eqx.field(static=True, default="saws")

    def init_state(self):
        return {"x": jnp.asarray(0.0), "w": jnp.asarray(0.0), "u": jnp.asarray(0.0)}

    def drift(self, t, y, args):
        return {"x": jnp.asarray(1.0), "w": jnp.asarray(-1.0), "u": jnp.asarray(1.0)}


def _zero(key):
    """Reset `key` to 0 when `args["reset"]` (a run-time switch: one program for both)."""

    def reset(t, y, z, args):
        return {**y, key: jnp.where(args["reset"], 0.0, y[key])}, z

    return reset


SAW_EVENTS = (
    js.Event(lambda t, y, a: y["x"] - a["L"][0], direction="rising", reset=_zero("x"), name="rise"),
    js.Event(
        lambda t, y, a: y["w"] + a["L"][1], direction="falling", reset=_zero("w"), name="fall"
    ),
    js.Event(lambda t, y, a: y["u"] - a["L"][2], direction="both", reset=_zero("u"), name="both"),
    js.Event(lambda t, y, a: t - a["L"][3], direction="rising", name="time"),
)


def _expected_firings(levels, resets):
    """{event index: firing times} (a sawtooth fires again one level after each firing)."""
    out = {}
    for i, lv in enumerate(levels):
        times = [lv]
        while resets and i < 3 and times[-1] + lv <= T_END:
            times.append(times[-1] + lv)
        out[i] = times
    return out


BOUNDARY_SOLVERS = {
    "Dopri5": dict(solver=js.Dopri5(), rtol=1e-9, atol=1e-12),
    "Tsit5": dict(solver=js.Tsit5(), rtol=1e-9, atol=1e-12),
    "RK4": dict(solver=js.RK4(), dt=0.05),
}
TICKS = np.round(np.arange(1, 10) * 0.1, 12)
BOUNDARIES = {
    "tick": dict(clocks=(js.DiscreteModel("ctl", js.Clock(0.1), lambda t, y, z, a: (z, {})),)),
    "discontinuity": dict(discontinuities=tuple(float(t) for t in TICKS)),
    "sample": dict(ts=np.r_[0.0, TICKS, T_END]),
}


@pytest.mark.parametrize("boundary", list(BOUNDARIES))
@pytest.mark.parametrize("solver", ["Dopri5", "RK4", pytest.param("Tsit5", marks=pytest.mark.slow)])
def test_crossings_on_boundaries(solver, boundary):
    """x' = 1, w' = -1, u' = 1 from 0; rising x - L_r, falling w + L_f, both u - L_b (each reset
    to 0 on firing, or not) and rising t - L_t, with every level on a boundary (0.3, 0.4, 0.7,
    0.5 s) or one ulp below or above it: each fires at its level (and a sawtooth again one level
    later), and the states end where the firings leave them. Before the fix a tick run fired
    nothing at all (ok=True, x(0.95) = 0.95)."""
    model = Saws()
    kw = {**BOUNDARY_SOLVERS[solver], **BOUNDARIES[boundary]}
    for resets, ulps in itertools.product((False, True), (-1, 0, 1)):
        levels = [float(v) for v in LEVELS.values()]
        if ulps:
            levels = [float(np.nextafter(v, np.inf * ulps)) for v in levels]
        sol = js.simulate(
            model, model.init_state(), T_END, events=SAW_EVENTS, max_events=16,
            args={"L": jnp.asarray(levels), "reset": jnp.asarray(resets)}, **kw,
        )  # fmt: skip
        assert bool(sol.ok)
        n = int(sol.events.count)
        t, idx = np.asarray(sol.events.t[:n]), np.asarray(sol.events.index[:n])
        expected = _expected_firings(levels, resets)
        what = f"{'with' if resets else 'without'} resets, levels {ulps:+d} ulp"
        for i, times in expected.items():
            np.testing.assert_allclose(
                t[idx == i], times, rtol=0, atol=BOUNDARY_TIME_ATOL,
                err_msg=f"event {SAW_EVENTS[i].name}, {what}",
            )  # fmt: skip
        last = [expected[i][-1] if resets else 0.0 for i in range(3)]
        ends = [float(sol.ys[k][-1]) for k in ("x", "w", "u")]
        exact = [T_END - last[0], -(T_END - last[1]), T_END - last[2]]
        np.testing.assert_allclose(ends, exact, rtol=0, atol=BOUNDARY_TIME_ATOL, err_msg=what)


TOUCH_TICK = js.Event(lambda t, y, a: (y["x"] - 0.4) ** 2, direction="both", name="touch")
CUBE_TICK = js.Event(lambda t, y, a: (y["x"] - 0.4) ** 3, direction="rising", name="cube")


@pytest.mark.parametrize("solver", ["Dopri5", "RK4"])
def test_tangency_and_flat_crossing_on_a_tick(solver):
    """x = t with a 0.1 s clock: (x - 0.4)^2 touches zero on the tick at 0.4 (no firing; it fired
    there before, as the segment after the tick started on the surface with no rate and took no
    side); (x - 0.4)^3 crosses there with zero rate (one firing, at 0.4)."""
    model = Line(1.0)
    clock = js.DiscreteModel("ctl", js.Clock(0.1), lambda t, y, z, a: (z, {}))
    kw = dict(BOUNDARY_SOLVERS[solver], clocks=(clock,), max_events=4)
    sol = js.simulate(model, model.init_state(), T_END, events=(TOUCH_TICK,), **kw)
    assert int(sol.events.count) == 0
    sol = js.simulate(model, model.init_state(), T_END, events=(CUBE_TICK,), **kw)
    assert int(sol.events.count) == 1
    assert abs(float(sol.events.t[0]) - 0.4) < BOUNDARY_TIME_ATOL
