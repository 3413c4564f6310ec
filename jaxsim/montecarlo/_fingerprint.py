"""What a campaign member computes: the *fingerprint* that a resumed campaign must match.

The fingerprint of a member function is the sha256 of its traced program (jaxpr text without
memory addresses), of the program's constants (closed-over arrays, e.g. a hub mass), and of the
Python callbacks the program calls on the host (`jax.pure_callback`, `jax.experimental.io_callback`,
`jax.debug.callback`, at any depth): a callback's code, default arguments, and the values it closes
over or reads as module globals, following the functions it calls from user code. Numbers,
strings, bytes, tuples of them and arrays count by value; mutable containers (lists, dicts, sets:
state a callback accumulates, such as a log) and other objects count by their type only; functions
of installed libraries (jax, numpy, ...) count by their qualified name. With the names, shapes and
dtypes of the parameters and outputs, it decides whether `run_campaign` may resume a folder; the
differences are listed when it may not (`_differences`).
"""

import difflib
import functools
import hashlib
import inspect
import re
import sys
import types

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jax.extend import core as jex_core

from ._records import _SEP, _finite, _flatten, _normalize, _result_code
from ._store import _sha


# Constants of the traced program up to this many elements are written out in the manifest, so
# that a refused resume shows their old and new values (larger ones by their sha256 only).
_CONST_SHOWN = 16


_DIFF_LINES = 8  # changed lines of the traced program quoted in a refusal


# Memory addresses printed in a traced program (callbacks, functions) change from run to run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


# The primitives of host callbacks: their `callback` parameter is the Python function called.
_CALLBACK_PRIMITIVES = ("pure_callback", "io_callback", "debug_callback")
# Functions from these top-level packages (and the standard library) count by their name: their
# code is not the user's, and changes with the installed version only.
_LIBRARIES = frozenset(
    {"jax", "jaxlib", "numpy", "scipy", "equinox", "diffrax", "optimistix", "lineax", "jaxtyping"}
    | {"jaxsim", "effectors", "builtins"}
    | set(sys.stdlib_module_names)
)
_FUNCTIONS = (
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    functools.partial,
)
_MAX_DEPTH = 12  # functions followed from a callback (calls of calls ...)


def _sub_jaxprs(value):
    if isinstance(value, jex_core.ClosedJaxpr):
        yield value.jaxpr
    elif isinstance(value, jex_core.Jaxpr):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _sub_jaxprs(v)


def _host_callbacks(jaxpr) -> list:
    """The Python functions of the host callbacks of `jaxpr` and its sub-programs (loop bodies,
    branches, ...), in program order."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _CALLBACK_PRIMITIVES and "callback" in eqn.params:
            found.append(eqn.params["callback"])
        for value in eqn.params.values():
            for sub in _sub_jaxprs(value):
                found.extend(_host_callbacks(sub))
    return found


def _is_library(fn) -> bool:
    module = getattr(fn, "__module__", None) or ""
    return module.split(".")[0] in _LIBRARIES


# jaxsim's and effectors' own functions and classes count by their package and qualified name, not
# by the private module that defines them: moving code between private modules (as the stage folders
# of the engine did) must not make a stored campaign refuse to resume.
_OWN = frozenset({"jaxsim", "effectors"})


def _where(module: str | None) -> str:
    """The module part of a library name in the fingerprint: the top-level package for jaxsim's and
    effectors' own objects (path-independent), the module itself for any other."""
    module = module or ""
    top = module.split(".")[0]
    return top if top in _OWN else module


class _Digest:
    """sha256 of a callback by the rule of the module docstring; `names` collects the user
    functions it reached (shown when a resume is refused)."""

    def __init__(self):
        self.h = hashlib.sha256()
        self.seen: set = set()
        self.names: list = []

    def put(self, *parts):
        for part in parts:
            self.h.update(repr(part).encode())
            self.h.update(b"\0")

    def value(self, v, depth: int) -> None:
        if v is None or isinstance(v, bool | int | float | complex | str | bytes):
            self.put(type(v).__name__, v)
        elif isinstance(v, tuple | frozenset):
            self.put(type(v).__name__, len(v))
            for item in sorted(v, key=repr) if isinstance(v, frozenset) else v:
                self.value(item, depth)
        elif isinstance(v, np.ndarray | np.generic | jax.Array):
            try:
                self.put("array", _sha(np.asarray(_const_bytes(v))))
            except (jax.errors.JAXTypeError, jax.errors.UnexpectedTracerError):  # a tracer
                self.put("traced", tuple(v.shape), str(v.dtype))
        elif isinstance(v, types.ModuleType):
            self.put("module", _where(v.__name__))
        elif isinstance(v, type):
            self.put("type", _where(v.__module__), v.__qualname__)
        elif isinstance(v, list | dict | set | bytearray):  # mutable state: its type
            self.put("object", _where(type(v).__module__), type(v).__qualname__)
        elif isinstance(v, _FUNCTIONS):
            self.function(v, depth)
        elif _is_pytree(v):  # equinox modules and other registered pytrees: structure and leaves
            leaves, treedef = jax.tree_util.tree_flatten(v)
            self.put("pytree", _ADDRESS.sub("", str(treedef)))
            for leaf in leaves:
                self.value(leaf, depth + 1)
        elif callable(v):
            self.function(v, depth)
        else:  # mutable containers and other objects: their type
            self.put("object", _where(type(v).__module__), type(v).__qualname__)

    def function(self, fn, depth: int) -> None:
        if depth > _MAX_DEPTH or id(fn) in self.seen:
            self.put("seen", getattr(fn, "__qualname__", type(fn).__qualname__))
            return
        self.seen.add(id(fn))
        if isinstance(fn, functools.partial):
            self.put("partial")
            self.function(fn.func, depth + 1)
            self.value(tuple(fn.args), depth + 1)
            self.value(tuple(sorted(fn.keywords.items())), depth + 1)
            return
        if inspect.ismethod(fn):
            self.put("method")
            self.function(fn.__func__, depth + 1)
            self.value(fn.__self__, depth + 1)
            return
        inner = getattr(fn, "callback_func", None) or getattr(fn, "__wrapped__", None)
        if inner is not None and callable(inner):  # jax's flattening wrappers, decorators
            self.function(inner, depth)
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType):  # builtins, ufuncs, callable objects
            name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
            self.put("callable", _where(type(fn).__module__), type(fn).__qualname__, name)
            return
        library = _is_library(fn)
        if library:
            self.put("library", _where(fn.__module__), fn.__qualname__)
        else:
            self.names.append(f"{fn.__module__}.{fn.__qualname__}")
            self.code(code)
            self.value(fn.__defaults__, depth + 1)
            self.value(tuple(sorted((fn.__kwdefaults__ or {}).items())), depth + 1)
            globals_ = fn.__globals__
            for name in _global_names(code):
                if name in globals_:
                    self.put("global", name)
                    self.value(globals_[name], depth + 1)
        # Closed-over values (of library wrappers too: jax's debug callback closes over the
        # user's function).
        for cell in fn.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if library and not callable(contents):
                continue
            self.value(contents, depth + 1)

    def code(self, code: types.CodeType) -> None:
        self.put("code", code.co_code, code.co_names, code.co_varnames, code.co_freevars)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const)
            else:
                self.value(const, 0)


def _is_pytree(v) -> bool:
    treedef = jax.tree_util.tree_structure(v)
    return not jax.tree_util.treedef_is_leaf(treedef)


def _global_names(code: types.CodeType) -> list:
    """Names a code object (and its nested code objects) reads that may be module globals."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_global_names(const))
    return sorted(set(names))


def _callbacks(jaxpr) -> list[dict]:
    """`[{"names", "sha256"}]` of the host callbacks of the traced program (`_Digest`)."""
    out = []
    for cb in _host_callbacks(jaxpr):
        digest = _Digest()
        digest.function(cb, 0)
        out.append({"names": digest.names, "sha256": digest.h.hexdigest()})
    return out


def _example(source):
    """Shapes and dtypes of one member's parameters (no values: the fingerprint does not depend
    on the key or the parameter values, which the source digest covers)."""
    if source.disp is not None:
        return jax.eval_shape(source.disp.sample_member, source.key, 0)
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), source.params)


def _const_bytes(c) -> np.ndarray:
    if isinstance(c, jax.Array) and jnp.issubdtype(c.dtype, jax.dtypes.prng_key):
        return np.asarray(jr.key_data(c))
    return np.asarray(c)


def _fingerprint(fn, source) -> tuple[dict, str, list]:
    """`({"program", "consts", "structure"[, "callbacks"]}, program text, [(path, RunInfo)])` of
    one member of `fn` (the last: the schema metadata of the `Solution`s in its outputs).
    `callbacks` (only when the program has host callbacks: a program without any is fingerprinted
    by its program text, constants and structure alone) are the digests of `_callbacks`;
    they enter the `program` digest too."""

    infos: list = []  # the `Solution.info`s of the outputs: `(path, RunInfo)`

    def member(params):  # the member of the compiled chunk program (batch._compile)
        results: list = []
        out = _normalize(fn(params), results, infos)
        return _normalize(params, []), out, _result_code(results), _finite(out)

    closed, shapes = jax.make_jaxpr(member, return_shape=True)(_example(source))
    # Without colors (in IPython, str() colors the text), so that a script and a notebook agree.
    text = _ADDRESS.sub("", _ANSI.sub("", closed.jaxpr.pretty_print(use_color=False)))
    h = hashlib.sha256(text.encode())
    consts = []
    for c in closed.consts:
        arr = _const_bytes(c)
        entry = {"shape": list(arr.shape), "dtype": str(arr.dtype), "sha256": _sha(arr)}
        if arr.size <= _CONST_SHOWN and arr.dtype.kind in "biuf":
            entry["value"] = arr.tolist()
        consts.append(entry)
        h.update(entry["sha256"].encode())
    callbacks = _callbacks(closed.jaxpr)
    for entry in callbacks:
        h.update(entry["sha256"].encode())
    params_shape, out_shape, _, _ = shapes
    flat = {**_flatten(params_shape, "params"), **_flatten(out_shape, "outputs")}
    structure = {name: [list(s.shape), str(s.dtype)] for name, s in flat.items()}
    fingerprint = {"program": h.hexdigest(), "consts": consts, "structure": structure}
    if callbacks:
        fingerprint["callbacks"] = callbacks
    return fingerprint, text, infos


def _callback_differences(disk: list, wanted: list) -> list[str]:
    """Lines naming the host callbacks whose code or values changed (`_Digest`)."""
    if len(disk) != len(wanted):
        return [f"host callbacks: {len(disk)} on disk, {len(wanted)} requested"]
    lines = []
    for i, (a, b) in enumerate(zip(disk, wanted, strict=True)):
        if a["sha256"] != b["sha256"]:
            names = ", ".join(b["names"]) or "a library function"
            lines.append(
                f"host callback #{i} ({names}): its code or the values it uses changed "
                f"(sha256 {a['sha256'][:12]}... on disk, {b['sha256'][:12]}... requested)"
            )
    return lines


def _outputs_tree(fingerprint: dict) -> dict:
    """`{key: None}` of the output keys (as `summarize` returns them) of a fingerprint."""
    start = "outputs" + _SEP
    return {p[len(start) :]: None for p in fingerprint["structure"] if p.startswith(start)}


def _fmt(entry) -> str:
    shape, dtype = entry
    return f"{dtype}{tuple(shape)}"


def _const_text(entry: dict) -> str:
    value = entry.get("value")
    return repr(value) if value is not None else f"sha256 {entry['sha256'][:12]}..."


def _differences(disk: dict, wanted: dict, disk_text: str | None, text: str) -> list[str]:
    """Readable lines of what differs between the manifest on disk and the requested campaign."""
    lines = [
        f"{name}: on disk {disk.get(name)!r}, requested {wanted[name]!r}"
        for name in ("n", "chunk_size", "n_chunks", "source", "digest", "config")
        if disk.get(name) != wanted[name]
    ]
    fd, fw = disk.get("fingerprint") or {}, wanted["fingerprint"]
    sd, sw = fd.get("structure") or {}, fw["structure"]
    for path in sorted(set(sd) | set(sw)):
        if path not in sd:
            lines.append(f"{path}: not on disk, requested {_fmt(sw[path])}")
        elif path not in sw:
            lines.append(f"{path}: on disk {_fmt(sd[path])}, no longer computed")
        elif sd[path] != sw[path]:
            lines.append(f"{path}: on disk {_fmt(sd[path])}, requested {_fmt(sw[path])}")
    if fd.get("program") != fw["program"]:
        cd, cw = fd.get("consts") or [], fw["consts"]
        if len(cd) == len(cw):  # the same constants, some with other values
            for i, (a, b) in enumerate(zip(cd, cw)):
                if a != b:
                    what = f"{b['dtype']}{tuple(b['shape'])}"
                    lines.append(
                        f"program constant #{i} {what}: on disk {_const_text(a)}, requested "
                        f"{_const_text(b)}"
                    )
        else:
            lines.append(f"program constants: {len(cd)} on disk, {len(cw)} requested")
            for tag, ours, theirs in (("on disk only", cd, cw), ("requested only", cw, cd)):
                for c in ours:
                    if c not in theirs:
                        what = f"{c['dtype']}{tuple(c['shape'])}"
                        lines.append(f"program constant {what} {tag}: {_const_text(c)}")
        lines.extend(_callback_differences(fd.get("callbacks") or [], fw.get("callbacks") or []))
        if disk_text is not None and disk_text != text:
            changed = [
                line
                for line in difflib.unified_diff(
                    disk_text.splitlines(), text.splitlines(), lineterm="", n=0
                )
                if line[:1] in "+-" and not line.startswith(("+++", "---"))
            ]
            shown = "\n      ".join(line[:160] for line in changed[:_DIFF_LINES])
            more = (
                f"\n      ... ({len(changed) - _DIFF_LINES} more)"
                if len(changed) > _DIFF_LINES
                else ""
            )
            lines.append(
                f"program: the member function's traced program differs ({len(changed)} changed "
                f"lines, '-' on disk, '+' requested):\n      {shown}{more}"
            )
        elif not any(line.startswith(("program", "host callback")) for line in lines):
            lines.append("program: the member function's traced program differs")
    return lines
