"""Zero-crossing events: gradients of event times and post-event states, vmap, bounds, rules."""

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
