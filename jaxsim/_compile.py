"""XLA compile options for jaxsim's jitted entry points, and `jaxsim.jit` to use them in user code.

On the CPU, jaxsim compiles with

- XLA's classic loop emitters instead of its newer fusion emitters
  (`xla_cpu_use_fusion_emitters=False`). Spacecraft models are hundreds of tiny (3-vector, 3x3)
  kernels per right-hand side, for which the classic emitters generate the code in about 40 % less
  time and with fewer kernels; run times were the same within noise (measured on the `combined`
  model, RK4 step and its gradient: `benchmarks/bench_combined.py`).
- no YNNPACK fusions (`xla_cpu_experimental_ynn_fusion_type=""`). From about 128 members a
  vmapped batch's small reductions (`[n, 2, 3, 3]` sums) are handed to the YNNPACK library, whose
  per-call cost is far above the work: 128 to 1024 dispersed `combined` members ran at 5.2 to
  10.9 us per member-step with them and 1.8 to 1.9 us without (64 members: 2.5 us either way;
  single runs and gradients unchanged).

The options apply to top-level calls of `simulate`, `run_batch` and the functions wrapped by
`jaxsim.jit`, never to other JAX code in the process; on other backends nothing changes. Inside a
user's `jax.jit`/`vmap`/`grad`, the outermost transformation decides how everything is compiled. Set the environment variable
`JAXSIM_XLA_DEFAULTS=1` (before the first compile) to use XLA's defaults. An option the installed
jaxlib no longer knows (each is checked once, on a trivial program) is left out with a warning.
"""

import functools
import os
import warnings
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax


CPU_COMPILER_OPTIONS = {
    "xla_cpu_use_fusion_emitters": False,
    "xla_cpu_experimental_ynn_fusion_type": "",
}


def compiler_options() -> dict:
    """The compile options jaxsim uses on the current default backend (empty: XLA's defaults)."""
    if os.environ.get("JAXSIM_XLA_DEFAULTS", "0") not in ("", "0"):
        return {}
    if jax.default_backend() != "cpu":
        return {}
    return dict(_cpu_options_supported())


@functools.cache
def _cpu_options_supported() -> tuple:
    # Each option checked once, on a trivial program, at the first compile (importing initializes
    # no backend); one a newer jaxlib rejects is dropped, the others are kept.
    kept = []
    for name, value in CPU_COMPILER_OPTIONS.items():
        try:
            jax.jit(lambda x: x + 1.0, compiler_options={name: value}).lower(1.0).compile()
        except Exception as err:  # noqa: BLE001 - any rejection means: leave this option out
            warnings.warn(
                f"jaxsim: this jaxlib rejects the CPU compile option {name}={value!r} "
                f"({type(err).__name__}: {err}); compiling without it.",
                RuntimeWarning,
                stacklevel=3,
            )
            continue
        kept.append((name, value))
    return tuple(kept)


def _at_top_level() -> bool:
    # No JAX trace active (jax's own check; if a future jax moves it, assume a trace).
    try:
        from jax._src.core import trace_state_clean
    except ImportError:
        return False
    return bool(trace_state_clean())


class _Jit:
    # Two equinox filter-jits of one function, with and without the options: the choice is made
    # per call (backend, environment, support), so importing jaxsim initializes no backend.
    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self._default = eqx.filter_jit(fun)
        self._tuned = None  # made at the first tuned call (the options are checked then)

    def _pick(self):
        # Compile options are only allowed on the outermost jit: inside any trace (a user's jit,
        # vmap, grad), the plain filter-jit is used and the outer transformation decides (and the
        # one-off support check is not run inside someone else's trace).
        options = compiler_options() if _at_top_level() else {}
        if not options:
            return self._default
        if self._tuned is None:
            self._tuned = eqx.filter_jit(self.__wrapped__, compiler_options=options)
        return self._tuned

    def __call__(self, *args, **kwargs):
        args, kwargs = _models_as_traced((args, kwargs))
        if _at_top_level():
            # A top-level call may run a compiled program from jaxsim's cache folder (a restart
            # then skips tracing, lowering and compiling: `jaxsim._program_cache`).
            from . import _program_cache

            out = _program_cache.call(self.__wrapped__, compiler_options(), args, kwargs)
            if out is not _program_cache.UNCACHED:
                return out
        return self._pick()(*args, **kwargs)

    def lower(self, *args, **kwargs):
        """As `jax.jit(...).lower`; its `.compile()` uses the same options as a call."""
        args, kwargs = _models_as_traced((args, kwargs))
        return self._pick().lower(*args, **kwargs)

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return functools.partial(self, instance)


def _models_as_traced(tree):
    # Python floats in the (non-static) fields of models (`AbstractDynamicObject`s, e.g. put there
    # with `eqx.tree_at`) become float64 arrays: `eqx.filter_jit` would treat them as compile-time
    # constants and compile again for every value. Other arguments are left as they are.
    from ._checks import model_as_traced
    from ._dynamic_object import AbstractDynamicObject

    is_model = lambda x: isinstance(x, AbstractDynamicObject)
    leaves, treedef = jax.tree_util.tree_flatten(tree, is_leaf=is_model)
    if not any(is_model(x) for x in leaves):
        return tree
    return jax.tree_util.tree_unflatten(
        treedef, [model_as_traced(x) if is_model(x) else x for x in leaves]
    )


def jit(fun: Callable[..., Any]) -> Callable[..., Any]:
    """`equinox.filter_jit` with jaxsim's compile options (`jaxsim.compiler_options()`).

    On the CPU those are XLA's classic loop emitters (about 40 % less compile time for the hundreds
    of tiny kernels of a spacecraft model) and no YNNPACK fusions (vmapped batches of 128 members or
    more ran 3-6x faster per member-step without them); `JAXSIM_XLA_DEFAULTS=1`, set before the
    first compile, uses XLA's defaults instead.

    Use it instead of `jax.jit`/`eqx.filter_jit` for your own functions that run simulations, such
    as a gradient, `jaxsim.jit(jax.grad(loss))`: the outermost jit decides how everything inside it
    is compiled, so simulations inside a plain `jax.jit` are compiled with XLA's defaults.

    Python floats in the fields of models passed as arguments (`AbstractDynamicObject`s, e.g. a
    parameter set with `eqx.tree_at(..., model, 3.0)`) are traced as float64 arrays, so a sweep over
    their values compiles once; `equinox.filter_jit` alone would compile once per value.
    """
    return _Jit(fun)
