"""Compiled simulation programs kept on disk, so that a restart skips tracing, lowering and compiling.

JAX's persistent compilation cache saves the XLA compile of a program, but its key is the lowered
program: a fresh process still traces the model and lowers it to StableHLO before it can look the
program up (for the demo model, most of the 0.8 s a restart's first call takes beyond a warm call:
`benchmarks/results/restart.md`). This cache keys the compiled program by what determines the
trace instead, and stores the executable itself (`jax.experimental.serialize_executable`; a
portable `jax.export` module would still need lowering and an XLA compile or cache lookup); a
restart computes the key (about 25 ms), loads the executable (about 0.15 s for the demo model) and
runs it.

Used by the top-level calls of jaxsim's jitted drivers (`jaxsim._compile._Jit`): under a user's
`jit`/`vmap`/`grad` nothing changes. The key (`program_key`) is made of

- the format of this cache, the Python, JAX, jaxlib and NumPy versions, the machine and its CPU
  flags, the backend, its version and device kind, the XLA compile options, `XLA_FLAGS`,
  `EQX_ON_ERROR`, and the JAX settings that change a trace (x64, matmul precision, promotion
  rules, PRNG implementation, NaN/inf debugging);
- the function, the structure of its arguments (every pytree node type with its static data:
  equinox modules' static fields, dict keys) and every non-array value (Python numbers,
  strings, configuration dataclasses, functions), by value;
- the shape, dtype and weak type of every array argument (their values are inputs of the program);
- a hash of the source files of every package whose code appears in it (jaxsim, effectors,
  equinox, diffrax, ...; JAX and NumPy by version).

A part that cannot be keyed reliably refuses the cache on disk: classes and functions from
packages outside `TRUSTED_PACKAGES` (a user's own model code may read globals, files or
environment variables at trace time, which no key sees), objects whose value cannot be written out
(a repr with an address), arrays closed over by functions, several devices. Such a call traces as
usual (JAX's persistent compilation cache still serves the XLA compile); the plain fixed-step and
adaptive drivers (`IN_PROCESS`) then hold their compiled program in the process, so that repeated
calls skip equinox's per-call filtering. Programs with host callbacks (in-program error checks)
cannot be serialized and are not stored either; the one exception is jaxsim's progress reports
(`jaxsim._progress`, in the top-level programs of `simulate` this cache can key): their host functions are
module-level, so a stored program names them and its loader connects them again
(`_progress_function`).

Module-level globals of the trusted packages are taken to be constants (their source is hashed).
"""

import dataclasses
import enum
import fractions
import functools
import hashlib
import importlib.metadata
import io
import logging
import os
import pickle
import platform
import sys
import threading
import types
from pathlib import Path

import equinox as eqx
import jax
import numpy as np


logger = logging.getLogger(__name__)

_FORMAT = "jaxsim-program-cache-2"  # 2: progress reports (their host functions' names) stored
# Packages whose classes and functions may appear in a key: their source is hashed (or, for the
# large ones, their version is in the key), and their trace-time behaviour depends on nothing else.
TRUSTED_PACKAGES = frozenset(
    {
        "jaxsim",
        "effectors",
        "equinox",
        "diffrax",
        "optimistix",
        "lineax",
        "jaxtyping",
        "jax",
        "jaxlib",
        "numpy",
        "builtins",
        "math",
        "operator",
        "functools",
        "collections",
    }
)
# Keyed by version: their source is large, and installed from a wheel.
_BY_VERSION = {"jax": "jax", "jaxlib": "jaxlib", "numpy": "numpy"}
_STDLIB = frozenset({"builtins", "math", "operator", "functools", "collections"})
# JAX settings that change what a trace produces.
_JAX_SETTINGS = (
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_numpy_rank_promotion",
    "jax_numpy_dtype_promotion",
    "jax_default_prng_impl",
    "jax_enable_custom_prng",
    "jax_threefry_partitionable",
    "jax_debug_nans",
    "jax_debug_infs",
    "jax_enable_checks",
)
_MAX_DEPTH = 64
_MAX_MEMORY_ENTRIES = 256
MAX_PROGRAMS = 200  # files kept in the programs folder (about 1 MB each for the demo model)

UNCACHED = object()  # `call`'s answer when the program does not go through this cache
# jaxsim's drivers whose top-level programs have no host callbacks (unless the caller asks for
# progress reports): also held in this process when they cannot be stored (`call`).
IN_PROCESS: set = set()


class Unkeyable(Exception):
    """A part of a call that cannot be written into a key reliably (the call is not cached)."""


class _Leaf:
    """Placeholder for the k-th array output in a stored output structure."""

    def __init__(self, index):
        self.index = index


class _Broken(Exception):
    """A program loaded from a file failed to run (an incomplete file): it is removed."""


class _Entry:
    """A loaded or compiled program and how to rebuild its output.

    The first run of a program loaded from a file waits for its result: a file that loads but
    fails to run (see `_compile_fresh`) is removed and the call goes the usual way (the run has
    no side effects: programs with host callbacks are never stored).
    """

    def __init__(self, compiled, skeleton, *, verified, path=None):
        self.compiled, self.verified, self.path = compiled, verified, path
        leaves, self.treedef = jax.tree_util.tree_flatten(skeleton)
        self.leaves = leaves
        self.slots = [k for k, x in enumerate(leaves) if isinstance(x, _Leaf)]

    def run(self, leaves):
        if self.verified:
            outs = self.compiled(*leaves)
        else:
            try:
                outs = jax.block_until_ready(self.compiled(*leaves))
            except jax.errors.JaxRuntimeError as err:
                logger.debug("jaxsim: removing %s, which fails to run (%s)", self.path, err)
                try:
                    self.path.unlink()
                except OSError:
                    pass
                raise _Broken from err
            self.verified = True
        new = list(self.leaves)
        for k, out in zip(self.slots, outs, strict=True):
            new[k] = out
        return jax.tree_util.tree_unflatten(self.treedef, new)


_memory: dict = {}  # in-process key -> _Entry, or None (not cached: the plain jit path)
_lock = threading.Lock()
_source_hashes: dict = {}  # package -> (files' paths, sizes, mtimes; hash)


def clear_memory() -> None:
    """Forget the programs held in this process (the files stay)."""
    with _lock:
        _memory.clear()


# --- the key -------------------------------------------------------------------------------------


def _package_of(obj) -> str:
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        raise Unkeyable(f"{obj!r} has no module")
    top = module.split(".")[0]
    if top not in TRUSTED_PACKAGES:
        raise Unkeyable(f"{module} is not a trusted package")
    return top


class _Keyer:
    """Writes a call's static parts as a nested tuple of strings (`token`)."""

    def __init__(self):
        self.packages = set()
        self._active = set()

    def ref(self, obj) -> tuple:
        # A class or module-level function by its qualified name (its package's source is hashed).
        top = _package_of(obj)
        self.packages.add(top)
        name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
        if not isinstance(name, str):
            raise Unkeyable(f"{obj!r} has no name")
        return ("ref", obj.__module__, name)

    def token(self, x, depth=0):
        if depth > _MAX_DEPTH:
            raise Unkeyable("too deep")
        if x is None or isinstance(x, bool | int | str | bytes):
            return (type(x).__name__, repr(x))
        if isinstance(x, float):
            return ("float", x.hex())
        if isinstance(x, complex):
            return ("complex", x.real.hex(), x.imag.hex())
        if isinstance(x, np.dtype):
            return ("dtype", x.str)
        if isinstance(x, fractions.Fraction):  # clock periods and offsets (exact)
            return ("fraction", repr(x.numerator), repr(x.denominator))
        if isinstance(x, np.generic):
            return ("np", x.dtype.str, x.tobytes().hex())
        if isinstance(x, np.ndarray):
            if x.dtype == object:
                raise Unkeyable("object array")
            digest = hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()
            return ("ndarray", x.dtype.str, x.shape, digest)
        if isinstance(x, jax.Array):
            raise Unkeyable("a JAX array outside the array arguments (a constant of the program)")
        if id(x) in self._active:
            raise Unkeyable("a cycle")
        self._active.add(id(x))
        try:
            return self._compound(x, depth + 1)
        finally:
            self._active.discard(id(x))

    def _compound(self, x, depth):
        t = self.token
        if isinstance(x, tuple | list) and type(x) in (tuple, list):
            return (type(x).__name__, tuple(t(e, depth) for e in x))
        if type(x) is dict:
            items = sorted(((t(k, depth), t(v, depth)) for k, v in x.items()), key=repr)
            return ("dict", tuple(items))
        if type(x) in (set, frozenset):
            return ("set", tuple(sorted((t(e, depth) for e in x), key=repr)))
        if isinstance(x, type):
            return self.ref(x)
        if isinstance(x, types.FunctionType):
            return self._function(x, depth)
        if isinstance(x, types.BuiltinFunctionType | np.ufunc):
            return ("builtin", *self.ref(x))
        if isinstance(x, types.MethodType):
            return ("method", t(x.__self__, depth), t(x.__func__, depth))
        if type(x) is functools.partial:
            return ("partial", t(x.func, depth), t(tuple(x.args), depth), t(x.keywords, depth))
        if isinstance(x, jax.tree_util.PyTreeDef):
            return self.treedef(x, depth)
        cls = type(x)
        leaves, treedef = jax.tree_util.tree_flatten(x)
        if treedef.num_nodes > 1 or (leaves and leaves[0] is not x):
            # A pytree (an equinox module, a registered node): its structure and its leaves.
            return ("tree", self.treedef(treedef, depth), tuple(t(e, depth) for e in leaves))
        if isinstance(x, enum.Enum):
            return ("enum", self.ref(cls), x.name)
        if dataclasses.is_dataclass(x):
            fields = tuple((f.name, t(getattr(x, f.name), depth)) for f in dataclasses.fields(x))
            return ("dataclass", self.ref(cls), fields)
        # Any other object of a trusted package: by its attributes (a sentinel has none).
        ref = self.ref(cls)
        if getattr(cls, "__slots__", ()):
            raise Unkeyable(f"{cls.__name__} keeps its state in slots")
        return ("object", ref, t(dict(getattr(x, "__dict__", {})), depth))

    def _function(self, f, depth):
        code = f.__code__
        head = (
            "function",
            self.ref(f),
            code.co_firstlineno,
            hashlib.sha256(code.co_code).hexdigest(),
        )
        cells = tuple(self.token(c.cell_contents, depth) for c in (f.__closure__ or ()))
        defaults = self.token(tuple(f.__defaults__ or ()), depth)
        kwdefaults = self.token(dict(f.__kwdefaults__ or {}), depth)
        return (*head, cells, defaults, kwdefaults)

    def treedef(self, treedef, depth):
        if depth > _MAX_DEPTH:
            raise Unkeyable("too deep")
        data = treedef.node_data()
        if data is None:
            return ("*",)
        node_type, aux = data
        children = tuple(self.treedef(c, depth + 1) for c in treedef.children())
        return ("node", self.ref(node_type), self.token(aux, depth + 1), children)


def _package_hash(top: str) -> str:
    """A hash of the source files of package `top` (its version for JAX, NumPy and the standard
    library). A file written after jaxsim was imported refuses the key: the process may run older
    code than the file holds (an edit in a running session), so its programs cannot be keyed by
    the file."""
    if top in _STDLIB:
        return "python " + sys.version
    if top in _BY_VERSION:
        return importlib.metadata.version(_BY_VERSION[top])
    module = sys.modules.get(top)
    paths = getattr(module, "__path__", None)
    if not paths:
        raise Unkeyable(f"no source folder for {top}")
    files = []
    for folder in paths:
        for path in sorted(Path(folder).rglob("*.py")):
            stat = path.stat()
            files.append((folder, path, stat.st_size, stat.st_mtime_ns))
    from ._cache import IMPORTED_AT_NS

    if any(mtime > IMPORTED_AT_NS for *_, mtime in files):
        raise Unkeyable(f"a source file of {top} changed after jaxsim was imported")
    signature = tuple((str(path), size, mtime) for _, path, size, mtime in files)
    cached = _source_hashes.get(top)
    if cached is not None and cached[0] == signature:
        return cached[1]
    digest = hashlib.sha256()
    for folder, path, _, _ in files:
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(path.read_bytes())
    _source_hashes[top] = (signature, digest.hexdigest())
    return _source_hashes[top][1]


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return hashlib.sha256(line.encode()).hexdigest()
    except OSError:
        pass
    return platform.processor()


def _environment(options) -> tuple:
    device = jax.devices()[0]
    settings = tuple((name, repr(getattr(jax.config, name, None))) for name in _JAX_SETTINGS)
    return (
        _FORMAT,
        sys.version,
        jax.__version__,
        importlib.metadata.version("jaxlib"),
        np.__version__,
        platform.machine(),
        _cpu_flags(),
        device.platform,
        device.client.platform_version,
        device.device_kind,
        tuple(sorted((k, repr(v)) for k, v in options.items())),
        os.environ.get("XLA_FLAGS", ""),
        os.environ.get("EQX_ON_ERROR", ""),
        settings,
    )


_structures: dict = {}  # treedef -> whether its node types and static data can be keyed


def keyable_structure(tree) -> bool:
    """Whether the structure of `tree` (its pytree node types and their static data: equinox
    modules' static fields, functions) can be written into a key, i.e. whether a program over it
    can be stored (the other parts of a key permitting). Cheap: remembered per structure."""
    treedef = jax.tree_util.tree_structure(tree)
    try:
        known = _structures.get(treedef)
    except TypeError:  # unhashable static data
        return False
    if known is None:
        try:
            _Keyer().treedef(treedef, 0)
            known = True
        except Unkeyable:
            known = False
        if len(_structures) >= _MAX_MEMORY_ENTRIES:
            _structures.pop(next(iter(_structures)))
        _structures[treedef] = known
    if not known:
        return False
    # Leaves that are neither arrays nor numbers (functions, objects) are keyed by value.
    plain = (jax.Array, np.ndarray, np.generic, bool, int, float, complex, type(None))
    try:
        for leaf in jax.tree_util.tree_leaves(tree):
            if not isinstance(leaf, plain):
                _Keyer().token(leaf)
    except Unkeyable:
        return False
    return True


def program_key(fun, options, static, avals) -> str:
    """The text of the key of `fun`'s program for these arguments (module docstring); raises
    `Unkeyable` when a part of it cannot be written reliably."""
    keyer = _Keyer()
    parts = (
        keyer.token(fun),
        keyer.token(static),
        tuple(avals),
        _environment(options),
    )
    keyer.packages.add("jaxsim")
    sources = tuple((top, _package_hash(top)) for top in sorted(keyer.packages))
    return repr((parts, sources))


# --- files ---------------------------------------------------------------------------------------


def _path(folder: Path, key: str) -> Path:
    return folder / (hashlib.sha256(key.encode()).hexdigest() + ".bin")


def _progress_function(callback):
    """The `jaxsim._progress` host function a compiled program's host callback calls, or None.

    `jax.debug.callback(f, ...)` reaches the executable as closures around `f` (JAX's flattening,
    lowering and result checks); `f` is found among their closed-over functions.
    """
    from ._progress import HOST_FUNCTIONS

    seen, todo = set(), [callback]
    while todo and len(seen) < 32:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if any(f is g for g in HOST_FUNCTIONS.values()):
            return f
        for cell in getattr(f, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if callable(value):
                todo.append(value)
    return None


def _reconnected(name):
    # What the runtime calls for a stored progress report: its operands as numpy arrays, and no
    # results (the contract of `jax.debug.callback`'s host callbacks).
    from ._progress import HOST_FUNCTIONS

    host = HOST_FUNCTIONS[name]

    def callback(*operands):
        host(*operands)
        return ()

    return callback


def _serialize(compiled):
    """`(payload, in_tree, out_tree, progress)`: as `jax.experimental.serialize_executable`, with
    the program's progress callbacks (`progress`: their host functions' names) left out."""
    from jax.experimental import serialize_executable

    unloaded = compiled._executable._unloaded_executable
    callbacks = list(getattr(unloaded, "host_callbacks", ()) or ())
    if not callbacks:
        return (*serialize_executable.serialize(compiled), ())
    names = tuple(_progress_function(cb).__name__ for cb in callbacks)
    bare = dataclasses.replace(unloaded, host_callbacks=[], keepalive=[])
    args_flat, in_tree = jax.tree_util.tree_flatten(compiled.args_info)
    with io.BytesIO() as buf:
        serialize_executable._JaxPjrtPickler(buf).dump((bare, args_flat, compiled._no_kwargs))
        return buf.getvalue(), in_tree, compiled.out_tree, names


def _deserialize(payload, in_tree, out_tree, progress):
    from jax.experimental import serialize_executable

    if not progress:
        return serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
    callbacks = [_reconnected(name) for name in progress]
    backend = jax.devices()[0].client

    class Unpickler(serialize_executable._JaxPjrtUnpickler):
        def persistent_load(self, pid):
            if pid[0] == "exec":
                return self.backend.deserialize_executable(
                    pid[1], executable_devices=self.execution_devices, host_callbacks=callbacks
                )
            return super().persistent_load(pid)

    bare, args_flat, no_kwargs = Unpickler(io.BytesIO(payload), backend).load()
    unloaded = dataclasses.replace(bare, host_callbacks=callbacks, keepalive=callbacks)
    args_info = jax.tree_util.tree_unflatten(in_tree, args_flat)
    return jax.stages.Compiled(unloaded.load(), [], args_info, out_tree, no_kwargs=no_kwargs)


def _load(path: Path, key: str):
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    try:
        stored_key, payload, in_tree, out_tree, skeleton, progress = pickle.loads(blob)
        if stored_key != key:
            return None
        compiled = _deserialize(payload, in_tree, out_tree, progress)
        return _Entry(compiled, skeleton, verified=False, path=path)
    except Exception as err:  # noqa: BLE001 - a damaged or foreign file: compile again
        logger.debug("jaxsim: ignoring cached program %s (%s: %s)", path, type(err).__name__, err)
        return None


def _store(path: Path, key: str, compiled, skeleton) -> None:
    try:
        payload, in_tree, out_tree, progress = _serialize(compiled)
        with io.BytesIO() as buf:
            pickle.dump((key, payload, in_tree, out_tree, skeleton, progress), buf, protocol=5)
            blob = buf.getvalue()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, path)
        _prune(path.parent)
    except Exception as err:  # noqa: BLE001 - not serializable, read-only folder: not stored
        logger.debug("jaxsim: program not stored (%s: %s)", type(err).__name__, err)


def _prune(folder: Path) -> None:
    # Keep the `MAX_PROGRAMS` most recently written programs (each source edit keys new ones).
    files = sorted(folder.glob("*.bin"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[MAX_PROGRAMS:]:
        try:
            old.unlink()
        except OSError:
            pass


# --- the call ------------------------------------------------------------------------------------


_ARRAYS = (jax.Array, np.ndarray, np.generic)  # what `equinox.is_array` traces


def _aval(x) -> tuple:
    # In-process: cheap and hashable (the sharding object itself).
    if isinstance(x, jax.Array):
        return (x.shape, x.dtype, getattr(x, "weak_type", False), x.sharding)
    return (np.shape(x), np.result_type(x), False, None)


def _disk_aval(aval, device) -> tuple:
    shape, dtype, weak, sharding = aval
    if sharding is not None and sharding.device_set != {device}:
        raise Unkeyable("an array on another device or sharded")
    if jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
        raise Unkeyable("an array of an extended dtype (PRNG keys)")
    return (tuple(shape), np.dtype(dtype).str, bool(weak))


_hits = threading.local()


def _count_hit(event, **kwargs):
    if event == "/jax/compilation_cache/cache_hits":
        _hits.n = getattr(_hits, "n", 0) + 1


jax.monitoring.register_event_listener(_count_hit)


def _compile_fresh(lowered):
    """`(lowered.compile(), storable)`: compiled by XLA in this process, without JAX's persistent
    compilation cache.

    An executable compiled in a process that already holds the same program loaded from a file
    does not serialize completely (its file loads, then fails to run with "Function ... not
    found"). JAX's cache is therefore kept out of these compiles (its folder is unset for the
    duration; this cache stores the program itself), and a program that came from it anyway is
    used in this process only (`storable` False).
    """
    folder = jax.config.jax_compilation_cache_dir
    before = getattr(_hits, "n", 0)
    if not folder:
        return lowered.compile(), True
    from jax.experimental.compilation_cache import compilation_cache

    with _lock:
        jax.config.update("jax_compilation_cache_dir", None)
        compilation_cache.reset_cache()
        try:
            compiled = lowered.compile()
        finally:
            jax.config.update("jax_compilation_cache_dir", folder)
            compilation_cache.reset_cache()
    return compiled, getattr(_hits, "n", 0) == before


def _compile(fun, options, treedef, template, positions, leaves, *, for_disk=True):
    """Trace, lower and compile `fun` on its array arguments `leaves` (at `positions` of the
    flattened arguments `template`); returns `(compiled, skeleton, storable)`, or None when the
    program has host callbacks other than jaxsim's progress reports (not serializable; and
    equinox's `filter_jit` must run such a program to report an in-program error in its own
    words). Without `for_disk` the program is
    for this process only (`storable` False) and JAX's persistent cache may serve its compile."""
    out_parts = {}

    def flat(*dyn):
        full = list(template)
        for k, x in zip(positions, dyn, strict=True):
            full[k] = x
        args, kwargs = jax.tree_util.tree_unflatten(treedef, full)
        out = fun(*args, **kwargs)
        out_dyn, out_static = eqx.partition(out, eqx.is_array)
        out_leaves, out_def = jax.tree_util.tree_flatten(out_dyn)
        out_parts.update(treedef=out_def, static=out_static, n=len(out_leaves))
        return out_leaves

    flat.__name__ = getattr(fun, "__name__", "program")
    flat.__qualname__ = getattr(fun, "__qualname__", flat.__name__)
    lowered = jax.jit(flat, compiler_options=options or None).lower(*leaves)
    compile_args = getattr(getattr(lowered, "_lowering", None), "compile_args", None)
    if not isinstance(compile_args, dict) or "host_callbacks" not in compile_args:
        return None  # a JAX that hides them
    if any(_progress_function(cb) is None for cb in compile_args["host_callbacks"]):
        return None  # host callbacks other than progress reports
    if for_disk:
        compiled, storable = _compile_fresh(lowered)
    else:
        compiled, storable = lowered.compile(), False
    markers = jax.tree_util.tree_unflatten(
        out_parts["treedef"], [_Leaf(k) for k in range(out_parts["n"])]
    )
    skeleton = eqx.combine(markers, out_parts["static"], is_leaf=lambda x: isinstance(x, _Leaf))
    return compiled, skeleton, storable


def call(fun, options: dict, args: tuple, kwargs: dict):
    """Run `fun(*args, **kwargs)` from a program held in this process or stored in the cache
    folder, or return `UNCACHED` (then the caller runs its usual jit). Top-level calls only (no
    trace active).

    Every program is held in this process under its static parts and array shapes, like
    `jax.jit`'s own cache, so a repeated call runs the executable directly (no per-call
    filtering of the arguments by equinox: about 0.3 ms less per call). The plain fixed-step and
    adaptive drivers (`IN_PROCESS`) are held in this process also when their program cannot be
    keyed on disk (`Unkeyable`, e.g. a user's model class) or the cache folder is off. Programs
    with host callbacks, and other unkeyable functions, go the usual way."""
    from ._cache import program_dir

    if jax.config.jax_disable_jit:
        return UNCACHED
    folder = program_dir()
    template, treedef = jax.tree_util.tree_flatten((args, kwargs))
    positions = tuple(k for k, x in enumerate(template) if isinstance(x, _ARRAYS))
    leaves = [template[k] for k in positions]
    for k in positions:
        template[k] = None
    try:
        avals = tuple(_aval(x) for x in leaves)
        memo_key = (fun, tuple(sorted(options.items())), folder, treedef, positions,
                    tuple(template), avals)  # fmt: skip
        entry = _memory.get(memo_key, UNCACHED)
    except TypeError:  # an unhashable static value
        return UNCACHED
    if entry is UNCACHED:
        entry = _prepare(fun, options, treedef, template, positions, leaves, avals, folder)
        with _lock:
            if len(_memory) >= _MAX_MEMORY_ENTRIES:
                _memory.pop(next(iter(_memory)))
            _memory[memo_key] = entry
    if entry is None:
        return UNCACHED
    try:
        return entry.run(leaves)
    except _Broken:
        with _lock:
            _memory[memo_key] = None
        return UNCACHED


def _prepare(fun, options, treedef, template, positions, leaves, avals, folder):
    key = None
    if folder is not None:
        try:
            device = jax.devices()[0]
            disk_avals = tuple(_disk_aval(a, device) for a in avals)
            key = program_key(fun, options, (treedef, positions, tuple(template)), disk_avals)
        except Unkeyable as why:
            logger.debug("jaxsim: program not stored (%s)", why)
    if key is not None:
        path = _path(folder, key)
        entry = _load(path, key) if path.exists() else None
        if entry is not None:
            return entry
    elif fun not in IN_PROCESS:
        # Finding out here that a program has host callbacks would trace it twice: a user's
        # function (`jaxsim.jit`) usually holds simulations whose error checks are callbacks,
        # and so do the hybrid and SDE drivers (diffrax's and optimistix's own checks).
        return None
    made = _compile(fun, options, treedef, template, positions, leaves, for_disk=key is not None)
    if made is None:
        return None
    compiled, skeleton, storable = made
    if storable:  # only a program compiled for the disk (`for_disk`) is storable
        _store(path, key, compiled, skeleton)
    return _Entry(compiled, skeleton, verified=True)
