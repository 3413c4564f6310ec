"""Which one-step VJP `jaxsim.DiscreteAdjoint` takes for unrolled stages (`_staged_step_vjp`:
stage by stage when XLA compiles loops whole, the written-out step's otherwise), and that both
give the checkpointed loop's gradient.

Oracle: `adjoint=diffrax.RecursiveCheckpointAdjoint()`, which differentiates the same accepted
step sequence with the step sizes held fixed, so every choice agrees with it to round-off.
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim._compilation import _jit as _compile, _xla_options
from jaxsim._cores import _adaptive as core


# The adjoints differ by the order of the floating-point sums only (measured up to 3e-16 relative
# here; 1e-12 on a day of the J2 orbit with 780 steps).
ROUND_OFF_REL_TOL = 1e-12
RTOL = 1e-8  # few steps: small programs


class Kepler(js.AbstractDynamicObject):
    """Two-body orbit (mu a parameter), with a small along-track push after a breakpoint."""

    mu: jax.Array
    name: str = eqx.field(static=True, default="kepler")

    def init_state(self, x=(1.0, 0.0, 0.0, 0.0, 1.1, 0.0)):
        x = jnp.asarray(x, float)
        return {"r": x[:3], "v": x[3:]}

    def drift(self, t, y, args):
        r = y["r"]
        r2 = r @ r
        push = jnp.where(t >= 1.0, 1e-2, 0.0) * y["v"]
        return {"r": y["v"], "v": -self.mu * r / (r2 * jnp.sqrt(r2)) + push}

    def breakpoints(self):
        return (1.0,)


def _gradient(adjoint=None):
    model = Kepler(jnp.asarray(1.0))
    ts = jnp.linspace(0.0, 2.5, 6)

    def loss(p):
        m, x0 = p
        y0 = {"r": m.init_state()["r"] * x0, "v": m.init_state()["v"]}
        sol = js.simulate(
            m, y0, 2.5, ts=ts, solver=js.Dopri8(), rtol=RTOL, atol=RTOL, outputs=False,
            adjoint=adjoint,
        )  # fmt: skip
        return jnp.sum(sol.ys["r"] ** 2) + jnp.sum(sol.ys["v"][-1])

    jax.clear_caches()  # the choice is made at trace time: trace afresh
    g = jax.grad(loss)((model, jnp.asarray(1.0)))
    return np.array([float(g[0].mu), float(g[1])])


@pytest.fixture(scope="module")
def checkpointed():
    return _gradient(dfx.RecursiveCheckpointAdjoint())


@pytest.mark.parametrize("hoisted", [True, False], ids=["staged", "written-out"])
def test_unrolled_stages_give_the_checkpointed_gradient(monkeypatch, checkpointed, hoisted):
    for part in (core._adjoint, core._record):  # where the choice is read
        monkeypatch.setattr(part, "loops_hoisted", lambda: hoisted)
    pair = core.pair_of(js.Dopri8._unrolled_cls)
    assert core._staged_step_vjp(pair, unrolled=True) is hoisted
    np.testing.assert_allclose(_gradient(), checkpointed, rtol=ROUND_OFF_REL_TOL)


def test_looped_stages_always_staged(monkeypatch):
    for part in (core._adjoint, core._record):
        monkeypatch.setattr(part, "loops_hoisted", lambda: False)
    assert core._staged_step_vjp(core.pair_of(js.Dopri8._unrolled_cls), unrolled=False)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000", True),
        ("--xla_backend_extra_options=a=1,xla_cpu_small_while_loop_byte_threshold=65536", True),
        ("--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024", False),
        ("--xla_cpu_use_thunk_runtime=true", False),
        ("", False),
    ],
)
def test_loops_hoisted_reads_the_threshold_from_xla_flags(monkeypatch, flags, expected):
    monkeypatch.setenv("XLA_FLAGS", flags)
    assert _compile.loops_hoisted() is (expected and jax.default_backend() == "cpu")
    # A program jaxsim builds with hoisting (its compile options carry the option) is hoisted.
    with _xla_options.building(True):
        assert _compile.loops_hoisted()


def test_ulps_below_t1_in_one_custom_jvp():
    """The end-of-run guard `t1` minus 100 ulps, traced as one function: the same float as 100
    separate steps down, differentiated as the identity."""
    t1 = jnp.asarray(3600.0)
    want = t1
    for _ in range(core._END_ULPS):
        want = core._prev_before(want)
    got = core._ulps_before(t1, core._END_ULPS)
    assert float(got) == float(want) < 3600.0
    assert float(jax.grad(lambda t: core._ulps_before(t, core._END_ULPS))(t1)) == 1.0
