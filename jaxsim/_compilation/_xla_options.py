"""XLA:CPU's small-while-loop hoisting for jaxsim's own programs, one program at a time.

**Why.** On XLA:CPU a loop body runs as a sequence of compiled kernels, one runtime call each
(about 10-15 ns apiece); an adaptive step of a small model is mostly such calls (the J2 orbit's
Dopri8 step is about 74 kernels). XLA can instead compile a whole small loop into one function: a
loop whose one iteration accesses fewer bytes than its backend option
`xla_cpu_small_while_loop_byte_threshold` (XLA's default is 1 kB) and which holds no operation that
needs the runtime (custom calls, library matrix products, sorts, ...). At `DEFAULT_THRESHOLD`
bytes the step loops of jaxsim's models are compiled as one function each, 3-5x faster
(`docs/engine.md`, "Loop speed on the CPU").

**Why per program.** The option changes how a program is compiled, and with it the last bits of
its results. That breaks one kind of program: a reverse-mode gradient whose backward pass
recomputes adaptive steps and decides them again (diffrax's checkpointing adjoints); compiled as
one function, the replay can round differently, decide differently, and give a wrong gradient (a
user's `jax.jit(jax.grad(...))` through `diffrax.diffeqsolve` came out 6.8 % off with the option set
for the whole process). So jaxsim sets it for the programs it builds itself, and for no other.

**How (private JAX API, isolated here).** XLA reads the threshold from the
`xla_backend_extra_options` map of the `DebugOptions` of the module being compiled. A program's
`compiler_options` cannot carry it (XLA's `CompileOptions::ApplyOption` takes scalar fields only and
refuses the map: "not a valid message value"), and `XLA_FLAGS` applies to every program of the
process. So `install()` wraps the function where JAX builds a program's `xla_client.CompileOptions`
(`jax._src.interpreters.pxla.create_compile_options`, jax 0.10): a program whose
`compiler_options` hold the key `MARKER` (only jaxsim's, through `jaxsim._compilation._jit.compiler_options`)
has that key removed and gets the map entry `xla_cpu_small_while_loop_byte_threshold=<bytes>`
added to its serialized options (protobuf merges a repeated embedded message, and a map entry
joins the map), which is exactly what the `XLA_FLAGS` option gives. Other programs pass unchanged.
The options are part of JAX's persistent-cache key, so hoisted and unhoisted builds are stored
apart.

A program that must not be hoisted after all (it replays adaptive decisions: `replay_safe`) is
marked while it is traced by an identity primitive whose lowering sets the module attribute
`UNHOISTED_ATTR`; the hook then leaves that program's options as they are.

**Check.** At the first jaxsim compile on the CPU, `available()` compiles a probe loop with the
marker and looks for XLA's one-function call in the compiled program. If this JAX or jaxlib does
not do it (another version, JAX's internals moved), jaxsim warns once (`RuntimeWarning`, naming the
cost) and compiles its programs without the marker: correct, at the kernel-by-kernel speed.

**Settings.** `JAXSIM_SMALL_LOOPS` (read at import) switches it off (`0`, `false`, `no`, `off`);
unset, empty, `1` (`true`, `yes`, `on`) keep the default; a whole number above 1 is the threshold
in bytes. A threshold named in the user's own `XLA_FLAGS` applies to every program of the process
(XLA's rule) and jaxsim then adds nothing. `jaxsim.small_loops()` reports what applies.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import re
import warnings
from typing import NamedTuple


ENV = "JAXSIM_SMALL_LOOPS"
OPTION = "xla_cpu_small_while_loop_byte_threshold"
# The `compiler_options` key that asks the hook for the option (removed before XLA sees it).
MARKER = "jaxsim_small_while_loop_byte_threshold"
# The module attribute of a program that must not be hoisted (`replay_safe`).
UNHOISTED_ATTR = "jaxsim.unhoisted"
# Bytes one loop iteration may access to be compiled as one function. 1 MB hoists the step loops
# measured (the J2 Dopri8 loop, the `combined` spacecraft's RK4 loop and its whole reverse pass, a
# clocked slew); 16 kB and 64 kB hoisted the inner loops of the `combined` gradient but not the
# loop around them, and that gradient then ran slower than with no hoisting (395 and 541 ms
# against 251 ms; 82 ms at 256 kB and 97 ms at 1 MB, where its whole backward pass is hoisted).
DEFAULT_THRESHOLD = 1_000_000
# From this threshold on, jaxsim's step loops count as compiled whole (`program_hoisted`).
HOISTED_LOOP_BYTES = 65536
# A loop one iteration of which accesses about 4-8 kB (above XLA's default threshold, 1 kB, far
# below `DEFAULT_THRESHOLD`): `available()` compiles it and looks for the hoisted call.
_PROBE_SIZE = 256
_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")
# XLA's tag of a computation compiled as one function (its CPU backend's "small call").
HOISTED_TAG = "xla_cpu_small_call"
# What the kernel-by-kernel loops cost, for the warning when the mechanism is not available.
_COST = (
    "jaxsim's step loops then run kernel by kernel, 3-5x slower for small models (a one-day J2 "
    "orbit with Dopri8: about 1.1 ms instead of 0.25 ms)"
)

# Set by `configure()` (at import): the threshold jaxsim asks for (None: off) and why.
_state: dict = {}
# Whether the program being traced is built with hoisting (set while jaxsim traces its programs).
_hoisted: contextvars.ContextVar[bool] = contextvars.ContextVar("jaxsim_hoisted", default=False)
# The wrapped JAX function, and JAX's own, once `install()` succeeded.
_hook: dict = {}


class SmallLoops(NamedTuple):
    """What `jaxsim.small_loops()` reports about XLA's small-while-loop hoisting.

    **Fields:**

    - `requested`: whether jaxsim asks for hoisting in the programs it builds (the default; off
      with `JAXSIM_SMALL_LOOPS=0`), or the user's `XLA_FLAGS` names a threshold for every program.
    - `threshold`: that threshold [bytes]; None when none applies (XLA's default, 1 kB).
    - `effective`: whether jaxsim's programs are compiled with it in this process (checked on a
      probe loop of a few kB per iteration, compiled once).
    - `reason`: who set it, or why it is not in effect, in one sentence.
    """

    requested: bool
    threshold: int | None
    effective: bool
    reason: str


def named_threshold(flags: str) -> int | None:
    """The threshold [bytes] `flags` (an `XLA_FLAGS` value) gives, the last one if several."""
    found = re.findall(rf"{OPTION}=(\d+)", flags)
    return int(found[-1]) if found else None


def _requested_threshold(value: str | None) -> int | None:
    """The threshold `JAXSIM_SMALL_LOOPS=value` asks for; None when switched off."""
    text = (value or "").strip().lower()
    if text in _ON or not text:
        return DEFAULT_THRESHOLD
    if text in _OFF:
        return None
    if text.isdigit() and int(text) > 1:
        return int(text)
    raise ValueError(
        f"jaxsim: the environment variable {ENV}={value!r} is not understood: give 0 (or "
        f"false/no/off) to compile jaxsim's programs with XLA's default small-loop threshold, 1 "
        f"(true/yes/on; also unset) for jaxsim's threshold ({DEFAULT_THRESHOLD} bytes), or a "
        "threshold in bytes (a whole number above 1)."
    )


def configure() -> None:
    """Read `JAXSIM_SMALL_LOOPS` and the user's `XLA_FLAGS` (called by `import jaxsim`; changes
    no environment variable and no JAX setting)."""
    named = named_threshold(os.environ.get("XLA_FLAGS", ""))
    if named is not None:
        _state.update(
            threshold=None,
            users=named,
            reason=f"your XLA_FLAGS set {OPTION}={named} for every program of the process; "
            "jaxsim adds nothing",
        )
        return
    value = os.environ.get(ENV)
    threshold = _requested_threshold(value)
    _state.update(
        threshold=threshold,
        users=None,
        reason=(
            f"{ENV}={value} switched it off: XLA's default threshold (1 kB) applies"
            if threshold is None
            else f"jaxsim's own programs only ({threshold} bytes), the default"
            if (value or "").strip().lower() in (*_ON, "")
            else f"jaxsim's own programs only, {ENV}={value} bytes"
        ),
    )


def install() -> None:
    """Wrap JAX's `pxla.create_compile_options` (module docstring); idempotent, creates no
    backend. Leaves JAX alone if the function or the options' serialization is not there."""
    if _hook:
        return
    try:
        from jax._src.interpreters import pxla
        from jax._src.lib import xla_client as xc

        original = pxla.create_compile_options
        names = list(inspect.signature(original).parameters)
        index = names.index("compiler_options")
        if not all(hasattr(xc.CompileOptions, a) for a in ("SerializeAsString", "ParseFromString")):
            return
    except (ImportError, AttributeError, ValueError, TypeError):
        return

    @functools.wraps(original)
    def create_compile_options(*args, **kwargs):
        args = list(args)
        if "compiler_options" in kwargs:
            given = kwargs["compiler_options"]
        elif len(args) > index:
            given = args[index]
        else:
            return original(*args, **kwargs)
        if not given or MARKER not in given:
            return original(*args, **kwargs)
        given = dict(given)
        threshold = int(given.pop(MARKER))
        if "compiler_options" in kwargs:
            kwargs["compiler_options"] = given
        else:
            args[index] = given
        options = original(*args, **kwargs)
        bound = dict(zip(names, args, strict=False)) | kwargs
        backend = bound.get("backend")
        if getattr(backend, "platform", "cpu") != "cpu" or _marked_unhoisted(
            bound.get("computation")
        ):
            return options
        return xc.CompileOptions.ParseFromString(
            options.SerializeAsString() + _extra_option(OPTION, str(threshold))
        )

    pxla.create_compile_options = create_compile_options
    _hook.update(original=original, wrapped=create_compile_options)


def _marked_unhoisted(computation) -> bool:
    try:
        return UNHOISTED_ATTR in computation.operation.attributes
    except (AttributeError, TypeError):
        return False


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    # A length-delimited protobuf field (wire type 2).
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _extra_option(key: str, value: str) -> bytes:
    """Serialized `CompileOptionsProto` holding only `executable_build_options (3) ->
    debug_options (3) -> xla_backend_extra_options (500)[key] = value` (XLA's field numbers);
    appended to a serialized message, protobuf merges it into the existing fields."""
    entry = _field(1, key.encode()) + _field(2, value.encode())
    return _field(3, _field(3, _field(500, entry)))


def _jax_version() -> str:
    import jax
    import jaxlib

    return f"jax {jax.__version__}, jaxlib {jaxlib.__version__}"


@functools.cache
def available() -> bool:
    """Whether a program marked by jaxsim is compiled with its loops hoisted, and one not marked
    is not (a probe compiled once per process, on the CPU); warns once if not (module docstring).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    # Local, as jax above: this module is imported before jax (module docstring), and the cache
    # module imports jax at its top.
    from . import _cache

    if not _hook:
        _warn_unavailable("JAX's compile-options function was not found")
        return False

    def loop(x, stop):
        return jax.lax.while_loop(
            lambda c: c[0][0] < stop, lambda c: (jnp.sin(c[0]) * 1.5 + 1.0, c[1] + 1), (x, 0)
        )

    def hoisted(options):
        lowered = jax.jit(loop, compiler_options=options).lower(np.ones(_PROBE_SIZE), 100.0)
        with _cache.for_jaxsim_programs():
            return HOISTED_TAG in lowered.compile().as_text()

    try:
        marked = hoisted({MARKER: DEFAULT_THRESHOLD})
        plain = hoisted({})
    except Exception as err:  # noqa: BLE001 - any failure means: compile without the marker
        _warn_unavailable(f"the probe failed to compile ({type(err).__name__}: {err})")
        return False
    if not marked or plain:
        _warn_unavailable(
            "XLA did not compile the probe loop as one function"
            if not marked
            else "the option reached a program jaxsim did not build"
        )
        return False
    return True


def _warn_unavailable(why: str) -> None:
    warnings.warn(
        f"jaxsim: XLA:CPU small-loop hoisting for jaxsim's programs is not available with "
        f"{_jax_version()} ({why}); {_COST}. Results are unaffected. Set {ENV}=0 to silence this.",
        RuntimeWarning,
        stacklevel=4,
    )


def requested_threshold() -> int | None:
    """The per-program threshold jaxsim asks for (None: switched off, or the user's `XLA_FLAGS`
    sets one for the process)."""
    if not _state:
        configure()
    return _state["threshold"]


def marker_options() -> dict:
    """The `compiler_options` entry that hoists a jaxsim program (empty where nothing is added:
    switched off, the user's `XLA_FLAGS` decide, or not available). Call on the CPU only."""
    threshold = requested_threshold()
    if threshold is None or not available():
        return {}
    return {MARKER: threshold}


@contextlib.contextmanager
def building(hoisted: bool):
    """Within: the program being traced is compiled with hoisting or not (`program_hoisted`)."""
    token = _hoisted.set(bool(hoisted))
    try:
        yield
    finally:
        _hoisted.reset(token)


def traced_as(fun, hoisted: bool):
    """`fun`, run within `building(hoisted)`: give it to `jax.jit` with the matching options."""

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        with building(hoisted):
            return fun(*args, **kwargs)

    return traced


def program_hoisted() -> bool:
    """Whether XLA compiles the step loops of the program being traced as one function each: a
    jaxsim program built with the marker (`building`), or any program where the user's
    `XLA_FLAGS` name a threshold of at least `HOISTED_LOOP_BYTES`. Read at trace time; programs
    may then loop where they would otherwise unroll."""
    return _hoisted.get() or process_hoisted()


def process_hoisted() -> bool:
    """Whether the user's `XLA_FLAGS` hoist every program of the process (jaxsim cannot undo it;
    read from the environment, as XLA reads it when JAX creates its backend)."""
    users = named_threshold(os.environ.get("XLA_FLAGS", ""))
    return users is not None and users >= HOISTED_LOOP_BYTES and _cpu()


def _cpu() -> bool:
    import jax

    return jax.default_backend() == "cpu"


@functools.cache
def _unhoisted_primitive():
    # An identity whose lowering marks the module (`UNHOISTED_ATTR`): the decision travels with
    # the program itself, so a compile that reuses a cached trace, or `lower(...).compile()` later,
    # sees it too. It lowers to no operation: results are bitwise those without it.
    from jax._src.interpreters import ad, batching, mlir
    from jax._src.lib.mlir import ir
    from jax.extend.core import Primitive

    prim = Primitive("jaxsim_unhoisted")
    prim.def_impl(lambda x: x)
    prim.def_abstract_eval(lambda x: x)

    def lower(ctx, x):
        ctx.module_context.module.operation.attributes[UNHOISTED_ATTR] = ir.UnitAttr.get()
        return [x]

    mlir.register_lowering(prim, lower)
    ad.primitive_jvps[prim] = lambda primals, tangents: (prim.bind(*primals), tangents[0])
    batching.primitive_batchers[prim] = lambda args, dims: (prim.bind(*args), dims[0])
    return prim


def unhoisted(tree):
    """`tree` with its inexact array leaves passed through the marking identity: the program being
    traced is compiled without hoisting (and traced on as such, `program_hoisted`)."""
    import equinox as eqx
    import jax

    _hoisted.set(False)
    prim = _unhoisted_primitive()
    return jax.tree_util.tree_map(lambda x: prim.bind(x) if eqx.is_inexact_array(x) else x, tree)


def small_loops() -> SmallLoops:
    """Whether XLA's small-while-loop hoisting applies to jaxsim's programs in this process, and why.

    On the CPU, jaxsim compiles each small loop of the programs it builds (`simulate`'s drivers,
    `jaxsim.jit`, batches, `optimize` evaluations) as one function, instead of one runtime call
    per kernel: XLA's `xla_cpu_small_while_loop_byte_threshold` at 1 MB, set in those programs'
    own compile options and in no other program of the process. Switch it off with the
    environment variable `JAXSIM_SMALL_LOOPS=0` (before importing jaxsim), or choose the
    threshold in bytes (`JAXSIM_SMALL_LOOPS=65536`); a threshold named in your `XLA_FLAGS`
    applies to every program and jaxsim adds nothing. `docs/engine.md` ("Loop speed on the CPU")
    has the measured figures.

    The first call compiles a probe loop (tens of milliseconds), which creates JAX's backend if
    it does not exist yet.

    **Returns:** a `SmallLoops` (`requested`, `threshold`, `effective`, `reason`).
    """
    if not _state:
        configure()
    import jax

    reason = _state["reason"]
    users = _state["users"]
    requested = users is not None or _state["threshold"] is not None
    threshold = users if users is not None else _state["threshold"]
    if jax.default_backend() != "cpu":
        effective = False
        reason += f"; the default backend is {jax.default_backend()}, the option concerns the CPU"
    elif users is not None:
        effective = _probe_process()
    elif threshold is None:
        effective = False
    else:
        effective = available()
        if not effective:
            reason += f"; not available with {_jax_version()}"
    return SmallLoops(requested=requested, threshold=threshold, effective=effective, reason=reason)


@functools.cache
def _probe_process() -> bool:
    # The user's XLA_FLAGS: whether an unmarked probe loop is hoisted.
    import jax
    import jax.numpy as jnp
    import numpy as np

    def loop(x, stop):
        return jax.lax.while_loop(
            lambda c: c[0][0] < stop, lambda c: (jnp.sin(c[0]) * 1.5 + 1.0, c[1] + 1), (x, 0)
        )

    text = jax.jit(loop).lower(np.ones(_PROBE_SIZE), 100.0).compile().as_text()
    return HOISTED_TAG in text
