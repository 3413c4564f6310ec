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
- XLA's small-while-loop hoisting at 1 MB per loop iteration (`jaxsim._compilation._xla_options`: the entry
  `MARKER`, which jaxsim's hook on JAX turns into XLA's per-program option): each step loop
  compiled as one function, 3-5x faster for small models. `JAXSIM_SMALL_LOOPS=0` leaves it out.
  A program that differentiates adaptive steps in diffrax's loop with a checkpointing adjoint is
  compiled without it (`replay_safe`).

The options apply to top-level calls of `simulate`, `run_batch` and the functions wrapped by
`jaxsim.jit`, never to other JAX code in the process; on other backends nothing changes. Inside a
user's `jax.jit`/`vmap`/`grad`, the outermost transformation decides how everything is compiled
(inside a `jit`, jaxsim's entry points are traced into that program directly, not as nested
`jit`s, which traced `DiscreteAdjoint`'s step loop twice in a gradient). Set the environment variable
`JAXSIM_XLA_DEFAULTS=1` (before the first compile) to use XLA's defaults (all three off;
`JAXSIM_SMALL_LOOPS=0` switches off the hoisting alone). An option the installed
jaxlib no longer knows (each is checked once, on a trivial program) is left out with a warning.

**Compiles.** A top-level call compiles once per shape of its array arguments and per value of
its other arguments, which are constants of the program (Python numbers, strings, functions,
static fields: `equinox.filter_jit`'s rule). Python floats in models' fields are made arrays
first (`_models_as_traced`), and `simulate` passes tolerances as arrays, so sweeps over them
compile once. A shape compiled again because such a constant changed (a float in `args`, a
lambda built again for an event) warns at its `WARN_AT_COMPILE`-th compile (`RecompileWarning`).
Each jitted function holds at most `MAX_PROGRAMS` compiled programs: one more drops them all
(memory stays bounded over any number of recompiles; `jax.clear_caches()` drops them too).
With `jaxsim.enable_cache()` the top-level calls run with JAX's persistent-cache threshold at 0
for the calling thread (`jaxsim._compilation._cache.for_jaxsim_programs`).
"""

import collections
import dataclasses
import functools
import inspect
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import numpy as np

from .._model._arguments import model_as_traced
from .._model._dynamic_object import AbstractDynamicObject
from . import _cache, _xla_options as _xla_setup


# Programs held per jitted function; one more compile drops them all (JAX's cache of that function;
# `jax.clear_caches()` drops every one). The demo model's program holds about 17 MiB.
MAX_PROGRAMS = 32
# The compile of one shape that warns (`RecompileWarning`), and the shapes remembered per function.
WARN_AT_COMPILE = 3
_MAX_SHAPES = 64

CPU_COMPILER_OPTIONS = {
    "xla_cpu_use_fusion_emitters": False,
    "xla_cpu_experimental_ynn_fusion_type": "",
}


def loops_hoisted() -> bool:
    """Whether XLA compiles the step loops of the program being traced as one function each
    (`jaxsim._compilation._xla_options.program_hoisted`): a program jaxsim builds with small-loop hoisting (its
    compile options carry the per-program option, `compiler_options`), or any program where the
    user's `XLA_FLAGS` name a threshold of at least 64 kB. Read at trace time (no compile); a loop
    then costs about as much as its stages written out, so programs may loop where they would
    otherwise unroll."""
    return _xla_setup.program_hoisted()


class ReplayedDecisionsWarning(UserWarning):
    """Deprecated: jaxsim no longer hoists a program that would replay adaptive decisions.

    Given by `simulate` only where the user's own `XLA_FLAGS` name XLA's small-while-loop
    threshold (`xla_cpu_small_while_loop_byte_threshold`, 64 kB or more: every program of the
    process compiled with hoisting, which jaxsim cannot undo) and a run is differentiated through
    adaptive steps in diffrax's loop (a diffrax solver, or any adaptive pair on the clocked
    driver: clocks, events, discontinuities, `dtmax`; free-time runs there) with a checkpointing
    adjoint (diffrax's `RecursiveCheckpointAdjoint`, its default, or `DirectAdjoint`).

    Such an adjoint recomputes the steps in the backward pass and decides them again (accept or
    reject, breakpoints); compiled differently, the recomputation can round differently, decide
    differently, and give a wrong gradient. jaxsim's own programs are hoisted one at a time
    (`jaxsim.small_loops()`), and a program holding such a gradient is compiled without hoisting
    (`replay_safe`), so with jaxsim's default settings this warning is never given. The engine
    guide, "Loop speed on the CPU", has the measurements."""


# Tracer classes of JAX's forward and reverse differentiation (matched by name: JAX keeps them
# private), and the attributes through which other tracers (vmap's, ...) hold the traced value.
_DIFF_TRACERS = ("JVPTracer", "LinearizeTracer")
_WRAPPED = ("val", "primal")


def _differentiated(tree) -> bool:
    """Whether a leaf of `tree` is traced by `jax.grad`/`vjp`/`jvp` (under any other tracers)."""
    for leaf in jax.tree_util.tree_leaves(tree):
        for _ in range(8):  # tracers nest a few levels deep at most
            if not isinstance(leaf, jax.core.Tracer):
                break
            if type(leaf).__name__ in _DIFF_TRACERS:
                return True
            leaf = next((getattr(leaf, a) for a in _WRAPPED if hasattr(leaf, a)), None)
    return False


def replay_safe(adjoint, y0, *inputs):
    """`y0`, marked so that the program being traced is compiled without small-loop hoisting when
    an adaptive run in diffrax's loop is differentiated (`jax.grad`/`vjp`/`jvp`, found at trace
    time from JAX's differentiation tracers in `y0` and `inputs`) with a checkpointing adjoint
    (`None`, diffrax's `RecursiveCheckpointAdjoint` or `DirectAdjoint`); else `y0` as it is.

    Those adjoints recompute the forward steps in the backward pass, step-size controller
    included, and assume that the recomputation repeats the forward pass bit for bit. XLA does
    not promise that: the same step compiled in another program (here: inside the backward loop,
    compiled as one function) may contract multiplications and additions into FMAs, or vectorize,
    differently, so its last bits differ; an accept/reject or breakpoint decision can then go the
    other way, and the gradient is silently wrong. Measured: the 50-parameter J2-day gradient
    (`benchmarks/bench_lean.py`) through `Dopri8().to_diffrax()` is 69-121 % off with hoisting on
    and right to 1e-12 with it off, with the step times fixed (`diffrax.StepTo`), or with XLA
    limited to AVX (no FMA). The mark (`jaxsim._compilation._xla_options.unhoisted`, an identity that lowers to
    nothing) keeps the whole program unhoisted. jaxsim's own adaptive core records every accepted
    step's times, so its backward pass never re-decides a step and needs no mark.

    Where the user's `XLA_FLAGS` hoist every program of the process, jaxsim cannot undo it and
    warns (`ReplayedDecisionsWarning`).
    """
    import diffrax as dfx

    if adjoint is not None and not isinstance(
        adjoint, dfx.RecursiveCheckpointAdjoint | dfx.DirectAdjoint
    ):
        return y0
    if not _differentiated((y0, *inputs)):
        return y0
    if _xla_setup.process_hoisted():
        warnings.warn(
            "jaxsim: a gradient through adaptive steps in diffrax's loop while your XLA_FLAGS set "
            "XLA's small-loop hoisting (xla_cpu_small_while_loop_byte_threshold) for every "
            "program: the backward pass recomputes the steps and their accept/reject decisions, "
            "and a recomputation that rounds differently can decide differently (a wrong "
            "gradient). Use a jaxsim adaptive solver on plain runs (e.g. `js.Dopri8()`, not "
            "`.to_diffrax()`), whose adjoint records the steps, or remove the option from "
            "XLA_FLAGS: jaxsim hoists its own programs without it.",
            ReplayedDecisionsWarning,
            stacklevel=4,
        )
    return _xla_setup.unhoisted(y0)


def compiler_options() -> dict:
    """The compile options jaxsim uses on the current default backend (empty: XLA's defaults).

    On the CPU: XLA's classic emitters, no YNNPACK fusions (module docstring), and jaxsim's
    marker entry that compiles the program's small loops as one function each
    (`jaxsim.small_loops()`; jaxsim's hook on JAX turns it into XLA's per-program option). Given to
    a `jax.jit` of your own, the entry hoists that program's loops too; `jaxsim.jit` also traces
    jaxsim's step loops in the form that suits hoisting, so prefer it."""
    if os.environ.get("JAXSIM_XLA_DEFAULTS", "0") not in ("", "0"):
        return {}
    if jax.default_backend() != "cpu":
        return {}
    return {**dict(_cpu_options_supported()), **_xla_setup.marker_options()}


@functools.cache
def _cpu_options_supported() -> tuple:
    # Each option checked once, on a trivial program, at the first compile (importing initializes
    # no backend); one a newer jaxlib rejects is dropped, the others are kept.
    # With jaxsim's persistent cache on, the probes are stored too (a restart loads them: about
    # 45 instead of 90-120 ms at load 7).
    kept = []
    for name, value in CPU_COMPILER_OPTIONS.items():
        try:
            probe = jax.jit(lambda x: x + 1.0, compiler_options={name: value}).lower(1.0)
            with _cache.for_jaxsim_programs():
                probe.compile()
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


def _inside_jit() -> bool:
    """Whether the current JAX trace stages into a `jit` (a `DynamicJaxprTrace` under the current
    trace and the transformations above it: `jax.jit(f)`, `jax.jit(jax.grad(f))`,
    `jax.jit(jax.vmap(f))`). JAX's internals; if a future JAX moves them: False."""
    try:
        from jax._src.core import trace_ctx
        from jax._src.interpreters.partial_eval import DynamicJaxprTrace
    except ImportError:
        return False
    trace = trace_ctx.trace
    for _ in range(64):
        if trace is None:
            return False
        if isinstance(trace, DynamicJaxprTrace):
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


class _Jit:
    # Two equinox filter-jits of one function, with and without the options: the choice is made
    # per call (backend, environment, support), so importing jaxsim initializes no backend.
    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self._default = eqx.filter_jit(fun)
        self._tuned = None  # made at the first tuned call (the options are checked then)
        self._recompiles = _Recompiles(fun)

    def _pick(self):
        # Compile options are only allowed on the outermost jit: inside any trace (a user's jit,
        # vmap, grad), the plain filter-jit is used and the outer transformation decides (and the
        # one-off support check is not run inside someone else's trace).
        options = compiler_options() if _at_top_level() else {}
        if not options:
            return self._default
        if self._tuned is None:
            self._tuned = eqx.filter_jit(
                program(self.__wrapped__, options), compiler_options=options
            )
        return self._tuned

    def __call__(self, *args, **kwargs):
        args, kwargs = _models_as_traced((args, kwargs))
        if not _at_top_level():
            if _inside_jit():
                # Traced into the enclosing jit's program directly, not as a nested jit: a nested
                # jit is traced on its own first, and differentiated afterwards, so a custom_vjp
                # inside it (`jaxsim.DiscreteAdjoint`) was traced twice, as its primal and as its
                # forward pass (the Dopri8 gradient's trace 0.49 -> 0.30 s; same program).
                # NumPy arrays become JAX arrays, as `equinox.filter_jit` makes them inputs.
                args, kwargs = jax.tree_util.tree_map(_numpy_as_jax, (args, kwargs))
                return self.__wrapped__(*args, **kwargs)
            return self._default(*args, **kwargs)
        jitted = self._pick()
        # equinox's `jax.jit` of this function: its cache size tells whether this call compiled.
        cached = getattr(jitted, "_cached", None)
        size = getattr(cached, "_cache_size", None)
        before = size() if size is not None else None
        try:
            with _cache.for_jaxsim_programs():
                return jitted(*args, **kwargs)
        finally:
            if before is not None and size() > before:
                self._compiled(cached, args, kwargs)

    def _compiled(self, cached, args, kwargs):
        # A compile happened: bound the programs held, and warn on repeated recompiles of one
        # shape (`_Recompiles`).
        if cached._cache_size() > MAX_PROGRAMS:
            cached.clear_cache()
        self._recompiles.seen(args, kwargs)

    def lower(self, *args, **kwargs):
        """As `jax.jit(...).lower`; its `.compile()` uses the same options as a call."""
        args, kwargs = _models_as_traced((args, kwargs))
        return self._pick().lower(*args, **kwargs)

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return functools.partial(self, instance)


def program(fun, options: dict):
    """`fun` to give to `jax.jit(..., compiler_options=options)`: traced as a hoisted program
    (`loops_hoisted`) where `options` hoist its loops (`jaxsim._compilation._xla_options.MARKER`)."""
    return _xla_setup.traced_as(fun, True) if _xla_setup.MARKER in options else fun


def _numpy_as_jax(x):
    return jax.numpy.asarray(x) if isinstance(x, np.ndarray | np.generic) else x


class RecompileWarning(UserWarning):
    """jaxsim compiled a program again for arguments of the same shapes because a compile-time
    constant changed: a function given to `simulate` (an event's condition, a clock's update, a
    function field of a model), or a Python int or string where jaxsim keeps it as it is (`args`,
    a user model's fields: `AbstractDynamicObject.ints_are_parameters`). Each new value, and each
    new function object (a lambda built again, a closure over another number), compiles a new
    program. Pass numbers as arrays (traced: one program for every value) and build functions
    once. Warned at the `WARN_AT_COMPILE`-th (third) such compile of one shape, once per shape."""


class _Recompiles:
    """Compiles of one jitted function by the shapes of its arguments (array shapes and dtypes,
    pytree node types, the types of the other leaves); warns (`RecompileWarning`) when a shape is
    compiled again because its non-array leaves (compile-time constants) changed. Changes in the
    pytrees' static fields alone (jaxsim's own settings: step size, solver options) are not
    counted: they are documented compile-time options."""

    def __init__(self, fun):
        self.name = getattr(fun, "__name__", "program")
        try:
            self.signature = inspect.signature(fun)
        except (TypeError, ValueError):
            self.signature = None
        self.shapes: collections.OrderedDict = collections.OrderedDict()
        self.lock = threading.Lock()

    def _named(self, args, kwargs) -> dict:
        if self.signature is not None:
            try:
                return dict(self.signature.bind(*args, **kwargs).arguments)
            except TypeError:
                pass
        return {"args": args, "kwargs": kwargs}

    def seen(self, args, kwargs) -> None:
        named = self._named(args, kwargs)
        leaves, treedef = jax.tree_util.tree_flatten_with_path(named)
        arrays, statics = [], []
        for path, x in leaves:
            if eqx.is_array(x):
                arrays.append((tuple(np.shape(x)), str(x.dtype)))
            elif not callable(x):
                head = getattr(path[0], "key", path[0])
                statics.append((f"{head}{jax.tree_util.keystr(path[1:])}", x))
        functions = []
        _functions(named, "", functions, 0)  # in leaves and in static fields
        statics += functions
        try:
            kinds = tuple((p, type(x)) for p, x in statics)
            key = (_structure(treedef), tuple(arrays), kinds)
            hash(key)
        except TypeError:
            return
        with self.lock:
            count, last, warned = self.shapes.pop(key, (0, None, False))
            changed = []
            if last is not None:
                changed = [p for (p, x), y in zip(statics, last, strict=True) if not _same(x, y)]
            if last is None or changed:
                count += 1
            warn = bool(changed) and count >= WARN_AT_COMPILE and not warned
            self.shapes[key] = (count, [x for _, x in statics], warned or warn)
            if len(self.shapes) > _MAX_SHAPES:
                self.shapes.popitem(last=False)
        if warn:
            causes = ", ".join(_describe(p, x) for p, x in statics if p in changed)
            warnings.warn(
                f"jaxsim: {self.name} compiled {count} programs for arguments of the same shapes: "
                f"compile-time constants changed ({causes}). Python numbers, strings and "
                "functions given to simulate (in events, clocks, signals, a model's fields) are "
                "constants of the compiled program: each new value, or new function object (a "
                "lambda built again, a closure over another number), compiles again. Pass numbers "
                "as arrays (e.g. through `args`) and build functions once.",
                RecompileWarning,
                stacklevel=4,
            )


def _functions(x, path, out, depth) -> None:
    # The functions in `x` (pytree leaves and equinox modules' static fields), with their paths.
    if depth > 32:
        return
    if isinstance(x, eqx.Module):
        for f in dataclasses.fields(x):
            _functions(getattr(x, f.name, None), f"{path}.{f.name}", out, depth + 1)
    elif isinstance(x, dict):
        for k, v in x.items():
            _functions(v, f"{path}[{k!r}]" if path else str(k), out, depth + 1)
    elif isinstance(x, list | tuple):
        for k, v in enumerate(x):
            _functions(v, f"{path}[{k}]", out, depth + 1)
    elif callable(x) and not isinstance(x, type) and not eqx.is_array(x):
        out.append((path, x))


def _structure(treedef):
    # The pytree's node types without their static data (None for a leaf).
    data = treedef.node_data()
    if data is None:
        return None
    return (data[0], tuple(_structure(c) for c in treedef.children()))


def _same(x, y) -> bool:
    if x is y:
        return True
    if type(x) is not type(y):
        return False
    try:
        return bool(x == y)
    except Exception:  # noqa: BLE001 - no comparable value: a new object
        return False


def _describe(path, x) -> str:
    if callable(x):
        what = "a function: a new object"
    elif isinstance(x, bool | int | float | complex):
        what = f"a Python {type(x).__name__}: {x!r}"
    else:
        what = f"a {type(x).__name__}"
    return f"`{path.lstrip('.')}`, {what}"


def _models_as_traced(tree):
    # Python floats in the (non-static) fields of models (`AbstractDynamicObject`s, e.g. put there
    # with `eqx.tree_at`) become float64 arrays: `eqx.filter_jit` would treat them as compile-time
    # constants and compile again for every value. Other arguments are left as they are.

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
