"""jaxsim's compile options (`jaxsim._compile`): when they apply, and the fallbacks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim import _compile


# Two compilations of one float64 program may differ in the last bits (other kernel fusion).
RTOL_OTHER_COMPILE = 1e-12
# RK4 at h = 0.01 on x' = -a x, a = 2, t = 1: global error about t (ah)^4 / 120 = 1.3e-9 relative.
RTOL_RK4 = 1e-8


class _Decay(js.AbstractDynamicObject):
    name: str = "decay"

    def init_state(self):
        return {"x": jnp.ones(3)}

    def drift(self, t, y, args):
        return {"x": -jnp.asarray(args) * y["x"]}


def _final(rate):
    sol = js.simulate(_Decay(), _Decay().init_state(), 1.0, dt=0.01, args=rate, outputs=False)
    return sol.ys["x"][-1, 0]


def test_cpu_options_used_on_cpu():
    expected = _compile.CPU_COMPILER_OPTIONS if jax.default_backend() == "cpu" else {}
    assert js.compiler_options() == expected


def test_environment_opt_out(monkeypatch):
    monkeypatch.setenv("JAXSIM_XLA_DEFAULTS", "1")
    assert js.compiler_options() == {}
    # simulate still runs, compiled with XLA's defaults.
    np.testing.assert_allclose(_final(2.0), np.exp(-2.0), rtol=RTOL_RK4)


def test_rejected_option_is_left_out_with_warning(monkeypatch):
    """An option the installed jaxlib rejects is dropped (named in a warning), the others kept."""
    if jax.default_backend() != "cpu":
        pytest.skip("CPU compile options only")
    options = {"xla_no_such_option_for_jaxsim": True, "xla_cpu_use_fusion_emitters": False}
    monkeypatch.setattr(_compile, "CPU_COMPILER_OPTIONS", options)
    _compile._cpu_options_supported.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="rejects the CPU compile option xla_no_such"):
            assert js.compiler_options() == {"xla_cpu_use_fusion_emitters": False}
    finally:
        _compile._cpu_options_supported.cache_clear()


def test_nested_and_top_level_calls_agree():
    """Top level (options), inside a user's jax.jit (outer decides), and jaxsim.jit of a gradient."""
    top = _final(2.0)
    nested = jax.jit(_final)(2.0)
    np.testing.assert_allclose(nested, top, rtol=RTOL_OTHER_COMPILE)
    g_js = js.jit(jax.grad(_final))(2.0)
    g_jax = jax.jit(jax.grad(_final))(2.0)
    np.testing.assert_allclose(g_js, g_jax, rtol=RTOL_OTHER_COMPILE)
    # d/da exp(-a) = -exp(-a), to the scheme's error.
    np.testing.assert_allclose(g_js, -np.exp(-2.0), rtol=RTOL_RK4)
    # The lowered program of jaxsim.jit is inspectable like jax.jit's.
    assert js.jit(_final).lower(2.0).compile()(2.0) == pytest.approx(float(top), rel=1e-12)
