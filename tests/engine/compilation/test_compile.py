"""jaxsim's compile options (`jaxsim._compilation._jit`): when they apply, and the fallbacks; what compiles
again (tolerance sweeps do not; changed constants warn), the bound on programs held, and how a
model's Python ints are converted (`ints_are_parameters`)."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim as js
from jaxsim._compilation import _jit as _compile, _xla_options as _xla_setup
from tests.helpers import compile_log


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
    if expected:  # with the entry of jaxsim's per-program small-loop hoisting, where available
        expected = {**expected, **_xla_setup.marker_options()}
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
            kept = js.compiler_options()
        assert kept == {"xla_cpu_use_fusion_emitters": False, **_xla_setup.marker_options()}
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


def test_inside_a_jit_entry_points_are_traced_in_place():
    """Under a jit (and transformations staged into one) jaxsim's entry points are traced into
    the enclosing program, not as nested jits (a nested jit traced a custom_vjp's primal and its
    forward pass both); outside one (eager grad, vmap) they stay jitted."""
    seen = []

    def probe(x):
        seen.append(_compile._inside_jit())
        return x

    jax.jit(probe)(1.0)
    jax.jit(jax.grad(probe))(1.0)
    jax.jit(jax.vmap(probe))(jnp.ones(2))
    jax.grad(probe)(1.0)
    jax.vmap(probe)(jnp.ones(2))
    assert seen == [True, True, True, False, False]
    assert "_run_fixed" not in jax.jit(_final).lower(2.0).as_text()


# --------------------------------------------------------------------------------------------------
# Compiles: sweeps over tolerances compile once; recompiles of one shape warn; programs bounded


def _decay_final(**kw):
    model = _Decay()
    return js.simulate(model, model.init_state(), 1.0, args=2.0, outputs=False, **kw).ys["x"][-1, 0]


@pytest.mark.usefixtures("fresh_programs")
@pytest.mark.parametrize(
    "solver", [js.Tsit5(), js.Dopri5().to_diffrax()], ids=["jaxsim core", "diffrax"]
)
def test_a_tolerance_sweep_compiles_once(solver):
    _decay_final(solver=solver, rtol=1e-6, atol=1e-6)
    with compile_log() as compiles:
        finals = [_decay_final(solver=solver, rtol=tol, atol=tol) for tol in (1e-7, 1e-8, 1e-9)]
    assert compiles == []
    # Tighter tolerances: closer to exp(-2), each within its tolerance (times a safety factor).
    for tol, final in zip((1e-7, 1e-8, 1e-9), finals, strict=True):
        np.testing.assert_allclose(final, np.exp(-2.0), rtol=100 * tol)


class _Closure(js.AbstractDynamicObject):
    """x' = -rate(t) x, with `rate` a function: a compile-time constant of the program."""

    rate: Callable
    name: str = "closure"

    def init_state(self):
        return {"x": jnp.ones(3)}

    def drift(self, t, y, args):
        return {"x": -self.rate(t) * y["x"]}


def _closure_final(k):
    # A model rebuilt around a lambda closing over a float: a new constant per call.
    model = _Closure(lambda t: k)
    return js.simulate(model, model.init_state(), 1.0, dt=0.01, outputs=False).ys["x"][-1, 0]


@pytest.fixture
def fixed_driver(monkeypatch):
    """The fixed-step driver, with a fresh record of its compiles."""
    from jaxsim._drivers._plain import _run_fixed

    monkeypatch.setattr(_run_fixed, "_recompiles", _compile._Recompiles(_run_fixed.__wrapped__))
    return _run_fixed


def test_the_third_recompile_of_one_shape_warns_and_names_the_cause(fixed_driver):
    rates = (1.0, 1.5, 2.0, 2.5)
    with pytest.warns(js.RecompileWarning) as caught:
        finals = [_closure_final(k) for k in rates]
    assert len(caught) == 1  # at the third compile, once per shape
    message = str(caught[0].message)
    assert "_run_fixed compiled 3 programs" in message and "`model.rate`, a function" in message
    for k, final in zip(rates, finals, strict=True):  # each run is still right
        np.testing.assert_allclose(final, np.exp(-k), rtol=RTOL_RK4)


def test_programs_per_function_are_bounded_and_released(fixed_driver, monkeypatch):
    monkeypatch.setattr(_compile, "MAX_PROGRAMS", 2)
    cache = fixed_driver._pick()._cached
    with pytest.warns(js.RecompileWarning):
        for k in (1.0, 1.25, 1.5, 1.75, 2.0):
            _closure_final(k)
            assert cache._cache_size() <= 2
    jax.clear_caches()
    assert cache._cache_size() == 0


class _Counts(js.AbstractDynamicObject):
    """A user's model: an int field is a count (stays a Python int) unless the class says
    otherwise (`ints_are_parameters`)."""

    n: int
    rate: float
    name: str = "counts"

    def init_state(self):
        return {"x": jnp.ones(self.n)}

    def drift(self, t, y, args):
        return {"x": -self.rate * y["x"]}


class _Parameters(_Counts):
    ints_are_parameters = True


def test_ints_are_converted_where_the_class_declares_it():
    from jaxsim._model._arguments import model_as_traced

    kept = model_as_traced(_Counts(n=3, rate=2.0))
    assert kept.n == 3 and type(kept.n) is int and isinstance(kept.rate, jax.Array)
    made = model_as_traced(_Parameters(n=3, rate=2.0))
    assert isinstance(made.n, jax.Array) and made.n.dtype == jnp.float64
    # The effectors library declares it: a hub mass given as an int is a float64 parameter, also
    # inside a user's model that does not declare it (the hub's own flag decides).
    import effectors as fx

    hub = fx.Hub(750, np.diag([900.0, 800.0, 600.0]))
    hub = eqx.tree_at(lambda h: h.mass, hub, 500)
    assert model_as_traced(_Holder(hub)).hub.mass.dtype == jnp.float64


class _Holder(js.AbstractDynamicObject):
    hub: object
    name: str = "holder"

    def init_state(self):
        return {"x": jnp.zeros(1)}

    def drift(self, t, y, args):
        return {"x": jnp.zeros(1)}
