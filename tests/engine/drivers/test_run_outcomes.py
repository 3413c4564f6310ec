"""How runs end: level-triggered stops, truthful failures (result codes, t_final, marked samples,
errors with throw=True) and the checks of event resets, on the clocked driver."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js


G = 9.81
# Event times located by the root finder on a ballistic (quadratic) condition: 1e-13 relative
# plus round-off of the dense output.
EVENT_TOL = 1e-9
ADAPTIVE = {"solver": js.Tsit5(), "rtol": 1e-10, "atol": 1e-12}


class Ball(js.AbstractDynamicObject):
    name: str = eqx.field(static=True, default="ball")

    def init_state(self, h0=10.0, v0=0.0):
        return {"h": jnp.asarray(h0, float), "v": jnp.asarray(v0, float)}

    def drift(self, t, y, args):
        return {"h": y["v"], "v": jnp.asarray(-G) + 0.0 * y["h"]}


BALL = Ball()


def ground(**kw):
    return js.Event(lambda t, y, a: y["h"], direction="falling", name="ground", **kw)


def bounce(t, y, z, args):
    return {**y, "v": -0.8 * y["v"]}, z


@pytest.mark.parametrize("opts", [ADAPTIVE, {"dt": 0.01}], ids=["Tsit5", "RK4"])
def test_terminal_condition_holding_at_t0_ends_the_run_there(opts):
    # Already below ground at t0 (h < 0, falling side): level-triggered, like bdsim's STOP.
    sol = js.simulate(
        BALL, BALL.init_state(-1.0), 2.0, sample_dt=0.5, events=[ground(terminal=True)], **opts
    )
    assert float(sol.t_final) == 0.0 and int(sol.events.count) == 1
    assert float(sol.events.t[0]) == 0.0 and int(sol.events.index[0]) == 0
    assert float(sol.ys["h"][0]) == -1.0 and np.all(np.isnan(np.asarray(sol.ys["h"])[1:]))
    assert sol.result == js.RESULTS.successful


def test_edge_triggered_events_do_not_fire_on_their_starting_level():
    # The same condition without `terminal`: it fires on crossings only (none here: h stays < 0).
    sol = js.simulate(BALL, BALL.init_state(-1.0), 1.0, events=[ground()], **ADAPTIVE)
    assert int(sol.events.count) == 0 and float(sol.t_final) == 1.0


def test_terminal_condition_holding_after_a_reset_ends_the_run():
    # At the first impact the reset teleports the ball below a floor at h = -5 m: the floor's
    # terminal event holds right after the reset and the run ends at the impact time.
    def sink(t, y, z, args):
        return {**y, "h": jnp.asarray(-6.0)}, z

    floor = js.Event(lambda t, y, a: y["h"] + 5.0, direction="falling", terminal=True, name="floor")
    sol = js.simulate(
        BALL, BALL.init_state(), 3.0, events=[ground(reset=sink), floor], **ADAPTIVE
    )  # fmt: skip
    t_hit = np.sqrt(2 * 10.0 / G)
    assert float(sol.t_final) == pytest.approx(t_hit, abs=EVENT_TOL)
    np.testing.assert_array_equal(np.asarray(sol.events.index)[:2], [0, 1])
    assert float(sol.events.y_after["h"][1]) == -6.0


def test_too_many_events_is_reported_with_its_own_code_and_the_true_stop_time():
    ev = ground(reset=bounce)
    with pytest.raises(Exception, match="max_events"):
        jax.block_until_ready(
            js.simulate(BALL, BALL.init_state(), 8.0, events=[ev], max_events=2, **ADAPTIVE).ys
        )
    sol = js.simulate(
        BALL, BALL.init_state(), 8.0, sample_dt=0.25, events=[ev], max_events=2, throw=False,
        **ADAPTIVE,
    )  # fmt: skip
    assert sol.result == js.RESULTS.too_many_events and not bool(sol.ok)
    assert "max_events" in sol.message
    # Impacts at t1, t1 + 2 e t1, ... (e = 0.8; 1.43, 3.71, 5.54 s): the third overflows the log.
    t1 = np.sqrt(2 * 10.0 / G)
    t3 = t1 + 2 * 0.8 * t1 + 2 * 0.8**2 * t1
    assert float(sol.t_final) == pytest.approx(t3, abs=EVENT_TOL)
    ts = np.asarray(sol.ts)
    assert np.all(np.isnan(np.asarray(sol.ys["h"])[ts > float(sol.t_final)]))
    assert np.all(np.isfinite(np.asarray(sol.ys["h"])[ts <= float(sol.t_final)]))


class Blowup(js.AbstractDynamicObject):
    """dx/dt = x^2 from x0 = 1: infinite at t = 1."""

    name: str = eqx.field(static=True, default="blowup")

    def init_state(self):
        return {"x": jnp.asarray(1.0)}

    def drift(self, t, y, args):
        return {"x": y["x"] ** 2}


def test_nonfinite_state_in_a_clocked_run_is_reported_not_silent():
    model = Blowup()
    clock = js.DiscreteModel("noop", js.Clock(0.25), lambda t, y, z, a: (z, {}))
    with pytest.raises(Exception, match="non-finite"):
        jax.block_until_ready(
            js.simulate(model, model.init_state(), 2.0, dt=0.25, clocks=[clock]).ys
        )
    sol = js.simulate(
        model, model.init_state(), 2.0, dt=0.25, sample_dt=0.25, clocks=[clock], throw=False
    )
    assert sol.result == js.RESULTS.nonfinite_state
    x = np.asarray(sol.ys["x"])
    ts = np.asarray(sol.ts)
    # t_final: the last sample whose state (and every earlier one) is finite; later rows NaN.
    assert np.all(np.isfinite(x[ts <= float(sol.t_final)]))
    assert np.all(np.isnan(x[ts > float(sol.t_final)])) and float(sol.t_final) < 2.0


def test_max_steps_in_a_segment_is_reported_with_the_time_reached():
    model = Blowup()
    clock = js.DiscreteModel("noop", js.Clock(0.5), lambda t, y, z, a: (z, {}))
    sol = js.simulate(
        model, model.init_state(), 2.0, solver=js.Tsit5(), rtol=1e-8, atol=1e-8, max_steps=50,
        clocks=[clock], throw=False,
    )  # fmt: skip
    assert sol.result == js.RESULTS.max_steps_reached
    assert 0.5 <= float(sol.t_final) < 1.0 + 1e-3


def test_a_reset_must_return_the_state_and_the_discrete_states():
    def wrong(t, y, z, args):
        return {**y, "v": -y["v"]}  # forgot z

    with pytest.raises(ValueError, match=r"reset of `events\[0\]`.*pair `\(y, z\)`"):
        js.simulate(BALL, BALL.init_state(), 2.0, events=[ground(reset=wrong)], **ADAPTIVE)

    def misshapen(t, y, z, args):
        return {"h": y["h"]}, z

    with pytest.raises(ValueError, match="structure of the state"):
        js.simulate(BALL, BALL.init_state(), 2.0, events=[ground(reset=misshapen)], **ADAPTIVE)
