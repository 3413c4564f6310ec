"""The adaptive core's loop without a step map (`jaxsim._cores._adaptive`): a model whose `step_map`
is the default identity runs a loop without the first-stage recomputation test, the jump test and
the count updates. Oracle: the same model with an explicit identity `step_map` (which takes the
general loop) gives the same steps and the same state; and the benchmark's issue table
(`benchmarks/bench_lean.py`)."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim._cores import _adaptive as ac
from tests._oscillator import Osc


# Both loops do the same arithmetic on the same steps: the states agree to the last bits.
SAME_STATE_ATOL = 1e-14
T1 = 20.0  # [s] about three periods of the oscillator
RTOL = 1e-9


class OscMapped(Osc):
    """`Osc` with an explicit identity step map: the general loop (counts, jump test, redo)."""

    name: str = eqx.field(static=True, default="mapped")

    def step_map(self, t, y):
        return {"x": y["x"] * 1.0, "v": y["v"]}, {}


def _run(model, y0, solver):
    return js.simulate(model, y0, T1, solver=solver, rtol=RTOL, atol=RTOL, outputs=False)


def test_identity_step_map_is_detected():
    assert ac._identity_step_map(Osc())
    assert not ac._identity_step_map(OscMapped())
    assert ac._identity_step_map(js.System([Osc(), Osc(name="b")]))
    assert not ac._identity_step_map(js.System([Osc(), OscMapped()]))


@pytest.mark.parametrize("solver", [js.Tsit5(), js.Dopri8()], ids=["tsit5", "dopri8"])
def test_identity_loop_equals_general_loop(solver):
    fast = _run(Osc(), Osc().init_state(), solver)
    general = _run(OscMapped(), OscMapped().init_state(), solver)
    for key in ("num_steps", "num_rejected_steps", "num_rhs"):
        assert int(fast.stats[key]) == int(general.stats[key]), key
    for key in ("x", "v"):
        np.testing.assert_allclose(fast.ys[key], general.ys[key], rtol=0, atol=SAME_STATE_ATOL)
    # And the solution is the oscillator's: x = cos t.
    np.testing.assert_allclose(fast.ys["x"][-1], np.cos(T1), atol=1e3 * RTOL)


def test_identity_loop_in_a_system_with_samples():
    sys2 = js.System([Osc(), Osc(name="b")])
    y0 = {"osc": Osc().init_state(), "b": {"x": jnp.asarray(0.0), "v": jnp.asarray(1.0)}}
    ts = np.linspace(0.0, T1, 11)
    sol = js.simulate(sys2, y0, T1, solver=js.Tsit5(), rtol=RTOL, atol=RTOL, ts=ts, outputs=False)
    np.testing.assert_allclose(sol.ys["osc"]["x"], np.cos(ts), atol=1e3 * RTOL)
    np.testing.assert_allclose(sol.ys["b"]["x"], np.sin(ts), atol=1e3 * RTOL)


def test_supports_dtype_check_equals_the_layout_rule():
    # `supports` checks the state's dtypes without building its layout; same answer as
    # `StateLayout.of(y0) is not None` (one floating dtype over every leaf).
    from jaxsim._model._layout import StateLayout

    trees = [
        {"a": jnp.ones(3), "b": jnp.zeros(())},
        {"a": jnp.ones(3, jnp.float32), "b": jnp.zeros(())},
        {"a": 1.0, "b": np.ones(2)},
        {"a": jnp.ones(2, int)},
        {},
        {"a": np.ones(2, np.float32)},
        (1.0, 2),
        [jnp.ones(2, jnp.complex128)],
    ]
    for tree in trees:
        assert ac._one_inexact_dtype(tree) == (StateLayout.of(tree) is not None), tree
    assert ac.supports(js.Dopri8(), Osc().init_state(), None)
    assert not ac.supports(js.Dopri8(), {"a": jnp.ones(2), "n": jnp.ones(2, int)}, None)
